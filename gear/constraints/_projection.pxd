# cython: language_level=3
"""The projection route of the closed-loop kernels: constrained forward
and hybrid dynamics by reduced-coordinate projection onto the null space
of ``A`` (``closed_forward_projection``; Featherstone, Rigid Body
Dynamics Algorithms, Sec. 3.7; Ruan, Articulated rigid body systems,
Sec. 4), the native twin of ``gear.solvers.ProjectionSolver``.

``A^T P = Q R`` by Householder QR with column pivoting (``qr_pivoted``,
``qr_form_q``), the rank where ``|R_kk| <= rcond |R_00|``; the
minimum-norm particular solution of ``A ddq = -dA dq`` from ``R_1``; the
dynamics on the null-space basis ``G = Q[:, r:]``, ``G^T M G`` by
Cholesky; and the minimum-norm ``lam`` with ``A^T lam = M ddq + b - tau``
(``qr_min_norm``, also used by closed inverse dynamics, ``_inverse.pxd``).
Hybrid dynamics (Kim, Lie Group Formulation of Articulated Rigid Body
Dynamics, eqs. 70-77) project on the free dofs and finish with the
prescribed joints' torques (``projection_finish``).
"""
from libc.math cimport sqrt
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._rnea cimport rnea
from gear.algorithms._common cimport forward_pass
from gear.algorithms._crba cimport crba_after_fk
from gear.algorithms._dense cimport chol_factor, chol_solve, dot
from gear.constraints._cwork cimport ST_MASS_NOT_PD, ROWS_POSE, ROWS_BIAS, ROWS_ALL, ClosC, CWork
from gear.constraints._rows cimport world_rows, dense_rows


cdef inline void chol_mul(const double* L, int n, const double* x, double* y,
                          double* out) noexcept nogil:
    """out = L L^T x for the factor L (lower triangle of the row-major n x n
    array) left by ``chol_factor``; ``y`` is scratch (n,)."""
    cdef int i, k
    cdef double t
    for i in range(n):
        t = 0.0
        for k in range(i, n):
            t += L[k * n + i] * x[k]
        y[i] = t
    for i in range(n):
        t = 0.0
        for k in range(i + 1):
            t += L[i * n + k] * y[k]
        out[i] = t


cdef inline int qr_pivoted(double* X, int n, int nr, double rcond, double* perm,
                           double* hb) noexcept nogil:
    """Householder QR with column pivoting, in place, of the n x nr matrix
    whose column j is ``X[j n : (j + 1) n]`` (for the projection route:
    ``A^T``, one row of A per column): ``X P = Q R``, stopping at the rank r
    (the first pivot column with norm ``<= rcond`` times the first).  After
    it ``R_ij = X[j n + i]`` (i <= j), reflector k's vector lies below R in
    column k (its coefficient in ``hb[k]``), and ``perm[k]`` (as doubles) is
    the column moved to position k.  Returns r."""
    cdef int i, j, k, p, rank
    cdef int kmax = n if n < nr else nr
    cdef double t, nrm, amax, alpha, u0, tk
    cdef double* Xk
    cdef double* Xj
    for j in range(nr):
        perm[j] = j
    rank = 0
    amax = 0.0
    for k in range(kmax):
        p = -1
        nrm = 0.0
        for j in range(k, nr):
            Xj = X + j * n
            t = 0.0
            for i in range(k, n):
                t += Xj[i] * Xj[i]
            if t > nrm:
                nrm = t
                p = j
        nrm = sqrt(nrm)
        if k == 0:
            amax = nrm
        if p < 0 or not (nrm > rcond * amax):
            break
        Xk = X + k * n
        if p != k:
            Xj = X + p * n
            for i in range(n):
                t = Xk[i]
                Xk[i] = Xj[i]
                Xj[i] = t
            t = perm[k]
            perm[k] = perm[p]
            perm[p] = t
        # H_k = 1 - tk v v^T with v = (1, x[1:] / u0), u0 = x0 - alpha
        alpha = -nrm if Xk[k] >= 0.0 else nrm
        u0 = Xk[k] - alpha
        tk = (alpha - Xk[k]) / alpha
        for i in range(k + 1, n):
            Xk[i] /= u0
        Xk[k] = alpha
        hb[k] = tk
        for j in range(k + 1, nr):
            Xj = X + j * n
            t = Xj[k]
            for i in range(k + 1, n):
                t += Xk[i] * Xj[i]
            t *= tk
            Xj[k] -= t
            for i in range(k + 1, n):
                Xj[i] -= t * Xk[i]
        rank += 1
    return rank


cdef inline void qr_form_q(const double* X, const double* hb, int n, int rank,
                           double* Q) noexcept nogil:
    """``Q = H_0 H_1 ... H_{rank-1}`` (n x n, column j in ``Q[j n :]``) from
    the reflectors ``qr_pivoted`` left in X."""
    cdef int i, j, k
    cdef double t, tk
    cdef const double* Xk
    cdef double* Qj
    # Q = H_0 H_1 ... H_{rank-1}, applied to the identity from the last
    for j in range(n * n):
        Q[j] = 0.0
    for j in range(n):
        Q[j * n + j] = 1.0
    for k in range(rank - 1, -1, -1):
        tk = hb[k]
        Xk = X + k * n
        for j in range(k, n):
            Qj = Q + j * n
            t = Qj[k]
            for i in range(k + 1, n):
                t += Xk[i] * Qj[i]
            t *= tk
            Qj[k] -= t
            for i in range(k + 1, n):
                Qj[i] -= t * Xk[i]


cdef inline int qr_min_norm(const double* X, const double* Q, const double* perm, int n, int nr,
                            int rank, const double* e, double* z, double* K,
                            double* lam) noexcept nogil:
    """The minimum-norm ``lam`` (nr,) with ``A^T lam = e`` (n,) from the QR
    of ``A^T`` (``qr_pivoted``, ``qr_form_q``): ``P^T lam = R_1^T (R_1
    R_1^T)^{-1} Q_1^T e`` with ``R_1`` the first ``rank`` rows of R (the
    minimum-norm solution for the projection of e on the range of A^T
    when e is not in it).  ``z`` (rank,)
    and ``K`` (rank^2) scratch.  Returns 0, or 1 if ``R_1 R_1^T`` is not
    positive definite."""
    cdef int i, j, k
    cdef double t
    cdef const double* Xk
    cdef const double* Xj
    cdef const double* Qj
    for i in range(rank):                               # z = Q_1^T e
        Qj = Q + i * n
        t = 0.0
        for k in range(n):
            t += Qj[k] * e[k]
        z[i] = t
    # K = R_1 R_1^T, one column of R at a time (rank-one updates)
    for i in range(rank * rank):
        K[i] = 0.0
    for k in range(nr):
        Xk = X + k * n
        for i in range(rank if rank < k + 1 else k + 1):
            t = Xk[i]
            for j in range(i + 1):
                K[i * rank + j] += t * Xk[j]
    for i in range(rank):
        for j in range(i):
            K[j * rank + i] = K[i * rank + j]
    if rank > 0:
        if chol_factor(K, rank) != 0:
            return 1
        chol_solve(K, rank, z, 1)
    for j in range(nr):                                 # lam[perm[j]] = (R_1^T z)_j
        Xj = X + j * n
        t = 0.0
        for i in range(rank if rank < j + 1 else j + 1):
            t += Xj[i] * z[i]
        lam[<int> perm[j]] = t
    return 0


cdef inline int projection_finish(const ModelC* m, const ClosC* c, const double* q,
                                  const double* dq, double* ddq, double* tau,
                                  const unsigned char* pres, const double* fext, const double* lam,
                                  const double* out, const double* vmap, int nv, Work* w,
                                  CWork* cw) noexcept nogil:
    """Hybrid dynamics' last step on the projection route: ``ddq_v = out``
    and ``tau_u = (M ddq + b - A^T lam)_u`` from a second RNEA (``cw.tx``)
    and ``A`` (``cw.Ad``, rows by the whole dofs).  Forward dynamics
    (``pres`` NULL): nothing to do (``out`` is ``ddq``)."""
    cdef int i, j, k, nvf = m.nv
    cdef double t
    if pres == NULL:
        return 0
    for j in range(nv):
        ddq[<int> vmap[j]] = out[j]
    rnea(m, q, dq, ddq, fext, True, cw.tx, w)
    for i in range(m.nb):
        if pres[i]:
            for k in range(m.iv[i], m.iv[i] + m.nvi[i]):
                t = cw.tx[k]
                for j in range(c.m):
                    t -= cw.Ad[j * nvf + k] * lam[j]
                tau[k] = t
    return 0


cdef inline int closed_forward_projection(const ModelC* m, const ClosC* c, const double* q,
                                          const double* dq, double* ddq, double* tau,
                                          const unsigned char* pres, const double* fext, double* lam,
                                          double* info, Work* w, CWork* cw) noexcept nogil:
    """Constrained forward dynamics by reduced-coordinate projection (Ruan,
    Articulated rigid body systems, Sec. 4; Featherstone, Sec. 3.7), the
    native twin of ``gear.solvers.ProjectionSolver``:

        A^T P = Q R               Householder QR with column pivoting; rank r
                                  where |R_kk| <= rcond |R_00|
        G = Q[:, r:]              orthonormal basis of the null space of A
        g = Q[:, :r] z,  R_1^T z = -P^T dA dq    (minimum-norm A g = -dA dq)
        ddq = g + G (G^T M G)^{-1} G^T (tau - b - M g)
        A^T lam = M ddq + b - tau, minimum-norm:
                  P^T lam = R_1^T (R_1 R_1^T)^{-1} Q[:, :r]^T (M ddq + b - tau)

    with ``R_1`` the first r rows of R.  Same outputs and status codes as
    :func:`closed_forward_dense` (``info[0]`` is the rank r).

    Hybrid dynamics (``pres`` (nb,) 1 on prescribed joints, or NULL;
    ``ddq`` read on their dofs u and written on the free dofs v, ``tau``
    the other way round, as ``gear.solvers.ProjectionSolver``'s NumPy
    path): the same projection on the free dofs, with

        h = b + M_.u ddq_u        (RNEA with ddq_u)
        M -> M_vv,  A -> A_v,  f = tau_v - h_v,  dA dq -> dA dq + A_u ddq_u

    so that ``lam`` is the minimum-norm solution of ``A_v^T lam = (M ddq
    + b - tau)_v``, and then ``tau_u = (M ddq + b - A^T lam)_u`` from a
    second RNEA with the whole ``ddq`` (KKT eqs. 70-77)."""
    cdef int k, st, nv, rank, nn
    if pres == NULL:
        rnea(m, q, dq, NULL, fext, True, cw.Pv, w)      # f := b(q, dq)
    else:
        free_dofs(m, pres, ddq, cw)
        rnea(m, q, dq, cw.us, fext, True, cw.Pv, w)     # f := h = b + M_.u ddq_u
    st = projection_qphase(m, c, q, pres, w, cw, &nv, &rank, &nn, True)
    if st != 0:
        return st
    return projection_vphase(m, c, q, dq, ddq, tau, pres, fext, lam, info, w, cw, nv, rank, nn, True)


cdef inline int free_dofs(const ModelC* m, const unsigned char* pres, const double* ddq,
                          CWork* cw) noexcept nogil:
    """Hybrid dynamics: the free dofs into ``cw.xs`` (as doubles) and the
    prescribed accelerations into ``cw.us`` (zero on the free dofs);
    returns the number of free dofs."""
    cdef int i, k, nv = 0
    for i in range(m.nb):
        for k in range(m.iv[i], m.iv[i] + m.nvi[i]):
            if pres[i]:
                cw.us[k] = ddq[k]
            else:
                cw.us[k] = 0.0
                cw.xs[nv] = k
                nv += 1
    return nv


cdef inline int projection_qphase(const ModelC* m, const ClosC* c, const double* q,
                                  const unsigned char* pres, Work* w, CWork* cw, int* nv_out,
                                  int* rank_out, int* nn_out, bint after_rnea=False) noexcept nogil:
    """The part of :func:`closed_forward_projection` that depends on ``q``
    alone: ``M`` (for hybrid dynamics ``M_vv``) and its Cholesky factor in
    ``cw.Md``, the rows (``cw.g`` their residual) and ``A`` in ``cw.Ad``,
    ``A^T P = Q R`` (``cw.Bd``, ``cw.Pq``), and ``G^T M G`` factorised
    (``cw.Pr``).  ``nv_out``: the dofs of the projected problem (``nv``, or
    the free ones), ``rank_out``, ``nn_out = nv - rank``.  ``after_rnea``:
    RNEA has run at this ``q`` (the transforms are there)."""
    cdef int i, j, k, st, rank, nn, nr = c.m, nvf = m.nv
    cdef int nv = nvf
    cdef double t
    cdef double* M = cw.Md
    cdef double* A = cw.Ad       # (nr, nvf)
    cdef double* X = cw.Bd       # A^T by columns, then R and the reflectors
    cdef double* Q = cw.Pq       # (nv, nv) by columns
    cdef double* H = cw.Pr       # (nn, nv): column j of L^T G in H[j nv:]
    cdef double* Mr             # (nn, nn) G^T M G
    cdef double* Hj
    cdef double* Qj
    cdef double* hb = cw.Pv + 4 * nvf   # reflector coefficients
    cdef double* vmap = cw.xs    # (hybrid) the free dofs, as doubles
    nv_out[0] = nv
    rank_out[0] = 0
    nn_out[0] = nv
    if pres != NULL:
        nv = 0
        for i in range(m.nb):
            if not pres[i]:
                for k in range(m.iv[i], m.iv[i] + m.nvi[i]):
                    vmap[nv] = k
                    nv += 1
        nv_out[0] = nv
        nn_out[0] = nv
    if not after_rnea:
        forward_pass(m, q, NULL, w, True)               # T, S
    crba_after_fk(m, M, w)                              # (reuses rnea's T and S)
    if pres != NULL:
        # M_vv, packed in place (every entry moves to a lower index)
        for j in range(nv):
            for k in range(nv):
                M[j * nv + k] = M[(<int> vmap[j]) * nvf + <int> vmap[k]]
    if chol_factor(M, nv) != 0:
        return ST_MASS_NOT_PD
    if nr == 0:
        return 0
    # (hybrid: RNEA's dV are not the bias accelerations)
    st = world_rows(m, c, q, w, cw, pres == NULL, ROWS_ALL if after_rnea else ROWS_POSE)
    if st != 0:
        return st
    dense_rows(m, c, w, cw, A, True)
    # -- A^T P = Q R by Householder reflections with column pivoting -----------
    # Column j of A^T (row j of A) is stored contiguously: X[j nv + i] =
    # (A^T)_ij, and so is every column of Q: Q[j nv + i] = Q_ij.  After the
    # loop, R_ij = X[j nv + i] (i <= j) and reflector k's vector lies below
    # it in column k.
    if pres == NULL:
        for j in range(nr * nv):
            X[j] = A[j]
    else:
        for j in range(nr):
            for k in range(nv):
                X[j * nv + k] = A[j * nvf + <int> vmap[k]]
    if cw.hold:
        # rows held dependent (``_psd.pxd``'s psd_factor): zero columns,
        # pivoted last and left out
        for j in range(nr):
            if cw.held[j] != 0.0:
                for k in range(nv):
                    X[j * nv + k] = 0.0
    rank = qr_pivoted(X, nv, nr, c.rcond, cw.piv, hb)
    for j in range(nr):
        cw.rdep[<int> cw.piv[j]] = 0.0 if j < rank else 2.0    # (pivoted: the choice stands)
    nn = nv - rank
    qr_form_q(X, hb, nv, rank, Q)
    rank_out[0] = rank
    nn_out[0] = nn
    if nn > 0:
        # H = L^T G (column j of H contiguous), then G^T M G = H^T H, G = Q[:, rank:]
        Mr = cw.Pr + nv * nv
        for j in range(nn):
            Hj = H + j * nv
            Qj = Q + (rank + j) * nv
            for i in range(nv):
                Hj[i] = 0.0
            for k in range(nv):
                t = Qj[k]
                for i in range(k + 1):
                    Hj[i] += M[k * nv + i] * t
        for i in range(nn):
            for j in range(i + 1):
                t = dot(H + i * nv, H + j * nv, nv)
                Mr[i * nn + j] = t
                Mr[j * nn + i] = t
        if chol_factor(Mr, nn) != 0:
            return ST_MASS_NOT_PD
    return 0


cdef inline int projection_vphase(const ModelC* m, const ClosC* c, const double* q,
                                  const double* dq, double* ddq, double* tau,
                                  const unsigned char* pres, const double* fext, double* lam,
                                  double* info, Work* w, CWork* cw, int nv, int rank, int nn,
                                  bint after_rnea=False, bint residual=True) noexcept nogil:
    """The rest of :func:`closed_forward_projection` after
    :func:`projection_qphase` at the same ``q``: RNEA's bias at ``dq``
    (already in ``cw.Pv`` with ``after_rnea``), the rows' bias, the
    particular solution, the dynamics on the null space and ``lam``.
    ``residual`` False: ``info[1]`` is left at zero."""
    cdef int i, j, k, st, nr = c.m, nvf = m.nv
    cdef double t, acc2
    cdef double* M = cw.Md
    cdef double* A = cw.Ad
    cdef double* X = cw.Bd
    cdef double* Q = cw.Pq
    cdef double* Mr = cw.Pr + nv * nv
    cdef double* Xj
    cdef double* Qj
    cdef double* f = cw.Pv       # tau - b
    cdef double* g = cw.Pv + nv
    cdef double* y = cw.Pv + 2 * nv
    cdef double* e = cw.Pv + 3 * nv
    cdef double* perm = cw.piv
    cdef double* z = cw.tmp
    cdef double* K = cw.K
    cdef double* vmap = cw.xs
    cdef double* out = ddq       # the projected problem's accelerations (hybrid: cw.ts)
    cdef double* rb = cw.bias    # its rows' dA dq (hybrid: + A_u ddq_u in cw.rhs)
    if pres != NULL:
        out = cw.ts
        rb = cw.rhs
    if not after_rnea:
        w.poses_ok = True        # projection_qphase's transforms are those of q
        if pres != NULL:
            free_dofs(m, pres, ddq, cw)
        rnea(m, q, dq, cw.us if pres != NULL else NULL, fext, True, f, w)
    if pres == NULL:
        for i in range(nv):
            f[i] = tau[i] - f[i]
    else:
        # f_v, packed in place
        for j in range(nv):
            f[j] = tau[<int> vmap[j]] - f[<int> vmap[j]]
    info[0] = 0.0
    info[1] = 0.0
    if nr == 0:
        for i in range(nv):
            out[i] = f[i]
        chol_solve(M, nv, out, 1)
        return projection_finish(m, c, q, dq, ddq, tau, pres, fext, lam, out, vmap, nv, w, cw)
    if not after_rnea:
        # the rows' bias at dq (projection_qphase's rows were at zero velocity)
        st = world_rows(m, c, q, w, cw, pres == NULL, ROWS_BIAS)
        if st != 0:
            return st
    if pres != NULL:
        for j in range(nr):
            t = cw.bias[j]
            for k in range(nvf):
                if cw.us[k] != 0.0:
                    t += A[j * nvf + k] * cw.us[k]
            rb[j] = t
    # -- minimum-norm particular solution: R_1^T z = -P^T dA dq, g = Q_1 z -----
    for j in range(rank):
        Xj = X + j * nv
        t = -rb[<int> perm[j]]
        for i in range(j):
            t -= Xj[i] * z[i]
        z[j] = t / Xj[j]
    for i in range(nv):
        g[i] = 0.0
    for j in range(rank):
        Qj = Q + j * nv
        for i in range(nv):
            g[i] += Qj[i] * z[j]
    # e = f - M g  (M holds its Cholesky factor L: M x = L (L^T x))
    chol_mul(M, nv, g, y, e)
    for i in range(nv):
        e[i] = f[i] - e[i]
    # -- ddq = g + G (G^T M G)^{-1} G^T e,  G = Q[:, rank:] ----------------------
    for i in range(nv):
        out[i] = g[i]
    if nn > 0:
        for i in range(nn):
            Qj = Q + (rank + i) * nv
            t = 0.0
            for k in range(nv):
                t += Qj[k] * e[k]
            y[i] = t
        chol_solve(Mr, nn, y, 1)
        for j in range(nn):
            Qj = Q + (rank + j) * nv
            for i in range(nv):
                out[i] += Qj[i] * y[j]
    # -- minimum-norm lam with A^T lam = M ddq + b - tau = M ddq - f -----------
    chol_mul(M, nv, out, y, e)
    for i in range(nv):
        e[i] -= f[i]
    if qr_min_norm(X, Q, perm, nv, nr, rank, e, z, K, lam) != 0:
        return ST_MASS_NOT_PD
    info[0] = rank
    st = projection_finish(m, c, q, dq, ddq, tau, pres, fext, lam, out, vmap, nv, w, cw)
    if not residual:
        return st
    # |A ddq + dA dq|
    acc2 = 0.0
    for i in range(nr):
        t = cw.bias[i]
        for k in range(nvf):
            t += A[i * nvf + k] * ddq[k]
        acc2 += t * t
    info[1] = sqrt(acc2)
    return st

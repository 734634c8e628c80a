# cython: language_level=3
"""Analytic derivatives of closed-chain forward dynamics at one state (Kim,
Lie Group Formulation of Articulated Rigid Body Dynamics, Secs. 3-4); the
NumPy reference is ``gear/constraints/derivatives.py``.

The KKT system ``M ddq - A^T lam = tau - b``, ``A ddq = -dA dq``
differentiated along x in {q (tangent), dq, tau}:

    M X - A^T Y = R1 = [-dRNEA'/dq + J^T dF/dq,  -dRNEA'/d(dq),  I]
    A X         = R2 = [-d(A ddq + dA dq)/dq,  -d(dA dq)/d(dq),  0]

``RNEA'`` is the tree's inverse dynamics with the multipliers' row
wrenches applied as external body wrenches (``F_ext + sum_r lam_r F_r``):
its Table 5 derivative (``rnea_derivatives``) holds ``d(A^T lam)/dq`` for
wrenches fixed in their bodies, and ``J^T dF/dq`` adds how each row's body
wrench turns with the geometry of its two frames.  The acceleration-level
rows ``A ddq + dA dq = d^2 g / dt^2`` are read from the frames' full
accelerations (with ``ddq``), so their derivatives need no derivative of
``A`` itself.  Both come from one tangent pass per direction over the
subtree the direction moves (``gear/constraints/_tangent_passes.pxd``).  The solve: ``K Y = R2 - A M^{-1} R1`` with ``K = A
M^{-1} A^T`` by Cholesky, ``X = M^{-1} (R1 + A^T Y)``.

``closed_inverse_derivatives`` differentiates closed inverse dynamics
(Kim eqs. 56-59) with the same tangent passes and loaded Table 5.

Rows whose diagonal of ``K`` is zero (a planar mechanism's out-of-plane
rows) are left out, with multiplier 0 and multiplier derivative
``d(A y)/dq`` for ``lam = A y`` (the minimum-norm multiplier's derivative;
see the NumPy reference).  If the other rows are still dependent the kernel
returns ``ST_DERIV_REDUNDANT`` and the caller uses the NumPy reference.
"""
from libc.math cimport fabs
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._crba cimport crba_packed
from gear.algorithms._rnea cimport rnea
from gear.algorithms._dense cimport (chol_factor, chol_solve, dot, tree_factor, tree_solve_Lt,
                                     tree_solve_L, tree_solve_Lt_rows, tree_solve_L_rows)
from gear.constraints._cwork cimport ST_MASS_NOT_PD, ST_INEXACT, ClosC, CWork
from gear.constraints._rows cimport world_kinematics, closure_rows, dense_rows, constraint_rows
from gear.constraints._tangent_passes cimport (TanW, tan_size, tan_carve, tan_setup, tan_twists_at_y,
                                               tangent_passes, loaded_tree_derivatives)

cdef enum:
    ST_DERIV_REDUNDANT = -8     # dependent rows that are not zero: use the NumPy reference


cdef inline int deriv_scratch(int nb, int nv, int m, int nk) noexcept nogil:
    """Doubles of scratch :func:`closed_forward_derivatives` and
    :func:`closed_inverse_derivatives` need."""
    return (6 * nv * nv + 4 * m * nv + m + m * m + m * nv + 3 * m * nv + 3 * nv + 3 * m
            + 6 * nb + tan_size(nb, nv, nk) + 8)


cdef inline double _sparse_dot(const double* a, const int* idx, int n, const double* x) noexcept nogil:
    # sum_k a[idx[k]] x[idx[k]] over the listed entries
    cdef double t = 0.0
    cdef int k
    for k in range(n):
        t += a[idx[k]] * x[idx[k]]
    return t


cdef inline void _sparse_axpy(double s, const double* a, const int* idx, int n, double* x) noexcept nogil:
    # x[idx[k]] += s a[idx[k]]
    cdef int k
    if s == 0.0:
        return
    for k in range(n):
        x[idx[k]] += s * a[idx[k]]


cdef inline void _zero_row_multipliers(int nr, int nv, int n3, const double* act, int na,
                                       const double* Zr, double* Y) noexcept nogil:
    """The rows left out (zero): multiplier derivative ``d(A_r y)/dq`` along
    q, zero along dq and tau."""
    cdef int r, a, l
    cdef bint active
    for r in range(nr):
        active = False
        for a in range(na):
            if <int> act[a] == r:
                active = True
                break
        if active:
            continue
        for l in range(nv):
            Y[r * n3 + l] = Zr[r * nv + l]


cdef inline int closed_forward_derivatives(const ModelC* m, const ClosC* c, int nk, const double* q,
                                           const double* dq, const double* tau, const double* fext,
                                           double rcond, double* ddq, double* lam, double* X,
                                           double* Y, double* s, Work* w, CWork* cw) noexcept nogil:
    """Forward dynamics ``ddq``, ``lam`` and their derivatives at one state:
    ``X`` (nv, 3 nv) = [dddq/dq, dddq/d(dq), dddq/dtau], ``Y`` (m, 3 nv) the
    same for ``lam`` (row-major).  ``s``: ``deriv_scratch`` doubles.
    Returns 0, ST_MASS_NOT_PD, ST_DIST_COINCIDE or ST_DERIV_REDUNDANT.

    As the dense route (``_dense_route.pxd``): ``M = L^T L`` by the
    tree-sparse factorisation, ``W = L^{-T} A^T`` (row r of ``Wt``, kept
    with the list of its non-zero dofs), ``K = W^T W``.  A right-hand side
    ``(r1, r2)`` of the KKT system then solves as ``z = L^{-T} r1``, ``K y
    = r2 - W^T z``, ``x = L^{-1} (z + W y)``."""
    cdef int nv = m.nv, nb = m.nb, nr = c.m, n3 = 3 * m.nv, nP = m.voff[m.nv]
    cdef int i, r, a, e, na, st, d, nz, l
    cdef double t, dmax
    cdef bint zero_rows, sym
    cdef double* zd                           # row pointers of the solve
    cdef double* Wa
    cdef int* ia
    # scratch (deriv_scratch)
    cdef double* P = s                        # packed M, then its factor L
    cdef double* Dg = P + nP
    cdef double* A = Dg + nv
    cdef double* Wt = A + nr * nv             # (na, nv) rows of W = L^{-T} A^T
    cdef int* Wi = <int*> (Wt + nr * nv)      # (na, nv) their non-zero dofs
    cdef double* nW = Wt + 2 * nr * nv        # (na,) how many
    cdef double* K = nW + nr                  # (na, na)
    cdef double* Zr = K + nr * nr             # (nr, nv) d(A y)/dq of the zero rows
    cdef double* Yc = Zr + nr * nv            # (na, 3 nv)
    cdef double* dIq = Yc + nr * n3
    cdef double* dIv = dIq + nv * nv
    cdef double* bv = dIv + nv * nv
    cdef double* x = bv + nv
    cdef double* bias = x + nv
    cdef double* act = bias + nr              # the rows that are not zero (as doubles)
    cdef double* mu = act + nr
    cdef double* fe = mu + nr                 # (nb, 6) loads with the multipliers' wrenches
    cdef TanW T
    tan_carve(&T, fe + 6 * nb, nb, nv, nk)
    # b, M, rows (one forward pass, as the dense route) -----------------------
    rnea(m, q, dq, NULL, fext, True, bv, w)
    crba_packed(m, P, Dg, w)
    world_kinematics(m, w, cw, True)
    st = closure_rows(m, c, q, w, cw, False)
    if st != 0:
        return st
    dense_rows(m, c, w, cw, A, False)
    for r in range(nr):
        bias[r] = cw.bias[r]
    if tree_factor(P, Dg, nv, m.vdep, m.voff, m.vanc) != 0:
        return ST_MASS_NOT_PD
    # forward dynamics (Kim eqs. 67-69) on the rows that are not zero
    for i in range(nv):
        x[i] = tau[i] - bv[i]
    tree_solve_Lt(P, Dg, nv, m.vdep, m.voff, m.vanc, x)
    dmax = 0.0
    for r in range(nr):
        Wa = Wt + r * nv                       # every row first, compacted below
        for i in range(nv):
            Wa[i] = A[r * nv + i]
        tree_solve_Lt(P, Dg, nv, m.vdep, m.voff, m.vanc, Wa)
        mu[r] = dot(Wa, Wa, nv)
        if mu[r] > dmax:
            dmax = mu[r]
    na = 0
    for r in range(nr):
        if dmax > 0.0 and mu[r] > rcond * dmax:
            act[na] = r
            if na != r:
                for i in range(nv):
                    Wt[na * nv + i] = Wt[r * nv + i]
            na += 1
    zero_rows = na < nr
    for a in range(na):
        nz = 0
        Wa = Wt + a * nv
        ia = Wi + a * nv
        for i in range(nv):
            if Wa[i] != 0.0:
                ia[nz] = i
                nz += 1
        nW[a] = nz
        for e in range(a + 1):
            K[a * na + e] = dot(Wa, Wt + e * nv, nv)
        mu[a] = K[a * na + a]
    if chol_factor(K, na, rcond) != 0:
        return ST_DERIV_REDUNDANT
    for a in range(na):
        if K[a * na + a] * K[a * na + a] <= 1e-8 * mu[a]:
            return ST_DERIV_REDUNDANT         # a row within 1e-4 rad of the others' span
    for a in range(na):
        mu[a] = -(bias[<int> act[a]] + _sparse_dot(Wt + a * nv, Wi + a * nv, <int> nW[a], x))
    chol_solve(K, na, mu, 1)
    for r in range(nr):
        lam[r] = 0.0
    for i in range(nv):
        ddq[i] = x[i]
    for a in range(na):
        lam[<int> act[a]] = mu[a]
        _sparse_axpy(mu[a], Wt + a * nv, Wi + a * nv, <int> nW[a], ddq)
    tree_solve_L(P, Dg, nv, m.vdep, m.voff, m.vanc, ddq)
    # the tangent passes: R1 (in X, (nv, 3 nv)) and R2 (in Y, (nr, 3 nv))
    tan_setup(m, c, nk, dq, ddq, w, cw, &T)
    if zero_rows:
        # lam = A y with y = L^{-1} W K^{-1} lam (the rows that are not zero)
        for a in range(na):
            mu[a] = lam[<int> act[a]]
        chol_solve(K, na, mu, 1)
        for i in range(nv):
            T.y[i] = 0.0
        for a in range(na):
            _sparse_axpy(mu[a], Wt + a * nv, Wi + a * nv, <int> nW[a], T.y)
        tree_solve_L(P, Dg, nv, m.vdep, m.voff, m.vanc, T.y)
        tan_twists_at_y(m, c, nk, w, cw, &T)
        for i in range(nr * nv):
            Zr[i] = 0.0
    else:
        T.Vy = NULL
    for i in range(nv * n3):
        X[i] = 0.0
    for i in range(nr * n3):
        Y[i] = 0.0
    # with joints of at most one dof the dq directions come from the q passes
    sym = True
    for i in range(nb):
        if m.nvi[i] > 1:
            sym = False
    tangent_passes(m, c, q, dq, ddq, lam, nv if sym else 2 * nv, n3, w, cw, &T, X, Y, Zr, sym)
    loaded_tree_derivatives(m, c, q, dq, ddq, fext, lam, fe, dIq, dIv, NULL, w, cw)
    # the solve on all 3 nv right-hand sides at once, by rows (coupler rows:
    # constant, R2 = 0):  z = L^{-T} r1,  K y = r2 - W^T z,  x = L^{-1} (z + W y)
    for i in range(nv):
        for l in range(nv):
            X[i * n3 + l] -= dIq[i * nv + l]
            X[i * n3 + nv + l] = -dIv[i * nv + l]
        X[i * n3 + 2 * nv + i] = 1.0
    tree_solve_Lt_rows(P, Dg, nv, m.vdep, m.voff, m.vanc, X, n3)
    for a in range(na):
        Wa = Yc + a * n3
        zd = Y + <int> act[a] * n3
        for d in range(n3):
            Wa[d] = zd[d]
        ia = Wi + a * nv
        for e in range(<int> nW[a]):
            i = ia[e]
            t = Wt[a * nv + i]
            zd = X + i * n3
            for d in range(n3):
                Wa[d] -= t * zd[d]
    chol_solve(K, na, Yc, n3)
    for i in range(nr * n3):
        Y[i] = 0.0
    for a in range(na):
        Wa = Yc + a * n3
        zd = Y + <int> act[a] * n3
        for d in range(n3):
            zd[d] = Wa[d]
        ia = Wi + a * nv
        for e in range(<int> nW[a]):
            i = ia[e]
            t = Wt[a * nv + i]
            zd = X + i * n3
            for d in range(n3):
                zd[d] += t * Wa[d]
    tree_solve_L_rows(P, Dg, nv, m.vdep, m.voff, m.vanc, X, n3)
    if zero_rows:
        _zero_row_multipliers(nr, nv, n3, act, na, Zr, Y)
    return 0


cdef inline int closed_inverse_derivatives(const ModelC* m, const ClosC* c, int nk, const double* q,
                                           const double* dq, const double* ddq,
                                           const unsigned char* act_dof, double* tau,
                                           const double* fext, double rcond, double* lam, double* X,
                                           double* Y, double* s, Work* w, CWork* cw) noexcept nogil:
    """Closed inverse dynamics (Kim eqs. 56-59, objective
    ``min_constraint_force``) and its derivatives at one state: ``tau``
    (nv; read on the passive dofs, their ``tau_passive``, written on the
    actuated ones ``act_dof``), ``lam`` (m), ``X`` (nv, 3 nv) = [dtau/dq,
    dtau/d(dq), dtau/d(ddq)] (zero rows on the passive dofs), ``Y`` (m,
    3 nv) the same for ``lam``.  Returns 0, ST_DIST_COINCIDE,
    ST_INEXACT (under-actuated: ``A_p^T lam = RNEA_p - tau_p`` has no
    solution) or ST_DERIV_REDUNDANT.

    ``A_p^T lam = r_p`` (``r = RNEA(q, dq, ddq) - tau_passive``) is solved
    through ``K_p = A_p A_p^T`` on the rows whose ``A_p`` is not zero, and
    ``tau_a = RNEA_a - A_a^T lam``.  Differentiated, with ``D = [dRNEA'/dq -
    J^T dF/dq, dRNEA'/d(dq), M]`` (``RNEA'`` loaded with the multipliers'
    wrenches, as in the forward kernel): ``dlam = K_p^{-1} A_p D_p`` and
    ``dtau_a = D_a - A_a^T dlam``; a zero row's multiplier derivative is
    ``d(A_r y)/dq`` with ``y = A_p^T K_p^{-1} lam`` on the passive dofs."""
    cdef int nv = m.nv, nb = m.nb, nr = c.m, n3 = 3 * m.nv
    cdef int i, j, r, a, e, na, st, d, l
    cdef double t, dmax, scale
    cdef bint zero_rows
    cdef double* Da
    cdef double* Ra
    # scratch (within deriv_scratch)
    cdef double* A = s
    cdef double* K = A + nr * nv              # (na, na) A_p A_p^T
    cdef double* Zr = K + nr * nr             # (nr, nv)
    cdef double* Yc = Zr + nr * nv            # (na, 3 nv)
    cdef double* D = Yc + nr * n3             # (nv, 3 nv)
    cdef double* dIq = D + nv * n3
    cdef double* dIv = dIq + nv * nv
    cdef double* M = dIv + nv * nv
    cdef double* rt = M + nv * nv             # (nv,) RNEA - tau_passive
    cdef double* bias = rt + nv
    cdef double* act = bias + nr              # the rows whose A_p is not zero (as doubles)
    cdef double* mu = act + nr
    cdef double* fe = mu + nr
    cdef TanW T
    tan_carve(&T, fe + 6 * nb, nb, nv, nk)
    # lam and tau -----------------------------------------------------------------
    rnea(m, q, dq, ddq, fext, True, rt, w)
    scale = 1.0
    for i in range(nv):
        if rt[i] > scale or -rt[i] > scale:
            scale = rt[i] if rt[i] > 0.0 else -rt[i]
        if not act_dof[i]:
            rt[i] -= tau[i]
    st = constraint_rows(m, c, q, dq, NULL, A, bias, w, cw)
    if st != 0:
        return st
    dmax = 0.0
    for r in range(nr):
        t = 0.0
        for i in range(nv):
            if not act_dof[i]:
                t += A[r * nv + i] * A[r * nv + i]
        mu[r] = t
        if t > dmax:
            dmax = t
    na = 0
    for r in range(nr):
        if dmax > 0.0 and mu[r] > rcond * dmax:
            act[na] = r
            na += 1
    zero_rows = na < nr
    for a in range(na):
        for e in range(a + 1):
            t = 0.0
            for i in range(nv):
                if not act_dof[i]:
                    t += A[<int> act[a] * nv + i] * A[<int> act[e] * nv + i]
            K[a * na + e] = t
        mu[a] = K[a * na + a]
    if chol_factor(K, na, rcond) != 0:
        return ST_DERIV_REDUNDANT
    for a in range(na):
        if K[a * na + a] * K[a * na + a] <= 1e-8 * mu[a]:
            return ST_DERIV_REDUNDANT
    for a in range(na):                       # lam = K_p^{-1} A_p r_p
        t = 0.0
        for i in range(nv):
            if not act_dof[i]:
                t += A[<int> act[a] * nv + i] * rt[i]
        mu[a] = t
    chol_solve(K, na, mu, 1)
    for r in range(nr):
        lam[r] = 0.0
    for a in range(na):
        lam[<int> act[a]] = mu[a]
    for i in range(nv):                       # A^T lam: exact on the passive dofs?
        t = 0.0
        for r in range(nr):
            t += A[r * nv + i] * lam[r]
        if act_dof[i]:
            tau[i] = rt[i] - t
        elif not (fabs(t - rt[i]) <= 1e-9 * scale):
            return ST_INEXACT
    # the tangent passes (q directions only) and the loaded Table 5 ---------------
    tan_setup(m, c, nk, dq, ddq, w, cw, &T)
    if zero_rows:
        for a in range(na):
            mu[a] = lam[<int> act[a]]
        chol_solve(K, na, mu, 1)              # y = A_p^T K_p^{-1} lam on the passive dofs
        for i in range(nv):
            t = 0.0
            if not act_dof[i]:
                for a in range(na):
                    t += A[<int> act[a] * nv + i] * mu[a]
            T.y[i] = t
        tan_twists_at_y(m, c, nk, w, cw, &T)
        for i in range(nr * nv):
            Zr[i] = 0.0
    else:
        T.Vy = NULL
    for i in range(nv * n3):
        D[i] = 0.0
    tangent_passes(m, c, q, dq, ddq, lam, nv, n3, w, cw, &T, D, NULL, Zr)
    loaded_tree_derivatives(m, c, q, dq, ddq, fext, lam, fe, dIq, dIv, M, w, cw)
    for i in range(nv):                       # D = [dRNEA'/dq - J^T dF, dRNEA'/d(dq), M]
        for l in range(nv):
            D[i * n3 + l] = dIq[i * nv + l] - D[i * n3 + l]
            D[i * n3 + nv + l] = dIv[i * nv + l]
            D[i * n3 + 2 * nv + l] = M[i * nv + l]
    # dlam = K_p^{-1} A_p D_p;  dtau_a = D_a - A_a^T dlam --------------------------
    for a in range(na):
        Ra = Yc + a * n3
        for d in range(n3):
            Ra[d] = 0.0
        for i in range(nv):
            t = A[<int> act[a] * nv + i]
            if act_dof[i] or t == 0.0:
                continue
            Da = D + i * n3
            for d in range(n3):
                Ra[d] += t * Da[d]
    chol_solve(K, na, Yc, n3)
    for i in range(nr * n3):
        Y[i] = 0.0
    for a in range(na):
        for d in range(n3):
            Y[<int> act[a] * n3 + d] = Yc[a * n3 + d]
    if zero_rows:
        _zero_row_multipliers(nr, nv, n3, act, na, Zr, Y)
    for i in range(nv):
        Da = X + i * n3
        if not act_dof[i]:
            for d in range(n3):
                Da[d] = 0.0
            continue
        for d in range(n3):
            Da[d] = D[i * n3 + d]
        for r in range(nr):
            t = A[r * nv + i]
            if t == 0.0:
                continue
            Ra = Y + r * n3
            for d in range(n3):
                Da[d] -= t * Ra[d]
    return 0

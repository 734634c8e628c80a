# cython: language_level=3
"""Maximal-coordinate forward and hybrid dynamics in one native call (Ruan,
Articulated rigid body systems, eq. 12).

Every body is a free rigid body with body twist ``V_i``; joints and loops
are rows ``J`` on the stacked twists, ``Mb`` is block-diagonal, and the KKT
system ``[[Mb, J^T], [J, 0]] [dV; -lam] = [f; c]`` is solved through its
Schur complement

    K = J Mb^{-1} J^T,   (K + beta I) lam = c - J Mb^{-1} f,
    dV = Mb^{-1} (f + J^T lam),
    ddq_i = S_i^+ (dV_i - Ad_{T^{-1}} dV_p - eta_i)        (Kim eq. 41)

with CHOLMOD (``_cholmod_shim.h``): the symbolic analysis (a fill-reducing
order) is done once per plan in Python, and each call factorises the
permuted matrix numerically in natural order.  The same arithmetic as
``gear/solvers/maximal.py`` (the scikit-sparse path): regularisation
``beta = rel * max diag K``, raised 1000-fold up to 1e-6 when a pivot is not
positive; up to ``refinement`` steps of iterative refinement against ``K``
(stopping once ``|r - K lam| <= 1e-14 |r|``); and, when the system has no
exact solution, the part of the right-hand side outside ``range(K)``
removed and the system solved again.

Rows.  Joint i gives ``6 - nv_i`` rows ``C_i dV_i - C_i Ad_{T^{-1}} dV_p =
C_i eta_i`` (rows of ``C_i``: an orthonormal basis of the annihilator of
``S_i``, from a Householder QR of ``S_i``, which also gives ``S_i^+ =
R^{-1} Q_1^T``; computed once per plan for the joints whose ``S_i`` is
constant in the body frame, ``MaxC.cfr``); loop row r gives ``F_rA . dV_a + F_rB . dV_b = -dA dq_r +
F_rA . acc_a + F_rB . acc_b`` (``gear/constraints/_rows.pxd``).  Every
row meets at most two bodies, in two 6-blocks ("segments").  ``K`` has a
fixed pattern, stored as the upper triangle of the permuted matrix
(``MaxC.perm``, ``Kp/Ki``); with ``Mb_b^{-1} = L_b L_b^T`` (Cholesky, once
per model) and ``H_s = L_b^T J_s``, each body adds ``H_s . H_s'`` for each
pair of its segments into the entry ``pk`` of the pair.  Entries of the block pattern that were exactly zero
at the sampled configurations (a planar mechanism's out-of-plane
couplings) are left out of the factor and accumulated apart: if one ever
becomes non-zero the call returns ST_PATTERN and the caller re-plans.

Hybrid dynamics: a plan with prescribed joints (``MaxC.pres``) adds, after
the loop rows, one row per prescribed velocity coordinate k of joint i,
``s_k . (dV_i - Ad_{T^{-1}} dV_p) = ddq_k + s_k . eta_i`` (``s_k`` row k of
``S_i^+``), whose multiplier is that coordinate's torque; the prescribed
joints' own torques are left out of ``f``.
"""
from libc.math cimport sqrt, fabs
from gear.algorithms._types cimport ModelC, Work
from gear.spatial._spatial cimport dAd_inv, Ad_inv, dad, inertia_mul, matTvec3
from gear.constraints._cwork cimport ClosC, CWork
from gear.constraints._rows cimport constraint_rows, motion_pass, row_rate


cdef extern from "_cholmod_shim.h" nogil:
    ctypedef struct gear_chol:
        pass
    int gear_chol_available()
    gear_chol* gear_chol_new(int n, int* Ap, int* Ai, int stype, int ordering, int* status)
    void gear_chol_perm(const gear_chol* h, int* perm)
    gear_chol* gear_chol_clone(const gear_chol* src)
    void gear_chol_free(gear_chol* h)
    int gear_chol_factor(gear_chol* h, double* Ax, double beta)
    int gear_chol_solve(gear_chol* h, const double* b, double* x)
    long gear_chol_lnz(const gear_chol* h)


cdef enum:
    ST_NOT_PSD = -11     # K + beta I not positive definite even with beta = 1e-6 max diag
    ST_PATTERN = -12     # a left-out entry of K became non-zero: re-plan
    ST_CHOLMOD = -13     # CHOLMOD failed (out of memory)


cdef struct MaxC:
    int nb
    int nJ               # joint rows
    int nL               # loop rows (= ClosC.m)
    int nrows            # nJ + nL + nP
    int nP               # prescription rows (hybrid dynamics), after the loop rows
    const int* pdof      # (nP,) the velocity coordinate of each prescription row
    const int* pbody     # (nP,) ... its body
    const unsigned char* pres   # (nb,) 1 on prescribed joints (their torque is unknown), or NULL
    int nnzK             # entries of K's lower triangle in the factor's pattern
    int nout             # entries left out (accumulated after the nnzK ones)
    int nseg             # segments (row, body) of J
    double rel           # regularisation relative to max diag K
    int refinement
    int npairs           # segment pairs on a common body
    int npk              # the first npk of them go to kept entries, the others are left out
    const unsigned char* cfr    # (nb,) 1 where S_i is constant: C_i, S_i^+ below, or NULL
    const double* Cc     # (nb, 36) those C_i ...
    const double* Spc    # (nb, 36) ... and S_i^+
    const double* Minv   # (nb, 36) Mb_b^{-1}, row-major
    const double* Lt     # (nb, 36) L_b^T, row-major upper triangle, Mb_b^{-1} = L_b L_b^T
    const int* row0      # (nb,) first joint row of each body
    const int* rbody     # (nrows, 2) the bodies of each row's two segments (-1: none)
    const int* sptr      # (nb + 1,) each body's segments ...
    const int* srow      # (nseg,) ... their rows ...
    const int* soff      # (nseg,) ... and their offset in Jv (12 row + 6 slot)
    const int* pa        # (npairs,) the two segments of each pair (a row meeting
    const int* pb        #   one body twice has its cross pair listed twice)
    const int* pk        # (npairs,) the pair's entry of Kx (>= nnzK: left out)
    const int* perm      # (nrows,) fill-reducing order: row perm[k] of K is row k of Kx's matrix
    const int* Kp        # (nrows + 1,) that permuted K's upper triangle, CSC, diagonal last
    const int* Ki
    const void* tree     # the tree route's plan (MaxTree of _tree_route.pxd), or NULL: CHOLMOD's
    int nws_kernel       # maximal_scratch's doubles; the tree route's scratch follows them


cdef inline int maximal_scratch(int nb, int nrows, int nnzK, int nout, int nseg) noexcept nogil:
    # Jv, c, r, lam, e, de, rp, lp, Kx (+ left out), H, masks, f, u, dV, C, S+
    return 12 * nrows + 7 * nrows + nnzK + nout + 7 * nseg + 18 * nb + 72 * nb + 8


cdef inline void joint_frames(int n, const double* S, double* C, double* Sp) noexcept nogil:
    """Householder QR ``S = Q R`` of the 6 x n motion subspace (column-major):
    ``C`` (6 - n rows of 6) = the last columns of Q, an orthonormal basis of
    the annihilator of S; ``Sp`` (n rows of 6) = ``R^{-1} Q_1^T = S^+``."""
    cdef double A[36]
    cdef double Q[36]          # column-major
    cdef double v[6]
    cdef double nrm, alpha, vv, s
    cdef int i, j, k, l
    for i in range(36):
        Q[i] = 0.0
    for i in range(6):
        Q[7 * i] = 1.0
    for i in range(6 * n):
        A[i] = S[i]
    for k in range(n):
        nrm = 0.0
        for i in range(k, 6):
            nrm += A[6 * k + i] * A[6 * k + i]
        nrm = sqrt(nrm)
        alpha = -nrm if A[6 * k + k] >= 0.0 else nrm
        for i in range(k, 6):
            v[i] = A[6 * k + i]
        v[k] -= alpha
        vv = 0.0
        for i in range(k, 6):
            vv += v[i] * v[i]
        if vv == 0.0:
            continue
        for j in range(k, n):                   # A <- H A
            s = 0.0
            for i in range(k, 6):
                s += v[i] * A[6 * j + i]
            s *= 2.0 / vv
            for i in range(k, 6):
                A[6 * j + i] -= s * v[i]
        for i in range(6):                      # Q <- Q H
            s = 0.0
            for l in range(k, 6):
                s += Q[6 * l + i] * v[l]
            s *= 2.0 / vv
            for l in range(k, 6):
                Q[6 * l + i] -= s * v[l]
    for j in range(6 - n):
        for i in range(6):
            C[6 * j + i] = Q[6 * (n + j) + i]
    # S^+ = R^{-1} Q_1^T, column by column of Q_1^T (back substitution)
    for i in range(6):
        for k in range(n - 1, -1, -1):
            s = Q[6 * k + i]
            for l in range(k + 1, n):
                s -= A[6 * l + k] * Sp[6 * l + i]
            Sp[6 * k + i] = s / A[6 * k + k]


cdef inline double fmax(double a, double b) noexcept nogil:
    # the larger of two (not NaN-aware, unlike libm's fmax: one maxsd, no call)
    return a if a > b else b


cdef inline double dot6(const double* a, const double* b) noexcept nogil:
    # three independent partial sums: a short dependency chain
    return (a[0] * b[0] + a[3] * b[3]) + (a[1] * b[1] + a[4] * b[4]) + (a[2] * b[2] + a[5] * b[5])


cdef inline void upper_vec(const double* U, const double* x, double* out) noexcept nogil:
    # out = U x, U upper triangular 6 x 6 row-major
    out[0] = (U[0] * x[0] + U[1] * x[1] + U[2] * x[2] + U[3] * x[3] + U[4] * x[4]
              + U[5] * x[5])
    out[1] = U[7] * x[1] + U[8] * x[2] + U[9] * x[3] + U[10] * x[4] + U[11] * x[5]
    out[2] = U[14] * x[2] + U[15] * x[3] + U[16] * x[4] + U[17] * x[5]
    out[3] = U[21] * x[3] + U[22] * x[4] + U[23] * x[5]
    out[4] = U[28] * x[4] + U[29] * x[5]
    out[5] = U[35] * x[5]


cdef inline int nonzero_mask(const double* v) noexcept nogil:
    return ((<int> (v[0] != 0.0)) | ((<int> (v[1] != 0.0)) << 1) | ((<int> (v[2] != 0.0)) << 2)
            | ((<int> (v[3] != 0.0)) << 3) | ((<int> (v[4] != 0.0)) << 4) | ((<int> (v[5] != 0.0)) << 5))


cdef inline void mat6_vec_rm(const double* M, const double* x, double* out) noexcept nogil:
    cdef int i
    for i in range(6):
        out[i] = dot6(M + 6 * i, x)


cdef inline void sym_mul(const MaxC* x, const double* Kx, const double* v, double* out) noexcept nogil:
    # out = K v from the upper triangle (the diagonal last in each column)
    cdef int i, j, p, d
    cdef double s, vj
    for j in range(x.nrows):
        d = x.Kp[j + 1] - 1
        vj = v[j]
        s = Kx[d] * vj
        for p in range(x.Kp[j], d):
            i = x.Ki[p]
            out[i] += Kx[p] * vj
            s += Kx[p] * v[i]
        out[j] = s                    # rows i < j were added to before


cdef inline int refined(const MaxC* x, gear_chol* h, const double* Kx, const double* r, double* lam,
                        double* e, double* de) noexcept nogil:
    # lam = K^{-1} r with up to ``refinement`` steps of iterative refinement
    # (fewer once |r - K lam| <= 1e-14 |r|: rounding level); ``e`` is left holding
    # the residual r - K lam of the lam returned
    cdef int it, i, n = x.nrows
    cdef double emax, rmax = 0.0
    for i in range(n):
        rmax = fmax(rmax, fabs(r[i]))
    if gear_chol_solve(h, r, lam) != 0:
        return ST_CHOLMOD
    it = 0
    while True:
        sym_mul(x, Kx, lam, e)
        emax = 0.0
        for i in range(n):
            e[i] = r[i] - e[i]
            emax = fmax(emax, fabs(e[i]))
        if it == x.refinement or emax <= 1e-14 * rmax:
            return 0
        if gear_chol_solve(h, e, de) != 0:
            return ST_CHOLMOD
        for i in range(n):
            lam[i] += de[i]
        it += 1


cdef struct MaxW:
    double* Jv      # (nr, 12) the two segments of each row
    double* cr      # (nr,) right-hand side of J dV = c
    double* rr      # (nr,) c - J Mb^-1 f
    double* lam
    double* e
    double* de
    double* rp      # (nr,) rr in the factor's order
    double* lp      # (nr,) lam in the factor's order
    double* Kx      # (nnzK + nout,)
    double* H       # (nseg, 6) L_b^T J_s: K's pair products are H_a . H_b
    int* hm         # (nseg,) bit k set when H_s[k] != 0 (stored in nseg doubles)
    double* f       # (nb, 6) body wrenches, then f + J^T lam
    double* u       # (nb, 6) Mb^-1 f
    double* dV      # (nb, 6)
    double* Cb      # (nb, 36) rows of C_i
    double* Sp      # (nb, 36) rows of S_i^+


cdef inline void body_frames(const MaxC* x, const MaxW* z, int i, const double** C,
                             const double** Sp) noexcept nogil:
    # the rows of C_i and S_i^+: the plan's when S_i is constant (no copy),
    # else those joint_frames wrote into the workspace
    if x.cfr != NULL and x.cfr[i]:
        C[0] = x.Cc + 36 * i
        Sp[0] = x.Spc + 36 * i
    else:
        C[0] = z.Cb + 36 * i
        Sp[0] = z.Sp + 36 * i


cdef inline double row_residual(const MaxC* x, const MaxW* z, int r, const double* y) noexcept nogil:
    # c_r - J_r y for the body 6-vectors y (nb, 6): row r's two segments
    cdef double v = z.cr[r]
    cdef int a = x.rbody[2 * r], b = x.rbody[2 * r + 1]
    if a >= 0:
        v -= dot6(z.Jv + 12 * r, y + 6 * a)
    if b >= 0:
        v -= dot6(z.Jv + 12 * r + 6, y + 6 * b)
    return v


cdef inline MaxW maxwork(const MaxC* x, double* base) noexcept nogil:
    # the layout of maximal_scratch
    cdef MaxW z
    cdef int nr = x.nrows, nb = x.nb
    z.Jv = base
    z.cr = z.Jv + 12 * nr
    z.rr = z.cr + nr
    z.lam = z.rr + nr
    z.e = z.lam + nr
    z.de = z.e + nr
    z.rp = z.de + nr
    z.lp = z.rp + nr
    z.Kx = z.lp + nr
    z.H = z.Kx + x.nnzK + x.nout
    z.hm = <int*> (z.H + 6 * x.nseg)
    z.f = z.H + 7 * x.nseg
    z.u = z.f + 6 * nb
    z.dV = z.u + 6 * nb
    z.Cb = z.dV + 6 * nb
    z.Sp = z.Cb + 36 * nb
    return z


cdef inline int maximal_assemble(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                                 const double* ddq, const double* tau, const double* fext, Work* w,
                                 CWork* cw, MaxW* z, bint with_K=True,
                                 bint joint_rows=True) noexcept nogil:
    """The rows J and c (the joints' only when ``joint_rows``), the body
    wrenches f and, ``with_K``, Mb^-1 f and K's values (``z.Kx``, the
    left-out entries after the first nnzK).
    Returns 0 or ST_DIST_COINCIDE.  ``tau`` may be NULL (zero); ``ddq``
    (the prescribed accelerations) is read by the prescription rows only."""
    cdef const MaxC* x = <const MaxC*> c.mx
    cdef int nb = m.nb, nJ = x.nJ
    cdef int i, j, k, n, p, r, s, a, b, st, l
    cdef double t6[6]
    cdef double a6[6]
    cdef double v
    cdef double* Jv = z.Jv
    cdef double* f = z.f
    cdef const double* Ci
    cdef const double* Spi
    cdef const double* T
    cdef const double* Js
    st = constraint_rows(m, c, q, dq, NULL, NULL, NULL, w, cw)   # T, S, V, eta, Tw, acc, F, bias
    if st != 0:
        return st
    # body wrenches f_i = ad*_V (I V) + I (0, R^T g) + f_ext + the joint torques,
    # and the joint rows
    for i in range(nb):
        n = m.nvi[i]
        p = m.parent[i]
        T = w.T + 12 * i
        if x.cfr == NULL or not x.cfr[i]:
            # (where S_i does not depend on q, C_i and S_i^+ come from the plan)
            joint_frames(n, w.S + 36 * i, z.Cb + 36 * i, z.Sp + 36 * i)
        body_frames(x, z, i, &Ci, &Spi)
        inertia_mul(m.inertia + 10 * i, w.V + 6 * i, t6)
        dad(w.V + 6 * i, t6, f + 6 * i)
        a6[0] = 0.0
        a6[1] = 0.0
        a6[2] = 0.0
        matTvec3(cw.Tw + 12 * i, m.g, a6 + 3)
        inertia_mul(m.inertia + 10 * i, a6, t6)
        for k in range(6):
            f[6 * i + k] += t6[k]
        if fext != NULL:
            for k in range(6):
                f[6 * i + k] += fext[6 * i + k]
        if n > 0 and tau != NULL and (x.pres == NULL or not x.pres[i]):
            # w_i = S_i^{+T} tau_i on body i, -Ad*_{T^{-1}} w_i on its parent
            for k in range(6):
                v = 0.0
                for j in range(n):
                    v += Spi[6 * j + k] * tau[m.iv[i] + j]
                a6[k] = v
                f[6 * i + k] += v
            if p >= 0:
                dAd_inv(T, a6, t6)
                for k in range(6):
                    f[6 * p + k] -= t6[k]
        for j in range(6 - n if joint_rows else 0):
            r = x.row0[i] + j
            for k in range(6):
                Jv[12 * r + k] = Ci[6 * j + k]
            if p >= 0:
                dAd_inv(T, Ci + 6 * j, t6)        # (C_j Ad_{T^-1})^T
                for k in range(6):
                    Jv[12 * r + 6 + k] = -t6[k]
            z.cr[r] = dot6(Ci + 6 * j, w.eta + 6 * i)
    # the loop rows
    for l in range(x.nL):
        r = nJ + l
        for k in range(12):
            Jv[12 * r + k] = cw.F[12 * l + k]
        v = -cw.bias[l]
        a = x.rbody[2 * r]
        b = x.rbody[2 * r + 1]
        if a >= 0:
            v += dot6(cw.F + 12 * l, cw.acc + 6 * a)
        if b >= 0:
            v += dot6(cw.F + 12 * l + 6, cw.acc + 6 * b)
        z.cr[r] = v
    # the prescription rows (hybrid dynamics): s_k . (dV_i - Ad_{T^-1} dV_p)
    # = ddq_k + s_k . eta_i, s_k row k of S_i^+; the multiplier is the torque
    for l in range(x.nP):
        r = nJ + x.nL + l
        i = x.pbody[l]
        body_frames(x, z, i, &Ci, &Spi)
        Js = Spi + 6 * (x.pdof[l] - m.iv[i])
        for k in range(6):
            Jv[12 * r + k] = Js[k]
        if m.parent[i] >= 0:
            dAd_inv(w.T + 12 * i, Js, t6)
            for k in range(6):
                Jv[12 * r + 6 + k] = -t6[k]
        z.cr[r] = (ddq[x.pdof[l]] if ddq != NULL else 0.0) + dot6(Js, w.eta + 6 * i)
    if not with_K:
        return 0
    # u = Mb^-1 f; H_s = L_b^T J_s, so that J_a Mb^-1 J_b^T = H_a . H_b
    for i in range(nb):
        mat6_vec_rm(x.Minv + 36 * i, f + 6 * i, z.u + 6 * i)
        for s in range(x.sptr[i], x.sptr[i + 1]):
            upper_vec(x.Lt + 36 * i, Jv + x.soff[s], z.H + 6 * s)
            z.hm[s] = nonzero_mask(z.H + 6 * s)
    for k in range(x.nnzK + x.nout):
        z.Kx[k] = 0.0
    for p in range(x.npk):
        z.Kx[x.pk[p]] += dot6(z.H + 6 * x.pa[p], z.H + 6 * x.pb[p])
    # the left-out entries, for the caller's check: a pair whose non-zero
    # components do not meet is exactly zero
    for p in range(x.npk, x.npairs):
        a = x.pa[p]
        b = x.pb[p]
        if z.hm[a] & z.hm[b]:
            z.Kx[x.pk[p]] += dot6(z.H + 6 * a, z.H + 6 * b)
    return 0


cdef inline int maximal_forward(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                                double* ddq, double* tau, const double* fext, double* lam_out,
                                double* info, Work* w, CWork* cw) noexcept nogil:
    """Constrained forward dynamics in maximal coordinates (see the module
    docstring), or hybrid dynamics when the plan has prescription rows
    (``MaxC.pres``): then, as ``closed_dynamics``, ``ddq`` is read on the
    prescribed joints and written elsewhere and ``tau`` the other way round.
    ``lam_out`` (m,): the loop rows' multipliers (the reduced solvers'
    ``lam``); ``info`` = (factorisations, |A ddq + dA dq|).  Returns 0,
    ST_DIST_COINCIDE, ST_NOT_PSD, ST_PATTERN or ST_CHOLMOD."""
    cdef const MaxC* x = <const MaxC*> c.mx
    cdef gear_chol* h = <gear_chol*> cw.chol
    cdef int nb = m.nb, nr = x.nrows, nJ = x.nJ
    cdef int i, k, r, s, st, nfac, l
    cdef double v, scale, dmax, rel, emax, rmax
    cdef MaxW z = maxwork(x, cw.mws)
    cdef double* Jv = z.Jv
    cdef double* rr = z.rr
    cdef double* lam = z.lam
    cdef double* e = z.e
    cdef double* de = z.de
    cdef double* Kx = z.Kx
    cdef double* f = z.f
    cdef double* u = z.u
    cdef double* dV = z.dV
    cdef const double* Ci
    if h == NULL and nr > 0:
        return ST_CHOLMOD
    st = maximal_assemble(m, c, q, dq, ddq, tau, fext, w, cw, &z)
    if st != 0:
        return st
    # K = H^T H is positive semi-definite: no entry exceeds its largest diagonal
    dmax = 0.0
    for r in range(nr):
        dmax = fmax(dmax, Kx[x.Kp[r + 1] - 1])
    scale = dmax if dmax > 1.0 else 1.0
    for k in range(x.nnzK, x.nnzK + x.nout):
        if fabs(Kx[k]) > 1e-300 * scale:
            return ST_PATTERN
    for r in range(nr):
        rr[r] = row_residual(x, &z, r, u)
    # (K + beta I) lam = rr, refined against K, in the factor's order
    nfac = 0
    if nr > 0:
        rel = x.rel
        while True:
            nfac += 1
            st = gear_chol_factor(h, Kx, rel * dmax)
            if st == 0:
                break
            if st < 0:
                return ST_CHOLMOD
            if rel >= 1e-6:
                return ST_NOT_PSD
            rel = min(max(rel, 1e-15) * 1e3, 1e-6)
        for r in range(nr):
            z.rp[r] = rr[x.perm[r]]
        st = refined(x, h, Kx, z.rp, z.lp, e, de)
        if st != 0:
            return st
        # no exact solution: take out the part e of rr outside range(K)
        emax = 0.0
        rmax = 1.0
        for r in range(nr):
            emax = fmax(emax, fabs(e[r]))
            rmax = fmax(rmax, fabs(z.rp[r]))
        if emax > 1e-9 * rmax:
            for r in range(nr):
                z.rp[r] -= e[r]
            st = refined(x, h, Kx, z.rp, z.lp, e, de)
            if st != 0:
                return st
        for r in range(nr):
            lam[x.perm[r]] = z.lp[r]
    # dV = Mb^-1 (f + J^T lam), then ddq_i = S_i^+ (dV_i - Ad_{T^-1} dV_p - eta_i)
    for i in range(nb):
        for s in range(x.sptr[i], x.sptr[i + 1]):
            Ci = Jv + x.soff[s]
            v = lam[x.srow[s]]
            for k in range(6):
                f[6 * i + k] += Ci[k] * v
        mat6_vec_rm(x.Minv + 36 * i, f + 6 * i, dV + 6 * i)
    for l in range(x.nL):
        lam_out[l] = lam[nJ + l]
    for l in range(x.nP):
        tau[x.pdof[l]] = lam[nJ + x.nL + l]     # the prescribed coordinates' torques
    maximal_readback(m, c, x, &z, w, cw, ddq, info)
    info[0] = nfac
    return 0


cdef inline void maximal_readback(const ModelC* m, const ClosC* c, const MaxC* x, const MaxW* z,
                                  Work* w, CWork* cw, double* ddq, double* info,
                                  bint read=True) noexcept nogil:
    """The joint accelerations from the body accelerations ``z.dV``,
    ``ddq_i = S_i^+ (dV_i - Ad_{T^-1} dV_p - eta_i)`` (Kim eq. 41; the
    prescribed joints' are left as given; not ``read``: ``ddq`` is given,
    as the tree route's sweep leaves it), and ``info[1] = |A ddq + dA
    dq|`` from the reduced rows."""
    cdef int i, j, k, n, p, l
    cdef double t6[6]
    cdef double a6[6]
    cdef double v, acc2
    cdef const double* dV = z.dV
    cdef const double* Ci
    cdef const double* Spi
    for i in range(m.nb if read else 0):
        n = m.nvi[i]
        if n == 0 or (x.pres != NULL and x.pres[i]):
            continue
        p = m.parent[i]
        if p >= 0:
            Ad_inv(w.T + 12 * i, dV + 6 * p, t6)
        else:
            for k in range(6):
                t6[k] = 0.0
        for k in range(6):
            a6[k] = dV[6 * i + k] - t6[k] - w.eta[6 * i + k]
        body_frames(x, z, i, &Ci, &Spi)
        for j in range(n):
            ddq[m.iv[i] + j] = dot6(Spi + 6 * j, a6)
    motion_pass(m, w, ddq, cw.ja)
    acc2 = 0.0
    for l in range(x.nL):
        v = row_rate(c, cw, l, cw.ja, ddq) + cw.bias[l]
        acc2 += v * v
    info[1] = sqrt(acc2)

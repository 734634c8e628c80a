# cython: language_level=3
"""Closed-loop forward and hybrid dynamics through articulated-body passes
(Kim, Lie Group Formulation of Articulated Rigid Body Dynamics, eqs.
67-69; hybrid: eqs. 70-77): ``closed_dynamics``.

One articulated-body pass (Kim, Table 3/4, ``gear/algorithms/_aba.pxd``)
gives the unconstrained ``ddq_r`` and leaves the articulated inertias
``Ihat_i``, ``U_i``, ``Psi_i`` in the workspace.  For each row s a *unit
pass* -- the same recursion with zero velocity, gravity and torque, and
the row's wrenches as the only load (``load_row``, ``unit_pass``) -- gives
the body accelerations ``J_b M^{-1} A_s^T`` (``M_vv^{-1}`` in hybrid
dynamics: prescribed joints are rigid), from which column s of
``K = A M^{-1} A^T`` is read off in O(m).  Then

    K lam = -(A ddq_r + dA dq)          (eq. 67)
    ddq   = ddq_r + M^{-1} A^T lam      (eq. 69; one more unit pass)

in O(n m + m^3), with the minimum-norm ``lam`` of ``_psd.pxd`` when K is
singular.
"""
from libc.math cimport sqrt
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._common cimport S_mul_add, St_mul
from gear.algorithms._aba cimport hybrid
from gear.spatial._spatial cimport Ad_inv, dAd_inv, mat6_vec
from gear.constraints._cwork cimport ROW_COUPLER, ClosC, CWork
from gear.constraints._rows cimport world_kinematics, closure_rows, motion_pass, row_rate
from gear.constraints._psd cimport psd_solve


# ---------------------------------------------------------------------------
# unit passes reusing the articulated inertias
# ---------------------------------------------------------------------------
cdef inline void load_row(const ModelC* m, const ClosC* c, CWork* cw, int r, double scale) noexcept nogil:
    """Add ``scale`` times row r's load: its wrenches into ``Bs`` (as minus
    external forces, Table 3's convention) or its joint forces into ``tx``."""
    cdef int k, a, b, t
    if c.rtype[r] == ROW_COUPLER:
        cw.tx[c.ri[r]] += scale
        cw.tx[c.rj[r]] -= scale * c.rcoef[r]
        return
    k = c.rk[r]
    a = c.body_a[k]
    b = c.body_b[k]
    if a >= 0:
        for t in range(6):
            cw.Bs[6 * a + t] -= scale * cw.F[12 * r + t]
    if b >= 0:
        for t in range(6):
            cw.Bs[6 * b + t] -= scale * cw.F[12 * r + 6 + t]


cdef inline void unit_pass(const ModelC* m, const ClosC* c, const Work* w,
                           const unsigned char* pres, CWork* cw, bint want_tau,
                           int row) noexcept nogil:
    """Table 3/4 with zero velocity, gravity and torque, reusing Ihat, U and
    Psi of the last articulated-body pass: the response ``M_vv^{-1} f`` to
    the loads in ``Bs`` (minus body wrenches) and ``tx`` (joint forces).
    Writes joint accelerations ``xs`` (zero on prescribed joints), body
    accelerations ``ja`` and, on prescribed joints when ``want_tau``, the
    torque increments ``ts``.

    ``row >= 0`` (the loads of that closure row only, ``Bs`` zero
    elsewhere, no coupler rows): the backward pass visits only the two
    bodies' paths to the root (beta is zero off them) and the forward pass
    only the support ``c.sup``; the outputs are then valid on the support.
    ``row < 0``: every body."""
    cdef int i, p, n, iv, r, k, ia, ib, t_
    cdef double t[6]
    cdef double y[6]
    cdef double a[6]
    cdef bint pr
    cdef const double* S
    cdef const double* U
    cdef const double* Dinv
    if row >= 0:
        ia = c.body_a[c.rk[row]]
        ib = c.body_b[c.rk[row]]
        i = ia if ia > ib else ib
    else:
        i = m.nb - 1
    while i >= 0:
        p = m.parent[i]
        n = m.nvi[i]
        iv = m.iv[i]
        pr = pres != NULL and pres[i]
        for r in range(6):
            t[r] = cw.Bs[6 * i + r]
        if not pr and n == 1:
            S = w.S + 36 * i
            U = w.U + 36 * i
            y[0] = (cw.tx[iv] - (S[0] * t[0] + S[1] * t[1] + S[2] * t[2]
                                 + S[3] * t[3] + S[4] * t[4] + S[5] * t[5]))
            cw.us[iv] = y[0]
            y[0] *= w.Dinv[36 * i]
            for r in range(6):
                t[r] += U[r] * y[0]
        elif not pr and n > 0:
            S = w.S + 36 * i
            U = w.U + 36 * i
            Dinv = w.Dinv + 36 * i
            St_mul(S, n, cw.Bs + 6 * i, y)
            for r in range(n):
                cw.us[iv + r] = cw.tx[iv + r] - y[r]
            for r in range(n):
                y[r] = 0.0
                for k in range(n):
                    y[r] += Dinv[r * n + k] * cw.us[iv + k]
            S_mul_add(U, n, y, t)                 # beta_i = Bhat_i + U_i Psi_i u_i
        if p >= 0:
            dAd_inv(w.T + 12 * i, t, y)
            for r in range(6):
                cw.Bs[6 * p + r] += y[r]
        if row >= 0:
            # next body on either path, in descending order (parent < child)
            if ia == i:
                ia = p
            if ib == i:
                ib = p
            i = ia if ia > ib else ib
        else:
            i -= 1
    for t_ in range(m.nb if row < 0 else c.nsup):
        i = t_ if row < 0 else c.sup[t_]
        p = m.parent[i]
        n = m.nvi[i]
        iv = m.iv[i]
        pr = pres != NULL and pres[i]
        if p >= 0:
            Ad_inv(w.T + 12 * i, cw.ja + 6 * p, a)
        else:
            for r in range(6):
                a[r] = 0.0
        for r in range(6):
            cw.ja[6 * i + r] = a[r]
        if pr and want_tau:
            # tau_i = S_i^T (Ihat_i dV_i + Bhat_i) - (joint loads)    (Table 4)
            mat6_vec(w.Ih + 36 * i, a, t)
            for r in range(6):
                t[r] += cw.Bs[6 * i + r]
            St_mul(w.S + 36 * i, n, t, y)
            for r in range(n):
                cw.ts[iv + r] = y[r] - cw.tx[iv + r]
                cw.xs[iv + r] = 0.0
        elif pr:
            for r in range(n):
                cw.xs[iv + r] = 0.0
        elif n == 1:
            U = w.U + 36 * i
            S = w.S + 36 * i
            y[0] = w.Dinv[36 * i] * (cw.us[iv] - (U[0] * a[0] + U[1] * a[1] + U[2] * a[2]
                                                  + U[3] * a[3] + U[4] * a[4] + U[5] * a[5]))
            cw.xs[iv] = y[0]
            for r in range(6):
                cw.ja[6 * i + r] += S[r] * y[0]
        elif n > 0:
            St_mul(w.U + 36 * i, n, a, y)
            Dinv = w.Dinv + 36 * i
            for r in range(n):
                cw.xs[iv + r] = 0.0
                for k in range(n):
                    cw.xs[iv + r] += Dinv[r * n + k] * (cw.us[iv + k] - y[k])
            S_mul_add(w.S + 36 * i, n, cw.xs + iv, cw.ja + 6 * i)


cdef inline void clear_loads(const ModelC* m, CWork* cw) noexcept nogil:
    cdef int r
    for r in range(6 * m.nb):
        cw.Bs[r] = 0.0
    for r in range(m.nv):
        cw.tx[r] = 0.0
        cw.us[r] = 0.0


# ---------------------------------------------------------------------------
# the route
# ---------------------------------------------------------------------------
cdef inline int closed_dynamics(const ModelC* m, const ClosC* c, const double* q,
                                const double* dq, double* ddq, double* tau,
                                const unsigned char* pres, const double* fext, double* lam,
                                double* info, Work* w, CWork* cw) noexcept nogil:
    """Constrained forward (``pres`` NULL) or hybrid dynamics in place, like
    ``hybrid`` of ``_aba.pxd``: ``ddq`` read on prescribed joints and
    written elsewhere, ``tau`` the other way round; ``lam`` (m,) written;
    ``info`` = (rank of K, |A ddq + dA dq|).  Returns 0, 1 + a joint with a
    singular articulated inertia, or ST_DIST_COINCIDE."""
    cdef int r, s, st, nr = c.m
    cdef double acc2, s2
    st = hybrid(m, q, dq, ddq, tau, pres, fext, w)      # ddq_r, Ihat, U, Psi  (Tables 3/4)
    if st != 0:
        return st
    world_kinematics(m, w, cw)
    st = closure_rows(m, c, q, w, cw)
    if st != 0:
        return st
    info[0] = 0.0
    info[1] = 0.0
    if nr == 0:
        return 0
    # rhs = -(A ddq_r + dA dq)                                   (eq. 67 / 75)
    motion_pass(m, w, ddq, cw.ja)
    for r in range(nr):
        cw.rhs[r] = -(row_rate(c, cw, r, cw.ja, ddq) + cw.bias[r])
    # K = A M^{-1} A^T, one unit pass per row                    (eq. 67)
    for s in range(nr):
        clear_loads(m, cw)
        load_row(m, c, cw, s, 1.0)
        unit_pass(m, c, w, pres, cw, False, s if c.ncoupler == 0 else -1)
        for r in range(s, nr):
            cw.K[r * nr + s] = row_rate(c, cw, r, cw.ja, cw.xs)
            cw.K[s * nr + r] = cw.K[r * nr + s]
    info[0] = psd_solve(cw.K, nr, cw.rhs, lam, cw, c.rcond, True, True)
    # ddq = ddq_r + M^{-1} A^T lam (eq. 69); prescribed joints' torques follow
    clear_loads(m, cw)
    for s in range(nr):
        load_row(m, c, cw, s, lam[s])
    unit_pass(m, c, w, pres, cw, True, -1)
    for s in range(m.nb):
        if pres != NULL and pres[s]:
            for r in range(m.nvi[s]):
                tau[m.iv[s] + r] += cw.ts[m.iv[s] + r]
        else:
            for r in range(m.nvi[s]):
                ddq[m.iv[s] + r] += cw.xs[m.iv[s] + r]
    motion_pass(m, w, ddq, cw.ja)
    acc2 = 0.0
    for r in range(nr):
        s2 = row_rate(c, cw, r, cw.ja, ddq) + cw.bias[r]
        acc2 += s2 * s2
    info[1] = sqrt(acc2)
    return 0

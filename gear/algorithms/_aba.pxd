# cython: language_level=3
"""Articulated-body forward dynamics and hybrid dynamics, Kim Tables 3 and 4
(eqs. 43-50).

    forward:  T_{lambda(i),i}, V_i, eta_i = ad_{V_i} S_i dq_i + dS_i dq_i
    backward: Ihat_i = I_i + sum_k Ad*_{T^{-1}_{i,k}} Pi_k Ad_{T^{-1}_{i,k}}          (49)
              Bhat_i = -ad*_{V_i} I_i V_i - F_i^ext + sum_k Ad*_{T^{-1}_{i,k}} beta_k  (50)
              i in u (prescribed ddq):
                  Pi_i = Ihat_i,  beta_i = Bhat_i + Ihat_i (eta_i + S_i ddq_i)
              otherwise:
                  Psi_i  = (S_i^T Ihat_i S_i)^{-1}
                  Pi_i   = Ihat_i - Ihat_i S_i Psi_i S_i^T Ihat_i
                  beta_i = Bhat_i + Ihat_i {eta_i + S_i Psi_i (tau_i - S_i^T (Ihat_i eta_i + Bhat_i))}
    forward:  a_i = Ad_{T^{-1}_{lambda(i),i}} dV_{lambda(i)},  dV_0 = (0, -g)
              i in u:    dV_i = a_i + S_i ddq_i + eta_i,  tau_i = S_i^T (Ihat_i dV_i + Bhat_i)
              otherwise: ddq_i = Psi_i {tau_i - S_i^T Ihat_i (a_i + eta_i) - S_i^T Bhat_i}   (45)
                         dV_i = a_i + S_i ddq_i + eta_i

Forward dynamics (Table 3) is the case with no prescribed joint.  With
U_i = Ihat_i S_i and u_i = tau_i - S_i^T (Ihat_i eta_i + Bhat_i) the
updates read Pi_i = Ihat_i - U_i Psi_i U_i^T, beta_i = Bhat_i + Ihat_i eta_i +
U_i Psi_i u_i and ddq_i = Psi_i (u_i - U_i^T a_i).
"""
cimport cython
from gear.algorithms._types cimport ModelC, Work, Lanes
from gear.algorithms._common cimport (forward_pass, base_acceleration, S_mul_add, St_mul,
                                      forward_lanes, _to_lane, _from_lane)
from gear.spatial._v4 cimport v4, splat, gather
from gear.spatial._lanes cimport (LANES, l_Ad_inv, l_dAd_inv_add, l_mat6_vec, l_bias_force,
                                  l_inertia_mat, l_congruence_Ad_inv_add, l_mat6_shared, l_dot_shared,
                                  l_dot, l_axpy, l_axpy_shared, l_rank1_sub)
from gear.spatial._spatial cimport (Ad_inv, dAd_inv, dad, inertia_mul, inertia_to_mat,
                                    mat6_vec, congruence_Ad_inv_add)
from gear.algorithms._dense cimport chol_inv
from gear.joints._jcalc cimport revolute_z, jcalc_lanes_kind


cdef inline int aba_joint(int n, bint rz, const double* S, const double* Ih, const double* tau,
                          double* t, double* U, double* Dinv, double* u, double* Pi,
                          bint with_Pi) noexcept nogil:
    """Table 3's step at a joint of ``n >= 1`` dof that is not prescribed:
    U_i = Ihat_i S_i, Psi_i = (S_i^T U_i)^{-1} (``Dinv``), u_i = tau_i -
    S_i^T t and t += U_i Psi_i u_i, where ``t`` comes in as Bhat_i + Ihat_i
    eta_i and leaves as beta_i; with ``with_Pi`` also Pi_i = Ihat_i - U_i
    Psi_i U_i^T.  ``rz``: S = e_3 (``revolute_z``), written out.  Returns 0,
    or 1 if S^T Ihat S is singular."""
    cdef int r, c, k
    cdef double D[36]
    cdef double x[6]
    cdef double W[36]
    if n == 1:
        # the common one-dof joint, written out: U_i and Psi_i scalar
        if rz:
            # S = e_3: U_i is column 3 of Ihat_i (symmetric: row 3)
            for r in range(6):
                U[r] = Ih[12 + r]
            D[0] = Ih[14]
            u[0] = tau[0] - t[2]
        else:
            mat6_vec(Ih, S, U)
            D[0] = (S[0] * U[0] + S[1] * U[1] + S[2] * U[2]
                    + S[3] * U[3] + S[4] * U[4] + S[5] * U[5])
            u[0] = tau[0] - (S[0] * t[0] + S[1] * t[1] + S[2] * t[2]
                             + S[3] * t[3] + S[4] * t[4] + S[5] * t[5])
        if not (D[0] > 0.0):
            return 1
        Dinv[0] = 1.0 / D[0]
        x[0] = Dinv[0] * u[0]
        for r in range(6):
            t[r] += U[r] * x[0]
        if with_Pi:
            # Pi_i = Ihat_i - U_i Psi_i U_i^T, with W = U_i Psi_i
            for r in range(6):
                W[r] = U[r] * Dinv[0]
                for c in range(r, 6):
                    Pi[6 * r + c] = Ih[6 * r + c] - W[r] * U[c]
                    Pi[6 * c + r] = Pi[6 * r + c]
        return 0
    for c in range(n):
        mat6_vec(Ih, S + 6 * c, U + 6 * c)
    for r in range(n):
        for c in range(n):
            D[r * n + c] = (S[6 * r] * U[6 * c] + S[6 * r + 1] * U[6 * c + 1]
                            + S[6 * r + 2] * U[6 * c + 2] + S[6 * r + 3] * U[6 * c + 3]
                            + S[6 * r + 4] * U[6 * c + 4] + S[6 * r + 5] * U[6 * c + 5])
    if chol_inv(D, n, Dinv) != 0:
        return 1
    # u_i = tau_i - S_i^T (Ihat_i eta_i + Bhat_i)
    St_mul(S, n, t, u)
    for c in range(n):
        u[c] = tau[c] - u[c]
    # x = Psi_i u_i;  beta_i += U_i x
    for r in range(n):
        x[r] = 0.0
        for c in range(n):
            x[r] += Dinv[r * n + c] * u[c]
    S_mul_add(U, n, x, t)
    if with_Pi:
        for r in range(6):
            for c in range(n):
                W[6 * c + r] = 0.0
                for k in range(n):
                    W[6 * c + r] += U[6 * k + r] * Dinv[k * n + c]
        for r in range(6):
            for c in range(r, 6):
                Pi[6 * r + c] = Ih[6 * r + c]
                for k in range(n):
                    Pi[6 * r + c] -= W[6 * k + r] * U[6 * k + c]
                Pi[6 * c + r] = Pi[6 * r + c]
    return 0


cdef inline void hybrid_prescribed_beta(int n, const double* S, const double* Ih, const double* ddq,
                                        double* t, double* U) noexcept nogil:
    # a prescribed joint (Table 4): Pi_i = Ihat_i and, with U_i = Ihat_i S_i,
    # beta_i = t + U_i ddq_i where t comes in as Bhat_i + Ihat_i eta_i
    cdef int r, c
    for c in range(n):
        mat6_vec(Ih, S + 6 * c, U + 6 * c)
    for c in range(n):
        for r in range(6):
            t[r] += U[6 * c + r] * ddq[c]


cdef inline void aba_joint_accel(int n, const double* U, const double* Dinv, const double* u,
                                 const double* a, double* ddq) noexcept nogil:
    # ddq_i = Psi_i (u_i - U_i^T a_i)   (eq. 45), written out for one dof
    cdef double x[6]
    cdef int r, c
    if n == 1:
        ddq[0] = Dinv[0] * (u[0] - (U[0] * a[0] + U[1] * a[1] + U[2] * a[2]
                                    + U[3] * a[3] + U[4] * a[4] + U[5] * a[5]))
        return
    St_mul(U, n, a, x)
    for r in range(n):
        x[r] = u[r] - x[r]
    for r in range(n):
        ddq[r] = 0.0
        for c in range(n):
            ddq[r] += Dinv[r * n + c] * x[c]


cdef inline int hybrid(const ModelC* m, const double* q, const double* dq,
                       double* ddq, double* tau, const unsigned char* prescribed,
                       const double* fext, Work* w) noexcept nogil:
    """Hybrid dynamics in place: on prescribed joints ``ddq`` is read and
    ``tau`` written; elsewhere ``tau`` is read and ``ddq`` written.
    ``prescribed`` NULL means none (forward dynamics).  ``dq`` and ``fext``
    may be NULL.  Returns 0, or 1 + i if joint i's articulated inertia
    S^T Ihat S is singular."""
    cdef int i, p, n, r, c, iv
    cdef double IV[6]
    cdef double t[6]
    cdef double dV0[6]
    cdef double a[6]
    cdef double Pi[36]
    cdef double* Ih
    cdef double* Bh
    cdef double* S
    cdef double* U
    cdef double* Dinv
    cdef double* u
    cdef double* eta
    cdef double* dV
    cdef bint pres
    forward_pass(m, q, dq, w, True)
    for i in range(m.nb):
        inertia_to_mat(m.inertia + 10 * i, w.Ih + 36 * i)
        Bh = w.Bh + 6 * i
        inertia_mul(m.inertia + 10 * i, w.V + 6 * i, IV)
        dad(w.V + 6 * i, IV, Bh)
        for r in range(6):
            Bh[r] = -Bh[r]
        if fext != NULL:
            for r in range(6):
                Bh[r] -= fext[6 * i + r]
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        n = m.nvi[i]
        iv = m.iv[i]
        Ih = w.Ih + 36 * i
        Bh = w.Bh + 6 * i
        S = w.S + 36 * i
        U = w.U + 36 * i
        Dinv = w.Dinv + 36 * i
        u = w.u + 6 * i
        eta = w.eta + 6 * i
        pres = prescribed != NULL and prescribed[i]
        # beta (in t) starts as Bhat_i + Ihat_i eta_i
        mat6_vec(Ih, eta, t)
        for r in range(6):
            t[r] += Bh[r]
        if pres:
            hybrid_prescribed_beta(n, S, Ih, ddq + iv, t, U)
        elif n > 0:
            if aba_joint(n, revolute_z(m.jtype[i], m.jparam + 10 * i), S, Ih, tau + iv, t, U, Dinv, u,
                         Pi, p >= 0) != 0:
                return 1 + i
        if p >= 0:
            dAd_inv(w.T + 12 * i, t, IV)
            for r in range(6):
                w.Bh[6 * p + r] += IV[r]
            # Ihat_p += Ad*_{T^-1} Pi_i Ad_{T^-1}  (eq. 49)
            if pres or n == 0:
                congruence_Ad_inv_add(w.T + 12 * i, Ih, w.Ih + 36 * p)
            else:
                congruence_Ad_inv_add(w.T + 12 * i, Pi, w.Ih + 36 * p)
    base_acceleration(m, True, dV0)
    for i in range(m.nb):
        p = m.parent[i]
        n = m.nvi[i]
        iv = m.iv[i]
        S = w.S + 36 * i
        U = w.U + 36 * i
        dV = w.dV + 6 * i
        if p >= 0:
            Ad_inv(w.T + 12 * i, w.dV + 6 * p, a)
        else:
            Ad_inv(w.T + 12 * i, dV0, a)
        pres = prescribed != NULL and prescribed[i]
        if not pres and n > 0:
            aba_joint_accel(n, U, w.Dinv + 36 * i, w.u + 6 * i, a, ddq + iv)
        for r in range(6):
            dV[r] = a[r] + w.eta[6 * i + r]
        S_mul_add(S, n, ddq + iv, dV)
        if pres:
            # tau_i = S_i^T F_i, F_i = Ihat_i dV_i + Bhat_i  (Table 4)
            mat6_vec(w.Ih + 36 * i, dV, t)
            for r in range(6):
                t[r] += w.Bh[6 * i + r]
            St_mul(S, n, t, tau + iv)
    return 0


@cython.cdivision(True)
cdef inline int hybrid_lanes(const ModelC* m, const double* q, const double* dq,
                             double* ddq, double* tau, Py_ssize_t so,
                             const unsigned char* prescribed, const double* fext,
                             Lanes* w) noexcept nogil:
    """``hybrid`` on ``LANES`` consecutive states of a batch at once: lane
    ``l`` reads ``q + l nq``, ``dq + l nv``, ``fext + l 6 nb`` (``dq``,
    ``fext`` may be NULL) and, in place as ``hybrid`` does, ``ddq + l so``
    and ``tau + l so`` (``prescribed`` NULL: forward dynamics, Table 3).
    The first pass is ``forward_lanes``; Kim's eqs. (49), (50) and (45)
    and Table 4's prescribed joints run on all lanes at once, the joint
    step (``aba_joint``) too for the joints ``jcalc_placed_lanes`` covers
    and lane by lane for the others.  The arithmetic is ``hybrid``'s, term
    for term: the results are the same bits.  Returns 0, or 1 + i if some
    lane's S^T Ihat S is singular at joint i (the caller then runs the
    states one by one for each one's status)."""
    cdef int i, p, n, l, r, c, iv
    cdef double* T
    cdef double* Ih
    cdef double* eta
    cdef double* S
    cdef double* U
    cdef double* Dinv
    cdef double* u
    cdef double* t = w.t
    cdef double* P
    cdef double* a
    cdef double* dV
    cdef double Ihs[36]
    cdef double ts[6]
    cdef double Ps[36]
    cdef double x[6]
    cdef double D[LANES]
    cdef double y[LANES]
    cdef bint pres
    forward_lanes(m, q, dq, NULL, w)
    for i in range(m.nb):
        l_inertia_mat(m.inertia + 10 * i, w.Ih + 36 * LANES * i)
        l_bias_force(m.inertia + 10 * i, w.V + 6 * LANES * i, fext + 6 * i if fext != NULL else NULL,
                     6 * m.nb, w.Bh + 6 * LANES * i)
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        n = m.nvi[i]
        iv = m.iv[i]
        T = w.T + 12 * LANES * i
        Ih = w.Ih + 36 * LANES * i
        eta = w.eta + 6 * LANES * i
        # beta (in t) starts as Bhat_i + Ihat_i eta_i
        l_mat6_vec(Ih, eta, t)
        for r in range(6 * LANES):
            t[r] += w.Bh[6 * LANES * i + r]
        P = Ih                       # Pi_i = Ihat_i for a fixed or prescribed joint
        pres = prescribed != NULL and prescribed[i]
        if pres and n > 0 and jcalc_lanes_kind(m.jtype[i]):
            # beta_i = Bhat_i + Ihat_i (eta_i + S_i ddq_i)   (Table 4)
            U = w.U + 6 * LANES * i
            l_mat6_shared(Ih, w.S + 36 * i, U)
            (<v4*> y)[0] = gather(ddq + iv, so)
            l_axpy(U, y, t)
        elif pres and n > 0:
            for l in range(LANES):
                for r in range(36):
                    Ihs[r] = Ih[r * LANES + l]
                _from_lane(t, ts, l)
                hybrid_prescribed_beta(n, w.S + 36 * (l * m.nb + i), Ihs, ddq + l * so + iv, ts,
                                       w.Us + 36 * (l * m.nb + i))
                _to_lane(ts, 6, t, l)
        elif n > 0 and jcalc_lanes_kind(m.jtype[i]):
            # aba_joint for one dof on all lanes: S shared, U_i in lanes
            S = w.S + 36 * i
            U = w.U + 6 * LANES * i
            Dinv = w.Dinv + LANES * i
            u = w.u + LANES * i
            l_mat6_shared(Ih, S, U)
            l_dot_shared(S, U, D)
            l_dot_shared(S, t, y)
            (<v4*> u)[0] = gather(tau + iv, so) - (<v4*> y)[0]
            for l in range(LANES):
                if not (D[l] > 0.0):
                    return 1 + i
            (<v4*> Dinv)[0] = splat(1.0) / (<v4*> D)[0]
            (<v4*> y)[0] = (<v4*> Dinv)[0] * (<v4*> u)[0]
            l_axpy(U, y, t)
            if p >= 0:
                P = w.Pi
                l_rank1_sub(Ih, U, Dinv, P)
        elif n > 0:
            P = w.Pi
            for l in range(LANES):
                for r in range(36):
                    Ihs[r] = Ih[r * LANES + l]
                _from_lane(t, ts, l)
                if aba_joint(n, revolute_z(m.jtype[i], m.jparam + 10 * i), w.S + 36 * (l * m.nb + i), Ihs,
                             tau + l * so + iv, ts, w.Us + 36 * (l * m.nb + i),
                             w.Dinvs + 36 * (l * m.nb + i), w.us + 6 * (l * m.nb + i), Ps, p >= 0) != 0:
                    return 1 + i
                _to_lane(ts, 6, t, l)
                if p >= 0:
                    _to_lane(Ps, 36, P, l)
        if p >= 0:
            l_dAd_inv_add(T, t, w.Bh + 6 * LANES * p)
            l_congruence_Ad_inv_add(T, P, w.Ih + 36 * LANES * p)
    base_acceleration(m, True, x)
    for r in range(6):
        (<v4*> w.dV0)[r] = splat(x[r])
    a = w.t
    for i in range(m.nb):
        p = m.parent[i]
        n = m.nvi[i]
        iv = m.iv[i]
        dV = w.dV + 6 * LANES * i
        eta = w.eta + 6 * LANES * i
        l_Ad_inv(w.T + 12 * LANES * i, w.dV + 6 * LANES * p if p >= 0 else w.dV0, a)
        for r in range(6 * LANES):
            dV[r] = a[r] + eta[r]
        pres = prescribed != NULL and prescribed[i]
        if pres and n > 0 and jcalc_lanes_kind(m.jtype[i]):
            # dV_i += S_i ddq_i;  tau_i = S_i^T (Ihat_i dV_i + Bhat_i)   (Table 4)
            S = w.S + 36 * i
            (<v4*> y)[0] = gather(ddq + iv, so)
            l_axpy_shared(S, y, dV)
            l_mat6_vec(w.Ih + 36 * LANES * i, dV, w.Pi)
            for r in range(6 * LANES):
                w.Pi[r] += w.Bh[6 * LANES * i + r]
            l_dot_shared(S, w.Pi, y)
            for l in range(LANES):
                tau[l * so + iv] = y[l]
        elif pres and n > 0:
            for l in range(LANES):
                _from_lane(dV, x, l)
                S_mul_add(w.S + 36 * (l * m.nb + i), n, ddq + l * so + iv, x)
                _to_lane(x, 6, dV, l)
            l_mat6_vec(w.Ih + 36 * LANES * i, dV, w.Pi)
            for r in range(6 * LANES):
                w.Pi[r] += w.Bh[6 * LANES * i + r]
            for l in range(LANES):
                _from_lane(w.Pi, x, l)
                St_mul(w.S + 36 * (l * m.nb + i), n, x, tau + l * so + iv)
        elif n > 0 and jcalc_lanes_kind(m.jtype[i]):
            # eq. (45) for one dof on all lanes, then dV_i += S_i ddq_i
            S = w.S + 36 * i
            U = w.U + 6 * LANES * i
            Dinv = w.Dinv + LANES * i
            u = w.u + LANES * i
            l_dot(U, a, y)
            (<v4*> y)[0] = (<v4*> Dinv)[0] * ((<v4*> u)[0] - (<v4*> y)[0])
            for l in range(LANES):
                ddq[l * so + iv] = y[l]
            l_axpy_shared(S, y, dV)
        elif n > 0:
            for l in range(LANES):
                _from_lane(a, ts, l)
                aba_joint_accel(n, w.Us + 36 * (l * m.nb + i), w.Dinvs + 36 * (l * m.nb + i),
                                w.us + 6 * (l * m.nb + i), ts, ddq + l * so + iv)
                _from_lane(dV, x, l)
                S_mul_add(w.S + 36 * (l * m.nb + i), n, ddq + l * so + iv, x)
                _to_lane(x, 6, dV, l)
    return 0

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
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._common cimport forward_pass, base_acceleration, S_mul_add, St_mul
from gear.spatial._spatial cimport (Ad_inv, dAd_inv, dad, inertia_mul, inertia_to_mat,
                                    mat6_vec, congruence_Ad_inv_add)
from gear.algorithms._dense cimport chol_inv
from gear.joints._jcalc cimport revolute_z


cdef inline int hybrid(const ModelC* m, const double* q, const double* dq,
                       double* ddq, double* tau, const unsigned char* prescribed,
                       const double* fext, Work* w) noexcept nogil:
    """Hybrid dynamics in place: on prescribed joints ``ddq`` is read and
    ``tau`` written; elsewhere ``tau`` is read and ``ddq`` written.
    ``prescribed`` NULL means none (forward dynamics).  ``dq`` and ``fext``
    may be NULL.  Returns 0, or 1 + i if joint i's articulated inertia
    S^T Ihat S is singular."""
    cdef int i, p, n, r, c, k, iv
    cdef double IV[6]
    cdef double t[6]
    cdef double dV0[6]
    cdef double a[6]
    cdef double D[36]
    cdef double x[6]
    cdef double W[36]
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
            # Pi_i = Ihat_i; beta_i = Bhat_i + Ihat_i (eta_i + S_i ddq_i)
            for c in range(n):
                mat6_vec(Ih, S + 6 * c, U + 6 * c)
            for c in range(n):
                for r in range(6):
                    t[r] += U[6 * c + r] * ddq[iv + c]
        elif n == 1:
            # the common one-dof joint, written out: U_i and Psi_i scalar
            if revolute_z(m.jtype[i], m.jparam + 10 * i):
                # S = e_3: U_i is column 3 of Ihat_i (symmetric: row 3)
                for r in range(6):
                    U[r] = Ih[12 + r]
                D[0] = Ih[14]
                u[0] = tau[iv] - t[2]
            else:
                mat6_vec(Ih, S, U)
                D[0] = (S[0] * U[0] + S[1] * U[1] + S[2] * U[2]
                        + S[3] * U[3] + S[4] * U[4] + S[5] * U[5])
                u[0] = tau[iv] - (S[0] * t[0] + S[1] * t[1] + S[2] * t[2]
                                  + S[3] * t[3] + S[4] * t[4] + S[5] * t[5])
            if not (D[0] > 0.0):
                return 1 + i
            Dinv[0] = 1.0 / D[0]
            x[0] = Dinv[0] * u[0]
            for r in range(6):
                t[r] += U[r] * x[0]
        elif n > 0:
            for c in range(n):
                mat6_vec(Ih, S + 6 * c, U + 6 * c)
            for r in range(n):
                for c in range(n):
                    D[r * n + c] = (S[6 * r] * U[6 * c] + S[6 * r + 1] * U[6 * c + 1]
                                    + S[6 * r + 2] * U[6 * c + 2] + S[6 * r + 3] * U[6 * c + 3]
                                    + S[6 * r + 4] * U[6 * c + 4] + S[6 * r + 5] * U[6 * c + 5])
            if chol_inv(D, n, Dinv) != 0:
                return 1 + i
            # u_i = tau_i - S_i^T (Ihat_i eta_i + Bhat_i)
            St_mul(S, n, t, u)
            for c in range(n):
                u[c] = tau[iv + c] - u[c]
            # x = Psi_i u_i;  beta_i += U_i x
            for r in range(n):
                x[r] = 0.0
                for c in range(n):
                    x[r] += Dinv[r * n + c] * u[c]
            S_mul_add(U, n, x, t)
        if p >= 0:
            dAd_inv(w.T + 12 * i, t, IV)
            for r in range(6):
                w.Bh[6 * p + r] += IV[r]
            # Ihat_p += Ad*_{T^-1} Pi_i Ad_{T^-1}  (eq. 49)
            if pres or n == 0:
                congruence_Ad_inv_add(w.T + 12 * i, Ih, w.Ih + 36 * p)
            else:
                # Pi_i = Ihat_i - U_i Psi_i U_i^T, with W = U_i Psi_i
                if n == 1:
                    for r in range(6):
                        W[r] = U[r] * Dinv[0]
                        for c in range(r, 6):
                            Pi[6 * r + c] = Ih[6 * r + c] - W[r] * U[c]
                            Pi[6 * c + r] = Pi[6 * r + c]
                else:
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
        if not pres and n == 1:
            # eq. (45) for a one-dof joint
            ddq[iv] = w.Dinv[36 * i] * (w.u[6 * i] - (U[0] * a[0] + U[1] * a[1] + U[2] * a[2]
                                                        + U[3] * a[3] + U[4] * a[4] + U[5] * a[5]))
        elif not pres and n > 0:
            # ddq_i = Psi_i (u_i - U_i^T a_i)   (eq. 45)
            St_mul(U, n, a, x)
            for r in range(n):
                x[r] = w.u[6 * i + r] - x[r]
            for r in range(n):
                ddq[iv + r] = 0.0
                for c in range(n):
                    ddq[iv + r] += w.Dinv[36 * i + r * n + c] * x[c]
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

# cython: language_level=3
"""Recursive Newton-Euler inverse dynamics, Kim Table 2 (eqs. 37, 41, 42).

    forward:  V_i  = Ad_{T^{-1}_{lambda(i),i}} V_{lambda(i)} + S_i dq_i
              dV_i = Ad_{T^{-1}_{lambda(i),i}} dV_{lambda(i)} + ad_{V_i} S_i dq_i
                     + dS_i dq_i + S_i ddq_i,        dV_0 = (0, -g)
    backward: F_i  = I_i dV_i - ad*_{V_i} I_i V_i - F_i^ext
                     + sum_{k in mu(i)} Ad*_{T^{-1}_{i,k}} F_k
              tau_i = S_i^T F_i
"""
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._common cimport forward_pass, base_acceleration, S_mul_add, St_mul
from gear.spatial._spatial cimport Ad_inv, dAd_inv, dad, inertia_mul


cdef inline int rnea(const ModelC* m, const double* q, const double* dq,
                     const double* ddq, const double* fext, bint gravity,
                     double* tau, Work* w) noexcept nogil:
    """tau = RNEA(q, dq, ddq); ``dq``, ``ddq``, ``fext`` may be NULL (zero)."""
    cdef int i, p, r
    cdef double dV0[6]
    cdef double IV[6]
    cdef double t[6]
    cdef double* dV
    cdef double* F
    forward_pass(m, q, dq, w, True)
    base_acceleration(m, gravity, dV0)
    for i in range(m.nb):
        p = m.parent[i]
        dV = w.dV + 6 * i
        F = w.F + 6 * i
        if p >= 0:
            Ad_inv(w.T + 12 * i, w.dV + 6 * p, dV)
        else:
            Ad_inv(w.T + 12 * i, dV0, dV)
        for r in range(6):
            dV[r] += w.eta[6 * i + r]
        if ddq != NULL:
            S_mul_add(w.S + 36 * i, m.nvi[i], ddq + m.iv[i], dV)
        # F_i = I_i dV_i - ad*_{V_i} I_i V_i - F_i^ext   (eq. 42, children added below)
        inertia_mul(m.inertia + 10 * i, dV, F)
        inertia_mul(m.inertia + 10 * i, w.V + 6 * i, IV)
        dad(w.V + 6 * i, IV, t)
        for r in range(6):
            F[r] -= t[r]
        if fext != NULL:
            for r in range(6):
                F[r] -= fext[6 * i + r]
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        St_mul(w.S + 36 * i, m.nvi[i], w.F + 6 * i, tau + m.iv[i])
        if p >= 0:
            dAd_inv(w.T + 12 * i, w.F + 6 * i, t)
            for r in range(6):
                w.F[6 * p + r] += t[r]
    return 0

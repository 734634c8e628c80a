# cython: language_level=3
"""Recursive Newton-Euler inverse dynamics, Kim Table 2 (eqs. 37, 41, 42).

    forward:  V_i  = Ad_{T^{-1}_{lambda(i),i}} V_{lambda(i)} + S_i dq_i
              dV_i = Ad_{T^{-1}_{lambda(i),i}} dV_{lambda(i)} + ad_{V_i} S_i dq_i
                     + dS_i dq_i + S_i ddq_i,        dV_0 = (0, -g)
    backward: F_i  = I_i dV_i - ad*_{V_i} I_i V_i - F_i^ext
                     + sum_{k in mu(i)} Ad*_{T^{-1}_{i,k}} F_k
              tau_i = S_i^T F_i
"""
from gear.algorithms._types cimport ModelC, Work, Lanes
from gear.algorithms._common cimport (forward_pass, base_acceleration, S_mul_add, St_mul,
                                      forward_lanes, _to_lane, _from_lane, _St_lanes)
from gear.spatial._spatial cimport Ad_inv, dAd_inv, dad, inertia_mul
from gear.spatial._v4 cimport v4, splat, gather
from gear.spatial._lanes cimport LANES, l_Ad_inv, l_dAd_inv_add, l_inertia_force
from gear.joints._jcalc cimport jcalc_lanes_kind


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


cdef inline int rnea_lanes(const ModelC* m, const double* q, const double* dq,
                           const double* ddq, const double* fext, bint gravity,
                           double* tau, Py_ssize_t so, Lanes* w) noexcept nogil:
    """``rnea`` on ``LANES`` consecutive states of a batch at once (lane
    ``l``: ``q + l nq``, ``dq`` and ``ddq + l nv``, ``fext + l 6 nb``,
    ``tau + l so``): the joint switch and the first pass (``forward_lanes``),
    then the second on all lanes at once (``_lanes.pxd``).  The arithmetic
    is ``rnea``'s, term for term: the results are the same bits."""
    cdef int i, p, l, r
    cdef double* T
    cdef double* V
    cdef double* dV
    cdef double* F
    cdef double x[6]
    forward_lanes(m, q, dq, ddq, w)
    base_acceleration(m, gravity, x)
    for r in range(6):
        (<v4*> w.dV0)[r] = splat(x[r])
    for i in range(m.nb):
        p = m.parent[i]
        T = w.T + 12 * LANES * i
        V = w.V + 6 * LANES * i
        dV = w.dV + 6 * LANES * i
        F = w.F + 6 * LANES * i
        # dV_i = Ad_{T^-1} dV_parent + eta_i + S_i ddq_i   (eq. 41)
        l_Ad_inv(T, w.dV + 6 * LANES * p if p >= 0 else w.dV0, dV)
        for r in range(6 * LANES):
            dV[r] += w.eta[6 * LANES * i + r]
        if m.nvi[i] == 1:
            for r in range(6 * LANES):
                dV[r] += w.Sddq[6 * LANES * i + r]
        elif ddq != NULL:
            # column by column, as rnea adds them
            for l in range(LANES):
                _from_lane(dV, x, l)
                S_mul_add(w.S + 36 * (l * m.nb + i), m.nvi[i], ddq + l * m.nv + m.iv[i], x)
                _to_lane(x, 6, dV, l)
        # F_i = I_i dV_i - ad*_{V_i} I_i V_i - F_i^ext   (eq. 42, children added below)
        l_inertia_force(m.inertia + 10 * i, V, dV, F)
        if fext != NULL:
            for l in range(LANES):
                for r in range(6):
                    F[r * LANES + l] -= fext[l * 6 * m.nb + 6 * i + r]
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        F = w.F + 6 * LANES * i
        if p >= 0:
            l_dAd_inv_add(w.T + 12 * LANES * i, F, w.F + 6 * LANES * p)
        if jcalc_lanes_kind(m.jtype[i]):
            _St_lanes(w.S + 36 * i, F, tau + m.iv[i], so)
            continue
        for l in range(LANES):
            _from_lane(F, x, l)
            St_mul(w.S + 36 * (l * m.nb + i), m.nvi[i], x, tau + l * so + m.iv[i])
    return 0

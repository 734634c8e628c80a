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
from gear.algorithms._common cimport forward_pass, base_acceleration, S_mul, S_mul_add, St_mul
from gear.spatial._spatial cimport Ad_inv, dAd_inv, dad, inertia_mul
from gear.spatial._lanes cimport LANES, l_Ad_inv, l_dAd_inv_add, l_ad, l_inertia_force
from gear.joints._jcalc cimport jcalc_placed, jcalc_dS, jcalc_has_dS, jcalc_lanes_kind, jcalc_placed_lanes


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


cdef inline void _to_lane(const double* x, int n, double* out, int l) noexcept nogil:
    cdef int r
    for r in range(n):
        out[r * LANES + l] = x[r]


cdef inline void _from_lane(const double* x, double* out, int l) noexcept nogil:
    # lane l of a twist or wrench
    cdef int r
    for r in range(6):
        out[r] = x[r * LANES + l]


cdef inline void joint_lanes(const ModelC* m, const double* q, const double* dq,
                             const double* ddq, Lanes* w) noexcept nogil:
    """The joint switch of every body for ``LANES`` consecutive states:
    ``T_i``, ``S_i``, ``S_i dq_i`` and, for one-dof joints, ``S_i ddq_i``
    into the lane layout (``dq``, ``ddq`` may be NULL: zero).  Joints of
    ``jcalc_lanes_kind`` on all lanes at once (their S, shared, is lane
    0's), the others lane by lane."""
    cdef int i, l, r, n
    cdef double* S
    cdef double Tl[12]
    cdef double x[6]
    cdef double ql[LANES]
    for i in range(m.nb):
        n = m.nvi[i]
        if jcalc_lanes_kind(m.jtype[i]):
            S = w.S + 36 * i
            for l in range(LANES):
                ql[l] = q[l * m.nq + m.iq[i]]
            jcalc_placed_lanes(m.jtype[i], m.jparam + 10 * i, ql, m.Xtree + 12 * i,
                               w.T + 12 * LANES * i, S)
            _S_lanes(S, dq, m.nv, m.iv[i], w.Sdq + 6 * LANES * i)
            _S_lanes(S, ddq, m.nv, m.iv[i], w.Sddq + 6 * LANES * i)
            continue
        for l in range(LANES):
            S = w.S + 36 * (l * m.nb + i)
            jcalc_placed(m.jtype[i], m.jparam + 10 * i, q + l * m.nq + m.iq[i], m.Xtree + 12 * i, Tl, S)
            _to_lane(Tl, 12, w.T + 12 * LANES * i, l)
            for r in range(6):
                x[r] = 0.0
            if dq != NULL:
                S_mul(S, n, dq + l * m.nv + m.iv[i], x)
            _to_lane(x, 6, w.Sdq + 6 * LANES * i, l)
            for r in range(6):
                x[r] = 0.0
            if ddq != NULL and n == 1:
                S_mul(S, n, ddq + l * m.nv + m.iv[i], x)
            _to_lane(x, 6, w.Sddq + 6 * LANES * i, l)


cdef inline void _S_lanes(const double* S, const double* x, int nv, int iv, double* out) noexcept nogil:
    # out = S x_l on every lane, S a constant 6-vector, x_l = x[l nv + iv] (x NULL: zero)
    cdef int l, r
    cdef double xl[LANES]
    for l in range(LANES):
        xl[l] = x[l * nv + iv] if x != NULL else 0.0
    for r in range(6):
        for l in range(LANES):
            out[r * LANES + l] = S[r] * xl[l]


cdef inline void _St_lanes(const double* S, const double* F, double* out, Py_ssize_t so) noexcept nogil:
    # out[l so] = S^T F_l on every lane, S a constant 6-vector (St_mul's sum order)
    cdef int l
    cdef double t[LANES]
    for l in range(LANES):
        t[l] = (S[0] * F[0 * LANES + l] + S[1] * F[1 * LANES + l] + S[2] * F[2 * LANES + l]
                + S[3] * F[3 * LANES + l] + S[4] * F[4 * LANES + l] + S[5] * F[5 * LANES + l])
    for l in range(LANES):
        out[l * so] = t[l]


cdef inline int rnea_lanes(const ModelC* m, const double* q, const double* dq,
                           const double* ddq, const double* fext, bint gravity,
                           double* tau, Py_ssize_t so, Lanes* w) noexcept nogil:
    """``rnea`` on ``LANES`` consecutive states of a batch at once (lane
    ``l``: ``q + l nq``, ``dq`` and ``ddq + l nv``, ``fext + l 6 nb``,
    ``tau + l so``): the joint switch lane by lane (``joint_lanes``), then
    the recursion on all lanes at once (``_lanes.pxd``), Kim's two passes
    with the first fused into the second (body i's V, eta, dV and F need
    only its parent's).  The arithmetic is ``rnea``'s, term for term: the
    results are the same bits."""
    cdef int i, p, l, r
    cdef double* T
    cdef double* V
    cdef double* dV
    cdef double* F
    cdef double* Sdq
    cdef double x[6]
    cdef double dS[36]
    joint_lanes(m, q, dq, ddq, w)
    base_acceleration(m, gravity, x)
    for l in range(LANES):
        _to_lane(x, 6, w.dV0, l)
    for i in range(m.nb):
        p = m.parent[i]
        T = w.T + 12 * LANES * i
        V = w.V + 6 * LANES * i
        dV = w.dV + 6 * LANES * i
        F = w.F + 6 * LANES * i
        Sdq = w.Sdq + 6 * LANES * i
        # V_i = Ad_{T^-1} V_parent + S_i dq_i   (eq. 37)
        if p >= 0:
            l_Ad_inv(T, w.V + 6 * LANES * p, V)
            for r in range(6 * LANES):
                V[r] += Sdq[r]
        else:
            for r in range(6 * LANES):
                V[r] = Sdq[r]
        # eta_i = ad_{V_i} S_i dq_i + dS_i dq_i   (Table 3)
        l_ad(V, Sdq, w.eta)
        if dq != NULL and jcalc_has_dS(m.jtype[i]):
            for l in range(LANES):
                _from_lane(w.eta, x, l)
                jcalc_dS(m.jtype[i], m.jparam + 10 * i, q + l * m.nq + m.iq[i], dq + l * m.nv + m.iv[i],
                         w.S + 36 * (l * m.nb + i), dS)
                S_mul_add(dS, m.nvi[i], dq + l * m.nv + m.iv[i], x)
                _to_lane(x, 6, w.eta, l)
        # dV_i = Ad_{T^-1} dV_parent + eta_i + S_i ddq_i   (eq. 41)
        l_Ad_inv(T, w.dV + 6 * LANES * p if p >= 0 else w.dV0, dV)
        for r in range(6 * LANES):
            dV[r] += w.eta[r]
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

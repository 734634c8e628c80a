# cython: language_level=3
"""Pieces shared by the recursions: the first forward pass and small
matrix-vector products with a joint's S (6 x n, column-major), for one
state and for ``LANES`` states at once (the lane layout of
``gear/spatial/_lanes.pxd``)."""
from gear.algorithms._types cimport ModelC, Work, Lanes
from gear.spatial._spatial cimport Ad_inv, ad
from gear.spatial._lanes cimport LANES, l_Ad, l_Ad_inv, l_ad, l_dot_shared, l_se3_mul
from gear.spatial._v4 cimport v4, splat, gather
from gear.joints._jcalc cimport (jcalc_placed, jcalc_dS, jcalc_has_dS, jcalc_lanes_kind,
                                 jcalc_placed_lanes)


cdef inline void S_mul(const double* S, int n, const double* x, double* out) noexcept nogil:
    # out = S x  (6-vector)
    cdef int r, k
    for r in range(6):
        out[r] = 0.0
    for k in range(n):
        for r in range(6):
            out[r] += S[6 * k + r] * x[k]


cdef inline void S_mul_add(const double* S, int n, const double* x, double* out) noexcept nogil:
    # out += S x
    cdef int r, k
    for k in range(n):
        for r in range(6):
            out[r] += S[6 * k + r] * x[k]


cdef inline void St_mul(const double* S, int n, const double* F, double* out) noexcept nogil:
    # out = S^T F  (n-vector)
    cdef int k
    for k in range(n):
        out[k] = (S[6 * k] * F[0] + S[6 * k + 1] * F[1] + S[6 * k + 2] * F[2]
                  + S[6 * k + 3] * F[3] + S[6 * k + 4] * F[4] + S[6 * k + 5] * F[5])


cdef inline void forward_pass(const ModelC* m, const double* q, const double* dq,
                              Work* w, bint with_eta) noexcept nogil:
    """First forward recursion of Tables 2-4:

        T_{lambda(i),i} = placement_i J_i(q_i)
        V_i   = Ad_{T^{-1}_{lambda(i),i}} V_{lambda(i)} + S_i dq_i          (eq. 37)
        eta_i = ad_{V_i} S_i dq_i + dS_i dq_i                               (Table 3)

    ``dq`` may be NULL (zero velocity): then V = eta = 0.  With
    ``w.poses_ok`` (T and S already those of ``q``) the joint transforms
    are taken as they are, once.
    """
    cdef int i, p, n, r
    cdef double Sdq[6]
    cdef double dS[36]
    cdef double* T
    cdef double* S
    cdef double* V
    cdef bint poses = not w.poses_ok
    w.poses_ok = False
    for i in range(m.nb):
        p = m.parent[i]
        n = m.nvi[i]
        T = w.T + 12 * i
        S = w.S + 36 * i
        V = w.V + 6 * i
        if poses:
            jcalc_placed(m.jtype[i], m.jparam + 10 * i, q + m.iq[i], m.Xtree + 12 * i, T, S)
        if dq == NULL:
            for r in range(6):
                V[r] = 0.0
            if with_eta:
                for r in range(6):
                    w.eta[6 * i + r] = 0.0
            continue
        S_mul(S, n, dq + m.iv[i], Sdq)
        if p >= 0:
            Ad_inv(T, w.V + 6 * p, V)
            for r in range(6):
                V[r] += Sdq[r]
        else:
            for r in range(6):
                V[r] = Sdq[r]
        if with_eta:
            ad(V, Sdq, w.eta + 6 * i)
            if jcalc_has_dS(m.jtype[i]):
                jcalc_dS(m.jtype[i], m.jparam + 10 * i, q + m.iq[i], dq + m.iv[i], S, dS)
                S_mul_add(dS, n, dq + m.iv[i], w.eta + 6 * i)


cdef inline void base_acceleration(const ModelC* m, bint gravity, double* dV0) noexcept nogil:
    # gravity as a base acceleration: dV_0 = (0, -g)  (Kim footnote 6, Featherstone 5.3)
    dV0[0] = 0.0
    dV0[1] = 0.0
    dV0[2] = 0.0
    if gravity:
        dV0[3] = -m.g[0]
        dV0[4] = -m.g[1]
        dV0[5] = -m.g[2]
    else:
        dV0[3] = 0.0
        dV0[4] = 0.0
        dV0[5] = 0.0


# ---------------------------------------------------------------------------
# LANES states at once
# ---------------------------------------------------------------------------
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
    cdef double a[24 * LANES]
    for i in range(m.nb):
        n = m.nvi[i]
        if jcalc_lanes_kind(m.jtype[i]):
            S = w.S + 36 * i
            jcalc_placed_lanes(m.jtype[i], m.jparam + 10 * i, gather(q + m.iq[i], m.nq), m.Xtree + 12 * i,
                               w.T + 12 * LANES * i, S)
            _S_lanes(S, dq, m.nv, m.iv[i], w.Sdq + 6 * LANES * i)
            _S_lanes(S, ddq, m.nv, m.iv[i], w.Sddq + 6 * LANES * i)
            continue
        # lane by lane into one array per lane (a: T, S dq, S ddq), then
        # into the lane layout built in registers (see _v4.v4_set)
        for l in range(LANES):
            S = w.S + 36 * (l * m.nb + i)
            jcalc_placed(m.jtype[i], m.jparam + 10 * i, q + l * m.nq + m.iq[i], m.Xtree + 12 * i, a + 24 * l, S)
            for r in range(12):
                a[24 * l + 12 + r] = 0.0
            if dq != NULL:
                S_mul(S, n, dq + l * m.nv + m.iv[i], a + 24 * l + 12)
            if ddq != NULL and n == 1:
                S_mul(S, n, ddq + l * m.nv + m.iv[i], a + 24 * l + 18)
        for r in range(12):
            (<v4*> (w.T + 12 * LANES * i))[r] = gather(a + r, 24)
        for r in range(6):
            (<v4*> (w.Sdq + 6 * LANES * i))[r] = gather(a + 12 + r, 24)
            (<v4*> (w.Sddq + 6 * LANES * i))[r] = gather(a + 18 + r, 24)


cdef inline void _S_lanes(const double* S, const double* x, int nv, int iv, double* out) noexcept nogil:
    # out = S x_l on every lane, S a constant 6-vector, x_l = x[l nv + iv] (x NULL: zero)
    cdef v4 x4 = gather(x + iv, nv) if x != NULL else splat(0.0)
    cdef int r
    for r in range(6):
        (<v4*> out)[r] = S[r] * x4


cdef inline void _St_lanes(const double* S, const double* F, double* out, Py_ssize_t so) noexcept nogil:
    # out[l so] = S^T F_l on every lane, S a constant 6-vector
    cdef double t[LANES]
    cdef int l
    l_dot_shared(S, F, t)
    for l in range(LANES):
        out[l * so] = t[l]


cdef inline double* world_pose_lanes(const ModelC* m, int i, Lanes* w) noexcept nogil:
    """Body i's world pose T_{0,i} = T_{0,lambda(i)} T_{lambda(i),i} on
    every lane into ``w.Ih + 36 LANES i`` (its parent's already there, as
    ``crba_world`` and ``fk`` keep them in ``Work.Ih``); returns it."""
    cdef double* T0 = w.Ih + 36 * LANES * i
    cdef int r
    if m.parent[i] >= 0:
        l_se3_mul(w.Ih + 36 * LANES * m.parent[i], w.T + 12 * LANES * i, T0)
    else:
        for r in range(12 * LANES):
            T0[r] = w.T[12 * LANES * i + r]
    return T0


cdef inline void world_S_lanes(const ModelC* m, int i, const double* T0, double* U,
                               Lanes* w) noexcept nogil:
    """Body i's joint Jacobian in the world frame, column c = Ad_{T0} S_i[:, c]
    on every lane into ``U + 6 LANES c`` (S shared by the lanes for the
    kinds of ``jcalc_lanes_kind``, each lane's own otherwise)."""
    cdef v4 Sl[6]
    cdef int c, r
    for c in range(m.nvi[i]):
        for r in range(6):
            if jcalc_lanes_kind(m.jtype[i]):
                Sl[r] = splat(w.S[36 * i + 6 * c + r])
            else:
                Sl[r] = gather(w.S + 36 * i + 6 * c + r, 36 * m.nb)
        l_Ad(T0, <double*> Sl, U + 6 * LANES * c)



cdef inline void forward_lanes(const ModelC* m, const double* q, const double* dq,
                               const double* ddq, Lanes* w, bint with_eta=True) noexcept nogil:
    """``forward_pass`` on ``LANES`` consecutive states: the joint switch
    (``joint_lanes``), then V_i and (``with_eta``) eta_i of every body on
    all lanes at once, the same arithmetic term for term (``dS_i dq_i``
    lane by lane, column by column)."""
    cdef int i, p, l, r
    cdef double* V
    cdef double* Sdq
    cdef double* eta
    cdef double x[6]
    cdef double dS[36]
    joint_lanes(m, q, dq, ddq, w)
    for i in range(m.nb):
        p = m.parent[i]
        V = w.V + 6 * LANES * i
        Sdq = w.Sdq + 6 * LANES * i
        eta = w.eta + 6 * LANES * i
        # V_i = Ad_{T^-1} V_parent + S_i dq_i   (eq. 37)
        if p >= 0:
            l_Ad_inv(w.T + 12 * LANES * i, w.V + 6 * LANES * p, V)
            for r in range(6 * LANES):
                V[r] += Sdq[r]
        else:
            for r in range(6 * LANES):
                V[r] = Sdq[r]
        if not with_eta:
            continue
        # eta_i = ad_{V_i} S_i dq_i + dS_i dq_i   (Table 3)
        l_ad(V, Sdq, eta)
        if dq != NULL and jcalc_has_dS(m.jtype[i]):
            for l in range(LANES):
                _from_lane(eta, x, l)
                jcalc_dS(m.jtype[i], m.jparam + 10 * i, q + l * m.nq + m.iq[i], dq + l * m.nv + m.iv[i],
                         w.S + 36 * (l * m.nb + i), dS)
                S_mul_add(dS, m.nvi[i], dq + l * m.nv + m.iv[i], x)
                _to_lane(x, 6, eta, l)

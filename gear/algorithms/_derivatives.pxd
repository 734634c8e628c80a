# cython: language_level=3
"""Analytic derivatives of inverse dynamics, Kim Sec. 4 (Lemma 3, Corollaries
1-2, eqs. 81-91, Table 5).

For a scalar p (Table 5), with dh_i = T^{-1}_{lambda(i),i} dT_{lambda(i),i}/dp (eq. 89):

  forward:  dV_i  = Ad_{T^{-1}} dV_{lambda(i)} - ad_{dh_i} Ad_{T^{-1}} V_{lambda(i)}
                    + dS_i dq_i + S_i d(dq_i)
            ddV_i = Ad_{T^{-1}} ddV_{lambda(i)} - ad_{dh_i} Ad_{T^{-1}} dV_{lambda(i)}
                    + dS_i ddq_i + S_i d(ddq_i) + ad_{dV_i} S_i dq_i
                    + ad_{V_i} (dS_i dq_i + S_i d(dq_i)) + d(Sdot_i) dq_i + Sdot_i d(dq_i)
  backward: dF_i  = dI_i dV_i + I_i ddV_i - ad*_{dV_i} I_i V_i - ad*_{V_i} (dI_i V_i + I_i dV_i)
                    - dF_i^ext + sum_k Ad*_{T^{-1}_{i,k}} (dF_k - ad*_{dh_k} F_k)
            dtau_i = dS_i^T F_i + S_i^T dF_i

(``dV`` denotes the derivative of V and ``ddV`` that of the acceleration
dV; derivatives with respect to q are taken along the right perturbation
``T exp(eps S e_k)``, for which dh_i = S_i e_k by Corollary 2, eq. 90.)

``rnea_derivatives`` evaluates the columns p = q_k and p = dq_k for every k:
a column of joint j only changes bodies in j's subtree (eq. 91) and, in the
backward pass, a single wrench carried up j's ancestors.  In the world
frame each body's wrench derivative is linear in three twists of the
column, with coefficients that are sums over the subtree gathered once
per state (``_subtree_terms``), so each entry of the Jacobians costs two
short dot products (``_derivative_columns``).
``rnea_tangent`` evaluates one general direction (any mix of q, dq, ddq,
inertia, placement, gravity and external-force perturbations).
"""
from gear.algorithms._types cimport ModelC, Work, Lanes
from gear.algorithms._common cimport (S_mul, S_mul_add, St_mul, base_acceleration, world_pose_lanes,
                                      world_S_lanes)
from gear.algorithms._rnea cimport rnea, rnea_lanes
from gear.algorithms._crba cimport mass_from_composites, mass_from_composites_lanes
from gear.spatial._lanes cimport (LANES, l_Ad, l_ad, l_dad, l_cross3, l_dAd_inv_add, l_inertia_mul,
                                  l_inertia_to_parent, l_dot, l_scatter)
from gear.spatial._spatial cimport (Ad, Ad_inv, dAd_inv, ad, dad, inertia_mul, se3_mul,
                                    inertia_to_parent, cross3)
from gear.spatial._v4 cimport v4, splat, gather
from gear.joints._jcalc cimport jcalc, jcalc_dS, jcalc_has_dS, jcalc_dSdq, jcalc_ddSdq


cdef inline void _body_force_tangent(const double* I, const double* dI, const double* V,
                                     const double* dVel, const double* dAcc, const double* Acc,
                                     double* dF) noexcept nogil:
    # dF = dI Acc + I dAcc - ad*_{dVel} I V - ad*_V (dI V + I dVel)
    cdef double IV[6]
    cdef double t[6]
    cdef double u[6]
    cdef int r
    inertia_mul(I, dAcc, dF)
    inertia_mul(I, V, IV)
    dad(dVel, IV, t)
    inertia_mul(I, dVel, u)
    if dI != NULL:
        inertia_mul(dI, Acc, IV)
        for r in range(6):
            dF[r] += IV[r]
        inertia_mul(dI, V, IV)
        for r in range(6):
            u[r] += IV[r]
    for r in range(6):
        dF[r] -= t[r]
    dad(V, u, t)
    for r in range(6):
        dF[r] -= t[r]


cdef inline void _column_subtree(const ModelC* m, const double* q, const double* dq,
                                 const double* ddq, int j, int c, double* dtau_dq,
                                 double* dtau_ddq, Work* w) noexcept nogil:
    """Columns p = q_k and p = dq_k (k = iv_j + c) of Table 5 by forward
    propagation over the subtree of j in body coordinates.  Used for joints
    whose S depends on q (universal, planar); needs w.T, S, V, dV, F from
    RNEA and w.A."""
    cdef int nb = m.nb, nv = m.nv
    cdef int i, k, r, p, a, child, n
    cdef int nj = m.nvi[j]
    cdef double Sdq[6]
    cdef double xV[6]
    cdef double t[6]
    cdef double t2[6]
    cdef double dSc[36]
    cdef double ddSc[36]
    cdef double Sdot[36]
    cdef double dScdq[6]
    cdef double carry_q[6]
    cdef double carry_v[6]
    cdef double* Dq
    cdef double* Dv
    cdef double* Sc
    cdef bint hs = jcalc_has_dS(m.jtype[j])
    k = m.iv[j] + c
    Sc = w.S + 36 * j + 6 * c
    if hs:
        jcalc_dS(m.jtype[j], m.jparam + 10 * j, NULL, dq + m.iv[j], w.S + 36 * j, Sdot)
        jcalc_dSdq(m.jtype[j], m.jparam + 10 * j, w.S + 36 * j, c, dSc)
        jcalc_ddSdq(m.jtype[j], m.jparam + 10 * j, w.S + 36 * j, c, dq + m.iv[j], ddSc)
        S_mul(dSc, nj, dq + m.iv[j], dScdq)
    # forward over the subtree of j: D = [dVq, ddVq, dFq, dVv, ddVv, dFv]
    for i in range(j, nb):
        if not m.desc[j * nb + i]:
            continue
        n = m.nvi[i]
        Dq = w.D + 36 * i
        Dv = Dq + 18
        S_mul(w.S + 36 * i, n, dq + m.iv[i], Sdq)
        if i == j:
            for r in range(6):
                xV[r] = w.V[6 * i + r] - Sdq[r]
            # q direction (dh_j = S_c, eq. 90)
            ad(Sc, xV, Dq)
            ad(Sc, w.A + 6 * i, Dq + 6)
            for r in range(6):
                Dq[r] = -Dq[r]
                Dq[6 + r] = -Dq[6 + r]
            if hs:
                for r in range(6):
                    Dq[r] += dScdq[r]
                S_mul_add(dSc, nj, ddq + m.iv[j], Dq + 6)
                ad(w.V + 6 * i, dScdq, t)
                for r in range(6):
                    Dq[6 + r] += t[r]
                S_mul_add(ddSc, nj, dq + m.iv[j], Dq + 6)
            ad(Dq, Sdq, t)
            for r in range(6):
                Dq[6 + r] += t[r]
            # dq direction
            for r in range(6):
                Dv[r] = Sc[r]
            ad(Sc, Sdq, Dv + 6)
            ad(w.V + 6 * i, Sc, t)
            for r in range(6):
                Dv[6 + r] += t[r]
            if hs:
                for r in range(6):
                    Dv[6 + r] += dScdq[r] + Sdot[6 * c + r]
        else:
            p = m.parent[i]
            Ad_inv(w.T + 12 * i, w.D + 36 * p, Dq)
            Ad_inv(w.T + 12 * i, w.D + 36 * p + 6, Dq + 6)
            ad(Dq, Sdq, t)
            for r in range(6):
                Dq[6 + r] += t[r]
            Ad_inv(w.T + 12 * i, w.D + 36 * p + 18, Dv)
            Ad_inv(w.T + 12 * i, w.D + 36 * p + 24, Dv + 6)
            ad(Dv, Sdq, t)
            for r in range(6):
                Dv[6 + r] += t[r]
        _body_force_tangent(m.inertia + 10 * i, NULL, w.V + 6 * i, Dq, Dq + 6,
                            w.dV + 6 * i, Dq + 12)
        _body_force_tangent(m.inertia + 10 * i, NULL, w.V + 6 * i, Dv, Dv + 6,
                            w.dV + 6 * i, Dv + 12)
    # backward over the subtree
    for i in range(nb - 1, j - 1, -1):
        if not m.desc[j * nb + i]:
            continue
        n = m.nvi[i]
        Dq = w.D + 36 * i
        Dv = Dq + 18
        St_mul(w.S + 36 * i, n, Dq + 12, t)
        St_mul(w.S + 36 * i, n, Dv + 12, t2)
        for r in range(n):
            dtau_dq[(m.iv[i] + r) * nv + k] = t[r]
            dtau_ddq[(m.iv[i] + r) * nv + k] = t2[r]
        if i != j:
            p = m.parent[i]
            dAd_inv(w.T + 12 * i, Dq + 12, t)
            dAd_inv(w.T + 12 * i, Dv + 12, t2)
            for r in range(6):
                w.D[36 * p + 12 + r] += t[r]
                w.D[36 * p + 30 + r] += t2[r]
    # joint j itself: dS^T F and the -ad*_{S_c} F_j term of eq. (88)
    Dq = w.D + 36 * j
    if hs:
        St_mul(dSc, nj, w.F + 6 * j, t)
        for r in range(nj):
            dtau_dq[(m.iv[j] + r) * nv + k] += t[r]
    dad(Sc, w.F + 6 * j, t)
    for r in range(6):
        carry_q[r] = Dq[12 + r] - t[r]
        carry_v[r] = Dq[30 + r]
    # carry the wrench up j's ancestors
    child = j
    a = m.parent[j]
    while a >= 0:
        dAd_inv(w.T + 12 * child, carry_q, t)
        dAd_inv(w.T + 12 * child, carry_v, t2)
        for r in range(6):
            carry_q[r] = t[r]
            carry_v[r] = t2[r]
        n = m.nvi[a]
        St_mul(w.S + 36 * a, n, carry_q, t)
        St_mul(w.S + 36 * a, n, carry_v, t2)
        for r in range(n):
            dtau_dq[(m.iv[a] + r) * nv + k] = t[r]
            dtau_ddq[(m.iv[a] + r) * nv + k] = t2[r]
        child = a
        a = m.parent[a]


cdef inline void _composites(const ModelC* m, Work* w) noexcept nogil:
    """The world composite inertias ``w.C[10 i:]``: I0 (``w.Ih[36 i + 12:]``,
    from _world_setup) summed over the subtree of i, as in the CRBA.  M
    (``mass_from_composites``) and the subtree sums of the columns
    (_subtree_terms) read them."""
    cdef int i, r, p
    for i in range(m.nb):
        for r in range(10):
            w.C[10 * i + r] = w.Ih[36 * i + 12 + r]
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        if p >= 0:
            for r in range(10):
                w.C[10 * p + r] += w.C[10 * i + r]


cdef inline bint _world_setup(const ModelC* m, const double* q, const double* dq,
                              const double* ddq, const double* fext, Work* w) noexcept nogil:
    """RNEA (Table 2; tau left in w.u) and the world-frame quantities of
    rnea_derivatives:  w.Ih[36 i:] = T0 (12) | I0 (10) | V0 (6) | A0 (6),
    w.U = S0, w.Dinv[36 i:] = h | p | F0 | (dFq | dFv scratch), and w.A when
    a joint needs the body-frame column recursion (returned True)."""
    cdef int nb = m.nb
    cdef int i, c, r, p
    cdef double dV0[6]
    cdef double t[6]
    cdef double* T0
    cdef double* I0
    cdef double* V0
    cdef double* A0
    cdef double* E
    cdef bint fallback = False
    rnea(m, q, dq, ddq, fext, True, w.u, w)
    base_acceleration(m, True, dV0)
    for i in range(nb):
        p = m.parent[i]
        T0 = w.Ih + 36 * i
        I0 = T0 + 12
        V0 = T0 + 22
        A0 = T0 + 28
        E = w.Dinv + 36 * i
        if p >= 0:
            se3_mul(w.Ih + 36 * p, w.T + 12 * i, T0)
        else:
            for r in range(12):
                T0[r] = w.T[12 * i + r]
        inertia_to_parent(T0, m.inertia + 10 * i, I0)
        Ad(T0, w.V + 6 * i, V0)
        Ad(T0, w.dV + 6 * i, A0)
        for c in range(m.nvi[i]):
            Ad(T0, w.S + 36 * i + 6 * c, w.U + 36 * i + 6 * c)
        inertia_mul(I0, V0, E)
        inertia_mul(I0, A0, E + 6)
        if fext != NULL:
            dAd_inv(T0, fext + 6 * i, t)
            for r in range(6):
                E[6 + r] -= t[r]
        dAd_inv(T0, w.F + 6 * i, E + 12)
        if jcalc_has_dS(m.jtype[i]):
            fallback = True
    if fallback:
        for i in range(nb):
            p = m.parent[i]
            Ad_inv(w.T + 12 * i, w.dV + 6 * p if p >= 0 else dV0, w.A + 6 * i)
    return fallback


cdef inline void _world_add_acceleration(const ModelC* m, const double* ddq, Work* w) noexcept nogil:
    """Update a _world_setup made at ddq = 0 to the accelerations ddq: in the
    world frame dA_i = dA_{lambda(i)} + S0_i ddq_i, p_i += I0_i dA_i and the
    joint wrenches F0 gain the subtree sums of I0_i dA_i (body-frame
    quantities are not updated: only for models without the column
    recursion)."""
    cdef int nb = m.nb
    cdef int i, r, p
    cdef double* E
    for i in range(nb):
        p = m.parent[i]
        E = w.Dinv + 36 * i
        S_mul(w.U + 36 * i, m.nvi[i], ddq + m.iv[i], E + 18)      # dA_i
        if p >= 0:
            for r in range(6):
                E[18 + r] += w.Dinv[36 * p + 18 + r]
        for r in range(6):
            w.Ih[36 * i + 28 + r] += E[18 + r]                     # A0
        inertia_mul(w.Ih + 36 * i + 12, E + 18, E + 24)            # I0 dA
        for r in range(6):
            E[6 + r] += E[24 + r]                                  # p
    for i in range(nb - 1, -1, -1):
        p = m.parent[i]
        E = w.Dinv + 36 * i
        for r in range(6):
            E[12 + r] += E[24 + r]                                 # F0
        if p >= 0:
            for r in range(6):
                w.Dinv[36 * p + 24 + r] += E[24 + r]


cdef inline void _sym3_mul(const double* P, const double* x, double* out) noexcept nogil:
    # out = P x, P symmetric 3 x 3 stored (xx, yy, zz, xy, xz, yz)
    out[0] = P[0] * x[0] + P[3] * x[1] + P[4] * x[2]
    out[1] = P[3] * x[0] + P[1] * x[1] + P[5] * x[2]
    out[2] = P[4] * x[0] + P[5] * x[1] + P[2] * x[2]


cdef inline void _subtree_terms(const ModelC* m, Work* w) noexcept nogil:
    """The subtree sums the columns need, after _world_setup (or
    _world_add_acceleration) and _composites (``Ic_i = sum I_k``, w.C), for
    each body i (sums over the subtree of i):

      mu_i = sum h_k,  h_k = I_k V_k       (w.Dinv[36 i + 24:30])
      P_i  = sum (Q_k + Q_k^T),  Q_k = Ibar_k [w_k] + v_k c_k^T - (c_k . v_k) 1
                                           (w.Dinv[36 i + 18:24], symmetric)

    (V_k = (w_k, v_k), I_k = (m_k, c_k, Ibar_k) about the world origin), and
    for every dof r of joint i, with S = S_ir = (S_w, S_v) in the world frame,
    G[54 i + 9 r] = (beta, Ic_i S),  beta = mu_w x S_w - P_i S_w + 2 mu_v x S_v."""
    cdef int nb = m.nb
    cdef int i, r, p, a, b
    cdef double Q[9]
    cdef double t[3]
    cdef double u[3]
    cdef double hv
    cdef const double* I0
    cdef const double* V0
    cdef const double* S
    cdef double* E
    cdef double* g
    for i in range(nb):
        I0 = w.Ih + 36 * i + 12
        V0 = I0 + 10
        E = w.Dinv + 36 * i
        # row a of Ibar [w] is Ibar_a x w
        t[0] = I0[4]; t[1] = I0[7]; t[2] = I0[8]
        cross3(t, V0, Q)
        t[0] = I0[7]; t[1] = I0[5]; t[2] = I0[9]
        cross3(t, V0, Q + 3)
        t[0] = I0[8]; t[1] = I0[9]; t[2] = I0[6]
        cross3(t, V0, Q + 6)
        hv = I0[1] * V0[3] + I0[2] * V0[4] + I0[3] * V0[5]
        for a in range(3):
            for b in range(3):
                Q[3 * a + b] += V0[3 + a] * I0[1 + b]
        E[18] = 2.0 * (Q[0] - hv)
        E[19] = 2.0 * (Q[4] - hv)
        E[20] = 2.0 * (Q[8] - hv)
        E[21] = Q[1] + Q[3]
        E[22] = Q[2] + Q[6]
        E[23] = Q[5] + Q[7]
        for r in range(6):
            E[24 + r] = E[r]
    for i in range(nb - 1, -1, -1):
        p = m.parent[i]
        if p >= 0:
            for r in range(12):
                w.Dinv[36 * p + 18 + r] += w.Dinv[36 * i + 18 + r]
    for i in range(nb):
        E = w.Dinv + 36 * i
        for r in range(m.nvi[i]):
            S = w.U + 36 * i + 6 * r
            g = w.G + 54 * i + 9 * r
            cross3(E + 24, S, g)
            _sym3_mul(E + 18, S, t)
            cross3(E + 27, S + 3, u)
            for a in range(3):
                g[a] += 2.0 * u[a] - t[a]
            inertia_mul(w.C + 10 * i, S, g + 3)


cdef inline void _y_mul(const double* E, const double* x, double* out) noexcept nogil:
    # out += Y x = (-mu_w x x_w - P x_w, -2 mu_v x x_w) with the subtree sums
    # P = E[18:24], mu = E[24:30] of _subtree_terms
    cdef double t[3]
    cdef double u[3]
    cdef int r
    cross3(E + 24, x, t)
    _sym3_mul(E + 18, x, u)
    for r in range(3):
        out[r] -= t[r] + u[r]
    cross3(E + 27, x, t)
    for r in range(3):
        out[3 + r] -= 2.0 * t[r]


cdef inline void _derivative_columns(const ModelC* m, const double* q, const double* dq,
                                     const double* ddq, double* dtau_dq, double* dtau_ddq,
                                     double* M, bint fallback, Work* w) noexcept nogil:
    """The column loops of rnea_derivatives after _world_setup and _composites.

    Column k (dof c of joint j, world twist S) moves the bodies of j's
    subtree; with w = ad_{V_lambda} S, y = ad_{A_lambda} S + ad_{V_lambda} w,
    z = (ad_{V_j} + ad_{V_lambda}) S (see rnea_derivatives), each body
    wrench derivative is linear in them,

      df_i/dq_k  = X_i S + Y_i w + I_i y,   X_i = -ad*_(.) f_i (f_i its body wrench),
      df_i/ddq_k = Y_i S + I_i z,           Y_i = -(ad*_(.) h_i + ad*_{V_i} I_i + I_i ad_{V_i}),

    and so are their subtree sums, with X, Y, I summed over the subtree.
    Y_i x depends on the angular part x_w of x only:
    Y_i x = (-h_w x x_w - P_i x_w, -2 h_v x x_w) (``_subtree_terms``).  On a
    body l of the subtree, dtau_l = S_l . (ad*_S F_l + dF_l), and the sum
    of X over l's subtree is -ad*_(.) F_l: the two cancel, leaving

      dtau_l/dq_k = beta_l . w_w + Ic_l S_l . y,   dtau_l/ddq_k = beta_l . S_w + Ic_l S_l . z

    with (beta_l, Ic_l S_l) = G[l] precomputed: a dot product of 3 and one
    of 6 per entry.  The ancestors of j see dF_j = -ad*_S F_j + Y_j w + Ic_j y
    (and Y_j S + Ic_j z).  Joints whose S depends on q (universal, planar)
    take the body-frame column recursion _column_subtree."""
    cdef int nb = m.nb, nv = m.nv
    cdef int i, j, c, k, r, p, a, n, nj, row
    cdef double dV0[6]
    cdef double zero6[6]
    cdef double t[6]
    cdef double wv[6]
    cdef double y[6]
    cdef double z[6]
    cdef double dFq[6]
    cdef double dFv[6]
    cdef double* Vl
    cdef double* Al
    cdef const double* S
    cdef const double* g
    cdef const double* E
    base_acceleration(m, True, dV0)
    for r in range(6):
        zero6[r] = 0.0
    for k in range(nv * nv):
        dtau_dq[k] = 0.0
        dtau_ddq[k] = 0.0
    if M != NULL:
        mass_from_composites(m, w.C, 10, w.U, M)
    _subtree_terms(m, w)
    for j in range(nb):
        nj = m.nvi[j]
        if nj == 0:
            continue
        if jcalc_has_dS(m.jtype[j]):
            for c in range(nj):
                _column_subtree(m, q, dq, ddq, j, c, dtau_dq, dtau_ddq, w)
            continue
        p = m.parent[j]
        if p >= 0:
            Vl = w.Ih + 36 * p + 22
            Al = w.Ih + 36 * p + 28
        else:
            Vl = zero6
            Al = dV0
        E = w.Dinv + 36 * j
        for c in range(nj):
            k = m.iv[j] + c
            S = w.U + 36 * j + 6 * c
            ad(Vl, S, wv)                       # w = ad_{V_lambda} S
            ad(Al, S, y)                        # y = ad_{A_lambda} S + ad_{V_lambda} w
            ad(Vl, wv, t)
            for r in range(6):
                y[r] += t[r]
            ad(w.Ih + 36 * j + 22, S, z)        # z = (ad_{V_j} + ad_{V_lambda}) S
            for r in range(6):
                z[r] += wv[r]
            # the subtree of j, j included
            for i in range(j, nb):
                if not m.desc[j * nb + i]:
                    continue
                for r in range(m.nvi[i]):
                    g = w.G + 54 * i + 9 * r
                    row = (m.iv[i] + r) * nv + k
                    dtau_dq[row] = ((g[0] * wv[0] + g[1] * wv[1] + g[2] * wv[2])
                                    + (g[3] * y[0] + g[4] * y[1] + g[5] * y[2])
                                    + (g[6] * y[3] + g[7] * y[4] + g[8] * y[5]))
                    dtau_ddq[row] = ((g[0] * S[0] + g[1] * S[1] + g[2] * S[2])
                                     + (g[3] * z[0] + g[4] * z[1] + g[5] * z[2])
                                     + (g[6] * z[3] + g[7] * z[4] + g[8] * z[5]))
            if p < 0:
                continue
            # the ancestors: dF_j = -ad*_S F_j + Y_j w + Ic_j y, Y_j S + Ic_j z
            dad(S, E + 12, dFq)
            inertia_mul(w.C + 10 * j, y, t)
            for r in range(6):
                dFq[r] = t[r] - dFq[r]
            _y_mul(E, wv, dFq)
            inertia_mul(w.C + 10 * j, z, dFv)
            _y_mul(E, S, dFv)
            a = p
            while a >= 0:
                n = m.nvi[a]
                St_mul(w.U + 36 * a, n, dFq, t)
                for r in range(n):
                    dtau_dq[(m.iv[a] + r) * nv + k] = t[r]
                St_mul(w.U + 36 * a, n, dFv, t)
                for r in range(n):
                    dtau_ddq[(m.iv[a] + r) * nv + k] = t[r]
                a = m.parent[a]


cdef inline int rnea_derivatives(const ModelC* m, const double* q, const double* dq,
                                 const double* ddq, const double* fext,
                                 double* dtau_dq, double* dtau_ddq, double* M,
                                 Work* w) noexcept nogil:
    """Full Jacobians dtau/dq, dtau/d(dq) and, if M is not NULL, dtau/d(ddq) = M
    (nv x nv, row-major).

    Table 5 with every quantity in the world frame {0}.  A tangent step of
    q_k (k in joint j) displaces the whole subtree of j rigidly by the world
    twist S = Ad_{T_{0,j}} S_c, so with world twists V_i, accelerations A_i
    (= Ad_{T_{0,i}} dV_i), inertias I_i, momenta h_i = I_i V_i and
    p_i = I_i A_i - F_i^ext, and lambda = lambda(j):
      dV_i = ad_S (V_i - V_lambda),  dA_i = ad_S (A_i - A_lambda) + ad_w (V_i - V_lambda),
      dI_i = -ad*_S I_i - I_i ad_S,  w = ad_{V_lambda} S,
    which sum to the body-wrench derivative
      df_i = -ad*_S p_i + ad*_{ad_{V_i} S - w} h_i + ad*_{V_i} (ad*_S h_i - I_i w)
             + I_i (y - ad_{V_i} w),   y = ad_{A_lambda} S + ad_{V_lambda} w.
    A step of dq_k gives dV_i = S and dA_i = ad_S (V_i - V_lambda) + ad_{V_j} S:
      df_i = -ad*_S h_i - ad*_{V_i} (I_i S) + I_i (z - ad_{V_i} S),  z = (ad_{V_j} + ad_{V_lambda}) S.
    Joint wrenches are subtree sums (plain additions in {0}); dtau_l = S_l^T dF_l
    plus (ad_S S_l)^T F_l = S_l^T ad*_S F_l for the q columns on the subtree, and
    the ancestors of j see dF_j.  Joints whose S depends on q (universal,
    planar) use the body-frame column recursion _column_subtree.
    M = dtau/d(ddq) comes from the same world-frame quantities as in the CRBA:
    dF_l/d(ddq_k) = Ic_j S for l = j and its ancestors, with Ic_j the subtree
    sum of the world inertias.
    """
    cdef bint fallback = _world_setup(m, q, dq, ddq, fext, w)
    _composites(m, w)
    _derivative_columns(m, q, dq, ddq, dtau_dq, dtau_ddq, M, fallback, w)
    return 0


cdef inline int rnea_tangent(const ModelC* m, const double* q, const double* dq,
                             const double* ddq, const double* fext,
                             const double* q_p, const double* dq_p, const double* ddq_p,
                             const double* dI, const double* dX, const double* dg,
                             const double* dfext, double* dtau, Work* w, bint fresh) noexcept nogil:
    """One general direction of Table 5.

    q_p (nv): tangent perturbation of q; dq_p, ddq_p (nv); dI (nb, 10): inertia
    parameters (m, h, Ibar) of _spatial.pxd; dX (nb, 6): twist xi of a right
    perturbation placement_i exp(eps xi); dg (3): gravity; dfext (nb, 6).
    Any of them may be NULL (zero).  Writes dtau (nv).  With ``fresh`` False
    the RNEA pass of a previous call at the same state is reused."""
    cdef int nb = m.nb
    cdef int i, p, n, r, c
    cdef double ddV0[6]
    cdef double dV0[6]
    cdef double J[12]
    cdef double Sj[36]
    cdef double dh[6]
    cdef double dS[36]
    cdef double ddS[36]
    cdef double tmp36[36]
    cdef double Sdq[6]
    cdef double xV[6]
    cdef double t[6]
    cdef double u[6]
    cdef double* D
    cdef bint hs
    cdef double* Dh = w.Dinv    # (nb, 6) dh_i, reused scratch
    cdef double* DS = w.U       # (nb, 36) dS_i
    if fresh:
        rnea(m, q, dq, ddq, fext, True, w.u, w)
    base_acceleration(m, True, dV0)
    for r in range(6):
        ddV0[r] = 0.0
    if dg != NULL:
        ddV0[3] = -dg[0]
        ddV0[4] = -dg[1]
        ddV0[5] = -dg[2]
    for i in range(nb):
        p = m.parent[i]
        n = m.nvi[i]
        D = w.D + 36 * i
        hs = jcalc_has_dS(m.jtype[i])
        Ad_inv(w.T + 12 * i, w.dV + 6 * p if p >= 0 else dV0, w.A + 6 * i)
        S_mul(w.S + 36 * i, n, dq + m.iv[i], Sdq)
        for r in range(6):
            xV[r] = w.V[6 * i + r] - Sdq[r]
        # dh_i = S_i q_p,i + Ad_{J^{-1}} xi_i   (eqs. 89-91)
        for r in range(6):
            dh[r] = 0.0
        if q_p != NULL:
            S_mul(w.S + 36 * i, n, q_p + m.iv[i], dh)
        if dX != NULL:
            jcalc(m.jtype[i], m.jparam + 10 * i, q + m.iq[i], J, Sj)
            # Ad_{J^{-1}} xi = Ad_inv(J, xi)
            Ad_inv(J, dX + 6 * i, t)
            for r in range(6):
                dh[r] += t[r]
        for r in range(6):
            Dh[6 * i + r] = dh[r]
        # dS_i = sum_c dS/dq_c q_p,c ; d(Sdot_i) dq_i
        for r in range(6 * n):
            dS[r] = 0.0
            ddS[r] = 0.0
        if hs and q_p != NULL:
            jcalc_dS(m.jtype[i], m.jparam + 10 * i, NULL, q_p + m.iv[i], w.S + 36 * i, dS)
            for c in range(n):
                if q_p[m.iv[i] + c] != 0.0:
                    jcalc_ddSdq(m.jtype[i], m.jparam + 10 * i, w.S + 36 * i, c, dq + m.iv[i], tmp36)
                    for r in range(6 * n):
                        ddS[r] += q_p[m.iv[i] + c] * tmp36[r]
        if hs and dq_p != NULL:
            jcalc_dS(m.jtype[i], m.jparam + 10 * i, NULL, dq_p + m.iv[i], w.S + 36 * i, tmp36)
            for r in range(6 * n):
                ddS[r] += tmp36[r]
        for r in range(6 * n):
            DS[36 * i + r] = dS[r]
        # dV_i
        if p >= 0:
            Ad_inv(w.T + 12 * i, w.D + 36 * p, D)
        else:
            for r in range(6):
                D[r] = 0.0
        ad(dh, xV, t)
        for r in range(6):
            D[r] -= t[r]
        S_mul(dS, n, dq + m.iv[i], u)          # u = dS_i dq_i (+ S_i d(dq_i))
        if dq_p != NULL:
            S_mul_add(w.S + 36 * i, n, dq_p + m.iv[i], u)
        for r in range(6):
            D[r] += u[r]
        # ddV_i
        if p >= 0:
            Ad_inv(w.T + 12 * i, w.D + 36 * p + 6, D + 6)
        else:
            Ad_inv(w.T + 12 * i, ddV0, D + 6)
        ad(dh, w.A + 6 * i, t)
        for r in range(6):
            D[6 + r] -= t[r]
        S_mul_add(dS, n, ddq + m.iv[i], D + 6)
        if ddq_p != NULL:
            S_mul_add(w.S + 36 * i, n, ddq_p + m.iv[i], D + 6)
        ad(D, Sdq, t)
        for r in range(6):
            D[6 + r] += t[r]
        ad(w.V + 6 * i, u, t)
        for r in range(6):
            D[6 + r] += t[r]
        S_mul_add(ddS, n, dq + m.iv[i], D + 6)
        if hs and dq_p != NULL:
            jcalc_dS(m.jtype[i], m.jparam + 10 * i, NULL, dq + m.iv[i], w.S + 36 * i, tmp36)
            S_mul_add(tmp36, n, dq_p + m.iv[i], D + 6)
        # dF_i (local part)
        _body_force_tangent(m.inertia + 10 * i, dI + 10 * i if dI != NULL else NULL,
                            w.V + 6 * i, D, D + 6, w.dV + 6 * i, D + 12)
        if dfext != NULL:
            for r in range(6):
                D[12 + r] -= dfext[6 * i + r]
    for i in range(nb - 1, -1, -1):
        p = m.parent[i]
        n = m.nvi[i]
        D = w.D + 36 * i
        St_mul(w.S + 36 * i, n, D + 12, dtau + m.iv[i])
        St_mul(DS + 36 * i, n, w.F + 6 * i, t)
        for r in range(n):
            dtau[m.iv[i] + r] += t[r]
        if p >= 0:
            dad(Dh + 6 * i, w.F + 6 * i, t)
            for r in range(6):
                u[r] = D[12 + r] - t[r]
            dAd_inv(w.T + 12 * i, u, t)
            for r in range(6):
                w.D[36 * p + 12 + r] += t[r]
    return 0


from gear.algorithms._dense cimport chol_factor, chol_inverse, chol_solve


cdef inline int aba_derivatives(const ModelC* m, const double* q, const double* dq,
                                const double* tau, const double* fext, double* ddq,
                                double* dddq_dq, double* dddq_ddq, double* Minv,
                                double* M, Work* w) noexcept nogil:
    """Forward-dynamics derivatives from Table 5 by the implicit-function
    identity at ddq = M^{-1} (tau - b):  dddq/dq = -M^{-1} dtau/dq,
    dddq/d(dq) = -M^{-1} dtau/d(dq),  dddq/dtau = M^{-1}.

    The world-frame set-up at ddq = 0 gives b (RNEA) and M; after the
    Cholesky solve for ddq the accelerations are updated in place (or the
    set-up is redone when the body-frame column recursion needs them).
    M: 2 nv x nv scratch.  Returns 0, or -1 if M is not positive definite."""
    cdef int nv = m.nv, k
    cdef bint fallback = _world_setup(m, q, dq, NULL, fext, w)
    _composites(m, w)                      # (q only: kept if the set-up is redone)
    mass_from_composites(m, w.C, 10, w.U, M)
    if chol_factor(M, nv) != 0:
        return -1
    for k in range(nv):
        ddq[k] = tau[k] - w.u[k]
    chol_solve(M, nv, ddq, 1)
    if fallback:
        _world_setup(m, q, dq, ddq, fext, w)
    else:
        _world_add_acceleration(m, ddq, w)
    _derivative_columns(m, q, dq, ddq, dddq_dq, dddq_ddq, NULL, fallback, w)
    # Minv = L^{-T} L^{-1}, then dddq/dq = -Minv dtau/dq and
    # dddq/d(dq) = -Minv dtau/d(dq) as row-oriented products (M is scratch)
    chol_inverse(M, nv, Minv, M + nv * nv)
    _neg_matmul_inplace(Minv, dddq_dq, nv, M)
    _neg_matmul_inplace(Minv, dddq_ddq, nv, M)
    return 0


cdef inline void _neg_matmul_inplace(const double* A, double* B, int n, double* tmp) noexcept nogil:
    """B <- -A B for n x n row-major matrices (tmp: n x n scratch).

    Tiles of 4 rows x 8 columns of the product accumulate in eight
    four-double registers over the whole inner dimension (per step: two
    loads from a row of B, four entries of A, 32 multiply-adds); the edges
    take one entry at a time.  Every entry sums its products in the order
    k = 0, 1, ... of a plain triple loop, so the tiling changes no bit."""
    cdef int i, k, c, ii, c0
    cdef v4 r0a, r0b, r1a, r1b, r2a, r2b, r3a, r3b, ba, bb, x
    cdef double s
    cdef const double* Bk
    cdef const double* Ai
    i = 0
    while i + 4 <= n:
        Ai = A + i * n
        c0 = 0
        while c0 + 8 <= n:
            r0a = splat(0.0); r0b = r0a; r1a = r0a; r1b = r0a
            r2a = r0a; r2b = r0a; r3a = r0a; r3b = r0a
            for k in range(n):
                Bk = B + k * n + c0
                ba = (<const v4*> Bk)[0]
                bb = (<const v4*> (Bk + 4))[0]
                x = splat(-Ai[k])
                r0a = r0a + x * ba
                r0b = r0b + x * bb
                x = splat(-Ai[n + k])
                r1a = r1a + x * ba
                r1b = r1b + x * bb
                x = splat(-Ai[2 * n + k])
                r2a = r2a + x * ba
                r2b = r2b + x * bb
                x = splat(-Ai[3 * n + k])
                r3a = r3a + x * ba
                r3b = r3b + x * bb
            (<v4*> (tmp + i * n + c0))[0] = r0a
            (<v4*> (tmp + i * n + c0 + 4))[0] = r0b
            (<v4*> (tmp + (i + 1) * n + c0))[0] = r1a
            (<v4*> (tmp + (i + 1) * n + c0 + 4))[0] = r1b
            (<v4*> (tmp + (i + 2) * n + c0))[0] = r2a
            (<v4*> (tmp + (i + 2) * n + c0 + 4))[0] = r2b
            (<v4*> (tmp + (i + 3) * n + c0))[0] = r3a
            (<v4*> (tmp + (i + 3) * n + c0 + 4))[0] = r3b
            c0 += 8
        for ii in range(4):
            for c in range(c0, n):
                s = 0.0
                for k in range(n):
                    s = s + (-Ai[ii * n + k]) * B[k * n + c]
                tmp[(i + ii) * n + c] = s
        i += 4
    while i < n:
        for c in range(n):
            s = 0.0
            for k in range(n):
                s = s + (-A[i * n + k]) * B[k * n + c]
            tmp[i * n + c] = s
        i += 1
    for i in range(n * n):
        B[i] = tmp[i]


# ---------------------------------------------------------------------------
# Four states at once
# ---------------------------------------------------------------------------
cdef inline void _l_y_mul(const double* E, const double* x, double* out) noexcept nogil:
    # _y_mul on LANES states (E: their Work.Dinv rows in the lane layout)
    cdef v4 t[3]
    cdef v4 u[3]
    cdef const v4* P = (<const v4*> E) + 18
    cdef const v4* x4 = <const v4*> x
    cdef v4* o = <v4*> out
    cdef int r
    l_cross3(E + 24 * LANES, x, <double*> t)
    u[0] = P[0] * x4[0] + P[3] * x4[1] + P[4] * x4[2]
    u[1] = P[3] * x4[0] + P[1] * x4[1] + P[5] * x4[2]
    u[2] = P[4] * x4[0] + P[5] * x4[1] + P[2] * x4[2]
    for r in range(3):
        o[r] = o[r] - (t[r] + u[r])
    l_cross3(E + 27 * LANES, x, <double*> t)
    for r in range(3):
        o[3 + r] = o[3 + r] - 2.0 * t[r]


cdef inline bint derivatives_lanes_cover(const ModelC* m) noexcept nogil:
    # the lane kernels below take models whose every S is constant in its
    # body frame (universal and planar joints take _column_subtree, one
    # state at a time)
    cdef int i
    for i in range(m.nb):
        if jcalc_has_dS(m.jtype[i]):
            return False
    return True


cdef inline void _l_world_setup(const ModelC* m, const double* q, const double* dq,
                                const double* ddq, const double* fext, double* tau, Py_ssize_t st,
                                Lanes* w) noexcept nogil:
    """``_world_setup`` on ``LANES`` states: RNEA (``rnea_lanes``, tau of
    lane l to ``tau + l st``) and the world quantities, T0 | I0 | V0 | A0
    in ``w.Ih``, S0 in ``w.Us``, h | p | F0 in ``w.Dinvs`` (lane layout)."""
    cdef int nb = m.nb, L = LANES
    cdef int i, r
    cdef double* T0
    cdef double* E
    cdef v4* E4
    cdef v4 fx[6]
    cdef v4 t[6]
    rnea_lanes(m, q, dq, ddq, fext, True, tau, st, w)
    for i in range(nb):
        T0 = world_pose_lanes(m, i, w)
        E = w.Dinvs + 36 * L * i
        l_inertia_to_parent(T0, m.inertia + 10 * i, T0 + 12 * L)
        l_Ad(T0, w.V + 6 * L * i, T0 + 22 * L)
        l_Ad(T0, w.dV + 6 * L * i, T0 + 28 * L)
        world_S_lanes(m, i, T0, w.Us + 36 * L * i, w)
        l_inertia_mul(T0 + 12 * L, T0 + 22 * L, E)
        l_inertia_mul(T0 + 12 * L, T0 + 28 * L, E + 6 * L)
        E4 = <v4*> E
        if fext != NULL:
            for r in range(6):
                fx[r] = gather(fext + 6 * i + r, 6 * nb)
                t[r] = splat(0.0)
            l_dAd_inv_add(T0, <double*> fx, <double*> t)
            for r in range(6):
                E4[6 + r] = E4[6 + r] - t[r]
        for r in range(6):
            E4[12 + r] = splat(0.0)
        l_dAd_inv_add(T0, w.F + 6 * L * i, E + 12 * L)


cdef inline double* _l_composite(Lanes* w, int i) noexcept nogil:
    # body i's composite inertia (10, lane layout), after its per-dof vectors in G
    return w.G + 64 * LANES * i + 54 * LANES


cdef inline void _l_composites(const ModelC* m, Lanes* w) noexcept nogil:
    # the composite inertias Ic_i = sum of I0 over the subtree (as w.C)
    cdef int i, r, p
    for i in range(m.nb):
        for r in range(10 * LANES):
            _l_composite(w, i)[r] = w.Ih[36 * LANES * i + 12 * LANES + r]
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        if p >= 0:
            for r in range(10 * LANES):
                _l_composite(w, p)[r] += _l_composite(w, i)[r]


cdef inline void _l_add_acceleration(const ModelC* m, const double* ddq, Py_ssize_t sd,
                                     Lanes* w) noexcept nogil:
    # _world_add_acceleration on LANES states (lane l's ddq at ddq + l sd)
    cdef int L = LANES
    cdef int i, r, p, k
    cdef v4* E
    cdef const v4* U
    cdef v4 x
    for i in range(m.nb):
        p = m.parent[i]
        E = <v4*> (w.Dinvs + 36 * L * i)
        U = <const v4*> (w.Us + 36 * L * i)
        for r in range(6):
            E[18 + r] = splat(0.0)
        for k in range(m.nvi[i]):
            x = gather(ddq + m.iv[i] + k, sd)
            for r in range(6):
                E[18 + r] = E[18 + r] + U[6 * k + r] * x
        if p >= 0:
            for r in range(6):
                E[18 + r] = E[18 + r] + (<v4*> (w.Dinvs + 36 * L * p))[18 + r]
        for r in range(6):
            (<v4*> (w.Ih + 36 * L * i))[28 + r] += E[18 + r]
        l_inertia_mul(w.Ih + 36 * L * i + 12 * L, <double*> (E + 18), <double*> (E + 24))
        for r in range(6):
            E[6 + r] = E[6 + r] + E[24 + r]
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        E = <v4*> (w.Dinvs + 36 * L * i)
        for r in range(6):
            E[12 + r] = E[12 + r] + E[24 + r]
        if p >= 0:
            for r in range(6):
                (<v4*> (w.Dinvs + 36 * L * p))[24 + r] += E[24 + r]


cdef inline void _l_subtree_terms(const ModelC* m, Lanes* w) noexcept nogil:
    # _subtree_terms on LANES states, after _l_composites (P, mu in Dinvs, G)
    cdef int nb = m.nb, L = LANES
    cdef int i, r, p, a
    cdef double* E
    cdef const double* S
    cdef const v4* S4
    cdef const v4* I4
    cdef const v4* V4
    cdef v4* E4
    cdef v4* g
    cdef v4 t[3]
    cdef v4 u3[3]
    cdef v4 Q[9]
    cdef v4 hv
    for i in range(nb):
        I4 = <const v4*> (w.Ih + 36 * L * i + 12 * L)
        V4 = I4 + 10
        E4 = <v4*> (w.Dinvs + 36 * L * i)
        t[0] = I4[4]; t[1] = I4[7]; t[2] = I4[8]
        l_cross3(<double*> t, <const double*> V4, <double*> Q)
        t[0] = I4[7]; t[1] = I4[5]; t[2] = I4[9]
        l_cross3(<double*> t, <const double*> V4, <double*> (Q + 3))
        t[0] = I4[8]; t[1] = I4[9]; t[2] = I4[6]
        l_cross3(<double*> t, <const double*> V4, <double*> (Q + 6))
        hv = I4[1] * V4[3] + I4[2] * V4[4] + I4[3] * V4[5]
        for a in range(3):
            for r in range(3):
                Q[3 * a + r] = Q[3 * a + r] + V4[3 + a] * I4[1 + r]
        E4[18] = 2.0 * (Q[0] - hv)
        E4[19] = 2.0 * (Q[4] - hv)
        E4[20] = 2.0 * (Q[8] - hv)
        E4[21] = Q[1] + Q[3]
        E4[22] = Q[2] + Q[6]
        E4[23] = Q[5] + Q[7]
        for r in range(6):
            E4[24 + r] = E4[r]
    for i in range(nb - 1, -1, -1):
        p = m.parent[i]
        if p >= 0:
            for r in range(12 * L):
                w.Dinvs[36 * L * p + 18 * L + r] += w.Dinvs[36 * L * i + 18 * L + r]
    for i in range(nb):
        E = w.Dinvs + 36 * L * i
        E4 = <v4*> E
        for r in range(m.nvi[i]):
            S = w.Us + 36 * L * i + 6 * L * r
            S4 = <const v4*> S
            g = <v4*> (w.G + 64 * L * i + 9 * L * r)
            l_cross3(E + 24 * L, S, <double*> g)
            t[0] = E4[18] * S4[0] + E4[21] * S4[1] + E4[22] * S4[2]
            t[1] = E4[21] * S4[0] + E4[19] * S4[1] + E4[23] * S4[2]
            t[2] = E4[22] * S4[0] + E4[23] * S4[1] + E4[20] * S4[2]
            l_cross3(E + 27 * L, S + 3 * L, <double*> u3)
            for a in range(3):
                g[a] = g[a] + (2.0 * u3[a] - t[a])
            l_inertia_mul(_l_composite(w, i), S, <double*> (g + 3))


cdef inline void _l_columns(const ModelC* m, double* dtau_dq, double* dtau_ddq, Py_ssize_t so,
                            Lanes* w) noexcept nogil:
    # _derivative_columns' loops on LANES states, after _l_subtree_terms
    # (the outputs cleared here)
    cdef int nb = m.nb, nv = m.nv, L = LANES
    cdef int i, j, c, k, r, p, a, nj, l, row
    cdef double* E
    cdef double* Ic
    cdef double* Vl
    cdef double* Al
    cdef const double* S
    cdef const v4* S4
    cdef const v4* g
    cdef v4 t[6]
    cdef v4 wv[6]
    cdef v4 y[6]
    cdef v4 z[6]
    cdef v4 dFq[6]
    cdef v4 dFv[6]
    cdef v4 zero6[6]
    cdef v4 dV0[6]
    cdef v4 d
    cdef double x[6]
    for l in range(L):
        for k in range(nv * nv):
            dtau_dq[l * so + k] = 0.0
            dtau_ddq[l * so + k] = 0.0
    base_acceleration(m, True, x)
    for r in range(6):
        dV0[r] = splat(x[r])
        zero6[r] = splat(0.0)
    for j in range(nb):
        nj = m.nvi[j]
        if nj == 0:
            continue
        p = m.parent[j]
        if p >= 0:
            Vl = w.Ih + 36 * L * p + 22 * L
            Al = w.Ih + 36 * L * p + 28 * L
        else:
            Vl = <double*> zero6
            Al = <double*> dV0
        E = w.Dinvs + 36 * L * j
        Ic = _l_composite(w, j)
        for c in range(nj):
            k = m.iv[j] + c
            S = w.Us + 36 * L * j + 6 * L * c
            S4 = <const v4*> S
            l_ad(Vl, S, <double*> wv)
            l_ad(Al, S, <double*> y)
            l_ad(Vl, <double*> wv, <double*> t)
            for r in range(6):
                y[r] = y[r] + t[r]
            l_ad(w.Ih + 36 * L * j + 22 * L, S, <double*> z)
            for r in range(6):
                z[r] = z[r] + wv[r]
            for i in range(j, nb):
                if not m.desc[j * nb + i]:
                    continue
                for r in range(m.nvi[i]):
                    g = <const v4*> (w.G + 64 * L * i + 9 * L * r)
                    row = (m.iv[i] + r) * nv + k
                    d = ((g[0] * wv[0] + g[1] * wv[1] + g[2] * wv[2])
                         + (g[3] * y[0] + g[4] * y[1] + g[5] * y[2])
                         + (g[6] * y[3] + g[7] * y[4] + g[8] * y[5]))
                    l_scatter(d, dtau_dq + row, so)
                    d = ((g[0] * S4[0] + g[1] * S4[1] + g[2] * S4[2])
                         + (g[3] * z[0] + g[4] * z[1] + g[5] * z[2])
                         + (g[6] * z[3] + g[7] * z[4] + g[8] * z[5]))
                    l_scatter(d, dtau_ddq + row, so)
            if p < 0:
                continue
            l_dad(S, E + 12 * L, <double*> dFq)
            l_inertia_mul(Ic, <double*> y, <double*> t)
            for r in range(6):
                dFq[r] = t[r] - dFq[r]
            _l_y_mul(E, <double*> wv, <double*> dFq)
            l_inertia_mul(Ic, <double*> z, <double*> dFv)
            _l_y_mul(E, S, <double*> dFv)
            a = p
            while a >= 0:
                for r in range(m.nvi[a]):
                    l_dot(w.Us + 36 * L * a + 6 * L * r, <double*> dFq, <double*> &d)
                    l_scatter(d, dtau_dq + (m.iv[a] + r) * nv + k, so)
                    l_dot(w.Us + 36 * L * a + 6 * L * r, <double*> dFv, <double*> &d)
                    l_scatter(d, dtau_ddq + (m.iv[a] + r) * nv + k, so)
                a = m.parent[a]


cdef inline int rnea_derivatives_lanes(const ModelC* m, const double* q, const double* dq,
                                       const double* ddq, const double* fext, double* dtau_dq,
                                       double* dtau_ddq, double* M, Py_ssize_t so,
                                       Lanes* w) noexcept nogil:
    """``rnea_derivatives`` on ``LANES`` consecutive states of a batch (lane
    ``l``: ``q + l nq``, ``dq`` and ``ddq + l nv``, ``fext + l 6 nb``, the
    outputs ``+ l so``), every stage on all lanes at once, term for term
    the one-state kernel's (the same bits).  Returns 1, computing nothing,
    unless ``derivatives_lanes_cover(m)``."""
    if not derivatives_lanes_cover(m):
        return 1
    _l_world_setup(m, q, dq, ddq, fext, dtau_dq, so, w)     # tau: scratch, cleared below
    _l_composites(m, w)
    if M != NULL:
        mass_from_composites_lanes(m, w.G + 54 * LANES, 64 * LANES, w.Us, M, so)
    _l_subtree_terms(m, w)
    _l_columns(m, dtau_dq, dtau_ddq, so, w)
    return 0


cdef inline int aba_derivatives_lanes(const ModelC* m, const double* q, const double* dq,
                                      const double* tau, const double* fext, double* ddq,
                                      Py_ssize_t sd, double* dddq_dq, double* dddq_ddq, double* Minv,
                                      Py_ssize_t so, double* scratch, Lanes* w) noexcept nogil:
    """``aba_derivatives`` on ``LANES`` consecutive states (lane ``l``: ``q +
    l nq``, ``dq`` and ``tau + l nv``, ``fext + l 6 nb``, ``ddq + l sd``, the
    matrices ``+ l so``): the tree's stages on all lanes at once, each
    lane's Cholesky factor, solve, inverse and products one lane at a time
    (the one-state kernel's, in ``scratch``: ``LANES`` times 2 nv x nv).
    The same bits.  Returns 0, 1 (not ``derivatives_lanes_cover(m)``:
    nothing computed) or -1 (some lane's M is not positive definite)."""
    cdef int nv = m.nv, l, k
    cdef double* Ml
    if not derivatives_lanes_cover(m):
        return 1
    _l_world_setup(m, q, dq, NULL, fext, ddq, sd, w)       # the bias b into ddq
    _l_composites(m, w)
    mass_from_composites_lanes(m, w.G + 54 * LANES, 64 * LANES, w.Us, scratch, 2 * nv * nv)
    for l in range(LANES):
        Ml = scratch + 2 * nv * nv * l
        if chol_factor(Ml, nv) != 0:
            return -1
        for k in range(nv):
            ddq[l * sd + k] = tau[l * nv + k] - ddq[l * sd + k]
        chol_solve(Ml, nv, ddq + l * sd, 1)
    _l_add_acceleration(m, ddq, sd, w)
    _l_subtree_terms(m, w)
    _l_columns(m, dddq_dq, dddq_ddq, so, w)
    for l in range(LANES):
        Ml = scratch + 2 * nv * nv * l
        chol_inverse(Ml, nv, Minv + l * so, Ml + nv * nv)
        _neg_matmul_inplace(Minv + l * so, dddq_dq + l * so, nv, Ml)
        _neg_matmul_inplace(Minv + l * so, dddq_ddq + l * so, nv, Ml)
    return 0

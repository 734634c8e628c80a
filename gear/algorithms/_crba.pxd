# cython: language_level=3
"""Composite-rigid-body mass matrix (Featherstone Sec. 6.2), in the world frame.

With every quantity expressed in the world frame {0} (T_{0,i} the world pose
of body i, Kim eq. 7 and 21):

    S0_i  = Ad_{T_{0,i}} S_i                          joint Jacobian in {0}
    I0_i  = Ad*_{T_{0,i}^{-1}} I_i Ad_{T_{0,i}^{-1}}  body inertia in {0} (10 parameters)
    Ic_i  = I0_i + sum_{k in mu(i)} Ic_k              composite inertia: a plain sum
    F     = Ic_i S0_i,   M_ji = S0_j^T F  for j = i and every ancestor j of i

Composite inertias stay rigid-body inertias (10 parameters), and each
(column, ancestor) entry of M is one 6-vector dot product.
"""
from gear.algorithms._types cimport ModelC, Work, Lanes
from gear.algorithms._common cimport forward_pass, St_mul, joint_lanes, world_pose_lanes, world_S_lanes
from gear.spatial._v4 cimport v4
from gear.spatial._spatial cimport se3_mul, Ad, inertia_mul, inertia_to_parent
from gear.spatial._lanes cimport LANES, l_inertia_mul, l_inertia_to_parent, l_dot, l_scatter


cdef inline int crba(const ModelC* m, const double* q, double* M, Work* w) noexcept nogil:
    """Mass matrix M (nv x nv, row-major, both triangles written)."""
    forward_pass(m, q, NULL, w, False)
    return crba_after_fk(m, M, w)


cdef inline void crba_world(const ModelC* m, Work* w) noexcept nogil:
    """World poses (``w.Ih[36 i : 36 i + 12]``), world composite inertias
    (``w.Ih[36 i + 12 : 36 i + 22]``) and world joint Jacobians (``w.U``)
    after a forward pass has filled ``w.T`` and ``w.S``."""
    cdef int i, p, r, c
    cdef double* T0
    for i in range(m.nb):
        p = m.parent[i]
        T0 = w.Ih + 36 * i
        if p >= 0:
            se3_mul(w.Ih + 36 * p, w.T + 12 * i, T0)
        else:
            for r in range(12):
                T0[r] = w.T[12 * i + r]
        inertia_to_parent(T0, m.inertia + 10 * i, T0 + 12)
        for c in range(m.nvi[i]):
            Ad(T0, w.S + 36 * i + 6 * c, w.U + 36 * i + 6 * c)
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        if p >= 0:
            for r in range(10):
                w.Ih[36 * p + 12 + r] += w.Ih[36 * i + 12 + r]


cdef inline void mass_from_composites(const ModelC* m, const double* Ic, int sI, const double* U,
                                      double* M) noexcept nogil:
    """M (nv x nv, row-major, cleared first, both triangles) from the world
    composite inertias (body i's at ``Ic + sI i``, 10 parameters) and the
    world joint Jacobians ``U`` (36 per body): ``F = Ic_i S0_i`` and
    ``M_ji = S0_j^T F`` for j = i and every ancestor of i.  Shared by the
    CRBA and the derivatives (``_derivatives.pxd``)."""
    cdef int i, j, nj, r, c, k
    cdef int nv = m.nv
    cdef double Fc[6]
    cdef double t[6]
    for k in range(nv * nv):
        M[k] = 0.0
    for i in range(m.nb):
        for c in range(m.nvi[i]):
            inertia_mul(Ic + sI * i, U + 36 * i + 6 * c, Fc)
            j = i
            while j >= 0:
                nj = m.nvi[j]
                St_mul(U + 36 * j, nj, Fc, t)
                for r in range(nj):
                    M[(m.iv[j] + r) * nv + m.iv[i] + c] = t[r]
                    M[(m.iv[i] + c) * nv + m.iv[j] + r] = t[r]
                j = m.parent[j]


cdef inline void mass_from_composites_lanes(const ModelC* m, const double* Ic, int sI, const double* U,
                                            double* M, Py_ssize_t so) noexcept nogil:
    """:func:`mass_from_composites` on ``LANES`` states, term for term (the
    lane layout: ``Ic + sI i`` and ``U + 36 LANES i``; lane l's M at ``M + l so``)."""
    cdef int i, j, r, c, k, l
    cdef int nv = m.nv
    cdef v4 F[6]
    cdef v4 d
    for l in range(LANES):
        for k in range(nv * nv):
            M[l * so + k] = 0.0
    for i in range(m.nb):
        for c in range(m.nvi[i]):
            l_inertia_mul(Ic + sI * i, U + 36 * LANES * i + 6 * LANES * c, <double*> F)
            j = i
            while j >= 0:
                for r in range(m.nvi[j]):
                    l_dot(U + 36 * LANES * j + 6 * LANES * r, <double*> F, <double*> &d)
                    l_scatter(d, M + (m.iv[j] + r) * nv + m.iv[i] + c, so)
                    l_scatter(d, M + (m.iv[i] + c) * nv + m.iv[j] + r, so)
                j = m.parent[j]


cdef inline int crba_after_fk(const ModelC* m, double* M, Work* w) noexcept nogil:
    """``crba`` when a forward pass at this q has already filled ``w.T`` and
    ``w.S``; writes only ``M``, ``w.Ih`` and ``w.U``."""
    crba_world(m, w)
    mass_from_composites(m, w.Ih + 12, 36, w.U, M)
    return 0


cdef inline void crba_packed(const ModelC* m, double* P, double* D, Work* w) noexcept nogil:
    """``crba_after_fk`` into the packed lower triangle of ``_dense.pxd``:
    ``D`` the diagonal, ``P[voff[k] + p]`` the entry of dof k and its
    ancestor at depth p.  Each entry is written once and nothing is
    cleared."""
    cdef int i, j, n, nj, c, k
    cdef double Fc[6]
    crba_world(m, w)
    for i in range(m.nb):
        n = m.nvi[i]
        for c in range(n):
            k = m.iv[i] + c
            inertia_mul(w.Ih + 36 * i + 12, w.U + 36 * i + 6 * c, Fc)
            # the joint's own dofs: dof r < c is an ancestor of dof c
            # (St_mul writes straight into P: a copy loop of a few entries
            # would become a call to memcpy)
            St_mul(w.U + 36 * i, c, Fc, P + m.voff[k] + m.vdep[m.iv[i]])
            St_mul(w.U + 36 * i + 6 * c, 1, Fc, D + k)
            j = m.parent[i]
            while j >= 0:
                nj = m.nvi[j]
                if nj > 0:
                    St_mul(w.U + 36 * j, nj, Fc, P + m.voff[k] + m.vdep[m.iv[j]])
                j = m.parent[j]


cdef inline int crba_lanes(const ModelC* m, const double* q, double* M, Py_ssize_t so,
                           Lanes* w) noexcept nogil:
    """``crba`` on ``LANES`` consecutive states (lane ``l``: ``q + l nq``,
    ``M + l so``), the world poses, inertias, joint Jacobians and
    composite sums on all lanes at once, the same arithmetic term for term
    (the same bits).  Workspace: ``w.T`` the joint transforms, ``w.Ih``
    body i's world pose (12) and composite inertia (10) at ``36 LANES i``
    (as ``crba_world`` uses ``Work.Ih``), ``w.Us`` the world S's columns
    (``(nb, 36, LANES)``)."""
    cdef int i, r
    cdef double* T0
    joint_lanes(m, q, NULL, NULL, w)
    for i in range(m.nb):
        T0 = world_pose_lanes(m, i, w)
        l_inertia_to_parent(T0, m.inertia + 10 * i, T0 + 12 * LANES)
        world_S_lanes(m, i, T0, w.Us + 36 * LANES * i, w)
    for i in range(m.nb - 1, -1, -1):
        if m.parent[i] >= 0:
            for r in range(10 * LANES):
                w.Ih[36 * LANES * m.parent[i] + 12 * LANES + r] += w.Ih[36 * LANES * i + 12 * LANES + r]
    mass_from_composites_lanes(m, w.Ih + 12 * LANES, 36 * LANES, w.Us, M, so)
    return 0

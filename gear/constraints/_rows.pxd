# cython: language_level=3
"""Constraint rows of the closed-loop kernels (Kim, Lie Group Formulation
of Articulated Rigid Body Dynamics, Sec. 3): the residual ``g``, the rows
of ``A`` and the bias ``dA dq``, and the products with ``A`` the routes
need.

Rows.  Every loop-closure row is a scalar function ``g`` of the world poses
of frame {A} (on body a) and frame {B} (on body b); its rate is linear in
the two frames' world twists,

    dg/dt = m_A . w_A + f_A . v_A + m_B . w_B + f_B . v_B,

so row r of ``A`` is the generalized force of two body wrenches,
``A_r = J_a^T F_rA + J_b^T F_rB`` (``F = (R^T m + p_P x R^T f, R^T f)`` in
body coordinates, ``p_P`` the frame origin on the body).  The row types are
those of ``gear/constraints/closures.py`` (pos, axis, dot, dist); a joint
coupler row is ``dq_j - c dq_s``.  ``dA dq`` is ``d^2 g/dt^2`` at
``ddq = 0``, from the frames' bias accelerations (Kim eq. 41 with
``ddq = 0``: ``world_kinematics``, ``frame_world``).  ``closure_rows``
writes the wrenches in body coordinates or, for the routes that work in
the world frame (after ``crba_packed`` / ``crba_after_fk``, which leave
the world-frame joint Jacobians ``S0_i`` in ``w.U``), in the world frame.

Products.  ``dense_rows``: A itself (m, nv); ``motion_pass`` and
``row_rate``: ``A x`` from the body motions ``J x`` (body coordinates);
``world_rows_times``: ``A x`` in the world frame; ``applied_forces``:
``A^T lam``.  ``constraint_rows`` is the whole evaluation at one state.

Dof paths.  The dofs on the root path of a dof (``ModelC.vanc``, by
depth): ``body_dof``, ``path_dof``, ``path_len`` and ``path_common`` (the
number of dofs two root paths share), used by the row groups of
``_groups.pxd``.
"""
from libc.math cimport sqrt
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._common cimport S_mul_add, St_mul, forward_pass
from gear.spatial._spatial cimport (se3_mul, Ad_inv, dAd_inv, cross3, matvec3, matTvec3,
                                    matmul3)
from gear.constraints._cwork cimport (ROW_POS, ROW_AXIS, ROW_DOT, ROW_DIST, ROW_COUPLER,
                                      ROWS_POSE, ROWS_BIAS, ROWS_ALL, ST_DIST_COINCIDE, ClosC,
                                      CWork)


# ---------------------------------------------------------------------------
# kinematics of the closure frames
# ---------------------------------------------------------------------------
cdef inline void world_kinematics(const ModelC* m, const Work* w, CWork* cw,
                                  bint after_crba=False, bint acc=True, bint poses=True) noexcept nogil:
    """World poses ``T_0i = T_0p T_pi`` and bias accelerations
    ``acc_i = Ad_{T_pi^{-1}} acc_p + eta_i`` (Kim eq. 41 with ddq = 0).

    ``after_crba``: after ``rnea`` with gravity and no ``ddq`` and then
    ``crba_world``.  The poses are copied from CRBA's
    (``w.Ih[36 i : 36 i + 12]``), and since RNEA's ``dV_i`` is the same
    recursion started from ``dV_0 = (0, -g)``, and a pure linear
    acceleration reaches body i as ``(0, R_0i^T a)``,
    ``acc_i = dV_i + (0, R_0i^T g)``.

    ``acc`` False: the poses alone (for ``closure_rows``' ``ROWS_POSE``);
    ``poses`` False: the accelerations alone (the poses in ``cw.Tw`` are
    already those of the transforms in ``w``)."""
    cdef int i, p, r
    cdef double t[3]
    if after_crba:
        for i in range(m.nb):
            for r in range(12):
                cw.Tw[12 * i + r] = w.Ih[36 * i + r]
            if not acc:
                continue
            matTvec3(cw.Tw + 12 * i, m.g, t)
            for r in range(3):
                cw.acc[6 * i + r] = w.dV[6 * i + r]
                cw.acc[6 * i + 3 + r] = w.dV[6 * i + 3 + r] + t[r]
        return
    for i in range(m.nb):
        p = m.parent[i]
        if p >= 0:
            if poses:
                se3_mul(cw.Tw + 12 * p, w.T + 12 * i, cw.Tw + 12 * i)
            if acc:
                Ad_inv(w.T + 12 * i, cw.acc + 6 * p, cw.acc + 6 * i)
                for r in range(6):
                    cw.acc[6 * i + r] += w.eta[6 * i + r]
        else:
            if poses:
                for r in range(12):
                    cw.Tw[12 * i + r] = w.T[12 * i + r]
            if acc:
                for r in range(6):
                    cw.acc[6 * i + r] = w.eta[6 * i + r]


cdef inline void frame_world(const Work* w, const CWork* cw, int b, const double* P,
                             double* fr, bint motion=True) noexcept nogil:
    """World quantities of frame ``P`` on body ``b`` (-1: the world) into
    ``fr``: R (9, row-major), p, angular velocity w, origin velocity v,
    angular bias acceleration al, classical origin bias acceleration ac
    (``motion`` False: R and p alone)."""
    cdef int r
    cdef double t[3]
    cdef double s[3]
    cdef double u[3]
    cdef const double* Tb
    cdef const double* V
    cdef const double* a
    if b < 0:
        for r in range(12):
            fr[r] = P[r]
        for r in range(12, 24):
            fr[r] = 0.0
        return
    Tb = cw.Tw + 12 * b
    V = w.V + 6 * b
    a = cw.acc + 6 * b
    matmul3(Tb, P, fr)                       # R = R_b R_P
    matvec3(Tb, P + 9, fr + 9)               # p = R_b p_P + p_b
    for r in range(3):
        fr[9 + r] += Tb[9 + r]
    if not motion:
        return
    matvec3(Tb, V, fr + 12)                  # w = R_b omega
    cross3(V, P + 9, t)
    for r in range(3):
        s[r] = V[3 + r] + t[r]               # body-frame velocity of the origin
    matvec3(Tb, s, fr + 15)
    matvec3(Tb, a, fr + 18)                  # al = R_b alpha
    cross3(a, P + 9, t)
    cross3(V, s, u)
    for r in range(3):
        t[r] += a[3 + r] + u[r]              # a_v + alpha x p_P + omega x s
    matvec3(Tb, t, fr + 21)


cdef inline void body_wrench(const CWork* cw, int b, const double* P, const double* mw,
                             const double* fw, double* F) noexcept nogil:
    """Body-coordinate wrench whose power on body b's twist equals
    ``mw . w + fw . v`` of frame P's origin."""
    cdef double t[3]
    cdef int r
    if b < 0:
        for r in range(6):
            F[r] = 0.0
        return
    matTvec3(cw.Tw + 12 * b, fw, F + 3)
    matTvec3(cw.Tw + 12 * b, mw, F)
    cross3(P + 9, F + 3, t)
    for r in range(3):
        F[r] += t[r]


cdef inline void world_wrench(int b, const double* x, const double* mw, const double* fw,
                              double* F) noexcept nogil:
    """``body_wrench`` in the world frame: ``(mw + x × fw, fw)`` for the
    frame origin x (zero on the world, b = -1)."""
    cdef int r
    if b < 0:
        for r in range(6):
            F[r] = 0.0
        return
    cross3(x, fw, F)
    for r in range(3):
        F[r] += mw[r]
        F[3 + r] = fw[r]


cdef inline double dot3(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


cdef inline int closure_rows(const ModelC* m, const ClosC* c, const double* q, const Work* w,
                             CWork* cw, bint world=False, int parts=ROWS_ALL) noexcept nogil:
    """Residual ``g``, row wrenches ``F`` and bias ``dA dq`` of every row
    (``world_kinematics`` first).  ``F`` in each body's coordinates, or
    with ``world`` in the world frame (moment about the world origin:
    ``Ad*_{T_0b^{-1}}`` of the body wrench, ``(m + x × f, f)`` with x the
    closure frame's origin).  With Baumgarte gains in ``cw`` (``bg_a``,
    ``bg_b``) the bias is stabilised: ``+ bg_a dg/dt + bg_b g``, the rate
    ``dg/dt = A_r dq`` read from the frames' velocities.

    ``parts``: ``ROWS_POSE``, ``g`` and ``F`` (the frames' poses alone:
    ``world_kinematics`` may leave out the accelerations); ``ROWS_BIAS``,
    ``g`` and the bias (``F`` left as it is: the rows of an earlier
    ``ROWS_POSE`` call at the same ``q``); ``ROWS_ALL``, all three.  The
    values are the same whichever part computes them.  Returns 0 or
    ST_DIST_COINCIDE."""
    cdef int r, k, i, j, a, b, last = -2
    cdef double rate = 0.0
    cdef bint stab = cw.bg_a != 0.0 or cw.bg_b != 0.0
    cdef bint pose = parts & ROWS_POSE, bias = parts & ROWS_BIAS
    cdef double d[3]
    cdef double dd[3]
    cdef double ddd[3]
    cdef double u[3]
    cdef double v[3]
    cdef double du[3]
    cdef double dv[3]
    cdef double n[3]
    cdef double t[3]
    cdef double s[3]
    cdef double mA[3]
    cdef double fA[3]
    cdef double mB[3]
    cdef double fB[3]
    cdef double L, e
    cdef double* frA = cw.fr
    cdef double* frB = cw.fr + 24
    for r in range(c.m):
        k = c.rk[r]
        if c.rtype[r] == ROW_COUPLER:
            cw.g[r] = q[c.rqi[r]] - c.rcoef[r] * q[c.rqj[r]] - c.roff[r]
            if bias:
                cw.bias[r] = 0.0
                if stab:
                    rate = 0.0 if cw.bdq == NULL else cw.bdq[c.ri[r]] - c.rcoef[r] * cw.bdq[c.rj[r]]
                    cw.bias[r] = cw.bg_a * rate + cw.bg_b * cw.g[r]
            continue
        if k != last:
            frame_world(w, cw, c.body_a[k], c.place_a + 12 * k, frA, bias)
            frame_world(w, cw, c.body_b[k], c.place_b + 12 * k, frB, bias)
            for i in range(3):
                d[i] = frB[9 + i] - frA[9 + i]
                if bias:
                    dd[i] = frB[15 + i] - frA[15 + i]
                    ddd[i] = frB[21 + i] - frA[21 + i]
            last = k
        i = c.ri[r]
        j = c.rj[r]
        for a in range(3):
            mA[a] = 0.0
            fA[a] = 0.0
            mB[a] = 0.0
            fB[a] = 0.0
        if c.rtype[r] == ROW_POS:
            cw.g[r] = d[i]
            fB[i] = 1.0
            fA[i] = -1.0
            if bias:
                cw.bias[r] = ddd[i]
                rate = dd[i]
        elif c.rtype[r] == ROW_AXIS:
            for a in range(3):
                u[a] = frA[3 * a + i]            # column i of R_A
            cw.g[r] = dot3(u, d)
            if pose:
                cross3(u, d, mA)
                for a in range(3):
                    fB[a] = u[a]
                    fA[a] = -u[a]
            if bias:
                cross3(frA + 12, u, du)
                cross3(frA + 18, u, t)
                cross3(frA + 12, du, s)
                for a in range(3):
                    t[a] += s[a]                 # d^2 u / dt^2
                cw.bias[r] = dot3(t, d) + 2.0 * dot3(du, dd) + dot3(u, ddd)
                rate = dot3(du, d) + dot3(u, dd)
        elif c.rtype[r] == ROW_DOT:
            for a in range(3):
                u[a] = frA[3 * a + i]
                v[a] = frB[3 * a + j]
            cross3(v, u, n)
            cw.g[r] = dot3(u, v)
            if pose:
                for a in range(3):
                    mB[a] = n[a]
                    mA[a] = -n[a]
            if bias:
                cross3(frA + 12, u, du)
                cross3(frB + 12, v, dv)
                rate = dot3(du, v) + dot3(u, dv)
                cross3(dv, u, t)
                cross3(v, du, s)
                for a in range(3):
                    t[a] += s[a]
                    s[a] = frB[18 + a] - frA[18 + a]
                cw.bias[r] = dot3(s, n)
                for a in range(3):
                    s[a] = frB[12 + a] - frA[12 + a]
                cw.bias[r] += dot3(s, t)
        else:  # ROW_DIST
            L = sqrt(dot3(d, d))
            if L < 1e-12:
                return ST_DIST_COINCIDE
            for a in range(3):
                fB[a] = d[a] / L
                fA[a] = -d[a] / L
            cw.g[r] = L - c.length[k]
            if bias:
                e = dot3(fB, dd)
                cw.bias[r] = (dot3(dd, dd) - e * e) / L + dot3(fB, ddd)
                rate = e
        if bias and stab:
            cw.bias[r] += cw.bg_a * rate + cw.bg_b * cw.g[r]
        if not pose:
            continue
        if world:
            world_wrench(c.body_a[k], frA + 9, mA, fA, cw.F + 12 * r)
            world_wrench(c.body_b[k], frB + 9, mB, fB, cw.F + 12 * r + 6)
        else:
            body_wrench(cw, c.body_a[k], c.place_a + 12 * k, mA, fA, cw.F + 12 * r)
            body_wrench(cw, c.body_b[k], c.place_b + 12 * k, mB, fB, cw.F + 12 * r + 6)
    return 0


cdef inline void dense_rows(const ModelC* m, const ClosC* c, const Work* w, const CWork* cw,
                            double* A, bint world) noexcept nogil:
    """``A`` (m, nv) from the row wrenches, ``A_r[v_i] += S_i^T F`` on every
    ancestor i of the wrench's body.  ``world`` False: each wrench is
    carried from its body to the root, ``F <- Ad*_{T^{-1}} F``.  ``world``
    True (after ``closure_rows`` with ``world``, which leaves the wrenches
    in the world frame, and ``crba_after_fk``, which leaves the world-frame
    joint Jacobians ``S0_i = Ad_{T_0i} S_i`` in ``w.U``): each wrench is
    paired with S0_i, with no transform along the path (the pairing of a
    twist and a wrench does not depend on the frame)."""
    cdef int r, k, side, i, col, b
    cdef double F[6]
    cdef double G[6]
    cdef double* Ar
    cdef const double* S
    for r in range(c.m):
        Ar = A + r * m.nv
        for col in range(m.nv):
            Ar[col] = 0.0
        if c.rtype[r] == ROW_COUPLER:
            Ar[c.ri[r]] += 1.0
            Ar[c.rj[r]] -= c.rcoef[r]
            continue
        k = c.rk[r]
        for side in range(2):
            b = c.body_a[k] if side == 0 else c.body_b[k]
            if b < 0:
                continue
            for col in range(6):
                F[col] = cw.F[12 * r + 6 * side + col]
            i = b
            while i >= 0:
                for col in range(m.nvi[i]):
                    if world:
                        S = w.U + 36 * i + 6 * col
                        Ar[m.iv[i] + col] += (S[0] * F[0] + S[1] * F[1] + S[2] * F[2]
                                              + S[3] * F[3] + S[4] * F[4] + S[5] * F[5])
                    else:
                        S = w.S + 36 * i + 6 * col
                        Ar[m.iv[i] + col] += dot3(S, F) + dot3(S + 3, F + 3)
                if not world:
                    dAd_inv(w.T + 12 * i, F, G)
                    for col in range(6):
                        F[col] = G[col]
                i = m.parent[i]


cdef inline int world_rows(const ModelC* m, const ClosC* c, const double* q, const Work* w,
                           CWork* cw, bint after_crba, int parts=ROWS_ALL) noexcept nogil:
    """``world_kinematics`` (``after_crba``: from CRBA's world poses and
    RNEA's accelerations) and then ``closure_rows`` in the world frame:
    the rows' residual, world-frame wrenches and bias at the velocity of
    the last forward pass (``parts``: as ``closure_rows``).  Returns 0 or
    ST_DIST_COINCIDE."""
    world_kinematics(m, w, cw, after_crba, parts & ROWS_BIAS)
    return closure_rows(m, c, q, w, cw, True, parts)


cdef inline int constraint_rows(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                                double* g, double* A, double* bias, Work* w, CWork* cw,
                                int parts=ROWS_ALL) noexcept nogil:
    """Residual (m,), A (m, nv) and dA dq (m,) at one state (``dq`` may be
    NULL: zero bias).  Any output may be NULL.  ``parts`` ``ROWS_POSE``:
    ``g`` and ``A`` alone (no velocity terms, ``bias`` not written), for
    the projection onto the rows."""
    cdef int r, st
    cdef bint vel = parts & ROWS_BIAS
    forward_pass(m, q, dq if vel else NULL, w, vel)
    world_kinematics(m, w, cw, False, vel)
    st = closure_rows(m, c, q, w, cw, False, parts)
    if st != 0:
        return st
    for r in range(c.m):
        if g != NULL:
            g[r] = cw.g[r]
        if bias != NULL and vel:
            bias[r] = cw.bias[r]
    if A != NULL:
        dense_rows(m, c, w, cw, A, False)
    return 0


# ---------------------------------------------------------------------------
# A x from the body motions, and A^T lam
# ---------------------------------------------------------------------------
cdef inline void motion_pass(const ModelC* m, const Work* w, const double* x, double* ja) noexcept nogil:
    """Body accelerations ``J_i x`` (Kim eq. 41 without bias terms)."""
    cdef int i, p, r
    for i in range(m.nb):
        p = m.parent[i]
        if p >= 0:
            Ad_inv(w.T + 12 * i, ja + 6 * p, ja + 6 * i)
        else:
            for r in range(6):
                ja[6 * i + r] = 0.0
        S_mul_add(w.S + 36 * i, m.nvi[i], x + m.iv[i], ja + 6 * i)


cdef inline double row_rate(const ClosC* c, const CWork* cw, int r, const double* ja,
                            const double* x) noexcept nogil:
    """``A_r x`` from the body accelerations ``ja = J x``."""
    cdef int k, a, b
    cdef double s = 0.0
    cdef const double* F = cw.F + 12 * r
    if c.rtype[r] == ROW_COUPLER:
        return x[c.ri[r]] - c.rcoef[r] * x[c.rj[r]]
    k = c.rk[r]
    a = c.body_a[k]
    b = c.body_b[k]
    if a >= 0:
        s += (F[0] * ja[6 * a] + F[1] * ja[6 * a + 1] + F[2] * ja[6 * a + 2]
              + F[3] * ja[6 * a + 3] + F[4] * ja[6 * a + 4] + F[5] * ja[6 * a + 5])
    if b >= 0:
        s += (F[6] * ja[6 * b] + F[7] * ja[6 * b + 1] + F[8] * ja[6 * b + 2]
              + F[9] * ja[6 * b + 3] + F[10] * ja[6 * b + 4] + F[11] * ja[6 * b + 5])
    return s


cdef inline void world_rows_times(const ModelC* m, const ClosC* c, const Work* w, CWork* cw,
                                  const double* x, double* out) noexcept nogil:
    """``out = A x`` for every row: the world-frame body motions
    ``J0_i x = sum of S0_j x_j`` over the root path (``crba_packed``'s
    world Jacobians in ``w.U``: no transforms, only sums) paired with the
    world-frame wrenches of ``closure_rows`` (``world``)."""
    cdef int i, p, r, k, a, b
    cdef double s
    cdef const double* F
    for i in range(m.nb):
        p = m.parent[i]
        for r in range(6):
            cw.ja[6 * i + r] = cw.ja[6 * p + r] if p >= 0 else 0.0
        S_mul_add(w.U + 36 * i, m.nvi[i], x + m.iv[i], cw.ja + 6 * i)
    for r in range(c.m):
        if c.rtype[r] == ROW_COUPLER:
            out[r] = x[c.ri[r]] - c.rcoef[r] * x[c.rj[r]]
            continue
        k = c.rk[r]
        a = c.body_a[k]
        b = c.body_b[k]
        F = cw.F + 12 * r
        s = 0.0
        if a >= 0:
            s += (F[0] * cw.ja[6 * a] + F[1] * cw.ja[6 * a + 1] + F[2] * cw.ja[6 * a + 2]
                  + F[3] * cw.ja[6 * a + 3] + F[4] * cw.ja[6 * a + 4] + F[5] * cw.ja[6 * a + 5])
        if b >= 0:
            F = F + 6
            s += (F[0] * cw.ja[6 * b] + F[1] * cw.ja[6 * b + 1] + F[2] * cw.ja[6 * b + 2]
                  + F[3] * cw.ja[6 * b + 3] + F[4] * cw.ja[6 * b + 4] + F[5] * cw.ja[6 * b + 5])
        out[r] = s


cdef inline void applied_forces(const ModelC* m, const ClosC* c, const Work* w, CWork* cw,
                                const double* lam, double* out) noexcept nogil:
    """``out = A^T lam`` (nv,): each row's world-frame wrenches scaled by
    its multiplier, summed over subtrees (world frame: no transforms) and
    paired with the world-frame Jacobians ``S0`` of ``w.U``; coupler rows
    add to their two dofs."""
    cdef int i, p, r, k, a, b
    cdef double t[6]
    for i in range(6 * m.nb):
        cw.ja[i] = 0.0
    for i in range(m.nv):
        out[i] = 0.0
    for r in range(c.m):
        if c.rtype[r] == ROW_COUPLER:
            out[c.ri[r]] += lam[r]
            out[c.rj[r]] -= c.rcoef[r] * lam[r]
            continue
        k = c.rk[r]
        a = c.body_a[k]
        b = c.body_b[k]
        for i in range(6):
            if a >= 0:
                cw.ja[6 * a + i] += lam[r] * cw.F[12 * r + i]
            if b >= 0:
                cw.ja[6 * b + i] += lam[r] * cw.F[12 * r + 6 + i]
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        St_mul(w.U + 36 * i, m.nvi[i], cw.ja + 6 * i, t)
        for r in range(m.nvi[i]):
            out[m.iv[i] + r] += t[r]
        if p >= 0:
            for r in range(6):
                cw.ja[6 * p + r] += cw.ja[6 * i + r]


# ---------------------------------------------------------------------------
# root paths of dofs
# ---------------------------------------------------------------------------
cdef inline int body_dof(const ModelC* m, int b) noexcept nogil:
    """The deepest dof on the root path of body b (-1: none, or the world)."""
    while b >= 0 and m.nvi[b] == 0:
        b = m.parent[b]
    return -1 if b < 0 else m.iv[b] + m.nvi[b] - 1


cdef inline int path_dof(const ModelC* m, int kd, int p) noexcept nogil:
    # the dof at depth p on the root path of dof kd
    return kd if p == m.vdep[kd] else m.vanc[m.voff[kd] + p]


cdef inline int path_len(const ModelC* m, int k) noexcept nogil:
    # dofs on the root path of dof k (0 for k = -1)
    return m.vdep[k] + 1 if k >= 0 else 0


cdef inline int path_common(const ModelC* m, int k1, int k2, int lo, int hi) noexcept nogil:
    """``min(hi, c)`` for the number c of dofs the root paths of dofs k1 and
    k2 share (their common ancestors, k1 or k2 included), or ``lo`` if it
    is not above ``lo``.  The paths agree on a prefix of depths and differ
    after it, so a check at hi - 1 and at lo and then a bisection between
    them find it."""
    cdef int mid
    if k1 == k2 or hi <= lo:
        return hi
    if path_dof(m, k1, hi - 1) == path_dof(m, k2, hi - 1):
        return hi
    if path_dof(m, k1, lo) != path_dof(m, k2, lo):
        return lo
    hi -= 1
    # invariant: the paths agree at depth lo and differ at depth hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if path_dof(m, k1, mid) == path_dof(m, k2, mid):
            lo = mid
        else:
            hi = mid
    return lo + 1

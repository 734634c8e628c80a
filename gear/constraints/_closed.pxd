# cython: language_level=3
"""Closed-loop kernels (Kim Sec. 3): constraint rows and constrained
forward / hybrid dynamics through articulated-body passes.

Rows.  Every loop-closure row is a scalar function ``g`` of the world poses
of frame {A} (on body a) and frame {B} (on body b); its rate is linear in
the two frames' world twists,

    dg/dt = m_A . w_A + f_A . v_A + m_B . w_B + f_B . v_B,

so row r of ``A`` is the generalized force of two body wrenches,
``A_r = J_a^T F_rA + J_b^T F_rB`` (``F = (R^T m + p_P x R^T f, R^T f)`` in
body coordinates, ``p_P`` the frame origin on the body).  The row types are
those of ``gear/constraints/closures.py`` (pos, axis, dot, dist); a joint
coupler row is ``dq_j - c dq_s``.  ``dA dq`` is ``d^2 g/dt^2`` at
``ddq = 0``, from the frames' bias accelerations.

Dynamics (Kim eqs. 67-69, hybrid: 70-77).  One articulated-body pass
(Table 3/4, ``gear/algorithms/_aba.pxd``) gives the unconstrained
``ddq_r`` and leaves the articulated inertias ``Ihat_i``, ``U_i``,
``Psi_i`` in the workspace.  For each row s a *unit pass* -- the same
recursion with zero velocity, gravity and torque, and the row's wrenches
as the only load -- gives the body accelerations ``J_b M^{-1} A_s^T``
(``M_vv^{-1}`` in hybrid dynamics: prescribed joints are rigid), from which
column s of ``K = A M^{-1} A^T`` is read off in O(m).  Then

    K lam = -(A ddq_r + dA dq)          (eq. 67)
    ddq   = ddq_r + M^{-1} A^T lam      (eq. 69; one more unit pass)

in O(n m + m^3).  ``K`` is factorised by Cholesky with diagonal pivoting:
pivots below ``rcond`` times the largest diagonal end the factorisation
(redundant rows, singular configurations), and the minimum-norm ``lam`` is
taken among the solutions, so ``lam`` matches the pseudo-inverse while
``ddq`` and ``A^T lam`` are unique.
"""
from libc.math cimport sqrt, fabs
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._common cimport S_mul_add, St_mul, forward_pass
from gear.algorithms._aba cimport hybrid
from gear.algorithms._rnea cimport rnea
from gear.algorithms._crba cimport crba_after_fk, crba_packed
from gear.algorithms._dense cimport (chol_factor, chol_solve, tree_factor, tree_solve_Lt, tree_solve_L,
                                     tree_path_solve_Lt, dot, gather_dot)
from gear.spatial._spatial cimport (se3_mul, Ad_inv, dAd_inv, cross3, matvec3, matTvec3,
                                    matmul3, mat6_vec)
from gear.algorithms._spchol cimport SpChol, spchol_scratch, spchol_factor, spchol_solve


cdef enum:
    ROW_POS = 0
    ROW_AXIS = 1
    ROW_DOT = 2
    ROW_DIST = 3
    ROW_COUPLER = 4
    # status codes (positive: 1 + the joint with a singular articulated inertia)
    ST_DIST_COINCIDE = -3
    ST_MASS_NOT_PD = -4
    ST_INEXACT = -5       # closed inverse dynamics: A_p^T lam = rhs has no solution (under-actuated)
    ST_SPARSE_REDUNDANT = -6   # the sparse route: more dependent rows than its completion takes


cdef struct SpKKT:
    # the dense route's K = Y^T Y kept sparse (closed_dense): the pattern of
    # its factor (rows of K in the factor's fill-reducing order) and where
    # each group pair's block goes; built once per rows by
    # gear/constraints/sparse.py
    SpChol ch
    const int* pinv        # (m,) row r of K is row pinv[r] of the factor
    int npair              # group pairs a <= b whose rows' supports meet
    const int* pga
    const int* pgb
    const int* poff        # (npair + 1,) offsets into dst
    const int* dst         # position in the factor's values of entry (i, j) of the
                           # pair's block (row-major, g_a x g_b); -1: the upper triangle


cdef struct ClosC:
    int m                  # rows
    int ncoupler           # coupler rows among them
    const int* rtype       # (m,) ROW_*
    const int* ri          # axis index of {A} (pos/axis/dot); coupler: v index j
    const int* rj          # axis index of {B} (dot); coupler: v index of the source
    const int* rk          # closure index of the row (-1 for couplers)
    const double* rcoef    # coupler multiplier
    const double* roff     # coupler offset
    const int* rqi         # coupler: q index of the joint
    const int* rqj         # coupler: q index of the source
    const int* body_a      # (nk,) -1 = world
    const int* body_b
    const double* place_a  # (nk, 12) SE(3) layout of _spatial.pxd
    const double* place_b
    const double* length   # (nk,) rod length of distance closures
    const int* sup         # bodies whose acceleration the rows read, with their
    int nsup               # ancestors, ascending (the unit passes' support)
    double rcond
    double cfm             # soft constraints (dense route): K + cfm I, cfm = 1 / stiffness
    double damping         # and rhs - damping A dq; 0 for hard constraints
    const void* mx         # the maximal-coordinate plan (MaxC of _maximal.pxd), or NULL
    int mxws               # its scratch size (doubles per thread)
    const SpKKT* sp        # the sparse route's plan (dense route with a sparse K), or NULL


cdef struct CWork:
    double* Tw     # (nb, 12) world poses
    double* acc    # (nb, 6) body bias accelerations at ddq = 0
    double* ja     # (nb, 6) J_b x of a pass (A x) / unit-pass accelerations
    double* Bs     # (nb, 6) unit-pass bias forces (start: minus the loads)
    double* beta   # (nb, 6) unit-pass scratch
    double* us     # (nv,)  unit-pass u_i
    double* xs     # (nv,)  unit-pass joint accelerations
    double* tx     # (nv,)  joint-space loads (coupler rows)
    double* ts     # (nv,)  unit-pass torques of prescribed joints
    double* F      # (m, 12) row wrenches on body a, body b (body coordinates)
    double* bias   # (m,)   dA dq
    double* g      # (m,)   residual
    double* rhs    # (m,)
    double* piv    # (m,)   pivot order (stored as doubles)
    double* tmp    # (m,)
    double* K      # (m, m)
    double* W      # (m, m) null-space coefficients
    double* Z      # (m, m)
    double* fr     # (48,)  the two frames of a closure
    double* Md     # (nv, nv) mass matrix / its Cholesky factor; packed by ancestors (dense route)
    double* Ad     # ((m + 6) nv,) A (projection); Y = L^{-T} A^T on the rows' root paths (dense
                   # route: a group's two pieces are disjoint dofs, at most nv per row, and
                   # the last group's second path is written whole before it is cut)
    double* Bd     # (nv, m) A^T and its QR (projection)
    double* Pq     # (nv, nv) Q of the QR of A^T (projection route)
    double* Pr     # (2 nv^2,) L^T G and G^T M G (projection route)
    double* Pv     # (5 nv + 2 m,)  vectors of the projection and dense routes
    double* act    # (m,)  indices of the rows that are not exactly zero (as doubles)
    double* lc     # (m,)  their multipliers
    double* gd     # (8 m,) the dense route's RowGroup array (cast)
    double* mws    # the maximal-coordinate kernel's scratch (ClosC.mxws), or NULL
    double* sws    # the sparse route's values and scratch (sparse_scratch), or NULL
    void* chol     # its CHOLMOD handle (gear_chol, one per thread), or NULL


cdef inline double* _carve(double* base, int* off, int n) noexcept nogil:
    # the next n doubles of a workspace laid out from ``base`` (NULL: only count)
    cdef double* p = NULL
    if base != NULL:
        p = base + off[0]
    off[0] += n
    return p


cdef inline int cwork_layout(CWork* c, double* base, int nb, int nv, int m,
                             bint compact) noexcept nogil:
    """The one layout of CWork: points its fields into ``base`` (NULL: every
    field NULL, the size only) and returns its size in doubles.
    ``compact``: only the fields the rows and the residual use (the
    maximal-coordinate kernel's own scratch follows them), the others
    NULL."""
    cdef int off = 0
    c.Tw = _carve(base, &off, 12 * nb)
    c.acc = _carve(base, &off, 6 * nb)
    c.ja = _carve(base, &off, 6 * nb)
    c.mws = NULL
    c.sws = NULL
    c.chol = NULL
    if compact:
        c.F = _carve(base, &off, 12 * m)
        c.bias = _carve(base, &off, m)
        c.g = _carve(base, &off, m)
        c.fr = _carve(base, &off, 48)
        c.us = c.xs = c.tx = c.ts = c.beta = c.Bs = NULL
        c.rhs = c.piv = c.tmp = c.K = c.W = c.Z = c.Md = c.Ad = c.Bd = c.Pq = c.Pr = c.Pv = NULL
        c.act = c.lc = c.gd = NULL
        return off
    c.Bs = _carve(base, &off, 6 * nb)
    c.beta = _carve(base, &off, 6 * nb)
    c.us = _carve(base, &off, nv)
    c.xs = _carve(base, &off, nv)
    c.tx = _carve(base, &off, nv)
    c.ts = _carve(base, &off, nv)
    c.F = _carve(base, &off, 12 * m)
    c.bias = _carve(base, &off, m)
    c.g = _carve(base, &off, m)
    c.rhs = _carve(base, &off, m)
    c.piv = _carve(base, &off, m)
    c.tmp = _carve(base, &off, m)
    c.K = _carve(base, &off, m * m)
    c.W = _carve(base, &off, m * m)
    c.Z = _carve(base, &off, m * m)
    c.fr = _carve(base, &off, 48)
    c.Md = _carve(base, &off, nv * nv)
    c.Ad = _carve(base, &off, (m + 6) * nv)
    c.Bd = _carve(base, &off, nv * m)
    c.Pq = _carve(base, &off, nv * nv)
    c.Pr = _carve(base, &off, 2 * nv * nv)
    c.Pv = _carve(base, &off, 5 * nv + 2 * m)
    c.act = _carve(base, &off, m)
    c.lc = _carve(base, &off, m)
    c.gd = _carve(base, &off, 8 * m)
    return off


cdef inline int cwork_size(int nb, int nv, int m) noexcept nogil:
    cdef CWork c
    return cwork_layout(&c, NULL, nb, nv, m, False)


cdef inline int sparse_scratch(const ClosC* cc) noexcept nogil:
    # the sparse route's values of the factor and its scratch (0: no plan)
    if cc == NULL or cc.sp == NULL:
        return 0
    return cc.sp.ch.nnz + spchol_scratch(&cc.sp.ch)


cdef inline int cwork_size_c(const ClosC* cc, int nb, int nv, int m, bint full) noexcept nogil:
    # with a maximal-coordinate plan: its scratch after the rows' fields
    # (only those, unless ``full``: the rollout's projection needs the rest);
    # with a sparse plan: its scratch after the full layout
    cdef CWork c
    if cc == NULL or cc.mx == NULL:
        return cwork_size(nb, nv, m) + sparse_scratch(cc)
    return cwork_layout(&c, NULL, nb, nv, m, not full) + cc.mxws


cdef inline CWork cwork_from(double* base, int nb, int nv, int m) noexcept nogil:
    cdef CWork c
    cwork_layout(&c, base, nb, nv, m, False)
    return c


cdef inline CWork cwork_from_c(const ClosC* cc, double* base, int nb, int nv, int m,
                               bint full) noexcept nogil:
    # the layout of cwork_size_c: the full CWork, or (maximal plan, not
    # ``full``) only the fields the rows and the residual use; the plan's
    # scratch after them
    cdef CWork c
    cdef int n = cwork_layout(&c, base, nb, nv, m, cc != NULL and cc.mx != NULL and not full)
    if cc != NULL and cc.mx != NULL:
        c.mws = base + n
    elif cc != NULL and cc.sp != NULL:
        c.sws = base + n
    return c


# ---------------------------------------------------------------------------
# kinematics of the closure frames
# ---------------------------------------------------------------------------
cdef inline void world_kinematics(const ModelC* m, const Work* w, CWork* cw,
                                  bint after_crba=False) noexcept nogil:
    """World poses ``T_0i = T_0p T_pi`` and bias accelerations
    ``acc_i = Ad_{T_pi^{-1}} acc_p + eta_i`` (Kim eq. 41 with ddq = 0).

    ``after_crba``: after ``rnea`` with gravity and no ``ddq`` and then
    ``crba_world``.  The poses are copied from CRBA's
    (``w.Ih[36 i : 36 i + 12]``), and since RNEA's ``dV_i`` is the same
    recursion started from ``dV_0 = (0, -g)``, and a pure linear
    acceleration reaches body i as ``(0, R_0i^T a)``,
    ``acc_i = dV_i + (0, R_0i^T g)``."""
    cdef int i, p, r
    cdef double t[3]
    if after_crba:
        for i in range(m.nb):
            for r in range(12):
                cw.Tw[12 * i + r] = w.Ih[36 * i + r]
            matTvec3(cw.Tw + 12 * i, m.g, t)
            for r in range(3):
                cw.acc[6 * i + r] = w.dV[6 * i + r]
                cw.acc[6 * i + 3 + r] = w.dV[6 * i + 3 + r] + t[r]
        return
    for i in range(m.nb):
        p = m.parent[i]
        if p >= 0:
            se3_mul(cw.Tw + 12 * p, w.T + 12 * i, cw.Tw + 12 * i)
            Ad_inv(w.T + 12 * i, cw.acc + 6 * p, cw.acc + 6 * i)
            for r in range(6):
                cw.acc[6 * i + r] += w.eta[6 * i + r]
        else:
            for r in range(12):
                cw.Tw[12 * i + r] = w.T[12 * i + r]
            for r in range(6):
                cw.acc[6 * i + r] = w.eta[6 * i + r]


cdef inline void frame_world(const Work* w, const CWork* cw, int b, const double* P,
                             double* fr) noexcept nogil:
    """World quantities of frame ``P`` on body ``b`` (-1: the world) into
    ``fr``: R (9, row-major), p, angular velocity w, origin velocity v,
    angular bias acceleration al, classical origin bias acceleration ac."""
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
                             CWork* cw, bint world=False) noexcept nogil:
    """Residual ``g``, row wrenches ``F`` and bias ``dA dq`` of every row
    (``world_kinematics`` first).  ``F`` in each body's coordinates, or
    with ``world`` in the world frame (moment about the world origin:
    ``Ad*_{T_0b^{-1}}`` of the body wrench, ``(m + x × f, f)`` with x the
    closure frame's origin).  Returns 0 or ST_DIST_COINCIDE."""
    cdef int r, k, i, j, a, b, last = -2
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
            cw.bias[r] = 0.0
            continue
        if k != last:
            frame_world(w, cw, c.body_a[k], c.place_a + 12 * k, frA)
            frame_world(w, cw, c.body_b[k], c.place_b + 12 * k, frB)
            for i in range(3):
                d[i] = frB[9 + i] - frA[9 + i]
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
            cw.bias[r] = ddd[i]
        elif c.rtype[r] == ROW_AXIS:
            for a in range(3):
                u[a] = frA[3 * a + i]            # column i of R_A
            cross3(frA + 12, u, du)
            cw.g[r] = dot3(u, d)
            cross3(u, d, mA)
            for a in range(3):
                fB[a] = u[a]
                fA[a] = -u[a]
            cross3(frA + 18, u, t)
            cross3(frA + 12, du, s)
            for a in range(3):
                t[a] += s[a]                     # d^2 u / dt^2
            cw.bias[r] = dot3(t, d) + 2.0 * dot3(du, dd) + dot3(u, ddd)
        elif c.rtype[r] == ROW_DOT:
            for a in range(3):
                u[a] = frA[3 * a + i]
                v[a] = frB[3 * a + j]
            cross3(frA + 12, u, du)
            cross3(frB + 12, v, dv)
            cross3(v, u, n)
            cw.g[r] = dot3(u, v)
            for a in range(3):
                mB[a] = n[a]
                mA[a] = -n[a]
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
            e = dot3(fB, dd)
            cw.bias[r] = (dot3(dd, dd) - e * e) / L + dot3(fB, ddd)
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


# ---------------------------------------------------------------------------
# passes reusing the articulated inertias
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


cdef inline void scatter_lam(int nr, int na, CWork* cw, double* lam) noexcept nogil:
    # lam = the multipliers cw.lc of the active rows, zero on the others
    cdef int r
    for r in range(nr):
        lam[r] = 0.0
    for r in range(na):
        lam[<int> cw.act[r]] = cw.lc[r]


cdef inline void clear_loads(const ModelC* m, CWork* cw) noexcept nogil:
    cdef int r
    for r in range(6 * m.nb):
        cw.Bs[r] = 0.0
    for r in range(m.nv):
        cw.tx[r] = 0.0
        cw.us[r] = 0.0


# ---------------------------------------------------------------------------
# minimum-norm solve of the PSD system K lam = rhs
# ---------------------------------------------------------------------------
cdef inline int psd_solve(double* K, int n, const double* rhs, double* x, CWork* cw,
                          double rtol) noexcept nogil:
    """Minimum-norm ``x`` with ``K x = rhs`` for symmetric PSD ``K`` (n x n,
    row-major; its lower triangle is overwritten by the factor).

    Left-looking Cholesky (row-contiguous dot products) in which a row
    whose pivot falls below ``rtol`` times the largest diagonal is marked
    dependent and its column of L set to zero.  With the independent rows I
    (rank r) and the dependent rows D, ``K_II = L_II L_II^T`` and
    ``L_DI = K_DI L_II^{-T}``; the solutions are ``x_b + Z s`` with ``x_b``
    the basic solution (``x_D = 0``), ``Z = [-W^T; I]`` (rows I, D) and
    ``W = L_DI L_II^{-1}`` (nn x r), and the minimum-norm one has
    ``(I + W W^T) s = W x_bI``.  Rows of K that are exactly zero have
    ``x = 0`` in it and are left out of ``W``.  The factor keeps its
    pivots inverted (``1 / L_jj`` on the diagonal).  Returns r.  Uses ``cw.piv`` (1 on
    dependent rows), ``cw.tmp``, ``cw.W``, ``cw.Z``."""
    cdef int i, j, k, r, nn, a, b
    cdef double dmax = 0.0, s, t
    cdef double* dep = cw.piv
    cdef double* y = cw.tmp
    cdef double* W = cw.W
    cdef double* Z = cw.Z
    cdef double* Ki
    cdef double* Kj
    for i in range(n):
        if K[i * n + i] > dmax:
            dmax = K[i * n + i]
        x[i] = 0.0
    if not (dmax > 0.0):
        return 0
    r = 0
    for j in range(n):
        Kj = K + j * n
        s = Kj[j] - dot(Kj, Kj, j)
        if not (s > rtol * dmax):
            # dependent; 2: an exactly zero row of K (a zero row of A), whose
            # minimum-norm multiplier is zero: left out of the completion
            dep[j] = 2.0 if Kj[j] == 0.0 else 1.0
            for i in range(j, n):
                K[i * n + j] = 0.0
            continue
        dep[j] = 0.0
        r += 1
        s = 1.0 / sqrt(s)
        Kj[j] = s                          # the pivot is kept inverted
        for i in range(j + 1, n):
            Ki = K + i * n
            Ki[j] = (Ki[j] - dot(Ki, Kj, j)) * s
    # basic solution: L_II L_II^T y_I = rhs_I, y_D = 0 (dependent columns of
    # L are zero, so the sums may run over every index)
    for i in range(n):
        if dep[i] != 0.0:
            y[i] = 0.0
            continue
        t = rhs[i]
        for k in range(i):
            t -= K[i * n + k] * y[k]
        y[i] = t * K[i * n + i]
    for i in range(n - 1, -1, -1):               # row-oriented: y_k -= L_ik y_i
        if dep[i] != 0.0:
            continue
        y[i] *= K[i * n + i]
        t = y[i]
        Ki = K + i * n
        for k in range(i):
            y[k] -= Ki[k] * t
    nn = 0
    for j in range(n):
        if dep[j] == 1.0:
            nn += 1
    if nn > 0 and r > 0:
        # W (nn x n, zero on dependent columns): row a solves L_II^T w = L[d, I]^T
        a = 0
        for j in range(n):
            if dep[j] != 1.0:
                continue
            Ki = W + a * n
            for i in range(n):
                Ki[i] = K[j * n + i] if i < j else 0.0
            for i in range(j - 1, -1, -1):       # row-oriented back substitution
                if dep[i] != 0.0:
                    Ki[i] = 0.0
                    continue
                Ki[i] *= K[i * n + i]
                t = Ki[i]
                Kj = K + i * n
                for k in range(i):
                    Ki[k] -= Kj[k] * t
            a += 1
        # (I + W W^T) s = W y (SPD, eigenvalues >= 1), s in x[0:nn]
        for a in range(nn):
            for b in range(a + 1):
                t = 1.0 if a == b else 0.0
                for k in range(n):
                    t += W[a * n + k] * W[b * n + k]
                Z[a * nn + b] = t
        for a in range(nn):
            t = 0.0
            for k in range(n):
                t += W[a * n + k] * y[k]
            x[a] = t
        chol_factor(Z, nn)
        chol_solve(Z, nn, x, 1)
        # y_I -= W^T s ; y_D = s
        for a in range(nn):
            for k in range(n):
                y[k] -= W[a * n + k] * x[a]
        a = 0
        for j in range(n):
            if dep[j] == 1.0:
                y[j] = x[a]
                a += 1
    for i in range(n):
        x[i] = y[i]
    return r


# ---------------------------------------------------------------------------
# the kernels
# ---------------------------------------------------------------------------
cdef inline int constraint_rows(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                                double* g, double* A, double* bias, Work* w, CWork* cw) noexcept nogil:
    """Residual (m,), A (m, nv) and dA dq (m,) at one state (``dq`` may be
    NULL: zero bias).  Any output may be NULL."""
    cdef int r, st
    forward_pass(m, q, dq, w, True)
    world_kinematics(m, w, cw)
    st = closure_rows(m, c, q, w, cw)
    if st != 0:
        return st
    for r in range(c.m):
        if g != NULL:
            g[r] = cw.g[r]
        if bias != NULL:
            bias[r] = cw.bias[r]
    if A != NULL:
        dense_rows(m, c, w, cw, A, False)
    return 0


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
    info[0] = psd_solve(cw.K, nr, cw.rhs, lam, cw, c.rcond)
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


cdef inline int body_dof(const ModelC* m, int b) noexcept nogil:
    """The deepest dof on the root path of body b (-1: none, or the world)."""
    while b >= 0 and m.nvi[b] == 0:
        b = m.parent[b]
    return -1 if b < 0 else m.iv[b] + m.nvi[b] - 1


cdef inline int path_dof(const ModelC* m, int kd, int p) noexcept nogil:
    # the dof at depth p on the root path of dof kd
    return kd if p == m.vdep[kd] else m.vanc[m.voff[kd] + p]


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


cdef inline void side_values(const ModelC* m, const ClosC* c, const Work* w, const CWork* cw,
                             int r0, int g, int side, int kd, double* V) noexcept nogil:
    """Rows r0 .. r0 + g - 1 of A restricted to the root path of dof ``kd``,
    from side ``side`` of their closure (a coupler row: its dof ``ri`` on
    side 0, ``-rcoef`` at ``rj`` on side 1), by depth: row r0 + j at depth
    p in ``V[j n + p]``, n = depth(kd) + 1.  As in ``dense_rows``:
    ``A_r[v] = S0_v^T F0`` with the world-frame Jacobians ``S0`` that
    ``crba_packed`` leaves in ``w.U`` and the world-frame wrenches of
    ``closure_rows`` (``world``)."""
    cdef int r, col, i, b, p, n = m.vdep[kd] + 1
    cdef const double* S
    cdef const double* F
    if c.rtype[r0] == ROW_COUPLER:
        for i in range(n):
            V[i] = 0.0
        V[n - 1] = 1.0 if side == 0 else -c.rcoef[r0]
        return
    b = c.body_a[c.rk[r0]] if side == 0 else c.body_b[c.rk[r0]]
    i = b
    while i >= 0:
        for r in range(m.nvi[i]):
            S = w.U + 36 * i + 6 * r
            p = m.vdep[m.iv[i]] + r
            for col in range(g):
                F = cw.F + 12 * (r0 + col) + 6 * side
                V[col * n + p] = (S[0] * F[0] + S[1] * F[1] + S[2] * F[2]
                                  + S[3] * F[3] + S[4] * F[4] + S[5] * F[5])
        i = m.parent[i]


cdef inline double path_dot(const ModelC* m, int kd, int lo, const double* V,
                            const double* x) noexcept nogil:
    # sum over the depths p >= lo of the root path of dof kd: V[p - lo] x[dof at p]
    cdef int n
    if kd < 0:
        return 0.0
    n = m.vdep[kd]
    return gather_dot(V, m.vanc + m.voff[kd] + lo, x, n - lo) + V[n - lo] * x[kd]


cdef inline void path_axpy(const ModelC* m, int kd, int lo, const double* V, int g,
                           const double* y, double* x) noexcept nogil:
    # x[dof at p] += sum_j V[j n + p - lo] y[j] over the depths p >= lo of
    # the root path of dof kd (n = depth(kd) + 1 - lo)
    cdef int p, j, n = m.vdep[kd] + 1 - lo
    cdef double t
    for p in range(lo, m.vdep[kd] + 1):
        t = 0.0
        for j in range(g):
            t += V[j * n + p - lo] * y[j]
        x[path_dof(m, kd, p)] += t


cdef inline void block_add(const double* Y1, int ld1, int g1, const double* Y2, int ld2,
                           int g2, int n, double* K, int ld) noexcept nogil:
    """K[:g1, :g2] (leading dimension ld) += Y1^T Y2 over n rows, for the
    columns Y1[i ld1 : i ld1 + n] and Y2[j ld2 : j ld2 + n]: two entries of
    a row of K at a time, each with two running sums (independent chains
    of additions)."""
    cdef int i, j, p
    cdef double s0, s1, t0, t1
    cdef const double* a
    cdef const double* b0
    cdef const double* b1
    for i in range(g1):
        a = Y1 + i * ld1
        j = 0
        while j < g2:
            b0 = Y2 + j * ld2
            b1 = b0 + ld2 if j + 1 < g2 else b0
            s0 = s1 = t0 = t1 = 0.0
            p = 0
            while p + 2 <= n:
                s0 += a[p] * b0[p]
                s1 += a[p] * b1[p]
                t0 += a[p + 1] * b0[p + 1]
                t1 += a[p + 1] * b1[p + 1]
                p += 2
            if p < n:
                s0 += a[p] * b0[p]
                s1 += a[p] * b1[p]
            K[i * ld + j] += s0 + t0
            if j + 1 < g2:
                K[i * ld + j + 1] += s1 + t1
            j += 2


cdef struct RowGroup:
    # the rows of one closure (or one coupler row) on the dense route, with
    # their values on two pieces of root paths (see closed_forward_dense)
    int a0      # first active index (into cw.act, cw.lc and K)
    int g       # rows (active ones only)
    int k1      # deepest dof of the main piece's path (-1: none)
    int k2      # deepest dof of the tail's path (-1: no tail)
    int lo      # first depth of the tail (below the two paths' common ancestors)
    int off     # offset of the values in cw.Ad: the main piece's g columns, then the tail's


cdef inline int path_len(const ModelC* m, int k) noexcept nogil:
    # dofs on the root path of dof k (0 for k = -1)
    return m.vdep[k] + 1 if k >= 0 else 0


cdef inline int dense_groups(const ModelC* m, const ClosC* c, const Work* w, CWork* cw,
                             RowGroup* G, int* na_out, const double* fixed,
                             bint keep) noexcept nogil:
    """The row groups of the dense route and A's values on their pieces
    (in ``cw.Ad``), rows of A that are exactly zero left out unless
    ``keep`` (the soft solver and the sparse route keep every row).  ``fixed`` (nv,) or NULL: dofs whose columns
    are left out (set to zero: the prescribed dofs of hybrid dynamics).
    Writes the active rows into ``cw.act``, their count into ``na_out``;
    returns the number of groups."""
    cdef int j, i, p, g, ga, k1, k2, n0, n1, nt, nc, r0 = 0, na = 0, ng = 0, off = 0
    cdef double* V0
    cdef double* V1
    cdef bint nz
    while r0 < c.m:
        g = 1
        if c.rtype[r0] == ROW_COUPLER:
            k1 = c.ri[r0]
            k2 = c.rj[r0]
        else:
            while (g < 6 and r0 + g < c.m and c.rtype[r0 + g] != ROW_COUPLER
                   and c.rk[r0 + g] == c.rk[r0]):
                g += 1
            k1 = body_dof(m, c.body_a[c.rk[r0]])
            k2 = body_dof(m, c.body_b[c.rk[r0]])
        n0 = path_len(m, k1)
        n1 = path_len(m, k2)
        nc = 0
        nt = 0
        V0 = cw.Ad + off
        V1 = V0 + n0 * g
        if k1 >= 0:
            side_values(m, c, w, cw, r0, g, 0, k1, V0)
        if k2 >= 0:
            side_values(m, c, w, cw, r0, g, 1, k2, V1)
            if k1 < 0:
                # side 1 alone: it is the main piece
                k1 = k2
                k2 = -1
                n0 = n1
            else:
                # side 1 on the common ancestors goes into the main piece
                # (summed as dense A would be), the rest is the tail
                nc = path_common(m, k1, k2, 0, n0 if n0 < n1 else n1)
                nt = n1 - nc
                for j in range(g):
                    for p in range(nc):
                        V0[j * n0 + p] += V1[j * n1 + p]
                    for p in range(nt):
                        V1[j * nt + p] = V1[j * n1 + nc + p]
        if fixed != NULL:
            for p in range(n0):
                if fixed[path_dof(m, k1, p)] != 0.0:
                    for j in range(g):
                        V0[j * n0 + p] = 0.0
            for p in range(nt):
                if fixed[path_dof(m, k2, nc + p)] != 0.0:
                    for j in range(g):
                        V1[j * nt + p] = 0.0
        # keep the rows that are not exactly zero, compacted in place
        ga = 0
        for j in range(g):
            nz = keep
            p = 0
            while not nz and p < n0:
                nz = V0[j * n0 + p] != 0.0
                p += 1
            p = 0
            while not nz and p < nt:
                nz = V1[j * nt + p] != 0.0
                p += 1
            if nz:
                cw.act[na + ga] = r0 + j
                ga += 1
        if ga > 0:
            if ga != g:
                for j in range(ga):
                    i = <int> cw.act[na + j] - r0
                    for p in range(n0):
                        V0[j * n0 + p] = V0[i * n0 + p]
                for j in range(ga):
                    i = <int> cw.act[na + j] - r0
                    for p in range(nt):
                        V0[n0 * ga + j * nt + p] = V1[i * nt + p]
            G[ng].a0 = na
            G[ng].g = ga
            G[ng].k1 = k1
            G[ng].k2 = k2 if nt > 0 else -1
            G[ng].lo = nc
            G[ng].off = off
            ng += 1
            na += ga
            off += (n0 + nt) * ga
        r0 += g
    na_out[0] = na
    return ng


cdef inline void group_pieces(const ModelC* m, const CWork* cw, const RowGroup* G, int* k,
                              int* lo, int* hi, double** Y) noexcept nogil:
    # the group's two pieces: deepest dof, depth range [lo, hi) and columns
    # of Y (the main piece from depth 0, then the tail from G.lo)
    k[0] = G.k1
    k[1] = G.k2
    lo[0] = 0
    lo[1] = G.lo
    hi[0] = path_len(m, k[0])
    hi[1] = path_len(m, k[1])
    Y[0] = cw.Ad + G.off
    Y[1] = Y[0] + hi[0] * G.g


cdef inline void group_block(const ModelC* m, const CWork* cw, const RowGroup* Ga,
                             const RowGroup* Gb, double* K, int ld) noexcept nogil:
    """``K[:g_a, :g_b] += Y_a^T Y_b`` (leading dimension ld) for two groups'
    columns of Y: two pieces meet on the depths both cover, up to their
    paths' common ancestors."""
    cdef int s1, s2, lo, hi
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef int qk[2]
    cdef int qlo[2]
    cdef int qhi[2]
    cdef double* pY[2]
    cdef double* qY[2]
    group_pieces(m, cw, Ga, pk, plo, phi, pY)
    group_pieces(m, cw, Gb, qk, qlo, qhi, qY)
    for s1 in range(2):
        if pk[s1] < 0:
            continue
        for s2 in range(2):
            if qk[s2] < 0:
                continue
            lo = plo[s1] if plo[s1] > qlo[s2] else qlo[s2]
            hi = phi[s1] if phi[s1] < qhi[s2] else qhi[s2]
            hi = path_common(m, pk[s1], qk[s2], lo, hi)
            if hi > lo:
                block_add(pY[s1] + lo - plo[s1], phi[s1] - plo[s1], Ga.g,
                          qY[s2] + lo - qlo[s2], qhi[s2] - qlo[s2], Gb.g, hi - lo, K, ld)


cdef inline void dense_gram(const ModelC* m, CWork* cw, const RowGroup* G, int ng,
                            int na) noexcept nogil:
    """``cw.K = Y^T Y`` (na x na) from the groups' columns of Y, block by
    block (the blocks on and above the diagonal, then mirrored)."""
    cdef int a, b, i, j
    cdef double* Kr
    for i in range(na * na):
        cw.K[i] = 0.0
    for a in range(ng):
        for b in range(a, ng):
            group_block(m, cw, &G[a], &G[b], cw.K + G[a].a0 * na + G[b].a0, na)
    for i in range(na):
        Kr = cw.K + i * na
        for j in range(i):
            Kr[j] = cw.K[j * na + i]


cdef inline int sparse_solve(const ModelC* m, const ClosC* c, CWork* cw,
                             const RowGroup* G) noexcept nogil:
    """The sparse route's ``lam`` (``cw.lc``) from ``cw.rhs``: ``K = Y^T Y``
    (plus ``cfm I`` for soft rows) assembled block by block into the
    pattern of its factor -- only the group pairs whose rows' supports meet
    -- and solved by ``_spchol.pxd`` (minimum-norm on dependent rows).
    Every row is kept (``dense_groups(keep=True)``: row r is group row r).
    Returns the rank, or -1 when too many rows are dependent."""
    cdef const SpKKT* sp = c.sp
    cdef int n = sp.ch.n, p, i, j, t, ga, gb
    cdef double* Lx = cw.sws
    cdef double* dep = Lx + sp.ch.nnz
    cdef double* x = dep + n
    cdef double* y = x + n
    cdef double blk[36]
    cdef int rank
    for t in range(sp.ch.nnz):
        Lx[t] = 0.0
    for p in range(sp.npair):
        ga = G[sp.pga[p]].g
        gb = G[sp.pgb[p]].g
        for i in range(ga * gb):
            blk[i] = 0.0
        group_block(m, cw, &G[sp.pga[p]], &G[sp.pgb[p]], blk, gb)
        for i in range(ga * gb):
            t = sp.dst[sp.poff[p] + i]
            if t >= 0:
                Lx[t] += blk[i]
    if c.cfm > 0.0:
        for j in range(n):
            Lx[sp.ch.Lp[j]] += c.cfm
    rank = spchol_factor(&sp.ch, Lx, x, dep, c.rcond)
    for i in range(n):
        y[sp.pinv[i]] = cw.rhs[i]
    if spchol_solve(&sp.ch, Lx, dep, y, y + n) != 0:
        return -1
    for i in range(n):
        cw.lc[i] = y[sp.pinv[i]]
    return rank


cdef inline int closed_forward_dense(const ModelC* m, const ClosC* c, const double* q,
                                     const double* dq, double* ddq, const double* tau,
                                     const double* fext, double* lam, double* info, Work* w,
                                     CWork* cw) noexcept nogil:
    """Forward dynamics by :func:`closed_dense` (``tau`` read only)."""
    return closed_dense(m, c, q, dq, ddq, <double*> tau, NULL, fext, lam, info, w, cw)


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


cdef inline int closed_dense(const ModelC* m, const ClosC* c, const double* q,
                             const double* dq, double* ddq, double* tau,
                             const unsigned char* pres, const double* fext, double* lam,
                             double* info, Work* w, CWork* cw) noexcept nogil:
    """Constrained forward dynamics by building ``M`` (the route Kim's
    eqs. 67-69 avoid; kept to show where each wins): CRBA, RNEA for the
    bias, then Featherstone's tree-sparse factorisation ``M = L^T L``
    (RBDA Sec. 6.5: no fill-in, cost sum of squared dof depths), packed by
    ancestors (``_dense.pxd``), and

        x = L^{-T} (tau - b),   Y = L^{-T} A^T,   K = A M^{-1} A^T = Y^T Y,
        K lam = -(Y^T x + dA dq)        (Y^T x = A M^{-1} (tau - b)),
        ddq = L^{-1} (x + Y lam).

    A row of A is the sum of its closure's two sides, each non-zero only
    on the root path of its body (a coupler row: of its two dofs), so the
    row lives on the first side's path (the "main" piece, by depth) plus
    the part of the second side's path below the common ancestors (the
    "tail"), and so does its column of Y, since L^{-T} keeps a root path's
    support.  The rows of one closure share these pieces and are solved
    together on them (a ``RowGroup``); K's block of two groups is a sum
    over the depths where their pieces meet.  Rows of A that are exactly
    zero are left out (zero multiplier).  With ``c.cfm > 0`` (the soft
    solver) every row is kept and ``(K + cfm I) lam = rhs - damping A dq``
    is solved by Cholesky.  Same outputs and status codes as
    :func:`closed_dynamics`, plus ST_MASS_NOT_PD.

    Hybrid dynamics (``pres``, per body: ``ddq`` read on the prescribed
    dofs u and written on the others v, ``tau`` the other way round, as in
    :func:`closed_dynamics`; eqs. 70-77): RNEA at ``ddq_u`` (``ddq_v = 0``)
    gives ``h = b + M_.u ddq_u``; the u rows and columns of the packed M
    are replaced by the identity, so the same factorisation is that of
    ``M_vv``; A's u columns are left out of the pieces and their term
    ``A_u ddq_u`` joins ``dA dq``.  Then ``tau_u = h_u + M_uv ddq_v -
    (A^T lam)_u`` (``dense_finish``)."""
    cdef int i, j, a, k, p, s1, ng, na, st, nr = c.m, nv = m.nv
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef double* pY[2]
    cdef double t, acc2
    cdef double* P = cw.Md
    cdef double* D = cw.Md + nv * nv - nv
    cdef RowGroup* G = <RowGroup*> cw.gd
    cdef double* x = ddq                # x = L^{-T} (tau - b), then L^{-1} (x + Y lam)
    cdef double* fixed = NULL           # (nv,) 1 on prescribed dofs (hybrid)
    cdef double* Aud = cw.Pv            # (m,) A_u ddq_u (hybrid)
    cdef double* h = cw.Pv + nr + nv    # (nv,) b + M_.u ddq_u (hybrid)
    cdef double* P0 = cw.Pq             # the packed M before the identity goes in (hybrid)
    if pres != NULL:
        fixed = cw.Pv + nr
        x = cw.ts
        for i in range(m.nb):
            for k in range(m.nvi[i]):
                fixed[m.iv[i] + k] = 1.0 if pres[i] else 0.0
        for k in range(nv):
            cw.us[k] = ddq[k] if fixed[k] != 0.0 else 0.0
        rnea(m, q, dq, cw.us, fext, True, x, w)         # x := b + M_.u ddq_u
    else:
        rnea(m, q, dq, NULL, fext, True, x, w)          # x := b(q, dq)
    crba_packed(m, P, D, w)                             # reuses rnea's T and S
    if pres != NULL:
        for i in range(nv):
            h[i] = x[i]
        for i in range(m.voff[nv]):
            P0[i] = P[i]
    for i in range(nv):
        x[i] = tau[i] - x[i]
    if pres != NULL:
        # M_vv: the prescribed dofs' rows and columns become the identity
        for k in range(nv):
            if fixed[k] != 0.0:
                x[k] = 0.0
                D[k] = 1.0
                for p in range(m.vdep[k]):
                    P[m.voff[k] + p] = 0.0
            else:
                for p in range(m.vdep[k]):
                    if fixed[m.vanc[m.voff[k] + p]] != 0.0:
                        P[m.voff[k] + p] = 0.0
    if tree_factor(P, D, nv, m.vdep, m.voff, m.vanc) != 0:
        return ST_MASS_NOT_PD
    tree_solve_Lt(P, D, nv, m.vdep, m.voff, m.vanc, x)
    info[0] = 0.0
    info[1] = 0.0
    if nr == 0:
        tree_solve_L(P, D, nv, m.vdep, m.voff, m.vanc, x)
        return dense_finish(m, c, ddq, tau, pres, lam, x, fixed, P0, h, w, cw)
    # rnea's forward pass left T, S, V, eta for these (q, dq); with ddq_u
    # in RNEA its dV are not the bias accelerations: recompute them
    world_kinematics(m, w, cw, pres == NULL)
    st = closure_rows(m, c, q, w, cw, True)
    if st != 0:
        return st
    ng = dense_groups(m, c, w, cw, G, &na, fixed, c.cfm > 0.0 or c.sp != NULL)
    if pres != NULL:
        world_rows_times(m, c, w, cw, cw.us, Aud)         # A_u ddq_u
    if c.damping != 0.0 and dq != NULL:
        world_rows_times(m, c, w, cw, dq, cw.g)           # A dq
    # Y = L^{-T} A^T on the pieces, in place (the tail first: it updates
    # the main piece); rhs = -(A M^{-1} (tau - b) + dA dq)                 (eq. 67)
    for a in range(ng):
        group_pieces(m, cw, &G[a], pk, plo, phi, pY)
        for s1 in range(1, -1, -1):
            # (main piece k = -1: a soft row with no dofs on either side)
            if pk[s1] >= 0:
                tree_path_solve_Lt(P, D, m.vdep, m.voff, m.vanc, pk[s1], pY[s1], G[a].g,
                                   plo[s1], pY[0], phi[0])
        for j in range(G[a].g):
            i = G[a].a0 + j
            t = cw.bias[<int> cw.act[i]]
            for s1 in range(2):
                t += path_dot(m, pk[s1], plo[s1], pY[s1] + j * (phi[s1] - plo[s1]), x)
            if c.damping != 0.0 and dq != NULL:
                t += c.damping * cw.g[<int> cw.act[i]]
            if pres != NULL:
                t += Aud[<int> cw.act[i]]
            cw.rhs[i] = -t
    if c.sp != NULL:
        # the sparse route: K never formed dense
        st = sparse_solve(m, c, cw, G)
        if st < 0:
            return ST_SPARSE_REDUNDANT
        info[0] = st
    elif c.cfm > 0.0:
        dense_gram(m, cw, G, ng, na)
        # soft: (K + cfm I) lam = rhs, positive definite
        for a in range(na):
            cw.K[a * na + a] += c.cfm
            cw.lc[a] = cw.rhs[a]
        if chol_factor(cw.K, na) != 0:
            return ST_MASS_NOT_PD
        chol_solve(cw.K, na, cw.lc, 1)
        info[0] = na
    else:
        dense_gram(m, cw, G, ng, na)
        info[0] = psd_solve(cw.K, na, cw.rhs, cw.lc, cw, c.rcond)
    scatter_lam(nr, na, cw, lam)
    # ddq = L^{-1} (x + Y lam)                                           (eq. 69)
    for a in range(ng):
        group_pieces(m, cw, &G[a], pk, plo, phi, pY)
        for s1 in range(2):
            if pk[s1] >= 0:
                path_axpy(m, pk[s1], plo[s1], pY[s1], G[a].g, cw.lc + G[a].a0, x)
    tree_solve_L(P, D, nv, m.vdep, m.voff, m.vanc, x)
    st = dense_finish(m, c, ddq, tau, pres, lam, x, fixed, P0, h, w, cw)
    # |A ddq + dA dq| over every row, A ddq from the body motions
    world_rows_times(m, c, w, cw, ddq, cw.g)
    acc2 = 0.0
    for i in range(nr):
        t = cw.g[i] + cw.bias[i]
        acc2 += t * t
    info[1] = sqrt(acc2)
    return st


cdef inline int dense_finish(const ModelC* m, const ClosC* c, double* ddq, double* tau,
                             const unsigned char* pres, const double* lam, const double* x,
                             const double* fixed, const double* P0, const double* h, Work* w,
                             CWork* cw) noexcept nogil:
    """Hybrid dynamics' last step on the dense route: ``ddq_v = x_v`` and

        tau_u = (M ddq + b - A^T lam)_u = h_u + M_uv ddq_v - (A^T lam)_u

    with ``h = b + M_.u ddq_u`` from the first RNEA and ``M_uv`` from the
    packed M as CRBA left it (``P0``: the entries coupling a prescribed and
    a free dof are read, each from the row of the deeper one).  ``cw.xs``
    scratch.  Forward dynamics (``pres`` NULL): nothing to do (x is ddq)."""
    cdef int k, p, j
    if pres == NULL:
        return 0
    for k in range(m.nv):
        if fixed[k] == 0.0:
            ddq[k] = x[k]
        else:
            tau[k] = h[k]
    for k in range(m.nv):
        for p in range(m.vdep[k]):
            j = m.vanc[m.voff[k] + p]
            if fixed[k] != 0.0 and fixed[j] == 0.0:
                tau[k] += P0[m.voff[k] + p] * ddq[j]
            elif fixed[k] == 0.0 and fixed[j] != 0.0:
                tau[j] += P0[m.voff[k] + p] * ddq[k]
    if c.m > 0:
        applied_forces(m, c, w, cw, lam, cw.xs)
        for k in range(m.nv):
            if fixed[k] != 0.0:
                tau[k] -= cw.xs[k]
    return 0


cdef inline void chol_mul(const double* L, int n, const double* x, double* y,
                          double* out) noexcept nogil:
    """out = L L^T x for the factor L (lower triangle of the row-major n x n
    array) left by ``chol_factor``; ``y`` is scratch (n,)."""
    cdef int i, k
    cdef double t
    for i in range(n):
        t = 0.0
        for k in range(i, n):
            t += L[k * n + i] * x[k]
        y[i] = t
    for i in range(n):
        t = 0.0
        for k in range(i + 1):
            t += L[i * n + k] * y[k]
        out[i] = t


cdef inline int qr_pivoted(double* X, int n, int nr, double rcond, double* perm,
                           double* hb) noexcept nogil:
    """Householder QR with column pivoting, in place, of the n x nr matrix
    whose column j is ``X[j n : (j + 1) n]`` (for the projection route:
    ``A^T``, one row of A per column): ``X P = Q R``, stopping at the rank r
    (the first pivot column with norm ``<= rcond`` times the first).  After
    it ``R_ij = X[j n + i]`` (i <= j), reflector k's vector lies below R in
    column k (its coefficient in ``hb[k]``), and ``perm[k]`` (as doubles) is
    the column moved to position k.  Returns r."""
    cdef int i, j, k, p, rank
    cdef int kmax = n if n < nr else nr
    cdef double t, nrm, amax, alpha, u0, tk
    cdef double* Xk
    cdef double* Xj
    for j in range(nr):
        perm[j] = j
    rank = 0
    amax = 0.0
    for k in range(kmax):
        p = -1
        nrm = 0.0
        for j in range(k, nr):
            Xj = X + j * n
            t = 0.0
            for i in range(k, n):
                t += Xj[i] * Xj[i]
            if t > nrm:
                nrm = t
                p = j
        nrm = sqrt(nrm)
        if k == 0:
            amax = nrm
        if p < 0 or not (nrm > rcond * amax):
            break
        Xk = X + k * n
        if p != k:
            Xj = X + p * n
            for i in range(n):
                t = Xk[i]
                Xk[i] = Xj[i]
                Xj[i] = t
            t = perm[k]
            perm[k] = perm[p]
            perm[p] = t
        # H_k = 1 - tk v v^T with v = (1, x[1:] / u0), u0 = x0 - alpha
        alpha = -nrm if Xk[k] >= 0.0 else nrm
        u0 = Xk[k] - alpha
        tk = (alpha - Xk[k]) / alpha
        for i in range(k + 1, n):
            Xk[i] /= u0
        Xk[k] = alpha
        hb[k] = tk
        for j in range(k + 1, nr):
            Xj = X + j * n
            t = Xj[k]
            for i in range(k + 1, n):
                t += Xk[i] * Xj[i]
            t *= tk
            Xj[k] -= t
            for i in range(k + 1, n):
                Xj[i] -= t * Xk[i]
        rank += 1
    return rank


cdef inline void qr_form_q(const double* X, const double* hb, int n, int rank,
                           double* Q) noexcept nogil:
    """``Q = H_0 H_1 ... H_{rank-1}`` (n x n, column j in ``Q[j n :]``) from
    the reflectors ``qr_pivoted`` left in X."""
    cdef int i, j, k
    cdef double t, tk
    cdef const double* Xk
    cdef double* Qj
    # Q = H_0 H_1 ... H_{rank-1}, applied to the identity from the last
    for j in range(n * n):
        Q[j] = 0.0
    for j in range(n):
        Q[j * n + j] = 1.0
    for k in range(rank - 1, -1, -1):
        tk = hb[k]
        Xk = X + k * n
        for j in range(k, n):
            Qj = Q + j * n
            t = Qj[k]
            for i in range(k + 1, n):
                t += Xk[i] * Qj[i]
            t *= tk
            Qj[k] -= t
            for i in range(k + 1, n):
                Qj[i] -= t * Xk[i]


cdef inline int qr_min_norm(const double* X, const double* Q, const double* perm, int n, int nr,
                            int rank, const double* e, double* z, double* K,
                            double* lam) noexcept nogil:
    """The minimum-norm ``lam`` (nr,) with ``A^T lam = e`` (n,) from the QR
    of ``A^T`` (``qr_pivoted``, ``qr_form_q``): ``P^T lam = R_1^T (R_1
    R_1^T)^{-1} Q_1^T e`` with ``R_1`` the first ``rank`` rows of R (the
    minimum-norm solution for the projection of e on the range of A^T
    when e is not in it).  ``z`` (rank,)
    and ``K`` (rank^2) scratch.  Returns 0, or 1 if ``R_1 R_1^T`` is not
    positive definite."""
    cdef int i, j, k
    cdef double t
    cdef const double* Xk
    cdef const double* Xj
    cdef const double* Qj
    for i in range(rank):                               # z = Q_1^T e
        Qj = Q + i * n
        t = 0.0
        for k in range(n):
            t += Qj[k] * e[k]
        z[i] = t
    # K = R_1 R_1^T, one column of R at a time (rank-one updates)
    for i in range(rank * rank):
        K[i] = 0.0
    for k in range(nr):
        Xk = X + k * n
        for i in range(rank if rank < k + 1 else k + 1):
            t = Xk[i]
            for j in range(i + 1):
                K[i * rank + j] += t * Xk[j]
    for i in range(rank):
        for j in range(i):
            K[j * rank + i] = K[i * rank + j]
    if rank > 0:
        if chol_factor(K, rank) != 0:
            return 1
        chol_solve(K, rank, z, 1)
    for j in range(nr):                                 # lam[perm[j]] = (R_1^T z)_j
        Xj = X + j * n
        t = 0.0
        for i in range(rank if rank < j + 1 else j + 1):
            t += Xj[i] * z[i]
        lam[<int> perm[j]] = t
    return 0


cdef inline int projection_finish(const ModelC* m, const ClosC* c, const double* q,
                                  const double* dq, double* ddq, double* tau,
                                  const unsigned char* pres, const double* fext, const double* lam,
                                  const double* out, const double* vmap, int nv, Work* w,
                                  CWork* cw) noexcept nogil:
    """Hybrid dynamics' last step on the projection route: ``ddq_v = out``
    and ``tau_u = (M ddq + b - A^T lam)_u`` from a second RNEA (``cw.tx``)
    and ``A`` (``cw.Ad``, rows by the whole dofs).  Forward dynamics
    (``pres`` NULL): nothing to do (``out`` is ``ddq``)."""
    cdef int i, j, k, nvf = m.nv
    cdef double t
    if pres == NULL:
        return 0
    for j in range(nv):
        ddq[<int> vmap[j]] = out[j]
    rnea(m, q, dq, ddq, fext, True, cw.tx, w)
    for i in range(m.nb):
        if pres[i]:
            for k in range(m.iv[i], m.iv[i] + m.nvi[i]):
                t = cw.tx[k]
                for j in range(c.m):
                    t -= cw.Ad[j * nvf + k] * lam[j]
                tau[k] = t
    return 0


cdef inline int closed_forward_projection(const ModelC* m, const ClosC* c, const double* q,
                                          const double* dq, double* ddq, double* tau,
                                          const unsigned char* pres, const double* fext, double* lam,
                                          double* info, Work* w, CWork* cw) noexcept nogil:
    """Constrained forward dynamics by reduced-coordinate projection (seed
    004 Sec. 4, Featherstone Sec. 3.7), the native twin of
    ``gear.solvers.ProjectionSolver``:

        A^T P = Q R               Householder QR with column pivoting; rank r
                                  where |R_kk| <= rcond |R_00|
        G = Q[:, r:]              orthonormal basis of the null space of A
        g = Q[:, :r] z,  R_1^T z = -P^T dA dq    (minimum-norm A g = -dA dq)
        ddq = g + G (G^T M G)^{-1} G^T (tau - b - M g)
        A^T lam = M ddq + b - tau, minimum-norm:
                  P^T lam = R_1^T (R_1 R_1^T)^{-1} Q[:, :r]^T (M ddq + b - tau)

    with ``R_1`` the first r rows of R.  Same outputs and status codes as
    :func:`closed_forward_dense` (``info[0]`` is the rank r).

    Hybrid dynamics (``pres`` (nb,) 1 on prescribed joints, or NULL;
    ``ddq`` read on their dofs u and written on the free dofs v, ``tau``
    the other way round, as ``gear.solvers.ProjectionSolver``'s NumPy
    path): the same projection on the free dofs, with

        h = b + M_.u ddq_u        (RNEA with ddq_u)
        M -> M_vv,  A -> A_v,  f = tau_v - h_v,  dA dq -> dA dq + A_u ddq_u

    so that ``lam`` is the minimum-norm solution of ``A_v^T lam = (M ddq
    + b - tau)_v``, and then ``tau_u = (M ddq + b - A^T lam)_u`` from a
    second RNEA with the whole ``ddq`` (KKT eqs. 70-77)."""
    cdef int i, j, k, st, rank, nn, nr = c.m, nvf = m.nv
    cdef int nv = nvf            # size of the projected problem: nvf, or the free dofs
    cdef double t, acc2
    cdef double* M = cw.Md
    cdef double* A = cw.Ad       # (nr, nv)
    cdef double* X = cw.Bd       # A^T by columns, then R and the reflectors
    cdef double* Q = cw.Pq       # (nv, nv) by columns
    cdef double* H = cw.Pr       # (nn, nv): column j of L^T G in H[j nv:]
    cdef double* Mr = cw.Pr + nv * nv   # (nn, nn) G^T M G
    cdef double* Xj
    cdef double* Qj
    cdef double* Hj
    cdef double* f = cw.Pv       # tau - b
    cdef double* g = cw.Pv + nv
    cdef double* y = cw.Pv + 2 * nv
    cdef double* e = cw.Pv + 3 * nv
    cdef double* hb = cw.Pv + 4 * nv   # reflector coefficients
    cdef double* perm = cw.piv
    cdef double* z = cw.tmp
    cdef double* K = cw.K
    cdef double* vmap = cw.xs    # (hybrid) the free dofs, as doubles
    cdef double* out = ddq       # the projected problem's accelerations (hybrid: cw.ts)
    cdef double* rb = cw.bias    # its rows' dA dq (hybrid: + A_u ddq_u in cw.rhs)
    if pres == NULL:
        rnea(m, q, dq, NULL, fext, True, f, w)          # f := b(q, dq)
    else:
        nv = 0
        for i in range(m.nb):
            for k in range(m.iv[i], m.iv[i] + m.nvi[i]):
                if pres[i]:
                    cw.us[k] = ddq[k]
                else:
                    cw.us[k] = 0.0
                    vmap[nv] = k
                    nv += 1
        rnea(m, q, dq, cw.us, fext, True, f, w)         # f := h = b + M_.u ddq_u
        out = cw.ts
        rb = cw.rhs
    crba_after_fk(m, M, w)                              # reuses rnea's T and S
    if pres == NULL:
        for i in range(nv):
            f[i] = tau[i] - f[i]
    else:
        # f_v and M_vv, packed in place (every entry moves to a lower index)
        for j in range(nv):
            f[j] = tau[<int> vmap[j]] - f[<int> vmap[j]]
        for j in range(nv):
            for k in range(nv):
                M[j * nv + k] = M[(<int> vmap[j]) * nvf + <int> vmap[k]]
    if chol_factor(M, nv) != 0:
        return ST_MASS_NOT_PD
    info[0] = 0.0
    info[1] = 0.0
    if nr == 0:
        for i in range(nv):
            out[i] = f[i]
        chol_solve(M, nv, out, 1)
        return projection_finish(m, c, q, dq, ddq, tau, pres, fext, lam, out, vmap, nv, w, cw)
    world_kinematics(m, w, cw, pres == NULL)   # (hybrid: RNEA's dV are not the bias accelerations)
    st = closure_rows(m, c, q, w, cw, True)
    if st != 0:
        return st
    dense_rows(m, c, w, cw, A, True)
    if pres != NULL:
        for j in range(nr):
            t = cw.bias[j]
            for k in range(nvf):
                if cw.us[k] != 0.0:
                    t += A[j * nvf + k] * cw.us[k]
            rb[j] = t
    # -- A^T P = Q R by Householder reflections with column pivoting -----------
    # Column j of A^T (row j of A) is stored contiguously: X[j nv + i] =
    # (A^T)_ij, and so is every column of Q: Q[j nv + i] = Q_ij.  After the
    # loop, R_ij = X[j nv + i] (i <= j) and reflector k's vector lies below
    # it in column k.
    if pres == NULL:
        for j in range(nr * nv):
            X[j] = A[j]
    else:
        for j in range(nr):
            for k in range(nv):
                X[j * nv + k] = A[j * nvf + <int> vmap[k]]
    rank = qr_pivoted(X, nv, nr, c.rcond, perm, hb)
    nn = nv - rank
    qr_form_q(X, hb, nv, rank, Q)
    # -- minimum-norm particular solution: R_1^T z = -P^T dA dq, g = Q_1 z -----
    for j in range(rank):
        Xj = X + j * nv
        t = -rb[<int> perm[j]]
        for i in range(j):
            t -= Xj[i] * z[i]
        z[j] = t / Xj[j]
    for i in range(nv):
        g[i] = 0.0
    for j in range(rank):
        Qj = Q + j * nv
        for i in range(nv):
            g[i] += Qj[i] * z[j]
    # e = f - M g  (M holds its Cholesky factor L: M x = L (L^T x))
    chol_mul(M, nv, g, y, e)
    for i in range(nv):
        e[i] = f[i] - e[i]
    # -- ddq = g + G (G^T M G)^{-1} G^T e,  G = Q[:, rank:] ----------------------
    for i in range(nv):
        out[i] = g[i]
    if nn > 0:
        # H = L^T G (column j of H contiguous), then G^T M G = H^T H
        for j in range(nn):
            Hj = H + j * nv
            Qj = Q + (rank + j) * nv
            for i in range(nv):
                Hj[i] = 0.0
            for k in range(nv):
                t = Qj[k]
                for i in range(k + 1):
                    Hj[i] += M[k * nv + i] * t
        for i in range(nn):
            for j in range(i + 1):
                t = dot(H + i * nv, H + j * nv, nv)
                Mr[i * nn + j] = t
                Mr[j * nn + i] = t
            Qj = Q + (rank + i) * nv
            t = 0.0
            for k in range(nv):
                t += Qj[k] * e[k]
            y[i] = t
        if chol_factor(Mr, nn) != 0:
            return ST_MASS_NOT_PD
        chol_solve(Mr, nn, y, 1)
        for j in range(nn):
            Qj = Q + (rank + j) * nv
            for i in range(nv):
                out[i] += Qj[i] * y[j]
    # -- minimum-norm lam with A^T lam = M ddq + b - tau = M ddq - f -----------
    chol_mul(M, nv, out, y, e)
    for i in range(nv):
        e[i] -= f[i]
    if qr_min_norm(X, Q, perm, nv, nr, rank, e, z, K, lam) != 0:
        return ST_MASS_NOT_PD
    info[0] = rank
    st = projection_finish(m, c, q, dq, ddq, tau, pres, fext, lam, out, vmap, nv, w, cw)
    # |A ddq + dA dq|
    acc2 = 0.0
    for i in range(nr):
        t = cw.bias[i]
        for k in range(nvf):
            t += A[i * nvf + k] * ddq[k]
        acc2 += t * t
    info[1] = sqrt(acc2)
    return st


cdef inline int closed_inverse(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                               const double* ddq, double* tau, const unsigned char* act,
                               const double* fext, double rcond, double* lam, double* info,
                               Work* w, CWork* cw) noexcept nogil:
    """Closed-system inverse dynamics with an actuated/passive split (Kim
    eqs. 56-64) for the default objective (the minimum-norm constraint
    force), the native twin of ``gear.solvers.ConstraintSolver.inverse``:

        tau_r = M ddq + b                    RNEA
        A_p^T lam = tau_r,p - tau_p          eq. (57): minimum-norm lam from
                                             the pivoted QR of A_p^T (rank
                                             where |R_kk| <= rcond |R_00|)
        tau_a = tau_r,a - A_a^T lam          eqs. (58)/(60)

    ``act`` (nv,) 1 on the actuated dofs a, 0 on the passive ones p;
    ``tau`` holds the passive dofs' given torques on entry and the
    actuated ones on exit.  ``info`` = (rank, |A_p^T lam - rhs| / max(1,
    max |tau_r|)).  Returns 0; ST_INEXACT when that relative residual is
    above 1e-9 (the loops cannot follow ``ddq`` with the passive torques
    given: the caller falls back to hybrid dynamics, ``tau`` untouched);
    or ST_DIST_COINCIDE."""
    cdef int i, j, k, st, rank, np_ = 0, nr = c.m, nv = m.nv
    cdef double t, scale, r2
    cdef double* tr = cw.tx      # M ddq + b
    cdef double* pidx = cw.xs    # the passive dofs (as doubles)
    cdef double* e = cw.us       # (np,) the right-hand side of eq. (57)
    cdef double* hb = cw.ts
    cdef double* A = cw.Ad
    cdef double* X = cw.Bd       # A_p^T by columns
    rnea(m, q, dq, ddq, fext, True, tr, w)
    scale = 1.0
    for k in range(nv):
        if fabs(tr[k]) > scale:
            scale = fabs(tr[k])
        if not act[k]:
            pidx[np_] = k
            e[np_] = tr[k] - tau[k]
            np_ += 1
    for i in range(nr):
        lam[i] = 0.0
    info[0] = 0.0
    info[1] = 0.0
    if nr > 0:
        st = constraint_rows(m, c, q, dq, NULL, A, NULL, w, cw)
        if st != 0:
            return st
        if np_ > 0:
            for j in range(nr):
                for k in range(np_):
                    X[j * np_ + k] = A[j * nv + <int> pidx[k]]
            rank = qr_pivoted(X, np_, nr, rcond, cw.piv, hb)
            qr_form_q(X, hb, np_, rank, cw.Pq)
            if qr_min_norm(X, cw.Pq, cw.piv, np_, nr, rank, e, cw.tmp, cw.K, lam) != 0:
                return ST_MASS_NOT_PD
            info[0] = rank
    if np_ > 0:
        # |A_p^T lam - rhs| (no rows: |rhs|)
        r2 = 0.0
        for k in range(np_):
            t = -e[k]
            for j in range(nr):
                t += A[j * nv + <int> pidx[k]] * lam[j]
            r2 += t * t
        info[1] = sqrt(r2) / scale
        if not (info[1] <= 1e-9):
            return ST_INEXACT
    for k in range(nv):
        if act[k]:
            t = tr[k]
            for j in range(nr):
                t -= A[j * nv + k] * lam[j]
            tau[k] = t
    return 0

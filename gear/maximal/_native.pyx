# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The velocity-level maximal step, natively: Ruan, "Articulated rigid body
systems", eq. 12, on the dense route (the twin of
``gear.maximal.stepping._velocity_step`` for hard rows and the Euler
integrator).

Per state, with every body free (pose ``T_b``, body twist ``V_b``):

    f_b   = ad*_{V_b} (I_b V_b) + I_b (0, R_b^T g) + f_ext,b + joint wrenches
    V*    = V + h M^{-1} f                          (the free step)
    K     = J M^{-1} J^T,   K mu = r - J V*,  r = -(beta / h) g or 0
    V+    = V* + M^{-1} J^T mu,   T+ = T exp(h V+)  (Kim eq. 15)

``g`` and ``J`` come from the poses, row by row, as in
:func:`gear.maximal.rows.evaluate` (types pos, axis, dot, dist, helix);
every row meets at most two bodies, so ``J`` is kept as two 6-vectors a
row (``F``, and ``G = M_b^{-1} F``) and ``K_rs`` sums ``F_r . G_s`` over
the bodies the two rows share.  A joint coupler's row (``q_j = m q_s +
o``, on the two joints' children and parents) is kept as two such parts,
one per joint, summed into its row (``part_row``, ``coupler_part``).  ``K`` is solved like
:meth:`gear.maximal.kkt.RowSystem.solve`: Cholesky of ``K + delta I``
(``delta`` = 1e-12 of ``K``'s largest ``|entry|``; redundant rows make ``K``
singular) and up to four steps of refinement on ``K`` itself.  Up to
:data:`gear.maximal.kkt.DENSE_ROWS` rows ``K`` is dense, factorised on its
envelope; above, the plan carries ``K``'s sparse pattern (two rows meet
when they share a body) in a fill-reducing order with its factor's
pattern (``gear/constraints/sparse.py``), each body adds its segments'
products into the factor's values, the fixed-pattern sparse Cholesky of
``gear/algorithms/_spchol.pxd`` factorises them, and the refinement's
``K x`` is ``J M^{-1} J^T x`` from the rows' two blocks: linear in the
number of bodies for a tree or a chain of loops.

The Gauss-Newton projection (``gear.maximal.stepping.project``) reuses
the same pieces: ``T <- T exp(-M^{-1} J^T K^{-1} g)`` with ``J`` and the
factor of ``K`` from the start until ``max |g| <= tol``, then ``V <- V -
M^{-1} J^T K^{-1} J V`` at the new poses.

What is computed once serves several uses, without changing a bit:

- the rows of one joint or closure (a run of rows on the same bodies and
  placements, ``PlanC.same``) share their frames in the world and, at
  the acceleration level, their motion (``row_frames``, ``row_motion``);
- a row type's zero coefficients are left out (a dot row's ``F`` has no
  linear part: ``dotF``, ``mat6_vec_w``; ``to_body``'s flags);
- in a run (:func:`run`), each frame's joint error is the residual of the
  rows the next step evaluates at its start, and a step after a
  projection takes the rows, ``J``'s blocks and the factor that the
  projection's last factorisation left at the same pose (``ready``).

Joint torques are equal and opposite wrenches, ``w = S (S^T S)^{-1} tau``
on the child (``S^T w = tau``; ``S`` in the child frame, constant for most
kinds, from the relative rotation for universal and planar joints) and
``-Ad*_{X^{-1}} w`` on the parent (``X = T_p^{-1} T_b``, Kim eq. 8).

Storage: poses in and out as NumPy's (nb, 4, 4) row-major blocks; inside,
SE(3) as ``gear/spatial/_spatial.pxd`` (R row-major, then p).  Nothing here
validates input: ``gear/maximal/native.py`` does.
"""
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from libc.math cimport sqrt, sin, cos, fabs, atan2, rint, M_PI

from gear.spatial._spatial cimport (cross3, matmul3, matvec3, matTvec3, se3_mul, se3_inv, Ad_inv, dAd_inv,
                                    dad, ad, mat6_vec)
from gear.algorithms._dense cimport chol_factor, chol_solve, dot
from gear.algorithms._spchol cimport SpChol, spchol_set, spchol_factor, spchol_solve_basic
from gear.maximal._coords cimport PRISMATIC, joint_q, round_even
from gear.maximal._tree_step cimport (StepTree, StepW, stepwork, step_tree_scratch, tree_factor, tree_solve,
                                      TS_OK)
from gear.maximal._tree_route cimport plain_rtol

import numpy as np

cdef enum:
    POS = 0
    AXIS = 1
    DOT = 2
    DIST = 3
    HELIX = 4
    COUPLER = 5          # a part of a joint coupler's row (coupler_part)

cdef enum:
    ST_OK = 0
    ST_DIST = 1          # a distance row's two points coincide
    ST_CHOL = 2          # K + delta I not positive definite

cdef double REG = 1e-12          # kkt._REG
cdef int REFINE = 4              # kkt._REFINE
cdef double SMALL = 1e-6         # gear.spatial.stacks._SMALL


cdef struct PlanC:
    int nb, m, nv
    int m0                  # rows of the five geometric types; rows m0 .. m - 1 are joint couplers
    int mp                  # J's parts: a geometric row is one (r < m0), a coupler two, one per
                            # joint (part_row); F and G hold (mp, 12), the rows' arrays below
                            # (ty, ia, ib, same) mp entries, the geometric ones (ci .. pitch) m0
    const double* I6        # (nb, 36) body inertias (Kim eq. 22)
    const double* Minv      # (nb, 36) their inverses
    const int* parent       # (nb,)
    double gravity[3]
    const int* ty           # rows: type, bodies of {A}, {B} (-1: world), axis indices
    const int* ia
    const int* ib
    const int* ci
    const int* cj
    const double* RA        # (m, 9), (m, 3), (m, 9), (m, 3): the frames on their bodies
    const double* pA
    const double* RB
    const double* pB
    const double* offset    # (m,)
    const double* pitch     # (m,)
    const int* same         # (m,) 1: row r's frames are row r - 1's (the same bodies, placements)
    const int* nvb          # (nb,) joint torques: each body's joint's dof count ...
    const int* iv           # (nb,) ... its first velocity coordinate ...
    const int* vary         # (nb,) ... S constant (0), universal (1) or planar (2) ...
    const double* S         # (nb, 36) ... S (6 x nvb, column-major) where constant ...
    const double* RPl       # (nb, 9) ... the rotation of the joint's placement ...
    const double* axes      # (nb, 9) ... and (a1, a2, -) or (e1, e2, n) where S varies
    bint sparse             # K sparse (more rows than the dense route takes):
    SpChol ch               #   its factor's pattern (rows in a fill-reducing order) ...
    const int* pinv         #   (m,) row r of K is row pinv[r] of the factor
    int npair               #   each pair of segments (a row's 6-block) meeting on a body:
    const int* pf           #   (npair,) the offsets of the first's F and the second's G in
    const int* pg           #   the (m, 12) arrays, the first's row, and where their
    const int* pr           #   product F . G lands among the factor's values
    const int* bdst
    const double* kst       # (m,) compliant rows' stiffness and damping (Ruan, eqs. 13-14),
    const double* kdm       #   or NULL: hard rows
    const StepTree* tree    # the tree-ordered solve (_tree_step.pxd) for hard rows, or NULL
    const int* xkind        # (mp - m0,) a coupler part's joint: its kind (gear.joints) ...
    const double* xS        # (mp - m0, 6) ... S^T, its coordinate's rate s^T eta ...
    const double* xax       # (mp - m0, 3) ... axis ...
    const double* xpitch    # (mp - m0,) ... pitch ...
    const double* xPl       # (mp - m0, 12) ... and the inverse of its placement
    const double* cmul      # (m - m0,) each coupler's q_j = mul q_s + off
    const double* coff


cdef inline int base_size(const PlanC* p) noexcept nogil:
    # T, V, D: 24 nb; F, G: 24 mp; g, rhs, x, res: 4 m; K, L: 2 m^2 and m ints
    # (dense), or the factor's values, 3 m of its scratch and 6 nb (sparse);
    # then the compliant rows' CFM (m, cfm_area)
    if p.sparse:
        return 30 * p.nb + 24 * p.mp + 8 * p.m + p.ch.nnz + 8
    return 24 * p.nb + 24 * p.mp + 6 * p.m + 2 * p.m * p.m + 8


cdef inline int scratch_size(const PlanC* p) noexcept nogil:
    # base_size, then the tree-ordered solve's flag (8) and workspace
    if p.tree != NULL:
        return base_size(p) + 8 + step_tree_scratch(p.tree)
    return base_size(p)


cdef struct RowWs:
    # the rows' part of the scratch (scratch_size), from 24 nb on
    double* F             # (mp, 12) parts of J, per side
    double* G             # (mp, 12) M^{-1} F
    double* g             # (m,) residuals
    double* rhs
    double* x
    double* res
    double* K             # (m, m); sparse: (3 m) scratch
    double* L             # (m, m); sparse: the factor's values
    int* first            # (m,) the envelope of K (dense)
    double* tw            # the tree-ordered solve's area (scratch_size), or NULL: tw[0] = 1
                          # when its factor of the current pose is there, tw + 8 its StepW


cdef inline RowWs row_ws(const PlanC* p, double* ws) noexcept nogil:
    cdef RowWs z
    cdef int m = p.m
    z.F = ws + 24 * p.nb
    z.G = z.F + 12 * p.mp
    z.g = z.G + 12 * p.mp
    z.rhs = z.g + m
    z.x = z.rhs + m
    z.res = z.x + m
    z.K = z.res + m
    z.L = z.K + (3 * m if p.sparse else m * m)
    z.first = <int*> (z.L + m * m)
    z.tw = ws + base_size(p) if p.tree != NULL else NULL
    return z


cdef inline double* cfm_area(const PlanC* p, double* ws) noexcept nogil:
    # the last m doubles of base_size: the CFM of compliant rows
    return ws + base_size(p) - p.m


cdef inline void pose_in(const double* P16, double* T) noexcept nogil:
    # NumPy's 4x4 row-major block -> (R row-major, p)
    cdef int i, j
    for i in range(3):
        for j in range(3):
            T[3 * i + j] = P16[4 * i + j]
        T[9 + i] = P16[4 * i + 3]


cdef inline void pose_out(const double* T, double* P16) noexcept nogil:
    cdef int i, j
    for i in range(3):
        for j in range(3):
            P16[4 * i + j] = T[3 * i + j]
        P16[4 * i + 3] = T[9 + i]
    P16[12] = 0.0
    P16[13] = 0.0
    P16[14] = 0.0
    P16[15] = 1.0


cdef inline void exp_se3(const double* xi, double* E) noexcept nogil:
    """Kim eq. 15: exp((w, v)) = (I + a W + b W^2, (I + b W + c W^2) v) with
    a = sin t / t, b = (1 - cos t) / t^2, c = (t - sin t) / t^3, t = |w|,
    and their Taylor series below 1e-6 (as gear.spatial.stacks)."""
    cdef double t = sqrt(xi[0] * xi[0] + xi[1] * xi[1] + xi[2] * xi[2])
    cdef double t2 = t * t, a, b, c
    cdef double W[9]
    cdef double W2[9]
    cdef double Jl[9]
    cdef int i
    if t < SMALL:
        a, b, c = 1.0 - t2 / 6.0, 0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0
    else:
        a, b, c = sin(t) / t, (1.0 - cos(t)) / t2, (t - sin(t)) / (t2 * t)
    W[0] = 0.0; W[1] = -xi[2]; W[2] = xi[1]
    W[3] = xi[2]; W[4] = 0.0; W[5] = -xi[0]
    W[6] = -xi[1]; W[7] = xi[0]; W[8] = 0.0
    matmul3(W, W, W2)
    for i in range(9):
        E[i] = a * W[i] + b * W2[i]
        Jl[i] = b * W[i] + c * W2[i]
    for i in range(3):
        E[4 * i] += 1.0
        Jl[4 * i] += 1.0
    matvec3(Jl, xi + 3, E + 9)


cdef inline double dot6(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


cdef inline double dotF(const PlanC* p, int r, const double* Fr, const double* b) noexcept nogil:
    # F_r . b for a 6-block of row r of J: a dot row's F has no linear part
    # (the terms left out are zeros)
    if p.ty[r] == DOT:
        return Fr[0] * b[0] + Fr[1] * b[1] + Fr[2] * b[2]
    return dot6(Fr, b)


cdef inline void mat6_vec_w(const double* M, const double* x, double* out) noexcept nogil:
    # out = M (x_0, x_1, x_2, 0, 0, 0): mat6_vec without the zero half
    cdef int i
    for i in range(6):
        out[i] = M[6 * i] * x[0] + M[6 * i + 1] * x[1] + M[6 * i + 2] * x[2]


cdef inline void joint_wrench(const PlanC* p, int b, const double* X, const double* tau,
                              double* w) noexcept nogil:
    """w = S (S^T S)^{-1} tau on body b (S^T w = tau), S in the child frame:
    constant, or from the joint's relative rotation R_Y = R_pl^T R_X for the
    universal ((R_Y^T a1, 0), (a2, 0)) and planar ((0, R_Y^T e1), (0, R_Y^T
    e2), (n, 0)) joints (MaximalModel._motion_basis)."""
    cdef int n = p.nvb[b], i, j, k
    cdef double S[36]
    cdef double A[36]
    cdef double y[6]
    cdef double RY[9]
    cdef const double* ax = p.axes + 9 * b
    for k in range(6 * n):
        S[k] = p.S[36 * b + k]
    if p.vary[b] != 0:
        for i in range(3):                   # R_Y = R_pl^T R_X
            for j in range(3):
                RY[3 * i + j] = (p.RPl[9 * b + i] * X[j] + p.RPl[9 * b + 3 + i] * X[3 + j]
                                 + p.RPl[9 * b + 6 + i] * X[6 + j])
        if p.vary[b] == 1:
            matTvec3(RY, ax, S)
        else:
            matTvec3(RY, ax, S + 3)
            matTvec3(RY, ax + 3, S + 9)
    for i in range(n):
        for j in range(n):
            A[n * i + j] = dot6(S + 6 * i, S + 6 * j)
        y[i] = tau[i]
    chol_factor(A, n, 0.0)
    chol_solve(A, n, y, 1)
    for k in range(6):
        w[k] = 0.0
        for i in range(n):
            w[k] += S[6 * i + k] * y[i]


cdef inline void relative(const double* T, int i, int par, double* X) noexcept nogil:
    # X = T_p^-1 T_i, body i's pose relative to its parent's (T_i on the world)
    cdef double Ti[12]
    cdef int k
    if par < 0:
        for k in range(12):
            X[k] = T[12 * i + k]
        return
    se3_inv(T + 12 * par, Ti)
    se3_mul(Ti, T + 12 * i, X)


cdef inline void body_forces(const PlanC* p, const double* T, const double* V, const double* tau,
                             const double* fext, double* f) noexcept nogil:
    """f_b = ad*_V (I V) + I (0, R^T g) + f_ext (Kim eq. 29), then the joint
    torques: w_b on the child, -Ad*_{X^{-1}} w_b on the parent (X = T_p^{-1} T_b)."""
    cdef double IV[6]
    cdef double ag[6]
    cdef double Ig[6]
    cdef double X[12]
    cdef double wp[6]
    cdef int b, k, par
    for b in range(p.nb):
        mat6_vec(p.I6 + 36 * b, V + 6 * b, IV)
        dad(V + 6 * b, IV, f + 6 * b)
        ag[0] = 0.0
        ag[1] = 0.0
        ag[2] = 0.0
        matTvec3(T + 12 * b, p.gravity, ag + 3)
        mat6_vec(p.I6 + 36 * b, ag, Ig)
        for k in range(6):
            f[6 * b + k] += Ig[k]
            if fext != NULL:
                f[6 * b + k] += fext[6 * b + k]
    if tau == NULL or p.nv == 0:
        return
    for b in range(p.nb):
        if p.nvb[b] == 0:
            continue
        par = p.parent[b]
        relative(T, b, par, X)
        joint_wrench(p, b, X, tau + p.iv[b], wp)
        for k in range(6):
            f[6 * b + k] += wp[k]
        if par >= 0:
            dAd_inv(X, wp, Ig)
            for k in range(6):
                f[6 * par + k] -= Ig[k]


cdef inline void frame(const double* T, int body, const double* R, const double* pos,
                       double* Rw, double* pw) noexcept nogil:
    # a row's frame in the world: (R_b R, R_b p + p_b), or (R, p) on the world
    cdef int k
    if body < 0:
        for k in range(9):
            Rw[k] = R[k]
        for k in range(3):
            pw[k] = pos[k]
        return
    matmul3(T + 12 * body, R, Rw)
    matvec3(T + 12 * body, pos, pw)
    for k in range(3):
        pw[k] += T[12 * body + 9 + k]


cdef inline void to_body(const double* T, int body, const double* pos, const double* cw,
                         const double* cv, double* F, bint hw=True, bint hv=True) noexcept nogil:
    """World coefficients of (w, v_origin) of the frame at ``pos`` to body
    twist coefficients: F = (R^T c_w + p x R^T c_v, R^T c_v).  ``hw`` /
    ``hv`` False: c_w / c_v is zero (a row type's), its terms are left out
    (the same values: they only add zeros)."""
    cdef double t[3]
    cdef int k
    if body < 0:
        for k in range(6):
            F[k] = 0.0
        return
    if not hv:
        F[3] = 0.0
        F[4] = 0.0
        F[5] = 0.0
        matTvec3(T + 12 * body, cw, F)
        return
    matTvec3(T + 12 * body, cv, F + 3)
    cross3(pos, F + 3, t)
    if not hw:
        for k in range(3):
            F[k] = t[k]
        return
    matTvec3(T + 12 * body, cw, F)
    for k in range(3):
        F[k] += t[k]


cdef inline double dot3(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


cdef inline void row_frames(const PlanC* p, const double* T, int r, double* W) noexcept nogil:
    """Row r's frames {A} and {B} in the world, ``W`` = (R_A, p_A, R_B, p_B)
    (24 doubles): the rows of one joint or closure share them
    (``PlanC.same``)."""
    frame(T, p.ia[r], p.RA + 9 * r, p.pA + 3 * r, W, W + 9)
    frame(T, p.ib[r], p.RB + 9 * r, p.pB + 3 * r, W + 12, W + 21)


cdef inline int row_at(const PlanC* p, const double* T, int r, const double* W, double* g,
                       double* F) noexcept nogil:
    """Residual g_r and the row of J on {A}'s and {B}'s bodies, F[0:6] and
    F[6:12] (rows.py: dg/dt = F_a . V_a + F_b . V_b), with the row's
    frames ``W`` (:func:`row_frames`) given."""
    cdef const double* RAw = W
    cdef const double* pAw = W + 9
    cdef const double* RBw = W + 12
    cdef const double* pBw = W + 21
    cdef double d[3]
    cdef double u[3]
    cdef double wj[3]
    cdef double cwA[3]
    cdef double cvA[3]
    cdef double cwB[3]
    cdef double cvB[3]
    cdef double a1[3]
    cdef double a2[3]
    cdef double b1[3]
    cdef double pp[3]
    cdef double rr[3]
    cdef double L, h, th, sn, cs, rho, nth
    cdef int k, i = p.ci[r], j = p.cj[r], i1, i2, t = p.ty[r]
    for k in range(3):
        d[k] = pBw[k] - pAw[k]
        u[k] = RAw[3 * k + i]             # column i of R_A
        wj[k] = RBw[3 * k + j]            # column j of R_B
        cwA[k] = 0.0
        cvA[k] = 0.0
        cwB[k] = 0.0
        cvB[k] = 0.0
    if t == POS:                          # e_i . d
        g[0] = d[i]
        cvB[i] = 1.0
        cvA[i] = -1.0
    elif t == AXIS or t == HELIX:         # u_A . d
        g[0] = dot3(u, d)
        cross3(u, d, cwA)
        for k in range(3):
            cvA[k] = -u[k]
            cvB[k] = u[k]
        if t == HELIX:
            # - h theta, theta the angle of {B} about z_A (unwrapped to the
            # turn the translation says); theta' = (c s' - s c') / rho
            h = p.pitch[r]
            i1, i2 = (i + 1) % 3, (i + 2) % 3
            for k in range(3):
                a1[k] = RAw[3 * k + i1]
                a2[k] = RAw[3 * k + i2]
                b1[k] = RBw[3 * k + i1]
            sn, cs = dot3(a2, b1), dot3(a1, b1)
            th = atan2(sn, cs)
            if h != 0.0:
                th = th + 2.0 * M_PI * rint((g[0] / h - th) / (2.0 * M_PI))
            g[0] -= h * th
            cross3(a2, b1, pp)
            cross3(a1, b1, rr)
            rho = sn * sn + cs * cs
            for k in range(3):
                nth = (cs * pp[k] - sn * rr[k]) / rho
                cwA[k] -= h * nth
                cwB[k] += h * nth
    elif t == DOT:                        # u_A . w_B - c
        g[0] = dot3(u, wj) - p.offset[r]
        cross3(wj, u, cwB)
        for k in range(3):
            cwA[k] = -cwB[k]
    else:                                 # DIST: |d| - L
        L = sqrt(dot3(d, d))
        if L < 1e-12:
            return ST_DIST
        g[0] = L - p.offset[r]
        for k in range(3):
            cvB[k] = d[k] / L
            cvA[k] = -cvB[k]
    # (c_w is zero on both sides of pos and dist rows and on {B}'s of an
    # axis row, c_v on both sides of dot rows)
    to_body(T, p.ia[r], p.pA + 3 * r, cwA, cvA, F, t != POS and t != DIST, t != DOT)
    to_body(T, p.ib[r], p.pB + 3 * r, cwB, cvB, F + 6, t == DOT or t == HELIX, t != DOT)
    return ST_OK


# -- joint couplers: q_j = mul q_s + off, a row on the twists of up to four
# bodies (MaximalModel._coupler), kept as two parts of J, one per joint ------
cdef inline int part_row(const PlanC* p, int r) noexcept nogil:
    # the row of part r (a geometric row's own index; a coupler's two parts share one)
    return r if r < p.m0 else p.m0 + (r - p.m0) // 2


cdef inline double coupler_coef(const PlanC* p, int k) noexcept nogil:
    # coupler part k's factor in its row: 1 for the coupled joint, -mul for its source
    return 1.0 if k % 2 == 0 else -p.cmul[k // 2]


cdef inline double coupler_part(const PlanC* p, const double* T, int r, double* F) noexcept nogil:
    """Part r (>= m0) of a coupler's row: its joint's two 6-blocks of J, ``c
    s`` on the child and ``-c Ad_{X^-1}^T s`` on the parent (``X = T_p^-1
    T_i``, ``c`` 1 for the coupled joint and ``-mul`` for its source), and
    the joint's coordinate read off its relative pose ``Y = placement^-1
    X`` as ``MaximalModel.to_reduced`` reads it (``_coords.joint_q``)."""
    cdef int k = r - p.m0, a, i = p.ia[r], par = p.ib[r]
    cdef double X[12]
    cdef double Y[12]
    cdef double c = coupler_coef(p, k)
    cdef double q
    cdef const double* S = p.xS + 6 * k
    relative(T, i, par, X)
    for a in range(6):
        F[a] = c * S[a]
    if par >= 0:
        dAd_inv(X, F, F + 6)
        for a in range(6):
            F[6 + a] = -F[6 + a]
    else:
        for a in range(6):
            F[6 + a] = 0.0
    se3_mul(p.xPl + 12 * k, X, Y)
    joint_q(p.xkind[k], p.xax + 3 * k, p.xpitch[k], Y, &q)
    return q


cdef inline double coupler_residual(const PlanC* p, int c, double vj, double vs) noexcept nogil:
    # q_j - mul q_s - off, the source's angle on the turn nearest to the joint's
    cdef double mul = p.cmul[c], off = p.coff[c]
    if p.xkind[2 * c + 1] != PRISMATIC and mul != 0.0:
        vs = vs + 2.0 * M_PI * round_even(((vj - off) / mul - vs) / (2.0 * M_PI))
    return vj - mul * vs - off


cdef inline double coupler_bias(const PlanC* p, const double* T, const double* V, int r) noexcept nogil:
    # part r's share of its row's bias: c s . ad_eta V_p', with V_p' = Ad_{X^-1}
    # V_p the parent's twist in the child's frame and eta = V_i - V_p'
    cdef int k = r - p.m0, a, i = p.ia[r], par = p.ib[r]
    cdef double X[12]
    cdef double Vp[6]
    cdef double eta[6]
    cdef double t[6]
    if par < 0:
        return 0.0
    relative(T, i, par, X)
    Ad_inv(X, V + 6 * par, Vp)
    for a in range(6):
        eta[a] = V[6 * i + a] - Vp[a]
    ad(eta, Vp, t)
    return coupler_coef(p, k) * dot6(t, p.xS + 6 * k)


cdef inline int part_at(const PlanC* p, const double* T, int r, double* W, double* g, double* F,
                        double* vj) noexcept nogil:
    """Part r of J (``F``: its two 6-blocks) and, with the last part of its
    row, the row's residual in ``g[part_row(r)]``: a geometric row
    (:func:`row_at`; its frames ``W`` computed here unless the previous
    row's are the same) or a coupler's part (the coupled joint's
    coordinate kept in ``vj`` until its source's part)."""
    cdef double x
    if r < p.m0:
        if not p.same[r]:
            row_frames(p, T, r, W)
        return row_at(p, T, r, W, g + r, F)
    x = coupler_part(p, T, r, F)
    if (r - p.m0) % 2 == 0:
        vj[0] = x
    else:
        g[part_row(p, r)] = coupler_residual(p, (r - p.m0) // 2, vj[0], x)
    return ST_OK


cdef inline int rows_g(const PlanC* p, const double* T, double* g) noexcept nogil:
    """Every row's residual ``g`` (m,) at ``T`` (each joint's frames once)."""
    cdef double W[24]
    cdef double F[12]
    cdef double vj = 0.0
    cdef int r, st
    for r in range(p.mp):
        st = part_at(p, T, r, W, g, F, &vj)
        if st != ST_OK:
            return st
    return ST_OK


cdef inline double max_abs(const double* a, int n) noexcept nogil:
    cdef double s = 0.0
    cdef int k
    for k in range(n):
        if fabs(a[k]) > s:
            s = fabs(a[k])
    return s


cdef inline int pose_residual(const PlanC* p, const double* P16, double* ws, double* err) noexcept nogil:
    """``err[0]`` = max |g| of the rows at the pose ``P16`` (nb, 16), as
    ``gear.maximal.rows.evaluate`` computes them (0 on a failing row);
    ``ws``: 12 nb + m doubles of scratch.  Returns ST_OK or ST_DIST."""
    cdef int b, st
    for b in range(p.nb):
        pose_in(P16 + 16 * b, ws + 12 * b)
    st = rows_g(p, ws, ws + 12 * p.nb)
    err[0] = max_abs(ws + 12 * p.nb, p.m) if st == ST_OK else 0.0
    return st


cdef inline int cholesky(double* A, int n, int* first) noexcept nogil:
    """In-place lower Cholesky factor of the SPD n x n row-major A, row by
    row (Cholesky-Banachiewicz) on its envelope: row i of L is zero left
    of ``first[i]``, the first non-zero of row i of A (every row of J meets
    two bodies, so K is mostly zeros), and every entry is one contiguous
    dot product of two rows of L.  Returns 0, or 1 + the first pivot that
    is not positive."""
    cdef int i, j, k
    cdef double s
    for i in range(n):
        first[i] = i
        for k in range(i):
            if A[i * n + k] != 0.0:
                first[i] = k
                break
        for j in range(first[i], i + 1):
            k = first[i] if first[i] > first[j] else first[j]
            s = A[i * n + j] - dot(A + i * n + k, A + j * n + k, j - k)
            if j < i:
                A[i * n + j] = s / A[j * n + j]
            elif s > 0.0:
                A[i * n + i] = sqrt(s)
            else:
                return 1 + i
    return 0


cdef inline void cho_solve(const double* L, int n, const int* first, double* x) noexcept nogil:
    """x <- (L L^T)^{-1} x: L y = x by rows, then L^T x = y by columns of
    L^T (rows of L), both contiguous and on the envelope."""
    cdef int i, k, f
    cdef double a
    for i in range(n):
        f = first[i]
        x[i] = (x[i] - dot(L + i * n + f, x + f, i - f)) / L[i * n + i]
    for i in range(n - 1, -1, -1):
        x[i] /= L[i * n + i]
        a = x[i]
        for k in range(first[i], i):
            x[k] -= L[i * n + k] * a


cdef inline int factor_K(const double* K, double* L, int* first, int m) noexcept nogil:
    """L = chol(K + delta I), delta = 1e-12 of K's largest |entry| (kkt.RowSystem)."""
    cdef double delta = REG * max_abs(K, m * m)
    cdef int r
    if delta < 1e-300 * REG:
        delta = 1e-300 * REG
    for r in range(m * m):
        L[r] = K[r]
    for r in range(m):
        L[r * m + r] += delta
    return ST_OK if cholesky(L, m, first) == 0 else ST_CHOL


cdef inline void solve_K(const double* K, const double* L, const int* first, int m, const double* rhs,
                         double* x, double* res) noexcept nogil:
    """x with K x = rhs: the factor's solve, refined on K itself
    (kkt.RowSystem.solve: up to four steps, until |rhs - K x| <= 1e-14
    max(1, |rhs|))."""
    cdef double tol = 1e-14 * max_abs(rhs, m)
    cdef int r, it
    if tol < 1e-14:
        tol = 1e-14
    for r in range(m):
        x[r] = rhs[r]
    cho_solve(L, m, first, x)
    for it in range(REFINE):
        for r in range(m):
            res[r] = rhs[r] - dot(K + r * m, x, m)
        if max_abs(res, m) <= tol:
            break
        cho_solve(L, m, first, res)
        for r in range(m):
            x[r] += res[r]


cdef inline int rows_and_G(const PlanC* p, const double* T, double* g, double* F,
                           double* G) noexcept nogil:
    """Every row's residual g_r, each part's two 6-blocks F_r of J and (where
    ``G`` is not NULL) G_r = M^{-1} F_r (zero on the world's side)."""
    cdef int r, k, sa, b, st
    cdef double W[24]
    cdef double vj = 0.0
    for r in range(p.mp):
        st = part_at(p, T, r, W, g, F + 12 * r, &vj)
        if st != ST_OK:
            return st
        if G == NULL:
            continue
        for sa in range(2):
            b = p.ia[r] if sa == 0 else p.ib[r]
            if b >= 0:
                if p.ty[r] == DOT:         # F's linear part is zero
                    mat6_vec_w(p.Minv + 36 * b, F + 12 * r + 6 * sa, G + 12 * r + 6 * sa)
                else:
                    mat6_vec(p.Minv + 36 * b, F + 12 * r + 6 * sa, G + 12 * r + 6 * sa)
            else:
                for k in range(6):
                    G[12 * r + 6 * sa + k] = 0.0
    return ST_OK


cdef inline int rows_and_K(const PlanC* p, const double* T, double* g, double* F, double* G,
                           double* K) noexcept nogil:
    """Every row's residual g_r and its parts' two 6-blocks F_r of J, G_r =
    M^{-1} F_r, and K = J M^{-1} J^T: the product of parts r and s sums F_r
    . G_s over the bodies they share (every part meets at most two), and
    adds to K at their rows (both ways where two parts of one row meet)."""
    cdef int m = p.m, r, s, sa, sb, b, st, hr, hs
    cdef double v
    st = rows_and_G(p, T, g, F, G)
    if st != ST_OK:
        return st
    for r in range(m * m):
        K[r] = 0.0
    for r in range(p.mp):
        hr = part_row(p, r)
        for s in range(r, p.mp):
            v = 0.0
            for sa in range(2):
                b = p.ia[r] if sa == 0 else p.ib[r]
                for sb in range(2):
                    if b >= 0 and b == (p.ia[s] if sb == 0 else p.ib[s]):
                        v += dotF(p, r, F + 12 * r + 6 * sa, G + 12 * s + 6 * sb)
            hs = part_row(p, s)
            K[hr * m + hs] += v
            if s != r:
                K[hs * m + hr] += v
    return ST_OK


cdef inline void J_apply(const PlanC* p, const double* F, const double* V, double* out) noexcept nogil:
    # out_r = F_ra . V_a + F_rb . V_b, summed over the row's parts
    cdef int r, h
    for r in range(p.m):
        out[r] = 0.0
    for r in range(p.mp):
        h = part_row(p, r)
        if p.ia[r] >= 0:
            out[h] += dotF(p, r, F + 12 * r, V + 6 * p.ia[r])
        if p.ib[r] >= 0:
            out[h] += dotF(p, r, F + 12 * r + 6, V + 6 * p.ib[r])


cdef inline void add_Minv_Jt(const PlanC* p, const double* G, const double* x, double c,
                             double* V) noexcept nogil:
    # V += c M^{-1} J^T x, part by part.  A run of rows on the same two bodies
    # (PlanC.same) sums in registers and stores once: the same sums in the
    # same order, without storing and reloading V_b between two rows
    cdef double va[6]
    cdef double vb[6]
    cdef double xt
    cdef int r = 0, e, t, k, a, b
    while r < p.mp:
        a = p.ia[r]
        b = p.ib[r]
        if a == b:                        # (one body on both sides: row by row)
            if a >= 0:
                for k in range(6):
                    V[6 * a + k] += c * G[12 * r + k] * x[r]
                for k in range(6):
                    V[6 * a + k] += c * G[12 * r + 6 + k] * x[r]
            r += 1
            continue
        e = r + 1
        while e < p.mp and p.same[e]:
            e += 1
        if a >= 0:
            for k in range(6):
                va[k] = V[6 * a + k]
        if b >= 0:
            for k in range(6):
                vb[k] = V[6 * b + k]
        for t in range(r, e):
            xt = x[part_row(p, t)]
            if a >= 0:
                for k in range(6):
                    va[k] += c * G[12 * t + k] * xt
            if b >= 0:
                for k in range(6):
                    vb[k] += c * G[12 * t + 6 + k] * xt
        if a >= 0:
            for k in range(6):
                V[6 * a + k] = va[k]
        if b >= 0:
            for k in range(6):
                V[6 * b + k] = vb[k]
        r = e


cdef inline void move(double* T, int nb, const double* V, double h) noexcept nogil:
    # T_b <- T_b exp(h V_b)  (Kim eq. 15)
    cdef double E[12]
    cdef double Tn[12]
    cdef double xi[6]
    cdef int b, k
    for b in range(nb):
        for k in range(6):
            xi[k] = h * V[6 * b + k]
        exp_se3(xi, E)
        se3_mul(T + 12 * b, E, Tn)
        for k in range(12):
            T[12 * b + k] = Tn[k]


cdef inline int rows_and_K_sparse(const PlanC* p, const double* T, double* g, double* F, double* G,
                                  double* Lx, double* x, double* dep, const double* cfm) noexcept nogil:
    """As :func:`rows_and_K` with ``K`` sparse: the products of each body's
    segments into the factor's values ``Lx`` (plus ``cfm`` on the diagonal
    where not NULL), then ``K + delta I`` factorised in place (``x``,
    ``dep``: (m,) scratch)."""
    cdef int m = p.m, r, st, t
    cdef double delta = 0.0
    st = rows_and_G(p, T, g, F, G)
    if st != ST_OK:
        return st
    for t in range(p.ch.nnz):
        Lx[t] = 0.0
    for t in range(p.npair):
        Lx[p.bdst[t]] += dotF(p, p.pr[t], F + p.pf[t], G + p.pg[t])
    if cfm != NULL:
        for r in range(m):
            Lx[p.ch.Lp[p.pinv[r]]] += cfm[r]
    # K is positive semi-definite: its largest entry is on its diagonal
    # (as kkt.sparse_solver takes it), no need to scan the factor's values
    delta = 0.0
    for r in range(m):
        if Lx[p.ch.Lp[r]] > delta:
            delta = Lx[p.ch.Lp[r]]
    delta = REG * delta
    if delta < 1e-300 * REG:
        delta = 1e-300 * REG
    for r in range(m):
        Lx[p.ch.Lp[r]] += delta
    if spchol_factor(&p.ch, Lx, x, dep, 0.0, 0.0) != m:
        return ST_CHOL
    return ST_OK


cdef inline void solve_K_sparse(const PlanC* p, const double* F, const double* G, const double* Lx,
                                const double* dep, const double* rhs, double* x, double* res,
                                double* y, double* D, const double* cfm) noexcept nogil:
    """x with K x = rhs: the sparse factor's solve, refined like
    :func:`solve_K` with ``K x = J M^{-1} J^T x`` (``+ cfm x`` where not
    NULL; ``y`` (m,), ``D`` (nb, 6) scratch)."""
    cdef int m = p.m, r, it, k
    cdef double tol = 1e-14 * max_abs(rhs, m)
    if tol < 1e-14:
        tol = 1e-14
    for r in range(m):
        y[p.pinv[r]] = rhs[r]
    spchol_solve_basic(&p.ch, Lx, dep, y)
    for r in range(m):
        x[r] = y[p.pinv[r]]
    for it in range(REFINE):
        for k in range(6 * p.nb):
            D[k] = 0.0
        add_Minv_Jt(p, G, x, 1.0, D)
        J_apply(p, F, D, res)
        if cfm != NULL:
            for r in range(m):
                res[r] += cfm[r] * x[r]
        for r in range(m):
            res[r] = rhs[r] - res[r]
        if max_abs(res, m) <= tol:
            break
        for r in range(m):
            y[p.pinv[r]] = res[r]
        spchol_solve_basic(&p.ch, Lx, dep, y)
        for r in range(m):
            x[r] += y[p.pinv[r]]


cdef inline int factor_rows(const PlanC* p, const double* T, double* g, double* F, double* G,
                            double* K, double* L, int* first, const double* cfm=NULL) noexcept nogil:
    """The rows, ``J``'s blocks and the factor of ``K + delta I`` (``K``
    with ``cfm`` on its diagonal where not NULL: compliant rows, eq. 14):
    dense (``K``, ``L``, ``first``) or sparse (``L`` holds the factor's
    values, ``K`` the scratch ``dep`` (m) then ``x`` (m))."""
    cdef int st, r
    if p.sparse:
        return rows_and_K_sparse(p, T, g, F, G, L, K + p.m, K, cfm)
    st = rows_and_K(p, T, g, F, G, K)
    if st == ST_OK:
        if cfm != NULL:
            for r in range(p.m):
                K[r * p.m + r] += cfm[r]
        st = factor_K(K, L, first, p.m)
    return st


cdef inline void solve_rows(const PlanC* p, const double* F, const double* G, double* K,
                            double* L, const int* first, const double* rhs, double* x,
                            double* res, const double* cfm=NULL) noexcept nogil:
    # K x = rhs on the factor of factor_rows (sparse: K + 2 m and its
    # scratch after the factor's values hold y and D, written here; cfm as
    # factor_rows)
    if p.sparse:
        solve_K_sparse(p, F, G, L, K, rhs, x, res, K + 2 * p.m, L + p.ch.nnz, cfm)
    else:
        solve_K(K, L, first, p.m, rhs, x, res)


cdef inline int factor_z(const PlanC* p, const double* T, RowWs* z, const double* cfm=NULL,
                         bint on_se3=True) noexcept nogil:
    """:func:`factor_rows` into ``z``; with hard rows and a tree plan, the
    rows and the tree-ordered factorisation (``_tree_step.pxd``) instead,
    or, where that gives up at this pose, the plan's ``K``.  ``on_se3``
    False: the rotations of ``T`` are not rotations (an RK4 stage's), the
    tree's maps must be general."""
    cdef int st
    cdef StepW sw
    if z.tw != NULL:
        z.tw[0] = 0.0
        if cfm == NULL:
            st = rows_and_G(p, T, z.g, z.F, NULL)
            if st != ST_OK:
                return st
            sw = stepwork(p.tree, z.tw + 8)
            if tree_factor(p.tree, z.F, T if on_se3 else NULL, plain_rtol(), &sw) == TS_OK:
                z.tw[0] = 1.0
                return ST_OK
    return factor_rows(p, T, z.g, z.F, z.G, z.K, z.L, z.first, cfm)


cdef inline void solve_add(const PlanC* p, RowWs* z, const double* rhs, double c, double* V,
                           bint mult=True, const double* cfm=NULL) noexcept nogil:
    """``z.x = K^-1 rhs`` and ``V += c M^-1 J^T z.x`` on the factor of
    :func:`factor_z` (``mult`` False: ``z.x`` is not needed, the tree route
    leaves it out)."""
    cdef StepW sw
    cdef int k
    if z.tw != NULL and z.tw[0] == 1.0:
        sw = stepwork(p.tree, z.tw + 8)
        tree_solve(p.tree, z.F, p.ia, p.ib, rhs, z.x if mult else NULL, &sw)
        for k in range(6 * p.nb):
            V[k] += c * sw.dV[k]
        return
    solve_rows(p, z.F, z.G, z.K, z.L, z.first, rhs, z.x, z.res, cfm)
    add_Minv_Jt(p, z.G, z.x, c, V)


cdef int euler_one(const PlanC* p, const double* P16, const double* V, const double* tau,
                   const double* fext, double h, double gain, double* Pout, double* Vout,
                   double* lam, double* ws, bint implicit=False, double* g0=NULL,
                   bint ready=False, bint mult=True) noexcept nogil:
    """One step of one state (eq. 12).  ``gain``: beta / h (Baumgarte) or 0.
    Compliant rows (``p.kst``): their spring and damper force at the start
    of the step, ``lam = -k g - c J V`` (explicit), or with ``implicit`` at
    its end, linearised (eq. 14): ``(K + CFM) mu = -(k / (h k + c)) g - J
    V*``, ``CFM = 1 / (h (h k + c))``.  ``Pout``/``Vout`` may be
    ``P16``/``V``; ``g0`` (if not NULL): max |g| at the start, the joint
    error of the pose the step leaves; ``ready``: the rows, ``J``'s blocks
    and the factor of ``K`` at this pose are in ``ws`` already (the last
    factorisation of :func:`project_one`, hard rows), not computed again."""
    cdef int nb = p.nb, m = p.m, b, r, k, st
    cdef double* T = ws                   # (nb, 12)
    cdef double* Vs = T + 12 * nb         # (nb, 6) f, then V* and V+
    cdef RowWs z = row_ws(p, ws)          # (after Vs and D of project_one)
    cdef double* cfm
    cdef double Mf[6]
    if g0 != NULL:
        g0[0] = 0.0
    for b in range(nb):
        pose_in(P16 + 16 * b, T + 12 * b)
    # the free step V* = V + h M^{-1} f
    body_forces(p, T, V, tau, fext, Vs)
    for b in range(nb):
        mat6_vec(p.Minv + 36 * b, Vs + 6 * b, Mf)
        for k in range(6):
            Vs[6 * b + k] = V[6 * b + k] + h * Mf[k]
    if m > 0 and p.kst != NULL and not implicit:
        # springs and dampers at the start: V+ = V* + h M^{-1} J^T lam
        st = rows_and_G(p, T, z.g, z.F, z.G)
        if st != ST_OK:
            return st
        if g0 != NULL:
            g0[0] = max_abs(z.g, m)
        J_apply(p, z.F, V, z.rhs)
        for r in range(m):
            lam[r] = -p.kst[r] * z.g[r] - p.kdm[r] * z.rhs[r]
        add_Minv_Jt(p, z.G, lam, h, Vs)
    elif m > 0:
        # K mu = -gain g - J V*,  V+ = V* + M^{-1} J^T mu,  lam = mu / h
        # (compliant, implicit: K + CFM and -(k / (h k + c)) g)
        cfm = NULL
        if p.kst != NULL:
            cfm = cfm_area(p, ws)
            for r in range(m):
                cfm[r] = 1.0 / (h * (h * p.kst[r] + p.kdm[r]))
        if not ready:
            st = factor_z(p, T, &z, cfm)
            if st != ST_OK:
                return st
        if g0 != NULL:
            g0[0] = max_abs(z.g, m)
        J_apply(p, z.F, Vs, z.rhs)
        for r in range(m):
            if cfm != NULL:
                z.rhs[r] = -(p.kst[r] / (h * p.kst[r] + p.kdm[r])) * z.g[r] - z.rhs[r]
            else:
                z.rhs[r] = -gain * z.g[r] - z.rhs[r]
        solve_add(p, &z, z.rhs, 1.0, Vs, mult, cfm)
        if mult:
            for r in range(m):
                lam[r] = z.x[r] / h
    # T+ = T exp(h V+)
    move(T, nb, Vs, h)
    for b in range(nb):
        pose_out(T + 12 * b, Pout + 16 * b)
        for k in range(6):
            Vout[6 * b + k] = Vs[6 * b + k]
    return ST_OK


cdef int project_one(const PlanC* p, const double* P16, const double* V, double tol, int max_iter,
                     double* Pout, double* Vout, double* before, double* ws) noexcept nogil:
    """stepping.project for one state: Gauss-Newton on the poses, ``T <- T
    exp(-M^{-1} J^T K^{-1} g)`` with J and the factor of K from the start
    (afresh after a step that cut max |g| by less than 100x, above 1e-9),
    until max |g| <= tol; then V <- V - M^{-1} J^T K^{-1} J V at the new
    poses.  ``before``: max |g| at the start."""
    cdef int nb = p.nb, m = p.m, b, r, k, it, st
    cdef double err, last
    cdef double* T = ws
    cdef double* Vs = T + 12 * nb
    cdef double* D = Vs + 6 * nb          # (nb, 6) the Gauss-Newton step
    cdef RowWs z = row_ws(p, ws)
    for b in range(nb):
        pose_in(P16 + 16 * b, T + 12 * b)
        for k in range(6):
            Vs[6 * b + k] = V[6 * b + k]
    st = factor_z(p, T, &z)
    if st != ST_OK:
        return st
    err = max_abs(z.g, m)
    before[0] = err
    for it in range(max_iter):
        if err <= tol:
            break
        for k in range(6 * nb):               # D = -M^{-1} J^T K^{-1} g
            D[k] = 0.0
        solve_add(p, &z, z.g, -1.0, D, False)
        move(T, nb, D, 1.0)
        last = err
        st = rows_g(p, T, z.g)
        if st != ST_OK:
            return st
        err = max_abs(z.g, m)
        if err > 1e-2 * last and err > 1e-9:
            st = factor_z(p, T, &z)          # slow chord steps: J and the factor afresh
            if st != ST_OK:
                return st
            err = max_abs(z.g, m)            # (the factorisation's own rows)
    st = factor_z(p, T, &z)
    if st != ST_OK:
        return st
    J_apply(p, z.F, Vs, z.rhs)
    solve_add(p, &z, z.rhs, -1.0, Vs, False)
    for b in range(nb):
        pose_out(T + 12 * b, Pout + 16 * b)
        for k in range(6):
            Vout[6 * b + k] = Vs[6 * b + k]
    return ST_OK


# ---------------------------------------------------------------------------
# the acceleration level: forward dynamics from poses and twists, and the
# Runge-Kutta steps of gear.maximal.stepping (rk4, rkmk4)
# ---------------------------------------------------------------------------
cdef inline void frame_motion(const double* T, const double* V, int body, const double* R,
                              const double* pos, double* Rw, double* pw, double* w, double* v,
                              double* ac) noexcept nogil:
    """A row's frame in the world (``frame``) with its angular velocity
    ``w``, origin velocity ``v`` and origin acceleration bias ``ac`` (at
    ``dV = 0``), all in world coordinates (rows.py's ``_frames``): with
    the origin's body velocity ``vo = v_b + w_b x p``, ``w = R_b w_b``,
    ``v = R_b vo``, ``ac = R_b (w_b x vo)``; zero on the world."""
    cdef double vo[3]
    cdef double t[3]
    cdef int k
    frame(T, body, R, pos, Rw, pw)
    if body < 0:
        for k in range(3):
            w[k] = 0.0
            v[k] = 0.0
            ac[k] = 0.0
        return
    cross3(V + 6 * body, pos, vo)
    for k in range(3):
        vo[k] += V[6 * body + 3 + k]
    matvec3(T + 12 * body, V + 6 * body, w)
    matvec3(T + 12 * body, vo, v)
    cross3(V + 6 * body, vo, t)
    matvec3(T + 12 * body, t, ac)


cdef inline void row_motion(const PlanC* p, const double* T, const double* V, int r, double* W) noexcept nogil:
    """Row r's frames {A} and {B} in the world with their motion
    (:func:`frame_motion`), ``W`` = (R, p, w, v, ac) of {A}, then of {B}
    (42 doubles): the rows of one joint or closure share them
    (``PlanC.same``)."""
    frame_motion(T, V, p.ia[r], p.RA + 9 * r, p.pA + 3 * r, W, W + 9, W + 12, W + 15, W + 18)
    frame_motion(T, V, p.ib[r], p.RB + 9 * r, p.pB + 3 * r, W + 21, W + 30, W + 33, W + 36, W + 39)


cdef inline double row_bias(const PlanC* p, int r, const double* W) noexcept nogil:
    """The bias ``b_r`` of row r, ``J_r dV + b_r = d^2 g_r / dt^2``
    (rows.py's ``evaluate``), for each row type, from its frames' motion
    ``W`` (:func:`row_motion`)."""
    cdef const double* RAw = W
    cdef const double* pAw = W + 9
    cdef const double* wA = W + 12
    cdef const double* vA = W + 15
    cdef const double* aA = W + 18
    cdef const double* RBw = W + 21
    cdef const double* pBw = W + 30
    cdef const double* wB = W + 33
    cdef const double* vB = W + 36
    cdef const double* aB = W + 39
    cdef double d[3]
    cdef double dd[3]
    cdef double ddd[3]
    cdef double u[3]
    cdef double wj[3]
    cdef double du[3]
    cdef double ddu[3]
    cdef double dw[3]
    cdef double t1[3]
    cdef double t2[3]
    cdef double a1[3]
    cdef double a2[3]
    cdef double b1[3]
    cdef double pp[3]
    cdef double rr[3]
    cdef double Dw[3]
    cdef double dp[3]
    cdef double dr[3]
    cdef double b, L, e, sn, cs, rho, s1, c1, s2, c2, drho
    cdef int k, i = p.ci[r], j = p.cj[r], i1, i2, t = p.ty[r]
    for k in range(3):
        d[k] = pBw[k] - pAw[k]
        dd[k] = vB[k] - vA[k]
        ddd[k] = aB[k] - aA[k]
        u[k] = RAw[3 * k + i]
        wj[k] = RBw[3 * k + j]
    if t == POS:
        return ddd[i]
    if t == AXIS or t == HELIX:
        cross3(wA, u, du)
        cross3(wA, du, ddu)
        b = dot3(ddu, d) + 2.0 * dot3(du, dd) + dot3(u, ddd)
        if t == HELIX:
            # - h theta'' (theta' = (c s' - s c') / rho, rows.py)
            i1, i2 = (i + 1) % 3, (i + 2) % 3
            for k in range(3):
                a1[k] = RAw[3 * k + i1]
                a2[k] = RAw[3 * k + i2]
                b1[k] = RBw[3 * k + i1]
                Dw[k] = wA[k] - wB[k]
            sn, cs = dot3(a2, b1), dot3(a1, b1)
            cross3(a2, b1, pp)
            cross3(a1, b1, rr)
            rho = sn * sn + cs * cs
            s1, c1 = dot3(pp, Dw), dot3(rr, Dw)
            cross3(wA, a2, t1)
            cross3(t1, b1, dp)
            cross3(wB, b1, t2)
            cross3(a2, t2, t1)
            for k in range(3):
                dp[k] += t1[k]
            cross3(wA, a1, t1)
            cross3(t1, b1, dr)
            cross3(a1, t2, t1)
            for k in range(3):
                dr[k] += t1[k]
            s2, c2 = dot3(dp, Dw), dot3(dr, Dw)
            drho = 2.0 * (sn * s1 + cs * c1)
            b -= p.pitch[r] * (((cs * s2 - sn * c2) * rho - (cs * s1 - sn * c1) * drho) / (rho * rho))
        return b
    if t == DOT:
        cross3(wA, u, du)
        cross3(wB, wj, dw)
        cross3(dw, u, t1)
        cross3(wj, du, t2)
        for k in range(3):
            t1[k] += t2[k]
            t2[k] = wB[k] - wA[k]
        return dot3(t2, t1)
    L = sqrt(dot3(d, d))                  # DIST (row() has checked L)
    e = dot3(d, dd) / L
    return (dot3(dd, dd) - e * e) / L + dot3(d, ddd) / L


cdef int accel_one(const PlanC* p, const double* T, const double* V, const double* tau,
                   const double* fext, double ga, double gb, double* dV, double* lam,
                   double* ws, double* resid=NULL, bint ready=False, bint on_se3=True) noexcept nogil:
    """Forward dynamics at one state (``MaximalModel._accel``): ``dV = M^{-1}
    (f + J^T lam)`` with ``J dV + b = -ga J V - gb g`` (``ga = 2 alpha``,
    ``gb = beta^2``: Baumgarte; zero: the rows' acceleration held), ``K lam
    = -b - ga J V - gb g - J M^{-1} f`` solved as the Euler step does.
    ``T`` (nb, 12) as _spatial.pxd; ``ws``: scratch_size doubles (the row
    scratch at euler_one's offsets, its first 24 nb unused); ``resid`` (if
    not NULL): ``max_r |J_r dV - target_r|``, how well the rows hold;
    ``on_se3`` as :func:`factor_z`."""
    cdef int nb = p.nb, m = p.m, b, r, k, st
    cdef double bias
    cdef double Wm[42]
    cdef RowWs z = row_ws(p, ws)
    cdef double* f = ws                   # (nb, 6) the body forces
    body_forces(p, T, V, tau, fext, f)
    for b in range(nb):
        mat6_vec(p.Minv + 36 * b, f + 6 * b, dV + 6 * b)
    if resid != NULL:
        resid[0] = 0.0
    if m == 0:
        return ST_OK
    if p.kst != NULL:
        # compliant rows: lam = -k g - c J V, no solve (residual zero)
        st = rows_and_G(p, T, z.g, z.F, z.G)
        if st != ST_OK:
            return st
        J_apply(p, z.F, V, z.rhs)
        for r in range(m):
            lam[r] = -p.kst[r] * z.g[r] - p.kdm[r] * z.rhs[r]
        add_Minv_Jt(p, z.G, lam, 1.0, dV)
        return ST_OK
    if not ready:                           # (as euler_one's ready)
        st = factor_z(p, T, &z, NULL, on_se3)
        if st != ST_OK:
            return st
    J_apply(p, z.F, V, lam)                 # (lam holds J V, then the target, until the end)
    J_apply(p, z.F, dV, z.rhs)
    for r in range(m):
        if r < p.m0:
            if not p.same[r]:
                row_motion(p, T, V, r, Wm)
            bias = row_bias(p, r, Wm)
        else:
            k = p.m0 + 2 * (r - p.m0)
            bias = coupler_bias(p, T, V, k) + coupler_bias(p, T, V, k + 1)
        lam[r] = -bias - ga * lam[r] - gb * z.g[r]
        z.rhs[r] = lam[r] - z.rhs[r]
    solve_add(p, &z, z.rhs, 1.0, dV)
    if resid != NULL:
        J_apply(p, z.F, dV, z.res)
        resid[0] = 0.0
        for r in range(m):
            if fabs(z.res[r] - lam[r]) > resid[0]:
                resid[0] = fabs(z.res[r] - lam[r])
    for r in range(m):
        lam[r] = z.x[r]
    return ST_OK


cdef inline void polar3(double* R) noexcept nogil:
    """R <- its orthogonal polar factor (the nearest rotation; NumPy's path
    takes ``U V^T`` of an SVD), by Newton's iteration ``X <- (X + X^{-T}) /
    2``, which converges for every invertible X, quadratically near a
    rotation (R is one up to O(h^5) after a stable step: two or three
    iterations reach rounding)."""
    cdef double C[9]
    cdef double det, e, t
    cdef int it, k
    for it in range(60):
        # the cofactor matrix: X^{-T} = C / det X
        C[0] = R[4] * R[8] - R[5] * R[7]
        C[1] = R[5] * R[6] - R[3] * R[8]
        C[2] = R[3] * R[7] - R[4] * R[6]
        C[3] = R[2] * R[7] - R[1] * R[8]
        C[4] = R[0] * R[8] - R[2] * R[6]
        C[5] = R[1] * R[6] - R[0] * R[7]
        C[6] = R[1] * R[5] - R[2] * R[4]
        C[7] = R[2] * R[3] - R[0] * R[5]
        C[8] = R[0] * R[4] - R[1] * R[3]
        det = R[0] * C[0] + R[1] * C[1] + R[2] * C[2]
        if det == 0.0 or det != det:
            return
        e = 0.0
        for k in range(9):
            t = 0.5 * (R[k] + C[k] / det)
            if fabs(t - R[k]) > e:
                e = fabs(t - R[k])
            R[k] = t
        if e <= 1e-16:
            return


cdef inline void pose_rate(const double* T, const double* V, double* kT) noexcept nogil:
    # d/dt of the pose matrix T (dT/dt = T V^): (R [w]x, R v) for each body
    cdef double W[9]
    W[0] = 0.0; W[1] = -V[2]; W[2] = V[1]
    W[3] = V[2]; W[4] = 0.0; W[5] = -V[0]
    W[6] = -V[1]; W[7] = V[0]; W[8] = 0.0
    matmul3(T, W, kT)
    matvec3(T, V + 3, kT + 9)


cdef inline void dexp_inv(const double* th, const double* xi, double* out) noexcept nogil:
    # xi + [th, xi] / 2 + [th, [th, xi]] / 12 (stacks.dexp_inv_se3_rows)
    cdef double c1[6]
    cdef double c2[6]
    cdef int k
    ad(th, xi, c1)
    ad(th, c1, c2)
    for k in range(6):
        out[k] = (xi[k] + 0.5 * c1[k]) + c2[k] / 12.0


cdef int rk_one(const PlanC* p, const double* P16, const double* V, const double* tau,
                const double* fext, double h, double ga, double gb, bint mk, double* Pout,
                double* Vout, double* lam, double* ws, double* g0=NULL, bint ready=False) noexcept nogil:
    """One step of the classical tableau (stepping._rk_step): Munthe-Kaas
    (``mk``: ``T = T0 exp(theta)``, ``theta' = dexp^{-1}_{-theta}(V)``) or
    on the pose matrices (``dT/dt = T V^``, the rotations moved to their
    polar factor after the step).  ``lam``: the row forces at the start.
    ``ws``: scratch_size + 72 nb doubles; ``g0``, ``ready`` as :func:`euler_one`."""
    cdef int nb = p.nb, m = p.m, b, k, s, st
    cdef double* T0 = ws + scratch_size(p)     # (nb, 12) the state
    cdef double* V0 = T0 + 12 * nb             # (nb, 6)
    cdef double* Ti = V0 + 6 * nb              # (nb, 12) a stage's poses
    cdef double* Vi = Ti + 12 * nb             # (nb, 6) ... and twists
    cdef double* kV = Vi + 6 * nb              # (nb, 6) a stage's acceleration
    cdef double* SV = kV + 6 * nb              # (nb, 6) sum b_s kV_s
    cdef double* kP = SV + 6 * nb              # (nb, 12) a stage's pose rate (or theta')
    cdef double* SP = kP + 12 * nb             # (nb, 12) sum b_s kP_s
    cdef double E[12]
    cdef double th[6]
    cdef double hc, bs
    cdef double C[3]
    cdef double B[3]
    C[0] = 0.5; C[1] = 0.5; C[2] = 1.0
    B[0] = 1.0 / 3.0; B[1] = 1.0 / 3.0; B[2] = 1.0 / 6.0
    for b in range(nb):
        pose_in(P16 + 16 * b, T0 + 12 * b)
    for k in range(6 * nb):
        V0[k] = V[k]
    st = accel_one(p, T0, V0, tau, fext, ga, gb, kV, lam, ws, NULL, ready)
    if st != ST_OK:
        return st
    if g0 != NULL:
        g0[0] = max_abs(row_ws(p, ws).g, m) if m > 0 else 0.0
    for k in range(6 * nb):
        SV[k] = (1.0 / 6.0) * kV[k]
    for b in range(nb):
        if mk:
            for k in range(6):
                kP[6 * b + k] = V0[6 * b + k]
                SP[6 * b + k] = (1.0 / 6.0) * kP[6 * b + k]
        else:
            pose_rate(T0 + 12 * b, V0 + 6 * b, kP + 12 * b)
            for k in range(12):
                SP[12 * b + k] = (1.0 / 6.0) * kP[12 * b + k]
    for s in range(3):
        hc = h * C[s]
        bs = B[s]
        for k in range(6 * nb):
            Vi[k] = V0[k] + hc * kV[k]
        for b in range(nb):
            if mk:
                for k in range(6):
                    th[k] = hc * kP[6 * b + k]
                exp_se3(th, E)
                se3_mul(T0 + 12 * b, E, Ti + 12 * b)
                dexp_inv(th, Vi + 6 * b, kP + 6 * b)
            else:
                for k in range(12):
                    Ti[12 * b + k] = T0[12 * b + k] + hc * kP[12 * b + k]
        st = accel_one(p, Ti, Vi, tau, fext, ga, gb, kV, lam + m, ws, NULL, False, mk)
        if st != ST_OK:
            return st
        for k in range(6 * nb):
            SV[k] += bs * kV[k]
        for b in range(nb):
            if mk:
                for k in range(6):
                    SP[6 * b + k] += bs * kP[6 * b + k]
            else:
                pose_rate(Ti + 12 * b, Vi + 6 * b, kP + 12 * b)
                for k in range(12):
                    SP[12 * b + k] += bs * kP[12 * b + k]
    for b in range(nb):
        if mk:
            for k in range(6):
                th[k] = h * SP[6 * b + k]
            exp_se3(th, E)
            se3_mul(T0 + 12 * b, E, Ti + 12 * b)
        else:
            for k in range(12):
                Ti[12 * b + k] = T0[12 * b + k] + h * SP[12 * b + k]
            polar3(Ti + 12 * b)
        pose_out(Ti + 12 * b, Pout + 16 * b)
    for k in range(6 * nb):
        Vout[k] = V0[k] + h * SV[k]
    return ST_OK


cdef inline int step_one(const PlanC* p, const double* P16, const double* V, const double* tau,
                         const double* fext, double h, int integ, double gain, double ga, double gb,
                         double* Pout, double* Vout, double* lam, double* ws,
                         double* g0=NULL, bint ready=False, bint mult=True) noexcept nogil:
    # integ 0: Euler (eq. 12, ``gain`` = beta / h), 1: rk4, 2: rkmk4 (``ga``,
    # ``gb``), 3: implicit (Euler with compliant rows linearly implicit);
    # g0 (if not NULL): max |g| at the start; ready: as euler_one's; mult
    # False: Euler's lam is not wanted (hard rows: left as it was)
    if integ == 0 or integ == 3:
        return euler_one(p, P16, V, tau, fext, h, gain, Pout, Vout, lam, ws, integ == 3, g0, ready, mult)
    return rk_one(p, P16, V, tau, fext, h, ga, gb, integ == 2, Pout, Vout, lam, ws, g0, ready)


cdef inline int step_scratch(const PlanC* p, int integ) noexcept nogil:
    # the doubles step_one needs (then the caller's lam: 2 m for Runge-Kutta stages)
    return scratch_size(p) + (0 if integ == 0 or integ == 3 else 72 * p.nb)


cdef class Plan:
    """The frozen arrays of one MaximalModel for the kernel (built by
    ``gear.maximal.native.plan``)."""
    cdef PlanC c
    cdef StepTree st
    cdef readonly object arrays
    cdef readonly int nb, m, nv

    def __init__(self, I6, Minv, parent, gravity, ty, ia, ib, ci, cj, RA, pA, RB, pB, offset, pitch,
                 nvb, iv, vary, S, RPl, axes, sparse=None, stiffness=None, damping=None, tree=None,
                 couplers=None):
        """``sparse``: None (dense K) or ``(Lp, Li, LRp, LRk, LRpos, pinv,
        pf, pg, pr, bdst)`` (``gear.maximal.native.build``); ``tree``: None
        or the arrays of ``gear.maximal.tree.step_tree_plan`` (hard rows
        only: the tree-ordered solve); ``couplers``: None or the joint
        couplers' arrays of ``gear.maximal.native._coupler_plan`` (rows
        after the geometric ones, two parts each)."""
        f8 = lambda a, n: np.ascontiguousarray(np.asarray(a, dtype=np.float64).reshape(-1, n))
        i4 = lambda a: np.ascontiguousarray(np.asarray(a, dtype=np.int32).reshape(-1))
        a = dict(I6=f8(I6, 36), Minv=f8(Minv, 36), parent=i4(parent), ty=i4(ty), ia=i4(ia), ib=i4(ib),
                 ci=i4(ci), cj=i4(cj), RA=f8(RA, 9), pA=f8(pA, 3), RB=f8(RB, 9), pB=f8(pB, 3),
                 offset=f8(offset, 1), pitch=f8(pitch, 1), nvb=i4(nvb), iv=i4(iv), vary=i4(vary),
                 S=f8(S, 36), RPl=f8(RPl, 9), axes=f8(axes, 9))
        self.arrays = a
        self.nb = self.c.nb = a["I6"].shape[0]
        self.c.m0 = a["ty"].shape[0]
        nc = 0 if couplers is None else len(couplers["mul"])
        if nc:
            bodies = np.asarray(couplers["bodies"]).reshape(2 * nc, 2)
            a["ty"] = i4(np.concatenate([a["ty"], np.full(2 * nc, COUPLER)]))
            a["ia"] = i4(np.concatenate([a["ia"], bodies[:, 0]]))
            a["ib"] = i4(np.concatenate([a["ib"], bodies[:, 1]]))
            a.update(x_kind=i4(couplers["kind"]), x_S=f8(couplers["S"], 6), x_ax=f8(couplers["axis"], 3),
                     x_pitch=f8(couplers["pitch"], 1), x_Pl=f8(couplers["Pl"], 12), c_mul=f8(couplers["mul"], 1),
                     c_off=f8(couplers["off"], 1))
            if not (len(a["x_kind"]) == len(a["x_S"]) == len(a["x_Pl"]) == 2 * nc):
                raise ValueError("Plan: inconsistent coupler arrays")
            self.c.xkind = _iptr(a["x_kind"])
            self.c.xS = _dptr(a["x_S"])
            self.c.xax = _dptr(a["x_ax"])
            self.c.xpitch = _dptr(a["x_pitch"])
            self.c.xPl = _dptr(a["x_Pl"])
            self.c.cmul = _dptr(a["c_mul"])
            self.c.coff = _dptr(a["c_off"])
        self.c.mp = self.c.m0 + 2 * nc
        self.m = self.c.m = self.c.m0 + nc
        self.nv = self.c.nv = int(a["nvb"].sum())
        self.c.I6 = _dptr(a["I6"])
        self.c.Minv = _dptr(a["Minv"])
        self.c.parent = _iptr(a["parent"])
        for k in range(3):
            self.c.gravity[k] = float(gravity[k])
        self.c.ty = _iptr(a["ty"])
        self.c.ia = _iptr(a["ia"])
        self.c.ib = _iptr(a["ib"])
        self.c.ci = _iptr(a["ci"])
        self.c.cj = _iptr(a["cj"])
        self.c.RA = _dptr(a["RA"])
        self.c.pA = _dptr(a["pA"])
        self.c.RB = _dptr(a["RB"])
        self.c.pB = _dptr(a["pB"])
        self.c.offset = _dptr(a["offset"])
        self.c.pitch = _dptr(a["pitch"])
        # the rows that share the previous row's frames (a joint's, a closure's)
        m0 = self.c.m0
        fr = np.concatenate([a["ia"][:m0, None], a["ib"][:m0, None], a["RA"], a["pA"], a["RB"], a["pB"]], axis=1)
        a["same"] = i4(np.concatenate([[False], (fr[1:] == fr[:-1]).all(axis=1), np.zeros(2 * nc, dtype=bool)])
                       if self.c.m0 else np.zeros(max(1, 2 * nc)))
        self.c.same = _iptr(a["same"])
        self.c.nvb = _iptr(a["nvb"])
        self.c.iv = _iptr(a["iv"])
        self.c.vary = _iptr(a["vary"])
        self.c.S = _dptr(a["S"])
        self.c.RPl = _dptr(a["RPl"])
        self.c.axes = _dptr(a["axes"])
        self.c.kst = NULL
        self.c.kdm = NULL
        self.c.tree = NULL
        if stiffness is not None:
            a["kst"] = f8(np.broadcast_to(np.asarray(stiffness, dtype=float), (self.m,)), 1)
            a["kdm"] = f8(np.broadcast_to(np.asarray(0.0 if damping is None else damping, dtype=float),
                                          (self.m,)), 1)
            if self.m:
                self.c.kst = _dptr(a["kst"])
                self.c.kdm = _dptr(a["kdm"])
        self.c.sparse = sparse is not None
        if sparse is not None:
            names = ("Lp", "Li", "LRp", "LRk", "LRpos", "pinv", "pf", "pg", "pr", "bdst")
            for n, v in zip(names, sparse):
                a[n] = np.concatenate([i4(v), np.zeros(1, dtype=np.int32)])   # a valid first address
            if (len(a["Lp"]) != self.m + 2 or len(a["pinv"]) != self.m + 1
                    or not len(a["pf"]) == len(a["pg"]) == len(a["pr"]) == len(a["bdst"])):
                raise ValueError("Plan: inconsistent sparse arrays")
            spchol_set(&self.c.ch, self.m, _iptr(a["Lp"]), _iptr(a["Li"]), _iptr(a["LRp"]),
                       _iptr(a["LRk"]), _iptr(a["LRpos"]), 0)
            self.c.pinv = _iptr(a["pinv"])
            self.c.npair = len(a["pf"]) - 1
            self.c.pf = _iptr(a["pf"])
            self.c.pg = _iptr(a["pg"])
            self.c.pr = _iptr(a["pr"])
            self.c.bdst = _iptr(a["bdst"])
        if tree is not None and self.c.kst == NULL and self.m > 0:
            self._attach_tree(tree)

    def _attach_tree(self, tree):
        cdef dict a = self.arrays
        cdef int nb = self.nb
        t = {("t_" + k): np.concatenate([np.asarray(v).reshape(-1).astype(np.float64 if k == "I6" else np.int32),
                                         np.zeros(1, dtype=np.float64 if k == "I6" else np.int32)])
             for k, v in tree.items()}
        nL = len(tree["lrow"])
        nvis = len(tree["vrow"])
        if (len(tree["body"]) != nb or len(tree["vptr"]) != nb + 1 or len(tree["pinv"]) != nL
                or len(tree["Lp"]) != nL + 1 or len(tree["vseg"]) != 2 * nvis or len(tree["pptr"]) != nb + 1
                or len(tree["lpart"]) != 2 * nL or np.max(tree["lpart"], initial=-1) >= self.c.mp
                or tree["pptr"][nb] != len(tree["pdst"])
                or np.max(tree["lrow"], initial=-1) >= self.m):
            raise ValueError("Plan: inconsistent tree arrays")
        a.update(t)
        self.st.nb = nb
        self.st.nL = nL
        self.st.nvt = int(np.sum(tree["nvi"]))
        self.st.body = _iptr(a["t_body"])
        self.st.tpar = _iptr(a["t_tpar"])
        self.st.nvi = _iptr(a["t_nvi"])
        self.st.iv = _iptr(a["t_iv"])
        self.st.er0 = _iptr(a["t_er0"])
        self.st.side = _iptr(a["t_side"])
        self.st.lrow = _iptr(a["t_lrow"])
        self.st.lpart = _iptr(a["t_lpart"])
        self.st.rigid = int(tree["rigid"][0])
        self.st.xb = _iptr(a["t_xb"])
        self.st.pA = self.c.pA
        self.st.pB = self.c.pB
        self.st.tr.I6 = _dptr(a["t_I6"].reshape(-1, 1))
        self.st.tr.nvis = nvis
        self.st.tr.vptr = _iptr(a["t_vptr"])
        self.st.tr.vrow = _iptr(a["t_vrow"])
        self.st.tr.vpar = _iptr(a["t_vpar"])
        self.st.tr.vseg = _iptr(a["t_vseg"])
        self.st.tr.npair = len(tree["pdst"])
        self.st.tr.pptr = _iptr(a["t_pptr"])
        self.st.tr.pdst = _iptr(a["t_pdst"])
        self.st.tr.pinv = _iptr(a["t_pinv"])
        spchol_set(&self.st.tr.ch, nL, _iptr(a["t_Lp"]), _iptr(a["t_Li"]), _iptr(a["t_Rp"]),
                   _iptr(a["t_Rk"]), _iptr(a["t_Rpos"]), 0)
        self.c.tree = &self.st

    @property
    def route(self):
        """``"tree"`` (the tree-ordered solve), ``"sparse"`` or ``"dense"``
        (``K``'s factorisation): how the kernel solves hard rows."""
        return "tree" if self.c.tree != NULL else ("sparse" if self.c.sparse else "dense")


# (written as ifs: a conditional expression over const pointers makes
# Cython's temporary drop the const)
cdef const double* _dptr(a):
    cdef const double[:, ::1] v = a
    if v.shape[0] == 0:
        return NULL
    return &v[0, 0]


cdef const int* _iptr(a):
    cdef const int[::1] v = a
    if v.shape[0] == 0:
        return NULL
    return &v[0]


cdef const double* _opt(const double[:, ::1] a):
    if a is None or a.shape[0] == 0 or a.shape[1] == 0:
        return NULL
    return &a[0, 0]


cdef inline const double* _row(const double* base, Py_ssize_t k, Py_ssize_t stride) noexcept nogil:
    # row k of an optional batch (NULL stays NULL)
    if base == NULL:
        return NULL
    return base + k * stride


def step(Plan plan not None, const double[:, ::1] P, const double[:, ::1] V, double h, int integ, double gain,
         double ga, double gb, const double[:, ::1] tau, const double[:, ::1] fext, double[:, ::1] Pout,
         double[:, ::1] Vout, double[:, ::1] lam, int[::1] status, int nthreads):
    """One step of N states: P (N, 16 nb), V (N, 6 nb), tau (N, nv) or
    None, fext (N, 6 nb) or None; ``integ`` 0 (Euler, eq. 12, ``gain`` =
    beta / h), 1 (rk4) or 2 (rkmk4) with the Baumgarte terms ``ga`` (2
    alpha) and ``gb`` (beta^2); writes Pout, Vout, lam (N, m) (Runge-Kutta:
    the row forces at the start of the step) and status (N,) (0, or 1: a
    distance row's points coincide, 2: K not positive definite); returns
    the number of states that failed."""
    cdef Py_ssize_t N = P.shape[0], k
    cdef const PlanC* p = &plan.c
    cdef int wsize = step_scratch(p, integ), nv = p.nv, nb = p.nb, m = p.m
    cdef const double* tp = _opt(tau)
    cdef const double* fp = _opt(fext)
    cdef double* ws
    cdef double* lw
    cdef int nt = max(1, min(nthreads, N)), failed = 0, j
    if N == 0:
        return 0
    if nt == 1:                           # one thread: no parallel region
        ws = <double*> malloc((wsize + 2 * m + 1) * sizeof(double))
        lw = ws + wsize
        with nogil:
            for k in range(N):
                status[k] = step_one(p, &P[k, 0], &V[k, 0], _row(tp, k, nv),
                                     _row(fp, k, 6 * nb), h, integ, gain, ga, gb,
                                     &Pout[k, 0], &Vout[k, 0], lw, ws)
                for j in range(m):
                    lam[k, j] = lw[j]
        free(ws)
    else:
        with nogil, parallel(num_threads=nt):
            ws = <double*> malloc((wsize + 2 * m + 1) * sizeof(double))
            lw = ws + wsize
            for k in prange(N, schedule='static'):
                status[k] = step_one(p, &P[k, 0], &V[k, 0], _row(tp, k, nv),
                                     _row(fp, k, 6 * nb), h, integ, gain, ga, gb,
                                     &Pout[k, 0], &Vout[k, 0], lw, ws)
                for j in range(m):
                    lam[k, j] = lw[j]
            free(ws)
    for k in range(N):
        failed += status[k] != 0
    return failed


def accel(Plan plan not None, const double[:, ::1] P, const double[:, ::1] V, const double[:, ::1] tau,
          const double[:, ::1] fext, double[:, ::1] dV, double[:, ::1] lam, double[::1] resid,
          int[::1] status, int nthreads):
    """Forward dynamics of N states (``MaximalModel.forward_dynamics``): P
    (N, 16 nb), V (N, 6 nb), tau (N, nv) or None, fext (N, 6 nb) or None;
    writes dV (N, 6 nb), lam (N, m), resid (N,) and status (N,)."""
    cdef Py_ssize_t N = P.shape[0], k
    cdef const PlanC* p = &plan.c
    cdef int wsize = scratch_size(p), nv = p.nv, nb = p.nb, m = p.m, b
    cdef const double* tp = _opt(tau)
    cdef const double* fp = _opt(fext)
    cdef double* ws
    cdef double* T
    cdef int nt = max(1, min(nthreads, N))
    if N == 0:
        return
    with nogil, parallel(num_threads=nt):
        ws = <double*> malloc((wsize + 12 * nb + m + 1) * sizeof(double))
        T = ws + wsize
        for k in prange(N, schedule='static'):
            for b in range(nb):
                pose_in(&P[k, 16 * b], T + 12 * b)
            status[k] = accel_one(p, T, &V[k, 0], _row(tp, k, nv),
                                  _row(fp, k, 6 * nb), 0.0, 0.0, &dV[k, 0],
                                  &lam[k, 0] if m > 0 else T + 12 * nb, ws, &resid[k])
        free(ws)


def run(Plan plan not None, double[:, ::1] P, double[:, ::1] V, double h, int integ, double gain, double ga,
        double gb, bint proj, int steps, int every, const double[:, ::1] tau, const double[:, ::1] fext,
        double[:, :, ::1] Prec, double[:, :, ::1] Vrec, double[:, :, ::1] lamrec, double[:, ::1] errrec,
        int[::1] status, int nthreads):
    """``steps`` steps of N states (``integ``, ``gain``, ``ga``, ``gb`` as
    :func:`step`), each state on its own thread: P, V
    (advanced in place) and, at steps 0, every, 2 every, ... (and the last),
    the frames Prec (N, T, 16 nb), Vrec (N, T, 6 nb), lamrec (N, T, m) (the
    row forces of the step that led there; zero at step 0) and errrec (N, T)
    (each frame's joint error, max |g|: the next step's rows at its start,
    or the rows evaluated for the last frame).  ``proj``: the state
    projected (tolerance 1e-12, at most 10 iterations) at the start and
    after every step, as gear.simulate does.  A state stops at its first
    failing step (status != 0; P, V are those before it)."""
    cdef Py_ssize_t N = P.shape[0], k
    cdef const PlanC* p = &plan.c
    cdef int wsize = step_scratch(p, integ), nv = p.nv, nb = p.nb, m = p.m, n, fr, st, j, pend, ready
    cdef const double* tp = _opt(tau)
    cdef const double* fp = _opt(fext)
    cdef double* ws
    cdef double* lam
    cdef int nt = max(1, min(nthreads, N))
    if N == 0:
        return
    with nogil, parallel(num_threads=nt):
        ws = <double*> malloc((wsize + 2 * m + 2) * sizeof(double))
        lam = ws + wsize
        for k in prange(N, schedule='static'):
            fr = 0
            pend = -1                          # the recorded frame whose joint error the next step gives
            st = ST_OK
            ready = 0                          # a projection left its rows and factor at the pose in ws
            if proj and m > 0 and p.kst == NULL:
                st = project_one(p, &P[k, 0], &V[k, 0], 1e-12, 10, &P[k, 0], &V[k, 0], lam + m, ws)
                ready = 1
            for n in range(steps + 1):
                if st != ST_OK:
                    break
                if n % every == 0 or n == steps:
                    for j in range(16 * nb):
                        Prec[k, fr, j] = P[k, j]
                    for j in range(6 * nb):
                        Vrec[k, fr, j] = V[k, j]
                    for j in range(m):
                        lamrec[k, fr, j] = lam[j] if n > 0 else 0.0
                    pend = fr
                    fr = fr + 1
                if n == steps:
                    break
                # (the row forces only for a step whose end is recorded)
                st = step_one(p, &P[k, 0], &V[k, 0], _row(tp, k, nv),
                              _row(fp, k, 6 * nb), h, integ, gain, ga, gb, &P[k, 0],
                              &V[k, 0], lam, ws, lam + 2 * m + 1, ready,
                              (n + 1) % every == 0 or n + 1 == steps)
                ready = 0
                if st == ST_OK and pend >= 0:
                    errrec[k, pend] = lam[2 * m + 1]
                    pend = -1
                if st == ST_OK and proj and m > 0 and p.kst == NULL:
                    st = project_one(p, &P[k, 0], &V[k, 0], 1e-12, 10, &P[k, 0], &V[k, 0], lam + m, ws)
                    ready = 1
            if st == ST_OK and pend >= 0:
                st = pose_residual(p, &P[k, 0], ws, &errrec[k, pend])   # the last frame, apart
            status[k] = st
        free(ws)


def project(Plan plan not None, const double[:, ::1] P, const double[:, ::1] V, double tol, int max_iter,
            double[:, ::1] Pout, double[:, ::1] Vout, double[::1] before, int[::1] status, int nthreads):
    """stepping.project of N states (P (N, 16 nb), V (N, 6 nb)) into Pout,
    Vout; ``before`` (N,) the largest |g| of each state before."""
    cdef Py_ssize_t N = P.shape[0], k
    cdef const PlanC* p = &plan.c
    cdef int wsize = scratch_size(p)
    cdef double* ws
    cdef int nt = max(1, min(nthreads, N))
    if N == 0:
        return
    with nogil, parallel(num_threads=nt):
        ws = <double*> malloc(wsize * sizeof(double))
        for k in prange(N, schedule='static'):
            status[k] = project_one(p, &P[k, 0], &V[k, 0], tol, max_iter, &Pout[k, 0], &Vout[k, 0],
                                    &before[k], ws)
        free(ws)


def residual_max(Plan plan not None, const double[:, ::1] P, double[::1] out, int[::1] status, int nthreads):
    """``out[k] = max_r |g_r|`` of the poses ``P[k]`` (N, 16 nb): the
    largest row residual of each state, as ``gear.maximal.rows.evaluate``
    computes it (``pose_residual`` above); ``status[k]`` 0 or ST_DIST."""
    cdef Py_ssize_t N = P.shape[0], k
    cdef const PlanC* p = &plan.c
    cdef int nb = p.nb, m = p.m
    cdef double* ws
    cdef int nt = max(1, min(nthreads, N))
    if N == 0:
        return
    with nogil, parallel(num_threads=nt):
        ws = <double*> malloc((12 * nb + m + 1) * sizeof(double))
        for k in prange(N, schedule='static'):
            status[k] = pose_residual(p, &P[k, 0], ws, &out[k])
        free(ws)


def _rows_g(Plan plan not None, const double[::1] P, double[::1] g):
    """Every row's residual at one state (the tests compare it with NumPy's)."""
    cdef const PlanC* p = &plan.c
    cdef int b
    T = np.empty(12 * p.nb)
    cdef double[::1] Tv = T
    for b in range(p.nb):
        pose_in(&P[16 * b], &Tv[12 * b])
    rows_g(p, &Tv[0], &g[0])

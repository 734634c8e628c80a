# cython: language_level=3
"""The tree-ordered solve of a maximal-coordinate step (Baraff,
"Linear-time dynamics using Lagrange multipliers", 1996), beside the
sparse factorisation of ``K = J M^-1 J^T`` in ``_native.pyx``.

Every solve of the native steps (the Euler step's velocities, eq. 12 of
Ruan, "Articulated rigid body systems"; the Gauss-Newton projection; the
Runge-Kutta stages' accelerations) is ``M dV = J^T mu``, ``J dV = c``: a
body-space correction ``dV = M^-1 J^T mu`` with ``K mu = c``.  As in the
``"maximal"`` solver's tree route (``_tree_route.pxd``) the bodies and
their edges' rows are eliminated from the leaves to the world and only
the other rows, the loop rows, keep a Schur complement ``K_L`` of their
own.  Two things differ, because here the state is the bodies' poses and
not joint coordinates:

* **The tree is the solve's choice** (``gear.maximal.tree.step_tree_plan``):
  any group of rows between two bodies can be an edge, a closure as well
  as a joint, and the edges are chosen breadth first from the world.

* **An edge's rows are taken as they are, drifted.**  Edge ``k``'s rows
  ``C V_k + E V_p = c_k`` (``C``, ``E``: the rows' 6-blocks on the body
  and on its parent, ``m_k`` of them) are orthogonalised by Gram and
  Schmidt, ``C = R V`` (``R`` unit lower triangular, ``V``'s rows
  orthogonal; ``Q``'s rows ``v_i / |v_i|^2``, so that ``C^+ = Q^T R^-1``
  without a square root), which gives a basis ``S`` of their null space
  (``n = 6 - m_k`` columns, completed from the unit vectors) and the map
  ``A = -C^+ E = -Q^T R^-1 E``.  Then every solution is

      V_k = A V_p + eta_k + S u,    eta_k = Q^T R^-1 c_k,

  whatever the drift: a joint's rows at a drifted pose are not those of
  a rigid transform (``E != -C Ad``, the ``pos`` rows), and ``A`` is a
  general 6 x 6 map where the solver's route has ``Ad``.

* **Rigid maps.**  Only ``A`` modulo the columns of ``S`` matters: the
  sweeps use it in ``A^T (Mt - U D^-1 U^T) A``, in ``A^T b`` with ``S^T b
  = 0`` and in ``a = A V_p + eta`` followed by a correction along ``S``,
  all blind to ``A + S Z``.  And every row is ``c . (w, v(x_B))`` on {B}'s
  body minus ``c . (w, v(x_A))`` on {A}'s, one world covector ``c`` and
  each body's twist taken at a point: ``x_B`` the {B} frame's origin,
  ``x_A`` the {A} frame's for ``pos`` and ``dist`` rows and {B}'s for
  ``axis`` and ``helix`` rows (``dot`` rows: any point).  So ``C = +-c X_s``
  and ``E = -+c X_o`` (``X_b``: body b's twist to the world twist at its
  point), and ``A' = X_s^-1 X_o`` solves ``C A' = -E`` exactly, drift or
  not: a rigid transform's ``Ad_{X^-1}``, ``X = (R_o^T R_s, R_o^T ((x_o -
  o_o) - (x_s - o_s)))`` (:func:`rigid_map`), at a third of the general
  map's cost in the elimination.  The plan (``gear.maximal.tree``) uses it
  where every edge's rows agree on their points (all of gear's joints;
  not a group mixing ``pos`` and ``axis`` rows).

With ``A`` in place of the joint transform and ``S`` of the rows' null
space, the elimination is the solver's (``Mt_p += A^T (Mt - U D^-1 U^T)
A`` with ``U = Mt S``, ``D = S^T U``), and so are the loop rows' visits
and ``K_L``: the sweeps of ``_tree_route.pxd`` serve both, over a
``Topo`` whose maps are ``A`` here (:func:`edge_topo`).  An edge's multipliers come from the wrench ``w_k = C^T
mu_k`` it carries into its subtree, which is the articulated-body
equation's, ``w_k = Mt_k dV_k - ft_k`` (the subtree's articulated inertia
and wrench, loop forces included): ``mu_k = R^-T Q w_k``.

Rows that are dependent within one edge (a joint's only far off its
manifold, an axis a quarter turn away) make the plan give up for that
pose: the caller takes the Schur route (``K``'s factorisation).
"""
from libc.math cimport sqrt, fabs
from gear.spatial._spatial cimport mat6_vec, matvec3, matTvec3
from gear.algorithms._spchol cimport spchol_factor, spchol_solve_basic, row_rtol
from gear.maximal._kernel cimport dot6
from gear.maximal._tree_route cimport (MaxTree, TreeW, Topo, treework, tree_scratch, eliminate, sweep_up,
                                       sweep_down, loop_schur, add_loop_forces)


cdef enum:
    TS_OK = 0
    TS_RANK = 1          # an edge's rows are dependent
    TS_NOT_PSD = 2       # an edge's pivot D = S^T Mt S not positive definite


cdef struct StepTree:
    MaxTree tr           # the loop rows' visits and K_L's plan, bodies in the tree's order
    int nb, nL, nvt      # bodies, loop rows, sum of nvi
    const int* body      # (nb,) the body at each position (parents first)
    const int* tpar      # (nb,) the parent's position, -1: the world
    const int* nvi       # (nb,) n = 6 - the edge's rows (6: no edge)
    const int* iv        # (nb,) the first column of U and Ld
    const int* er0       # (nb,) the edge's first row, -1: no edge
    const int* side      # (nb,) 1: the body is the edge's rows' {B}, 0: their {A}
    const int* lrow      # (nL,) the loop rows
    const int* lpart     # (nL, 2) their parts of J (a geometric row: itself, then -1; a
                         # joint coupler: its two parts, _native.pyx's part_row)
    int rigid            # every edge's map a rigid transform (``gear.maximal.tree._edge_points``)
    const int* xb        # (nb,) 1: the rows' x_A is {B}'s origin, 0: {A}'s
    const double* pA     # (m, 3) the rows' frame positions on {A}'s body (or in the world) ...
    const double* pB     # ... and on {B}'s


cdef struct StepW:
    TreeW t
    double* Q            # (nb, 36) the edge's rows orthogonalised, v_i / |v_i|^2 (m_k rows of 6)
    double* R            # (nb, 36) C = R V, R unit lower triangular (stride 6)
    double* S            # (nb, 36) the null space of C (n columns of 6, orthogonal)
    double* A            # (nb, 36) -C^+ E, row-major (rigid: (nb, 12), the transform of Ad_{T^-1})
    double* eta          # (nb, 6) by position
    double* dV           # (nb, 6) by body: the solution
    double* rigid        # (1,) 1: the edges' maps are rigid at this factor's poses (A holds transforms)


cdef inline int step_tree_scratch(const StepTree* s) noexcept nogil:
    return tree_scratch(s.nb, s.nvt, s.nL, s.tr.nvis, s.tr.ch.nnz) + 156 * s.nb + 1


cdef inline StepW stepwork(const StepTree* s, double* base) noexcept nogil:
    cdef StepW w
    w.t = treework(s.nb, s.nvt, s.nL, s.tr.nvis, s.tr.ch.nnz, base)
    w.Q = base + tree_scratch(s.nb, s.nvt, s.nL, s.tr.nvis, s.tr.ch.nnz)
    w.R = w.Q + 36 * s.nb
    w.S = w.R + 36 * s.nb
    w.A = w.S + 36 * s.nb
    w.eta = w.A + 36 * s.nb
    w.dV = w.eta + 6 * s.nb
    w.rigid = w.dV + 6 * s.nb
    return w


cdef inline const double* edge_row(const StepTree* s, const double* F, int k, int i, int on_body) noexcept nogil:
    # row i of edge k: its 6-block on the body (on_body) or on the parent
    cdef int sd = s.side[k] if on_body else 1 - s.side[k]
    return F + 12 * (s.er0[k] + i) + 6 * sd


cdef inline bint rotations(const double* T, int nb) noexcept nogil:
    """Whether every pose's rotation block is orthonormal to 1e-13: a
    rigid map takes R^T for R^-1, so that its error is of that order
    (poses that steps keep on SO(3), to a rounding that grows slowly:
    8e-15 after 10^3 Euler steps of the N-four-bar, 3e-14 after 10^5).
    Further off (a user's poses, which load to 1e-6, or a run of many
    millions of steps) the general map, exact at any pose."""
    cdef int b, i, j
    cdef double x
    cdef const double* R
    for b in range(nb):
        R = T + 12 * b
        for i in range(3):
            for j in range(i + 1):
                x = R[i] * R[j] + R[3 + i] * R[3 + j] + R[6 + i] * R[6 + j] - (1.0 if i == j else 0.0)
                if not (fabs(x) <= 1e-13):
                    return False
    return True


cdef inline void rigid_map(const StepTree* s, const double* T, int k, double* X) noexcept nogil:
    """Edge k's map as the transform ``X`` (12: R row-major, p) whose
    ``Ad_{X^-1}`` takes the parent's twist to the body's, from the bodies'
    poses ``T`` (nb, 12) (see "rigid maps" above).  The edge's parent is a
    body: an edge to the world needs no map."""
    cdef int a, i, r0 = s.er0[k], sb = s.side[k]
    cdef int bs = s.body[k], bo = s.body[s.tpar[k]]
    cdef int bA = bo if sb else bs
    cdef int bB = bs if sb else bo
    cdef double xA[3]
    cdef double xB[3]
    cdef double d[3]
    cdef const double* Rs = T + 12 * bs
    cdef const double* Ro = T + 12 * bo
    # x - o of each side in the world: x_B - o_B = R_B p_B, x_A - o_A = R_A p_A
    # or (x_A at {B}'s origin) o_B + R_B p_B - o_A
    matvec3(T + 12 * bA, s.pA + 3 * r0, xA)
    matvec3(T + 12 * bB, s.pB + 3 * r0, xB)
    if s.xb[k]:
        for a in range(3):
            xA[a] = xB[a] + T[12 * bB + 9 + a] - T[12 * bA + 9 + a]
    # R = R_o^T R_s,  p = R_o^T ((x_o - o_o) - (x_s - o_s))
    for a in range(3):
        d[a] = xA[a] - xB[a] if sb else xB[a] - xA[a]
    for a in range(3):
        for i in range(3):
            X[3 * a + i] = Ro[a] * Rs[i] + Ro[3 + a] * Rs[3 + i] + Ro[6 + a] * Rs[6 + i]
    matTvec3(Ro, d, X + 9)


cdef inline int edges(const StepTree* s, const double* F, const double* T, StepW* w) noexcept nogil:
    """Each edge's ``Q``, ``R``, ``S`` and ``A`` from the rows ``F`` (m, 12)
    (a rigid map from the poses ``T`` (nb, 12) where the plan says so)."""
    cdef int k, i, j, a, b, n, mk, best
    cdef double v[6]
    cdef double Vo[36]                    # the orthogonal rows v_i (Q holds v_i / |v_i|^2)
    cdef double B[36]
    cdef double left[6]
    cdef double x, bn, cn
    cdef double* Q
    cdef double* R
    cdef double* S
    cdef double* A
    cdef const double* c
    w.rigid[0] = 1.0 if s.rigid and T != NULL and rotations(T, s.nb) else 0.0
    for k in range(s.nb):
        n = s.nvi[k]
        mk = 6 - n
        Q = w.Q + 36 * k
        R = w.R + 36 * k
        S = w.S + 36 * k
        # C = R V by modified Gram-Schmidt on the rows, R unit lower
        # triangular and V's rows orthogonal, unnormalised (no square
        # roots): Q_i = v_i / |v_i|^2, so that C^+ = Q^T R^-1
        for i in range(mk):
            c = edge_row(s, F, k, i, 1)
            cn = 0.0
            for a in range(6):
                v[a] = c[a]
                cn += c[a] * c[a]
            for j in range(i):
                x = dot6(v, Q + 6 * j)
                R[6 * i + j] = x
                for a in range(6):
                    v[a] -= x * Vo[6 * j + a]
            x = dot6(v, v)
            if not (x > 1e-20 * cn):
                return TS_RANK
            x = 1.0 / x
            for a in range(6):
                Vo[6 * i + a] = v[a]
                Q[6 * i + a] = v[a] * x
        # S: the unit vector with the most left outside the rows and the
        # columns so far (left[a] = 1 - |its projection|^2, less each new
        # column's share as it comes), orthogonalised, n times
        for a in range(6):
            x = 1.0
            for i in range(mk):
                x -= Q[6 * i + a] * Vo[6 * i + a]
            left[a] = x
        for j in range(n):
            best = 0
            bn = -1.0
            for a in range(6):
                if left[a] > bn:
                    bn = left[a]
                    best = a
            for a in range(6):
                v[a] = 1.0 if a == best else 0.0
            for i in range(mk):
                x = Q[6 * i + best]
                for a in range(6):
                    v[a] -= x * Vo[6 * i + a]
            for i in range(j):
                x = S[6 * i + best]
                for a in range(6):
                    v[a] -= x * S[6 * i + a]
            # (orthonormal for the columns after it; the last one is only a
            # direction, D = S^T Mt S takes its length)
            x = 1.0 / sqrt(dot6(v, v)) if j < n - 1 else 1.0
            for a in range(6):
                S[6 * j + a] = v[a] * x
                left[a] -= S[6 * j + a] * S[6 * j + a]
        if s.tpar[k] < 0:
            continue
        if w.rigid[0] != 0.0:
            rigid_map(s, T, k, w.A + 12 * k)
            continue
        # A = -Q^T R^-1 E: B = R^-1 E row by row, A -= q_i B_i
        A = w.A + 36 * k
        for a in range(36):
            A[a] = 0.0
        for i in range(mk):
            c = edge_row(s, F, k, i, 0)
            for b in range(6):
                x = c[b]
                for j in range(i):
                    x -= R[6 * i + j] * B[6 * j + b]
                B[6 * i + b] = x
            for a in range(6):
                x = Q[6 * i + a]
                for b in range(6):
                    A[6 * a + b] -= x * B[6 * i + b]
    return TS_OK


cdef inline Topo edge_topo(const StepTree* s, const StepW* w) noexcept nogil:
    # the tree of the edges for _tree_route's sweeps: A in place of Ad
    cdef Topo g
    g.nb = s.nb
    g.parent = s.tpar
    g.nvi = s.nvi
    g.iv = s.iv
    g.body = s.body
    g.S = w.S
    g.X = w.A
    g.general = w.rigid[0] == 0.0
    g.eta = w.eta
    return g


cdef inline int tree_factor(const StepTree* s, const double* F, const double* T, double rel,
                            StepW* w) noexcept nogil:
    """Everything of the solve that depends on the pose alone: the edges,
    the elimination, ``K_L`` and its semi-definite factor (``rel``: the
    pivot below which a loop row counts as dependent, relative to ``K_L``'s
    largest diagonal entry; ``row_rtol()`` of its own)."""
    cdef int st = edges(s, F, T, w)
    cdef Topo g = edge_topo(s, w)
    if st != TS_OK:
        return st
    if eliminate(&g, s.tr.I6, &w.t) != 0:
        return TS_NOT_PSD
    if s.nL > 0:
        # (into the factor's array: the steps keep no copy of K_L)
        loop_schur(&g, &s.tr, F, &w.t, w.t.Lx)
        # semi-definite: a dependent loop row (a planar loop's out-of-plane
        # rows) takes no force, and its equation follows from the others
        spchol_factor(&s.tr.ch, w.t.Lx, w.t.xs, w.t.dep, rel, row_rtol())
    return TS_OK


cdef inline double row_dot(const double* F, int r, const double* dV, int a, int b) noexcept nogil:
    # J_r dV from the part's two 6-blocks (bodies a and b, -1: the world)
    cdef double x = 0.0
    if a >= 0:
        x += dot6(F + 12 * r, dV + 6 * a)
    if b >= 0:
        x += dot6(F + 12 * r + 6, dV + 6 * b)
    return x


cdef inline double loop_row_dot(const StepTree* s, const double* F, int l, const int* ia, const int* ib,
                                const double* dV) noexcept nogil:
    # J_r dV of loop row l, summed over its parts (ia, ib: the parts' bodies)
    cdef int j, q
    cdef double x = 0.0
    for j in range(2):
        q = s.lpart[2 * l + j]
        if q >= 0:
            x += row_dot(F, q, dV, ia[q], ib[q])
    return x


cdef inline void tree_solve(const StepTree* s, const double* F, const int* ia, const int* ib,
                           const double* rhs, double* x, StepW* w) noexcept nogil:
    """``w.dV = M^-1 J^T mu`` with ``K mu = rhs`` after :func:`tree_factor`;
    ``x`` (m,), where not NULL: ``mu``.  ``ia``, ``ib``: the parts' bodies."""
    cdef const MaxTree* tr = &s.tr
    cdef TreeW* t = &w.t
    cdef int k, i, j, a, mk, l, r
    cdef double z[6]
    cdef double b[6]
    cdef double y
    cdef const double* R
    cdef const double* Q
    cdef Topo g = edge_topo(s, w)
    # eta = Q^T R^-1 c_k
    for k in range(s.nb):
        mk = 6 - s.nvi[k]
        R = w.R + 36 * k
        Q = w.Q + 36 * k
        for i in range(mk):
            y = rhs[s.er0[k] + i]
            for j in range(i):
                y -= R[6 * i + j] * z[j]
            z[i] = y
        for a in range(6):
            y = 0.0
            for i in range(mk):
                y += Q[6 * i + a] * z[i]
            w.eta[6 * k + a] = y
    sweep_up(&g, t, NULL)
    sweep_down(&g, t, w.dV, NULL)
    if s.nL > 0:
        for l in range(s.nL):
            r = s.lrow[l]
            t.y[tr.pinv[l]] = rhs[r] - loop_row_dot(s, F, l, ia, ib, w.dV)
        for l in range(s.nL):
            t.mu[l] = t.y[l]
        spchol_solve_basic(&tr.ch, t.Lx, t.dep, t.mu)
        add_loop_forces(tr, s.nb, t)
        sweep_down(&g, t, w.dV, NULL)
    if x == NULL:
        return
    # the multipliers: loop rows from K_L; each edge's from the wrench it
    # carries into its subtree, which the subtree's articulated inertia and
    # wrench give, w_k = Mt_k dV_k - ft_k (the articulated-body equation)
    for l in range(s.nL):
        x[s.lrow[l]] = t.mu[tr.pinv[l]]
    for k in range(s.nb):
        mk = 6 - s.nvi[k]
        if mk == 0 or s.er0[k] < 0:
            continue
        R = w.R + 36 * k
        Q = w.Q + 36 * k
        mat6_vec(t.Mt + 36 * k, w.dV + 6 * s.body[k], b)
        for a in range(6):
            b[a] -= t.ft[6 * k + a]
        # mu = R^-T Q w
        for i in range(mk):
            z[i] = dot6(Q + 6 * i, b)
        for i in range(mk - 1, -1, -1):
            y = z[i]
            for j in range(i + 1, mk):
                y -= R[6 * j + i] * z[j]
            z[i] = y
        for i in range(mk):
            x[s.er0[k] + i] = z[i]

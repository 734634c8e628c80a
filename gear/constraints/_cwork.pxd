# cython: language_level=3
"""Closed-loop kernels (Kim, Lie Group Formulation of Articulated Rigid
Body Dynamics, Sec. 3): what every route shares -- the row types and
status codes, the rows' plan ``ClosC`` (with the sparse route's plan
``SpKKT``) and the workspace ``CWork`` with its one layout.

The kernels are split by route; each file cimports only files above it in
this list (Cython cannot cimport in a cycle):

    _cwork.pxd          row types, status codes, ClosC, SpKKT, CWork, layout
    _rows.pxd           the constraint rows: residual g, A, dA dq; A x, A^T lam
    _psd.pxd            minimum-norm solve of a dense PSD system K lam = rhs
    _aba_route.pxd      articulated-body route, K = A M^{-1} A^T by unit
                        passes (Kim eqs. 67-77)
    _groups.pxd         row groups and their pieces of Y = L^{-T} A^T on
                        root paths
    _sparse_route.pxd   sparse route: K = Y^T Y on the meeting group pairs,
                        factorised in a fixed sparse pattern
    _dense_route.pxd    dense route: Featherstone's tree-sparse M = L^T L,
                        then K = Y^T Y dense (or sparse)
    _projection.pxd     projection route: pivoted QR of A^T and the
                        null-space dynamics
    _inverse.pxd        closed inverse dynamics (Kim eqs. 56-64)
    _tangent_passes.pxd derivatives of the bodies', frames' and rows'
                        kinematics along one direction (Kim Table 5's
                        forward half)
    _derivatives.pxd    derivatives of closed forward and inverse dynamics

The maximal-coordinate kernel (``gear/maximal/_kernel.pxd``) reuses the
rows and the compact layout of ``CWork``.

Workspace.  ``cwork_layout`` carves ``CWork``'s fields out of one array of
doubles per thread (``cwork_size`` / ``cwork_from``); the ``_c`` variants
append the scratch of a maximal-coordinate plan (after the compact layout
of the rows' fields, unless ``full``) or of a sparse plan (after the full
layout).
"""
from gear.algorithms._spchol cimport SpChol, spchol_scratch


cdef enum:
    ROW_POS = 0
    ROW_AXIS = 1
    ROW_DOT = 2
    ROW_DIST = 3
    ROW_COUPLER = 4
    # what closure_rows evaluates: the poses' part (the residual g and the
    # row wrenches F), the velocities' part (the bias dA dq, with the
    # residual for Baumgarte's terms), or both
    ROWS_POSE = 1
    ROWS_BIAS = 2
    ROWS_ALL = 3
    # status codes (positive: 1 + the joint with a singular articulated inertia)
    ST_DIST_COINCIDE = -3
    ST_MASS_NOT_PD = -4
    ST_INEXACT = -5       # closed inverse dynamics: A_p^T lam = rhs has no solution (under-actuated)
    ST_SPARSE_REDUNDANT = -6   # the sparse route: more dependent rows than its completion takes
    ST_SPARSE_PATTERN = -7     # the sparse route: a row its plan left out (zero when planned) is not zero


cdef struct SpKKT:
    # the dense route's K = Y^T Y kept sparse (closed_dense): the pattern of
    # its factor (rows of K in the factor's fill-reducing order) and where
    # each group pair's block goes; built once per rows by
    # gear/constraints/sparse.py.  Rows of A that were exactly zero at two
    # random configurations (a planar mechanism's out-of-plane rows) may be
    # left out of the factor (pinv -1, multiplier 0); each call checks that
    # they still are (ST_SPARSE_PATTERN otherwise: the caller re-plans)
    SpChol ch
    int m                  # rows of K (ch.n of them in the factor)
    const int* pinv        # (m,) row r of K is row pinv[r] of the factor, -1: left out
    int npair              # group pairs a <= b whose rows' supports meet
    const int* pga
    const int* pgb
    const int* poff        # (npair + 1,) offsets into dst
    const int* coff        # (npair + 1,) each pair's piece combinations in comb:
    const int* comb        #   (s1, s2, lo, hi): piece s1 of group a and s2 of group b
                           #   share the depths [lo, hi) (structural: planned once)
    const int* dst         # position in the factor's values of entry (i, j) of the
                           # pair's block (row-major, g_a x g_b); -1: the upper
                           # triangle or a row left out; -2: the diagonal entry of a
                           # row left out (checked to be zero)


cdef struct SpInv:
    # the sparse route's inverse dynamics (closed_inverse_sparse of
    # _sparse_route.pxd): the pattern of A^T A over the dofs (two dofs meet
    # when a row group's pieces hold both) in a fill-reducing order, and for
    # each group where the products of its pieces' entries land; built once
    # per rows by gear/constraints/sparse.py
    SpChol ch              # n = nv
    const int* pinv        # (nv,) dof k is row pinv[k] of the factor
    int ng                 # row groups (as dense_groups(keep=True) forms them)
    const int* goff        # (ng + 1,) offsets into gdst
    const int* gdst        # per group, for p <= q over its pieces' entries (main path,
                           # then tail; row-major upper triangle): the position in the
                           # factor's values of (dof_p, dof_q)
    const int* gdof        # per group, the dof of each piece entry (offsets gdoff)
    const int* gdoff       # (ng + 1,)


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
    const void* mx         # the maximal-coordinate plan (MaxC of gear/maximal/_kernel.pxd), or NULL
    int mxws               # its scratch size (doubles per thread)
    const SpKKT* sp        # the sparse route's plan (dense route with a sparse K), or NULL
    const SpInv* spi       # its inverse dynamics' plan (with sp), or NULL


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
    # Baumgarte stabilisation of the rows (a rollout's own workspace; zero
    # elsewhere): closure_rows adds bg_a (A v)_r + bg_b g_r to each bias, so
    # that A ddq = -(dA dq + 2 alpha A v + beta^2 g); bdq the velocity v
    # (read by coupler rows, whose rate is not in the frames)
    double bg_a    # 2 alpha
    double bg_b    # beta^2
    const double* bdq
    # Rows held dependent across a step's stages (_psd.pxd's psd_factor,
    # _manifold.pxd's hold_rows): every factorisation of the forward-dynamics
    # routes marks the rows it found dependent in ``rdep`` (m,): 0 not, 1
    # dependent on the rows before it (which row of a dependent set is
    # marked depends on their order), 2 dependent for good (exactly zero,
    # or chosen by pivoting); while ``hold`` is set, the rows marked in
    # ``held`` (m,) are treated as dependent and left out (zero multiplier,
    # their equations dropped) whatever their pivots
    double* rdep
    double* held
    bint hold
    # the last K factorised for the rows (psd_factor with ``rows``): its size
    # ``kn``, its rows (``kidx``, NULL: in order) and diagonal ``kd`` (m,);
    # its strict upper triangle is left as it was
    double* kd
    int kn
    const double* kidx


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
    c.bg_a = 0.0
    c.bg_b = 0.0
    c.bdq = NULL
    c.hold = False
    c.rdep = c.held = c.kd = NULL
    c.kn = 0
    c.kidx = NULL
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
    c.rdep = _carve(base, &off, m)
    c.held = _carve(base, &off, m)
    c.kd = _carve(base, &off, m)
    return off


cdef inline int cwork_size(int nb, int nv, int m) noexcept nogil:
    cdef CWork c
    return cwork_layout(&c, NULL, nb, nv, m, False)


cdef inline int sparse_scratch(const ClosC* cc) noexcept nogil:
    # the sparse route's values of its factors and their scratch (0: no
    # plan): K's, then (at sparse_inverse_offset) A^T A's
    if cc == NULL or cc.sp == NULL:
        return 0
    return sparse_inverse_offset(cc) + (0 if cc.spi == NULL else
                                        cc.spi.ch.nnz + 3 * cc.spi.ch.n)


cdef inline int sparse_inverse_offset(const ClosC* cc) noexcept nogil:
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

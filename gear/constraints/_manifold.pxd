# cython: language_level=3
"""Back onto the constraint manifold: the projection of the rollouts'
``stabilization="projection"`` (``gear/algorithms/_rollout.pxd``).

Positions: Gauss-Newton on ``g(q) = 0`` with minimum-norm steps ``dq =
-A^T (A A^T)^+ g``.  Velocities: the nearest velocity on ``A v = 0`` in
the mass metric, ``v -= M^-1 A^T K^+ A v`` with ``K = A M^-1 A^T`` -- the
kinetic-energy-nearest one (the change a plastic impulse on the rows
makes), independent of the joint coordinates and the same correction as
the maximal formulation's projection of the body twists
(``gear.maximal.stepping.project``).  On the dense route it is done with
the next solve's factors (:func:`fused_velocity_projection` after
``dense_qphase``, and :func:`null_space_velocity_projection` after
``projection_qphase``); elsewhere by :func:`mass_velocity_projection`,
with CRBA's factor of ``M``.  On the sparse route both are the route's own
solves (:func:`sparse_gauss_newton`, and :func:`fused_velocity_projection`
with the next solve as on the dense route), without a dense ``A``.
``gear.simulation.integrators._project`` is the NumPy twin.
"""
from libc.math cimport fabs
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._crba cimport crba_packed
from gear.algorithms._dense cimport tree_factor, tree_solve_L, tree_solve_Lt, chol_solve
from gear.joints._integrate cimport integrate_config
from gear.constraints._cwork cimport ClosC, CWork, ST_MASS_NOT_PD, ROWS_POSE, ROWS_BIAS
from gear.algorithms._common cimport forward_pass
from gear.constraints._rows cimport constraint_rows, world_rows_times, world_kinematics, closure_rows
from gear.constraints._psd cimport psd_factor, psd_apply, held_by_pivoting
from gear.constraints._dense_route cimport dense_back_solve, dense_qphase, k_solve
from gear.constraints._projection cimport chol_mul, qr_pivoted


cdef inline double max_abs(const double* x, int n) noexcept nogil:
    # max |x_i| (0 for n = 0; NaN entries are passed over)
    cdef int i
    cdef double e = 0.0
    for i in range(n):
        if fabs(x[i]) > e:
            e = fabs(x[i])
    return e


cdef inline void aat_factor(const double* A, int nr, int nv, CWork* cw) noexcept nogil:
    """``A A^T`` (nr x nr) into ``cw.K``, factorised by ``psd_factor`` on
    the rows (while ``cw.hold`` is set the rows marked in ``cw.held`` are
    left out, ``_psd.pxd``)."""
    cdef int i, j, k
    cdef double s
    for i in range(nr):
        for j in range(i + 1):
            s = 0.0
            for k in range(nv):
                s += A[i * nv + k] * A[j * nv + k]
            cw.K[i * nr + j] = s
            cw.K[j * nr + i] = s
    psd_factor(cw.K, nr, cw, 1e-10, NULL, True)


cdef inline void at_times(const double* A, int nr, int nv, const double* y, double* d) noexcept nogil:
    # d = A^T y
    cdef int i, k
    cdef double s
    for k in range(nv):
        s = 0.0
        for i in range(nr):
            s += A[i * nv + k] * y[i]
        d[k] = s


cdef inline void min_norm_correction(const double* A, int nr, int nv, const double* r, double* y,
                                      double* d, CWork* cw) noexcept nogil:
    """``d = A^T (A A^T)^+ r``: the minimum-norm ``d`` with ``A d = r``.
    Any ``y`` with ``A A^T y = r`` gives it (``A A^T`` and ``A^T`` have one
    null space), so the factor's basic solution does, without the
    minimum-norm completion of ``y`` itself.  While ``cw.hold`` is set the
    rows marked in ``cw.held`` are left out (:func:`aat_factor`); the
    factor stays in ``cw.K`` for another right-hand side
    (``psd_apply(cw.K, nr, r2, y, cw, False)``)."""
    aat_factor(A, nr, nv, cw)
    psd_apply(cw.K, nr, r, y, cw, False)
    at_times(A, nr, nv, y, d)


cdef inline int mass_velocity_projection(const ModelC* m, const ClosC* c, double* v, Work* w,
                                          CWork* cw) noexcept nogil:
    """``v -= M^-1 A^T K^+ A v``, ``K = A M^-1 A^T``, with ``A`` the dense
    rows in ``cw.Ad`` and ``w.T``, ``w.S`` at their ``q`` (the last
    ``constraint_rows``): with CRBA's ``M = L^T L`` (tree-sparse) and the
    rows ``z_i = L^-T a_i`` (in place of A's), ``K = Z Z^T`` and ``M^-1
    A^T y = L^-1 Z^T y``: :func:`min_norm_correction` on ``Z``, then
    ``L^-1``.  Returns 0 or ST_MASS_NOT_PD."""
    cdef int i, k, nr = c.m, nv = m.nv
    cdef double s
    cdef double* P = cw.Md
    cdef double* D = cw.Md + nv * nv - nv
    cdef double* Z = cw.Ad
    cdef double* d = cw.xs
    for i in range(nr):
        s = 0.0
        for k in range(nv):
            s += cw.Ad[i * nv + k] * v[k]
        cw.rhs[i] = s
    crba_packed(m, P, D, w)
    if tree_factor(P, D, nv, m.vdep, m.voff, m.vanc) != 0:
        return ST_MASS_NOT_PD
    for i in range(nr):
        tree_solve_Lt(P, D, nv, m.vdep, m.voff, m.vanc, Z + i * nv)
    min_norm_correction(Z, nr, nv, cw.rhs, cw.lc, d, cw)
    tree_solve_L(P, D, nv, m.vdep, m.voff, m.vanc, d)
    for k in range(nv):
        v[k] -= d[k]
    return 0


cdef inline int fused_velocity_projection(const ModelC* m, const ClosC* c, double* v, Work* w,
                                          CWork* cw, int ng, int na) noexcept nogil:
    """``v -= M^-1 A^T K^+ A v`` with ``dense_qphase``'s factors at this
    ``q``: ``A v`` from the world Jacobians, ``K``'s basic solution (the
    sparse plan's minimum-norm one), then ``L^-1 Y y``
    (``dense_back_solve``).  Returns 0 or ST_SPARSE_REDUNDANT."""
    cdef int i, st, nv = m.nv
    cdef double* d = cw.xs
    world_rows_times(m, c, w, cw, v, cw.g)
    for i in range(na):
        cw.rhs[i] = cw.g[<int> cw.act[i]]
    st = k_solve(m, c, cw, ng, na, False)
    if st < 0:
        return st
    for i in range(nv):
        d[i] = 0.0
    dense_back_solve(m, cw, ng, cw.lc, d)
    for i in range(nv):
        v[i] -= d[i]
    return 0


cdef inline int rows_curvature(const ModelC* m, const ClosC* c, const double* q, const double* x,
                               double* out, Work* w, CWork* cw) noexcept nogil:
    """``out`` (m,) = the rows' second derivative along ``q exp(t x)`` at
    ``t = 0``: their bias ``dA dq`` at ``dq = x`` (the acceleration rows
    with ``ddq = 0``, Kim eq. 41), so that ``g(q exp(x)) = g + A x + out / 2
    + O(|x|^3)``.  The joint transforms in ``w`` and the world poses in
    ``cw.Tw`` must be those of ``q`` (the ``constraint_rows`` just made
    there); the body twists and bias accelerations in ``w`` and ``cw`` are
    overwritten.  Returns 0 or ``closure_rows``' status."""
    cdef int r, st
    cdef double ga = cw.bg_a, gb = cw.bg_b
    cw.bg_a = 0.0                # the rows' own bias, without Baumgarte's terms
    cw.bg_b = 0.0
    w.poses_ok = True
    forward_pass(m, q, x, w, True)
    world_kinematics(m, w, cw, False, True, False)
    st = closure_rows(m, c, q, w, cw, False, ROWS_BIAS)
    cw.bg_a = ga
    cw.bg_b = gb
    for r in range(c.m):
        out[r] = cw.bias[r]
    return st


cdef inline double drift_curvature(double err, double h, const double* v, int nv) noexcept nogil:
    """An over-estimate of the rows' curvature from a rollout step's drift,
    for :func:`gauss_newton_step`'s choice: a step of length ``s = h
    max|v|`` from the rows left ``max|g| = err`` (a curvature ``kappa``
    along it gives ``err ~ kappa s^2 / 2``), and Gauss-Newton's step ``x``
    then leaves about ``kappa |x|^2 / 2``.  Returns ``30 err / s^2``: on
    the bundled four-bar the residual a Gauss-Newton step leaves is at
    most 17 times ``err |x|^2 / s^2`` (10,240 steps at dt = 1 ms), so a
    factor 30 misses none of them (a miss costs a second iteration, never
    accuracy: the projection still iterates to ``tol``)."""
    cdef double s = h * max_abs(v, nv)
    if not (s > 0.0):
        return 1e300
    return 30.0 * err / (s * s)


cdef inline bint second_order_agrees(const double* b, const double* g, const double* x, int nr, int nv,
                                     double tol) noexcept nogil:
    """Whether the second-order step (:func:`gauss_newton_step`) ends where
    Gauss-Newton's iterations would, to the tolerance ``tol`` (to which
    their own end point is defined): the two differ along the rows by
    about ``|x| r^2``, ``x`` the Gauss-Newton step and ``r = |b / 2| /
    |g|`` the quadratic term's share (Gauss-Newton's later steps turn with
    the rows' normals by ``O(r)``).  True after the steps of a rollout at
    dt = 1 ms on the bundled four-bar (its drift ``|g|`` up to 1e-5); at
    dt = 5 ms and more its steps leave ``|g|`` up to 1e-3, the end points
    would differ by 1e-9 to 1e-6 a step, and those stay Gauss-Newton's, as
    the Python loop's are."""
    cdef double gm = max_abs(g, nr), r
    if not (gm > 0.0):
        return False
    r = 0.5 * max_abs(b, nr) / gm
    return max_abs(x, nv) * r * r <= tol


cdef inline int second_order_rhs(const ModelC* m, const ClosC* c, const double* q, const double* g,
                                 const double* x, double curv, double tol, double* out, Work* w,
                                 CWork* cw) noexcept nogil:
    """The choice of :func:`gauss_newton_step`'s second-order step for the
    Gauss-Newton step ``x`` (taken as ``-x``) from ``g``: where ``curv
    |x|^2`` exceeds ``tol`` and the end points agree
    (:func:`second_order_agrees`), ``out = g + b / 2`` (``b``:
    :func:`rows_curvature` along ``x``) and 1; else 0 (``out`` then
    scratch); or ``closure_rows``' (negative) status.  ``out`` may not
    alias ``g``."""
    cdef int k, st
    if not (curv > 0.0 and curv * max_abs(x, m.nv) ** 2 > tol):
        return 0
    st = rows_curvature(m, c, q, x, out, w, cw)
    if st != 0:
        return st
    if not second_order_agrees(out, g, x, c.m, m.nv, tol):
        return 0
    for k in range(c.m):
        out[k] = g[k] + 0.5 * out[k]
    return 1


cdef inline void step_back(const ModelC* m, double* q, double* qn, double* d, Work* w) noexcept nogil:
    # q <- q exp(-d) (d is negated; qn: scratch); the joint transforms no
    # longer hold q
    cdef int k
    for k in range(m.nv):
        d[k] = -d[k]
    integrate_config(m, q, d, 1.0, qn)
    for k in range(m.nq):
        q[k] = qn[k]
    w.poses_ok = False


cdef inline int gauss_newton_step(const ModelC* m, const ClosC* c, double* q, double* qn,
                                  const double* g, const double* A, double* y, double* d,
                                  Work* w, CWork* cw, double curv=0.0, double tol=0.0) noexcept nogil:
    """``q <- q exp(-A^+ g)`` (``A``: the rows at ``q``, or at an earlier
    ``q`` for a chord step); the joint transforms no longer hold ``q``.

    ``curv`` > 0 (``A``, the joint transforms in ``w`` and the world poses
    in ``cw.Tw`` those of ``q``: the rows just made there): where the
    Gauss-Newton step ``x = -A^+ g`` would leave more than ``tol`` by the
    estimate ``curv |x|^2`` (:func:`drift_curvature`), the step with the
    rows' second-order term instead, ``q <- q exp(-A^+ (g + b / 2))``,
    ``b`` the rows' curvature along ``x`` (:func:`rows_curvature`):
    ``g(q exp(s)) = g + A s + b(s) / 2 + O(|s|^3)`` and ``b(-x) = b(x)``,
    so it leaves ``O(|g|^3)`` where Gauss-Newton's step leaves
    ``O(|g|^2)``.  After a step of a rollout that is one iteration where
    Gauss-Newton would take two (29 % of the bundled four-bar's steps at
    dt = 1 ms), the second's q-phase saved for one rows' bias pass.  Its
    end point is Gauss-Newton's to ``O(|g|^3)``: the same step in the same
    normal space ``range(A^T)``, only more of it done at once (Chebyshev's
    method for the underdetermined rows), and taken only where the two end
    points agree to ``tol`` (:func:`second_order_agrees`):
    the states are Gauss-Newton's, only reached in fewer iterations.
    Returns 0 or ``closure_rows``' status."""
    cdef int st
    min_norm_correction(A, c.m, m.nv, g, y, d, cw)
    st = second_order_rhs(m, c, q, g, d, curv, tol, y, w, cw)
    if st < 0:
        return st
    if st == 1:
        psd_apply(cw.K, c.m, y, y, cw, False)
        at_times(A, c.m, m.nv, y, d)
    step_back(m, q, qn, d, w)
    return 0


cdef inline int project(const ModelC* m, const ClosC* c, double tol, double* q, double* v,
                         double* qn, double* g, double* y, double* d, Work* w, CWork* cw,
                         double* gmax, double h=0.0) noexcept nogil:
    """Gauss-Newton onto g(q) = 0 (minimum-norm steps), then v onto A v = 0
    in the mass metric (:func:`mass_velocity_projection`).  ``gmax`` (or
    NULL) gets the larger of itself and max |g| before the projection (the
    first iteration's rows) and ``gmax[1]`` one more per Gauss-Newton
    iteration.  ``h`` > 0: after a rollout's step of ``h``
    (``v`` its velocity), the first iteration's :func:`gauss_newton_step`
    may be the second-order step (:func:`drift_curvature`)."""
    cdef int it, st
    cdef double err
    cdef double* A = cw.Ad
    for it in range(9):
        st = constraint_rows(m, c, q, NULL, g, A, NULL, w, cw, ROWS_POSE)
        if st != 0:
            return st
        err = max_abs(g, c.m)
        if it == 0 and gmax != NULL and err > gmax[0]:
            gmax[0] = err
        if err <= tol or it == 8:
            break
        if gmax != NULL:
            gmax[1] += 1.0
        st = gauss_newton_step(m, c, q, qn, g, A, y, d, w, cw,
                               drift_curvature(err, h, v, m.nv) if it == 0 and h > 0.0 else 0.0, tol)
        if st != 0:
            return st
    # velocity: v -= M^-1 A^T K^+ A v   (A at the projected q)
    return mass_velocity_projection(m, c, v, w, cw)


cdef inline int sparse_gauss_newton(const ModelC* m, const ClosC* c, double tol, double* q,
                                    double* qn, double* d, Work* w, CWork* cw, double* err,
                                    double h=0.0, const double* v=NULL) noexcept nogil:
    """Gauss-Newton on the sparse route (``c.sp``, hard rows): the rows at
    ``q`` (``err[0]`` their max ``|g|``) and, where that is above ``tol``,
    the minimum-norm step ``q <- q exp(-A^T (A A^T)^+ g)``, never with the
    dense ``A``, ``A A^T`` of :func:`min_norm_correction` (cubic in the
    loops): with ``M`` taken as the identity (``dense_qphase(...,
    unit_mass=True)``: ``Y = A^T`` on the rows' pieces, ``K = A A^T``
    factorised on the route's pattern) the route's own solve is that step
    (``Y y`` by ``dense_back_solve``).  ``h`` > 0 (after a rollout's step
    of ``h``, ``v`` its velocity): :func:`gauss_newton_step`'s choice of
    the second-order step, a second solve on the same factor with ``g + b
    / 2``.  ``d``: (nv,) scratch.  Returns 0 or the q-phase's or
    solve's status."""
    cdef int i, st, ng, na, rank, nv = m.nv
    st = dense_qphase(m, c, q, NULL, w, cw, &ng, &na, &rank, False, True)
    if st != 0:
        return st
    err[0] = max_abs(cw.g, c.m)
    if err[0] <= tol:
        return 0
    for i in range(c.m):
        cw.rhs[i] = cw.g[i]
    st = k_solve(m, c, cw, ng, na)
    if st < 0:
        return st
    for i in range(nv):
        d[i] = 0.0
    dense_back_solve(m, cw, ng, cw.lc, d)                # A^T (A A^T)^+ g
    st = second_order_rhs(m, c, q, cw.g, d, drift_curvature(err[0], h, v, nv) if h > 0.0 else 0.0,
                          tol, cw.rhs, w, cw)
    if st < 0:
        return st
    if st == 1:
        st = k_solve(m, c, cw, ng, na)
        if st < 0:
            return st
        for i in range(nv):
            d[i] = 0.0
        dense_back_solve(m, cw, ng, cw.lc, d)
    step_back(m, q, qn, d, w)
    return 0


cdef inline void null_space_velocity_projection(const ModelC* m, double* v, CWork* cw, int rank,
                                                int nn) noexcept nogil:
    """``v <- G (G^T M G)^-1 G^T M v`` with ``projection_qphase``'s factors
    (``G = Q[:, rank:]`` in ``cw.Pq``, ``M``'s Cholesky factor in
    ``cw.Md``, ``G^T M G``'s in ``cw.Pr``): the projection onto ``A v =
    0`` in the metric of ``M``, the same as ``v -= M^-1 A^T K^+ A v``
    (scratch: ``cw.Pv``)."""
    cdef int i, j, k, nv = m.nv
    cdef double t
    cdef const double* Qj
    cdef double* Mv = cw.Pv + 3 * nv
    cdef double* y = cw.Pv + 2 * nv
    chol_mul(cw.Md, nv, v, cw.Pv + nv, Mv)
    for i in range(nn):
        Qj = cw.Pq + (rank + i) * nv
        t = 0.0
        for k in range(nv):
            t += Qj[k] * Mv[k]
        y[i] = t
    if nn > 0:
        chol_solve(cw.Pr + nv * nv, nn, y, 1)
    for k in range(nv):
        v[k] = 0.0
    for j in range(nn):
        Qj = cw.Pq + (rank + j) * nv
        for k in range(nv):
            v[k] += Qj[k] * y[j]


cdef inline int hold_rows(const ModelC* m, const ClosC* c, const double* q, Work* w,
                          CWork* cw, const unsigned char* pres=NULL) noexcept nogil:
    """``cw.held`` from the solve just made at ``q`` (``cw.rdep``): the
    rows to hold dependent at the step's stages.  Where that solve's
    elimination marked a row dependent on the rows before it, which row of
    a dependent set it marked follows their order, and holding a large row
    while keeping a small one (a small row's direction is what turns off
    the rows) would not help: as many rows are chosen again by pivoting,
    largest first -- on the solve's own ``K`` (:func:`held_by_pivoting`),
    or, after the sparse route (no dense ``K``), by the pivoted QR of
    ``A^T`` at ``q`` (``qr_pivoted``; hybrid dynamics, ``pres`` the
    prescribed bodies: on the other dofs' columns)."""
    cdef int i, j, b, st, rank, nr = c.m
    cdef bint pivot = False
    rank = nr
    for i in range(nr):
        cw.held[i] = 1.0 if cw.rdep[i] != 0.0 else 0.0
        if cw.rdep[i] != 0.0:
            rank -= 1
        if cw.rdep[i] == 1.0:
            pivot = True
    if not pivot:
        return 0
    if c.sp == NULL and cw.kn > 0:
        held_by_pivoting(cw)
        return 0
    st = constraint_rows(m, c, q, NULL, NULL, cw.Bd, NULL, w, cw, ROWS_POSE)
    w.poses_ok = False
    if st != 0:
        return st
    if pres != NULL:
        for b in range(m.nb):
            if pres[b]:
                for i in range(nr):
                    for j in range(m.iv[b], m.iv[b] + m.nvi[b]):
                        cw.Bd[i * m.nv + j] = 0.0
    qr_pivoted(cw.Bd, m.nv, nr, 0.0, cw.piv, cw.tmp)
    for i in range(nr):
        cw.held[<int> cw.piv[i]] = 0.0 if i < rank else 1.0
    return 0

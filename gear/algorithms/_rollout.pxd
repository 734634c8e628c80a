# cython: language_level=3
"""Native rollouts: the whole steps loop of one state without the GIL (the
batch runs in parallel over states, one workspace per thread).

A tree's states run four at a time (``rollout_lanes``: the articulated-
body algorithm on all four at once, ``hybrid_lanes``), the same bits as one
at a time.

Integrators: semi-implicit Euler and classical RK4, with the stages
combined in the tangent space and applied with the joints' exponential
maps (``integrate_config``), as in ``gear/simulation.py``.  The
right-hand side is the articulated-body algorithm (a tree) or the
constrained forward dynamics of a closed chain (one of the routes in
``gear/constraints/``: ``_aba_route.pxd``, ``_dense_route.pxd``,
``_projection.pxd``), or the maximal-coordinate kernel of
``gear/maximal/_kernel.pxd``.  Closed chains can be projected back onto the
constraint manifold after each step, or stabilised by Baumgarte's terms in
the rows' bias (``2 alpha A v + beta^2 g``, in ``closure_rows``).  The
projection (``gear/constraints/_manifold.pxd``) is Gauss-Newton on the
positions to ``tol``, then the velocity's kinetic-energy-nearest point
on ``A v = 0``.  On the dense route (hard rows) the velocity step comes
with the next solve (:func:`_rollout_steps_fused`): ``dense_qphase``
factorises ``M`` and ``K`` at the projected ``q``, the velocity is
projected with those factors and the solve finishes at the projected
velocity (``dense_vphase``); its rows also serve Gauss-Newton's test of
convergence.  The projection route does the same with its QR of ``A^T``
and ``G^T M G`` (``projection_qphase``, ``projection_vphase``).  On the
dense route's sparse plan (the kkt solver's ``route="sparse"``)
Gauss-Newton's steps are the route's own solves with the unit mass matrix,
never a dense ``A``.  The other routes project before their solve.

Torques: a constant per-state ``tau`` plus, optionally, a PD law on
vector-space joints ``kp (q_target - q) + kd (dq_target - dq)``, gravity
compensation ``g(q)`` (RNEA with zero velocity and acceleration, Kim
Table 2), and computed torque ``RNEA(q, dq, ddq_r + ckp (q_r - q) + ckd
(dq_r - dq))`` tracking a reference sampled on a uniform time grid and
interpolated linearly at each stage time (``gear.controllers.
SampledReference``).
"""
from libc.math cimport fabs, sqrt
from gear.algorithms._types cimport ModelC, Work, Lanes
from gear.algorithms._aba cimport hybrid, hybrid_lanes
from gear.spatial._lanes cimport LANES
from gear.algorithms._rnea cimport rnea
from gear.joints._integrate cimport integrate_config
from gear.maximal._tree_route cimport maximal_dynamics
from gear.constraints._cwork cimport ClosC, CWork, ROWS_POSE
from gear.constraints._rows cimport constraint_rows
from gear.constraints._aba_route cimport closed_dynamics
from gear.constraints._dense_route cimport closed_forward_dense, dense_qphase, dense_vphase
from gear.constraints._projection cimport closed_forward_projection, projection_qphase, projection_vphase
from gear.constraints._manifold cimport (project, gauss_newton_step, drift_curvature, sparse_gauss_newton, hold_rows,
                                        fused_velocity_projection, null_space_velocity_projection,
                                        max_abs)


cdef struct RollC:
    int integrator          # 0 semi-implicit Euler, 1 RK4
    int nsteps
    double dt
    double last_dt          # length of the last step
    int record_every
    int nrec                # recorded frames
    int route               # closed chains: 0 ABA route, 1 dense route, 2 projection, 3 maximal
    int project             # closed chains: project after each step
    int project_start       # ... and the initial state (not on continued segments)
    double tol              # projection tolerance on |g|
    const double* kp        # (nv,) or NULL: PD on vector-space joints
    const double* kd
    const double* q_target  # (nq,)
    const double* dq_target # (nv,)
    int gravity_comp
    int k0                  # index of the segment's first step (its time is k0 dt)
    const double* ref       # (nref, nq + 2 nv) samples (q_r, dq_r, ddq_r), or NULL
    int nref
    double ref_t0
    double ref_dt
    const double* ckp       # (nv,) computed-torque gains
    const double* ckd
    double bg_a             # closed chains, Baumgarte stabilisation: 2 alpha
    double bg_b             # ... and beta^2 (both 0: none)


cdef inline int rollout_scratch(int nq, int nv, int m) noexcept nogil:
    return 3 * nq + 15 * nv + 3 * m + 12


cdef inline void reference_at(const RollC* r, int width, double t, double* out) noexcept nogil:
    """Linear interpolation of the reference samples at ``t`` (held at the
    first / last sample outside their range); the same arithmetic as
    ``SampledReference.__call__``."""
    cdef double s = (t - r.ref_t0) / r.ref_dt
    cdef double f
    cdef int i, k
    if r.nref == 1 or s <= 0.0:
        for k in range(width):
            out[k] = r.ref[k]
        return
    if s >= r.nref - 1:
        for k in range(width):
            out[k] = r.ref[(r.nref - 1) * width + k]
        return
    i = <int> s
    f = s - i
    for k in range(width):
        out[k] = (1.0 - f) * r.ref[i * width + k] + f * r.ref[(i + 1) * width + k]


cdef inline void _torques(const ModelC* m, const RollC* r, double t, const double* q,
                          const double* v, const double* tau0, double* tau, double* a, Work* w,
                          double* xs) noexcept nogil:
    """The torques of ``r`` at time ``t`` into ``tau`` (``a`` (nv) and
    ``xs`` (nq + 3 nv) are scratch)."""
    cdef int k, iq
    cdef double* ca
    for k in range(m.nv):
        tau[k] = tau0[k] if tau0 != NULL else 0.0
    if r.ref != NULL:
        # computed torque on vector-space joints (checked by the caller):
        # ca = ddq_r + ckp (q_r - q) + ckd (dq_r - dq);  tau += RNEA(q, dq, ca)
        reference_at(r, m.nq + 2 * m.nv, t, xs)
        ca = xs + m.nq + 2 * m.nv
        for k in range(m.nb):
            for iq in range(m.nvi[k]):
                ca[m.iv[k] + iq] = (xs[m.nq + m.nv + m.iv[k] + iq]
                                    + r.ckp[m.iv[k] + iq] * (xs[m.iq[k] + iq] - q[m.iq[k] + iq])
                                    + r.ckd[m.iv[k] + iq] * (xs[m.nq + m.iv[k] + iq] - v[m.iv[k] + iq]))
        rnea(m, q, v, ca, NULL, True, a, w)
        for k in range(m.nv):
            tau[k] += a[k]
    if r.gravity_comp:
        rnea(m, q, NULL, NULL, NULL, True, a, w)
        for k in range(m.nv):
            tau[k] += a[k]
    if r.kp != NULL:
        # vector-space joints only (checked by the caller): q and v indices align
        for k in range(m.nb):
            for iq in range(m.nvi[k]):
                tau[m.iv[k] + iq] += (r.kp[m.iv[k] + iq] * (r.q_target[m.iq[k] + iq] - q[m.iq[k] + iq])
                                      + r.kd[m.iv[k] + iq] * (r.dq_target[m.iv[k] + iq] - v[m.iv[k] + iq]))


cdef inline int _accel(const ModelC* m, const ClosC* c, const RollC* r, double t, const double* q,
                       const double* v, const double* tau0, double* tau, double* a,
                       double* lam, Work* w, CWork* cw, double* xs) noexcept nogil:
    """``a = ddq(q, v)`` at time ``t`` with the torques of ``r`` (``tau``
    and ``xs`` (nq + 3 nv) are scratch)."""
    cdef double info[2]
    _torques(m, r, t, q, v, tau0, tau, a, w, xs)
    if c == NULL:
        return hybrid(m, q, v, a, tau, NULL, NULL, w)
    # Baumgarte: the routes solve A ddq = -(dA dq + 2 alpha A v + beta^2 g)
    # (closure_rows stabilises the bias)
    cw.bg_a = r.bg_a
    cw.bg_b = r.bg_b
    cw.bdq = v
    if r.route == 1:
        return closed_forward_dense(m, c, q, v, a, tau, NULL, lam, info, w, cw, False)
    if r.route == 2:
        return closed_forward_projection(m, c, q, v, a, tau, NULL, NULL, lam, info, w, cw)
    if r.route == 3:
        return maximal_dynamics(m, c, q, v, a, tau, NULL, lam, info, w, cw)
    return closed_dynamics(m, c, q, v, a, tau, NULL, NULL, lam, info, w, cw)


cdef inline void euler_step(const ModelC* m, double h, double* q, double* v, const double* a,
                            double* qs) noexcept nogil:
    # semi-implicit Euler: v += h a, then q <- q exp(h v)   (qs: scratch)
    cdef int i
    for i in range(m.nv):
        v[i] += h * a[i]
    integrate_config(m, q, v, h, qs)
    for i in range(m.nq):
        q[i] = qs[i]


cdef inline void rk4_stage(const ModelC* m, int stage, double h, const double* q, const double* v,
                           const double* a, double* vs, double* th, double* d, double* qs) noexcept nogil:
    """From stage ``stage`` (1, 2, 3, with acceleration ``a`` at velocity
    ``vs``, ``v`` for stage 1) to the next one's state ``qs``, ``vs``;
    ``d`` sums the stage velocities with RK4's weights."""
    cdef int i
    cdef double c = 1.0 if stage == 3 else 0.5
    for i in range(m.nv):
        th[i] = c * h * (v[i] if stage == 1 else vs[i])
        vs[i] = v[i] + c * h * a[i]
        if stage == 1:
            d[i] = v[i] + 2.0 * vs[i]
        elif stage == 2:
            d[i] += 2.0 * vs[i]
        else:
            d[i] += vs[i]
    integrate_config(m, q, th, 1.0, qs)


cdef inline void rk4_finish(const ModelC* m, double h, double* q, double* v, const double* a1,
                            const double* a2, const double* a3, const double* a4, double* th,
                            const double* d, double* qs) noexcept nogil:
    # the RK4 step from the stages' velocities (d) and accelerations
    cdef int i
    for i in range(m.nv):
        th[i] = (h / 6.0) * d[i]
        v[i] += (h / 6.0) * (a1[i] + 2.0 * a2[i] + 2.0 * a3[i] + a4[i])
    integrate_config(m, q, th, 1.0, qs)
    for i in range(m.nq):
        q[i] = qs[i]


cdef inline void _record_frame(const double* q, const double* v, double* Qr, double* Vr, int nq,
                               int nv) noexcept nogil:
    # one recorded frame's q and v
    cdef int i
    for i in range(nq):
        Qr[i] = q[i]
    for i in range(nv):
        Vr[i] = v[i]


cdef inline int rollout(const ModelC* m, const ClosC* c, const RollC* r, const double* q0,
                        const double* v0, const double* tau0, double* Q, double* V, double* L,
                        double* tmax, Work* w, CWork* cw, double* scr) noexcept nogil:
    """Integrate one state for ``r.nsteps`` steps, writing the recorded
    frames to Q (nrec, nq), V (nrec, nv) and L (nrec, m) (L may be NULL).
    ``tmax[0]`` gets the largest |g| seen before projection (closed chains),
    ``tmax[1]`` the number of Gauss-Newton iterations of the projections
    after the steps.
    Returns 0 or the first non-zero status of a kernel (-5: the state
    became non-finite).

    The running maximum stays in this thread's own memory and ``tmax`` is
    written once: the states of a batch have neighbouring ``tmax`` entries,
    on one cache line, and writing them every step from two threads made
    the line move between the cores."""
    cdef double tm[2]
    cdef int st
    tm[0] = 0.0
    tm[1] = 0.0
    st = _rollout_steps(m, c, r, q0, v0, tau0, Q, V, L, tm, w, cw, scr)
    tmax[0] = tm[0]
    tmax[1] = tm[1]
    return st


cdef inline int _rollout_steps(const ModelC* m, const ClosC* c, const RollC* r, const double* q0,
                               const double* v0, const double* tau0, double* Q, double* V, double* L,
                               double* tmax, Work* w, CWork* cw, double* scr) noexcept nogil:
    # rollout's steps (``tmax``: the caller's local running maximum and
    # Gauss-Newton count)
    cdef int nq = m.nq, nv = m.nv, nr = 0 if c == NULL else c.m
    cdef int k, s, st, rec = 0, i
    cdef double h, err
    cdef double* q = scr
    cdef double* qs = q + nq
    cdef double* v = qs + nq
    cdef double* a1 = v + nv
    cdef double* a2 = a1 + nv
    cdef double* a3 = a2 + nv
    cdef double* a4 = a3 + nv
    cdef double* vs = a4 + nv
    cdef double* th = vs + nv
    cdef double* tau = th + nv
    cdef double* d = tau + nv
    cdef double* y = d + nv
    cdef double* gg = y + nv + nr + 2
    cdef double* lam = gg + nr + 2
    cdef double* xs = lam + nr + 2                  # nq + 3 nv: the reference sample, commanded ddq
    cdef double t
    tmax[0] = 0.0
    tmax[1] = 0.0
    w.poses_ok = False           # (a previous state's projection may have left it set)
    for i in range(nq):
        q[i] = q0[i]
    for i in range(nv):
        v[i] = v0[i]
    if c != NULL and r.project and ((r.route == 1 and c.cfm == 0.0) or r.route == 2):
        return _rollout_steps_fused(m, c, r, tau0, Q, V, L, tmax, w, cw, q, qs, v, a1, a2, a3, a4,
                                    vs, th, tau, d, y, gg, lam, xs)
    if c != NULL and r.project and r.project_start:
        st = project(m, c, r.tol, q, v, qs, gg, y, d, w, cw, NULL)
        if st != 0:
            return st
        w.poses_ok = True
    for k in range(r.nsteps + 1):
        t = (r.k0 + k) * r.dt            # as the Python loop counts time
        if k % r.record_every == 0 or k == r.nsteps:
            _record_frame(q, v, Q + rec * nq, V + rec * nv, nq, nv)
            if L != NULL:
                st = _accel(m, c, r, t, q, v, tau0, tau, a1, L + rec * nr, w, cw, xs)
                if st != 0:
                    return st
            rec += 1
        if k == r.nsteps:
            break
        h = r.dt if k < r.nsteps - 1 else r.last_dt
        st = _accel(m, c, r, t, q, v, tau0, tau, a1, lam, w, cw, xs)
        if st != 0:
            return st
        st = _advance(m, c, r, t, h, q, v, a1, a2, a3, a4, vs, th, d, qs, tau0, tau, lam, w, cw, xs)
        if st != 0:
            return st
        if c != NULL and r.project:
            # the projection's first rows give max |g| before it
            cw.hold = r.route != 3
            st = project(m, c, r.tol, q, v, qs, gg, y, d, w, cw, tmax, h)
            cw.hold = False
            if st != 0:
                return st
            w.poses_ok = True      # its last rows were at q: the next dynamics keeps its poses
        elif c != NULL:
            st = constraint_rows(m, c, q, NULL, gg, NULL, NULL, w, cw, ROWS_POSE)
            if st != 0:
                return st
            err = max_abs(gg, nr)
            if err > tmax[0]:
                tmax[0] = err
    w.poses_ok = False
    return 0


cdef inline int _advance(const ModelC* m, const ClosC* c, const RollC* r, double t, double h,
                         double* q, double* v, double* a1, double* a2, double* a3, double* a4,
                         double* vs, double* th, double* d, double* qs, const double* tau0,
                         double* tau, double* lam, Work* w, CWork* cw, double* xs) noexcept nogil:
    """One step of the integrator from ``(q, v)`` with ``a1 = ddq(q, v)``
    (-5: the state became non-finite)."""
    cdef int s, st, i
    cdef bint hold = c != NULL and r.route != 3
    if hold and (r.integrator != 0 or r.project):
        # the rows a1's solve found dependent, held so at the stages and in
        # the projection after the step: their states are slightly off the
        # rows, where a row redundant on them may not be, and its
        # multiplier (or Gauss-Newton step) would carry it (_psd.pxd's
        # psd_factor)
        st = hold_rows(m, c, q, w, cw)
        if st != 0:
            return st
    if r.integrator == 0:
        euler_step(m, h, q, v, a1, qs)
    else:
        # stages 2, 3, 4 at q exp(c h v_s), v + c h a_s (a_s follow a1 in scr)
        cw.hold = hold
        for s in range(1, 4):
            rk4_stage(m, s, h, q, v, a1 + (s - 1) * m.nv, vs, th, d, qs)
            st = _accel(m, c, r, t + (h if s == 3 else 0.5 * h), qs, vs, tau0, tau, a1 + s * m.nv,
                        lam, w, cw, xs)
            if st != 0:
                cw.hold = False
                return st
        cw.hold = False
        rk4_finish(m, h, q, v, a1, a2, a3, a4, th, d, qs)
    for i in range(m.nq):
        if not (fabs(q[i]) < 1e300):
            return -5
    for i in range(m.nv):
        if not (fabs(v[i]) < 1e300):
            return -5
    return 0


cdef inline int _phase_q(const ModelC* m, const ClosC* c, int route, const double* q, Work* w,
                         CWork* cw, int* p) noexcept nogil:
    # the route's q-phase at q; p: its three numbers for the other phases
    if route == 1:
        return dense_qphase(m, c, q, NULL, w, cw, &p[0], &p[1], &p[2])
    return projection_qphase(m, c, q, NULL, w, cw, &p[0], &p[1], &p[2])


cdef inline int _phase_v(const ModelC* m, const ClosC* c, int route, const double* q,
                         const double* v, double* a, double* tau, double* lam, Work* w, CWork* cw,
                         const int* p) noexcept nogil:
    # the route's v-phase after _phase_q at q: a = ddq(q, v), lam
    cdef double info[2]
    if route == 1:
        return dense_vphase(m, c, q, v, a, tau, NULL, NULL, lam, info, w, cw, p[0], p[1], p[2], False,
                            False)
    return projection_vphase(m, c, q, v, a, tau, NULL, NULL, lam, info, w, cw, p[0], p[1], p[2], False,
                             False)


cdef inline int _rollout_steps_fused(const ModelC* m, const ClosC* c, const RollC* r,
                                     const double* tau0, double* Q, double* V, double* L,
                                     double* tmax, Work* w, CWork* cw, double* q, double* qs,
                                     double* v, double* a1, double* a2, double* a3, double* a4,
                                     double* vs, double* th, double* tau, double* d, double* y,
                                     double* gg, double* lam, double* xs) noexcept nogil:
    """The steps of a projected rollout on the dense route with hard rows
    or the projection route, the velocity projection folded into the next
    solve.  After a step, Gauss-Newton's first iteration (its rows give
    max |g| before the projection); then at the new ``q`` the route's
    q-phase factorises what depends on ``q`` alone (``dense_qphase``:
    ``M`` and ``K``; ``projection_qphase``: ``M``, the QR of ``A^T`` and
    ``G^T M G``), its residual tests convergence (another iteration while
    it is above ``r.tol``, at most eight in all, as ``_manifold.project``),
    the velocity is projected with its factors and the v-phase gives the
    step's (and the recorded frame's) accelerations and multipliers at the
    projected state.  On the sparse route (``c.sp``) Gauss-Newton's steps
    are the route's own solves with the unit mass matrix
    (``sparse_gauss_newton``): no dense ``A``."""
    cdef int nq = m.nq, nv = m.nv, nr = c.m
    cdef int k, st, rec = 0, i, it, it0
    cdef bint sparse = c.sp != NULL
    cdef int p[3]
    cdef double h, err, t
    cdef bint pending = r.project_start
    cdef bint chord = False          # (dense route) cw.Bd holds A at an earlier q of this projection
    # the rows' A of Gauss-Newton's first iteration: kept for the dense
    # route's chord steps; the projection route's q-phase has its own A
    cdef double* A1 = cw.Bd if r.route == 1 else cw.Ad
    cdef double* An
    it0 = 0
    for k in range(r.nsteps + 1):
        t = (r.k0 + k) * r.dt            # as the Python loop counts time
        for it in range(it0, 9):
            st = _phase_q(m, c, r.route, q, w, cw, p)
            if st != 0:
                return st
            if not pending:
                break
            err = max_abs(cw.g, nr)
            if err <= r.tol or it == 8:
                break
            if k > 0:
                tmax[1] += 1.0           # (after a step: the projection's second or later iteration)
            if sparse:
                # the rows here again, with the unit mass matrix: a full step
                cw.hold = k > 0          # (the start's rows held, after a step)
                st = sparse_gauss_newton(m, c, r.tol, q, qs, d, w, cw, &err)
                cw.hold = False
                if st != 0:
                    return st
                continue
            if r.route == 2:
                An = cw.Ad               # A here, from the q-phase (a full Gauss-Newton step)
            elif not chord or err > 1e-9:
                # A here (a full Gauss-Newton step)
                st = constraint_rows(m, c, q, NULL, gg, cw.Bd, NULL, w, cw, ROWS_POSE)
                if st != 0:
                    return st
                chord = True
                An = cw.Bd
            else:
                # a chord step: A where it was last evaluated, g here (near
                # the rows, where it converges as fast as a fresh A would)
                An = cw.Bd
            cw.hold = k > 0
            gauss_newton_step(m, c, q, qs, cw.g, An, y, d, w, cw)
            cw.hold = False
        if pending:
            if r.route == 1:
                st = fused_velocity_projection(m, c, v, w, cw, p[0], p[1])
                if st != 0:
                    return st
            else:
                null_space_velocity_projection(m, v, cw, p[1], p[2])
        # (torques by RNEA leave the transforms and CRBA's data as they are)
        _torques(m, r, t, q, v, tau0, tau, a1, w, xs)
        cw.bg_a = 0.0
        cw.bg_b = 0.0
        cw.bdq = v
        st = _phase_v(m, c, r.route, q, v, a1, tau, lam, w, cw, p)
        if st != 0:
            return st
        if k % r.record_every == 0 or k == r.nsteps:
            _record_frame(q, v, Q + rec * nq, V + rec * nv, nq, nv)
            if L != NULL:
                for i in range(nr):
                    L[rec * nr + i] = lam[i]
            rec += 1
        if k == r.nsteps:
            break
        h = r.dt if k < r.nsteps - 1 else r.last_dt
        st = _advance(m, c, r, t, h, q, v, a1, a2, a3, a4, vs, th, d, qs, tau0, tau, lam, w, cw, xs)
        if st != 0:
            return st
        # Gauss-Newton's first iteration (the rows held at the step's start
        # held here too)
        if sparse:
            cw.hold = True
            st = sparse_gauss_newton(m, c, r.tol, q, qs, d, w, cw, &err, h, v)
            cw.hold = False
            if st != 0:
                return st
            if err > tmax[0]:
                tmax[0] = err
            if err > r.tol:
                tmax[1] += 1.0
            pending = True
            it0 = 1
            continue
        st = constraint_rows(m, c, q, NULL, gg, A1, NULL, w, cw, ROWS_POSE)
        if st != 0:
            return st
        err = max_abs(gg, nr)
        if err > tmax[0]:
            tmax[0] = err
        w.poses_ok = True
        chord = True
        if err > r.tol:
            tmax[1] += 1.0
            cw.hold = True
            st = gauss_newton_step(m, c, q, qs, gg, A1, y, d, w, cw, drift_curvature(err, h, v, nv),
                                   r.tol)
            cw.hold = False
            if st != 0:
                return st
        pending = True
        it0 = 1
    w.poses_ok = False
    return 0


cdef inline int rollout_lanes_scratch(int nq, int nv) noexcept nogil:
    return LANES * (2 * nq + 10 * nv) + nq + 3 * nv + 4


cdef inline int _accel_lanes(const ModelC* m, const RollC* r, double t, const double* q,
                             const double* v, const double* tau0, double* tau, double* a,
                             Work* w, Lanes* lw, double* xs) noexcept nogil:
    """``_accel`` of a tree on ``LANES`` states (rows of ``q`` (LANES, nq),
    ``v``, ``tau``, ``a`` (LANES, nv); ``tau0`` lane l at ``tau0 + l nv``
    or NULL): each lane's torques, then ``hybrid_lanes``."""
    cdef int l
    cdef const double* t0 = NULL
    for l in range(LANES):
        if tau0 != NULL:
            t0 = tau0 + l * m.nv
        _torques(m, r, t, q + l * m.nq, v + l * m.nv, t0, tau + l * m.nv, a + l * m.nv, w, xs)
    return hybrid_lanes(m, q, v, a, tau, m.nv, NULL, NULL, lw)


cdef inline int rollout_lanes(const ModelC* m, const RollC* r, const double* q0, const double* v0,
                              const double* tau0, double* Q, double* V, Work* w, Lanes* lw,
                              double* scr) noexcept nogil:
    """``rollout`` of a tree on ``LANES`` states at once: lane l starts at
    ``q0 + l nq``, ``v0 + l nv`` (``v0``, ``tau0`` may be NULL: zero) and
    records into ``Q + l nrec nq``, ``V + l nrec nv``.  Each step's
    accelerations come from ``hybrid_lanes``; the torques and the integrator
    (``euler_step``, ``rk4_stage``, ``rk4_finish``) run lane by lane: each
    lane's frames equal ``rollout``'s bit for bit.  Returns 0, or non-zero
    if some lane failed (a singular joint inertia, a non-finite state): the
    caller then runs the four states one by one for their statuses."""
    cdef int nq = m.nq, nv = m.nv
    cdef int k, l, i, s, st, rec = 0
    cdef double h, t
    cdef double* q = scr
    cdef double* qs = q + LANES * nq
    cdef double* v = qs + LANES * nq
    cdef double* a1 = v + LANES * nv
    cdef double* a2 = a1 + LANES * nv
    cdef double* a3 = a2 + LANES * nv
    cdef double* a4 = a3 + LANES * nv
    cdef double* vs = a4 + LANES * nv
    cdef double* th = vs + LANES * nv
    cdef double* tau = th + LANES * nv
    cdef double* d = tau + LANES * nv
    cdef double* xs = d + LANES * nv                 # nq + 3 nv, one lane at a time
    for l in range(LANES):
        for i in range(nq):
            q[l * nq + i] = q0[l * nq + i]
        for i in range(nv):
            v[l * nv + i] = v0[l * nv + i] if v0 != NULL else 0.0
    for k in range(r.nsteps + 1):
        t = (r.k0 + k) * r.dt
        if k % r.record_every == 0 or k == r.nsteps:
            for l in range(LANES):
                for i in range(nq):
                    Q[(l * r.nrec + rec) * nq + i] = q[l * nq + i]
                if V != NULL:
                    for i in range(nv):
                        V[(l * r.nrec + rec) * nv + i] = v[l * nv + i]
            rec += 1
        if k == r.nsteps:
            break
        h = r.dt if k < r.nsteps - 1 else r.last_dt
        st = _accel_lanes(m, r, t, q, v, tau0, tau, a1, w, lw, xs)
        if st != 0:
            return st
        if r.integrator == 0:
            for l in range(LANES):
                euler_step(m, h, q + l * nq, v + l * nv, a1 + l * nv, qs + l * nq)
        else:
            # as rollout's stages, each lane's stage step, then the four lanes' dynamics
            for s in range(1, 4):
                for l in range(LANES):
                    rk4_stage(m, s, h, q + l * nq, v + l * nv, a1 + (s - 1) * LANES * nv + l * nv,
                              vs + l * nv, th + l * nv, d + l * nv, qs + l * nq)
                st = _accel_lanes(m, r, t + (h if s == 3 else 0.5 * h), qs, vs, tau0, tau,
                                  a1 + s * LANES * nv, w, lw, xs)
                if st != 0:
                    return st
            for l in range(LANES):
                rk4_finish(m, h, q + l * nq, v + l * nv, a1 + l * nv, a2 + l * nv, a3 + l * nv,
                           a4 + l * nv, th + l * nv, d + l * nv, qs + l * nq)
        for i in range(LANES * nq):
            if not (fabs(q[i]) < 1e300):
                return -5
        for i in range(LANES * nv):
            if not (fabs(v[i]) < 1e300):
                return -5
    return 0

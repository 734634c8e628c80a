"""The rollout loop of a :class:`gear.MaximalModel`: body poses and twists
advanced by :meth:`gear.MaximalModel.step` (the native kernel of
:mod:`gear.maximal.native` where it covers the model, else
:func:`gear.maximal.stepping.step`), recorded with their joint
coordinates read back (:meth:`gear.MaximalModel.to_reduced`) and the
largest row violation of every frame.
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from .._progress import progress_bar
from ..maximal import stepping
from ..maximal.model import batch_input
from ..maximal.native import why_not
from .integrators import _project
from .recorder import Trajectory
from .rollout import steps_and_frames

__all__ = ["run_maximal"]


def _closed_start(sys, q, dq, dt):
    """Joint coordinates ``q`` (N, nq) closed in joint space, positions
    only, as a reduced run of ``sys`` closes its start: natively where the
    system takes the kkt solver's sparse route (Gauss-Newton by the route's
    own solves, linear in the loops: the start frame of a one-step native
    run), else by Gauss-Newton on the dense rows
    (``integrators._project``, whose pseudo-inverse of ``A`` takes seconds
    on a thousand loops)."""
    from ..solvers.kkt import KKTSolver
    from . import simulate

    if type(sys.solver) is KKTSolver and sys.solver.route == "sparse":
        tr = simulate(sys, q, dq, dt, dt, integrator="euler", stabilization="projection", progress=False)
        if tr.stats.get("native"):
            return np.asarray(tr.q)[:, 0]             # (q: a batch, its trajectory (N, T, nq))
    return _project(sys, q, dq, velocities=False)[0]


def _angle_coordinates(model):
    """The configuration coordinates that are angles, and their velocity
    coordinates: two index arrays."""
    from .. import joints as JT

    qi, vi = [], []
    for i, j in enumerate(model.joints):
        a, b = model._iq[i], model._iv[i]
        if j.kind in (JT.REVOLUTE, JT.HELICAL, JT.CYLINDRICAL):
            qi.append(a), vi.append(b)
        elif j.kind == JT.UNIVERSAL:
            qi += [a, a + 1]
            vi += [b, b + 1]
        elif j.kind == JT.PLANAR:
            qi.append(a + 2), vi.append(b + 2)
    return np.array(qi, dtype=int), np.array(vi, dtype=int)


def _continue_angles(th, w, t):
    """Angles (N, T, k) read back in (-pi, pi], continued along the frames:
    each frame takes the turn nearest to the previous frame advanced by
    the trapezoid of the two frames' rates (so frames far apart keep their
    whole turns)."""
    # out_k = th_k + 2 pi n_k with n_k = n_{k-1} + round((th_{k-1} + step_k - th_k) / 2 pi):
    # the whole turns of each frame are a running sum of the turns between frames
    if th.shape[1] < 2:
        return th.copy()
    dt = np.diff(t).reshape((1, -1) + (1,) * (th.ndim - 2))
    step = 0.5 * dt * (w[:, :-1] + w[:, 1:])
    turns = np.round((th[:, :-1] + step - th[:, 1:]) / (2.0 * np.pi))
    out = th.copy()
    out[:, 1:] += 2.0 * np.pi * np.cumsum(turns, axis=1)
    return out


def _inputs(mx, N, tau, f_ext):
    def one(name, x, shape):
        if callable(x):
            raise TypeError(f"{name}: a maximal-coordinate run takes a constant array (shape {shape} or "
                            f"(N, {', '.join(map(str, shape))})), not a callable")
        return batch_input(name, x, shape, N)
    return one("tau", tau, (mx.model.nv,)), one("f_ext", f_ext, (mx.nbodies, 6))


def check_args(mx, t_final, dt, integrator, stabilization, record_every, baumgarte_gains):
    """Check a maximal run's settings.

    Returns
    -------
    beta : float or None
        The velocity-level Baumgarte factor (``euler``/``implicit``).
    gains : (float, float) or None
        The acceleration-level Baumgarte gains (``rk4``/``rkmk4``).
    """
    if not dt > 0.0 or not t_final > 0.0:
        raise ValueError(f"dt and t_final must be positive, got dt = {dt}, t_final = {t_final}")
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise ValueError(f"record_every must be a positive integer, got {record_every!r}")
    if integrator not in stepping.INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r} for a MaximalModel; choose one of "
                         f"{list(stepping.INTEGRATORS)}")
    if stabilization not in stepping.STABILIZATIONS:
        raise ValueError(f"stabilization must be 'projection', 'baumgarte' or None, got {stabilization!r}")
    if baumgarte_gains is None:
        return None, None
    if integrator in ("euler", "implicit"):
        # velocity level: one factor beta (J V+ = -(beta / dt) g)
        if np.ndim(baumgarte_gains) != 0 or not 0.0 < float(baumgarte_gains) <= 1.0:
            raise ValueError("baumgarte_gains of a velocity-level maximal run (euler, implicit) is one number "
                             f"beta in (0, 1], got {baumgarte_gains!r}")
        return float(baumgarte_gains), None
    g = np.asarray(baumgarte_gains, dtype=float) if np.ndim(baumgarte_gains) == 1 else None
    if g is None or g.shape != (2,) or not np.isfinite(g).all() or (g < 0).any():
        raise ValueError("baumgarte_gains of an acceleration-level maximal run (rk4, rkmk4) is two non-negative "
                         f"numbers (alpha, beta), got {baumgarte_gains!r}")
    return None, (float(g[0]), float(g[1]))


#: Gauss-Newton steps allowed for the start's projection (a start may be far
#: off its rows; the steps' projections take 10)
START_ITER = 50


def batch_start(mx, q0, dq0, poses0=None, twists0=None):
    """The batch's initial states, checked: ``(kind, A, B, single)`` with
    ``kind`` ``"q0"`` (``A``, ``B`` the joint-space states, shapes (N, nq),
    (N, nv)) or ``"poses0"`` (the poses (N, nb, 4, 4) and twists
    (N, nb, 6)); ``single``: one state, given without the batch axis."""
    if poses0 is not None:
        P, V, _, _, single = mx._check_poses(poses0, twists0 if twists0 is not None
                                             else np.zeros(np.shape(poses0)[:-2] + (6,)))
        return "poses0", np.array(P, order="C"), np.array(V, order="C"), single
    if q0 is None:
        raise TypeError("give q0 (and dq0), or poses0= (and twists0=)")
    q = np.asarray(q0, dtype=float)
    single = q.ndim == 1
    mx.model.check_configuration(q, "q0")
    dq = np.zeros(mx.model.nv) if dq0 is None else np.asarray(dq0, dtype=float)
    if single and dq.ndim == 2:
        raise ValueError("dq0 is a batch but q0 is one state")
    qb = q[None] if single else q
    if dq.shape[-1:] != (mx.model.nv,) or dq.ndim > 2 or (dq.ndim == 2 and dq.shape[0] != qb.shape[0]):
        raise ValueError(f"dq0 must have shape ({mx.model.nv},) or ({qb.shape[0]}, {mx.model.nv}), "
                         f"got shape {dq.shape}")
    dqb = np.broadcast_to(dq, (qb.shape[0], mx.model.nv))
    return "q0", np.array(qb, order="C"), np.array(dqb, order="C"), single


def _blown_up(k, t):
    return FloatingPointError(f"the maximal-coordinate state became non-finite in step {k} (t = {t:g}); "
                              "reduce dt, or use integrator='implicit' for stiff compliant rows")


def _python_loop(mx, P, V, n, rec_steps, t_final, dt, integrator, tau, f_ext, stab, beta, gains, out, tt, bar):
    """Step by step through :meth:`gear.MaximalModel.step` (any integrator)."""
    k_rec, t, lam = 0, 0.0, None
    for k in range(n + 1):
        if k == rec_steps[k_rec]:
            out["P"][:, k_rec], out["V"][:, k_rec] = P, V
            if lam is not None:
                out["lam"][:, k_rec] = lam
            tt[k_rec] = t
            k_rec += 1
        if k == n:
            break
        h = dt if k < n - 1 else t_final - (n - 1) * dt
        P, V, lam = mx.step(P, V, h, integrator, tau, f_ext, stab, beta, gains)
        if stab == "projection" and np.isfinite(P).all():
            P, V, _ = mx.project(P, V)
        if not (np.isfinite(P).all() and np.isfinite(V).all()):
            raise _blown_up(k + 1, t)
        t = t_final if k == n - 1 else (k + 1) * dt
        bar.update(1)


def _native_loop(mx, P, V, n, rec_steps, t_final, dt, integrator, tau, f_ext, stab, beta, gains, out, tt, bar):
    """The steps in native segments (:func:`gear.maximal.native.native_run`,
    a few hundred recorded frames each, for the progress bar), the last
    one shortened to land on ``t_final`` through :meth:`MaximalModel.step`."""
    from ..maximal.native import native_run

    every = rec_steps[1] - rec_steps[0] if len(rec_steps) > 1 else 1
    last = t_final - (n - 1) * dt
    full = n if abs(last - dt) <= 1e-12 * dt else n - 1          # steps of exactly dt
    seg = 256 * every
    rec = np.asarray(rec_steps)
    k0 = 0
    while True:
        steps = min(seg, full - k0)
        # frames at k0, k0 + every, ..., and k0 + steps (always kept by native_run),
        # the run's among them (k0's was the previous segment's last)
        ks = k0 + np.unique(np.r_[np.arange(0, steps + 1, every), steps])
        keep = np.isin(ks, rec) & ((ks > k0) | (k0 == 0))
        at = np.searchsorted(rec, ks[keep])
        # recorded straight into the run's frames when they all are its
        # (all but a last segment that stops short of a frame); k0's keeps
        # its row forces
        direct = bool(np.isin(ks, rec).all())
        views = None
        if direct:
            a0 = int(np.searchsorted(rec, k0))
            views = tuple(out[key][:, a0:a0 + len(ks)] for key in ("P", "V", "lam", "err"))
            lam0 = out["lam"][:, a0].copy() if k0 > 0 else None
        try:
            Ps, Vs, Ls, Es = native_run(mx, P, V, dt, steps, every, tau, f_ext, stab, beta, integrator, gains,
                                        joint_error=True, out=views)
        except FloatingPointError:
            raise _blown_up(k0 + 1, k0 * dt) from None
        if not direct:
            js = np.flatnonzero(keep)
            for key, A in (("P", Ps), ("V", Vs), ("lam", Ls), ("err", Es)):
                out[key][:, at] = A[:, js]
        elif lam0 is not None:
            out["lam"][:, a0] = lam0
        tt[at] = np.where(ks[keep] == n, t_final, ks[keep] * dt)
        P, V = np.ascontiguousarray(Ps[:, -1]), np.ascontiguousarray(Vs[:, -1])
        k0 += steps
        bar.update(steps)
        if k0 >= full:
            break
    if full < n:                                   # the shortened last step
        P, V, lam = mx.step(P, V, last, integrator, tau, f_ext, stab, beta, gains)
        if stab == "projection" and np.isfinite(P).all():
            P, V, _ = mx.project(P, V)
        if not (np.isfinite(P).all() and np.isfinite(V).all()):
            raise _blown_up(n, (n - 1) * dt)
        # (the last frame, step n; its joint error is evaluated after the run)
        out["P"][:, -1], out["V"][:, -1], out["lam"][:, -1] = P, V, lam
        tt[-1] = t_final
        bar.update(1)


def _joint_error(mx, frames, native):
    """max |g| over the rows of each frame (nf, nb, 4, 4): natively where the
    kernel covers the model (``residual_max`` of ``gear/maximal/_native.pyx``,
    the same rows), else by :meth:`MaximalModel.evaluate`."""
    if native and mx.nrows:
        from ..algorithms.dynamics import get_num_threads
        from ..maximal.native import _native, plan

        nf = frames.shape[0]
        err = np.empty(nf)
        status = np.zeros(nf, dtype=np.int32)
        _native.residual_max(plan(mx), np.ascontiguousarray(frames).reshape(nf, -1), err, status,
                             get_num_threads())
        if not status.any():
            return err
    return np.abs(mx.evaluate(frames, rows=False)["g"]).max(axis=-1, initial=0.0)


def _route(mx, native):
    """How the run's steps solved their rows: the native plan's route
    (``"tree"``, ``"sparse"`` or ``"dense"``; :func:`gear.maximal.native.use_route`),
    ``"numpy"`` off the native kernel, or None without rows."""
    if not mx.nrows:
        return None
    if not native:
        return "numpy"
    from ..maximal.native import plan

    return plan(mx).route


def run_maximal(mx, q0, dq0, t_final, dt, integrator="euler", tau=None, f_ext=None,
                stabilization="projection", record_every=1, progress=None, baumgarte_gains=None,
                poses0=None, twists0=None, beta=None, bar=None):
    """Simulate a :class:`gear.MaximalModel` (see :func:`gear.simulate`).

    Every campaign chunk of a maximal run (``out=``, ``client=``) is one
    call of this function on the chunk's states.

    Parameters
    ----------
    bar : progress bar, optional
        Receives the steps and is left open (a campaign's bar over its
        chunks); default: a bar of its own, per ``progress``.

    Returns
    -------
    Trajectory
        ``t``, ``q``, ``dq`` (read back with ``to_reduced``), ``lam``
        (row forces), ``poses`` (T, nb, 4, 4) / (N, T, nb, 4, 4),
        ``twists``, ``joint_error`` (T,) / (N, T): the largest ``|g|``
        of every frame, and ``stats`` (``max_joint_error``, ``native``,
        ``route``...).
    """
    b, baumgarte_gains = check_args(mx, t_final, dt, integrator, stabilization, record_every, baumgarte_gains)
    beta = b if b is not None else beta
    kind, A, B, single = batch_start(mx, q0, dq0, poses0, twists0)
    stab = None if mx.compliant else stabilization
    if kind == "poses0":
        P, V = A.copy(), B.copy()
    else:
        if stab == "projection" and mx.sys.constraints:
            # a start whose loops (or URDF mimic joints) are open is closed in
            # joint space first, as the reduced runs close theirs: both
            # formulations then start from one state, and the maximal
            # projection below only meets rounding.  Positions only: the
            # maximal projection's twists onto J V = 0 in the mass metric
            # are the joint-space velocity projection, in linear time (the
            # joint-space one forms M and K dense: 11 s at N = 1000 on the
            # N-four-bar's chain tree, where the run's steps take 50 ms)
            A = _closed_start(mx.sys, A, B, dt)
        P, V = mx.state(A, B)
        P, V = np.ascontiguousarray(P), np.ascontiguousarray(V)
    N = P.shape[0]
    tau, f_ext = _inputs(mx, N, tau, f_ext)
    n, rec_steps = steps_and_frames(t_final, dt, record_every)
    T = len(rec_steps)
    nb = mx.nbodies
    # (joint errors: from the native loop's rows, else evaluated after the run)
    out = dict(P=np.empty((N, T, nb, 4, 4)), V=np.empty((N, T, nb, 6)), lam=np.zeros((N, T, mx.nrows)),
               err=np.full((N, T), np.nan))
    tt = np.empty(T)
    if stab == "projection":
        P, V, _ = mx.project(P, V, max_iter=START_ITER)
        left = np.abs(mx.evaluate(P, rows=False)["g"]).max(axis=-1, initial=0.0)
        if (left > 1e-9).any():
            warnings.warn(f"{int((left > 1e-9).sum())} of the {N} starts could not be projected onto their "
                          f"rows (max |g| {left.max():.1e} after {START_ITER} Gauss-Newton steps): their "
                          "poses are too far from any assembly; give poses that hold the joints, or joint "
                          "coordinates (q0), which are closed in joint space first",
                          RuntimeWarning, stacklevel=3)
    own_bar = bar is None
    if own_bar:
        bar = progress_bar(progress, total=n, unit="step", desc=f"gear.simulate maximal {integrator} x{N}")
    wall = time.perf_counter()
    native = why_not(mx, integrator) is None
    loop = _native_loop if native else _python_loop
    try:
        # a state that blows up is reported by the loop, as one error
        with np.errstate(over="ignore", invalid="ignore"):
            loop(mx, P, V, n, rec_steps, t_final, dt, integrator, tau, f_ext, stab, beta, baumgarte_gains,
                 out, tt, bar)
    finally:
        if own_bar:
            bar.close()
    todo = np.flatnonzero(np.isnan(out["err"]).any(axis=0))
    if todo.size:
        out["err"][:, todo] = _joint_error(mx, np.ascontiguousarray(out["P"][:, todo]).reshape(-1, nb, 4, 4),
                                           native).reshape(N, todo.size)
    max_err = float(out["err"].max(initial=0.0))
    wall = time.perf_counter() - wall
    # joint coordinates of the run's own (rigid) states: the native read-back of to_reduced
    q, dq = mx._readback(np.ascontiguousarray(out["P"].reshape((N * T, nb, 4, 4))),
                         np.ascontiguousarray(out["V"].reshape((N * T, nb, 6))))
    q, dq = q.reshape(N, T, -1), dq.reshape(N, T, -1)
    # angles read back lie in (-pi, pi]: continue them along the run, from q0's turn
    qi, vi = _angle_coordinates(mx.model)
    if qi.size:
        q[:, :, qi] = _continue_angles(q[:, :, qi], dq[:, :, vi], tt)
        if kind == "q0":
            q[:, :, qi] += 2.0 * np.pi * np.round((A[:, qi] - q[:, 0, qi]) / (2.0 * np.pi))[:, None, :]
    pick = (lambda x: x[0]) if single else (lambda x: x)
    stats = {"steps": n, "wall_time": wall, "integrator": integrator, "dt": dt, "batch": N,
             "state_steps_per_s": n * N / max(wall, 1e-12), "formulation": "maximal",
             "stabilization": str(stab), "max_joint_error": max_err, "native": native,
             "compliant": mx.compliant, "route": _route(mx, native)}
    tr = Trajectory(tt, pick(q), pick(dq), pick(out["lam"]), stats)
    tr.poses, tr.twists, tr.joint_error = pick(out["P"]), pick(out["V"]), pick(out["err"])
    return tr


# ---------------------------------------------------------------------------
# campaigns: a maximal run chunk by chunk into a store, or gathered
# ---------------------------------------------------------------------------
#: the arrays of a maximal run, as on its :class:`Trajectory`
ARRAYS = ("q", "dq", "lam", "poses", "twists", "joint_error")


def frame_shapes(mx):
    """``{array: shape of one frame}`` of a maximal run's recorded arrays."""
    nb = mx.nbodies
    return {"q": (mx.model.nq,), "dq": (mx.model.nv,), "lam": (mx.nrows,), "poses": (nb, 4, 4),
            "twists": (nb, 6), "joint_error": ()}


def _row_setting(x):
    """A row parameter in a campaign's identity: None (hard rows), one
    number when every row has it, else the hash of the per-row array."""
    from .recorder import _array_id

    if x is None:
        return None
    x = np.asarray(x, dtype=float)
    return float(x[0]) if x.size and (x == x[0]).all() else _array_id(x)


def rows_hash(mx):
    """SHA-256 of a :class:`gear.MaximalModel`'s row table (the rows' types,
    bodies, frames, axes, offsets and pitches)."""
    import hashlib

    t = mx.rows
    h = hashlib.sha256(str(t.m).encode())
    for k in ("types", "ia", "ib", "i", "j", "RA", "pA", "RB", "pB", "offset", "pitch"):
        h.update(k.encode())
        h.update(np.ascontiguousarray(getattr(t, k)).tobytes())
    return h.hexdigest()


def identity_extras(mx, kind):
    """What a maximal run adds to a campaign's identity
    (:func:`gear.simulation.recorder.campaign_identity`'s ``maximal=``):
    the formulation, the rows' hash, their ``stiffness`` and ``damping``
    (None for hard rows) and how the run starts (``"q0"`` or
    ``"poses0"``)."""
    return {"formulation": "maximal", "rows": rows_hash(mx), "stiffness": _row_setting(mx.stiffness),
            "damping": _row_setting(mx.damping), "start": kind}


def prepare_campaign(mx, start, tau, f_ext, out, resume, chunks, slots, t_final, dt, integrator, stabilization,
                     record_every, frames, baumgarte_gains, version):
    """Create a maximal campaign's store at ``out``, or (``resume=True`` and
    a store there) check that it was made by this campaign.

    Parameters
    ----------
    mx : gear.MaximalModel
    start : tuple
        :func:`batch_start`'s answer.
    tau, f_ext : None or ndarray, shape (N, nv), (N, nb, 6)
        Checked and broadcast (:func:`_inputs`).
    out : str
        Checked by :func:`gear._output.claim_store`.
    resume : bool
    chunks : int or None
        Requested number of chunks; None: the store's when resuming, else
        :func:`gear.simulation.recorder.default_rows` for ``slots``, with a
        chunk's whole trajectory (which :func:`run_maximal` holds in
        memory) in the size bound.
    slots : int
        Parallel slots (worker threads; 1 locally).
    t_final, dt, integrator, stabilization, record_every, frames, baumgarte_gains, version
        As for :func:`gear.simulate` (``frames`` is its ``chunk=``).

    Returns
    -------
    gear.simulation.rollout.Campaign
    """
    from .recorder import campaign_identity, campaign_layout, check_identity, create_store, default_rows, model_hash
    from .rollout import Campaign

    beta, gains = check_args(mx, t_final, dt, integrator, stabilization, record_every, baumgarte_gains)
    kind, A, B, single = start
    N = A.shape[0]
    stab = None if mx.compliant else stabilization
    if integrator in ("euler", "implicit"):
        gains_id = [beta if beta is not None else stepping.BAUMGARTE_BETA]
    else:
        gains_id = list(stepping.acceleration_gains(dt, gains))
    n, rec_steps = steps_and_frames(t_final, dt, record_every)
    T = len(rec_steps)
    shapes = frame_shapes(mx)
    out, root, stored, rows, n_chunks = campaign_layout(
        out, resume, chunks, single, N,
        lambda: default_rows(N, T, sum(int(np.prod(s)) for s in shapes.values()), T, slots))
    mh = model_hash(mx.model)
    ident = campaign_identity(mh, A, B, tau, f_ext, None, t_final, dt, integrator, "", str(stab), gains_id,
                              record_every, frames, rows, n_chunks, False, None, None, single, version,
                              maximal=identity_extras(mx, kind))
    if root is not None:
        check_identity(stored, ident, out)
    else:
        meta = {"model_hash": mh, "formulation": "maximal", "integrator": integrator, "dt": dt,
                "t_final": t_final, "steps": n, "record_every": int(record_every), "batch": N,
                "gear_version": version, "stabilization": str(stab), "solver": "", "nq": mx.model.nq,
                "nv": mx.model.nv, "nbodies": mx.nbodies, "nrows": mx.nrows, "compliant": mx.compliant,
                "chunks": n_chunks}
        t = np.array([t_final if k == n else k * dt for k in rec_steps])
        root = create_store(out, meta, ident, shapes, N, T, single, rows, n_chunks, frames, t)
    return Campaign(out=out, store_id=root.attrs.get("campaign_id"), N=N, T=T, single=single, rows=rows,
                    n_chunks=n_chunks, frames=int(frames), nc=None, integrator=integrator, t_final=t_final,
                    dt=dt, record_every=int(record_every), stabilization=stabilization, gains=baumgarte_gains,
                    prescribed=None, native=False, rtol=None, atol=None, steps=n, formulation="maximal",
                    start=kind, effective_stabilization=stab, compliant=mx.compliant)


def run_rows(mx, kind, A, B, tau, f_ext, single, t_final, dt, options, bar=None, rows=None):
    """:func:`run_maximal` on a part of a batch: the states ``A``, ``B``
    (as :func:`batch_start` gives them; ``single``: one state, returned
    without the batch axis), ``options`` the keywords ``integrator``,
    ``stabilization``, ``record_every``, ``baumgarte_gains``.  A state
    that blows up is named by ``rows = (first, N)``: its place in the
    whole batch."""
    pick = (lambda x: None if x is None else x[0]) if single else (lambda x: x)
    start = dict(q0=pick(A), dq0=pick(B)) if kind == "q0" else dict(q0=None, dq0=None, poses0=pick(A),
                                                                      twists0=pick(B))
    try:
        return run_maximal(mx, t_final=t_final, dt=dt, tau=tau, f_ext=f_ext, progress=False, bar=bar,
                           **start, **options)
    except FloatingPointError as exc:
        if rows is None or single:
            raise
        a, total = rows
        raise FloatingPointError(f"{exc} (in one of rollouts {a} to {a + A.shape[0] - 1} of {total})") from None


def _options(camp):
    return dict(integrator=camp.integrator, stabilization=camp.stabilization, record_every=camp.record_every,
                baumgarte_gains=camp.gains)


def run_chunk(mx, A, B, tau, f_ext, camp, c, bar=None):
    """Run chunk ``c`` of a maximal campaign into its store, unless it is
    complete: one :func:`run_maximal` on the chunk's states, its arrays
    written to the chunk's rows, then ``chunk_stats[c]`` (wall time, NaN,
    largest joint error, 0, NaN) and, last, ``done[c] = 1``
    (:func:`gear.simulation.rollout.begin_chunk`, ``finish_chunk``).
    Runs in the process that calls it: a Dask worker, or the local one.

    Parameters
    ----------
    mx : gear.MaximalModel
    A, B : ndarray
        The chunk's initial states (:func:`batch_start`'s ``A``, ``B``).
    tau, f_ext : None or ndarray
        The chunk's rows of the inputs.
    camp : gear.simulation.rollout.Campaign
    c : int
    bar : progress bar, optional

    Returns
    -------
    dict
        ``chunk``, ``ran`` and, when it ran, ``wall_time``.
    """
    from .rollout import begin_chunk, finish_chunk

    root, guard = begin_chunk(camp, c)
    if guard is None:
        return {"chunk": c, "ran": False}
    a, b = camp.rows_of(c)
    tr = run_rows(mx, camp.start, A, B, tau, f_ext, camp.single, camp.t_final, camp.dt, _options(camp), bar=bar,
                  rows=(a, camp.N))
    guard()
    for k in ARRAYS:
        if camp.single:
            root[k][...] = getattr(tr, k)
        else:
            root[k][a:b] = getattr(tr, k)
    st = tr.stats
    finish_chunk(root, guard, c, [st["wall_time"], float("nan"), st["max_joint_error"], 0.0, float("nan")])
    return {"chunk": c, "ran": True, "wall_time": st["wall_time"], "solver_counters": {}}


def run_campaign(camp, mx, start, tau, f_ext, progress):
    """Run a maximal campaign's incomplete chunks one after the other in
    this process (:func:`gear.simulation.rollout.run_chunks_here`).

    Returns
    -------
    Trajectory
        The store's arrays (with ``poses``, ``twists``, ``joint_error``).
    """
    from .rollout import _chunk_input, run_chunks_here

    _, A, B, _ = start

    def call(c, bar):
        a, b = camp.rows_of(c)
        return run_chunk(mx, A[a:b], B[a:b], _chunk_input(tau, a, b), _chunk_input(f_ext, a, b), camp, c, bar=bar)
    return run_chunks_here(camp, call, progress)


def concatenate(parts, single):
    """One :class:`Trajectory` of the parts of a batch, in batch order
    (``stats`` from the first, with the batch-wide ``max_joint_error``)."""
    first = parts[0]
    cat = (lambda k: getattr(first, k)) if single else \
        (lambda k: np.concatenate([getattr(p, k) for p in parts]))
    stats = dict(first.stats)
    stats["max_joint_error"] = max(p.stats["max_joint_error"] for p in parts)
    tr = Trajectory(first.t, cat("q"), cat("dq"), cat("lam"), stats)
    tr.poses, tr.twists, tr.joint_error = cat("poses"), cat("twists"), cat("joint_error")
    return tr

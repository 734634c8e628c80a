"""The rollout loop driver: the native loop (``gear/algorithms/_rollout.pxd``)
when the configuration allows it, else the Python loop over the batched
kernels of :mod:`gear.simulation.integrators`; frames go to a recorder of
:mod:`gear.simulation.recorder`."""
from __future__ import annotations

import re
import time

import numpy as np

from .integrators import _project, _step_adaptive, _step_euler, _step_implicit, _step_rk


# ---------------------------------------------------------------------------
# the native rollout loop (gear/algorithms/_rollout.pxd)
# ---------------------------------------------------------------------------
def _native_plan(S, integrator, native):
    """The arguments of ``_core.rollout`` when the whole loop can run
    natively, else None (the loop then runs in Python over the batched
    kernels).  Native: euler/rk4 (and rkmk4 on vector-space joints, where
    it is rk4), torques None, an array, or a gear.controllers PD /
    GravityCompensation / ComputedTorque with a SampledReference (trees),
    no f_ext; closed chains with the kkt, projection, soft or (built with
    CHOLMOD) maximal solver on LoopClosure/coupler rows and projection or
    no stabilisation, or Baumgarte's (not with the soft solver, whose
    Python path corrects its answer with the hard rows)."""
    from .. import controllers
    from ..joints import FREE, SPHERICAL

    if not native:
        return None
    m = S.model
    lie = any(j.kind in (SPHERICAL, FREE) for j in m.joints)
    if integrator == "rkmk4" and lie:
        return None
    if integrator not in ("euler", "rk4", "rkmk4") or S.f_ext is not None:
        return None
    plan = dict(integrator=0 if integrator == "euler" else 1, tau=None, kp=None, kd=None,
                q_target=None, dq_target=None, gravity_comp=0, cd=None, route=0, project=0,
                ref=None, ref_t0=0.0, ref_dt=1.0, ckp=None, ckd=None, bg_a=0.0, bg_b=0.0)
    tau = S.tau
    if isinstance(tau, controllers.GravityCompensation) and tau.model is m:
        plan["gravity_comp"] = 1
    elif isinstance(tau, controllers.PD) and tau.model is m and not lie:
        plan.update(kp=tau.kp, kd=tau.kd, q_target=tau.q_target, dq_target=tau.dq_target,
                    gravity_comp=int(tau.gravity_compensation))
    elif (isinstance(tau, controllers.ComputedTorque) and tau.model is m and not lie
          and isinstance(tau.reference, controllers.SampledReference)
          and (S.sys is None or not S.sys.nc)):
        ref = tau.reference
        plan.update(ref=ref.samples, ref_t0=ref.t0, ref_dt=ref.dt, ckp=tau.kp, ckd=tau.kd)
    elif callable(tau):
        return None
    else:
        plan["tau"] = tau
    if S.sys is not None and S.sys.nc:
        from ..solvers.kkt import KKTSolver
        from ..solvers.maximal import MaximalSolver
        from ..solvers.projection import ProjectionSolver
        from ..solvers.soft import SoftSolver

        solver = S.sys.solver
        # exactly the built-in kkt, projection, soft and maximal solvers (a
        # subclass may change the answer), whose kernels run in the loop
        if type(solver) not in (KKTSolver, ProjectionSolver, SoftSolver, MaximalSolver):
            return None
        if S.stabilization == "baumgarte":
            # one solve of A ddq = -(dA dq + 2 alpha A v + beta^2 g): the
            # hard answer plus the Python path's minimum-M-norm correction
            # (the soft solver's would go through its compliant K)
            if type(solver) is SoftSolver or not all(S.sys._holonomic_mask()):
                return None
            alpha, beta = S.gains
            plan.update(bg_a=2.0 * alpha, bg_b=beta * beta)
        nd = solver._native_data()
        if nd is None:
            return None
        plan.update(cd=nd, route=solver._route, project=int(S.stabilization == "projection"))
    return plan


def _run_native(S, plan, q, v, steps, dt, last_dt, record_every, nthreads, first=True, k0=0):
    """One native segment: ``steps`` steps from (q, v); returns the recorded
    frames (N, T, .) and the largest pre-projection residual per state."""
    from .. import _core
    from ..algorithms.dynamics import SingularInertiaError, _check_status

    m = S.model
    T = len(range(0, steps + 1, record_every)) + (0 if steps % record_every == 0 else 1)
    N = q.shape[0]
    nc = 0 if plan["cd"] is None else S.sys.nc
    Q, V = np.empty((N, T, m.nq)), np.empty((N, T, m.nv))
    L = np.empty((N, T, nc)) if plan["cd"] is not None else None
    tmax = np.zeros((N, 2))
    status = np.zeros(N, dtype=np.int32)
    _core.rollout(m.data, plan["cd"], q, v, plan["tau"], plan["integrator"], steps, dt, last_dt,
                  record_every, plan["route"], plan["project"], 1e-12, plan["kp"], plan["kd"],
                  plan["q_target"], plan["dq_target"], plan["gravity_comp"], Q, V, L, tmax, status,
                  nthreads, int(first), int(k0), plan["ref"], plan["ref_t0"], plan["ref_dt"],
                  plan["ckp"], plan["ckd"], plan["bg_a"], plan["bg_b"])
    bad = np.flatnonzero(status)
    if bad.size:
        st, k = int(status[bad[0]]), int(bad[0])
        which = "" if S.single else f" of rollout {k + S.row0} (of {S.total})"
        span = f"between t = {k0 * dt:g} and t = {k0 * dt + (steps - 1) * dt + last_dt:g}"
        if st == -12:
            # the maximal kernel met a non-zero entry its K pattern left out:
            # re-plan with every entry and run the segment again
            plan["cd"] = S.sys.solver._replan()
            return _run_native(S, plan, q, v, steps, dt, last_dt, record_every, nthreads, first, k0)
        if st in (-11, -13):
            S.sys.solver._native_status(st, k, None, None)
        # (a rollout that stopped on a singular joint inertia, st > 0, left
        # its later frames unwritten: their contents say nothing)
        if st == -5 or (st < 0 and not (np.isfinite(Q[k]).all() and np.isfinite(V[k]).all())):
            raise FloatingPointError(f"the state{which} became non-finite {span}; reduce dt, or use "
                                     "integrator='implicit' for stiff systems")
        if st > 0:
            # a singular articulated inertia mid-rollout on a model whose
            # inertias are fine at the segment's start: the state blew up
            from ..algorithms.dynamics import forward_dynamics

            try:
                forward_dynamics(m, q[k], np.zeros(m.nv), np.zeros(m.nv))
            except (SingularInertiaError, ValueError):
                pass
            else:
                raise FloatingPointError(f"the state{which} became non-finite {span}; reduce dt, or use "
                                         "integrator='implicit' for stiff systems")
        _check_status(m, np.maximum(status, 0))     # a singular articulated inertia
        if st == -4:
            # which joint moves no mass: the articulated-body algorithm names it
            from ..algorithms.dynamics import forward_dynamics

            why = "give every body with a joint positive mass and inertia"
            try:
                forward_dynamics(m, q[k], np.zeros(m.nv), np.zeros(m.nv))
            except SingularInertiaError as exc:
                why = re.sub(r" \(state \d+\)", "", str(exc))
            raise SingularInertiaError(f"the mass matrix{which} is not positive definite {span}: {why}")
        raise ValueError(f"the native rollout{which} failed with status {st} {span}: a distance "
                         "closure whose two points coincide?")
    return Q, V, L, tmax


def _stats(S, integrator, n, dt, wall, evaluations, max_res, native, iterations=0):
    stats = {"steps": n, "wall_time": wall, "evaluations": evaluations, "integrator": integrator,
             "dt": dt, "batch": S.N, "state_steps_per_s": n * S.N / max(wall, 1e-12), "native": native}
    if S.sys is not None:
        stats["solver"] = S.sys.solver.name
        stats["solver_counters"] = dict(S.sys.solver.counters)
        stats["max_residual"] = max_res
        stats["stabilization"] = str(S.stabilization)
        if S.stabilization == "projection":
            stats["gauss_newton_per_step"] = iterations / max(n * S.N, 1)
    return stats




def steps_and_frames(t_final, dt, record_every):
    """``(n, rec_steps)``: the number of steps to ``t_final`` (the last one
    shortened) and the indices of the recorded steps (0, every
    ``record_every``-th, and ``n``)."""
    n = max(1, int(np.ceil(t_final / dt - 1e-9)))
    return n, sorted(set(range(0, n + 1, record_every)) | {n})


def run(S, q, v, t_final, dt, integrator, record_every, chunk, native, rtol, atol, rec, bar):
    """Integrate the batch ``(q, v)`` (shapes (N, nq), (N, nv)) of the
    system ``S`` from 0 to ``t_final``, handing every recorded frame to
    ``rec.record`` and the steps to the progress bar ``bar`` (the caller closes it).

    Returns
    -------
    dict
        The run's statistics (``steps``, ``wall_time``, ``evaluations``...).
    """
    n, rec_steps = steps_and_frames(t_final, dt, record_every)
    N = S.N
    nc = S.sys.nc if S.sys is not None else None
    max_res = 0.0
    iterations = 0
    plan = _native_plan(S, integrator, native and S.prescribed is None)
    if plan is not None:
        from ..algorithms.dynamics import get_num_threads

        wall = time.perf_counter()
        seg = max(1, int(chunk)) * int(record_every)          # steps per native call
        k0 = 0
        while True:
            steps = min(seg, n - k0)
            last = dt if k0 + steps < n else t_final - (n - 1) * dt
            Q, V, L, tmax = _run_native(S, plan, q, v, steps, dt, last, int(record_every),
                                        get_num_threads(), first=k0 == 0, k0=k0)
            max_res = max(max_res, float(tmax[:, 0].max()) if tmax.size else 0.0)
            iterations += int(tmax[:, 1].sum())
            for j in range(0 if k0 == 0 else 1, Q.shape[1]):
                kk = min(k0 + j * int(record_every), n)
                tt = t_final if kk == n else kk * dt
                rec.record(tt, Q[:, j], V[:, j], None if L is None else L[:, j])
            q = np.ascontiguousarray(Q[:, -1])
            v = np.ascontiguousarray(V[:, -1])
            k0 += steps
            bar.update(steps)
            el = time.perf_counter() - wall
            bar.set_postfix_str(f"{k0 * N / max(el, 1e-9):,.0f} state-steps/s")
            if k0 >= n:
                break
        return _stats(S, integrator, n, dt, time.perf_counter() - wall, None, max_res, True, iterations)
    if S.prescribed is not None:
        q, v = S.impose(0.0, q, v)
    if S.stabilization == "projection":
        q, v, _, _ = _project(S.sys, q, v, free=S.free_dofs())
    step = {"euler": _step_euler, "implicit": _step_implicit,
            "dop853": lambda S_, t_, q_, v_, h_, a_: _step_adaptive(S_, t_, q_, v_, h_, a_, "DOP853", rtol, atol),
            "rk45": lambda S_, t_, q_, v_, h_, a_: _step_adaptive(S_, t_, q_, v_, h_, a_, "RK45", rtol, atol),
            "rk4": lambda S_, t_, q_, v_, h_, a_: _step_rk(S_, t_, q_, v_, h_, a_, False),
            "rkmk4": lambda S_, t_, q_, v_, h_, a_: _step_rk(S_, t_, q_, v_, h_, a_, True)}[integrator]
    wall = time.perf_counter()
    t = 0.0
    next_rec = 0
    a0 = None
    for k in range(n + 1):
        if k == rec_steps[next_rec]:
            if (nc is not None or S.prescribed is not None) and a0 is None and integrator != "implicit":
                a0 = S.accel(t, q, v)
            lam = a0[1] if a0 is not None else None
            if nc is not None and lam is None:
                lam = S.accel(t, q, v)[1]
            rec.record(t, q, v, lam, None if S.prescribed is None else S.last_tau.copy())
            next_rec += 1
        if k == n:
            break
        h = dt if k < n - 1 else t_final - (n - 1) * dt
        try:
            q, v, _ = step(S, t, q, v, h, a0 if integrator != "implicit" else None)
        except ValueError as exc:
            if "non-finite" not in str(exc):
                raise
            raise FloatingPointError(
                f"the state became non-finite in step {k + 1} (t = {t:g}); reduce dt, or "
                "use integrator='implicit' for stiff systems") from None
        a0 = None
        t = t_final if k == n - 1 else (k + 1) * dt
        if S.prescribed is not None:
            q, v = S.impose(t, q, v)
        if S.stabilization == "projection":
            q, v, r, its = _project(S.sys, q, v, free=S.free_dofs(), held=S.found)
            max_res = max(max_res, r)
            iterations += its
        elif S.sys is not None and S.sys.nc:
            g = S.sys._rows_batch(q)[0]
            max_res = max(max_res, float(np.abs(g).max()) if g.size else 0.0)
        if not (np.isfinite(q).all() and np.isfinite(v).all()):
            raise FloatingPointError(f"the state became non-finite at t = {t:g} (step {k + 1}); "
                                     "reduce dt or use integrator='implicit' for stiff systems")
        bar.update(1)
        if (k & 63) == 0:
            el = time.perf_counter() - wall
            bar.set_postfix_str(f"{(k + 1) * N / max(el, 1e-9):,.0f} state-steps/s")
    return _stats(S, integrator, n, dt, time.perf_counter() - wall, S.evaluations, max_res, False,
                  iterations)



# ---------------------------------------------------------------------------
# campaigns with a store: chunk by chunk, each chunk marked complete last
# ---------------------------------------------------------------------------
class Campaign:
    """What every chunk of a campaign shares (small and picklable: it is
    sent with each chunk's task).

    Attributes
    ----------
    out : str
        The store (an absolute local path or a URL).
    store_id : str
        The store's ``campaign_id`` attribute (a random id given when the
        store is laid out): a chunk's task writes only while the store at
        ``out`` still has it.
    N, T : int
        Rollouts and recorded frames.
    single : bool
        One rollout, stored without the batch axis.
    rows, n_chunks, frames : int
        Rollouts per chunk, chunks, recorded frames per Zarr chunk.
    nc : int or None
        Constraint rows (constrained models).
    integrator, t_final, dt, record_every, stabilization, gains, prescribed, native, rtol, atol
        As for :func:`gear.simulate`.
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def rows_of(self, c):
        """``(a, b)``: the rollouts of chunk ``c``."""
        return c * self.rows, min((c + 1) * self.rows, self.N)


def _chunk_input(x, a, b):
    """Rows ``[a, b)`` of a (N, ...) input array; callables and None as they are."""
    return x if x is None or callable(x) else np.ascontiguousarray(x[a:b])


def run_chunk(target, q, v, tau, f_ext, camp, c, bar=None):
    """Run campaign chunk ``c`` into its store, unless it is complete.

    Increments ``attempts[c]``, writes the chunk's rows of every array,
    then ``chunk_stats[c]`` and, last, ``done[c] = 1``.  Before each write
    of rows and before the markers it checks that the store is still this
    campaign's (:func:`gear.simulation.recorder.check_store_id`).  Runs in the
    process that calls it: a Dask worker, or the local process.

    Parameters
    ----------
    target : gear.Model or gear.ConstrainedModel
    q, v : ndarray, shape (rows, nq), (rows, nv)
        The chunk's initial states.
    tau, f_ext : None, ndarray (rows, ...) or callable
        The chunk's inputs.
    camp : Campaign
    c : int
    bar : progress bar, optional
        Receives the steps (local runs).

    Returns
    -------
    dict
        ``chunk``, ``ran`` (False: it was complete already), and when it
        ran ``wall_time`` and ``solver_counters``.
    """
    from .._progress import progress_bar
    from .integrators import _System
    from .recorder import _Recorder

    root, guard = begin_chunk(camp, c)
    if guard is None:
        return {"chunk": c, "ran": False}
    a, b = camp.rows_of(c)
    S = _System(target, tau, f_ext, b - a, camp.single, camp.stabilization, camp.gains, camp.prescribed)
    S.row0, S.total = a, camp.N                     # messages name rollouts of the whole batch
    rec = _Recorder(S, camp.T, camp.nc, root=root, rows=(a, b), chunk=camp.frames, guard=guard)
    bar = bar if bar is not None else progress_bar(False)
    st = run(S, q, v, camp.t_final, camp.dt, camp.integrator, camp.record_every, camp.frames, camp.native,
             camp.rtol, camp.atol, rec, bar)
    rec.flush()
    nan = float("nan")
    finish_chunk(root, guard, c, [st["wall_time"], nan if st["evaluations"] is None else float(st["evaluations"]),
                                  float(st.get("max_residual", nan)), float(st["native"]),
                                  float(st.get("gauss_newton_per_step", nan))])
    return {"chunk": c, "ran": True, "wall_time": st["wall_time"],
            "solver_counters": st.get("solver_counters", {})}


def begin_chunk(camp, c):
    """Open the store of ``camp`` for chunk ``c``: ``(root, guard)``, where
    ``guard()`` raises unless the store is still this campaign's
    (:func:`gear.simulation.recorder.check_store_id`), or ``(root, None)``
    when the chunk is complete already.  Increments ``attempts[c]``."""
    from .recorder import check_store_id, chunk_done, open_store

    root = open_store(camp.out)
    if root is None or "done" not in root:
        raise FileNotFoundError(f"the campaign store {camp.out!r} is not readable here: put it on a file "
                                "system every worker sees at the same path, or give a URL (s3://...)")
    guard = (lambda: check_store_id(camp.out, camp.store_id))
    guard()
    if chunk_done(root, c):
        return root, None
    attempts = root["attempts"]
    attempts[c] = int(attempts[c]) + 1
    return root, guard


def finish_chunk(root, guard, c, chunk_stats):
    """After every array of chunk ``c`` is written: ``chunk_stats[c]``
    (the values of :data:`gear.simulation.recorder.CHUNK_STATS`; a store
    of format 1 keeps the first four), then, last, ``done[c] = 1``;
    ``guard()`` first."""
    guard()
    cs = root["chunk_stats"]
    cs[c] = list(chunk_stats)[:cs.shape[1]]
    root["done"][c] = 1              # last: the chunk is complete


def prepare_campaign(S, q, v, out, resume, chunks, slots, t_final, dt, integrator, record_every, frames,
                     native, rtol, atol, gains, version):
    """Create the campaign's store at ``out``, or (``resume=True`` and a
    store there) check that it was made by this campaign.

    Parameters
    ----------
    S : gear.simulation.integrators._System
        The whole batch's system (inputs validated and broadcast).
    q, v : ndarray, shape (N, nq), (N, nv)
    out : str
        Checked by :func:`gear._output.claim_store`.
    resume : bool
    chunks : int or None
        Requested number of chunks; None: the store's when resuming, else
        :func:`gear.simulation.recorder.default_rows` for ``slots``.
    slots : int
        Parallel slots (worker threads; 1 locally).
    t_final, dt, integrator, record_every, frames, native, rtol, atol, gains, version
        As for :func:`gear.simulate` (``frames`` is its ``chunk=``).

    Returns
    -------
    Campaign
    """
    from .recorder import (campaign_identity, campaign_layout, check_identity, create_store, default_rows,
                           frame_widths, model_hash)

    m, N, single = S.model, S.N, S.single
    nc = S.sys.nc if S.sys is not None else None
    n, rec_steps = steps_and_frames(t_final, dt, record_every)
    T = len(rec_steps)
    widths = frame_widths(S, nc)
    out, root, stored, rows, n_chunks = campaign_layout(
        out, resume, chunks, single, N, lambda: default_rows(N, T, sum(widths.values()), frames, slots))
    solver = S.sys.solver.name if S.sys is not None else ""
    mh = model_hash(m)
    ident = campaign_identity(mh, q, v, S.tau, S.f_ext, None if S.prescribed is None else S.prescribed_input,
                              t_final, dt, integrator, solver, str(S.stabilization), gains, record_every,
                              frames, rows, n_chunks, native, rtol, atol, single, version)
    if root is not None:
        check_identity(stored, ident, out)
    else:
        meta = {"model_hash": mh, "integrator": integrator, "dt": dt, "t_final": t_final, "steps": n,
                "record_every": int(record_every), "batch": N, "gear_version": version,
                "stabilization": str(S.stabilization), "solver": solver, "nq": m.nq, "nv": m.nv,
                "chunks": n_chunks}
        t = np.array([t_final if k == n else k * dt for k in rec_steps])
        root = create_store(out, meta, ident, widths, N, T, single, rows, n_chunks, frames, t)
    return Campaign(out=out, store_id=root.attrs.get("campaign_id"), N=N, T=T, single=single, rows=rows,
                    n_chunks=n_chunks, frames=int(frames), nc=nc, integrator=integrator, t_final=t_final, dt=dt,
                    record_every=int(record_every), stabilization=S.stabilization, gains=S.gains,
                    prescribed=None if S.prescribed is None else S.prescribed_input,
                    native=bool(native), rtol=rtol, atol=atol, steps=n)


def overhead_per_chunk(wall, chunk_walls, slots, n):
    """Seconds per chunk a distributed run spent beyond its chunks' own
    work: ``(wall - sum(chunk_walls) / slots) / n`` (0 when negative or no
    chunk ran)."""
    return max(0.0, wall - sum(chunk_walls) / slots) / n if n else 0.0


def campaign_result(root, camp, summaries, before, done_before, wall, extra=None, slots=None):
    """The :class:`Trajectory` of a campaign's store, with its stats.

    Parameters
    ----------
    root : zarr.Group
    camp : Campaign
    summaries : list of dict
        :func:`run_chunk`'s answers for the chunks this call ran.
    before : ndarray, shape (n_chunks,)
        ``attempts`` when this call started.
    done_before : ndarray of bool, shape (n_chunks,)
        ``done`` when this call started.  The chunks this call ran are read
        off the store (complete now, not then), not off ``summaries``: a
        worker that dies after completing a chunk but before its answer
        reaches the client has its task rerun by Dask, and that rerun
        finds the chunk complete.
    wall : float
        This call's wall time.
    extra : dict, optional
        More stats (the cluster's).
    slots : int, optional
        The cluster's worker threads: adds ``overhead_per_chunk``
        (:func:`overhead_per_chunk` of the chunks this call ran).
    """
    from .recorder import CHUNK_STATS, store_trajectory

    attempts = np.asarray(root["attempts"][:], dtype=np.int64)
    cs = np.asarray(root["chunk_stats"][:])
    done = np.asarray(root["done"][:], dtype=bool)
    ran = np.flatnonzero(done & ~np.asarray(done_before, dtype=bool) & (attempts > before)).tolist()
    skipped = int(camp.n_chunks - len(ran))       # complete before this call, or run by another caller
    rows = sum(b - a for a, b in map(camp.rows_of, ran))
    ev = cs[:, 1]
    res = cs[:, 2]
    counters = {}
    for s in summaries:
        for k, val in (s.get("solver_counters") or {}).items():
            if isinstance(val, (int, float)):
                counters[k] = counters.get(k, 0) + val
    a = dict(root.attrs)
    stats = {"steps": camp.steps, "wall_time": wall, "integrator": camp.integrator, "dt": camp.dt,
             "batch": camp.N, "state_steps_per_s": camp.steps * rows / max(wall, 1e-12),
             "evaluations": None if np.isnan(ev).all() else int(np.nanmax(ev)),   # per state
             "native": bool(done.all() and (cs[:, 3] == 1).all()),
             "chunks": camp.n_chunks, "chunks_run": len(ran), "chunks_skipped": skipped,
             "chunks_retried": int(((attempts - before)[ran] > 1).sum()) if ran else 0,
             "chunk_wall_times": [float(w) for w in cs[ran, 0]],
             "complete": bool(done.all())}
    if getattr(camp, "formulation", "reduced") == "maximal":
        stats.update(formulation="maximal", stabilization=str(camp.effective_stabilization),
                     compliant=camp.compliant,
                     max_joint_error=float(np.nanmax(res)) if not np.isnan(res).all() else 0.0)
    if camp.nc is not None:
        stats["solver"] = a.get("solver", "")
        stats["solver_counters"] = counters
        stats["max_residual"] = float(np.nanmax(res)) if not np.isnan(res).all() else 0.0
        stats["stabilization"] = str(camp.stabilization)
        k = CHUNK_STATS.index("gauss_newton_per_step")
        if camp.stabilization == "projection" and cs.shape[1] > k:
            # the chunks' iterations per step and state, weighted by their
            # rollouts (chunks complete so far; format-1 stores have none)
            its = cs[:, k]
            have = np.flatnonzero(done & ~np.isnan(its)).tolist()
            if have:
                w = np.array([b - a for a, b in map(camp.rows_of, have)], dtype=float)
                stats["gauss_newton_per_step"] = float(w @ its[have] / w.sum())
    if slots:
        stats["overhead_per_chunk"] = overhead_per_chunk(wall, stats["chunk_wall_times"], slots, len(ran))
    stats.update(extra or {})
    root.attrs["stats"] = {k: v for k, v in stats.items() if isinstance(v, (int, float, str))}
    return store_trajectory(root, stats)


def run_campaign(camp, target, S, q, v, progress):
    """Run the campaign's incomplete chunks one after the other in this
    process (the native loop still uses every thread on each chunk).

    Returns
    -------
    Trajectory
        The store's arrays; ``stats`` as :func:`campaign_result`.
    """
    def call(c, bar):
        a, b = camp.rows_of(c)
        return run_chunk(target, q[a:b], v[a:b], _chunk_input(S.tau, a, b), _chunk_input(S.f_ext, a, b),
                         camp, c, bar=bar)
    return run_chunks_here(camp, call, progress)


def run_chunks_here(camp, call, progress):
    """Run the incomplete chunks of ``camp`` one after the other in this
    process: ``call(c, bar)`` runs chunk ``c`` (and returns its summary),
    ``bar`` a progress bar over all their steps.

    Returns
    -------
    Trajectory
        As :func:`campaign_result`.
    """
    from .._progress import progress_bar
    from .recorder import open_store

    root = open_store(camp.out)
    done = np.asarray(root["done"][:], dtype=bool)
    before = np.asarray(root["attempts"][:], dtype=np.int64)
    todo = [c for c in range(camp.n_chunks) if not done[c]]
    wall = time.perf_counter()
    summaries = []
    with progress_bar(progress, total=camp.steps * len(todo), unit="step",
                      desc=f"gear.simulate {camp.integrator} x{camp.N} ({len(todo)} of {camp.n_chunks} chunks)") as bar:
        for c in todo:
            summaries.append(call(c, bar))
    return campaign_result(root, camp, summaries, before, done, time.perf_counter() - wall)

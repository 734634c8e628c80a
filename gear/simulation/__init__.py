"""``gear.simulate``: rollouts on the configuration manifold.

Every integrator advances a batch of states at once.  Each stage is one
batched call of the native dynamics: the articulated-body algorithm for
a :class:`gear.Model`, and the constrained model's solver for a
:class:`gear.ConstrainedModel`.  Configurations move with the exponential
map of each joint (:meth:`gear.Model.integrate`), never by adding to
quaternions.

* ``"euler"``: semi-implicit (symplectic) Euler,
  ``v1 = v + h a(q, v)``, ``q1 = q exp(h v1)``.
* ``"rk4"``: the classical Runge-Kutta method; the stage velocities are
  combined in the tangent space and applied with ``q exp(.)``.  It is 4th
  order on vector-space joints and lower on rotating ones.
* ``"rkmk4"``: Runge-Kutta-Munthe-Kaas.  The same tableau on
  ``q = q0 exp(theta)``, with ``theta' = dexp^{-1}_{-theta}(xi) = xi +
  [theta, xi]/2 + [theta, [theta, xi]]/12`` on spherical (so(3)) and free
  (se(3)) joints.  It is 4th order on every joint.
* ``"dop853"``, ``"rk45"``: adaptive, through ``scipy.integrate.solve_ivp``
  inside every output step (``dt`` is then the recording grid), on the
  exact rates of the configuration coordinates (quaternion rates on
  spherical and free joints, renormalised after every output step).
* ``"implicit"``: linearly implicit Euler,
  ``(I - h da/dv - h^2 da/dq) dv = h (a + h da/dq v)``, for stiff systems
  such as stiff soft constraints.  A tree uses the analytic derivatives
  (:func:`gear.forward_dynamics_derivatives`); a constrained model uses
  central differences of its solver.

Closed loops: ``stabilization="projection"`` moves each new state back
onto the constraint manifold after every step.  Gauss-Newton takes the
minimum-norm position correction and the velocity is projected onto the
null space of ``A`` in the mass metric (``dq -= M^-1 A^T (A M^-1 A^T)^+ A
dq``: the kinetic-energy-nearest velocity, independent of the joint
coordinates and the same as the maximal formulation's projection).  ``"baumgarte"`` instead adds
``2 alpha A dq + beta^2 g`` to the acceleration-level constraint (Baumgarte
1972), with default gains ``alpha = beta = 1 / (5 dt)`` (critically damped,
five steps).

The package's parts, each importing only those listed before it:

* :mod:`gear.simulation.integrators`: the right-hand side of a batch and
  one step of each integrator, and the projection;
* :mod:`gear.simulation.recorder`: :class:`Trajectory`,
  :func:`model_hash`, the recorder, and a campaign store's layout,
  identity (what ``resume=True`` compares) and completion markers;
* :mod:`gear.simulation.rollout`: the loop driver (native or Python) and a
  campaign's chunks run in this process;
* :mod:`gear.simulation.maximal`: the loop of a :class:`gear.MaximalModel`
  (``run_maximal``) and its campaigns' chunks, each one ``run_maximal``;
* :mod:`gear.simulation.cluster`: a campaign's chunks as Dask tasks;
* this module: :func:`simulate`, which checks its arguments and hands the
  run to one of them.
"""
from __future__ import annotations

import warnings

import numpy as np

from .._output import claim_store
from .._progress import progress_bar
from .._validate import as_batch, check_scalar
from . import rollout
from .integrators import INTEGRATORS, STABILIZATIONS, _System
from .recorder import Trajectory, _Recorder, model_hash
from .rollout import steps_and_frames

__all__ = ["simulate", "Trajectory", "INTEGRATORS", "model_hash"]


def _claim_campaign(out, mode, resume, chunks):
    """Check ``resume``, ``chunks`` and ``mode``, and claim the store at
    ``out`` (:func:`gear._output.claim_store`); returns the checked path."""
    if not isinstance(resume, bool):
        raise ValueError(f"resume must be True or False, got {resume!r}")
    if chunks is not None and (isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer))
                               or chunks < 1):
        raise ValueError(f"chunks must be a positive integer or None, got {chunks!r}")
    if out is not None:
        try:
            import zarr  # noqa: F401
        except ImportError:
            raise ImportError("out= needs zarr: pip install 'gear[campaign]'") from None
        return claim_store(out, mode, resume=resume)
    if mode is not None:
        raise ValueError("mode= applies to an out= store; give out= too, or leave mode=None")
    if resume:
        raise ValueError("resume=True continues an out= store; give out= too")
    return None


def _simulate_maximal(mx, q0, dq0, t_final, dt, integrator, tau, f_ext, stabilization, record_every, progress,
                      out, client, baumgarte_gains, chunk, mode, chunks, resume, poses0, twists0):
    """:func:`simulate` for a :class:`gear.MaximalModel`: in memory
    (:func:`gear.simulation.maximal.run_maximal`), or in chunks, each one
    ``run_maximal`` on its states, into a store and/or on a cluster."""
    from . import maximal

    if out is None and client is None:
        _claim_campaign(None, mode, resume, chunks)
        return maximal.run_maximal(mx, q0, dq0, t_final, dt, integrator=integrator, tau=tau, f_ext=f_ext,
                                   stabilization=stabilization, record_every=record_every, progress=progress,
                                   baumgarte_gains=baumgarte_gains, poses0=poses0, twists0=twists0)
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    # every argument checked before the store is claimed (mode='w' replaces it)
    maximal.check_args(mx, t_final, dt, integrator, stabilization, record_every, baumgarte_gains)
    start = maximal.batch_start(mx, q0, dq0, poses0, twists0)
    tau, f_ext = maximal._inputs(mx, start[1].shape[0], tau, f_ext)
    out = _claim_campaign(out, mode, resume, chunks)
    options = dict(integrator=integrator, stabilization=stabilization, record_every=int(record_every),
                   baumgarte_gains=baumgarte_gains)
    if out is None:
        from . import cluster

        return cluster.run_maximal_gathered(client, mx, start, tau, f_ext, t_final, dt, chunks, progress, options)
    from .. import __version__

    slots = 1
    if client is not None:
        from . import cluster

        slots = 2 * cluster.worker_threads(client)
    camp = maximal.prepare_campaign(mx, start, tau, f_ext, out, resume, chunks, slots, t_final, dt, integrator,
                                    stabilization, int(record_every), int(chunk), baumgarte_gains, __version__)
    if client is not None:
        return cluster.run_maximal_campaign(client, camp, mx, start, tau, f_ext, progress)
    return maximal.run_campaign(camp, mx, start, tau, f_ext, progress)


def simulate(model_or_sys, q0, dq0, t_final, dt, integrator="rk4", tau=None, f_ext=None,
             stabilization="projection", record_every=1, progress=None, out=None, client=None,
             baumgarte_gains=None, chunk=256, native=True, prescribed=None, rtol=1e-10, atol=1e-12,
             mode=None, chunks=None, resume=False, poses0=None, twists0=None):
    """Integrate the equations of motion from ``(q0, dq0)`` to ``t_final``.

    Parameters
    ----------
    model_or_sys : gear.Model, gear.ConstrainedModel or gear.MaximalModel
        An open tree (a Model's ``loop_closures``, from a file's equality
        constraints or mimic joints, are left out, with a warning: wrap it
        in :class:`gear.ConstrainedModel` to hold them), or a closed-loop
        system (its solver computes the accelerations), or a model in
        maximal coordinates: then the state
        is every body's pose and twist (``q0``, ``dq0`` go through
        :meth:`gear.MaximalModel.state`, or give ``poses0=``/``twists0=``),
        the integrators are ``"euler"`` (Ruan, "Articulated rigid body
        systems", eq. 12), ``"implicit"`` (compliant rows at the end of the
        step, eq. 14), ``"rk4"`` and ``"rkmk4"`` (see
        :mod:`gear.maximal.stepping`), ``stabilization=None`` lets the rows
        drift, and the trajectory adds ``poses``, ``twists`` and
        ``joint_error`` (see :mod:`gear.simulation.maximal`; with ``out=``
        they are arrays of the store too).
    q0 : array_like, shape (nq,) or (N, nq)
    dq0 : array_like, shape (nv,) or (N, nv)
        A single ``dq0`` is used for every state of a batch.
    t_final, dt : float
        ``dt > 0``.  The last step is shortened when ``t_final`` is not a
        multiple of ``dt``.
    integrator : {"euler", "rk4", "rkmk4", "implicit", "dop853", "rk45"}
        See :mod:`gear.simulation`.  ``"dop853"``/``"rk45"`` are adaptive
        (``scipy.integrate.solve_ivp`` within each output step ``dt``, on
        the exact quaternion rates of spherical and free joints),
        with tolerances ``rtol``/``atol``; their step sizes are chosen for
        the batch as a whole.
    tau : None, array_like (nv,) or (N, nv), or callable
        Joint torques; a callable ``tau(t, q, dq)`` is evaluated at every
        stage (batched runs pass ``(N, nq)``/``(N, nv)`` arrays and expect
        ``(N, nv)`` or ``(nv,)``).  The controllers of
        :mod:`gear.controllers` are such callables.
    f_ext : None, array_like (nbodies, 6) or (N, nbodies, 6), or callable
        External body wrenches, like ``tau``.
    stabilization : {"projection", "baumgarte", None}
        Closed loops only (ignored for a tree).  ``"projection"``:
        Gauss-Newton onto ``g(q) = 0`` to 1e-12 after every step, then
        the velocity onto ``A dq = 0`` in the mass metric;
        ``"baumgarte"``: see ``baumgarte_gains``; None: the rows drift.
    record_every : int
        Record every k-th step (the initial and final states always).
    progress : bool, optional
        Show a tqdm progress bar (steps, states per second).  Default:
        only when standard error is a terminal.
    out : str or path, optional
        Write the trajectory to this Zarr store (arrays ``t``, ``q``,
        ``dq``, ``lam``, ``tau``, and a MaximalModel's ``poses``,
        ``twists``, ``joint_error``, shaped as on the trajectory, plus the
        per-chunk ``done``, ``attempts`` and ``chunk_stats``; attributes:
        ``model_hash``, ``integrator``, ``dt``, ``gear_version``, the
        ``campaign`` identity...; see :mod:`gear.simulation.recorder`)
        instead of holding it in memory; the returned arrays are the
        store's.  The batch runs in ``chunks`` (below), each written in
        blocks of ``chunk`` recorded frames and marked complete once all
        its arrays are written.  A local path (absolute paths are sent to
        workers: on a cluster it must be a file system every worker sees
        at the same path) or any fsspec URL Zarr opens (``s3://...``,
        ``gs://...``).  The path is checked before any work: it must not
        exist, or be an empty directory, or (with ``mode="w"``, or
        ``resume=True``) a gear store from an earlier run.  Anything else
        raises :class:`FileExistsError`, whatever ``mode`` is: gear never
        deletes what it did not write.
    mode : {None, "w"}
        ``"w"``: overwrite an earlier gear store at ``out`` (only the
        arrays gear wrote there are removed).  Default: an existing store
        raises :class:`FileExistsError`.
    resume : bool
        Continue the campaign of the gear store at ``out``: the store must
        have been made by the same campaign (same model hash, hashes of
        ``q0``, ``dq0`` and of ``tau``/``f_ext``/``prescribed`` arrays or
        pickled callables, ``dt``, ``t_final``, integrator, solver,
        stabilisation, ``record_every``, chunking, ``native``, and gear's
        major.minor version; for a MaximalModel also the formulation, a
        hash of its rows, their ``stiffness`` and ``damping``, and whether
        it starts from ``q0`` or ``poses0``), else :class:`ValueError` names the first
        difference; only the chunks not marked complete run
        (``stats["chunks_skipped"]`` counts the others).  With no store at
        ``out`` a new campaign starts.  Not with ``mode="w"``.
    chunks : int, optional
        Split the batch into this many chunks of equal size (the last one
        smaller; fewer chunks when ``N`` does not divide well: the size is
        ``ceil(N / chunks)``).  A chunk is the unit of work on a Dask
        worker, of the store's Zarr chunking along the batch axis and of
        resuming.  Default: when resuming, the store's; on a cluster, two
        per worker thread; locally, one; in both cases more when one Zarr
        chunk of all the recorded arrays (rows x ``chunk`` frames) would
        exceed 32 MiB (a MaximalModel's chunk holds all its frames in
        memory: the bound is on all of them).  Without ``out=`` only a
        cluster run uses it.
    client : dask.distributed.Client, optional
        Run the chunks on the client's workers (see
        :mod:`gear.simulation.cluster`).  With ``out=`` each worker writes
        its chunks into the store and only small summaries come back;
        without it the trajectories are gathered into the client.  The
        arrays equal the local run's bit for bit.  Callables must be
        picklable.
    baumgarte_gains : (float, float), optional
        ``(alpha, beta)`` of ``stabilization="baumgarte"``; default
        ``(1/(5 dt), 1/(5 dt))``.
    prescribed : dict, optional
        ``{joint name: motion}`` with ``motion(t) -> (q, dq, ddq)``: drive
        these (vector-space) joints along a prescribed motion through
        hybrid dynamics (Kim Sec. 3.3).  The joints follow the reference
        exactly, the rest of the mechanism (and a closed chain's loops)
        follows, and ``traj.tau`` records the torques: the actuators'
        torques on the prescribed joints, the applied ``tau`` elsewhere.
    native : bool
        Run the whole loop natively (no GIL, parallel over the batch) when
        the configuration allows it: ``euler``/``rk4`` (and ``rkmk4`` on
        vector-space joints), ``tau`` None, an array or a
        :mod:`gear.controllers` PD/GravityCompensation/ComputedTorque (with a
        ``SampledReference``, trees), no ``f_ext``,
        closed chains with the ``kkt``, ``projection``, ``soft`` or
        ``maximal`` solver and projection, Baumgarte (not with ``soft``) or
        no stabilisation.  ``stats["native"]`` says which loop ran; for a
        :class:`gear.MaximalModel`, ``stats["route"]`` how its steps solved
        their rows (``"tree"``, ``"sparse"``, ``"dense"`` or ``"numpy"``:
        :func:`gear.maximal.native.use_route`).

    Returns
    -------
    Trajectory
        ``.t``, ``.q``, ``.dq``, ``.lam`` (constrained models), ``.stats``.
        Runs in chunks (``out=`` or ``client=``) add to ``stats``:
        ``chunks``, ``chunks_run``, ``chunks_skipped`` (complete before a
        resumed run), ``chunks_retried`` (with ``out=``: chunks whose
        ``attempts`` counter in the store rose by more than one during this
        call, i.e. whose task started again after a lost worker or a killed
        process; without ``out=``: chunks Dask saw running on a worker that
        died), ``chunk_wall_times``, and on a cluster ``workers`` and
        ``overhead_per_chunk``.

    Notes
    -----
    The rollouts of one chunk are integrated together: ``"dop853"`` and
    ``"rk45"`` choose their step sizes per chunk, so their results depend
    on the chunking (every other integrator treats each rollout on its
    own, and any chunking gives the same bits).  A
    :class:`gear.MaximalModel`'s runs do too: each state's row solves and
    projection iterate until that state has converged, so a maximal store
    equals the in-memory run of the whole batch bit for bit, for any
    ``chunks``, locally or on a cluster.

    Joint limits (a URDF's ``<limit lower upper>``, an MJCF ``range``)
    are not enforced: they are read with the model and used by
    :meth:`gear.Model.random_configuration`, but no limit force enters the
    dynamics, so a joint can move past them in a rollout.

    Examples
    --------
    >>> import numpy as np, gear
    >>> arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    >>> traj = gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.1, 1e-3)
    >>> traj.q.shape, traj.t[-1]
    ((101, 7), 0.1)
    """
    from ..constraints import ConstrainedModel
    from ..maximal import MaximalModel
    from ..model import Model

    if isinstance(model_or_sys, MaximalModel):
        if prescribed is not None:
            raise NotImplementedError("prescribed= takes a Model or ConstrainedModel; a MaximalModel's joints "
                                      "are rows, not driven coordinates")
        return _simulate_maximal(model_or_sys, q0, dq0, check_scalar("t_final", t_final), check_scalar("dt", dt),
                                 integrator, tau, f_ext, stabilization, record_every, progress, out, client,
                                 baumgarte_gains, chunk, mode, chunks, resume, poses0, twists0)
    if poses0 is not None or twists0 is not None:
        raise TypeError("poses0=/twists0= start a MaximalModel; a Model or ConstrainedModel starts from q0, dq0")
    if not isinstance(model_or_sys, (Model, ConstrainedModel)):
        raise TypeError(f"model_or_sys must be a gear.Model, gear.ConstrainedModel or gear.MaximalModel, "
                        f"got {type(model_or_sys).__name__}")
    model = model_or_sys.model if isinstance(model_or_sys, ConstrainedModel) else model_or_sys
    if not isinstance(model_or_sys, ConstrainedModel) and getattr(model, "loop_closures", None):
        warnings.warn(f"the model carries {len(model.loop_closures)} loop closures or joint couplers "
                      "(model.loop_closures: the file's equality constraints or <mimic> joints), which a "
                      "simulation of the Model leaves out (it runs the tree alone); simulate "
                      "gear.ConstrainedModel(model) to hold them, as gear.MaximalModel(model) does, "
                      "or set model.loop_closures = [] to run the tree without this warning",
                      UserWarning, stacklevel=2)
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r}; choose one of {list(INTEGRATORS)}")
    if stabilization not in STABILIZATIONS:
        raise ValueError(f"stabilization must be 'projection', 'baumgarte' or None, got {stabilization!r}")
    t_final = check_scalar("t_final", t_final)
    dt = check_scalar("dt", dt)
    if dt <= 0.0:
        raise ValueError(f"dt must be positive, got {dt}")
    if t_final <= 0.0:
        raise ValueError(f"t_final must be positive, got {t_final}")
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise ValueError(f"record_every must be a positive integer, got {record_every!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    q, is_batch = as_batch("q0", q0, (model.nq,))
    single = not is_batch
    model.check_configuration(q, "q0")
    N = q.shape[0]
    v, vb = as_batch("dq0", dq0, (model.nv,))
    if vb and v.shape[0] != N:
        raise ValueError(f"dq0 has {v.shape[0]} states but q0 has {N}")
    v = np.array(np.broadcast_to(v, (N, model.nv)), dtype=float, order="C")
    q = np.array(q, dtype=float, order="C")
    out = _claim_campaign(out, mode, resume, chunks)
    if baumgarte_gains is None:
        baumgarte_gains = (1.0 / (5.0 * dt), 1.0 / (5.0 * dt))
    else:
        baumgarte_gains = tuple(check_scalar("baumgarte_gains", g) for g in baumgarte_gains)
        if len(baumgarte_gains) != 2 or min(baumgarte_gains) < 0:
            raise ValueError("baumgarte_gains must be two non-negative numbers (alpha, beta)")
    if prescribed is not None and integrator == "implicit":
        raise ValueError("prescribed motions are not supported with integrator='implicit'")
    S = _System(model_or_sys, tau, f_ext, N, single, stabilization, baumgarte_gains, prescribed)
    from .. import __version__

    if out is not None:
        slots = 1
        if client is not None:
            from . import cluster

            slots = cluster.worker_threads(client)
        camp = rollout.prepare_campaign(S, q, v, out, resume, chunks, 2 * slots if client is not None else 1,
                                        t_final, dt, integrator, int(record_every), int(chunk), native,
                                        rtol, atol, baumgarte_gains, __version__)
        if client is not None:
            return cluster.run_campaign(client, camp, model_or_sys, S, q, v, progress)
        return rollout.run_campaign(camp, model_or_sys, S, q, v, progress)
    if client is not None:
        from . import cluster

        return cluster.run_gathered(client, model_or_sys, S, q, v, t_final, dt, chunks, progress,
                                    dict(integrator=integrator, record_every=int(record_every),
                                         chunk=int(chunk), native=native, rtol=rtol, atol=atol))
    n, rec_steps = steps_and_frames(t_final, dt, record_every)
    nc = S.sys.nc if S.sys is not None else None
    rec = _Recorder(S, len(rec_steps), nc)
    bar = progress_bar(progress, total=n, unit="step", desc=f"gear.simulate {integrator} x{N}")
    try:
        stats = rollout.run(S, q, v, t_final, dt, integrator, int(record_every), int(chunk), native,
                            rtol, atol, rec, bar)
    finally:
        bar.close()
    return rec.result(stats)

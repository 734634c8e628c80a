"""Simulation campaigns beyond one machine: :func:`simulate_distributed`
splits a batch into chunks and runs each chunk's rollout on a
``dask.distributed`` worker.  Each worker runs the native batched
dynamics; the model goes out once per worker (``client.scatter(...,
broadcast=True)``).  The results are gathered in batch order, so the
arrays equal the local run's, bit for bit.  Dask does the scheduling.

Point it at a real cluster the usual Dask way, e.g.
``Client("tcp://scheduler:8786")``, a ``dask_jobqueue.SLURMCluster`` or a
``dask_kubernetes`` cluster; nothing here is specific to
``LocalCluster``.
"""
from __future__ import annotations

import time

import numpy as np

from .._output import claim_store
from .._progress import progress_bar
from .._validate import as_batch

__all__ = ["simulate_distributed"]


def _run_chunk(target, q, dq, t_final, dt, tau, f_ext, options):
    from . import simulate

    t0 = time.perf_counter()
    traj = simulate(target, q, dq, t_final, dt, tau=tau, f_ext=f_ext, **options)
    return traj.t, traj.q, traj.dq, traj.lam, traj.stats, time.perf_counter() - t0


def _slice_input(value, idx, N, inner_ndim):
    if value is None or callable(value):
        return value
    arr = np.asarray(value, dtype=float)
    if arr.ndim == inner_ndim + 1 and arr.shape[0] == N:
        return arr[idx]
    return arr


def simulate_distributed(client, model_or_sys, q0, dq0, t_final, dt, *, tau=None, f_ext=None,
                         chunks=None, out=None, mode=None, progress=None, **options):
    """:func:`gear.simulate` on a Dask cluster.

    Parameters
    ----------
    client : dask.distributed.Client
    model_or_sys, q0, dq0, t_final, dt, tau, f_ext, **options
        As for :func:`gear.simulate` (``options``: ``integrator``,
        ``stabilization``, ``record_every``, ...).  Callables (``tau``,
        controllers) must be picklable (module-level functions or
        :mod:`gear.controllers` objects).
    chunks : int, optional
        Number of chunks; default twice the number of workers (at most one
        per state).
    out : str, optional
        Zarr store written with the gathered arrays (as in
        :func:`gear.simulate`, which checks the path before it calls this
        function).
    mode : {None, "w"}
        As for :func:`gear.simulate`: ``"w"`` overwrites an earlier gear
        store; anything else at ``out`` is refused before any work.
    progress : bool, optional
        A tqdm bar over finished chunks (default: when standard error is a
        terminal).

    Returns
    -------
    Trajectory
        ``stats`` adds ``chunks``, ``chunk_wall_times`` (seconds spent in
        each chunk's rollout on its worker) and ``overhead_per_chunk``
        (seconds of scheduling, transfer and gathering per chunk: the wall
        time beyond the chunks' own, spread over the workers).
    """
    from distributed import as_completed

    from ..constraints import ConstrainedModel
    from .integrators import _System
    from .recorder import Trajectory, _Recorder

    model = model_or_sys.model if isinstance(model_or_sys, ConstrainedModel) else model_or_sys
    q, is_batch = as_batch("q0", q0, (model.nq,))
    single = not is_batch
    N = q.shape[0]
    v, vb = as_batch("dq0", dq0, (model.nv,))
    v = np.broadcast_to(v, (N, model.nv))
    if out is not None:
        out = claim_store(out, mode)
    nworkers = max(1, len(client.scheduler_info().get("workers", {})))
    n_chunks = int(chunks) if chunks is not None else 2 * nworkers
    if n_chunks < 1:
        raise ValueError(f"chunks must be a positive integer, got {chunks!r}")
    parts = [p for p in np.array_split(np.arange(N), min(n_chunks, N)) if p.size]
    wall = time.perf_counter()
    # hash=False: a fresh key per call (identical data scattered by two calls
    # would share a key that the first call's release could drop)
    target = client.scatter(model_or_sys, broadcast=True, hash=False)
    options = dict(options)
    options.pop("client", None)
    futures = [client.submit(_run_chunk, target, np.ascontiguousarray(q[p]), np.ascontiguousarray(v[p]),
                             t_final, dt, _slice_input(tau, p, N, 1), _slice_input(f_ext, p, N, 2),
                             options, pure=False)
               for p in parts]
    with progress_bar(progress, total=len(futures), unit="chunk",
                      desc=f"gear.simulate on {nworkers} workers") as bar:
        for _ in as_completed(futures):
            bar.update(1)
    results = client.gather(futures)
    wall = time.perf_counter() - wall
    t = results[0][0]
    qs = np.concatenate([r[1] for r in results])
    dqs = np.concatenate([r[2] for r in results])
    lam = None if results[0][3] is None else np.concatenate([r[3] for r in results])
    chunk_walls = [r[5] for r in results]
    stats = dict(results[0][4])
    stats.update(wall_time=wall, batch=N, chunks=len(parts), workers=nworkers,
                 chunk_wall_times=chunk_walls,
                 overhead_per_chunk=max(0.0, wall - sum(chunk_walls) / nworkers) / len(parts),
                 state_steps_per_s=stats["steps"] * N / max(wall, 1e-12),
                 evaluations=sum(r[4]["evaluations"] or 0 for r in results))
    if "max_residual" in stats:
        stats["max_residual"] = max(r[4]["max_residual"] for r in results)
    if single:
        qs, dqs, lam = qs[0], dqs[0], None if lam is None else lam[0]
    if out is None:
        return Trajectory(t, qs, dqs, lam, stats)
    # write the gathered arrays through the same recorder as a local run
    sys_like = _System(model_or_sys, None, None, N, single, None, (0.0, 0.0))
    from .. import __version__
    from .recorder import model_hash

    meta = {"model_hash": model_hash(model), "integrator": options.get("integrator", "rk4"), "dt": dt,
            "t_final": t_final, "steps": stats["steps"], "record_every": int(options.get("record_every", 1)),
            "batch": N, "gear_version": __version__, "stabilization": str(stats.get("stabilization")),
            "solver": stats.get("solver", ""), "nq": model.nq, "nv": model.nv,
            "dask_chunks": len(parts)}
    rec = _Recorder(sys_like, len(t), None if lam is None else lam.shape[-1], out, meta,
                    int(options.get("chunk", 256)))
    Q = qs[None] if single else qs
    DQ = dqs[None] if single else dqs
    L = None if lam is None else (lam[None] if single else lam)
    for k in range(len(t)):
        rec.record(t[k], Q[:, k], DQ[:, k], None if L is None else L[:, k])
    return rec.result(stats)

"""The cluster driver: a campaign's chunks as tasks on ``dask.distributed``
workers.

With ``out=`` every chunk's worker writes its rollouts straight into the
campaign's Zarr store (:func:`gear.simulation.rollout.run_chunk`; the
store's Zarr chunks are aligned with the campaign's chunks along the batch
axis, so no two tasks write one Zarr chunk) and returns only a small
summary: the client's memory does not grow with the campaign.  A chunk is
marked complete after all its arrays are written; a task lost with its
worker is rerun by Dask and rewrites its rows, and ``resume=True`` runs
only the chunks not marked complete.

Without ``out=`` the chunks' trajectories are gathered into the client
(they must fit in its memory).

The model goes out once per worker (``client.scatter(..., broadcast=True)``).
Nothing here is specific to ``LocalCluster``: a ``Client`` connected to
any scheduler (``Client("tcp://scheduler:8786")``, a
``dask_jobqueue.SLURMCluster``, a ``dask_kubernetes`` cluster) works the
same way, provided the store is reachable from every worker at the same
path or URL.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .._progress import progress_bar
from . import rollout
from .recorder import Trajectory, _Recorder, open_store

__all__ = ["worker_threads", "dashboard_link", "run_campaign", "run_gathered", "run_maximal_campaign",
           "run_maximal_gathered"]


def worker_threads(client):
    """Total threads of the client's workers (at least 1)."""
    workers = client.scheduler_info().get("workers", {})
    return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))


def _host_threads(client):
    """``{host: Dask threads of all the workers on that host}``."""
    out = {}
    for w in client.scheduler_info().get("workers", {}).values():
        out[w.get("host")] = out.get(w.get("host"), 0) + int(w.get("nthreads", 1))
    return out


def _share_cores(host_threads):
    """On a Dask worker: give each of the host's Dask threads an equal share
    of the cores for the native loop's threads (``gear.set_num_threads``),
    instead of every concurrent chunk using every core.  Elsewhere: nothing."""
    import os

    from distributed import get_worker
    from distributed.comm import get_address_host

    from ..algorithms.dynamics import set_num_threads

    try:
        w = get_worker()
    except ValueError:                      # not on a worker
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    share = host_threads.get(get_address_host(w.address)) or w.state.nthreads
    set_num_threads(max(1, cores // max(1, share)))


def _chunk_task(host_threads, run_chunk, *args):
    """One campaign chunk as a Dask task: ``run_chunk(*args)``
    (:func:`gear.simulation.rollout.run_chunk`, or
    :func:`gear.simulation.maximal.run_chunk` for a MaximalModel)."""
    _share_cores(host_threads)
    return run_chunk(*args)


def dashboard_link(client, timeout=1.0):
    """The address of the scheduler's Dask dashboard, or None when it has
    none (started without one, or without bokeh: the scheduler then serves
    only a page asking for bokeh) or it does not answer within ``timeout``
    seconds."""
    import urllib.request

    try:
        if "dashboard" not in client.scheduler_info().get("services", {}):
            return None
        link = client.dashboard_link
        with urllib.request.urlopen(link, timeout=timeout) as r:
            ok = r.status == 200 and b"for the dashboard" not in r.read(4096)
        return link if ok else None
    except Exception:                       # no dashboard, or none reachable from here
        return None


def _announce_dashboard(client, progress):
    """Print the Dask dashboard's address to stderr when there is one
    (unless ``progress=False``)."""
    if progress is False:
        return
    link = dashboard_link(client)
    if link:
        print(f"gear.simulate: Dask dashboard at {link}", file=sys.stderr)


def run_campaign(client, camp, target, S, q, v, progress=None):
    """Run the campaign's incomplete chunks as Dask tasks that write into
    the store.

    Parameters
    ----------
    client : dask.distributed.Client
    camp : gear.simulation.rollout.Campaign
    target : gear.Model or gear.ConstrainedModel
    S : gear.simulation.integrators._System
        The whole batch's validated inputs (``S.tau``, ``S.f_ext``).
    q, v : ndarray, shape (N, nq), (N, nv)
    progress : bool, optional
        A bar over chunks.

    Returns
    -------
    Trajectory
        Its arrays are the store's Zarr arrays; ``stats`` as
        :func:`gear.simulation.rollout.campaign_result` plus ``workers``
        and ``overhead_per_chunk`` (seconds per chunk beyond the chunks' own
        rollouts, spread over the worker threads).
    """
    def inputs(a, b):
        return (np.ascontiguousarray(q[a:b]), np.ascontiguousarray(v[a:b]), rollout._chunk_input(S.tau, a, b),
                rollout._chunk_input(S.f_ext, a, b))
    return _submit_campaign(client, camp, target, rollout.run_chunk, inputs, progress)


def run_maximal_campaign(client, camp, mx, start, tau, f_ext, progress=None):
    """:func:`run_campaign` for a :class:`gear.MaximalModel`: each chunk's
    task is :func:`gear.simulation.maximal.run_chunk`.

    Parameters
    ----------
    client : dask.distributed.Client
    camp : gear.simulation.rollout.Campaign
        From :func:`gear.simulation.maximal.prepare_campaign`.
    mx : gear.MaximalModel
    start : tuple
        :func:`gear.simulation.maximal.batch_start`'s answer.
    tau, f_ext : None or ndarray, shape (N, nv), (N, nb, 6)
    progress : bool, optional

    Returns
    -------
    Trajectory
        As :func:`run_campaign`, with ``poses``, ``twists`` and
        ``joint_error``.
    """
    from . import maximal

    _, A, B, _ = start

    def inputs(a, b):
        return (np.ascontiguousarray(A[a:b]), np.ascontiguousarray(B[a:b]), rollout._chunk_input(tau, a, b),
                rollout._chunk_input(f_ext, a, b))
    return _submit_campaign(client, camp, mx, maximal.run_chunk, inputs, progress)


def _submit_campaign(client, camp, target, run_chunk, inputs, progress):
    """The incomplete chunks of ``camp`` as tasks ``run_chunk(target,
    *inputs(a, b), camp, c)`` (rows ``[a, b)`` of chunk ``c``); their
    summaries made into the campaign's :class:`Trajectory`."""
    from distributed import as_completed

    root = open_store(camp.out)
    done = np.asarray(root["done"][:], dtype=bool)
    before = np.asarray(root["attempts"][:], dtype=np.int64)
    todo = [c for c in range(camp.n_chunks) if not done[c]]
    slots = worker_threads(client)
    nworkers = max(1, len(client.scheduler_info().get("workers", {})))
    _announce_dashboard(client, progress)
    wall = time.perf_counter()
    summaries = []
    futures = []
    if todo:
        # hash=False: a fresh key per call (identical data scattered by two
        # calls would share a key that the first call's release could drop)
        tgt = client.scatter(target, broadcast=True, hash=False)
        hosts = _host_threads(client)
        for c in todo:
            a, b = camp.rows_of(c)
            futures.append(client.submit(_chunk_task, hosts, run_chunk, tgt, *inputs(a, b), camp, c, pure=False,
                                         key=f"gear-chunk-{c}-of-{camp.n_chunks}-{time.time_ns()}"))
    try:
        with progress_bar(progress, total=camp.n_chunks, initial=camp.n_chunks - len(todo), unit="chunk",
                          desc=f"gear.simulate on {nworkers} workers") as bar:
            for fut in as_completed(futures):
                summaries.append(fut.result())
                fut.release()
                bar.update(1)
    finally:
        client.cancel([f for f in futures if not f.done()])
    wall = time.perf_counter() - wall
    return rollout.campaign_result(root, camp, summaries, before, done, wall, {"workers": nworkers}, slots)


def _run_in_memory(host_threads, rows, target, q, v, tau, f_ext, single, stabilization, gains, prescribed,
                   t_final, dt, options):
    """One chunk's rollouts (``rows = (first, batch size)``) in the worker's
    memory (``run_gathered``)."""
    from .integrators import _System

    _share_cores(host_threads)
    t0 = time.perf_counter()
    S = _System(target, tau, f_ext, q.shape[0], single, stabilization, gains, prescribed)
    S.row0, S.total = rows
    n, rec_steps = rollout.steps_and_frames(t_final, dt, options["record_every"])
    rec = _Recorder(S, len(rec_steps), S.sys.nc if S.sys is not None else None)
    st = rollout.run(S, q, v, t_final, dt, options["integrator"], options["record_every"], options["chunk"],
                     options["native"], options["rtol"], options["atol"], rec, progress_bar(False))
    tr = rec.result(st)
    return tr.t, tr.q, tr.dq, tr.lam, getattr(tr, "tau", None), st, time.perf_counter() - t0


def _lost_worker_chunks(client, keys):
    """Chunks whose task was running on a worker that died (Dask's
    ``suspicious`` count of the task), or None when the scheduler does not
    say."""
    def count(dask_scheduler, keys):
        return sum(1 for k in keys if k in dask_scheduler.tasks and dask_scheduler.tasks[k].suspicious > 0)

    try:
        return int(client.run_on_scheduler(count, keys=keys))
    except Exception:                       # an older or a different scheduler
        return None


def _gather(client, futures, progress, nworkers):
    """The chunks' results in submission order, with a bar over finished
    chunks, and the chunks a lost worker made Dask rerun; unfinished tasks
    are cancelled if the client stops early."""
    from distributed import as_completed

    try:
        with progress_bar(progress, total=len(futures), unit="chunk",
                          desc=f"gear.simulate on {nworkers} workers") as bar:
            for _ in as_completed(futures):
                bar.update(1)
        return client.gather(futures), _lost_worker_chunks(client, [f.key for f in futures])
    finally:
        client.cancel([f for f in futures if not f.done()])


def run_gathered(client, target, S, q, v, t_final, dt, chunks, progress, options):
    """Without ``out=``: run chunks of the batch on the workers and gather
    their trajectories into the client, in batch order (identical to the
    local run).

    Parameters
    ----------
    client : dask.distributed.Client
    target : gear.Model or gear.ConstrainedModel
    S : gear.simulation.integrators._System
        The whole batch's validated inputs.
    q, v : ndarray, shape (N, nq), (N, nv)
    t_final, dt : float
    chunks : int or None
        Number of chunks (default twice the worker threads, at most one
        per rollout).
    progress : bool or None
    options : dict
        ``integrator``, ``record_every``, ``chunk``, ``native``, ``rtol``,
        ``atol``.

    Returns
    -------
    Trajectory
        ``stats`` adds ``chunks``, ``chunks_run``, ``chunks_skipped`` (0),
        ``chunks_retried`` (tasks that were running on a worker that died),
        ``workers``, ``chunk_wall_times`` and ``overhead_per_chunk``.
    """
    N = S.N
    slots = worker_threads(client)
    nworkers = max(1, len(client.scheduler_info().get("workers", {})))
    n_chunks = int(chunks) if chunks is not None else 2 * slots
    parts = [p for p in np.array_split(np.arange(N), min(n_chunks, N)) if p.size]
    _announce_dashboard(client, progress)
    wall = time.perf_counter()
    tgt = client.scatter(target, broadcast=True, hash=False)
    hosts = _host_threads(client)
    futures = [client.submit(_run_in_memory, hosts, (int(p[0]), N), tgt, np.ascontiguousarray(q[p]),
                             np.ascontiguousarray(v[p]),
                             rollout._chunk_input(S.tau, p[0], p[-1] + 1),
                             rollout._chunk_input(S.f_ext, p[0], p[-1] + 1), S.single, S.stabilization,
                             S.gains, S.prescribed_input, t_final, dt, options, pure=False)
               for p in parts]
    results, retried = _gather(client, futures, progress, nworkers)
    wall = time.perf_counter() - wall
    t = results[0][0]
    cat = (lambda i: None if results[0][i] is None else
           (results[0][i] if S.single else np.concatenate([r[i] for r in results])))
    qs, dqs, lam, tau_rec = cat(1), cat(2), cat(3), cat(4)
    chunk_walls = [r[6] for r in results]
    stats = dict(results[0][5])
    ev = [r[5]["evaluations"] for r in results]
    stats.update(wall_time=wall, batch=N, chunks=len(parts), chunks_run=len(parts), chunks_skipped=0,
                 chunks_retried=retried, workers=nworkers, chunk_wall_times=chunk_walls,
                 overhead_per_chunk=rollout.overhead_per_chunk(wall, chunk_walls, slots, len(parts)),
                 state_steps_per_s=stats["steps"] * N / max(wall, 1e-12),
                 evaluations=None if any(e is None for e in ev) else max(ev),        # per state
                 native=all(r[5]["native"] for r in results))
    if "max_residual" in stats:
        stats["max_residual"] = max(r[5]["max_residual"] for r in results)
    tr = Trajectory(t, qs, dqs, lam, stats)
    if tau_rec is not None:
        tr.tau = tau_rec
    return tr


def _maximal_rows(rows, mx, kind, A, B, tau, f_ext, single, t_final, dt, options):
    """One part of a maximal batch in the worker's memory
    (``run_maximal_gathered``)."""
    from . import maximal

    t0 = time.perf_counter()
    tr = maximal.run_rows(mx, kind, A, B, tau, f_ext, single, t_final, dt, options, rows=rows)
    return tr, time.perf_counter() - t0


def run_maximal_gathered(client, mx, start, tau, f_ext, t_final, dt, chunks, progress, options):
    """Without ``out=``: a :class:`gear.MaximalModel`'s batch in chunks on the
    workers (each one :func:`gear.simulation.maximal.run_maximal`), gathered
    into the client in batch order.  The chunks are those of a campaign
    (``ceil(N / chunks)`` states each), so the arrays equal a store's with
    the same ``chunks`` bit for bit.

    Parameters
    ----------
    client : dask.distributed.Client
    mx : gear.MaximalModel
    start : tuple
        :func:`gear.simulation.maximal.batch_start`'s answer.
    tau, f_ext : None or ndarray, shape (N, nv), (N, nb, 6)
    t_final, dt : float
    chunks : int or None
        Number of chunks (default twice the worker threads).
    progress : bool or None
    options : dict
        ``integrator``, ``stabilization``, ``record_every``,
        ``baumgarte_gains``.

    Returns
    -------
    Trajectory
        ``stats`` adds ``chunks``, ``chunks_run``, ``chunks_skipped`` (0),
        ``chunks_retried`` (tasks that were running on a worker that died),
        ``workers``, ``chunk_wall_times`` and ``overhead_per_chunk``.
    """
    from . import maximal

    kind, A, B, single = start
    N = A.shape[0]
    slots = worker_threads(client)
    nworkers = max(1, len(client.scheduler_info().get("workers", {})))
    rows = 1 if single else -(-N // min(int(chunks) if chunks is not None else 2 * slots, N))
    parts = [(a, min(a + rows, N)) for a in range(0, N, rows)]
    _announce_dashboard(client, progress)
    wall = time.perf_counter()
    tgt = client.scatter(mx, broadcast=True, hash=False)
    futures = [client.submit(_maximal_rows, (a, N), tgt, kind, A[a:b], B[a:b], rollout._chunk_input(tau, a, b),
                             rollout._chunk_input(f_ext, a, b), single, t_final, dt, options, pure=False)
               for a, b in parts]
    results, retried = _gather(client, futures, progress, nworkers)
    wall = time.perf_counter() - wall
    tr = maximal.concatenate([r[0] for r in results], single)
    chunk_walls = [r[1] for r in results]
    tr.stats.update(wall_time=wall, batch=N, chunks=len(parts), chunks_run=len(parts), chunks_skipped=0,
                    chunks_retried=retried, workers=nworkers, chunk_wall_times=chunk_walls,
                    overhead_per_chunk=rollout.overhead_per_chunk(wall, chunk_walls, slots, len(parts)),
                    state_steps_per_s=tr.stats["steps"] * N / max(wall, 1e-12))
    return tr

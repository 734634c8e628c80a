"""Campaigns with a store: workers write their own chunks, a chunk is
marked complete only after all its arrays are written, ``resume=True``
runs only the incomplete chunks of the same campaign, and lost clients or
workers cost only unfinished chunks.  The cluster tests run a
``distributed.LocalCluster`` of worker processes with nannies (2 workers x
1 thread), as on a real cluster."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import gear
from gear.cli import main

zarr = pytest.importorskip("zarr", reason="stores need the optional 'campaign' extra")

ARRAYS = ("t", "q", "dq", "lam")


def _arm_batch(n, seed=0):
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(seed)
    return arm, arm.random_configuration(rng, n=n), rng.standard_normal((n, arm.nv))


def _four_bar_batch(n, seed=2):
    sysm, q = gear.mechanisms.four_bar()
    rng = np.random.default_rng(seed)
    qb = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(3))) for _ in range(n)])
    dq = np.stack([sysm.project_velocity(x, rng.standard_normal(3)) for x in qb])
    return sysm, qb, dq


def _assert_store_equals(path, ref):
    """Every array of the store at ``path`` equals ``ref``'s, bit for bit,
    and every chunk is marked complete."""
    g = zarr.open_group(str(path), mode="r")
    for k in ARRAYS:
        want = getattr(ref, k)
        if want is None:
            assert k not in g
            continue
        got = g[k][...]
        assert got.shape == np.shape(want) and got.tobytes() == np.ascontiguousarray(want).tobytes(), k
    assert g["done"][...].all()


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed", reason="dask.distributed is the optional 'campaign' extra")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cl, distributed.Client(cl) as client:
        yield cl, client


# ---------------------------------------------------------------------------
# local runs: chunk layout, completion markers, resume checks
# ---------------------------------------------------------------------------
def test_local_store_layout_and_equality(tmp_path):
    arm, q0, dq0 = _arm_batch(10)
    mem = gear.simulate(arm, q0, dq0, 0.05, 1e-3, record_every=2)
    tr = gear.simulate(arm, q0, dq0, 0.05, 1e-3, record_every=2, out=str(tmp_path / "a.zarr"), chunks=3,
                       chunk=4)
    assert isinstance(tr.q, zarr.Array) and isinstance(tr.t, zarr.Array)
    _assert_store_equals(tmp_path / "a.zarr", mem)
    g = zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    # ceil(10 / 3) = 4 rollouts per chunk: 3 chunks, each its own Zarr chunks along the batch
    assert g["q"].chunks == (4, 4, arm.nq) and g["dq"].chunks == (4, 4, arm.nv)
    assert g["done"].shape == (3,) and list(g["attempts"][...]) == [1, 1, 1]
    st = tr.stats
    assert (st["chunks"], st["chunks_run"], st["chunks_skipped"], st["chunks_retried"]) == (3, 3, 0, 0)
    assert g.attrs["campaign"]["rows_per_chunk"] == 4 and g.attrs["stats"]["chunks_run"] == 3
    # a single rollout: no batch axis, one chunk
    one = gear.simulate(arm, q0[0], dq0[0], 0.05, 1e-3, out=str(tmp_path / "one.zarr"))
    assert one.q.shape == (51, arm.nq) and one.stats["chunks"] == 1
    assert np.array_equal(one.q[...], gear.simulate(arm, q0[0], dq0[0], 0.05, 1e-3).q)


def test_a_chunk_whose_answer_was_lost_counts_as_run(tmp_path, monkeypatch):
    """Dask reruns a task whose worker died after the chunk was complete but
    before its answer reached the client; the rerun finds the chunk done and
    reports that it did not run.  The stats count chunks off the store, so
    the chunk still counts as run by this call, not as skipped."""
    from gear.simulation import rollout
    arm, q0, dq0 = _arm_batch(6)
    real = rollout.run_chunk

    def answer_lost(*args, **kw):
        first = real(*args, **kw)
        again = real(*args, **kw)              # what the rerun task reports
        assert first["ran"] and not again["ran"]
        return again if args[-1] == 1 else first

    monkeypatch.setattr(rollout, "run_chunk", answer_lost)
    tr = gear.simulate(arm, q0, dq0, 0.02, 1e-3, out=str(tmp_path / "l.zarr"), chunks=3)
    st = tr.stats
    assert (st["chunks_run"], st["chunks_skipped"], st["chunks_retried"]) == (3, 0, 0)
    assert len(st["chunk_wall_times"]) == 3 and min(st["chunk_wall_times"]) > 0


def test_a_chunk_not_marked_complete_is_rewritten(tmp_path):
    """A chunk whose writer died before ``done`` (rows half written, here
    overwritten with garbage) runs again on resume; complete ones are
    skipped; the store ends equal to the in-memory run."""
    sysm, qb, dq = _four_bar_batch(6)
    mem = gear.simulate(sysm, qb, dq, 0.2, 1e-2, record_every=3)
    path = tmp_path / "f.zarr"
    gear.simulate(sysm, qb, dq, 0.2, 1e-2, record_every=3, out=str(path), chunks=3)
    g = zarr.open_group(str(path), mode="r+")
    g["q"][2:4, 1:] = np.nan
    g["lam"][2:4] = 7.0
    g["done"][1] = 0
    tr = gear.simulate(sysm, qb, dq, 0.2, 1e-2, record_every=3, out=str(path), resume=True)
    assert (tr.stats["chunks_run"], tr.stats["chunks_skipped"], tr.stats["chunks_retried"]) == (1, 2, 0)
    assert list(g["attempts"][...]) == [1, 2, 1]
    _assert_store_equals(path, mem)
    assert tr.stats["max_residual"] < 1e-6 and tr.stats["solver"] == "kkt"


def test_a_campaign_reports_the_projections_iterations(tmp_path):
    """A projected campaign reports ``gauss_newton_per_step`` as the run
    without a store does (each chunk's in ``chunk_stats``, weighted by its
    rollouts: here 3, 3 and 1); a store of format 1 (four columns, from
    before gear kept it) is still resumed, without it; a store of a later
    format is refused."""
    from gear._output import STORE_FORMAT

    sysm, qb, dq = _four_bar_batch(7)
    mem = gear.simulate(sysm, qb, dq, 0.2, 2e-2, record_every=5)
    path = tmp_path / "p.zarr"
    tr = gear.simulate(sysm, qb, dq, 0.2, 2e-2, record_every=5, out=str(path), chunks=3)
    g = zarr.open_group(str(path), mode="r+")
    its = g["chunk_stats"][:, 4]
    assert g["chunk_stats"].shape == (3, 5) and len(set(its.tolist())) == 3     # the chunks differ
    assert mem.stats["gauss_newton_per_step"] > 1.0
    assert tr.stats["gauss_newton_per_step"] == pytest.approx(mem.stats["gauss_newton_per_step"], rel=1e-12)
    assert g.attrs["stats"]["gauss_newton_per_step"] == tr.stats["gauss_newton_per_step"]
    assert g.attrs["gear_store"]["format"] == STORE_FORMAT == 2
    # the store as gear wrote it before: four columns, format 1
    old = g["chunk_stats"][:, :4]
    del g["chunk_stats"]
    g.create_array("chunk_stats", shape=(3, 4), chunks=(1, 4), dtype="f8", fill_value=float("nan"))
    g["chunk_stats"][...] = old
    g.attrs["gear_store"] = {**g.attrs["gear_store"], "format": 1}
    g["done"][1] = 0
    again = gear.simulate(sysm, qb, dq, 0.2, 2e-2, record_every=5, out=str(path), resume=True)
    assert (again.stats["chunks_run"], again.stats["chunks_skipped"]) == (1, 2)
    assert "gauss_newton_per_step" not in again.stats
    assert g["chunk_stats"].shape == (3, 4) and g["chunk_stats"][1, 0] > 0 and g["chunk_stats"][1, 3] == 1.0
    _assert_store_equals(path, mem)
    # a later format: refused before anything is written
    g.attrs["gear_store"] = {**g.attrs["gear_store"], "format": STORE_FORMAT + 1}
    g["done"][1] = 0
    with pytest.raises(ValueError, match="written by a later gear"):
        gear.simulate(sysm, qb, dq, 0.2, 2e-2, record_every=5, out=str(path), resume=True)
    assert list(g["attempts"][...]) == [1, 2, 1]


def test_resume_names_the_first_difference(tmp_path):
    arm, q0, dq0 = _arm_batch(6)
    path = str(tmp_path / "r.zarr")
    tau = np.full((6, arm.nv), 0.1)
    base = dict(record_every=5, out=path, chunks=2, tau=tau)
    gear.simulate(arm, q0, dq0, 0.02, 1e-3, **base)
    cases = [
        (dict(dt=2e-3), "its dt is 0.001"),
        (dict(t_final=0.03), "t_final"),
        (dict(q0=q0 + 1e-12), "q0"),
        (dict(dq0=dq0[::-1]), "dq0"),
        (dict(tau=tau * 2), "tau"),
        (dict(integrator="euler"), "integrator"),
        (dict(record_every=4), "record_every"),
        (dict(chunks=3), "chunks"),
        (dict(native=False), "native"),
        (dict(model=gear.load_urdf(gear.data_path("arm7.urdf"), floating_base=True)), "model_hash"),
    ]
    for change, needle in cases:
        kw = dict(base, resume=True)
        args = dict(model=arm, q0=q0, dq0=dq0, t_final=0.02, dt=1e-3)
        for k in list(change):
            if k in args:
                args[k] = change.pop(k)
        if args["model"].nq != arm.nq:
            args["q0"] = args["model"].random_configuration(np.random.default_rng(0), n=6)
            args["dq0"] = np.zeros((6, args["model"].nv))
            kw["tau"] = np.zeros((6, args["model"].nv))
        kw.update(change)
        with pytest.raises(ValueError, match="different campaign") as exc:
            gear.simulate(args["model"], args["q0"], args["dq0"], args["t_final"], args["dt"], **kw)
        assert needle in str(exc.value) and "\n" not in str(exc.value)
    # the same campaign (chunks taken from the store): nothing runs
    tr = gear.simulate(arm, q0, dq0, 0.02, 1e-3, record_every=5, out=path, tau=tau, resume=True)
    assert (tr.stats["chunks_run"], tr.stats["chunks_skipped"]) == (0, 2)
    # a store from before campaign records is not resumed
    old = tmp_path / "old.zarr"
    root = zarr.open_group(str(old), mode="w-")
    root.attrs.update({"model_hash": "x", "gear_version": gear.__version__})
    root.create_array("q", shape=(2, 3), dtype="f8")
    with pytest.raises(ValueError, match="without a campaign record"):
        gear.simulate(arm, q0, dq0, 0.02, 1e-3, out=str(old), resume=True)


def test_resume_rules(tmp_path):
    arm, q0, dq0 = _arm_batch(4)
    path = str(tmp_path / "new.zarr")
    with pytest.raises(ValueError, match="give one or the other"):
        gear.simulate(arm, q0, dq0, 0.01, 1e-3, out=path, mode="w", resume=True)
    with pytest.raises(ValueError, match="out="):
        gear.simulate(arm, q0, dq0, 0.01, 1e-3, resume=True)
    with pytest.raises(ValueError, match="resume must be"):
        gear.simulate(arm, q0, dq0, 0.01, 1e-3, out=path, resume="yes")
    with pytest.raises(ValueError, match="chunks must be"):
        gear.simulate(arm, q0, dq0, 0.01, 1e-3, out=path, chunks=0)
    assert not os.path.exists(path)
    # no store yet: resume starts the campaign
    tr = gear.simulate(arm, q0, dq0, 0.01, 1e-3, out=path, resume=True, chunks=2)
    assert (tr.stats["chunks_run"], tr.stats["chunks_skipped"]) == (2, 0)


def test_cli_resume(tmp_path, capsys):
    out = str(tmp_path / "c.zarr")
    args = ["simulate", "arm7", "--batch", "6", "--t", "0.02", "--out", out, "--no-progress"]
    assert main(args + ["--chunks", "3"]) == 0
    assert "3 chunk(s) run, 0 already complete, of 3" in capsys.readouterr().out
    g = zarr.open_group(out, mode="r+")
    g["done"][2] = 0
    assert main(args + ["--resume"]) == 0
    assert "1 chunk(s) run, 2 already complete, of 3" in capsys.readouterr().out
    assert main(args + ["--resume", "--seed", "1"]) == 1
    assert "q0" in capsys.readouterr().err
    assert main(args + ["--resume", "--overwrite"]) == 2
    assert main(["simulate", "arm7", "--resume"]) == 2
    assert "--out" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# on a cluster
# ---------------------------------------------------------------------------
def test_distributed_store_equals_the_local_store(cluster, tmp_path, capsys):
    _, client = cluster
    sysm, qb, dq = _four_bar_batch(7)
    mem = gear.simulate(sysm, qb, dq, 0.2, 1e-2, record_every=2)
    local = gear.simulate(sysm, qb, dq, 0.2, 1e-2, record_every=2, out=str(tmp_path / "l.zarr"), chunks=4)
    capsys.readouterr()
    dist = gear.simulate(sysm, qb, dq, 0.2, 1e-2, record_every=2, out=str(tmp_path / "d.zarr"), chunks=4,
                         client=client, progress=True)
    err = capsys.readouterr().err
    assert "4/4" in err and "chunk" in err and "dashboard" not in err     # a bar over chunks; no dashboard
    _assert_store_equals(tmp_path / "l.zarr", mem)
    _assert_store_equals(tmp_path / "d.zarr", mem)
    assert isinstance(dist.q, zarr.Array) and isinstance(dist.lam, zarr.Array)
    st = dist.stats
    assert (st["chunks"], st["chunks_run"], st["chunks_skipped"], st["workers"]) == (4, 4, 0, 2)
    assert st["max_residual"] == local.stats["max_residual"]
    # default chunking on the cluster: two per worker thread, Zarr chunks aligned with them
    arm, q0, dq0 = _arm_batch(12)
    tr = gear.simulate(arm, q0, dq0, 0.02, 1e-3, out=str(tmp_path / "a.zarr"), client=client)
    g = zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    assert tr.stats["chunks"] == 4 and g["q"].chunks[0] == 3
    _assert_store_equals(tmp_path / "a.zarr", gear.simulate(arm, q0, dq0, 0.02, 1e-3))
    # resumed on the cluster: nothing left to run
    again = gear.simulate(arm, q0, dq0, 0.02, 1e-3, out=str(tmp_path / "a.zarr"), client=client, resume=True)
    assert (again.stats["chunks_run"], again.stats["chunks_skipped"]) == (0, 4)


def _wait_for_done(path, at_least, proc=None, timeout=60.0, running=0):
    """Poll the store's completion markers until ``at_least`` are set (and
    ``running`` chunks have started and are not complete)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the campaign process ended early: {proc.communicate()}")
        try:
            g = zarr.open_group(str(path), mode="r")
            done = g["done"][...]
            started = int(((g["attempts"][...] > 0) & (done == 0)).sum()) if running else 0
            if done.sum() >= at_least and started >= running:
                return done
        except Exception:          # the store is still being laid out
            pass
        time.sleep(0.01)
    raise AssertionError("the campaign did not progress")


_CAMPAIGN = textwrap.dedent("""
    import json, sys
    import numpy as np
    import gear
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(0)
    q0, dq0 = arm.random_configuration(rng, n=48), rng.standard_normal((48, arm.nv))
    client = None
    if sys.argv[2] != "local":
        from distributed import Client
        client = Client(sys.argv[2])
    tr = gear.simulate(arm, q0, dq0, 12.0, 1e-3, record_every=100, out=sys.argv[1], chunks=16,
                       client=client, resume=True, progress=False)
    print(json.dumps({k: tr.stats[k] for k in ("chunks_run", "chunks_skipped", "chunks_retried")}))
""")


def _campaign_reference():
    arm, q0, dq0 = _arm_batch(48)
    return gear.simulate(arm, q0, dq0, 12.0, 1e-3, record_every=100)


@pytest.mark.parametrize("where", ["cluster", "local"])
def test_a_killed_client_costs_only_the_unfinished_chunks(where, tmp_path, request):
    """The process running the campaign is killed with SIGKILL mid-way;
    ``resume=True`` in a fresh process runs only the chunks not marked
    complete, and the store equals an uninterrupted run bit for bit."""
    address = "local"
    if where == "cluster":
        address = request.getfixturevalue("cluster")[0].scheduler_address
    path = tmp_path / "k.zarr"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-c", _CAMPAIGN, str(path), address], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    try:
        _wait_for_done(path, 4, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done_at_kill = int(zarr.open_group(str(path), mode="r")["done"][...].sum())
    assert done_at_kill < 16, "the campaign finished before it was killed: make it longer"
    res = subprocess.run([sys.executable, "-c", _CAMPAIGN, str(path), address], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout.strip().splitlines()[-1])
    assert st["chunks_run"] + st["chunks_skipped"] == 16
    assert 1 <= st["chunks_run"] <= 16 - done_at_kill and st["chunks_skipped"] >= done_at_kill
    _assert_store_equals(path, _campaign_reference())


def test_a_killed_worker_leaves_the_store_right(cluster, tmp_path):
    """A worker process killed mid-campaign: Dask reruns its chunks (the
    nanny starts a new worker), the store is right bit for bit, and the
    rerun chunks are counted."""
    _, client = cluster
    arm, q0, dq0 = _arm_batch(48)
    path = tmp_path / "w.zarr"
    box = {}

    def run():
        try:
            box["tr"] = gear.simulate(arm, q0, dq0, 12.0, 1e-3, record_every=100, out=str(path), chunks=16,
                                      client=client, progress=False)
        except BaseException as exc:           # reported by the assertion below
            box["error"] = exc

    th = threading.Thread(target=run)
    th.start()
    # both workers (one thread each) inside a chunk: the one killed has a chunk half run
    done = _wait_for_done(path, 3, running=2)
    pids = client.run(os.getpid)
    os.kill(next(iter(pids.values())), signal.SIGKILL)
    th.join(120)
    assert "error" not in box, box.get("error")
    assert done.sum() < 16
    st = box["tr"].stats
    attempts = zarr.open_group(str(path), mode="r")["attempts"][...]
    # the chunk the worker died in ran again and is counted (almost always one: both workers
    # were inside a chunk; the kill may still fall between two chunks, when nothing is lost)
    assert st["chunks_run"] == 16 and st["chunks_retried"] == int((attempts > 1).sum())
    assert int(attempts.sum()) == 16 + st["chunks_retried"]
    _assert_store_equals(path, _campaign_reference())
    client.wait_for_workers(2, timeout=30)


_MEMORY = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import gear
    from distributed import Client, LocalCluster

    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    if __name__ == "__main__":
        arm = gear.load_urdf(gear.data_path("arm7.urdf"))
        rng = np.random.default_rng(0)
        N = 256
        q0, dq0 = arm.random_configuration(rng, n=N), rng.standard_normal((N, arm.nv))
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=50) as cl, Client(cl) as client:
            gear.simulate(arm, q0[:4], dq0[:4], 0.01, 1e-3, out=sys.argv[1] + "/warm.zarr", client=client,
                          progress=False)
            before = peak_mb()
            tr = gear.simulate(arm, q0, dq0, 10.0, 1e-3, out=sys.argv[1] + "/big.zarr", client=client,
                               progress=False)
            after = peak_mb()
        nbytes = sum(getattr(tr, k).nbytes for k in ("t", "q", "dq"))
        print(json.dumps({"before": before, "after": after, "nbytes": nbytes, "chunks": tr.stats["chunks"],
                          "wall": tr.stats["wall_time"]}))
""")


def test_client_memory_does_not_grow_with_the_campaign(tmp_path):
    """A 287 MB campaign (256 arm rollouts x 10,001 frames) on 2 workers:
    the client's peak resident memory grows by less than 150 MB (gathering
    the trajectories alone would add 287 MB)."""
    pytest.importorskip("distributed", reason="dask.distributed is the optional 'campaign' extra")
    res = subprocess.run([sys.executable, "-c", _MEMORY, str(tmp_path)], capture_output=True, text=True,
                         timeout=240)
    assert res.returncode == 0, res.stderr
    m = json.loads(res.stdout.strip().splitlines()[-1])
    assert m["nbytes"] > 250e6
    assert m["after"] - m["before"] < 150.0, m
    # spot checks against the local run of a few rollouts
    arm, q0, dq0 = _arm_batch(256)
    g = zarr.open_group(str(tmp_path / "big.zarr"), mode="r")
    rows = [0, 131, 255]
    ref = gear.simulate(arm, q0[rows], dq0[rows], 10.0, 1e-3)
    for i, r in enumerate(rows):
        assert np.array_equal(g["q"][r], ref.q[i]) and np.array_equal(g["dq"][r], ref.dq[i])


def test_the_dashboard_link_is_printed_when_there_is_one(capsys):
    """The link goes to stderr when the scheduler serves a dashboard, and
    not when it serves none or only the page asking for bokeh."""
    import http.server

    from gear.simulation import cluster as gc

    body = {"page": b"<html>dashboard</html>"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body["page"])

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()

    class FakeClient:
        dashboard_link = f"http://127.0.0.1:{srv.server_address[1]}/status"

        def __init__(self, services):
            self.services = services

        def scheduler_info(self):
            return {"services": self.services, "workers": {}}

    try:
        gc._announce_dashboard(FakeClient({"dashboard": 1}), None)
        assert capsys.readouterr().err.strip() == f"gear.simulate: Dask dashboard at {FakeClient.dashboard_link}"
        gc._announce_dashboard(FakeClient({"dashboard": 1}), False)
        gc._announce_dashboard(FakeClient({}), None)
        body["page"] = b"<p>Dask needs bokeh>=3 for the dashboard.</p>"
        gc._announce_dashboard(FakeClient({"dashboard": 1}), None)
        assert capsys.readouterr().err == ""
    finally:
        srv.shutdown()


def test_a_task_of_a_replaced_store_writes_nothing(tmp_path, monkeypatch):
    """A chunk's task left running by a killed client must not write into
    a store that was replaced (mode='w') by another campaign meanwhile."""
    from gear.simulation import rollout

    camps = []
    real = rollout.run_campaign
    monkeypatch.setattr(rollout, "run_campaign", lambda camp, *a: camps.append(camp) or real(camp, *a))
    arm, q0, dq0 = _arm_batch(4)
    path = str(tmp_path / "s.zarr")
    gear.simulate(arm, q0, dq0, 0.02, 1e-3, out=path, chunks=2)
    old = camps[-1]
    gear.simulate(arm, q0, dq0, 0.03, 1e-3, out=path, chunks=2, mode="w")
    g = zarr.open_group(path, mode="r+")
    g["done"][0] = 0
    before = {k: g[k][...].copy() for k in ("q", "dq", "attempts", "done")}
    from gear.simulation.integrators import _System

    S = _System(arm, None, None, 4, False, None, (0.0, 0.0))
    with pytest.raises(RuntimeError, match="replaced by another campaign"):
        rollout.run_chunk(arm, q0[:2], dq0[:2], S.tau, S.f_ext, old, 0)
    for k, v in before.items():
        assert np.array_equal(g[k][...], v), k


def test_a_chunk_that_blows_up_names_the_rollout_of_the_batch(tmp_path):
    """The error of a rollout in chunk 1 names its place in the whole
    batch; the chunk is not marked complete, the one before it is."""
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    Q = np.stack([arm.neutral()] * 4)
    DQ = np.zeros((4, arm.nv))
    DQ[3] = 1e200
    path = str(tmp_path / "b.zarr")
    with pytest.raises(FloatingPointError, match=r"rollout 3 \(of 4\)"):
        gear.simulate(arm, Q, DQ, 0.05, 1e-3, out=path, chunks=2)
    assert list(zarr.open_group(path, mode="r")["done"][...]) == [1, 0]

"""Campaigns of a gear.MaximalModel: ``out=``, ``resume=``, ``chunks=``,
``mode=`` and ``client=`` with the machinery of reduced runs (campaign
chunks along the batch, completion markers, the campaign's identity,
workers writing their own chunks).

Oracle: the in-memory run (:func:`gear.simulation.maximal.run_maximal`)
of the same states, bit for bit, for any chunking (each state's solves
converge on their own).  The cluster tests run a
``distributed.LocalCluster`` of 2 worker processes with nannies, 1 thread
each."""
import os

import numpy as np
import pytest

import gear

zarr = pytest.importorskip("zarr", reason="stores need the optional 'campaign' extra")

ARRAYS = ("t", "q", "dq", "lam", "poses", "twists", "joint_error")
RUN = dict(t_final=0.1, dt=1e-2, integrator="rkmk4", record_every=2)


@pytest.fixture(scope="module")
def four_bar():
    sysm, q = gear.mechanisms.four_bar()
    rng = np.random.default_rng(2)
    qb = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(3))) for _ in range(7)])
    dq = np.stack([sysm.project_velocity(x, rng.standard_normal(3)) for x in qb])
    return sysm, gear.MaximalModel(sysm), qb, dq


def _chunked_reference(mx, qb, dq, rows, **kw):
    """The in-memory runs of each chunk's states, in batch order."""
    parts = [gear.simulate(mx, qb[a:a + rows], dq[a:a + rows], **kw) for a in range(0, len(qb), rows)]
    ref = {k: np.concatenate([getattr(p, k) for p in parts]) for k in ARRAYS if k != "t"}
    ref["t"] = parts[0].t
    return ref


def _assert_store_equals(path, ref):
    g = zarr.open_group(str(path), mode="r")
    for k in ARRAYS:
        want = ref[k] if isinstance(ref, dict) else getattr(ref, k)
        got = g[k][...]
        assert got.shape == np.shape(want) and got.tobytes() == np.ascontiguousarray(want).tobytes(), k
    assert g["done"][...].all()


def test_local_store_equals_the_in_memory_run(four_bar, tmp_path):
    sysm, mx, qb, dq = four_bar
    mem = gear.simulate(mx, qb, dq, **RUN)
    tr = gear.simulate(mx, qb, dq, **RUN, out=str(tmp_path / "a.zarr"), chunk=4)
    _assert_store_equals(tmp_path / "a.zarr", mem)
    assert isinstance(tr.poses, zarr.Array) and tr.poses.shape == (7, 6, 3, 4, 4)
    g = zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    assert g["poses"].chunks == (7, 4, 3, 4, 4) and g["joint_error"].chunks == (7, 4)
    assert g["lam"].shape == (7, 6, mx.nrows)
    st = tr.stats
    assert (st["chunks"], st["chunks_run"], st["chunks_skipped"], st["chunks_retried"]) == (1, 1, 0, 0)
    assert st["formulation"] == "maximal" and st["max_joint_error"] == mem.stats["max_joint_error"]
    assert g.attrs["campaign"]["formulation"] == "maximal" and g.attrs["stats"]["chunks_run"] == 1
    # three chunks: each its own Zarr chunks along the batch, each the run of its states
    tr3 = gear.simulate(mx, qb, dq, **RUN, out=str(tmp_path / "c.zarr"), chunks=3)
    _assert_store_equals(tmp_path / "c.zarr", _chunked_reference(mx, qb, dq, 3, **RUN))
    # ... and the whole batch's run: each state's solves converge on their own
    for integ in ("euler", "rkmk4"):
        whole = gear.simulate(mx, qb, dq, **dict(RUN, integrator=integ))
        gear.simulate(mx, qb, dq, **dict(RUN, integrator=integ), out=str(tmp_path / f"w{integ}.zarr"), chunks=3)
        _assert_store_equals(tmp_path / f"w{integ}.zarr", whole)
    assert zarr.open_group(str(tmp_path / "c.zarr"), mode="r")["q"].chunks[0] == 3
    assert tr3.stats["chunks"] == 3 and list(zarr.open_group(str(tmp_path / "c.zarr"))["attempts"][...]) == [1] * 3
    # one rollout: no batch axis; started from poses, with torques
    P, V = mx.state(qb[1], dq[1])
    kw = dict(RUN, poses0=P, twists0=V, tau=[0.5, 0.0, 0.0])
    one = gear.simulate(mx, None, None, **kw, out=str(tmp_path / "one.zarr"))
    assert one.poses.shape == (6, 3, 4, 4) and one.joint_error.shape == (6,)
    _assert_store_equals(tmp_path / "one.zarr", gear.simulate(mx, None, None, **kw))


def test_resume_runs_only_the_incomplete_chunk(four_bar, tmp_path):
    """A chunk whose writer died before ``done`` (rows garbled here) runs
    again; the complete ones are skipped."""
    sysm, mx, qb, dq = four_bar
    path = tmp_path / "r.zarr"
    kw = dict(RUN, integrator="euler", out=str(path), chunks=3)
    gear.simulate(mx, qb, dq, **kw)
    g = zarr.open_group(str(path), mode="r+")
    g["poses"][3:6, 2:] = np.nan
    g["lam"][3:6] = 7.0
    g["done"][1] = 0
    tr = gear.simulate(mx, qb, dq, **kw, resume=True)
    assert (tr.stats["chunks_run"], tr.stats["chunks_skipped"], tr.stats["chunks_retried"]) == (1, 2, 0)
    assert list(g["attempts"][...]) == [1, 2, 1]
    _assert_store_equals(path, _chunked_reference(mx, qb, dq, 3, **dict(RUN, integrator="euler")))
    # the store's chunking is the default when resuming; nothing is left to run
    again = gear.simulate(mx, qb, dq, **dict(kw, chunks=None), resume=True)
    assert (again.stats["chunks_run"], again.stats["chunks_skipped"]) == (0, 3)


def test_resume_names_the_difference(four_bar, tmp_path):
    sysm, mx, qb, dq = four_bar
    soft = gear.MaximalModel(sysm, stiffness=1e4, damping=10.0)
    path = str(tmp_path / "s.zarr")
    kw = dict(RUN, integrator="implicit", out=path, chunks=2)
    gear.simulate(soft, qb, dq, **kw)
    cases = [
        (gear.MaximalModel(sysm, stiffness=1e3, damping=10.0), {}, "its stiffness is 10000.0, this run's is 1000.0"),
        (gear.MaximalModel(sysm, stiffness=1e4, damping=1.0), {}, "its damping is 10.0, this run's is 1.0"),
        (mx, {}, "its stiffness is 10000.0, this run's is null"),
        (soft, dict(tau=np.full(3, 0.1)), "its tau is"),
        (soft, dict(chunks=3), "its chunks is 2, this run's is 3"),
        (sysm, dict(integrator="rk4"), "its formulation is 'maximal', this run's is 'reduced'"),
    ]
    for target, change, msg in cases:
        with pytest.raises(ValueError, match="different campaign: " + msg.replace("(", r"\(").replace(")", r"\)")):
            gear.simulate(target, qb, dq, **{**kw, **change}, resume=True)
    # and a maximal run resuming a reduced store
    red = str(tmp_path / "red.zarr")
    gear.simulate(sysm, qb, dq, 0.1, 1e-2, out=red)
    with pytest.raises(ValueError, match="its formulation is 'reduced', this run's is 'maximal'"):
        gear.simulate(mx, qb, dq, 0.1, 1e-2, out=red, resume=True)
    assert list(zarr.open_group(path, mode="r")["attempts"][...]) == [1, 1]      # nothing ran


def test_out_refuses_what_gear_did_not_write(four_bar, tmp_path):
    sysm, mx, qb, dq = four_bar
    user = tmp_path / "results"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    for mode in (None, "w"):
        with pytest.raises(FileExistsError, match="not a gear store"):
            gear.simulate(mx, qb, dq, **RUN, out=str(user), mode=mode)
    assert (user / "notes.txt").read_text() == "mine" and sorted(os.listdir(user)) == ["notes.txt"]
    # a maximal store: replaced with mode="w" only, and not when it holds a user's file
    path = tmp_path / "m.zarr"
    gear.simulate(mx, qb[:2], dq[:2], **RUN, out=str(path))
    with pytest.raises(FileExistsError, match="earlier run"):
        gear.simulate(mx, qb[:2], dq[:2], **RUN, out=str(path))
    # a bad argument is refused before the store is touched
    with pytest.raises(ValueError, match="unknown integrator"):
        gear.simulate(mx, qb[:2], dq[:2], **dict(RUN, integrator="dop853"), out=str(path), mode="w")
    assert zarr.open_group(str(path), mode="r")["done"][...].all()
    tr = gear.simulate(mx, qb[:3], dq[:3], **RUN, out=str(path), mode="w")
    assert tr.poses.shape[0] == 3
    (path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="did not write"):
        gear.simulate(mx, qb[:2], dq[:2], **RUN, out=str(path), mode="w")
    assert (path / "keep.txt").read_text() == "mine"


def test_a_chunk_that_blows_up_names_its_rollouts(four_bar, tmp_path):
    sysm, mx, qb, dq = four_bar
    DQ = dq[:4].copy()
    DQ[3] = 1e200
    path = str(tmp_path / "b.zarr")
    with pytest.raises(FloatingPointError, match=r"non-finite .* rollouts 2 to 3 of 4"):
        gear.simulate(mx, qb[:4], DQ, **dict(RUN, integrator="euler"), out=path, chunks=2)
    assert list(zarr.open_group(path, mode="r")["done"][...]) == [1, 0]


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed", reason="dask.distributed is the optional 'campaign' extra")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cl, distributed.Client(cl) as client:
        yield cl, client


def test_a_cluster_store_equals_the_local_store(four_bar, cluster, tmp_path):
    """Each worker writes its own chunks; the store equals the local one
    (and the in-memory runs of its chunks) bit for bit; gathered without
    a store, the same arrays; resumed on the cluster, only the incomplete
    chunk runs."""
    _, client = cluster
    sysm, mx, qb, dq = four_bar
    kw = dict(RUN, chunks=3)
    local = tmp_path / "l.zarr"
    gear.simulate(mx, qb, dq, **kw, out=str(local))
    dist = tmp_path / "d.zarr"
    tr = gear.simulate(mx, qb, dq, **kw, out=str(dist), client=client, progress=False)
    ref = {k: zarr.open_group(str(local), mode="r")[k][...] for k in ARRAYS}
    _assert_store_equals(dist, ref)
    _assert_store_equals(dist, _chunked_reference(mx, qb, dq, 3, **RUN))
    st = tr.stats
    assert (st["chunks"], st["chunks_run"], st["chunks_skipped"], st["workers"]) == (3, 3, 0, 2)
    assert isinstance(tr.twists, zarr.Array) and st["formulation"] == "maximal"
    gathered = gear.simulate(mx, qb, dq, **kw, client=client, progress=False)
    for k in ARRAYS:
        assert np.asarray(getattr(gathered, k)).tobytes() == ref[k].tobytes(), k
    assert gathered.stats["chunks"] == 3 and gathered.stats["max_joint_error"] == st["max_joint_error"]
    g = zarr.open_group(str(dist), mode="r+")
    g["q"][6:] = np.nan
    g["done"][2] = 0
    again = gear.simulate(mx, qb, dq, **dict(RUN), out=str(dist), client=client, resume=True, progress=False)
    assert (again.stats["chunks_run"], again.stats["chunks_skipped"]) == (1, 2)
    assert list(g["attempts"][...]) == [1, 1, 2]
    _assert_store_equals(dist, ref)

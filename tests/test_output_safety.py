"""Nothing a user owns is ever deleted: every command and function that
writes refuses a location holding files gear did not write, before any
work, and replaces its own earlier output only when told to."""
import hashlib
import json
import os

import numpy as np
import pytest

import gear
from gear import _output
from gear.cli import main

zarr = pytest.importorskip("zarr", reason="stores need the optional 'campaign' extra")


def _user_folder(root):
    """A folder of user files, a nested one among them."""
    d = root / "project"
    (d / "sub").mkdir(parents=True)
    (d / "notes.txt").write_text("my notes\n")
    (d / "sub" / "data.csv").write_bytes(b"1,2,3\n4,5,6\n")
    (d / "report.json").write_text('{"mine": true}')          # a name gear also writes
    (d / "zarr.json").write_text('{"node_type": "group", "attributes": {}}')   # someone else's store
    (root / "beside.txt").write_text("in the parent\n")
    return d


def _snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for f in filenames:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
    return out


def test_every_writer_refuses_a_user_folder_and_its_parent(tmp_path, monkeypatch, capsys):
    user = _user_folder(tmp_path)
    before = _snapshot(tmp_path)
    monkeypatch.chdir(user)
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    four, q4 = gear.mechanisms.four_bar()
    for target in (str(user), str(tmp_path), ".", "..", "sub", "notes.txt"):
        for mode in (None, "w"):
            with pytest.raises(FileExistsError, match="gear"):
                gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, out=target, mode=mode)
            with pytest.raises(FileExistsError):
                gear.simulate(four, q4, np.zeros(3), 0.01, 1e-3, out=target, mode=mode)
            # refused before the cluster is touched
            with pytest.raises(FileExistsError):
                gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, out=target, mode=mode,
                              client=object())
        for extra in ([], ["--overwrite"]):
            assert main(["simulate", "arm7", "--t", "0.01", "--out", target, "--no-progress"] + extra) == 1
            assert main(["compare", "four-bar", "--t", "0.01", "--out", target, "--no-progress"] + extra) == 1
            assert main(["analyze", "four-bar", "--points", "5", "--out", target, "--no-progress"]
                        + extra) == 1
            assert main(["bench", "--quick", "--json", target] + extra) == 1
    for name in ("report.json", "notes.txt", "sub/data.csv"):
        assert main(["bench", "--quick", "--json", name, "--overwrite"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for line in err.strip().splitlines():
        assert line.startswith("gear ") and "error:" in line
    assert _snapshot(tmp_path) == before


def test_the_refusal_comes_before_the_work(tmp_path, monkeypatch, capsys):
    """An expensive command on a refused path fails at once: the benchmark
    never runs (its first model is never loaded)."""
    user = _user_folder(tmp_path)
    calls = []
    monkeypatch.setattr(gear, "load_urdf", lambda *a, **k: calls.append(a) or 1 / 0)
    assert main(["bench", "--json", str(user / "notes.txt")]) == 1
    assert main(["simulate", "arm7", "--out", str(user)]) == 1
    assert calls == []
    assert "not a gear" in capsys.readouterr().err


def test_a_gear_store_is_replaced_only_with_mode_w(tmp_path):
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    store = tmp_path / "run.zarr"
    q0 = arm.neutral()
    a = gear.simulate(arm, q0, np.zeros(arm.nv), 0.01, 1e-3, out=str(store))
    assert zarr.open_group(str(store), mode="r").attrs["gear_store"]["arrays"] == [
        "t", "q", "dq", "done", "attempts", "chunk_stats"]
    first = np.asarray(a.q[...])
    with pytest.raises(FileExistsError, match="mode='w'"):
        gear.simulate(arm, q0, np.zeros(arm.nv), 0.02, 1e-3, out=str(store))
    assert np.array_equal(zarr.open_group(str(store), mode="r")["q"][...], first)
    b = gear.simulate(arm, q0, np.zeros(arm.nv), 0.02, 1e-3, out=str(store), mode="w")
    assert b.q.shape == (21, arm.nv)
    # a user's file put inside the store: even mode="w" leaves it (and the store) alone
    (store / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="mine.txt"):
        gear.simulate(arm, q0, np.zeros(arm.nv), 0.01, 1e-3, out=str(store), mode="w")
    assert (store / "mine.txt").read_text() == "keep"
    assert zarr.open_group(str(store), mode="r")["q"].shape == (21, arm.nv)


def test_empty_directories_and_new_paths_are_used(tmp_path):
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    empty = tmp_path / "empty"
    empty.mkdir()
    gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, out=str(empty))
    nested = tmp_path / "a" / "b" / "run.zarr"
    tr = gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, out=str(nested))
    assert tr.q.shape == (11, arm.nv)
    with pytest.raises(ValueError, match="mode"):
        gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, out=str(tmp_path / "x"), mode="a")
    with pytest.raises(ValueError, match="out="):
        gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, mode="w")


def test_a_store_from_before_the_marker_is_recognised(tmp_path):
    """Stores written by earlier gear versions (attributes model_hash and
    gear_version, no gear_store marker) are gear's: replaced with mode='w'."""
    store = tmp_path / "old.zarr"
    root = zarr.open_group(str(store), mode="w-")
    root.attrs.update({"model_hash": "x", "gear_version": "0.0.1"})
    root.create_array("q", shape=(2, 3), dtype="f8")
    with pytest.raises(FileExistsError, match="earlier run"):
        _output.claim_store(str(store))
    _output.claim_store(str(store), "w")
    assert not store.exists() or os.listdir(store) == []


def test_cli_overwrite_replaces_only_gears_own_output(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", "four-bar", "--t", "0.01", "--out", str(out), "--no-progress"]) == 0
    written = sorted(os.listdir(out))
    assert "report.json" in written and _output.MARKER in written
    assert main(["compare", "four-bar", "--t", "0.01", "--out", str(out), "--no-progress"]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert main(["compare", "four-bar", "--t", "0.01", "--out", str(out), "--no-progress", "--overwrite"]) == 0
    (out / "mine.txt").write_text("keep")
    assert main(["compare", "four-bar", "--t", "0.01", "--out", str(out), "--no-progress", "--overwrite"]) == 1
    assert (out / "mine.txt").read_text() == "keep"
    # another kind of gear output is not taken for this one
    assert main(["analyze", "four-bar", "--points", "5", "--out", str(out / ".."), "--no-progress"]) == 1
    js = tmp_path / "b" / "bench.json"
    assert main(["bench", "--quick", "--json", str(js)]) == 0
    assert json.loads(js.read_text())["schema"] == "gear.bench/1"
    assert main(["bench", "--quick", "--json", str(js)]) == 1
    assert "--overwrite" in capsys.readouterr().err


def test_report_directories_refuse_other_kinds_and_files(tmp_path):
    d = _output.claim_directory(tmp_path / "r", "analysis")
    _output.record_files(d, "analysis", ["analysis.json"])
    (tmp_path / "r" / "analysis.json").write_text("{}")
    with pytest.raises(FileExistsError, match="not a compare report"):
        _output.claim_directory(d, "compare report", overwrite=True)
    with pytest.raises(FileExistsError, match="earlier gear analysis"):
        _output.claim_directory(d, "analysis")
    _output.claim_directory(d, "analysis", overwrite=True)
    assert os.listdir(d) == [_output.MARKER]
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileExistsError, match="not a directory"):
        _output.claim_directory(tmp_path / "f", "analysis", overwrite=True)
    assert (tmp_path / "f").read_text() == "x"


def test_resume_takes_only_gears_own_store_and_removes_nothing(tmp_path, monkeypatch, capsys):
    """resume=True / --resume accepts an earlier gear store as it is: a
    user's folder or file is refused as before, a store holding a user's
    file is refused, a different campaign is refused with the store
    untouched, and a resumed store loses nothing."""
    user = _user_folder(tmp_path)
    before = _snapshot(tmp_path)
    monkeypatch.chdir(user)
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    q0 = arm.random_configuration(np.random.default_rng(0), n=4)
    for target in (str(user), str(tmp_path), ".", "..", "sub", "notes.txt"):
        with pytest.raises(FileExistsError, match="gear"):
            gear.simulate(arm, q0, np.zeros((4, arm.nv)), 0.01, 1e-3, out=target, resume=True)
        with pytest.raises(FileExistsError):
            gear.simulate(arm, q0, np.zeros((4, arm.nv)), 0.01, 1e-3, out=target, resume=True, client=object())
        with pytest.raises(ValueError, match="one or the other"):
            gear.simulate(arm, q0, np.zeros((4, arm.nv)), 0.01, 1e-3, out=target, resume=True, mode="w")
        assert main(["simulate", "arm7", "--t", "0.01", "--out", target, "--resume", "--no-progress"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert _snapshot(tmp_path) == before

    store = tmp_path / "camp.zarr"
    gear.simulate(arm, q0, np.zeros((4, arm.nv)), 0.01, 1e-3, out=str(store), chunks=2)
    kept = {k: v for k, v in _snapshot(store).items() if k != "zarr.json"}
    # a different campaign: refused, nothing written
    snap = _snapshot(store)
    with pytest.raises(ValueError, match="t_final"):
        gear.simulate(arm, q0, np.zeros((4, arm.nv)), 0.02, 1e-3, out=str(store), resume=True)
    assert _snapshot(store) == snap
    # the same campaign, complete: every chunk file stays as it was
    tr = gear.simulate(arm, q0, np.zeros((4, arm.nv)), 0.01, 1e-3, out=str(store), resume=True)
    assert tr.stats["chunks_skipped"] == 2
    assert {k: v for k, v in _snapshot(store).items() if k != "zarr.json"} == kept
    # a user's file put inside the store: resume refuses it too, and keeps it
    (store / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="mine.txt"):
        gear.simulate(arm, q0, np.zeros((4, arm.nv)), 0.01, 1e-3, out=str(store), resume=True)
    assert (store / "mine.txt").read_text() == "keep"


def test_zarrs_leftover_temporary_file_is_part_of_gears_store(tmp_path):
    """A writer killed while Zarr rewrote the root's zarr.json leaves
    ``zarr.<hex>.partial``: the store is still gear's (resumed, or replaced
    with mode='w'); a file merely named like it elsewhere is not."""
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    store = tmp_path / "s.zarr"
    gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, out=str(store))
    (store / ("zarr." + "0" * 32 + ".partial")).write_bytes(b"{")
    tr = gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, out=str(store), resume=True)
    assert tr.stats["chunks_skipped"] == 1
    _output.claim_store(str(store), "w")
    assert not os.listdir(store)
    (store / "zarr.notours.partial").write_text("user's")
    with pytest.raises(FileExistsError, match="not a gear store"):
        _output.claim_store(str(store), "w", resume=False)
    assert (store / "zarr.notours.partial").read_text() == "user's"

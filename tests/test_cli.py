"""The ``gear`` command line, end to end in subprocesses: exit codes,
outputs written, one-line errors."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gear

HERE = os.path.dirname(os.path.abspath(__file__))


def run(*args, cwd=None):
    env = dict(os.environ, MPLBACKEND="Agg")
    env.pop("GEAR_DEBUG", None)
    p = subprocess.run([sys.executable, "-m", "gear.cli", *args], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=300)
    return p.returncode, p.stdout, p.stderr


def one_line_error(err, cmd):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"gear {cmd}: error: ") or lines[0].startswith(f"gear {cmd}: error:"), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("cmd", [[], ["info"], ["simulate"], ["compare"], ["analyze"], ["bench"], ["demo"],
                                 ["config"]])
def test_help_on_every_command(cmd):
    code, out, err = run(*cmd, "--help")
    assert code == 0 and out.startswith("usage: gear") and not err


def test_config_names_the_build_that_runs():
    import gear

    code, out, err = run("config")
    assert code == 0 and not err
    cfg = gear.show_config(file=False)
    assert f"simd : {cfg['simd']}" in out and "generic" in out and "threads : " in out


def test_console_script_is_installed():
    exe = os.path.join(os.path.dirname(sys.executable), "gear")
    assert os.path.exists(exe)
    p = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "compare" in p.stdout


def test_info_closed_chain_tree_and_files():
    code, out, err = run("info", "four-bar")
    assert code == 0, err
    assert "loops: 1 constraints, 3 rows" in out and "dof 1" in out and "Grübler count 0" in out
    code, out, err = run("info", "stewart")
    assert code == 0 and "dof 6" in out
    code, out, err = run("info", gear.data_path("arm7.urdf"))
    assert code == 0 and "nv = 7" in out and "open tree" in out
    code, out, err = run("info", "quadruped", "--floating-base")
    assert code == 0 and "Free" in out
    code, out, err = run("info", "fourbar")                         # MJCF with <equality connect>
    assert code == 0 and "loops: 1 constraints" in out
    code, out, err = run("info", "n-four-bar:5")
    assert code == 0 and "nv = 11" in out and "dof 1" in out


@pytest.mark.parametrize("args, needle", [
    (["info", "no/such/model.urdf"], "no model"),
    (["info", "no-such-mechanism"], "not a mechanism"),
    (["info", os.path.join(HERE, "data", "urdf_cycle.urdf")], "cycle"),
    (["info", os.path.join(HERE, "data", "mjcf_missing_body.xml")], "mjcf_missing_body"),
    (["info", __file__], "unknown model format"),
    (["info", HERE], "directory"),
    (["info", "n-four-bar:abc"], "integer"),
    (["analyze", "arm7"], "open tree"),
])
def test_bad_models_and_arguments_give_one_line_errors(args, needle, tmp_path):
    code, out, err = run(*args, cwd=tmp_path)
    assert code == 1, (out, err)
    assert needle in one_line_error(err, args[0])


@pytest.mark.parametrize("args, needle", [
    (["simulate", "four-bar", "--dt", "-1"], "--dt"),
    (["simulate", "four-bar", "--dt", "-1e-3"], "--dt: expected a positive float, got '-1e-3'"),
    (["simulate", "four-bar", "--t", "-.5"], "--t"),
    (["simulate", "four-bar", "--integrator", "leapfrog"], "leapfrog"),
    (["simulate", "four-bar", "--batch", "0"], "--batch"),
    (["nope"], "nope"),
    (["compare"], "MODEL"),
    (["analyze", "four-bar", "--sweep", "nope"], "--sweep: four-bar has no joint named 'nope'"),
    (["analyze", "four-bar", "--sweep", "crank", "--range", "1", "1"], "--range"),
    (["analyze", "four-bar", "--range", "-1e-1", "inf"], "--range"),
    (["analyze", "four-bar", "--speed", "nan"], "--speed"),
    (["simulate", "four-bar", "--solver", "nope", "--t", "0.01"], "--solver: unknown solver 'nope'"),
    (["compare", "four-bar", "--solvers", "kkt,nope", "--t", "0.01"], "--solvers: unknown solver 'nope'"),
    (["compare", "four-bar", "--solvers", "", "--t", "0.01"], "--solvers is empty"),
    (["compare", "four-bar", "--solvers", ",", "--no-maximal"], "--solvers is empty"),
    (["compare", "four-bar", "--integrator", "rk4,leapfrog"], "--integrator: expected one or more of euler, rk4"),
])
def test_bad_usage_exits_2_on_one_line(args, needle, tmp_path):
    """Bad usage exits 2, before any work or output, naming the flag."""
    code, out, err = run(*args, cwd=tmp_path)
    assert code == 2, (out, err)
    assert not out and not os.listdir(tmp_path)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1].startswith("gear") and "error:" in lines[-1] and "Traceback" not in err
    assert needle in lines[-1]
    assert len(lines) <= 2          # argparse's usage line, then the one-line error


def test_simulate_reports_the_projections_iterations(tmp_path):
    """A projected run says how many Gauss-Newton iterations its steps took
    (one each on the four-bar at 1 ms: the native loop's second-order
    step); a Baumgarte run has no projection to report."""
    code, out, err = run("simulate", "four-bar", "--t", "0.1", "--dt", "1e-3", "--integrator", "euler",
                         "--batch", "8", cwd=tmp_path)
    assert code == 0, err
    assert "before each step's projection" in out and "(Gauss-Newton iterations per step: 1.00)" in out
    code, out, err = run("simulate", "four-bar", "--t", "0.1", "--stabilization", "baumgarte", cwd=tmp_path)
    assert code == 0, err
    assert "residual of the states" in out and "Gauss-Newton" not in out


def test_simulate_writes_a_zarr_store(tmp_path):
    zarr = pytest.importorskip("zarr", reason="--out needs the 'campaign' extra (zarr)")
    code, out, err = run("simulate", "four-bar", "--t", "0.1", "--dt", "1e-3", "--out", "run.zarr",
                         cwd=tmp_path)
    assert code == 0, err
    assert "largest constraint residual" in out and "wrote run.zarr" in out
    assert not err          # stderr is not a terminal here: no progress bar
    g = zarr.open_group(str(tmp_path / "run.zarr"), mode="r")
    q = g["q"][...]
    assert q.shape == (101, 3) and g["t"][-1] == pytest.approx(0.1)
    sysm, q0 = gear.mechanisms.four_bar()
    assert np.abs(sysm.constraint_residual(q[-1])).max() <= 1e-10
    np.testing.assert_array_equal(q[0], q0)


def test_progress_bar_by_default_only_in_a_terminal(tmp_path):
    """stderr a terminal (a pseudo-terminal here): the bar is drawn with no
    flag; a pipe (every other test here): no bar."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))   # 120 columns
    env = dict(os.environ, MPLBACKEND="Agg")
    p = subprocess.run([sys.executable, "-m", "gear.cli", "simulate", "arm7", "--t", "0.05"],
                       stdout=subprocess.PIPE, stderr=slave, cwd=tmp_path, env=env, timeout=300)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    assert p.returncode == 0
    assert b"state-steps/s" in err and b"gear.simulate rk4" in err


def test_simulate_batch_of_a_tree_without_progress(tmp_path):
    code, out, err = run("simulate", "arm7", "--t", "0.02", "--batch", "8", "--no-progress")
    assert code == 0 and "8 rollout(s) x 20 steps" in out and not err


def test_compare_writes_report_json_and_pngs(tmp_path):
    pytest.importorskip("sksparse", reason="the maximal runs need scikit-sparse (the 'sparse' extra)")
    code, out, err = run("compare", "four-bar", "--t", "0.05", "--dt", "1e-3", "--out", "rep",
                         "--solvers", "kkt,soft", "--no-progress", cwd=tmp_path)
    assert code == 0, err
    files = sorted(f for f in os.listdir(tmp_path / "rep") if not f.startswith("."))
    assert files == ["cost.png", "deviation.png", "drift.png", "energy.png", "report.json", "report.md",
                     "residual.png", "work_precision.png"]
    d = gear.comparison.validate(str(tmp_path / "rep" / "report.json"))
    assert [r["name"] for r in d["runs"]] == ["kkt / euler", "kkt / rk4", "soft / euler", "soft / rk4",
                                             "maximal / euler", "maximal / euler, unstabilised",
                                             "maximal / rk4", "maximal / rk4, unstabilised"]
    assert len(d["work_precision"]) >= 3 * 8 and set(d["stability"]) == {r["name"] for r in d["runs"]}
    assert d["trees"] == []
    assert "| maximal / euler, unstabilised | maximal |" in out and "**Work precision**" in out


def test_compare_work_precision_factors(tmp_path):
    """--work-precision sets the study's factors of --dt (below 1: finer
    than --dt), 'none' skips it, and anything else is refused before any
    run."""
    code, out, err = run("compare", "four-bar", "--t", "0.02", "--dt", "2e-3", "--out", "rep", "--solvers", "kkt",
                         "--integrator", "rk4", "--no-maximal", "--work-precision", "0.5,1", "--no-progress",
                         cwd=tmp_path)
    assert code == 0, err
    d = gear.comparison.validate(str(tmp_path / "rep" / "report.json"))
    assert sorted(p["dt"] for p in d["work_precision"]) == pytest.approx([1e-3, 2e-3])
    assert d["settings"]["work_precision_factors"] == [0.5, 1.0]
    code, out, err = run("compare", "four-bar", "--t", "0.02", "--out", "none", "--solvers", "kkt",
                         "--integrator", "rk4", "--no-maximal", "--work-precision", "none", "--no-progress",
                         cwd=tmp_path)
    assert code == 0, err
    assert gear.comparison.validate(str(tmp_path / "none" / "report.json"))["work_precision"] == []
    assert "then stability limits" in out
    for bad in ("0,1", "-1", "a,b", "", "nan"):
        code, out, err = run("compare", "four-bar", "--out", "bad", "--work-precision", bad, cwd=tmp_path)
        assert code == 2 and "--work-precision: expected positive factors" in err, (bad, err)
    assert not (tmp_path / "bad").exists()


def test_compare_n_four_bar_times_both_spanning_trees(tmp_path):
    pytest.importorskip("sksparse", reason="the maximal runs need scikit-sparse (the 'sparse' extra)")
    code, out, err = run("compare", "n-four-bar:3", "--t", "0.02", "--dt", "1e-3", "--integrator", "rk4",
                         "--solvers", "kkt", "--out", "rep", "--no-progress", cwd=tmp_path)
    assert code == 0, err
    d = gear.comparison.validate(str(tmp_path / "rep" / "report.json"))
    assert [t["tree"] for t in d["trees"]] == ["chain", "ground"]
    assert [t["depth"] for t in d["trees"]] == [7, 2] and d["trees"][1]["body_deviation"] < 1e-9
    assert "spanning trees" in out and "| ground | 2 | 7 | 9 |" in (tmp_path / "rep" / "report.md").read_text()


def test_analyze_writes_json_and_plot(tmp_path):
    code, out, err = run("analyze", "four-bar", "--sweep", "crank", "--range", "1.0", "1.4",
                         "--points", "5", "--out", "an", "--no-progress", cwd=tmp_path)
    assert code == 0, err
    assert sorted(f for f in os.listdir(tmp_path / "an") if not f.startswith(".")) == ["analysis.json",
                                                                                      "sweep.png"]
    d = json.loads((tmp_path / "an" / "analysis.json").read_text())
    assert d["schema"] == "gear.analyze/1" and d["mobility"]["dof"] == 1
    assert d["sweep"]["values"] == pytest.approx(np.linspace(1.0, 1.4, 5))
    assert "mobility at q0: dof 1" in out


def test_bench_quick_json(tmp_path):
    code, out, err = run("bench", "--quick", "--json", "b.json", cwd=tmp_path)
    assert code == 0, err
    d = json.loads((tmp_path / "b.json").read_text())
    assert d["schema"] == "gear.bench/1" and all(r["seconds"] > 0 for r in d["rows"])
    assert d["threads"] == gear.get_num_threads()
    assert {"rnea", "aba", "crba"} <= {r["what"] for r in d["rows"]}
    assert "fastest solver on the N-four-bar" in out


def test_info_and_simulate_on_the_robot_zoo(capsys):
    """Every URDF of example-robot-data through `gear info` (in process): a
    description, or one line naming what is wrong with the file; a few
    rollouts with `gear simulate`."""
    from gear.cli import main
    from gear.testing import zoo_dir, zoo_urdfs

    if zoo_dir() is None:
        pytest.skip("example-robot-data is not installed (pip install example-robot-data, or gear[reference])")
    described = 0
    for path in zoo_urdfs():
        code = main(["info", path])
        out, err = capsys.readouterr()
        if code == 0:
            described += 1
            assert "bodies, nq =" in out and not err
        else:
            assert code == 1
            one_line_error(err, "info")
    assert described >= 60
    for rel, extra in [("ur_description/urdf/ur5_robot.urdf", []),
                       ("panda_description/urdf/panda.urdf", []),
                       ("talos_data/robots/talos_reduced.urdf", ["--floating-base", "--integrator", "rkmk4"])]:
        path = os.path.join(zoo_dir(), rel)
        assert main(["simulate", path, "--t", "0.01", "--no-progress", *extra]) == 0, rel
        out, err = capsys.readouterr()
        assert "10 steps" in out, out


def test_compare_keeps_finished_runs_when_one_fails(tmp_path, monkeypatch, capsys):
    """A failed run is reported (stderr, table, JSON) with advice in the
    command's own flags; the exit code is 0 unless every run failed or
    --strict is given."""
    pytest.importorskip("sksparse", reason="the maximal runs need scikit-sparse (the 'sparse' extra)")
    from gear import comparison
    from gear.cli import main

    def boom(*a, **k):
        raise FloatingPointError("the state became non-finite in step 3 (t = 0.002)")

    monkeypatch.setattr(comparison, "_maximal_model", boom)
    args = ["compare", "four-bar", "--t", "0.01", "--solvers", "kkt", "--integrator", "rk4", "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "maximal / rk4 run failed" in err and "--no-maximal" in err and "reduce --dt" in err
    d = json.loads((tmp_path / "a" / "report.json").read_text())
    status = {r["name"]: r["status"] for r in d["runs"]}
    assert status == {"kkt / rk4": "ok", "maximal / rk4": "failed", "maximal / rk4, unstabilised": "failed"}
    assert main(args + ["--out", str(tmp_path / "b"), "--strict"]) == 1
    import gear.simulation as S

    monkeypatch.setattr(S, "simulate", boom)
    assert main(args + ["--out", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err
    assert "the kkt / rk4 run failed" in err and "out of --solvers" in err


def test_fixed_base_for_mjcf_and_floating_base_for_urdf(tmp_path):
    """``--fixed-base`` welds an MJCF file's top-level free bodies (a
    floating robot analysed with its base held; from rest it would only
    fall as one body); each base flag given to the other format is a
    one-line error rather than silently ignored."""
    xml = tmp_path / "floating.xml"
    xml.write_text("""<mujoco><worldbody><body name="trunk" pos="0 0 1"><freejoint/>
      <inertial pos="0 0 0" mass="5" diaginertia="0.1 0.1 0.1"/>
      <body name="leg"><joint name="hip" axis="0 1 0"/><inertial pos="0 0 -0.2" mass="1" diaginertia="0.01 0.01 0.01"/>
      </body></body></worldbody></mujoco>""")
    code, out, err = run("info", str(xml))
    assert code == 0 and "nq = 8, nv = 7" in out, err
    code, out, err = run("info", str(xml), "--fixed-base")
    assert code == 0 and "nq = 1, nv = 1" in out and "trunk_free" not in out, err
    code, out, err = run("info", str(xml), "--floating-base")
    assert code == 2 and "--floating-base is for URDF" in one_line_error(err, "info")
    code, out, err = run("info", gear.data_path("arm7.urdf"), "--fixed-base")
    assert code == 2 and "--fixed-base is for MJCF" in one_line_error(err, "info")

"""gear.compare (maximal vs reduced coordinates) and gear.analysis.report."""
import json

import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.comparison import validate

pytest.importorskip("sksparse", reason="the maximal runs need scikit-sparse (the 'sparse' extra)")


@pytest.fixture(scope="module")
def fourbar_reports():
    sysm, q0 = mech.four_bar()
    a = gear.compare(sysm, q0, t_final=0.3, dt=2e-3, name="four-bar")
    b = gear.compare(sysm, q0, t_final=0.3, dt=1e-3, solvers=("kkt",), name="four-bar")
    return a, b


def test_hard_solvers_agree_and_stay_closed(fourbar_reports):
    rep, _ = fourbar_reports
    runs = {r["name"]: r for r in rep.runs}
    assert list(runs) == ["kkt", "projection", "maximal", "soft", "maximal-coordinates"]
    assert runs["kkt"]["max_deviation"] == 0.0                   # the reference
    for s in ("kkt", "projection", "maximal"):
        assert runs[s]["formulation"] == "reduced" and runs[s]["stabilization"] == "projection"
        assert runs[s]["max_constraint_residual"] <= 1e-10
        assert runs[s]["max_deviation"] <= 1e-9
        assert runs[s]["max_energy_drift"] <= 1e-6               # rk4, conservative system
    # soft: compliant rows drift a little, but stay close at the default stiffness
    assert 0 < runs["soft"]["max_constraint_residual"] <= 1e-5
    assert runs["soft"]["max_deviation"] <= 1e-5
    assert rep.sizes["nv"] == 3 and rep.sizes["constraint_rows"] == 3 and rep.sizes["dof"] == 1
    assert rep.sizes["maximal_coordinates"] == 18 and rep.sizes["maximal_rows"] == 18
    assert rep.sizes["nnz_factor"] > 0 and rep.sizes["nnz_J"] > 0
    assert all(r["solve_s"] > 0 and r["step_s"] > 0 for r in rep.runs)


def test_maximal_coordinates_converge_at_first_order(fourbar_reports):
    """Semi-implicit Euler on the body states: the deviation from the
    reduced rk4 reference and the drift of the joints and loops shrink
    linearly with dt (the tolerance the report states is tied to dt)."""
    a, b = fourbar_reports
    ra, rb = a.runs[-1], b.runs[-1]
    assert ra["name"] == rb["name"] == "maximal-coordinates"
    ratio = ra["max_deviation"] / rb["max_deviation"]
    assert 1.6 < ratio < 2.5, ratio
    assert 1.6 < ra["max_constraint_residual"] / rb["max_constraint_residual"] < 2.5
    assert rb["max_deviation"] < 50 * 1e-3
    # same initial state and the same energy, computed from the body states
    assert a.series["energy_drift"]["maximal-coordinates"][0] <= 1e-12
    assert a.series["deviation"]["maximal-coordinates"][0] <= 1e-12
    assert a.series["residual"]["maximal-coordinates"][0] <= 1e-12
    # the recorded frames line up with the reduced runs'
    assert len(a.t) == len(a.series["deviation"]["maximal-coordinates"]) == len(a.trajectories["kkt"][0])


def test_report_json_schema_table_and_plots(fourbar_reports, tmp_path):
    rep, _ = fourbar_reports
    paths = rep.save(tmp_path)
    names = sorted(p.rsplit("/", 1)[-1] for p in map(str, paths))
    assert names == ["cost.png", "deviation.png", "energy.png", "report.json", "report.md", "residual.png"]
    for p in paths:
        assert (tmp_path / p.rsplit("/", 1)[-1]).stat().st_size > 100
    d = validate(str(tmp_path / "report.json"))
    assert d["schema"] == "gear.compare/2" and d["name"] == "four-bar"
    assert all(r["status"] == "ok" and r["error"] is None for r in d["runs"]) and rep.failed == {}
    assert d["settings"]["reference"] == "kkt" and d["settings"]["energy_scale"] > 0
    json.dumps(d, allow_nan=False)
    assert "| maximal-coordinates | maximal |" in rep.table()
    # the validator is not a rubber stamp
    bad = json.loads(rep.to_json())
    del bad["runs"][0]["max_deviation"]
    with pytest.raises(ValueError, match="max_deviation"):
        validate(bad)
    bad = json.loads(rep.to_json())
    bad["runs"][1]["formulation"] = "hybrid"
    with pytest.raises(ValueError, match="formulation"):
        validate(bad)
    bad = json.loads(rep.to_json())
    bad["series"]["deviation"]["soft"] = bad["series"]["deviation"]["soft"][:-1]
    with pytest.raises(ValueError, match="soft"):
        validate(bad)


def test_jsonschema_agrees_when_available(fourbar_reports):
    jsonschema = pytest.importorskip("jsonschema", reason="optional: the package's own validator is tested above")
    rep, _ = fourbar_reports
    jsonschema.validate(rep.to_dict(), gear.comparison.SCHEMA)


def test_tree_compares_maximal_against_reduced():
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    q0 = arm.neutral() + 0.3
    rep = gear.compare(arm, q0, t_final=0.05, dt=1e-3, solvers=("kkt",))
    assert rep.sizes["constraint_rows"] == 0 and rep.sizes["maximal_rows"] == 6 * 7 - 7
    mx = rep.runs[-1]
    assert mx["max_deviation"] < 1e-2 and mx["max_constraint_residual"] < 1e-3
    assert rep.runs[0]["max_constraint_residual"] == 0.0


def test_compare_bad_input():
    sysm, q0 = mech.four_bar()
    with pytest.raises(ValueError, match="solvers"):
        gear.compare(sysm, q0, t_final=0.01, dt=1e-3, solvers=("nope",))
    with pytest.raises(ValueError, match="dt"):
        gear.compare(sysm, q0, t_final=0.01, dt=0.0)
    with pytest.raises(ValueError, match="assemble"):
        gear.compare(sysm, q0 + 0.1, t_final=0.01, dt=1e-3)
    with pytest.raises(ValueError, match="q0"):
        gear.compare(sysm, np.r_[q0, 0.0], t_final=0.01, dt=1e-3)
    with pytest.raises(TypeError, match="ConstrainedModel"):
        gear.compare("four-bar", q0, t_final=0.01, dt=1e-3)


def test_scaling_reports_the_fastest_solver():
    sc = gear.comparison.scaling((1, 3), solvers=("kkt", "maximal"), min_time=0.005)
    assert sc["ns"] == [1, 3] and sc["nv"] == [3, 7] and sc["rows"] == [3, 9]
    assert all(len(v) == 2 and min(v) > 0 for v in sc["seconds"].values())
    assert set(sc["fastest"]) <= {"kkt", "maximal"}


def test_analysis_report_json_and_singularities(tmp_path):
    sysm, q0 = mech.four_bar(crank=0.3, coupler=0.6, rocker=0.3, ground=0.6, angle=0.3)
    rep = gear.analysis.report(sysm, "crank", np.linspace(0.3, -0.3, 13), q0, name="parallelogram")
    d = rep.to_dict()
    text = json.dumps(d, allow_nan=False)
    for k in gear.analysis.REPORT_SCHEMA["required"]:
        assert k in d
    for k in gear.analysis.REPORT_SCHEMA["properties"]["sweep"]["required"]:
        assert k in d["sweep"]
    assert d["mobility"]["dof"] == 1 and d["mobility"]["grubler"] == 0 and d["mobility"]["redundant_rows"]
    assert d["sweep"]["singular_values"] == [pytest.approx(0.0, abs=1e-12)]      # the branch point
    assert len(d["sweep"]["values"]) == 13 and all(d["sweep"]["assembled"])
    assert d["sweep"]["peak_wrenches"][0]["force"] > 0
    assert "singular at 0" in rep.summary()
    paths = rep.save(tmp_path)
    assert [p.rsplit("/", 1)[-1] for p in map(str, paths)] == ["analysis.json", "sweep.png"]
    assert json.loads((tmp_path / "analysis.json").read_text()) == json.loads(text)


def test_analysis_report_unreachable_inputs_are_null_and_bad_input():
    sysm, q0 = mech.slider_crank(crank=0.1, rod=0.3)
    d = gear.analysis.report(sysm, "slider", [0.3, 0.35, 0.5], q0).to_dict()
    assert d["sweep"]["assembled"] == [True, True, False]
    assert d["sweep"]["torque"][2] == [None]
    json.dumps(d, allow_nan=False)
    with pytest.raises(KeyError, match="nope"):
        gear.analysis.report(sysm, "nope")
    with pytest.raises(TypeError, match="ConstrainedModel"):
        gear.analysis.report(sysm.model)


def test_docs_compare_doctest():
    import doctest
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "compare.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted >= 8 and res.failed == 0


@pytest.mark.parametrize("builder", ["four_bar", "slider_crank", "n_four_bar"])
def test_batched_joint_recovery_equals_to_reduced_on_drifted_states(builder):
    """The maximal-coordinate run recovers revolute/prismatic coordinates in
    one batch; on body states that violate the joints it gives what
    gear.maximal.to_reduced (the per-body reference) gives."""
    from gear.comparison import _MaximalRun
    from gear.maximal import from_reduced, to_reduced

    sysm, q0 = getattr(mech, builder)(*([5] if builder == "n_four_bar" else []))
    run = _MaximalRun(sysm)
    assert run._fast is not None
    rng = np.random.default_rng(2)
    q = q0 + 0.1 * rng.standard_normal(q0.size)
    P, V = from_reduced(sysm.model, q, rng.standard_normal(sysm.model.nv))
    P = P.copy()
    P[:, :3, 3] += 1e-3 * rng.standard_normal((len(P), 3))             # drifted joints
    V = V + 1e-3 * rng.standard_normal(V.shape)
    qa, dqa = run._reduced_fast(P, V)
    qb, dqb = to_reduced(sysm.model, P, V, tol=np.inf)
    np.testing.assert_allclose(qa, qb, rtol=0, atol=1e-13)
    np.testing.assert_allclose(dqa, dqb, rtol=0, atol=1e-13)


# ---------------------------------------------------------------------------
# failed runs are recorded, the others kept
# ---------------------------------------------------------------------------
class _Broken(gear.solvers.ConstraintSolver):
    """A solver that always raises (stands for a broken plugin)."""

    name = "broken"

    def _forward(self, q, dq, tau, f_ext):
        raise RuntimeError("this solver always fails")


def test_soft_run_of_a_long_chain_completes_by_default():
    """The N-four-bar at N = 50: the soft run used to diverge at t = 0.5 s
    (and take the finished runs down with it); its default velocity damping
    1 / (5 dt) keeps it within 2e-5 rad of kkt.  Without damping it still
    diverges, and is recorded as failed with compare's own advice."""
    sysm, q0 = mech.n_four_bar(50)
    rep = gear.compare(sysm, q0, t_final=0.6, dt=1e-3, solvers=("kkt", "soft"), maximal=False)
    assert rep.failed == {}
    soft = rep.runs[1]
    assert soft["solver_options"]["damping"] == pytest.approx(200.0)
    assert soft["max_deviation"] < 5e-5 and soft["max_constraint_residual"] < 1e-4
    bare = gear.compare(sysm, q0, t_final=0.6, dt=1e-3, solvers=("kkt", "soft"), maximal=False,
                        soft_options={"damping": 0.0})
    assert list(bare.failed) == ["soft"] and bare.runs[0]["status"] == "ok"
    reason = bare.failed["soft"]
    assert reason.startswith("the soft run failed: ") and "non-finite" in reason
    assert "reduce dt" in reason and "leave 'soft' out of solvers" in reason
    assert "implicit" not in reason and "\n" not in reason            # compare has no integrator='implicit'
    assert bare.trajectories.keys() == {"kkt"} and bare.series["residual"].keys() == {"kkt"}


def test_a_failing_run_is_recorded_with_its_reason_and_the_others_kept(tmp_path):
    sysm, q0 = mech.four_bar()
    rep = gear.compare(sysm, q0, t_final=0.05, dt=1e-3, solvers=("kkt", _Broken, "soft"))
    assert [r["name"] for r in rep.runs] == ["kkt", "broken", "soft", "maximal-coordinates"]
    assert [r["status"] for r in rep.runs] == ["ok", "failed", "ok", "ok"]
    assert rep.failed == {"broken": "the broken run failed: RuntimeError: this solver always fails; "
                                    "leave 'broken' out of solvers"}
    assert rep.runs[2]["max_deviation"] < 1e-6 and rep.settings["reference"] == "kkt"
    assert "| broken | reduced | rk4 | projection | failed |" in rep.table()
    assert "- `broken`: the broken run failed: RuntimeError" in rep.table()
    paths = rep.save(tmp_path / "rep")
    assert len(paths) == 6
    d = validate(str(tmp_path / "rep" / "report.json"))
    broken = d["runs"][1]
    assert broken["status"] == "failed" and "always fails" in broken["error"]
    assert broken["max_deviation"] is None and "broken" not in d["series"]["deviation"]
    json.dumps(d, allow_nan=False)
    bad = json.loads(rep.to_json())
    bad["runs"][1]["error"] = None
    with pytest.raises(ValueError, match="reason"):
        validate(bad)
    bad = json.loads(rep.to_json())
    bad["runs"][0]["max_deviation"] = None
    with pytest.raises(ValueError, match="max_deviation"):
        validate(bad)
    # the failure shows in every plot's legend
    import matplotlib.pyplot as plt

    figs = rep.figures()
    for key, fig in figs.items():
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert any(lab.startswith("broken (failed: RuntimeError: this solver always fails") for lab in labels), key
        plt.close(fig)


def test_every_run_failing_still_gives_a_report(tmp_path):
    sysm, q0 = mech.four_bar()
    rep = gear.compare(sysm, q0, t_final=0.01, dt=1e-3, solvers=(_Broken,), maximal=False)
    assert list(rep.failed) == ["broken"] and len(rep.failed) == len(rep.runs)
    assert rep.settings["reference"] is None and len(rep.t) == 0
    rep.save(tmp_path / "rep")
    d = validate(str(tmp_path / "rep" / "report.json"))
    assert d["runs"][0]["status"] == "failed"


def test_plots_keep_coinciding_curves_visible_and_say_what_they_show(fourbar_reports):
    import matplotlib.pyplot as plt

    rep, _ = fourbar_reports
    figs = rep.figures()
    ax = figs["energy_drift"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "kkt, projection and maximal coincide" in labels
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    styles = {(lines[n].get_linestyle(), lines[n].get_marker()) for n in ("kkt", "projection", "maximal")}
    assert len(styles) == 3                                     # each drawn differently, with markers
    assert ax.get_ylabel() == "|E − E0| (J)" and "energy scale" not in ax.get_title()
    dev = figs["deviation"].axes[0]
    assert "reference run 'kkt'" in dev.get_title() and dev.get_ylabel().endswith("(rad)")
    for fig in figs.values():
        a = fig.axes[0]
        assert "(" in a.get_ylabel() and a.get_ylabel().endswith(")")      # a unit on every axis
        plt.close(fig)


def test_save_never_deletes_user_files(fourbar_reports, tmp_path):
    rep, _ = fourbar_reports
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="did not write"):
        rep.save(user, overwrite=True)
    assert (user / "notes.txt").read_text() == "keep me" and sorted(p.name for p in user.iterdir()) == ["notes.txt"]
    out = tmp_path / "rep"
    rep.save(out)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        rep.save(out)
    assert len(rep.save(out, overwrite=True)) == 6
    # the up-front claim: refused before any work, and save fills the claimed directory
    with pytest.raises(FileExistsError, match="--overwrite"):
        gear.comparison.check_output(out, option="--overwrite")
    fresh = gear.comparison.check_output(tmp_path / "new")
    assert len(rep.save(fresh)) == 6
    with pytest.raises(FileExistsError):
        gear.comparison.check_output(user / "notes.txt")


def test_progress_defaults_to_a_terminal_check(capsys):
    import inspect

    assert inspect.signature(gear.compare).parameters["progress"].default is None
    assert inspect.signature(gear.comparison.scaling).parameters["progress"].default is None
    sysm, q0 = mech.four_bar()
    gear.compare(sysm, q0, t_final=0.01, dt=1e-3, solvers=("kkt",), maximal=False)
    out, err = capsys.readouterr()
    assert out == "" and err == ""                              # stderr is not a terminal here


def test_compare_solver_names_and_options_are_checked_up_front():
    sysm, q0 = mech.four_bar()
    with pytest.raises(ValueError, match="more than once"):
        gear.compare(sysm, q0, t_final=0.01, dt=1e-3, solvers=("kkt", "kkt"))
    with pytest.raises(TypeError, match="soft_options"):
        gear.compare(sysm, q0, t_final=0.01, dt=1e-3, solvers=("soft",), soft_options={"nope": 1})
    with pytest.raises(ValueError, match="integrator"):
        gear.compare(sysm, q0, t_final=0.01, dt=1e-3, integrator="leapfrog")

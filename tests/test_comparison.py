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
    assert d["schema"] == "gear.compare/1" and d["name"] == "four-bar"
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

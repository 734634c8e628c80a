"""gear.compare (maximal vs reduced coordinates) and gear.analysis.report."""
import json
import re

import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.comparison import validate

pytest.importorskip("sksparse", reason="the maximal runs need scikit-sparse (the 'sparse' extra)")


NAMES = ["kkt / euler", "kkt / rk4", "projection / euler", "projection / rk4", "maximal solver / euler",
         "maximal solver / rk4", "soft / euler", "soft / rk4", "maximal / euler", "maximal / euler, unstabilised",
         "maximal / rk4", "maximal / rk4, unstabilised"]


@pytest.fixture(scope="module")
def four_bar():
    return mech.four_bar()


@pytest.fixture(scope="module")
def rep(four_bar):
    """Every formulation with euler and rk4, the reference, the work-precision
    and stability studies, on a short horizon (about 5 s)."""
    sysm, q0 = four_bar
    return gear.compare(sysm, q0, t_final=0.2, dt=2e-3, name="four-bar")


def test_runs_formulations_and_stabilisations(rep):
    runs = {r["name"]: r for r in rep.runs}
    assert list(runs) == NAMES and rep.failed == {}
    for n, r in runs.items():
        assert r["integrator"] == n.split(" / ")[1].split(",")[0]
        if r["formulation"] == "reduced":
            assert r["stabilization"] == "projection"
        elif r["formulation"] == "soft":
            assert r["stabilization"] is None and r["solver_options"]["damping"] == pytest.approx(100.0)
        else:
            assert r["stabilization"] == (None if n.endswith("unstabilised") else "projection")
    assert [runs[n]["formulation"] for n in NAMES].count("maximal") == 4
    assert rep.sizes["nv"] == 3 and rep.sizes["constraint_rows"] == 3 and rep.sizes["dof"] == 1
    assert rep.sizes["maximal_coordinates"] == 18 and rep.sizes["maximal_rows"] == 18
    assert rep.sizes["nnz_factor"] > 0 and rep.sizes["nnz_J"] > 0 and rep.sizes["nnz_K"] > 0
    assert all(r["solve_s"] > 0 and r["step_s"] > 0 for r in rep.runs)


def test_maximal_runs_are_gear_simulate_on_a_maximal_model(rep, four_bar):
    """The maximal runs are the new simulator's, nothing recomputed in
    reduced coordinates on the way (the old per-step reduced solve is gone)."""
    sysm, q0 = four_bar
    assert not hasattr(gear.comparison, "_MaximalRun")
    mx = gear.MaximalModel(sysm)
    for name, integ, stab in [("maximal / rk4", "rk4", "projection"),
                              ("maximal / euler, unstabilised", "euler", None)]:
        tr = gear.simulate(mx, q0, None, 0.2, 2e-3, integrator=integ, stabilization=stab,
                           record_every=rep.settings["record_every"])
        np.testing.assert_allclose(rep.trajectories[name][0], tr.q, rtol=0, atol=1e-13)
        np.testing.assert_allclose(rep.series["position_residual"][name], tr.joint_error, rtol=0, atol=1e-15)
    # projected rk4 in maximal coordinates is the same motion as reduced rk4
    runs = {r["name"]: r for r in rep.runs}
    assert runs["maximal / rk4"]["final_error"] < 1e-7 and runs["kkt / rk4"]["final_error"] < 1e-7
    # the three hard reduced solvers integrate the same equations
    for integ in ("euler", "rk4"):
        errs = [runs[f"{s} / {integ}"]["final_error"] for s in ("kkt", "projection", "maximal solver")]
        assert max(errs) - min(errs) <= 1e-10 * max(1.0, max(errs))
    # the same initial state and energy, from the body states
    for n in NAMES:
        assert rep.series["energy_drift"][n][0] <= 1e-12 and rep.series["deviation"][n][0] <= 1e-12


def test_drift_shown_without_stabilisation_and_removed_with_projection(rep):
    pr = rep.series["position_residual"]
    free = pr["maximal / euler, unstabilised"]
    assert free[-1] > 1e-5 and free[-1] > 10 * free[len(free) // 10]          # grows
    assert pr["maximal / rk4, unstabilised"][-1] < 1e-3 * free[-1]            # 4th order drifts far less
    for n in ("maximal / euler", "maximal / rk4", "kkt / euler", "kkt / rk4"):
        assert pr[n].max() <= 1e-10, n
    assert pr["soft / euler"].max() > 1e-6                                      # compliant rows give
    assert "Joint drift" in rep.summary()


def test_reference_is_far_more_accurate_than_every_run(rep):
    st = rep.settings
    assert st["reference"] == "kkt / rkmk4 + projection at dt/64"
    assert 0 <= st["reference_error"] < 1e-12
    errs = [r["final_error"] for r in rep.runs]
    assert min(errs) > 100 * st["reference_error"]
    # the estimate is honest: a finer reference moves by less than it claims (plus rounding)
    sysm, q0 = mech.four_bar()
    fine = gear.simulate(sysm.with_solver("kkt"), q0, np.zeros(3), 0.2, 2e-3 / 128, integrator="rkmk4",
                         record_every=10 ** 9)
    ref = rep.trajectories["kkt / rk4"][0][-1]
    rk4_err = np.abs(ref - fine.q[-1]).max()
    assert rk4_err == pytest.approx(rep.runs[1]["final_error"], rel=1e-3, abs=1e-13)


def test_an_unconverged_reference_is_measured_and_said():
    """The N-four-bar's parallelograms lie flat at t = 0.55 s (a singular
    configuration: the loops' rows lose rank and the motion branches).
    Before it the reference converges; past it no step size agrees with
    another better than a floor (about 6e-9 here: the projection's
    velocity correction in the mass metric carries the motion through the
    singularity alike at every dt; the Euclidean one it replaced left
    1e-5), and the report says so instead of ranking noise."""
    sysm, q0 = mech.n_four_bar(1)
    kw = dict(dt=2e-3, integrators="rk4", solvers=("kkt",), maximal=False, stability=False)
    before = gear.compare(sysm, q0, t_final=0.5, **kw)
    assert before.settings["reference_error"] < 1e-11 and "not converged" not in before.table()
    errs = [p["error"] for p in before.work_precision]
    assert errs == sorted(errs) and errs[-1] > 1e3 * errs[0]              # 4th order, resolved
    past = gear.compare(sysm, q0, t_final=0.7, **kw)
    err = past.settings["reference_error"]
    assert err > 100 * before.settings["reference_error"]
    assert "**Warning: the reference is not converged here.**" in past.table()
    finest = sorted(past.work_precision, key=lambda p: p["dt"])[:2]
    assert all(abs(p["error"] - err) < err for p in finest)        # the small dts stop at the floor
    assert "Work precision" not in past.summary()                       # nothing is ranked below the floor


def test_work_precision_has_three_dts_per_run_and_the_orders(rep):
    """Error at t_final against dt: slope 1 for Euler (reduced and maximal),
    4 for RK4.  (The costs are wall times: the benchmarks compare them, not
    the tests.)"""
    by = {}
    for p in rep.work_precision:
        by.setdefault(p["run"], []).append(p)
        assert set(p) == {"run", "formulation", "integrator", "stabilization", "dt", "error", "cost_s"}
    assert set(by) == set(NAMES)
    for n, pts in by.items():
        pts.sort(key=lambda p: p["dt"])
        assert len(pts) >= 3, n
        dts = np.array([p["dt"] for p in pts])
        errs = np.array([p["error"] for p in pts])
        cost = np.array([p["cost_s"] for p in pts])
        assert dts[0] == pytest.approx(2e-3) and (cost > 0).all(), n
        if n.startswith("soft"):
            continue                                    # the compliance error does not vanish with dt
        slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
        order = 1 if "euler" in n else 4
        assert abs(slope - order) < 0.5, (n, slope, errs)
    # maximal coordinates pay for the larger system (18 rows and coordinates against 3): more per
    # simulated second, even with the native Euler kernel
    cheapest = {f: min(p["cost_s"] for p in rep.work_precision if p["formulation"] == f)
                for f in ("reduced", "maximal")}
    assert cheapest["maximal"] > 2 * cheapest["reduced"]


def test_stability_limits_by_bisection(rep, four_bar):
    from gear.comparison import STABILITY, _Run, _stable

    # the default horizon is min(t_final, 1 s); on 0.2 s every run holds up to horizon / 10
    st = rep.settings["stability"]
    assert st["horizon"] == 0.2 and st["rows"] == STABILITY["rows"]
    assert set(rep.stability) == set(NAMES) and set(st["capped"]) == set(NAMES)
    assert all(v == pytest.approx(0.02) for v in rep.stability.values())
    assert "≥ 20 ms" in rep.table()
    # over 0.5 s the soft run's damping (100/s) and the unstabilised Euler run's drift bound dt
    sysm, q0 = four_bar
    short = gear.compare(sysm, q0, t_final=0.1, dt=2e-3, integrators="euler", solvers=("kkt", "soft"),
                         work_precision=None, stability={"horizon": 0.5})
    lim, capped = short.stability, short.settings["stability"]["capped"]
    assert capped == ["kkt / euler", "maximal / euler"] and lim["kkt / euler"] == pytest.approx(0.05)
    for n in ("soft / euler", "maximal / euler, unstabilised"):
        assert 2e-3 < lim[n] < 0.2 * lim["kkt / euler"], (n, lim[n])
    # the limit is one: stable there, unstable 10 % above (bisection brackets within 9 %)
    fam = _Run("soft / euler", "soft", "soft", "euler", None, sysm.with_solver("soft", damping=100.0), q0,
               np.zeros(3), np.zeros(3), sysm)
    E0, Es = short.settings["E0"], short.settings["energy_scale"]
    assert _stable(fam, lim["soft / euler"], 0.5, E0, Es)[0]
    ok, why = _stable(fam, 1.1 * lim["soft / euler"], 0.5, E0, Es)
    assert not ok and why


def test_report_json_schema_table_and_plots(rep, tmp_path):
    paths = rep.save(tmp_path)
    names = sorted(p.rsplit("/", 1)[-1] for p in map(str, paths))
    assert names == ["cost.png", "deviation.png", "drift.png", "energy.png", "report.json", "report.md",
                     "residual.png", "work_precision.png"]
    for p in paths:
        assert (tmp_path / p.rsplit("/", 1)[-1]).stat().st_size > 100
    d = validate(str(tmp_path / "report.json"))
    assert d["schema"] == "gear.compare/3" and d["name"] == "four-bar"
    assert all(r["status"] == "ok" and r["error"] is None for r in d["runs"])
    assert d["settings"]["energy_scale"] > 0 and d["settings"]["integrators"] == ["euler", "rk4"]
    assert len(d["work_precision"]) == 4 * 12 and d["trees"] == []
    json.dumps(d, allow_nan=False)
    md = (tmp_path / "report.md").read_text()
    assert "| maximal / euler, unstabilised | maximal | euler | none |" in md
    for png in ("residual", "energy", "deviation", "cost", "drift", "work_precision"):
        assert f"`{png}.png`" in md                       # every figure is explained
    assert "Ruan" in md and "## Stability limits" in md and "Work precision" in md
    # the validator is not a rubber stamp
    for mutate, needle in [
            (lambda b: b["runs"][0].pop("final_error"), "final_error"),
            (lambda b: b["runs"][1].update(formulation="hybrid"), "formulation"),
            (lambda b: b["series"]["deviation"].update({"soft / rk4": b["series"]["deviation"]["soft / rk4"][:-1]}),
             "soft / rk4"),
            (lambda b: b["series"].pop("position_residual"), "position_residual"),
            (lambda b: b["work_precision"][0].update(run="nope"), "nope"),
            (lambda b: b["work_precision"][0].pop("cost_s"), "cost_s"),
            (lambda b: b["stability"].update(nope=1e-3), "nope"),
            (lambda b: b["stability"].update({"kkt / rk4": -1.0}), "positive"),
            (lambda b: b.update(schema="gear.compare/2"), "gear.compare/3")]:
        bad = json.loads(rep.to_json())
        mutate(bad)
        with pytest.raises(ValueError, match=re.escape(needle)):
            validate(bad)


def test_jsonschema_agrees_when_available(rep):
    jsonschema = pytest.importorskip("jsonschema", reason="optional: the package's own validator is tested above")
    jsonschema.validate(rep.to_dict(), gear.comparison.SCHEMA)


def test_spanning_trees_cost_beside_the_maximal_one():
    """The N-four-bar on its chain and its ground tree: the same motion
    (bodies matched by name), reduced cost on each tree, the maximal one."""
    chain, ground = mech.n_four_bar(4), mech.n_four_bar(4, tree="ground")
    rep = gear.compare(*chain, t_final=0.05, dt=1e-3, integrators="rk4", solvers=("kkt",),
                       work_precision=None, stability=False, trees={"chain": chain, "ground": ground})
    assert rep.work_precision == [] and rep.stability == {} and rep.failed == {}
    t = {e["tree"]: e for e in rep.trees}
    assert list(t) == ["chain", "ground"]
    assert t["chain"]["depth"] == 9 and t["ground"]["depth"] == 2
    assert t["chain"]["nv"] == t["ground"]["nv"] == 9 and t["chain"]["constraint_rows"] == 12
    assert t["chain"]["body_deviation"] == 0.0 and t["ground"]["body_deviation"] < 1e-9
    for e in t.values():
        assert set(e["step_s"]) == {"kkt / rk4", "maximal / rk4"} and min(e["step_s"].values()) > 0
        assert e["maximal_rows"] == 5 * 9 + 3 * 4
    d = validate(rep.to_dict())
    assert [e["tree"] for e in d["trees"]] == ["chain", "ground"]
    assert "## Spanning trees" in rep.report() and "| ground | 2 | 9 | 12 |" in rep.report()
    with pytest.raises(TypeError, match="trees"):
        gear.compare(*chain, t_final=0.01, dt=1e-3, trees=[chain])


def test_tree_compares_maximal_against_reduced():
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    q0 = arm.neutral() + 0.3
    rep = gear.compare(arm, q0, t_final=0.05, dt=1e-3, solvers=("kkt",), integrators="rk4",
                       work_precision=(1, 2, 4), stability=False)
    assert rep.sizes["constraint_rows"] == 0 and rep.sizes["maximal_rows"] == 6 * 7 - 7
    runs = {r["name"]: r for r in rep.runs}
    assert list(runs) == ["kkt / rk4", "maximal / rk4", "maximal / rk4, unstabilised"]
    assert runs["maximal / rk4"]["final_error"] < 1e-6 and runs["kkt / rk4"]["max_constraint_residual"] == 0.0
    assert 0 < runs["maximal / rk4, unstabilised"]["max_constraint_residual"] < 1e-4
    assert len(rep.work_precision) == 9


def test_a_floating_model_at_rest_is_said_to_move_as_one_body(rep):
    """A floating model started at rest (Menagerie's cassie from the
    command line) falls as one rigid body: every formulation gives the
    same motion, and the summary says so first instead of letting the
    identical rows pass for a comparison; a moving mechanism gets no such
    line, nor a body set spinning."""
    m = gear.Model()
    I = gear.Inertia(1.0, [0.1, 0.0, 0.0], np.diag([0.01, 0.02, 0.03]))
    m.add_body("base", "world", gear.joints.Free(), inertia=I)
    m.add_body("arm", "base", gear.joints.Revolute([0, 0, 1]), placement=gear.SE3(p=[0.2, 0, 0]), inertia=I)
    q0 = m.neutral()
    kw = dict(t_final=0.01, dt=1e-3, solvers=("kkt",), integrators="euler", work_precision=(1,),
              stability=False, progress=False)
    still = gear.compare(m, q0, **kw)
    assert still.settings["joint_motion"] < 1e-12
    assert still.summary().lstrip("- ").startswith("**Nothing moves inside the mechanism**")
    moving = gear.compare(m, q0, dq0=np.r_[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0], **kw)
    assert moving.settings["joint_motion"] > 1e-3
    assert "Nothing moves" not in moving.summary() and "Nothing moves" not in rep.summary()


def test_rk4_below_fourth_order_on_spherical_joints_is_said(rep):
    """On a mechanism with spherical joints (the RSSR) joint-coordinate
    rk4 converges at order 2 where the maximal formulation's rk4 and
    rkmk4 reach 4: the report measures each run's order and says why,
    instead of letting rk4 against rk4 pass for a comparison of the
    formulations; the four-bar (revolute joints) gets no such line."""
    sysm, q0 = gear.mechanisms.rssr()
    dq0 = sysm.project_velocity(q0, np.random.default_rng(0).standard_normal(sysm.model.nv))
    r = gear.compare(sysm, q0, dq0=dq0, t_final=0.2, dt=2e-3, solvers=("kkt",), integrators=("rk4", "rkmk4"),
                     stability=False, progress=False)
    o = r.orders()
    assert o["kkt / rk4"] < 2.5 and o["kkt / rkmk4"] > 3.5 and o["maximal / rk4"] > 3.5
    assert r.settings["lie_joints"] >= 1
    assert "**Integrator order**: `kkt / rk4` converges at order 2.0" in r.summary()
    assert "Integrator order" not in rep.summary() and rep.settings["lie_joints"] == 0


def _wp_report(points, reference_error=1e-13):
    """A Comparison holding only work-precision points ``(run, formulation,
    dt, error, cost_s)`` (for the summary's logic)."""
    runs = [{"name": n, "formulation": f, "integrator": "rk4", "status": "ok"}
            for n, f in dict.fromkeys((p[0], p[1]) for p in points)]
    wp = [{"run": r, "formulation": f, "dt": dt, "error": e, "cost_s": c} for r, f, dt, e, c in points]
    settings = {"dt": 1e-3, "t_final": 0.5, "coordinate_unit": "rad", "reference_error": reference_error}
    return gear.comparison.Comparison("synthetic", {}, settings, runs, np.zeros(1), {}, {}, wp)


def test_the_verdict_leaves_out_tolerances_the_sweep_stopped_short_of():
    """A tolerance that one formulation reaches at the sweep's smallest
    step while another is still converging there (its error halving and
    more from one step to the next) is no evidence that the first is
    cheaper where a smaller step, extrapolated with the other's order,
    would get the other there for less.  The summary says so and leaves
    it out of the verdict.  A formulation whose error has stopped falling
    (a soft run's compliance), or that would cost more, does not change
    who is cheapest, and the tolerance counts."""
    red = [("kkt / rk4", "reduced", 4e-3, 3.0e-6, 0.75e-3), ("kkt / rk4", "reduced", 2e-3, 1.9e-7, 1.5e-3),
           ("kkt / rk4", "reduced", 1e-3, 1.2e-8, 3.0e-3)]
    mx = [("maximal / rk4", "maximal", 4e-3, 1.8e-6, 4.0e-3), ("maximal / rk4", "maximal", 2e-3, 1.1e-7, 8.0e-3),
          ("maximal / rk4", "maximal", 1e-3, 7e-9, 1.6e-2)]
    soft = [("soft / rk4", "soft", 4e-3, 2.0e-6, 1.0e-3), ("soft / rk4", "soft", 2e-3, 1.4e-6, 2.0e-3),
            ("soft / rk4", "soft", 1e-3, 1.3e-6, 4.0e-3)]
    rep = _wp_report(red + mx + soft)
    conv = rep.converging()
    assert {f: [c["run"] for c in cs] for f, cs in conv.items()} == {"reduced": ["kkt / rk4"],
                                                                      "maximal": ["maximal / rk4"]}
    assert conv["reduced"][0]["order"] == pytest.approx(np.log2(1.9e-7 / 1.2e-8))
    s = rep.summary()
    assert s.startswith("- **Verdict**: joint coordinates (reduced runs) are the cheapest at every tolerance "
                        "compared (1e-06 rad)")
    assert ("error ≤ 1e-06 rad: cheapest `kkt / rk4` at dt = 2 ms, 1.5 ms per simulated second; maximal 5.33× "
            "that (`maximal / rk4`); no soft run reaches it.") in s
    assert ("error ≤ 1e-08 rad: only `maximal / rk4` at dt = 1 ms, 16 ms per simulated second; no soft run "
            "reaches it; the reduced runs were still converging at the sweep's smallest step (1 ms), and a "
            "smaller one would reach it at about 3.14 ms per simulated second") in s
    # the reduced run's error stops falling at 1 ms (a floor): then 1e-8 is a
    # fair comparison, and the maximal run wins it
    floor = red[:1] + [("kkt / rk4", "reduced", 2e-3, 1.3e-8, 1.5e-3), ("kkt / rk4", "reduced", 1e-3, 1.2e-8, 3e-3)]
    s = _wp_report(floor + mx + soft).summary()
    assert "left out of the verdict" not in s
    assert s.startswith("- **Verdict**: maximal coordinates are the cheapest at error ≤ 1e-08 rad; joint "
                        "coordinates elsewhere (of the tolerances compared, 1e-06 down to 1e-08 rad")
    assert "no reduced or soft run reaches it" in s
    # a first-order run still converging and cheap at the smallest step
    # would need a million times smaller steps for 1e-8: it changes nothing
    euler = [("kkt / euler", "reduced", 2e-3, 2e-2, 0.6e-3), ("kkt / euler", "reduced", 1e-3, 9e-3, 1.2e-3)]
    s = _wp_report(floor + euler + mx + soft).summary()
    assert "left out of the verdict" not in s
    assert s.startswith("- **Verdict**: maximal coordinates are the cheapest at error ≤ 1e-08 rad")
    # still converging, but already dearer at the smallest step than the
    # maximal run that reaches 1e-8: no smaller step could make it cheaper
    dear = red[:2] + [("kkt / rk4", "reduced", 1e-3, 1.2e-8, 2.0e-2)]
    s = _wp_report(dear + mx + soft).summary()
    assert "left out of the verdict" not in s and s.startswith("- **Verdict**: maximal coordinates are the "
                                                               "cheapest at error ≤ 1e-08 rad")
    # the only tolerance reached, cut short: no verdict drawn
    s = _wp_report(red[1:] + mx[1:]).summary()
    assert s.startswith("- **Verdict**: none drawn") and "left out of the verdict (a finer sweep settles it" in s


def test_compare_bad_input():
    sysm, q0 = mech.four_bar()
    for kw, err, needle in [
            (dict(solvers=("nope",)), ValueError, "solvers"),
            (dict(dt=0.0), ValueError, "dt"),
            (dict(integrators="leapfrog"), ValueError, "integrators: unknown integrator 'leapfrog'"),
            (dict(integrators=("rk4", "rk4")), ValueError, "more than once"),
            (dict(integrators=()), ValueError, "at least one"),
            (dict(maximal_stabilization=("ode",)), ValueError, "maximal_stabilization"),
            (dict(work_precision=(1, -2)), ValueError, "work_precision"),
            (dict(stability={"nope": 1}), ValueError, "stability: unknown option"),
            (dict(solvers=("kkt", "kkt")), ValueError, "more than once"),
            (dict(solvers=("soft",), soft_options={"nope": 1}), TypeError, "soft_options")]:
        with pytest.raises(err, match=re.escape(needle)):
            gear.compare(sysm, q0, t_final=0.01, **{"dt": 1e-3, **kw})
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


# ---------------------------------------------------------------------------
# failed runs are recorded, the others kept
# ---------------------------------------------------------------------------
class _Broken(gear.solvers.ConstraintSolver):
    """A solver that always raises (stands for a broken plugin)."""

    name = "broken"

    def _forward(self, q, dq, tau, f_ext):
        raise RuntimeError("this solver always fails")


QUICK = dict(work_precision=None, stability=False)


def test_soft_run_of_a_long_chain_completes_by_default():
    """The N-four-bar at N = 50: the soft run used to diverge at t = 0.5 s
    (and take the finished runs down with it); its default velocity damping
    1 / (5 dt) keeps it within 5e-5 rad of kkt.  Without damping it
    still diverges, and is recorded as failed with compare's own advice."""
    sysm, q0 = mech.n_four_bar(50)
    kw = dict(t_final=0.6, dt=1e-3, integrators="rk4", solvers=("kkt", "soft"), maximal=False, reference=False,
              **QUICK)
    rep = gear.compare(sysm, q0, **kw)
    assert rep.failed == {}
    soft = rep.runs[1]
    assert soft["solver_options"]["damping"] == pytest.approx(200.0)
    assert rep.settings["reference"] == "kkt / rk4" and not rep.settings["reference_is_separate"]
    assert soft["max_deviation"] < 5e-5 and soft["max_constraint_residual"] < 1e-4 and soft["final_error"] is None
    assert validate(rep.to_dict())["settings"]["reference_error"] is None
    bare = gear.compare(sysm, q0, soft_options={"damping": 0.0}, **kw)
    assert list(bare.failed) == ["soft / rk4"] and bare.runs[0]["status"] == "ok"
    reason = bare.failed["soft / rk4"]
    assert reason.startswith("the soft / rk4 run failed: ") and "non-finite" in reason
    assert "reduce dt" in reason and "leave 'soft' out of solvers" in reason
    assert "implicit" not in reason and "\n" not in reason            # compare has no integrator='implicit'
    assert bare.trajectories.keys() == {"kkt / rk4"} and bare.series["residual"].keys() == {"kkt / rk4"}


def test_a_failing_run_is_recorded_with_its_reason_and_the_others_kept(tmp_path):
    sysm, q0 = mech.four_bar()
    rep = gear.compare(sysm, q0, t_final=0.05, dt=1e-3, integrators="rk4", solvers=("kkt", _Broken, "soft"),
                       work_precision=(1, 2, 4), stability={"horizon": 0.02})
    names = ["kkt / rk4", "broken / rk4", "soft / rk4", "maximal / rk4", "maximal / rk4, unstabilised"]
    assert [r["name"] for r in rep.runs] == names
    assert [r["status"] for r in rep.runs] == ["ok", "failed", "ok", "ok", "ok"]
    assert rep.failed == {"broken / rk4": "the broken / rk4 run failed: RuntimeError: this solver always fails; "
                                          "leave 'broken' out of solvers"}
    assert rep.runs[2]["max_deviation"] < 1e-6
    assert "broken / rk4" not in rep.stability and {p["run"] for p in rep.work_precision} == set(names) - {
        "broken / rk4"}
    assert "| broken / rk4 | reduced | rk4 | projection | failed |" in rep.table()
    assert "- `broken / rk4`: the broken / rk4 run failed: RuntimeError" in rep.table()
    paths = rep.save(tmp_path / "rep")
    assert len(paths) == 8
    d = validate(str(tmp_path / "rep" / "report.json"))
    broken = d["runs"][1]
    assert broken["status"] == "failed" and "always fails" in broken["error"]
    assert broken["max_deviation"] is None and "broken / rk4" not in d["series"]["deviation"]
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
        labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        assert any(lab.startswith("broken / rk4 (failed: RuntimeError: this solver always fails") for lab in labels), key
        plt.close(fig)


def test_maximal_runs_fail_together_when_the_model_has_no_maximal_form(monkeypatch):
    """A MaximalModel that cannot be built (here: stands for joint-space
    rows) fails every maximal run with its reason; the reduced ones stay."""
    def no_maximal_form(*a, **k):
        raise ValueError("constraints[0] (Coupler) is a row in joint space and has no maximal-coordinate form")

    monkeypatch.setattr(gear.comparison, "_maximal_model", no_maximal_form)
    sysm, q0 = mech.four_bar()
    rep = gear.compare(sysm, q0, t_final=0.02, dt=1e-3, solvers=("kkt",), **QUICK)
    assert [r["status"] for r in rep.runs] == ["ok", "ok"] + ["failed"] * 4
    reason = rep.failed["maximal / euler, unstabilised"]
    assert "no maximal-coordinate form" in reason and "(maximal=False)" in reason
    assert rep.sizes["maximal_rows"] is None


def test_every_run_failing_still_gives_a_report(tmp_path):
    sysm, q0 = mech.four_bar()
    rep = gear.compare(sysm, q0, t_final=0.01, dt=1e-3, solvers=(_Broken,), maximal=False)
    assert list(rep.failed) == ["broken / euler", "broken / rk4"] and len(rep.failed) == len(rep.runs)
    assert len(rep.t) == 0 and rep.work_precision == [] and rep.stability == {}
    rep.save(tmp_path / "rep")
    d = validate(str(tmp_path / "rep" / "report.json"))
    assert d["runs"][0]["status"] == "failed"


def test_plots_keep_coinciding_curves_visible_and_say_what_they_show(rep):
    import matplotlib.pyplot as plt

    figs = rep.figures()
    assert set(figs) == {"residual", "energy_drift", "deviation", "cost", "drift", "work_precision"}
    ax = figs["energy_drift"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lab.startswith("kkt / rk4, projection / rk4") and lab.endswith("coincide") for lab in labels)
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    styles = {(lines[n].get_linestyle(), lines[n].get_marker(), lines[n].get_color()) for n in NAMES}
    assert len(styles) == len(NAMES)                            # each drawn differently, with markers
    assert ax.get_ylabel() == "|E − E0| (J)"
    dev = figs["deviation"].axes[0]
    assert "kkt / rkmk4 + projection at dt/64" in dev.get_title() and dev.get_ylabel().endswith("(rad)")
    wp = figs["work_precision"].axes[0]
    assert wp.get_xscale() == wp.get_yscale() == "log" and "simulated second (ms)" in wp.get_xlabel()
    wl = [t.get_text() for t in wp.get_legend().get_texts()]
    assert set(NAMES) <= set(wl) and any(lab.startswith("reference's own error") for lab in wl)
    left, right = figs["drift"].axes
    assert {ln.get_label() for ln in left.get_lines()} >= {"maximal / euler", "maximal / euler, unstabilised"}
    assert "kkt / euler" in {ln.get_label() for ln in right.get_lines()} and "joints exact" in right.get_title()
    for fig in figs.values():
        for a in fig.axes:
            assert "(" in a.get_ylabel() + a.get_xlabel()                  # a unit on every plot
        plt.close(fig)


def test_save_never_deletes_user_files(rep, tmp_path):
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
    assert len(rep.save(out, overwrite=True)) == 8
    # the up-front claim: refused before any work, and save fills the claimed directory
    with pytest.raises(FileExistsError, match="--overwrite"):
        gear.comparison.check_output(out, option="--overwrite")
    fresh = gear.comparison.check_output(tmp_path / "new")
    assert len(rep.save(fresh)) == 8
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


def test_a_solver_that_does_not_take_the_rows_fails_its_runs_and_the_others_go_on():
    """A mechanism with a joint coupler (a URDF mimic joint, as on
    example-robot-data's panda): the 'maximal' solver takes loop closures
    only.  ``gear compare`` used to stop with that error; its runs now fail
    with the reason in the report, and every other run (the maximal
    formulation, which holds couplers, among them) is kept."""
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    sysm = gear.ConstrainedModel(arm, [gear.JointCoupler("joint4", "joint2", 0.5, name="mimic:joint4")])
    q0 = sysm.assemble(arm.neutral() + 0.2)
    rep = gear.compare(sysm, q0, t_final=0.01, dt=1e-3, solvers=("kkt", "maximal"), integrators="euler",
                       work_precision=False, stability=False)
    runs = {r["name"]: r for r in rep.runs}
    assert runs["kkt / euler"]["status"] == "ok" and runs["maximal / euler"]["status"] == "ok"
    bad = runs["maximal solver / euler"]
    assert bad["status"] == "failed" and "joint coupler 'mimic:joint4'" in bad["error"]
    assert runs["maximal / euler"]["max_constraint_residual"] <= 1e-12


def test_every_solve_is_timed_on_one_thread(four_bar, monkeypatch):
    # the reduced solvers' solve time is one single-state call, so the
    # maximal runs' batch is timed on one thread too (it used to run on
    # every thread, halving its per-state figure), and the user's thread
    # setting is restored afterwards
    from gear.comparison import _maximal_model, _Run
    import gear.maximal.native as native

    sysm, q0 = four_bar
    mx = _maximal_model(sysm)
    run = _Run("maximal / euler", "maximal", "maximal", "euler", "projection", mx, q0,
               np.zeros(sysm.model.nv), None, sysm)
    seen = []
    accel = native.native_accel

    def spy(*args, **kwargs):
        seen.append(gear.get_num_threads())
        return accel(*args, **kwargs)

    monkeypatch.setattr(native, "native_accel", spy)
    threads = gear.get_num_threads()
    try:
        gear.set_num_threads(2)
        assert run.solve_time() > 0
        assert seen and set(seen) == {1}
        assert gear.get_num_threads() == 2
    finally:
        gear.set_num_threads(threads)

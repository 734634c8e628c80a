"""gear.analysis.sweep: kinematics and kinetostatics along an input range."""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech


def test_four_bar_full_turn_ratios_and_static_torque():
    a, b, c = 0.2, 0.5, 0.4
    sysm, q0 = mech.four_bar(crank=a, coupler=b, rocker=c, ground=0.6, angle=1.0)
    vals = np.linspace(1.0, 1.0 + 2 * np.pi, 37)
    r = gear.analysis.sweep(sysm, "crank", vals, q0, speed=0.0)
    assert r.assembled.all() and not r.singular.any()
    assert r.q.shape == (37, 3) and r.wrenches.shape == (37, 1, 6) and r.torque.shape == (37, 1)
    np.testing.assert_allclose(r.q[:, 0], vals, rtol=0, atol=0)
    for k in range(0, 37, 6):
        q = r.q[k]
        assert np.abs(sysm.constraint_residual(q)).max() <= 1e-12
        a1, a2 = q[0], q[0] + q[1]
        a3 = a2 + q[2]
        w3 = -a * np.sin(a2 - a1) / (c * np.sin(a2 - a3))          # closed form
        assert abs(r.ratios[k].sum() - w3) < 1e-10
        # at rest, virtual work: input torque = ratio . generalized gravity
        g = gear.gravity_forces(sysm.model, q)
        assert abs(r.torque[k, 0] - r.ratios[k] @ g) < 1e-10
    assert r.peak_wrenches.shape == (1, 2) and r.peak_wrenches[0, 1] > 0


def test_sweep_through_the_parallelogram_branch_point_is_marked_singular():
    sysm, q0 = mech.four_bar(crank=0.3, coupler=0.6, rocker=0.3, ground=0.6, angle=0.3)
    r = gear.analysis.sweep(sysm, "crank", np.linspace(0.3, -0.3, 13), q0)
    assert r.assembled.all()
    assert r.singular[6] and r.singular.sum() == 1             # only at angle 0
    assert np.all(np.isfinite(r.torque)) and np.all(np.isfinite(r.wrenches))


def test_unreachable_values_are_recorded_not_raised():
    sysm, q0 = mech.slider_crank(crank=0.1, rod=0.3)
    # the slider cannot go beyond crank + rod = 0.4
    r = gear.analysis.sweep(sysm, "slider", [0.3, 0.35, 0.5], q0)
    assert r.assembled.tolist() == [True, True, False]
    assert np.isnan(r.q[2]).all()


def test_sweep_bad_input():
    sysm, q0 = mech.four_bar()
    with pytest.raises(KeyError, match="nope"):
        gear.analysis.sweep(sysm, "nope", [0.0])
    with pytest.raises(ValueError, match="finite"):
        gear.analysis.sweep(sysm, "crank", [0.0, np.nan])
    with pytest.raises(TypeError, match="ConstrainedModel"):
        gear.analysis.sweep(sysm.model, "crank", [0.0])


def test_sweep_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib (gear[plot])")
    sysm, q0 = mech.four_bar()
    r = gear.analysis.sweep(sysm, "crank", np.linspace(1.0, 2.0, 5), q0)
    path = tmp_path / "sweep.png"
    r.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_analysis_docstring_examples_run():
    import doctest

    res = doctest.testmod(gear.analysis, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_docs_example_fourbar_sweep_runs(tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib (gear[plot])")
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parents[1] / "docs" / "examples" / "fourbar_sweep.py"
    out = tmp_path / "s.png"
    p = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.exists() and "peak pivot load" in p.stdout


@pytest.mark.parametrize("builder", ["four_bar", "slider_crank", "five_bar", "stewart", "rssr", "bricard"])
def test_joint_wrenches_project_to_the_joint_torques(builder):
    """S_i^T F_i = tau_i: the transmitted wrenches carry the applied torques
    once the closures' constraint wrenches are applied to their bodies."""
    sysm, q0 = getattr(mech, builder)()
    rng = np.random.default_rng(3)
    nv = sysm.model.nv
    dq = sysm.project_velocity(q0, rng.standard_normal(nv))
    tau = rng.standard_normal(nv)
    res = sysm.forward_dynamics(q0, dq, tau)
    F = sysm.joint_wrenches(q0, dq, res.ddq, res.lam)
    out = np.zeros(nv)
    for i, j in enumerate(sysm.model.joints):
        if j.nv:
            sl = sysm.model.idx_v(sysm.model.joint_names[i])
            out[sl] = j.S(q0[sysm.model.idx_q(sysm.model.joint_names[i])]).T @ F[i]
    np.testing.assert_allclose(out, tau, rtol=0, atol=1e-10 * max(1.0, np.abs(tau).max()))
    FB = sysm.joint_wrenches(np.stack([q0, q0]), np.stack([dq, dq]), np.stack([res.ddq] * 2),
                             np.stack([res.lam] * 2))
    np.testing.assert_array_equal(FB[1], F)


def test_joint_wrenches_balance_the_weight_of_a_static_four_bar():
    """At rest and held static by the crank, the ground's forces and moments
    on the mechanism (crank bearing + rocker pivot) balance gravity exactly."""
    sysm, q0 = mech.four_bar()
    model = sysm.model
    z = np.zeros(3)
    hd = sysm.hybrid_dynamics(q0, z, z, z, ["crank"])
    assert np.abs(hd.ddq).max() < 1e-12                          # static
    F = sysm.joint_wrenches(q0, z, hd.ddq, hd.lam)
    poses = gear.forward_kinematics(model, q0)
    R0, p0 = poses[0][:3, :3], poses[0][:3, 3]
    force = R0 @ F[0, 3:]                                        # world on crank, through the crank joint
    moment = R0 @ F[0, :3] + np.cross(p0, force)                 # about the world origin
    c = sysm.constraints[0]
    wb = sysm.constraint_wrenches(q0, hd.lam)[0]                 # on the world, at the pivot frame
    RB, pB = c.placement_b.R, c.placement_b.p
    f_on_rocker = -(RB @ wb[3:])
    m_on_rocker = -(RB @ wb[:3]) + np.cross(pB, f_on_rocker)
    weight = np.zeros(3)
    wmoment = np.zeros(3)
    for i, I in enumerate(model.inertias):
        com = poses[i][:3, :3] @ I.com + poses[i][:3, 3]
        weight += I.mass * model.gravity
        wmoment += np.cross(com, I.mass * model.gravity)
    np.testing.assert_allclose(force + f_on_rocker + weight, 0, atol=1e-12)
    np.testing.assert_allclose(moment + m_on_rocker + wmoment + 0.0, 0, atol=1e-12)
    assert abs(-F[0, 1] - hd.tau[0]) < 1e-12                      # the crank's holding torque


def test_sweep_records_joint_loads_and_their_peaks():
    sysm, q0 = mech.four_bar()
    r = gear.analysis.sweep(sysm, "crank", np.linspace(q0[0], q0[0] + 1.0, 5), q0)
    assert r.joint_loads.shape == (5, 3, 6)
    pk = r.peak_joint_loads
    assert pk.shape == (3, 2) and np.all(pk[:, 1] > 0)
    k = 2
    hd = sysm.hybrid_dynamics(r.q[k], r.ratios[k], np.zeros(3), np.zeros(3), ["crank"])
    np.testing.assert_allclose(r.joint_loads[k], sysm.joint_wrenches(r.q[k], r.ratios[k], hd.ddq, hd.lam),
                               atol=1e-12)
    d = gear.analysis.report(sysm, "crank", np.linspace(q0[0], q0[0] + 1.0, 5), q0).to_dict()
    assert [p["joint"] for p in d["sweep"]["peak_joint_loads"]] == ["crank", "coupler", "rocker"]


def test_assembly_steps_stay_bounded_near_singular_configurations():
    """Bricard's sweep runs into its folded, 2-dof branch (link3 = pi); the
    assembled angles stay of the order of the inputs (a trust region on
    the Gauss-Newton steps), never 1e10 rad of a minimum-norm step along a
    vanishing singular value."""
    sysm, q0 = mech.bricard()
    vals = q0[0] + np.linspace(0, 2 * np.pi, 37)
    r = gear.analysis.sweep(sysm, "link1", vals, q0)
    ok = r.assembled
    assert ok.sum() >= 25
    assert np.abs(r.q[ok]).max() < 10.0
    for k in np.flatnonzero(ok):
        assert np.abs(sysm.constraint_residual(r.q[k])).max() <= 1e-10
    folded = ok & (np.abs(np.abs(r.q[:, 2]) - np.pi) < 1e-6)
    assert folded.any() and np.all(r.dof[folded] == 2) and np.all(r.singular[folded])
    assert np.all(r.dof[ok & ~folded] == 1)


def test_sweep_plot_and_summary_give_units_from_the_joint_kind():
    pytest.importorskip("matplotlib", reason="plots need matplotlib (gear[plot])")
    import matplotlib.pyplot as plt

    sysm, q0 = mech.slider_crank()
    r = gear.analysis.sweep(sysm, "slider", np.linspace(q0[2], q0[2] + 0.02, 3), q0)
    assert (r.input_unit, r.effort, r.effort_unit) == ("m", "force", "N")
    assert r.units == {"crank": "rad", "rod": "rad", "slider": "m"}
    fig = r.plot()
    ax = fig.axes
    assert ax[2].get_ylabel() == "input force (N)\nat 1 m/s" and ax[2].get_xlabel() == "slider (m)"
    assert "rad or m" not in " ".join(a.get_xlabel() + a.get_ylabel() for a in ax)
    plt.close(fig)
    rep = gear.analysis.report(sysm, "crank", np.linspace(q0[0], q0[0] + 0.2, 3), q0)
    text = rep.summary()
    assert "input torque at 1 rad/s: [" in text and text.split("input torque at 1 rad/s: ")[1].split("\n")[0].endswith("N·m")
    d = rep.to_dict()["sweep"]
    assert d["units"] == {"input": "rad", "effort": "torque", "effort_unit": "N·m",
                          "coordinates": {"crank": "rad", "rod": "rad", "slider": "m"}}
    assert d["other_dof"] is None
    fig = rep.sweep.plot()
    assert fig.axes[2].get_ylabel() == "input torque (N·m)\nat 1 rad/s"
    plt.close(fig)


def test_a_two_dof_sweep_says_how_the_other_dof_is_treated():
    pytest.importorskip("matplotlib", reason="plots need matplotlib (gear[plot])")
    import matplotlib.pyplot as plt

    sysm, q0 = mech.five_bar()
    rep = gear.analysis.report(sysm, "left", q0[0] + np.linspace(0, 0.3, 4), q0)
    assert rep.sweep.mobility == 2
    note = rep.sweep.other_dof
    assert note.startswith("2 degrees of freedom: only 'left' is driven and the other one is not held")
    assert "passive" in note and "smallest joint change" in note
    assert note in rep.summary() and rep.to_dict()["sweep"]["other_dof"] == note
    fig = rep.sweep.plot()
    assert "the other one is not held" in fig._suptitle.get_text()
    plt.close(fig)


def test_analysis_save_never_deletes_user_files(tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib (gear[plot])")
    sysm, q0 = mech.four_bar()
    rep = gear.analysis.report(sysm, "crank", np.linspace(1.0, 1.2, 3), q0)
    user = tmp_path / "mine"
    user.mkdir()
    (user / "data.csv").write_text("1,2\n")
    with pytest.raises(FileExistsError, match="did not write"):
        rep.save(user, overwrite=True)
    assert sorted(p.name for p in user.iterdir()) == ["data.csv"]
    out = tmp_path / "an"
    assert [p.rsplit("/", 1)[-1] for p in map(str, rep.save(out))] == ["analysis.json", "sweep.png"]
    with pytest.raises(FileExistsError, match="overwrite=True"):
        rep.save(out)
    rep.save(out, overwrite=True)
    with pytest.raises(FileExistsError, match="--overwrite"):
        gear.analysis.check_output(out, option="--overwrite")
    claimed = gear.analysis.check_output(tmp_path / "new")
    assert len(rep.save(claimed)) == 2
    # a comparison report's directory is not an analysis's
    with pytest.raises(FileExistsError, match="not a analysis|compare report"):
        gear.comparison.check_output(claimed)


def test_progress_defaults_to_a_terminal_check(capsys):
    import inspect

    assert inspect.signature(gear.analysis.sweep).parameters["progress"].default is None
    assert inspect.signature(gear.analysis.report).parameters["progress"].default is None
    sysm, q0 = mech.four_bar()
    gear.analysis.sweep(sysm, "crank", [1.0, 1.1], q0)
    assert capsys.readouterr() == ("", "")


def test_joint_wrenches_with_python_rows():
    """A system whose rows are Python (a gear.CustomConstraint: nonlinear
    joint equalities, OpenSim-style models) has no native row data; its
    joint wrenches come from the tree's terms alone and equal those of the
    same coupling as a native gear.JointCoupler (it crashed the process
    before 2026-11-27).  Native entry points given None raise TypeError."""
    from gear import _core

    model = gear.Model()
    I = gear.Inertia(1.0, [0.2, 0.0, 0.0], np.diag([0.01, 0.02, 0.02]))
    model.add_body("a", "world", gear.joints.Revolute([0, 1, 0]), inertia=I)
    model.add_body("b", "a", gear.joints.Revolute([0, 1, 0]), placement=gear.SE3(p=[0.4, 0, 0]), inertia=I)
    model.add_body("c", "b", gear.joints.Revolute([1, 0, 0]), placement=gear.SE3(p=[0.4, 0, 0]), inertia=I)
    names = model.joint_names
    native = gear.ConstrainedModel(model, [gear.JointCoupler(names[2], names[0], multiplier=0.5, offset=0.1)])
    row = np.array([[-0.5, 0.0, 1.0]])
    python = gear.ConstrainedModel(model, [gear.CustomConstraint(
        lambda q: row, lambda q, dq: np.zeros(1), lambda q: np.array([q[2] - 0.5 * q[0] - 0.1]))])
    assert python._native() is None and native._native() is not None
    rng = np.random.default_rng(8)
    q = native.assemble(rng.uniform(-1, 1, 3))
    dq = native.project_velocity(q, rng.standard_normal(3))
    tau = rng.standard_normal(3)
    a, b = native.forward_dynamics(q, dq, tau), python.forward_dynamics(q, dq, tau)
    np.testing.assert_allclose(b.ddq, a.ddq, rtol=0, atol=1e-12)
    Fa = native.joint_wrenches(q, dq, a.ddq, a.lam)
    Fb = python.joint_wrenches(q, dq, b.ddq, b.lam)
    np.testing.assert_allclose(Fb, Fa, rtol=0, atol=1e-12)
    with pytest.raises(TypeError):
        _core.maximal_terms(model.data, None, q, dq, *(np.empty((3, n)) for n in (12, 36, 6, 6, 12, 6)),
                            np.empty((1, 12)), np.empty(1))


def test_summary_shows_rounding_level_loads_as_zero():
    # the planar four-bar's out-of-plane joint moments are rounding
    # (about 1e-12 N·m beside the crank's 1 N·m): the summary reads 0, the
    # saved numbers stay as computed
    sysm, q0 = mech.four_bar()
    rep = gear.analysis.report(sysm, "crank", np.linspace(q0[0], q0[0] + 2 * np.pi, 37), q0)
    loads = {p["joint"]: p for p in rep.to_dict()["sweep"]["peak_joint_loads"]}
    assert loads["coupler"]["moment"] < 1e-9 and loads["crank"]["moment"] > 0.5
    text = rep.summary()
    assert "peak load on joint 'coupler': |f| " in text
    line = [x for x in text.splitlines() if "joint 'coupler'" in x][0]
    assert line.endswith("|m| 0 N·m") and "|f| 0 N" not in line
    crank = [x for x in text.splitlines() if "joint 'crank'" in x][0]
    assert not crank.endswith("|m| 0 N·m")

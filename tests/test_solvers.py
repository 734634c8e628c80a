"""Constraint-solver plugins: registry, cross-solver agreement, soft
convergence, a third-party solver found through its entry point."""
import pathlib
import warnings

import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear import solvers

PLUGINS = pathlib.Path(__file__).resolve().parent / "plugins"


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b)))


MECHS = {
    "four_bar": mech.four_bar,
    "four_bar_collinear": lambda: mech.four_bar(crank=0.3, coupler=0.6, rocker=0.3, ground=0.6, angle=0.0),
    "slider_crank": mech.slider_crank,
    "five_bar": mech.five_bar,
    "n_four_bar_10": lambda: mech.n_four_bar(10),
    "rssr": mech.rssr,
    "stewart": mech.stewart,
    "bricard": mech.bricard,
    "rolling_ball": mech.rolling_ball,
}


def test_builtins_are_available():
    assert {"kkt", "projection", "soft"} <= set(solvers.available())


@pytest.mark.parametrize("name", sorted(MECHS))
def test_hard_solvers_agree(name):
    sysm, q = MECHS[name]()
    model = sysm.model
    rng = np.random.default_rng(len(name))
    dq = sysm.project_velocity(q, rng.standard_normal(model.nv))
    if name == "four_bar_collinear":
        # at the branch point most instantaneous velocities are not followed
        # by a motion (A ddq = -dA dq has no solution): start at rest
        dq = np.zeros(model.nv)
    tau = rng.standard_normal(model.nv)
    A = sysm.constraint_jacobian(q)
    ref = sysm.forward_dynamics(q, dq, tau)
    proj = sysm.with_solver("projection").forward_dynamics(q, dq, tau)
    assert proj.solver == "projection" and proj.residual < 1e-9 * max(1.0, np.abs(proj.ddq).max())
    assert rel(proj.ddq, ref.ddq) < 1e-8
    assert rel(A.T @ proj.lam, A.T @ ref.lam) < 1e-8
    # hybrid dynamics with the first joint prescribed
    pres = np.zeros(model.nbodies, dtype=bool)
    pres[0] = True
    h1 = sysm.hybrid_dynamics(q, dq, ref.ddq, tau, pres)
    h2 = sysm.with_solver("projection").hybrid_dynamics(q, dq, ref.ddq, tau, pres)
    assert rel(h2.ddq, h1.ddq) < 1e-8 and rel(h2.tau, h1.tau) < 1e-8
    assert rel(A.T @ h2.lam, A.T @ h1.lam) < 1e-8
    # the maximal-coordinate solver (sparse, CHOLMOD) on the same states;
    # it takes loop closures only (the rolling ball is a custom constraint)
    try:
        import sksparse  # noqa: F401
    except ImportError:
        return
    if name == "rolling_ball":
        with pytest.raises(NotImplementedError, match="LoopClosure constraints only"):
            sysm.with_solver("maximal")
        return
    mx = sysm.with_solver("maximal")
    r = mx.forward_dynamics(q, dq, tau)
    assert r.solver == "maximal" and r.residual < 1e-9 * max(1.0, np.abs(r.ddq).max())
    assert rel(r.ddq, ref.ddq) < 1e-8
    assert rel(A.T @ r.lam, A.T @ ref.lam) < 1e-8
    h3 = mx.hybrid_dynamics(q, dq, ref.ddq, tau, pres)
    assert rel(h3.ddq, h1.ddq) < 1e-8 and rel(h3.tau, h1.tau) < 1e-8
    assert rel(A.T @ h3.lam, A.T @ h1.lam) < 1e-8


def test_soft_converges_to_hard_at_rate_one():
    sysm, q = mech.four_bar()
    rng = np.random.default_rng(0)
    dq = sysm.project_velocity(q, rng.standard_normal(3))
    tau = rng.standard_normal(3)
    hard = sysm.forward_dynamics(q, dq, tau).ddq
    errs = []
    for k in (1e3, 1e4, 1e5, 1e6):
        soft = sysm.with_solver("soft", stiffness=k).forward_dynamics(q, dq, tau)
        assert soft.solver == "soft" and soft.residual > 0
        errs.append(np.abs(soft.ddq - hard).max())
    rates = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all(np.abs(rates - 10.0) < 0.5), rates          # error O(1/stiffness)
    assert errs[-1] < 1e-4 * np.abs(hard).max()


def test_solver_options_are_checked():
    sysm, _ = mech.four_bar()
    with pytest.raises(TypeError, match="unknown option.*'stifness'"):
        sysm.with_solver("soft", stifness=1.0)
    with pytest.raises(ValueError, match="stiffness must be positive"):
        sysm.with_solver("soft", stiffness=-1.0)
    with pytest.raises(ValueError, match="rcond"):
        sysm.with_solver("projection", rcond=2.0)
    with pytest.raises(TypeError, match="ConstraintSolver"):
        sysm.with_solver(dict)


def test_third_party_solver_through_its_entry_point(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    solvers.refresh()
    try:
        with pytest.warns(UserWarning, match="'broken_solver'.*could not be loaded"):
            names = solvers.available()
        assert "dense_lstsq" in names and "broken_solver" not in names
        sysm, q = mech.five_bar()
        rng = np.random.default_rng(1)
        dq = sysm.project_velocity(q, rng.standard_normal(sysm.model.nv))
        tau = rng.standard_normal(sysm.model.nv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            other = sysm.with_solver("dense_lstsq")
        r = other.forward_dynamics(q, dq, tau)
        assert r.solver == "dense_lstsq"
        assert rel(r.ddq, sysm.forward_dynamics(q, dq, tau).ddq) < 1e-9
        assert other.solver.counters["calls"] == 1
        # the class itself works too
        import gear_dummy_solver

        assert gear.ConstrainedModel(sysm.model, sysm.constraints,
                                     solver=gear_dummy_solver.DenseLstsqSolver).solver.name == "dense_lstsq"
    finally:
        monkeypatch.undo()
        solvers.refresh()
    assert "dense_lstsq" not in solvers.available()


def test_a_broken_plugin_does_not_break_import():
    import subprocess
    import sys

    code = "import warnings; warnings.simplefilter('error'); import gear; print('ok')"
    env_path = str(PLUGINS)
    p = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {env_path!r}); {code}"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_docs_solvers_doctest():
    import doctest

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "solvers.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


OPENSIM_KNEE = """<mujoco><worldbody>
      <body name="thigh"><joint name="hip" axis="0 1 0"/>
        <inertial pos="0 0 -0.2" mass="2" diaginertia="0.02 0.02 0.005"/>
        <body name="knee_frame" pos="0 0 -0.4"><joint name="knee_rot" axis="0 1 0"/>
          <inertial pos="0 0 0" mass="0"/>
          <body name="shank"><joint name="knee" axis="0 1 0"/>
            <inertial pos="0 0 -0.2" mass="1" diaginertia="0.01 0.01 0.002"/></body></body></body>
    </worldbody><equality>
      <joint name="couple" joint1="knee_rot" joint2="knee" polycoef="0 0.3 -0.1 0 0"/>
    </equality></mujoco>"""


def test_massless_dofs_moved_by_the_constraints(tmp_path):
    """OpenSim-style models (Menagerie's ms_human_700) put joints on
    massless bodies that only a joint equality moves (here a second hinge
    about the knee's axis): M is singular.  The
    'kkt' solver says so and names the 'projection' solver, which solves
    it (M is positive on the motions the rows allow): its ddq keeps the
    rows' acceleration at zero and equals the same mechanism written
    without the massless joint."""
    xml = tmp_path / "opensim.xml"
    xml.write_text(OPENSIM_KNEE)
    m = gear.load_mjcf(str(xml))
    q = np.array([0.3, 0.0, 0.0])
    sysm = gear.ConstrainedModel(m)
    q = sysm.assemble(q + np.array([0.0, 0.0, 0.4]), locked=["knee"])
    dq = sysm.project_velocity(q, np.array([0.5, 0.0, -1.0]))
    with pytest.raises(gear.SingularInertiaError, match="solver='projection'"):
        sysm.forward_dynamics(q, dq, np.zeros(3))
    r = gear.ConstrainedModel(m, solver="projection").forward_dynamics(q, dq, np.array([0.1, 0.0, -0.2]))
    A, bias = sysm.solver.rows(q, dq)
    assert np.allclose(A @ r.ddq + bias, 0.0, atol=1e-12)
    # the same accelerations from M regularised on the massless dof alone
    # (a stiff armature there changes nothing the rows allow)
    M = gear.mass_matrix(m, q) + np.diag([0.0, 1e-9, 0.0])
    b = gear.bias_forces(m, q, dq)
    K = np.block([[M, A.T], [A, np.zeros((1, 1))]])
    sol = np.linalg.solve(K, np.r_[np.array([0.1, 0.0, -0.2]) - b, -bias])
    assert np.allclose(r.ddq, sol[:3], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("stabilization", ["projection", "baumgarte"])
def test_simulating_massless_dofs_moved_by_the_constraints(tmp_path, stabilization):
    """With a singular M the stabilisations' mass-metric corrections are
    taken on the motions the rows allow (Menagerie's ms_human_700 failed
    with numpy's "Singular matrix"): the knee above, simulated with the
    'projection' solver, follows the double pendulum it is (hip, and the
    shank's angle knee + knee_rot), and keeps its rows."""
    xml = tmp_path / "opensim.xml"
    xml.write_text(OPENSIM_KNEE)
    m = gear.load_mjcf(str(xml))
    sysm = gear.ConstrainedModel(m, solver="projection")
    q0 = sysm.assemble(np.array([0.3, 0.0, 0.4]), locked=["knee"])
    v0 = sysm.project_velocity(q0, np.array([0.5, 0.0, -1.0]))
    tr = gear.simulate(sysm, q0, v0, 0.2, 1e-3, integrator="rk4", stabilization=stabilization, progress=False)
    assert np.abs(sysm.constraint_residual(tr.q[-1])).max() < (1e-10 if stabilization == "projection" else 1e-8)
    plain = gear.Model()
    Ith = gear.Inertia(2.0, [0, 0, -0.2], np.diag([0.02, 0.02, 0.005]))
    Ish = gear.Inertia(1.0, [0, 0, -0.2], np.diag([0.01, 0.01, 0.002]))
    plain.add_body("thigh", "world", gear.joints.Revolute([0, 1, 0]), inertia=Ith)
    plain.add_body("shank", "thigh", gear.joints.Revolute([0, 1, 0]), placement=gear.SE3(p=[0, 0, -0.4]),
                   inertia=Ish)
    p0 = np.array([q0[0], q0[1] + q0[2]])
    w0 = np.array([v0[0], v0[1] + v0[2]])
    ref = gear.simulate(plain, p0, w0, 0.2, 1e-3, integrator="rk4", progress=False)
    got = np.stack([tr.q[:, 0], tr.q[:, 1] + tr.q[:, 2]], axis=1)
    np.testing.assert_allclose(got, ref.q, rtol=0, atol=1e-7)

"""gear.MaximalModel: maximal coordinates as a formulation with its own
state (Ruan, "Articulated rigid body systems", Sec. 3).

Oracles: the reduced dynamics (ABA, the closed-loop KKT) mapped to body
accelerations by Pinocchio's forwardKinematics(q, v, a) on the same file
and by the tree's own kinematics; central differences of the rows along
``T exp(t V)``; the sparse KKT system solved densely."""
import numpy as np
import pytest

import gear
import gear.testing
from gear import mechanisms as mech
from gear.constraints._kinematics import tree_kinematics
from gear.maximal import MaximalModel
from gear.maximal import rows as R
from gear.spatial.stacks import exp_se3_rows
from gear.testing import random_tree

MECHS = [mech.four_bar, mech.slider_crank, mech.five_bar, mech.rssr, mech.stewart, mech.bricard,
         lambda: mech.n_four_bar(4), lambda: mech.n_four_bar(3, tree="ground")]


def _body_accels(model, q, dq, ddq):
    _, J, _, acc = tree_kinematics(model, q, dq)
    return np.einsum("bij,j->bi", J, ddq) + acc


@pytest.mark.parametrize("build", MECHS)
def test_closed_chains_body_accelerations_equal_the_reduced_ones(build):
    sys, q = build()
    m = sys.model
    rng = np.random.default_rng(3)
    dq = sys.project_velocity(q, rng.standard_normal(m.nv))
    tau = rng.standard_normal(m.nv)
    f_ext = 0.3 * rng.standard_normal((m.nbodies, 6))
    red = sys.forward_dynamics(q, dq, tau, f_ext)
    mx = MaximalModel(sys)
    assert mx.nrows == sum(6 - j.nv for j in m.joints) + sys.nc
    poses, twists = mx.state(q, dq)
    res = mx.forward_dynamics(poses, twists, tau, f_ext)
    ref = _body_accels(m, q, dq, red.ddq)
    assert np.abs(res.dV - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max())
    assert res.residual <= 1e-9
    # the loop rows are the reduced rows: their forces do the same work
    loop = np.array([n.startswith("loop:") for n in mx.row_names])
    A = sys.constraint_jacobian(q)
    np.testing.assert_allclose(A.T @ res.lam[loop], A.T @ red.lam, atol=1e-8 * max(1, np.abs(red.lam).max()))


@pytest.mark.parametrize("seed", range(8))
def test_random_trees_of_every_joint_kind(seed):
    rng = np.random.default_rng(seed)
    m = random_tree(rng, nbodies=10)
    q, dq = m.random_configuration(rng), rng.standard_normal(m.nv)
    tau, f_ext = rng.standard_normal(m.nv), rng.standard_normal((m.nbodies, 6))
    mx = MaximalModel(m)
    poses, twists = mx.state(q, dq)
    res = mx.forward_dynamics(poses, twists, tau, f_ext)
    ref = _body_accels(m, q, dq, gear.forward_dynamics(m, q, dq, tau, f_ext))
    assert np.abs(res.dV - ref).max() <= 1e-10 * max(1.0, np.abs(ref).max())
    assert np.abs(mx.joint_residual(poses)).max() <= 1e-12
    q2, dq2 = mx.to_reduced(poses, twists)
    assert np.abs(m.difference(q, q2)).max() <= 1e-10
    np.testing.assert_allclose(dq2, dq, atol=1e-10)


def test_every_joint_kind_is_covered():
    kinds = set()
    for seed in range(8):
        kinds |= {type(j).__name__ for j in random_tree(np.random.default_rng(seed), nbodies=10).joints}
    assert kinds == set(gear.joints.KINDS.values()) if isinstance(gear.joints.KINDS, dict) else True
    assert len(kinds) == 9


def test_against_pinocchio_forward_kinematics_with_accelerations():
    """Reduced ddq (gear) -> body accelerations by Pinocchio on the same
    URDF, against MaximalModel's dV from poses and twists alone: a
    floating quadruped, and the arm closed by a ball at its tip."""
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (pin) is a test-only reference")
    from gear.interop import map_by_name

    rng = np.random.default_rng(11)
    for fname, floating in (("quadruped.urdf", True), ("arm7.urdf", False)):
        path = gear.data_path(fname)
        m = gear.load_urdf(path, floating_base=floating)
        pm = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
              else pin.buildModelFromUrdf(path))
        mp = map_by_name(m, pm)
        if floating:
            sys = gear.ConstrainedModel(m, [])
            q = m.random_configuration(rng)
            dq = rng.standard_normal(m.nv)
        else:
            tip = m.body_names[-1]
            q0 = m.random_configuration(rng)
            pose = gear.forward_kinematics(m, q0)[-1]
            closure = gear.LoopClosure(tip, None, "world", gear.SE3(pose[:3, :3], pose[:3, 3]), "ball")
            sys = gear.ConstrainedModel(m, [closure])
            q = q0
            dq = sys.project_velocity(q, rng.standard_normal(m.nv))
        tau = rng.standard_normal(m.nv)
        ddq = sys.forward_dynamics(q, dq, tau).ddq
        pd = pm.createData()
        pin.forwardKinematics(pm, pd, mp.q(q), mp.v(dq), mp.v(ddq))
        mx = MaximalModel(sys)
        poses, twists = mx.state(q, dq)
        dV = mx.forward_dynamics(poses, twists, tau).dV
        for i in range(m.nbodies):
            jid = int(mp.joint_id[i])
            if jid == 0:
                continue
            a = pin.SE3(mp.offset[i].R, mp.offset[i].p).actInv(pd.a[jid])
            ref = np.r_[a.angular, a.linear]
            assert np.abs(dV[i] - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max()), (fname, i)


def _fd_rows(mx, poses, twists, h=1e-5):
    """g, dg/dt and d^2g/dt^2 along T_i(t) = T_i exp(t V_i) (dV = 0) by
    central differences."""
    def g(t):
        return mx.joint_residual(poses @ exp_se3_rows(t * twists))
    g0, gp, gm = g(0.0), g(h), g(-h)
    return (gp - gm) / (2 * h), (gp - 2 * g0 + gm) / (h * h)


@pytest.mark.parametrize("seed", range(4))
def test_rows_and_bias_are_the_derivatives_of_the_residual(seed):
    """Off the constraint manifold too: random poses and twists."""
    rng = np.random.default_rng(seed)
    sys, q = mech.stewart() if seed == 0 else (gear.ConstrainedModel(random_tree(rng, nbodies=8), []), None)
    mx = MaximalModel(sys)
    m = sys.model
    q = m.random_configuration(rng) if q is None else q
    poses, twists = mx.state(q, rng.standard_normal(m.nv))
    poses = poses @ exp_se3_rows(0.05 * rng.standard_normal((m.nbodies, 6)))     # violate every joint
    twists = twists + rng.standard_normal(twists.shape)
    ev = mx.evaluate(poses[None], twists[None])
    J = mx._J(ev, 0).toarray()
    d1, d2 = _fd_rows(mx, poses, twists)
    np.testing.assert_allclose(J @ twists.ravel(), d1, atol=1e-7, rtol=1e-6)
    np.testing.assert_allclose(ev["bias"][0], d2, atol=2e-4, rtol=1e-3)


def test_the_sparse_system_is_the_kkt_of_forward_dynamics():
    sys, q = mech.five_bar()
    mx = MaximalModel(sys)
    rng = np.random.default_rng(0)
    poses, twists = mx.state(q, sys.project_velocity(q, rng.standard_normal(sys.model.nv)))
    tau = rng.standard_normal(sys.model.nv)
    s = mx.system(poses, twists, tau)
    assert s["M"].shape == (6 * mx.nbodies, 6 * mx.nbodies) and s["J"].shape == (mx.nrows, 6 * mx.nbodies)
    assert s["J"].nnz <= 12 * mx.nrows
    sol = np.linalg.lstsq(s["KKT"].toarray(), np.r_[s["f"], -s["bias"]], rcond=None)[0]
    res = mx.forward_dynamics(poses, twists, tau)
    np.testing.assert_allclose(sol[:6 * mx.nbodies], res.dV.ravel(), atol=1e-9)


def test_batches_equal_single_states():
    sys, q = mech.four_bar()
    mx = MaximalModel(sys)
    rng = np.random.default_rng(5)
    dqs = np.stack([sys.project_velocity(q, rng.standard_normal(3)) for _ in range(4)])
    P, V = mx.state(np.broadcast_to(q, (4, 3)), dqs)
    taus = rng.standard_normal((4, 3))
    batch = mx.forward_dynamics(P, V, taus)
    assert batch.dV.shape == (4, 3, 6) and batch.lam.shape == (4, mx.nrows)
    for n in range(4):
        one = mx.forward_dynamics(P[n], V[n], taus[n])
        np.testing.assert_array_equal(one.dV, batch.dV[n])
    assert mx.joint_residual(P).shape == (4, mx.nrows)
    assert mx.to_reduced(P, V)[1].shape == (4, 3)


def test_to_reduced_never_raises_on_drifted_poses():
    sys, q = mech.four_bar()
    mx = MaximalModel(sys)
    poses, _ = mx.state(q)
    drifted = poses @ exp_se3_rows(1e-2 * np.random.default_rng(1).standard_normal((3, 6)))
    q2 = mx.to_reduced(drifted)
    assert np.abs(q2 - q).max() < 0.05
    g = mx.joint_residual(drifted)
    assert 1e-4 < np.abs(g).max() < 0.1
    assert [n for n in mx.row_names[:5]] == ["joint:crank"] * 5 and mx.row_names[-1] == "loop:ground_pivot"


def test_compliant_rows_are_springs_and_dampers():
    sys, q = mech.four_bar()
    k, c = 1e4, 50.0
    mx = MaximalModel(sys, stiffness=k, damping=c)
    assert mx.compliant
    poses, twists = mx.state(q, sys.project_velocity(q, [1.0, 0, 0], locked=["crank"]))
    poses = poses @ exp_se3_rows(1e-3 * np.random.default_rng(2).standard_normal((3, 6)))
    res = mx.forward_dynamics(poses, twists)
    ev = mx.evaluate(poses[None], twists[None])
    gd = mx._J(ev, 0) @ twists.ravel()
    np.testing.assert_allclose(res.lam, -k * ev["g"][0] - c * gd)


@pytest.mark.parametrize("bad, match", [
    (lambda P: P[:2], "poses must have shape"),
    (lambda P: np.where(np.isnan(P), P, P) * np.nan, "non-finite"),
    (lambda P: P * np.r_[1.0, 1.0, 1.0, 1.0][None, :, None] * 1.01, "rigid transforms"),
    (lambda P: P @ np.diag([1.0, 1.0, -1.0, 1.0]), "determinant"),
])
def test_bad_poses_give_one_line_errors(bad, match):
    sys, q = mech.four_bar()
    mx = MaximalModel(sys)
    poses, twists = mx.state(q)
    with pytest.raises(ValueError, match=match) as info:
        mx.forward_dynamics(bad(poses), twists)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="twists must have shape"):
        mx.forward_dynamics(poses, twists[:, :3])
    with pytest.raises(ValueError, match="stiffness"):
        MaximalModel(sys, stiffness=-1.0)
    with pytest.raises(ValueError, match="damping"):
        MaximalModel(sys, damping=1.0)


@pytest.mark.parametrize("mult, off", [(0.5, 0.1), (-2.0, 0.0)])
def test_joint_couplers_are_rows_on_four_bodies(mult, off):
    """URDF mimic joints and gear.JointCoupler: q_j = m q_s + o as one row on
    the two joints' relative twists (revolute and prismatic joints)."""
    rng = np.random.default_rng(7)
    m = random_tree(rng, nbodies=7, kinds=["revolute", "prismatic", "helical", "revolute", "spherical",
                                           "revolute", "prismatic"])
    names = m.joint_names
    sys = gear.ConstrainedModel(m, [gear.JointCoupler(names[3], names[0], mult, off),
                                    gear.JointCoupler(names[6], names[1], mult, off),
                                    gear.JointCoupler(names[2], names[5], mult, off)])
    q = sys.assemble(m.random_configuration(rng))
    dq = sys.project_velocity(q, rng.standard_normal(m.nv))
    tau = rng.standard_normal(m.nv)
    red = sys.forward_dynamics(q, dq, tau)
    mx = MaximalModel(sys)
    assert mx.row_names[-3:] == [f"coupler:{c.name}" for c in (c.coupler for c in sys.constraints)]
    poses, twists = mx.state(q, dq)
    assert np.abs(mx.joint_residual(poses)).max() <= 1e-10
    res = mx.forward_dynamics(poses, twists, tau)
    ref = _body_accels(m, q, dq, red.ddq)
    assert np.abs(res.dV - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(res.lam[-3:], red.lam, atol=1e-8 * max(1.0, np.abs(red.lam).max()))
    # the coupler rows are the rates of the coordinates read back from the
    # poses (central differences) wherever the joints hold, for any twists
    twists = twists + rng.standard_normal(twists.shape)
    ev = mx.evaluate(poses[None], twists[None])
    d1, _ = _fd_rows(mx, poses, twists)
    np.testing.assert_allclose(mx._J(ev, 0).toarray() @ twists.ravel(), d1, atol=1e-7, rtol=1e-6)


def test_rows_in_joint_space_and_massless_bodies_are_refused():
    sys, q = mech.four_bar()
    custom = gear.ConstrainedModel(sys.model, list(sys.constraints) + [gear.CustomConstraint(
        lambda q: np.ones((1, 3)), lambda q, dq: np.zeros(1), name="mine")])
    with pytest.raises(ValueError, match=r"constraints\[1\] 'mine'.*no maximal-coordinate form"):
        MaximalModel(custom)
    m = gear.Model()
    m.add_body("a", -1, gear.joints.Revolute(), None, gear.testing.random_inertia(np.random.default_rng(0)))
    m.add_body("b", "a", gear.joints.Revolute(), None, gear.Inertia(0.0))
    with pytest.raises(gear.SingularInertiaError, match="'b'"):
        MaximalModel(m)
    with pytest.raises(TypeError, match="gear.Model or gear.ConstrainedModel"):
        MaximalModel("four-bar")


def test_docs_maximal_doctest():
    import doctest
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "maximal.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 5 and res.failed == 0


def test_distance_closures():
    """A rod between two points (a 'distance' LoopClosure) is one 'dist'
    row; its length is the closure's, or the assembled one."""
    m = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(2)
    q = m.random_configuration(rng)
    tip = gear.forward_kinematics(m, q)[-1]
    anchor = gear.SE3(np.eye(3), tip[:3, 3] + np.array([0.1, 0.05, -0.2]))
    rod = gear.LoopClosure(m.body_names[-1], None, "world", anchor, "distance")
    sys = gear.ConstrainedModel(m, [rod])
    q = sys.assemble(q)
    dq = sys.project_velocity(q, rng.standard_normal(m.nv))
    tau = rng.standard_normal(m.nv)
    red = sys.forward_dynamics(q, dq, tau)
    mx = MaximalModel(sys)
    assert mx.row_names[-1] == f"loop:{rod.name or 'constraint0'}" and mx.rows.types[-1] == R.DIST
    poses, twists = mx.state(q, dq)
    assert abs(mx.joint_residual(poses)[-1]) < 1e-12
    res = mx.forward_dynamics(poses, twists, tau)
    ref = _body_accels(m, q, dq, red.ddq)
    assert np.abs(res.dV - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(res.lam[-1], red.lam[0], rtol=1e-8, atol=1e-10)
    tr = gear.simulate(mx, q, dq, 0.02, 1e-3, integrator="euler")
    assert tr.stats["native"] and tr.stats["max_joint_error"] < 1e-10

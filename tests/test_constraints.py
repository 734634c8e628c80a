"""Loop closures and ConstrainedModel (Kim Sec. 3).

Oracles: finite differences of the position residual on the manifold (rows
A and dA dq of every kind), a dense KKT reference (lstsq), Pinocchio's
constraintDynamics (optional), power balance of the closure wrenches.
"""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.constraints import KINDS
from gear.testing import ALL_KINDS, fd_tangent, random_se3, random_tree


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b)))


def _random_system(seed, kind, to_world=False):
    rng = np.random.default_rng(seed)
    model = random_tree(rng, nbodies=7, kinds=[k for k in ALL_KINDS if k != "fixed"])
    a = "world" if to_world else int(rng.integers(0, 7))
    b = int(rng.integers(0, 7))
    while b == a:
        b = int(rng.integers(0, 7))
    c = gear.LoopClosure(a, random_se3(rng), b, random_se3(rng), kind, name=f"c_{kind}")
    return gear.ConstrainedModel(model, [c]), rng


@pytest.mark.parametrize("to_world", [False, True], ids=["body-body", "body-world"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_rows_are_the_derivatives_of_the_residual(kind, to_world):
    sysm, rng = _random_system(sorted(KINDS).index(kind) + 10 * to_world, kind, to_world)
    model = sysm.model
    assert sysm.nc == KINDS[kind]
    for _ in range(2):
        q = model.random_configuration(rng)
        dq = rng.standard_normal(model.nv)
        A = sysm.constraint_jacobian(q)
        assert A.shape == (KINDS[kind], model.nv)
        # A = d residual / dq in the tangent space
        A_fd = fd_tangent(sysm.constraint_residual, model, q)
        assert rel(A, A_fd) < 1e-7, kind
        # dA dq = d^2/dt^2 residual(q exp(t dq)) (ddq = 0 along that curve)
        h = 1e-4
        r = lambda t: sysm.constraint_residual(model.integrate(q, t * dq))  # noqa: E731
        b_fd = (r(h) - 2.0 * r(0.0) + r(-h)) / h**2
        b = sysm.constraint_bias(q, dq)
        assert rel(b, b_fd) < 1e-5, kind
        # the analytic and numeric values are not the same computation
        assert not np.array_equal(A, A_fd)


def _fourbar():
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    return gear.ConstrainedModel(fb)


def _dense_kkt(sysm, q, dq, tau):
    """Obviously-correct reference: lstsq on [[M, A^T], [A, 0]]."""
    model = sysm.model
    M = gear.mass_matrix(model, q)
    b = gear.bias_forces(model, q, dq)
    A = sysm.constraint_jacobian(q)
    c = sysm.constraint_bias(q, dq)
    m = A.shape[0]
    Kmat = np.block([[M, A.T], [A, np.zeros((m, m))]])
    sol = np.linalg.lstsq(Kmat, np.concatenate([tau - b, -c]), rcond=None)[0]
    return sol[:model.nv], -A.T @ sol[model.nv:]     # M ddq + b = tau + A^T lam


def test_fourbar_mobility_and_redundant_planar_ball():
    sysm = _fourbar()
    q = sysm.model.neutral()
    assert np.abs(sysm.constraint_residual(q)).max() < 1e-12
    mob = sysm.mobility(q)
    # a planar chain closed by a 3-D ball: the out-of-plane row is redundant
    assert (mob.dof, mob.rank, mob.grubler) == (1, 2, 0)
    assert len(mob.redundant) == 1 and not mob.singular


def test_fourbar_forward_dynamics_against_dense_kkt():
    sysm = _fourbar()
    model = sysm.model
    rng = np.random.default_rng(1)
    q = model.neutral()
    for _ in range(3):
        dq = sysm.project_velocity(q, rng.standard_normal(model.nv))
        assert np.abs(sysm.constraint_jacobian(q) @ dq).max() < 1e-12
        tau = rng.standard_normal(model.nv)
        res = sysm.forward_dynamics(q, dq, tau)
        assert res.success and res.solver == "kkt" and res.residual < 1e-9
        A = sysm.constraint_jacobian(q)
        ddq_ref, ATlam_ref = _dense_kkt(sysm, q, dq, tau)
        assert rel(res.ddq, ddq_ref) < 1e-9
        assert rel(A.T @ res.lam, ATlam_ref) < 1e-9
        # equations of motion hold with the constraint force
        M = gear.mass_matrix(model, q)
        b = gear.bias_forces(model, q, dq)
        assert rel(M @ res.ddq + b, tau + A.T @ res.lam) < 1e-10


def test_fourbar_assembly_from_a_perturbed_guess_and_locked_crank():
    sysm = _fourbar()
    model = sysm.model
    q0 = model.neutral()
    guess = q0 + np.array([0.0, 0.2, -0.15])
    q = sysm.assemble(guess, locked=["crank_joint"])
    assert np.abs(sysm.constraint_residual(q)).max() <= 1e-12
    assert q[0] == guess[0]                      # the locked crank kept its guess
    # drive the crank: a new closed configuration for each crank angle
    for a in (0.1, 0.3):
        g = q.copy()
        g[0] += a
        qa = sysm.assemble(g, locked=["crank_joint"])
        assert qa[0] == g[0] and np.abs(sysm.constraint_residual(qa)).max() <= 1e-12


def test_assembly_error_when_the_loop_cannot_close():
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    c = gear.LoopClosure("rocker", gear.SE3(p=[0.4, 0, 0]), "world", None, "distance", distance=5.0)
    sysm = gear.ConstrainedModel(fb, [c])
    with pytest.raises(gear.AssemblyError, match="could not close the loops"):
        sysm.assemble(fb.neutral())


def test_distance_default_is_the_length_at_assembly():
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    c = gear.LoopClosure("rocker", gear.SE3(p=[0.4, 0, 0]), "world", gear.SE3(p=[0.7, 0, 0]), "distance")
    sysm = gear.ConstrainedModel(fb, [c])
    q = fb.neutral() + 0.1
    assert abs(sysm.assemble(q) - q).max() == 0.0          # closed already: length taken at q
    assert abs(sysm.constraint_residual(q)[0]) < 1e-15


def test_weld_on_a_chain_agrees_with_pinocchio():
    pin = pytest.importorskip("pinocchio", reason="Pinocchio is an optional reference (gear[reference])")
    from gear.interop import pinocchio_constraint_dynamics

    rng = np.random.default_rng(5)
    model = gear.testing.random_chain(8, "revolute", rng)
    q = model.random_configuration(rng)
    tip = gear.forward_kinematics(model, q)[-1]
    c = gear.LoopClosure("world", gear.SE3(tip[:3, :3], tip[:3, 3]), model.nbodies - 1, None, "weld")
    sysm = gear.ConstrainedModel(model, [c])
    assert np.abs(sysm.constraint_residual(q)).max() < 1e-12
    assert sysm.mobility(q).dof == 2
    for _ in range(3):
        dq = sysm.project_velocity(q, rng.standard_normal(model.nv))
        tau = rng.standard_normal(model.nv)
        res = sysm.forward_dynamics(q, dq, tau)
        ref = pinocchio_constraint_dynamics(model, [c], q, dq, tau)
        assert rel(res.ddq, ref) < 1e-8
        assert res.residual < 1e-9
    del pin


def test_fourbar_agrees_with_pinocchio():
    pytest.importorskip("pinocchio", reason="Pinocchio is an optional reference (gear[reference])")
    from gear.interop import pinocchio_constraint_dynamics

    sysm = _fourbar()
    model = sysm.model
    rng = np.random.default_rng(2)
    q = model.neutral()
    dq = sysm.project_velocity(q, rng.standard_normal(model.nv))
    tau = rng.standard_normal(model.nv)
    ref = pinocchio_constraint_dynamics(model, sysm.constraints, q, dq, tau, mu=1e-12, max_iter=10000)
    assert rel(sysm.forward_dynamics(q, dq, tau).ddq, ref) < 1e-8


def test_closure_wrench_has_the_power_of_the_constraint_force():
    rng = np.random.default_rng(3)
    for kind in sorted(KINDS):
        sysm, _ = _random_system(40 + len(kind), kind, to_world=True)
        model = sysm.model
        q = model.random_configuration(rng)
        dq = rng.standard_normal(model.nv)
        lam = rng.standard_normal(sysm.nc)
        W = sysm.constraint_wrenches(q, lam)
        assert W.shape == (1, 6)
        c = sysm.constraints[0]
        ib = model.body_index(c.body_b)
        _, V = gear.forward_kinematics(model, q, dq)
        VB = gear.spatial.Ad(c.placement_b.inverse()) @ V[ib]      # twist of frame B
        A = sysm.constraint_jacobian(q)
        # {A} is on the world: all the power of A^T lam goes through body b
        assert abs(lam @ (A @ dq) - W[0] @ VB) < 1e-10 * max(1.0, abs(W[0] @ VB)), kind


def test_custom_constraint_rows_and_nonholonomic_residual():
    model = gear.testing.random_chain(3, "revolute", 0)
    a = np.array([[1.0, -2.0, 0.5]])
    c = gear.CustomConstraint(lambda q: a, lambda q, dq: np.zeros(1), residual=None, name="gear")
    sysm = gear.ConstrainedModel(model, [c])
    q = model.neutral()
    assert sysm.nc == 1 and sysm.constraint_residual(q).shape == (0,)
    res = sysm.forward_dynamics(q, np.zeros(3), np.ones(3))
    assert abs(a @ res.ddq).max() < 1e-12


def test_batches_equal_single_calls():
    sysm = _fourbar()
    model = sysm.model
    rng = np.random.default_rng(4)
    q = np.tile(model.neutral(), (3, 1))
    dq = np.stack([sysm.project_velocity(q[0], rng.standard_normal(3)) for _ in range(3)])
    tau = rng.standard_normal((3, 3))
    res = sysm.forward_dynamics(q, dq, tau)
    assert res.ddq.shape == (3, 3) and res.lam.shape == (3, 3) and res.success.all()
    for k in range(3):
        one = sysm.forward_dynamics(q[k], dq[k], tau[k])
        np.testing.assert_array_equal(res.ddq[k], one.ddq)
    assert sysm.constraint_jacobian(q).shape == (3, 3, 3)
    assert sysm.constraint_wrenches(q, res.lam).shape == (3, 1, 6)


def test_bad_input_is_named():
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    with pytest.raises(KeyError, match="constraints\\[0\\].*no body named 'ghost'"):
        gear.ConstrainedModel(fb, [gear.LoopClosure("ghost", None, "world", None, "ball")])
    with pytest.raises(ValueError, match="kind must be one of"):
        gear.LoopClosure("crank", None, "world", None, "hinge")
    with pytest.raises(ValueError, match="placement_a"):
        gear.LoopClosure("crank", np.eye(3), "world", None, "ball")
    with pytest.raises(ValueError, match="same body"):
        gear.LoopClosure("crank", None, "crank", None, "ball")
    with pytest.raises(TypeError, match="distance"):
        gear.LoopClosure("crank", None, "world", None, "ball", distance=1.0)
    with pytest.raises(ValueError, match="distance must be positive"):
        gear.LoopClosure("crank", None, "world", None, "distance", distance=-1.0)
    with pytest.raises(TypeError, match="constraints\\[0\\]"):
        gear.ConstrainedModel(fb, ["not a constraint"])
    sysm = gear.ConstrainedModel(fb)
    with pytest.raises(ValueError, match="unknown solver"):
        sysm.with_solver("magic")
    with pytest.raises(ValueError, match="q.*non-finite|q.*NaN|q.*finite"):
        sysm.constraint_jacobian([np.nan, 0, 0])
    with pytest.raises(ValueError, match="q.*shape"):
        sysm.constraint_jacobian([0.0, 0.0])
    with pytest.raises(ValueError, match="dq.*shape"):
        sysm.forward_dynamics(fb.neutral(), np.zeros(2), np.zeros(3))
    with pytest.raises(KeyError, match="locked.*no joint named 'nope'"):
        sysm.assemble(fb.neutral(), locked=["nope"])
    # bodies that only fixed joints connect: the rows are zero (rounding
    # noise) at every state, and a solve of them is noise, so it is refused
    from gear.testing import random_inertia, random_joint

    rng = np.random.default_rng(0)
    m = gear.Model()
    m.add_body("arm", "world", random_joint("revolute", rng), placement=random_se3(rng),
               inertia=random_inertia(rng))
    m.add_body("tool", "arm", random_joint("fixed", rng), placement=random_se3(rng),
               inertia=random_inertia(rng))
    m.add_body("post", "world", random_joint("fixed", rng), placement=random_se3(rng),
               inertia=random_inertia(rng))
    for a, b, names in (("tool", "arm", "'tool' and 'arm'"), ("post", "world", "'post' and the world")):
        with pytest.raises(ValueError, match=f"only fixed joints connect \\({names}\\).*constrains nothing"):
            gear.ConstrainedModel(m, [gear.LoopClosure(a, None, b, None, "ball")])
    assert gear.ConstrainedModel(m, [gear.LoopClosure("tool", None, "world", None, "ball")]).nc == 3


def test_docstring_examples_run():
    import doctest

    import gear.constraints.closures
    import gear.constraints.system

    for mod in (gear.constraints.closures, gear.constraints.system):
        res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert res.failed == 0 and res.attempted > 0


def test_docs_constraints_doctest():
    import doctest
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "constraints.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def _fourbar_state(seed):
    sysm = _fourbar()
    model = sysm.model
    rng = np.random.default_rng(seed)
    q = sysm.assemble(model.neutral() + np.array([0.2, 0.0, 0.0]), locked=["crank_joint"])
    dq = sysm.project_velocity(q, rng.standard_normal(3), locked=["crank_joint"])
    return sysm, q, dq, rng


def test_inverse_of_forward_is_identity_when_uniquely_actuated():
    sysm, q, dq, rng = _fourbar_state(10)
    tau = np.array([rng.standard_normal(), 0.0, 0.0])         # crank driven, others passive
    fd = sysm.forward_dynamics(q, dq, tau)
    inv = sysm.inverse_dynamics(q, dq, fd.ddq, actuated=["crank_joint"])
    assert inv.exact and inv.message == "ok"
    assert rel(inv.tau, tau) < 1e-9
    A = sysm.constraint_jacobian(q)
    assert rel(A.T @ inv.lam, A.T @ fd.lam) < 1e-9


def test_under_actuated_inverse_dynamics_falls_back_to_hybrid_dynamics():
    sysm, q, dq, rng = _fourbar_state(11)
    ddq = rng.standard_normal(3)                               # not reachable without actuators
    res = sysm.inverse_dynamics(q, dq, ddq, actuated=[False, False, False])
    assert not res.exact and "under-actuated" in res.message
    # nothing actuated, passive torques 0: the motion is the free motion
    assert rel(res.ddq, sysm.forward_dynamics(q, dq, np.zeros(3)).ddq) < 1e-9
    assert rel(res.tau, np.zeros(3)) < 1e-12


def test_redundant_actuation_objectives():
    sysm, q, dq, rng = _fourbar_state(12)
    ddq = sysm.forward_dynamics(q, dq, rng.standard_normal(3)).ddq      # a reachable motion
    all3 = [True, True, True]
    a = sysm.inverse_dynamics(q, dq, ddq, actuated=all3)
    b = sysm.inverse_dynamics(q, dq, ddq, actuated=all3, objective="min_torque")
    assert a.exact and b.exact
    # minimum constraint force: lam = 0, the open-chain torques
    assert np.abs(a.lam).max() < 1e-12
    assert rel(a.tau, gear.inverse_dynamics(sysm.model, q, dq, ddq)) < 1e-12
    assert np.linalg.norm(b.tau) <= np.linalg.norm(a.tau) + 1e-12
    # both torques produce the requested motion
    for r in (a, b):
        assert rel(sysm.forward_dynamics(q, dq, r.tau).ddq, ddq) < 1e-8
    with pytest.raises(ValueError, match="objective"):
        sysm.inverse_dynamics(q, dq, ddq, actuated=all3, objective="cheapest")
    with pytest.raises(KeyError, match="actuated.*'nope'"):
        sysm.inverse_dynamics(q, dq, ddq, actuated=["nope"])
    with pytest.raises(ValueError, match="actuated"):
        sysm.inverse_dynamics(q, dq, ddq, actuated=[True, False])


@pytest.mark.parametrize("name", ["four_bar", "stewart"])
def test_batched_inverse_dynamics_equals_single_calls(name):
    """A batch takes the batched path (the native kernel in parallel): the
    same tau, lam, exact and ddq as
    one call per state, with under-actuated states (their hybrid answer)
    mixed in; min_torque and a solver overriding ``inverse`` loop."""
    sysm, q = getattr(mech, name)()
    model = sysm.model
    rng = np.random.default_rng(21)
    N = 6
    act = ["crank"] if name == "four_bar" else [j for j in model.joint_names if j.endswith("_slide")]
    dq = np.stack([sysm.project_velocity(q, rng.standard_normal(model.nv)) for _ in range(N)])
    tau_p = rng.standard_normal((N, model.nv))
    # the free motion under tau_p: exactly what no actuator produces, except
    # in state 2, which asks for an unreachable ddq (its hybrid answer)
    ddq = np.stack([sysm.forward_dynamics(q, dq[k], tau_p[k]).ddq for k in range(N)])
    ddq[2] = rng.standard_normal(model.nv)
    Q = np.tile(q, (N, 1))
    none = np.zeros(model.nbodies, dtype=bool)
    c0 = dict(sysm.solver.counters)
    batch = sysm.inverse_dynamics(Q, dq, ddq, none, tau_passive=tau_p)
    assert sysm.solver.counters["calls"] == c0["calls"] + N
    assert list(batch.exact) == [True, True, False, True, True, True]
    assert batch.message.startswith("under-actuated in some states")
    for k in range(N):
        one = sysm.inverse_dynamics(q, dq[k], ddq[k], none, tau_passive=tau_p[k])
        assert one.exact == batch.exact[k]
        assert rel(batch.tau[k], one.tau) < 1e-12 and rel(batch.ddq[k], one.ddq) < 1e-12
        assert rel(batch.lam[k], one.lam) < 1e-9
    # with actuators: every state exact
    ddq = np.stack([sysm.forward_dynamics(q, dq[k], rng.standard_normal(model.nv)).ddq
                    for k in range(N)])
    batch = sysm.inverse_dynamics(Q, dq, ddq, act, tau_passive=tau_p)
    assert batch.exact.all() and batch.message == "ok"
    for k in range(N):
        one = sysm.inverse_dynamics(q, dq[k], ddq[k], act, tau_passive=tau_p[k])
        assert rel(batch.tau[k], one.tau) < 1e-12 and rel(batch.lam[k], one.lam) < 1e-10
    # the other objective and the other solvers give the same torques
    mt = sysm.inverse_dynamics(Q, dq, ddq, act, tau_passive=tau_p, objective="min_torque")
    for k in range(N):
        one = sysm.inverse_dynamics(q, dq[k], ddq[k], act, tau_passive=tau_p[k], objective="min_torque")
        assert np.array_equal(mt.tau[k], one.tau)
    pr = sysm.with_solver("projection").inverse_dynamics(Q, dq, ddq, act, tau_passive=tau_p)
    assert rel(pr.tau[batch.exact], batch.tau[batch.exact]) < 1e-9


@pytest.mark.parametrize("prescribed", [["crank_joint"], ["crank_joint", "coupler_joint"],
                                        [False, False, False], [True, True, True]],
                         ids=["one", "m>n_v", "none", "all"])
def test_hybrid_dynamics_invariants(prescribed):
    sysm, q, dq, rng = _fourbar_state(13)
    model = sysm.model
    ref = sysm.forward_dynamics(q, dq, rng.standard_normal(3))
    ddq_in = ref.ddq.copy()                                    # consistent prescribed values
    tau_in = rng.standard_normal(3)
    res = sysm.hybrid_dynamics(q, dq, ddq_in, tau_in, prescribed)
    from gear.algorithms.dynamics import _prescribed_dofs, _prescribed_mask

    u = _prescribed_dofs(model, _prescribed_mask(model, prescribed))
    assert np.array_equal(res.ddq[u], ddq_in[u]) and np.array_equal(res.tau[~u], tau_in[~u])
    A = sysm.constraint_jacobian(q)
    M, b = gear.mass_matrix(model, q), gear.bias_forces(model, q, dq)
    assert res.residual < 1e-9
    assert rel(M @ res.ddq + b, res.tau + A.T @ res.lam) < 1e-9
    if not u.any():
        assert rel(res.ddq, sysm.forward_dynamics(q, dq, tau_in).ddq) < 1e-10


def test_urdf_mimic_becomes_a_coupler(tmp_path):
    from gear.testing import zoo_dir

    p = tmp_path / "m.urdf"
    inert = '<inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>'
    p.write_text(f"""<robot name="g"><link name="base"/><link name="a">{inert}</link><link name="b">{inert}</link>
      <joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="j2" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0.3 0 0"/>
        <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
        <mimic joint="j1" multiplier="-2" offset="0.1"/></joint></robot>""")
    model = gear.load_urdf(p)
    assert model.nv == 2 and len(model.loop_closures) == 1
    c = model.loop_closures[0]
    assert isinstance(c, gear.JointCoupler) and (c.joint, c.source, c.multiplier, c.offset) == ("j2", "j1", -2.0, 0.1)
    sysm = gear.ConstrainedModel(model)
    q = sysm.assemble([0.3, 0.0], locked=["j1"])
    assert abs(q[1] - (-2 * 0.3 + 0.1)) < 1e-14
    assert sysm.mobility(q).dof == 1
    res = sysm.forward_dynamics(q, np.array([1.0, -2.0]), np.array([0.5, 0.0]))
    assert abs(res.ddq[1] + 2 * res.ddq[0]) < 1e-12
    # bad mimic references are named
    # a mimic of an undefined joint is ignored with a warning (Pinocchio
    # ignores <mimic> and loads such files: alex_psyonic_hands has them)
    p.write_text(p.read_text().replace('joint="j1" multiplier', 'joint="ghost" multiplier'))
    with pytest.warns(UserWarning, match="joint 'j2' <mimic>.*'ghost'.*ignored"):
        assert gear.load_urdf(p).loop_closures == []
    with pytest.raises(KeyError, match="source: no joint named 'nope'"):
        gear.ConstrainedModel(model, [gear.JointCoupler("j2", "nope")])
    # the zoo: panda's second finger mimics the first
    if zoo_dir() is not None:
        import os

        panda = gear.load_urdf(os.path.join(zoo_dir(), "panda_description/urdf/panda.urdf"))
        (cp,) = panda.loop_closures
        assert (cp.joint, cp.source) == ("panda_finger_joint2", "panda_finger_joint1")
        assert gear.ConstrainedModel(panda).mobility(panda.neutral()).dof == panda.nv - 1


@pytest.mark.parametrize("n", [3, 12])
def test_tree_statistics_of_the_two_spanning_trees(n):
    """The chain tree is 2N + 1 deep and couples every loop row with every
    other; the ground tree is two deep and K is banded (its fill falls as
    1/N).  The predicted pattern covers K's actual non-zeros."""
    chain, qc = gear.mechanisms.n_four_bar(n, tree="chain")
    ground, qg = gear.mechanisms.n_four_bar(n, tree="ground")
    sc, sg = chain.tree_statistics(qc), ground.tree_statistics(qg)
    assert sc["depth"] == 2 * n + 1 and sg["depth"] == 2
    assert sc["rows"] == sg["rows"] == 3 * n
    assert sc["fill_K"] == pytest.approx(4 / 9)           # the in-plane rows, all coupled
    assert sg["fill_K"] < 0.5 * sc["fill_K"] if n > 3 else sg["fill_K"] <= sc["fill_K"]
    for s, q, st in ((chain, qc, sc), (ground, qg, sg)):
        A = s.constraint_jacobian(q)
        K = A @ np.linalg.solve(gear.mass_matrix(s.model, q), A.T)
        actual = int((np.abs(K) > 1e-12 * np.abs(K).max()).sum())
        assert actual <= st["nnz_K"]


def test_cli_info_prints_both_spanning_trees(capsys):
    from gear.cli import main

    assert main(["info", "n-four-bar:4:ground"]) == 0
    out = capsys.readouterr().out
    assert "spanning tree: depth 2" in out and "tree=chain: depth 9" in out and "(this one)" in out
    assert main(["info", "n-four-bar:4:star"]) == 1
    assert "chain or ground" in capsys.readouterr().err


def test_assembly_refuses_a_weld_closed_at_a_flipped_orientation():
    """A weld's orientation rows are dot products of the frames' axes
    (y_A.z_B, z_A.x_B, x_A.y_B), which also vanish when one frame is turned
    a half turn or 120 degrees: Gauss-Newton from a far guess closed the rows
    there and returned an assembly in which the weld was turned 180 degrees
    apart (19 of 40 random guesses within 2 rad did).  Now the rows holding
    is not enough: such a result raises, saying so; a near guess assembles
    with the frames aligned."""
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    target = arm.neutral() + 0.3
    P = gear.forward_kinematics(arm, target)[-1]
    weld = gear.LoopClosure(arm.body_names[-1], None, "world", gear.SE3(P[:3, :3], P[:3, 3]), "weld",
                            name="grip")
    sysm = gear.ConstrainedModel(arm, [weld])
    rng = np.random.default_rng(0)
    flips = 0
    for _ in range(12):
        try:
            q = sysm.assemble(target + rng.uniform(-2, 2, 7))
        except gear.AssemblyError as exc:
            flips += "'grip' (weld) has its frames turned" in str(exc)
            continue
        H = gear.forward_kinematics(arm, q)[-1]
        assert np.allclose(H[:3, :3], P[:3, :3], atol=1e-9)       # a returned assembly is the weld's
    assert flips >= 3
    q = sysm.assemble(target + 0.05 * rng.standard_normal(7))
    assert np.allclose(gear.forward_kinematics(arm, q)[-1], P, atol=1e-9)


def test_assembly_says_when_redundant_rows_disagree():
    """A loop closed twice with anchors 1e-8 apart (as model files with
    rounded anchors do: Menagerie's toddlerbot): no configuration holds
    every row, and the error says the rows are redundant and by how much
    they disagree instead of blaming the guess; a tol above it assembles."""
    sysm, q0 = gear.mechanisms.four_bar()
    c = sysm.constraints[0]
    shifted = gear.LoopClosure(c.body_a, gear.SE3(c.placement_a.R, c.placement_a.p + [3e-8, 0.0, 0.0]),
                               c.body_b, c.placement_b, c.kind)
    twice = gear.ConstrainedModel(sysm.model, [c, shifted])
    with pytest.raises(gear.AssemblyError, match=r"redundant \(rank 2 of 6.*disagree by 1\.\d+e-08"):
        twice.assemble(q0)
    q = twice.assemble(q0, tol=1e-7)
    assert np.abs(twice.constraint_residual(q)).max() < 1e-7

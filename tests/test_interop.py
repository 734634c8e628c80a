"""gear.interop.to_pinocchio: the same tree in Pinocchio, every joint kind.

Pinocchio is an independent implementation: agreement of FK, RNEA, ABA and
CRBA on seeded random trees (every joint kind, fixed joints included, a
floating base) checks both the conversion and gear's kernels on joint kinds
no URDF can express (helical, cylindrical, universal, planar, spherical).
"""
import numpy as np
import pytest

import gear
from gear.testing import ALL_KINDS, random_state, random_tree

pin = pytest.importorskip("pinocchio", reason="Pinocchio (pip package 'pin') is an optional "
                                              "reference; install gear[reference] to run")
from gear.interop import to_pinocchio  # noqa: E402


def rel(a, b):
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


CASES = [(seed, 12, False) for seed in range(4)] + [(10 + s, 13, True) for s in range(3)]


@pytest.mark.parametrize("seed,nbodies,root_free", CASES)
def test_random_tree_agrees_with_pinocchio(seed, nbodies, root_free):
    gm = random_tree(seed, nbodies=nbodies, kinds=ALL_KINDS, root_free=root_free)
    pm, mp = to_pinocchio(gm)
    pd = pm.createData()
    assert (pm.nq, pm.nv) == (gm.nq, gm.nv)
    for k in range(3):
        q, dq, ddq, tau = random_state(gm, np.random.default_rng(100 * seed + k))
        qp, vp, ap = mp.q(q), mp.v(dq), mp.v(ddq)
        np.testing.assert_allclose(mp.q_back(qp), q, atol=0, rtol=0)
        # forward kinematics, body by body (fixed bodies through their offset)
        pin.forwardKinematics(pm, pd, qp)
        poses = gear.forward_kinematics(gm, q)
        for i in range(gm.nbodies):
            assert rel(poses[i], mp.body_placement(pd, i)) < 1e-12, gm.body_names[i]
        tg = gear.inverse_dynamics(gm, q, dq, ddq)
        assert rel(tg, mp.v_back(pin.rnea(pm, pd, qp, vp, ap))) < 1e-10
        ag = gear.forward_dynamics(gm, q, dq, tau)
        assert rel(ag, mp.v_back(pin.aba(pm, pd, qp, vp, mp.v(tau)))) < 1e-10
        Mp = pin.crba(pm, pd, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert rel(gear.mass_matrix(gm, q), mp.mat_back(Mp)) < 1e-10


def test_every_kind_is_present():
    for seed, nb, root_free in CASES:
        kinds = {type(j).__name__.lower() for j in
                 random_tree(seed, nbodies=nb, kinds=ALL_KINDS, root_free=root_free).joints}
        # a floating root replaces one drawn kind
        assert len(set(ALL_KINDS) - kinds) <= int(root_free), (seed, set(ALL_KINDS) - kinds)


def test_frame_on_a_fixed_body_and_on_the_world():
    m = gear.Model()
    I = gear.Inertia(1.0, [0.1, 0, 0], np.diag([0.01, 0.02, 0.03]))
    m.add_body("a", "world", gear.joints.Revolute([0, 0, 1]), placement=gear.SE3(p=[0, 0, 1]), inertia=I)
    m.add_body("tool", "a", gear.joints.Fixed(), placement=gear.SE3(p=[0.5, 0, 0]), inertia=I)
    pm, mp = to_pinocchio(m)
    jid, P = mp.frame("tool", gear.SE3(p=[0, 0.2, 0]))
    assert jid == mp.joint_id[0] == 1
    np.testing.assert_allclose(P.translation, [0.5, 0.2, 0.0])
    jid, P = mp.frame("world", gear.SE3(p=[1, 2, 3]))
    assert jid == 0
    np.testing.assert_allclose(P.translation, [1, 2, 3])
    # the fixed body's inertia is carried by joint "a" in Pinocchio
    q = np.array([0.3])
    assert rel(gear.mass_matrix(m, q), pin.crba(pm, pm.createData(), q)) < 1e-12


# ---------------------------------------------------------------------------
# closed loops: Pinocchio's constraintDynamics against a dense KKT whose A
# and dA·dq come from finite differences of the closure residual
# ---------------------------------------------------------------------------
from gear.interop import pinocchio_constraint_dynamics  # noqa: E402
from gear.testing import fd_tangent  # noqa: E402


def _frame_world(model, q, body, placement):
    i = model.body_index(body)
    T = np.eye(4) if i < 0 else gear.forward_kinematics(model, q)[i]
    return T @ (np.eye(4) if placement is None else placement.homogeneous())


def _residual(model, closures, q):
    r = []
    for c in closures:
        A = _frame_world(model, q, c.body_a, c.placement_a)
        B = _frame_world(model, q, c.body_b, c.placement_b)
        r.append(B[:3, 3] - A[:3, 3])
        if c.kind == "weld":      # orientation error, small-angle vector
            E = A[:3, :3].T @ B[:3, :3]
            r.append(0.5 * np.array([E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]]))
    return np.concatenate(r)


def _dense_kkt(model, closures, q, dq, tau, h=1e-4):
    A = fd_tangent(lambda x: _residual(model, closures, x), model, q)
    r = lambda t: _residual(model, closures, model.integrate(q, t * dq))  # noqa: E731
    Adq_dot = (r(h) - 2 * r(0.0) + r(-h)) / h**2       # dA·dq along exp curves
    M = gear.mass_matrix(model, q)
    b = gear.bias_forces(model, q, dq)
    m = A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    sol = np.linalg.lstsq(K, np.concatenate([tau - b, -Adq_dot]), rcond=None)[0]
    return sol[:model.nv], A


def _null_dq(A, rng):
    N = np.linalg.svd(A)[2][np.linalg.matrix_rank(A, 1e-8):].T
    return N @ rng.standard_normal(N.shape[1])


def test_pinocchio_constraint_dynamics_fourbar_ball():
    model = gear.load_mjcf(gear.data_path("fourbar.xml"))
    closures = model.loop_closures
    rng = np.random.default_rng(3)
    q = model.neutral()
    assert np.abs(_residual(model, closures, q)).max() < 1e-4
    for _ in range(3):
        A = fd_tangent(lambda x: _residual(model, closures, x), model, q)
        dq = _null_dq(A, rng)
        tau = rng.standard_normal(model.nv)
        ref, _ = _dense_kkt(model, closures, q, dq, tau)
        got = pinocchio_constraint_dynamics(model, closures, q, dq, tau, mu=1e-9, max_iter=1000)
        assert rel(got, ref) < 1e-7


def test_pinocchio_constraint_dynamics_weld_on_a_random_chain():
    from types import SimpleNamespace

    rng = np.random.default_rng(5)
    model = gear.testing.random_chain(8, "revolute", rng)
    q = model.random_configuration(rng)
    tip = gear.forward_kinematics(model, q)[-1]
    weld = SimpleNamespace(kind="weld", body_a="world", placement_a=gear.SE3(tip[:3, :3], tip[:3, 3]),
                           body_b=model.nbodies - 1, placement_b=None)
    weld.placement_b = gear.SE3()
    closures = [weld]
    A = fd_tangent(lambda x: _residual(model, closures, x), model, q)
    assert np.linalg.matrix_rank(A, 1e-6) == 6
    dq = _null_dq(A, rng)
    tau = rng.standard_normal(model.nv)
    ref, A = _dense_kkt(model, closures, q, dq, tau)
    got = pinocchio_constraint_dynamics(model, closures, q, dq, tau)
    assert rel(got, ref) < 1e-7
    assert np.abs(A @ got).max() < 1e-6 * max(1.0, np.abs(got).max()) + np.abs(A @ ref).max() + 1e-6


def test_pinocchio_constraint_models_reject_other_kinds():
    from types import SimpleNamespace

    from gear.interop import pinocchio_constraint_models

    model = gear.testing.random_chain(3, "revolute", 0)
    _, mp = to_pinocchio(model)
    bad = SimpleNamespace(kind="distance", body_a="world", placement_a=None, body_b=2, placement_b=None)
    with pytest.raises(ValueError, match="closures\\[0\\] has kind 'distance'"):
        pinocchio_constraint_models(mp, [bad])


def test_interop_docstring_examples_run():
    import doctest

    import gear.interop

    res = doctest.testmod(gear.interop, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_docs_interop_doctest():
    import doctest
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "interop.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_to_mjcf_reproduces_the_tree_and_maps_loops():
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo (optional 'reference' extra) is the other engine")
    import gear.interop as gi
    from gear.testing import random_tree

    rng = np.random.default_rng(4)
    for seed in range(3):
        model = random_tree(rng, nbodies=7, kinds=["revolute", "prismatic", "spherical"])
        m = mujoco.MjModel.from_xml_string(gi.to_mjcf(model))
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
        d = mujoco.MjData(m)
        q = model.random_configuration(rng)
        dq, tau = rng.standard_normal((2, model.nv))
        assert (m.nq, m.nv) == (model.nq, model.nv)
        iq, iv = gi.mujoco_state_maps(model, m)
        d.qpos[iq], d.qvel[iv], d.qfrc_applied[iv] = q, dq, tau
        mujoco.mj_forward(m, d)
        assert np.abs(d.qacc[iv] - gear.forward_dynamics(model, q, dq, tau)).max() < 1e-9
    free = random_tree(rng, nbodies=3, kinds=["revolute"], root_free=True)
    with pytest.raises(NotImplementedError, match="free"):
        gi.mujoco_state_maps(free, mujoco.MjModel.from_xml_string(gi.to_mjcf(free)))
    sysm, q = gear.mechanisms.n_four_bar(3)
    m = mujoco.MjModel.from_xml_string(gi.to_mjcf(sysm))
    assert m.neq == 3                                   # one connect per ball closure
    with pytest.raises(NotImplementedError, match="Helical"):
        gi.to_mjcf(random_tree(rng, nbodies=3, kinds=["helical"]))
    with pytest.raises(NotImplementedError, match="ball and weld"):
        gi.to_mjcf(gear.mechanisms.four_bar(closure="revolute")[0])

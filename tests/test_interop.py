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

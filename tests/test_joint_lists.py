"""Joint lists: an empty list means no joint, one string means that joint,
a bool per joint works as before, and bad input says what to fix."""
import numpy as np
import pytest

import gear
from gear.solvers.maximal import MaximalSolver

SOLVERS = ["kkt", "projection", "soft", "maximal"]


@pytest.fixture(scope="module")
def tree():
    m = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(3)
    q = m.random_configuration(rng)
    dq, ddq, tau = (rng.standard_normal(m.nv) for _ in range(3))
    return m, q, dq, ddq, tau


@pytest.fixture(scope="module")
def fourbar():
    sysm, q = gear.mechanisms.four_bar()
    dq = sysm.project_velocity(q, np.array([1.5, 0.0, 0.0]), locked=["crank"])
    rng = np.random.default_rng(7)
    tau = rng.standard_normal(sysm.model.nv)
    ddq = sysm.forward_dynamics(q, dq, tau).ddq
    return sysm, q, dq, ddq, tau


def _systems(sysm):
    for name in SOLVERS:
        if name == "maximal":
            yield sysm.with_solver("maximal")
            if MaximalSolver.native_available():
                yield sysm.with_solver("maximal", native=False)
        else:
            yield sysm.with_solver(name)


# -- open chains ---------------------------------------------------------------------------

def test_hybrid_dynamics_with_no_joint_prescribed_is_forward_dynamics(tree):
    m, q, dq, ddq, tau = tree
    for none in ([], (), set(), np.zeros(m.nbodies, bool)):
        t, d = gear.hybrid_dynamics(m, q, dq, ddq, tau, none)
        np.testing.assert_array_equal(t, tau)
        np.testing.assert_allclose(d, gear.forward_dynamics(m, q, dq, tau), rtol=1e-12, atol=1e-12)


def test_hybrid_dynamics_batch_with_no_joint_prescribed(tree):
    m, q, dq, ddq, tau = tree
    Q = np.stack([q, m.random_configuration(np.random.default_rng(1))])
    t, d = gear.hybrid_dynamics(m, Q, dq, ddq, tau, [])
    assert t.shape == d.shape == (2, m.nv)
    np.testing.assert_allclose(d, gear.forward_dynamics(m, Q, dq, tau), rtol=1e-12, atol=1e-12)


def test_one_joint_name_is_a_list_of_one(tree):
    m, q, dq, ddq, tau = tree
    name = m.joint_names[2]
    t1, d1 = gear.hybrid_dynamics(m, q, dq, ddq, tau, name)
    t2, d2 = gear.hybrid_dynamics(m, q, dq, ddq, tau, [name])
    mask = np.zeros(m.nbodies, bool)
    mask[2] = True
    t3, d3 = gear.hybrid_dynamics(m, q, dq, ddq, tau, mask)
    np.testing.assert_array_equal(t1, t2)
    np.testing.assert_array_equal(d1, d2)
    np.testing.assert_array_equal(t1, t3)
    np.testing.assert_array_equal(d1, d3)
    np.testing.assert_array_equal(d1[m.idx_v(name)], ddq[m.idx_v(name)])
    # numpy strings too
    t4, _ = gear.hybrid_dynamics(m, q, dq, ddq, tau, np.array([name]))
    np.testing.assert_array_equal(t1, t4)


def test_derivatives_and_sensitivity_take_an_empty_list_and_one_name(tree):
    m, q, dq, ddq, tau = tree
    none = np.zeros(m.nbodies, bool)
    a = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, [])
    b = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, none)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    name = m.joint_names[1]
    a = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, name)
    b = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, [name])
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    from gear import sensitivity as sens
    g = np.ones(3)                          # a seed on gravity
    s1 = sens.hybrid_dynamics_sensitivity(m, q, dq, ddq, tau, [], dg_dp=g)
    s2 = sens.hybrid_dynamics_sensitivity(m, q, dq, ddq, tau, none, dg_dp=g)
    for x, y in zip(np.atleast_1d(s1), np.atleast_1d(s2)):
        np.testing.assert_array_equal(x, y)


def test_bad_joint_lists_say_what_to_fix(tree):
    m, q, dq, ddq, tau = tree
    with pytest.raises(KeyError, match=r"prescribed: no joint named 'elbowz'; joints are \["):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, "elbowz")
    with pytest.raises(KeyError, match=repr(m.joint_names[0])):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, ["elbowz"])
    with pytest.raises(ValueError, match=rf"prescribed has wrong shape: expected \({m.nbodies},\) bools"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, np.zeros(m.nbodies + 1, bool))
    with pytest.raises(ValueError, match=r"wrong shape.*got shape \(0,\)"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, np.zeros(0, bool))
    with pytest.raises(ValueError, match="prescribed must hold booleans"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, [2] + [0] * (m.nbodies - 1))
    with pytest.raises(TypeError, match="prescribed mixes joint names and other values"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, [m.joint_names[0], True])
    with pytest.raises(TypeError, match="prescribed is required"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, None)


def test_joint_name_lists_are_converted_once_per_model(tree):
    """A list of joint names (or one name) is converted to the kernels'
    mask once per model and list, and the read-only mask reused: the same
    answers as a bool array, errors raised every time, the cache emptied
    when a body is added and not pickled."""
    import pickle

    from gear.algorithms.dynamics import _prescribed_mask

    m, q, dq, ddq, tau = tree
    m = m.copy()
    names = [m.joint_names[0], m.joint_names[2]]
    first = _prescribed_mask(m, names)
    assert _prescribed_mask(m, list(names)) is first and _prescribed_mask(m, tuple(names)) is first
    assert not first.flags.writeable and first.tolist() == [1, 0, 1] + [0] * (m.nbodies - 3)
    assert _prescribed_mask(m, names, "actuated") is not first         # keyed by the argument too
    assert _prescribed_mask(m, names[0]) is _prescribed_mask(m, [names[0]][0])
    pres = np.zeros(m.nbodies, bool)
    pres[[0, 2]] = True
    a = gear.hybrid_dynamics(m, q, dq, ddq, tau, names)
    b = gear.hybrid_dynamics(m, q, dq, ddq, tau, pres)
    c = gear.hybrid_dynamics(m, q.tolist(), dq.tolist(), ddq.tolist(), tau.tolist(), pres.tolist())
    for x, y, z in zip(a, b, c):
        assert np.array_equal(x, y) and np.array_equal(x, z)
    for _ in range(2):                                                  # errors are not cached
        with pytest.raises(KeyError, match="elbowz"):
            gear.hybrid_dynamics(m, q, dq, ddq, tau, ["elbowz"])
        with pytest.raises((TypeError, ValueError)):
            gear.hybrid_dynamics(m, q, dq, ddq, tau, [[names[0]]])      # unhashable entries
    assert pickle.loads(pickle.dumps(m))._masks == {}
    assert m._masks
    m.add_body("extra", m.body_names[-1], gear.joints.Revolute(), inertia=gear.Inertia(1.0, np.zeros(3), np.eye(3)))
    assert m._masks == {}
    mask = _prescribed_mask(m, names)
    assert mask.shape == (m.nbodies,) and mask.tolist() == [1, 0, 1] + [0] * (m.nbodies - 3)



# -- closed chains --------------------------------------------------------------------------

@pytest.mark.parametrize("solver", SOLVERS)
def test_closed_hybrid_with_nothing_prescribed_is_forward_dynamics(fourbar, solver):
    sysm, q, dq, ddq, tau = fourbar
    s = sysm.with_solver(solver)
    fd = s.forward_dynamics(q, dq, tau)
    for _ in range(2):                  # the second call hits the cached conversion
        r = s.hybrid_dynamics(q, dq, np.zeros(3), tau, prescribed=[])
        np.testing.assert_allclose(r.ddq, fd.ddq, rtol=1e-8, atol=1e-8)
        np.testing.assert_array_equal(r.tau, tau)
    # a batch
    rb = s.hybrid_dynamics(np.stack([q, q]), np.stack([dq, dq]), np.zeros((2, 3)), np.stack([tau, tau]), [])
    np.testing.assert_allclose(rb.ddq, np.stack([fd.ddq, fd.ddq]), rtol=1e-8, atol=1e-8)


def test_closed_hybrid_with_nothing_prescribed_on_every_path(fourbar):
    sysm, q, dq, ddq, tau = fourbar
    fd = sysm.forward_dynamics(q, dq, tau).ddq
    for s in _systems(sysm):
        r = s.hybrid_dynamics(q, dq, np.zeros(3), tau, [])
        np.testing.assert_allclose(r.ddq, fd, rtol=1e-8, atol=1e-8, err_msg=s.solver.name)
        r = s.hybrid_dynamics(q, dq, np.zeros(3), tau, np.zeros(3, bool))
        np.testing.assert_allclose(r.ddq, fd, rtol=1e-8, atol=1e-8, err_msg=s.solver.name)


@pytest.mark.parametrize("solver", SOLVERS)
def test_closed_hybrid_with_one_name(fourbar, solver):
    sysm, q, dq, ddq, tau = fourbar
    s = sysm.with_solver(solver)
    a = s.hybrid_dynamics(q, dq, ddq, tau, "crank")
    b = s.hybrid_dynamics(q, dq, ddq, tau, ["crank"])
    c = s.hybrid_dynamics(q, dq, ddq, tau, np.array([True, False, False]))
    np.testing.assert_allclose(a.tau, b.tau, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.tau, c.tau, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.ddq, ddq, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("solver", SOLVERS)
def test_inverse_dynamics_with_nothing_actuated_is_forward_dynamics(fourbar, solver):
    sysm, q, dq, ddq, tau = fourbar
    s = sysm.with_solver(solver)
    tau_p = np.array([0.3, -0.2, 0.1])
    fd = s.forward_dynamics(q, dq, tau_p).ddq
    for _ in range(2):
        r = s.inverse_dynamics(q, dq, ddq, actuated=[], tau_passive=tau_p)
        assert not r.exact
        np.testing.assert_allclose(r.tau, tau_p, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(r.ddq, fd, rtol=1e-8, atol=1e-8)
    rb = s.inverse_dynamics(np.stack([q, q]), np.stack([dq, dq]), np.stack([ddq, ddq]), [],
                            tau_passive=tau_p)
    assert not rb.exact.any()
    np.testing.assert_allclose(rb.ddq, np.stack([fd, fd]), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("solver", SOLVERS)
def test_inverse_dynamics_with_one_actuated_name(fourbar, solver):
    sysm, q, dq, ddq, tau = fourbar
    s = sysm.with_solver(solver)
    a = s.inverse_dynamics(q, dq, ddq, actuated="crank")
    b = s.inverse_dynamics(q, dq, ddq, actuated=["crank"])
    assert a.exact and b.exact
    np.testing.assert_allclose(a.tau, b.tau, rtol=1e-12, atol=1e-12)
    # the crank torque reproduces the motion
    np.testing.assert_allclose(s.forward_dynamics(q, dq, a.tau).ddq, ddq, rtol=1e-6, atol=1e-6)


def test_project_velocity_and_assemble_take_empty_lists_and_one_name(fourbar):
    sysm, q, dq, ddq, tau = fourbar
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_array_equal(sysm.project_velocity(q, v, locked=[]), sysm.project_velocity(q, v))
    one = sysm.project_velocity(q, v, locked="crank")
    np.testing.assert_array_equal(one, sysm.project_velocity(q, v, locked=["crank"]))
    np.testing.assert_array_equal(one, sysm.project_velocity(q, v, locked=np.array([True, False, False])))
    assert one[0] == v[0]
    np.testing.assert_allclose(sysm.constraint_jacobian(q) @ one, 0.0, atol=1e-12)
    np.testing.assert_allclose(sysm.assemble(q, locked=[]), sysm.assemble(q), atol=1e-12)
    np.testing.assert_allclose(sysm.assemble(q, locked="crank"), q, atol=1e-12)
    # the failure message names the locked joints (not the letters of one name)
    with pytest.raises(gear.AssemblyError, match=r"locked joints \['crank'\] forbid"):
        sysm.assemble(q + 0.3, locked="crank", max_iter=0)


def test_closed_chain_bad_joint_lists(fourbar):
    sysm, q, dq, ddq, tau = fourbar
    with pytest.raises(KeyError, match=r"actuated: no joint named 'crankk'; joints are \['crank', 'coupler', 'rocker'\]"):
        sysm.inverse_dynamics(q, dq, ddq, actuated="crankk")
    with pytest.raises(KeyError, match="prescribed: no joint named 'crankk'"):
        sysm.hybrid_dynamics(q, dq, ddq, tau, "crankk")
    with pytest.raises(KeyError, match="locked: no joint named 'crankk'"):
        sysm.project_velocity(q, dq, locked="crankk")
    with pytest.raises(ValueError, match=r"actuated has wrong shape: expected \(3,\) bools"):
        sysm.inverse_dynamics(q, dq, ddq, actuated=np.array([True, False]))
    with pytest.raises(ValueError, match=r"prescribed has wrong shape: expected \(3,\) bools"):
        sysm.hybrid_dynamics(q, dq, ddq, tau, np.array([True, False]))
    with pytest.raises(ValueError, match=r"locked has wrong shape"):
        sysm.project_velocity(q, dq, locked=np.array([True, False]))


def test_the_dense_reference_takes_joint_lists_too():
    """gear.testing's reference hybrid dynamics reads joint lists as the
    kernels do: [] = none, one string = that joint."""
    from gear.testing import prescribed_coordinates

    m = gear.load_urdf(gear.data_path("arm7.urdf"))
    assert not prescribed_coordinates(m, []).any()
    one = prescribed_coordinates(m, m.joint_names[2])
    assert one.sum() == 1 and one[m.idx_v(m.joint_names[2])].all()
    with pytest.raises(KeyError, match="nosuch"):
        prescribed_coordinates(m, ["nosuch"])

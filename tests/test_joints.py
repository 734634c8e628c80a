"""Joint models: jcalc against finite differences and closed forms.

Oracles: ``S(q)`` column k = vee(T^{-1} dT/dq_k) (Kim Sec. 2.1, symbol list of
Table 2), ``dS`` = d/dt S(q(t)) (eq. 41), closed-form joint transforms,
and the right-perturbation integrator ``T exp(dt S dq)``.  A hypothesis test
draws random trees with every joint kind and checks forward kinematics
against a product of joint transforms.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.linalg import expm

import gear
from gear import joints as J
from gear import testing as gt
from gear.spatial import SE3, exp_se3, exp_so3, quat_to_rot

EPS = 1e-6
QUAT_KINDS = ("spherical", "free")
EXACT_EXP_KINDS = ("revolute", "prismatic", "helical", "cylindrical", "spherical", "free")


def H(joint, q):
    return joint.T(q).homogeneous()


def random_q(joint, rng):
    return joint.random(rng)


# ---------------------------------------------------------------------------
# S, dS against finite differences
# ---------------------------------------------------------------------------
def test_S_is_Tinv_dT_dq(joint, rng):
    """S(q) e_k = vee(T^{-1} dT/dq_k), or along the tangent directions of the
    quaternion joints: vee(T^{-1} d/de T(integrate(q, e e_k)))."""
    for _ in range(4):
        q = random_q(joint, rng)
        S = joint.S(q)
        assert S.shape == (6, joint.nv)
        Hinv = np.linalg.inv(H(joint, q))
        for k in range(joint.nv):
            if joint.kind in (J.SPHERICAL, J.FREE):
                e = np.zeros(joint.nv)
                e[k] = EPS
                dH = (H(joint, joint.integrate(q, e)) - H(joint, joint.integrate(q, -e))) / (2 * EPS)
            else:
                e = np.zeros(joint.nq)
                e[k] = EPS
                dH = (H(joint, q + e) - H(joint, q - e)) / (2 * EPS)
            X = Hinv @ dH
            np.testing.assert_allclose(X[3], 0, atol=1e-12)
            np.testing.assert_allclose(X[:3, :3], -X[:3, :3].T, atol=1e-8)   # in se(3)
            np.testing.assert_allclose(S[:, k], gt.se3_vee(X), atol=1e-8)


def test_dS_is_time_derivative_of_S(joint, rng):
    for _ in range(4):
        q = random_q(joint, rng)
        dq = rng.standard_normal(joint.nv)
        dS = joint.dS(q, dq)
        assert dS.shape == (6, joint.nv)
        fd = (joint.S(joint.integrate(q, dq, EPS)) - joint.S(joint.integrate(q, dq, -EPS))) / (2 * EPS)
        np.testing.assert_allclose(dS, fd, atol=1e-8)


def test_S_columns_are_unit_twists(joint, rng):
    # axes are normalised, so the angular (or, for prismatic, linear) part has norm 1
    S = joint.S(random_q(joint, rng))
    for k in range(joint.nv):
        w, v = S[:3, k], S[3:, k]
        assert np.isclose(np.linalg.norm(w), 1.0) or (np.allclose(w, 0) and np.isclose(np.linalg.norm(v), 1.0))


# ---------------------------------------------------------------------------
# closed-form transforms
# ---------------------------------------------------------------------------
def closed_form(joint, q):
    """The joint transform from its definition, with gear.spatial only."""
    if isinstance(joint, J.Fixed):
        return SE3()
    if isinstance(joint, J.Revolute):
        return SE3(exp_so3(joint.axis * q[0]))
    if isinstance(joint, J.Prismatic):
        return SE3(p=joint.axis * q[0])
    if isinstance(joint, J.Helical):
        return SE3(exp_so3(joint.axis * q[0]), joint.pitch * q[0] * joint.axis)
    if isinstance(joint, J.Cylindrical):
        return SE3(exp_so3(joint.axis * q[0]), joint.axis * q[1])
    if isinstance(joint, J.Universal):
        return SE3(exp_so3(joint.axis1 * q[0]) @ exp_so3(joint.axis2 * q[1]))
    if isinstance(joint, J.Planar):
        return SE3(exp_so3(joint.normal * q[2]), q[0] * joint.e1 + q[1] * joint.e2)
    if isinstance(joint, J.Spherical):
        return SE3(quat_to_rot(q))
    if isinstance(joint, J.Free):
        return SE3(quat_to_rot(q[3:]), q[:3])
    raise AssertionError(type(joint))


def test_T_matches_closed_form(joint, rng):
    for _ in range(4):
        q = random_q(joint, rng)
        np.testing.assert_allclose(H(joint, q), closed_form(joint, q).homogeneous(), atol=1e-14)


def test_neutral_is_identity(joint):
    q0 = joint.neutral()
    assert q0.shape == (joint.nq,)
    np.testing.assert_allclose(H(joint, q0), np.eye(4), atol=0)


def test_planar_frame_is_right_handed(rng):
    for _ in range(10):
        j = J.Planar(gt.random_unit(rng) * rng.uniform(0.1, 5))
        E = np.c_[j.e1, j.e2, j.normal]
        np.testing.assert_allclose(E.T @ E, np.eye(3), atol=1e-15)
        assert np.isclose(np.linalg.det(E), 1.0)
        np.testing.assert_allclose(j.params[6:9], j.normal)


def test_helical_pitch_and_zero_pitch():
    j = J.Helical([0, 0, 2.0], pitch=0.1)
    T = j.T([2 * np.pi])
    np.testing.assert_allclose(T.R, np.eye(3), atol=1e-14)
    np.testing.assert_allclose(T.p, [0, 0, 0.2 * np.pi], atol=1e-15)
    r, h = J.Revolute([0, 1, 0]), J.Helical([0, 1, 0], pitch=0.0)
    np.testing.assert_allclose(H(h, [0.7]), H(r, [0.7]), atol=0)


def test_fixed_joint_has_no_coordinates():
    j = J.Fixed()
    assert (j.nq, j.nv) == (0, 0)
    assert j.S([]).shape == (6, 0)
    assert j.dS([], []).shape == (6, 0)
    assert j.integrate(np.zeros(0), np.zeros(0)).shape == (0,)


# ---------------------------------------------------------------------------
# integrate / difference
# ---------------------------------------------------------------------------
def same_config(joint, a, b, atol=1e-12):
    """Equal configurations; quaternions q and -q are the same rotation."""
    a, b = np.asarray(a), np.asarray(b)
    if joint.kind in (J.SPHERICAL, J.FREE):
        qa, qb = a[-4:], b[-4:]
        if qa @ qb < 0:
            qb = -qb
        return np.allclose(a[:-4], b[:-4], atol=atol) and np.allclose(qa, qb, atol=atol)
    return np.allclose(a, b, atol=atol)


def test_difference_inverts_integrate(joint, rng):
    for _ in range(10):
        q = random_q(joint, rng)
        v = rng.uniform(-1, 1, joint.nv)  # |angular part| < pi
        q1 = joint.integrate(q, v)
        np.testing.assert_allclose(joint.difference(q, q1), v, atol=1e-12)
        np.testing.assert_allclose(joint.difference(q, q), 0, atol=1e-15)


def test_integrate_inverts_difference(joint, rng):
    for _ in range(10):
        q0, q1 = random_q(joint, rng), random_q(joint, rng)
        assert same_config(joint, joint.integrate(q0, joint.difference(q0, q1)), q1)
        # q and -q give the same difference
        if joint.kind in (J.SPHERICAL, J.FREE):
            q1m = q1.copy()
            q1m[-4:] *= -1
            np.testing.assert_allclose(joint.difference(q0, q1m), joint.difference(q0, q1), atol=1e-12)


@pytest.mark.parametrize("kind", EXACT_EXP_KINDS)
def test_integrate_is_right_exponential(kind, rng):
    """integrate(q, dq, dt) has T(q) exp(dt S(q) dq) as its transform."""
    joint = gt.random_joint(kind, rng)
    for _ in range(10):
        q = random_q(joint, rng)
        dq = rng.standard_normal(joint.nv)
        dt = rng.uniform(0.01, 1.5)
        expect = H(joint, q) @ exp_se3(dt * joint.S(q) @ dq).homogeneous()
        np.testing.assert_allclose(H(joint, joint.integrate(q, dq, dt)), expect, atol=1e-13)
        np.testing.assert_allclose(expect, H(joint, q) @ expm(gt.se3_hat(dt * joint.S(q) @ dq)),
                                   atol=1e-12)


@pytest.mark.parametrize("kind", ["universal", "planar"])
def test_chart_joints_integrate_in_coordinates(kind, rng):
    joint = gt.random_joint(kind, rng)
    q, dq = random_q(joint, rng), rng.standard_normal(joint.nv)
    np.testing.assert_allclose(joint.integrate(q, dq, 0.3), q + 0.3 * dq, atol=0)
    # first order agreement with the right exponential
    h = 1e-5
    expect = H(joint, q) @ exp_se3(h * joint.S(q) @ dq).homogeneous()
    assert np.abs(H(joint, joint.integrate(q, dq, h)) - expect).max() < 10 * h * h * (1 + dq @ dq)


@pytest.mark.parametrize("kind", QUAT_KINDS)
def test_integrate_returns_unit_quaternions(kind, rng):
    joint = gt.random_joint(kind, rng)
    q = random_q(joint, rng)
    for _ in range(200):  # many steps: no drift of the norm
        q = joint.integrate(q, rng.standard_normal(joint.nv), 0.37)
        assert abs(np.linalg.norm(q[-4:]) - 1) < 1e-15 * 10
    qb = np.stack([random_q(joint, rng) for _ in range(5)])
    out = joint.integrate(qb, rng.standard_normal((5, joint.nv)))
    np.testing.assert_allclose(np.linalg.norm(out[:, -4:], axis=1), 1, atol=1e-15)


@pytest.mark.parametrize("kind", QUAT_KINDS)
def test_non_unit_quaternion_is_rejected(kind, rng):
    joint = gt.random_joint(kind, rng)
    q = random_q(joint, rng)
    q[-4:] *= 1.01
    for fun in (joint.T, joint.S):
        with pytest.raises(ValueError, match="q contains a quaternion of norm 1.01.*unit norm"):
            fun(q)
    with pytest.raises(ValueError, match="unit norm"):
        joint.dS(q, np.zeros(joint.nv))
    q[-4:] = 0.0
    with pytest.raises(ValueError, match="unit norm"):
        joint.T(q)
    # tiny round-off is tolerated (and normalised away)
    q = random_q(joint, rng)
    q[-4:] *= 1 + 1e-9
    R = joint.T(q).R
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-14)


def test_non_unit_quaternion_rejected_by_model_functions(rng):
    m = gt.random_chain(3, kind=["free", "spherical", "revolute"], rng=rng)
    q, dq, ddq, tau = gt.random_state(m, rng)
    bad = q.copy()
    s = m.idx_q("j1")
    bad[s] *= 2.0
    for call in (lambda: gear.inverse_dynamics(m, bad, dq, ddq),
                 lambda: gear.forward_dynamics(m, bad, dq, tau),
                 lambda: gear.mass_matrix(m, bad),
                 lambda: gear.forward_kinematics(m, bad),
                 lambda: m.integrate(bad, dq)):
        with pytest.raises(ValueError, match=r"q \(joint 'j1'\) contains a quaternion of norm 2.*unit norm"):
            call()
    with pytest.raises(ValueError, match=r"q1 \(joint 'j1'\).*unit norm"):
        m.difference(q, bad)


# ---------------------------------------------------------------------------
# random configurations, limits, construction errors
# ---------------------------------------------------------------------------
def test_random_is_within_default_ranges(joint_kind, rng):
    joint = gt.random_joint(joint_kind, rng)
    qs = np.stack([joint.random(rng) for _ in range(200)])
    assert qs.shape == (200, joint.nq)
    if joint.kind in (J.SPHERICAL, J.FREE):
        np.testing.assert_allclose(np.linalg.norm(qs[:, -4:], axis=1), 1, atol=1e-15)
        assert np.all(qs[:, -4] >= 0)
        if joint.kind == J.FREE:
            assert np.all(np.abs(qs[:, :3]) <= 1)
    elif joint.nq:
        assert np.all(np.abs(qs) <= np.pi)
    # seeded: reproducible
    np.testing.assert_array_equal(joint.random(7), joint.random(7))


@pytest.mark.parametrize("kind", ["revolute", "prismatic", "helical", "cylindrical", "universal",
                                  "planar", "free"])
def test_random_respects_limits(kind, rng):
    joint = gt.random_joint(kind, rng)
    n = 3 if kind == "free" else joint.nq
    lo = rng.uniform(-0.5, 0.0, joint.nq)
    hi = lo + rng.uniform(0.01, 0.2, joint.nq)
    assert joint.set_limits(lo, hi) is joint
    for _ in range(100):
        q = joint.random(rng)
        assert np.all(q[:n] >= lo[:n]) and np.all(q[:n] <= hi[:n])


@pytest.mark.parametrize("kind", ["revolute", "prismatic", "cylindrical", "planar", "free"])
def test_limits_written_as_unlimited_give_the_default_range(kind, rng):
    """URDF files write "unlimited" as +-1e16 (example-robot-data's iris):
    such limits count as none, so ``random`` draws angles in [-pi, pi] and
    displacements in [-1, 1], not 1e15 (where a double resolves no angle
    finer than 0.1 rad); a limit below 1e6 is still kept."""
    joint = gt.random_joint(kind, rng)
    n = 3 if kind == "free" else joint.nq
    joint.set_limits(-1e16 * np.ones(joint.nq), 1e16 * np.ones(joint.nq))
    q = joint.random(rng, size=200)[:, :n]
    assert np.abs(q).max() <= np.pi
    joint.set_limits(-1e5 * np.ones(joint.nq), 1e5 * np.ones(joint.nq))
    assert np.abs(joint.random(rng, size=200)[:, :n]).max() > 10.0


def test_bad_limits_raise():
    with pytest.raises(ValueError, match="invalid joint limits"):
        J.Revolute().set_limits(1.0, -1.0)
    with pytest.raises(ValueError, match="invalid joint limits"):
        J.Revolute().set_limits(np.nan, 1.0)


@pytest.mark.parametrize("cls", [J.Revolute, J.Prismatic, J.Helical, J.Cylindrical])
def test_bad_axis_raises(cls):
    with pytest.raises(ValueError, match="axis must be a non-zero"):
        cls([0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="axis contains non-finite"):
        cls([np.nan, 0.0, 1.0])
    with pytest.raises(ValueError, match="axis has wrong shape"):
        cls([1.0, 0.0])
    with pytest.raises(TypeError, match="axis must be a real"):
        cls(["x", "y", "z"])


def test_axes_are_normalised(rng):
    a = rng.standard_normal(3) * 7
    np.testing.assert_allclose(J.Revolute(a).axis, a / np.linalg.norm(a), atol=1e-15)


def test_bad_universal_and_planar_and_helical():
    with pytest.raises(ValueError, match="parallel"):
        J.Universal([1, 0, 0], [2, 0, 0])
    with pytest.raises(ValueError, match="parallel"):
        J.Universal([0, 1, 1], [0, -1, -1])
    with pytest.raises(ValueError, match="axis1 must be a non-zero"):
        J.Universal([0, 0, 0], [0, 1, 0])
    with pytest.raises(ValueError, match="axis2 contains non-finite"):
        J.Universal([1, 0, 0], [0, np.inf, 0])
    with pytest.raises(ValueError, match="normal must be a non-zero"):
        J.Planar([0, 0, 0])
    with pytest.raises(ValueError, match="pitch must be finite"):
        J.Helical([0, 0, 1], pitch=np.nan)


def test_T_rejects_bad_q():
    j = J.Revolute()
    with pytest.raises(ValueError, match="q has wrong shape"):
        j.T([0.0, 1.0])
    with pytest.raises(ValueError, match="q contains non-finite"):
        j.T([np.nan])
    with pytest.raises(TypeError, match="q must be a real"):
        j.T(np.array([1j]))
    with pytest.raises(ValueError, match="dq has wrong shape"):
        J.Universal().dS([0.0, 0.0], [1.0])


def test_random_joint_helper():
    for kind in gt.ALL_KINDS:
        j = gt.random_joint(kind, 0)
        assert type(j).__name__.lower() == kind
        assert type(gt.random_joint(type(j), 0)) is type(j)
    with pytest.raises(ValueError, match="unknown joint kind"):
        gt.random_joint("ball", 0)


def test_repr_names_the_joint():
    assert repr(J.Revolute([0, 0, 1])).startswith("Revolute(axis=")
    assert "pitch=0.5" in repr(J.Helical([1, 0, 0], 0.5))
    assert J.KINDS[J.Free.kind] == "Free"


# ---------------------------------------------------------------------------
# property-based: random trees with every joint kind
# ---------------------------------------------------------------------------
@st.composite
def trees(draw, max_bodies=8):
    n = draw(st.integers(1, max_bodies))
    parents = [draw(st.integers(-1, i - 1)) for i in range(n)]
    kinds = [draw(st.sampled_from(gt.ALL_KINDS)) for _ in range(n)]
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    model = gear.Model()
    for i in range(n):
        model.add_body(f"b{i}", "world" if parents[i] < 0 else parents[i],
                       gt.random_joint(kinds[i], rng), placement=gt.random_se3(rng),
                       inertia=gt.random_inertia(rng))
    return model, rng


HYP = settings(deadline=None, max_examples=40, derandomize=True)


@HYP
@given(trees())
def test_model_integrate_difference_round_trip(tree_rng):
    model, rng = tree_rng
    q = model.random_configuration(rng)
    v = rng.uniform(-1, 1, model.nv)
    q1 = model.integrate(q, v)
    np.testing.assert_allclose(model.difference(q, q1), v, atol=1e-11)
    q2 = model.random_configuration(rng)
    back = model.integrate(q, model.difference(q, q2))
    np.testing.assert_allclose(gear.forward_kinematics(model, back), gear.forward_kinematics(model, q2),
                               atol=1e-11)
    for i, j in enumerate(model.joints):
        s = model.idx_q(model.joint_names[i])
        assert same_config(j, back[s], q2[s], atol=1e-11)
    # batches agree with single states
    qb = np.stack([q, q2])
    vb = np.stack([v, -v])
    np.testing.assert_allclose(model.integrate(qb, vb, 0.5)[1], model.integrate(q2, -v, 0.5), atol=0)


@HYP
@given(trees())
def test_forward_kinematics_is_product_of_joint_transforms(tree_rng):
    model, rng = tree_rng
    q = model.random_configuration(rng)
    dq = rng.standard_normal(model.nv)
    world = []
    for i, joint in enumerate(model.joints):
        qi = q[model.idx_q(model.joint_names[i])]
        local = model.placements[i].homogeneous() @ joint.T(qi).homogeneous()
        p = model.parents[i]
        world.append(local if p < 0 else world[p] @ local)
    poses, twists = gear.forward_kinematics(model, q, dq)
    assert poses.shape == (model.nbodies, 4, 4)
    np.testing.assert_allclose(poses, np.array(world), atol=1e-12)
    np.testing.assert_allclose(gear.forward_kinematics(model, q), poses, atol=0)
    # body twists V_i = T_i^{-1} dT_i/dt (eq. 9) along q(t) = integrate(q, t dq)
    h = 1e-6
    dP = (gear.forward_kinematics(model, model.integrate(q, dq, h))
          - gear.forward_kinematics(model, model.integrate(q, dq, -h))) / (2 * h)
    for i in range(model.nbodies):
        np.testing.assert_allclose(twists[i], gt.se3_vee(np.linalg.inv(poses[i]) @ dP[i]), atol=1e-7)


def test_docs_examples_run():
    import doctest
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "joints.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_fd_tangent_gives_body_jacobians(tree, rng):
    """T_i^{-1} dT_i/dq along the tangent basis = hat of the body Jacobian
    columns Ad_{T_i^{-1} T_j} S_j (the right-perturbation convention)."""
    q = tree.random_configuration(rng)
    poses = gear.forward_kinematics(tree, q)
    dP = gt.fd_tangent(lambda x: gear.forward_kinematics(tree, x), tree, q, eps=1e-6)
    assert dP.shape == (tree.nbodies, 4, 4, tree.nv)
    Jb = gt.reference_body_jacobians(tree, q)
    for i in range(tree.nbodies):
        Tinv = np.linalg.inv(poses[i])
        for k in range(tree.nv):
            np.testing.assert_allclose(gt.se3_vee(Tinv @ dP[i, :, :, k]), Jb[i][:, k], atol=1e-7)
    # the twists of forward kinematics are J_i dq
    dq = rng.standard_normal(tree.nv)
    _, V = gear.forward_kinematics(tree, q, dq)
    np.testing.assert_allclose(V, Jb @ dq, atol=1e-12)

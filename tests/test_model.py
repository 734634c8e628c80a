"""Model builder, index bookkeeping, configurations, and input validation of
the public functions (every error names the offending argument)."""
import numpy as np
import pytest

import gear
from gear import testing as gt
from gear.joints import Fixed, Free, Planar, Prismatic, Revolute, Spherical, Universal


def inertia():
    return gear.Inertia(1.0, [0.1, 0.0, 0.0], np.diag([0.02, 0.03, 0.04]))


@pytest.fixture
def small():
    """world -> base (Free) -> arm (Revolute) -> hand (Spherical); base -> leg (Planar)."""
    m = gear.Model()
    m.add_body("base", "world", Free(), inertia=inertia(), joint_name="root")
    m.add_body("arm", "base", Revolute([0, 0, 1]), gear.SE3(p=[0.2, 0, 0]), inertia=inertia(),
               joint_name="shoulder")
    m.add_body("hand", "arm", Spherical(), gear.SE3(p=[0.3, 0, 0]), inertia=inertia(),
               joint_name="wrist")
    m.add_body("leg", 0, Planar([0, 1, 0]), gear.SE3(p=[0, 0, -0.2]), inertia=inertia())
    return m


# ---------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------
def test_sizes_names_and_indices(small):
    m = small
    assert (m.nbodies, m.nq, m.nv) == (4, 7 + 1 + 4 + 3, 6 + 1 + 3 + 3)
    assert m.body_names == ["base", "arm", "hand", "leg"]
    assert m.joint_names == ["root", "shoulder", "wrist", "leg"]
    assert m.parents == [-1, 0, 1, 0]
    assert m.idx_q("root") == slice(0, 7) and m.idx_v("root") == slice(0, 6)
    assert m.idx_q("shoulder") == slice(7, 8) and m.idx_v("shoulder") == slice(6, 7)
    assert m.idx_q("wrist") == slice(8, 12) and m.idx_v("wrist") == slice(7, 10)
    assert m.idx_q("leg") == slice(12, 15) and m.idx_v("leg") == slice(10, 13)
    # the slices tile q and dq
    qs = [m.idx_q(n) for n in m.joint_names]
    vs = [m.idx_v(n) for n in m.joint_names]
    assert [s.start for s in qs[1:]] == [s.stop for s in qs[:-1]] and qs[-1].stop == m.nq
    assert [s.start for s in vs[1:]] == [s.stop for s in vs[:-1]] and vs[-1].stop == m.nv
    assert m.body_index("hand") == 2 and m.body_index(3) == 3 and m.body_index("world") == -1
    assert m.joint_index("wrist") == 2
    assert m.children(0) == [1, 3] and m.children(-1) == [0] and m.children(2) == []
    assert np.isclose(m.total_mass(), 4.0)
    assert repr(m) == "Model(nbodies=4, nq=15, nv=13)"


def test_add_body_returns_index_and_accepts_matrix_placement():
    m = gear.Model()
    assert m.add_body("a", "world", Revolute(), inertia=inertia()) == 0
    H = gear.SE3.from_rpy([0.1, 0.2, 0.3], [1, 2, 3]).homogeneous()
    assert m.add_body("b", "a", Prismatic(), placement=H, inertia=inertia()) == 1
    assert m.placements[1].isclose(gear.SE3.from_matrix(H))
    assert m.joint_names == ["a", "b"]          # joint name defaults to the body name
    assert m.add_body("c", 1, Fixed(), inertia=None) == 2
    assert (m.nq, m.nv) == (2, 2)


def test_builder_errors_leave_the_model_unchanged():
    m = gear.Model()
    m.add_body("a", "world", Revolute(), inertia=inertia(), joint_name="ja")
    cases = [
        (dict(name="a", parent="world", joint=Revolute()), ValueError, "duplicate body name 'a'"),
        (dict(name="world", parent="world", joint=Revolute()), ValueError, "duplicate body name 'world'"),
        (dict(name="b", parent="world", joint=Revolute(), joint_name="ja"), ValueError,
         "duplicate joint name 'ja'"),
        (dict(name="b", parent="nowhere", joint=Revolute()), KeyError, "no body named 'nowhere'"),
        (dict(name="b", parent=5, joint=Revolute()), IndexError, "body index 5 out of range"),
        (dict(name="b", parent=-2, joint=Revolute()), IndexError, "out of range"),
        (dict(name="b", parent="a", joint="revolute"), TypeError, "joint must be a gear.joints.Joint"),
        (dict(name="b", parent="a", joint=Revolute), TypeError, "joint must be a gear.joints.Joint"),
        (dict(name="b", parent="a", joint=Revolute(), inertia=1.0), TypeError,
         "inertia must be a gear.Inertia"),
        (dict(name="b", parent="a", joint=Revolute(), placement=2 * np.eye(4)), ValueError,
         "not a rotation matrix"),
        (dict(name="b", parent="a", joint=Revolute(), placement=np.eye(3)), ValueError,
         "T has wrong shape"),
        (dict(name="", parent="a", joint=Revolute()), TypeError, "body name must be a non-empty string"),
        (dict(name=3, parent="a", joint=Revolute()), TypeError, "body name must be a non-empty string"),
        (dict(name="b", parent="a", joint=Revolute(), joint_name=""), TypeError,
         "joint name must be a non-empty string"),
    ]
    for kwargs, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            m.add_body(**kwargs)
        assert (m.nbodies, m.nq, m.nv) == (1, 1, 1), kwargs
        assert m.body_names == ["a"] and m.joint_names == ["ja"]


def test_lookup_errors(small):
    with pytest.raises(KeyError, match="no joint named 'elbow'.*'shoulder'"):
        small.idx_q("elbow")
    with pytest.raises(KeyError, match="no joint named"):
        small.idx_v("elbow")
    with pytest.raises(KeyError, match="no body named 'foot'"):
        small.body_index("foot")


def test_empty_model_cannot_run_kernels():
    with pytest.raises(ValueError, match="no moving bodies"):
        gear.mass_matrix(gear.Model(), np.zeros(0))


def test_adding_a_body_after_a_call_refreezes():
    m = gt.random_chain(2, rng=0)
    q = np.zeros(2)
    assert gear.mass_matrix(m, q).shape == (2, 2)
    m.add_body("extra", 1, Revolute([1, 0, 0]), gear.SE3(p=[0.1, 0, 0]), inertia=inertia())
    q = np.zeros(3)
    np.testing.assert_allclose(gear.mass_matrix(m, q), gt.reference_mass_matrix(m, q), atol=1e-12)


def test_gravity_attribute(small):
    m = small
    np.testing.assert_array_equal(m.gravity, [0, 0, -9.81])
    g = m.gravity
    g[2] = 0.0                                  # a copy: the model is unchanged
    assert m.gravity[2] == -9.81
    q = m.random_configuration(1)
    zero = np.zeros(m.nv)
    before = gear.inverse_dynamics(m, q, zero, zero)   # freezes the model
    m.gravity = [1.0, -2.0, 3.0]
    after = gear.inverse_dynamics(m, q, zero, zero)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, gt.reference_inverse_dynamics(m, q, zero, zero), atol=1e-12)
    with pytest.raises(ValueError, match="gravity has wrong shape"):
        m.gravity = [0, 0]
    with pytest.raises(ValueError, match="gravity contains non-finite"):
        gear.Model(gravity=[0, 0, np.nan])


def test_arrays_layout(small):
    a = small.arrays()
    nb = small.nbodies
    assert a["parent"].tolist() == [-1, 0, 1, 0]
    assert a["iq"].tolist() == [0, 7, 8, 12] and a["iv"].tolist() == [0, 6, 7, 10]
    assert a["nvi"].tolist() == [6, 1, 3, 3]
    assert a["Xtree"].shape == (nb, 12) and a["inertia"].shape == (nb, 10)
    for i, I in enumerate(small.inertias):
        np.testing.assert_allclose(a["inertia"][i], I.to_params(), atol=1e-15)


# ---------------------------------------------------------------------------
# configurations
# ---------------------------------------------------------------------------
def test_neutral_and_random_configuration(small, rng):
    m = small
    q0 = m.neutral()
    assert q0.shape == (m.nq,)
    np.testing.assert_array_equal(q0[m.idx_q("root")], [0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(q0[m.idx_q("wrist")], [1, 0, 0, 0])
    np.testing.assert_allclose(gear.forward_kinematics(m, q0)[0], np.eye(4), atol=0)
    q = m.random_configuration(rng)
    assert q.shape == (m.nq,)
    qs = m.random_configuration(rng, n=6)
    assert qs.shape == (6, m.nq)
    for s in (m.idx_q("root"), m.idx_q("wrist")):
        np.testing.assert_allclose(np.linalg.norm(qs[:, s][:, -4:], axis=1), 1, atol=1e-15)
    np.testing.assert_array_equal(m.random_configuration(3), m.random_configuration(3))
    m.check_configuration(qs)  # unit quaternions: no error


def test_random_configuration_respects_limits(rng):
    m = gear.Model()
    m.add_body("a", "world", Revolute().set_limits(-0.1, 0.2), inertia=inertia())
    m.add_body("b", "a", Universal().set_limits([0, 1], [0.5, 1.5]), inertia=inertia())
    qs = m.random_configuration(rng, n=200)
    assert qs[:, 0].min() >= -0.1 and qs[:, 0].max() <= 0.2
    assert np.all((qs[:, 1] >= 0) & (qs[:, 1] <= 0.5) & (qs[:, 2] >= 1) & (qs[:, 2] <= 1.5))


@pytest.fixture(scope="module")
def quadruped():
    return gear.load_urdf(gear.data_path("quadruped.urdf"), floating_base=True)


def test_random_configuration_batch_is_vectorised(quadruped):
    import time

    m = quadruped
    t = time.perf_counter()
    Q = m.random_configuration(np.random.default_rng(0), n=100_000)
    elapsed = time.perf_counter() - t
    assert Q.shape == (100_000, m.nq)
    # one Python step per state took ~15 s; vectorised it is ~0.1 s (loose bound: shared machines)
    assert elapsed < 3.0, f"random_configuration(n=100_000) took {elapsed:.2f} s"
    # unit quaternions, uniformly distributed on the rotations (w >= 0): for a
    # uniform point on the 3-sphere folded to w >= 0, E[w] = 4 / (3 pi), E[x^2] = 1/4
    quat = Q[:, m.idx_q(m.joint_names[0])][:, 3:]
    np.testing.assert_allclose(np.linalg.norm(quat, axis=1), 1.0, atol=1e-15)
    assert np.all(quat[:, 0] >= 0)
    assert abs(quat[:, 0].mean() - 4 / (3 * np.pi)) < 5e-3
    np.testing.assert_allclose(quat[:, 1:].mean(axis=0), 0.0, atol=1e-2)
    np.testing.assert_allclose((quat ** 2).mean(axis=0)[1:], 0.25, atol=5e-3)
    m.check_configuration(Q)
    # the limits (URDF <limit>) hold for every state, and the draws fill them
    for i, j in enumerate(m.joints):
        s = m.idx_q(m.joint_names[i])
        if j.nq and np.isfinite(j.lower).any():
            lo, hi = j.lower, j.upper
            assert np.all(Q[:, s] >= lo) and np.all(Q[:, s] <= hi)
            assert np.all(Q[:, s].min(axis=0) - lo < 1e-3 * (hi - lo))
            assert np.all(hi - Q[:, s].max(axis=0) < 1e-3 * (hi - lo))


def test_random_configuration_shapes_and_seeds(quadruped):
    m = quadruped
    q = m.random_configuration(5)
    assert q.shape == (m.nq,)
    np.testing.assert_array_equal(q, m.random_configuration(np.random.default_rng(5)))
    a = m.random_configuration(11, n=50)
    np.testing.assert_array_equal(a, m.random_configuration(11, n=50))
    assert not np.array_equal(a, m.random_configuration(12, n=50))
    assert m.random_configuration(11, n=np.int64(3)).shape == (3, m.nq)
    assert m.random_configuration(11, n=0).shape == (0, m.nq)
    # a generator moves on: two draws differ
    rng = np.random.default_rng(2)
    assert not np.array_equal(m.random_configuration(rng, n=2), m.random_configuration(rng, n=2))
    with pytest.raises(ValueError, match="n must be a non-negative integer"):
        m.random_configuration(0, n=-1)
    with pytest.raises(TypeError, match="n must be a non-negative integer.*got float"):
        m.random_configuration(0, n=2.5)


def test_random_configuration_with_a_joint_that_draws_one_state():
    class Tilted(Revolute):                       # a subclass with the one-state signature
        def random(self, rng=None):
            return np.array([0.25])

    m = gear.Model()
    m.add_body("a", "world", Tilted(), inertia=inertia())
    m.add_body("b", "a", Spherical(), inertia=inertia())
    Q = m.random_configuration(0, n=4)
    assert Q.shape == (4, 5)
    np.testing.assert_array_equal(Q[:, 0], 0.25)
    np.testing.assert_allclose(np.linalg.norm(Q[:, 1:], axis=1), 1.0, atol=1e-15)


@pytest.mark.parametrize("joint", [Spherical(), Free()], ids=["spherical", "free"])
def test_joint_integrate_and_difference_batches_match_one_state(joint, rng):
    N = 300
    q0 = joint.random(rng, size=N)
    assert q0.shape == (N, joint.nq)
    for scale in (1e-7, 1e-3, 0.5, 2.5):             # the Taylor branches and the full angles
        v = rng.standard_normal((N, joint.nv)) * scale
        q1 = joint.integrate(q0, v, 0.7)
        ref = np.stack([joint.integrate(a, b, 0.7) for a, b in zip(q0, v)])
        np.testing.assert_allclose(q1, ref, rtol=0, atol=1e-14)
        d = joint.difference(q0, q1)
        ref = np.stack([joint.difference(a, b) for a, b in zip(q0, q1)])
        np.testing.assert_allclose(d, ref, rtol=0, atol=1e-13)
    # one configuration against a batch (broadcast)
    v = rng.standard_normal((4, joint.nv))
    out = joint.integrate(q0[0], v)
    np.testing.assert_allclose(out, np.stack([joint.integrate(q0[0], b) for b in v]), atol=1e-14)
    np.testing.assert_allclose(joint.difference(q0[0], out), v, atol=1e-12)


def test_model_difference_batch_is_vectorised(quadruped):
    import time

    m = quadruped
    rng = np.random.default_rng(4)
    N = 20_000
    q0 = m.random_configuration(rng, n=N)
    v = 0.3 * rng.standard_normal((N, m.nv))
    q1 = m.integrate(q0, v)
    t = time.perf_counter()
    d = m.difference(q0, q1)
    elapsed = time.perf_counter() - t
    np.testing.assert_allclose(d, v, atol=1e-12)
    # one Python step per state and quaternion joint took ~1.8 s; vectorised ~0.02 s
    assert elapsed < 0.5, f"difference of {N} states took {elapsed:.2f} s"
    np.testing.assert_allclose(m._integrate_reference(q0, v), q1, atol=1e-13)


def test_integrate_and_difference_batches(tree, rng):
    m = tree
    N = 5
    q = m.random_configuration(rng, n=N)
    v = rng.uniform(-1, 1, (N, m.nv))
    q1 = m.integrate(q, v, dt=0.7)
    assert q1.shape == (N, m.nq)
    for k in range(N):
        np.testing.assert_array_equal(q1[k], m.integrate(q[k], v[k], dt=0.7))
    d = m.difference(q, q1)
    assert d.shape == (N, m.nv)
    np.testing.assert_allclose(d, 0.7 * v, atol=1e-11)
    assert m.difference(q[0], q1[0]).shape == (m.nv,)
    np.testing.assert_allclose(m.integrate(q[0], np.zeros(m.nv)), q[0], atol=1e-15)
    # integer input is accepted
    assert m.integrate(q[0], np.zeros(m.nv, dtype=int)).dtype == np.float64


def test_integrate_difference_errors(small):
    m = small
    q, v = m.neutral(), np.zeros(m.nv)
    with pytest.raises(ValueError, match=r"dq has wrong shape: expected \(13,\)"):
        m.integrate(q, v[:3])
    with pytest.raises(ValueError, match=r"q has wrong shape: expected \(15,\)"):
        m.integrate(q[:3], v)
    with pytest.raises(ValueError, match="q and dq batch sizes differ: 3 vs 2"):
        m.integrate(np.stack([q] * 3), np.stack([v] * 2))
    with pytest.raises(ValueError, match="q0 and q1 batch sizes differ"):
        m.difference(np.stack([q] * 3), np.stack([q] * 2))
    with pytest.raises(ValueError, match="q1 has wrong shape"):
        m.difference(q, q[:4])
    with pytest.raises(ValueError, match="q0 contains non-finite"):
        m.difference(np.full(m.nq, np.nan), q)
    with pytest.raises(ValueError, match="dq contains non-finite"):
        m.integrate(q, np.full(m.nv, np.inf))
    with pytest.raises(TypeError, match="dq must be a real numeric array"):
        m.integrate(q, v.astype(complex))
    bad = q.copy()
    bad[m.idx_q("wrist")] = [0.5, 0, 0, 0]
    with pytest.raises(ValueError, match=r"q0 \(joint 'wrist'\) contains a quaternion of norm 0.5"):
        m.difference(bad, q)


def test_integrate_validates_dt():
    m = gt.random_chain(2, rng=0)
    with pytest.raises(ValueError, match="^dt must be finite"):
        m.integrate(np.zeros(2), np.ones(2), dt=np.nan)
    with pytest.raises(TypeError, match="^dt must be a real number"):
        m.integrate(np.zeros(2), np.ones(2), dt="a")


# ---------------------------------------------------------------------------
# input validation of the public functions
# ---------------------------------------------------------------------------
def calls(m, q, dq, ddq, tau, fe):
    """(name of the function, callable taking keyword overrides)."""
    pres = [True, False, True, False]
    return {
        "inverse_dynamics": lambda **k: gear.inverse_dynamics(
            m, k.get("q", q), k.get("dq", dq), k.get("ddq", ddq), k.get("f_ext", fe)),
        "forward_dynamics": lambda **k: gear.forward_dynamics(
            m, k.get("q", q), k.get("dq", dq), k.get("tau", tau), k.get("f_ext", fe)),
        "hybrid_dynamics": lambda **k: gear.hybrid_dynamics(
            m, k.get("q", q), k.get("dq", dq), k.get("ddq", ddq), k.get("tau", tau),
            k.get("prescribed", pres), k.get("f_ext", fe)),
        "bias_forces": lambda **k: gear.bias_forces(m, k.get("q", q), k.get("dq", dq), k.get("f_ext", fe)),
        "mass_matrix": lambda **k: gear.mass_matrix(m, k.get("q", q)),
        "forward_kinematics": lambda **k: gear.forward_kinematics(m, k.get("q", q), k.get("dq", dq)),
        "kinetic_energy": lambda **k: gear.kinetic_energy(m, k.get("q", q), k.get("dq", dq)),
        "momentum": lambda **k: gear.momentum(m, k.get("q", q), k.get("dq", dq)),
        "gravity_forces": lambda **k: gear.gravity_forces(m, k.get("q", q)),
        "coriolis_forces": lambda **k: gear.coriolis_forces(m, k.get("q", q), k.get("dq", dq)),
    }


ARGS = {
    "inverse_dynamics": ("q", "dq", "ddq", "f_ext"),
    "forward_dynamics": ("q", "dq", "tau", "f_ext"),
    "hybrid_dynamics": ("q", "dq", "ddq", "tau", "f_ext"),
    "bias_forces": ("q", "dq", "f_ext"),
    "mass_matrix": ("q",),
    "forward_kinematics": ("q", "dq"),
    "kinetic_energy": ("q", "dq"),
    "momentum": ("q", "dq"),
    "gravity_forces": ("q",),
    "coriolis_forces": ("q", "dq"),
}


@pytest.fixture
def state(small, rng):
    q, dq, ddq, tau = gt.random_state(small, rng)
    fe = rng.standard_normal((small.nbodies, 6))
    return small, q, dq, ddq, tau, fe


def _good(name, m, q, dq, ddq, tau, fe):
    return {"q": q, "dq": dq, "ddq": ddq, "tau": tau, "f_ext": fe}[name]


@pytest.mark.parametrize("func", list(ARGS))
def test_valid_call_and_batch(func, state):
    m, q, dq, ddq, tau, fe = state
    call = calls(m, q, dq, ddq, tau, fe)[func]
    single = call()
    batched = calls(m, np.stack([q, q]), dq, ddq, tau, fe)[func]()
    first = batched[0] if not isinstance(batched, tuple) else tuple(b[0] for b in batched)
    if isinstance(single, tuple):
        for a, b in zip(single, first):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
    else:
        np.testing.assert_allclose(single, first, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("func, arg", [(f, a) for f, args in ARGS.items() for a in args])
def test_wrong_shape_names_the_argument(func, arg, state):
    m, q, dq, ddq, tau, fe = state
    good = _good(arg, *state)
    bad = good[..., :-1] if good.ndim == 1 else good[:-1]
    with pytest.raises(ValueError, match=rf"^{arg} has wrong shape"):
        calls(*state)[func](**{arg: bad})
    with pytest.raises(ValueError, match=rf"^{arg} has wrong shape"):
        calls(*state)[func](**{arg: np.zeros((2, 2) + good.shape)})


@pytest.mark.parametrize("func, arg", [(f, a) for f, args in ARGS.items() for a in args])
@pytest.mark.parametrize("dtype", [complex, str, object])
def test_wrong_dtype_names_the_argument(func, arg, dtype, state):
    good = _good(arg, *state)
    bad = good.astype(dtype)
    with pytest.raises(TypeError, match=rf"^{arg} must be a real numeric array"):
        calls(*state)[func](**{arg: bad})


@pytest.mark.parametrize("func, arg", [(f, a) for f, args in ARGS.items() for a in args])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_names_the_argument(func, arg, value, state):
    good = _good(arg, *state).copy()
    good.flat[good.size // 2] = value
    with pytest.raises(ValueError, match=rf"^{arg} contains non-finite values"):
        calls(*state)[func](**{arg: good})


@pytest.mark.parametrize("func", list(ARGS))
def test_non_unit_quaternion_names_q_and_the_joint(func, state):
    m, q, *_ = state
    for joint, s in (("root", slice(3, 7)), ("wrist", slice(8, 12))):
        bad = q.copy()
        bad[s] *= 1.5
        with pytest.raises(ValueError, match=rf"^q \(joint '{joint}'\) contains a quaternion of norm 1.5"):
            calls(*state)[func](q=bad)


@pytest.mark.parametrize("func", [f for f, a in ARGS.items() if "dq" in a and f != "forward_kinematics"])
def test_missing_argument_names_it(func, state):
    with pytest.raises(TypeError, match="^dq is required"):
        calls(*state)[func](dq=None)


def test_batch_size_mismatch_is_reported(state):
    m, q, dq, ddq, tau, fe = state
    with pytest.raises(ValueError, match="dq has batch size 2 but an earlier argument has 3"):
        gear.inverse_dynamics(m, np.stack([q] * 3), np.stack([dq] * 2), ddq)


def test_single_state_broadcasts_against_a_batch(state):
    m, q, dq, ddq, tau, fe = state
    qb = np.stack([q, q, q])
    out = gear.inverse_dynamics(m, qb, dq, ddq, fe)
    assert out.shape == (3, m.nv)
    np.testing.assert_allclose(out[2], gear.inverse_dynamics(m, q, dq, ddq, fe), rtol=1e-13, atol=1e-13)


def test_prescribed_validation(state):
    m, q, dq, ddq, tau, fe = state
    with pytest.raises(ValueError, match=r"prescribed has wrong shape: expected \(4,\)"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, [True, False])
    with pytest.raises(ValueError, match="prescribed must hold booleans"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, [2, 0, 0, 1])
    with pytest.raises(KeyError, match="no joint named 'elbow'"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, ["elbow"])
    with pytest.raises(TypeError, match="prescribed is required"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, None)
    a = gear.hybrid_dynamics(m, q, dq, ddq, tau, ["shoulder", "leg"])
    b = gear.hybrid_dynamics(m, q, dq, ddq, tau, [False, True, False, True])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_integer_and_list_inputs_are_accepted(rng):
    m = gt.random_chain(3, kind=["revolute", "prismatic", "planar"], rng=rng)
    z = [0] * m.nv
    tau = gear.inverse_dynamics(m, np.zeros(m.nq, dtype=np.int32), z, z)
    assert tau.dtype == np.float64 and tau.shape == (m.nv,)
    np.testing.assert_allclose(tau, gear.inverse_dynamics(m, np.zeros(m.nq), np.zeros(m.nv), np.zeros(m.nv)))


def test_ragged_input_names_the_argument(state):
    m, q, dq, ddq, tau, fe = state
    with pytest.raises(ValueError, match="^q could not be converted.*rectangular"):
        gear.mass_matrix(m, [list(q), list(q[:-1])])
    with pytest.raises(ValueError, match="^dq could not be converted"):
        m.integrate(q, [[0.0] * m.nv, [0.0]])


def test_bad_out_argument_is_named(state):
    m, q, dq, ddq, tau, fe = state
    for bad in (np.empty(m.nv + 1), np.empty(m.nv, dtype=np.float32), np.empty((m.nv, 2))[:, 0], [0.0] * m.nv):
        with pytest.raises(ValueError, match="^out must be a writeable C-contiguous float64 array"):
            gear.inverse_dynamics(m, q, dq, ddq, out=bad)
    with pytest.raises(ValueError, match=r"^out must be .*\(13, 13\)"):
        gear.mass_matrix(m, q, out=np.empty((m.nv, m.nv + 1)))


# ---------------------------------------------------------------------------
# gear.testing helpers
# ---------------------------------------------------------------------------
def test_random_tree_properties():
    for seed in range(5):
        m = gt.random_tree(seed, nbodies=12)
        assert {type(j).__name__.lower() for j in m.joints} == set(gt.ALL_KINDS)
        assert all(-1 <= p < i for i, p in enumerate(m.parents))
        assert all(isinstance(I, gear.Inertia) for I in m.inertias)
        # seeded: the same tree twice
        m2 = gt.random_tree(seed, nbodies=12)
        assert m2.parents == m.parents
        np.testing.assert_array_equal(m2.arrays()["jparam"], m.arrays()["jparam"])
    small = gt.random_tree(0, nbodies=3, kinds=["revolute", "free"])
    assert {type(j).__name__.lower() for j in small.joints} <= {"revolute", "free"}
    fl = gt.random_tree(1, nbodies=6, root_free=True)
    assert isinstance(fl.joints[0], Free) and fl.parents[0] == -1 and min(fl.parents[1:]) >= 0
    chain = gt.random_tree(2, nbodies=4, parents=[-1, 0, 1, 2], gravity=(0, 0, 0))
    assert chain.parents == [-1, 0, 1, 2] and not chain.gravity.any()
    with pytest.raises(ValueError, match="parents"):
        gt.random_tree(0, nbodies=2, parents=[-1, 1])
    with pytest.raises(ValueError, match="nbodies"):
        gt.random_tree(0, nbodies=0)


def test_random_chain_and_state():
    m = gt.random_chain(5, kind=["spherical", "helical"], rng=3)
    assert m.parents == [-1, 0, 1, 2, 3]
    assert [type(j).__name__ for j in m.joints] == ["Spherical", "Helical"] * 2 + ["Spherical"]
    q, dq, ddq, tau = gt.random_state(m, 0)
    assert q.shape == (m.nq,) and dq.shape == ddq.shape == tau.shape == (m.nv,)
    m.check_configuration(q)
    qb, dqb, ddqb, taub = gt.random_state(m, 0, batch=4)
    assert qb.shape == (4, m.nq) and taub.shape == (4, m.nv)
    m.check_configuration(qb)


def test_reference_functions_accept_batches(tree, rng):
    q, dq, ddq, tau = gt.random_state(tree, rng, batch=2)
    fe = rng.standard_normal((2, tree.nbodies, 6))
    pres = [True, False] * (tree.nbodies // 2) + [True] * (tree.nbodies % 2)
    batched = gt.reference_inverse_dynamics(tree, q, dq, ddq, fe)
    assert batched.shape == (2, tree.nv)
    np.testing.assert_array_equal(batched[1], gt.reference_inverse_dynamics(tree, q[1], dq[1], ddq[1], fe[1]))
    tb, ab = gt.reference_hybrid_dynamics(tree, q, dq, ddq, tau, pres)
    t1, a1 = gt.reference_hybrid_dynamics(tree, q[1], dq[1], ddq[1], tau[1], pres)
    np.testing.assert_array_equal(tb[1], t1)
    np.testing.assert_array_equal(ab[1], a1)
    assert gt.reference_mass_matrix(tree, q).shape == (2, tree.nv, tree.nv)
    assert gt.reference_kinetic_energy(tree, q, dq).shape == (2,)
    assert gt.reference_momentum(tree, q, dq).shape == (2, 6)


def test_reference_agrees_with_kernels(tree, rng):
    """Spot check of the dense reference against the O(n) recursions (the
    full comparison lives in test_dynamics.py)."""
    q, dq, ddq, tau = gt.random_state(tree, rng)
    fe = rng.standard_normal((tree.nbodies, 6))
    M = gt.reference_mass_matrix(tree, q)
    np.testing.assert_allclose(M, gt.reference_mass_matrix_jacobian(tree, q), atol=1e-12)
    np.testing.assert_allclose(gear.mass_matrix(tree, q), M, atol=1e-12)
    np.testing.assert_allclose(gear.inverse_dynamics(tree, q, dq, ddq, fe),
                               gt.reference_inverse_dynamics(tree, q, dq, ddq, fe), rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(gear.forward_dynamics(tree, q, dq, tau, fe),
                               gt.reference_forward_dynamics(tree, q, dq, tau, fe), rtol=1e-9, atol=1e-9)
    pres = rng.random(tree.nbodies) < 0.5
    for a, b in zip(gear.hybrid_dynamics(tree, q, dq, ddq, tau, pres, fe),
                    gt.reference_hybrid_dynamics(tree, q, dq, ddq, tau, pres, fe)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
    assert np.isclose(gt.reference_kinetic_energy(tree, q, dq), 0.5 * dq @ M @ dq, rtol=1e-12)
    np.testing.assert_allclose(gear.momentum(tree, q, dq), gt.reference_momentum(tree, q, dq), atol=1e-11)


def test_reference_batch_with_single_f_ext_and_int_prescribed():
    # a batch of N = nbodies states with one shared f_ext must not be split
    m = gt.random_tree(0, nbodies=3, kinds=["revolute", "spherical"])
    q, dq, ddq, tau = gt.random_state(m, 0, batch=3)
    fe = np.random.default_rng(1).standard_normal((3, 6))
    np.testing.assert_allclose(gt.reference_inverse_dynamics(m, q, dq, ddq, fe),
                               gear.inverse_dynamics(m, q, dq, ddq, fe), atol=1e-12)
    for a, b in zip(gt.reference_hybrid_dynamics(m, q, dq, ddq, tau, [1, 0, 1], f_ext=fe),
                    gear.hybrid_dynamics(m, q, dq, ddq, tau, [True, False, True], fe)):
        np.testing.assert_allclose(a, b, atol=1e-10)


def test_native_integrate_equals_the_joint_by_joint_map():
    from gear.testing import ALL_KINDS, random_tree

    rng = np.random.default_rng(42)
    for _ in range(4):
        m = random_tree(rng, nbodies=9, kinds=ALL_KINDS)
        q = m.random_configuration(rng, n=80)                 # >= 64: the parallel branch
        v = 3.0 * rng.standard_normal((80, m.nv))
        for dt in (1.0, 0.01, 1e-9):
            a = m.integrate(q, v, dt)
            assert np.abs(a - m._integrate_reference(q, v, dt)).max() < 1e-13
            assert np.array_equal(m.integrate(q[3], v[3], dt), a[3])
        # round trip with difference, quaternions stay unit
        b = m.integrate(q, v, 0.1)
        assert np.abs(m.integrate(q, m.difference(q, b)) - b).max() < 1e-12
        m.check_configuration(b)


def test_integrate_and_difference_broadcast_one_state_against_a_batch():
    """One configuration against N velocities (or N configurations against
    one), as users sample around a nominal state: the same as N calls;
    two batches of different sizes are refused."""
    m = gear.load_urdf(gear.data_path("quadruped.urdf"))
    rng = np.random.default_rng(0)
    a, B = m.random_configuration(rng), m.random_configuration(rng, n=3)
    V = rng.standard_normal((3, m.nv))
    np.testing.assert_array_equal(m.integrate(a, V), np.stack([m.integrate(a, v) for v in V]))
    np.testing.assert_array_equal(m.integrate(B, V[0]), np.stack([m.integrate(b, V[0]) for b in B]))
    np.testing.assert_array_equal(m.difference(a, B), np.stack([m.difference(a, b) for b in B]))
    np.testing.assert_array_equal(m.difference(B, a), np.stack([m.difference(b, a) for b in B]))
    assert m.integrate(a, V[0]).shape == (m.nq,) and m.difference(a, B[0]).shape == (m.nv,)
    with pytest.raises(ValueError, match="batch sizes differ: 3 vs 2"):
        m.integrate(B, V[:2])
    with pytest.raises(ValueError, match="batch sizes differ"):
        m.difference(B, B[:2])

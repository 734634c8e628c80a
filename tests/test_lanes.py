"""The structure-of-arrays ("lane") kernels: batches run ``LANES`` states
at once through vector arithmetic (gear/spatial/_lanes.pxd) and must give
what one state at a time gives, bit for bit, on every joint kind, at every
batch size (whole blocks and the states left over), with and without
velocities and external wrenches, on one thread and on several.  The
joint angles' sine and cosine, gear's own polynomials so that they
vectorise, are checked against libm."""
import numpy as np
import pytest

import gear
from gear import _core
from gear.testing import ALL_KINDS, random_tree


@pytest.fixture
def threads():
    old = gear.get_num_threads()
    yield gear.set_num_threads
    gear.set_num_threads(old)


def _ulps(got, ref):
    return np.max(np.abs(got - ref) / np.spacing(np.maximum(np.abs(ref), 1e-300)))


@pytest.mark.parametrize("lo, hi, tol", [(-4.0, 4.0, 1), (-100.0, 100.0, 1), (-8e5, 8e5, 2)])
def test_sin_cos_against_libm(lo, hi, tol):
    x = np.random.default_rng(0).uniform(lo, hi, 200_000)
    s, c = _core.sin_cos_py(x, False)
    assert _ulps(s, np.sin(x)) <= tol and _ulps(c, np.cos(x)) <= tol
    s4, c4 = _core.sin_cos_py(x, True)                 # four at a time: the same bits
    assert np.array_equal(s4, s) and np.array_equal(c4, c)


def test_sin_cos_tiny_exact_and_out_of_range_arguments():
    x = np.array([0.0, 1e-300, -1e-20, 3e-9, np.pi / 2, -np.pi, 823549.6, 823549.7, -1e7, 1e300,
                  1e6 + 0.5, 12.0])
    for lanes in (False, True):
        s, c = _core.sin_cos_py(x, lanes)
        assert _ulps(s, np.sin(x)) <= 2 and _ulps(c, np.cos(x)) <= 2
    s, c = _core.sin_cos_py(np.array([0.0, 1e-300, 0.0, 0.0]), True)
    assert list(s[:2]) == [0.0, 1e-300] and list(c[:2]) == [1.0, 1.0]
    with pytest.raises(ValueError, match="multiple of 4"):
        _core.sin_cos_py(np.zeros(3), True)


_ALGOS = {"rnea": gear.inverse_dynamics, "aba": gear.forward_dynamics}


def _single(fn, model, q, dq, x, fe):
    """``fn`` (inverse or forward dynamics) one state at a time."""
    return np.array([fn(model, q[k], dq[k], x[k], None if fe is None else fe[k]) for k in range(len(q))])


@pytest.mark.parametrize("algo", ["rnea", "aba"])
@pytest.mark.parametrize("kind", ALL_KINDS)
def test_batch_equals_single_states_on_every_joint_kind(kind, algo):
    fn = _ALGOS[algo]
    rng = np.random.default_rng({"rnea": 0, "aba": 10}[algo] + ALL_KINDS.index(kind))
    model = random_tree(rng, nbodies=7, kinds=[kind, "revolute"])
    for N in (1, 3, 4, 5, 8, 11):
        q = model.random_configuration(rng, n=N)
        dq, x = rng.standard_normal((2, N, model.nv))
        fe = rng.standard_normal((N, model.nbodies, 6))
        for f in (None, fe):
            assert np.array_equal(fn(model, q, dq, x, f), _single(fn, model, q, dq, x, f)), (kind, N)


@pytest.mark.parametrize("algo", ["rnea", "aba"])
def test_batch_equals_single_states_on_trees_of_every_kind(algo, threads):
    fn = _ALGOS[algo]
    rng = np.random.default_rng({"rnea": 7, "aba": 8}[algo])
    for seed, root_free in ((1, False), (2, True), (3, False)):
        model = random_tree(np.random.default_rng(seed), nbodies=14, root_free=root_free)
        q = model.random_configuration(rng, n=70)
        dq, x = rng.standard_normal((2, 70, model.nv))
        ref = _single(fn, model, q, dq, x, None)
        for n in (1, 2):
            threads(n)
            assert np.array_equal(fn(model, q, dq, x), ref)
        # zero velocity and acceleration (or torque): gravity alone
        z = np.zeros_like(dq)
        assert np.array_equal(fn(model, q, z, z), _single(fn, model, q, z, z, None))
        if algo == "aba":
            # RNEA of the result gives tau back
            back = gear.inverse_dynamics(model, q, dq, ref)
            assert np.max(np.abs(back - x)) < 1e-8 * max(1.0, np.max(np.abs(x)))


def test_rnea_lanes_agree_with_the_reference_formulas():
    from gear.testing import reference_inverse_dynamics

    rng = np.random.default_rng(3)
    model = random_tree(rng, nbodies=10)
    q = model.random_configuration(rng, n=8)
    dq, ddq = rng.standard_normal((2, 8, model.nv))
    fe = rng.standard_normal((8, model.nbodies, 6))
    got = gear.inverse_dynamics(model, q, dq, ddq, fe)
    ref = reference_inverse_dynamics(model, q, dq, ddq, fe)
    assert np.max(np.abs(got - ref)) <= 1e-10 * max(1.0, np.max(np.abs(ref)))


def test_aba_block_with_a_singular_state_reports_it():
    """A point mass on a massless rotating arm, sliding along it: the
    arm's S^T Ihat S is m d^2, singular where the slider sits on the axis
    (d = 0).  A block of four states with one such state runs again state
    by state, and the error names the joint; the other blocks are exact."""
    from gear.joints import Prismatic, Revolute

    m = gear.Model()
    m.add_body("arm", "world", Revolute([0, 0, 1]), inertia=None)
    m.add_body("slider", "arm", Prismatic([1, 0, 0]), inertia=gear.Inertia(1.0, [0, 0, 0], np.zeros((3, 3))))
    rng = np.random.default_rng(5)
    q = rng.uniform(0.5, 1.5, (8, 2))
    dq, tau = rng.standard_normal((2, 8, 2))
    fd = gear.forward_dynamics
    assert np.array_equal(fd(m, q, dq, tau), _single(fd, m, q, dq, tau, None))
    q[5, 1] = 0.0
    with pytest.raises(gear.SingularInertiaError, match="arm"):
        gear.forward_dynamics(m, q, dq, tau)


def _rollouts_equal_single_runs(model, q0, v0, **kw):
    batch = gear.simulate(model, q0, v0, 0.03, 1e-3, **kw)
    assert batch.stats["native"]
    for k in range(len(q0)):
        kk = {key: (val[k] if isinstance(val, np.ndarray) else val) for key, val in kw.items()}
        one = gear.simulate(model, q0[k], v0[k], 0.03, 1e-3, **kk)
        assert np.array_equal(one.q, batch.q[k]) and np.array_equal(one.dq, batch.dq[k]), k


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_tree_rollouts_four_at_a_time_equal_single_runs(integrator, threads):
    rng = np.random.default_rng(21)
    for seed, root_free in ((1, False), (2, True)):
        model = random_tree(np.random.default_rng(seed), nbodies=9, root_free=root_free)
        q0 = model.random_configuration(rng, n=11)                # two blocks of four and three left
        v0 = rng.standard_normal((11, model.nv))
        for n in (1, 2):
            threads(n)
            _rollouts_equal_single_runs(model, q0, v0, integrator=integrator)
            _rollouts_equal_single_runs(model, q0, v0, integrator=integrator,
                                        tau=rng.standard_normal((11, model.nv)), record_every=7)


def test_tree_rollouts_four_at_a_time_with_native_controllers():
    from gear.controllers import PD, ComputedTorque, SampledReference

    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(22)
    q0 = arm.random_configuration(rng, n=9)
    v0 = rng.standard_normal((9, arm.nv))
    pd = PD(arm, 50.0, 5.0, arm.neutral() + 0.1, gravity_compensation=True)
    tg = np.linspace(0.0, 0.1, 11)
    ref = SampledReference(tg, np.sin(tg)[:, None] * np.ones(arm.nv), np.cos(tg)[:, None] * np.ones(arm.nv),
                           -np.sin(tg)[:, None] * np.ones(arm.nv))
    for tau in (pd, ComputedTorque(arm, 100.0, 20.0, ref)):
        for integrator in ("euler", "rk4"):
            _rollouts_equal_single_runs(arm, q0, v0, tau=tau, integrator=integrator)


def test_a_failing_state_in_a_block_of_rollouts_is_reported_alone():
    """The slider on a massless arm (see the ABA test above): a state that
    starts with the slider on the axis fails, the three others of its
    block of four and the other block run to the end."""
    from gear.joints import Prismatic, Revolute

    m = gear.Model()
    m.add_body("arm", "world", Revolute([0, 0, 1]), inertia=None)
    m.add_body("slider", "arm", Prismatic([1, 0, 0]), inertia=gear.Inertia(1.0, [0, 0, 0], np.zeros((3, 3))))
    q0 = np.tile([0.0, 1.0], (8, 1))
    v0 = np.zeros((8, 2))
    ok = gear.simulate(m, q0, v0, 0.01, 1e-3)
    assert np.isfinite(ok.q).all()
    q0[2, 1] = 0.0
    for fill in (np.nan, 0.0):
        # the frames after the failure are never written: whatever the
        # memory they get holds, the error is the singular inertia's
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(np, "empty", lambda shape, *a, **k: np.full(shape, fill))
            with pytest.raises(gear.SingularInertiaError, match="arm"):
                gear.simulate(m, q0, v0, 0.01, 1e-3)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_mass_matrix_batch_equals_single_states_on_every_joint_kind(kind, threads):
    rng = np.random.default_rng(30 + ALL_KINDS.index(kind))
    model = random_tree(rng, nbodies=8, kinds=[kind, "revolute"], root_free=kind == "free")
    for N in (1, 4, 5, 11, 40):
        q = model.random_configuration(rng, n=N)
        ref = np.array([gear.mass_matrix(model, q[k]) for k in range(N)])
        for n in (1, 2):
            threads(n)
            assert np.array_equal(gear.mass_matrix(model, q), ref), (kind, N)
    # and the mass matrix is the one RNEA implies: M ddq = RNEA(q, 0, ddq) - RNEA(q, 0, 0)
    ddq = rng.standard_normal((N, model.nv))
    z = np.zeros_like(ddq)
    Md = np.einsum("nij,nj->ni", gear.mass_matrix(model, q), ddq)
    diff = gear.inverse_dynamics(model, q, z, ddq) - gear.inverse_dynamics(model, q, z, z)
    assert np.max(np.abs(Md - diff)) < 1e-10 * max(1.0, np.max(np.abs(diff)))


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_hybrid_dynamics_batch_equals_single_states_on_every_joint_kind(kind, threads):
    """Table 4 four states at a time: prescribed joints of every kind
    (their tau written, their ddq read) beside free ones, bit for bit."""
    rng = np.random.default_rng(50 + ALL_KINDS.index(kind))
    model = random_tree(rng, nbodies=8, kinds=[kind, "revolute"], root_free=kind == "free")
    N = 11
    q = model.random_configuration(rng, n=N)
    dq, ddq, tau = rng.standard_normal((3, N, model.nv))
    fe = rng.standard_normal((N, model.nbodies, 6))
    masks = [np.arange(model.nbodies) % 2 == 0, np.arange(model.nbodies) % 3 == 1,
             np.ones(model.nbodies, bool), np.zeros(model.nbodies, bool)]
    for mask in masks:
        for n in (1, 2):
            threads(n)
            H = gear.hybrid_dynamics(model, q, dq, ddq, tau, mask, fe)
            for k in range(N):
                h = gear.hybrid_dynamics(model, q[k], dq[k], ddq[k], tau[k], mask, fe[k])
                assert np.array_equal(H[0][k], h[0]) and np.array_equal(H[1][k], h[1]), (kind, k)
    # every joint prescribed is inverse dynamics, none is forward dynamics
    # (returns tau, ddq)
    allp = gear.hybrid_dynamics(model, q, dq, ddq, tau, np.ones(model.nbodies, bool), fe)
    assert np.max(np.abs(allp[0] - gear.inverse_dynamics(model, q, dq, ddq, fe))) < 1e-10 * max(
        1.0, np.max(np.abs(allp[0])))
    nonep = gear.hybrid_dynamics(model, q, dq, ddq, tau, np.zeros(model.nbodies, bool), fe)
    assert np.array_equal(nonep[1], gear.forward_dynamics(model, q, dq, tau, fe))


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_forward_kinematics_batch_equals_single_states_on_every_joint_kind(kind, threads):
    rng = np.random.default_rng(70 + ALL_KINDS.index(kind))
    model = random_tree(rng, nbodies=8, kinds=[kind, "revolute"], root_free=kind == "free")
    N = 11
    q = model.random_configuration(rng, n=N)
    dq = rng.standard_normal((N, model.nv))
    for n in (1, 2):
        threads(n)
        P, V = gear.forward_kinematics(model, q, dq)
        P0 = gear.forward_kinematics(model, q)
        for k in range(N):
            p, v = gear.forward_kinematics(model, q[k], dq[k])
            assert np.array_equal(P[k], p) and np.array_equal(V[k], v), (kind, k)
            assert np.array_equal(np.asarray(P0[k]), np.asarray(gear.forward_kinematics(model, q[k])))


@pytest.mark.parametrize("which", ["inverse", "forward"])
@pytest.mark.parametrize("kind", ALL_KINDS)
def test_derivatives_batch_equals_single_states_on_every_joint_kind(kind, which, threads):
    """The Jacobians of inverse dynamics and M, and of forward dynamics and
    M^-1, four states at a time (``rnea_derivatives_lanes``,
    ``aba_derivatives_lanes``: the tree's stages on all lanes, each state's
    Cholesky factor, inverse and products one at a time; universal and
    planar joints, whose S depends on q, one state at a time) equal single
    calls bit for bit, with and without velocities and external wrenches."""
    fn = {"inverse": gear.inverse_dynamics_derivatives, "forward": gear.forward_dynamics_derivatives}[which]
    rng = np.random.default_rng({"inverse": 50, "forward": 70}[which] + ALL_KINDS.index(kind))
    model = random_tree(rng, nbodies=8, kinds=[kind, "revolute"], root_free=kind == "free")
    for N in (1, 4, 5, 11):
        q = model.random_configuration(rng, n=N)
        dq, x = rng.standard_normal((2, N, model.nv))
        fe = rng.standard_normal((N, model.nbodies, 6))
        for v, f in ((dq, None), (dq, fe), (np.zeros_like(dq), None)):
            ref = [np.array(y) for y in zip(*[fn(model, q[k], v[k], x[k], None if f is None else f[k])
                                             for k in range(N)])]
            for n in (1, 2):
                threads(n)
                got = fn(model, q, v, x, f)
                assert len(got) == len(ref)
                for a, b in zip(got, ref):
                    assert np.array_equal(a, b), (kind, which, N, n)

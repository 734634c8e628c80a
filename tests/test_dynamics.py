"""Cross-algorithm identities of the O(n) recursions (Kim Tables 2-4, CRBA).

Oracles: RNEA(ABA(tau)) = tau, M ddq + b = RNEA, M from unit accelerations,
the dense hybrid formula (34), energy balance by finite differences in
time, momentum conservation, and the virtual-work form of external forces.
"""
import numpy as np
import pytest

import gear
from gear import testing as gt
from gear.joints import (Revolute, Prismatic, Helical, Cylindrical, Universal, Planar,
                         Spherical, Free, Fixed)

SEEDS = range(6)
REL = 1e-10


def rel_err(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


def tree(seed, nbodies=9, **kw):
    return gt.random_tree(np.random.default_rng(seed), nbodies=nbodies, **kw)


def state(model, seed, batch=None):
    return gt.random_state(model, np.random.default_rng(1000 + seed), batch=batch)


def f_ext_random(model, seed, batch=None):
    rng = np.random.default_rng(2000 + seed)
    shape = (model.nbodies, 6) if batch is None else (batch, model.nbodies, 6)
    return rng.standard_normal(shape)


@pytest.fixture(params=SEEDS)
def seeded(request):
    seed = request.param
    m = tree(seed)
    return seed, m, state(m, seed)


def test_random_trees_cover_every_joint_kind():
    kinds = set()
    for seed in SEEDS:
        kinds |= {type(j) for j in tree(seed).joints}
    assert kinds >= {Revolute, Prismatic, Helical, Cylindrical, Universal, Planar, Spherical, Free, Fixed}


@pytest.mark.parametrize("with_fext", [False, True])
def test_rnea_of_aba_is_identity(seeded, with_fext):
    seed, m, (q, dq, ddq, tau) = seeded
    fe = f_ext_random(m, seed) if with_fext else None
    ddq_fd = gear.forward_dynamics(m, q, dq, tau, fe)
    assert rel_err(gear.inverse_dynamics(m, q, dq, ddq_fd, fe), tau) < REL
    tau_id = gear.inverse_dynamics(m, q, dq, ddq, fe)
    assert rel_err(gear.forward_dynamics(m, q, dq, tau_id, fe), ddq) < 1e-9


def test_mass_matrix_and_bias(seeded):
    seed, m, (q, dq, ddq, tau) = seeded
    M = gear.mass_matrix(m, q)
    b = gear.bias_forces(m, q, dq)
    assert rel_err(M @ ddq + b, gear.inverse_dynamics(m, q, dq, ddq)) < REL
    assert np.array_equal(M, M.T) or rel_err(M, M.T) < 1e-14
    assert np.linalg.eigvalsh(M).min() > 0
    # columns from unit accelerations (RNEA with dq = 0, no gravity)
    m.gravity = (0, 0, 0)
    try:
        zero = np.zeros(m.nv)
        cols = np.stack([gear.inverse_dynamics(m, q, zero, e) for e in np.eye(m.nv)], axis=1)
    finally:
        m.gravity = (0, 0, -9.81)
    assert rel_err(M, cols) < REL
    # b = gravity + coriolis
    assert rel_err(gear.gravity_forces(m, q) + gear.coriolis_forces(m, q, dq), b) < REL


def test_against_dense_reference(seeded):
    seed, m, (q, dq, ddq, tau) = seeded
    fe = f_ext_random(m, seed)
    assert rel_err(gear.inverse_dynamics(m, q, dq, ddq, fe),
                   gt.reference_inverse_dynamics(m, q, dq, ddq, fe)) < REL
    assert rel_err(gear.mass_matrix(m, q), gt.reference_mass_matrix_jacobian(m, q)) < REL
    assert rel_err(gear.forward_dynamics(m, q, dq, tau, fe),
                   gt.reference_forward_dynamics(m, q, dq, tau, fe)) < 1e-9


def test_hybrid_limits_and_dense_formula(seeded):
    seed, m, (q, dq, ddq, tau) = seeded
    nb = m.nbodies
    # all prescribed = RNEA
    t_out, d_out = gear.hybrid_dynamics(m, q, dq, ddq, tau, np.ones(nb, bool))
    assert rel_err(t_out, gear.inverse_dynamics(m, q, dq, ddq)) < REL
    assert np.array_equal(d_out, ddq)
    # none prescribed = ABA
    t_out, d_out = gear.hybrid_dynamics(m, q, dq, ddq, tau, np.zeros(nb, bool))
    assert rel_err(d_out, gear.forward_dynamics(m, q, dq, tau)) < REL
    assert np.array_equal(t_out, tau)
    # random masks = eq. (34)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        mask = rng.random(nb) < 0.5
        t_out, d_out = gear.hybrid_dynamics(m, q, dq, ddq, tau, mask)
        t_ref, d_ref = gt.reference_hybrid_dynamics(m, q, dq, ddq, tau, mask)
        assert rel_err(d_out, d_ref) < 1e-9
        assert rel_err(t_out, t_ref) < 1e-9
        # and the outputs satisfy the equations of motion
        assert rel_err(gear.inverse_dynamics(m, q, dq, d_out), t_out) < 1e-9


def test_hybrid_by_joint_names():
    m = tree(3)
    q, dq, ddq, tau = state(m, 3)
    names = [m.joint_names[1], m.joint_names[4]]
    mask = np.zeros(m.nbodies, bool)
    mask[[1, 4]] = True
    a = gear.hybrid_dynamics(m, q, dq, ddq, tau, names)
    b = gear.hybrid_dynamics(m, q, dq, ddq, tau, mask)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_kinetic_energy_is_half_dq_M_dq(seeded):
    seed, m, (q, dq, ddq, tau) = seeded
    M = gear.mass_matrix(m, q)
    assert rel_err(gear.kinetic_energy(m, q, dq), 0.5 * dq @ M @ dq) < REL


def _energy(m, q, dq):
    return gear.kinetic_energy(m, q, dq) + gear.potential_energy(m, q)


@pytest.mark.parametrize("seed", SEEDS)
def test_power_balance(seed):
    """dE/dt = tau . dq + sum_i F_ext,i . V_i along the motion ddq = ABA(tau)."""
    m = tree(seed)
    q, dq, _, tau = state(m, seed)
    fe = f_ext_random(m, seed)
    ddq = gear.forward_dynamics(m, q, dq, tau, fe)
    _, V = gear.forward_kinematics(m, q, dq)
    power = tau @ dq + np.sum(fe * V)
    h = 1e-5
    # second-order Taylor steps on the manifold (body-frame velocities)
    qp = m.integrate(q, h * dq + 0.5 * h * h * ddq)
    qm = m.integrate(q, -h * dq + 0.5 * h * h * ddq)
    dEdt = (_energy(m, qp, dq + h * ddq) - _energy(m, qm, dq - h * ddq)) / (2 * h)
    assert abs(dEdt - power) < 1e-6 * max(1.0, abs(power), np.abs(tau * dq).sum())


@pytest.mark.parametrize("seed", SEEDS)
def test_free_floating_tree_conserves_momentum(seed):
    rng = np.random.default_rng(seed)
    m = gt.random_tree(rng, nbodies=7, root_free=True, gravity=(0, 0, 0))
    assert isinstance(m.joints[0], Free)
    q, dq, _, tau = state(m, seed)
    tau[m.idx_v(m.joint_names[0])] = 0.0  # internal torques only
    ddq = gear.forward_dynamics(m, q, dq, tau)
    h = 1e-5
    qp = m.integrate(q, h * dq + 0.5 * h * h * ddq)
    qm = m.integrate(q, -h * dq + 0.5 * h * h * ddq)
    dL = (gear.momentum(m, qp, dq + h * ddq) - gear.momentum(m, qm, dq - h * ddq)) / (2 * h)
    L = gear.momentum(m, q, dq)
    assert np.abs(dL).max() < 1e-6 * max(1.0, np.abs(L).max())
    assert rel_err(gear.momentum(m, q, dq), gt.reference_momentum(m, q, dq)) < REL


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_external_force_is_virtual_work(seed):
    """tau(f_ext) - tau(0) = -sum_i J_i^T F_ext,i with body Jacobians J_i."""
    m = tree(seed)
    q, dq, ddq, _ = state(m, seed)
    fe = f_ext_random(m, seed)
    # body Jacobians: twists are linear in dq
    J = np.stack([gear.forward_kinematics(m, q, e)[1] for e in np.eye(m.nv)], axis=-1)  # (nb, 6, nv)
    expect = -np.einsum("bkv,bk->v", J, fe)
    got = gear.inverse_dynamics(m, q, dq, ddq, fe) - gear.inverse_dynamics(m, q, dq, ddq)
    assert rel_err(got, expect) < 1e-9


def test_batched_equals_single_bit_for_bit():
    m = tree(11, nbodies=10)
    N = 37
    q, dq, ddq, tau = state(m, 11, batch=N)
    fe = f_ext_random(m, 11, batch=N)
    mask = np.arange(m.nbodies) % 3 == 0
    old = gear.get_num_threads()
    gear.set_num_threads(2)
    try:
        T = gear.inverse_dynamics(m, q, dq, ddq, fe)
        D = gear.forward_dynamics(m, q, dq, tau, fe)
        M = gear.mass_matrix(m, q)
        H = gear.hybrid_dynamics(m, q, dq, ddq, tau, mask, fe)
        P, V = gear.forward_kinematics(m, q, dq)
        B = gear.bias_forces(m, q, dq, fe)
    finally:
        gear.set_num_threads(old)
    assert T.shape == (N, m.nv) and M.shape == (N, m.nv, m.nv) and P.shape == (N, m.nbodies, 4, 4)
    for k in range(N):
        assert np.array_equal(T[k], gear.inverse_dynamics(m, q[k], dq[k], ddq[k], fe[k]))
        assert np.array_equal(D[k], gear.forward_dynamics(m, q[k], dq[k], tau[k], fe[k]))
        assert np.array_equal(M[k], gear.mass_matrix(m, q[k]))
        h = gear.hybrid_dynamics(m, q[k], dq[k], ddq[k], tau[k], mask, fe[k])
        assert np.array_equal(H[0][k], h[0]) and np.array_equal(H[1][k], h[1])
        p, v = gear.forward_kinematics(m, q[k], dq[k])
        assert np.array_equal(P[k], p) and np.array_equal(V[k], v)
        assert np.array_equal(B[k], gear.bias_forces(m, q[k], dq[k], fe[k]))


def test_single_state_broadcasts_against_batch():
    m = tree(2)
    q, dq, ddq, _ = state(m, 2, batch=5)
    T = gear.inverse_dynamics(m, q[0], dq, ddq)
    assert T.shape == (5, m.nv)
    for k in range(5):
        assert np.array_equal(T[k], gear.inverse_dynamics(m, q[0], dq[k], ddq[k]))
    with pytest.raises(ValueError, match="batch size"):
        gear.inverse_dynamics(m, q, dq[:3], ddq)


def test_out_arguments_are_filled_in_place():
    m = tree(4)
    q, dq, ddq, tau = state(m, 4, batch=6)
    out = np.empty((6, m.nv))
    r = gear.inverse_dynamics(m, q, dq, ddq, out=out)
    assert r is out and np.array_equal(out, gear.inverse_dynamics(m, q, dq, ddq))
    r = gear.forward_dynamics(m, q, dq, tau, out=out)
    assert r is out and np.array_equal(out, gear.forward_dynamics(m, q, dq, tau))
    Mo = np.empty((6, m.nv, m.nv))
    assert gear.mass_matrix(m, q, out=Mo) is Mo
    o1 = np.empty(m.nv)
    assert gear.inverse_dynamics(m, q[0], dq[0], ddq[0], out=o1) is o1
    with pytest.raises(ValueError, match="out must be"):
        gear.inverse_dynamics(m, q, dq, ddq, out=np.empty((6, m.nv), dtype=np.float32))
    with pytest.raises(ValueError, match="out must be"):
        gear.inverse_dynamics(m, q, dq, ddq, out=np.empty((m.nv, 6)).T)


@pytest.mark.parametrize("N", [None, 3, 40])
def test_out_arguments_take_the_allocation_light_path(N):
    """``out=`` fills the result in the fast path (it used to send every
    call through the general path's Python validation, four times a small
    batch's time), with the general path's bits; an ``out`` that path
    cannot fill goes the general way and gets its clear error."""
    from gear import _core

    m = tree(7)
    q, dq, ddq, tau = state(m, 7, batch=N or 1)
    if N is None:
        q, dq, ddq, tau = q[0], dq[0], ddq[0], tau[0]
    shape = (m.nv,) if N is None else (N, m.nv)
    fz = np.zeros(((N,) if N else ()) + (m.nbodies, 6))     # f_ext = 0: the general path
    for fast, public, x in ((_core.rnea1, gear.inverse_dynamics, ddq), (_core.aba1, gear.forward_dynamics, tau)):
        out = np.full(shape, np.nan)
        assert fast(m.data, q, dq, x, out) is out                # taken, in place
        assert np.array_equal(out, public(m, q, dq, x, f_ext=fz))
        out2 = np.full(shape, np.nan)
        assert public(m, q, dq, x, out=out2) is out2 and np.array_equal(out2, out)
        ro = np.empty(shape)
        ro.flags.writeable = False
        for bad in (np.empty(shape, dtype=np.float32), np.empty(shape[:-1] + (2 * shape[-1],))[..., ::2], ro, np.empty((2,) + shape)):
            assert fast(m.data, q, dq, x, bad) is None
            with pytest.raises(ValueError, match="^out must be a writeable C-contiguous float64 array"):
                public(m, q, dq, x, out=bad)


def test_openmp_really_runs_in_parallel():
    from gear import _core

    assert _core.omp_enabled(), "the extension was built without OpenMP: prange runs serially"
    m = tree(5)
    q = m.random_configuration(np.random.default_rng(0), n=64)
    tid = np.full(64, -1, dtype=np.int32)
    _core.rnea_thread_ids(m.data, q, tid, 2)
    assert set(tid.tolist()) == {0, 1}, "both threads must take a share of the batch"


def test_bad_inputs_give_clear_errors():
    m = tree(1)
    q, dq, ddq, tau = state(m, 1)
    with pytest.raises(ValueError, match=r"dq has wrong shape: expected \(%d,\)" % m.nv):
        gear.inverse_dynamics(m, q, dq[:-1], ddq)
    with pytest.raises(ValueError, match="q has wrong shape"):
        gear.forward_dynamics(m, q[None, None], dq, tau)
    with pytest.raises(TypeError, match="tau must be a real numeric array"):
        gear.forward_dynamics(m, q, dq, tau.astype(complex))
    with pytest.raises(TypeError, match="ddq must be a real numeric array"):
        gear.inverse_dynamics(m, q, dq, ["a"] * m.nv)
    bad = ddq.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="ddq contains non-finite"):
        gear.inverse_dynamics(m, q, dq, bad)
    bad = tau.copy()
    bad[-1] = np.inf
    with pytest.raises(ValueError, match="tau contains non-finite"):
        gear.forward_dynamics(m, q, dq, bad)
    with pytest.raises(ValueError, match=r"f_ext has wrong shape"):
        gear.inverse_dynamics(m, q, dq, ddq, np.zeros((m.nbodies, 3)))
    with pytest.raises(ValueError, match="prescribed has wrong shape"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, [True, False])
    with pytest.raises(KeyError, match="no joint named"):
        gear.hybrid_dynamics(m, q, dq, ddq, tau, ["nope"])
    # a non-unit quaternion
    qs = q.copy()
    k = next(i for i, j in enumerate(m.joints) if isinstance(j, (Spherical, Free)))
    s = m.idx_q(m.joint_names[k])
    qs[s.stop - 4:s.stop] *= 1.1
    with pytest.raises(ValueError, match="unit norm"):
        gear.inverse_dynamics(m, qs, dq, ddq)
    # integer input is accepted and converted
    m2 = gt.random_chain(3, rng=np.random.default_rng(0))
    z = np.zeros(3, dtype=int)
    assert gear.inverse_dynamics(m2, z, z, z).dtype == np.float64


def test_singular_articulated_inertia_is_reported():
    m = gear.Model()
    m.add_body("a", "world", Revolute([0, 0, 1]),
               inertia=gear.Inertia(1.0, [0.1, 0, 0], np.diag([0.1, 0.1, 0.1])))
    m.add_body("ghost", "a", Revolute([0, 1, 0]), gear.SE3(p=[0.5, 0, 0]), inertia=None)
    with pytest.raises(gear.SingularInertiaError, match="ghost"):
        gear.forward_dynamics(m, np.zeros(2), np.zeros(2), np.zeros(2))
    # RNEA and CRBA are still defined
    assert np.isfinite(gear.mass_matrix(m, np.zeros(2))).all()


def test_set_num_threads_validates():
    with pytest.raises(ValueError):
        gear.set_num_threads(0)


def test_derivative_out_arguments_are_filled_in_place():
    m = tree(6)
    q, dq, ddq, tau = state(m, 6, batch=4)
    outs = tuple(np.empty((4, m.nv, m.nv)) for _ in range(3))
    r = gear.inverse_dynamics_derivatives(m, q, dq, ddq, out=outs)
    assert all(a is b for a, b in zip(r, outs))
    ref = gear.inverse_dynamics_derivatives(m, q, dq, ddq)
    assert all(np.array_equal(a, b) for a, b in zip(r, ref))
    r = gear.forward_dynamics_derivatives(m, q, dq, tau, out=outs)
    ref = gear.forward_dynamics_derivatives(m, q, dq, tau)
    assert all(np.array_equal(a, b) for a, b in zip(r, ref))
    with pytest.raises(ValueError, match="three preallocated"):
        gear.inverse_dynamics_derivatives(m, q, dq, ddq, out=outs[:2])
    with pytest.raises(ValueError, match="out must be a writeable C-contiguous"):
        gear.inverse_dynamics_derivatives(m, q, dq, ddq, out=(outs[0], outs[1], np.empty((4, 2, 2))))


def _z_chain(sign, rng_seed=3, n=6):
    # a chain of revolute joints about +-z (the kernels' written-out z-axis
    # case for +z, Rodrigues' formula for -z), with random placements and
    # inertias drawn from the same seed for both signs
    rng = np.random.default_rng(rng_seed)
    m = gear.Model(gravity=(0.0, 0.0, -9.81))
    for i in range(n):
        m.add_body(f"b{i}", "world" if i == 0 else i - 1, Revolute([0.0, 0.0, sign]),
                   placement=gt.random_se3(rng), inertia=gt.random_inertia(rng), joint_name=f"j{i}")
    return m


def test_revolute_z_fast_path_against_reference_and_mirror():
    """Revolute joints about the frame's z axis take a written-out path in
    the forward pass; check it against the dense NumPy reference and against
    the same chain built on -z axes (the general path), where
    Rot(-z, -q) = Rot(z, q) makes every joint quantity flip sign."""
    mz, mm = _z_chain(1.0), _z_chain(-1.0)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q, dq, ddq, tau = (rng.standard_normal(mz.nv) for _ in range(4))
        fe = rng.standard_normal((mz.nbodies, 6))
        assert rel_err(gear.inverse_dynamics(mz, q, dq, ddq, fe),
                       gt.reference_inverse_dynamics(mz, q, dq, ddq, fe)) < REL
        assert rel_err(gear.forward_dynamics(mz, q, dq, tau, fe),
                       gt.reference_forward_dynamics(mz, q, dq, tau, fe)) < 1e-9
        assert rel_err(gear.mass_matrix(mz, q), gt.reference_mass_matrix(mz, q)) < REL
        assert rel_err(gear.forward_dynamics(mz, q, dq, tau, fe),
                       -gear.forward_dynamics(mm, -q, -dq, -tau, fe)) < REL
        assert rel_err(gear.inverse_dynamics(mz, q, dq, ddq, fe),
                       -gear.inverse_dynamics(mm, -q, -dq, -ddq, fe)) < REL
        assert rel_err(gear.mass_matrix(mz, q), gear.mass_matrix(mm, -q)) < REL
        for Tz, Tm in zip(gear.forward_kinematics(mz, q), gear.forward_kinematics(mm, -q)):
            assert np.abs(np.asarray(Tz) - np.asarray(Tm)).max() < 1e-13


@pytest.mark.parametrize("N", [None, 5, 40])
def test_every_tree_call_takes_the_allocation_light_path_with_the_general_paths_bits(N):
    """Mass matrix, forward kinematics, bias, gravity and Coriolis forces,
    hybrid dynamics and both derivatives take the allocation-light path on float64
    C-contiguous inputs (they used to pay the general path's 15-25 us of
    Python per call, one state or a batch), with the bits of the general
    path, which lists still take."""
    from gear import _core

    m = tree(7)
    q, dq, ddq, tau = state(m, 7, batch=N or 1)
    if N is None:
        q, dq, ddq, tau = q[0], dq[0], ddq[0], tau[0]
    L = lambda a: a.tolist()            # noqa: E731  (the general path converts lists)
    md = m.data
    light = [(_core.crba_light(md, q), gear.mass_matrix(m, L(q))),
             (_core.fk_light(md, q, None), gear.forward_kinematics(m, L(q))),
             (_core.fk_light(md, q, dq), gear.forward_kinematics(m, L(q), L(dq))),
             (_core.rnea_light(md, q, dq, None, True), gear.bias_forces(m, L(q), L(dq))),
             (_core.rnea_light(md, q, None, None, True), gear.gravity_forces(m, L(q))),
             (_core.rnea_light(md, q, dq, None, False), gear.coriolis_forces(m, L(q), L(dq))),
             (gear.mass_matrix(m, q), gear.mass_matrix(m, L(q))),
             (gear.inverse_dynamics_derivatives(m, q, dq, ddq),
              gear.inverse_dynamics_derivatives(m, L(q), L(dq), L(ddq))),
             (gear.forward_dynamics_derivatives(m, q, dq, tau),
              gear.forward_dynamics_derivatives(m, L(q), L(dq), L(tau)))]
    pres = np.zeros(m.nbodies, dtype=bool)
    pres[::2] = True
    light.append((_core.hybrid_light(md, q, dq, ddq, tau, pres.view(np.uint8)),
                  gear.hybrid_dynamics(m, L(q), L(dq), L(ddq), L(tau), pres.tolist())))
    light.append((gear.hybrid_dynamics(m, q, dq, ddq, tau, [m.joint_names[1]]),
                  gear.hybrid_dynamics(m, L(q), L(dq), L(ddq), L(tau), [m.joint_names[1]])))
    if N is not None:
        light += [(_core.rnea_derivatives_light(md, q, dq, ddq), gear.inverse_dynamics_derivatives(m, L(q), L(dq), L(ddq))),
                  (_core.aba_derivatives_light(md, q, dq, tau), gear.forward_dynamics_derivatives(m, L(q), L(dq), L(tau)))]
    for fast, general in light:
        assert fast is not None
        fast = fast if isinstance(fast, tuple) else (fast,)
        general = general if isinstance(general, tuple) else (general,)
        assert len(fast) == len(general)
        for a, b in zip(fast, general):
            assert a.shape == b.shape and np.array_equal(a, b)
    # what the light path refuses goes the general way: a NaN, a batch of q
    # with one dq (broadcast), float32
    with pytest.raises(TypeError):             # dq is required: None is no zero here
        gear.hybrid_dynamics(m, q, None, ddq, tau, pres)
    bad = q.copy()
    bad[..., 0] = np.nan
    assert _core.crba_light(md, bad) is None
    with pytest.raises(ValueError, match="finite"):
        gear.mass_matrix(m, bad)
    if N is not None:
        assert _core.rnea_light(md, q, dq[0], None, True) is None
        assert np.array_equal(gear.bias_forces(m, q, dq[0]), gear.bias_forces(m, q, np.tile(dq[0], (N, 1))))
    assert _core.fk_light(md, q.astype(np.float32), None) is None

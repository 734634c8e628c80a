"""gear.simulate: orders of accuracy, invariants, closed loops, batches,
Zarr streaming and Dask (docs/simulation.md)."""
import os
import warnings

import numpy as np
import pytest

import gear
from gear import joints as J
from gear import mechanisms as mech


def _double_pendulum():
    m = gear.Model()
    I = gear.Inertia(1.0, [0.5, 0.0, 0.0], np.diag([0.01, 0.1, 0.1]))
    m.add_body("l1", -1, J.Revolute([0, 1, 0]), inertia=I)
    m.add_body("l2", 0, J.Revolute([0, 1, 0]), gear.SE3(p=[1.0, 0, 0]), inertia=I)
    return m


def _free_body():
    m = gear.Model(gravity=(0.0, 0.0, 0.0))
    m.add_body("b", -1, J.Free(), inertia=gear.Inertia(2.0, [0.0, 0.0, 0.0], np.diag([0.1, 0.2, 0.25])))
    return m


def _spherical_pendulum():
    m = gear.Model()
    m.add_body("b", -1, J.Spherical(), inertia=gear.Inertia(1.0, [0.0, 0.0, -0.5], np.diag([0.02, 0.03, 0.01])))
    return m


def _err(model, qa, qb):
    return float(np.abs(model.difference(qa, qb)).max())


@pytest.mark.parametrize("name,integrator,builder,q0,dq0", [
    ("rk4 double pendulum", "rk4", _double_pendulum, [0.8, -0.5], [0.3, 1.0]),
    ("rkmk4 double pendulum", "rkmk4", _double_pendulum, [0.8, -0.5], [0.3, 1.0]),
    ("rkmk4 free body", "rkmk4", _free_body, [0, 0, 0, 1, 0, 0, 0], [1.0, 3.0, -2.0, 0.3, 0.1, -0.2]),
    ("rkmk4 spherical pendulum", "rkmk4", _spherical_pendulum,
     [np.cos(0.3), np.sin(0.3), 0, 0], [0.5, 2.0, 1.5]),
])
def test_fourth_order(name, integrator, builder, q0, dq0):
    model = builder()
    q0, dq0 = np.asarray(q0, float), np.asarray(dq0, float)
    T = 1.0
    ref = gear.simulate(model, q0, dq0, T, 1e-3, integrator=integrator, record_every=1000)
    errs = []
    for dt in (0.04, 0.02, 0.01):
        tr = gear.simulate(model, q0, dq0, T, dt, integrator=integrator, record_every=1000)
        errs.append(_err(model, tr.q[-1], ref.q[-1]))
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 12.0) & (ratios < 20.0)), (name, errs, ratios)   # ~16 per halving


def test_rk4_is_not_fourth_order_on_rotations_but_rkmk4_is():
    model = _free_body()
    q0, dq0 = np.array([0, 0, 0, 1.0, 0, 0, 0]), np.array([1.0, 3.0, -2.0, 0.3, 0.1, -0.2])
    ref = gear.simulate(model, q0, dq0, 1.0, 1e-3, integrator="rkmk4", record_every=1000).q[-1]
    e = {k: [_err(model, gear.simulate(model, q0, dq0, 1.0, dt, integrator=k, record_every=1000).q[-1], ref)
             for dt in (0.02, 0.01)] for k in ("rk4", "rkmk4")}
    assert e["rk4"][0] / e["rk4"][1] < 9.0 and e["rkmk4"][0] / e["rkmk4"][1] > 12.0, e


def test_torque_free_body_keeps_momentum_and_unit_quaternions():
    model = _free_body()
    q0, dq0 = np.array([0.1, 0, 0, 1.0, 0, 0, 0]), np.array([1.0, 3.0, -2.0, 0.3, 0.1, -0.2])
    tr = gear.simulate(model, q0, dq0, 5.0, 2.5e-3, integrator="rkmk4")
    h = gear.momentum(model, tr.q, tr.dq)
    # conserved up to the method's O(dt^4) truncation error
    assert np.abs(h - h[0]).max() < 1e-8 * np.abs(h[0]).max()
    assert np.abs(np.linalg.norm(tr.q[:, 3:], axis=1) - 1.0).max() < 1e-14


def test_semi_implicit_euler_energy_stays_bounded():
    # a pendulum (constant mass matrix: semi-implicit Euler is symplectic)
    model = gear.Model()
    model.add_body("l1", -1, J.Revolute([0, 1, 0]),
                   inertia=gear.Inertia(1.0, [0.5, 0.0, 0.0], np.diag([0.01, 0.1, 0.1])))
    q0, dq0 = np.array([1.2]), np.array([0.0])
    energy = lambda tr: gear.kinetic_energy(model, tr.q, tr.dq) + gear.potential_energy(model, tr.q)  # noqa
    tr = gear.simulate(model, q0, dq0, 200.0, 1e-2, integrator="euler", record_every=5)
    dE = np.abs(energy(tr) - energy(tr)[0])
    half = len(dE) // 2
    # bounded, O(dt), and no drift: the second half is no worse than the first
    assert dE.max() < 0.05 * abs(energy(tr)[0]) and dE[half:].max() < 1.2 * dE[:half].max()
    tr2 = gear.simulate(model, q0, dq0, 200.0, 5e-3, integrator="euler", record_every=10)
    dE2 = np.abs(energy(tr2) - energy(tr2)[0])
    assert 1.6 < dE.max() / dE2.max() < 2.5


def test_implicit_euler_is_first_order_and_stable_where_explicit_euler_is_not():
    model = _double_pendulum()
    q0, dq0 = np.array([0.8, -0.5]), np.array([0.3, 1.0])
    ref = gear.simulate(model, q0, dq0, 0.5, 1e-3, integrator="rkmk4", record_every=500).q[-1]
    e = [_err(model, gear.simulate(model, q0, dq0, 0.5, dt, integrator="implicit", record_every=10 ** 6).q[-1], ref)
         for dt in (0.01, 0.005)]
    assert 1.6 < e[0] / e[1] < 2.5, e
    # a stiff soft closure (velocity errors relax at 1e4 /s): explicit Euler
    # blows up at dt = 1e-2, implicit Euler relaxes the error
    sysm, q = mech.four_bar()
    soft = sysm.with_solver("soft", stiffness=1e8, damping=1e4)
    dq = np.array([1.0, 0.5, -0.3])                      # violates A dq = 0
    A = sysm.constraint_jacobian(q)
    with pytest.raises(FloatingPointError, match="non-finite"), np.errstate(all="ignore"):
        gear.simulate(soft, q, dq, 2.0, 1e-2, integrator="euler", stabilization=None)
    tr = gear.simulate(soft, q, dq, 0.2, 1e-2, integrator="implicit", stabilization=None)
    assert np.isfinite(tr.q).all()
    # relaxed to the O(dt) level first-order time stepping leaves
    assert np.abs(sysm.constraint_jacobian(tr.q[-1]) @ tr.dq[-1]).max() < 1e-2 * np.abs(A @ dq).max()


@pytest.mark.parametrize("builder", [mech.four_bar, mech.slider_crank], ids=["four_bar", "slider_crank"])
def test_closed_loops_stay_closed_with_projection(builder):
    sysm, q = builder()
    dq = sysm.project_velocity(q, np.ones(sysm.model.nv))
    tr = gear.simulate(sysm, q, dq, 10.0, 2e-3, integrator="rk4", record_every=100)
    res = np.array([np.abs(sysm.constraint_residual(x)).max() for x in tr.q])
    assert res.max() <= 1e-8
    vel = np.array([np.abs(sysm.constraint_jacobian(x) @ v).max() for x, v in zip(tr.q, tr.dq)])
    assert vel.max() <= 1e-8
    assert tr.lam.shape == (len(tr.t), sysm.nc) and tr.stats["max_residual"] < 1e-6


def test_baumgarte_pulls_a_violated_loop_back_and_its_drift_is_bounded():
    sysm, q = mech.four_bar()
    dq = sysm.project_velocity(q, np.array([1.0, 0, 0]))
    off = sysm.model.integrate(q, np.array([0.0, 0.01, 0.0]))
    r0 = np.abs(sysm.constraint_residual(off)).max()
    tr = gear.simulate(sysm, off, dq, 0.1, 1e-3, stabilization="baumgarte", record_every=10)
    res = [np.abs(sysm.constraint_residual(x)).max() for x in tr.q]
    assert r0 > 1e-3 and res[-1] < 1e-6 * r0
    free = gear.simulate(sysm, off, dq, 0.1, 1e-3, stabilization=None, record_every=100)
    assert np.abs(sysm.constraint_residual(free.q[-1])).max() > 1e-4       # without it the error stays
    long = gear.simulate(sysm, q, dq, 2.0, 1e-3, stabilization="baumgarte", record_every=100)
    assert long.stats["max_residual"] < 1e-6


def test_shapes_time_grid_and_record_every():
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    q0, dq0 = arm.neutral(), np.zeros(arm.nv)
    tr = gear.simulate(arm, q0, dq0, 0.105, 0.01, record_every=3)
    # 11 steps (the last one 5 ms); recorded: 0, 3, 6, 9 and the final step
    assert tr.stats["steps"] == 11 and np.allclose(tr.t, [0, 0.03, 0.06, 0.09, 0.105])
    assert tr.q.shape == (5, arm.nq) and tr.dq.shape == (5, arm.nv) and tr.lam is None
    assert np.array_equal(tr.q[0], q0)
    qb = arm.random_configuration(np.random.default_rng(0), n=3)
    tb = gear.simulate(arm, qb, dq0, 0.05, 0.01)
    assert tb.q.shape == (3, 6, arm.nq) and tb.t.shape == (6,)


def test_bad_input_is_named():
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    q0, dq0 = arm.neutral(), np.zeros(arm.nv)
    with pytest.raises(ValueError, match="unknown integrator 'rk5'"):
        gear.simulate(arm, q0, dq0, 1.0, 0.01, integrator="rk5")
    with pytest.raises(ValueError, match="dt must be positive"):
        gear.simulate(arm, q0, dq0, 1.0, 0.0)
    with pytest.raises(ValueError, match="dt must be finite"):
        gear.simulate(arm, q0, dq0, 1.0, np.nan)
    with pytest.raises(ValueError, match="q0"):
        gear.simulate(arm, q0[:3], dq0, 1.0, 0.01)
    with pytest.raises(ValueError, match="dq0 has 2 states but q0 has 3"):
        gear.simulate(arm, np.tile(q0, (3, 1)), np.zeros((2, arm.nv)), 1.0, 0.01)
    with pytest.raises(TypeError, match="gear.Model, gear.ConstrainedModel or gear.MaximalModel"):
        gear.simulate("arm", q0, dq0, 1.0, 0.01)
    with pytest.raises(ValueError, match="record_every"):
        gear.simulate(arm, q0, dq0, 1.0, 0.01, record_every=0)
    with pytest.raises(ValueError, match="stabilization"):
        gear.simulate(arm, q0, dq0, 1.0, 0.01, stabilization="magic")
    with pytest.raises(ValueError, match=r"tau callable returned shape \(3,\)"):
        gear.simulate(arm, q0, dq0, 0.1, 0.01, tau=lambda t, q, dq: np.zeros(3))
    with pytest.raises(ValueError, match="tau"):
        gear.simulate(arm, q0, dq0, 0.1, 0.01, tau=np.zeros(2))


def _tau_sin(t, q, dq):
    return 0.5 * np.sin(3.0 * t) * np.ones_like(dq)


@pytest.mark.parametrize("kind", ["tree", "closed"])
def test_batch_equals_one_by_one_bit_for_bit(kind):
    rng = np.random.default_rng(5)
    if kind == "tree":
        target = gear.load_urdf(gear.data_path("arm7.urdf"))
        model = target
        q = model.random_configuration(rng, n=4)
        dq = rng.standard_normal((4, model.nv))
    else:
        target, q0 = mech.four_bar()
        model = target.model
        q = np.stack([target.assemble(model.integrate(q0, 0.05 * rng.standard_normal(3))) for _ in range(4)])
        dq = np.stack([target.project_velocity(x, rng.standard_normal(3)) for x in q])
    tb = gear.simulate(target, q, dq, 0.2, 0.01, tau=_tau_sin)
    for k in range(4):
        t1 = gear.simulate(target, q[k], dq[k], 0.2, 0.01, tau=_tau_sin)
        assert np.array_equal(t1.q, tb.q[k]) and np.array_equal(t1.dq, tb.dq[k])
        if kind == "closed":
            assert np.array_equal(t1.lam, tb.lam[k])


def test_zarr_store_equals_the_in_memory_trajectory(tmp_path):
    zarr = pytest.importorskip("zarr", reason="zarr is the optional 'campaign' extra")
    sysm, q = mech.four_bar()
    dq = sysm.project_velocity(q, np.array([1.0, 0, 0]))
    rng = np.random.default_rng(1)
    qb = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(3))) for _ in range(3)])
    mem = gear.simulate(sysm, qb, dq, 0.3, 1e-2, record_every=2)
    store = tmp_path / "run.zarr"
    disk = gear.simulate(sysm, qb, dq, 0.3, 1e-2, record_every=2, out=str(store), chunk=4)
    for k in ("t", "q", "dq", "lam"):
        assert np.array_equal(getattr(disk, k)[...], getattr(mem, k)), k
    g = zarr.open_group(str(store), mode="r")
    assert np.array_equal(g["q"][...], mem.q) and g["q"].shape == (3, len(mem.t), 3)
    a = dict(g.attrs)
    assert a["integrator"] == "rk4" and a["dt"] == 1e-2 and a["gear_version"] == gear.__version__
    assert a["model_hash"] == gear.simulation.model_hash(sysm.model) and a["solver"] == "kkt"


def test_progress_bar(capsys):
    pytest.importorskip("tqdm", reason="tqdm is the optional 'progress' extra")
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.05, 0.01, progress=True)
    err = capsys.readouterr().err
    assert "gear.simulate rk4" in err and "5/5" in err


def test_controllers():
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    q0 = arm.neutral() + 0.3
    # gravity compensation holds the arm where it is
    tr = gear.simulate(arm, q0, np.zeros(arm.nv), 0.5, 1e-3, tau=gear.controllers.GravityCompensation(arm))
    assert np.abs(tr.q[-1] - q0).max() < 1e-9
    # PD (with gravity compensation) reaches its target
    target = arm.neutral() - 0.2
    D = np.diag(gear.mass_matrix(arm, target))          # critically damped, 10 rad/s per joint
    pd = gear.controllers.PD(arm, 100.0 * D, 20.0 * D, target, gravity_compensation=True)
    tr = gear.simulate(arm, q0, np.zeros(arm.nv), 3.0, 1e-3, tau=pd, record_every=1000)
    assert np.abs(tr.q[-1] - target).max() < 1e-3
    # computed torque tracks a moving reference exactly with a perfect model
    ref = lambda t: (np.sin(t) * np.ones(arm.nv), np.cos(t) * np.ones(arm.nv), -np.sin(t) * np.ones(arm.nv))  # noqa
    ct = gear.controllers.ComputedTorque(arm, 100.0, 20.0, ref)
    tr = gear.simulate(arm, ref(0)[0], ref(0)[1], 1.0, 1e-3, tau=ct, record_every=100)
    assert np.abs(tr.q[-1] - ref(1.0)[0]).max() < 1e-8
    with pytest.raises(ValueError, match="kp"):
        gear.controllers.PD(arm, -1.0, 1.0, target)


def test_native_computed_torque_with_a_sampled_reference():
    """ComputedTorque with a SampledReference runs inside the native loop:
    the same bits as the Python loop (batch, segments), stage times counted
    like the Python loop, and it tracks the reference."""
    from gear.controllers import ComputedTorque, SampledReference

    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    tg = np.linspace(0.0, 0.6, 601)
    amp = np.linspace(0.2, 0.5, arm.nv)
    ref = SampledReference(tg, amp * np.sin(5 * tg)[:, None], 5 * amp * np.cos(5 * tg)[:, None],
                           -25 * amp * np.sin(5 * tg)[:, None])
    ctc = ComputedTorque(arm, 100.0, 20.0, ref)
    Q0 = np.stack([np.full(arm.nv, 0.02 * k) for k in range(5)])
    for integrator in ("rk4", "euler"):
        nat = gear.simulate(arm, Q0, np.zeros(arm.nv), 0.6, 1e-3, integrator=integrator, tau=ctc)
        py = gear.simulate(arm, Q0, np.zeros(arm.nv), 0.6, 1e-3, integrator=integrator, tau=ctc, native=False)
        assert nat.stats["native"] and not py.stats["native"]
        np.testing.assert_array_equal(nat.q, py.q)
        np.testing.assert_array_equal(nat.dq, py.dq)
    seg = gear.simulate(arm, Q0, np.zeros(arm.nv), 0.6, 1e-3, tau=ctc, chunk=7)     # 86 native segments
    rk = gear.simulate(arm, Q0, np.zeros(arm.nv), 0.6, 1e-3, tau=ctc)
    np.testing.assert_array_equal(seg.q, rk.q)
    # the error obeys e'' + 20 e' + 100 e = 0 (up to the interpolation): it decays
    e0 = np.abs(rk.q[:, 0] - ref(0.0)[0]).max()
    e1 = np.abs(rk.q[:, -1] - ref(0.6)[0]).max()
    assert e0 > 0.05 and e1 < 0.05 * e0
    # references of floating-base models (quaternions) run in the Python loop
    quad = gear.load_urdf(gear.data_path("quadruped.urdf"), floating_base=True)
    qn = quad.neutral()
    rq = SampledReference([0.0, 1.0], np.stack([qn, qn]), np.zeros((2, quad.nv)), np.zeros((2, quad.nv)))
    tr = gear.simulate(quad, qn, np.zeros(quad.nv), 0.01, 1e-3, tau=ComputedTorque(quad, 10.0, 5.0, rq))
    assert not tr.stats["native"] and np.abs(tr.q[-1] - qn).max() < 1e-9


def test_sampled_reference_interpolates_and_checks_its_input():
    from gear.controllers import ComputedTorque, SampledReference

    t = np.linspace(1.0, 2.0, 11)
    q = np.stack([t, 2 * t], axis=1)
    ref = SampledReference(t, q, np.ones((11, 2)), np.zeros((11, 2)))
    np.testing.assert_allclose(ref(1.55)[0], [1.55, 3.1], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(ref(0.0)[0], q[0])          # held before the grid
    np.testing.assert_array_equal(ref(5.0)[0], q[-1])         # and after it
    again = SampledReference.from_callable(lambda s: (np.array([s, 2 * s]), np.ones(2), np.zeros(2)), t)
    np.testing.assert_array_equal(again.samples, ref.samples)
    with pytest.raises(ValueError, match="uniformly"):
        SampledReference([0.0, 0.1, 0.3], np.zeros((3, 1)), np.zeros((3, 1)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="dq"):
        SampledReference(t, q, np.ones((10, 2)), np.zeros((11, 2)))
    with pytest.raises(ValueError, match="finite"):
        SampledReference([0.0, np.nan], np.zeros((2, 1)), np.zeros((2, 1)), np.zeros((2, 1)))
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    with pytest.raises(ValueError, match="nq = 7"):
        ComputedTorque(arm, 1.0, 1.0, ref)


def test_seven_dof_arm_against_an_independent_high_accuracy_integration():
    from gear.testing import zoo_dir

    pin = pytest.importorskip("pinocchio", reason="Pinocchio (optional 'reference' extra) is the independent ABA")
    from scipy.integrate import solve_ivp

    if zoo_dir() is None:
        pytest.skip("example-robot-data (optional 'reference' extra) is not installed")
    path = os.path.join(zoo_dir(), "xarm_description/urdf/xarm7.urdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gear.InertiaWarning)
        arm = gear.load_urdf(path)
    assert arm.nv == 7
    pm = pin.buildModelFromUrdf(path)
    pd = pm.createData()
    assert pm.nv == 7
    rng = np.random.default_rng(3)
    q0 = 0.5 * rng.standard_normal(7)
    dq0 = 0.3 * rng.standard_normal(7)
    # gravity compensated, plus a torque that accelerates every joint alike
    D = np.diag(gear.mass_matrix(arm, q0))
    extra = lambda t: 0.5 * np.sin(3.0 * t) * D  # noqa: E731

    def f(t, y):                        # Pinocchio's ABA and gravity: independent of gear
        tau = pin.computeGeneralizedGravity(pm, pd, y[:7]) + extra(t)
        return np.concatenate([y[7:], pin.aba(pm, pd, y[:7], y[7:], tau)])

    sol = solve_ivp(f, (0.0, 1.0), np.concatenate([q0, dq0]), method="DOP853", rtol=1e-13, atol=1e-13)
    gc = gear.controllers.GravityCompensation(arm)
    tr = gear.simulate(arm, q0, dq0, 1.0, 1e-3, integrator="rk4", record_every=1000,
                       tau=lambda t, q, dq: gc(t, q, dq) + extra(t))
    assert np.abs(tr.q[-1] - sol.y[:7, -1]).max() < 1e-7
    assert np.abs(tr.dq[-1] - sol.y[7:, -1]).max() < 1e-7


def test_dask_run_equals_the_local_run(tmp_path):
    distributed = pytest.importorskip("distributed", reason="dask.distributed is the optional 'campaign' extra")
    sysm, q = mech.four_bar()
    rng = np.random.default_rng(2)
    qb = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(3))) for _ in range(5)])
    dq = np.stack([sysm.project_velocity(x, rng.standard_normal(3)) for x in qb])
    local = gear.simulate(sysm, qb, dq, 0.2, 1e-2, tau=_tau_sin)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = gear.simulate(sysm, qb, dq, 0.2, 1e-2, tau=_tau_sin, client=client)
        stored = gear.simulate(sysm, qb, dq, 0.2, 1e-2, tau=_tau_sin, client=client,
                               out=str(tmp_path / "c.zarr"))
        # the maximal solver ships too (its CHOLMOD factors are rebuilt on the
        # workers) and runs the native loop there
        mx = sysm.with_solver("maximal")
        local_mx = gear.simulate(mx, qb, dq, 0.2, 1e-2)
        remote_mx = gear.simulate(mx, qb, dq, 0.2, 1e-2, client=client)
    assert np.array_equal(remote_mx.q, local_mx.q) and np.array_equal(remote_mx.lam, local_mx.lam)
    for k in ("t", "q", "dq", "lam"):
        assert np.array_equal(getattr(remote, k), getattr(local, k)), k
        assert np.array_equal(getattr(stored, k)[...], getattr(local, k)), k
    assert remote.stats["chunks"] == 4 and remote.stats["workers"] == 2
    assert remote.stats["overhead_per_chunk"] >= 0.0
    assert (remote.stats["chunks_run"], remote.stats["chunks_skipped"], remote.stats["chunks_retried"]) == (4, 0, 0)
    # with out= the workers wrote the store: its arrays are returned, and it was
    # split along the batch into Zarr chunks of the campaign's chunks
    assert stored.stats["chunks_run"] == stored.stats["chunks"] and stored.q.chunks[0] * stored.stats["chunks"] >= 5
    assert remote.stats["evaluations"] == local.stats["evaluations"] == stored.stats["evaluations"]
    its = local.stats["gauss_newton_per_step"]
    assert remote.stats["gauss_newton_per_step"] == pytest.approx(its, rel=1e-12)
    assert stored.stats["gauss_newton_per_step"] == pytest.approx(its, rel=1e-12)


def test_docs_simulation_doctest(tmp_path, monkeypatch):
    import doctest
    import pathlib
    import tempfile

    pytest.importorskip("zarr", reason="the page's Zarr example needs the optional 'campaign' extra")
    # the page's stores go to tempfile.mkdtemp(), as a reader's would: here
    # under pytest's own directory, not left behind in /tmp
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "simulation.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_native_loop_equals_the_python_loop():
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(8)
    q0, dq0 = arm.random_configuration(rng, n=6), rng.standard_normal((6, arm.nv))
    ctrl = [None, 0.3 * np.ones(arm.nv), gear.controllers.GravityCompensation(arm),
            gear.controllers.PD(arm, 5.0, 1.0, arm.neutral(), gravity_compensation=True)]
    for integ in ("euler", "rk4", "rkmk4"):
        for tau in ctrl:
            a = gear.simulate(arm, q0, dq0, 0.2, 1e-3, integrator=integ, tau=tau, record_every=9, chunk=4)
            b = gear.simulate(arm, q0, dq0, 0.2, 1e-3, integrator=integ, tau=tau, record_every=9, native=False)
            assert a.stats["native"] and not b.stats["native"]
            assert np.array_equal(a.t, b.t) and np.abs(a.q - b.q).max() < 1e-12 and np.abs(a.dq - b.dq).max() < 1e-10
    sysm, q = mech.slider_crank()
    qs = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(sysm.model.nv)))
                   for _ in range(5)])
    dqs = np.stack([sysm.project_velocity(x, rng.standard_normal(sysm.model.nv)) for x in qs])
    # the maximal solver's kernel runs in the loop when gear is built with CHOLMOD
    for solver in ("kkt", "projection") + (("maximal",) if gear._core.cholmod_available() else ()):
        ss = sysm.with_solver(solver)
        for stab in ("projection", None):
            a = gear.simulate(ss, qs, dqs, 0.5, 1e-3, stabilization=stab, record_every=10)
            b = gear.simulate(ss, qs, dqs, 0.5, 1e-3, stabilization=stab, record_every=10, native=False)
            assert a.stats["native"] and np.abs(a.q - b.q).max() < 1e-10 and np.abs(a.lam - b.lam).max() < 1e-8
            assert a.stats["max_residual"] == pytest.approx(b.stats["max_residual"], rel=1e-3, abs=1e-14)
            # the segmentation into native calls does not change a bit
            c = gear.simulate(ss, qs, dqs, 0.5, 1e-3, stabilization=stab, record_every=10, chunk=3)
            assert np.array_equal(a.q, c.q) and np.array_equal(a.lam, c.lam)
    # what the native loop does not take runs in Python
    assert not gear.simulate(sysm, qs, dqs, 0.05, 1e-3, tau=_tau_sin).stats["native"]
    assert not gear.simulate(sysm.with_solver("maximal", native=False), qs, dqs, 0.05, 1e-3).stats["native"]
    assert not gear.simulate(_free_body(), np.array([0, 0, 0, 1.0, 0, 0, 0]), np.ones(6), 0.05, 1e-3,
                             integrator="rkmk4").stats["native"]


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_projected_rollouts_of_a_batch_equal_single_runs(integrator):
    """A batch of projected rollouts of a closed chain gives each state's
    own run bit for bit, on one thread (each state after the other in one
    workspace, whose joint transforms the loop keeps from a projection's
    last rows for the next step's dynamics: ``Work.poses_ok``) and on two."""
    sysm, q = mech.four_bar()
    rng = np.random.default_rng(3)
    qs = np.stack([sysm.assemble(sysm.model.integrate(q, 0.2 * rng.standard_normal(3))) for _ in range(5)])
    dqs = np.stack([sysm.project_velocity(x, rng.standard_normal(3)) for x in qs])
    old = gear.get_num_threads()
    try:
        for threads in (1, 2):
            gear.set_num_threads(threads)
            a = gear.simulate(sysm, qs, dqs, 0.05, 1e-3, integrator=integrator, stabilization="projection",
                              record_every=7)
            assert a.stats["native"]
            for k in range(len(qs)):
                b = gear.simulate(sysm, qs[k], dqs[k], 0.05, 1e-3, integrator=integrator,
                                  stabilization="projection", record_every=7)
                assert np.array_equal(a.q[k], b.q) and np.array_equal(a.dq[k], b.dq)
                assert np.array_equal(a.lam[k], b.lam)
    finally:
        gear.set_num_threads(old)


def test_driving_a_closed_chain_by_a_prescribed_motion_records_the_actuator_torque():
    """Kim Sec. 3.3: the crank turns at a constant rate, the loop follows,
    and the recorded crank torque is the one inverse dynamics gives and
    the one that balances the mechanism's power."""
    sysm, q = mech.four_bar()
    model = sysm.model
    w, c0 = 2.0, q[0]
    motion = lambda t: (c0 + w * t, w, 0.0)  # noqa: E731
    dq = sysm.project_velocity(q, np.array([w, 0, 0]), locked=["crank"])
    tr = gear.simulate(sysm, q, dq, 1.0, 5e-4, prescribed={"crank": motion})
    assert tr.tau.shape == (len(tr.t), 3) and not tr.stats["native"]
    assert np.abs(tr.q[:, 0] - (c0 + w * tr.t)).max() < 1e-14 and np.abs(tr.dq[:, 0] - w).max() < 1e-14
    assert tr.stats["max_residual"] < 1e-8
    for k in range(0, len(tr.t), 200):
        h = sysm.hybrid_dynamics(tr.q[k], tr.dq[k], np.zeros(3), np.zeros(3), ["crank"])
        inv = sysm.inverse_dynamics(tr.q[k], tr.dq[k], h.ddq, actuated=["crank"])
        assert abs(inv.tau[0] - tr.tau[k, 0]) < 1e-10 * max(1.0, abs(inv.tau[0]))
    E = gear.kinetic_energy(model, tr.q, tr.dq) + gear.potential_energy(model, tr.q)
    power = tr.tau[:, 0] * w
    assert np.abs(np.gradient(E, tr.t)[2:-2] - power[2:-2]).max() < 1e-4 * np.abs(power).max()
    with pytest.raises(KeyError, match="prescribed: no joint named 'nope'"):
        gear.simulate(sysm, q, dq, 0.1, 1e-3, prescribed={"nope": motion})
    with pytest.raises(ValueError, match="implicit"):
        gear.simulate(sysm, q, dq, 0.1, 1e-3, integrator="implicit", prescribed={"crank": motion})


def test_adaptive_integration_through_scipy():
    # a spherical pendulum (quaternions) and a double pendulum: DOP853 at a
    # coarse output grid matches a fine rkmk4 run
    for model, q0, dq0 in ((_spherical_pendulum(), np.array([np.cos(0.3), np.sin(0.3), 0, 0]), np.array([0.5, 2.0, 1.5])),
                           (_double_pendulum(), np.array([0.8, -0.5]), np.array([0.3, 1.0]))):
        ref = gear.simulate(model, q0, dq0, 1.0, 1e-3, integrator="rkmk4", record_every=100)
        ad = gear.simulate(model, q0, dq0, 1.0, 0.1, integrator="dop853", rtol=1e-12, atol=1e-12)
        assert ad.q.shape == ref.q.shape and not ad.stats["native"]
        assert np.abs(model.difference(ad.q, ref.q)).max() < 1e-9
    # closed chains: projection at every output step keeps the loop closed
    sysm, q = mech.four_bar()
    dq = sysm.project_velocity(q, np.array([1.0, 0, 0]))
    tr = gear.simulate(sysm, q, dq, 1.0, 0.05, integrator="rk45", rtol=1e-8, atol=1e-10)
    assert max(np.abs(sysm.constraint_residual(x)).max() for x in tr.q) < 1e-10


@pytest.mark.parametrize("native", [True, False])
def test_a_rollout_that_blows_up_says_which_and_when(native):
    """A state that becomes non-finite: FloatingPointError naming the
    rollout of a batch (not a "batch row" of a single run) and the time,
    with advice simulate accepts."""
    m = gear.load_urdf(gear.data_path("arm7.urdf"))
    fast = np.full(m.nv, 1e200)
    with pytest.raises(FloatingPointError, match=r"^the state became non-finite .*t = 0.*integrator='implicit'"):
        gear.simulate(m, m.neutral(), fast, 0.05, 1e-3, native=native)
    Q = np.stack([m.neutral()] * 3)
    DQ = np.zeros((3, m.nv))
    DQ[1] = fast
    match = "rollout 1 \\(of 3\\)" if native else "non-finite in step 1"
    with pytest.raises(FloatingPointError, match=match) as info:
        gear.simulate(m, Q, DQ, 0.05, 1e-3, native=native)
    assert "batch row" not in str(info.value)


def test_a_model_whose_file_has_closures_warns_that_its_tree_alone_is_simulated():
    """A Model from a file with loop closures or mimic joints keeps them in
    ``model.loop_closures``; ``gear.simulate(model)`` runs the tree alone
    and says so (``gear.MaximalModel(model)`` holds them, so a comparison
    of the two would otherwise compare two mechanisms); the
    ConstrainedModel runs without the warning."""
    import warnings

    model = gear.load_mjcf(gear.data_path("fourbar.xml"))
    assert model.loop_closures
    q = model.neutral()
    with pytest.warns(UserWarning, match=r"carries 1 loop closures .* gear.ConstrainedModel\(model\)"):
        gear.simulate(model, q, np.zeros(model.nv), 0.002, 1e-3, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sysm = gear.ConstrainedModel(model)
        gear.simulate(sysm, sysm.assemble(q), np.zeros(model.nv), 0.002, 1e-3, progress=False)
        tree = gear.load_urdf(gear.data_path("arm7.urdf"))
        gear.simulate(tree, tree.neutral(), np.zeros(tree.nv), 0.002, 1e-3, progress=False)


def test_the_python_projection_of_a_state_does_not_depend_on_its_batch():
    """``_project`` (the Python loop's projection, and the maximal runs'
    joint-space start): a state that holds its rows takes no more steps
    while another state of its batch still converges, so each state's
    bits are those of its own projection."""
    from gear.simulation.integrators import _project

    sysm, q0 = mech.four_bar()
    rng = np.random.default_rng(1)
    near = q0 + np.array([4e-13, 0.0, 0.0])        # within the tolerance (1e-12), above rounding
    assert 1e-14 < np.abs(sysm.constraint_residual(near)).max() <= 1e-12
    far = sysm.model.integrate(q0, 0.3 * rng.standard_normal(3))
    Q = np.stack([near, far])
    V = rng.standard_normal((2, 3))
    qb, vb, _, _ = _project(sysm, Q, V)
    for k in range(2):
        qk, vk, _, _ = _project(sysm, Q[k:k + 1], V[k:k + 1])
        assert np.array_equal(qb[k], qk[0]) and np.array_equal(vb[k], vk[0])
    assert np.abs(sysm.constraint_residual(qb[1])).max() <= 1e-12


def test_a_closed_chain_with_a_massless_joint_names_the_joint():
    """example-robot-data's romeo has massless finger links: a closed-chain
    run's mass matrix is singular.  The error names the joint (from the
    articulated-body algorithm), as the tree's does, instead of only saying
    that the mass matrix is not positive definite."""
    sysm, q0 = mech.four_bar()
    m = sysm.model
    m.add_body("ghost", m.body_names[0], J.Revolute([0, 1, 0]), gear.SE3(p=[0.1, 0, 0]), inertia=None,
               joint_name="ghost_joint")
    sysm = gear.ConstrainedModel(m, sysm.constraints)
    q = np.r_[q0, 0.0]
    with pytest.raises(gear.SingularInertiaError,
                       match=r"not positive definite between t = 0 and t = 0.002: .*'ghost_joint'"):
        gear.simulate(sysm, q, np.zeros(4), 0.002, 1e-3, integrator="euler", progress=False)


def test_projection_after_a_euler_step_takes_one_iteration_natively():
    """After each Euler step the native loop's projection reaches the rows
    (1e-12) in one iteration on every route -- dense, ABA, the projection
    solver and the sparse route (n four-bars): its first iteration takes
    the rows' second-order term where Gauss-Newton alone leaves more than
    the tolerance (``_manifold.gauss_newton_step``).  The Python loop's
    plain Gauss-Newton needs a second iteration on about 30 % of the
    bundled four-bar's steps, to the same states; both count their
    iterations in ``stats["gauss_newton_per_step"]``.  Their states agree
    to the tolerance at every step size."""
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    sysm = gear.ConstrainedModel(fb)
    rng = np.random.default_rng(1)
    q = sysm.assemble(fb.neutral())
    qs = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(3))) for _ in range(32)])
    dqs = np.stack([sysm.project_velocity(x, rng.standard_normal(3)) for x in qs])
    kw = dict(integrator="euler", stabilization="projection", record_every=10, progress=False)
    py = gear.simulate(sysm, qs, dqs, 0.2, 1e-3, native=False, **kw)
    assert py.stats["gauss_newton_per_step"] > 1.2
    for ss in (sysm, sysm.with_solver("kkt", route="aba"), sysm.with_solver("projection")):
        a = gear.simulate(ss, qs, dqs, 0.2, 1e-3, **kw)
        assert a.stats["native"]
        assert 0.9 < a.stats["gauss_newton_per_step"] <= 1.0, ss.solver
        assert np.abs(a.q - py.q).max() < 1e-10
        assert max(np.abs(sysm.constraint_residual(x)).max() for x in a.q.reshape(-1, fb.nq)) <= 1e-12
    # at large steps (|g| up to 1e-3 after a step) the second-order step's
    # end point would leave Gauss-Newton's by 1e-6 a step: there the native
    # loop stays with Gauss-Newton, and its states with the Python loop's
    for dt in (5e-3, 2e-2):
        py = gear.simulate(sysm, qs[:8], 3 * dqs[:8], 0.3, dt, native=False, **kw)
        a = gear.simulate(sysm, qs[:8], 3 * dqs[:8], 0.3, dt, **kw)
        assert np.abs(a.q - py.q).max() < 1e-10, dt
        assert 1.0 < a.stats["gauss_newton_per_step"] < py.stats["gauss_newton_per_step"]
    # the rows' curvature through every kind of joint on a loop: prismatic
    # (slider-crank), spherical (RSSR), universal and free (Stewart)
    for builder in (mech.slider_crank, mech.rssr, mech.stewart):
        ms, m0 = builder()
        qm = np.stack([ms.assemble(ms.model.integrate(m0, 0.02 * rng.standard_normal(ms.model.nv)))
                       for _ in range(8)])
        vm = np.stack([ms.project_velocity(x, rng.standard_normal(ms.model.nv)) for x in qm])
        a = gear.simulate(ms, qm, vm, 0.2, 1e-3, **kw)
        b = gear.simulate(ms, qm, vm, 0.2, 1e-3, native=False, **kw)
        assert a.stats["native"] and a.stats["gauss_newton_per_step"] <= 1.0, builder.__name__
        assert b.stats["gauss_newton_per_step"] > 1.0, builder.__name__     # (a case that needs it)
        assert np.abs(a.q - b.q).max() < 1e-10, builder.__name__
    nf, q0 = mech.n_four_bar(5, tree="ground")
    dq0 = nf.project_velocity(q0, rng.standard_normal(nf.model.nv))
    for route in ("dense", "sparse"):
        a = gear.simulate(nf.with_solver("kkt", route=route), q0, dq0, 0.1, 1e-3, **kw)
        assert a.stats["native"] and a.stats["gauss_newton_per_step"] <= 1.0, route

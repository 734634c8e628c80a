"""gear.simulate on a gear.MaximalModel: every body's pose and twist as
the state (Ruan, "Articulated rigid body systems", Sec. 3).

Oracles: the reduced simulation of the same mechanism, measured orders
of convergence, energy balance, batches against single runs, and the
row drift each stabilisation allows."""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech


@pytest.fixture(scope="module")
def four_bar():
    sys, q0 = mech.four_bar()
    dq0 = sys.project_velocity(q0, [3.0, 0, 0], locked=["crank"])
    return sys, q0, dq0, gear.MaximalModel(sys)


@pytest.mark.parametrize("integrator, order", [("euler", 1), ("rk4", 4), ("rkmk4", 4)])
def test_orders_of_convergence(four_bar, integrator, order):
    sys, q0, dq0, mx = four_bar
    T = 0.25
    ref = gear.simulate(mx, q0, dq0, T, T / 512, integrator="rkmk4", stabilization=None)
    errs = [np.abs(gear.simulate(mx, q0, dq0, T, T / n, integrator=integrator, stabilization=None).poses[-1]
                   - ref.poses[-1]).max() for n in (16, 32, 64)]
    rates = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(rates - order) < 0.3), (errs, rates)


def test_the_same_motion_as_reduced_coordinates(four_bar):
    sys, q0, dq0, mx = four_bar
    red = gear.simulate(sys, q0, dq0, 0.5, 1e-3, integrator="rkmk4")
    mxr = gear.simulate(mx, q0, dq0, 0.5, 1e-3, integrator="rkmk4")
    assert mxr.q.shape == red.q.shape and mxr.dq.shape == red.dq.shape
    np.testing.assert_allclose(mxr.q, red.q, atol=1e-7)
    np.testing.assert_allclose(mxr.dq, red.dq, atol=1e-6)
    np.testing.assert_allclose(mxr.t, red.t)
    poses, twists = mx.state(red.q[-1], red.dq[-1])
    np.testing.assert_allclose(mxr.poses[-1], poses, atol=1e-7)


def test_drift_shown_bounded_and_removed(four_bar):
    """No stabilisation: the rows drift (Euler's first-order error opens the
    joints); Baumgarte keeps the drift bounded; projection at rounding."""
    sys, q0, dq0, mx = four_bar
    runs = {s: gear.simulate(mx, q0, dq0, 1.0, 1e-3, integrator="euler", stabilization=s)
            for s in (None, "baumgarte", "projection")}
    free = runs[None].joint_error
    assert free[-1] > 1e-3 and free[-1] > 10 * free[len(free) // 10]       # grows
    bg = runs["baumgarte"].joint_error
    # bounded: it follows the configuration (each step removes beta of it)
    # instead of accumulating
    assert bg.max() < 0.1 * free.max() and bg[-1] < 0.01 * free[-1]
    assert runs["projection"].joint_error.max() <= 1e-10
    assert runs["projection"].stats["max_joint_error"] == runs["projection"].joint_error.max()


def test_energy_is_conserved_by_rkmk4_with_projection(four_bar):
    sys, q0, dq0, mx = four_bar
    tr = gear.simulate(mx, q0, dq0, 1.0, 1e-3, integrator="rkmk4", stabilization="projection", record_every=10)
    E = mx.energy(tr.poses, tr.twists)
    assert np.abs(E - E[0]).max() < 1e-7 * abs(E[0])
    eu = gear.simulate(mx, q0, dq0, 1.0, 1e-3, integrator="euler", stabilization="projection", record_every=10)
    assert np.abs(mx.energy(eu.poses, eu.twists) - E[0]).max() > 1e3 * np.abs(E - E[0]).max()


def test_batches_equal_single_runs(four_bar):
    sys, q0, dq0, mx = four_bar
    rng = np.random.default_rng(4)
    dqs = np.stack([sys.project_velocity(q0, rng.standard_normal(3)) for _ in range(3)])
    Q = np.broadcast_to(q0, (3, 3))
    taus = rng.standard_normal((3, 3))
    for integ in ("euler", "rkmk4"):
        batch = gear.simulate(mx, Q, dqs, 0.05, 1e-3, integrator=integ, tau=taus)
        assert batch.poses.shape == (3, 51, 3, 4, 4) and batch.joint_error.shape == (3, 51)
        for n in range(3):
            one = gear.simulate(mx, q0, dqs[n], 0.05, 1e-3, integrator=integ, tau=taus[n])
            np.testing.assert_array_equal(one.poses, batch.poses[n])       # bit for bit
            np.testing.assert_array_equal(one.q, batch.q[n])


def test_a_tree_in_maximal_coordinates(four_bar):
    m = gear.load_urdf(gear.data_path("arm7.urdf"))
    mx = gear.MaximalModel(m)
    rng = np.random.default_rng(0)
    q0, dq0 = m.random_configuration(rng), rng.standard_normal(m.nv)
    red = gear.simulate(m, q0, dq0, 0.1, 1e-3, integrator="rkmk4")
    mxr = gear.simulate(mx, q0, dq0, 0.1, 1e-3, integrator="rkmk4", stabilization="projection")
    np.testing.assert_allclose(mxr.q, red.q, atol=1e-8)


def test_poses0_and_twists0_start_a_run(four_bar):
    sys, q0, dq0, mx = four_bar
    P, V = mx.state(q0, dq0)
    a = gear.simulate(mx, None, None, 0.02, 1e-3, integrator="euler", poses0=P, twists0=V)
    b = gear.simulate(mx, q0, dq0, 0.02, 1e-3, integrator="euler")
    np.testing.assert_allclose(a.poses, b.poses, atol=1e-14)


def test_compliant_rows_converge_to_hard_ones_with_the_implicit_step(four_bar):
    sys, q0, dq0, mx = four_bar
    # k -> inf with c = 2 sqrt(k): ERP = h k / (h k + c) -> 1, CFM -> 0, i.e.
    # hard rows with velocity-level Baumgarte, beta = 1
    hard = gear.simulate(mx, q0, dq0, 0.2, 1e-3, integrator="euler", stabilization="baumgarte",
                         baumgarte_gains=1.0)
    errs = []
    for k in (1e5, 1e7, 1e9):
        soft = gear.MaximalModel(sys, stiffness=k, damping=2.0 * np.sqrt(k))
        tr = gear.simulate(soft, q0, dq0, 0.2, 1e-3, integrator="implicit")
        assert tr.stats["compliant"] and np.isfinite(tr.poses).all()
        errs.append(np.abs(tr.poses[-1] - hard.poses[-1]).max())
    assert errs[0] > errs[1] > errs[2] and errs[2] < 1e-6, errs
    # the explicit step with the same stiff rows blows up; the implicit one does not
    stiff = gear.MaximalModel(sys, stiffness=1e9, damping=0.0)
    with pytest.raises(FloatingPointError, match="integrator='implicit'"):
        gear.simulate(stiff, q0, dq0, 0.2, 1e-3, integrator="euler")


def test_bad_arguments(four_bar):
    sys, q0, dq0, mx = four_bar
    with pytest.raises(ValueError, match="unknown integrator 'dop853' for a MaximalModel"):
        gear.simulate(mx, q0, dq0, 0.1, 1e-3, integrator="dop853")
    with pytest.raises(TypeError, match="not a callable"):
        gear.simulate(mx, q0, dq0, 0.1, 1e-3, tau=lambda t, q, v: 0 * v)
    with pytest.raises(NotImplementedError, match="prescribed="):
        gear.simulate(mx, q0, dq0, 0.1, 1e-3, prescribed={"crank": lambda t: (0.0, 0.0, 0.0)})
    with pytest.raises(ValueError, match="dt and t_final must be positive"):
        gear.simulate(mx, q0, dq0, 0.1, -1e-3)
    with pytest.raises(TypeError, match="poses0"):
        gear.simulate(sys, q0, dq0, 0.1, 1e-3, poses0=mx.state(q0)[0])
    with pytest.raises(ValueError, match="tau must have shape"):
        gear.simulate(mx, q0, dq0, 0.1, 1e-3, tau=np.zeros(5))


@pytest.mark.parametrize("record_every, t_final", [(1, 0.05), (3, 0.05), (7, 0.0505), (100, 0.0305)])
def test_the_native_loop_records_what_the_python_loop_records(four_bar, monkeypatch, record_every, t_final):
    """Euler with hard rows runs natively in segments (the last step
    shortened through the step function); the frames, times and row forces
    are those of the step-by-step loop (the same arithmetic up to the
    solve's rounding)."""
    import gear.simulation.maximal as SM

    sys, q0, dq0, mx = four_bar
    for stab in (None, "baumgarte", "projection"):
        nat = gear.simulate(mx, q0, dq0, t_final, 1e-3, integrator="euler", stabilization=stab,
                            record_every=record_every)
        assert nat.stats["native"] and nat.stats["route"] == "tree"
        with monkeypatch.context() as mp:
            mp.setattr(SM, "why_not", lambda mx, integrator: "forced")
            py = gear.simulate(mx, q0, dq0, t_final, 1e-3, integrator="euler", stabilization=stab,
                               record_every=record_every)
        assert not py.stats["native"] and py.stats["route"] == "numpy"
        np.testing.assert_array_equal(nat.t, py.t)
        np.testing.assert_allclose(nat.poses, py.poses, atol=1e-10)
        np.testing.assert_allclose(nat.twists, py.twists, atol=1e-8)
        np.testing.assert_allclose(nat.joint_error, py.joint_error, atol=1e-10)


def test_read_back_angles_keep_their_turns_on_sparse_frames(four_bar):
    """Frames far apart (a crank turning several times between them) keep
    their whole turns: each frame's angle continues the previous one by
    the trapezoid of their rates."""
    sys, q0, dq0, mx = four_bar
    fast = sys.project_velocity(q0, [12.0, 0, 0], locked=["crank"])
    dense = gear.simulate(mx, q0, fast, 1.0, 1e-3, integrator="euler")
    assert np.ptp(dense.q[:, 0]) > 4 * np.pi                  # it really turns
    for every in (7, 37, 120, 300):
        sparse = gear.simulate(mx, q0, fast, 1.0, 1e-3, integrator="euler", record_every=every)
        np.testing.assert_allclose(sparse.q, dense.q[[int(round(t / 1e-3)) for t in sparse.t]], atol=1e-9)


def test_angle_continuation_equals_the_frame_by_frame_rule():
    """The read-back angles' whole turns, a running sum of the turns between
    frames, equal the frame-by-frame rule (each frame takes the turn
    nearest to the previous frame advanced by the trapezoid of the rates),
    bit for bit, on fast spins with uneven frame times."""
    from gear.simulation.maximal import _continue_angles

    rng = np.random.default_rng(3)
    N, T, k = 4, 300, 3
    t = np.cumsum(rng.uniform(0.001, 0.05, T))
    w = 40.0 * rng.standard_normal((N, T, k))
    true = np.cumsum(0.5 * np.diff(t, prepend=t[0])[None, :, None] * (w + np.roll(w, 1, axis=1)), axis=1)
    th = np.angle(np.exp(1j * true))                       # wrapped to (-pi, pi]
    ref = th.copy()
    for j in range(1, T):
        pred = ref[:, j - 1] + 0.5 * (t[j] - t[j - 1]) * (w[:, j - 1] + w[:, j])
        ref[:, j] = th[:, j] + 2.0 * np.pi * np.round((pred - th[:, j]) / (2.0 * np.pi))
    out = _continue_angles(th, w, t)
    assert np.array_equal(out, ref)
    assert np.abs(np.diff(out, axis=1)).max() > np.pi              # turns were added
    assert np.array_equal(_continue_angles(th[:, :1], w[:, :1], t[:1]), th[:, :1])


@pytest.mark.parametrize("seed", range(3))
def test_native_read_back_equals_to_reduced(seed):
    """The runs' native read-back (``MaximalModel._readback``) gives
    ``to_reduced``'s joint coordinates and rates on rigid states whose
    joints have drifted, for every joint kind."""
    from gear.spatial.stacks import exp_so3_rows
    from gear.testing import random_tree

    rng = np.random.default_rng(seed)
    m = random_tree(rng, nbodies=12)
    assert {j.kind for j in m.joints} == set(range(9))
    mx = gear.MaximalModel(m)
    P, V = mx.state(m.random_configuration(rng, n=6), rng.standard_normal((6, m.nv)))
    P = P.copy()
    for b in range(m.nbodies):                         # move every body off its joint, rigidly
        P[:, b, :3, :3] = P[:, b, :3, :3] @ exp_so3_rows(0.05 * rng.standard_normal((6, 3)))
        P[:, b, :3, 3] += 0.01 * rng.standard_normal((6, 3))
    V = V + 0.1 * rng.standard_normal(V.shape)
    q, dq = mx.to_reduced(P, V)
    qn, dqn = mx._readback(np.ascontiguousarray(P), np.ascontiguousarray(V))
    assert np.abs(qn - q).max() < 1e-13 and np.abs(dqn - dq).max() < 1e-12


@pytest.mark.parametrize("make", [mech.four_bar, lambda: mech.n_four_bar(3), mech.stewart])
def test_an_open_start_is_closed_in_joint_space_as_the_reduced_runs_close_theirs(make):
    """Joint coordinates that leave the loops open by tenths of a radian (a
    random configuration; a URDF's mimic joints left unset: PR2's started
    0.69 off).  With projection, the maximal run closes them in joint space
    before building the poses, as the reduced run does: frame 0 holds every
    row to rounding, and both formulations start from the same state."""
    sys, q0 = make()
    m = sys.model
    rng = np.random.default_rng(2)
    q = m.integrate(q0, 0.3 * rng.standard_normal(m.nv))
    dq = rng.standard_normal(m.nv)
    assert np.abs(sys.constraint_residual(q)).max() > 1e-2
    mx = gear.MaximalModel(sys)
    a = gear.simulate(mx, q, dq, 0.003, 1e-3, integrator="euler", progress=False)
    b = gear.simulate(sys, q, dq, 0.003, 1e-3, integrator="euler", progress=False)
    assert a.joint_error[0] <= 1e-12 and np.abs(mx.joint_residual(a.poses[0])).max() <= 1e-12
    np.testing.assert_allclose(a.q[0], b.q[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.dq[0], b.dq[0], rtol=0, atol=1e-9 * np.abs(b.dq[0]).max())


def test_poses_that_cannot_be_projected_are_reported(four_bar, monkeypatch):
    """Poses far off their rows that the start's Gauss-Newton steps cannot
    bring back (here: one step allowed) give a RuntimeWarning that says
    what to do, not a run that silently starts off its joints."""
    import gear.simulation.maximal as sm

    sys, q0, _, mx = four_bar
    P, V = mx.state(sys.model.integrate(q0, np.array([0.3, -0.2, 0.25])))
    monkeypatch.setattr(sm, "START_ITER", 1)
    with pytest.warns(RuntimeWarning, match="could not be projected onto their rows"):
        gear.simulate(mx, None, None, 0.002, 1e-3, integrator="euler", poses0=P, twists0=V, progress=False)
    monkeypatch.setattr(sm, "START_ITER", 50)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = gear.simulate(mx, None, None, 0.002, 1e-3, integrator="euler", poses0=P, twists0=V, progress=False)
    assert tr.joint_error[0] <= 1e-12


@pytest.mark.parametrize("route", ["dense", "sparse"])
def test_an_open_start_is_closed_as_the_reduced_run_closes_it(monkeypatch, route):
    """An open start's positions are closed in joint space, its velocities
    go onto the rows by the maximal projection of the twists (the same
    correction in the mass metric, linear in the bodies), and the run
    starts where the reduced run starts.  Neither may take the cubic path:
    the joint-space velocity projection forms M and K = A M^-1 A^T dense
    (11 s at N = 1000 on the N-four-bar's chain tree, where the steps took
    50 ms); where the system takes the kkt solver's sparse route, the
    positions are closed by the reduced run's own native projection (its
    sparse solves), not by the dense pseudo-inverse of A (11 s at N = 1000
    on the ground tree)."""
    import gear.algorithms.dynamics as dyn
    import gear.simulation.maximal as sm

    if route == "dense":
        sys, q0 = mech.n_four_bar(5)
        off, tol_q, patched = 0.2, 1e-10, (dyn, "mass_matrix")
    else:
        sys, q0 = mech.n_four_bar(10, tree="ground")
        sys = sys.with_solver("kkt", route="sparse")
        off, tol_q, patched = 0.05, 1e-12, (sm, "_project")
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(4)
    q = sys.model.integrate(q0, off * rng.standard_normal(sys.model.nv))
    dq = rng.standard_normal(sys.model.nv)
    b = gear.simulate(sys, q, dq, 0.002, 1e-3, integrator="euler", progress=False)

    def cubic(*args, **kw):
        raise AssertionError(f"the maximal run's start called {patched[1]}")

    monkeypatch.setattr(*patched, cubic)
    a = gear.simulate(mx, q, dq, 0.002, 1e-3, integrator="euler", progress=False)
    assert a.joint_error[0] <= 1e-12
    np.testing.assert_allclose(a.q[0], b.q[0], rtol=0, atol=tol_q)
    np.testing.assert_allclose(a.dq[0], b.dq[0], rtol=0, atol=1e-9 * np.abs(b.dq[0]).max())

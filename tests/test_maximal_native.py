"""The native maximal steps (gear.maximal.native): the velocity-level
Euler step (Ruan, "Articulated rigid body systems", eq. 12) and the
acceleration-level rk4 and rkmk4 steps, against the NumPy steps
(gear.maximal.stepping.step).

Tolerances.  Poses agree to 1e-13.  Twists: where ``K = J M^{-1} J^T`` is
regular (RSSR, Stewart platform, trees) to 1e-12 relative; where the rows
are redundant (planar closed chains built of revolute joints in space)
``K`` is singular and both routes regularise it by 1e-12 of its largest
entry and refine, but solve it differently (LAPACK's inverse, Cholesky), so
their twists agree to the conditioning of ``K`` on its range (~1e5 here):
1e-10 relative.  Row forces are compared where ``K`` is regular (elsewhere
their part in ``K``'s null space is arbitrary), to 1e-11 relative.

Redundant chains start on their rows (Euler's drift moves them off within
the plane): a random twist of their bodies out of the plane makes ``K``
regular but with an eigenvalue of the order of the drift squared, and the
step itself then amplifies rounding (both routes agree only to ~1e-8 there,
each as far from the exact solve); the regular systems start 1e-3 off their
rows in every direction.

Routes.  These tests hold the kernel's factorisation of ``K`` (the
``"schur"`` route) to the NumPy step, which factorises ``K`` too: with
redundant rows off their manifold no exact solution exists, and two
factorisations of one regularised ``K`` agree there.  The tree-ordered
route, the default, solves its edges' rows exactly and leaves dependent
loop rows out, a different (equally valid) answer where the rows are
inconsistent; tests/test_maximal_tree_step.py holds it to this route
wherever the answer is unique.
"""
import numpy as np
import pytest

import gear
import gear.testing
from gear import mechanisms as mech
from gear.maximal import native, stepping
from gear.spatial.stacks import exp_se3_rows

H = 1e-3

MECHS = {
    "four_bar": mech.four_bar,
    "slider_crank": mech.slider_crank,
    "five_bar": mech.five_bar,
    "stewart": mech.stewart,
    "n_four_bar_3": lambda: mech.n_four_bar(3),
    "rssr": mech.rssr,
    "bricard": mech.bricard,
}
REGULAR = {"stewart", "rssr"}


@pytest.fixture(autouse=True)
def schur_route(monkeypatch):
    """Every model's native plan factorises K (see the module docstring)."""
    build = native.build
    monkeypatch.setattr(native, "build", lambda mx, route="schur": build(mx, route))


def _batch(mx, sys, q0, N, rng, drift=0.0):
    """N states near q0 (velocities on the rows), moved off the rows by
    ``drift`` so that Baumgarte has something to remove."""
    m = sys.model
    P, V = [], []
    for _ in range(N):
        dq = sys.project_velocity(q0, rng.standard_normal(m.nv))
        p, v = mx.state(q0, dq)
        P.append(p @ exp_se3_rows(drift * rng.standard_normal((mx.nbodies, 6))))
        V.append(v)
    return np.array(P), np.array(V)


def _compare(mx, P, V, tau, f_ext, stab, steps, rtol_v, lam_too, integrator="euler"):
    Pa, Va, Pb, Vb = P, V, P, V
    for _ in range(steps):
        Pa, Va, la = stepping.step(mx, Pa, Va, H, integrator, tau, f_ext, stab)
        out = native.native_step(mx, Pb, Vb, H, tau, f_ext, stab, integrator=integrator)
        assert out is not None, native.why_not(mx, integrator)
        Pb, Vb, lb = out
        assert Pb.shape == Pa.shape and Vb.shape == Va.shape and lb.shape == la.shape
        np.testing.assert_allclose(Pb, Pa, rtol=0, atol=1e-13)
        np.testing.assert_allclose(Vb, Va, rtol=0, atol=rtol_v * np.abs(Va).max())
        if lam_too:
            np.testing.assert_allclose(lb, la, rtol=0, atol=1e-11 * max(1.0, np.abs(la).max(initial=0.0)))
    return Pb, Vb


@pytest.mark.parametrize("stab", [None, "baumgarte", "projection"])
@pytest.mark.parametrize("name", list(MECHS))
def test_equals_the_numpy_step_on_closed_chains(name, stab):
    sys, q0 = MECHS[name]()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(7)
    rtol_v = 1e-12 if name in REGULAR else 1e-10
    for N in (1, 4):
        P, V = _batch(mx, sys, q0, N, rng, 1e-3 if name in REGULAR else 0.0)
        tau = rng.standard_normal((N, sys.model.nv))
        f_ext = 0.3 * rng.standard_normal((N, mx.nbodies, 6))
        _compare(mx, P, V, None, None, stab, 5, rtol_v, name in REGULAR)
        _compare(mx, P, V, tau, f_ext, stab, 5, rtol_v, name in REGULAR)


@pytest.mark.parametrize("seed", range(6))
def test_equals_the_numpy_step_on_random_trees_of_every_joint_kind(seed):
    rng = np.random.default_rng(seed)
    m = gear.testing.random_tree(rng, nbodies=10)
    mx = gear.MaximalModel(m)
    kinds = {type(j).__name__ for j in m.joints}
    assert len(kinds) >= 8                       # helical (helix rows), universal, planar among them
    _compare_random_states(mx, rng, 3, 4)


def _compare_random_states(mx, rng, N, steps, integrator="euler"):
    """N random states of ``mx``'s tree, 1e-3 off its rows, with torques
    and external wrenches: native steps against NumPy's, without and with
    Baumgarte."""
    m = mx.model
    q = np.array([m.random_configuration(rng) for _ in range(N)])
    P, V = mx.state(q, rng.standard_normal((N, m.nv)))
    P = P @ exp_se3_rows(1e-3 * rng.standard_normal((N, mx.nbodies, 6)))
    tau = rng.standard_normal((N, m.nv))
    f_ext = rng.standard_normal((N, mx.nbodies, 6))
    for stab in (None, "baumgarte"):
        _compare(mx, P, V, tau, f_ext, stab, steps, 1e-12, True, integrator)


def _with_rods(mx, rods):
    """``mx`` with distance rows added to its table: ``(body_a, p_a, body_b,
    p_b)`` each, the length taken at the model's neutral pose.
    (MaximalModel cannot build a "distance" LoopClosure today: its row
    table is given ``None`` for the row's axis index.)"""
    from gear.maximal import rows as R

    t = mx.rows
    name = {v: k for k, v in R._TYPES.items()}
    table = R.RowTable()
    for r in range(t.m):
        table.add(t.owner[r], name[t.types[r]], t.ia[r], t.ib[r], t.RA[r], t.pA[r], t.RB[r], t.pB[r], t.i[r], t.j[r],
                  t.offset[r], t.pitch[r])
    P0, _ = mx.state(mx.model.neutral())
    for k, (a, pa, b, pb) in enumerate(rods):
        wa = pa if a < 0 else P0[a, :3, :3] @ pa + P0[a, :3, 3]
        wb = pb if b < 0 else P0[b, :3, :3] @ pb + P0[b, :3, 3]
        table.add(f"loop:rod{k}", "dist", a, b, np.eye(3), pa, np.eye(3), pb, 0, 0, float(np.linalg.norm(wb - wa)))
    mx.rows = table.freeze()
    mx.nrows, mx.row_names = table.m, list(table.owner)
    return mx


@pytest.mark.parametrize("seed", range(3))
def test_distance_rows_equal_the_numpy_step(seed):
    rng = np.random.default_rng(seed)
    m = gear.testing.random_tree(rng, nbodies=5)
    mx = _with_rods(gear.MaximalModel(m), [(4, np.array([0.1, 0.0, 0.05]), -1, np.array([0.3, 0.2, -0.4])),
                                           (1, np.array([0.0, 0.1, 0.0]), 3, np.array([0.05, 0.0, 0.1]))])
    assert (mx.rows.types == 3).sum() == 2
    N = 3
    P, V = mx.state(np.array([m.neutral() for _ in range(N)]), 0.3 * rng.standard_normal((N, m.nv)))
    P = P @ exp_se3_rows(1e-2 * rng.standard_normal((N, mx.nbodies, 6)))
    tau = rng.standard_normal((N, m.nv))
    for stab in (None, "baumgarte"):
        _compare(mx, P, V, tau, None, stab, 4, 1e-12, True)
    a = stepping.project(mx, P, V)
    b = native.native_project(mx, P, V)
    np.testing.assert_allclose(b[0], a[0], rtol=0, atol=1e-11)


def test_free_bodies_without_rows_and_empty_batches():
    rng = np.random.default_rng(9)
    m = gear.testing.random_tree(rng, nbodies=3, kinds=["free"])
    mx = gear.MaximalModel(m)
    assert mx.nrows == 0
    P, V = mx.state(np.array([m.random_configuration(rng) for _ in range(2)]), rng.standard_normal((2, m.nv)))
    tau = rng.standard_normal((2, m.nv))
    _compare(mx, P, V, tau, None, "baumgarte", 3, 1e-12, True)
    sys, _ = mech.four_bar()
    mx = gear.MaximalModel(sys)
    out = native.native_step(mx, np.zeros((0, 3, 4, 4)), np.zeros((0, 3, 6)), H)
    assert [o.shape for o in out] == [(0, 3, 4, 4), (0, 3, 6), (0, 18)]


def test_batches_equal_single_states_and_threads_do_not_matter():
    sys, q0 = mech.n_four_bar(3)
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(1)
    P, V = _batch(mx, sys, q0, 7, rng)
    tau = rng.standard_normal((7, sys.model.nv))
    before = gear.get_num_threads()
    try:
        gear.set_num_threads(1)
        one = native.native_step(mx, P, V, H, tau, None, "baumgarte")
        gear.set_num_threads(2)
        two = native.native_step(mx, P, V, H, tau, None, "baumgarte")
    finally:
        gear.set_num_threads(before)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    for n in range(7):
        single = native.native_step(mx, P[n:n + 1], V[n:n + 1], H, tau[n:n + 1], None, "baumgarte")
        for a, b in zip(single, one):
            np.testing.assert_array_equal(a[0], b[n])


def test_run_records_the_steps_of_native_step():
    sys, q0 = mech.four_bar()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(2)
    P, V = _batch(mx, sys, q0, 3, rng)
    tau = rng.standard_normal((3, sys.model.nv))
    Prec, Vrec, lam = native.native_run(mx, P, V, H, 7, record_every=3, tau=tau, stabilization="baumgarte")
    assert Prec.shape == (3, 4, 3, 4, 4) and Vrec.shape == (3, 4, 3, 6) and lam.shape == (3, 4, 18)
    np.testing.assert_array_equal(Prec[:, 0], P)
    np.testing.assert_array_equal(lam[:, 0], 0.0)
    Pk, Vk = P, V
    frames = {0: 0, 3: 1, 6: 2, 7: 3}
    for k in range(1, 8):
        Pk, Vk, lk = native.native_step(mx, Pk, Vk, H, tau, None, "baumgarte")
        if k in frames:
            np.testing.assert_array_equal(Prec[:, frames[k]], Pk)
            np.testing.assert_array_equal(Vrec[:, frames[k]], Vk)
            np.testing.assert_array_equal(lam[:, frames[k]], lk)
    # Baumgarte keeps the run on its rows; without it, the run stays
    # within Euler's drift of the NumPy step
    g = mx.joint_residual(Prec[:, -1])
    assert np.abs(g).max() < 1e-3


@pytest.mark.parametrize("integrator,stab,stiff", [("euler", "baumgarte", None), ("euler", "projection", None),
                                                   ("euler", None, None), ("rk4", "baumgarte", None),
                                                   ("rkmk4", None, None), ("implicit", None, 1e4)])
def test_run_reports_each_frames_joint_error(integrator, stab, stiff):
    """The joint error native_run reports for each frame (the next step's
    rows at its start, the last frame's evaluated apart) is the largest row
    residual of the frame recorded: the native rows' own bits, and NumPy's
    ``joint_residual`` to rounding."""
    from gear.maximal.native import _native

    sys, q0 = mech.n_four_bar(3)
    mx = gear.MaximalModel(sys, stiffness=stiff, damping=None if stiff is None else 10.0)
    rng = np.random.default_rng(9)
    P, V = _batch(mx, sys, q0, 2, rng)
    P = P @ exp_se3_rows(1e-4 * rng.standard_normal((mx.nbodies, 6)))        # off the rows a little
    for every in (1, 3):
        Pr, Vr, lam, err = native.native_run(mx, P, V, H, 7, record_every=every, stabilization=stab,
                                             integrator=integrator, joint_error=True)
        assert err.shape == Pr.shape[:2]
        frames = np.ascontiguousarray(Pr.reshape(-1, mx.nbodies * 16))
        ref = np.empty(len(frames))
        status = np.zeros(len(frames), dtype=np.int32)
        _native.residual_max(native.plan(mx), frames, ref, status, 1)
        np.testing.assert_array_equal(err.ravel(), ref)
        g = mx.joint_residual(Pr.reshape(-1, mx.nbodies, 4, 4))
        np.testing.assert_allclose(err.ravel(), np.abs(g).max(axis=1), rtol=1e-10, atol=1e-15)
        if stab == "projection":                 # projected at the start and after every step
            assert err.max() <= 1e-12
        else:
            assert err[:, 0].min() > 1e-6        # the frames are really off their rows
    # the three arrays alone without the flag
    assert len(native.native_run(mx, P, V, H, 2)) == 3
    # recorded into given arrays (here views of larger ones): the same frames
    big = [np.full((2, 9) + a.shape[2:], np.nan) for a in (Pr, Vr, lam, err)]
    views = tuple(b[:, 2:2 + Pr.shape[1]] for b in big)
    got = native.native_run(mx, P, V, H, 7, record_every=3, stabilization=stab, integrator=integrator,
                            joint_error=True, out=views)
    for g, v, want in zip(got, views, (Pr, Vr, lam, err)):
        assert g is v
        np.testing.assert_array_equal(v, want)
    with pytest.raises(ValueError, match="out must hold four arrays"):
        native.native_run(mx, P, V, H, 7, record_every=3, out=views[:3])


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "stewart"])
def test_a_start_far_off_the_rows_is_projected_to_rounding(name):
    """A start whose joint coordinates break the loops by tenths of a
    radian, as a user's random configuration (or a URDF's mimic joints left
    unset) does.  Chord steps alone (the factor of the first pose) contract
    slowly from there, or not at all: the four-bar's wandered between 0.1 and 4
    for fifty.  With the factor renewed where a step cuts |g| by less than
    100x (Newton's steps), NumPy's and the native projection both reach
    1e-12 and agree (fifty steps allowed, as ``gear.simulate`` allows a
    start).  (Chains of planar loops in 3-D, whose rows are redundant, can
    still stall at 1e-11 to 1e-7 from such a start: ``gear.simulate``
    closes a joint-space start in joint space first, and warns about poses
    it cannot project; test_maximal_simulation.py.)"""
    sys, q0 = MECHS[name]()
    mx = gear.MaximalModel(sys)
    m = sys.model
    rng = np.random.default_rng(8)
    P, V = [], []
    for _ in range(3):
        p, v = mx.state(m.integrate(q0, 0.3 * rng.standard_normal(m.nv)), rng.standard_normal(m.nv))
        P.append(p)
        V.append(v)
    P, V = np.stack(P), np.stack(V)
    assert np.abs(mx.joint_residual(P)).max() > 1e-2
    Pa, Va, ra = stepping.project(mx, P, V, max_iter=50)
    Pb, Vb, rb = native.native_project(mx, P, V, max_iter=50)
    for Pc in (Pa, Pb):
        assert np.abs(mx.joint_residual(Pc)).max() <= 1e-12
    np.testing.assert_allclose(Pb, Pa, rtol=0, atol=1e-9)
    np.testing.assert_allclose(Vb, Va, rtol=0, atol=1e-8 * np.abs(Va).max())
    assert rb == pytest.approx(ra, rel=1e-12)


@pytest.mark.parametrize("name", list(MECHS))
def test_projection_equals_the_numpy_projection(name):
    sys, q0 = MECHS[name]()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(5)
    # redundant chains: off their rows within the tolerance of rounding
    # there (see the module's docstring), regular ones by 1e-3
    P, V = _batch(mx, sys, q0, 3, rng, 1e-3 if name in REGULAR else 1e-6)
    V = V + 0.1 * rng.standard_normal(V.shape)
    Pa, Va, ra = stepping.project(mx, P, V)
    Pb, Vb, rb = native.native_project(mx, P, V)
    # every native state stops once its own |g| <= 1e-12, NumPy's batch
    # once all of them do (its states take the same iterations or more):
    # the answers agree to the tolerance
    np.testing.assert_allclose(Pb, Pa, rtol=0, atol=1e-11)
    np.testing.assert_allclose(Vb, Va, rtol=0, atol=1e-10 * np.abs(Va).max())
    assert rb == pytest.approx(ra, rel=1e-12) and rb > 1e-7
    assert np.abs(mx.joint_residual(Pb)).max() <= 1e-12


def test_run_with_projection_equals_steps_and_projections():
    sys, q0 = mech.slider_crank()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(6)
    P, V = _batch(mx, sys, q0, 2, rng)
    tau = rng.standard_normal((2, sys.model.nv))
    Pr, Vr, lam = native.native_run(mx, P, V, H, 12, record_every=4, tau=tau, stabilization="projection")
    Pa, Va, _ = stepping.project(mx, P, V)
    for k in range(1, 13):
        Pa, Va, la = stepping.step(mx, Pa, Va, H, "euler", tau, None, "projection")
        Pa, Va, _ = stepping.project(mx, Pa, Va)
        if k % 4 == 0:
            np.testing.assert_allclose(Pr[:, k // 4], Pa, rtol=0, atol=1e-13)
            np.testing.assert_allclose(Vr[:, k // 4], Va, rtol=0, atol=1e-10 * np.abs(Va).max())
    assert np.abs(mx.joint_residual(Pr[:, -1])).max() <= 1e-12


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("n", [1, 30])                  # K dense (18 rows), sparse (395)
def test_run_with_projection_is_native_steps_and_projections_bit_for_bit(integrator, n):
    """native_run's projected steps take the rows and factor the projection
    left at the pose (not computed again): the same bits as native_step
    and native_project one after the other."""
    sys, q0 = mech.n_four_bar(n)
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(11)
    P, V = _batch(mx, sys, q0, 2, rng)
    tau = rng.standard_normal((2, sys.model.nv))
    Pr, Vr, lam, err = native.native_run(mx, P, V, H, 6, record_every=2, tau=tau, stabilization="projection",
                                         integrator=integrator, joint_error=True)
    Pa, Va, _ = native.native_project(mx, P, V)
    for k in range(1, 7):
        Pa, Va, la = native.native_step(mx, Pa, Va, H, tau, None, "projection", integrator=integrator)
        Pa, Va, _ = native.native_project(mx, Pa, Va)
        if k % 2 == 0:
            np.testing.assert_array_equal(Pr[:, k // 2], Pa)
            np.testing.assert_array_equal(Vr[:, k // 2], Va)
            np.testing.assert_array_equal(lam[:, k // 2], la)


def test_baumgarte_target_holds_after_the_step():
    sys, q0 = mech.five_bar()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(4)
    P, V = _batch(mx, sys, q0, 2, rng, drift=1e-2)
    Pn, Vn, _ = native.native_step(mx, P, V, H, None, None, "baumgarte", beta=0.3)
    assert np.abs(mx.joint_residual(P)).max() > 1e-4
    from gear.maximal.kkt import RowSystem

    ev = mx.evaluate(P)
    rs = RowSystem(mx, ev)
    np.testing.assert_allclose(rs.J_apply(Vn), -(0.3 / H) * ev["g"], atol=1e-9 * np.abs(ev["g"]).max() / H)


def test_model_step_dispatches_and_falls_back():
    sys, q0 = mech.four_bar()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(3)
    P, V = _batch(mx, sys, q0, 2, rng)
    a = native.step(mx, P, V, H, "euler", stabilization="baumgarte")
    b = native.native_step(mx, P, V, H, stabilization="baumgarte")
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    for integ in ("rkmk4", "implicit"):
        a = native.step(mx, P, V, H, integ)
        b = native.native_step(mx, P, V, H, integrator=integ)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert native.why_not(mx, "leapfrog").startswith("integrator 'leapfrog'")
    assert all(native.why_not(mx, i) is None for i in ("euler", "rk4", "rkmk4", "implicit"))


def test_model_methods_take_the_native_path():
    """MaximalModel.step and .project: what gear.simulate's loop calls."""
    sys, q0 = mech.five_bar()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(8)
    P, V = _batch(mx, sys, q0, 2, rng, 1e-6)
    for x, y in zip(mx.step(P, V, H, "euler", None, None, "baumgarte"),
                    native.native_step(mx, P, V, H, None, None, "baumgarte")):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(mx.project(P, V), native.native_project(mx, P, V)):
        np.testing.assert_array_equal(x, y)
    soft = gear.MaximalModel(sys, stiffness=1e4)
    for x, y in zip(soft.project(P, V), stepping.project(soft, P, V)):
        np.testing.assert_array_equal(x, y)


def test_outside_the_kernel_native_step_returns_none():
    sys, q0 = mech.four_bar()
    mx = gear.MaximalModel(sys)
    P, V = mx.state(q0, np.zeros(3))
    assert native.native_step(mx, P[None], V[None], H, integrator="leapfrog") is None
    assert "integrator 'leapfrog'" in native.why_not(mx, "leapfrog")
    with pytest.raises(NotImplementedError, match="leapfrog"):
        native.native_run(mx, P[None], V[None], H, 1, integrator="leapfrog")


def test_bad_arguments():
    sys, q0 = mech.four_bar()
    mx = gear.MaximalModel(sys)
    P, V = mx.state(q0, np.zeros(sys.model.nv))
    with pytest.raises(ValueError, match="shape"):
        native.native_step(mx, P, V, H)                       # not batched
    with pytest.raises(ValueError, match="positive"):
        native.native_step(mx, P[None], V[None], -H)
    with pytest.raises(ValueError, match="stabilization"):
        native.native_step(mx, P[None], V[None], H, stabilization="bg")
    with pytest.raises(ValueError, match="record_every"):
        native.native_run(mx, P[None], V[None], H, 3, record_every=0)


def test_a_model_that_ran_natively_still_pickles():
    """Dask ships the model to its workers: the native plan is left out of
    the pickle and rebuilt where it is used."""
    import pickle

    sys, q0 = gear.mechanisms.four_bar()
    mx = gear.MaximalModel(sys)
    tr = gear.simulate(mx, q0, sys.project_velocity(q0, [1.0, 0, 0], locked=["crank"]), 0.01, 1e-3,
                       integrator="euler")
    assert tr.stats["native"]
    back = pickle.loads(pickle.dumps(mx))
    tr2 = gear.simulate(back, q0, sys.project_velocity(q0, [1.0, 0, 0], locked=["crank"]), 0.01, 1e-3,
                        integrator="euler")
    np.testing.assert_array_equal(tr.poses, tr2.poses)


@pytest.mark.parametrize("tree", ["chain", "ground"])
@pytest.mark.parametrize("stab", [None, "baumgarte", "projection"])
def test_sparse_K_above_the_dense_route_equals_the_numpy_step(tree, stab):
    """More rows than the dense route takes (the 12-four-bar: 159 rows; a
    random tree of every joint kind with 40 bodies): K sparse in the
    kernel (a fill-reducing order and a fixed-pattern Cholesky), against the
    NumPy step (CHOLMOD through scikit-sparse there); steps, projections,
    runs and batches."""
    sys, q0 = mech.n_four_bar(12, tree=tree)
    mx = gear.MaximalModel(sys)
    assert mx.nrows > 96 and native.why_not(mx) is None
    assert "Lp" in native.plan(mx).arrays                 # the sparse plan
    rng = np.random.default_rng(3)
    P, V = _batch(mx, sys, q0, 3, rng)
    tau = rng.standard_normal((3, sys.model.nv))
    _compare(mx, P, V, tau, None, stab, 4, 1e-10, False)
    # a batch equals its single states
    one = native.native_step(mx, P, V, H, tau, None, "baumgarte")
    single = native.native_step(mx, P[1:2], V[1:2], H, tau[1:2], None, "baumgarte")
    for a, b in zip(single, one):
        np.testing.assert_array_equal(a[0], b[1])
    # projection from 1e-6 off the rows, and a run with projection
    Pd = P @ exp_se3_rows(1e-6 * rng.standard_normal((3, mx.nbodies, 6)))
    Pa, Va, ra = stepping.project(mx, Pd, V)
    Pb, Vb, rb = native.native_project(mx, Pd, V)
    np.testing.assert_allclose(Pb, Pa, rtol=0, atol=1e-11)
    np.testing.assert_allclose(Vb, Va, rtol=0, atol=1e-10 * np.abs(Va).max())
    assert np.abs(mx.joint_residual(Pb)).max() <= 1e-12
    Pr, Vr, _ = native.native_run(mx, P, V, H, 6, record_every=3, tau=tau, stabilization="projection")
    assert np.abs(mx.joint_residual(Pr[:, -1])).max() <= 1e-12


def test_sparse_K_on_a_random_tree_of_every_joint_kind():
    rng = np.random.default_rng(11)
    m = gear.testing.random_tree(rng, nbodies=40)
    mx = gear.MaximalModel(m)
    assert mx.nrows > 96 and "Lp" in native.plan(mx).arrays
    _compare_random_states(mx, rng, 2, 3)


def test_native_row_residuals_equal_numpy_and_threads_do_not_share_them():
    """The kernel's row residuals (``_rows_g``) equal the NumPy rows', and
    ``residual_max`` -- the joint error gear.simulate records for every
    frame -- equals NumPy's on a batch run on every thread (a residual kept
    in a local whose address was taken was shared between the threads)."""
    from gear.maximal.native import _native
    from gear.simulation.maximal import _joint_error

    rng = np.random.default_rng(4)
    m = gear.testing.random_tree(rng, nbodies=10)
    mx = gear.MaximalModel(m)
    q = np.array([m.random_configuration(rng) for _ in range(64)])
    P, _ = mx.state(q, np.zeros((64, m.nv)))
    P = P @ exp_se3_rows(1e-3 * rng.standard_normal((64, mx.nbodies, 6)))
    g_np = mx.evaluate(P, rows=False)["g"]
    g = np.empty(mx.nrows)
    _native._rows_g(native.plan(mx), np.ascontiguousarray(P[7]).reshape(-1), g)
    np.testing.assert_allclose(g, g_np[7], rtol=0, atol=1e-14)
    before = gear.get_num_threads()
    try:
        gear.set_num_threads(2)
        np.testing.assert_allclose(_joint_error(mx, P, True), np.abs(g_np).max(axis=1), rtol=0, atol=1e-14)
    finally:
        gear.set_num_threads(before)


# ---------------------------------------------------------------------------
# the acceleration level: rk4 (pose matrices, polar factor) and rkmk4
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("integrator", ["rk4", "rkmk4"])
@pytest.mark.parametrize("name", list(MECHS))
def test_runge_kutta_equals_the_numpy_step_on_closed_chains(name, integrator):
    """Forward dynamics from poses and twists (the rows' acceleration bias
    of every row type, Baumgarte's terms) in the classical tableau: rk4's
    rotations moved to their polar factor (Newton-Schulz here, an SVD in
    NumPy: the same rotation to 1e-15), rkmk4 through exp and dexp^-1."""
    sys, q0 = MECHS[name]()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(17)
    rtol_v = 1e-12 if name in REGULAR else 1e-10
    P, V = _batch(mx, sys, q0, 3, rng, 1e-3 if name in REGULAR else 0.0)
    tau = rng.standard_normal((3, sys.model.nv))
    f_ext = 0.3 * rng.standard_normal((3, mx.nbodies, 6))
    for stab in (None, "baumgarte"):
        _compare(mx, P, V, tau, f_ext, stab, 4, rtol_v, name in REGULAR, integrator)


@pytest.mark.parametrize("integrator", ["rk4", "rkmk4"])
def test_runge_kutta_on_random_trees_and_sparse_K(integrator):
    """Every joint kind (helix, universal and planar rows among them), and
    more rows than the dense route takes (K sparse)."""
    rng = np.random.default_rng(23)
    _compare_random_states(gear.MaximalModel(gear.testing.random_tree(rng, nbodies=10)), rng, 2, 3, integrator)
    sys, q0 = mech.n_four_bar(12, tree="ground")
    mx = gear.MaximalModel(sys)
    assert "Lp" in native.plan(mx).arrays
    P, V = _batch(mx, sys, q0, 2, rng)
    _compare(mx, P, V, rng.standard_normal((2, sys.model.nv)), None, "baumgarte", 3, 1e-10, False, integrator)


@pytest.mark.parametrize("integrator", ["rk4", "rkmk4"])
def test_runge_kutta_run_with_projection_equals_steps_and_projections(integrator):
    sys, q0 = mech.slider_crank()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(6)
    P, V = _batch(mx, sys, q0, 2, rng)
    tau = rng.standard_normal((2, sys.model.nv))
    Pr, Vr, lam = native.native_run(mx, P, V, H, 8, record_every=4, tau=tau, stabilization="projection",
                                    integrator=integrator)
    Pa, Va, _ = stepping.project(mx, P, V)
    for k in range(1, 9):
        Pa, Va, la = stepping.step(mx, Pa, Va, H, integrator, tau, None, "projection")
        Pa, Va, _ = stepping.project(mx, Pa, Va)
        if k % 4 == 0:
            np.testing.assert_allclose(Pr[:, k // 4], Pa, rtol=0, atol=1e-13)
            np.testing.assert_allclose(Vr[:, k // 4], Va, rtol=0, atol=1e-10 * np.abs(Va).max())
            np.testing.assert_allclose(lam[:, k // 4], la, rtol=0, atol=1e-8 * np.abs(la).max())
    assert np.abs(mx.joint_residual(Pr[:, -1])).max() <= 1e-12


def test_simulate_runs_runge_kutta_natively():
    """gear.simulate(mx, integrator="rk4"/"rkmk4") takes the native loop, a
    batch gives its single runs' bits, and energy is kept to the order of
    the method (rkmk4 with projection, the hanging four-bar)."""
    sys, q0 = mech.four_bar()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(2)
    dq = np.stack([sys.project_velocity(q0, rng.standard_normal(3)) for _ in range(3)])
    qs = np.repeat(q0[None], 3, axis=0)
    for integ in ("rk4", "rkmk4"):
        tr = gear.simulate(mx, qs, dq, 0.2, 1e-3, integrator=integ, stabilization="projection",
                           record_every=50, progress=False)
        assert tr.stats["native"] and tr.stats["max_joint_error"] <= 1e-12
        one = gear.simulate(mx, q0, dq[1], 0.2, 1e-3, integrator=integ, stabilization="projection",
                            record_every=50, progress=False)
        np.testing.assert_array_equal(one.q, tr.q[1])
        P, V = mx.state(tr.q[:, 0], tr.dq[:, 0])
        E0 = mx.energy(P, V)
        P, V = tr.poses[:, -1], tr.twists[:, -1]
        assert np.abs(mx.energy(P, V) - E0).max() < 1e-8 * max(1.0, np.abs(E0).max())


@pytest.mark.parametrize("name", list(MECHS))
def test_native_forward_dynamics_equals_the_numpy_solve(name):
    """MaximalModel.forward_dynamics runs natively: dV, lam and the
    residual equal NumPy's (_accel) where K is regular; with redundant rows
    (singular K) dV agrees and lam's part in K's null space is arbitrary."""
    sys, q0 = MECHS[name]()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(29)
    P, V = _batch(mx, sys, q0, 3, rng, 1e-3 if name in REGULAR else 0.0)
    tau = rng.standard_normal((3, sys.model.nv))
    f_ext = 0.3 * rng.standard_normal((3, mx.nbodies, 6))
    r = mx.forward_dynamics(P, V, tau, f_ext)
    dV, lam, res = mx._accel(P, V, tau, f_ext)
    assert native.native_accel(mx, P, V, tau, f_ext) is not None
    np.testing.assert_allclose(r.dV, dV, rtol=0, atol=1e-10 * np.abs(dV).max())
    if name in REGULAR:
        np.testing.assert_allclose(r.lam, lam, rtol=0, atol=1e-11 * np.abs(lam).max())
    assert np.all(r.residual <= 1e-9 * max(1.0, np.abs(dV).max()))
    one = mx.forward_dynamics(P[1], V[1], tau[1], f_ext[1])
    np.testing.assert_array_equal(one.dV, r.dV[1])


# ---------------------------------------------------------------------------
# compliant rows (Ruan, eqs. 13-14): springs and dampers instead of lam
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "five_bar", "n_four_bar_12_ground", "stewart"])
def test_compliant_rows_equal_the_numpy_steps(name):
    """Explicit springs (euler, rk4, rkmk4: lam = -k g - c J V, no solve)
    and the linearly implicit step (K + CFM, the rows' ERP), with one
    stiffness and with one per row, dense and sparse K, against NumPy.
    (The Stewart platform's light legs make explicit springs unstable at
    this step: it runs the implicit step only.)"""
    if name == "n_four_bar_12_ground":
        sys, q0 = mech.n_four_bar(12, tree="ground")
    else:
        sys, q0 = MECHS[name]()
    rng = np.random.default_rng(31)
    m = gear.MaximalModel(sys).nrows
    integrators = ("implicit",) if name == "stewart" else ("euler", "implicit", "rk4", "rkmk4")
    # (the links are rods with a small inertia about their own axes: stiff
    # springs on their joints make the explicit steps unstable at this step
    # and amplify rounding, so the explicit steps get soft ones)
    for k, c in ((1.0, 0.01), (rng.uniform(0.5, 2.0, m), rng.uniform(0.0, 0.02, m)),
                 (300.0, 1.0), (rng.uniform(100.0, 1000.0, m), rng.uniform(0.0, 2.0, m))):
        mx = gear.MaximalModel(sys, stiffness=k, damping=c)
        assert native.why_not(mx) is None
        P, V = _batch(mx, sys, q0, 2, rng, 1e-3)
        tau = rng.standard_normal((2, sys.model.nv))
        stiff = np.max(k) > 10.0
        for integ in integrators:
            if stiff and integ != "implicit":
                continue
            # (Baumgarte is ignored by springs, as in NumPy's steps)
            _compare(mx, P, V, tau, None, "baumgarte", 3, 1e-10, True, integ)
    stiff = gear.MaximalModel(sys, stiffness=1e7, damping=1e3)
    P, V = _batch(stiff, sys, q0, 1, rng, 1e-4)
    _compare(stiff, P, V, None, None, None, 3, 1e-11, False, "implicit")


def test_simulate_runs_compliant_rows_natively():
    """gear.simulate with a compliant MaximalModel: native, and projection
    leaves springs alone (as NumPy's project does)."""
    sys, q0 = mech.four_bar()
    mx = gear.MaximalModel(sys, stiffness=1e5, damping=50.0)
    for integ in ("euler", "implicit", "rk4"):
        tr = gear.simulate(mx, q0, np.zeros(3), 0.05, 1e-4 if integ != "implicit" else 1e-3,
                           integrator=integ, progress=False)
        assert tr.stats["native"], integ
    P, V = mx.state(q0, np.zeros(3))
    Pd = P[None] @ exp_se3_rows(1e-3 * np.random.default_rng(0).standard_normal((1, mx.nbodies, 6)))
    out = native.native_project(mx, Pd, V[None])
    np.testing.assert_array_equal(out[0], Pd)


# ---------------------------------------------------------------------------
# joint couplers (URDF mimic joints, gear.JointCoupler): rows on four bodies
# ---------------------------------------------------------------------------
def _coupled_tree(seed, mult=-0.7, off=0.1, nbodies=9):
    """A random tree with three couplers between its revolute, prismatic
    and helical joints -- the first on two joints hanging from one body, as
    a gripper's fingers from its hand -- and a closed state of it."""
    rng = np.random.default_rng(seed)
    parents = [-1, 0, 0, 1, 1] + [int(rng.integers(0, i)) for i in range(5, nbodies)]
    m = gear.testing.random_tree(rng, nbodies=nbodies, parents=parents,
                                 kinds=["revolute", "prismatic", "helical", "spherical", "universal", "planar"])
    one = [i for i, j in enumerate(m.joints) if j.kind in (gear.joints.REVOLUTE, gear.joints.PRISMATIC,
                                                             gear.joints.HELICAL)]
    assert {1, 2} <= set(one) and len(one) >= 6, "pick another seed: the couplers need one-dof joints"
    j = m.joint_names
    a, b, c, d = one[-4:]
    sys = gear.ConstrainedModel(m, [gear.JointCoupler(j[2], j[1], mult, off),
                                    gear.JointCoupler(j[a], j[b], 1.3, 0.0),
                                    gear.JointCoupler(j[c], j[d], mult, -off)])
    q0 = sys.assemble(m.random_configuration(rng))
    return sys, q0, rng


@pytest.mark.parametrize("stab", [None, "baumgarte", "projection"])
@pytest.mark.parametrize("integrator", ["euler", "rk4", "rkmk4"])
def test_joint_couplers_step_natively_as_numpy(integrator, stab):
    """A coupler's row is two parts of J (one per joint, on its child and
    parent): the kernel steps it as NumPy does -- its residual (the
    coordinates read off the relative poses), K, the Euler step and the
    Runge-Kutta stages' bias -- from states 1e-3 off every row."""
    sys, q0, rng = _coupled_tree(34)
    mx = gear.MaximalModel(sys)
    assert native.why_not(mx, integrator) is None and native.plan(mx).route == "dense"
    P, V = _batch(mx, sys, q0, 3, rng, 1e-3)
    tau = rng.standard_normal((3, sys.model.nv))
    f_ext = 0.3 * rng.standard_normal((3, mx.nbodies, 6))
    _compare(mx, P, V, tau, f_ext, stab, 4, 1e-12, True, integrator)


def test_joint_couplers_residuals_forces_and_projection_equal_numpy():
    from gear.maximal.native import _native

    sys, q0, rng = _coupled_tree(26)
    mx = gear.MaximalModel(sys)
    P, V = _batch(mx, sys, q0, 4, rng, 1e-3)
    tau = rng.standard_normal((4, sys.model.nv))
    g_np = mx.evaluate(P, rows=False)["g"]
    assert np.abs(g_np[:, -3:]).max() > 1e-5                 # the couplers are off too
    g = np.empty(mx.nrows)
    _native._rows_g(native.plan(mx), np.ascontiguousarray(P[2]).reshape(-1), g)
    np.testing.assert_allclose(g, g_np[2], rtol=0, atol=1e-14)
    dV, lam, res = native.native_accel(mx, P, V, tau)
    dV0, lam0, res0 = mx._accel(P, V, tau, None)
    np.testing.assert_allclose(dV, dV0, rtol=0, atol=1e-12 * np.abs(dV0).max())
    np.testing.assert_allclose(lam, lam0, rtol=0, atol=1e-11 * np.abs(lam0).max())
    Pa, Va, ra = stepping.project(mx, P, V)
    Pb, Vb, rb = native.native_project(mx, P, V)
    np.testing.assert_allclose(Pb, Pa, rtol=0, atol=1e-12)
    np.testing.assert_allclose(Vb, Va, rtol=0, atol=1e-12 * np.abs(Va).max())
    assert rb == pytest.approx(ra, rel=1e-12) and np.abs(mx.joint_residual(Pb)).max() <= 1e-12
    # a run with projection keeps the couplers at rounding and gives back q
    Pr, Vr, _ = native.native_run(mx, Pb, Vb, H, 20, record_every=10, tau=tau, stabilization="projection")
    assert np.abs(mx.joint_residual(Pr[:, -1])).max() <= 1e-12
    q, _ = mx.to_reduced(Pr[:, -1], Vr[:, -1])
    c = sys.constraints[0].coupler
    i, s = (sys.model.joint_index(n) for n in (c.joint, c.source))
    np.testing.assert_allclose(q[:, sys.model._iq[i]], c.multiplier * q[:, sys.model._iq[s]] + c.offset,
                               rtol=0, atol=1e-10)


def test_joint_couplers_with_sparse_K_and_compliant_rows():
    """Sparse K (a tree of 30 bodies: more rows than the dense route
    takes; two parts of one row meeting on a body add to its diagonal both
    ways) and compliant couplers, explicit and linearly implicit."""
    sys, q0, rng = _coupled_tree(10, nbodies=30)
    mx = gear.MaximalModel(sys)
    assert mx.nrows > 96 and native.plan(mx).route == "sparse"
    P, V = _batch(mx, sys, q0, 2, rng, 1e-3)
    tau = rng.standard_normal((2, sys.model.nv))
    for stab in (None, "baumgarte", "projection"):
        _compare(mx, P, V, tau, None, stab, 3, 1e-11, True)
    _compare(mx, P, V, tau, None, "baumgarte", 2, 1e-11, True, "rk4")
    sys, q0, rng = _coupled_tree(34)
    m = gear.MaximalModel(sys).nrows
    for k, c in ((1.0, 0.01), (rng.uniform(100.0, 1000.0, m), rng.uniform(0.0, 2.0, m))):
        soft = gear.MaximalModel(sys, stiffness=k, damping=c)
        assert native.why_not(soft) is None
        P, V = _batch(soft, sys, q0, 2, rng, 1e-3)
        for integ in (("euler", "implicit") if np.ndim(k) == 0 else ("implicit",)):
            _compare(soft, P, V, None, None, None, 3, 1e-10, True, integ)


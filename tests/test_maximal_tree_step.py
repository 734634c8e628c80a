"""The tree-ordered solve of the native maximal steps
(gear/maximal/_tree_step.pxd, the default route) against the kernel's
factorisation of ``K = J M^-1 J^T`` (the ``"schur"`` route, itself held to
the NumPy steps in test_maximal_native.py).

Where the rows are independent (random trees of every joint kind, the
Stewart platform, RSSR) the answer is unique at every pose, and the routes
agree from states 1e-3 off the rows: poses to 1e-13, twists to 1e-12 and
row forces to 1e-11 relative.  With redundant rows (planar loops closed in
space, Bricard's linkage) they agree where the rows are consistent -- on
the rows and along Euler's drift within the plane -- twists to 1e-10 (the
conditioning of ``K`` on its range, as between the Schur route and NumPy)
and row forces through the body wrenches ``J^T lam`` they exert (their
part in the null space of ``J^T`` is arbitrary).  Off the rows in every
direction no exact solution exists; there the tree route's projection
still reaches the rows to rounding.
"""
import numpy as np
import pytest

import gear
import gear.testing
from gear import mechanisms as mech
from gear.maximal import native
from gear.maximal import rows as R
from gear.maximal.tree import step_tree_plan
from gear.spatial.stacks import exp_se3_rows
from test_maximal_native import MECHS, REGULAR, _batch, _coupled_tree

H = 1e-3


def _routes(mx):
    """``mx`` planned with each route, as (schur, tree) step functions."""
    def on(route):
        def run(fn, *args, **kw):
            plan = native.use_route(mx, route)
            assert plan.route == "tree" if route == "tree" else plan.route in ("dense", "sparse")
            return fn(mx, *args, **kw)
        return run
    return on("schur"), on("tree")


def _wrenches(mx, P, lam):
    """The body wrenches ``J^T lam`` (N, nb, 6) of row forces ``lam``."""
    ev = R.evaluate(mx.rows, P)
    N, nb = P.shape[0], mx.nbodies
    out = np.zeros((N, nb + 1, 6))
    ia, ib = np.where(mx.rows.ia >= 0, mx.rows.ia, nb), np.where(mx.rows.ib >= 0, mx.rows.ib, nb)
    for n in range(N):
        np.add.at(out[n], ia, ev["Fa"][n] * lam[n][:, None])
        np.add.at(out[n], ib, ev["Fb"][n] * lam[n][:, None])
    return out[:, :nb]


def _agree(mx, P, V, tau, f_ext, regular, steps=5, tol_v=None, tol_p=1e-13):
    """Steps of every integrator and stabilisation, projections and forward
    dynamics by both routes, from the same states."""
    schur, tree = _routes(mx)
    tol_v = tol_v or (1e-12 if regular else 1e-10)
    for integrator in ("euler", "rk4", "rkmk4"):
        for stab in (None, "baumgarte", "projection"):
            Pa, Va, Pb, Vb = P, V, P, V
            for _ in range(steps):
                P0 = Pa                                  # (the row forces act at the start)
                Pa, Va, la = schur(native.native_step, Pa, Va, H, tau, f_ext, stab, integrator=integrator)
                Pb, Vb, lb = tree(native.native_step, Pb, Vb, H, tau, f_ext, stab, integrator=integrator)
                np.testing.assert_allclose(Pb, Pa, rtol=0, atol=tol_p)
                np.testing.assert_allclose(Vb, Va, rtol=0, atol=tol_v * np.abs(Va).max())
                scale = max(1.0, np.abs(la).max(initial=0.0))
                if regular:
                    np.testing.assert_allclose(lb, la, rtol=0, atol=1e-11 * scale)
                else:
                    np.testing.assert_allclose(_wrenches(mx, P0, lb), _wrenches(mx, P0, la), rtol=0,
                                               atol=1e3 * tol_v * scale)
    Pd = P @ exp_se3_rows(1e-6 * np.random.default_rng(0).standard_normal((P.shape[0], mx.nbodies, 6))) \
        if regular else P
    Pa, Va, ra = schur(native.native_project, Pd, V)
    Pb, Vb, rb = tree(native.native_project, Pd, V)
    np.testing.assert_allclose(Pb, Pa, rtol=0, atol=1e-12)
    np.testing.assert_allclose(Vb, Va, rtol=0, atol=tol_v * np.abs(Va).max())
    a = schur(native.native_accel, P, V, tau, f_ext)
    b = tree(native.native_accel, P, V, tau, f_ext)
    np.testing.assert_allclose(b[0], a[0], rtol=0, atol=tol_v * np.abs(a[0]).max())
    if regular:
        np.testing.assert_allclose(b[1], a[1], rtol=0, atol=1e-11 * np.abs(a[1]).max())


@pytest.mark.parametrize("seed", range(6))
def test_equals_the_schur_route_on_random_trees_of_every_joint_kind(seed):
    rng = np.random.default_rng(seed)
    m = gear.testing.random_tree(rng, nbodies=10)
    mx = gear.MaximalModel(m)
    assert len({type(j).__name__ for j in m.joints}) >= 8
    N = 3
    q = np.array([m.random_configuration(rng) for _ in range(N)])
    P, V = mx.state(q, rng.standard_normal((N, m.nv)))
    P = P @ exp_se3_rows(1e-3 * rng.standard_normal((N, mx.nbodies, 6)))
    _agree(mx, P, V, rng.standard_normal((N, m.nv)), rng.standard_normal((N, mx.nbodies, 6)), True)


@pytest.mark.parametrize("name", list(MECHS))
def test_equals_the_schur_route_on_closed_chains(name):
    sys, q0 = MECHS[name]()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(17)
    regular = name in REGULAR
    P, V = _batch(mx, sys, q0, 3, rng, 1e-3 if regular else 0.0)
    tau = rng.standard_normal((3, sys.model.nv))
    # Bricard's linkage is mobile only through one redundant row: off its
    # rows (Euler's first step leaves them by 2e-7, in every direction)
    # that row is independent by the square of the drift, and the routes,
    # one solving it (the regularised Schur complement) and one leaving it
    # out (below 1e-8 of its own diagonal), differ by the drift's order
    tol = dict(tol_v=1e-6, tol_p=1e-9) if name == "bricard" else {}
    _agree(mx, P, V, tau, 0.3 * rng.standard_normal((3, mx.nbodies, 6)), regular, **tol)


@pytest.mark.parametrize("seed, nbodies", [(34, 9), (26, 9), (10, 30)])
def test_joint_couplers_are_loop_rows_of_the_tree(seed, nbodies):
    """A joint coupler's row (two parts of J, on up to four bodies) is
    never an edge: it is a loop row visiting the paths of all four bodies
    to the world (two of its blocks on one body where the fingers of a
    gripper meet on its hand).  The routes agree from states 1e-3 off
    every row."""
    sys, q0, rng = _coupled_tree(seed, nbodies=nbodies)
    mx = gear.MaximalModel(sys)
    arrays, stats = step_tree_plan(mx.rows, mx.I6, native._coupler_plan(mx)["bodies"])
    m0 = mx.rows.m
    assert list(arrays["lrow"][-3:]) == [m0, m0 + 1, m0 + 2] and stats["loop_rows"] >= 3
    assert list(arrays["lpart"][-6:]) == list(range(m0, m0 + 6))
    assert (arrays["vseg"].reshape(-1, 2) >= 0).all(axis=1).any()     # the hand: two blocks of one row
    P, V = _batch(mx, sys, q0, 2, rng, 1e-3)
    _agree(mx, P, V, rng.standard_normal((2, sys.model.nv)), 0.3 * rng.standard_normal((2, mx.nbodies, 6)),
           True, steps=3)


@pytest.mark.parametrize("tree", ["chain", "ground"])
def test_equals_the_schur_route_where_K_is_sparse(tree):
    """The 12-four-bar (159 rows: K sparse in the Schur route) on both of
    its spanning trees."""
    sys, q0 = mech.n_four_bar(12, tree=tree)
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(23)
    P, V = _batch(mx, sys, q0, 2, rng)
    _agree(mx, P, V, rng.standard_normal((2, sys.model.nv)), None, False, steps=3)
    assert native.use_route(mx, "schur").route == "sparse"


def test_the_plan_spans_the_bodies_breadth_first_from_the_world():
    """On the N-four-bar built on its chain tree each crank hangs from the
    world by its pivot (a ball closure: three rows, three freedoms left)
    and each coupler from a crank, so the loop rows are the couplers'
    second revolute joints (five each); on the ground tree the plan is the
    model's tree and the loop rows are its ball closures."""
    for tree, loops, nvi in (("chain", 15, [1, 3, 3, 3, 1, 1, 1]), ("ground", 9, [1] * 7)):
        sys, _ = mech.n_four_bar(3, tree=tree)
        mx = gear.MaximalModel(sys)
        a, st = step_tree_plan(mx.rows, mx.I6)
        assert st["loop_rows"] == loops and list(a["nvi"]) == nvi
        assert np.all(a["tpar"] < np.arange(mx.nbodies))          # parents first
        assert sorted(a["body"]) == list(range(mx.nbodies))
        edges = a["er0"][a["er0"] >= 0]
        owner = np.array(mx.rows.owner)
        assert len(set(owner[edges])) == len(edges)                 # one group per edge
        in_tree = np.isin(np.arange(mx.nrows), np.concatenate(
            [np.arange(r, r + 6 - n) for r, n in zip(a["er0"], a["nvi"]) if r >= 0]))
        assert list(np.flatnonzero(~in_tree)) == list(a["lrow"])
        assert native.use_route(mx, "auto").route == "tree"


def test_free_bodies_are_roots_of_their_own():
    m = gear.testing.random_tree(np.random.default_rng(2), nbodies=6)
    mx = gear.MaximalModel(m)
    a, _ = step_tree_plan(mx.rows, mx.I6)
    free = [i for i, j in enumerate(m.joints) if j.nv == 6]
    assert free                                                   # the random tree has a floating base
    pos = {b: k for k, b in enumerate(a["body"])}
    for b in free:
        assert a["nvi"][pos[b]] == 6 and a["er0"][pos[b]] == -1 and a["tpar"][pos[b]] == -1


def test_batches_equal_single_states_and_threads_do_not_matter():
    sys, q0 = mech.n_four_bar(10, tree="ground")
    mx = gear.MaximalModel(sys)
    native.use_route(mx, "tree")
    rng = np.random.default_rng(5)
    P, V = _batch(mx, sys, q0, 6, rng)
    tau = rng.standard_normal((6, sys.model.nv))
    before = gear.get_num_threads()
    try:
        gear.set_num_threads(2)
        two = native.native_step(mx, P, V, H, tau, None, "baumgarte")
        gear.set_num_threads(1)
        one = native.native_step(mx, P, V, H, tau, None, "baumgarte")
        single = native.native_step(mx, P[3:4], V[3:4], H, tau[3:4], None, "baumgarte")
    finally:
        gear.set_num_threads(before)
    for a, b, c in zip(one, two, single):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a[3:4], c)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_runs_record_the_row_forces_of_their_steps(integrator):
    """native_run computes a step's row forces only where its end is
    recorded: they equal native_step's, and the states are the same bits."""
    sys, q0 = mech.n_four_bar(4, tree="ground")
    mx = gear.MaximalModel(sys)
    native.use_route(mx, "tree")
    rng = np.random.default_rng(8)
    P, V = _batch(mx, sys, q0, 2, rng)
    tau = rng.standard_normal((2, sys.model.nv))
    for stab in ("baumgarte", "projection"):
        Pr, Vr, lam = native.native_run(mx, P, V, H, 7, record_every=3, tau=tau, stabilization=stab,
                                        integrator=integrator)
        Pa, Va = P, V
        if stab == "projection":
            Pa, Va, _ = native.native_project(mx, Pa, Va)
        for k in range(1, 8):
            Pa, Va, la = native.native_step(mx, Pa, Va, H, tau, None, stab, integrator=integrator)
            if stab == "projection":
                Pa, Va, _ = native.native_project(mx, Pa, Va)
            if k % 3 == 0 or k == 7:
                f = k // 3 if k % 3 == 0 else -1
                np.testing.assert_array_equal(Pr[:, f], Pa)
                np.testing.assert_array_equal(Vr[:, f], Va)
                np.testing.assert_array_equal(lam[:, f], la)


@pytest.mark.parametrize("name", ["four_bar", "five_bar", "bricard"])
def test_projection_reaches_the_rows_from_any_drift(name):
    """Off redundant rows in every direction there is no exact solution;
    the tree route's Gauss-Newton still ends on the rows, next to the Schur
    route's answer."""
    sys, q0 = MECHS[name]()
    mx = gear.MaximalModel(sys)
    rng = np.random.default_rng(3)
    P, V = _batch(mx, sys, q0, 3, rng, 1e-6)
    schur, tree = _routes(mx)
    Pa, Va, ra = schur(native.native_project, P, V)
    Pb, Vb, rb = tree(native.native_project, P, V)
    assert np.abs(mx.joint_residual(Pb)).max() <= 1e-12
    np.testing.assert_allclose(rb, ra, rtol=1e-12)
    np.testing.assert_allclose(Pb, Pa, rtol=0, atol=1e-8)
    J = R.evaluate(mx.rows, Pb)
    for n in range(3):                                    # the twists hold the rows
        jv = np.einsum("rk,rk->r", J["Fa"][n], np.where(mx.rows.ia[:, None] >= 0, Vb[n][mx.rows.ia], 0.0)) + \
            np.einsum("rk,rk->r", J["Fb"][n], np.where(mx.rows.ib[:, None] >= 0, Vb[n][mx.rows.ib], 0.0))
        assert np.abs(jv).max() <= 1e-9 * np.abs(Vb[n]).max()


def test_an_edge_whose_rows_are_dependent_falls_back_to_the_schur_route():
    """A revolute joint's two ``dot`` rows keep the child's axis on the
    parent's: with the child turned a quarter turn off it, one of them has
    no gradient and the edge's rows are dependent.  The step takes the
    Schur route at that pose: the same bits."""
    rng = np.random.default_rng(4)
    sys, q0 = mech.four_bar()
    mx = gear.MaximalModel(sys)
    P, V = mx.state(q0, sys.project_velocity(q0, rng.standard_normal(sys.model.nv)))
    t = mx.rows
    r0 = [r for r in range(t.m) if t.owner[r].startswith("joint:") and t.types[r] == 2][0]
    b = t.ib[r0]
    # turn body b so that its z axis lies along the parent frame's x axis
    RA = (P[t.ia[r0], :3, :3] if t.ia[r0] >= 0 else np.eye(3)) @ t.RA[r0]
    Rb = RA @ np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]) @ t.RB[r0].T
    P = P.copy()
    P[b, :3, :3] = Rb
    ev = R.evaluate(mx.rows, P[None])
    assert np.abs(ev["Fb"][0, r0]).max() < 1e-12 or np.abs(ev["Fb"][0, r0 + 1]).max() < 1e-12
    schur, tree = _routes(mx)
    a = schur(native.native_step, P[None], V[None], H, None, None, "baumgarte")
    c = tree(native.native_step, P[None], V[None], H, None, None, "baumgarte")
    for x, y in zip(a, c):
        np.testing.assert_array_equal(x, y)


def test_compliant_rows_take_the_schur_route_and_routes_are_checked():
    sys, _ = mech.four_bar()
    assert native.use_route(gear.MaximalModel(sys, stiffness=1e6, damping=10.0), "tree").route == "dense"
    with pytest.raises(ValueError, match="route must be one of"):
        native.use_route(gear.MaximalModel(sys), "cholmod")


def test_every_joint_kind_takes_rigid_maps():
    """Every edge of gear's joints and closures has a rigid map (its rows
    agree on their points), so the plan takes the cheaper elimination on
    random trees of every kind and on the N-four-bar's trees."""
    for seed in range(6):
        mx = gear.MaximalModel(gear.testing.random_tree(np.random.default_rng(seed), nbodies=10))
        assert step_tree_plan(mx.rows, mx.I6)[1]["rigid"]
    for tree in ("chain", "ground"):
        mx = gear.MaximalModel(mech.n_four_bar(3, tree=tree)[0])
        a, st = step_tree_plan(mx.rows, mx.I6)
        assert st["rigid"] and a["rigid"][0] == 1


def test_edges_mixing_their_points_keep_general_maps():
    """An edge group whose pos rows and axis rows take {A}'s twist at
    different points, or whose rows sit on different frames, has no rigid
    map: the plan keeps the general one."""
    from gear.maximal.tree import _edge_points

    class Table:
        types = np.array([R.POS, R.POS, R.DOT, R.AXIS, R.DOT])
        pA = np.zeros((5, 3))
        pB = np.zeros((5, 3))

    xb, rigid = _edge_points(Table, np.array([0, 3]), np.array([3, 2]))      # a ball, a planar pair
    assert list(xb) == [0, 1] and rigid
    xb, rigid = _edge_points(Table, np.array([0]), np.array([4]))          # pos and axis in one edge
    assert not rigid
    Table.pA = np.arange(15.0).reshape(5, 3)                                 # the rows' frames differ
    assert not _edge_points(Table, np.array([0, 3]), np.array([3, 2]))[1]


def test_poses_off_their_rotations_take_the_general_maps():
    """A rigid map takes R^T for R^-1.  Poses whose rotation blocks are off
    SO(3) by 1e-9 (within what the model accepts) take the general maps
    instead: the tree route still equals the Schur route to rounding, where
    rigid maps would be off by the rotations' error."""
    rng = np.random.default_rng(4)
    m = gear.testing.random_tree(rng, nbodies=10)
    mx = gear.MaximalModel(m)
    N = 3
    q = np.array([m.random_configuration(rng) for _ in range(N)])
    P, V = mx.state(q, rng.standard_normal((N, m.nv)))
    P[..., :3, :3] *= 1.0 + 1e-9
    tau = rng.standard_normal((N, m.nv))
    schur, tree = _routes(mx)
    for integrator in ("euler", "rkmk4"):
        Pa, Va, la = schur(native.native_step, P, V, H, tau, None, "baumgarte", integrator=integrator)
        Pb, Vb, lb = tree(native.native_step, P, V, H, tau, None, "baumgarte", integrator=integrator)
        np.testing.assert_allclose(Pb, Pa, rtol=0, atol=1e-13)
        np.testing.assert_allclose(Vb, Va, rtol=0, atol=1e-12 * np.abs(Va).max())


def test_a_mimic_gripper_simulates_natively():
    """Example-robot-data's panda: its fingers' URDF mimic joint is a
    coupler row; gear.simulate runs it in the kernel (the tree route), the
    fingers stay coupled, and rk4 with projection follows the reduced
    dynamics (rk4 at a tenth of the step) to 1e-10."""
    import os

    if gear.testing.zoo_dir() is None:
        pytest.skip("example-robot-data is not installed (pip install example-robot-data, or gear[reference])")
    m = gear.load_urdf(os.path.join(gear.testing.zoo_dir(), "panda_description", "urdf", "panda.urdf"))
    sys = gear.ConstrainedModel(m)
    mx = gear.MaximalModel(m)
    assert mx.row_names[-1].startswith("coupler:") and native.why_not(mx) is None
    rng = np.random.default_rng(0)
    q0 = sys.assemble(m.random_configuration(rng))
    dq0 = sys.project_velocity(q0, 0.3 * rng.standard_normal(m.nv))
    ref = gear.simulate(sys, q0, dq0, 0.1, 1e-4, integrator="rk4", progress=False)
    i, s = m.joint_index("panda_finger_joint2"), m.joint_index("panda_finger_joint1")
    # projection holds the rows at rounding; Baumgarte's drift to 5e-9 in 0.1 s
    # (the fingers' coupler to 4e-10), and q with it
    for stab, tol, tol_q in (("projection", 1e-12, 1e-10), ("baumgarte", 1e-8, 1e-7)):
        tr = gear.simulate(mx, q0, dq0, 0.1, 1e-3, integrator="rk4", stabilization=stab, progress=False)
        assert tr.stats["native"] and tr.stats["route"] == "tree"
        np.testing.assert_allclose(tr.q[:, m._iq[i]], tr.q[:, m._iq[s]], rtol=0, atol=tol)
        assert np.abs(tr.joint_error).max() <= tol
        np.testing.assert_allclose(tr.q[-1], ref.q[-1], rtol=0, atol=tol_q)

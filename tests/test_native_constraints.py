"""The native closed-loop kernels (gear/constraints/_cwork.pxd and the
route files it lists) against the NumPy implementation they replace (rows
from the frame kinematics, dynamics through the dense mass matrix) and
against their own batching."""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.constraints.closures import KINDS
from gear.testing import ALL_KINDS, random_se3, random_tree
from gear.testing import consistent_velocity as _consistent

from test_solvers import MECHS


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b)))


def _multi_closure_system(seed, to_world=False):
    """A random tree of every joint kind closed by one closure of each kind
    (many rows: redundancy is likely, which the min-norm solve must handle)."""
    rng = np.random.default_rng(seed)
    model = random_tree(rng, nbodies=9, kinds=[k for k in ALL_KINDS if k != "fixed"])
    cs = []
    for kind in sorted(KINDS):
        a = "world" if to_world and kind in ("ball", "distance") else int(rng.integers(0, 9))
        b = int(rng.integers(0, 9))
        while b == a:
            b = int(rng.integers(0, 9))
        cs.append(gear.LoopClosure(a, random_se3(rng), b, random_se3(rng), kind, name=f"c_{kind}"))
    return gear.ConstrainedModel(model, cs), rng


@pytest.mark.parametrize("seed", range(4))
def test_native_rows_equal_numpy_rows(seed):
    sysm, rng = _multi_closure_system(seed, to_world=seed % 2 == 1)
    assert sysm._native() is not None
    for _ in range(3):
        q = sysm.model.random_configuration(rng)
        dq = rng.standard_normal(sysm.model.nv)
        g1, A1, b1 = sysm._rows(q, dq, want_g=True)
        g2, A2, b2 = sysm._rows_numpy(q, dq, want_g=True)
        assert rel(g1, g2) < 1e-13 and rel(A1, A2) < 1e-13 and rel(b1, b2) < 1e-12
        assert not np.array_equal(A1, A2) or np.array_equal(b1, b2)   # two computations
        # without dq the bias is zero
        assert np.array_equal(sysm._rows(q)[1], np.zeros(sysm.nc))




@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_native_forward_and_hybrid_equal_the_dense_route(name):
    sysm, q = MECHS[name]()
    model = sysm.model
    rng = np.random.default_rng(7)
    dq = np.zeros(model.nv) if name == "four_bar_collinear" else _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    solver = sysm.solver
    for fe in (None, f_ext):
        res = sysm.forward_dynamics(q, dq, tau, fe)
        assert res.stats["native"]
        ddq, lam, _ = solver._forward_numpy(q, dq, tau, fe)
        assert rel(res.ddq, ddq) < 1e-9, name
        # the minimum-norm multipliers, also where rows are redundant
        assert rel(res.lam, lam) < 1e-8, name
        A, bias = sysm._rows_numpy(q, dq)
        # two rounding-level numbers (A from the world-frame or the NumPy
        # rows): equal to the rounding of A ddq
        tol = 1e-15 * max(1.0, np.abs(A).max() * np.abs(res.ddq).max() * A.shape[1])
        assert res.residual == pytest.approx(np.linalg.norm(A @ res.ddq + bias), abs=max(1e-12, tol))
        assert res.residual < 1e-9 * max(1.0, np.abs(res.ddq).max())
    # prescribe accelerations the loops allow: the forward answer plus a
    # motion in the null space of A
    ddq_p = res.ddq + 0.5 * _consistent(sysm, q, rng)
    for pres in ([model.joint_names[0]], model.joint_names[:2]):
        u = np.zeros(model.nv, bool)
        for j in pres:
            u[model.idx_v(j)] = True
        h = sysm.hybrid_dynamics(q, dq, ddq_p, tau, pres, f_ext)
        t2, d2, l2, _ = solver._hybrid_numpy(q, dq, ddq_p, tau, u, f_ext)
        scale = max(1.0, np.abs(d2).max())
        assert np.abs(h.ddq - d2).max() < 1e-9 * scale and rel(h.tau, t2) < 1e-9, name
        A = sysm.constraint_jacobian(q)
        assert np.abs(A.T @ (h.lam - l2)).max() < 1e-9 * max(1.0, np.abs(A.T @ l2).max()), name


def test_native_batch_equals_single_calls_bit_for_bit():
    sysm, q0 = mech.n_four_bar(4)
    model = sysm.model
    rng = np.random.default_rng(3)
    N = 37
    q = np.stack([sysm.assemble(model.integrate(q0, 0.05 * rng.standard_normal(model.nv))) for _ in range(N)])
    dq = np.stack([_consistent(sysm, x, rng) for x in q])
    tau = rng.standard_normal((N, model.nv))
    old = gear.get_num_threads()
    try:
        gear.set_num_threads(2)
        batch = sysm.forward_dynamics(q, dq, tau)
        hyb = sysm.hybrid_dynamics(q, dq, batch.ddq, tau, [model.joint_names[0]])
    finally:
        gear.set_num_threads(old)
    for k in range(N):
        one = sysm.forward_dynamics(q[k], dq[k], tau[k])
        assert np.array_equal(one.ddq, batch.ddq[k]) and np.array_equal(one.lam, batch.lam[k])
        h1 = sysm.hybrid_dynamics(q[k], dq[k], batch.ddq[k], tau[k], [model.joint_names[0]])
        assert np.array_equal(h1.tau, hyb.tau[k]) and np.array_equal(h1.ddq, hyb.ddq[k])
    assert batch.residual.shape == (N,) and np.all(batch.residual < 1e-9)


@pytest.mark.parametrize("solver", ["kkt", "maximal"])
def test_single_hybrid_fast_path_equals_the_general_path(solver):
    """hybrid_dynamics with a bool array per joint takes the allocation-light
    path (gear._core.FastHybrid), and so do joint names (converted once to
    that array, cached); with f_ext it takes the general path.  All run the
    same kernel: the same bits, the same stats and counters; an argument
    the fast path does not take (NaN) goes the general way and gets its
    error."""
    if solver == "maximal" and not gear._core.cholmod_available():
        pytest.skip("gear was built without CHOLMOD (no native maximal kernel)")
    sysm, q = mech.stewart()
    sysm = sysm.with_solver(solver)
    model = sysm.model
    rng = np.random.default_rng(4)
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    ddq = sysm.forward_dynamics(q, dq, tau).ddq + 0.2 * _consistent(sysm, q, rng)
    for j in range(model.nbodies):
        if model.joints[j].nv == 0:
            continue
        pres = np.zeros(model.nbodies, dtype=bool)
        pres[j] = True
        fast = sysm.hybrid_dynamics(q, dq, ddq, tau, pres)
        c0 = dict(sysm.solver.counters)
        named = sysm.hybrid_dynamics(q, dq, ddq, tau, [model.joint_names[j]])
        assert ("joints", "prescribed", model.joint_names[j]) in model._masks
        slow = sysm.hybrid_dynamics(q, dq, ddq, tau, [model.joint_names[j]],
                                    f_ext=np.zeros((model.nbodies, 6)))
        assert sysm.solver.counters["calls"] == c0["calls"] + 2
        for other in (named, slow):
            assert np.array_equal(fast.tau, other.tau) and np.array_equal(fast.ddq, other.ddq)
            assert np.array_equal(fast.lam, other.lam)
            assert fast.residual == pytest.approx(other.residual, abs=1e-15)
            assert fast.stats == other.stats and fast.success and fast.solver == solver
    assert sysm._native_cache["hf"] is not None
    bad = ddq.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="ddq"):
        sysm.hybrid_dynamics(q, dq, bad, tau, pres)


def test_couplers_run_natively_and_python_constraints_do_not():
    sysm, q = mech.rolling_ball()
    assert sysm._native() is None
    res = sysm.forward_dynamics(q, np.zeros(sysm.model.nv), np.zeros(sysm.model.nv))
    assert "native" not in res.stats
    model = gear.load_urdf(gear.data_path("arm7.urdf"))
    j = model.joint_names
    sysm = gear.ConstrainedModel(model, [gear.JointCoupler(j[3], j[1], multiplier=-0.5, offset=0.2)])
    assert sysm._native() is not None
    rng = np.random.default_rng(1)
    q = sysm.assemble(model.random_configuration(rng), locked=[j[1]])
    g1, A1, b1 = sysm._rows(q, np.ones(model.nv), want_g=True)
    g2, A2, b2 = sysm._rows_numpy(q, np.ones(model.nv), want_g=True)
    assert np.array_equal(A1, A2) and abs(g1 - g2).max() < 1e-15 and not b1.any()
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    res = sysm.forward_dynamics(q, dq, tau)
    ddq, lam, _ = sysm.solver._forward_numpy(q, dq, tau, None)
    assert res.stats["native"] and rel(res.ddq, ddq) < 1e-10 and rel(res.lam, lam) < 1e-10
    assert abs(res.ddq[model.idx_v(j[3])][0] + 0.5 * res.ddq[model.idx_v(j[1])][0]) < 1e-10


def test_native_errors_are_named():
    # a massless subtree: the articulated inertia of its joint is singular
    model = gear.Model()
    model.add_body("a", -1, gear.joints.Revolute([0, 0, 1]), inertia=gear.Inertia(1.0, [0, 0, 0], np.eye(3) * 0.1))
    model.add_body("b", 0, gear.joints.Revolute([0, 0, 1]), gear.SE3(p=[1, 0, 0]),
                   inertia=gear.Inertia(0.0, [0, 0, 0], np.zeros((3, 3))), joint_name="jb")
    sysm = gear.ConstrainedModel(model, [gear.LoopClosure("b", None, "world", gear.SE3(p=[2, 0, 0]), "distance",
                                                          distance=1.0)])
    with pytest.raises(gear.SingularInertiaError, match="'jb'"):
        sysm.forward_dynamics(np.zeros(2), np.zeros(2), np.zeros(2))
    # a distance closure whose two points coincide
    sysm, q = mech.four_bar()
    (ball,) = sysm.constraints
    c = gear.LoopClosure(ball.body_a, ball.placement_a, ball.body_b, ball.placement_b, "distance",
                         distance=0.1)
    rod = gear.ConstrainedModel(sysm.model, [c])
    with pytest.raises(ValueError, match="coincide"):
        rod.forward_dynamics(q, np.zeros(3), np.zeros(3))


@pytest.mark.parametrize("name", ["four_bar", "four_bar_collinear", "stewart", "bricard", "n_four_bar_10"])
def test_dense_and_aba_routes_agree(name):
    sysm, q = MECHS[name]()
    model = sysm.model
    rng = np.random.default_rng(11)
    dq = np.zeros(model.nv) if name == "four_bar_collinear" else _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    a = sysm.with_solver("kkt", route="aba")
    d = sysm.with_solver("kkt", route="dense")
    assert (a.solver._route, d.solver._route) == (0, 1)
    for fe in (None, f_ext):
        ra, rd = a.forward_dynamics(q, dq, tau, fe), d.forward_dynamics(q, dq, tau, fe)
        assert rel(rd.ddq, ra.ddq) < 1e-10 and rel(rd.lam, ra.lam) < 1e-8
        assert rd.residual < 1e-9 * max(1.0, np.abs(rd.ddq).max())
    # hybrid dynamics: the dense route factorises M_vv (the prescribed dofs'
    # rows and columns replaced by the identity); every joint prescribed
    # alone and with another, one state (the allocation-light path) and a
    # batch, with and without f_ext, against the ABA route and NumPy, at
    # accelerations the constraints allow (otherwise the prescribed ddq_u
    # leaves no exact solution and each method returns its own compromise)
    ddq = a.forward_dynamics(q, dq, rng.standard_normal(model.nv)).ddq
    movable = [j for j in range(model.nbodies) if model.joints[j].nv]
    for j in movable:
        for extra in (None, movable[(movable.index(j) + 2) % len(movable)]):
            pres = np.zeros(model.nbodies, dtype=bool)
            pres[j] = True
            if extra is not None:
                pres[extra] = True
            for fe in (None, f_ext):
                ha = a.hybrid_dynamics(q, dq, ddq, tau, pres, fe)
                hd = d.hybrid_dynamics(q, dq, ddq, tau, pres, fe)
                scale = max(1.0, np.abs(ha.ddq).max(), np.abs(ha.tau).max())
                assert np.abs(hd.ddq - ha.ddq).max() < 1e-10 * scale, (name, j, extra)
                assert np.abs(hd.tau - ha.tau).max() < 1e-10 * scale, (name, j, extra)
                assert rel(hd.lam, ha.lam) < 1e-8 and hd.stats["rank"] == ha.stats["rank"]
                assert abs(hd.residual - ha.residual) < 1e-9 * scale
                u = np.repeat(pres, [model.joints[i].nv for i in range(model.nbodies)])
                ref = d.solver._hybrid_numpy(q, dq, ddq, tau, u, fe)
                assert np.abs(hd.tau - ref[0]).max() < 1e-9 * scale
                assert np.abs(hd.ddq - ref[1]).max() < 1e-9 * scale
            hb = d.hybrid_dynamics(np.tile(q, (2, 1)), np.tile(dq, (2, 1)), np.tile(ddq, (2, 1)),
                                   np.tile(tau, (2, 1)), pres)
            one = d.hybrid_dynamics(q, dq, ddq, tau, pres)
            assert np.array_equal(hb.ddq[1], one.ddq) and np.array_equal(hb.tau[1], one.tau)
    with pytest.raises(ValueError, match="route"):
        sysm.with_solver("kkt", route="banded")


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_native_projection_equals_its_numpy_path(name):
    """The projection solver's native kernel (Householder QR of A^T with
    column pivoting) against its NumPy path (SVD), on every mechanism,
    redundant and singular ones included: the same ddq and the same
    minimum-norm lam."""
    sysm, q = MECHS[name]()
    sp = sysm.with_solver("projection")
    model = sysm.model
    rng = np.random.default_rng(11)
    dq = np.zeros(model.nv) if name == "four_bar_collinear" else _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    for fe in (None, f_ext):
        res = sp.forward_dynamics(q, dq, tau, fe)
        assert res.stats["native"] and res.solver == "projection"
        ddq, lam, stats = sp.solver._forward_numpy(q, dq, tau, fe)
        assert rel(res.ddq, ddq) < 1e-9, name
        assert rel(res.lam, lam) < 1e-8, name
        assert res.stats["rank"] == stats["rank"], name
        # and the kkt kernel's answer (same physics)
        kk = sysm.forward_dynamics(q, dq, tau, fe)
        assert rel(res.ddq, kk.ddq) < 1e-9, name
    # a batch in parallel equals single calls bit for bit
    N = 9
    Q, DQ, TAU = np.tile(q, (N, 1)), np.tile(dq, (N, 1)), rng.standard_normal((N, model.nv))
    old = gear.get_num_threads()
    try:
        gear.set_num_threads(2)
        batch = sp.forward_dynamics(Q, DQ, TAU)
    finally:
        gear.set_num_threads(old)
    for k in range(N):
        one = sp.forward_dynamics(q, dq, TAU[k])
        assert np.array_equal(one.ddq, batch.ddq[k]) and np.array_equal(one.lam, batch.lam[k])


def test_native_projection_leaves_python_constraints_to_numpy():
    sysm, q = mech.rolling_ball()
    sp = sysm.with_solver("projection")
    rng = np.random.default_rng(2)
    dq = _consistent(sysm, q, rng)
    res = sp.forward_dynamics(q, dq, rng.standard_normal(sysm.model.nv))
    assert not res.stats.get("native", False) and res.success
    h = sp.hybrid_dynamics(q, dq, np.zeros(sysm.model.nv), np.zeros(sysm.model.nv),
                           [sysm.model.joint_names[0]])
    assert not h.stats.get("native", False) and h.success


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_native_projection_hybrid_equals_its_numpy_path(name):
    """The projection kernel's hybrid dynamics (projected on the free
    coordinates, tau_u from a second RNEA) against the NumPy path (the
    prescribed coordinates as extra rows, SVD): the same ddq, the same
    minimum-norm lam and the same tau, with and without f_ext, at
    accelerations the loops allow; batches, the one-state fast path and
    the general path agree bit for bit; with every joint prescribed it is
    inverse dynamics with lam = 0."""
    sysm, q = MECHS[name]()
    sp = sysm.with_solver("projection")
    model = sysm.model
    rng = np.random.default_rng(11)
    dq = np.zeros(model.nv) if name == "four_bar_collinear" else _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    ddq = sysm.forward_dynamics(q, dq, tau).ddq + 0.5 * _consistent(sysm, q, rng)
    A = sysm.constraint_jacobian(q)
    movable = [j for j in range(model.nbodies) if model.joints[j].nv]
    sets = [[j] for j in movable] + [movable[:2], movable[::2]]
    for js in sets:
        pres = np.zeros(model.nbodies, dtype=bool)
        pres[js] = True
        u = np.repeat(pres, [model.joints[i].nv for i in range(model.nbodies)])
        for fe in (None, f_ext):
            h = sp.hybrid_dynamics(q, dq, ddq, tau, pres, fe)
            assert h.stats["native"] and h.solver == "projection"
            t, d, lam, _ = sp.solver._hybrid_numpy(q, dq, ddq, tau, u, fe)
            scale = max(1.0, np.abs(t).max(), np.abs(d).max())
            assert np.array_equal(h.ddq[u], ddq[u]) and np.array_equal(h.tau[~u], tau[~u])
            assert np.abs(h.ddq - d).max() < 1e-9 * scale, (name, js)
            assert np.abs(h.tau - t).max() < 1e-9 * scale, (name, js)
            assert rel(h.lam, lam) < 1e-8, (name, js)
            assert np.abs(A.T @ (h.lam - lam)).max() < 1e-9 * scale, (name, js)
        hb = sp.hybrid_dynamics(np.tile(q, (3, 1)), np.tile(dq, (3, 1)), np.tile(ddq, (3, 1)),
                                np.tile(tau, (3, 1)), pres)
        hg = sp.hybrid_dynamics(q, dq, ddq, tau, pres, np.zeros((model.nbodies, 6)))
        hf = sp.hybrid_dynamics(q, dq, ddq, tau, pres)
        for other in (hg, hf):
            assert np.array_equal(hb.tau[0], other.tau) and np.array_equal(hb.ddq[2], other.ddq)
            assert np.array_equal(hb.lam[1], other.lam)
        assert hf.stats == hg.stats
    allp = np.ones(model.nbodies, dtype=bool)
    h = sp.hybrid_dynamics(q, dq, ddq, tau, allp, f_ext)
    assert h.stats["native"] and np.array_equal(h.ddq, ddq) and np.all(h.lam == 0.0)
    assert rel(h.tau, gear.inverse_dynamics(model, q, dq, ddq, f_ext)) < 1e-12


def test_exactly_zero_rows_get_zero_multipliers_on_both_routes():
    """Balls closing planar loops have an out-of-plane row that is exactly
    zero in A: the dense route leaves it out and the pivoted solve drops it
    from the minimum-norm completion; its multiplier is exactly zero, and
    both routes still give the NumPy minimum-norm answer."""
    sysm, q0 = mech.n_four_bar(4)
    rng = np.random.default_rng(5)
    q = sysm.assemble(sysm.model.integrate(q0, 0.05 * rng.standard_normal(sysm.model.nv)))
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(sysm.model.nv)
    A, _ = sysm._rows_numpy(q, dq)
    zero = ~np.any(A != 0.0, axis=1)
    assert zero.sum() == 4
    ref = sysm.solver._forward_numpy(q, dq, tau, None)
    for route in ("aba", "dense"):
        res = sysm.with_solver("kkt", route=route).forward_dynamics(q, dq, tau)
        assert np.all(res.lam[zero] == 0.0), route
        assert rel(res.ddq, ref[0]) < 1e-10 and rel(res.lam, ref[1]) < 1e-9, route
        assert res.stats["rank"] == A.shape[0] - 4


@pytest.mark.parametrize("seed", range(4))
def test_tree_sparse_dense_route_on_random_trees_of_every_joint_kind(seed):
    """The dense route's tree-sparse L^T L (Featherstone Sec. 6.5) on random
    branched trees with every joint kind (multi-dof joints make chains in
    the dof tree) and many closure rows: equal to the NumPy path (dense
    Cholesky, eigendecomposition) and to the articulated-body route."""
    sysm, rng = _multi_closure_system(seed, to_world=seed % 2 == 0)
    model = sysm.model
    vp = model.data.dof_parents()
    # each dof's parent: the previous dof of its joint, else the last dof
    # of the nearest ancestor joint with dofs
    for i, j in enumerate(model.joints):
        for k in range(j.nv):
            v = model._iv[i] + k
            if k:
                assert vp[v] == v - 1
            else:
                p = model.parents[i]
                while p >= 0 and model.joints[p].nv == 0:
                    p = model.parents[p]
                assert vp[v] == (-1 if p < 0 else model._iv[p] + model.joints[p].nv - 1)
    # 31 rows on ~22 dofs at a random state (inconsistent): the two routes
    # run the same pivoted solve on K and agree
    q = model.random_configuration(rng)
    dq, tau = rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    d = sysm.with_solver("kkt", route="dense").forward_dynamics(q, dq, tau)
    a = sysm.with_solver("kkt", route="aba").forward_dynamics(q, dq, tau)
    assert rel(d.ddq, a.ddq) < 1e-9 and d.stats["rank"] == a.stats["rank"]
    # a few closures (full row rank: a unique answer at any state) against
    # the NumPy path
    for _ in range(50):
        cs = [gear.LoopClosure(int(rng.integers(0, 9)), random_se3(rng), "world", random_se3(rng), kind)
              for kind in ("ball", "distance", "revolute")]
        small = gear.ConstrainedModel(model, cs)
        A = small.constraint_jacobian(q)
        if np.linalg.matrix_rank(A) == A.shape[0]:
            break
    else:
        pytest.fail("no full-rank set of closures drawn")
    f_ext = rng.standard_normal((model.nbodies, 6))
    d = small.with_solver("kkt", route="dense").forward_dynamics(q, dq, tau, f_ext)
    ddq, lam, _ = small.solver._forward_numpy(q, dq, tau, f_ext)
    assert rel(d.ddq, ddq) < 1e-9 and rel(d.lam, lam) < 1e-8


@pytest.mark.parametrize("seed", [0, 1, 2, 4])        # (3 and 6 draw a rank-deficient A)
def test_dense_route_row_pieces_on_every_tree_shape(seed):
    """The dense route keeps each row of A on its closure's two root paths
    (the first side's path, then the second's below their common
    ancestors) and solves a closure's rows together there.  Every shape
    of those pieces, on a tree with fixed joints: a closure between a body
    and its ancestor (one path inside the other), between two branches
    with common ancestors, from a body whose path is all fixed joints (no
    dofs on that side), to the world, and a joint coupler -- against the
    articulated-body route and the NumPy path."""
    from gear.testing import random_joint

    rng = np.random.default_rng(40 + seed)
    parents = [-1, 0, 1, 2, 1, -1, 5, 3, 4, 0]
    movable = [k for k in ALL_KINDS if k != "fixed"]
    kinds = [str(k) for k in rng.choice(movable, size=10)]
    kinds[2] = kinds[5] = "fixed"
    kinds[7] = kinds[8] = "revolute"
    kinds[0], kinds[1] = "free", "spherical"      # enough dofs for 14 independent rows
    model = gear.Model()
    for i, p in enumerate(parents):
        model.add_body(f"b{i}", "world" if p < 0 else p, random_joint(kinds[i], rng),
                       placement=random_se3(rng), inertia=gear.testing.random_inertia(rng),
                       joint_name=f"j{i}")
    cs = [gear.LoopClosure(3, random_se3(rng), 1, random_se3(rng), "ball"),
          gear.LoopClosure(7, random_se3(rng), 8, random_se3(rng), "revolute"),
          gear.LoopClosure(5, random_se3(rng), 9, random_se3(rng), "universal"),
          gear.LoopClosure(6, random_se3(rng), "world", random_se3(rng), "distance"),
          gear.JointCoupler("j7", "j8", -1.5, 0.2)]
    sysm = gear.ConstrainedModel(model, cs)
    q = model.random_configuration(rng)
    dq, tau = rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    d = sysm.with_solver("kkt", route="dense")
    a = sysm.with_solver("kkt", route="aba")
    ref = sysm.solver._forward_numpy(q, dq, tau, f_ext)
    rd, ra = d.forward_dynamics(q, dq, tau, f_ext), a.forward_dynamics(q, dq, tau, f_ext)
    assert rd.stats["native"] and d.solver._route == 1
    assert rel(rd.ddq, ra.ddq) < 1e-9 and rd.stats["rank"] == ra.stats["rank"] == sysm.nc
    assert rel(rd.ddq, ref[0]) < 1e-9 and rel(rd.lam, ref[1]) < 1e-8
    # the residual the kernel reports is |A ddq + dA dq|
    A, b = sysm._rows(q, dq)
    assert abs(rd.residual - np.linalg.norm(A @ rd.ddq + b)) < 1e-9 * max(1.0, rd.residual)
    # hybrid dynamics on both routes, at a consistent acceleration: a joint
    # on the ancestor closure's path, one below a fixed joint, and a coupled one
    ddq = ra.ddq
    for names in (["j1"], ["j6"], ["j7", "j3"]):
        hd = d.hybrid_dynamics(q, dq, ddq, tau, names, f_ext)
        ha = a.hybrid_dynamics(q, dq, ddq, tau, names, f_ext)
        scale = max(1.0, np.abs(ha.ddq).max(), np.abs(ha.tau).max())
        assert np.abs(hd.ddq - ha.ddq).max() < 1e-9 * scale, names
        assert np.abs(hd.tau - ha.tau).max() < 1e-9 * scale, names
    # soft constraints run the same route with every row kept
    s = sysm.with_solver("soft", stiffness=1e8)
    rs = s.forward_dynamics(q, dq, tau, f_ext)
    assert rs.stats["native"] and rel(rs.ddq, s.solver._forward_numpy(q, dq, tau, f_ext)[0]) < 1e-8


def test_projection_leaves_large_models_to_lapack():
    """Beyond 1000 velocity coordinates the projection solver takes the
    NumPy (LAPACK SVD) path, in single calls and in simulate."""
    from gear.testing import random_chain

    n = 1001
    m = random_chain(n, "revolute", rng=1)
    q = m.neutral()
    W = np.asarray(gear.forward_kinematics(m, q)[-1])
    c = gear.LoopClosure(n - 1, gear.SE3(np.eye(3), np.zeros(3)), "world",
                         gear.SE3(W[:3, :3], W[:3, 3]), "ball")
    sp = gear.ConstrainedModel(m, [c], solver="projection")
    assert not sp.solver._native_enabled()
    res = sp.forward_dynamics(q, np.zeros(n), np.zeros(n))
    assert not res.stats.get("native", False) and res.success
    assert not gear.simulate(sp, q, np.zeros(n), 2e-3, 1e-3).stats["native"]
    small, q4 = mech.four_bar()
    assert small.with_solver("projection").solver._native_enabled()


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_native_soft_equals_its_numpy_path(name):
    """The soft solver's native kernel (the dense route with K + I/stiffness
    and the damping term) against its NumPy path, with and without damping,
    redundant and singular mechanisms included (K + I/k is then as badly
    conditioned as k: the tolerance allows for it)."""
    sysm, q = MECHS[name]()
    model = sysm.model
    rng = np.random.default_rng(4)
    dq, tau = rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    for damping in (0.0, 5.0):
        ss = sysm.with_solver("soft", stiffness=1e6, damping=damping)
        res = ss.forward_dynamics(q, dq, tau, f_ext)
        assert res.stats["native"] and res.solver == "soft"
        ddq, lam, _ = ss.solver._forward_numpy(q, dq, tau, f_ext)
        assert rel(res.ddq, ddq) < 1e-8 and rel(res.lam, lam) < 1e-7, (name, damping)
    # batches equal single calls bit for bit
    N = 7
    Q, DQ, TAU = np.tile(q, (N, 1)), rng.standard_normal((N, model.nv)), rng.standard_normal((N, model.nv))
    batch = ss.forward_dynamics(Q, DQ, TAU)
    for k in range(N):
        one = ss.forward_dynamics(q, DQ[k], TAU[k])
        assert np.array_equal(one.ddq, batch.ddq[k]) and np.array_equal(one.lam, batch.lam[k])
    # hybrid dynamics runs natively too (the prescribed rows and columns of
    # M replaced by the identity), equal to the NumPy path; the one-state
    # fast path, the general one (f_ext) and a batch agree
    ddq = rng.standard_normal(model.nv)
    for j in (j for j in range(model.nbodies) if model.joints[j].nv):
        pres = np.zeros(model.nbodies, dtype=bool)
        pres[j] = True
        u = np.repeat(pres, [model.joints[i].nv for i in range(model.nbodies)])
        for fe in (None, f_ext):
            h = ss.hybrid_dynamics(q, dq, ddq, tau, pres, fe)
            assert h.stats["native"] and h.stats["factorizations"] == 2
            t, d, lam, _ = ss.solver._hybrid_numpy(q, dq, ddq, tau, u, fe)
            scale = max(1.0, np.abs(t).max(), np.abs(d).max())
            assert np.abs(h.tau - t).max() < 1e-8 * scale and np.abs(h.ddq - d).max() < 1e-8 * scale
        hb = ss.hybrid_dynamics(np.tile(q, (2, 1)), np.tile(dq, (2, 1)), np.tile(ddq, (2, 1)),
                                np.tile(tau, (2, 1)), pres)
        hg = ss.hybrid_dynamics(q, dq, ddq, tau, pres, np.zeros((model.nbodies, 6)))
        hf = ss.hybrid_dynamics(q, dq, ddq, tau, pres)
        for other in (hg, hf):
            assert np.array_equal(hb.tau[0], other.tau) and np.array_equal(hb.ddq[1], other.ddq)
        assert hf.stats == hg.stats
    # everything prescribed: the compliant forces follow from the violation
    allp = np.ones(model.nbodies, dtype=bool)
    h = ss.hybrid_dynamics(q, dq, ddq, tau, allp)
    t, d, lam, _ = ss.solver._hybrid_numpy(q, dq, ddq, tau, np.ones(model.nv, dtype=bool), None)
    assert np.array_equal(h.ddq, ddq) and rel(h.lam, lam) < 1e-9 and rel(h.tau, t) < 1e-9


def test_soft_rollouts_run_natively():
    sysm, q0 = mech.slider_crank()
    ss = sysm.with_solver("soft", stiffness=1e6, damping=20.0)
    rng = np.random.default_rng(9)
    qs = np.stack([sysm.assemble(sysm.model.integrate(q0, 0.05 * rng.standard_normal(sysm.model.nv)))
                   for _ in range(3)])
    dqs = np.stack([sysm.project_velocity(x, rng.standard_normal(sysm.model.nv)) for x in qs])
    a = gear.simulate(ss, qs, dqs, 0.2, 1e-3, stabilization=None, record_every=10)
    b = gear.simulate(ss, qs, dqs, 0.2, 1e-3, stabilization=None, record_every=10, native=False)
    assert a.stats["native"] and not b.stats["native"]
    assert np.abs(a.q - b.q).max() < 1e-10 and np.abs(a.lam - b.lam).max() < 1e-6


def test_constraint_result_fields_pickle_and_missing_fields():
    import pickle

    sysm, q = mech.four_bar()
    rng = np.random.default_rng(1)
    dq = _consistent(sysm, q, rng)
    res = sysm.forward_dynamics(q, dq, np.zeros(3))            # the native single-call path
    assert isinstance(res, gear.constraints.ConstraintResult)
    assert res.stats == {"route": "dense", "factorizations": 1, "rank": 2, "native": True} and res.success
    back = pickle.loads(pickle.dumps(res))
    assert np.array_equal(back.ddq, res.ddq) and back.stats == res.stats and back.solver == "kkt"
    inv = sysm.inverse_dynamics(q, dq, res.ddq, actuated=["crank"])
    assert inv.exact and inv.tau.shape == (3,)
    with pytest.raises(AttributeError, match="residual"):
        inv.residual
    with pytest.raises(AttributeError):
        res.tau
    r = gear.constraints.ConstraintResult(ddq=1, extra="x")
    assert r.ddq == 1 and r.extra == "x" and "extra" in repr(r)


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_native_inverse_dynamics_equals_the_numpy_path(name):
    """Closed inverse dynamics (default objective) through the native kernel
    (RNEA, the rows, the pivoted QR of A_p^T, the minimum-norm lam) against
    the NumPy path it replaces (NumPy's SVD of A_p^T): the same tau, lam and
    exactness, with the mechanism's actuators, with every joint actuated,
    with none (the free motion under tau_passive) and with f_ext; an
    unreachable ddq is inexact there too and both answer with hybrid
    dynamics.  The one-state fast path, the general path (f_ext zero) and
    a batch agree bit for bit."""
    sysm, q = MECHS[name]()
    model = sysm.model
    solver = sysm.solver
    rng = np.random.default_rng(17)
    dq = np.zeros(model.nv) if name == "four_bar_collinear" else _consistent(sysm, q, rng)
    tau_p = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    dof = sysm.mobility(q).dof
    moving = [n for i, n in enumerate(model.joint_names) if model.joints[i].nv]
    none = np.zeros(model.nbodies, dtype=bool)

    def numpy_path(ddq, a, fe):
        solver._inverse_native = lambda *args: None
        try:
            return solver.inverse(q, dq, ddq, a, tau_p, "min_constraint_force", fe)
        finally:
            del solver._inverse_native

    free = sysm.forward_dynamics(q, dq, tau_p).ddq
    reach = sysm.forward_dynamics(q, dq, rng.standard_normal(model.nv)).ddq
    cases = [(free, none), (reach, moving), (reach, moving[:max(1, dof)]),
             (rng.standard_normal(model.nv), moving[:1])]
    for ddq, act in cases:
        a = sysm._joint_dofs(act, "actuated")
        for fe in (None, f_ext):
            res = sysm.inverse_dynamics(q, dq, ddq, act, tau_passive=tau_p, f_ext=fe)
            t, lam, exact, d, stats = numpy_path(ddq, a, fe)
            assert res.exact == exact, (name, act)
            scale = max(1.0, np.abs(t).max())
            assert np.abs(res.tau - t).max() < 1e-9 * scale, (name, act)
            assert np.abs(res.ddq - d).max() < 1e-9 * max(1.0, np.abs(d).max()), (name, act)
            if exact:
                assert res.stats["native"] and np.array_equal(res.tau[~a], tau_p[~a])
                assert rel(res.lam, lam) < 1e-8, (name, act)
                assert res.stats["rank"] == stats["rank"], (name, act)
    # the fast path (no f_ext), the general one (f_ext zero) and a batch
    ddq, act = reach, moving
    fast = sysm.inverse_dynamics(q, dq, ddq, act, tau_passive=tau_p)
    gen = sysm.inverse_dynamics(q, dq, ddq, act, tau_passive=tau_p, f_ext=np.zeros((model.nbodies, 6)))
    bat = sysm.inverse_dynamics(np.tile(q, (3, 1)), np.tile(dq, (3, 1)), np.tile(ddq, (3, 1)), act,
                                tau_passive=np.tile(tau_p, (3, 1)))
    for x in (gen.tau, bat.tau[2]):
        assert np.array_equal(fast.tau, x)
    assert np.array_equal(fast.lam, gen.lam) and np.array_equal(fast.lam, bat.lam[1])
    assert fast.stats == gen.stats and fast.exact is True and fast.message == "ok"
    with pytest.raises(AttributeError):
        fast.residual


@pytest.mark.parametrize("name", ["four_bar", "stewart", "n_four_bar_10"])
def test_vectorised_numpy_inverse_batch_equals_the_native_one(name):
    """Without native rows (Python constraints) a batch of closed inverse
    dynamics takes the vectorised NumPy path (one RNEA and row evaluation
    for the batch, stacked SVD): the same answer as the native batch,
    under-actuated states included."""
    sysm, q = MECHS[name]()
    model = sysm.model
    rng = np.random.default_rng(8)
    N = 5
    dq = np.stack([_consistent(sysm, q, rng) for _ in range(N)])
    tau_p = rng.standard_normal((N, model.nv))
    ddq = np.stack([sysm.forward_dynamics(q, dq[k], tau_p[k]).ddq for k in range(N)])
    ddq[3] = rng.standard_normal(model.nv)
    none = np.zeros(model.nbodies, dtype=bool)
    Q = np.tile(q, (N, 1))
    nat = sysm.inverse_dynamics(Q, dq, ddq, none, tau_passive=tau_p)
    assert nat.stats["native"]
    sysm.solver._inverse_native = lambda *args: None
    try:
        vec = sysm.inverse_dynamics(Q, dq, ddq, none, tau_passive=tau_p)
    finally:
        del sysm.solver._inverse_native
    assert "native" not in vec.stats
    assert list(vec.exact) == list(nat.exact) == [True, True, True, False, True]
    scale = max(1.0, np.abs(nat.tau).max())
    assert np.abs(vec.tau - nat.tau).max() < 1e-9 * scale and rel(vec.lam, nat.lam) < 1e-8
    assert rel(vec.ddq, nat.ddq) < 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_native_projection_hybrid_and_inverse_on_random_trees_of_every_joint_kind(seed):
    """The projection kernel's hybrid dynamics and the closed inverse
    dynamics kernel on random trees of every joint kind closed by one
    closure of each kind (redundant rows likely): equal to their NumPy
    paths at consistent states."""
    rng = np.random.default_rng(100 + seed)
    model = random_tree(rng, nbodies=9, kinds=[k for k in ALL_KINDS if k != "fixed"])
    q = model.random_configuration(rng)
    poses = gear.forward_kinematics(model, q)
    cs = []
    for kind in sorted(KINDS):
        # frames that coincide at q (a distance closure's points 0.3 apart):
        # q is assembled, whatever the kind
        a, b = (int(x) for x in rng.choice(9, size=2, replace=False))
        Pa = random_se3(rng).homogeneous()
        W = poses[a] @ Pa
        if kind == "distance":
            W = W @ gear.SE3(p=[0.3, 0.0, 0.0]).homogeneous()
        Pb = np.linalg.solve(poses[b], W)
        cs.append(gear.LoopClosure(a, gear.SE3(Pa[:3, :3], Pa[:3, 3]), b, gear.SE3(Pb[:3, :3], Pb[:3, 3]),
                                   kind, name=f"c_{kind}"))
    sysm = gear.ConstrainedModel(model, cs)
    if sysm._rigidly_connected(a, b):
        pytest.skip("drew a closure between rigidly connected bodies")
    q = sysm.assemble(q)                  # (fixes the distance closure's length: 0.3)
    sp = sysm.with_solver("projection")
    assert np.abs(sysm.constraint_residual(q)).max() < 1e-9
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    ddq = sysm.forward_dynamics(q, dq, tau).ddq + 0.3 * _consistent(sysm, q, rng)
    moving = [j for j in range(model.nbodies) if model.joints[j].nv]
    for js in ([moving[0]], moving[1:3], moving[::3]):
        pres = np.zeros(model.nbodies, dtype=bool)
        pres[js] = True
        u = np.repeat(pres, [model.joints[i].nv for i in range(model.nbodies)])
        h = sp.hybrid_dynamics(q, dq, ddq, tau, pres)
        assert h.stats["native"]
        t, d, lam, _ = sp.solver._hybrid_numpy(q, dq, ddq, tau, u, None)
        scale = max(1.0, np.abs(t).max(), np.abs(d).max())
        assert np.abs(h.ddq - d).max() < 1e-8 * scale and np.abs(h.tau - t).max() < 1e-8 * scale, js
        assert rel(h.lam, lam) < 1e-7, js
        # inverse dynamics with those joints actuated: ddq is reachable
        names = [model.joint_names[j] for j in js]
        inv = sysm.inverse_dynamics(q, dq, h.ddq, names, tau_passive=tau)
        solver = sysm.solver
        solver._inverse_native = lambda *args: None
        try:
            t2, l2, ex2, _, _ = solver.inverse(q, dq, h.ddq, u, tau, "min_constraint_force", None)
        finally:
            del solver._inverse_native
        assert inv.exact == ex2, js
        assert np.abs(inv.tau - t2).max() < 1e-8 * scale, js
        if ex2:
            assert inv.stats["native"] and rel(inv.lam, l2) < 1e-7, js


def _baumgarte_cases():
    """(name, system) of every mechanism, the ground-tree N-four-bar (the
    sparse route), a coupled arm (coupler rows) and a random tree of every
    joint kind closed by a ball, a distance and a revolute closure."""
    out = [(n, MECHS[n]()) for n in sorted(MECHS) if n != "rolling_ball"]
    out.append(("n_four_bar_40_ground", mech.n_four_bar(40, tree="ground")))
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    j = arm.joint_names
    coupled = gear.ConstrainedModel(arm, [gear.JointCoupler(j[3], j[1], multiplier=-0.5, offset=0.2)])
    out.append(("coupled_arm", (coupled, coupled.assemble(arm.neutral(), locked=[j[1]]))))
    rng = np.random.default_rng(5)
    model = random_tree(rng, nbodies=9, kinds=[k for k in ALL_KINDS if k != "fixed"])
    for _ in range(50):            # a draw whose rows are independent (a unique answer)
        rand, q = _closed_random(model, rng)
        if np.linalg.matrix_rank(rand.constraint_jacobian(q)) == rand.nc:
            break
    else:
        raise AssertionError("no independent closures drawn")
    out.append(("random_tree", (rand, q)))
    return out


def _closed_random(model, rng):
    """A ball, a distance and a revolute closure between random bodies,
    built closed at a random ``q`` (frame B placed on frame A there)."""
    q = model.random_configuration(rng)
    poses = gear.maximal.from_reduced(model, q)
    cs = []
    for kind in ("ball", "distance", "revolute"):
        a, b = (int(x) for x in rng.choice(model.nbodies, 2, replace=False))
        # built closed at q: frame B placed on frame A there (a rod for the distance)
        pa = random_se3(rng)
        Ta = poses[a] @ pa.homogeneous()
        params = {}
        if kind == "distance":
            d = rng.uniform(0.3, 1.0, 3)
            Ta = Ta @ gear.SE3(p=d).homogeneous()
            params["distance"] = float(np.linalg.norm(d))
        pb = gear.SE3.from_matrix(np.linalg.solve(poses[b], Ta))
        cs.append(gear.LoopClosure(a, pa, b, pb, kind, **params))
    return gear.ConstrainedModel(model, cs), q


@pytest.mark.parametrize("name,case", _baumgarte_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_native_baumgarte_equals_its_python_path(name, case):
    """stabilization='baumgarte' in the native loop (one solve of A ddq =
    -(dA dq + 2 alpha A v + beta^2 g), the terms in the rows' bias) equals
    the Python loop (the hard answer plus the minimum-M-norm correction),
    from states off the manifold in position and velocity, on every route
    of the kkt solver, the projection and maximal solvers, Euler and RK4."""
    sysm, q = case
    model = sysm.model
    rng = np.random.default_rng(len(name))
    n = 3
    qs = np.stack([model.integrate(q, 1e-3 * rng.standard_normal(model.nv)) for _ in range(n)])
    dqs = np.stack([sysm.project_velocity(x, rng.standard_normal(model.nv)) for x in qs])
    dqs += 1e-3 * rng.standard_normal(dqs.shape)
    if name == "four_bar_collinear":
        dqs[:] = 0.0           # at the branch point most velocities have no motion
    if name in ("bricard", "four_bar_collinear"):
        # redundant rows: off the manifold the stabilised system has no
        # solution, and the least-squares compromise depends on the order
        # of elimination (one solve against two): start on the manifold
        qs = np.stack([sysm.assemble(x) for x in qs])
        dqs = np.stack([sysm.project_velocity(x, v) for x, v in zip(qs, dqs)])
    solvers = [("kkt", {"route": r}) for r in ("aba", "dense")] + [("projection", {})]
    if name.startswith("n_four_bar_40"):
        solvers = [("kkt", {"route": "sparse"})]
    # the maximal solver takes loop closures only; at the collinear
    # four-bar's branch point its least-squares answer to the inconsistent
    # system (one solve against the Python path's two) differs by 1e-6
    if gear._core.cholmod_available() and name not in ("coupled_arm", "four_bar_collinear"):
        solvers.append(("maximal", {}))
    for solver, opts in solvers:
        ss = sysm.with_solver(solver, **opts)
        for integ in ("euler", "rk4"):
            kw = dict(integrator=integ, stabilization="baumgarte", record_every=10, progress=False)
            a = gear.simulate(ss, qs, dqs, 0.03, 1e-3, **kw)
            b = gear.simulate(ss, qs, dqs, 0.03, 1e-3, native=False, **kw)
            assert a.stats["native"] and not b.stats["native"], (solver, integ)
            assert rel(a.q, b.q) < 1e-9 and rel(a.dq, b.dq) < 1e-9, (solver, opts, integ)
            if not (solver == "maximal" and name == "bricard"):
                # (the maximal solver's multipliers of redundant rows are one
                # exact solution, not the minimum-norm one: not unique)
                assert rel(a.lam, b.lam) < 1e-7, (solver, opts, integ)
    if name in ("bricard", "four_bar_collinear"):
        return
    # from off the manifold it pulls the joints back: far below the
    # unstabilised run's drift
    ss = sysm.with_solver("kkt")
    a = gear.simulate(ss, qs, dqs, 0.3, 1e-3, stabilization="baumgarte", record_every=100, progress=False)
    b = gear.simulate(ss, qs, dqs, 0.3, 1e-3, stabilization=None, record_every=100, progress=False)
    ra = max(np.abs(sysm.constraint_residual(x)).max() for x in a.q[:, -1])
    rb = max(np.abs(sysm.constraint_residual(x)).max() for x in b.q[:, -1])
    assert ra < max(0.2 * rb, 1e-9), (ra, rb)


def test_soft_baumgarte_stays_in_python():
    """The soft solver's Baumgarte path corrects its compliant answer with
    the hard rows: not the one solve of the native loop."""
    sysm, q = mech.four_bar()
    r = gear.simulate(sysm.with_solver("soft"), q, np.zeros(3), 0.01, 1e-3, stabilization="baumgarte",
                      progress=False)
    assert not r.stats["native"]


@pytest.mark.parametrize("name", sorted(MECHS))
def test_batched_jacobian_and_bias_equal_single_states(name):
    """constraint_jacobian / constraint_bias of a batch (the rows of every
    state in one native call where the constraints allow) give each
    state's single-call bits, Python constraints included."""
    sysm, q = MECHS[name]()
    nv = sysm.model.nv
    rng = np.random.default_rng(len(name))
    qs = np.stack([sysm.model.integrate(q, 0.1 * rng.standard_normal(nv)) for _ in range(4)])
    v = rng.standard_normal((4, nv))
    assert np.array_equal(sysm.constraint_jacobian(qs), np.stack([sysm.constraint_jacobian(x) for x in qs]))
    assert np.array_equal(sysm.constraint_bias(qs, v),
                          np.stack([sysm.constraint_bias(x, y) for x, y in zip(qs, v)]))

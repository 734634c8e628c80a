"""The kkt solver's sparse route (``route="sparse"``): ``K = A M^{-1} A^T``
assembled only where two rows' root paths meet and factorised by a
fixed-pattern sparse Cholesky (``gear/algorithms/_spchol.pxd``), against
the dense route, the articulated-body route and the NumPy path -- on
every mechanism, on both spanning trees of the N-four-bar, on random trees
of every joint kind closed by every closure kind, with redundant rows,
``f_ext``, hybrid dynamics, batches and rollouts."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import gear
from gear import _core
from gear import mechanisms as mech
from gear.constraints.closures import KINDS
from gear.testing import ALL_KINDS, random_se3, random_tree
from gear.testing import consistent_velocity as _consistent

from test_native_constraints import _multi_closure_system
from test_solvers import MECHS


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b)))


def _turned(sysm, angle=0.3):
    """The same mechanism with the world turned about x: a planar
    mechanism's out-of-plane rows become zero only up to rounding."""
    R = gear.SE3.from_rpy([angle, 0.2, 0.0])
    old = sysm.model
    model = gear.Model(gravity=R.R @ old.gravity)
    for i, name in enumerate(old.body_names):
        p = old.parents[i]
        X = R @ old.placements[i] if p < 0 else old.placements[i]
        model.add_body(name, "world" if p < 0 else old.body_names[p], old.joints[i], placement=X,
                       inertia=old.inertias[i], joint_name=old.joint_names[i])
    cs = []
    for c in sysm.constraints:
        a = c.body_a if c.body_a != "world" else "world"
        pa = R @ c.placement_a if c.body_a == "world" else c.placement_a
        pb = R @ c.placement_b if c.body_b == "world" else c.placement_b
        cs.append(gear.LoopClosure(a, pa, c.body_b, pb, c.kind))
    return gear.ConstrainedModel(model, cs)


def _routes(sysm):
    return {r: sysm.with_solver("kkt", route=r) for r in ("aba", "dense", "sparse")}


def _check_forward(sysm, q, dq, tau, f_ext, tol_lam=1e-10):
    s = _routes(sysm)
    for fe in (None, f_ext):
        rs = s["sparse"].forward_dynamics(q, dq, tau, fe)
        rd = s["dense"].forward_dynamics(q, dq, tau, fe)
        assert rs.stats["native"] and rs.stats["route"] == "sparse"
        # ddq = M^{-1}(tau - b + A^T lam): the terms that cancel set the scale
        A = sysm.constraint_jacobian(q)
        M = gear.algorithms.mass_matrix(sysm.model, q)
        scale = max(1.0, np.abs(rd.ddq).max(), np.abs(np.linalg.solve(M, A.T @ rd.lam)).max())
        assert np.abs(rs.ddq - rd.ddq).max() < 1e-10 * scale
        assert rel(rs.lam, rd.lam) < tol_lam
        assert rs.stats["rank"] == rd.stats["rank"]
        assert rs.residual < 1e-9 * max(1.0, np.abs(rs.ddq).max())
        # the invariant every solver shares: A^T lam
        assert rel(A.T @ rs.lam, A.T @ rd.lam) < 1e-10
    return rs


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_sparse_route_equals_dense_route_on_every_mechanism(name):
    sysm, q = MECHS[name]()
    model = sysm.model
    rng = np.random.default_rng(3)
    dq = np.zeros(model.nv) if name == "four_bar_collinear" else _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    _check_forward(sysm, q, dq, tau, f_ext)
    # the NumPy path (dense M, eigendecomposition of K): minimum-norm lam
    rs = sysm.with_solver("kkt", route="sparse").forward_dynamics(q, dq, tau, f_ext)
    ddq, lam, _ = sysm.solver._forward_numpy(q, dq, tau, f_ext)
    assert rel(rs.ddq, ddq) < 1e-9 and rel(rs.lam, lam) < 1e-8


@pytest.mark.parametrize("tree", ["ground", "chain"])
@pytest.mark.parametrize("n", [1, 2, 7, 30])
def test_sparse_route_on_both_spanning_trees(tree, n):
    sysm, q = mech.n_four_bar(n, tree=tree)
    rng = np.random.default_rng(n)
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(sysm.model.nv)
    f_ext = rng.standard_normal((sysm.model.nbodies, 6))
    _check_forward(sysm, q, dq, tau, f_ext)


@pytest.mark.parametrize("n", [3, 12])
def test_rows_dependent_up_to_rounding_cost_no_completion(n):
    """A planar mechanism turned out of its plane: the out-of-plane row of
    every ball is zero only up to rounding.  The sparse route keeps its
    multiplier at zero without the completion (a negligible row) and agrees
    with the dense route's minimum-norm answer; built in its plane (rows
    exactly zero) the answer is the same mechanism's."""
    flat, q = mech.n_four_bar(n, tree="ground")
    sysm = _turned(flat)
    rng = np.random.default_rng(5)
    assert np.abs(sysm.constraint_residual(q)).max() < 1e-12
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(sysm.model.nv)
    rs = _check_forward(sysm, q, dq, tau, rng.standard_normal((sysm.model.nbodies, 6)))
    assert rs.stats["rank"] == 2 * n
    # the same motion as the flat mechanism (the same joint coordinates)
    dq = _consistent(flat, q, rng)
    a = sysm.with_solver("kkt", route="sparse").forward_dynamics(q, dq, np.zeros(flat.model.nv))
    b = flat.with_solver("kkt", route="sparse").forward_dynamics(q, dq, np.zeros(flat.model.nv))
    assert rel(a.ddq, b.ddq) < 1e-10


def _closed_at(seed):
    """A random tree of every joint kind and one closure of each kind,
    each built closed at a random configuration ``q`` (frame B placed on
    frame A there): many dependent rows, and a consistent system, whose
    answer does not depend on the order of elimination.  (At a state
    that violates redundant rows the least-squares compromise depends on
    which rows the pivoting calls dependent: the dense and sparse routes
    eliminate in different orders.)"""
    rng = np.random.default_rng(seed)
    model = random_tree(rng, nbodies=9, kinds=[k for k in ALL_KINDS if k != "fixed"])
    q = model.random_configuration(rng)
    poses = gear.maximal.from_reduced(model, q)
    cs = []
    for kind in sorted(KINDS):
        a = int(rng.integers(0, 9))
        b = int(rng.integers(0, 9))
        while b == a:
            b = int(rng.integers(0, 9))
        pa = random_se3(rng)
        Ta = poses[a] @ pa.homogeneous()
        params = {}
        if kind == "distance":                      # a rod: B away from A
            d = rng.uniform(0.3, 1.0, 3)
            Ta = Ta @ gear.SE3(p=d).homogeneous()
            params["distance"] = float(np.linalg.norm(d))
        pb = gear.SE3.from_matrix(np.linalg.solve(poses[b], Ta))
        cs.append(gear.LoopClosure(a, pa, b, pb, kind, name=f"c_{kind}", **params))
    return gear.ConstrainedModel(model, cs), q, rng


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 11])
def test_sparse_route_on_random_trees_with_every_closure_kind(seed):
    """Every joint kind, one closure of each kind (many dependent rows: the
    minimum-norm completion) at a closed state with a consistent velocity.
    Some of these draws are locked and ill-conditioned (seed 11: ``K``'s
    smallest non-zero eigenvalue 2e-7 of its largest): there ``ddq`` is
    compared on the scale of the forces that cancel in it, and the
    minimum-norm ``lam`` -- whose null-space part is conditioned by the
    completion -- to 1e-7 (``A^T lam`` to 1e-10).  Seed 5 is left out: it
    sits on the rank decision's threshold, where moving ``q`` by one
    rounding (scaling it by 1 + k 1e-15) takes the sparse route's rank
    between 22 and 23 and with it the minimum-norm ``lam``."""
    sysm, q, rng = _closed_at(seed)
    model = sysm.model
    assert np.abs(sysm.constraint_residual(q)).max() < 1e-10
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    rs = _check_forward(sysm, q, dq, tau, f_ext, tol_lam=1e-7)
    assert rs.stats["rank"] < sysm.nc                  # redundant rows
    ra = sysm.with_solver("kkt", route="aba").forward_dynamics(q, dq, tau, f_ext)
    scale = max(1.0, np.abs(rs.lam).max())
    assert np.abs(rs.ddq - ra.ddq).max() < 1e-8 * scale and rs.stats["rank"] == ra.stats["rank"]
    ddq, lam, _ = sysm.solver._forward_numpy(q, dq, tau, f_ext)
    assert np.abs(rs.ddq - ddq).max() < 1e-9 * scale and rel(rs.lam, lam) < 1e-7


@pytest.mark.parametrize("seed", range(3))
def test_sparse_route_at_states_that_violate_the_rows(seed):
    """At a random state the rows are violated and, being redundant, have
    no exact multiplier: each route returns its pivoted compromise (which
    rows count as dependent follows the order of elimination), but with
    the same rank, and exact answers where the rows are independent."""
    sysm, rng = _multi_closure_system(seed, to_world=seed % 2 == 1)
    model = sysm.model
    q = model.random_configuration(rng)
    dq, tau = rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    rs = sysm.with_solver("kkt", route="sparse").forward_dynamics(q, dq, tau)
    rd = sysm.with_solver("kkt", route="dense").forward_dynamics(q, dq, tau)
    assert rs.stats["rank"] == rd.stats["rank"]
    assert np.all(np.isfinite(rs.ddq)) and np.all(np.isfinite(rs.lam))


def test_hybrid_dynamics_and_batches_on_the_sparse_route():
    sysm, q = mech.n_four_bar(6, tree="ground")
    model = sysm.model
    rng = np.random.default_rng(9)
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    s = _routes(sysm)
    ddq = s["aba"].forward_dynamics(q, dq, rng.standard_normal(model.nv)).ddq
    for names in ([model.joint_names[0]], model.joint_names[1:3], [model.joint_names[-1]]):
        for fe in (None, f_ext):
            hs = s["sparse"].hybrid_dynamics(q, dq, ddq, tau, names, fe)
            hd = s["dense"].hybrid_dynamics(q, dq, ddq, tau, names, fe)
            scale = max(1.0, np.abs(hd.ddq).max(), np.abs(hd.tau).max())
            assert np.abs(hs.ddq - hd.ddq).max() < 1e-10 * scale, names
            assert np.abs(hs.tau - hd.tau).max() < 1e-10 * scale, names
            assert rel(hs.lam, hd.lam) < 1e-9
            assert hs.stats["route"] == "sparse"
    # batches (on every thread) equal single calls bit for bit
    N = 5
    Q = np.tile(q, (N, 1))
    dQ = np.stack([_consistent(sysm, q, rng) for _ in range(N)])
    T = rng.standard_normal((N, model.nv))
    batch = s["sparse"].forward_dynamics(Q, dQ, T)
    assert batch.stats["route"] == "sparse"
    for k in range(N):
        one = s["sparse"].forward_dynamics(Q[k], dQ[k], T[k])
        assert np.array_equal(batch.ddq[k], one.ddq) and np.array_equal(batch.lam[k], one.lam)
    hb = s["sparse"].hybrid_dynamics(Q, dQ, np.tile(ddq, (N, 1)), T, names)
    for k in range(N):
        one = s["sparse"].hybrid_dynamics(Q[k], dQ[k], ddq, T[k], names)
        assert np.array_equal(hb.ddq[k], one.ddq) and np.array_equal(hb.tau[k], one.tau)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_rollouts_on_the_sparse_route_equal_the_dense_route(integrator):
    sysm, q = mech.n_four_bar(5, tree="ground")
    rng = np.random.default_rng(2)
    dq = _consistent(sysm, q, rng)
    runs = [gear.simulate(sysm.with_solver("kkt", route=r), q, dq, 0.05, 1e-3, integrator=integrator)
            for r in ("dense", "sparse")]
    assert rel(runs[1].q, runs[0].q) < 1e-10 and rel(runs[1].dq, runs[0].dq) < 1e-10
    assert rel(runs[1].lam, runs[0].lam) < 1e-8


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_projected_rollouts_on_the_sparse_route_never_form_dense_A(integrator):
    """The projection of a rollout on the sparse route (the start 1e-3 off
    the rows, then every step) is the route's own solves: Gauss-Newton's
    minimum-norm step ``A^T (A A^T)^+ g`` with the unit mass matrix on the
    route's pattern, the velocity's ``M^-1 A^T K^+ A v`` with ``M`` -- the
    same states as the dense route's projection, which forms ``A`` and
    ``A A^T`` dense (cubic in the loops: 11 s a step at N = 1000, where
    this takes milliseconds)."""
    sysm, q = mech.n_four_bar(30, tree="ground")
    rng = np.random.default_rng(5)
    qo = q + 1e-3 * rng.standard_normal(q.shape)
    dq = rng.standard_normal(sysm.model.nv)
    runs = [gear.simulate(sysm.with_solver("kkt", route=r), qo, dq, 0.03, 1e-3, integrator=integrator,
                          stabilization="projection", progress=False) for r in ("dense", "sparse")]
    assert runs[1].stats["solver"] == "kkt" and sysm.with_solver("kkt", route="sparse").solver.route == "sparse"
    assert rel(runs[1].q, runs[0].q) < 1e-12 and rel(runs[1].dq, runs[0].dq) < 1e-12
    assert rel(runs[1].lam, runs[0].lam) < 1e-10
    # every frame on the rows: positions to the projection's 1e-12, velocities to rounding
    assert max(np.abs(sysm.constraint_residual(x)).max() for x in runs[1].q) <= 1e-12
    A = np.stack([sysm.constraint_jacobian(x) for x in runs[1].q])
    assert np.abs(np.einsum("tij,tj->ti", A, runs[1].dq)).max() <= 1e-12 * np.abs(runs[1].dq).max()


def test_projected_sparse_rollouts_batch_and_threads_give_single_runs():
    sysm, q = mech.n_four_bar(12, tree="ground")
    s = sysm.with_solver("kkt", route="sparse")
    rng = np.random.default_rng(3)
    Q = np.array([q + 1e-3 * rng.standard_normal(q.shape) for _ in range(3)])
    dQ = rng.standard_normal((3, sysm.model.nv))
    before = gear.get_num_threads()
    try:
        gear.set_num_threads(2)
        batch = gear.simulate(s, Q, dQ, 0.01, 1e-3, integrator="rk4", progress=False)
        gear.set_num_threads(1)
        for k in range(3):
            one = gear.simulate(s, Q[k], dQ[k], 0.01, 1e-3, integrator="rk4", progress=False)
            assert np.array_equal(one.q, batch.q[k]) and np.array_equal(one.dq, batch.dq[k])
    finally:
        gear.set_num_threads(before)


def test_soft_rows_on_the_sparse_pattern():
    """The soft solver's (K + cfm I) on the sparse pattern: the same answer
    as its dense route."""
    sysm, q = mech.n_four_bar(4, tree="ground")
    rng = np.random.default_rng(4)
    dq, tau = _consistent(sysm, q, rng), rng.standard_normal(sysm.model.nv)
    soft = sysm.with_solver("soft", stiffness=1e6)
    nd = sysm._native(soft.solver.options.get("rcond", 1e-10), cfm=1e-6, fresh=True)
    from gear.constraints.sparse import KKTPattern

    nd.attach_sparse(sysm._md, KKTPattern(sysm.model, nd).plan())
    ref = sysm._native(1e-10, cfm=1e-6)
    out = []
    for data in (ref, nd):
        ddq = np.zeros((1, sysm.model.nv))
        lam, info, st = np.zeros((1, sysm.nc)), np.zeros((1, 2)), np.zeros(1, dtype=np.int32)
        _core.closed_dynamics(sysm._md, data, q[None], dq[None], ddq, tau[None].copy(), None, None,
                              lam, info, st, 1, 1)
        assert st[0] == 0
        out.append((ddq[0], lam[0]))
    assert rel(out[1][0], out[0][0]) < 1e-10 and rel(out[1][1], out[0][1]) < 1e-10


def test_too_many_dependent_rows_is_a_clear_error():
    sysm, q, rng = _closed_at(1)
    dq, tau = _consistent(sysm, q, rng), rng.standard_normal(sysm.model.nv)
    assert sysm.with_solver("kkt", route="sparse").forward_dynamics(q, dq, tau).stats["rank"] < sysm.nc
    s = sysm.with_solver("kkt", route="sparse")          # a plan that completes no row
    nd = sysm._native(1e-10, fresh=True)
    nd.attach_sparse(sysm._md, s.solver._pattern(nd).plan(nnmax=0))
    s.solver._sparse_nd = nd
    with pytest.raises(np.linalg.LinAlgError, match="route='dense'"):
        s.forward_dynamics(q, dq, tau)


def test_auto_route_picks_by_the_tree():
    """route='auto' takes the sparse route where K is banded (the ground
    tree at scale), never where K is dense (the deep chain), and the dense
    route on small mechanisms; the choice is in the stats."""
    big, q = mech.n_four_bar(60, tree="ground")
    assert big.with_solver("kkt").solver.route == "sparse"
    chain, _ = mech.n_four_bar(60, tree="chain")
    assert chain.with_solver("kkt").solver.route != "sparse"
    # the chain's rows near the root are short: counted by the depths on
    # their paths, dense stays cheaper than aba here (measured 1.6x at N = 100)
    chain, _ = mech.n_four_bar(100, tree="chain")
    assert chain.with_solver("kkt").solver.route == "dense"
    small, q4 = mech.four_bar()
    s = small.with_solver("kkt")
    assert s.solver.route == "dense"
    assert s.forward_dynamics(q4, np.zeros(3), np.zeros(3)).stats["route"] == "dense"
    assert set(s.solver.route_costs()) >= {"aba", "dense"}


def _solve_warnings(sysm, q, **kw):
    import warnings

    z = np.zeros(sysm.model.nv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sysm.forward_dynamics(q, z, z)
        first = list(caught)
        sysm.forward_dynamics(q, z, z)
    return first, caught[len(first):]


def test_cubic_reduced_coordinates_warn_once_at_the_first_solve():
    """Where every route factorises a full K (loops closing across the
    chain tree at N = 330: ~0.1 s a solve), the first solve warns once,
    naming the caller's line and the linear ways out; the ground tree, an
    explicit route and a system only turned into maximal coordinates do
    not warn."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")           # nothing at construction
        chain, q = mech.n_four_bar(330, tree="chain")
        ground, qg = mech.n_four_bar(330, tree="ground")
        gear.MaximalModel(mech.n_four_bar(330, tree="chain")[0])
    first, later = _solve_warnings(chain, q)
    assert [w.category for w in first] == [gear.PerformanceWarning] and later == []
    assert issubclass(gear.PerformanceWarning, UserWarning)
    msg = str(first[0].message)
    assert "990 loop rows" in msg and "tree='ground'" in msg and "gear.MaximalModel" in msg
    assert first[0].filename == __file__
    assert _solve_warnings(ground, qg) == ([], [])
    assert _solve_warnings(chain.with_solver("kkt", route="aba"), q) == ([], [])
    # gear.simulate's native rollouts solve too
    with pytest.warns(gear.PerformanceWarning):
        gear.simulate(mech.n_four_bar(330, tree="chain")[0], q, np.zeros(chain.model.nv), 1e-3, 1e-3,
                      stabilization=None, integrator="euler")


def test_sparse_solver_pickles():
    sysm, q = mech.n_four_bar(3, tree="ground")
    s = sysm.with_solver("kkt", route="sparse")
    tau = np.ones(sysm.model.nv)
    a = s.forward_dynamics(q, np.zeros(sysm.model.nv), tau)
    b = pickle.loads(pickle.dumps(s)).forward_dynamics(q, np.zeros(sysm.model.nv), tau)
    assert np.array_equal(a.ddq, b.ddq)


@pytest.mark.parametrize("seed", range(6))
def test_symbolic_factorisation_is_the_factors_pattern(seed):
    """``gear._core.sparse_symbolic`` against the pattern of a dense
    Cholesky factor of a random SPD matrix with that pattern (no
    cancellation: random values), and its row lists against the columns."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    P = sp.random(n, n, density=float(rng.uniform(0.02, 0.3)), random_state=seed, format="csr")
    P = ((P + P.T) != 0).astype(float)
    A = (P.multiply(rng.uniform(0.1, 1.0, size=(n, n)))).toarray()
    A = A + A.T + np.diag(np.abs(A).sum(axis=1) * 2 + 1)
    L = np.linalg.cholesky(A)
    low = sp.csr_matrix(np.tril(P.toarray(), -1))
    Lp, Li, Rp, Rk, Rpos = _core.sparse_symbolic(n, low.indptr.astype(np.int32),
                                                 low.indices.astype(np.int32))
    pattern = np.zeros((n, n), dtype=bool)
    for j in range(n):
        rows = Li[Lp[j]:Lp[j + 1]]
        assert rows[0] == j and np.all(np.diff(rows) > 0)
        pattern[rows, j] = True
    assert np.array_equal(pattern, np.abs(L) > 1e-14 * np.abs(L).max())
    for j in range(n):
        for k, pos in zip(Rk[Rp[j]:Rp[j + 1]], Rpos[Rp[j]:Rp[j + 1]]):
            assert k < j and Li[pos] == j and Lp[k] <= pos < Lp[k + 1]
        assert len(Rk[Rp[j]:Rp[j + 1]]) == pattern[j, :j].sum()


def test_rows_left_out_of_the_plan_are_checked_and_replanned():
    """The plan leaves out rows of A that were zero at two random
    configurations (a planar mechanism's out-of-plane rows); every call
    checks they still are.  A plan that left out a row which is not zero
    (forced here) is rebuilt with every row, and the answer is the dense
    route's."""
    from gear.constraints.sparse import KKTPattern

    sysm, q = mech.n_four_bar(4, tree="ground")
    rng = np.random.default_rng(8)
    dq, tau = _consistent(sysm, q, rng), rng.standard_normal(sysm.model.nv)
    s = sysm.with_solver("kkt", route="sparse")
    keep = s.solver._structural_rows()
    assert keep.sum() == 2 * 4 and sysm.nc == 3 * 4          # the out-of-plane rows left out
    ref = sysm.with_solver("kkt", route="dense").forward_dynamics(q, dq, tau)
    assert rel(s.forward_dynamics(q, dq, tau).ddq, ref.ddq) < 1e-12
    s2 = sysm.with_solver("kkt", route="sparse")
    wrong = keep.copy()
    wrong[np.flatnonzero(keep)[0]] = False
    s2.solver._kpattern = KKTPattern(sysm.model, sysm._native(1e-10), keep=wrong)
    out = s2.forward_dynamics(q, dq, tau)
    assert rel(out.ddq, ref.ddq) < 1e-12 and rel(out.lam, ref.lam) < 1e-10
    assert s2.solver._prune is False and s2.solver._kpattern.keep.all()
    batch = s2.forward_dynamics(np.tile(q, (3, 1)), np.tile(dq, (3, 1)), np.tile(tau, (3, 1)))
    assert np.array_equal(batch.ddq[0], out.ddq)


def _inverse_cases(sysm, q, rng):
    model = sysm.model
    dq = _consistent(sysm, q, rng)
    ddq = sysm.forward_dynamics(q, dq, rng.standard_normal(model.nv)).ddq
    movable = [n for n, j in zip(model.joint_names, model.joints) if j.nv]
    sets = [movable[:1], movable[:2], movable[-1:], movable]
    return dq, ddq, sets


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball")
                         + ["ground_7", "chain_5"])
def test_inverse_dynamics_on_the_sparse_route(name):
    """Closed inverse dynamics (Kim eqs. 56-64, minimum-norm constraint
    force) through the normal equations of A_p^T lam = e on a sparse
    factor, against the dense route's pivoted QR: every mechanism, several
    actuated sets (exact ones and under-actuated ones, which fall back to
    hybrid dynamics in both), with f_ext, one state (the allocation-light
    path), the general path and batches."""
    if name == "ground_7":
        sysm, q = mech.n_four_bar(7, tree="ground")
    elif name == "chain_5":
        sysm, q = mech.n_four_bar(5)
    else:
        sysm, q = MECHS[name]()
    rng = np.random.default_rng(12)
    if name == "four_bar_collinear":
        dq, ddq = np.zeros(sysm.model.nv), np.zeros(sysm.model.nv)
        sets = [sysm.model.joint_names[:1]]
    else:
        dq, ddq, sets = _inverse_cases(sysm, q, rng)
    f_ext = rng.standard_normal((sysm.model.nbodies, 6))
    d = sysm.with_solver("kkt", route="dense")
    s = sysm.with_solver("kkt", route="sparse")
    if name == "ground_7":                          # A^T A sparse: the sparse inverse runs
        assert s.solver._native_data().sparse_inverse is not None
    for act in sets:
        for fe in (None, f_ext):
            rd = d.inverse_dynamics(q, dq, ddq, act, f_ext=fe)
            rs = s.inverse_dynamics(q, dq, ddq, act, f_ext=fe)
            assert rs.exact == rd.exact, (name, act)
            scale = max(1.0, np.abs(rd.tau).max(), np.abs(rd.lam).max())
            assert np.abs(rs.tau - rd.tau).max() < 1e-10 * scale, (name, act)
            assert np.abs(rs.lam - rd.lam).max() < 1e-9 * scale, (name, act)
            if rd.exact:
                assert rs.stats["rank"] == rd.stats["rank"]
        # a batch equals single calls
        B = s.inverse_dynamics(np.tile(q, (3, 1)), np.tile(dq, (3, 1)), np.tile(ddq, (3, 1)), act)
        one = s.inverse_dynamics(q, dq, ddq, act)
        assert np.array_equal(B.tau[2], one.tau) and np.array_equal(B.lam[2], one.lam)


@pytest.mark.parametrize("seed", range(4))
def test_inverse_dynamics_on_random_trees_with_every_closure_kind(seed):
    sysm, q, rng = _closed_at(seed)
    dq, ddq, sets = _inverse_cases(sysm, q, rng)
    for act in sets:
        rd = sysm.with_solver("kkt", route="dense").inverse_dynamics(q, dq, ddq, act)
        rs = sysm.with_solver("kkt", route="sparse").inverse_dynamics(q, dq, ddq, act)
        assert rs.exact == rd.exact
        scale = max(1.0, np.abs(rd.tau).max(), np.abs(rd.lam).max())
        assert np.abs(rs.tau - rd.tau).max() < 1e-9 * scale
        # A^T lam, the force the loops carry, is unique
        A = sysm.constraint_jacobian(q)
        assert np.abs(A.T @ (rs.lam - rd.lam)).max() < 1e-9 * scale

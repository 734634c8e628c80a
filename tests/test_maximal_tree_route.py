"""The maximal solver's tree route (Baraff's tree-ordered factorisation,
``gear/maximal/_tree_route.pxd``) against its CHOLMOD route, the reduced
solvers and itself in batches and rollouts."""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.maximal.tree import choose_route, route_costs, tree_plan

from test_maximal_solver import _mechanism_state, random_closed, rel
from test_solvers import MECHS

pytestmark = pytest.mark.skipif(not gear._core.cholmod_available(),
                                reason="the native maximal kernel needs gear built with CHOLMOD")


def _both(sysm):
    return sysm.with_solver("maximal", route="tree"), sysm.with_solver("maximal", route="cholmod")


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_tree_route_equals_the_cholmod_route(name):
    """The same ddq and loop forces A^T lam to 1e-10 on every mechanism:
    redundant rows (planar loops closed by balls), the collinear four-bar
    at its branch point (no exact solution), prismatic and spherical
    joints, loads."""
    sysm, q, dq, tau, f_ext, A, _ = _mechanism_state(name, 5)
    tr, ch = _both(sysm)
    for fe in (None, f_ext):
        a, b = tr.forward_dynamics(q, dq, tau, fe), ch.forward_dynamics(q, dq, tau, fe)
        assert a.stats["route"] == "tree" and b.stats["route"] == "cholmod"
        assert rel(a.ddq, b.ddq) < 1e-10, name
        assert rel(A.T @ a.lam, A.T @ b.lam) < 1e-10, name
        assert a.residual < 1e-9 * max(1.0, np.abs(a.ddq).max())


@pytest.mark.parametrize("seed", range(8))
def test_tree_route_on_random_trees_of_every_joint_kind(seed):
    """Multi-dof joints (an n x n pivot: universal, planar, spherical),
    helical joints, a floating base (a free joint passes nothing on), and
    closures of every kind; an open tree is ABA."""
    sysm, q, rng = random_closed(seed)
    model = sysm.model
    dq = gear.testing.consistent_velocity(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    tr, ch = _both(sysm)
    A = sysm.constraint_jacobian(q)
    a, b = tr.forward_dynamics(q, dq, tau, f_ext), ch.forward_dynamics(q, dq, tau, f_ext)
    assert rel(a.ddq, b.ddq) < 1e-10 and rel(A.T @ a.lam, A.T @ b.lam) < 1e-10
    tree = gear.ConstrainedModel(model, []).with_solver("maximal", route="tree")
    dq = rng.standard_normal(model.nv)
    assert rel(tree.forward_dynamics(q, dq, tau, f_ext).ddq,
               gear.forward_dynamics(model, q, dq, tau, f_ext)) < 1e-10


@pytest.mark.parametrize("N,tree", [(10, "ground"), (10, "chain"), (30, "ground")])
def test_tree_route_on_the_n_four_bar_and_the_choice(N, tree):
    """Both spanning trees of the N-four-bar; "auto" takes the tree route
    on the ground tree and CHOLMOD on the chain, where every loop row's
    path runs to the root."""
    sysm, q = mech.n_four_bar(N, tree=tree)
    rng = np.random.default_rng(N)
    dq = sysm.project_velocity(q, rng.standard_normal(sysm.model.nv))
    tau = rng.standard_normal(sysm.model.nv)
    tr, ch = _both(sysm)
    a, b = tr.forward_dynamics(q, dq, tau), ch.forward_dynamics(q, dq, tau)
    ref = sysm.forward_dynamics(q, dq, tau)
    assert rel(a.ddq, b.ddq) < 1e-10 and rel(a.ddq, ref.ddq) < 1e-8
    auto = sysm.with_solver("maximal").forward_dynamics(q, dq, tau)
    assert auto.stats["route"] == ("tree" if tree == "ground" else "cholmod")
    costs = route_costs(tr.solver.maximal, tr.solver._nd.maximal)
    assert (costs[0] <= costs[1]) == (tree == "ground")


def test_tree_route_refines_only_where_a_dependent_row_takes_force():
    """Balls closing planar loops leave one row each that no wrench of the
    tree loads (out of the plane): K_L is factorised as it is, once, and
    those rows' multipliers are zero, the minimum-norm ones (CHOLMOD's
    route's to 1e-10).  Bricard's loop has a dependent row that does take
    force: there the tree route factorises K_L + beta I and refines (more
    than one factorisation), with the same loop forces."""
    sysm, q = mech.n_four_bar(10, tree="ground")
    rng = np.random.default_rng(0)
    dq = sysm.project_velocity(q, rng.standard_normal(sysm.model.nv))
    tau = rng.standard_normal(sysm.model.nv)
    tr, ch = _both(sysm)
    a, b = tr.forward_dynamics(q, dq, tau), ch.forward_dynamics(q, dq, tau)
    A = sysm.constraint_jacobian(q)
    assert a.stats["factorizations"] == 1
    assert np.count_nonzero(a.lam == 0.0) == A.shape[0] - np.linalg.matrix_rank(A) == 10
    assert rel(a.lam, b.lam) < 1e-10 and rel(a.ddq, b.ddq) < 1e-10
    sysm, q, dq, tau, f_ext, A, _ = _mechanism_state("bricard", 5)
    tr, ch = _both(sysm)
    a, b = tr.forward_dynamics(q, dq, tau), ch.forward_dynamics(q, dq, tau)
    assert np.linalg.matrix_rank(A) < A.shape[0] and a.stats["factorizations"] > 1
    assert rel(a.ddq, b.ddq) < 1e-10 and rel(A.T @ a.lam, A.T @ b.lam) < 1e-10


def test_tree_plan_visits_and_pairs():
    """The plan of the four-bar (a chain of three bodies, one closure of
    three rows between the last body and the ground... or the first):
    every visit's parent visit is the same row at the parent body."""
    sysm, q = mech.four_bar()
    ms = sysm.with_solver("maximal").solver.maximal
    arrays, stats = tree_plan(ms)
    vptr, vrow, vpar = arrays["vptr"], arrays["vrow"], arrays["vpar"]
    body = np.repeat(np.arange(ms.nb), np.diff(vptr))
    for v in range(stats["visits"]):
        if vpar[v] >= 0:
            assert vrow[vpar[v]] == vrow[v] and body[vpar[v]] == ms.parents[body[v]]
        else:
            assert ms.parents[body[v]] < 0
    # every loop row visits each ancestor of its bodies once
    for l in range(ms.nL):
        on = set()
        for k in (ms._la[l], ms._lb[l]):
            while k >= 0:
                on.add(int(k))
                k = ms.parents[k]
        assert sorted(body[vrow == l]) == sorted(on)
    assert stats["pairs"] == sum(c * (c + 1) // 2 for c in np.diff(vptr))


def test_tree_route_batches_and_rollouts():
    """A batch on two threads gives each state's single call, bit for bit;
    the native rollout with the tree route ends within rounding of the
    CHOLMOD route's, and of kkt's."""
    sysm, q = mech.n_four_bar(6, tree="ground")
    rng = np.random.default_rng(3)
    nv = sysm.model.nv
    qs = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(nv))) for _ in range(40)])
    dqs = np.stack([sysm.project_velocity(x, rng.standard_normal(nv)) for x in qs])
    taus = rng.standard_normal((40, nv))
    tr, ch = _both(sysm)
    old = gear.get_num_threads()
    gear.set_num_threads(2)
    try:
        batch = tr.forward_dynamics(qs, dqs, taus)
    finally:
        gear.set_num_threads(old)
    for k in (0, 17, 39):
        one = tr.forward_dynamics(qs[k], dqs[k], taus[k])
        assert np.array_equal(batch.ddq[k], one.ddq) and np.array_equal(batch.lam[k], one.lam)
    r_tree = gear.simulate(tr, qs[:4], dqs[:4], 0.05, 1e-3, integrator="rk4", progress=False)
    r_chol = gear.simulate(ch, qs[:4], dqs[:4], 0.05, 1e-3, integrator="rk4", progress=False)
    r_kkt = gear.simulate(sysm, qs[:4], dqs[:4], 0.05, 1e-3, integrator="rk4", progress=False)
    assert r_tree.stats["native"]
    assert np.abs(r_tree.q - r_chol.q).max() < 1e-11 and np.abs(r_tree.q - r_kkt.q).max() < 1e-11


def test_hybrid_dynamics_keeps_the_cholmod_route():
    sysm, q, dq, tau, f_ext, A, rng = _mechanism_state("four_bar", 2)
    tr = sysm.with_solver("maximal", route="tree")
    pres = np.zeros(sysm.model.nbodies, dtype=bool)
    pres[0] = True
    ddq_p = sysm.forward_dynamics(q, dq, tau).ddq
    h1 = sysm.hybrid_dynamics(q, dq, ddq_p, tau, pres)
    h2 = tr.hybrid_dynamics(q, dq, ddq_p, tau, pres)
    assert rel(h2.ddq, h1.ddq) < 1e-8 and rel(h2.tau, h1.tau) < 1e-8


def test_bad_route_is_named():
    sysm, _ = mech.four_bar()
    with pytest.raises(ValueError, match="route must be 'auto', 'tree' or 'cholmod'"):
        sysm.with_solver("maximal", route="fast")
    assert choose_route(*(lambda s: (s.solver.maximal, s.solver._native_data().maximal))(
        sysm.with_solver("maximal"))) == "tree"

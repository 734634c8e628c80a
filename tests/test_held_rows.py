"""Rows redundant on the constraint manifold are held dependent for a whole
integrator step (``ConstrainedModel._stage_dynamics``, ``_rollout.pxd``'s
``hold_rows``): the four-bar with a redundant distance rod must move as
the four-bar without it."""
import numpy as np
import pytest

import gear
from gear.mechanisms import five_bar, four_bar
from gear.spatial import SE3


def _with_rod():
    plain, q0 = four_bar()
    # the coupler's tip stays 0.4 m (the rocker) from the rocker's ground
    # pivot on the manifold: a row redundant there, independent off it
    rod = gear.LoopClosure("coupler", SE3(p=[0.5, 0, 0]), "world", SE3(p=[0.6, 0, 0]), "distance",
                           name="rod", distance=0.4)
    return plain, gear.ConstrainedModel(plain.model, constraints=[plain.constraints[0], rod]), q0


@pytest.mark.parametrize("solver,options", [("kkt", {"route": "aba"}), ("kkt", {"route": "dense"}),
                                            ("kkt", {"route": "sparse"}), ("projection", {})])
@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("integrator", ["rk4", "euler"])
def test_redundant_rod_leaves_the_motion_unchanged(solver, options, native, integrator):
    plain, rodded, q0 = _with_rod()
    plain, rodded = plain.with_solver(solver, **options), rodded.with_solver(solver, **options)
    assert rodded.mobility(q0).redundant == [1, 3]
    dq0 = plain.project_velocity(q0, np.array([25.0, 0.0, 0.0]))
    # dt = 5 ms: RK4's stages, and the state before the projection, are
    # 1e-4 to 1e-3 off the rows, where the rod's row is independent (rank 3
    # against 2 at the step's start): without the held rows RK4 stops with
    # non-finite states, and Euler's Gauss-Newton moves the state 0.1 rad
    # along the mechanism's motion
    a = gear.simulate(plain, q0, dq0, 0.5, 5e-3, integrator=integrator, native=native, progress=False)
    b = gear.simulate(rodded, q0, dq0, 0.5, 5e-3, integrator=integrator, native=native, progress=False)
    np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(b.dq, a.dq, rtol=0, atol=1e-9)


def test_stage_dynamics_hold_the_rows_found_at_the_start():
    plain, rodded, q0 = _with_rod()
    dq0 = plain.project_velocity(q0, np.array([25.0, 0.0, 0.0]))[None]
    tau = np.zeros((1, 3))
    a, _, found, _ = rodded._stage_dynamics(q0[None], dq0, tau)
    # two rows depend on the others (the ball's out-of-plane row, exactly
    # zero, and one more); the rows kept have the manifold's rank
    assert found.sum() == 2 and found[0, 1] == 1.0
    A = rodded.constraint_jacobian(q0)
    assert np.linalg.matrix_rank(A[found[0] == 0.0]) == 2
    # RK4's second stage at dt = 10 ms, 1e-4 off the rows
    qs, vs = plain.model.integrate(q0[None], 5e-3 * dq0), dq0 + 5e-3 * a
    assert np.abs(rodded.constraint_residual(qs[0])).max() > 1e-4
    held, _, _, _ = rodded._stage_dynamics(qs, vs, tau, None, found)
    free, _, _, _ = rodded._stage_dynamics(qs, vs, tau)
    ref = plain.forward_dynamics(qs[0], vs[0], tau[0]).ddq
    np.testing.assert_allclose(held[0], ref, rtol=1e-9, atol=1e-9)
    assert np.abs(free[0] - ref).max() > 1.0       # unheld, the rod's multiplier takes over


def test_python_rows_are_held_too():
    plain, rodded, q0 = _with_rod()
    # the same rod as a Python constraint (the NumPy path)
    rod = gear.CustomConstraint(lambda q: rodded.constraint_jacobian(q)[3:4],
                                lambda q, dq: rodded.constraint_bias(q, dq)[3:4],
                                lambda q: rodded.constraint_residual(q)[3:4], name="rod")
    python = gear.ConstrainedModel(plain.model, constraints=[plain.constraints[0], rod])
    dq0 = plain.project_velocity(q0, np.array([25.0, 0.0, 0.0]))
    a = gear.simulate(plain, q0, dq0, 0.2, 5e-3, integrator="rk4", progress=False)
    b = gear.simulate(python, q0, dq0, 0.2, 5e-3, integrator="rk4", progress=False)
    np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-10)


def test_prescribed_crank_with_redundant_rod():
    # hybrid dynamics through _stage_dynamics (the Python loop): the five-bar
    # with its left crank driven at 15 rad/s keeps one degree of freedom;
    # a rod from the left link's tip to the right crank's tip (the right
    # link's length) is redundant on the rows and independent off them
    plain, q0 = five_bar()
    rod = gear.LoopClosure("left_link", SE3(p=[0.4, 0, 0]), "right", SE3(p=[0.25, 0, 0]), "distance",
                           name="rod", distance=0.4)
    rodded = gear.ConstrainedModel(plain.model, constraints=[plain.constraints[0], rod])
    assert rodded.mobility(q0).redundant == [1, 3]
    w = 15.0
    dq0 = plain.project_velocity(q0, np.array([w, 0.0, -w, 0.0]), locked=["left"])

    def crank(t):
        return np.array([q0[0] + w * t]), np.array([w]), np.array([0.0])

    kw = dict(integrator="rk4", prescribed={"left": crank}, progress=False)
    ref = gear.simulate(plain, q0, dq0, 0.3, 2.5e-4, **kw)
    a = gear.simulate(plain, q0, dq0, 0.3, 2e-3, **kw)
    b = gear.simulate(rodded, q0, dq0, 0.3, 2e-3, **kw)
    # the rows held at the stages may be the rod or a ball row: either is
    # the rows' motion, and the two runs are equally close to a fine
    # reference, 1.1e-7 (without held rows the rodded run is 0.34 rad off)
    err_a = np.abs(a.q - ref.q[::8]).max()
    err_b = np.abs(b.q - ref.q[::8]).max()
    assert err_a < 3e-7 and err_b < 3e-7
    np.testing.assert_allclose(b.tau[:, 0], a.tau[:, 0], rtol=0, atol=1e-4)


def test_dependent_rows_batched_equals_one_by_one():
    from gear.constraints.system import _dependent_rows

    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 5, 4))
    A[:, 3] = A[:, 0] - 2.0 * A[:, 1]                 # dependent on the rows before it
    A[:, 4] = 0.0                                    # a zero row
    A[2, 2] = 1e-3 * A[2, 0] + 1e-7 * rng.standard_normal(4)   # within 1e-4 rad of row 0
    dep = _dependent_rows(A)
    assert dep.shape == (6, 5)
    np.testing.assert_array_equal(np.stack([_dependent_rows(a) for a in A]), dep)
    assert (dep[:, 3] == 1.0).all() and (dep[:, 4] == 1.0).all()
    assert dep[2, 2] == 1.0 and dep[0, 2] == 0.0 and dep[:, :2].sum() == 0.0


@pytest.mark.parametrize("route", ["aba", "dense"])
def test_held_rows_are_chosen_by_pivoting_on_K(route):
    # the rod first: the elimination, in order, marks a ball row dependent;
    # the rows held are those Cholesky with diagonal pivoting on
    # K = A M^-1 A^T leaves last (largest Schur diagonal first)
    plain, rodded, q0 = _with_rod()
    first = gear.ConstrainedModel(plain.model, constraints=[rodded.constraints[1], plain.constraints[0]],
                                  route=route)
    tau = np.zeros((1, 3))
    _, _, found, _ = first._stage_dynamics(q0[None], np.zeros((1, 3)), tau)
    A = first.constraint_jacobian(q0)
    K = A @ np.linalg.solve(gear.mass_matrix(plain.model, q0), A.T)
    kept, C = [], K.copy()
    nonzero = [i for i in range(len(K)) if K[i, i] > 0.0]
    for _ in range(2):                                # the rank on the manifold
        p = max((i for i in nonzero if i not in kept), key=lambda i: C[i, i])
        kept.append(p)
        C = C - np.outer(C[:, p], C[p]) / C[p, p]
    expect = np.ones(4)
    expect[kept] = 0.0
    np.testing.assert_array_equal(found[0], expect)


def test_implicit_euler_differences_hold_the_rows():
    # integrator="implicit" differentiates the right-hand side by central
    # differences; the perturbed states are off the rows, where the rod's
    # row would count (7e-7 and 2e-5 rad off the plain four-bar before)
    plain, rodded, q0 = _with_rod()
    dq0 = plain.project_velocity(q0, np.array([8.0, 0.0, 0.0]))
    for dt in (1e-3, 5e-3):
        a = gear.simulate(plain, q0, dq0, 0.2, dt, integrator="implicit", progress=False)
        b = gear.simulate(rodded, q0, dq0, 0.2, dt, integrator="implicit", progress=False)
        np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-10)

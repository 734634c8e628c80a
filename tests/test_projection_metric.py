"""The velocity step of ``stabilization="projection"``: the nearest velocity
on ``A v = 0`` in the mass metric, ``v -= M^-1 A^T K^+ A v`` with ``K = A
M^-1 A^T`` -- checked against the KKT system of that least-squares problem
(a dense formula of its own), on every route of the native loop and in the
Python loop, and against the maximal formulation's projection of the body
twists, which solves the same problem over the bodies."""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.simulation.integrators import _project


def _kkt_projection(sysm, q, v0):
    """argmin (v - v0)^T M (v - v0) subject to A v = 0, by the KKT system
    [[M, A^T], [A, 0]] (least squares: the rows may be redundant)."""
    M = gear.mass_matrix(sysm.model, q)
    A = sysm.constraint_jacobian(q)
    n, m = M.shape[0], A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    sol = np.linalg.lstsq(K, np.concatenate([M @ v0, np.zeros(m)]), rcond=1e-12)[0]
    return sol[:n]


def _closed_states(sysm, q, rng, n=4, spread=0.1):
    qs = np.stack([sysm.assemble(sysm.model.integrate(q, spread * rng.standard_normal(sysm.model.nv)))
                   for _ in range(n)])
    dqs = rng.standard_normal((n, sysm.model.nv))          # off the rows: the projection has work to do
    return qs, dqs


CASES = {"four_bar": mech.four_bar, "slider_crank": mech.slider_crank, "five_bar": mech.five_bar,
         "stewart": mech.stewart}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_python_projection_is_the_kinetic_energy_nearest_velocity(name):
    sysm, q = CASES[name]()
    qs, dqs = _closed_states(sysm, q, np.random.default_rng(1))
    _, v, _, _ = _project(sysm, qs, dqs)
    for k in range(len(qs)):
        ref = _kkt_projection(sysm, qs[k], dqs[k])
        assert np.abs(v[k] - ref).max() < 1e-10 * (1 + np.abs(ref).max())
        assert np.abs(sysm.constraint_jacobian(qs[k]) @ v[k]).max() < 1e-12 * (1 + np.abs(dqs[k]).max())


def _solvers(sysm):
    out = [("kkt dense", sysm), ("kkt aba", sysm.with_solver("kkt", route="aba")),
           ("projection", sysm.with_solver("projection"))]
    if gear._core.cholmod_available():
        out.append(("maximal", sysm.with_solver("maximal")))
    return out


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "stewart"])
def test_every_native_route_projects_the_same_velocity(name):
    """The initial state's projection (the first recorded frame): the dense
    and projection routes fold it into their solve (``dense_qphase``,
    ``projection_qphase``), the others project before theirs; all equal
    the KKT formula, native or not."""
    sysm, q = CASES[name]()
    qs, dqs = _closed_states(sysm, q, np.random.default_rng(2))
    ref = np.stack([_kkt_projection(sysm, qs[k], dqs[k]) for k in range(len(qs))])
    scale = 1 + np.abs(ref).max()
    for label, ss in _solvers(sysm):
        for native in (True, False):
            tr = gear.simulate(ss, qs, dqs, 0.01, 1e-3, stabilization="projection", native=native)
            assert tr.stats["native"] == native, label
            assert np.abs(tr.dq[:, 0] - ref).max() < 1e-10 * scale, (label, native)


def test_the_routes_roll_out_alike_with_projection():
    """Euler and RK4 with projection on every route of the native loop: the
    same trajectories (the routes' solves differ by rounding)."""
    sysm, q = mech.four_bar()
    qs, dqs = _closed_states(sysm, q, np.random.default_rng(3))
    for integrator in ("euler", "rk4"):
        runs = {label: gear.simulate(ss, qs, dqs, 0.3, 1e-3, integrator=integrator,
                                     stabilization="projection", record_every=50)
                for label, ss in _solvers(sysm)}
        base = runs.pop("kkt dense")
        for label, tr in runs.items():
            assert np.abs(tr.q - base.q).max() < 1e-9, (integrator, label)
            assert np.abs(tr.dq - base.dq).max() < 1e-8, (integrator, label)
            assert tr.stats["max_residual"] < 1e-5


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "stewart"])
def test_reduced_and_maximal_projections_agree(name):
    """At a closed pose the maximal formulation's projection of the body
    twists (``gear.maximal.stepping.project``: the same metric, over the
    bodies' inertias) gives the twists of the reduced projection's joint
    velocities: both are the kinetic-energy-nearest motion of the
    mechanism."""
    from gear.maximal.stepping import project

    sysm, q = CASES[name]()
    qs, dqs = _closed_states(sysm, q, np.random.default_rng(4))
    mx = gear.MaximalModel(sysm)
    _, v, _, _ = _project(sysm, qs, dqs)
    P, V0 = mx.state(qs, dqs)
    _, Vm, _ = project(mx, P, V0)
    _, Vr = mx.state(qs, v)
    assert np.abs(Vm - Vr).max() < 1e-9 * (1 + np.abs(Vr).max())


def test_the_projection_does_not_depend_on_the_joint_coordinates_scale():
    """Scaling a prismatic joint's coordinate (metres to millimetres) changes
    the Euclidean-nearest velocity but not the kinetic-energy-nearest one:
    the projected motion of the bodies is the same."""
    sysm, q = mech.slider_crank()
    rng = np.random.default_rng(5)
    qs, dqs = _closed_states(sysm, q, rng, n=3)
    _, v, _, _ = _project(sysm, qs, dqs)
    # the same problem with the velocity coordinates scaled, v = S u:
    # min (u - u0)^T S M S (u - u0) s.t. A S u = 0 gives S u = v
    s = np.ones(sysm.model.nv)
    s[np.argmax([j.kind == gear.joints.PRISMATIC for j in sysm.model.joints])] = 1e-3
    for k in range(len(qs)):
        M = gear.mass_matrix(sysm.model, qs[k]) * s[:, None] * s[None, :]
        A = sysm.constraint_jacobian(qs[k]) * s[None, :]
        u0 = dqs[k] / s
        Mi = np.linalg.inv(M)
        u = u0 - Mi @ A.T @ np.linalg.pinv(A @ Mi @ A.T, rcond=1e-12) @ (A @ u0)
        assert np.abs(s * u - v[k]).max() < 1e-9 * (1 + np.abs(v[k]).max())


def test_the_projection_never_adds_kinetic_energy():
    """An orthogonal projection in the kinetic-energy metric: the projected
    velocity's kinetic energy is at most the old one's, and what it removes
    is orthogonal (in M) to what it keeps."""
    sysm, q = mech.stewart()
    qs, dqs = _closed_states(sysm, q, np.random.default_rng(6), n=5)
    _, v, _, _ = _project(sysm, qs, dqs)
    for k in range(len(qs)):
        M = gear.mass_matrix(sysm.model, qs[k])
        d = dqs[k] - v[k]
        assert v[k] @ M @ v[k] <= dqs[k] @ M @ dqs[k] * (1 + 1e-12)
        assert abs(d @ M @ v[k]) < 1e-10 * (dqs[k] @ M @ dqs[k])


def test_prescribed_coordinates_keep_their_velocity_and_the_rest_take_the_metric_of_their_own():
    """``free`` (the Python loop's prescribed joints held): the free
    velocities move to the nearest in ``M_ff`` with ``A v = 0``, the
    prescribed ones keep theirs."""
    sysm, q = mech.five_bar()
    qs, dqs = _closed_states(sysm, q, np.random.default_rng(7), n=3)
    free = np.ones(sysm.model.nv, dtype=bool)
    free[0] = False
    _, v, _, _ = _project(sysm, qs, dqs, free=free)
    assert np.array_equal(v[:, 0], dqs[:, 0])
    for k in range(len(qs)):
        M = gear.mass_matrix(sysm.model, qs[k])[np.ix_(free, free)]
        A = sysm.constraint_jacobian(qs[k])
        # min (x - x0)^T M (x - x0) s.t. A_f x = -A_u v_u, by its KKT system
        Af, m = A[:, free], A.shape[0]
        K = np.block([[M, Af.T], [Af, np.zeros((m, m))]])
        rhs = np.concatenate([M @ dqs[k][free], -A[:, ~free] @ dqs[k][~free]])
        x = np.linalg.lstsq(K, rhs, rcond=1e-12)[0][:free.sum()]
        assert np.abs(v[k][free] - x).max() < 1e-10 * (1 + np.abs(x).max())
        assert np.abs(A @ v[k]).max() < 1e-11 * (1 + np.abs(dqs[k]).max())


@pytest.mark.parametrize("dt", [0.02, 0.08])
def test_large_steps_project_onto_the_rows_on_every_route(dt):
    """At steps large enough that the loops open by 1e-2 to 1e-1 before the
    projection, the dense and projection routes (velocity step folded into
    their solve, Gauss-Newton's iterations checked by that solve's rows)
    still close them to 1e-12 and follow the articulated-body route, which
    projects on its own."""
    sysm, q0 = mech.four_bar()
    dq0 = sysm.project_velocity(q0, np.random.default_rng(0).standard_normal(3))
    a = gear.simulate(sysm, q0, dq0, 1.0, dt, integrator="euler", stabilization="projection")
    b = gear.simulate(sysm.with_solver("kkt", route="aba"), q0, dq0, 1.0, dt, integrator="euler",
                      stabilization="projection")
    p = gear.simulate(sysm.with_solver("projection"), q0, dq0, 1.0, dt, integrator="euler",
                      stabilization="projection")
    assert a.stats["native"] and p.stats["native"] and a.stats["max_residual"] > 1e-2
    for tr in (a, b, p):
        assert np.abs(sysm._rows_batch(tr.q)[0]).max() < 1e-12
    assert np.abs(a.q - b.q).max() < 1e-11 and np.abs(p.q - b.q).max() < 1e-11


def test_a_joint_coupler_is_projected_like_the_loops():
    """The five-bar's two cranks geared together (a coupler row beside the
    loop closure): the native loop's projected first frame is the KKT
    formula's, on the dense route and the articulated-body one."""
    base, q = mech.five_bar()
    sysm = gear.ConstrainedModel(base.model, list(base.constraints) + [gear.JointCoupler("right", "left", -1.0)])
    rng = np.random.default_rng(8)
    qs = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(sysm.model.nv)))
                   for _ in range(3)])
    dqs = rng.standard_normal((3, sysm.model.nv))
    ref = np.stack([_kkt_projection(sysm, qs[k], dqs[k]) for k in range(3)])
    for ss in (sysm, sysm.with_solver("kkt", route="aba")):
        tr = gear.simulate(ss, qs, dqs, 0.01, 1e-3, stabilization="projection")
        assert tr.stats["native"]
        assert np.abs(tr.dq[:, 0] - ref).max() < 1e-10 * (1 + np.abs(ref).max())
        assert np.abs(sysm._rows_batch(tr.q[:, -1])[0]).max() < 1e-12

"""The classic mechanisms of gear.mechanisms: assembled, the expected
mobility, and constrained dynamics against a dense KKT reference."""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b)))


# builder, (dof, grubler)
CASES = {
    "four_bar": (mech.four_bar, (1, 0)),
    "four_bar_revolute": (lambda: mech.four_bar(closure="revolute"), (1, -2)),
    "slider_crank": (mech.slider_crank, (1, 0)),
    "five_bar": (mech.five_bar, (2, 1)),
    "n_four_bar_1": (lambda: mech.n_four_bar(1), (1, 0)),
    "n_four_bar_10": (lambda: mech.n_four_bar(10), (1, -9)),
    "n_four_bar_10_ground": (lambda: mech.n_four_bar(10, tree="ground"), (1, -9)),
    "stewart": (mech.stewart, (6, 6)),
    "rssr": (mech.rssr, (2, 2)),
    "bricard": (mech.bricard, (1, 0)),
    "rolling_ball": (mech.rolling_ball, (3, 3)),
}


def _dense(sysm, q, dq, tau):
    model = sysm.model
    M, b = gear.mass_matrix(model, q), gear.bias_forces(model, q, dq)
    A, c = sysm.constraint_jacobian(q), sysm.constraint_bias(q, dq)
    m = A.shape[0]
    sol = np.linalg.lstsq(np.block([[M, A.T], [A, np.zeros((m, m))]]),
                          np.concatenate([tau - b, -c]), rcond=None)[0]
    return sol[:model.nv], -A.T @ sol[model.nv:]


@pytest.mark.parametrize("name", sorted(CASES))
def test_mechanism_is_assembled_with_the_expected_mobility(name):
    build, (dof, grubler) = CASES[name]
    sysm, q = build()
    assert isinstance(sysm, gear.ConstrainedModel)
    r = sysm.constraint_residual(q)
    assert r.size == 0 or np.abs(r).max() <= 1e-10
    mob = sysm.mobility(q)
    assert (mob.dof, mob.grubler) == (dof, grubler)
    assert not mob.singular


@pytest.mark.parametrize("name", sorted(CASES))
def test_mechanism_assembles_from_nearby_guesses(name):
    # Gauss-Newton from guesses 1e-3 and 1e-2 off the closed configuration
    # reaches 1e-12, and velocities projected there satisfy the rows.  The
    # Bricard linkage's five rows have rank four: with LAPACK's default cut
    # its rounding-level singular value was kept, and 20 to 29 of 300
    # guesses stalled above 1e-12 (which ones depended on the BLAS kernels)
    sysm, q = CASES[name][0]()
    model = sysm.model
    rng = np.random.default_rng(7)
    for scale in (1e-3, 1e-2):
        for _ in range(30):
            qa = sysm.assemble(model.integrate(q, scale * rng.standard_normal(model.nv)))
            assert np.abs(sysm.constraint_residual(qa)).max(initial=0.0) <= 1e-12
            v = sysm.project_velocity(qa, rng.standard_normal(model.nv))
            assert np.abs(sysm.constraint_jacobian(qa) @ v).max(initial=0.0) <= 1e-12 * max(1.0, np.abs(v).max())


@pytest.mark.parametrize("name", sorted(CASES))
def test_mechanism_forward_dynamics_against_dense_kkt(name):
    sysm, q = CASES[name][0]()
    model = sysm.model
    rng = np.random.default_rng(len(name))
    dq = sysm.project_velocity(q, rng.standard_normal(model.nv))
    tau = rng.standard_normal(model.nv)
    res = sysm.forward_dynamics(q, dq, tau)
    assert res.success and res.residual <= 1e-9 * max(1.0, np.abs(res.ddq).max())
    ddq, ATlam = _dense(sysm, q, dq, tau)
    assert rel(res.ddq, ddq) < 1e-9
    assert rel(sysm.constraint_jacobian(q).T @ res.lam, ATlam) < 1e-9


def test_four_bar_velocity_ratio_closed_form():
    a, b, c = 0.2, 0.5, 0.4
    sysm, q = mech.four_bar(crank=a, coupler=b, rocker=c, ground=0.6, angle=1.0)
    dq = sysm.project_velocity(q, [1.0, 0.0, 0.0], locked=["crank"])
    a1 = q[0]
    a2 = a1 + q[1]
    a3 = a2 + q[2]
    # loop a e(a1) + b e(a2) + c e(a3) = (d, 0), differentiated and dotted with e(a2)
    w3 = -a * np.sin(a2 - a1) / (c * np.sin(a2 - a3))
    assert abs(dq.sum() - w3) < 1e-12
    assert dq[0] == 1.0


def test_four_bar_at_its_collinear_configuration():
    # a parallelogram four-bar at crank angle 0: every link on the x axis,
    # the branch point between the parallelogram and the anti-parallelogram
    sysm, q = mech.four_bar(crank=0.3, coupler=0.6, rocker=0.3, ground=0.6, angle=0.0)
    mob = sysm.mobility(q)
    assert mob.singular and mob.dof == 2 and mob.rank == 1
    rng = np.random.default_rng(0)
    tau = rng.standard_normal(3)
    res = sysm.forward_dynamics(q, np.zeros(3), tau)
    assert res.success and np.all(np.isfinite(res.ddq)) and np.all(np.isfinite(res.lam))
    assert res.residual < 1e-12
    ddq, ATlam = _dense(sysm, q, np.zeros(3), tau)
    assert rel(res.ddq, ddq) < 1e-9 and rel(sysm.constraint_jacobian(q).T @ res.lam, ATlam) < 1e-9


def test_rolling_ball_rolls():
    sysm, q = mech.rolling_ball(radius=0.1)
    # spinning about the world y axis with the matching forward speed
    dq = np.array([0.0, 2.0, 0.0, 0.2, 0.0, 0.0])        # body twist (w, v) at identity
    A = sysm.constraint_jacobian(q)
    assert np.abs(A @ dq).max() < 1e-15
    res = sysm.forward_dynamics(q, dq, np.zeros(6))
    # a ball rolling on a level plane keeps rolling: no angular acceleration,
    # and the centre's world acceleration R (dv + w x v) is zero (the body-
    # frame dv is not: the body turns under the velocity)
    w, v = dq[:3], dq[3:]
    assert np.abs(res.ddq[:3]).max() < 1e-12
    assert np.abs(res.ddq[3:] + np.cross(w, v)).max() < 1e-12
    assert sysm.constraint_residual(q).shape == (0,)          # nonholonomic


def test_builders_reject_impossible_dimensions():
    with pytest.raises(ValueError, match="cannot close"):
        mech.four_bar(crank=0.1, coupler=0.1, rocker=0.1, ground=1.0)
    with pytest.raises(ValueError, match="longer than crank"):
        mech.slider_crank(crank=0.3, rod=0.2)
    with pytest.raises(ValueError, match="n must be"):
        mech.n_four_bar(0)
    with pytest.raises(ValueError, match="tree must be"):
        mech.n_four_bar(2, tree="star")
    with pytest.raises(ValueError, match="closure"):
        mech.four_bar(closure="weld")


def test_readme_closed_chain_snippet_runs():
    sysm, q0 = mech.four_bar()
    dq = sysm.project_velocity(q0, [1.0, 0, 0], locked=["crank"])
    res = sysm.forward_dynamics(q0, dq, [0.5, 0, 0])
    inv = sysm.inverse_dynamics(q0, dq, res.ddq, actuated=["crank"])
    assert inv.exact and rel(inv.tau, [0.5, 0, 0]) < 1e-9


def test_stewart_static_leg_forces_closed_form():
    sysm, q = mech.stewart(legs_massless=True)
    model = sysm.model
    slides = [f"leg{i}_slide" for i in range(6)]
    z = np.zeros(model.nv)
    res = sysm.inverse_dynamics(q, z, z, actuated=slides)
    assert res.exact
    f = np.array([res.tau[model.idx_v(s).start] for s in slides])
    # massless legs are two-force members: the platform's statics
    # sum f_i e_i + m g = 0 and sum (P_i - O) x f_i e_i = 0 (centre of mass at O)
    poses = gear.forward_kinematics(model, q)
    O = poses[0][:3, 3]
    cols = []
    for i in range(6):
        up = poses[model.body_index(f"leg{i}_upper")]
        lo = poses[model.body_index(f"leg{i}_lower")]
        e = up[:3, 2]                                   # the slide axis, world
        assert np.allclose(e, lo[:3, 2])
        cols.append(np.concatenate([e, np.cross(up[:3, 3] - O, e)]))
    mg = model.inertias[0].mass * np.asarray(model.gravity)
    f_ref = np.linalg.solve(np.array(cols).T, -np.concatenate([mg, np.zeros(3)]))
    assert rel(f, f_ref) < 1e-10
    assert np.all(f > 0)                                # the legs hold the platform up


@pytest.mark.parametrize("solver", ["kkt", "maximal"])
def test_n_four_bar_spanning_trees_are_the_same_mechanism(solver):
    """The chain and ground spanning trees of the N-four-bar: at the same
    physical state (cranks at theta turning at w, couplers translating),
    every crank has the same acceleration, as does every absolute angle."""
    n, w, theta = 4, 1.3, 0.9
    a, qa = mech.n_four_bar(n, angle=theta)
    b, qb = mech.n_four_bar(n, angle=theta, tree="ground")
    # chain: (crank0, coupler1, crank1, ...) relative; ground: cranks, then couplers relative
    dqa = np.array([w] + [-w, w] * n)
    dqb = np.array([w] * (n + 1) + [-w] * n)
    for s, q, dq in ((a, qa, dqa), (b, qb, dqb)):
        assert np.abs(s.constraint_residual(q)).max() < 1e-10
        assert np.abs(s.constraint_jacobian(q) @ dq).max() < 1e-10
    ra = a.with_solver(solver).forward_dynamics(qa, dqa, np.zeros(a.model.nv))
    rb = b.with_solver(solver).forward_dynamics(qb, dqb, np.zeros(b.model.nv))
    crank_a = np.cumsum(ra.ddq)[0::2]          # absolute: crank k = sum of the chain's relative angles
    assert np.allclose(crank_a, ra.ddq[0], atol=1e-9)
    assert np.abs(rb.ddq[:n + 1] - ra.ddq[0]).max() < 1e-9 * max(1.0, abs(ra.ddq[0]))
    assert np.abs(rb.ddq[n + 1:] + ra.ddq[0]).max() < 1e-9 * max(1.0, abs(ra.ddq[0]))
    assert abs(ra.ddq[0]) > 1.0                 # gravity and the spin do accelerate it

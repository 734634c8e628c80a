"""Analytic derivatives of closed-chain dynamics
(:meth:`gear.ConstrainedModel.forward_dynamics_derivatives`,
``inverse_dynamics_derivatives``, ``linearize``).

Oracles: Richardson-extrapolated central differences of the solvers' own
answers (on the constraint manifold and off it), central differences of
the rows, the identity ``A^T dlam/dtau = M dddq/dtau - I``, Pinocchio's
``computeConstraintDynamicsDerivatives`` (optional), and the reduced
dynamics on the manifold for ``linearize(minimal=True)``.
"""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.constraints._tangents import row_tangents
from gear.constraints.closures import KINDS
from gear.testing import ALL_KINDS, fd_tangent, random_se3, random_tree


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b)), initial=0.0) / max(1.0, np.max(np.abs(b), initial=0.0))


def richardson(f, x0, n, step, h=1e-3):
    """Central differences of ``f`` along ``step(x0, +-h e_k)``, Richardson-
    extrapolated (error O(h^4)); columns on the last axis."""
    cols = []
    for k in range(n):
        def c(hh):
            e = np.zeros(n)
            e[k] = hh
            return (np.asarray(f(step(x0, e))) - np.asarray(f(step(x0, -e)))) / (2.0 * hh)
        cols.append((4.0 * c(h / 2) - c(h)) / 3.0)
    return np.stack(cols, axis=-1)


def _fd_forward(sysm, q, dq, tau, f_ext=None):
    m = sysm.model
    nv = m.nv

    def f(x):
        r = sysm.forward_dynamics(*x, f_ext)
        return np.concatenate([r.ddq, r.lam])

    def add(x, e):
        return x + e
    Fq = richardson(lambda x: f((x, dq, tau)), q, nv, m.integrate)
    Fv = richardson(lambda x: f((q, x, tau)), dq, nv, add)
    Ft = richardson(lambda x: f((q, dq, x)), tau, nv, add)
    return Fq, Fv, Ft


def _check_forward(sysm, q, dq, tau, f_ext=None, tol=5e-8):
    nv = sysm.model.nv
    d = sysm.forward_dynamics_derivatives(q, dq, tau, f_ext)
    Fq, Fv, Ft = _fd_forward(sysm, q, dq, tau, f_ext)
    for got, want in ((d.ddq_dq, Fq[:nv]), (d.ddq_ddq, Fv[:nv]), (d.ddq_dtau, Ft[:nv]),
                      (d.lam_dq, Fq[nv:]), (d.lam_ddq, Fv[nv:]), (d.lam_dtau, Ft[nv:])):
        assert rel(got, want) < tol
    return d


# mechanisms whose rows keep their rank near the state (Bricard's linkage is
# overconstrained: its rank drops on the manifold only, so its dynamics is
# not differentiable off it; see test_overconstrained_bricard_on_its_manifold)
SMOOTH = {
    "four_bar": mech.four_bar,
    "four_bar_revolute": lambda: mech.four_bar(closure="revolute"),
    "slider_crank": mech.slider_crank,
    "five_bar": mech.five_bar,
    "rssr": mech.rssr,
    "stewart": mech.stewart,
    "n_four_bar_10": lambda: mech.n_four_bar(10),
    "n_four_bar_ground_4": lambda: mech.n_four_bar(4, tree="ground"),
    "rolling_ball": mech.rolling_ball,
}


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_forward_derivatives_on_and_off_the_manifold(name):
    sysm, q = SMOOTH[name]()
    rng = np.random.default_rng(len(name))
    nv = sysm.model.nv
    dq = sysm.project_velocity(q, rng.standard_normal(nv))
    tau = rng.standard_normal(nv)
    f_ext = 0.3 * rng.standard_normal((sysm.model.nbodies, 6))
    _check_forward(sysm, q, dq, tau, f_ext)                       # on the manifold
    qo = sysm.model.integrate(q, 0.05 * rng.standard_normal(nv))  # off it: the KKT answer there
    _check_forward(sysm, qo, rng.standard_normal(nv), tau)


def _random_closed(seed, kind, kinds=None):
    """A random tree of every joint kind (or of ``kinds``) with one closure
    of ``kind`` between random bodies, or from a body to the world, whose
    rows have full rank (random placements: not closed).  Full row rank
    keeps the KKT system consistent at every state, so the dynamics is a
    smooth function of the state; see :mod:`gear.constraints.derivatives`
    for redundant rows."""
    rng = np.random.default_rng(seed)
    model = random_tree(rng, nbodies=8, kinds=kinds or [k for k in ALL_KINDS if k != "fixed"])
    q = model.random_configuration(rng)
    params = {"distance": 0.7} if kind == "distance" else {}
    while True:
        a, b = (int(x) for x in rng.choice(np.arange(-1, 8), 2, replace=False))
        c = gear.LoopClosure(a, random_se3(rng), b, random_se3(rng), kind, **params)
        try:
            sysm = gear.ConstrainedModel(model, [c])
        except ValueError:                     # two bodies only fixed joints connect
            continue
        sv = np.linalg.svd(sysm.constraint_jacobian(q), compute_uv=False)
        if sv.size == sysm.nc and sv[-1] > 0.05 * sv[0]:      # full rank, well conditioned
            return sysm, q, rng


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", range(2))
def test_row_derivatives_of_every_closure_kind_on_every_joint_kind(kind, seed):
    """dA/dq, d(dA dq)/dq and d(dA dq)/d(dq) against central differences of
    the rows the solvers use."""
    sysm, q, rng = _random_closed(seed, kind)
    nv = sysm.model.nv
    dq = rng.standard_normal(nv)
    A, bias, dA, bq, bv = row_tangents(sysm, q, dq)
    assert rel(A, sysm.constraint_jacobian(q)) < 1e-13 and rel(bias, sysm.constraint_bias(q, dq)) < 1e-13
    fdA = fd_tangent(sysm.constraint_jacobian, sysm.model, q)
    assert rel(dA, np.moveaxis(fdA, -1, 0)) < 1e-8
    assert rel(bq, fd_tangent(lambda x: sysm.constraint_bias(x, dq), sysm.model, q)) < 1e-8
    fdv = richardson(lambda v: sysm.constraint_bias(q, v), dq, nv, lambda x, e: x + e)
    assert rel(bv, fdv) < 1e-9


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_forward_derivatives_of_every_closure_kind(kind):
    sysm, q, rng = _random_closed(7, kind)
    nv = sysm.model.nv
    _check_forward(sysm, q, rng.standard_normal(nv), rng.standard_normal(nv),
                   0.3 * rng.standard_normal((sysm.model.nbodies, 6)), tol=1e-7)


def test_identity_between_the_multiplier_and_acceleration_derivatives():
    """Differentiating M ddq + b = tau + A^T lam in tau: A^T dlam/dtau =
    M dddq/dtau - I; and A dddq/dtau = 0."""
    for make in (mech.four_bar, mech.stewart, lambda: mech.n_four_bar(5)):
        sysm, q = make()
        rng = np.random.default_rng(3)
        nv = sysm.model.nv
        dq = sysm.project_velocity(q, rng.standard_normal(nv))
        d = sysm.forward_dynamics_derivatives(q, dq, rng.standard_normal(nv))
        A = sysm.constraint_jacobian(q)
        M = gear.mass_matrix(sysm.model, q)
        assert rel(A.T @ d.lam_dtau, M @ d.ddq_dtau - np.eye(nv)) < 1e-11
        assert np.abs(A @ d.ddq_dtau).max() < 1e-11


def test_batches_equal_single_calls():
    sysm, q = mech.stewart()
    rng = np.random.default_rng(4)
    nv = sysm.model.nv
    qs = np.stack([sysm.model.integrate(q, 0.02 * rng.standard_normal(nv)) for _ in range(3)])
    dqs = rng.standard_normal((3, nv))
    taus = rng.standard_normal((3, nv))
    d = sysm.forward_dynamics_derivatives(qs, dqs, taus)
    assert d.ddq_dq.shape == (3, nv, nv) and d.lam_dtau.shape == (3, sysm.nc, nv)
    for k in range(3):
        one = sysm.forward_dynamics_derivatives(qs[k], dqs[k], taus[k])
        for name in ("ddq", "lam", "ddq_dq", "ddq_ddq", "ddq_dtau", "lam_dq", "lam_ddq", "lam_dtau"):
            assert np.array_equal(getattr(d, name)[k], getattr(one, name))


@pytest.mark.parametrize("solver, opts", [("kkt", {"route": "dense"}), ("kkt", {"route": "sparse"}),
                                          ("kkt", {"route": "aba"}), ("projection", {}), ("maximal", {})])
def test_every_exact_solver_gives_the_same_derivatives(solver, opts):
    base, q = mech.n_four_bar(4, tree="ground")
    rng = np.random.default_rng(5)
    nv = base.model.nv
    dq = base.project_velocity(q, rng.standard_normal(nv))
    tau = rng.standard_normal(nv)
    ref = base.with_solver("kkt", route="dense").forward_dynamics_derivatives(q, dq, tau)
    got = base.with_solver(solver, **opts).forward_dynamics_derivatives(q, dq, tau)
    for name in ("ddq_dq", "ddq_ddq", "ddq_dtau", "lam_dq", "lam_ddq", "lam_dtau"):
        assert rel(getattr(got, name), getattr(ref, name)) < 1e-9, name


def test_overconstrained_bricard_on_its_manifold():
    """Bricard's linkage: six revolute joints closed by a weld, mobility 1
    by its special geometry (one of the six rows is redundant on the
    manifold only).  Its multiplier is the minimum-norm one; along the
    manifold and in tau the derivatives match differences of the solver's
    answers taken on the manifold."""
    sysm, q = mech.bricard()
    nv = sysm.model.nv
    A = sysm.constraint_jacobian(q)
    assert np.linalg.matrix_rank(A, 1e-9) == nv - 1
    rng = np.random.default_rng(6)
    tau = rng.standard_normal(nv)
    dq = np.zeros(nv)
    d = sysm.forward_dynamics_derivatives(q, dq, tau)
    Ft = richardson(lambda x: np.concatenate([(r := sysm.forward_dynamics(q, dq, x)).ddq, r.lam]), tau, nv,
                    lambda x, e: x + e)
    assert rel(d.ddq_dtau, Ft[:nv]) < 1e-8 and rel(d.lam_dtau, Ft[nv:]) < 1e-8
    # along the manifold: two assembled configurations either side of q
    g = np.linalg.svd(A)[2][-1]
    h = 1e-3
    xp, xm = (sysm.assemble(sysm.model.integrate(q, s * h * g), tol=1e-11) for s in (1.0, -1.0))
    chord = sysm.model.difference(xm, xp)
    rp, rm = sysm.forward_dynamics(xp, dq, tau), sysm.forward_dynamics(xm, dq, tau)
    for got, want in ((d.ddq_dq @ chord, rp.ddq - rm.ddq), (d.lam_dq @ chord, rp.lam - rm.lam)):
        assert np.abs(got - want).max() < 1e-5 * np.abs(want).max()     # O(h^2) relative


def test_against_pinocchio_on_the_ball_closed_four_bar():
    pin = pytest.importorskip("pinocchio", reason="Pinocchio is an optional test-only reference")
    from gear.interop import pinocchio_constraint_problem

    sysm, q = mech.four_bar(closure="ball")
    rng = np.random.default_rng(7)
    nv = sysm.model.nv
    pm, pd, cms, cds, mp = pinocchio_constraint_problem(sysm.model, sysm.constraints)
    prox = pin.ProximalSettings(1e-14, 1e-10, 200)
    for _ in range(3):
        x = sysm.model.integrate(q, 0.1 * rng.standard_normal(nv))       # off the manifold too
        dq, tau = rng.standard_normal(nv), rng.standard_normal(nv)
        pin.constraintDynamics(pm, pd, mp.q(x), mp.v(dq), mp.v(tau), cms, cds, prox)
        pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds, prox)
        d = sysm.forward_dynamics_derivatives(x, dq, tau)
        assert rel(d.ddq_dq, mp.mat_back(pd.ddq_dq)) < 1e-9
        assert rel(d.ddq_ddq, mp.mat_back(pd.ddq_dv)) < 1e-9
        assert rel(d.ddq_dtau, mp.mat_back(pd.ddq_dtau)) < 1e-9


# ---------------------------------------------------------------------------
# inverse dynamics
# ---------------------------------------------------------------------------
def _consistent_motion(sysm, q, rng):
    """A velocity and an acceleration the loops allow at ``q`` (``A dq = 0``,
    ``A ddq + dA dq = 0``), from random draws."""
    nv = sysm.model.nv
    dq = sysm.project_velocity(q, rng.standard_normal(nv))
    A, bias = sysm.constraint_jacobian(q), sysm.constraint_bias(q, dq)
    return dq, np.linalg.lstsq(A, -bias, rcond=None)[0] + sysm.project_velocity(q, rng.standard_normal(nv))


@pytest.mark.parametrize("name, actuated", [
    ("four_bar", ["crank"]), ("five_bar", ["left", "right"]), ("slider_crank", ["crank"]),
    ("stewart", [f"leg{k}_slide" for k in range(6)]),
    ("five_bar", ["left", "right", "left_link"])])              # redundantly actuated
def test_inverse_derivatives(name, actuated):
    sysm, q = SMOOTH[name]()
    m = sysm.model
    nv = m.nv
    rng = np.random.default_rng(8)
    dq, ddq = _consistent_motion(sysm, q, rng)
    d = sysm.inverse_dynamics_derivatives(q, dq, ddq, actuated)
    assert rel(d.tau, sysm.inverse_dynamics(q, dq, ddq, actuated).tau) < 1e-13

    def f(x):
        r = sysm.inverse_dynamics(*x, actuated)
        assert np.all(r.exact)
        return np.concatenate([r.tau, r.lam])
    add = (lambda x, e: x + e)
    Fq = richardson(lambda x: f((x, dq, ddq)), q, nv, m.integrate)
    Fv = richardson(lambda x: f((q, x, ddq)), dq, nv, add)
    Fa = richardson(lambda x: f((q, dq, x)), ddq, nv, add)
    for got, want in ((d.tau_dq, Fq[:nv]), (d.tau_ddq, Fv[:nv]), (d.tau_dddq, Fa[:nv]),
                      (d.lam_dq, Fq[nv:]), (d.lam_ddq, Fv[nv:]), (d.lam_dddq, Fa[nv:])):
        assert rel(got, want) < 1e-8


def test_inverse_derivatives_refuse_an_under_actuated_state():
    sysm, q = mech.stewart()
    nv = sysm.model.nv
    with pytest.raises(ValueError, match="under-actuated"):
        sysm.inverse_dynamics_derivatives(q, np.zeros(nv), np.ones(nv), [])


# ---------------------------------------------------------------------------
# linearisation
# ---------------------------------------------------------------------------
def test_linearize_full_state():
    sysm, q = mech.stewart()
    rng = np.random.default_rng(9)
    nv = sysm.model.nv
    dq = sysm.project_velocity(q, rng.standard_normal(nv))
    tau = rng.standard_normal(nv)
    A, B = sysm.linearize(q, dq, tau)
    d = sysm.forward_dynamics_derivatives(q, dq, tau)
    assert A.shape == (2 * nv, 2 * nv) and B.shape == (2 * nv, nv)
    assert np.array_equal(A[:nv, nv:], np.eye(nv)) and np.array_equal(B[:nv], np.zeros((nv, nv)))
    assert np.array_equal(A[nv:, :nv], d.ddq_dq) and np.array_equal(B[nv:], d.ddq_dtau)
    # the tree's linearisation has the same kinematic block (a free joint: -ad_V)
    At, _ = gear.linearize(sysm.model, q, dq, tau)
    assert np.array_equal(A[:nv, :nv], At[:nv, :nv])


@pytest.mark.parametrize("name", ["four_bar", "five_bar", "stewart", "n_four_bar_10"])
def test_linearize_on_the_manifold(name):
    """G is an orthonormal basis of null(A) with dof columns; at rest the
    reduced model predicts the change of G^T ddq under a small move along
    the manifold (assembled) and a small consistent velocity."""
    sysm, q = SMOOTH[name]()
    nv = sysm.model.nv
    rng = np.random.default_rng(10)
    tau = rng.standard_normal(nv)
    z0 = np.zeros(nv)
    Ar, Br, G = sysm.linearize(q, z0, tau, minimal=True)
    dof = sysm.mobility(q).dof
    assert G.shape == (nv, dof) and Ar.shape == (2 * dof, 2 * dof) and Br.shape == (2 * dof, nv)
    assert np.abs(G.T @ G - np.eye(dof)).max() < 1e-12
    assert np.abs(sysm.constraint_jacobian(q) @ G).max() < 1e-12
    base = sysm.forward_dynamics(q, z0, tau).ddq
    h = 1e-5
    z, v = rng.standard_normal(dof), rng.standard_normal(dof)
    x = sysm.assemble(sysm.model.integrate(q, h * G @ z), tol=1e-14)
    dq = sysm.project_velocity(x, h * G @ v)
    pred = Ar[dof:] @ np.concatenate([h * z, h * v])
    got = G.T @ (sysm.forward_dynamics(x, dq, tau).ddq - base)
    assert np.abs(got - pred).max() < 1e-3 * h * max(1.0, np.abs(pred).max() / h)
    # the input: G^T dddq/dtau
    assert rel(Br[dof:], G.T @ sysm.forward_dynamics_derivatives(q, z0, tau).ddq_dtau) < 1e-13


# ---------------------------------------------------------------------------
# custom constraints and errors
# ---------------------------------------------------------------------------
def test_custom_constraint_derivatives_are_used_when_given():
    sysm, q = mech.rolling_ball()
    rng = np.random.default_rng(11)
    nv = sysm.model.nv
    dq = sysm.project_velocity(q, rng.standard_normal(nv))
    tau = rng.standard_normal(nv)
    fd = sysm.forward_dynamics_derivatives(q, dq, tau)          # central differences of the rows
    c = sysm.constraints[0]
    calls = []

    def jd(x):
        calls.append("j")
        return np.moveaxis(fd_tangent(c.jacobian, sysm.model, x), -1, 0)

    def bd(x, v):
        calls.append("b")
        bq = fd_tangent(lambda y: c.bias(y, v), sysm.model, x)
        bv = np.stack([(c.bias(x, v + 1e-6 * e) - c.bias(x, v - 1e-6 * e)) / 2e-6 for e in np.eye(nv)], -1)
        return bq, bv
    own = gear.ConstrainedModel(sysm.model, [gear.CustomConstraint(c.jacobian, c.bias, c.residual, name=c.name,
                                                                   jacobian_derivative=jd, bias_derivative=bd)])
    d = own.forward_dynamics_derivatives(q, dq, tau)
    assert calls == ["j", "b"]
    assert rel(d.ddq_dq, fd.ddq_dq) < 1e-12 and rel(d.lam_ddq, fd.lam_ddq) < 1e-12
    bad = gear.ConstrainedModel(sysm.model, [gear.CustomConstraint(c.jacobian, c.bias, c.residual,
                                                                   jacobian_derivative=lambda x: np.zeros(3))])
    with pytest.raises(ValueError, match="jacobian_derivative"):
        bad.forward_dynamics_derivatives(q, dq, tau)
    with pytest.raises(TypeError, match="bias_derivative"):
        gear.CustomConstraint(c.jacobian, c.bias, bias_derivative=3)


def test_bad_input_gives_clear_errors():
    sysm, q = mech.four_bar()
    z = np.zeros(3)
    with pytest.raises(ValueError, match="dq"):
        sysm.forward_dynamics_derivatives(q, np.zeros(4), z)
    with pytest.raises(ValueError):
        sysm.forward_dynamics_derivatives(q, z, np.array([np.nan, 0, 0]))
    with pytest.raises(ValueError, match="soft"):
        sysm.with_solver("soft").forward_dynamics_derivatives(q, z, z)
    with pytest.raises(ValueError, match="soft"):
        sysm.with_solver("soft").linearize(q, z, z)


# ---------------------------------------------------------------------------
# the native kernel against the NumPy reference
# ---------------------------------------------------------------------------
def _native_only(monkeypatch):
    """Make the NumPy reference raise, so a test sees the native kernel."""
    from gear.constraints import derivatives as D

    def refuse(*a, **k):
        raise AssertionError("the NumPy reference ran where the native kernel should have")
    reference = D._forward_one
    monkeypatch.setattr(D, "_forward_one", refuse)
    return reference


def _assert_equal_to_reference(sysm, q, dq, tau, f_ext, reference, tol=1e-10):
    nv = sysm.model.nv
    d = sysm.forward_dynamics_derivatives(q, dq, tau, f_ext)
    ddq, lam, X, Y = reference(sysm, q, dq, tau, f_ext, 1e-10)
    assert rel(d.ddq, ddq) < tol and rel(d.lam, lam) < tol
    for got, want in ((d.ddq_dq, X[:, :nv]), (d.ddq_ddq, X[:, nv:2 * nv]), (d.ddq_dtau, X[:, 2 * nv:]),
                      (d.lam_dq, Y[:, :nv]), (d.lam_ddq, Y[:, nv:2 * nv]), (d.lam_dtau, Y[:, 2 * nv:])):
        assert rel(got, want) < tol


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", range(3))
def test_native_kernel_equals_the_reference_on_every_closure_and_joint_kind(kind, seed, monkeypatch):
    sysm, q, rng = _random_closed(10 + seed, kind)
    nv = sysm.model.nv
    reference = _native_only(monkeypatch)
    _assert_equal_to_reference(sysm, q, rng.standard_normal(nv), rng.standard_normal(nv),
                               0.3 * rng.standard_normal((sysm.model.nbodies, 6)), reference)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_native_kernel_with_one_dof_joints_on_every_closure_kind(kind, monkeypatch):
    """Trees of one-dof joints (revolute, prismatic, helical): the kernel
    takes the dq columns of the rows' derivative from the q passes,
    ``d(dA dq)_r / d(dq_l) = 2 d(A_r dq) / dq_l`` (the Hessian of ``g_r`` is
    symmetric in vector-space coordinates), for every row type."""
    sysm, q, rng = _random_closed(20, kind, kinds=["revolute", "prismatic", "helical"])
    assert all(j.nv <= 1 for j in sysm.model.joints)
    nv = sysm.model.nv
    reference = _native_only(monkeypatch)
    _assert_equal_to_reference(sysm, q, rng.standard_normal(nv), rng.standard_normal(nv),
                               0.3 * rng.standard_normal((sysm.model.nbodies, 6)), reference)


@pytest.mark.parametrize("name", sorted(set(SMOOTH) - {"rolling_ball"}))
def test_native_kernel_equals_the_reference_on_the_mechanisms(name, monkeypatch):
    """Including the ball-closed four-bar, whose out-of-plane row is zero:
    the kernel leaves it out and gives its multiplier the derivative of the
    minimum-norm one."""
    sysm, q = SMOOTH[name]()
    rng = np.random.default_rng(12)
    nv = sysm.model.nv
    reference = _native_only(monkeypatch)
    dq = sysm.project_velocity(q, rng.standard_normal(nv))
    _assert_equal_to_reference(sysm, q, dq, rng.standard_normal(nv), None, reference)
    qo = sysm.model.integrate(q, 0.05 * rng.standard_normal(nv))
    _assert_equal_to_reference(sysm, qo, rng.standard_normal(nv), rng.standard_normal(nv),
                               0.3 * rng.standard_normal((sysm.model.nbodies, 6)), reference)


def test_native_kernel_with_a_joint_coupler(monkeypatch):
    """A coupler row (constant) beside loop closures: the five-bar's two
    cranks geared together."""
    base, q = mech.five_bar()
    sysm = gear.ConstrainedModel(base.model, list(base.constraints) + [gear.JointCoupler("right", "left", -1.0)])
    rng = np.random.default_rng(13)
    nv = sysm.model.nv
    x = sysm.model.integrate(q, 0.05 * rng.standard_normal(nv))
    reference = _native_only(monkeypatch)
    _assert_equal_to_reference(sysm, x, rng.standard_normal(nv), rng.standard_normal(nv), None, reference)
    monkeypatch.undo()
    _check_forward(sysm, x, rng.standard_normal(nv), rng.standard_normal(nv))


def test_dependent_rows_fall_back_to_the_reference_in_a_batch():
    """Bricard's linkage has a dependent row that is not zero: those states
    take the NumPy reference, the others the kernel, in one batch."""
    br, qb = mech.bricard()
    nv = br.model.nv
    rng = np.random.default_rng(14)
    qs = np.stack([qb, br.model.integrate(qb, 0.3 * rng.standard_normal(nv))])   # on, off the manifold
    dqs, taus = np.zeros((2, nv)), rng.standard_normal((2, nv))
    d = br.forward_dynamics_derivatives(qs, dqs, taus)
    for k in range(2):
        one = br.forward_dynamics_derivatives(qs[k], dqs[k], taus[k])
        assert np.array_equal(d.ddq_dq[k], one.ddq_dq) and np.array_equal(d.lam_dtau[k], one.lam_dtau)


@pytest.mark.parametrize("name, actuated, native", [
    ("four_bar", ["crank"], True), ("five_bar", ["left", "right"], True),
    ("stewart", [f"leg{k}_slide" for k in range(6)], True), ("n_four_bar_10", ["crank0"], True),
    ("five_bar", ["left", "right", "left_link"], False),      # redundant actuation: dependent rows of A_p
    ("n_four_bar_10", [f"crank{k}" for k in range(11)], False)])
def test_native_inverse_kernel_equals_the_reference(name, actuated, native, monkeypatch):
    """Including zero rows of A_p (the ball-closed planar linkages), loads
    and passive torques; with redundant actuation the rows of A_p are
    dependent and the states take the NumPy reference."""
    sysm, q = SMOOTH[name]()
    m = sysm.model
    nv = m.nv
    rng = np.random.default_rng(15)
    dq, ddq = _consistent_motion(sysm, q, rng)
    f_ext = 0.2 * rng.standard_normal((m.nbodies, 6))
    tau_p = 0.3 * rng.standard_normal(nv)
    if not np.all(sysm.inverse_dynamics(q, dq, ddq, actuated, tau_p, f_ext=f_ext).exact):
        pytest.skip("this actuation cannot produce ddq")       # not expected: the tests above say which
    from gear.constraints import derivatives as D
    reference = D._inverse_one
    ran = []
    monkeypatch.setattr(D, "_inverse_one", lambda *a, **k: ran.append(1) or reference(*a, **k))
    d = sysm.inverse_dynamics_derivatives(q, dq, ddq, actuated, tau_p, f_ext)
    assert bool(ran) != native
    a = sysm._joint_dofs(actuated, "actuated")
    tau, lam, X, Y = reference(sysm, q, dq, ddq, actuated, a, tau_p, f_ext, 1e-10, None)
    assert rel(d.tau, tau) < 1e-10 and rel(d.lam, lam) < 1e-10
    assert rel(d.X, X) < 1e-10 and rel(d.Y, Y) < 1e-10
    assert np.array_equal(d.tau[~a], tau_p[~a]) and not d.tau_dq[~a].any()
    # a batch equals its single calls
    qs = np.stack([q, m.integrate(q, 0.01 * rng.standard_normal(nv))])
    b = sysm.inverse_dynamics_derivatives(qs, np.stack([dq, dq]), np.stack([ddq, ddq]), actuated,
                                          np.stack([tau_p, tau_p]), np.stack([f_ext, f_ext]))
    one = sysm.inverse_dynamics_derivatives(qs[1], dq, ddq, actuated, tau_p, f_ext)
    assert np.array_equal(b.X[1], one.X) and np.array_equal(b.lam[1], one.lam)

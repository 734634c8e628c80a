"""Analytic dynamics derivatives (Kim Sec. 4, Tables 5-7) and ``linearize``.

Oracles: central finite differences on the configuration manifold (``q``
perturbed by ``model.integrate`` along the tangent basis, as the analytic
derivatives are defined), the implicit-function identities between the
inverse, forward and hybrid derivatives, batched == single bit for bit,
and, for :func:`gear.linearize`, finite differences of the flow itself.

Step sizes: ``tau`` is linear in ``ddq`` and ``ddq`` in ``tau`` (any step is
exact), both are quadratic in ``dq`` (central differences are exact up to
rounding, so a large step keeps rounding small), and smooth in ``q``
(truncation ~ eps^2, rounding ~ 1e-16 / eps: eps = 1e-5 balances them at
~1e-10, four orders below the 1e-6 tolerance).
"""
import pathlib

import numpy as np
import pytest

import gear
from gear import testing as gt
from gear.joints import FREE, SPHERICAL
from gear.spatial import ad, skew

REL = 1e-6          # finite differences vs analytic
TIGHT = 1e-11       # identities that hold to rounding
EPS_Q = 1e-5        # tangent step on q
EPS_V = 1e-3        # step on dq (quadratic: central differences are exact)
EPS_LIN = 1e-1      # step on ddq, tau, hybrid inputs (linear)
SEEDS = (0, 1, 2)


def rel_err(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


def fd_vec(f, x, eps):
    """Central differences of ``f`` along the coordinate basis of ``x``."""
    x = np.asarray(x, dtype=float)
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1)


def check_fd(analytic, numeric, rel=REL):
    """Agreement to ``rel``, and not bit-identical (the analytic result must
    not be computed by the very same finite differences)."""
    err = rel_err(analytic, numeric)
    assert err <= rel, f"relative error {err:.3e} > {rel}"
    assert not np.array_equal(analytic, numeric), "analytic derivative equals the finite differences bit for bit"
    return err


# ---------------------------------------------------------------------------
# fixtures: seeded random trees with every joint kind, fixed and floating base
# ---------------------------------------------------------------------------
def make_case(seed, floating, with_fext, nbodies=10):
    rng = np.random.default_rng(seed)
    m = gt.random_tree(rng, nbodies=nbodies, root_free=floating)
    q, dq, ddq, tau = gt.random_state(m, rng)
    fe = rng.standard_normal((m.nbodies, 6)) if with_fext else None
    return m, q, dq, ddq, tau, fe, rng


@pytest.fixture(params=[(s, fl, fx) for s in SEEDS for fl in (False, True) for fx in (False, True)],
                ids=lambda p: f"seed{p[0]}-{'float' if p[1] else 'fixed'}-{'fext' if p[2] else 'nofext'}")
def case(request):
    return make_case(*request.param)


def test_cases_cover_every_joint_kind():
    kinds = set()
    for s in SEEDS:
        for fl in (False, True):
            kinds |= {type(j).__name__.lower() for j in make_case(s, fl, False)[0].joints}
    assert kinds == set(gt.ALL_KINDS)
    assert type(make_case(0, True, False)[0].joints[0]).__name__ == "Free"


# ---------------------------------------------------------------------------
# inverse dynamics (Table 5)
# ---------------------------------------------------------------------------
def test_inverse_dynamics_derivatives_vs_finite_differences(case):
    m, q, dq, ddq, tau, fe, _ = case
    Dq, Dv, Da = gear.inverse_dynamics_derivatives(m, q, dq, ddq, fe)
    assert Dq.shape == Dv.shape == Da.shape == (m.nv, m.nv)
    check_fd(Dq, gt.fd_tangent(lambda x: gear.inverse_dynamics(m, x, dq, ddq, fe), m, q, EPS_Q))
    check_fd(Dv, fd_vec(lambda x: gear.inverse_dynamics(m, q, x, ddq, fe), dq, EPS_V))
    check_fd(Da, fd_vec(lambda x: gear.inverse_dynamics(m, q, dq, x, fe), ddq, EPS_LIN))


def test_inverse_dynamics_derivatives_vs_dense_reference():
    """Independent of the Cython RNEA: differences of the NumPy reference."""
    m, q, dq, ddq, tau, fe, _ = make_case(7, True, True, nbodies=6)
    Dq, Dv, _ = gear.inverse_dynamics_derivatives(m, q, dq, ddq, fe)
    check_fd(Dq, gt.fd_tangent(lambda x: gt.reference_inverse_dynamics(m, x, dq, ddq, fe), m, q, EPS_Q))
    check_fd(Dv, fd_vec(lambda x: gt.reference_inverse_dynamics(m, q, x, ddq, fe), dq, EPS_V))


def test_dtau_dddq_is_mass_matrix(case):
    m, q, dq, ddq, tau, fe, _ = case
    _, _, Da = gear.inverse_dynamics_derivatives(m, q, dq, ddq, fe)
    assert rel_err(Da, gear.mass_matrix(m, q)) < TIGHT
    assert rel_err(Da, gt.reference_mass_matrix(m, q)) < 1e-10


def test_velocity_derivative_at_rest_vanishes_without_gyroscopic_terms():
    """At dq = 0, d(tau)/d(dq) is zero (the velocity terms are quadratic)."""
    m, q, dq, ddq, tau, fe, _ = make_case(3, True, True)
    _, Dv, _ = gear.inverse_dynamics_derivatives(m, q, np.zeros(m.nv), ddq, fe)
    assert np.abs(Dv).max() < 1e-12


# ---------------------------------------------------------------------------
# forward dynamics (Table 6)
# ---------------------------------------------------------------------------
def test_forward_dynamics_derivatives_vs_finite_differences(case):
    m, q, dq, ddq, tau, fe, _ = case
    Fq, Fv, Ft = gear.forward_dynamics_derivatives(m, q, dq, tau, fe)
    assert Fq.shape == Fv.shape == Ft.shape == (m.nv, m.nv)
    check_fd(Fq, gt.fd_tangent(lambda x: gear.forward_dynamics(m, x, dq, tau, fe), m, q, EPS_Q))
    check_fd(Fv, fd_vec(lambda x: gear.forward_dynamics(m, q, x, tau, fe), dq, EPS_V))
    check_fd(Ft, fd_vec(lambda x: gear.forward_dynamics(m, q, dq, x, fe), tau, EPS_LIN))


def test_forward_derivatives_are_implicit_function_of_inverse(case):
    """dddq/dtau = M^-1 and dddq/d(q, dq) = -M^-1 dtau/d(q, dq) at ddq = ABA(tau)."""
    m, q, dq, ddq, tau, fe, _ = case
    Fq, Fv, Ft = gear.forward_dynamics_derivatives(m, q, dq, tau, fe)
    a = gear.forward_dynamics(m, q, dq, tau, fe)
    Dq, Dv, M = gear.inverse_dynamics_derivatives(m, q, dq, a, fe)
    eye = np.eye(m.nv)
    assert rel_err(Ft @ M, eye) < 1e-9
    assert rel_err(Ft, np.linalg.inv(M)) < 1e-9 * np.linalg.cond(M)
    assert rel_err(Ft, Ft.T) < 1e-9
    assert rel_err(M @ Fq, -Dq) < 1e-9
    assert rel_err(M @ Fv, -Dv) < 1e-9


# ---------------------------------------------------------------------------
# hybrid dynamics (Table 7)
# ---------------------------------------------------------------------------
def _masks(m, rng):
    nb = m.nbodies
    random = rng.random(nb) < 0.5
    random[int(rng.integers(nb))] = True     # at least one prescribed ...
    free = [i for i in range(nb) if m.joints[i].nv > 0 and i != np.flatnonzero(random)[0]]
    random[free[0]] = False                  # ... and one free joint with coordinates
    return {"random": random, "all": np.ones(nb, bool), "none": np.zeros(nb, bool)}


def _hybrid_fun(m, q, dq, ddq, tau, mask, u, fe):
    """(tau_out, ddq_out) as functions of q, dq, and the input vector."""
    def of_input(x):
        return np.concatenate(gear.hybrid_dynamics(m, q, dq, np.where(u, x, ddq),
                                                   np.where(u, tau, x), mask, fe))

    def of_q(x):
        return np.concatenate(gear.hybrid_dynamics(m, x, dq, ddq, tau, mask, fe))

    def of_dq(x):
        return np.concatenate(gear.hybrid_dynamics(m, q, x, ddq, tau, mask, fe))
    return of_q, of_dq, of_input


@pytest.mark.parametrize("which", ["random", "all", "none"])
def test_hybrid_dynamics_derivatives_vs_finite_differences(case, which):
    m, q, dq, ddq, tau, fe, rng = case
    mask = _masks(m, rng)[which]
    u = gt.prescribed_coordinates(m, mask)
    d = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, mask, fe)
    assert isinstance(d, gear.HybridDerivatives)
    assert all(x.shape == (m.nv, m.nv) for x in d)
    x0 = np.where(u, ddq, tau)
    of_q, of_dq, of_input = _hybrid_fun(m, q, dq, ddq, tau, mask, u, fe)
    nv = m.nv
    num_q = gt.fd_tangent(of_q, m, q, EPS_Q)
    num_v = fd_vec(of_dq, dq, EPS_V)
    num_in = fd_vec(of_input, x0, EPS_LIN)
    for an, num in [(d.dtau_dq, num_q[:nv]), (d.dddq_dq, num_q[nv:]),
                    (d.dtau_ddq, num_v[:nv]), (d.dddq_ddq, num_v[nv:])]:
        if np.any(num != 0):
            check_fd(an, num)
        else:       # e.g. tau_out on free coordinates is the input itself
            assert np.all(an == 0)
    assert rel_err(d.dtau_dinput, num_in[:nv]) < REL
    assert rel_err(d.dddq_dinput, num_in[nv:]) < REL
    # the given inputs pass through unchanged
    eye = np.eye(nv)
    assert np.array_equal(d.dtau_dinput[~u], eye[~u])
    assert np.array_equal(d.dddq_dinput[u], eye[u])
    assert np.all(d.dtau_dq[~u] == 0) and np.all(d.dddq_dq[u] == 0)


def test_hybrid_with_all_prescribed_is_inverse_dynamics(case):
    m, q, dq, ddq, tau, fe, _ = case
    d = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, np.ones(m.nbodies, bool), fe)
    Dq, Dv, M = gear.inverse_dynamics_derivatives(m, q, dq, ddq, fe)
    assert rel_err(d.dtau_dq, Dq) < TIGHT
    assert rel_err(d.dtau_ddq, Dv) < TIGHT
    assert rel_err(d.dtau_dinput, M) < TIGHT
    assert np.all(d.dddq_dq == 0) and np.all(d.dddq_ddq == 0)
    assert np.array_equal(d.dddq_dinput, np.eye(m.nv))


def test_hybrid_with_none_prescribed_is_forward_dynamics(case):
    m, q, dq, ddq, tau, fe, _ = case
    d = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, np.zeros(m.nbodies, bool), fe)
    Fq, Fv, Ft = gear.forward_dynamics_derivatives(m, q, dq, tau, fe)
    assert rel_err(d.dddq_dq, Fq) < 1e-9
    assert rel_err(d.dddq_ddq, Fv) < 1e-9
    assert rel_err(d.dddq_dinput, Ft) < 1e-9
    assert np.all(d.dtau_dq == 0) and np.all(d.dtau_ddq == 0)
    assert np.array_equal(d.dtau_dinput, np.eye(m.nv))


def test_hybrid_derivatives_accept_joint_names():
    m, q, dq, ddq, tau, fe, rng = make_case(4, True, True)
    mask = _masks(m, rng)["random"]
    names = [m.joint_names[i] for i in np.flatnonzero(mask)]
    a = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, mask, fe)
    b = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, names, fe)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


# ---------------------------------------------------------------------------
# batches
# ---------------------------------------------------------------------------
@pytest.fixture
def two_threads():
    old = gear.get_num_threads()
    gear.set_num_threads(2)
    yield
    gear.set_num_threads(old)


@pytest.mark.parametrize("floating", [False, True])
def test_batched_derivatives_equal_single_bit_for_bit(two_threads, floating):
    rng = np.random.default_rng(11 + floating)
    m = gt.random_tree(rng, nbodies=10, root_free=floating)
    N = 5
    q, dq, ddq, tau = gt.random_state(m, rng, batch=N)
    fe = rng.standard_normal((N, m.nbodies, 6))
    mask = _masks(m, rng)["random"]
    ID = gear.inverse_dynamics_derivatives(m, q, dq, ddq, fe)
    FD = gear.forward_dynamics_derivatives(m, q, dq, tau, fe)
    HD = gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, mask, fe)
    LIN = gear.linearize(m, q, dq, tau, fe)
    for out in (*ID, *FD, *HD):
        assert out.shape == (N, m.nv, m.nv)
    assert LIN[0].shape == (N, 2 * m.nv, 2 * m.nv) and LIN[1].shape == (N, 2 * m.nv, m.nv)
    for k in range(N):
        for batched, single in [
            (ID, gear.inverse_dynamics_derivatives(m, q[k], dq[k], ddq[k], fe[k])),
            (FD, gear.forward_dynamics_derivatives(m, q[k], dq[k], tau[k], fe[k])),
            (HD, gear.hybrid_dynamics_derivatives(m, q[k], dq[k], ddq[k], tau[k], mask, fe[k])),
            (LIN, gear.linearize(m, q[k], dq[k], tau[k], fe[k])),
        ]:
            for b, s in zip(batched, single):
                assert np.array_equal(b[k], s)


def test_single_state_arguments_broadcast_against_a_batch():
    rng = np.random.default_rng(5)
    m = gt.random_tree(rng, nbodies=8, root_free=True)
    q, dq, ddq, tau = gt.random_state(m, rng, batch=3)
    fe = rng.standard_normal((m.nbodies, 6))        # one f_ext for every state
    Dq, Dv, M = gear.inverse_dynamics_derivatives(m, q, dq[0], ddq[0], fe)
    for k in range(3):
        s = gear.inverse_dynamics_derivatives(m, q[k], dq[0], ddq[0], fe)
        assert np.array_equal(Dq[k], s[0]) and np.array_equal(Dv[k], s[1])
    Fq, _, _ = gear.forward_dynamics_derivatives(m, q[1], dq, tau[2], fe)
    assert Fq.shape == (3, m.nv, m.nv)
    assert np.array_equal(Fq[2], gear.forward_dynamics_derivatives(m, q[1], dq[2], tau[2], fe)[0])


@pytest.mark.parametrize("batched", ["q", "dq", "ddq", "tau", "f_ext"])
def test_hybrid_and_linearize_broadcast_single_states_against_any_batched_argument(batched):
    """A batch in any one per-state argument (the others single) gives a
    batch of results equal to the single-state calls."""
    rng = np.random.default_rng(9)
    m = gt.random_tree(rng, nbodies=7, root_free=True)
    N = 3
    qs, dqs, ddqs, taus = gt.random_state(m, rng, batch=N)
    fes = rng.standard_normal((N, m.nbodies, 6))
    mask = _masks(m, rng)["random"]
    args = dict(q=qs[0], dq=dqs[0], ddq=ddqs[0], tau=taus[0], f_ext=fes[0])
    args[batched] = dict(q=qs, dq=dqs, ddq=ddqs, tau=taus, f_ext=fes)[batched]

    def at(k):
        return {n: (v[k] if n == batched else v) for n, v in args.items()}
    HD = gear.hybrid_dynamics_derivatives(m, args["q"], args["dq"], args["ddq"], args["tau"], mask,
                                          args["f_ext"])
    for k in range(N):
        a = at(k)
        single = gear.hybrid_dynamics_derivatives(m, a["q"], a["dq"], a["ddq"], a["tau"], mask,
                                                  a["f_ext"])
        for b, s in zip(HD, single):
            assert b.shape == (N, m.nv, m.nv) and np.array_equal(b[k], s)
    if batched != "ddq":
        A, B = gear.linearize(m, args["q"], args["dq"], args["tau"], args["f_ext"])
        for k in range(N):
            a = at(k)
            A1, B1 = gear.linearize(m, a["q"], a["dq"], a["tau"], a["f_ext"])
            assert np.array_equal(A[k], A1) and np.array_equal(B[k], B1)


# ---------------------------------------------------------------------------
# linearize: finite differences of the flow on the manifold
# ---------------------------------------------------------------------------
def _flow_rate(m, q0, v0, tau0, fe, dx, du, eps, h):
    """d/dt at t = 0 of ``(difference(q_nom(t), q_pert(t)), v_pert(t) - v_nom(t))``
    for the perturbed state ``(q0 (+) eps delta, v0 + eps d_v)`` and torque
    ``tau0 + eps du``; each trajectory moves by one explicit step of +-h
    (``q(t) = q (+) t v``, ``v(t) = v + t ABA(q, v, tau)``), whose first
    derivative in time at t = 0 is the flow's."""
    nv = m.nv
    qp = m.integrate(q0, eps * dx[:nv])
    vp = v0 + eps * dx[nv:]
    ap = gear.forward_dynamics(m, qp, vp, tau0 + eps * du, fe)
    an = gear.forward_dynamics(m, q0, v0, tau0, fe)

    def state_diff(t):
        dq_ = m.difference(m.integrate(q0, v0, t), m.integrate(qp, vp, t))
        dv_ = (vp + t * ap) - (v0 + t * an)
        return np.concatenate([dq_, dv_])
    return (state_diff(h) - state_diff(-h)) / (2 * h)


@pytest.mark.parametrize("floating", [False, True])
@pytest.mark.parametrize("with_fext", [False, True])
def test_linearize_matches_finite_differences_of_the_flow(floating, with_fext):
    m, q, dq, ddq, tau, fe, rng = make_case(21, floating, with_fext)
    nv = m.nv
    A, B = gear.linearize(m, q, dq, tau, fe)
    assert A.shape == (2 * nv, 2 * nv) and B.shape == (2 * nv, nv)
    # columns of [A B] by mixed central differences in eps (state/input size)
    # and in t (the step): truncation O(eps^2 + h^2), linear in the perturbation
    eps, h = 1e-4, 1e-4
    AB = np.hstack([A, B])
    num = np.empty_like(AB)
    for k in range(3 * nv):
        e = np.zeros(3 * nv)
        e[k] = 1.0
        dx, du = e[:2 * nv], e[2 * nv:]
        num[:, k] = (_flow_rate(m, q, dq, tau, fe, dx, du, eps, h)
                     - _flow_rate(m, q, dq, tau, fe, dx, du, -eps, h)) / (2 * eps)
    assert rel_err(AB, num) < REL
    # and along random combined directions (linearity of the first-order term)
    for _ in range(3):
        dx = rng.standard_normal(2 * nv)
        du = rng.standard_normal(nv)
        rate = (_flow_rate(m, q, dq, tau, fe, dx, du, eps, h)
                - _flow_rate(m, q, dq, tau, fe, dx, du, -eps, h)) / (2 * eps)
        assert rel_err(A @ dx + B @ du, rate) < REL


def test_linearize_blocks(case):
    m, q, dq, ddq, tau, fe, _ = case
    nv = m.nv
    A, B = gear.linearize(m, q, dq, tau, fe)
    Fq, Fv, Ft = gear.forward_dynamics_derivatives(m, q, dq, tau, fe)
    assert np.array_equal(A[nv:, :nv], Fq) and np.array_equal(A[nv:, nv:], Fv)
    assert np.array_equal(A[:nv, nv:], np.eye(nv))
    assert np.array_equal(B[nv:], Ft) and np.all(B[:nv] == 0)
    # upper-left block: -ad of the joint velocity for Lie-group joints, else 0
    expect = np.zeros((nv, nv))
    for i, j in enumerate(m.joints):
        s = m.idx_v(m.joint_names[i])
        if j.kind == SPHERICAL:
            expect[s, s] = -skew(dq[s])
        elif j.kind == FREE:
            expect[s, s] = -ad(dq[s])
    assert np.array_equal(A[:nv, :nv], expect)


def test_linearize_upper_left_block_is_needed():
    """Without the -ad block the Lie-group rows of the flow disagree: the
    finite differences of the flow really see it (guards the test above)."""
    m, q, dq, ddq, tau, fe, _ = make_case(21, True, False)
    nv = m.nv
    A, _ = gear.linearize(m, q, dq, tau)
    assert np.abs(A[:6, :6]).max() > 0.1      # Free root with a non-zero twist
    k = int(np.argmax(np.abs(A[:6, :6]).max(axis=0)))
    e = np.zeros(2 * nv)
    e[k] = 1.0
    rate = (_flow_rate(m, q, dq, tau, None, e, np.zeros(nv), 1e-4, 1e-4)
            - _flow_rate(m, q, dq, tau, None, e, np.zeros(nv), -1e-4, 1e-4)) / 2e-4
    assert rel_err(rate[:6], A[:6, k]) < REL
    assert np.abs(rate[:6]).max() > 0.1


# ---------------------------------------------------------------------------
# bad inputs
# ---------------------------------------------------------------------------
def test_bad_inputs_raise_clear_errors():
    m, q, dq, ddq, tau, fe, _ = make_case(0, True, False, nbodies=5)
    nv, nq, nb = m.nv, m.nq, m.nbodies
    with pytest.raises(ValueError, match="q has wrong shape"):
        gear.inverse_dynamics_derivatives(m, q[:-1], dq, ddq)
    with pytest.raises(ValueError, match="dq has wrong shape"):
        gear.inverse_dynamics_derivatives(m, q, dq[:-1], ddq)
    with pytest.raises(ValueError, match="ddq has wrong shape"):
        gear.inverse_dynamics_derivatives(m, q, dq, np.zeros(nv + 1))
    with pytest.raises(ValueError, match="tau has wrong shape"):
        gear.forward_dynamics_derivatives(m, q, dq, np.zeros((nv, 2)))
    with pytest.raises(ValueError, match="f_ext has wrong shape"):
        gear.inverse_dynamics_derivatives(m, q, dq, ddq, np.zeros((nb, 3)))
    with pytest.raises(ValueError, match="f_ext has wrong shape"):
        gear.forward_dynamics_derivatives(m, q, dq, tau, np.zeros(6))
    with pytest.raises(TypeError, match="dq is required"):
        gear.inverse_dynamics_derivatives(m, q, None, ddq)
    with pytest.raises(ValueError, match="batch size"):
        gear.inverse_dynamics_derivatives(m, np.stack([q] * 3), np.zeros((2, nv)), ddq)
    with pytest.raises(ValueError, match="non-finite"):
        gear.forward_dynamics_derivatives(m, q, np.full(nv, np.nan), tau)
    bad = q.copy()
    bad[3:7] *= 2.0           # the Free root's quaternion
    with pytest.raises(ValueError, match="unit norm"):
        gear.inverse_dynamics_derivatives(m, bad, dq, ddq)
    with pytest.raises(ValueError, match="unit norm"):
        gear.linearize(m, bad, dq, tau)
    with pytest.raises(ValueError, match="prescribed has wrong shape"):
        gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, np.ones(nb + 1, bool))
    with pytest.raises(KeyError, match="no joint named"):
        gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, ["nope"])
    with pytest.raises(TypeError, match="prescribed is required"):
        gear.hybrid_dynamics_derivatives(m, q, dq, ddq, tau, None)
    with pytest.raises(ValueError, match="ddq has wrong shape"):
        gear.hybrid_dynamics_derivatives(m, q, dq, ddq[:2], tau, np.ones(nb, bool))
    with pytest.raises(ValueError, match="tau has wrong shape"):
        gear.linearize(m, q, dq, tau[:2])
    with pytest.raises(TypeError, match="real numeric"):
        gear.inverse_dynamics_derivatives(m, q, dq, ["a"] * nv)


def test_massless_subtree_is_reported():
    m = gear.Model()
    m.add_body("a", "world", gear.joints.Revolute([0, 0, 1]), inertia=gear.Inertia(1.0, [0.1, 0, 0], np.eye(3) * 0.01))
    m.add_body("b", "a", gear.joints.Revolute([0, 1, 0]))          # massless leaf
    z = np.zeros(m.nv)
    with pytest.raises(gear.SingularInertiaError):
        gear.forward_dynamics_derivatives(m, m.neutral(), z, z)
    # a batch: blocks of four states (aba_derivatives_lanes) and the rest
    q5, z5 = np.tile(m.neutral(), (5, 1)), np.zeros((5, m.nv))
    with pytest.raises(gear.SingularInertiaError, match=r"not positive definite \(state 0\)"):
        gear.forward_dynamics_derivatives(m, q5, z5, z5)
    with pytest.raises(gear.SingularInertiaError):
        gear.linearize(m, m.neutral(), z, z)
    # inverse dynamics derivatives stay defined
    Dq, Dv, M = gear.inverse_dynamics_derivatives(m, m.neutral(), z, z)
    assert M[1, 1] == 0.0


# ---------------------------------------------------------------------------
# docs
# ---------------------------------------------------------------------------
def test_docs_examples_run():
    import doctest

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "derivatives.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0

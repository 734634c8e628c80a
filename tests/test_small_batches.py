"""The allocation-light batch path of constrained forward dynamics
(``gear._core.FastForward`` on (N, n) arrays): validated and run with the
least Python in between, the kernel in the calling thread for small
batches.  It must give the general batch path's result bit for bit, for
every solver route, and leave anything it does not take (other dtypes,
layouts, shapes, non-finite values, non-unit quaternions, failing states)
to the general path, which converts or raises as before."""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.testing import consistent_velocity as _consistent


def _general(sysm, Q, dQ, T):
    # the general batch path (the solver's forward_batch), as the system
    # answered before the fast path existed
    out = sysm.solver.forward_batch(Q, dQ, T, None)
    assert out is not None
    return out


def _states(sysm, q, N, rng):
    Q = np.tile(q, (N, 1))
    dQ = np.stack([_consistent(sysm, q, rng) for _ in range(N)])
    T = rng.standard_normal((N, sysm.model.nv))
    return Q, dQ, T


@pytest.mark.parametrize("solver,opts", [("kkt", {"route": "aba"}), ("kkt", {"route": "dense"}),
                                         ("kkt", {"route": "sparse"}), ("projection", {}),
                                         ("soft", {"stiffness": 1e6})])
@pytest.mark.parametrize("N", [1, 3, 8, 40])
def test_fast_batches_equal_the_general_batch_path(solver, opts, N):
    sysm, q = mech.n_four_bar(4, tree="ground")
    s = sysm.with_solver(solver, **opts)
    rng = np.random.default_rng(N)
    Q, dQ, T = _states(s, q, N, rng)
    res = s.forward_dynamics(Q, dQ, T)
    ddq, lam, residual, stats = _general(s, Q, dQ, T)
    assert np.array_equal(res.ddq, ddq) and np.array_equal(res.lam, lam)
    assert np.array_equal(res.residual, residual)
    assert res.success.dtype == bool and res.success.shape == (N,) and res.success.all()
    assert res.message == "ok" and res.solver == s.solver.name
    assert res.stats["factorizations"] == stats["factorizations"]
    assert np.array_equal(res.stats["rank"], stats["rank"]) and res.stats["native"]
    assert res.stats.get("route") == stats.get("route")
    # and each state equals its single call
    for k in (0, N - 1):
        one = s.forward_dynamics(Q[k], dQ[k], T[k])
        assert np.array_equal(one.ddq, res.ddq[k])


def test_a_floating_base_with_quaternions():
    rng = np.random.default_rng(3)
    model = gear.testing.random_tree(rng, nbodies=6, kinds=["free", "spherical", "revolute"])
    cs = [gear.LoopClosure(4, gear.testing.random_se3(rng), "world", gear.testing.random_se3(rng), "distance")]
    sysm = gear.ConstrainedModel(model, cs)
    Q = np.array([model.random_configuration(rng) for _ in range(5)])
    dQ, T = rng.standard_normal((5, model.nv)), rng.standard_normal((5, model.nv))
    res = sysm.forward_dynamics(Q, dQ, T)
    ddq, lam, _, _ = _general(sysm, Q, dQ, T)
    assert np.array_equal(res.ddq, ddq) and np.array_equal(res.lam, lam)
    # a non-unit quaternion: the general path's clear error
    Qb = Q.copy()
    Qb[2, 3:7] *= 1.5
    with pytest.raises(ValueError, match="quaternion"):
        sysm.forward_dynamics(Qb, dQ, T)


def test_inputs_the_fast_path_does_not_take_go_the_general_way():
    sysm, q = mech.four_bar()
    rng = np.random.default_rng(1)
    Q, dQ, T = _states(sysm, q, 4, rng)
    ref = sysm.forward_dynamics(Q, dQ, T)
    # lists, float32, a non-contiguous view, a single tau broadcast: converted
    for args in ((Q.tolist(), dQ.tolist(), T.tolist()),
                 (Q.astype(np.float32).astype(np.float64), dQ, T),
                 (np.asfortranarray(Q), dQ, T),
                 (Q, dQ, np.ascontiguousarray(T))):
        out = sysm.forward_dynamics(*args)
        assert np.allclose(out.ddq, ref.ddq, rtol=1e-6, atol=1e-9)
    one_tau = sysm.forward_dynamics(Q, dQ, T[0])
    assert np.array_equal(one_tau.ddq[1], sysm.forward_dynamics(Q[1], dQ[1], T[0]).ddq)
    # clear errors as before
    Tn = T.copy()
    Tn[1, 0] = np.nan
    with pytest.raises(ValueError, match="tau"):
        sysm.forward_dynamics(Q, dQ, Tn)
    with pytest.raises(ValueError, match="states"):
        sysm.forward_dynamics(Q, dQ[:3], T)
    with pytest.raises(ValueError, match="shape"):
        sysm.forward_dynamics(Q[:, :2], dQ, T)
    # an empty batch
    assert sysm.forward_dynamics(Q[:0], dQ[:0], T[:0]).ddq.shape == (0, 3)


def test_counters_count_the_states():
    sysm, q = mech.four_bar()
    rng = np.random.default_rng(2)
    Q, dQ, T = _states(sysm, q, 6, rng)
    before = dict(sysm.solver.counters)
    sysm.forward_dynamics(Q, dQ, T)
    assert sysm.solver.counters["calls"] - before["calls"] == 6


@pytest.mark.parametrize("N", [1, 5, 40])
def test_tree_rnea_and_aba_small_batches(N):
    """gear.inverse_dynamics / forward_dynamics on (N, n) arrays: the same
    bits as the general batched driver (and as single calls), on a random
    tree of every joint kind (quaternions included)."""
    from gear import _core
    from gear.algorithms.dynamics import get_num_threads

    rng = np.random.default_rng(N)
    m = gear.testing.random_tree(rng, nbodies=8)
    Q = np.array([m.random_configuration(rng) for _ in range(N)])
    dQ, X = rng.standard_normal((N, m.nv)), rng.standard_normal((N, m.nv))
    tau = gear.inverse_dynamics(m, Q, dQ, X)
    ref = np.empty((N, m.nv))
    _core.rnea(m.data, Q, dQ, X, None, True, ref, get_num_threads())
    assert np.array_equal(tau, ref)
    ddq = gear.forward_dynamics(m, Q, dQ, X)
    ref = np.zeros((N, m.nv))
    st = np.zeros(N, dtype=np.int32)
    _core.hybrid(m.data, Q, dQ, ref, X.copy(), None, None, st, get_num_threads())
    assert np.array_equal(ddq, ref) and not st.any()
    assert np.array_equal(ddq[-1], gear.forward_dynamics(m, Q[-1], dQ[-1], X[-1]))


def test_tree_batches_the_fast_path_leaves_alone():
    m = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(0)
    Q = np.array([m.random_configuration(rng) for _ in range(3)])
    dQ, X = rng.standard_normal((3, m.nv)), rng.standard_normal((3, m.nv))
    ref = gear.forward_dynamics(m, Q, dQ, X)
    assert np.allclose(gear.forward_dynamics(m, Q.tolist(), dQ, X), ref, rtol=1e-12, atol=1e-12)
    assert np.allclose(gear.forward_dynamics(m, np.asfortranarray(Q), dQ, X), ref, rtol=1e-12, atol=1e-12)
    Xn = X.copy()
    Xn[2, 1] = np.inf
    with pytest.raises(ValueError, match="tau"):
        gear.forward_dynamics(m, Q, dQ, Xn)
    with pytest.raises(ValueError):
        gear.inverse_dynamics(m, Q, dQ[:2], X)
    # a massless subtree: the general path names the joint
    bad = gear.Model()
    bad.add_body("a", "world", gear.joints.Revolute([0, 0, 1]), inertia=gear.Inertia(0.0, [0, 0, 0], np.zeros((3, 3))),
                 joint_name="ja")
    with pytest.raises(gear.SingularInertiaError, match="'ja'"):
        gear.forward_dynamics(bad, np.zeros((2, 1)), np.zeros((2, 1)), np.zeros((2, 1)))


@pytest.mark.parametrize("N", [3, 40])
def test_closed_inverse_dynamics_batches_take_the_light_path(N):
    """Batches of closed inverse dynamics (default objective, no loads) are
    validated and run in C as one state is; the general batch path's
    result, bit for bit; an under-actuated batch still gets the general
    path's hybrid answer."""
    sysm, q = mech.four_bar()
    rng = np.random.default_rng(N)
    Q, dQ, T = _states(sysm, q, N, rng)
    ddQ = sysm.forward_dynamics(Q, dQ, T).ddq
    tp = rng.standard_normal((N, 3))
    act = np.array([True, False, False])
    fi = sysm.solver.fast_inverse()
    for tau_p in (None, tp):
        fast = fi(Q, dQ, ddQ, act, tau_p)
        assert fast is not None                       # taken
        general = sysm.inverse_dynamics(Q.tolist(), dQ.tolist(), ddQ.tolist(), ["crank"],
                                        tau_passive=None if tau_p is None else tau_p.tolist())
        for name in ("tau", "lam", "exact", "ddq", "success"):
            assert np.array_equal(getattr(fast, name), getattr(general, name)), name
        assert fast.message == general.message == "ok" and fast.stats == general.stats
        pub = sysm.inverse_dynamics(Q, dQ, ddQ, ["crank"], tau_passive=tau_p)
        assert np.array_equal(pub.tau, general.tau)
    # every joint passive: under-actuated, the general path's hybrid answer
    none = np.zeros(3, dtype=bool)
    assert fi(Q, dQ, ddQ, none, None) is None
    res = sysm.inverse_dynamics(Q, dQ, ddQ, [])
    assert not res.exact.any()


@pytest.mark.parametrize("solver,opts", [("kkt", {"route": "aba"}), ("kkt", {"route": "dense"}),
                                         ("kkt", {"route": "sparse"}), ("projection", {}),
                                         ("soft", {"stiffness": 1e6})])
@pytest.mark.parametrize("N", [3, 40])
def test_closed_hybrid_dynamics_batches_take_the_light_path(solver, opts, N):
    """Batches of closed hybrid dynamics (no loads) are validated and run in
    C as one state is (``FastHybrid``): the general batch path's result,
    bit for bit, with its stats; the maximal solver's batches keep the
    general path."""
    sysm, q = mech.n_four_bar(4, tree="ground")
    s = sysm.with_solver(solver, **opts)
    rng = np.random.default_rng(N)
    Q, dQ, T = _states(s, q, N, rng)
    ddQ = rng.standard_normal(T.shape)
    names = [s.model.joint_names[0], s.model.joint_names[3]]
    mask = s._fast_mask(names)
    fast = s.solver.fast_hybrid()(Q, dQ, ddQ, T, mask)
    assert fast is not None                                   # taken
    t, d, lam, res, stats = s.solver.hybrid_batch(Q, dQ, ddQ, T, s._joint_dofs(names, "prescribed"), None)
    for name, ref in (("tau", t), ("ddq", d), ("lam", lam), ("residual", res)):
        assert np.array_equal(getattr(fast, name), ref), name
    assert fast.success.shape == (N,) and fast.success.all() and fast.message == "ok"
    assert fast.stats["factorizations"] == stats["factorizations"] and fast.stats["native"]
    assert np.array_equal(fast.stats["rank"], stats["rank"]) and fast.stats.get("route") == stats.get("route")
    # the public call takes it, and list inputs (the general path) agree
    pub = s.hybrid_dynamics(Q, dQ, ddQ, T, names)
    gen = s.hybrid_dynamics(Q.tolist(), dQ.tolist(), ddQ.tolist(), T.tolist(), names)
    for name in ("tau", "ddq", "lam", "residual"):
        assert np.array_equal(getattr(pub, name), getattr(gen, name)), name
    one = s.hybrid_dynamics(Q[N - 1], dQ[N - 1], ddQ[N - 1], T[N - 1], names)
    assert np.array_equal(one.tau, pub.tau[N - 1]) and np.array_equal(one.ddq, pub.ddq[N - 1])
    # what it refuses goes the general way: a NaN, a batch of the wrong length
    bad = ddQ.copy()
    bad[1, 0] = np.nan
    assert s.solver.fast_hybrid()(Q, dQ, bad, T, mask) is None
    assert s.solver.fast_hybrid()(Q, dQ, ddQ[:-1], T, mask) is None
    with pytest.raises(ValueError, match="ddq"):
        s.hybrid_dynamics(Q, dQ, ddQ[:-1], T, names)


def test_maximal_hybrid_batches_keep_the_general_path():
    sysm, q = mech.n_four_bar(2, tree="ground")
    s = sysm.with_solver("maximal")
    rng = np.random.default_rng(1)
    Q, dQ, T = _states(s, q, 5, rng)
    mask = s._fast_mask([s.model.joint_names[0]])
    assert s.solver.fast_hybrid()(Q, dQ, T, T, mask) is None
    res = s.hybrid_dynamics(Q, dQ, T, T, [s.model.joint_names[0]])
    assert res.ddq.shape == (5, s.model.nv) and res.success.all()


@pytest.mark.parametrize("N", [3, 40])
def test_closed_derivative_batches_take_the_light_path(N):
    """Batches of both closed-chain derivatives (no loads) take the
    allocation-light path: the general path's arrays, bit for bit."""
    from gear import _core
    from gear.constraints import derivatives as D

    sysm, q = mech.n_four_bar(3, tree="ground")
    rng = np.random.default_rng(N)
    Q, dQ, T = _states(sysm, q, N, rng)
    nd, nk = sysm._native(1e-10), len(sysm.constraints)
    assert _core.closed_forward_derivatives1(sysm.model.data, nd, nk, Q, dQ, T, 1e-10)[4] == 0    # taken
    fast = sysm.forward_dynamics_derivatives(Q, dQ, T)
    gen = D.forward_dynamics_derivatives(sysm, Q.tolist(), dQ.tolist(), T.tolist())
    for name in ("ddq", "lam", "ddq_dq", "ddq_ddq", "ddq_dtau", "lam_dq", "lam_ddq", "lam_dtau"):
        assert np.array_equal(getattr(fast, name), getattr(gen, name)), name
    sysm, q = mech.four_bar()
    Q, dQ, T = _states(sysm, q, N, rng)
    nd, nk = sysm._native(1e-10), len(sysm.constraints)
    ddQ = sysm.forward_dynamics(Q, dQ, T).ddq
    act = ["crank"]
    tp = rng.standard_normal(T.shape)
    a8 = sysm._joint_dofs(act, "actuated").view(np.uint8)
    for tau_p in (None, tp):
        assert _core.closed_inverse_derivatives1(sysm.model.data, nd, nk, Q, dQ, ddQ, a8, tau_p, 1e-10)[4] == 0
        fast = sysm.inverse_dynamics_derivatives(Q, dQ, ddQ, act, tau_passive=tau_p)
        gen = sysm.inverse_dynamics_derivatives(Q.tolist(), dQ.tolist(), ddQ.tolist(), act,
                                                tau_passive=None if tau_p is None else tau_p.tolist())
        for name in ("tau", "lam", "tau_dq", "tau_ddq", "tau_dddq", "lam_dq", "lam_ddq", "lam_dddq"):
            assert np.array_equal(getattr(fast, name), getattr(gen, name)), name
    # a batch the light path refuses (a NaN) goes the general way, which says so
    bad = T.copy()
    bad[-1, 0] = np.inf
    assert _core.closed_forward_derivatives1(sysm.model.data, nd, nk, Q, dQ, bad, 1e-10) is None
    with pytest.raises(ValueError):
        sysm.forward_dynamics_derivatives(Q, dQ, bad)
    # an under-actuated batch: the general path names the state
    with pytest.raises(ValueError, match=r"under-actuated here \(state 0\)"):
        sysm.inverse_dynamics_derivatives(Q, dQ, ddQ, [])


def test_the_inverse_derivatives_light_path_keeps_its_errors():
    """``actuated`` lists are converted once and kept, but a bad one is
    refused every time with the general path's message, and one state
    that is under-actuated says so."""
    sysm, q = mech.four_bar()
    rng = np.random.default_rng(5)
    Q, dQ, T = _states(sysm, q, 1, rng)
    ddq = sysm.forward_dynamics(Q[0], dQ[0], T[0]).ddq
    a = sysm.inverse_dynamics_derivatives(Q[0], dQ[0], ddq, ["crank"])
    b = sysm.inverse_dynamics_derivatives(Q[0], dQ[0], ddq, ("crank",))
    c = sysm.inverse_dynamics_derivatives(Q[0], dQ[0], ddq, np.array([True, False, False]))
    assert np.array_equal(a.tau_dq, b.tau_dq) and np.array_equal(a.tau_dq, c.tau_dq)
    for _ in range(2):
        with pytest.raises(KeyError, match="no joint named 'crnk'"):
            sysm.inverse_dynamics_derivatives(Q[0], dQ[0], ddq, ["crnk"])
        with pytest.raises((TypeError, ValueError)):
            sysm.inverse_dynamics_derivatives(Q[0], dQ[0], ddq, [["crank"]])
        with pytest.raises(ValueError, match=r"under-actuated here: "):
            sysm.inverse_dynamics_derivatives(Q[0], dQ[0], ddq, [])


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_every_entry_of_a_fast_batch_is_checked(value):
    # the fast paths check finiteness eight entries at a time, then the
    # tail: a bad entry anywhere (5 x 7 = 35 entries: four blocks and a tail
    # of 3) must reach the general path's error, never the kernels
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(3)
    Q = arm.random_configuration(rng, n=5)
    X = rng.standard_normal((5, arm.nv))
    for i in range(X.size):
        bad = X.copy()
        bad.flat[i] = value
        where = rf"\({i // arm.nv}, {i % arm.nv}\)"
        with pytest.raises(ValueError, match=rf"^dq contains non-finite values .*{where}"):
            gear.inverse_dynamics(arm, Q, bad, X)
        with pytest.raises(ValueError, match=rf"^tau contains non-finite values .*{where}"):
            gear.forward_dynamics(arm, Q, X, bad)
    for i in range(arm.nv):                     # one state (1-D arrays)
        bad = X[0].copy()
        bad[i] = value
        with pytest.raises(ValueError, match=r"^dq contains non-finite values"):
            gear.inverse_dynamics(arm, Q[0], bad, X[0])
    sysm, q = mech.four_bar()
    Qc = np.tile(q, (5, 1))
    dQc = np.zeros((5, 3))
    for i in range(15):
        T = rng.standard_normal((5, 3))
        T.flat[i] = value
        with pytest.raises(ValueError, match="tau"):
            sysm.forward_dynamics(Qc, dQc, T)

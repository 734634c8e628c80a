"""The maximal-coordinate formulation: gear.maximal.MaximalSystem (sparse
M, J, KKT) and the "maximal" solver (CHOLMOD), against the reduced
solvers."""
import numpy as np
import pytest

import gear
from gear import mechanisms as mech
from gear.constraints.closures import KINDS
from gear.testing import ALL_KINDS, random_se3, random_tree
from gear.testing import consistent_velocity as _consistent

from test_solvers import MECHS

pytest.importorskip("sksparse", reason="the maximal solver needs scikit-sparse (the 'sparse' extra)")


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b)))




def _mechanism_state(name, seed):
    """A mechanism of MECHS at a consistent random state (at rest at the
    collinear four-bar's branch point), with random torques and loads."""
    sysm, q = MECHS[name]()
    model = sysm.model
    rng = np.random.default_rng(len(name) + seed)
    dq = np.zeros(model.nv) if name == "four_bar_collinear" else _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    f_ext = rng.standard_normal((model.nbodies, 6))
    return sysm, q, dq, tau, f_ext, sysm.constraint_jacobian(q), rng


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_maximal_agrees_with_the_reduced_solvers(name):
    sysm, q, dq, tau, f_ext, A, rng = _mechanism_state(name, 3)
    model = sysm.model
    mx = sysm.with_solver("maximal")
    for fe in (None, f_ext):
        ref = sysm.forward_dynamics(q, dq, tau, fe)
        r = mx.forward_dynamics(q, dq, tau, fe)
        assert r.solver == "maximal" and r.stats["nnz_factor"] > 0
        assert rel(r.ddq, ref.ddq) < 1e-8, name
        assert rel(A.T @ r.lam, A.T @ ref.lam) < 1e-8, name
        assert r.residual < 1e-9 * max(1.0, np.abs(r.ddq).max())
    pres = np.zeros(model.nbodies, dtype=bool)
    pres[0] = True
    ddq_p = ref.ddq + 0.3 * _consistent(sysm, q, rng)
    h1 = sysm.hybrid_dynamics(q, dq, ddq_p, tau, pres)
    h2 = mx.hybrid_dynamics(q, dq, ddq_p, tau, pres)
    assert rel(h2.ddq, h1.ddq) < 1e-8 and rel(h2.tau, h1.tau) < 1e-8, name


def random_closed(seed):
    """A random tree of 8 bodies with every joint kind but fixed (helical,
    universal, planar...: ``S^T S != I``, ``S`` depending on ``q``), a
    fixed or a floating base, and two closures of varying kinds, closed at
    the returned ``q``: ``(sysm, q, rng)``."""
    rng = np.random.default_rng(100 + seed)
    model = random_tree(rng, nbodies=8, kinds=[k for k in ALL_KINDS if k != "fixed"], root_free=seed % 2 == 1)
    q = model.random_configuration(rng)
    poses = gear.forward_kinematics(model, q)
    kinds = sorted(KINDS)
    cs = []
    for kind in (kinds[seed % len(kinds)], kinds[(seed + 3) % len(kinds)]):
        a, b = int(rng.integers(0, 8)), int(rng.integers(0, 8))
        while b == a:
            b = int(rng.integers(0, 8))
        Pa = random_se3(rng)
        W = poses[a] @ Pa.homogeneous()                       # frame A in the world at q
        extra = {}
        if kind == "distance":
            W = W @ gear.SE3(p=[0.3, 0.0, 0.0]).homogeneous()
            extra["distance"] = 0.3
        Pb = np.linalg.inv(poses[b]) @ W                      # frame B on A: closed at q
        cs.append(gear.LoopClosure(a, Pa, b, gear.SE3(Pb[:3, :3], Pb[:3, 3]), kind, **extra))
    sysm = gear.ConstrainedModel(model, cs)
    assert np.abs(sysm.constraint_residual(q)).max() < 1e-12
    return sysm, q, rng


@pytest.mark.parametrize("seed", range(8))
def test_maximal_on_random_trees_of_every_joint_kind(seed):
    """Helical, universal, planar... joints (S^T S != I, S depending on q),
    a closure of every kind (closed at the sampled state), fixed and
    floating bases."""
    sysm, q, rng = random_closed(seed)
    model = sysm.model
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    ref = sysm.forward_dynamics(q, dq, tau)
    r = sysm.with_solver("maximal").forward_dynamics(q, dq, tau)
    A = sysm.constraint_jacobian(q)
    assert rel(r.ddq, ref.ddq) < 1e-8 and rel(A.T @ r.lam, A.T @ ref.lam) < 1e-8
    # the native kernel's Householder bases of the joint rows (S_i depending
    # on q) give the scikit-sparse path's SVD answer
    r2 = sysm.with_solver("maximal", native=False).forward_dynamics(q, dq, tau)
    assert r.stats.get("native") == gear._core.cholmod_available() and "native" not in r2.stats
    assert rel(r.ddq, r2.ddq) < 1e-9 and rel(A.T @ r.lam, A.T @ r2.lam) < 1e-9
    # an open tree: the maximal system reproduces ABA
    tree = gear.ConstrainedModel(model, [])
    dq = rng.standard_normal(model.nv)
    assert rel(tree.with_solver("maximal").forward_dynamics(q, dq, tau).ddq,
               gear.forward_dynamics(model, q, dq, tau)) < 1e-9


def test_sparse_matrices():
    import scipy.sparse as sp

    sysm, q = mech.n_four_bar(3)
    model = sysm.model
    rng = np.random.default_rng(0)
    dq = _consistent(sysm, q, rng)
    ms = gear.maximal.MaximalSystem(sysm)
    mats = ms.matrices(q, dq)
    Mb, J, KKT = mats["Mb"], mats["J"], mats["KKT"]
    assert all(sp.issparse(x) for x in (Mb, J, KKT))
    nb = model.nbodies
    assert Mb.shape == (6 * nb, 6 * nb) and J.shape == (mats["nJ"] + mats["nL"], 6 * nb)
    assert mats["nL"] == sysm.nc and mats["nJ"] == sum(6 - j.nv for j in model.joints)
    # block-diagonal inertia equals the bodies' spatial inertias
    for i, I in enumerate(model.inertias):
        assert np.allclose(Mb[6 * i:6 * i + 6, 6 * i:6 * i + 6].toarray(), I.matrix())
    # a consistent state's twists satisfy every row; the KKT matrix is symmetric
    _, twists = gear.maximal.from_reduced(model, q, dq)
    assert np.abs(J @ twists.ravel()).max() < 1e-12 * max(1.0, np.abs(twists).max())
    assert abs(KKT - KKT.T).max() == 0.0
    # J dV = c for the body accelerations of the solved ddq
    res = sysm.forward_dynamics(q, dq, np.zeros(model.nv))
    from gear.constraints import _kinematics as K

    _, Jb, _, acc = K.tree_kinematics(model, q, dq)
    dV = (Jb @ res.ddq + acc).ravel()
    assert np.abs(J @ dV - mats["c"]).max() < 1e-10
    # the loop rows are the reduced rows A
    assert np.abs(J[mats["nJ"]:] @ Jb.reshape(-1, model.nv) - sysm.constraint_jacobian(q)).max() < 1e-13


@pytest.mark.parametrize("native", [False, True])
def test_symbolic_factorisation_is_reused_and_options_are_checked(native):
    if native and not gear._core.cholmod_available():
        pytest.skip("gear was built without CHOLMOD (no native maximal kernel)")
    sysm, q = mech.four_bar()
    mx = sysm.with_solver("maximal", ordering="amd", refinement=2, native=native)
    mx.forward_dynamics(q, np.zeros(3), np.ones(3))
    plan = mx.solver._nd
    for _ in range(2):
        mx.forward_dynamics(q, np.zeros(3), np.ones(3))
    if native:
        assert mx.solver._nd is plan and not mx.solver._symbolic        # analysed once
    else:
        assert plan is None and len(mx.solver._symbolic) == 1
    assert mx.solver.counters["factorizations"] == 3
    with pytest.raises(ValueError, match="regularization"):
        sysm.with_solver("maximal", regularization=-1)
    with pytest.raises(ValueError, match="refinement"):
        sysm.with_solver("maximal", refinement=1.5)


def test_what_the_maximal_formulation_does_not_take():
    sysm, q = mech.rolling_ball()
    with pytest.raises(NotImplementedError, match="LoopClosure constraints only"):
        sysm.with_solver("maximal")
    model = gear.Model()
    model.add_body("a", -1, gear.joints.Revolute([0, 0, 1]), inertia=gear.Inertia(1.0, [0, 0, 0], np.eye(3)))
    model.add_body("frame", 0, gear.joints.Revolute([0, 0, 1]), gear.SE3(p=[1, 0, 0]),
                   inertia=gear.Inertia(0.0, [0, 0, 0], np.zeros((3, 3))))
    with pytest.raises(gear.SingularInertiaError, match="'frame'"):
        gear.ConstrainedModel(model, []).with_solver("maximal")


def _hybrid_check(sysm, q, dq, ddq_p, tau, u, ref, out):
    """ddq always unique: equal to kkt's.  tau[u] and A^T lam are unique
    when the free coordinates' rows A_v have the rank of A; otherwise any
    solution of M ddq + b = tau + A^T lam is valid (kkt picks the
    minimum-norm lam), so the equations of motion are checked instead."""
    model = sysm.model
    A = sysm.constraint_jacobian(q)
    t_ref, d_ref, l_ref = ref
    t_o, d_o, l_o = out
    assert rel(d_o, d_ref) < 1e-8
    assert np.array_equal(d_o[u], ddq_p[u]) and np.array_equal(t_o[~u], tau[~u])
    eom = gear.inverse_dynamics(model, q, dq, d_o) - A.T @ l_o - t_o
    assert np.abs(eom).max() < 1e-9 * max(1.0, np.abs(t_o).max(), np.abs(A.T @ l_o).max())
    if A.size == 0 or np.linalg.matrix_rank(A[:, ~u]) == np.linalg.matrix_rank(A):
        assert rel(t_o, t_ref) < 1e-8
        assert rel(A.T @ l_o, A.T @ l_ref) < 1e-8


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k not in ("rolling_ball", "four_bar_collinear")))
def test_hybrid_with_each_joint_prescribed(name):
    """Every joint in turn, spherical and universal ones included (their
    S^+ has zero entries: the prescription rows must keep them as explicit
    zeros for the 6-block product J Mb^-1)."""
    sysm, q = MECHS[name]()
    model = sysm.model
    rng = np.random.default_rng(len(name))
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    ddq_p = sysm.forward_dynamics(q, dq, tau).ddq + 0.3 * _consistent(sysm, q, rng)
    mx = sysm.with_solver("maximal")
    for j in range(model.nbodies):
        if model.joints[j].nv == 0:
            continue
        pres = np.zeros(model.nbodies, dtype=bool)
        pres[j] = True
        h1 = sysm.hybrid_dynamics(q, dq, ddq_p, tau, pres)
        h2 = mx.hybrid_dynamics(q, dq, ddq_p, tau, pres)
        u = np.zeros(model.nv, dtype=bool)
        u[model._iv[j]:model._iv[j] + model.joints[j].nv] = True
        _hybrid_check(sysm, q, dq, ddq_p, tau, u, (h1.tau, h1.ddq, h1.lam), (h2.tau, h2.ddq, h2.lam))
    # the factor of each prescribed set is analysed once and kept (the
    # native kernel's plans, or the scikit-sparse path's factors)
    kept = mx.solver._nd_h if mx.solver._native_enabled() else mx.solver._symbolic
    assert len(kept) == sum(j.nv > 0 for j in model.joints)


@pytest.mark.parametrize("seed", range(6))
def test_hybrid_per_velocity_coordinate(seed):
    """The solver interface prescribes single velocity coordinates (``u``
    per coordinate), also part of a multi-dof joint: compared with the
    kkt solver's NumPy path, on random trees of every joint kind with and
    without a loop closure."""
    rng = np.random.default_rng(200 + seed)
    model = random_tree(rng, nbodies=7, kinds=[k for k in ALL_KINDS if k != "fixed"], root_free=seed % 2 == 0)
    q = model.random_configuration(rng)
    cs = []
    if seed >= 3:
        poses = gear.forward_kinematics(model, q)
        Pa = random_se3(rng)
        W = poses[1] @ Pa.homogeneous()
        Pb = np.linalg.inv(poses[5]) @ W
        cs.append(gear.LoopClosure(1, Pa, 5, gear.SE3(Pb[:3, :3], Pb[:3, 3]), "ball"))
    sysm = gear.ConstrainedModel(model, cs)
    dq = _consistent(sysm, q, rng)
    tau = rng.standard_normal(model.nv)
    ddq_p = rng.standard_normal(model.nv)
    mx = sysm.with_solver("maximal")
    for _ in range(3):
        u = rng.random(model.nv) < 0.4
        ref = sysm.solver._hybrid_numpy(q, dq, ddq_p, tau, u, None)
        t2, d2, l2, res, stats = mx.solver.hybrid(q, dq, ddq_p, tau, u, None)
        _hybrid_check(sysm, q, dq, ddq_p, tau, u, (ref[0], ref[1], ref[2]), (t2, d2, l2))
        assert stats["rows"] == mx.solver.maximal.nrows + int(u.sum())


@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("make", [lambda: mech.n_four_bar(10),
                                  lambda: mech.four_bar(crank=0.3, coupler=0.6, rocker=0.3, ground=0.6, angle=0.0)])
def test_unregularised_redundant_rows_are_caught_and_regularised(make, native):
    """With regularization=0 the planar chains closed by 3-D balls give a
    singular Schur complement: CHOLMOD's LDL^T meets a zero or negative
    pivot, which the solver detects and refactorises with beta raised;
    the answer stays the kkt solver's.  (The native kernel forms K from
    H_a . H_b, whose rounding may leave the singular pivot a tiny positive
    number on the small four-bar: one factorisation, the same answer.)"""
    if native and not gear._core.cholmod_available():
        pytest.skip("gear was built without CHOLMOD (no native maximal kernel)")
    sysm, q = make()
    nv = sysm.model.nv
    tau = np.linspace(-1.0, 1.0, nv)
    ref = sysm.forward_dynamics(q, np.zeros(nv), tau)
    r = sysm.with_solver("maximal", regularization=0.0, native=native).forward_dynamics(q, np.zeros(nv), tau)
    assert r.stats["factorizations"] == 2 if (not native or nv > 3) else r.stats["factorizations"] in (1, 2)
    assert rel(r.ddq, ref.ddq) < 1e-8
    A = sysm.constraint_jacobian(q)
    assert rel(A.T @ r.lam, A.T @ ref.lam) < 1e-8
    # the default regularisation needs one factorisation
    assert sysm.with_solver("maximal", native=native).forward_dynamics(
        q, np.zeros(nv), tau).stats["factorizations"] == 1


@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_sparse_kkt_against_a_dense_reduced_reference(name):
    """The sparse maximal KKT of Ruan, "Articulated rigid body systems", eq. 12, solved densely by least
    squares, gives the body accelerations and loop forces of the dense
    reduced KKT [[M, A^T], [A, 0]] built from gear.testing's reference M
    and b (not from the solvers).  Also: J annihilates the maximal twists
    of a consistent state, KKT is symmetric, Mb holds the body inertias."""
    from gear.constraints import _kinematics as K
    from gear.testing import reference_bias, reference_mass_matrix

    sysm, q = MECHS[name]()
    model = sysm.model
    nb, nv = model.nbodies, model.nv
    rng = np.random.default_rng(len(name) + 11)
    dq = np.zeros(nv) if name == "four_bar_collinear" else _consistent(sysm, q, rng)
    tau = rng.standard_normal(nv)
    f_ext = rng.standard_normal((nb, 6))
    ms = gear.maximal.MaximalSystem(sysm)
    mats = ms.matrices(q, dq, tau, f_ext)
    Mb, J, KKT = mats["Mb"], mats["J"], mats["KKT"]
    nJ, nL = mats["nJ"], mats["nL"]
    assert Mb.shape == (6 * nb, 6 * nb) and J.shape == (nJ + nL, 6 * nb) and nL == sysm.nc
    assert KKT.shape == (6 * nb + nJ + nL,) * 2 and abs(KKT - KKT.T).max() == 0.0
    for i, I in enumerate(model.inertias):
        np.testing.assert_array_equal(Mb[6 * i:6 * i + 6, 6 * i:6 * i + 6].toarray(), I.matrix())
    _, V = gear.maximal.from_reduced(model, q, dq)
    np.testing.assert_allclose(mats["twists"], V, rtol=0, atol=1e-12)
    assert np.abs(J @ V.ravel()).max() < 1e-11 * max(1.0, np.abs(V).max())
    # dense reduced reference
    M = reference_mass_matrix(model, q)
    b = reference_bias(model, q, dq, f_ext)
    A, bias = sysm._rows(q, dq)
    m = A.shape[0]
    Kr = np.block([[M, A.T], [A, np.zeros((m, m))]])
    xr = np.linalg.lstsq(Kr, np.concatenate([tau - b, -bias]), rcond=1e-12)[0]
    ddq_ref, ATlam_ref = xr[:nv], A.T @ (-xr[nv:])
    _, Jb, _, acc = K.tree_kinematics(model, q, dq)
    dV_ref = (Jb @ ddq_ref + acc).ravel()
    # the maximal KKT, densely
    x = np.linalg.lstsq(KKT.toarray(), np.concatenate([mats["f"], mats["c"]]), rcond=1e-12)[0]
    dV, lam_loop = x[:6 * nb], -x[6 * nb + nJ:]
    assert rel(dV, dV_ref) < 1e-8, name
    assert rel(A.T @ lam_loop, ATlam_ref) < 1e-8, name
    # and the solver on the same state
    r = sysm.with_solver("maximal").forward_dynamics(q, dq, tau, f_ext)
    assert rel(r.ddq, ddq_ref) < 1e-8 and rel(A.T @ r.lam, ATlam_ref) < 1e-8


def test_bad_input_is_named():
    sysm, q = mech.four_bar()
    ms = gear.maximal.MaximalSystem(sysm)
    with pytest.raises(ValueError, match="q must be one state of shape \\(3,\\)"):
        ms.matrices(np.stack([q, q]))
    with pytest.raises(ValueError, match="q has wrong shape"):
        ms.matrices(q[:2])
    with pytest.raises(ValueError, match="dq has wrong shape"):
        ms.matrices(q, np.ones(2))
    with pytest.raises(ValueError, match="f_ext has wrong shape"):
        ms.matrices(q, None, None, np.ones((2, 6)))
    with pytest.raises(ValueError, match="q contains non-finite"):
        ms.matrices(np.array([np.nan, 0.0, 0.0]))
    with pytest.raises(TypeError, match="sys must be"):
        gear.maximal.MaximalSystem("four_bar")
    mx = sysm.with_solver("maximal")
    with pytest.raises(ValueError, match="tau has wrong shape"):
        mx.forward_dynamics(q, np.zeros(3), np.ones(4))
    with pytest.raises(ValueError, match="ordering"):
        sysm.with_solver("maximal", ordering=3)
    with pytest.raises(TypeError, match="unknown option"):
        sysm.with_solver("maximal", beta=1e-9)
    # a batch of states goes through the solver one state at a time
    qs = np.stack([q, q])
    rb = mx.forward_dynamics(qs, np.zeros((2, 3)), np.ones((2, 3)))
    r1 = sysm.forward_dynamics(q, np.zeros(3), np.ones(3))
    assert rb.ddq.shape == (2, 3) and rel(rb.ddq[1], r1.ddq) < 1e-8


def test_missing_scikit_sparse_is_a_clear_import_error(monkeypatch):
    """Without scikit-sparse the scikit-sparse path says what to install;
    the native kernel (when built with CHOLMOD) does not need it."""
    import sys as _sys

    monkeypatch.setitem(_sys.modules, "sksparse", None)
    monkeypatch.setitem(_sys.modules, "sksparse.cholmod", None)
    sysm, q = mech.four_bar()
    with pytest.raises(ImportError, match=r"gear\[sparse\]"):
        sysm.with_solver("maximal", native=False)
    if gear._core.cholmod_available():
        mx = sysm.with_solver("maximal")
        assert mx.forward_dynamics(q, np.zeros(3), np.ones(3)).stats["native"]
        assert mx.hybrid_dynamics(q, np.zeros(3), np.zeros(3), np.ones(3), [True, False, False]).stats["native"]
    else:
        with pytest.raises(ImportError, match=r"gear\[sparse\]"):
            sysm.with_solver("maximal")


@pytest.mark.parametrize("dq", [[1.0, 0.0, 0.0], [1.0, -2.0, 1.0], [0.3, 0.1, -0.4]])
def test_no_exact_solution_at_the_branch_point(dq):
    """At the collinear four-bar's branch point most velocities admit no
    acceleration with A ddq = -dA dq: the Schur system is inconsistent.
    The solver returns the least-squares answer of the reduced solvers
    (not one blown up by 1/beta), and the residual |A ddq + dA dq| they
    report."""
    sysm, q = MECHS["four_bar_collinear"]()
    dq = np.asarray(dq)
    tau = np.array([0.5, -1.0, 2.0])
    A = sysm.constraint_jacobian(q)
    ref = sysm.forward_dynamics(q, dq, tau)
    r = sysm.with_solver("maximal").forward_dynamics(q, dq, tau)
    assert ref.residual > 1e-3
    assert rel(r.ddq, ref.ddq) < 1e-8 and rel(A.T @ r.lam, A.T @ ref.lam) < 1e-8
    assert abs(r.residual - ref.residual) < 1e-9 * max(1.0, ref.residual)


def test_schur_pattern_grows_when_an_entry_outside_it_becomes_nonzero():
    """The persistent Schur complement keeps only the entries that were
    non-zero; an entry outside that pattern that turns non-zero later joins
    it (symbolic analysis redone), and the answer stays exact."""
    pytest.importorskip("sksparse", reason="the maximal solver needs scikit-sparse (the 'sparse' extra)")
    s, q = gear.mechanisms.stewart()
    rng = np.random.default_rng(5)
    nv = s.model.nv
    dq = s.project_velocity(q, rng.standard_normal(nv))
    tau = rng.standard_normal(nv)
    mx = s.with_solver("maximal", native=False)
    ref = s.forward_dynamics(q, dq, tau)
    r0 = mx.forward_dynamics(q, dq, tau)
    plan = mx.solver._plans[None]
    nnz = plan["K"].nnz
    # pretend the first call had found one of the entries zero: drop it from the pattern
    k = int(np.flatnonzero(plan["keep"])[plan["K"].nnz // 2])
    plan["keep"][k] = False
    plan["K"] = None
    mx.solver._schur_pattern(None, plan, np.zeros(len(plan["uniq"])))
    assert plan["K"].nnz == nnz - 1 and None not in mx.solver._symbolic
    r1 = mx.forward_dynamics(q, dq, tau)                      # the entry is non-zero: it comes back
    assert plan["keep"][k] and plan["K"].nnz == nnz and None in mx.solver._symbolic
    np.testing.assert_allclose(r1.ddq, ref.ddq, rtol=0, atol=1e-8 * max(1.0, np.abs(ref.ddq).max()))
    np.testing.assert_allclose(r0.ddq, r1.ddq, rtol=0, atol=1e-10 * max(1.0, np.abs(ref.ddq).max()))


# ---------------------------------------------------------------------------
# the native kernel (gear/maximal/_kernel.pxd, CHOLMOD's C API)
# ---------------------------------------------------------------------------
native = pytest.mark.skipif(not gear._core.cholmod_available(),
                            reason="gear was built without CHOLMOD (no native maximal kernel)")


@native
@pytest.mark.parametrize("name", sorted(k for k in MECHS if k != "rolling_ball"))
def test_native_kernel_equals_the_scikit_sparse_path(name):
    """Same ddq and A^T lam as the scikit-sparse path (another orthonormal
    basis of the joint rows, the same answer), the same factor size, and
    the residual |A ddq + dA dq|; a batch on two threads equals the single
    calls bit for bit."""
    sysm, q, dq, tau, f_ext, A, rng = _mechanism_state(name, 11)
    model = sysm.model
    nat, spa = sysm.with_solver("maximal"), sysm.with_solver("maximal", native=False)
    for fe in (None, f_ext):
        a, b = nat.forward_dynamics(q, dq, tau, fe), spa.forward_dynamics(q, dq, tau, fe)
        assert a.stats["native"] and "native" not in b.stats
        assert rel(a.ddq, b.ddq) < 1e-10, name
        assert rel(A.T @ a.lam, A.T @ b.lam) < 1e-10, name
        assert abs(a.residual - b.residual) < 1e-9 * max(1.0, np.abs(a.ddq).max())
        for k in ("rows", "bodies", "nnz_J", "refinement"):
            assert a.stats[k] == b.stats[k], k
        assert a.stats["nnz_factor"] > 0 and a.stats["factorizations"] >= 1
    N = 9
    qs = np.tile(q, (N, 1))
    dqs = dq + 0.1 * rng.standard_normal((N, model.nv)) * (name != "four_bar_collinear")
    taus = rng.standard_normal((N, model.nv))
    from gear.algorithms.dynamics import get_num_threads, set_num_threads

    old = get_num_threads()
    set_num_threads(2)
    try:
        rb = nat.forward_dynamics(qs, dqs, taus)
    finally:
        set_num_threads(old)
    for k in range(N):
        r1 = nat.forward_dynamics(qs[k], dqs[k], taus[k])
        assert np.array_equal(rb.ddq[k], r1.ddq) and np.array_equal(rb.lam[k], r1.lam)
    # hybrid dynamics with whole joints prescribed: the kernel's prescription
    # rows; a batch equals its single calls
    pres = np.zeros(model.nbodies, dtype=bool)
    pres[[0, model.nbodies // 2]] = True
    ddq_p = a.ddq + 0.3 * _consistent(sysm, q, rng)         # accelerations the loops can follow
    ha, hb = (x.hybrid_dynamics(q, dq, ddq_p, tau, pres) for x in (nat, spa))
    assert ha.stats["native"] and ha.stats["rows"] == hb.stats["rows"], name
    assert rel(ha.ddq, hb.ddq) < 1e-10, name
    u = np.zeros(model.nv, dtype=bool)
    for j in np.flatnonzero(pres):
        u[model._iv[j]:model._iv[j] + model.joints[j].nv] = True
    _hybrid_check(sysm, q, dq, ddq_p, tau, u, (hb.tau, hb.ddq, hb.lam), (ha.tau, ha.ddq, ha.lam))
    hbat = nat.hybrid_dynamics(qs[:3], dqs[:3], np.tile(ddq_p, (3, 1)), taus[:3], pres)
    for k in range(3):
        h1 = nat.hybrid_dynamics(qs[k], dqs[k], ddq_p, taus[k], pres)
        assert np.array_equal(hbat.tau[k], h1.tau) and np.array_equal(hbat.ddq[k], h1.ddq)


@native
def test_native_kernel_replans_when_a_left_out_entry_becomes_nonzero():
    """K's native pattern leaves out the entries found zero at sampled
    configurations; one that is non-zero after all is caught on the call
    (never a wrong answer): the plan is rebuilt with every entry, in a
    single call and inside a native rollout."""
    s, q = gear.mechanisms.stewart()
    rng = np.random.default_rng(8)
    nv = s.model.nv
    dq = s.project_velocity(q, rng.standard_normal(nv))
    tau = rng.standard_normal(nv)
    ref = s.forward_dynamics(q, dq, tau)
    mx = s.with_solver("maximal", route="cholmod")     # (the route with K's pattern)
    r0 = mx.forward_dynamics(q, dq, tau)
    nnz = mx.solver._static_stats()["nnz_K"]
    # an entry between two loop rows (the same in every basis of the joint
    # rows) that is not zero at q
    ms = mx.solver.maximal
    mats = ms.matrices(q, dq)
    K = (mats["J"] @ ms._Minv @ mats["J"].T).toarray()
    L = np.abs(np.tril(K[ms.nJ:, ms.nJ:], -1)) > 1e-6
    i, j = (int(x[0]) + ms.nJ for x in np.nonzero(L))
    mx.solver._nd = mx.solver._build_native(prune=True, leave_out=[(i, j)])
    assert mx.solver._static_stats()["nnz_K"] == nnz - 2
    mx._native_cache.pop("ff", None)         # the single-call fast path holds the plan it was built with
    r1 = mx.forward_dynamics(q, dq, tau)
    assert mx.solver._static_stats()["nnz_K"] >= nnz
    np.testing.assert_allclose(r1.ddq, ref.ddq, rtol=0, atol=1e-8 * max(1.0, np.abs(ref.ddq).max()))
    np.testing.assert_allclose(r1.ddq, r0.ddq, rtol=0, atol=1e-10 * max(1.0, np.abs(ref.ddq).max()))
    mx.solver._nd = mx.solver._build_native(prune=True, leave_out=[(i, j)])
    assert mx.solver._static_stats()["nnz_K"] == nnz - 2
    tr = gear.simulate(mx, q, dq, 0.01, 1e-3)
    assert mx.solver._static_stats()["nnz_K"] >= nnz                 # re-planned in the rollout
    tr2 = gear.simulate(mx, q, dq, 0.01, 1e-3)
    assert tr.stats["native"] and np.array_equal(tr.q, tr2.q)


@native
def test_native_rollout_equals_the_python_loop():
    """gear.simulate runs the maximal solver in the native loop (in
    parallel over states); it equals the Python loop over the same
    solver, and the batch equals its rollouts one by one."""
    sysm, q = mech.four_bar()
    mx = sysm.with_solver("maximal")
    rng = np.random.default_rng(3)
    N = 4
    qs = np.tile(q, (N, 1))
    dqs = np.stack([_consistent(sysm, q, rng) for _ in range(N)])
    a = gear.simulate(mx, qs, dqs, 0.05, 1e-3, integrator="rk4")
    b = gear.simulate(mx, qs, dqs, 0.05, 1e-3, integrator="rk4", native=False)
    assert a.stats["native"] and not b.stats["native"]
    assert np.abs(a.q - b.q).max() < 1e-10 and np.abs(a.dq - b.dq).max() < 1e-9
    assert a.stats["max_residual"] < 1e-10
    one = gear.simulate(mx, qs[2], dqs[2], 0.05, 1e-3, integrator="rk4")
    assert np.array_equal(one.q, a.q[2])


@pytest.mark.parametrize("native", [True, False])
def test_a_maximal_system_pickles_and_rebuilds_its_factors(native):
    """Pickling (Dask ships models to workers) drops the CHOLMOD factors and
    the native plan; the copy rebuilds them and gives the same bits."""
    import pickle

    if native and not gear._core.cholmod_available():
        pytest.skip("gear was built without CHOLMOD (no native maximal kernel)")
    sysm, q = mech.four_bar()
    mx = sysm.with_solver("maximal", native=native)
    r = mx.forward_dynamics(q, np.zeros(3), np.ones(3))
    mx2 = pickle.loads(pickle.dumps(mx))
    r2 = mx2.forward_dynamics(q, np.zeros(3), np.ones(3))
    assert np.array_equal(r.ddq, r2.ddq) and r2.stats.get("native", False) == native


@native
def test_native_hybrid_takes_whole_joints_and_leaves_partial_ones_to_scikit_sparse():
    """The kernel's prescription rows cover whole joints; a joint
    prescribed in some of its coordinates only takes the scikit-sparse
    path.  Both give the kkt solver's ddq."""
    rng = np.random.default_rng(9)
    model = random_tree(rng, nbodies=5, kinds=["universal", "planar"])
    q = model.random_configuration(rng)
    sysm = gear.ConstrainedModel(model, [])
    mx = sysm.with_solver("maximal")
    dq, tau, ddq_p = rng.standard_normal((3, model.nv))
    n0 = model.joints[0].nv
    assert n0 > 1
    for u, native in (([True] * n0 + [False] * (model.nv - n0), True),
                      ([True] + [False] * (model.nv - 1), False)):
        u = np.array(u)
        t_ref, d_ref, _, _ = sysm.solver._hybrid_numpy(q, dq, ddq_p, tau, u, None)
        t, d, lam, res, stats = mx.solver.hybrid(q, dq, ddq_p, tau, u, None)
        assert stats.get("native", False) == native
        assert rel(d, d_ref) < 1e-9 and rel(t, t_ref) < 1e-9

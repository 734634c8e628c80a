"""Parameter sensitivities of the dynamics (Kim Sec. 4.2, ``gear.sensitivity``).

Oracle: central finite differences of the dynamics of a *modified copy* of
the model (``model.copy()`` with a new ``gear.Inertia``, a perturbed joint
placement ``placement * exp_se3(eps xi)``, a new gravity vector, or a
perturbed external wrench), so the seeds of eq. (92) are checked against
the physical change they describe, not against the kernels' own formulas.
"""
import numpy as np
import pytest

import gear
from gear import sensitivity as sens
from gear import testing as gt
from gear.spatial import exp_se3

REL = 1e-6
EPS = 1e-5          # parameters, q (smooth, truncation ~ eps^2)
EPS_V = 1e-3        # dq (dynamics quadratic in dq: central differences exact)
EPS_LIN = 1e-1      # ddq, tau, hybrid inputs (linear)
SEEDS = (0, 1)
INERTIA_KEYS = [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)]


def rel_err(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


def check_fd(analytic, numeric, rel=REL):
    err = rel_err(analytic, numeric)
    assert err <= rel, f"relative error {err:.3e} > {rel}"
    if np.any(numeric != 0):
        assert not np.array_equal(analytic, numeric)
    return err


def make_case(seed, floating, with_fext, nbodies=8):
    rng = np.random.default_rng(100 + seed)
    m = gt.random_tree(rng, nbodies=nbodies, root_free=floating)
    q, dq, ddq, tau = gt.random_state(m, rng)
    fe = rng.standard_normal((m.nbodies, 6)) if with_fext else None
    return m, q, dq, ddq, tau, fe, rng


@pytest.fixture(params=[(s, fl, fx) for s in SEEDS for fl in (False, True) for fx in (False, True)],
                ids=lambda p: f"seed{p[0]}-{'float' if p[1] else 'fixed'}-{'fext' if p[2] else 'nofext'}")
def case(request):
    return make_case(*request.param)


def random_mask(m, rng):
    mask = rng.random(m.nbodies) < 0.5
    with_dofs = [i for i in range(m.nbodies) if m.joints[i].nv > 0]
    mask[with_dofs[0]] = True
    mask[with_dofs[-1]] = False
    return mask


# ---------------------------------------------------------------------------
# perturbed copies of the model
# ---------------------------------------------------------------------------
def perturb(m, fe, spec, k, eps):
    """A copy of ``(model, f_ext)`` with parameter column ``k`` of ``spec``
    (``"kind:body"`` as in :func:`parameter_jacobian`) moved by ``eps``."""
    m2 = m.copy()
    fe2 = np.zeros((m.nbodies, 6)) if fe is None else np.array(fe, dtype=float)
    kind, _, body = spec.partition(":")
    if kind == "gravity":
        m2.gravity = m.gravity + eps * np.eye(3)[k]
        return m2, fe2
    i = m.body_index(body)
    I = m.inertias[i]
    if kind == "mass":
        m2.inertias[i] = gear.Inertia(I.mass + eps, I.com, I.I_com)
    elif kind == "com":
        m2.inertias[i] = gear.Inertia(I.mass, I.com + eps * np.eye(3)[k], I.I_com)
    elif kind == "inertia":
        a, b = INERTIA_KEYS[k]
        E = np.zeros((3, 3))
        E[a, b] = E[b, a] = 1.0
        m2.inertias[i] = gear.Inertia(I.mass, I.com, I.I_com + eps * E)
    elif kind == "standard":
        m2.inertias[i] = gear.Inertia.from_params(I.to_params() + eps * np.eye(10)[k])
    elif kind == "placement":
        m2.placements[i] = m.placements[i] * exp_se3(eps * np.eye(6)[k])
    elif kind == "f_ext":
        fe2[i, k] += eps
    else:
        raise AssertionError(kind)
    return m2, fe2


def ncols(spec):
    return {"mass": 1, "com": 3, "inertia": 6, "standard": 10, "placement": 6, "gravity": 3,
            "f_ext": 6}[spec.partition(":")[0]]


def fd_params(fun, m, fe, specs, eps=EPS):
    """Columns ``(fun(m+, fe+) - fun(m-, fe-)) / 2 eps`` for every parameter."""
    cols = []
    for spec in specs:
        for k in range(ncols(spec)):
            mp, fp = perturb(m, fe, spec, k, eps)
            mm, fm = perturb(m, fe, spec, k, -eps)
            cols.append((np.asarray(fun(mp, fp)) - np.asarray(fun(mm, fm))) / (2 * eps))
    return np.stack(cols, axis=-1)


def all_specs(m):
    """Every parameter kind, on a leaf-ish body and on the root."""
    b_last, b_root = m.body_names[-1], m.body_names[0]
    specs = [f"{k}:{b}" for b in (b_root, b_last)
             for k in ("mass", "com", "inertia", "standard", "placement", "f_ext")]
    return specs + ["gravity"]


# ---------------------------------------------------------------------------
# named parameter Jacobians
# ---------------------------------------------------------------------------
def test_parameter_jacobian_inverse_vs_finite_differences(case):
    m, q, dq, ddq, tau, fe, _ = case
    specs = all_specs(m)
    J, labels = sens.parameter_jacobian(m, q, dq, ddq, specs, f_ext=fe)
    assert J.shape == (m.nv, sum(ncols(s) for s in specs)) and len(labels) == J.shape[1]
    num = fd_params(lambda mm, ff: gear.inverse_dynamics(mm, q, dq, ddq, ff), m, fe, specs)
    check_fd(J, num)


def test_parameter_jacobian_forward_vs_finite_differences(case):
    m, q, dq, ddq, tau, fe, _ = case
    specs = all_specs(m)
    J, labels = sens.parameter_jacobian(m, q, dq, tau, specs, f_ext=fe, dynamics="forward")
    num = fd_params(lambda mm, ff: gear.forward_dynamics(mm, q, dq, tau, ff), m, fe, specs)
    check_fd(J, num)


def test_parameter_jacobian_every_body(case):
    """Every body (including the Fixed-joint ones) for the inertial and
    placement kinds, inverse dynamics."""
    m, q, dq, ddq, tau, fe, _ = case
    specs = [f"{k}:{b}" for b in m.body_names for k in ("mass", "com", "placement")]
    J, _ = sens.parameter_jacobian(m, q, dq, ddq, specs, f_ext=fe)
    num = fd_params(lambda mm, ff: gear.inverse_dynamics(mm, q, dq, ddq, ff), m, fe, specs)
    check_fd(J, num)


def test_parameter_jacobian_labels_and_order():
    m, q, dq, ddq, tau, fe, _ = make_case(0, True, False)
    b = m.body_names[2]
    J, labels = sens.parameter_jacobian(m, q, dq, ddq, [f"com:{b}", "gravity", f"mass:{b}",
                                                       f"inertia:{b}", f"placement:{b}",
                                                       f"f_ext:{b}", f"standard:{b}"])
    assert labels[:7] == [f"com_x:{b}", f"com_y:{b}", f"com_z:{b}", "gravity_x", "gravity_y",
                          "gravity_z", f"mass:{b}"]
    assert labels[7:13] == [f"{n}:{b}" for n in ("Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz")]
    assert labels[13:19] == [f"placement_{n}:{b}" for n in ("rx", "ry", "rz", "tx", "ty", "tz")]
    assert labels[19:25] == [f"f_ext_{n}:{b}" for n in ("mx", "my", "mz", "fx", "fy", "fz")]
    assert labels[25:] == [f"{n}:{b}" for n in ("m", "mcx", "mcy", "mcz", "Ixx", "Iyy", "Izz",
                                                 "Ixy", "Ixz", "Iyz")]
    # each column equals the one of a single-parameter call
    for spec, sl in [(f"mass:{b}", slice(6, 7)), ("gravity", slice(3, 6))]:
        Js, _ = sens.parameter_jacobian(m, q, dq, ddq, [spec])
        assert rel_err(J[:, sl], Js) < 1e-14
    J0, l0 = sens.parameter_jacobian(m, q, dq, ddq, [])
    assert J0.shape == (m.nv, 0) and l0 == []


def test_gravity_and_f_ext_columns_have_closed_forms():
    """dtau/dg = sum over bodies of -m_i J_{c,i}^T R_i^T (gravity is linear);
    dtau/dF_i = -J_i^T (virtual work), body Jacobians of the dense reference."""
    m, q, dq, ddq, tau, fe, _ = make_case(1, True, True)
    Jg, _ = sens.parameter_jacobian(m, q, dq, ddq, ["gravity"], f_ext=fe)
    tau_g = gear.gravity_forces(m, q)
    assert rel_err(Jg @ m.gravity, tau_g) < 1e-12       # tau_g is linear in g
    Jb = gt.reference_body_jacobians(m, q)
    for i, b in enumerate(m.body_names):
        JF, _ = sens.parameter_jacobian(m, q, dq, ddq, [f"f_ext:{b}"], f_ext=fe)
        assert rel_err(JF, -Jb[i].T) < 1e-12


# ---------------------------------------------------------------------------
# raw seeds (eq. 92)
# ---------------------------------------------------------------------------
def random_seeds(m, rng):
    return dict(dq_dp=rng.standard_normal(m.nv), dv_dp=rng.standard_normal(m.nv),
                dI_dp=0.1 * rng.standard_normal((m.nbodies, 10)),
                dX_dp=rng.standard_normal((m.nbodies, 6)), dg_dp=rng.standard_normal(3),
                dF_dp=rng.standard_normal((m.nbodies, 6)))


def moved(m, q, dq, fe, seeds, eps):
    """The model, state and external forces moved by ``eps`` along the seeds
    (each absent seed means no change)."""
    m2 = m.copy()
    q2, dq2 = np.array(q), np.array(dq)
    fe2 = np.zeros((m.nbodies, 6)) if fe is None else np.array(fe, dtype=float)
    if seeds.get("dq_dp") is not None:
        q2 = m.integrate(q, eps * seeds["dq_dp"])
    if seeds.get("dv_dp") is not None:
        dq2 = dq + eps * seeds["dv_dp"]
    if seeds.get("dI_dp") is not None:
        for i, I in enumerate(m.inertias):
            m2.inertias[i] = gear.Inertia.from_params(I.to_params() + eps * seeds["dI_dp"][i])
    if seeds.get("dX_dp") is not None:
        for i, X in enumerate(m.placements):
            m2.placements[i] = X * exp_se3(eps * seeds["dX_dp"][i])
    if seeds.get("dg_dp") is not None:
        m2.gravity = m.gravity + eps * seeds["dg_dp"]
    if seeds.get("dF_dp") is not None:
        fe2 = fe2 + eps * seeds["dF_dp"]
    return m2, q2, dq2, fe2


def _eps(name):
    return EPS_V if name == "dv_dp" else EPS


SEED_NAMES = ["dq_dp", "dv_dp", "dI_dp", "dX_dp", "dg_dp", "dF_dp", "all"]


@pytest.mark.parametrize("which", SEED_NAMES + ["da_dp"])
def test_inverse_dynamics_sensitivity_seeds(case, which):
    m, q, dq, ddq, tau, fe, rng = case
    seeds = random_seeds(m, rng)
    seeds["da_dp"] = rng.standard_normal(m.nv)
    if which != "all":
        seeds = {which: seeds[which]}
    got = sens.inverse_dynamics_sensitivity(m, q, dq, ddq, fe, **seeds)
    assert got.shape == (m.nv,)
    eps = EPS_LIN if which == "da_dp" else _eps(which)

    def f(s):
        m2, q2, dq2, fe2 = moved(m, q, dq, fe, seeds, s)
        return gear.inverse_dynamics(m2, q2, dq2, ddq + s * seeds.get("da_dp", 0.0), fe2)
    check_fd(got, (f(eps) - f(-eps)) / (2 * eps))


@pytest.mark.parametrize("which", SEED_NAMES + ["dtau_dp"])
def test_forward_dynamics_sensitivity_seeds(case, which):
    m, q, dq, ddq, tau, fe, rng = case
    seeds = random_seeds(m, rng)
    seeds["dtau_dp"] = rng.standard_normal(m.nv)
    if which != "all":
        seeds = {which: seeds[which]}
    got = sens.forward_dynamics_sensitivity(m, q, dq, tau, fe, **seeds)
    assert got.shape == (m.nv,)
    eps = EPS_LIN if which == "dtau_dp" else _eps(which)

    def f(s):
        m2, q2, dq2, fe2 = moved(m, q, dq, fe, seeds, s)
        return gear.forward_dynamics(m2, q2, dq2, tau + s * seeds.get("dtau_dp", 0.0), fe2)
    check_fd(got, (f(eps) - f(-eps)) / (2 * eps))


@pytest.mark.parametrize("which", SEED_NAMES + ["dinput_dp"])
def test_hybrid_dynamics_sensitivity_seeds(case, which):
    m, q, dq, ddq, tau, fe, rng = case
    mask = random_mask(m, rng)
    u = gt.prescribed_coordinates(m, mask)
    seeds = random_seeds(m, rng)
    seeds["dinput_dp"] = rng.standard_normal(m.nv)
    if which != "all":
        seeds = {which: seeds[which]}
    dtau, dddq = sens.hybrid_dynamics_sensitivity(m, q, dq, ddq, tau, mask, fe, **seeds)
    assert dtau.shape == dddq.shape == (m.nv,)
    eps = EPS_LIN if which == "dinput_dp" else _eps(which)
    din = seeds.get("dinput_dp", np.zeros(m.nv))

    def f(s):
        m2, q2, dq2, fe2 = moved(m, q, dq, fe, seeds, s)
        return np.concatenate(gear.hybrid_dynamics(m2, q2, dq2, ddq + s * np.where(u, din, 0.0),
                                                   tau + s * np.where(u, 0.0, din), mask, fe2))
    num = (f(eps) - f(-eps)) / (2 * eps)
    check_fd(np.concatenate([dtau, dddq]), num)
    # inputs pass through: tau on free coordinates, ddq on prescribed ones
    assert np.array_equal(dtau[~u], din[~u]) and np.array_equal(dddq[u], din[u])


def test_hybrid_sensitivity_limits_are_inverse_and_forward():
    m, q, dq, ddq, tau, fe, rng = make_case(1, True, True)
    seeds = random_seeds(m, rng)
    da = rng.standard_normal(m.nv)
    dt, dd = sens.hybrid_dynamics_sensitivity(m, q, dq, ddq, tau, np.ones(m.nbodies, bool), fe,
                                              dinput_dp=da, **seeds)
    assert rel_err(dt, sens.inverse_dynamics_sensitivity(m, q, dq, ddq, fe, da_dp=da, **seeds)) < 1e-11
    assert np.array_equal(dd, da)
    dt, dd = sens.hybrid_dynamics_sensitivity(m, q, dq, ddq, tau, np.zeros(m.nbodies, bool), fe,
                                              dinput_dp=da, **seeds)
    assert rel_err(dd, sens.forward_dynamics_sensitivity(m, q, dq, tau, fe, dtau_dp=da, **seeds)) < 1e-9
    assert np.array_equal(dt, da)


def test_state_seeds_match_the_state_derivatives():
    """dq_dp = e_k (dv_dp, da_dp likewise) gives column k of the Jacobians
    of gear.inverse/forward_dynamics_derivatives."""
    m, q, dq, ddq, tau, fe, _ = make_case(0, True, True)
    eye = np.eye(m.nv)
    Dq, Dv, M = gear.inverse_dynamics_derivatives(m, q, dq, ddq, fe)
    assert rel_err(sens.inverse_dynamics_sensitivity(m, q, dq, ddq, fe, dq_dp=eye).T, Dq) < 1e-11
    assert rel_err(sens.inverse_dynamics_sensitivity(m, q, dq, ddq, fe, dv_dp=eye).T, Dv) < 1e-11
    assert rel_err(sens.inverse_dynamics_sensitivity(m, q, dq, ddq, fe, da_dp=eye).T, M) < 1e-11
    Fq, Fv, Ft = gear.forward_dynamics_derivatives(m, q, dq, tau, fe)
    assert rel_err(sens.forward_dynamics_sensitivity(m, q, dq, tau, fe, dq_dp=eye).T, Fq) < 1e-9
    assert rel_err(sens.forward_dynamics_sensitivity(m, q, dq, tau, fe, dv_dp=eye).T, Fv) < 1e-9
    assert rel_err(sens.forward_dynamics_sensitivity(m, q, dq, tau, fe, dtau_dp=eye).T, Ft) < 1e-9


def test_many_directions_at_once():
    """A leading axis of P directions equals P single calls; a seed without
    the axis is shared by all directions."""
    m, q, dq, ddq, tau, fe, rng = make_case(1, False, True)
    P = 4
    many = {k: np.stack([random_seeds(m, rng)[k] for _ in range(P)]) for k in random_seeds(m, rng)}
    shared_g = rng.standard_normal(3)
    mask = random_mask(m, rng)
    out_i = sens.inverse_dynamics_sensitivity(m, q, dq, ddq, fe, **{**many, "dg_dp": shared_g})
    out_f = sens.forward_dynamics_sensitivity(m, q, dq, tau, fe, **{**many, "dg_dp": shared_g})
    out_h = sens.hybrid_dynamics_sensitivity(m, q, dq, ddq, tau, mask, fe,
                                             **{**many, "dg_dp": shared_g})
    assert out_i.shape == out_f.shape == out_h[0].shape == out_h[1].shape == (P, m.nv)
    for p in range(P):
        one = {k: v[p] for k, v in many.items()}
        one["dg_dp"] = shared_g
        assert rel_err(out_i[p], sens.inverse_dynamics_sensitivity(m, q, dq, ddq, fe, **one)) < 1e-13
        assert rel_err(out_f[p], sens.forward_dynamics_sensitivity(m, q, dq, tau, fe, **one)) < 1e-12
        t1, d1 = sens.hybrid_dynamics_sensitivity(m, q, dq, ddq, tau, mask, fe, **one)
        assert rel_err(out_h[0][p], t1) < 1e-12 and rel_err(out_h[1][p], d1) < 1e-12


def test_placement_seed_is_the_named_placement_column():
    m, q, dq, ddq, tau, fe, rng = make_case(0, True, False)
    b = m.body_names[3]
    J, _ = sens.parameter_jacobian(m, q, dq, ddq, [f"placement:{b}"])
    xi = rng.standard_normal(6)
    dX = np.zeros((m.nbodies, 6))
    dX[3] = xi
    assert rel_err(sens.inverse_dynamics_sensitivity(m, q, dq, ddq, dX_dp=dX), J @ xi) < 1e-12


# ---------------------------------------------------------------------------
# inertial regressor
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("floating", [False, True])
def test_inertial_regressor_reproduces_inverse_dynamics(floating):
    for seed in SEEDS:
        m, q, dq, ddq, tau, fe, _ = make_case(seed, floating, False)
        Y = sens.inertial_regressor(m, q, dq, ddq)
        pi = sens.standard_parameters(m)
        assert Y.shape == (m.nv, 10 * m.nbodies) and pi.shape == (10 * m.nbodies,)
        assert rel_err(Y @ pi, gear.inverse_dynamics(m, q, dq, ddq)) < 1e-12
        assert np.array_equal(pi[10:20], m.inertias[1].to_params())


def test_inertial_regressor_columns_vs_finite_differences():
    m, q, dq, ddq, tau, fe, _ = make_case(1, True, False)
    Y = sens.inertial_regressor(m, q, dq, ddq)
    specs = [f"standard:{b}" for b in m.body_names]
    num = fd_params(lambda mm, ff: gear.inverse_dynamics(mm, q, dq, ddq), m, None, specs, eps=1e-3)
    check_fd(Y, num, rel=1e-9)        # tau is linear in the parameters
    # ... and Y does not depend on the parameters themselves
    m2 = m.copy()
    for i in range(m2.nbodies):
        m2.inertias[i] = gt.random_inertia(np.random.default_rng(i))
    assert rel_err(sens.inertial_regressor(m2, q, dq, ddq), Y) < 1e-12


def test_regressor_of_a_massless_body_is_still_defined():
    m = gear.Model()
    m.add_body("a", "world", gear.joints.Revolute([0, 0, 1]),
               inertia=gear.Inertia(1.0, [0.1, 0, 0], np.eye(3) * 0.01))
    m.add_body("b", "a", gear.joints.Revolute([0, 1, 0]))        # massless
    q, z = m.neutral(), np.zeros(2)
    pi = sens.standard_parameters(m)
    assert np.all(pi[10:] == 0)
    Y = sens.inertial_regressor(m, q, z, np.array([1.0, 2.0]))
    assert rel_err(Y @ pi, gear.inverse_dynamics(m, q, z, np.array([1.0, 2.0]))) < 1e-12


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
def test_bad_parameter_names_and_seeds():
    m, q, dq, ddq, tau, fe, _ = make_case(0, False, False, nbodies=4)
    with pytest.raises(ValueError, match="unknown parameter kind 'massa'"):
        sens.parameter_jacobian(m, q, dq, ddq, ["massa:b1"])
    with pytest.raises(ValueError, match="needs a body name"):
        sens.parameter_jacobian(m, q, dq, ddq, ["mass"])
    with pytest.raises(ValueError, match="needs a body name"):
        sens.parameter_jacobian(m, q, dq, ddq, ["com:"])
    with pytest.raises(KeyError, match="no body named 'nobody'"):
        sens.parameter_jacobian(m, q, dq, ddq, ["inertia:nobody"])
    with pytest.raises(TypeError, match="parameters are strings"):
        sens.parameter_jacobian(m, q, dq, ddq, [3])
    with pytest.raises(ValueError, match="dynamics must be 'inverse' or 'forward'"):
        sens.parameter_jacobian(m, q, dq, ddq, ["gravity"], dynamics="hybrid")
    with pytest.raises(TypeError, match="give at least one seed"):
        sens.inverse_dynamics_sensitivity(m, q, dq, ddq)
    with pytest.raises(ValueError, match=rf"dI_dp has wrong shape: expected \({m.nbodies}, 10\)"):
        sens.inverse_dynamics_sensitivity(m, q, dq, ddq, dI_dp=np.zeros((m.nbodies, 9)))
    with pytest.raises(ValueError, match="dq_dp has wrong shape"):
        sens.forward_dynamics_sensitivity(m, q, dq, tau, dq_dp=np.zeros(m.nv + 1))
    with pytest.raises(ValueError, match="directions"):
        sens.inverse_dynamics_sensitivity(m, q, dq, ddq, dq_dp=np.zeros((2, m.nv)),
                                          dv_dp=np.zeros((3, m.nv)))
    with pytest.raises(ValueError, match="ddq has wrong shape"):
        sens.inverse_dynamics_sensitivity(m, q, dq, ddq[:1], dg_dp=np.ones(3))
    with pytest.raises(ValueError, match="tau has wrong shape"):
        sens.forward_dynamics_sensitivity(m, q, dq, tau[:1], dg_dp=np.ones(3))
    with pytest.raises(ValueError, match="f_ext has wrong shape"):
        sens.inverse_dynamics_sensitivity(m, q, dq, ddq, np.zeros(6), dg_dp=np.ones(3))
    with pytest.raises(ValueError, match="prescribed has wrong shape"):
        sens.hybrid_dynamics_sensitivity(m, q, dq, ddq, tau, [True], dg_dp=np.ones(3))
    with pytest.raises(TypeError):
        sens.inverse_dynamics_sensitivity(m, q, dq, ddq, dtau_dp=np.ones(m.nv))  # not a seed here

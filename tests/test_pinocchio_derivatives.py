"""Agreement of the analytic dynamics derivatives with Pinocchio's
(``computeRNEADerivatives``, ``computeABADerivatives``) on the bundled
URDF robots, to 1e-9.

Conventions, mapped by joint name (never by position): Pinocchio orders its
joints depth-first from the URDF, gear as the loader adds the bodies;
gear's floating base is the ``Free`` joint ``"root"`` with
``q = (x, y, z, qw, qx, qy, qz)`` and body twist ``(w, v)``, Pinocchio's
``"root_joint"`` free flyer has ``q = (x, y, z, qx, qy, qz, qw)`` and local
velocity ``(v, w)`` (forces ``(f, m)``).  Both take derivatives in ``q``
along the right perturbation ``q (+) v`` (``T exp(v)`` for the free joint),
so after permuting the velocity/torque coordinates the matrices agree.
"""
import numpy as np
import pytest

import gear

pin = pytest.importorskip("pinocchio", reason="Pinocchio (pip package 'pin') is the optional "
                                              "reference implementation for these tests")

ROBOTS = [("arm7.urdf", False), ("quadruped.urdf", True)]
VALUES = 1e-10      # rnea / aba / crba
DERIVS = 1e-9       # derivatives


def rel(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


def sym(U):
    """Pinocchio may fill only the upper triangle of M and Minv."""
    U = np.array(U)
    return np.triu(U) + np.triu(U, 1).T


class PinMap:
    """Coordinate maps between a gear model and a Pinocchio model, by name.

    ``P`` is the permutation with ``v_pin = P v_gear`` (also for tangent
    vectors of ``q``, accelerations and torques); a Jacobian maps back as
    ``J_gear = P^T J_pin P``.
    """

    def __init__(self, gm, pm):
        assert (pm.nq, pm.nv) == (gm.nq, gm.nv)
        self.gm, self.pm = gm, pm
        self.P = np.zeros((gm.nv, gm.nv))
        self.q_blocks = []
        self.pairs = []
        for jid in range(1, pm.njoints):
            pname = pm.names[jid]
            gname = "root" if pname == "root_joint" else pname
            i = gm.joint_index(gname)
            gj = gm.joints[i]
            pj = pm.joints[jid]
            assert (pj.nq, pj.nv) == (gj.nq, gj.nv), pname
            sq, sv = gm.idx_q(gname), gm.idx_v(gname)
            free = isinstance(gj, gear.joints.Free)
            self.q_blocks.append((slice(pm.idx_qs[jid], pm.idx_qs[jid] + pj.nq), sq, free))
            self.pairs.append((pname, gname))
            iv = pm.idx_vs[jid]
            if free:      # pin (v, w)  <-  gear (w, v)
                self.P[iv:iv + 3, sv.start + 3:sv.start + 6] = np.eye(3)
                self.P[iv + 3:iv + 6, sv.start:sv.start + 3] = np.eye(3)
            else:
                self.P[iv:iv + pj.nv, sv] = np.eye(pj.nv)
        assert np.array_equal(self.P @ self.P.T, np.eye(gm.nv)), "not a permutation"

    def q(self, qg):
        qp = np.empty(self.pm.nq)
        for sp, sg, free in self.q_blocks:
            x = qg[sg]
            qp[sp] = np.concatenate([x[:3], x[4:7], x[3:4]]) if free else x
        return qp

    def v(self, vg):
        return self.P @ vg

    def v_back(self, vp):
        return self.P.T @ np.asarray(vp)

    def mat_back(self, Jp):
        return self.P.T @ np.asarray(Jp) @ self.P

    def fext(self, fe):
        """gear per-body wrenches ``(m, f)`` -> Pinocchio per-joint forces
        ``(f, m)`` in the joint frame (the URDF link frame is its joint's
        frame).  Bodies without a Pinocchio joint (the fixed base) get none."""
        out = pin.StdVec_Force()
        for _ in range(self.pm.njoints):
            out.append(pin.Force.Zero())
        for jid in range(1, self.pm.njoints):
            name = self.pm.names[jid]
            i = self.gm.joint_index("root" if name == "root_joint" else name)
            out[jid] = pin.Force(fe[i, 3:], fe[i, :3])
        return out


def _load(fname, floating):
    path = gear.data_path(fname)
    gm = gear.load_urdf(path, floating_base=floating)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating \
        else pin.buildModelFromUrdf(path)
    gm.gravity = pm.gravity.linear
    return gm, pm, PinMap(gm, pm)


@pytest.fixture(scope="module", params=ROBOTS, ids=[r[0] for r in ROBOTS])
def robot(request):
    return _load(*request.param)


def _states(gm, n=4, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield (gm.random_configuration(rng), rng.standard_normal(gm.nv),
               rng.standard_normal(gm.nv), rng.standard_normal(gm.nv))


def _fe(gm, seed):
    """Random wrenches on every body that has a Pinocchio joint."""
    fe = np.random.default_rng(seed).standard_normal((gm.nbodies, 6))
    for i, j in enumerate(gm.joints):
        if gm.parents[i] < 0 and j.nv == 0:      # fixed base: part of Pinocchio's universe
            fe[i] = 0.0
    return fe


# ---------------------------------------------------------------------------
# the mapping itself
# ---------------------------------------------------------------------------
def test_mapping_is_by_name(robot):
    gm, pm, mp = robot
    assert {g for _, g in mp.pairs} == {n for n, j in zip(gm.joint_names, gm.joints) if j.nv > 0}
    # each joint's child body has the same world pose in both models
    q = gm.random_configuration(np.random.default_rng(3))
    data = pm.createData()
    pin.forwardKinematics(pm, data, mp.q(q))
    poses = gear.forward_kinematics(gm, q)
    for pname, gname in mp.pairs:
        jid = pm.getJointId(pname)
        i = gm.joint_index(gname)
        assert rel(poses[i], data.oMi[jid].homogeneous) < 1e-12, pname


def test_plain_dynamics_agree_first(robot):
    """Values before derivatives, so that a mapping bug shows up clearly."""
    gm, pm, mp = robot
    pd = pm.createData()
    for q, dq, ddq, tau in _states(gm, 3, seed=1):
        qp, vp = mp.q(q), mp.v(dq)
        assert rel(gear.inverse_dynamics(gm, q, dq, ddq),
                   mp.v_back(pin.rnea(pm, pd, qp, vp, mp.v(ddq)))) < VALUES
        assert rel(gear.forward_dynamics(gm, q, dq, tau),
                   mp.v_back(pin.aba(pm, pd, qp, vp, mp.v(tau)))) < VALUES
        assert rel(gear.mass_matrix(gm, q), mp.mat_back(sym(pin.crba(pm, pd, qp)))) < VALUES
        fe = _fe(gm, 5)
        assert rel(gear.inverse_dynamics(gm, q, dq, ddq, fe),
                   mp.v_back(pin.rnea(pm, pd, qp, vp, mp.v(ddq), mp.fext(fe)))) < VALUES


# ---------------------------------------------------------------------------
# derivatives
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("with_fext", [False, True])
def test_rnea_derivatives_agree_with_pinocchio(robot, with_fext):
    gm, pm, mp = robot
    pd = pm.createData()
    errs = []
    for k, (q, dq, ddq, _) in enumerate(_states(gm, seed=2)):
        fe = _fe(gm, 10 + k) if with_fext else None
        args = (pm, pd, mp.q(q), mp.v(dq), mp.v(ddq)) + ((mp.fext(fe),) if with_fext else ())
        pin.computeRNEADerivatives(*args)
        Dq, Dv, M = gear.inverse_dynamics_derivatives(gm, q, dq, ddq, fe)
        errs += [rel(Dq, mp.mat_back(pd.dtau_dq)), rel(Dv, mp.mat_back(pd.dtau_dv)),
                 rel(M, mp.mat_back(sym(pd.M)))]
    assert max(errs) < DERIVS, errs


@pytest.mark.parametrize("with_fext", [False, True])
def test_aba_derivatives_agree_with_pinocchio(robot, with_fext):
    gm, pm, mp = robot
    pd = pm.createData()
    errs = []
    for k, (q, dq, _, tau) in enumerate(_states(gm, seed=3)):
        fe = _fe(gm, 20 + k) if with_fext else None
        args = (pm, pd, mp.q(q), mp.v(dq), mp.v(tau)) + ((mp.fext(fe),) if with_fext else ())
        pin.computeABADerivatives(*args)
        Fq, Fv, Ft = gear.forward_dynamics_derivatives(gm, q, dq, tau, fe)
        errs += [rel(Fq, mp.mat_back(pd.ddq_dq)), rel(Fv, mp.mat_back(pd.ddq_dv)),
                 rel(Ft, mp.mat_back(sym(pd.Minv)))]
    assert max(errs) < DERIVS, errs


def test_linearize_dynamics_block_agrees_with_pinocchio(robot):
    gm, pm, mp = robot
    pd = pm.createData()
    q, dq, _, tau = next(_states(gm, 1, seed=4))
    A, B = gear.linearize(gm, q, dq, tau)
    pin.computeABADerivatives(pm, pd, mp.q(q), mp.v(dq), mp.v(tau))
    nv = gm.nv
    assert rel(A[nv:, :nv], mp.mat_back(pd.ddq_dq)) < DERIVS
    assert rel(A[nv:, nv:], mp.mat_back(pd.ddq_dv)) < DERIVS
    assert rel(B[nv:], mp.mat_back(sym(pd.Minv))) < DERIVS


def _breadth_first_reversed(gm):
    """The same robot with its bodies added breadth-first, children in
    reverse order (so gear's coordinate order differs from Pinocchio's
    depth-first one)."""
    out = gear.Model(gravity=gm.gravity)
    order = [i for i in range(gm.nbodies) if gm.parents[i] < 0]
    k = 0
    while k < len(order):
        order += gm.children(order[k])[::-1]
        k += 1
    for i in order:
        p = gm.parents[i]
        out.add_body(gm.body_names[i], "world" if p < 0 else gm.body_names[p], gm.joints[i],
                     placement=gm.placements[i], inertia=gm.inertias[i],
                     joint_name=gm.joint_names[i])
    return out


def test_derivatives_agree_when_coordinate_orders_differ():
    gm0, pm, _ = _load("quadruped.urdf", True)
    gm = _breadth_first_reversed(gm0)
    mp = PinMap(gm, pm)
    assert gm.joint_names != gm0.joint_names
    assert not np.array_equal(mp.P, np.eye(gm.nv)[np.r_[3:6, 0:3, 6:gm.nv]])
    pd = pm.createData()
    q, dq, ddq, tau = next(_states(gm, 1, seed=6))
    fe = _fe(gm, 6)
    assert rel(gear.inverse_dynamics(gm, q, dq, ddq, fe),
               mp.v_back(pin.rnea(pm, pd, mp.q(q), mp.v(dq), mp.v(ddq), mp.fext(fe)))) < VALUES
    pin.computeRNEADerivatives(pm, pd, mp.q(q), mp.v(dq), mp.v(ddq), mp.fext(fe))
    Dq, Dv, M = gear.inverse_dynamics_derivatives(gm, q, dq, ddq, fe)
    assert rel(Dq, mp.mat_back(pd.dtau_dq)) < DERIVS and rel(Dv, mp.mat_back(pd.dtau_dv)) < DERIVS
    pin.computeABADerivatives(pm, pd, mp.q(q), mp.v(dq), mp.v(tau), mp.fext(fe))
    Fq, Fv, Ft = gear.forward_dynamics_derivatives(gm, q, dq, tau, fe)
    assert rel(Fq, mp.mat_back(pd.ddq_dq)) < DERIVS and rel(Fv, mp.mat_back(pd.ddq_dv)) < DERIVS
    assert rel(Ft, mp.mat_back(sym(pd.Minv))) < DERIVS

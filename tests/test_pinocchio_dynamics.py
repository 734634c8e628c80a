"""Agreement of RNEA / ABA / CRBA / bias / gravity / hybrid with Pinocchio
(an independent implementation) on the bundled URDF robots, to 1e-10.

Conventions mapped by joint name: Pinocchio's free-flyer q is
(x, y, z, qx, qy, qz, qw) and its velocity (v, w) in the local frame, while
gear's are (x, y, z, qw, qx, qy, qz) and (w, v); Pinocchio orders joints
depth-first from the URDF.
"""
import numpy as np
import pytest

import gear

pin = pytest.importorskip("pinocchio", reason="Pinocchio (pip package 'pin') is an optional "
                                              "reference; install gear[reference] to run")

ROBOTS = [("arm7.urdf", False), ("quadruped.urdf", True)]


class Mapping:
    """q/v index maps between a gear model and a Pinocchio model."""

    def __init__(self, gm, pm):
        self.gm, self.pm = gm, pm
        self.nv = gm.nv
        assert pm.nv == gm.nv and pm.nq == gm.nq
        self.P = np.zeros((gm.nv, gm.nv))   # v_pin = P v_gear
        self.qmap = []                       # (pin slice, gear slice, is_free)
        for jid in range(1, pm.njoints):
            name = pm.names[jid]
            gname = "root" if name == "root_joint" else name
            i = gm.joint_index(gname)
            j = gm.joints[i]
            iq, iv = pm.joints[jid].idx_q, pm.joints[jid].idx_v
            nq, nv = pm.joints[jid].nq, pm.joints[jid].nv
            assert (nq, nv) == (j.nq, j.nv), name
            gq, gv = gm.idx_q(gname), gm.idx_v(gname)
            free = isinstance(j, gear.joints.Free)
            self.qmap.append((slice(iq, iq + nq), gq, free))
            if free:
                # pin (v, w) <- gear (w, v)
                for k in range(3):
                    self.P[iv + k, gv.start + 3 + k] = 1.0
                    self.P[iv + 3 + k, gv.start + k] = 1.0
            else:
                for k in range(nv):
                    self.P[iv + k, gv.start + k] = 1.0

    def q(self, qg):
        qp = np.zeros(self.pm.nq)
        for sp, sg, free in self.qmap:
            if free:
                x = qg[sg]
                qp[sp] = np.concatenate([x[:3], x[4:7], x[3:4]])
            else:
                qp[sp] = qg[sg]
        return qp

    def v(self, vg):
        return self.P @ vg

    def v_back(self, vp):
        return self.P.T @ vp

    def mat_back(self, Mp):
        return self.P.T @ Mp @ self.P


@pytest.fixture(params=ROBOTS, ids=[r[0] for r in ROBOTS])
def pair(request):
    fname, floating = request.param
    path = gear.data_path(fname)
    gm = gear.load_urdf(path, floating_base=floating)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating \
        else pin.buildModelFromUrdf(path)
    gm.gravity = pm.gravity.linear
    return gm, pm, Mapping(gm, pm)


def _states(gm, n=5, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield (gm.random_configuration(rng), rng.standard_normal(gm.nv),
               rng.standard_normal(gm.nv), rng.standard_normal(gm.nv))


def rel(a, b):
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


def test_total_mass_matches(pair):
    gm, pm, _ = pair
    # pm.inertias[0] is the universe's: the root link welded to it (fixed base)
    assert abs(gm.total_mass() - sum(I.mass for I in pm.inertias[1:])) < 1e-12


def test_rnea_aba_crba_agree_with_pinocchio(pair):
    gm, pm, mp = pair
    pd = pm.createData()
    for q, dq, ddq, tau in _states(gm):
        qp, vp, ap, tp = mp.q(q), mp.v(dq), mp.v(ddq), mp.v(tau)
        assert rel(gear.inverse_dynamics(gm, q, dq, ddq), mp.v_back(pin.rnea(pm, pd, qp, vp, ap))) < 1e-10
        assert rel(gear.forward_dynamics(gm, q, dq, tau), mp.v_back(pin.aba(pm, pd, qp, vp, tp))) < 1e-10
        Mp = pin.crba(pm, pd, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert rel(gear.mass_matrix(gm, q), mp.mat_back(Mp)) < 1e-10
        assert rel(gear.bias_forces(gm, q, dq),
                   mp.v_back(pin.nonLinearEffects(pm, pd, qp, vp))) < 1e-10
        assert rel(gear.gravity_forces(gm, q),
                   mp.v_back(pin.computeGeneralizedGravity(pm, pd, qp))) < 1e-10


def test_external_forces_agree_with_pinocchio(pair):
    """Pinocchio's fext are per joint, in the joint frame, (f, m); gear's are
    per body in the body frame, (m, f).  A URDF link frame is its joint frame."""
    gm, pm, mp = pair
    pd = pm.createData()
    rng = np.random.default_rng(7)
    q, dq, ddq, _ = next(_states(gm, 1, seed=3))
    fe = rng.standard_normal((gm.nbodies, 6))
    fext = pin.StdVec_Force()
    for jid in range(pm.njoints):
        fext.append(pin.Force.Zero())
    for jid in range(1, pm.njoints):
        name = pm.names[jid]
        i = gm.joint_index("root" if name == "root_joint" else name)
        fext[jid] = pin.Force(fe[i, 3:], fe[i, :3])
    # bodies merged into a fixed root have no Pinocchio joint: give them zero force
    for i, n in enumerate(gm.joint_names):
        if n == "root" and not isinstance(gm.joints[i], gear.joints.Free):
            fe[i] = 0.0
    tp = pin.rnea(pm, pd, mp.q(q), mp.v(dq), mp.v(ddq), fext)
    assert rel(gear.inverse_dynamics(gm, q, dq, ddq, fe), mp.v_back(tp)) < 1e-10


def test_kinetic_energy_and_momentum_agree_with_pinocchio(pair):
    gm, pm, mp = pair
    pd = pm.createData()
    for q, dq, _, _ in _states(gm, 3, seed=5):
        qp, vp = mp.q(q), mp.v(dq)
        assert abs(gear.kinetic_energy(gm, q, dq) - pin.computeKineticEnergy(pm, pd, qp, vp)) \
            < 1e-10 * max(1.0, abs(pd.kinetic_energy))
        # Pinocchio's centroidal momentum (about the centre of mass, world axes)
        pin.ccrba(pm, pd, qp, vp)
        hg = pd.hg
        L = gear.momentum(gm, q, dq)                      # about the world origin
        com = pin.centerOfMass(pm, pd, qp)
        lin = L[3:]
        ang_com = L[:3] - np.cross(com, lin)
        assert rel(lin, hg.linear) < 1e-10
        assert rel(ang_com, hg.angular) < 1e-10

"""Forward kinematics of loaded models against hand computations, Pinocchio
and MuJoCo (the references are optional and skipped when not installed)."""
from __future__ import annotations

import numpy as np
import pytest

import gear
from gear import SE3
from gear.spatial import quat_mul, rot_to_quat

TOL = 1e-12


# ---------------------------------------------------------------------------
# hand-computed reference
# ---------------------------------------------------------------------------

def _rot(axis, a):
    """Rodrigues' formula, written out."""
    k = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(a) * K + (1 - np.cos(a)) * K @ K


def _H(R=None, p=None):
    H = np.eye(4)
    if R is not None:
        H[:3, :3] = R
    if p is not None:
        H[:3, 3] = p
    return H


def _rpy(r, p, y):
    return _rot([0, 0, 1], y) @ _rot([0, 1, 0], p) @ _rot([1, 0, 0], r)


TINY = """<?xml version="1.0"?>
<robot name="tiny">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="l1"><inertial><origin xyz="0.1 0 0"/><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>
  <link name="l2"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>
  <link name="l3"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="l1"/>
    <origin xyz="0.1 0 0.5" rpy="0 0 1.5707963267948966"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>
  </joint>
  <joint name="j2" type="prismatic">
    <parent link="l1"/><child link="l2"/>
    <origin xyz="0.3 0 0" rpy="1.5707963267948966 0 0"/>
    <axis xyz="1 0 0"/><limit lower="-0.5" upper="0.5" effort="1" velocity="1"/>
  </joint>
  <joint name="j3" type="continuous">
    <parent link="l2"/><child link="l3"/>
    <origin xyz="0 0.2 0" rpy="0.1 0.2 0.3"/>
    <axis xyz="0 1 1"/>
  </joint>
</robot>
"""


def _tiny_poses(q, base=None):
    """World poses of base, l1, l2, l3, by hand."""
    T0 = np.eye(4) if base is None else base
    T1 = T0 @ _H(_rot([0, 0, 1], np.pi / 2), [0.1, 0, 0.5]) @ _H(_rot([0, 0, 1], q[0]))
    T2 = T1 @ _H(_rot([1, 0, 0], np.pi / 2), [0.3, 0, 0]) @ _H(p=[q[1], 0, 0])
    T3 = T2 @ _H(_rpy(0.1, 0.2, 0.3), [0, 0.2, 0]) @ _H(_rot([0, 1, 1], q[2]))
    return np.stack([T0, T1, T2, T3])


def _twist_fd(pose_fn, q, dq, h=1e-6):
    """Body twists (w, v) from central differences of hand-computed poses."""
    P, Pp, Pm = pose_fn(q), pose_fn(q + h * dq), pose_fn(q - h * dq)
    out = []
    for T, Tp, Tm in zip(P, Pp, Pm):
        Vhat = np.linalg.inv(T) @ (Tp - Tm) / (2 * h)
        W = Vhat[:3, :3]
        out.append(np.r_[W[2, 1], W[0, 2], W[1, 0], Vhat[:3, 3]])
    return np.array(out)


def _tiny_twists(q, dq):
    """Body twists by the recursion V_i = Ad_{T_{i-1,i}^{-1}} V_{i-1} + S_i dq_i."""
    P = _tiny_poses(q)
    S = [np.r_[0, 0, 1, 0, 0, 0], np.r_[0, 0, 0, 1, 0, 0], np.r_[0, 1, 1, 0, 0, 0] / np.sqrt(2)]
    V = [np.zeros(6)]
    for i in range(1, 4):
        T = np.linalg.inv(P[i - 1]) @ P[i]
        Ti = np.linalg.inv(T)
        R, p = Ti[:3, :3], Ti[:3, 3]
        px = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
        Ad = np.block([[R, np.zeros((3, 3))], [px @ R, R]])
        V.append(Ad @ V[-1] + S[i - 1] * dq[i - 1])
    return np.array(V)


@pytest.fixture
def tiny_urdf(tmp_path):
    p = tmp_path / "tiny.urdf"
    p.write_text(TINY)
    return p


def test_tiny_urdf_against_hand_computation(tiny_urdf):
    m = gear.load_urdf(tiny_urdf)
    # the root link "base" is welded to the world: a frame, not a body
    assert m.body_names == ["l1", "l2", "l3"]
    assert m.frames["base"][0] == -1
    rng = np.random.default_rng(42)
    for _ in range(10):
        q = rng.uniform(-2, 2, 3)
        dq = rng.standard_normal(3)
        P, V = gear.forward_kinematics(m, q, dq)
        assert np.allclose(P, _tiny_poses(q)[1:], atol=TOL, rtol=0)
        assert np.allclose(V, _tiny_twists(q, dq)[1:], atol=TOL, rtol=0)
        assert np.allclose(V, _twist_fd(_tiny_poses, q, dq)[1:], atol=1e-8, rtol=0)


def test_tiny_urdf_floating_base_against_hand_computation(tiny_urdf):
    m = gear.load_urdf(tiny_urdf, floating_base=True)
    assert (m.nq, m.nv) == (10, 9)
    rng = np.random.default_rng(7)
    for _ in range(10):
        quat = rng.standard_normal(4)
        quat /= np.linalg.norm(quat)
        w, x, y, z = quat
        R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                      [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                      [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
        p = rng.standard_normal(3)
        qj = rng.uniform(-2, 2, 3)
        q = np.r_[p, quat, qj]
        P = gear.forward_kinematics(m, q)
        assert np.allclose(P, _tiny_poses(qj, base=_H(R, p)), atol=TOL, rtol=0)
        # the root twist is the root's dq (w, v) itself
        dq = rng.standard_normal(9)
        _, V = gear.forward_kinematics(m, q, dq)
        assert np.allclose(V[0], dq[:6], atol=TOL, rtol=0)


def test_merged_fixed_link_pose(tmp_path):
    """A fixed chain of three links merged into one body: the recorded frame
    is the composed placement."""
    p = tmp_path / "f.urdf"
    p.write_text(TINY.replace("</robot>", """
      <link name="f1"/><link name="f2"/>
      <joint name="jf1" type="fixed"><parent link="l3"/><child link="f1"/><origin xyz="0.1 0 0" rpy="0 0.5 0"/></joint>
      <joint name="jf2" type="fixed"><parent link="f1"/><child link="f2"/><origin xyz="0 0.2 0" rpy="0.3 0 0"/></joint>
    </robot>"""))
    m = gear.load_urdf(p)
    q = np.array([0.3, -0.2, 1.1])
    P = gear.forward_kinematics(m, q)
    b, T = m.frames["f2"]
    expected = _tiny_poses(q)[3] @ _H(_rot([0, 1, 0], 0.5), [0.1, 0, 0]) @ _H(_rot([1, 0, 0], 0.3), [0, 0.2, 0])
    assert b == 2                                   # l3 (the root link is not a body)
    assert np.allclose(P[b] @ T.homogeneous(), expected, atol=TOL, rtol=0)


# ---------------------------------------------------------------------------
# Pinocchio
# ---------------------------------------------------------------------------

MIXED = """<?xml version="1.0"?>
<robot name="mixed">
  <link name="base"><inertial><origin xyz="0 0 0.1" rpy="0.1 0 0"/><mass value="3"/>
    <inertia ixx="0.03" ixy="0.001" ixz="0" iyy="0.04" iyz="0" izz="0.05"/></inertial></link>
  <link name="a"><inertial><origin xyz="0.1 0.02 0" rpy="0 0.3 0.2"/><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0.001" iyy="0.012" iyz="0" izz="0.015"/></inertial></link>
  <link name="b"><inertial><origin xyz="0 0 -0.1"/><mass value="0.5"/>
    <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.004" iyz="0" izz="0.001"/></inertial></link>
  <link name="c_mount"/>
  <link name="c"><inertial><origin xyz="0.05 0 0" rpy="0.4 0.1 -0.2"/><mass value="0.3"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.0025"/></inertial></link>
  <link name="d"><inertial><origin xyz="0 0.05 0"/><mass value="0.2"/>
    <inertia ixx="0.0005" ixy="0" ixz="0" iyy="0.0004" iyz="0" izz="0.0006"/></inertial></link>
  <link name="tool"><inertial><origin xyz="0 0 0.02"/><mass value="0.1"/>
    <inertia ixx="0.0001" ixy="0" ixz="0" iyy="0.0001" iyz="0" izz="0.0001"/></inertial></link>
  <joint name="ja" type="continuous"><parent link="base"/><child link="a"/>
    <origin xyz="0 0 0.2" rpy="0.2 -0.1 0.4"/><axis xyz="0.3 -0.5 0.8"/></joint>
  <joint name="jb" type="prismatic"><parent link="a"/><child link="b"/>
    <origin xyz="0.2 0 0" rpy="0 0 0"/><axis xyz="0 -1 0"/>
    <limit lower="-0.3" upper="0.3" effort="1" velocity="1"/></joint>
  <joint name="jmount" type="fixed"><parent link="a"/><child link="c_mount"/>
    <origin xyz="0 0.1 0" rpy="0 1.5707963267948966 0"/></joint>
  <joint name="jc" type="revolute"><parent link="c_mount"/><child link="c"/>
    <origin xyz="0.05 0 0" rpy="0 0 0"/><axis xyz="0 0 -1"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="jd" type="prismatic"><parent link="c"/><child link="d"/>
    <origin xyz="0.1 0 0" rpy="-0.3 0.2 0.1"/><axis xyz="1 1 0"/>
    <limit lower="-0.1" upper="0.2" effort="1" velocity="1"/></joint>
  <joint name="jtool" type="fixed"><parent link="d"/><child link="tool"/>
    <origin xyz="0 0 0.05" rpy="0.1 0.2 0.3"/></joint>
</robot>
"""


@pytest.fixture
def mixed_urdf(tmp_path):
    p = tmp_path / "mixed.urdf"
    p.write_text(MIXED)
    return str(p)


def _pin_model(pin, path, floating):
    if floating:
        return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(path)


def _pin_jid(pm, jname):
    name = "root_joint" if jname == "root" else jname
    return pm.getJointId(name) if pm.existJointName(name) else None


def _to_pin(m, pm, q, dq):
    """Map gear (q, dq) to Pinocchio's (q, v)."""
    qp, vp = np.zeros(pm.nq), np.zeros(pm.nv)
    for jn in m.joint_names:
        jid = _pin_jid(pm, jn)
        if jid is None:
            continue
        jm = pm.joints[jid]
        qg, vg = q[m.idx_q(jn)], dq[m.idx_v(jn)]
        iq, iv = jm.idx_q, jm.idx_v
        if jm.nq == 7:        # free flyer: (p, qx, qy, qz, qw), v = (linear, angular)
            qp[iq:iq + 7] = np.r_[qg[:3], qg[4:7], qg[3]]
            vp[iv:iv + 6] = np.r_[vg[3:], vg[:3]]
        elif jm.nq == 2 and jm.nv == 1:   # unbounded revolute: (cos, sin)
            qp[iq:iq + 2] = [np.cos(qg[0]), np.sin(qg[0])]
            vp[iv] = vg[0]
        else:
            assert jm.nq == len(qg)
            qp[iq:iq + jm.nq] = qg
            vp[iv:iv + jm.nv] = vg
    return qp, vp


CASES = [("arm7.urdf", False), ("quadruped.urdf", True), ("quadruped.urdf", False), ("mixed", False),
         ("mixed", True)]


@pytest.mark.parametrize("name, floating", CASES)
def test_against_pinocchio(name, floating, mixed_urdf):
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (pin) is the reference implementation")
    path = mixed_urdf if name == "mixed" else gear.data_path(name)
    m = gear.load_urdf(path, floating_base=floating)
    pm = _pin_model(pin, path, floating)
    pd = pm.createData()
    assert m.nv == pm.nv
    mapped = [jn for jn in m.joint_names if _pin_jid(pm, jn) is not None]
    assert len(mapped) == pm.njoints - 1       # every pin joint has a gear twin
    rng = np.random.default_rng(2024)
    for _ in range(20):
        q = m.random_configuration(rng)
        dq = rng.standard_normal(m.nv)
        P, V = gear.forward_kinematics(m, q, dq)
        qp, vp = _to_pin(m, pm, q, dq)
        pin.forwardKinematics(pm, pd, qp, vp)
        pin.updateFramePlacements(pm, pd)
        for i, jn in enumerate(m.joint_names):
            jid = _pin_jid(pm, jn)
            if jid is None:    # the fixed root of a fixed-base robot is pin's universe
                assert jn == "root" and not floating
                assert np.allclose(P[i], np.eye(4), atol=TOL)
                continue
            assert np.allclose(P[i], pd.oMi[jid].homogeneous, atol=TOL, rtol=0), jn
            v = pd.v[jid]
            assert np.allclose(V[i], np.r_[v.angular, v.linear], atol=TOL, rtol=0), jn
        # every link (merged ones included) as a pin body frame
        for link, (b, T) in m.frames.items():
            fid = pm.getFrameId(link, pin.BODY)
            assert fid < len(pm.frames), link
            H = (P[b] if b >= 0 else np.eye(4)) @ T.homogeneous()
            assert np.allclose(H, pd.oMf[fid].homogeneous, atol=TOL, rtol=0), link


@pytest.mark.parametrize("name, floating", CASES)
def test_inertias_against_pinocchio(name, floating, mixed_urdf):
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (pin) is the reference implementation")
    path = mixed_urdf if name == "mixed" else gear.data_path(name)
    m = gear.load_urdf(path, floating_base=floating)
    pm = _pin_model(pin, path, floating)
    for i, jn in enumerate(m.joint_names):
        jid = _pin_jid(pm, jn)
        if jid is None:
            continue
        Ip, Ig = pm.inertias[jid], m.inertias[i]
        if Ig is None:
            assert Ip.mass == 0.0
            continue
        assert Ig.mass == pytest.approx(Ip.mass, abs=TOL)
        assert np.allclose(Ig.com, Ip.lever, atol=TOL, rtol=0)
        assert np.allclose(Ig.I_com, Ip.inertia, atol=TOL, rtol=0)


# ---------------------------------------------------------------------------
# MuJoCo
# ---------------------------------------------------------------------------

MULTI = """<mujoco model="multi">
  <compiler angle="radian"/>
  <worldbody>
    <body name="base" pos="0.1 0.2 0.3" euler="0.2 0.3 -0.1">
      <joint name="h1" type="hinge" axis="0 0 1" pos="0.1 0 0"/>
      <joint name="s1" type="slide" axis="1 1 0"/>
      <joint name="h2" type="hinge" axis="0 1 0" pos="0 0 0.2"/>
      <inertial pos="0.1 0 0" quat="0.9 0.1 0.2 0.3" mass="2" diaginertia="0.1 0.2 0.25"/>
      <body name="weld" pos="0.3 0 0" xyaxes="0 1 0 -1 0 0">
        <inertial pos="0 0 0.05" mass="0.5" diaginertia="0.01 0.01 0.01"/>
        <body name="ballbody" pos="0 0 0.2" zaxis="0.3 0.4 0.8">
          <joint name="h3" axis="1 0 0" pos="0 0.1 0"/>
          <joint name="ball" type="ball" pos="0.05 0.05 0"/>
          <inertial pos="0 0 0.1" mass="1" fullinertia="0.02 0.03 0.025 0.001 0.002 -0.001"/>
        </body>
      </body>
    </body>
    <body name="floater" pos="1 0 1" axisangle="1 1 1 0.5">
      <freejoint/>
      <inertial pos="0.01 0.02 0.03" mass="1" diaginertia="0.01 0.02 0.025"/>
      <body name="child" pos="0 0 -0.3"><joint name="hc" axis="0 1 0" pos="0 0 0.1"/>
        <inertial pos="0 0 -0.1" mass="0.3" diaginertia="0.003 0.003 0.0005"/></body>
    </body>
  </worldbody>
</mujoco>
"""


def _mjcf_models(tmp_path):
    p = tmp_path / "multi.xml"
    p.write_text(MULTI)
    return {"fourbar.xml": gear.data_path("fourbar.xml"), "arm7.xml": gear.data_path("arm7.xml"),
            "multi.xml": str(p)}


@pytest.mark.parametrize("name", ["fourbar.xml", "arm7.xml", "multi.xml"])
def test_mjcf_against_mujoco(name, tmp_path):
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo is the reference for MJCF models")
    path = _mjcf_models(tmp_path)[name]
    m = gear.load_mjcf(path)
    mm = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(mm)
    assert (m.nq, m.nv) == (mm.nq, mm.nv)
    assert np.allclose(m.qpos0, mm.qpos0, atol=1e-12)
    rng = np.random.default_rng(3)
    for k in range(20):
        q = m.qpos0 if k == 0 else m.random_configuration(rng)
        d.qpos[:] = q
        mujoco.mj_kinematics(mm, d)
        P = gear.forward_kinematics(m, q)
        for bid in range(1, mm.nbody):
            b, T = m.frames[mm.body(bid).name]
            H = (P[b] if b >= 0 else np.eye(4)) @ T.homogeneous()
            assert np.allclose(H[:3, 3], d.xpos[bid], atol=TOL, rtol=0), mm.body(bid).name
            assert np.allclose(H[:3, :3], d.xmat[bid].reshape(3, 3), atol=TOL, rtol=0), mm.body(bid).name
    # inertias: every gear body equals the sum of the MuJoCo bodies merged into it
    d.qpos[:] = q
    mujoco.mj_kinematics(mm, d)
    lumped = {}
    for bid in range(1, mm.nbody):
        b, _ = m.frames[mm.body(bid).name]
        if b < 0 or mm.body_mass[bid] == 0:
            continue
        R = d.ximat[bid].reshape(3, 3)
        I = gear.Inertia(mm.body_mass[bid], d.xipos[bid], R @ np.diag(mm.body_inertia[bid]) @ R.T)
        lumped[b] = I if b not in lumped else lumped[b] + I
    for i in range(m.nbodies):
        if m.inertias[i] is None:
            assert i not in lumped
            continue
        Iw = m.inertias[i].transform(SE3.from_matrix(P[i]))
        assert np.allclose(Iw.matrix(), lumped[i].matrix(), atol=1e-10, rtol=0), m.body_names[i]


EQ = """<mujoco model="eq">
  <worldbody>
    <site name="ground" pos="0.5 0.5 0" euler="0 30 0"/>
    <body name="a" pos="0 0 1"><joint name="ja" type="ball"/>
      <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
      <site name="sa" pos="0.1 0 0" euler="0 0 90"/>
      <body name="b" pos="0.3 0.1 0" euler="10 20 30"><joint name="jb" axis="0 1 0" pos="0.05 0 0"/>
        <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/></body>
    </body>
    <body name="c" pos="1 0 0" euler="5 -10 15"><freejoint/>
      <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
      <site name="sc" pos="0 0.2 0" euler="20 0 0"/>
      <body name="w" pos="0 0 0.4"><inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/></body>
    </body>
  </worldbody>
  <equality>
    <weld name="w_rel" body1="b" body2="c" anchor="0.1 0.2 0.3" relpose="0.5 0.2 0.1 0.9 0.1 0.2 0.3"/>
    <weld name="w_q0" body1="b" body2="w" anchor="0.1 0.2 0.3"/>
    <connect name="c_body" body1="b" body2="w" anchor="0.1 0.2 0.3"/>
    <connect name="c_world" body1="w" anchor="0.1 0 0"/>
    <connect name="c_site" site1="sa" site2="sc"/>
    <weld name="w_site" site1="sa" site2="sc"/>
    <weld name="w_ground" site1="ground" site2="sc"/>
  </equality>
</mujoco>
"""


def test_mjcf_equalities_against_mujoco(tmp_path):
    """The loop-closure frames reproduce MuJoCo's equality residuals."""
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo is the reference for MJCF models")
    p = tmp_path / "eq.xml"
    p.write_text(EQ)
    m = gear.load_mjcf(p)
    mm = mujoco.MjModel.from_xml_path(str(p))
    d = mujoco.MjData(mm)
    assert [lc.name for lc in m.loop_closures] == [mm.eq(i).name for i in range(mm.neq)]
    rng = np.random.default_rng(5)
    for k in range(10):
        q = m.qpos0 if k == 0 else m.random_configuration(rng)
        d.qpos[:] = q
        mujoco.mj_forward(mm, d)
        P = gear.forward_kinematics(m, q)
        row = 0
        for lc in m.loop_closures:
            Ha = (np.eye(4) if lc.body_a == "world" else P[m.body_index(lc.body_a)]) @ lc.placement_a.homogeneous()
            Hb = (np.eye(4) if lc.body_b == "world" else P[m.body_index(lc.body_b)]) @ lc.placement_b.homogeneous()
            n = 3 if lc.kind == "ball" else 6
            ref = d.efc_pos[row:row + n]
            assert np.allclose(Ha[:3, 3] - Hb[:3, 3], ref[:3], atol=1e-12), lc.name
            if lc.kind == "weld":
                qa, qb = rot_to_quat(Ha[:3, :3]), rot_to_quat(Hb[:3, :3])
                e = quat_mul(qb * [1, -1, -1, -1], qa)[1:]
                assert np.allclose(e, ref[3:], atol=1e-12) or np.allclose(-e, ref[3:], atol=1e-12), lc.name
            if k == 0 and lc.name in ("w_q0", "c_body", "c_world"):
                assert np.allclose(Ha, Hb, atol=1e-12), lc.name   # satisfied at qpos0
            row += n
        assert row == d.nefc

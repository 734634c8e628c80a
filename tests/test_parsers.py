"""URDF / MJCF loaders: malformed-file corpus, bundled models, features."""
from __future__ import annotations

import os
import pathlib
import re
import warnings
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import gear
from gear import ModelFileError, SE3
from gear.joints import Fixed, Free, Planar, Prismatic, Revolute, Spherical
from gear.parsers import mjcf as mjcf_module

DATA = pathlib.Path(__file__).parent / "data"

# file -> substrings the error message must contain (the offending element)
CORPUS = {
    "urdf_missing_parent.urdf": ["j_ghost", "ghost_link"],
    "urdf_missing_child.urdf": ["j_lost", "nowhere_link"],
    "urdf_missing_parent_element.urdf": ["orphan_joint", "<parent>"],
    "urdf_cycle.urdf": ["cycle", "loop_a", "loop_b", "loop_c"],
    "urdf_self_loop.urdf": ["cycle", "self_link"],
    "urdf_two_parents.urdf": ["orphan_twice", "j2", "j3"],
    "urdf_two_roots.urdf": ["root link", "island_a"],
    "urdf_duplicate_link.urdf": ["dup_link", "duplicate"],
    "urdf_duplicate_joint.urdf": ["dup_joint", "duplicate"],
    "urdf_unknown_joint_type.urdf": ["weird_joint", "spherical"],
    "urdf_missing_joint_type.urdf": ["typeless_joint", "type"],
    "urdf_missing_limit.urdf": ["unlimited_joint", "<limit>"],
    "urdf_nan_origin.urdf": ["nan_joint", "xyz", "nan"],
    "urdf_inf_number.urdf": ["huge_link", "1e999"],
    "urdf_abc_number.urdf": ["abc_joint", "rpy", "abc"],
    "urdf_bad_xyz_count.urdf": ["short_xyz_joint", "xyz", "3 numbers"],
    "urdf_negative_mass.urdf": ["neg_mass_link", "mass"],
    "urdf_negative_definite_inertia.urdf": ["neg_def_link", "negative definite"],
    "urdf_missing_inertia.urdf": ["no_tensor_link", "<inertia>"],
    "urdf_zero_axis.urdf": ["zero_axis_joint", "non-zero"],
    "urdf_not_robot.urdf": ["<robot>"],
    "urdf_not_xml.urdf": ["not a well-formed XML"],
    "urdf_entity_bomb.urdf": ["entity", "lol"],
    "mjcf_missing_body.xml": ["loop", "ghost_body"],
    "mjcf_bad_joint_type.xml": ["twist_joint", "universal"],
    "mjcf_include.xml": ["<include>", "other.xml", "not found"],
    "mjcf_frame.xml": ["<frame", "moved_frame", "childclass", "nosuchclass"],
    "mjcf_not_mujoco.xml": ["<mujoco>"],
    "mjcf_not_xml.xml": ["not a well-formed XML"],
    "mjcf_free_not_toplevel.xml": ["inner_free", "top-level"],
    "mjcf_zero_quat.xml": ["zero_quat_body", "quat"],
    "mjcf_two_orientations.xml": ["overspecified", "orientation"],
    "mjcf_nan_pos.xml": ["nan_body", "pos"],
    "mjcf_zero_axis.xml": ["zero_axis_hinge", "axis"],
    "mjcf_duplicate_body.xml": ["twin", "duplicate"],
    "mjcf_negative_mass.xml": ["light_body", "mass"],
    "mjcf_unsupported_equality.xml": ["coupling", "<tendon>", "connect, weld and joint"],
    "mjcf_undefined_class.xml": ["ja", "nosuchclass"],
    "mjcf_bad_range.xml": ["inverted_range", "range"],
    "mjcf_bad_euler_count.xml": ["short_euler", "euler"],
}


# Files that load under the inertia policy (docs/models.md) with a
# gear.InertiaWarning naming the file and link, and raise with strict=True;
# joint limits with lower > upper (limits never enter the dynamics) likewise,
# with a gear.ModelFileWarning.
WARNS = {
    "urdf_limits_reversed.urdf": ["joint 'reversed_joint' <limit>", "lower limit 1.0 is above upper limit -1.0"],
    "urdf_zero_mass.urdf": ["zero_mass_link", "zero mass"],
    "urdf_not_pd_inertia.urdf": ["not_pd_link", "indefinite"],
    "urdf_triangle_inertia.urdf": ["triangle_link", "triangle"],
    "mjcf_bad_inertia.xml": ["bad_inertia_body", "triangle"],
}

# Files that load, but whose forward dynamics is singular: a joint moves only
# massless bodies.  SingularInertiaError names the joint at call time.
SINGULAR = {
    "urdf_massless_subtree.urdf": "massless_joint",
    "mjcf_massless_subtree.xml": "floppy_joint",
}


def _load(path, **kw):
    path = os.fspath(path)
    return gear.load_urdf(path, **kw) if path.endswith(".urdf") else gear.load_mjcf(path, **kw)


def test_corpus_is_complete():
    files = sorted(p.name for p in DATA.iterdir() if p.name.startswith(("urdf_", "mjcf_")))
    assert files == sorted([*CORPUS, *WARNS, *SINGULAR])
    assert len(files) >= 12


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_malformed_file_raises(name):
    path = DATA / name
    with pytest.raises(ModelFileError) as info:
        _load(path)
    msg = str(info.value)
    assert name in msg, msg                       # the file
    for s in CORPUS[name]:                        # the offending element
        assert s in msg, f"{s!r} not in {msg!r}"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", sorted(WARNS))
def test_impossible_inertia_warns_and_strict_raises(name):
    path = DATA / name
    category = gear.ModelFileWarning if "limits" in name else gear.InertiaWarning
    with pytest.warns(category) as rec:
        model = _load(path)
    msgs = [str(w.message) for w in rec if issubclass(w.category, category)]
    assert len(msgs) == 1, msgs
    assert name in msgs[0]
    for part in WARNS[name]:
        assert part in msgs[0], f"{part!r} not in {msgs[0]!r}"
    assert model.nbodies >= 1
    with pytest.raises(ModelFileError) as info:
        _load(path, strict=True)
    msg = str(info.value)
    assert name in msg and all(part in msg for part in WARNS[name]), msg


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_massless_subtree_loads_and_forward_dynamics_names_the_joint(name):
    model = _load(DATA / name)
    q = model.neutral()
    z = np.zeros(model.nv)
    assert np.all(np.isfinite(gear.inverse_dynamics(model, q, z, z)))
    with pytest.raises(gear.SingularInertiaError, match=SINGULAR[name]):
        gear.forward_dynamics(model, q, z, z)


def test_entity_bomb_is_not_expanded():
    t0 = time.perf_counter()
    with pytest.raises(ModelFileError, match="entity"):
        gear.load_urdf(DATA / "urdf_entity_bomb.urdf")
    assert time.perf_counter() - t0 < 1.0


def test_missing_file_is_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        gear.load_urdf(tmp_path / "nope.urdf")
    with pytest.raises(FileNotFoundError):
        gear.load_mjcf(tmp_path / "nope.xml")


# ---------------------------------------------------------------------------
# bundled URDF models
# ---------------------------------------------------------------------------

def _urdf_total_mass(path):
    root = ET.parse(path).getroot()
    return sum(float(m.get("value")) for m in root.iter("mass"))


def _urdf_inertia(path, link):
    """The link's inertia in the link frame, computed independently."""
    root = ET.parse(path).getroot()
    el = next(l for l in root.findall("link") if l.get("name") == link).find("inertial")
    o = el.find("origin")
    xyz = np.array([float(x) for x in o.get("xyz").split()])
    rpy = [float(x) for x in o.get("rpy").split()]
    R = SE3.from_rpy(rpy).R
    t = {k: float(v) for k, v in el.find("inertia").attrib.items()}
    I = np.array([[t["ixx"], t["ixy"], t["ixz"]], [t["ixy"], t["iyy"], t["iyz"]], [t["ixz"], t["iyz"], t["izz"]]])
    return gear.Inertia(float(el.find("mass").get("value")), xyz, R @ I @ R.T)


def test_arm7_urdf():
    path = gear.data_path("arm7.urdf")
    m = gear.load_urdf(path)
    # the root link is welded to the world, not a body (as in Pinocchio)
    assert (m.nq, m.nv, m.nbodies) == (7, 7, 7)
    assert m.body_names == [f"link{i}" for i in range(1, 8)]
    assert m.joint_names == [f"joint{i}" for i in range(1, 8)]
    assert all(isinstance(j, Revolute) for j in m.joints)
    assert m.parents[0] == -1
    b, T = m.frames["base_link"]
    assert b == -1 and T.isclose(SE3())
    # limits (joint4 of this arm has an all-negative range)
    j4 = m.joints[m.joint_index("joint4")]
    assert j4.lower[0] == -3.0718 and j4.upper[0] == -0.0698
    # fixed hand merged into link7 with its mass; massless tcp only a frame
    base_mass = _urdf_inertia(path, "base_link").mass
    assert m.total_mass() == pytest.approx(_urdf_total_mass(path) - base_mass, abs=1e-12)
    i7 = m.body_index("link7")
    b, T = m.frames["hand"]
    assert b == i7
    assert T.isclose(SE3.from_rpy([0, 0, -np.pi / 4], [0, 0, 0.107]))
    b, T = m.frames["tcp"]
    assert b == i7
    assert T.isclose(SE3.from_rpy([0, 0, -np.pi / 4], [0, 0, 0.107]) * SE3(p=[0, 0, 0.1034]))
    b, T = m.frames["link3"]
    assert b == 2 and T.isclose(SE3())
    lumped = _urdf_inertia(path, "link7") + _urdf_inertia(path, "hand").transform(m.frames["hand"][1])
    assert np.allclose(m.inertias[i7].matrix(), lumped.matrix(), atol=1e-14)
    # non-merged body inertias equal the file's (rotated inertial frame)
    assert np.allclose(m.inertias[1].matrix(), _urdf_inertia(path, "link2").matrix(), atol=1e-15)
    # placements
    assert m.placements[m.body_index("link3")].isclose(SE3.from_rpy([np.pi / 2, 0, 0], [0, -0.316, 0]))


def test_arm7_urdf_no_merge():
    path = gear.data_path("arm7.urdf")
    m = gear.load_urdf(path, merge_fixed=False)
    assert (m.nq, m.nv, m.nbodies) == (7, 7, 9)
    assert m.body_names[-2:] == ["hand", "tcp"]
    assert m.joint_names[-2:] == ["hand_joint", "tcp_joint"]
    assert all(isinstance(m.joints[i], Fixed) for i in (7, 8))
    assert m.inertias[8] is None
    base_mass = _urdf_inertia(path, "base_link").mass
    assert m.total_mass() == pytest.approx(_urdf_total_mass(path) - base_mass, abs=1e-12)
    # the root link stays welded to the world even without merging
    assert m.frames.pop("base_link")[0] == -1
    assert all(T.isclose(SE3()) and b == m.body_index(n) for n, (b, T) in m.frames.items())
    # same kinematics as the merged model
    mm = gear.load_urdf(path)
    q = mm.random_configuration(0)
    P, Pm = gear.forward_kinematics(m, q), gear.forward_kinematics(mm, q)
    for name in ("hand", "tcp", "link4"):
        b, T = mm.frames[name]
        assert np.allclose(P[m.body_index(name)], Pm[b] @ T.homogeneous(), atol=1e-14)


def test_quadruped_floating_base():
    path = gear.data_path("quadruped.urdf")
    m = gear.load_urdf(path, floating_base=True)
    assert (m.nq, m.nv, m.nbodies) == (19, 18, 13)
    assert m.body_names[0] == "trunk" and m.joint_names[0] == "root"
    assert isinstance(m.joints[0], Free) and m.parents[0] == -1
    assert m.idx_q("root") == slice(0, 7) and m.idx_v("root") == slice(0, 6)
    assert m.joint_names[1:4] == ["FL_hip_joint", "FL_thigh_joint", "FL_calf_joint"]
    assert m.total_mass() == pytest.approx(13.4, abs=1e-12)
    assert m.total_mass() == pytest.approx(_urdf_total_mass(path), abs=1e-12)
    for leg in ("FL", "FR", "HL", "HR"):
        b, T = m.frames[f"{leg}_foot"]
        assert m.body_names[b] == f"{leg}_calf"
        assert T.isclose(SE3(p=[0, 0, -0.2]))
        assert m.inertias[b].mass == pytest.approx(0.25)
    q = m.random_configuration(1)
    assert np.isclose(np.linalg.norm(q[3:7]), 1.0)
    fixed = gear.load_urdf(path)
    assert (fixed.nq, fixed.nv, fixed.nbodies) == (12, 12, 12)
    assert fixed.joint_names[0] == "FL_hip_joint" and fixed.frames["trunk"][0] == -1


def test_gravity_argument():
    m = gear.load_urdf(gear.data_path("arm7.urdf"), gravity=(0, 0, -1.62))
    assert np.allclose(m.gravity, [0, 0, -1.62])


# ---------------------------------------------------------------------------
# URDF features
# ---------------------------------------------------------------------------

INERTIAL = ('<inertial><origin xyz="0.1 0 0" rpy="0 0 0"/><mass value="1"/>'
            '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial>')


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_urdf_joint_types(tmp_path):
    p = _write(tmp_path, "types.urdf", f"""<robot name="t">
      <link name="base">{INERTIAL}</link>
      <link name="a">{INERTIAL}</link><link name="b">{INERTIAL}</link>
      <link name="c">{INERTIAL}</link><link name="d">{INERTIAL}</link>
      <link name="e">{INERTIAL}</link>
      <joint name="cont" type="continuous"><parent link="base"/><child link="a"/><axis xyz="0 2 0"/></joint>
      <joint name="slide" type="prismatic"><parent link="a"/><child link="b"/><axis xyz="1 0 0"/>
        <limit lower="-0.25" upper="0.5" effort="10" velocity="1"/></joint>
      <joint name="plane" type="planar"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/></joint>
      <joint name="float" type="floating"><parent link="c"/><child link="d"/></joint>
      <joint name="rev" type="revolute"><parent link="d"/><child link="e"/><limit lower="-0.5" upper="0.5"/></joint>
    </robot>""")
    m = gear.load_urdf(p)
    kinds = [type(j) for j in m.joints]
    assert kinds == [Revolute, Prismatic, Planar, Free, Revolute]
    assert np.allclose(m.joints[0].axis, [0, 1, 0])             # normalised
    assert np.all(np.isinf(m.joints[0].lower))                  # continuous: no limits
    assert (m.joints[1].lower[0], m.joints[1].upper[0]) == (-0.25, 0.5)
    assert np.allclose(m.joints[2].normal, [0, 0, 1])
    assert np.allclose(m.joints[4].axis, [1, 0, 0])             # URDF default axis
    assert (m.nq, m.nv) == (1 + 1 + 3 + 7 + 1, 1 + 1 + 3 + 6 + 1)
    for _ in range(20):
        q = m.random_configuration()
        assert -0.25 <= q[m.idx_q("slide")][0] <= 0.5


def test_urdf_world_root_and_massless_merge(tmp_path):
    p = _write(tmp_path, "world.urdf", f"""<robot name="t">
      <link name="world"/>
      <link name="base">{INERTIAL}</link>
      <link name="sensor"/>
      <link name="arm">{INERTIAL}</link>
      <joint name="weld" type="fixed"><parent link="world"/><child link="base"/>
        <origin xyz="0 0 1" rpy="0 0 1.5707963267948966"/></joint>
      <joint name="sensor_mount" type="fixed"><parent link="base"/><child link="sensor"/>
        <origin xyz="0.3 0 0"/></joint>
      <joint name="j" type="revolute"><parent link="sensor"/><child link="arm"/>
        <origin xyz="0 0 0.2"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
    </robot>""")
    m = gear.load_urdf(p)
    # base welded to the world (its inertia is irrelevant), sensor merged as a frame
    assert m.body_names == ["arm"] and m.joint_names == ["j"]
    assert m.frames["base"][0] == -1 and m.frames["sensor"][0] == -1
    expected = SE3.from_rpy([0, 0, np.pi / 2], [0, 0, 1]) * SE3(p=[0.3, 0, 0.2])
    assert m.placements[0].isclose(expected)
    m2 = gear.load_urdf(p, merge_fixed=False)
    assert m2.body_names == ["base", "sensor", "arm"]
    assert m2.inertias[1] is None
    with pytest.raises(ModelFileError, match="floating_base"):
        gear.load_urdf(p, floating_base=True)


def test_urdf_massless_link_merged_into_massive(tmp_path):
    p = _write(tmp_path, "m.urdf", f"""<robot name="t">
      <link name="base">{INERTIAL}</link><link name="a">{INERTIAL}</link><link name="tip"/>
      <joint name="j" type="revolute"><parent link="base"/><child link="a"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="f" type="fixed"><parent link="a"/><child link="tip"/><origin xyz="1 0 0"/></joint>
    </robot>""")
    m = gear.load_urdf(p)
    assert m.nbodies == 1 and m.inertias[0].mass == 1.0
    assert np.allclose(m.inertias[0].com, [0.1, 0, 0])
    assert m.frames["tip"][0] == 0 and m.frames["base"][0] == -1


def test_urdf_inertial_rotation(tmp_path):
    p = _write(tmp_path, "r.urdf", """<robot name="t"><link name="base"><inertial>
      <origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.1"/><mass value="2"/>
      <inertia ixx="0.1" ixy="0.01" ixz="0" iyy="0.2" iyz="0.02" izz="0.25"/></inertial></link></robot>""")
    m = gear.load_urdf(p, floating_base=True)      # fixed: welded, not a body
    assert gear.load_urdf(p).nbodies == 0
    I = m.inertias[0]
    R = SE3.from_rpy([0.3, -0.2, 0.1]).R
    Ic = np.array([[0.1, 0.01, 0], [0.01, 0.2, 0.02], [0, 0.02, 0.25]])
    assert I.mass == 2.0 and np.allclose(I.com, [0.1, 0.2, 0.3])
    assert np.allclose(I.I_com, R @ Ic @ R.T, atol=1e-15)


def test_urdf_reserved_root_joint_name(tmp_path):
    p = _write(tmp_path, "root.urdf", f"""<robot name="t">
      <link name="base">{INERTIAL}</link><link name="a">{INERTIAL}</link>
      <joint name="root" type="continuous"><parent link="base"/><child link="a"/></joint></robot>""")
    with pytest.raises(ModelFileError, match="'root'"):
        gear.load_urdf(p)


def test_urdf_xacro_rejected(tmp_path):
    p = _write(tmp_path, "x.urdf", """<robot name="t" xmlns:xacro="http://www.ros.org/wiki/xacro">
      <xacro:property name="l" value="1"/><link name="base"/></robot>""")
    with pytest.raises(ModelFileError, match="xacro"):
        gear.load_urdf(p)


_PROLOG_URDF = f"""<?xml version="1.0" encoding="utf-8"?>
<robot name="t"><link name="base">{INERTIAL}</link><link name="a">{INERTIAL}</link>
  <joint name="j" type="revolute"><parent link="base"/><child link="a"/>
    <limit lower="-0.5" upper="0.5" effort="1" velocity="1"/></joint></robot>
"""
_PROLOG_MJCF = f"""<?xml version="1.0"?>
<mujoco model="t"><worldbody><body name="b"><joint name="j"/>{'<inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>'}
</body></worldbody></mujoco>
"""


@pytest.mark.parametrize("prefix", [b"\n", b"  \n\t", b"\r\n\r\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf\n  ",
                                    b"\n\xef\xbb\xbf"],
                         ids=["newline", "spaces-tab", "crlf", "bom", "bom-newline", "newline-bom"])
@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_whitespace_or_bom_before_the_xml_declaration_loads(tmp_path, prefix, kind):
    # the reference loaders (urdfdom/Pinocchio, MuJoCo) accept these files;
    # expat alone says "XML or text declaration not at start of entity"
    text = _PROLOG_URDF if kind == "urdf" else _PROLOG_MJCF
    p = tmp_path / f"m.{'urdf' if kind == 'urdf' else 'xml'}"
    p.write_bytes(prefix + text.encode())
    m = _load(p)
    assert m.joint_names == ["j"]
    if kind == "urdf":
        assert (m.joints[0].lower[0], m.joints[0].upper[0]) == (-0.5, 0.5)


def test_utf16_urdf_with_leading_whitespace_loads(tmp_path):
    p = tmp_path / "u16.urdf"
    p.write_bytes(("\n  " + _PROLOG_URDF.replace("utf-8", "utf-16")).encode("utf-16"))
    assert gear.load_urdf(p).joint_names == ["j"]


def test_text_before_the_declaration_still_raises(tmp_path):
    p = tmp_path / "t.urdf"
    p.write_bytes(b"junk\n" + _PROLOG_URDF.encode())
    with pytest.raises(ModelFileError, match="not a well-formed XML document"):
        gear.load_urdf(p)


def test_reversed_urdf_limits_load_without_limits_and_name_the_joint(tmp_path):
    p = _write(tmp_path, "rev.urdf", _PROLOG_URDF.replace('lower="-0.5" upper="0.5"', 'lower="0.5" upper="-0.5"'))
    with pytest.warns(gear.ModelFileWarning, match=r"rev\.urdf: joint 'j' <limit>: lower limit 0.5 is above "
                                                 r"upper limit -0.5; loaded without position limits "
                                                 r"\(strict=True makes this an error\)") as rec:
        m = gear.load_urdf(p)
    assert rec[0].filename == __file__            # attributed to the caller
    assert np.all(np.isinf(m.joints[0].lower)) and np.all(np.isinf(m.joints[0].upper))
    q = m.random_configuration(0, n=100)          # the default range of an unlimited angle
    assert np.all(np.abs(q) <= np.pi) and q.max() > 1.0
    with pytest.raises(ModelFileError, match=r"joint 'j' <limit>: lower limit 0.5 is above upper limit -0.5"):
        gear.load_urdf(p, strict=True)
    # equal limits are a valid (frozen) range
    p = _write(tmp_path, "eq.urdf", _PROLOG_URDF.replace('lower="-0.5" upper="0.5"', 'lower="0.5" upper="0.5"'))
    m = gear.load_urdf(p, strict=True)
    assert (m.joints[0].lower[0], m.joints[0].upper[0]) == (0.5, 0.5)


def test_reversed_mjcf_range_follows_mujoco(tmp_path):
    # MuJoCo refuses a limited joint whose range[0] >= range[1] ("range[0]
    # should be smaller than range[1]") and ignores the range of an unlimited
    # one: gear does the same
    body = '<body name="b"><joint name="j" range="0.5 -0.5" limited="{}"/>' \
           '<inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/></body>'
    with pytest.raises(ModelFileError, match="joint 'j'.*range"):
        gear.load_mjcf(_mj(tmp_path, body.format("true"), name="t.xml"))
    m = gear.load_mjcf(_mj(tmp_path, body.format("false"), name="f.xml"))
    assert np.all(np.isinf(m.joints[0].lower))


# ---------------------------------------------------------------------------
# bundled MJCF models
# ---------------------------------------------------------------------------

def _closure_frames(model, spec, q):
    P = gear.forward_kinematics(model, q)

    def world(body, T):
        H = np.eye(4) if body == "world" else P[model.body_index(body)]
        return H @ T.homogeneous()

    return world(spec.body_a, spec.placement_a), world(spec.body_b, spec.placement_b)


def test_fourbar_mjcf():
    m = gear.load_mjcf(gear.data_path("fourbar.xml"))
    assert (m.nq, m.nv, m.nbodies) == (3, 3, 3)
    assert m.body_names == ["crank", "coupler", "rocker"]
    assert m.joint_names == ["crank_joint", "coupler_joint", "rocker_joint"]
    assert all(isinstance(j, Revolute) and np.allclose(j.axis, [0, 1, 0]) for j in m.joints)
    assert np.allclose(m.gravity, [0, 0, -9.81])
    assert len(m.loop_closures) == 1
    lc = m.loop_closures[0]
    assert isinstance(lc, gear.LoopClosureSpec)
    assert (lc.kind, lc.body_a, lc.body_b, lc.name) == ("ball", "rocker", "world", "loop")
    assert np.allclose(lc.placement_a.p, [0.4, 0, 0])
    # the ground pivot: the rocker tip at qpos0
    assert np.allclose(lc.placement_b.p, [0.58296291, 0, -0.0973854], atol=1e-7)
    Ha, Hb = _closure_frames(m, lc, m.qpos0)
    assert np.allclose(Ha, Hb, atol=1e-14)
    Ha, Hb = _closure_frames(m, lc, [0.3, 0.0, 0.0])
    assert not np.allclose(Ha[:3, 3], Hb[:3, 3])
    assert m.total_mass() == pytest.approx(0.108 + 0.27 + 0.216)


def test_arm7_mjcf():
    m = gear.load_mjcf(gear.data_path("arm7.xml"))
    assert (m.nq, m.nv) == (19, 17)
    assert m.body_names == ["carriage", "link1", "link2", "link3", "link4", "link5",
                            "wrist__joint6", "wrist", "pendulum", "payload"]
    assert m.joint_names == ["rail", "joint1", "joint2", "joint3", "joint4", "joint5",
                             "joint6", "joint7", "pendulum_ball", "payload_free"]
    kinds = [type(j) for j in m.joints]
    assert kinds == [Prismatic] + [Revolute] * 7 + [Spherical, Free]
    assert m.inertias[m.body_index("wrist__joint6")] is None
    # wrist: the gear frame sits at joint7's anchor; the MJCF frame is recorded
    b, T = m.frames["wrist"]
    assert b == m.body_index("wrist") and T.isclose(SE3(p=[0, 0, -0.05]))
    # flange welded to the wrist: mass lumped; rail_mount welded to the world
    assert m.body_names[m.frames["flange"][0]] == "wrist"
    assert m.inertias[m.body_index("wrist")].mass == pytest.approx(1.666 + 0.73)
    assert m.frames["rail_mount"][0] == -1
    # class defaults: the wrist class gives joint6/joint7 their range
    for jn in ("joint6", "joint7"):
        j = m.joints[m.joint_index(jn)]
        assert (j.lower[0], j.upper[0]) == (-2.8973, 2.8973)
    assert np.all(np.isinf(m.joints[m.joint_index("pendulum_ball")].lower))
    # qpos0: the free body at its XML pose, everything else neutral
    s = m.idx_q("payload_free")
    assert np.allclose(m.qpos0[s][:3], [0.6, 0.2, 0.5])
    assert np.isclose(np.linalg.norm(m.qpos0[s][3:]), 1.0)
    P = gear.forward_kinematics(m, m.qpos0)
    H = P[m.body_index("payload")]
    assert np.allclose(H[:3, :3], _euler_xyz([0.1, 0.2, 0.3]), atol=1e-14)
    assert m.loop_closures == []


def _rx(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _ry(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _euler_xyz(a):
    """MJCF default eulerseq 'xyz' (intrinsic): R = Rx Ry Rz."""
    return _rx(a[0]) @ _ry(a[1]) @ _rz(a[2])


def _mujoco_M(mujoco, mm, md):
    """MuJoCo's dense joint-space mass matrix after ``mj_forward``."""
    M = np.zeros((mm.nv, mm.nv))
    try:
        mujoco.mj_fullM(mm, md, M)          # MuJoCo 4
    except TypeError:
        mujoco.mj_fullM(mm, M, md.qM)       # MuJoCo 3
    return M


# ---------------------------------------------------------------------------
# MJCF features
# ---------------------------------------------------------------------------

BODY_INERTIAL = '<inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>'


def _mj(tmp_path, body, extra="", compiler="", name="m.xml"):
    return _write(tmp_path, name, f"""<mujoco model="t">{compiler}
      <worldbody>{body}</worldbody>{extra}</mujoco>""")


@pytest.mark.parametrize("attrs, compiler, R", [
    ('euler="30 0 0"', "", _rx(np.pi / 6)),
    ('euler="0.5 0.2 -0.3"', '<compiler angle="radian"/>', _euler_xyz([0.5, 0.2, -0.3])),
    ('euler="10 20 30"', '<compiler eulerseq="XYZ"/>',
     _rz(np.radians(30)) @ _ry(np.radians(20)) @ _rx(np.radians(10))),
    ('euler="10 20 30"', '<compiler eulerseq="zyx"/>',
     _rz(np.radians(10)) @ _ry(np.radians(20)) @ _rx(np.radians(30))),
    ('axisangle="0 0 2 90"', "", _rz(np.pi / 2)),
    ('quat="0 0 0 3"', "", _rz(np.pi)),
    ('xyaxes="0 1 0 -1 0 0"', "", _rz(np.pi / 2)),
    ('zaxis="1 0 0"', "", _ry(np.pi / 2)),
    ('zaxis="0 0 -1"', "", _rx(np.pi)),
])
def test_mjcf_orientations(tmp_path, attrs, compiler, R):
    p = _mj(tmp_path, f'<body name="b" pos="1 2 3" {attrs}><joint name="j"/>{BODY_INERTIAL}</body>',
            compiler=compiler)
    m = gear.load_mjcf(p)
    assert np.allclose(m.placements[0].R, R, atol=1e-12)
    assert np.allclose(m.placements[0].p, [1, 2, 3])


def test_mjcf_defaults_and_limits(tmp_path):
    p = _write(tmp_path, "d.xml", f"""<mujoco>
      <compiler angle="degree"/>
      <option gravity="0 0 -1"/>
      <default>
        <joint axis="1 0 0" range="-90 90"/>
        <default class="slider"><joint type="slide" axis="0 1 0" range="-0.5 0.5"/></default>
        <default class="free_hinge"><joint limited="false"/></default>
      </default>
      <worldbody>
        <body name="a"><joint name="ja"/>{BODY_INERTIAL}
          <body name="b" childclass="slider"><joint name="jb"/>{BODY_INERTIAL}
            <body name="c"><joint name="jc" class="free_hinge" type="hinge"/>{BODY_INERTIAL}</body>
          </body>
        </body>
      </worldbody></mujoco>""")
    m = gear.load_mjcf(p)
    ja, jb, jc = m.joints
    assert isinstance(ja, Revolute) and np.allclose(ja.axis, [1, 0, 0])
    assert np.allclose([ja.lower[0], ja.upper[0]], [-np.pi / 2, np.pi / 2])
    assert isinstance(jb, Prismatic) and np.allclose(jb.axis, [0, 1, 0])
    assert (jb.lower[0], jb.upper[0]) == (-0.5, 0.5)
    assert isinstance(jc, Revolute) and np.all(np.isinf(jc.lower))
    assert np.allclose(m.gravity, [0, 0, -1])


def test_mjcf_multi_joint_body(tmp_path):
    p = _mj(tmp_path, """<body name="b" pos="0 0 1">
        <joint name="h1" type="hinge" axis="0 0 1" pos="0.1 0 0"/>
        <joint name="s" type="slide" axis="1 0 0"/>
        <joint name="h2" type="hinge" axis="0 1 0" pos="0 0 0.2"/>
        <inertial pos="0.3 0 0" mass="2" diaginertia="0.1 0.2 0.25"/>
        <body name="c" pos="1 0 0"><joint name="hc"/><inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/></body>
      </body>""")
    m = gear.load_mjcf(p)
    assert m.body_names == ["b__h1", "b__s", "b", "c"]
    assert m.joint_names == ["h1", "s", "h2", "hc"]
    assert m.placements[0].isclose(SE3(p=[0.1, 0, 1]))
    assert m.placements[1].isclose(SE3(p=[-0.1, 0, 0]))
    assert m.placements[2].isclose(SE3(p=[0, 0, 0.2]))
    assert m.placements[3].isclose(SE3(p=[1, 0, -0.2]))
    assert m.inertias[0] is None and m.inertias[1] is None
    assert np.allclose(m.inertias[2].com, [0.3, 0, -0.2])
    b, T = m.frames["b"]
    assert b == 2 and T.isclose(SE3(p=[0, 0, -0.2]))
    # MJCF semantics: T_body = T0 Trans(p1) J1 Trans(-p1) J2 Trans(p3) J3 Trans(-p3)
    q = np.array([0.4, 0.3, -0.7, 0.2])
    P = gear.forward_kinematics(m, q)
    H = np.eye(4)
    H[:3, 3] = [0, 0, 1]

    def tr(p):
        out = np.eye(4)
        out[:3, 3] = p
        return out

    def rot(R):
        out = np.eye(4)
        out[:3, :3] = R
        return out

    H = H @ tr([0.1, 0, 0]) @ rot(_rz(0.4)) @ tr([-0.1, 0, 0]) @ tr([0.3, 0, 0]) \
        @ tr([0, 0, 0.2]) @ rot(_ry(-0.7)) @ tr([0, 0, -0.2])
    assert np.allclose(P[2] @ T.homogeneous(), H, atol=1e-14)


def test_mjcf_weld_and_site_equalities(tmp_path):
    p = _mj(tmp_path, f"""
      <body name="a" pos="0 0 1"><joint name="ja" type="ball"/>{BODY_INERTIAL}
        <site name="sa" pos="0.1 0 0" euler="0 0 90"/>
        <body name="b" pos="0.3 0.1 0" euler="10 20 30"><joint name="jb" axis="0 1 0"/>{BODY_INERTIAL}</body>
      </body>
      <body name="c" pos="1 0 0"><freejoint name="fc"/>{BODY_INERTIAL}<site name="sc" pos="0 0.2 0"/></body>
      <body name="fixed" pos="2 0 0">{BODY_INERTIAL}</body>""",
            extra="""<equality>
        <weld name="w_rel" body1="b" body2="c" anchor="0.1 0.2 0.3" relpose="0.5 0.2 0.1 1 0 0 0" torquescale="2"/>
        <weld name="w_q0" body1="b" body2="c" anchor="0.1 0.2 0.3"/>
        <connect name="c_site" site1="sa" site2="sc"/>
        <weld name="w_site" site1="sa" site2="sc"/>
        <connect name="c_fixed" body1="c" body2="fixed" anchor="0 0 0"/>
        <connect name="off" body1="c" anchor="0 0 0" active="false"/>
      </equality>""")
    m = gear.load_mjcf(p)
    lcs = {lc.name: lc for lc in m.loop_closures}
    assert set(lcs) == {"w_rel", "w_q0", "c_site", "w_site", "c_fixed"}
    assert lcs["w_rel"].kind == "weld" and lcs["c_site"].kind == "ball"
    assert lcs["w_rel"].params == {"torquescale": 2.0}
    assert lcs["w_rel"].placement_a.isclose(SE3(p=[0.5, 0.2, 0.1]))
    assert lcs["w_rel"].placement_b.isclose(SE3(p=[0.1, 0.2, 0.3]))
    assert lcs["c_fixed"].body_b == "world"      # 'fixed' is welded to the world
    assert np.allclose(lcs["c_fixed"].placement_b.p, [1, 0, 0])   # c's origin at qpos0
    # frames of body-defined closures coincide at the reference configuration
    for name in ("w_q0", "c_fixed"):
        Ha, Hb = _closure_frames(m, lcs[name], m.qpos0)
        assert np.allclose(Ha, Hb, atol=1e-14), name


def test_mjcf_without_mujoco_needs_inertial(tmp_path, monkeypatch):
    p = _mj(tmp_path, '<body name="geom_only"><joint name="j"/><geom type="sphere" size="0.1"/></body>')
    monkeypatch.setattr(mjcf_module, "_import_mujoco", lambda: None)
    with pytest.raises(ModelFileError, match="geom_only.*<inertial>"):
        gear.load_mjcf(p)
    # a body without geoms and without <inertial> is simply massless
    p2 = _mj(tmp_path, f'<body name="a"><joint name="j"/><body name="hub"/>{BODY_INERTIAL}</body>', name="m2.xml")
    m = gear.load_mjcf(p2)
    assert m.nbodies == 1 and m.frames["hub"][0] == 0


def test_mjcf_inertia_from_geoms_with_mujoco(tmp_path):
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo's compiler derives inertias from geoms")
    p = _mj(tmp_path, '<body name="g" pos="0 0 1"><joint name="j"/>'
                      '<geom type="box" size="0.1 0.2 0.3" pos="0.1 0 0" density="1000"/></body>')
    m = gear.load_mjcf(p)
    mm = mujoco.MjModel.from_xml_path(str(p))
    assert m.inertias[0].mass == pytest.approx(mm.body_mass[1], rel=1e-12)
    assert m.inertias[0].mass == pytest.approx(1000 * 0.2 * 0.4 * 0.6, rel=1e-12)
    assert np.allclose(m.inertias[0].com, [0.1, 0, 0])
    ev = np.sort(np.linalg.eigvalsh(m.inertias[0].I_com))
    mass = 48.0
    box = np.sort(mass / 12 * np.array([0.4**2 + 0.6**2, 0.2**2 + 0.6**2, 0.2**2 + 0.4**2]))
    assert np.allclose(ev, box, rtol=1e-10)


def test_mjcf_inertia_from_geoms_without_the_visual_assets(tmp_path):
    """MuJoCo compiles the whole file to derive a geom inertia; a texture
    or an unrelated mesh that is missing (a robot file copied without its
    assets; Menagerie's panda meshes under mjx_single_cube's box) no
    longer stops the load: gear compiles it again without them.  A body
    whose own mesh is missing still raises, naming the file."""
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo's compiler derives inertias from geoms")
    if not hasattr(mujoco, "MjSpec"):
        pytest.skip("MuJoCo without MjSpec (< 3.2) compiles the file as it is")
    assets = """<asset><texture name="t" type="2d" file="missing.png"/><material name="skin" texture="t"/>
      <mesh name="shell" file="missing_shell.stl"/><mesh name="grip" file="missing_grip.stl"/></asset>"""
    body = f"""<body name="arm" pos="0 0 1"><joint name="j0"/>{BODY_INERTIAL}
        <geom name="shell" type="mesh" mesh="shell" material="skin"/>
        <body name="cube" pos="0.3 0 0"><joint name="j1" axis="0 1 0"/>
          <geom name="box" type="box" size="0.05 0.1 0.2" pos="0.02 0 0" material="skin"/></body></body>"""
    p = _mj(tmp_path, body, extra=assets + '<contact><pair geom1="shell" geom2="box"/></contact>')
    m = gear.load_mjcf(p)
    # MuJoCo's own answer for the cube, with the missing files left out by hand
    ref = _mj(tmp_path, body.replace('<geom name="shell" type="mesh" mesh="shell" material="skin"/>', "")
              .replace(' material="skin"', ""), name="ref.xml")
    mm = mujoco.MjModel.from_xml_path(str(ref))
    k = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY, "cube")
    cube = m.inertias[m.body_index("cube")]
    assert cube.mass == pytest.approx(mm.body_mass[k], rel=1e-15)
    assert np.allclose(cube.com, mm.body_ipos[k], rtol=0, atol=1e-15)
    # the body that needs its inertia from its own missing mesh
    p = _mj(tmp_path, body.replace('<geom name="box" type="box" size="0.05 0.1 0.2" pos="0.02 0 0" material="skin"/>',
                                   '<geom type="mesh" mesh="grip"/>'), extra=assets, name="own.xml")
    with pytest.raises(ModelFileError, match="missing_grip.stl"):
        gear.load_mjcf(p)


def test_mjcf_unknown_elements(tmp_path):
    p = _mj(tmp_path, f'<body name="a"><joint name="j"/>{BODY_INERTIAL}<joint_typo/></body>')
    with pytest.raises(ModelFileError, match="joint_typo"):
        gear.load_mjcf(p)
    p = _write(tmp_path, "top.xml", "<mujoco><worldbody/><wrldbody/></mujoco>")
    with pytest.raises(ModelFileError, match="wrldbody"):
        gear.load_mjcf(p)


def test_docs_models_doctest(monkeypatch):
    import doctest

    root = pathlib.Path(__file__).parent.parent
    monkeypatch.chdir(root)       # the docs use repository-relative paths
    res = doctest.testfile(str(root / "docs" / "models.md"), module_relative=False,
                           optionflags=doctest.ELLIPSIS)
    assert res.failed == 0 and res.attempted > 10


def test_mjcf_site_defaults_place_the_sites(tmp_path):
    """A site takes the position and orientation of its default class (its
    ``class``, else its body's ``childclass``), as MuJoCo applies them.
    They were dropped, and a ``connect`` between such sites opened by the
    default's offset without a word (example-robot-data's style; found
    against MuJoCo's ``efc_pos``)."""
    p = _mj(tmp_path, f"""
      <body name="a"><joint name="ja" axis="0 1 0"/>{BODY_INERTIAL}<site name="sa" class="s"/></body>
      <body name="b" childclass="c"><joint name="jb" axis="0 1 0"/>{BODY_INERTIAL}<site name="sb"/>
        <site name="sb2" euler="0 0 90"/></body>
      <site name="sw" pos="0.3 0 0"/><site name="sw2" pos="0 0 0.4"/><site name="sw3" pos="0 0 0.4" euler="0 0 90"/>""",
            extra="""<default><default class="s"><site pos="0.3 0 0" quat="1 0 1 0"/></default>
        <default class="c"><site pos="0 0 0.4" quat="0 1 0 0"/></default></default>
      <equality><connect name="ca" site1="sa" site2="sw"/><connect name="cb" site1="sb" site2="sw2"/>
        <weld name="wb" site1="sb2" site2="sw3"/></equality>""")
    m = gear.load_mjcf(p)
    sysm = gear.ConstrainedModel(m)
    assert np.abs(sysm.constraint_residual(m.qpos0)).max() < 1e-14
    lcs = {lc.name: lc for lc in m.loop_closures}
    assert np.allclose(lcs["ca"].placement_a.p, [0.3, 0, 0])
    # an own orientation replaces the default's; the position stays the default's
    assert np.allclose(lcs["wb"].placement_a.p, [0, 0, 0.4])
    assert np.allclose(lcs["wb"].placement_a.R, _rz(np.pi / 2), atol=1e-15)
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo's own residual as the oracle")
    mm = mujoco.MjModel.from_xml_path(str(p))
    md = mujoco.MjData(mm)
    rng = np.random.default_rng(0)
    md.qpos[:] = rng.uniform(-1, 1, 2)
    mujoco.mj_forward(mm, md)
    g = sysm.constraint_residual(md.qpos.copy())
    assert np.allclose(g[:6], -md.efc_pos[:6], atol=1e-12)      # (gear: site2 - site1)


def test_mjcf_joint_equalities_are_joint_couplers(tmp_path):
    """``<equality><joint joint1 joint2 polycoef="a0 a1 0 0 0">`` (the finger
    couplings of menagerie's panda, aloha, robotiq 2F-85) loads as
    ``q[joint1] = a1 q[joint2] + a0``; an inactive one is left out, and
    one without joint2 or with a nonlinear polycoef is refused."""
    body = f"""<body name="a"><joint name="j1" type="slide" axis="1 0 0"/>{BODY_INERTIAL}
        <body name="b"><joint name="j2" type="slide" axis="1 0 0"/>{BODY_INERTIAL}
          <body name="c"><joint name="j3"/>{BODY_INERTIAL}</body></body></body>"""
    p = _mj(tmp_path, body, extra="""<equality><joint name="fingers" joint1="j2" joint2="j1" polycoef="0.01 -1 0 0 0"/>
        <joint joint1="j3" joint2="j1"/><joint joint1="j3" joint2="j2" active="false"/></equality>""")
    m = gear.load_mjcf(p)
    cs = m.loop_closures
    assert [type(c).__name__ for c in cs] == ["JointCoupler", "JointCoupler"]
    assert (cs[0].joint, cs[0].source, cs[0].multiplier, cs[0].offset, cs[0].name) == \
        ("j2", "j1", -1.0, 0.01, "fingers")
    assert (cs[1].joint, cs[1].source, cs[1].multiplier, cs[1].offset) == ("j3", "j1", 1.0, 0.0)
    sysm = gear.ConstrainedModel(m)
    q = np.array([0.2, -0.3, 0.5])
    assert np.allclose(sysm.constraint_residual(q), [-0.3 - (-0.2 + 0.01), 0.5 - 0.2])
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo's own residual as the oracle")
    mm = mujoco.MjModel.from_xml_path(str(p))
    md = mujoco.MjData(mm)
    md.qpos[:] = q
    mujoco.mj_forward(mm, md)
    assert np.allclose(sysm.constraint_residual(q), md.efc_pos[:2], atol=1e-14)
    # with the joints' refs (their qpos0), MuJoCo's y - y0 = a0 + a1 (x - x0)
    p = _mj(tmp_path, body.replace('name="j1"', 'name="j1" ref="0.05"').replace('name="j2"', 'name="j2" ref="-0.02"')
            .replace('name="j3"', 'name="j3" ref="30"'), extra="""<equality>
        <joint name="fingers" joint1="j2" joint2="j1" polycoef="0.01 -1 0 0 0"/>
        <joint joint1="j3" joint2="j2" polycoef="0 2 0 0 0"/></equality>""", name="refs.xml")
    m = gear.load_mjcf(p)
    sysm = gear.ConstrainedModel(m)
    mm = mujoco.MjModel.from_xml_path(str(p))
    md = mujoco.MjData(mm)
    md.qpos[:] = q
    mujoco.mj_forward(mm, md)
    assert np.allclose(sysm.constraint_residual(q), md.efc_pos[:2], atol=1e-14)
    assert np.allclose(sysm.constraint_residual(m.qpos0), [-0.01, 0.0], rtol=0, atol=1e-15)   # -a0, 0
    for eq, needle in (('<joint name="e" joint1="j2"/>', "without joint2"),
                       ('<joint name="e" joint1="j2" joint2="nope"/>', "'nope' is not defined")):
        p = _mj(tmp_path, body, extra=f"<equality>{eq}</equality>", name="bad.xml")
        with pytest.raises(ModelFileError, match=needle):
            gear.load_mjcf(p)


def test_mjcf_nonlinear_joint_equality_as_mujoco(tmp_path):
    """A joint equality with a nonlinear ``polycoef`` (the coupled knees
    of Menagerie's ms_human_700) loads as a ``gear.CustomConstraint``:
    residual, row and bias equal MuJoCo's ``efc_pos``, ``efc_J`` and the
    rows' second derivative, behind a free joint (q and dq indexed apart),
    with the joints' refs; the constrained system pickles and assembles."""
    import pickle

    mujoco = pytest.importorskip("mujoco", reason="MuJoCo's own constraint rows as the oracle")
    p = _mj(tmp_path, f"""<body name="base" pos="0 0 1"><freejoint/>{BODY_INERTIAL}
        <body name="a"><joint name="x" axis="0 1 0" ref="10"/>{BODY_INERTIAL}
          <body name="b" pos="0.3 0 0"><joint name="y" type="slide" axis="1 0 0" ref="0.02"/>{BODY_INERTIAL}</body></body></body>""",
            extra='<equality><joint name="knee" joint1="y" joint2="x" polycoef="0.01 0.2 -0.3 0.05 0.4"/></equality>')
    m = gear.load_mjcf(p)
    (c,) = m.loop_closures
    assert isinstance(c, gear.CustomConstraint) and c.name == "knee" and c.holonomic
    sysm = gear.ConstrainedModel(m)
    mm = mujoco.MjModel.from_xml_path(str(p))
    mm.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    md = mujoco.MjData(mm)
    rng = np.random.default_rng(6)
    for _ in range(3):
        q = m.qpos0.copy()
        q[:3] += rng.standard_normal(3)
        q[7:] += rng.uniform(-0.5, 0.5, 2)
        md.qpos[:] = q
        mujoco.mj_forward(mm, md)
        assert np.allclose(sysm.constraint_residual(q), md.efc_pos[:1], rtol=0, atol=1e-15)
        A, _ = sysm.solver.rows(q, np.zeros(m.nv))
        assert np.allclose(A, md.efc_J[:m.nv].reshape(1, -1), rtol=0, atol=1e-15)
        # the bias against a second difference of the residual along dq
        dq = rng.standard_normal(m.nv)
        h = 1e-4
        g2 = (sysm.constraint_residual(m.integrate(q, h * dq)) - 2 * sysm.constraint_residual(q)
              + sysm.constraint_residual(m.integrate(q, -h * dq))) / h ** 2
        assert np.allclose(c.bias(q, dq), g2, rtol=0, atol=1e-6)
    q = sysm.assemble(m.qpos0 + np.r_[np.zeros(7), 0.3, 0.0])
    assert abs(sysm.constraint_residual(q)).max() < 1e-10
    again = pickle.loads(pickle.dumps(sysm))
    assert np.array_equal(again.constraint_residual(q), sysm.constraint_residual(q))


def test_mjcf_a_body_welded_to_the_world_needs_no_inertia(tmp_path):
    """A base welded to the world moves nothing: its inertia is never
    derived from its geoms, so a mesh the user does not have (menagerie's
    so_arm100 base) no longer stops the load."""
    p = _mj(tmp_path, f"""<body name="base"><geom type="mesh" mesh="m"/><body name="plate"><geom type="box" size="1 1 1"/>
        <body name="l"><joint name="j"/>{BODY_INERTIAL}</body></body></body>""",
            extra='<asset><mesh name="m" file="missing.stl"/></asset>')
    m = gear.load_mjcf(p)
    assert m.nbodies == 1 and m.body_names == ["l"] and m.inertias[0].mass == 1.0


def test_mjcf_include(tmp_path):
    """``<include file>`` splices the included ``<mujoco>``'s children in
    place (nested includes too, paths relative to the including file), the
    same model as the file written out whole; a cycle and a missing file
    are refused with the file named."""
    (tmp_path / "parts").mkdir()
    _write(tmp_path, "parts/arm.xml", f"""<mujoco><body name="b"><joint name="jb" axis="0 1 0"/>{BODY_INERTIAL}</body>
      <include file="tip.xml"/></mujoco>""")
    _write(tmp_path, "parts/tip.xml", f'<mujoco><site name="s" pos="0 0 0.5"/></mujoco>')
    _write(tmp_path, "act.xml", '<mujoco><actuator><motor joint="ja"/></actuator></mujoco>')
    inc = _write(tmp_path, "main.xml", f"""<mujoco><worldbody>
      <body name="a" pos="0 0 1"><joint name="ja"/>{BODY_INERTIAL}<include file="parts/arm.xml"/></body>
      </worldbody><include file="act.xml"/></mujoco>""")
    whole = _mj(tmp_path, f"""<body name="a" pos="0 0 1"><joint name="ja"/>{BODY_INERTIAL}
      <body name="b"><joint name="jb" axis="0 1 0"/>{BODY_INERTIAL}</body><site name="s" pos="0 0 0.5"/></body>""",
                name="whole.xml")
    a, b = gear.load_mjcf(inc), gear.load_mjcf(whole)
    assert a.body_names == b.body_names and a.nq == b.nq == 2
    q = np.array([0.3, -0.4])
    assert np.allclose(gear.mass_matrix(a, q), gear.mass_matrix(b, q), rtol=0, atol=1e-15)
    _write(tmp_path, "loop.xml", '<mujoco><include file="loop.xml"/></mujoco>')
    with pytest.raises(ModelFileError, match="includes itself"):
        gear.load_mjcf(tmp_path / "loop.xml")
    _write(tmp_path, "frag.xml", '<robot/>')
    p = _write(tmp_path, "badinc.xml", '<mujoco><include file="frag.xml"/></mujoco>')
    with pytest.raises(ModelFileError, match="expected <mujoco>"):
        gear.load_mjcf(p)


def test_mjcf_joint_ref_is_the_xml_pose(tmp_path):
    """A hinge or slide ``ref`` (MuJoCo Menagerie's cassie: knees at -45
    degrees, tarsi at 58) is the joint position at which the XML pose
    holds: ``model.qpos0`` holds it, and at any ``qpos`` the bodies and the
    mass matrix are MuJoCo's (a ``connect`` defined at the XML pose holds at
    ``qpos0``)."""
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo is the oracle for ref")
    p = _mj(tmp_path, f"""
      <body name="a" pos="0 0 1"><joint name="h" axis="0 1 0" ref="30" pos="0.1 0 0"/>{BODY_INERTIAL}
        <geom type="box" size="0.1 0.1 0.1" contype="0" conaffinity="0"/>
        <body name="b" pos="0.4 0 0" euler="0 20 0"><joint name="s" type="slide" axis="1 0 0" ref="0.2"/>
          <joint name="h2" axis="0 0 1" ref="-45" pos="0 0.05 0"/><inertial pos="0.1 0.02 0" mass="2" diaginertia="0.1 0.2 0.3"/>
          <site name="tip" pos="0.3 0 0"/></body></body>
      <site name="w" pos="0.4 0 1.3"/>""",
            extra='<equality><connect name="c" body1="b" body2="world" anchor="0.3 0 0"/></equality>')
    m = gear.load_mjcf(p)
    mm = mujoco.MjModel.from_xml_path(str(p))
    md = mujoco.MjData(mm)
    assert np.allclose(m.qpos0, mm.qpos0, rtol=0, atol=1e-15)
    assert np.allclose(m.qpos0, [np.deg2rad(30), 0.2, np.deg2rad(-45)])
    sysm = gear.ConstrainedModel(m)
    assert np.abs(sysm.constraint_residual(m.qpos0)).max() < 1e-14
    rng = np.random.default_rng(3)
    for q in (m.qpos0, rng.uniform(-1, 1, 3)):
        md.qpos[:] = q
        mujoco.mj_forward(mm, md)
        M = _mujoco_M(mujoco, mm, md)
        assert np.allclose(gear.mass_matrix(m, q), M, rtol=0, atol=1e-13)
        P = gear.forward_kinematics(m, q)
        for name in ("a", "b"):
            idx, off = m.frames[name]
            H = P[idx] @ off.homogeneous()
            k = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY, name)
            assert np.allclose(H[:3, 3], md.xpos[k], atol=1e-14)
            assert np.allclose(H[:3, :3], md.xmat[k].reshape(3, 3), atol=1e-14)


FRAMES_XML = """<compiler angle="degree"/>
  <default><default class="c"><joint axis="1 0 0" pos="0 0 0.05"/><site pos="0 0 0.1" euler="0 90 0"/></default></default>
  <worldbody>
   <frame name="f0" pos="0.1 -0.2 0.3" euler="10 20 30">
    <body name="a" pos="0.3 0 0" euler="0 0 45"><joint name="j0" axis="0 1 0"/>
     <inertial pos="0.1 0 0" mass="1" diaginertia="0.01 0.02 0.03"/>
     <frame pos="0 0.2 0" axisangle="1 1 0 40" childclass="c">
       <joint name="j1"/>
       <site name="sa"/>
       <body name="b" pos="0.2 0 0"><joint name="j2"/>
         <frame pos="0.05 0 0" quat="0.9 0.1 0.3 -0.2">
           <inertial pos="0.1 0.02 0" mass="0.5" fullinertia="0.015 0.02 0.025 0.001 0.002 -0.001"/></frame>
         <body name="c"><frame euler="0 0 90"><joint name="j3" type="slide"/></frame>
           <inertial pos="0 0 0.1" mass="0.3" diaginertia="0.001 0.002 0.003" euler="5 6 7"/>
           <site name="sc" pos="0.2 0.1 0"/></body>
       </body>
     </frame>
    </body>
   </frame>
   <frame pos="0 0 1"><body name="d"><freejoint/><inertial pos="0 0 0" mass="1" diaginertia="1 2 3"/></body></frame>
  </worldbody>
  <equality><connect name="loop" site1="sc" site2="sa"/></equality>"""


def test_mjcf_frames_pose_their_children_as_mujoco(tmp_path):
    """``<frame>`` (nested, rotated by euler, axisangle and quat, with a
    childclass) carries the bodies, joints (pos and axis), sites,
    ``<inertial>`` (diagonal and full) and free bodies inside it as MuJoCo
    composes them: the same joint order, ``qpos0``, body poses, mass
    matrix, bias forces and ``connect`` residual between sites placed in
    frames."""
    p = _write(tmp_path, "frames.xml", f"<mujoco>{FRAMES_XML}</mujoco>")
    m = gear.load_mjcf(p)
    assert m.joint_names == ["j0", "j1", "j2", "j3", "d_free"]
    sysm = gear.ConstrainedModel(m)
    # without MuJoCo: the joint axes and the frame composition by hand
    R0 = _euler_xyz(np.deg2rad([10, 20, 30]))
    q = m.qpos0.copy()
    P = gear.forward_kinematics(m, q)
    idx, off = m.frames["a"]
    Ha = P[idx] @ off.homogeneous()
    assert np.allclose(Ha[:3, 3], R0 @ [0.3, 0, 0] + [0.1, -0.2, 0.3], atol=1e-15)
    assert np.allclose(Ha[:3, :3], R0 @ _rz(np.pi / 4), atol=1e-15)
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo's compiler is the oracle for <frame>")
    mm = mujoco.MjModel.from_xml_path(str(p))
    md = mujoco.MjData(mm)
    assert np.array_equal(m.qpos0, mm.qpos0)
    rng = np.random.default_rng(4)
    for _ in range(4):
        q = mm.qpos0.copy()
        q[:4] += rng.uniform(-1, 1, 4)
        u = rng.standard_normal(4)
        q[7:11] = u / np.linalg.norm(u)
        md.qpos[:] = q
        md.qvel[:] = 0.0
        md.qvel[:4] = rng.standard_normal(4)
        mujoco.mj_forward(mm, md)
        M = _mujoco_M(mujoco, mm, md)
        # the hinge and slide block (the free body is a tree of its own)
        assert np.allclose(gear.mass_matrix(m, q)[:4, :4], M[:4, :4], rtol=0, atol=1e-14)
        assert np.allclose(gear.bias_forces(m, q, md.qvel.copy())[:4], md.qfrc_bias[:4], rtol=0, atol=1e-13)
        P = gear.forward_kinematics(m, q)
        for name in "abcd":
            idx, off = m.frames[name]
            H = P[idx] @ off.homogeneous()
            k = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY, name)
            assert np.allclose(H[:3, 3], md.xpos[k], rtol=0, atol=1e-14)
            assert np.allclose(H[:3, :3], md.xmat[k].reshape(3, 3), rtol=0, atol=1e-14)
        assert np.allclose(sysm.constraint_residual(q), -md.efc_pos[:3], rtol=0, atol=1e-14)


def test_mjcf_fixed_base_welds_the_free_bodies(tmp_path):
    """``load_mjcf(..., fixed_base=True)`` leaves out the free joints of
    top-level bodies (a floating robot held where the file puts it, also
    inside a frame): the other joints keep their order and MuJoCo's mass
    matrix block, and ``qpos0`` loses the free joint's seven entries."""
    p = _write(tmp_path, "frames.xml", f"<mujoco>{FRAMES_XML}</mujoco>")
    free = gear.load_mjcf(p)
    held = gear.load_mjcf(p, fixed_base=True)
    assert held.joint_names == ["j0", "j1", "j2", "j3"] and (held.nq, held.nv) == (free.nq - 7, free.nv - 6)
    assert np.array_equal(held.qpos0, free.qpos0[:4])
    rng = np.random.default_rng(9)
    q = free.qpos0.copy()
    q[:4] += rng.uniform(-1, 1, 4)
    # the joints of the welded tree see the same inertia as with the base free
    assert np.allclose(gear.mass_matrix(held, q[:4]), gear.mass_matrix(free, q)[:4, :4], rtol=0, atol=1e-15)
    idx, off = held.frames["d"]
    assert idx == -1 and np.allclose(off.p, [0, 0, 1])
    assert gear.ConstrainedModel(held).constraint_residual(q[:4]).shape == (3,)


@pytest.mark.parametrize("inner, message", [
    ('<frame pos="1 0 0" size="2"><body name="a"/></frame>', "size"),
    ('<frame><actuator/></frame>', "<actuator>"),
    ('<frame childclass="nope"/>', "nope"),
    ('<replicate count="2"><body name="a"/></replicate>', "<replicate>"),
])
def test_mjcf_bad_frames_are_refused(tmp_path, inner, message):
    p = _mj(tmp_path, f'<body name="b"><joint/>{BODY_INERTIAL}{inner}</body>')
    with pytest.raises(gear.ModelFileError, match=re.escape(message)):
        gear.load_mjcf(p)


def _mujoco_M_and_bias(mujoco, path, qs, vs):
    mm = mujoco.MjModel.from_xml_path(str(path))
    md = mujoco.MjData(mm)
    out = []
    for q, v in zip(qs, vs):
        md.qpos[:] = q
        md.qvel[:] = v
        mujoco.mj_forward(mm, md)
        M = _mujoco_M(mujoco, mm, md)
        out.append((M, md.qfrc_bias.copy()))
    return out


def test_mjcf_compiler_mass_bounds_and_balance_as_mujoco(tmp_path):
    """``<compiler boundmass boundinertia balanceinertia>`` (Menagerie's
    ms_human_700 and ostrich) change the inertias as MuJoCo's compiler
    does: mass and principal moments bounded below, then moments that
    violate the triangle inequality set to their mean (after the bounds),
    on explicit, massless and absent ``<inertial>`` alike."""
    body = """<body name="a" pos="0 0 1"><joint name="ja" axis="0 1 0"/>
        <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.2 0.2"/>
        <body name="e" pos="0.3 0.2 0.1" euler="0 0 30">
          <body name="f"><joint name="jf" axis="1 0 0"/><inertial pos="0.1 0 0" mass="3" diaginertia="0.1 0.1 0.9"/>
            <body name="g" pos="0.2 0 0"><joint name="jg" axis="0 0 1"/>
              <inertial pos="0 0.1 0" mass="0.2" fullinertia="0.1 0.12 0.5 0.01 0.02 0.005"/>
              <body name="h" pos="0.1 0 0"><joint name="jh" axis="0 1 0"/><inertial pos="0.05 0 0" mass="0"/>
                <body name="k"><joint name="jk" axis="1 0 0"/><inertial pos="0 0 0" mass="2" diaginertia="0.4 0.5 0.6"/></body>
              </body></body></body></body></body>"""
    compiler = '<compiler boundmass="0.5" boundinertia="0.3" balanceinertia="true"/>'
    p = _mj(tmp_path, body, compiler=compiler)
    m = gear.load_mjcf(p)
    rng = np.random.default_rng(5)
    qs = rng.uniform(-1, 1, (3, 5))
    vs = rng.standard_normal((3, 5))
    # without MuJoCo: f's moments bounded to (0.3, 0.3, 0.9), then balanced to 0.5
    assert np.allclose(m.inertias[m.body_index("f")].I_com, 0.5 * np.eye(3), atol=1e-15)
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo's compiler is the oracle for its options")
    for (M, b), q, v in zip(_mujoco_M_and_bias(mujoco, p, qs, vs), qs, vs):
        assert np.allclose(gear.mass_matrix(m, q), M, rtol=0, atol=1e-13)
        assert np.allclose(gear.bias_forces(m, q, v), b, rtol=0, atol=1e-12)
    # each option alone, and the bounds with nothing to bound
    for comp in ('<compiler boundmass="0.5"/>', '<compiler boundinertia="0.3"/>',
                 '<compiler balanceinertia="true"/>', '<compiler boundmass="1e-4" boundinertia="1e-6"/>'):
        valid = (body.replace('<inertial pos="0.05 0 0" mass="0"/>',
                              '<inertial pos="0.05 0 0" mass="0.1" diaginertia="0.01 0.01 0.01"/>')
                 .replace('diaginertia="0.1 0.1 0.9"', 'diaginertia="0.1 0.1 0.15"')
                 .replace('fullinertia="0.1 0.12 0.5 0.01 0.02 0.005"', 'fullinertia="0.1 0.12 0.2 0.01 0.02 0.005"'))
        p = _mj(tmp_path, valid, compiler=comp, name="one.xml")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = gear.load_mjcf(p)
        # the bound alone gives the massless body e rotational inertia without mass (as MuJoCo loads it)
        assert [str(w.message).split(": ")[1] for w in caught] == (
            ["body 'e'"] if comp == '<compiler boundinertia="0.3"/>' else []), comp
        for (M, b), q, v in zip(_mujoco_M_and_bias(mujoco, p, qs, vs), qs, vs):
            assert np.allclose(gear.mass_matrix(m, q), M, rtol=0, atol=1e-13), comp
            assert np.allclose(gear.bias_forces(m, q, v), b, rtol=0, atol=1e-12), comp


@pytest.mark.parametrize("compiler", ["", '<compiler boundmass="0.5" boundinertia="0.3" balanceinertia="true"/>'])
@pytest.mark.parametrize("inertia, diagonal", [('diaginertia="-0.1 0.1 0.1"', [-0.1, 0.1, 0.1]),
                                               ('fullinertia="0.1 0.1 0.1 0.5 0 0"', [0.1, 0.1, 0.1])])
def test_mjcf_impossible_inertia_is_loaded_as_given_whatever_the_bounds(tmp_path, compiler, inertia, diagonal):
    """A negative principal moment is no rigid body's: it loads as given
    with a gear.InertiaWarning (strict: an error), never clamped to a bound
    or to zero by the compiler options' inertia policy."""
    p = _mj(tmp_path, f'<body name="a"><joint/><inertial pos="0 0 0" mass="1" {inertia}/></body>', compiler=compiler)
    with pytest.warns(gear.InertiaWarning):
        m = gear.load_mjcf(p)
    assert np.array_equal(m.inertias[0].I_com.diagonal(), diagonal)
    with pytest.raises(ModelFileError):
        gear.load_mjcf(p, strict=True)


def test_mjcf_massless_inertial_is_explicit(tmp_path, monkeypatch):
    """``<inertial pos mass="0"/>`` (no rotational inertia: MuJoCo's
    default, Menagerie's rby1) is an explicit massless inertial: it loads,
    and gear does not ask MuJoCo for the body's geoms (whose mesh files a
    user may not have)."""
    import gear.parsers.mjcf as mjcf_module

    monkeypatch.setattr(mjcf_module, "_import_mujoco", lambda: None)    # no MuJoCo at all
    p = _mj(tmp_path, f"""<body name="a"><joint name="ja" axis="0 1 0"/>{BODY_INERTIAL}
        <body name="neck" pos="0.2 0 0"><joint name="jn" axis="0 0 1"/><inertial pos="0 0 0" mass="0"/>
          <geom type="mesh" mesh="absent"/>
          <body name="head" pos="0.1 0 0"><joint name="jh" axis="1 0 0"/>{BODY_INERTIAL}</body></body></body>""",
            extra='<asset><mesh name="absent" file="absent.stl"/></asset>')
    m = gear.load_mjcf(p)
    assert m.inertias[m.body_index("neck")] is None
    with pytest.raises(gear.ModelFileError, match="not both"):
        gear.load_mjcf(_mj(tmp_path, '<body name="a"><joint/><inertial pos="0 0 0" mass="1" '
                                     'diaginertia="1 1 1" fullinertia="1 1 1 0 0 0"/></body>', name="both.xml"))
    with pytest.raises(gear.ModelFileError, match="boundmass"):
        gear.load_mjcf(_mj(tmp_path, f'<body name="a"><joint/>{BODY_INERTIAL}</body>',
                           compiler='<compiler boundmass="-1"/>', name="neg.xml"))


def test_urdf_joint_order_is_pinocchios(tmp_path):
    """Pinocchio (through urdfdom) walks the tree depth first with each
    link's child joints in the order of their names, not of the file; gear
    lays q out the same way, so a configuration from Pinocchio means the
    same here (example-robot-data's a1, whose FR legs come first in the
    file, had its mass matrix 41 % off when fed Pinocchio's q by position)."""
    p = _write(tmp_path, "order.urdf", f"""<robot name="o">
      <link name="base">{INERTIAL}</link>
      <link name="z_link">{INERTIAL}</link><link name="z_tip">{INERTIAL}</link>
      <link name="a_link">{INERTIAL}</link><link name="m_link">{INERTIAL}</link>
      <joint name="z_joint" type="revolute"><parent link="base"/><child link="z_link"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="tip_joint" type="continuous"><parent link="z_link"/><child link="z_tip"/></joint>
      <joint name="m_fixed" type="fixed"><parent link="base"/><child link="m_link"/></joint>
      <joint name="a_joint" type="prismatic"><parent link="base"/><child link="a_link"/>
        <axis xyz="1 0 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
    </robot>""")
    m = gear.load_urdf(p)
    assert m.joint_names == ["a_joint", "z_joint", "tip_joint"]
    assert m.idx_q("a_joint") == slice(0, 1)
    pin = pytest.importorskip("pinocchio", reason="Pinocchio's own order as the oracle")
    assert list(pin.buildModelFromUrdf(str(p)).names[1:]) == m.joint_names


def test_urdf_with_a_default_namespace_and_a_world_inertial(tmp_path):
    """Drake's URDFs declare a default namespace on <robot>
    (``xmlns="http://drake.mit.edu"``), which urdfdom ignores; gear said
    "expected <robot> (not a URDF file)".  A ``world`` root link with an
    <inertial> (bullet3's biped2d) loads, the world's inertia left out with
    a warning (an error with strict=True), as Pinocchio loads it."""
    body = f"""<link name="base">{INERTIAL}</link><link name="l">{INERTIAL}</link>
      <joint name="j" type="revolute"><parent link="base"/><child link="l"/>
        <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>"""
    plain = gear.load_urdf(_write(tmp_path, "plain.urdf", f'<robot name="r">{body}</robot>'))
    ns = gear.load_urdf(_write(tmp_path, "ns.urdf", f'<robot xmlns="http://drake.mit.edu" name="r">{body}</robot>'))
    assert ns.joint_names == plain.joint_names == ["j"]
    assert np.allclose(gear.mass_matrix(ns, [0.3]), gear.mass_matrix(plain, [0.3]))
    # a prefixed xacro element is still refused
    p = _write(tmp_path, "x.urdf", '<robot xmlns="http://drake.mit.edu" '
               f'xmlns:xacro="http://www.ros.org/wiki/xacro" name="r">{body}<xacro:macro name="m"/></robot>')
    with pytest.raises(ModelFileError, match="xacro"):
        gear.load_urdf(p)
    world = body.replace('<link name="base">', '<link name="world">').replace('link="base"', 'link="world"')
    p = _write(tmp_path, "w.urdf", f'<robot name="r">{world}</robot>')
    with pytest.warns(gear.ModelFileWarning, match="world link has an <inertial>"):
        m = gear.load_urdf(p)
    assert m.joint_names == ["j"] and m.nbodies == 1
    with pytest.raises(ModelFileError, match="world link has an <inertial>"):
        gear.load_urdf(p, strict=True)


def test_urdf_stray_xacro_in_a_visual_warns(tmp_path):
    """A leftover ``<xacro:grey/>`` inside a <visual> (robotisOP2 in the
    urdf_files_dataset) cannot change the dynamics: it loads with a warning
    (an error with strict=True); an xacro element where links, joints or
    inertials are read still raises."""
    link = (f'<link name="l">{INERTIAL}<visual><geometry><box size="1 1 1"/></geometry>'
            '<xacro:grey/></visual></link>')
    body = f"""<link name="base">{INERTIAL}</link>{link}
      <joint name="j" type="continuous"><parent link="base"/><child link="l"/></joint>"""
    head = '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r">'
    p = _write(tmp_path, "v.urdf", f"{head}{body}</robot>")
    with pytest.warns(gear.ModelFileWarning, match="xacro:grey"):
        m = gear.load_urdf(p)
    assert m.joint_names == ["j"]
    with pytest.raises(ModelFileError, match="xacro:grey"):
        gear.load_urdf(p, strict=True)
    p = _write(tmp_path, "c.urdf", f'{head}{body}<xacro:sensor_usb parent="base"/></robot>')
    with pytest.raises(ModelFileError, match="<xacro:sensor_usb>: unexpanded xacro"), \
            pytest.warns(gear.ModelFileWarning, match="xacro:grey"):
        gear.load_urdf(p)

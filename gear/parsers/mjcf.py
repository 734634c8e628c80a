"""A strict reader for MuJoCo MJCF models (the kinematic tree, inertias,
gravity and ``connect``/``weld`` loop closures).

Mapping to gear (see ``docs/models.md``):

* ``hinge`` -> ``Revolute``, ``slide`` -> ``Prismatic``, ``ball`` ->
  ``Spherical``, ``free``/``<freejoint>`` -> ``Free``.  Joint axes and
  anchors (``pos``) are in the body frame; ``range`` becomes joint limits
  when the joint is limited (``limited="true"``, or ``"auto"`` with a
  ``range`` and ``<compiler autolimits="true">``, MuJoCo's default).
* A gear body frame is its joint's child frame.  For a body whose (last)
  joint has ``pos = p != 0`` the gear frame sits at the joint anchor, i.e.
  at ``T_body * Trans(p)``; the inertia is re-expressed in that frame and
  the MJCF body frame is recorded as ``model.frames[body]``.
* A body with several joints becomes a chain of massless bodies named
  ``f"{body}__{joint}"``; the last one is named ``body`` and carries the
  inertia.  A body without joints is welded (merged) into its parent.
* The configuration vector equals MuJoCo's ``qpos`` (same joint order and
  quaternion convention ``(w, x, y, z)``; a free joint's ``q`` is the
  body's world pose).  ``model.qpos0`` holds MuJoCo's reference
  configuration (free bodies at their XML pose).
* ``<equality><connect>``/``<weld>`` become
  :class:`~gear.parsers.common.LoopClosureSpec` entries in
  ``model.loop_closures``, with constraint frames that coincide at
  ``model.qpos0``; a linear ``<equality><joint>`` becomes a
  :class:`gear.JointCoupler`.
* ``<include>`` splices the included file's children in place; sites
  take their default class's position and orientation.
* ``<frame>`` is dissolved into its parent before the tree is read: its
  children take its pose and ``childclass`` (``_Loader.flatten_frames``).
* A hinge or slide ``ref`` is the joint position of the XML pose
  (``model.qpos0``): the joint's placement is turned by ``-ref``.

Inertias come from ``<inertial>``.  A body with geoms but no
``<inertial>`` gets MuJoCo's geom-derived inertia when the optional
``mujoco`` package is importable, otherwise :class:`~gear.ModelFileError`
asks for an explicit ``<inertial>``.  Elements that would change the
kinematics or the inertias but are not supported (``attach``,
``replicate``, ``composite``, ``flexcomp``,
``equality`` kinds other than connect/weld/joint, ``settotalmass``,
``alignfree``, global coordinates)
raise :class:`~gear.ModelFileError`.
"""
from __future__ import annotations

import os

import numpy as np

from .. import joints as J
from ..model import Model
from ..spatial import SE3, exp_so3, quat_to_rot, rot_to_quat
from .common import LoopClosureSpec, Reader, _Node, assemble, parse_xml

__all__ = ["load_mjcf"]

_TOP = {"compiler", "option", "size", "visual", "statistic", "default", "custom", "extension",
        "asset", "worldbody", "contact", "deformable", "equality", "tendon", "actuator",
        "sensor", "keyframe"}
_UNSUPPORTED = {"attach", "replicate", "composite", "flexcomp"}
_BODY_CHILDREN = {"inertial", "joint", "freejoint", "geom", "site", "camera", "light", "body",
                  "plugin", "frame"}
_FRAME_ATTRS = {"name", "childclass", "pos", "quat", "axisangle", "euler", "xyaxes", "zaxis"}
_JOINT_TYPES = {"hinge", "slide", "ball", "free"}
_ORIENTATIONS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")


def _full_inertia(f):
    """The symmetric 3 x 3 of MJCF's ``fullinertia="ixx iyy izz ixy ixz iyz"``."""
    return np.array([[f[0], f[3], f[4]], [f[3], f[1], f[5]], [f[4], f[5], f[2]]])


class _PolyCoupling:
    """MuJoCo's nonlinear joint equality ``y - y0 = p(x - x0)``, ``p(t) =
    a0 + a1 t + ... + a4 t^4``, on two one-coordinate joints (``qy``,
    ``qx`` their places in ``q``, ``vy``, ``vx`` in ``dq``; ``nv``): the
    residual ``y - y0 - p(x - x0)``, its row ``e_y - p'(x - x0) e_x`` and
    bias ``-p''(x - x0) dx^2``.  A module-level class, so that the
    constraint pickles (Dask)."""

    def __init__(self, qy, qx, vy, vx, nv, a, y0, x0):
        self.qy, self.qx, self.vy, self.vx, self.nv = int(qy), int(qx), int(vy), int(vx), int(nv)
        self.a = np.asarray(a, float).copy()
        self.y0, self.x0 = float(y0), float(x0)

    def _p(self, q, k):
        # the k-th derivative of p at x - x0
        c = np.polynomial.polynomial.polyder(self.a, k) if k else self.a
        return float(np.polynomial.polynomial.polyval(q[self.qx] - self.x0, c))

    def residual(self, q):
        return np.array([q[self.qy] - self.y0 - self._p(q, 0)])

    def jacobian(self, q):
        A = np.zeros((1, self.nv))
        A[0, self.vy] = 1.0
        A[0, self.vx] -= self._p(q, 1)
        return A

    def bias(self, q, dq):
        return np.array([-self._p(q, 2) * dq[self.vx] ** 2])

    def jacobian_derivative(self, q):
        D = np.zeros((self.nv, 1, self.nv))
        D[self.vx, 0, self.vx] = -self._p(q, 2)
        return D


def _import_mujoco():
    """The ``mujoco`` module, or ``None`` if it is not installed."""
    try:
        import mujoco
    except Exception:  # ImportError, or a broken binary install
        return None
    return mujoco


def _bool(r, value, where, attr, default):
    if value is None:
        return default
    if value in ("true", "false"):
        return value == "true"
    raise r.error(where, f"attribute {attr}={value!r} must be 'true' or 'false'")


class _Compiler:
    def __init__(self):
        self.degree = True
        self.eulerseq = "xyz"
        self.autolimits = True
        self.inertiafromgeom = "auto"
        self.fusestatic = False
        self.boundmass = 0.0
        self.boundinertia = 0.0
        self.balanceinertia = False


def _read_compiler(r, root):
    c = _Compiler()
    for el in root.findall("compiler"):
        w = "<compiler>"
        a = el.get("angle")
        if a is not None:
            if a not in ("degree", "radian"):
                raise r.error(w, f"angle={a!r} must be 'degree' or 'radian'")
            c.degree = a == "degree"
        s = el.get("eulerseq")
        if s is not None:
            if len(s) != 3 or any(ch not in "xyzXYZ" for ch in s):
                raise r.error(w, f"eulerseq={s!r} must be 3 characters from 'xyzXYZ'")
            c.eulerseq = s
        c.autolimits = _bool(r, el.get("autolimits"), w, "autolimits", c.autolimits)
        c.fusestatic = _bool(r, el.get("fusestatic"), w, "fusestatic", c.fusestatic)
        ifg = el.get("inertiafromgeom")
        if ifg is not None:
            if ifg not in ("true", "false", "auto"):
                raise r.error(w, f"inertiafromgeom={ifg!r} must be 'true', 'false' or 'auto'")
            c.inertiafromgeom = ifg
        if el.get("coordinate", "local") != "local":
            raise r.error(w, "coordinate='global' is not supported (only local coordinates)")
        if el.get("alignfree", "false") != "false":
            raise r.error(w, f"alignfree={el.get('alignfree')!r} is not supported")
        c.balanceinertia = _bool(r, el.get("balanceinertia"), w, "balanceinertia", c.balanceinertia)
        for attr in ("boundmass", "boundinertia"):
            if el.get(attr) is not None:
                v = r.float1(el.get(attr), w, attr)
                if not v >= 0.0:
                    raise r.error(w, f"{attr}={el.get(attr)!r} must be non-negative")
                setattr(c, attr, v)
        if el.get("settotalmass") is not None and r.float1(el.get("settotalmass"), w, "settotalmass") > 0:
            raise r.error(w, "settotalmass is not supported (it rescales the inertias)")
    return c


def _read_defaults(r, root):
    """Default classes: name -> {element tag: attributes}, inheritance applied."""
    classes = {}

    def walk(el, name, inherited):
        if name in classes:
            raise r.error(f"<default class={name!r}>", "duplicate default class")
        cur = {k: dict(v) for k, v in inherited.items()}
        for c in el:
            if c.tag != "default":
                cur.setdefault(c.tag, {}).update(c.attrib)
        classes[name] = cur
        for c in el.findall("default"):
            cn = c.get("class")
            if not cn:
                raise r.error(f"<default class={name!r}>", "a nested <default> needs a 'class' attribute")
            walk(c, cn, cur)

    tops = root.findall("default")
    if len(tops) > 1:
        raise r.error("<default>", "more than one top-level <default> element")
    if tops:
        walk(tops[0], tops[0].get("class", "main"), {})
    else:
        classes["main"] = {}
    return classes, (tops[0].get("class", "main") if tops else "main")


class _Loader:
    def __init__(self, path, strict=False, fixed_base=False):
        self.path = path
        self.r = Reader(path, strict=strict)
        self.fixed_base = bool(fixed_base)

    # -- poses ----------------------------------------------------------
    def angle(self, v):
        return np.deg2rad(v) if self.comp.degree else v

    def rotation(self, el, where):
        r = self.r
        given = [k for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if el.get(k) is not None]
        if len(given) > 1:
            raise r.error(where, f"more than one orientation given ({', '.join(given)})")
        if not given:
            return np.eye(3)
        k = given[0]
        if k == "quat":
            q = r.floats(el.get(k), 4, where, k)
            if np.linalg.norm(q) < 1e-12:
                raise r.error(where, f"quat={el.get(k)!r} is zero")
            return quat_to_rot(q / np.linalg.norm(q))
        if k == "axisangle":
            v = r.floats(el.get(k), 4, where, k)
            n = np.linalg.norm(v[:3])
            if n < 1e-12:
                raise r.error(where, f"axisangle={el.get(k)!r} has a zero axis")
            return exp_so3(v[:3] / n * self.angle(v[3]))
        if k == "euler":
            v = self.angle(r.floats(el.get(k), 3, where, k))
            R = np.eye(3)
            for ch, a in zip(self.comp.eulerseq, v):
                Rk = exp_so3(np.eye(3)["xyz".index(ch.lower())] * a)
                R = R @ Rk if ch.islower() else Rk @ R   # intrinsic / extrinsic
            return R
        if k == "xyaxes":
            v = r.floats(el.get(k), 6, where, k)
            x, y = v[:3], v[3:]
            nx = np.linalg.norm(x)
            if nx < 1e-12:
                raise r.error(where, f"xyaxes={el.get(k)!r} has a zero x axis")
            x = x / nx
            y = y - x * (x @ y)
            ny = np.linalg.norm(y)
            if ny < 1e-12:
                raise r.error(where, f"xyaxes={el.get(k)!r}: the axes are parallel")
            y = y / ny
            return np.column_stack([x, y, np.cross(x, y)])
        z = r.floats(el.get(k), 3, where, k)
        nz = np.linalg.norm(z)
        if nz < 1e-12:
            raise r.error(where, f"zaxis={el.get(k)!r} is zero")
        z = z / nz
        e3 = np.array([0.0, 0.0, 1.0])
        c = np.cross(e3, z)
        s = np.linalg.norm(c)
        if s < 1e-12:
            return np.eye(3) if z[2] > 0 else exp_so3([np.pi, 0.0, 0.0])
        return exp_so3(c / s * np.arctan2(s, z[2]))

    def pose(self, el, where):
        p = self.r.floats(el.get("pos"), 3, where, "pos", (0.0, 0.0, 0.0))
        return SE3(self.rotation(el, where), p)

    # -- <frame> ---------------------------------------------------------
    def flatten_frames(self, el, cc, where):
        """Replace each ``<frame>`` among the children of ``el`` (a body or
        the worldbody, whose elements take the default class ``cc``) by its
        own children, re-posed by the frame's pose, in place (document
        order, so that joints, bodies and unnamed elements keep MuJoCo's
        numbering), then the bodies below.  The frame's ``childclass``
        becomes the ``class`` of the elements it moves out that have none
        (the ``childclass`` of its bodies).  As MuJoCo composes a frame:
        bodies, sites, geoms, cameras, lights and ``<inertial>`` get
        ``T_frame T_child``, a joint's ``pos`` and ``axis`` are carried by
        it.  Geoms are re-posed only for a faithful tree: gear reads their
        poses nowhere (MuJoCo derives geom inertias from the file)."""
        for c in list(el):
            if c.tag == "frame":
                fw = f"{where} <frame{' ' + repr(c.get('name')) if c.get('name') else ''}>"
                bad = sorted(set(c.attrib) - _FRAME_ATTRS)
                if bad:
                    raise self.r.error(fw, f"unknown attribute(s) {bad} of <frame>")
                fcc = c.get("childclass") or cc
                if fcc not in self.classes:
                    raise self.r.error(fw, f"childclass {fcc!r} is not defined")
                self.flatten_frames(c, fcc, fw)          # nested frames first, relative to this one
                T = self.pose(c, fw)
                i = list(el).index(c)
                el.remove(c)
                for k, child in enumerate(list(c)):
                    if child.tag not in _BODY_CHILDREN:
                        raise self.r.error(fw, f"unknown child element <{child.tag}>")
                    if fcc != cc:
                        key = "childclass" if child.tag == "body" else "class"
                        if child.get(key) is None and child.tag not in ("inertial", "freejoint"):
                            child.set(key, fcc)
                    self._repose(child, T, fcc, fw)
                    el.insert(i + k, child)
            elif c.tag == "body":
                name = c.get("name")
                self.flatten_frames(c, c.get("childclass") or cc, f"body {name!r}" if name else "a body")

    def _repose(self, el, T, cc, where):
        """``el`` (a frame's child, default class ``cc``) carried by the
        frame's pose ``T``: explicit ``pos`` and ``quat`` (``axis`` for a
        joint, ``fromto``'s two points, ``fullinertia`` rotated)."""
        def fmt(v):
            return " ".join(repr(float(x)) for x in v)

        tag = el.tag
        if tag in ("body", "inertial", "freejoint", "plugin"):
            attrs = dict(el.attrib)
        else:
            cls = el.get("class") or cc
            if cls not in self.classes:
                raise self.r.error(where, f"default class {cls!r} of a <{tag}> is not defined")
            attrs = dict(self.classes[cls].get(tag, {}))
            if any(el.get(k) is not None for k in _ORIENTATIONS):
                for k in _ORIENTATIONS:           # an own orientation replaces the default's
                    attrs.pop(k, None)
            attrs.update(el.attrib)
        w = f"{where} <{tag}>"
        if tag in ("freejoint", "plugin") or (tag == "joint" and attrs.get("type") == "free"):
            return
        if tag == "inertial" and el.get("pos") is None:
            return                                # (inertial() asks for it)
        if tag == "joint":
            pos = self.r.floats(attrs.get("pos"), 3, w, "pos", (0.0, 0.0, 0.0))
            el.set("pos", fmt(T.R @ pos + T.p))
            if attrs.get("type", "hinge") in ("hinge", "slide"):
                axis = self.r.floats(attrs.get("axis"), 3, w, "axis", (0.0, 0.0, 1.0))
                el.set("axis", fmt(T.R @ axis))
            return
        if attrs.get("fromto") is not None:
            f = self.r.floats(attrs["fromto"], 6, w, "fromto")
            el.set("fromto", fmt(np.concatenate([T.R @ f[:3] + T.p, T.R @ f[3:] + T.p])))
            return
        if tag == "inertial" and el.get("fullinertia") is not None:
            f = self.r.floats(el.get("fullinertia"), 6, w, "fullinertia")
            I = T.R @ _full_inertia(f) @ T.R.T
            el.set("fullinertia", fmt([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]))
            el.set("pos", fmt(T.R @ self.r.floats(el.get("pos"), 3, w, "pos") + T.p))
            return
        Tc = T * self.pose(attrs, w)
        for k in _ORIENTATIONS:
            el.attrib.pop(k, None)
        el.set("pos", fmt(Tc.p))
        el.set("quat", fmt(rot_to_quat(Tc.R)))

    # -- elements -------------------------------------------------------
    def inertial(self, body_el, where):
        r = self.r
        found = body_el.findall("inertial")
        if len(found) > 1:
            raise r.error(where, "more than one <inertial> element")
        if not found:
            return None
        el = found[0]
        w = where + " <inertial>"
        pos = r.floats(el.get("pos"), 3, w, "pos")
        mass = r.float1(el.get("mass"), w, "mass")
        if mass < 0.0:
            raise r.error(w, f"mass must be non-negative, got {mass}")
        diag, full = el.get("diaginertia"), el.get("fullinertia")
        if diag is not None and full is not None:
            raise r.error(w, "give one of 'diaginertia' and 'fullinertia', not both")
        if full is not None:
            if any(el.get(k) is not None for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis")):
                raise r.error(w, "fullinertia cannot be combined with an orientation")
            I = _full_inertia(r.floats(full, 6, w, "fullinertia"))
            d, R = np.linalg.eigh(I)
            bmass, bd = self.bounded(mass, d)
            if bmass != mass or not np.array_equal(bd, d):       # (as given otherwise)
                mass, I = bmass, R @ np.diag(bd) @ R.T
        else:
            # diaginertia, or neither: no rotational inertia (MuJoCo's default;
            # Menagerie's rby1 gives massless link frames as <inertial pos mass="0"/>)
            d = r.floats(diag, 3, w, "diaginertia", (0.0, 0.0, 0.0))
            mass, d = self.bounded(mass, d)
            R = self.rotation(el, w)
            I = R @ np.diag(d) @ R.T
        return r.inertia(mass, pos, I, where)

    def bounded(self, mass, d):
        """MuJoCo's compiler on a body's mass and principal moments ``d``:
        ``boundmass`` and ``boundinertia`` as lower bounds, then with
        ``balanceinertia`` moments that violate the triangle inequality set
        to their mean (the order MuJoCo applies them in).  Without the
        options, or with a negative moment (no rigid body: the inertia
        policy reports it as given), nothing changes."""
        c = self.comp
        d = np.asarray(d, float)
        if np.any(d < 0.0):
            return mass, d
        if c.boundmass > 0.0:
            mass = max(float(mass), c.boundmass)
        if c.boundinertia > 0.0:
            d = np.maximum(d, c.boundinertia)
        if c.balanceinertia and (d[0] + d[1] < d[2] or d[0] + d[2] < d[1] or d[1] + d[2] < d[0]):
            d = np.full(3, d.mean())
        return mass, d

    def mujoco_inertia(self, bid, name, named, where):
        """Inertia of body ``bid`` as compiled by MuJoCo (None if massless)."""
        if self._mj is None:
            mj = _import_mujoco()
            if mj is None:
                raise self.r.error(where, "has geoms but no <inertial>; without the optional "
                                   "'mujoco' package gear cannot derive inertias from geoms: "
                                   "add an explicit <inertial> (or pip install mujoco)")
            try:
                self._mj = (mj, mj.MjModel.from_xml_path(self.path))
            except Exception as exc:
                model, why = self._compile_for_inertias(mj)
                if model is None:
                    raise self.r.error(where, f"MuJoCo could not compile the file to derive "
                                       f"inertias from geoms: {why or exc}") from None
                self._mj = (mj, model)
        mj, m = self._mj
        if named:
            k = mj.mj_name2id(m, mj.mjtObj.mjOBJ_BODY, name)
        elif self.comp.fusestatic:
            raise self.r.error(where, "unnamed body with fusestatic='true': cannot match "
                               "MuJoCo's compiled inertia; name the body or add an <inertial>")
        else:
            k = bid
        if k < 0 or k >= m.nbody:  # pragma: no cover - defensive
            raise self.r.error(where, "body not found in MuJoCo's compiled model")
        mass = float(m.body_mass[k])
        if mass <= 0.0:
            return None
        R = quat_to_rot(np.asarray(m.body_iquat[k], float))
        return self.r.inertia(mass, np.asarray(m.body_ipos[k], float),
                              R @ np.diag(np.asarray(m.body_inertia[k], float)) @ R.T, where)

    def _compile_for_inertias(self, mj):
        """MuJoCo's model of the file without what it failed to read that no
        inertia gear asks for depends on, as ``(model, None)``: textures, contact pairs and
        exclusions, sensors, and the mesh geoms of bodies whose inertia is
        not derived from geoms (an explicit ``<inertial>`` under
        ``inertiafromgeom="auto"``, or welded to the world).  A robot file
        copied without its visual assets, or with an unrelated mesh
        missing, then still loads; a body whose own mesh is missing does
        not (``(None, error)``: what MuJoCo said then)."""
        if not hasattr(mj, "MjSpec") or self.comp.inertiafromgeom == "true":
            return None, None
        try:
            spec = mj.MjSpec.from_file(self.path)
            for seq in (spec.textures, spec.pairs, spec.excludes, spec.sensors):
                for item in list(seq):
                    spec.delete(item)
            for mat in spec.materials:
                mat.textures = [""] * len(mat.textures)
            for b in spec.bodies:
                welded, a = True, b
                while a is not None and a.name != "world":
                    welded = welded and len(a.joints) == 0
                    a = a.parent
                if b.name != "world" and (b.explicitinertial or welded):
                    for g in list(b.geoms):
                        if g.type == mj.mjtGeom.mjGEOM_MESH:
                            spec.delete(g)
            used = {g.meshname for g in spec.geoms}
            for me in list(spec.meshes):
                if me.name not in used:
                    spec.delete(me)
            return spec.compile(), None
        except Exception as exc:
            return None, exc

    def joint(self, el, childclass, body, k):
        r = self.r
        if el.tag == "freejoint":
            name = el.get("name") or f"{body}_free"
            return name, "free", np.zeros(3), None, None, 0.0
        cls = el.get("class") or childclass
        if cls not in self.classes:
            jn = el.get("name") or f"{body}_joint{k}"
            raise r.error(f"joint {jn!r}", f"default class {cls!r} is not defined")
        attrs = dict(self.classes[cls].get("joint", {}))
        attrs.update(el.attrib)
        name = attrs.get("name") or f"{body}_joint{k}"
        where = f"joint {name!r}"
        jtype = attrs.get("type", "hinge")
        if jtype not in _JOINT_TYPES:
            raise r.error(where, f"unknown joint type {jtype!r} (supported: hinge, slide, ball, free)")
        # the reference position (MuJoCo's qpos0 of a hinge or slide joint:
        # the XML pose is the one at q = ref); ignored on ball and free joints
        ref = 0.0
        if attrs.get("ref") is not None and jtype in ("hinge", "slide"):
            ref = r.float1(attrs["ref"], where, "ref")
            if jtype == "hinge":
                ref = float(self.angle(ref))
        pos = r.floats(attrs.get("pos"), 3, where, "pos", (0.0, 0.0, 0.0))
        axis = r.axis(attrs.get("axis"), where, "axis", (0.0, 0.0, 1.0)) if jtype in ("hinge", "slide") else None
        limited = attrs.get("limited", "auto")
        if limited not in ("true", "false", "auto"):
            raise r.error(where, f"limited={limited!r} must be 'true', 'false' or 'auto'")
        rng = None
        if jtype in ("hinge", "slide"):
            has_range = attrs.get("range") is not None
            if limited == "true" or (limited == "auto" and self.comp.autolimits and has_range):
                rng = r.floats(attrs.get("range"), 2, where, "range", (0.0, 0.0))
                if jtype == "hinge":
                    rng = self.angle(rng)
                if not rng[0] < rng[1]:
                    raise r.error(where, f"range {rng.tolist()} must have lower < upper")
            elif has_range:  # still validate the numbers
                r.floats(attrs.get("range"), 2, where, "range")
        return name, jtype, pos, axis, rng, ref

    # -- the tree -------------------------------------------------------
    def body(self, el, parent_node, T_pn_pb, T_w_pb, childclass, parent_is_world):
        r = self.r
        self.nbody += 1
        bid = self.nbody
        named = bool(el.get("name"))
        name = el.get("name") or f"body{bid}"
        where = f"body {name!r}"
        if name == "world":
            raise r.error(where, "the name 'world' is reserved for the world body")
        if name in self.bodies or name in self.node_names:
            raise r.error(where, "duplicate body name")
        for c in el:
            if c.tag not in _BODY_CHILDREN:
                raise r.error(where, f"unknown child element <{c.tag}>")
        cc = el.get("childclass") or childclass
        if cc not in self.classes:
            raise r.error(where, f"childclass {cc!r} is not defined")
        T_pb_B = self.pose(el, where)
        T0 = T_pn_pb * T_pb_B
        T_wB = T_w_pb * T_pb_B

        jels = [c for c in el if c.tag in ("joint", "freejoint")]
        specs = [self.joint(c, cc, name, k) for k, c in enumerate(jels)]
        if self.fixed_base and parent_is_world and any(sp[1] == "free" for sp in specs):
            # welded where the file puts it: the free joint is left out
            specs = [sp for sp in specs if sp[1] != "free"]
        # a body without joints under the world (or under such a body) is
        # welded to it: its inertia never moves, so none is derived from its
        # geoms (which could need mesh files a user may not have)
        on_world = not specs and parent_node in self.on_world
        if on_world:
            self.on_world.add(name)
        inertia = None
        has_geom = el.find("geom") is not None
        explicit = el.find("inertial") is not None
        if self.comp.inertiafromgeom == "true" and has_geom and not on_world:
            inertia = self.mujoco_inertia(bid, name, named, where)
        elif explicit:
            # (a massless <inertial> too: MuJoCo derives nothing from the geoms then)
            inertia = self.inertial(el, where)
        elif has_geom and self.comp.inertiafromgeom == "auto" and not on_world:
            inertia = self.mujoco_inertia(bid, name, named, where)
        elif not on_world and (self.comp.boundmass > 0.0 or self.comp.boundinertia > 0.0):
            # nothing to give it mass: MuJoCo's bounds alone, about the
            # point its compiler puts such a body's centre of mass at (the
            # body's own pos, read in its frame)
            mass, d = self.bounded(0.0, np.zeros(3))
            pos = self.r.floats(el.get("pos"), 3, where, "pos", (0.0, 0.0, 0.0))
            inertia = self.r.inertia(mass, pos, np.diag(d), where)

        for jn, jtype, *_, ref in specs:
            if jn in self.joints:
                raise r.error(f"joint {jn!r}", "duplicate joint name")
            self.joints[jn] = (jtype, ref)
        nodes = []
        if not specs:
            nodes.append(_Node(name, parent_node, J.Fixed(), name, T0, inertia, merge=True, where=where))
            T_node_B = SE3()
        elif any(s[1] == "free" for s in specs):
            jn = next(s[0] for s in specs if s[1] == "free")
            if len(specs) > 1:
                raise r.error(f"joint {jn!r}", "a free joint must be the only joint of its body")
            if not parent_is_world:
                raise r.error(f"joint {jn!r}", "a free joint is only allowed in a top-level body "
                              "(a direct child of <worldbody>)")
            q0 = np.concatenate([T_wB.p, rot_to_quat(T_wB.R)])
            nodes.append(_Node(name, "world", J.Free(), jn, SE3(), inertia,
                               where=f"joint {jn!r}", q0=q0))
            T_node_B = SE3()
        else:
            prev = None
            for k, (jn, jtype, pos, axis, rng, ref) in enumerate(specs):
                last = k == len(specs) - 1
                if jtype == "hinge":
                    joint = J.Revolute(axis)
                elif jtype == "slide":
                    joint = J.Prismatic(axis)
                else:
                    joint = J.Spherical()
                if rng is not None:
                    joint.set_limits(rng[0], rng[1])
                nname = name if last else f"{name}__{jn}"
                if nname != name and (nname in self.bodies or nname in self.node_names):
                    raise r.error(where, f"generated body name {nname!r} is already used")
                placement = T0 * SE3(p=pos) if prev is None else SE3(p=pos - prev)
                if ref != 0.0:
                    # the joint's child frame is the XML's at q = ref:
                    # placement * J(q) = (placement * J(-ref)) * J(q)
                    placement = placement * (SE3(exp_so3(-ref * axis)) if jtype == "hinge"
                                             else SE3(p=-ref * axis))
                T_node_B = SE3(p=-pos)
                nodes.append(_Node(nname, parent_node if prev is None else nodes[-1].name, joint, jn,
                                   placement, inertia.transform(T_node_B) if (last and inertia is not None) else None,
                                   where=f"joint {jn!r}",
                                   frame_offset=T_node_B if (last and np.any(pos != 0)) else None,
                                   q0=np.array([ref]) if ref != 0.0 else None))
                prev = pos
        for n in nodes:
            self.node_names.add(n.name)
        self.nodes.extend(nodes)
        self.bodies[name] = T_wB
        self.sites_of(el, name, cc)
        for c in el.findall("body"):
            self.body(c, nodes[-1].name, T_node_B, T_wB, cc, False)

    def sites_of(self, el, body, childclass):
        """The named sites of ``el``, each with the attributes of its default
        class (its ``class``, else the body's ``childclass``) under its
        own, as MuJoCo applies them."""
        for s in el.findall("site"):
            sn = s.get("name")
            if sn:
                if sn in self.sites:
                    raise self.r.error(f"site {sn!r}", "duplicate site name")
                cls = s.get("class") or childclass
                if cls not in self.classes:
                    raise self.r.error(f"site {sn!r}", f"default class {cls!r} is not defined")
                attrs = dict(self.classes[cls].get("site", {}))
                if any(s.get(k) is not None for k in _ORIENTATIONS):
                    for k in _ORIENTATIONS:       # an own orientation replaces the default's
                        attrs.pop(k, None)
                attrs.update(s.attrib)
                if attrs.get("fromto") is not None:
                    self.sites[sn] = (body, None)
                else:
                    self.sites[sn] = (body, self.pose(attrs, f"site {sn!r}"))

    # -- equality constraints ------------------------------------------
    def equalities(self, root, model):
        r = self.r
        k = 0
        for eq in root.findall("equality"):
            for c in eq:
                k += 1
                name = c.get("name")
                where = f"equality <{c.tag}> " + (repr(name) if name else f"#{k}")
                if c.tag not in ("connect", "weld", "joint"):
                    raise r.error(where, f"equality constraint <{c.tag}> is not supported "
                                  "(only connect, weld and joint)")
                if not _bool(r, c.get("active"), where, "active", True):
                    continue
                if c.tag == "joint":
                    model.loop_closures.append(self.joint_equality(c, name, where, model))
                    continue
                use_sites = c.get("site1") is not None or c.get("site2") is not None
                if use_sites:
                    if c.get("body1") is not None or c.get("body2") is not None:
                        raise r.error(where, "give either body1/body2 or site1/site2, not both")
                    fr = []
                    for attr in ("site1", "site2"):
                        sn = c.get(attr)
                        if sn is None:
                            raise r.error(where, f"missing required attribute {attr!r}")
                        if sn not in self.sites:
                            raise r.error(where, f"{attr} {sn!r} is not defined")
                        b, T = self.sites[sn]
                        if T is None:
                            raise r.error(f"site {sn!r}", "sites given by 'fromto' are not supported in equality constraints")
                        fr.append((b, T if c.tag == "weld" else SE3(p=T.p)))
                    (b1, P1), (b2, P2) = fr
                else:
                    b1 = c.get("body1")
                    if b1 is None:
                        raise r.error(where, "missing required attribute 'body1'")
                    b2 = c.get("body2", "world")
                    for attr, b in (("body1", b1), ("body2", b2)):
                        if b != "world" and b not in self.bodies:
                            raise r.error(where, f"{attr} {b!r} is not defined")
                    T1 = self.bodies.get(b1, SE3())
                    T2 = self.bodies.get(b2, SE3())
                    if c.tag == "connect":
                        anchor = r.floats(c.get("anchor"), 3, where, "anchor")
                        P1 = SE3(p=anchor)
                        P2 = T2.inverse() * T1 * P1
                    else:
                        anchor = r.floats(c.get("anchor"), 3, where, "anchor", (0.0, 0.0, 0.0))
                        rel = r.floats(c.get("relpose"), 7, where, "relpose", (0, 1, 0, 0, 0, 0, 0))
                        P2 = SE3(p=anchor)
                        if np.linalg.norm(rel[3:]) > 0:
                            P1 = SE3(quat_to_rot(rel[3:] / np.linalg.norm(rel[3:])), rel[:3])
                        else:
                            P1 = T1.inverse() * T2 * P2
                params = {}
                if c.tag == "weld" and c.get("torquescale") is not None:
                    params["torquescale"] = r.float1(c.get("torquescale"), where, "torquescale")
                ga, Pa = self._to_gear(model, b1, P1)
                gb, Pb = self._to_gear(model, b2, P2)
                model.loop_closures.append(LoopClosureSpec(
                    kind="ball" if c.tag == "connect" else "weld", body_a=ga, placement_a=Pa,
                    body_b=gb, placement_b=Pb, name=name, params=params))

    def joint_equality(self, c, name, where, model):
        """``<joint joint1 joint2 polycoef>``: MuJoCo's ``y - y0 = a0 + a1 (x -
        x0) + a2 (x - x0)^2 + ...`` with ``y``, ``x`` the two joints' ``qpos``
        and ``y0``, ``x0`` their reference values (``ref``).  The linear
        ones (``a2 = a3 = a4 = 0``, the finger couplings of grippers) are
        :class:`gear.JointCoupler` ``y = a1 x + (a0 + y0 - a1 x0)``; the
        others (the coupled knees and wrists of Menagerie's ms_human_700)
        a :class:`gear.CustomConstraint` of :class:`_PolyCoupling`."""
        from ..constraints.closures import CustomConstraint, JointCoupler

        r = self.r
        j1, j2 = c.get("joint1"), c.get("joint2")
        if j1 is None:
            raise r.error(where, "missing required attribute 'joint1'")
        if j2 is None:
            raise r.error(where, "without joint2 (joint1 held at a value) is not supported: "
                          "a gear.JointCoupler ties two joints")
        for attr, jn in (("joint1", j1), ("joint2", j2)):
            if jn not in self.joints:
                raise r.error(where, f"{attr} {jn!r} is not defined")
            if self.joints[jn][0] not in ("hinge", "slide"):
                raise r.error(where, f"{attr} {jn!r} is a {self.joints[jn][0]} joint; "
                              "joint equalities couple hinge and slide joints")
        a = r.floats(c.get("polycoef"), 5, where, "polycoef", (0.0, 1.0, 0.0, 0.0, 0.0))
        y0, x0 = self.joints[j1][1], self.joints[j2][1]
        name = name or f"equality:{j1}"
        if np.any(a[2:] != 0.0):
            pc = _PolyCoupling(model.idx_q(j1).start, model.idx_q(j2).start, model.idx_v(j1).start,
                               model.idx_v(j2).start, model.nv, a, y0, x0)
            return CustomConstraint(pc.jacobian, pc.bias, pc.residual, name=name,
                                    jacobian_derivative=pc.jacobian_derivative)
        return JointCoupler(j1, j2, multiplier=float(a[1]), offset=float(a[0] + y0 - a[1] * x0),
                            name=name)

    @staticmethod
    def _to_gear(model, body, T):
        if body == "world":
            return "world", T
        idx, Toff = model.frames[body]
        return ("world" if idx < 0 else model.body_names[idx]), Toff * T

    # -- driver ----------------------------------------------------------
    def includes(self, el, stack):
        """Replace every ``<include file=...>`` below ``el`` by the children
        of the included file's ``<mujoco>`` root, as MuJoCo does (its
        path relative to the including file's directory, else to the main
        file's; includes nest, cycles are refused)."""
        r = self.r
        for i, c in reversed(list(enumerate(el))):
            if c.tag != "include":
                self.includes(c, stack)
                continue
            f = c.get("file")
            where = f"element <include> {f!r}" if f else "element <include>"
            if not f:
                raise r.error(where, "missing required attribute 'file'")
            cands = [os.path.join(os.path.dirname(stack[-1]), f), os.path.join(os.path.dirname(stack[0]), f)]
            path = next((os.path.abspath(p) for p in cands if os.path.isfile(p)), None)
            if path is None:
                raise r.error(where, f"the included file {f!r} is not found (looked in "
                              f"{os.path.dirname(stack[-1])!r})")
            if path in stack:
                raise r.error(where, f"includes itself through {' -> '.join(map(os.path.basename, stack))}")
            sub = parse_xml(path)
            if sub.tag != "mujoco":
                raise r.error(where, f"the included file's root element is <{sub.tag}>, expected <mujoco>")
            self.includes(sub, stack + [path])
            el.remove(c)
            for k, s in enumerate(list(sub)):
                el.insert(i + k, s)

    def load(self):
        r = self.r
        root = parse_xml(self.path)
        if root.tag != "mujoco":
            raise r.error("", f"root element is <{root.tag}>, expected <mujoco> (not an MJCF file)")
        self.includes(root, [os.path.abspath(self.path)])
        for el in root.iter():
            if el.tag in _UNSUPPORTED:
                nm = el.get("name") or el.get("file") or el.get("model") or ""
                raise r.error(f"element <{el.tag}>" + (f" {nm!r}" if nm else ""),
                              f"<{el.tag}> is not supported by gear's MJCF reader")
        for el in root:
            if el.tag not in _TOP:
                raise r.error(f"element <{el.tag}>", "unknown top-level MJCF element")
        self.comp = _read_compiler(r, root)
        self.classes, main = _read_defaults(r, root)
        gravity = np.array([0.0, 0.0, -9.81])
        for opt in root.findall("option"):
            gravity = r.floats(opt.get("gravity"), 3, "<option>", "gravity", gravity)
        for flag in root.findall("option/flag"):
            g = flag.get("gravity", "enable")
            if g not in ("enable", "disable"):
                raise r.error("<option> <flag>", f"gravity={g!r} must be 'enable' or 'disable'")
            if g == "disable":
                gravity = np.zeros(3)

        self._mj = None
        self.nbody = 0
        self.nodes, self.bodies, self.sites = [], {}, {}
        self.node_names, self.joints = set(), {}       # joints: name -> (type, ref)
        self.on_world = {"world"}
        for wb in root.findall("worldbody"):
            self.flatten_frames(wb, main, "<worldbody>")
            for c in wb:
                if c.tag in ("joint", "freejoint", "inertial"):
                    raise r.error("<worldbody>", f"the world body cannot have <{c.tag}>")
                if c.tag not in _BODY_CHILDREN:
                    raise r.error("<worldbody>", f"unknown child element <{c.tag}>")
            self.sites_of(wb, "world", main)
            for c in wb.findall("body"):
                self.body(c, "world", SE3(), SE3(), main, True)

        model = Model(gravity=gravity)
        assemble(model, self.nodes, r)
        q0 = model.neutral()
        for n in self.nodes:
            if n.q0 is not None and not n.merge:
                q0[model.idx_q(n.joint_name)] = n.q0
        model.qpos0 = q0
        self.equalities(root, model)
        return model


def load_mjcf(path, strict=False, fixed_base=False):
    """Load a MuJoCo MJCF file into a :class:`gear.Model`.

    Parameters
    ----------
    path : str or os.PathLike
    strict : bool
        Raise for an inertia no rigid body can have instead of loading it
        with a :class:`gear.InertiaWarning` (same policy as
        :func:`gear.load_urdf`).
    fixed_base : bool
        Leave out the free joints of top-level bodies: a floating robot
        (a humanoid's pelvis, a quadruped's trunk) is welded to the world
        where the file puts it, to analyse its mechanism with the base held.

    Returns
    -------
    gear.Model
        ``model.loop_closures`` lists the ``<equality>`` connect/weld
        constraints as :class:`~gear.parsers.common.LoopClosureSpec`;
        ``model.frames[body]`` gives every MJCF body's frame as ``(gear body
        index, SE3)`` (index ``-1`` for bodies welded to the world);
        ``model.qpos0`` is MuJoCo's reference configuration.

    Raises
    ------
    gear.ModelFileError
        For a malformed or unsupported file (the message names the file and
        element).
    OSError
        If the file cannot be read.
    """
    return _Loader(os.fspath(path), strict=strict, fixed_base=fixed_base).load()

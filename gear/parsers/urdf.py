"""A strict URDF reader.

Conventions (URDF spec, http://wiki.ros.org/urdf/XML):

* body name = link name, joint name = URDF joint name;
* a link's frame is its parent joint's child frame, so a body's placement
  is ``SE3.from_rpy(origin rpy, origin xyz)`` of that joint;
* ``<inertial>``: ``com`` = origin xyz, ``I_com = R I R^T`` with ``R`` the
  origin rpy rotation and ``I`` the ``<inertia>`` tensor;
* with ``floating_base=True`` the root link is the first body, attached to
  ``"world"`` by a ``Free`` joint named ``"root"``; otherwise it is welded
  to the world (not a body, as in Pinocchio), kept in ``model.frames``;
  a massless root link named ``"world"`` is the world itself;
* ``<mimic joint multiplier offset>`` keeps the joint's own coordinate and
  adds a :class:`gear.JointCoupler` to ``model.loop_closures``
  (``q_j = multiplier q_source + offset``), used by
  :class:`gear.ConstrainedModel`;
* ``fixed`` joints are merged into the parent body (``merge_fixed=True``):
  inertias are lumped, grandchildren re-attached with the composed
  placement, and the merged link recorded in ``model.frames``.

Everything that the spec requires and is missing, every number that is not
finite, every reference to an undefined link, every tree defect (two
parents, cycles, several roots), every negative mass and every clearly
indefinite inertia raises :class:`~gear.ModelFileError` naming the file
and the element; physically impossible inertias
(:class:`~gear.InertiaWarning`) and joint limits with ``lower > upper``
(loaded without limits, :class:`~gear.ModelFileWarning`) warn or, with
``strict=True``, raise.
Leading whitespace or a byte-order mark before the XML declaration is
accepted.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from .. import joints as J
from ..model import Model
from ..spatial import SE3
from .common import ModelFileError, Reader, _Node, assemble, parse_xml

__all__ = ["load_urdf"]

_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")


def _one(r, el, tag, where, required=False):
    found = el.findall(tag)
    if len(found) > 1:
        raise r.error(where, f"more than one <{tag}> element")
    if not found:
        if required:
            raise r.error(where, f"missing required <{tag}> element")
        return None
    return found[0]


def _origin(r, el, where):
    o = _one(r, el, "origin", where)
    if o is None:
        return SE3()
    xyz = r.floats(o.get("xyz"), 3, where + " <origin>", "xyz", (0.0, 0.0, 0.0))
    rpy = r.floats(o.get("rpy"), 3, where + " <origin>", "rpy", (0.0, 0.0, 0.0))
    return SE3.from_rpy(rpy, xyz)


def _link_inertia(r, link, name):
    where = f"link {name!r}"
    inert = _one(r, link, "inertial", where)
    if inert is None:
        return None
    where_i = where + " <inertial>"
    T = _origin(r, inert, where_i)
    m = _one(r, inert, "mass", where_i, required=True)
    mass = r.float1(m.get("value"), where_i + " <mass>", "value")
    if mass < 0.0:
        raise r.error(where_i + " <mass>", f"mass must be non-negative, got {mass}")
    t = _one(r, inert, "inertia", where_i, required=True)
    w = where_i + " <inertia>"
    v = {k: r.float1(t.get(k), w, k) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    I = np.array([[v["ixx"], v["ixy"], v["ixz"]],
                  [v["ixy"], v["iyy"], v["iyz"]],
                  [v["ixz"], v["iyz"], v["izz"]]])
    # rotate into the link frame (principal moments are unchanged); None
    # for a massless link (mass 0, zero inertia): a frame
    return r.inertia(mass, T.p, T.R @ I @ T.R.T, where)


def _limits(r, el, where, joint, required):
    lim = _one(r, el, "limit", where, required=required)
    if lim is None:
        return
    w = where + " <limit>"
    lo = r.float1(lim.get("lower"), w, "lower", 0.0)
    hi = r.float1(lim.get("upper"), w, "upper", 0.0)
    # effort/velocity are required by the spec but unused here: validated if present
    for k in ("effort", "velocity"):
        if lim.get(k) is not None:
            r.float1(lim.get(k), w, k)
    if lo > hi:
        # limits never enter the dynamics (only random_configuration reads
        # them); Pinocchio and MuJoCo load such files too
        r.lenient(w, f"lower limit {lo} is above upper limit {hi}",
                  "loaded without position limits")
        return
    joint.set_limits(lo, hi)


def load_urdf(path, floating_base=False, merge_fixed=True, gravity=(0.0, 0.0, -9.81), strict=False):
    """Load a URDF file into a :class:`gear.Model`.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.urdf`` file (plain URDF; xacro must be expanded first).
    floating_base : bool
        Attach the root link with a ``Free`` joint named ``"root"``, the
        root link being that joint's body.  Otherwise the root link is
        welded to the world and is not a body (as in Pinocchio and
        MuJoCo): its name stays in ``model.frames`` with body index ``-1``.
    merge_fixed : bool
        Merge links attached by ``fixed`` joints into their parent body
        (default) instead of making them ``Fixed`` bodies.
    gravity : array_like, shape (3,)
    strict : bool
        Raise for an inertia no rigid body can have (triangle inequality,
        rotational inertia without mass) instead of loading it with a
        :class:`gear.InertiaWarning`, and for a joint ``<limit>`` with
        ``lower > upper`` instead of loading the joint without limits
        (with a :class:`gear.ModelFileWarning`).

    Returns
    -------
    gear.Model
        With ``model.frames[link] = (body index, SE3 of the link in that
        body)`` for every link (body index ``-1``: welded to the world).

    Raises
    ------
    gear.ModelFileError
        For a malformed file (the message names the file and element):
        missing or undefined elements, non-finite numbers, tree defects,
        negative masses, clearly indefinite inertias (and, with
        ``strict=True``, physically impossible ones).
    OSError
        If the file cannot be read.

    Warns
    -----
    gear.InertiaWarning
        For a physically impossible inertia, naming the file and link.
    gear.ModelFileWarning
        For a ``<limit>`` with ``lower > upper``, naming the file and joint
        (limits never enter the dynamics; the joint loads without limits).

    Notes
    -----
    Massless links (mass 0 and zero inertia, or no ``<inertial>``) are
    frames.  Point masses (zero rotational inertia) are valid.  Principal
    moments down to ``-(1e-9 max|moment| + 1e-15 max(mass, 1))`` are
    rounding and are clipped to zero.  A movable joint that carries only
    massless links loads; forward dynamics then raises
    :class:`gear.SingularInertiaError` naming the joint.
    """
    path = os.fspath(path)
    r = Reader(path, strict=strict)
    root = parse_xml(path)
    if isinstance(root.tag, str) and root.tag.startswith("{"):
        # a default namespace on <robot> (Drake's files: xmlns="http://drake.mit.edu")
        # qualifies every unprefixed element; urdfdom reads them as plain URDF
        ns = root.tag[:root.tag.index("}") + 1]
        for el in root.iter():
            if isinstance(el.tag, str) and el.tag.startswith(ns):
                el.tag = el.tag[len(ns):]
    if root.tag != "robot":
        raise r.error("", f"root element is <{root.tag}>, expected <robot> (not a URDF file)")
    def xacro_in(el, inert):
        # unexpanded xacro elements: an error where they could define links,
        # joints or inertials; inside <visual>, <collision>, <material> or
        # <gazebo> (a stray <xacro:grey/>, as in robotisOP2) only a warning
        for c in list(el):
            if isinstance(c.tag, str) and c.tag.startswith("{") and "xacro" in c.tag:
                tag = "xacro:" + c.tag.split("}", 1)[1]
                if not inert:
                    raise r.error(f"element <{tag}>", "unexpanded xacro; run xacro on the file first")
                r.lenient(f"element <{tag}> in <{el.tag}>", "unexpanded xacro",
                          "left out (it sits where nothing of the dynamics is read)")
                el.remove(c)
                continue
            xacro_in(c, inert or c.tag in ("visual", "collision", "material", "gazebo"))

    xacro_in(root, False)

    # -- links ----------------------------------------------------------
    links = {}
    for el in root.findall("link"):
        name = el.get("name")
        if not name:
            raise r.error("<link>", "missing required attribute 'name'")
        if name in links:
            raise r.error(f"link {name!r}", "duplicate link name")
        links[name] = el
    if not links:
        raise r.error("<robot>", "no <link> elements")
    inertias = {name: _link_inertia(r, el, name) for name, el in links.items()}

    # -- joints ---------------------------------------------------------
    mimics = []       # (joint, source joint, multiplier, offset, where)
    jinfo = {}        # joint name -> (type, parent, child, placement, joint object)
    parent_of = {}    # child link -> joint name
    children = {name: [] for name in links}
    for el in root.findall("joint"):
        jname = el.get("name")
        if not jname:
            raise r.error("<joint>", "missing required attribute 'name'")
        where = f"joint {jname!r}"
        if jname in jinfo:
            raise r.error(where, "duplicate joint name")
        if jname == "root":
            raise r.error(where, "the joint name 'root' is reserved for the root link's joint")
        jtype = el.get("type")
        if jtype is None:
            raise r.error(where, "missing required attribute 'type'")
        if jtype not in _TYPES:
            raise r.error(where, f"unknown joint type {jtype!r} (expected one of {', '.join(_TYPES)})")
        ends = {}
        for tag in ("parent", "child"):
            e = _one(r, el, tag, where, required=True)
            ln = e.get("link")
            if not ln:
                raise r.error(where + f" <{tag}>", "missing required attribute 'link'")
            if ln not in links:
                raise r.error(where, f"{tag} link {ln!r} is not defined")
            ends[tag] = ln
        placement = _origin(r, el, where)
        ax_el = _one(r, el, "axis", where)
        ax_txt = None if ax_el is None else ax_el.get("xyz")
        if jtype in ("fixed", "floating"):   # axis unused: only check the numbers
            axis = r.floats(ax_txt, 3, where + " <axis>", "xyz", (1.0, 0.0, 0.0))
        else:
            axis = r.axis(ax_txt, where + " <axis>", "xyz")
        if jtype in ("revolute", "continuous"):
            joint = J.Revolute(axis)
        elif jtype == "prismatic":
            joint = J.Prismatic(axis)
        elif jtype == "floating":
            joint = J.Free()
        elif jtype == "planar":
            joint = J.Planar(axis)
        else:
            joint = J.Fixed()
        if jtype in ("revolute", "prismatic"):
            _limits(r, el, where, joint, required=True)
        mim = _one(r, el, "mimic", where)
        if mim is not None:
            src = mim.get("joint")
            if not src:
                raise r.error(where + " <mimic>", "missing required attribute 'joint'")
            mimics.append((jname, src, r.float1(mim.get("multiplier"), where + " <mimic>", "multiplier", 1.0),
                           r.float1(mim.get("offset"), where + " <mimic>", "offset", 0.0), where))
        child = ends["child"]
        if child in parent_of:
            raise r.error(f"link {child!r}",
                          f"has two parent joints ({parent_of[child]!r} and {jname!r})")
        parent_of[child] = jname
        children[ends["parent"]].append(jname)
        jinfo[jname] = (jtype, ends["parent"], child, placement, joint, where)

    # -- tree structure -------------------------------------------------
    roots = [name for name in links if name not in parent_of]
    if len(roots) > 1:
        raise r.error("<robot>", f"more than one root link (the links do not form one tree): "
                      f"{', '.join(repr(x) for x in roots)}")
    order = []
    if roots:
        # depth-first preorder, the joints below each link in the order of
        # their names: Pinocchio's joint order (urdfdom keeps a link's child
        # joints in its name-sorted map of joints), so q is laid out as there
        stack = [roots[0]]
        while stack:
            ln = stack.pop()
            order.append(ln)
            stack.extend(jinfo[j][2] for j in reversed(sorted(children[ln])))
    if len(order) < len(links):
        start = next(ln for ln in links if ln not in set(order))
        seen = []
        ln = start
        while ln not in seen:
            seen.append(ln)
            ln = jinfo[parent_of[ln]][1]
        cyc = seen[seen.index(ln):][::-1]   # parent -> child order
        raise r.error(f"joint {parent_of[ln]!r}", "the joints form a cycle through links "
                      + " -> ".join(repr(x) for x in cyc + cyc[:1]))

    # -- nodes ----------------------------------------------------------
    root_link = order[0]
    world_root = root_link == "world"
    if world_root and floating_base:
        raise r.error("link 'world'", "the root link is 'world' (fixed to the ground); "
                      "floating_base=True is not possible")
    if world_root and inertias["world"] is not None:
        r.lenient("link 'world'", "the world link has an <inertial>",
                  "the world does not move, so its inertia is left out (as Pinocchio does)")
        inertias["world"] = None
    for ln in links:
        if ln == "world" and not world_root:
            raise r.error("link 'world'", "'world' is reserved for the root link")
    nodes = []
    if not world_root:
        # fixed base: the root link is welded to the world (merged into it,
        # kept as a frame with body index -1); floating: the Free joint's body
        nodes.append(_Node(root_link, "world", J.Free() if floating_base else J.Fixed(), "root",
                           SE3(), inertias[root_link], merge=not floating_base,
                           where=f"link {root_link!r}"))
    for ln in order[1:]:
        jtype, parent, child, placement, joint, where = jinfo[parent_of[ln]]
        nodes.append(_Node(child, parent, joint, parent_of[ln], placement, inertias[child],
                           merge=(jtype == "fixed" and merge_fixed), where=where))
    model = Model(gravity=gravity)
    try:
        assemble(model, nodes, r)
    except ModelFileError:
        raise
    except ValueError as exc:  # pragma: no cover - defensive: Model rejected a name
        raise r.error("", str(exc)) from None
    # <mimic>: the joint keeps its coordinate; a coupler in model.loop_closures
    # ties it to the joint it mimics (used by gear.ConstrainedModel)
    from ..constraints.closures import JointCoupler

    for jname, src, mult, off, where in mimics:
        if src not in jinfo:
            # Pinocchio ignores <mimic> by default and loads such files
            warnings.warn(f"{path}: {where} <mimic>: mimics joint {src!r}, which is not defined; "
                          "the mimic is ignored", UserWarning, stacklevel=2)
            continue
        types = (jinfo[jname][0], jinfo[src][0])
        if "fixed" in types:
            continue        # a frozen coordinate (e.g. talos_reduced's grippers): nothing to couple
        if any(t not in ("revolute", "continuous", "prismatic") for t in types):
            raise r.error(where + " <mimic>", f"couples a {types[0]!r} joint to a {types[1]!r} "
                          "joint; mimic couples revolute, continuous and prismatic joints")
        model.loop_closures.append(JointCoupler(jname, src, mult, off, name=f"mimic:{jname}"))
    return model

"""Hand a gear model to Pinocchio: the same tree, the same coordinates.

Users comparing gear with Pinocchio (and gear's own tests and benchmarks,
where Pinocchio is an optional, independent reference) need the *same*
mechanism in both, including models built in Python or by
:mod:`gear.mechanisms` that have no URDF file.  :func:`to_pinocchio` builds
it joint by joint and returns a :class:`PinocchioMap` that translates states
and results between the two coordinate conventions.

Joint kinds map as follows (``q`` order is kept):

==============  ===============================================================
gear            Pinocchio
==============  ===============================================================
Revolute(a)     ``JointModelRevoluteUnaligned(a)``
Prismatic(a)    ``JointModelPrismaticUnaligned(a)``
Helical(a, h)   ``JointModelHelicalUnaligned(a, h)``
Cylindrical(a)  composite: revolute about ``a``, then prismatic along ``a``
Universal(a,b)  composite: revolute about ``a``, then revolute about ``b``
Planar(n)       composite: prismatic ``e1``, prismatic ``e2``, revolute ``n``
Spherical       ``JointModelSpherical``; quaternion ``(x, y, z, w)``
Free            ``JointModelFreeFlyer``; ``(p, x, y, z, w)``, velocity ``(v, w)``
Fixed           no joint: the body's inertia is appended to its parent joint
==============  ===============================================================

Each composite reproduces gear's ``J(q)`` exactly (``exp([a] q1) (0, q2 a)``
for cylindrical, ``exp([a] q1) exp([b] q2)`` for universal, ``(exp([n] q3),
q1 e1 + q2 e2)`` for planar), so body-frame velocities agree coordinate by
coordinate.  Pinocchio is imported lazily; it is an optional dependency (the
``reference`` extra).
"""
from __future__ import annotations

import numpy as np

from . import joints as J
from .spatial import SE3

__all__ = ["to_pinocchio", "to_mjcf", "mujoco_state_maps", "map_by_name", "PinocchioMap", "pinocchio_constraint_models",
           "pinocchio_constraint_problem", "pinocchio_constraint_dynamics"]


def _pin():
    try:
        import pinocchio
    except ImportError:  # pragma: no cover - exercised only without pin
        raise ImportError("gear.interop needs Pinocchio: pip install pin "
                          "(or gear[reference])") from None
    return pinocchio


def _joint_model(pin, joint):
    """The Pinocchio joint model reproducing ``joint``'s ``J(q)``."""
    if isinstance(joint, J.Revolute):
        return pin.JointModelRevoluteUnaligned(np.asarray(joint.axis, float))
    if isinstance(joint, J.Prismatic):
        return pin.JointModelPrismaticUnaligned(np.asarray(joint.axis, float))
    if isinstance(joint, J.Helical):
        # gear: translation pitch*q along the axis (length per radian); so
        # is Pinocchio's pitch.
        return pin.JointModelHelicalUnaligned(np.asarray(joint.axis, float), float(joint.pitch))
    if isinstance(joint, J.Cylindrical):
        c = pin.JointModelComposite(pin.JointModelRevoluteUnaligned(joint.axis))
        c.addJoint(pin.JointModelPrismaticUnaligned(joint.axis))
        return c
    if isinstance(joint, J.Universal):
        c = pin.JointModelComposite(pin.JointModelRevoluteUnaligned(joint.axis1))
        c.addJoint(pin.JointModelRevoluteUnaligned(joint.axis2))
        return c
    if isinstance(joint, J.Planar):
        c = pin.JointModelComposite(pin.JointModelPrismaticUnaligned(joint.e1))
        c.addJoint(pin.JointModelPrismaticUnaligned(joint.e2))
        c.addJoint(pin.JointModelRevoluteUnaligned(joint.normal))
        return c
    if isinstance(joint, J.Spherical):
        return pin.JointModelSpherical()
    if isinstance(joint, J.Free):
        return pin.JointModelFreeFlyer()
    raise TypeError(f"no Pinocchio equivalent for joint {joint!r}")


def _se3(pin, T):
    return pin.SE3(np.asarray(T.R, float).copy(), np.asarray(T.p, float).copy())


def _inertia(pin, I):
    if I is None:
        return pin.Inertia.Zero()
    return pin.Inertia(float(I.mass), np.asarray(I.com, float).copy(), np.asarray(I.I_com, float).copy())


class PinocchioMap:
    """Coordinates of a gear model and its Pinocchio twin (from :func:`to_pinocchio`).

    Attributes
    ----------
    pin_model : pinocchio.Model
    joint_id : ndarray of int, shape (nbodies,)
        Pinocchio joint whose body carries gear body ``i`` (a ``Fixed``
        body rides on its parent's joint; 0 is the universe).
    offset : list of gear.SE3, length nbodies
        Pose of gear body ``i``'s frame in that Pinocchio joint's frame
        (identity unless ``i`` hangs from fixed joints).
    P : ndarray, shape (nv, nv)
        Velocity map ``v_pin = P v_gear`` (a permutation).
    """

    def __init__(self, model, pin_model, joint_id, offset, qslices):
        self.model = model
        self.pin_model = pin_model
        self.joint_id = np.asarray(joint_id, dtype=np.int64)
        self.offset = offset
        self._qslices = qslices      # (gear q slice, pin q slice, kind)
        nv = model.nv
        self.P = np.zeros((nv, nv))
        for i, jt in enumerate(model.joints):
            if jt.nv == 0:
                continue
            gv = model.idx_v(model.joint_names[i])
            pv = pin_model.joints[int(self.joint_id[i])].idx_v
            if isinstance(jt, J.Free):     # pin (v, w) <- gear (w, v)
                for k in range(3):
                    self.P[pv + k, gv.start + 3 + k] = 1.0
                    self.P[pv + 3 + k, gv.start + k] = 1.0
            else:
                for k in range(jt.nv):
                    self.P[pv + k, gv.start + k] = 1.0

    def q(self, q):
        """Pinocchio configuration of gear's ``q``, shape ``(nq,)``."""
        q = np.asarray(q, float)
        out = np.zeros(self.pin_model.nq)
        for gs, ps, kind in self._qslices:
            x = q[gs]
            if kind == "free":
                out[ps] = np.concatenate([x[:3], x[4:7], x[3:4]])
            elif kind == "spherical":
                out[ps] = np.concatenate([x[1:4], x[0:1]])
            elif kind == "unbounded":     # Pinocchio's continuous joint: (cos, sin)
                out[ps] = [np.cos(x[0]), np.sin(x[0])]
            else:
                out[ps] = x
        return out

    def q_back(self, qp):
        """gear configuration of Pinocchio's ``qp``."""
        qp = np.asarray(qp, float)
        out = np.zeros(self.model.nq)
        for gs, ps, kind in self._qslices:
            x = qp[ps]
            if kind == "free":
                out[gs] = np.concatenate([x[:3], x[6:7], x[3:6]])
            elif kind == "spherical":
                out[gs] = np.concatenate([x[3:4], x[0:3]])
            elif kind == "unbounded":
                out[gs] = np.arctan2(x[1], x[0])
            else:
                out[gs] = x
        return out

    def v(self, v):
        """Pinocchio velocity (or acceleration, torque) of gear's, ``(nv,)``."""
        return self.P @ np.asarray(v, float)

    def v_back(self, vp):
        """gear velocity (or acceleration, torque) of Pinocchio's."""
        return self.P.T @ np.asarray(vp, float)

    def mat_back(self, Mp):
        """An ``(nv, nv)`` matrix in Pinocchio's coordinates, mapped to gear's
        (e.g. the mass matrix: ``P^T M_pin P``)."""
        return self.P.T @ np.asarray(Mp, float) @ self.P

    def body_placement(self, pin_data, i):
        """World pose ``(4, 4)`` of gear body ``i`` from Pinocchio's
        ``data.oMi`` (after ``forwardKinematics``)."""
        pin = _pin()
        T = pin_data.oMi[int(self.joint_id[i])] * _se3(pin, self.offset[i])
        return T.homogeneous

    def frame(self, body, placement=None):
        """``(pin joint id, pin.SE3)`` of a frame given on gear body ``body``
        (name, index or ``"world"``) by ``placement`` (gear.SE3 or None) —
        what Pinocchio's constraint models take."""
        pin = _pin()
        i = self.model.body_index(body)
        P = SE3() if placement is None else placement
        if i < 0:
            return 0, _se3(pin, P)
        return int(self.joint_id[i]), _se3(pin, self.offset[i] * P)


def map_by_name(model, pin_model, root_name="root_joint"):
    """Coordinate map between a gear model and a Pinocchio model of the same
    robot built independently (e.g. both loaded from one URDF file).

    Joints are matched by name (gear's ``"root"`` is Pinocchio's
    ``root_name``, the name ``buildModelFromUrdf`` gives a free-flyer root).
    Continuous URDF joints, which Pinocchio stores as ``(cos, sin)``, map to
    gear's single angle.  Bodies on ``Fixed`` joints (``merge_fixed=False``)
    ride on their parent's joint.

    Parameters
    ----------
    model : gear.Model
    pin_model : pinocchio.Model
    root_name : str

    Returns
    -------
    PinocchioMap

    Raises
    ------
    KeyError
        If a gear joint has no Pinocchio joint of that name.
    ValueError
        If matched joints have different numbers of coordinates.
    """
    nb = model.nbodies
    joint_id = np.zeros(nb, dtype=np.int64)
    offset = [None] * nb
    qslices = []
    names = list(pin_model.names)
    for i in range(nb):
        jt = model.joints[i]
        name = model.joint_names[i]
        parent = model.parents[i]
        if jt.nv == 0:
            joint_id[i] = 0 if parent < 0 else joint_id[parent]
            poff = SE3() if parent < 0 else offset[parent]
            offset[i] = poff * model.placements[i]
            continue
        pname = root_name if (name == "root" and name not in names) else name
        if pname not in names:
            raise KeyError(f"joint {name!r} of the gear model has no Pinocchio joint of that name")
        jid = names.index(pname)
        jm = pin_model.joints[jid]
        short = jm.shortname()
        if isinstance(jt, J.Free):
            kind = "free"
        elif isinstance(jt, J.Spherical):
            kind = "spherical"
        elif short.startswith("JointModelRUB") and jt.nq == 1:
            kind = "unbounded"
        else:
            kind = "vec"
        want = {"free": 7, "spherical": 4, "unbounded": 2}.get(kind, jt.nq)
        if jm.nq != want or jm.nv != jt.nv:
            raise ValueError(f"joint {name!r}: gear has nq={jt.nq}, nv={jt.nv}; Pinocchio's "
                             f"{short} has nq={jm.nq}, nv={jm.nv}")
        joint_id[i] = jid
        offset[i] = SE3()
        qslices.append((model.idx_q(name), slice(jm.idx_q, jm.idx_q + jm.nq), kind))
    return PinocchioMap(model, pin_model, joint_id, offset, qslices)


def to_pinocchio(model):
    """Build the Pinocchio model of a gear model.

    Parameters
    ----------
    model : gear.Model
        Any tree; every joint kind is supported (see the module docstring).

    Returns
    -------
    pin_model : pinocchio.Model
        Same bodies, inertias, placements and gravity.  Joint names are
        gear's joint names; ``nq``/``nv`` equal gear's.
    mapping : PinocchioMap
        Converts ``q``, ``v``, matrices and frames between the two.

    Examples
    --------
    >>> import numpy as np, gear
    >>> from gear.interop import to_pinocchio
    >>> m = gear.load_urdf(gear.data_path("arm7.urdf"))
    >>> pm, mp = to_pinocchio(m)
    >>> (pm.nq, pm.nv) == (m.nq, m.nv)
    True
    """
    pin = _pin()
    pm = pin.Model()
    pm.name = "gear"
    pm.gravity = pin.Motion(np.asarray(model.gravity, float), np.zeros(3))  # (linear, angular)
    nb = model.nbodies
    joint_id = np.zeros(nb, dtype=np.int64)
    offset = [None] * nb
    qslices = []
    # Pinocchio's algorithms (CRBA among them) need every subtree to be a
    # contiguous range of joints: add the bodies in depth-first order.
    children = [[] for _ in range(nb + 1)]
    for i in range(nb):
        children[model.parents[i] + 1].append(i)
    order, stack = [], children[0][::-1]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(children[i + 1][::-1])
    for i in order:
        jt = model.joints[i]
        parent = model.parents[i]
        pj = 0 if parent < 0 else int(joint_id[parent])
        poff = SE3() if parent < 0 else offset[parent]
        placement = poff * model.placements[i]
        name = model.joint_names[i]
        if jt.nv == 0:
            # Fixed: the body rides on the parent's joint
            joint_id[i] = pj
            offset[i] = placement
            if model.inertias[i] is not None:
                pm.appendBodyToJoint(pj, _inertia(pin, model.inertias[i]), _se3(pin, placement))
            continue
        jid = pm.addJoint(pj, _joint_model(pin, jt), _se3(pin, placement), name)
        joint_id[i] = jid
        offset[i] = SE3()
        pm.appendBodyToJoint(jid, _inertia(pin, model.inertias[i]), pin.SE3.Identity())
        kind = "free" if isinstance(jt, J.Free) else "spherical" if isinstance(jt, J.Spherical) else "vec"
        iq = pm.joints[jid].idx_q
        qslices.append((model.idx_q(name), slice(iq, iq + jt.nq), kind))
    if pm.nq != model.nq or pm.nv != model.nv:  # pragma: no cover - a mapping bug
        raise RuntimeError(f"Pinocchio model has nq={pm.nq}, nv={pm.nv}; gear has {model.nq}, {model.nv}")
    return pm, PinocchioMap(model, pm, joint_id, offset, qslices)


_PIN_CONTACT = {"weld": "CONTACT_6D", "ball": "CONTACT_3D"}


def pinocchio_constraint_models(mapping, closures):
    """Pinocchio ``RigidConstraintModel`` objects of gear loop closures.

    Parameters
    ----------
    mapping : PinocchioMap
        From :func:`to_pinocchio`.
    closures : sequence
        Objects with ``kind``, ``body_a``, ``placement_a``, ``body_b``,
        ``placement_b`` (``gear.LoopClosure`` or the ``model.loop_closures``
        read from MJCF).  Pinocchio has the two kinds ``"weld"`` (6-D
        contact) and ``"ball"`` (3-D contact); others raise ``ValueError``.

    Returns
    -------
    list of pinocchio.RigidConstraintModel
        Frame {A} is Pinocchio's first frame, {B} its second, in the LOCAL
        reference frame.
    """
    pin = _pin()
    out = []
    for k, c in enumerate(closures):
        kind = getattr(c, "kind", None)
        if kind not in _PIN_CONTACT:
            raise ValueError(f"closures[{k}] has kind {kind!r}; Pinocchio's rigid constraints "
                             f"cover {sorted(_PIN_CONTACT)} only")
        j1, P1 = mapping.frame(c.body_a, c.placement_a)
        j2, P2 = mapping.frame(c.body_b, c.placement_b)
        ct = getattr(pin.ContactType, _PIN_CONTACT[kind])
        out.append(pin.RigidConstraintModel(ct, mapping.pin_model, j1, P1, j2, P2,
                                            pin.ReferenceFrame.LOCAL))
    return out


def pinocchio_constraint_problem(model, closures, mapping=None):
    """The objects Pinocchio's constrained dynamics (``constraintDynamics``
    and its derivatives) take for ``model`` closed by ``closures``, with
    ``initConstraintDynamics`` done.

    Parameters
    ----------
    model : gear.Model
    closures : sequence
        See :func:`pinocchio_constraint_models`.
    mapping : PinocchioMap, optional
        From :func:`to_pinocchio` (built when absent).

    Returns
    -------
    pin_model, pin_data, constraint_models, constraint_datas, mapping
        The last four as Pinocchio's ``createData()``,
        ``StdVec_RigidConstraintModel`` and ``StdVec_RigidConstraintData``
        and the :class:`PinocchioMap` of the coordinates.
    """
    pin = _pin()
    if mapping is None:
        _, mapping = to_pinocchio(model)
    pm = mapping.pin_model
    pd = pm.createData()
    cms = pin.StdVec_RigidConstraintModel()
    cds = pin.StdVec_RigidConstraintData()
    for cm in pinocchio_constraint_models(mapping, closures):
        cms.append(cm)
        cds.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, cms, cds)
    return pm, pd, cms, cds, mapping


def pinocchio_constraint_dynamics(model, closures, q, dq, tau, mapping=None, mu=0.0,
                                  accuracy=1e-14, max_iter=100):
    """Constrained forward dynamics by Pinocchio's ``constraintDynamics``.

    An independent reference for closed loops of weld and ball closures:
    builds the Pinocchio twin of ``model`` (unless ``mapping`` is given),
    solves, and maps ``ddq`` back to gear's coordinates.

    Parameters
    ----------
    model : gear.Model
    closures : sequence
        See :func:`pinocchio_constraint_models`.
    q : array_like, shape (nq,)
        A configuration that closes every loop.
    dq, tau : array_like, shape (nv,)
        ``dq`` must satisfy ``A dq = 0``.
    mapping : PinocchioMap, optional
    mu : float
        Pinocchio's proximal parameter; 0 solves the KKT system exactly
        (rows must then be independent), ``mu > 0`` handles redundant rows
        at an accuracy set by ``accuracy`` and ``max_iter``.

    Returns
    -------
    ddq : ndarray, shape (nv,)
    """
    pin = _pin()
    pm, pd, cms, cds, mapping = pinocchio_constraint_problem(model, closures, mapping)
    prox = pin.ProximalSettings(accuracy, mu, max_iter)
    ddq = pin.constraintDynamics(pm, pd, mapping.q(q), mapping.v(dq), mapping.v(tau), cms, cds, prox)
    return mapping.v_back(ddq)


# ---------------------------------------------------------------------------
# MuJoCo: the same mechanism as MJCF (benchmarks, users comparing engines)
# ---------------------------------------------------------------------------
def to_mjcf(model_or_sys, name="gear_model"):
    """MJCF text of a tree (and its ball/weld loop closures) for MuJoCo.

    Each body becomes a ``<body>`` at its placement, with its joint:
    ``hinge`` (Revolute), ``slide`` (Prismatic), ``ball`` (Spherical),
    ``freejoint`` (Free) or none (Fixed).  Inertias become ``<inertial>``
    (mass, centre of mass, full inertia about it).  ``"ball"`` and
    ``"weld"`` closures become ``<equality><connect>``/``<weld>`` between
    sites at the two closure frames, which MuJoCo enforces as soft
    constraints.  Gravity is kept.  Each joint's coordinates equal gear's
    (same body frames at ``q = 0``, quaternions ``(w, x, y, z)``), but
    MuJoCo orders the joints depth-first: map states with
    :func:`mujoco_state_maps`.

    Parameters
    ----------
    model_or_sys : gear.Model or gear.ConstrainedModel

    Returns
    -------
    str

    Raises
    ------
    NotImplementedError
        For joint kinds MuJoCo has no single joint for (helical,
        cylindrical, universal, planar), other closure kinds, Python
        constraints, and massless bodies with a joint.
    """
    from .constraints import ConstrainedModel, LoopClosure
    from .joints import FIXED, FREE, PRISMATIC, REVOLUTE, SPHERICAL
    from .spatial import rot_to_quat

    sys = model_or_sys if isinstance(model_or_sys, ConstrainedModel) else None
    model = sys.model if sys is not None else model_or_sys

    def fmt(x):
        return " ".join(f"{float(v):.17g}" for v in np.ravel(x))

    sites = {i: [] for i in range(-1, model.nbodies)}
    eq = []
    if sys is not None:
        for k, c in enumerate(sys.constraints):
            if not isinstance(c, LoopClosure) or c.kind not in ("ball", "weld"):
                raise NotImplementedError(f"constraints[{k}]: only ball and weld loop closures map to "
                                          f"MuJoCo equality constraints, got {getattr(c, 'kind', type(c).__name__)!r}")
            ia, ib = sys._bodies[k]
            for side, b, P in (("a", ia, c.placement_a), ("b", ib, c.placement_b)):
                sites[b].append(f'<site name="c{k}_{side}" pos="{fmt(P.p)}" quat="{fmt(rot_to_quat(P.R))}"/>')
            tag = "connect" if c.kind == "ball" else "weld"
            eq.append(f'<{tag} site1="c{k}_a" site2="c{k}_b"/>')
    children = {i: [] for i in range(-1, model.nbodies)}
    for i, p in enumerate(model.parents):
        children[p].append(i)

    def open_body(i, indent):
        pad = "  " * indent
        j, P, I = model.joints[i], model.placements[i], model.inertias[i]
        jn = model.joint_names[i]
        lines = [f'{pad}<body name="{model.body_names[i]}" pos="{fmt(P.p)}" quat="{fmt(rot_to_quat(P.R))}">']
        if j.kind == REVOLUTE:
            lines.append(f'{pad}  <joint name="{jn}" type="hinge" axis="{fmt(j.axis)}"/>')
        elif j.kind == PRISMATIC:
            lines.append(f'{pad}  <joint name="{jn}" type="slide" axis="{fmt(j.axis)}"/>')
        elif j.kind == SPHERICAL:
            lines.append(f'{pad}  <joint name="{jn}" type="ball"/>')
        elif j.kind == FREE:
            lines.append(f'{pad}  <freejoint name="{jn}"/>')
        elif j.kind != FIXED:
            raise NotImplementedError(f"joint {jn!r} ({type(j).__name__}) has no single MuJoCo joint")
        if I is None or I.mass <= 0.0:
            if j.kind != FIXED:
                raise NotImplementedError(f"body {model.body_names[i]!r} is massless; MuJoCo needs mass "
                                          "on bodies with joints")
        else:
            Ic = I.I_com
            full = [Ic[0, 0], Ic[1, 1], Ic[2, 2], Ic[0, 1], Ic[0, 2], Ic[1, 2]]
            lines.append(f'{pad}  <inertial pos="{fmt(I.com)}" mass="{I.mass:.17g}" fullinertia="{fmt(full)}"/>')
        lines += [f"{pad}  {s_}" for s_ in sites[i]]
        return lines

    def bodies():
        # depth-first without recursion (chains of thousands of bodies)
        lines = []
        stack = [(ch, 2, False) for ch in reversed(children[-1])]
        while stack:
            i, indent, closing = stack.pop()
            if closing:
                lines.append("  " * indent + "</body>")
                continue
            lines += open_body(i, indent)
            stack.append((i, indent, True))
            stack += [(ch, indent + 1, False) for ch in reversed(children[i])]
        return lines

    out = [f'<mujoco model="{name}">',
           '  <compiler angle="radian" autolimits="true"/>',
           f'  <option gravity="{fmt(model.gravity)}"/>',
           "  <worldbody>"]
    out += [f"    {s}" for s in sites[-1]]
    out += bodies()
    out.append("  </worldbody>")
    if eq:
        out += ["  <equality>"] + [f"    {e}" for e in eq] + ["  </equality>"]
    out.append("</mujoco>")
    return "\n".join(out)


def mujoco_state_maps(model, mj_model):
    """Index maps between gear's coordinates and those of the MuJoCo model
    built from :func:`to_mjcf` (MuJoCo numbers bodies depth-first, gear in
    insertion order; joints are matched by name): ``qpos[iq] = q`` and
    ``qvel[iv] = dq`` (also for ``qacc``, ``qfrc_applied``).

    Returns
    -------
    iq : ndarray of int, shape (nq,)
    iv : ndarray of int, shape (nv,)
    """
    import mujoco

    from .joints import FREE

    for i, j in enumerate(model.joints):
        if j.kind == FREE:
            raise NotImplementedError(
                f"joint {model.joint_names[i]!r} is free: MuJoCo's free-joint velocity is (world linear "
                "velocity, body angular velocity), gear's the body twist (angular, linear), so no index "
                "map relates them")
    iq = np.empty(model.nq, dtype=int)
    iv = np.empty(model.nv, dtype=int)
    for i, name in enumerate(model.joint_names):
        j = model.joints[i]
        if j.nv == 0:
            continue
        jid = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if jid < 0:
            raise KeyError(f"the MuJoCo model has no joint named {name!r}")
        a, b = model._iq[i], model._iv[i]
        iq[a:a + j.nq] = mj_model.jnt_qposadr[jid] + np.arange(j.nq)
        iv[b:b + j.nv] = mj_model.jnt_dofadr[jid] + np.arange(j.nv)
    return iq, iv

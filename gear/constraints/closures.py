"""Loop closures and custom constraints (Kim Sec. 3, eqs. 54-55).

A closed chain is a spanning tree plus constraints ``A(q) dq = 0``.  A
:class:`LoopClosure` ties frame {A} (``placement_a`` on ``body_a``) to frame
{B} (``placement_b`` on ``body_b``); each kind keeps some relative motions
closed (row counts in :data:`KINDS`, the table in ``docs/constraints.md``).
Every row is a scalar function ``g`` of the world poses of {A} and {B}; its
velocity row and its ``dA dq`` bias are the
exact first and second time derivatives of ``g`` (with ``ddq = 0``), so

* the rows are ``A = dg/dq`` in gear's tangent space (right perturbation),
* ``A ddq + dA dq = d^2 g / dt^2``,

and both are checked against finite differences in the tests.  Three row
types build every kind (``u_A``, ``w_B``: unit axes of the frames in the
world; ``d = p_B - p_A``):

=========  ==========================  ==========================================
row        position residual ``g``     velocity row ``dg/dt``
=========  ==========================  ==========================================
``pos``    ``e_k . d``                 ``e_k . (v_B - v_A)``
``axis``   ``u_A . d``                 ``(u_A x d) . w_A + u_A . (v_B - v_A)``
``dot``    ``u_A . w_B``               ``(w_B x u_A) . (w_B' - w_A')``
``dist``   ``|d| - L``                 ``d/|d| . (v_B - v_A)``
=========  ==========================  ==========================================

(``v``: world velocity of a frame origin, ``w``: world angular velocity).

==============  ====  =========================================================
kind            rows  rows used
==============  ====  =========================================================
``weld``        6     ``pos`` x, y, z; ``dot`` y_A.z_B, z_A.x_B, x_A.y_B
``ball``        3     ``pos`` x, y, z
``revolute``    5     ``pos`` x, y, z; ``dot`` x_A.z_B, y_A.z_B
``universal``   4     ``pos`` x, y, z; ``dot`` x_A.y_B
``cylindrical`` 4     ``axis`` x_A.d, y_A.d; ``dot`` x_A.z_B, y_A.z_B
``prismatic``   5     ``axis`` x_A.d, y_A.d; ``dot`` y_A.z_B, z_A.x_B, x_A.y_B
``planar``      3     ``axis`` z_A.d; ``dot`` x_A.z_B, y_A.z_B
``distance``    1     ``dist``
==============  ====  =========================================================

The orientation rows vanish when the frames are aligned; they also vanish
at some half-turn and 120-degree turns of one frame, so
:meth:`ConstrainedModel.assemble` should start near the intended assembly
(as every Newton method must); it raises where a weld or prismatic
closure ends turned apart.
"""
from __future__ import annotations

import numpy as np

from ..spatial import SE3

__all__ = ["LoopClosure", "CustomConstraint", "JointCoupler", "KINDS"]

#: rows of each kind: (type, a, b) with a, b axis indices (0 x, 1 y, 2 z)
_ROWS = {
    "weld": [("pos", 0, None), ("pos", 1, None), ("pos", 2, None),
             ("dot", 1, 2), ("dot", 2, 0), ("dot", 0, 1)],
    "ball": [("pos", 0, None), ("pos", 1, None), ("pos", 2, None)],
    "revolute": [("pos", 0, None), ("pos", 1, None), ("pos", 2, None),
                 ("dot", 0, 2), ("dot", 1, 2)],
    "universal": [("pos", 0, None), ("pos", 1, None), ("pos", 2, None), ("dot", 0, 1)],
    "cylindrical": [("axis", 0, None), ("axis", 1, None), ("dot", 0, 2), ("dot", 1, 2)],
    "prismatic": [("axis", 0, None), ("axis", 1, None),
                  ("dot", 1, 2), ("dot", 2, 0), ("dot", 0, 1)],
    "planar": [("axis", 2, None), ("dot", 0, 2), ("dot", 1, 2)],
    "distance": [("dist", None, None)],
}

#: loop-closure kinds and their row counts
KINDS = {k: len(v) for k, v in _ROWS.items()}


def _placement(name, P):
    if P is None:
        return SE3()
    if isinstance(P, SE3):
        return P
    try:
        return SE3.from_matrix(np.asarray(P, dtype=float))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name} must be a gear.SE3, a (4, 4) rigid transform or None: {exc}") from None


class LoopClosure:
    """A loop closure between frame {A} on ``body_a`` and frame {B} on ``body_b``.

    Parameters
    ----------
    body_a, body_b : str or int
        Body names or indices, or ``"world"``.  Resolved against the model
        when the closure is added to a :class:`gear.ConstrainedModel`.
    placement_a, placement_b : gear.SE3 or (4, 4) array or None
        Pose of frame {A} in ``body_a``'s frame (of {B} in ``body_b``'s);
        ``None`` is the identity.
    kind : str
        One of ``"weld"``, ``"ball"``, ``"revolute"``, ``"universal"``,
        ``"cylindrical"``, ``"prismatic"``, ``"planar"``, ``"distance"``
        (see the module docstring for what each keeps closed).
    name : str, optional
    distance : float, optional
        For ``kind="distance"``: the rod length ``L > 0``.  Default: the
        distance at the configuration passed to
        :meth:`gear.ConstrainedModel.assemble` (or at the model's neutral
        configuration when the constrained model is built).

    Examples
    --------
    >>> import gear
    >>> c = gear.LoopClosure("rocker", gear.SE3(p=[0.4, 0, 0]), "world", None, "ball")
    >>> c.nrows
    3
    """

    def __init__(self, body_a, placement_a, body_b, placement_b, kind, name=None, **params):
        if not isinstance(kind, str) or kind not in _ROWS:
            raise ValueError(f"kind must be one of {sorted(_ROWS)}, got {kind!r}")
        for arg, b in (("body_a", body_a), ("body_b", body_b)):
            if not (isinstance(b, str) or (isinstance(b, (int, np.integer)) and not isinstance(b, bool))):
                raise TypeError(f"{arg} must be a body name, a body index or 'world', got {b!r}")
        if body_a == body_b and not isinstance(body_a, bool):
            raise ValueError(f"body_a and body_b are the same body ({body_a!r}): a closure "
                             "ties two different bodies (or a body and 'world')")
        unknown = set(params) - ({"distance"} if kind == "distance" else set())
        if unknown:
            raise TypeError(f"unexpected parameter(s) {sorted(unknown)} for kind {kind!r}"
                            + (" (only 'distance' takes distance=)" if "distance" in unknown else ""))
        self.kind = kind
        self.body_a, self.body_b = body_a, body_b
        self.placement_a = _placement("placement_a", placement_a)
        self.placement_b = _placement("placement_b", placement_b)
        self.name = name
        self.params = dict(params)
        if kind == "distance" and params.get("distance") is not None:
            L = float(params["distance"])
            if not np.isfinite(L) or L <= 0.0:
                raise ValueError(f"distance must be positive and finite, got {params['distance']!r}")
            self.params["distance"] = L

    @property
    def nrows(self):
        """Number of constraint rows (``KINDS[kind]``)."""
        return KINDS[self.kind]

    @property
    def holonomic(self):
        return True

    @classmethod
    def from_spec(cls, spec):
        """From a :class:`gear.LoopClosureSpec` read from a model file."""
        return cls(spec.body_a, spec.placement_a, spec.body_b, spec.placement_b, spec.kind,
                   name=spec.name)

    def __repr__(self):
        return (f"LoopClosure({self.body_a!r}, {self.body_b!r}, kind={self.kind!r}"
                + (f", name={self.name!r}" if self.name else "") + ")")


class CustomConstraint:
    """Any constraint ``A(q) dq = 0`` given by functions (holonomic or not).

    Parameters
    ----------
    jacobian : callable
        ``jacobian(q) -> (m, nv)``: the rows ``A(q)``.
    bias : callable
        ``bias(q, dq) -> (m,)``: ``dA dq`` (so that ``A ddq + dA dq = 0``).
    residual : callable or None
        ``residual(q) -> (m,)`` for a holonomic constraint (zero when
        satisfied); ``None`` for a nonholonomic one (e.g. a rolling ball).
    name : str, optional
    jacobian_derivative : callable, optional
        ``jacobian_derivative(q) -> (nv, m, nv)``: entry ``k`` is the
        derivative of ``jacobian`` along the tangent direction ``q (+) eps
        e_k``.  Used by the closed-chain derivatives
        (:meth:`gear.ConstrainedModel.forward_dynamics_derivatives`); when
        absent they take central differences of ``jacobian`` (step 1e-6,
        about 1e-10 relative error).
    bias_derivative : callable, optional
        ``bias_derivative(q, dq) -> (dbias_dq, dbias_ddq)``, each (m, nv);
        central differences of ``bias`` when absent.
    """

    def __init__(self, jacobian, bias, residual=None, name=None, jacobian_derivative=None,
                 bias_derivative=None):
        for arg, f in (("jacobian", jacobian), ("bias", bias)):
            if not callable(f):
                raise TypeError(f"{arg} must be callable, got {type(f).__name__}")
        for arg, f in (("residual", residual), ("jacobian_derivative", jacobian_derivative),
                       ("bias_derivative", bias_derivative)):
            if f is not None and not callable(f):
                raise TypeError(f"{arg} must be callable or None, got {type(f).__name__}")
        self.jacobian, self.bias, self.residual = jacobian, bias, residual
        self.jacobian_derivative, self.bias_derivative = jacobian_derivative, bias_derivative
        self.name = name
        self.kind = "custom"

    @property
    def holonomic(self):
        return self.residual is not None

    def __repr__(self):
        return f"CustomConstraint(name={self.name!r}, holonomic={self.holonomic})"


class JointCoupler:
    """A linear coupling of two one-coordinate joints,
    ``q[joint] = multiplier * q[source] + offset`` (one holonomic row).

    URDF ``<mimic>`` joints load as couplers in ``model.loop_closures`` (the
    joint keeps its own coordinate in the tree; the coupler ties it to the
    joint it mimics when the model is used in a
    :class:`gear.ConstrainedModel`).

    Parameters
    ----------
    joint, source : str
        Joint names (revolute, prismatic or helical joints).
    multiplier, offset : float
    name : str, optional
    """

    kind = "coupler"

    def __init__(self, joint, source, multiplier=1.0, offset=0.0, name=None):
        for arg, v in (("joint", joint), ("source", source)):
            if not isinstance(v, str) or not v:
                raise TypeError(f"{arg} must be a joint name, got {v!r}")
        if joint == source:
            raise ValueError(f"joint {joint!r} cannot be coupled to itself")
        self.joint, self.source = joint, source
        self.multiplier, self.offset = float(multiplier), float(offset)
        if not (np.isfinite(self.multiplier) and np.isfinite(self.offset)):
            raise ValueError("multiplier and offset must be finite")
        self.name = name or f"{joint}={self.multiplier:g}*{source}{self.offset:+g}"

    @property
    def holonomic(self):
        return True

    def __repr__(self):
        return (f"JointCoupler({self.joint!r}, {self.source!r}, multiplier={self.multiplier}, "
                f"offset={self.offset})")

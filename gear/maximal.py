"""The maximal-coordinate view of a model: every body a free rigid body.

In maximal coordinates (seed 004, Sec. 3) a body's state is its world pose
``T_i`` and body twist ``V_i``; joints are constraints between bodies.
:func:`from_reduced` maps joint coordinates ``(q, dq)`` to that view and
:func:`to_reduced` maps it back, checking that the poses respect every
joint.  (The maximal-coordinate *solver* is issue #10's next step.)
"""
from __future__ import annotations

import numpy as np

from . import joints as J
from ._validate import as_array
from .spatial import rot_to_quat

__all__ = ["from_reduced", "to_reduced"]


def from_reduced(model, q, dq=None):
    """Body poses (and twists) of a joint-space state.

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq : array_like, shape (nv,) or (N, nv), optional

    Returns
    -------
    poses : ndarray, shape (nbodies, 4, 4) (or (N, nbodies, 4, 4))
        World poses ``T_i``.
    twists : ndarray, shape (nbodies, 6) (or (N, nbodies, 6))
        Body twists ``(w, v)`` in body coordinates; only when ``dq`` is given.
    """
    from .algorithms import forward_kinematics

    return forward_kinematics(model, q, dq)


def _angle_about(R, a):
    """Angle ``t`` with ``R = exp([a] t)`` (``a`` unit), and the residual of
    that fit (``|R - exp([a] t)|``)."""
    from .spatial import exp_so3

    s = 0.5 * a @ np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    c = 0.5 * (np.trace(R) - 1.0)
    t = float(np.arctan2(s, c))
    return t, float(np.abs(R - exp_so3(a * t)).max())


def _joint_coords(joint, X, name, tol):
    """Coordinates ``q`` with ``J(q) = X`` (a 4x4 relative transform)."""
    from .spatial import exp_so3

    R, p = X[:3, :3], X[:3, 3]
    scale = max(1.0, float(np.abs(p).max()))

    def bad(what, err):
        raise ValueError(f"joint {name!r} ({type(joint).__name__}): the poses violate the joint "
                         f"({what} off by {err:.3g}); they are not a configuration of the tree")

    if isinstance(joint, J.Fixed):
        err = max(float(np.abs(R - np.eye(3)).max()), float(np.abs(p).max()) / scale)
        if err > tol:
            bad("relative pose", err)
        return np.zeros(0)
    if isinstance(joint, J.Revolute):
        t, err = _angle_about(R, joint.axis)
        err = max(err, float(np.abs(p).max()) / scale)
        if err > tol:
            bad("rotation about the axis / translation", err)
        return np.array([t])
    if isinstance(joint, J.Prismatic):
        d = float(joint.axis @ p)
        err = max(float(np.abs(R - np.eye(3)).max()), float(np.abs(p - d * joint.axis).max()) / scale)
        if err > tol:
            bad("translation along the axis / rotation", err)
        return np.array([d])
    if isinstance(joint, J.Helical):
        t, err = _angle_about(R, joint.axis)
        if joint.pitch != 0.0:
            t = float(joint.axis @ p) / joint.pitch            # unique, unlike the angle
            err = max(float(np.abs(R - exp_so3(joint.axis * t)).max()), 0.0)
        err = max(err, float(np.abs(p - joint.pitch * t * joint.axis).max()) / scale)
        if err > tol:
            bad("screw motion", err)
        return np.array([t])
    if isinstance(joint, J.Cylindrical):
        t, err = _angle_about(R, joint.axis)
        d = float(joint.axis @ p)
        err = max(err, float(np.abs(p - d * joint.axis).max()) / scale)
        if err > tol:
            bad("rotation about / translation along the axis", err)
        return np.array([t, d])
    if isinstance(joint, J.Universal):
        a1, a2 = joint.axis1, joint.axis2
        # R a2 = exp([a1] q1) a2: q1 turns a2's part normal to a1 onto (R a2)'s
        u = a2 - a1 * (a1 @ a2)
        w = R @ a2 - a1 * (a1 @ (R @ a2))
        q1 = float(np.arctan2(a1 @ np.cross(u, w), u @ w))
        q2, err = _angle_about(exp_so3(a1 * q1).T @ R, a2)
        err = max(err, float(np.abs(p).max()) / scale)
        if err > tol:
            bad("two rotations", err)
        return np.array([q1, q2])
    if isinstance(joint, J.Planar):
        t, err = _angle_about(R, joint.normal)
        err = max(err, abs(float(joint.normal @ p)) / scale)
        if err > tol:
            bad("in-plane motion", err)
        return np.array([float(joint.e1 @ p), float(joint.e2 @ p), t])
    if isinstance(joint, J.Spherical):
        if float(np.abs(p).max()) / scale > tol:
            bad("translation", float(np.abs(p).max()))
        return rot_to_quat(R)
    if isinstance(joint, J.Free):
        return np.concatenate([p, rot_to_quat(R)])
    raise TypeError(f"joint {name!r}: unsupported joint kind {type(joint).__name__}")


def to_reduced(model, poses, twists=None, tol=1e-9):
    """Joint coordinates of body poses (and joint velocities of body twists).

    Parameters
    ----------
    model : gear.Model
    poses : array_like, shape (nbodies, 4, 4)
        World poses of the bodies (rigid transforms).
    twists : array_like, shape (nbodies, 6), optional
        Body twists ``(w, v)``.
    tol : float
        Largest violation of a joint (relative) accepted.

    Returns
    -------
    q : ndarray, shape (nq,)
        Angles in ``(-pi, pi]``; quaternions with ``w >= 0``.
    dq : ndarray, shape (nv,)
        Only when ``twists`` is given: ``(S^T S)^{-1} S^T (V_i - Ad V_parent)``.

    Raises
    ------
    ValueError
        When the poses are not rigid transforms or violate a joint (the
        message names the joint), or for wrong shapes / non-finite values.
    """
    from .constraints._kinematics import _adj

    nb = model.nbodies
    P = as_array("poses", poses, (nb, 4, 4))
    for i in range(nb):
        R = P[i, :3, :3]
        err = float(np.abs(R.T @ R - np.eye(3)).max())
        if err > 1e-9 or np.linalg.det(R) < 0 or np.abs(P[i, 3] - [0, 0, 0, 1]).max() > 1e-12:
            raise ValueError(f"poses[{i}] (body {model.body_names[i]!r}) is not a rigid transform "
                             f"(|R^T R - 1| = {err:.2e})")
    V = None if twists is None else as_array("twists", twists, (nb, 6))
    q = np.zeros(model.nq)
    dq = np.zeros(model.nv)
    for i, joint in enumerate(model.joints):
        name = model.joint_names[i]
        par = model.parents[i]
        Tp = np.eye(4) if par < 0 else P[par]
        Pl = model.placements[i].homogeneous()
        X = np.linalg.inv(Pl) @ np.linalg.inv(Tp) @ P[i]           # J(q_i)
        q[model.idx_q(name)] = _joint_coords(joint, X, name, tol)
        if V is not None and joint.nv:
            S = joint.S(q[model.idx_q(name)])
            Xf = Tp @ Pl @ X                                         # = P[i]
            Tpi = np.linalg.inv(Xf) @ Tp                             # T_{i, parent}
            Vp = np.zeros(6) if par < 0 else V[par]
            rel = V[i] - _adj(Tpi[:3, :3], Tpi[:3, 3]) @ Vp
            x, *_ = np.linalg.lstsq(S, rel, rcond=None)
            if np.abs(S @ x - rel).max() > tol * max(1.0, np.abs(rel).max()):
                raise ValueError(f"joint {name!r}: twists[{i}] moves body {model.body_names[i]!r} "
                                 "in a direction the joint does not allow")
            dq[model.idx_v(name)] = x
    return (q, dq) if V is not None else q

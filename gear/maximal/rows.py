"""Constraint rows in maximal coordinates, straight from body poses and
twists (Ruan, "Articulated rigid body systems", Sec. 3: a joint keeps the
relative motions it does not allow at zero, eqs. 4-8).

Every tree joint and every loop closure ties a frame {A} on one body (or
the world) to a frame {B} on another.  Each scalar row is a function ``g``
of the two frames' world poses, of one of five types (``u_A``, ``w_B``:
unit axes of the frames in the world; ``d = p_B - p_A``):

=========  ====================================  ==============================
type       position residual ``g``               used by
=========  ====================================  ==============================
``pos``    ``e_k . d``                           points that coincide
``axis``   ``u_A . d``                           points on a line or plane
``dot``    ``u_A . w_B - c``                     axes kept perpendicular
``dist``   ``|d| - L``                           distance closures
``helix``  ``z_A . d - h theta``                 the helical joint's screw
=========  ====================================  ==============================

(``theta``: the angle of {B} about ``z_A``).  A tree joint with ``k``
degrees of freedom gives ``6 - k`` rows:

===============  ===========================================================
joint            rows ({A}: the joint frame on the parent, ``z`` = the axis;
                 {B}: the child's body frame)
===============  ===========================================================
Fixed            ``pos`` x, y, z; ``dot`` y.z, z.x, x.y
Revolute         ``pos`` x, y, z; ``dot`` x.z, y.z
Prismatic        ``axis`` x, y; ``dot`` y.z, z.x, x.y
Helical          ``axis`` x, y; ``dot`` x.z, y.z; ``helix``
Cylindrical      ``axis`` x, y; ``dot`` x.z, y.z
Universal        ``pos`` x, y, z; ``dot`` a1.a2 (less its rest value)
Planar           ``axis`` z (the normal); ``dot`` x.z, y.z
Spherical        ``pos`` x, y, z
Free             none
===============  ===========================================================

Loop closures use the rows of their kind (:mod:`gear.constraints.closures`,
the same scalar functions as the reduced formulation, so their multipliers
are the reduced ``lam``).

:func:`evaluate` returns, for a batch of states, the residual ``g``, the
two body wrenches ``F_a``, ``F_b`` with ``dg/dt = F_a . V_a + F_b . V_b``
(``V``: body twists) -- the rows of ``J`` -- and the bias ``b``, the
second derivative of ``g`` with ``dV = 0``, so that ``d^2 g/dt^2 = J dV +
b``.  All of it is computed from poses and twists; no joint coordinate
enters.
"""
from __future__ import annotations

import numpy as np

from .. import joints as JT
from ..spatial.stacks import cross_rows

__all__ = ["RowTable", "joint_rows", "evaluate", "POS", "AXIS", "DOT", "DIST", "HELIX"]

POS, AXIS, DOT, DIST, HELIX = range(5)
_TYPES = {"pos": POS, "axis": AXIS, "dot": DOT, "dist": DIST, "helix": HELIX}


def _frame_with_z(a):
    """A rotation whose third column is the unit vector ``a``."""
    a = np.asarray(a, float)
    t = np.eye(3)[int(np.argmin(np.abs(a)))]
    x = t - a * (t @ a)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(a, x), a])


def _frame_with(col, a):
    """A rotation whose column ``col`` is the unit vector ``a``."""
    R = _frame_with_z(a)
    return np.roll(R, col - 2, axis=1)


#: rows of each tree joint kind: (type, i, j) in the frames built by joint_rows
_JOINT_ROWS = {
    JT.FIXED: [("pos", 0, 0), ("pos", 1, 0), ("pos", 2, 0), ("dot", 1, 2), ("dot", 2, 0), ("dot", 0, 1)],
    JT.REVOLUTE: [("pos", 0, 0), ("pos", 1, 0), ("pos", 2, 0), ("dot", 0, 2), ("dot", 1, 2)],
    JT.PRISMATIC: [("axis", 0, 0), ("axis", 1, 0), ("dot", 1, 2), ("dot", 2, 0), ("dot", 0, 1)],
    JT.HELICAL: [("axis", 0, 0), ("axis", 1, 0), ("dot", 0, 2), ("dot", 1, 2), ("helix", 2, 0)],
    JT.CYLINDRICAL: [("axis", 0, 0), ("axis", 1, 0), ("dot", 0, 2), ("dot", 1, 2)],
    JT.UNIVERSAL: [("pos", 0, 0), ("pos", 1, 0), ("pos", 2, 0), ("dot", 0, 1)],
    JT.PLANAR: [("axis", 2, 0), ("dot", 0, 2), ("dot", 1, 2)],
    JT.SPHERICAL: [("pos", 0, 0), ("pos", 1, 0), ("pos", 2, 0)],
    JT.FREE: [],
}


class RowTable:
    """Every scalar row of a maximal-coordinate model, as flat arrays.

    Attributes
    ----------
    types, ia, ib, i, j : ndarray of int, shape (m,)
        Row type, the bodies of {A} and {B} (-1: the world), axis indices.
    RA, RB : ndarray, shape (m, 3, 3)
    pA, pB : ndarray, shape (m, 3)
        The frames in their bodies' coordinates (in the world for -1).
    offset : ndarray, shape (m,)
        Subtracted from ``g`` (a ``dot`` row's rest value, a rod's length).
    pitch : ndarray, shape (m,)
    owner : list of str
        ``"joint:NAME"`` or ``"loop:NAME"`` per row.
    """

    def __init__(self):
        self._rows = []

    def add(self, owner, typ, ia, ib, RA, pA, RB, pB, i, j, offset=0.0, pitch=0.0):
        self._rows.append((owner, _TYPES[typ], ia, ib, RA, pA, RB, pB, i, j, offset, pitch))

    def freeze(self):
        rows = self._rows
        m = len(rows)
        self.m = m
        self.owner = [r[0] for r in rows]
        self.types = np.array([r[1] for r in rows], dtype=int)
        self.ia = np.array([r[2] for r in rows], dtype=int)
        self.ib = np.array([r[3] for r in rows], dtype=int)
        self.RA = np.array([r[4] for r in rows]).reshape(m, 3, 3)
        self.pA = np.array([r[5] for r in rows]).reshape(m, 3)
        self.RB = np.array([r[6] for r in rows]).reshape(m, 3, 3)
        self.pB = np.array([r[7] for r in rows]).reshape(m, 3)
        self.i = np.array([r[8] for r in rows], dtype=int)
        self.j = np.array([r[9] for r in rows], dtype=int)
        self.offset = np.array([r[10] for r in rows], dtype=float)
        self.pitch = np.array([r[11] for r in rows], dtype=float)
        del self._rows
        return self


def joint_rows(table, model, i):
    """Add the rows of tree joint ``i`` of ``model`` to ``table``."""
    joint, name = model.joints[i], model.joint_names[i]
    P = model.placements[i]
    par = model.parents[i]
    kind = joint.kind
    if kind in (JT.REVOLUTE, JT.PRISMATIC, JT.HELICAL, JT.CYLINDRICAL):
        Ra = _frame_with_z(joint.axis)
        RA, RB, offset = P.R @ Ra, Ra, 0.0
    elif kind == JT.PLANAR:
        Ra = np.column_stack([joint.e1, joint.e2, joint.normal])
        RA, RB, offset = P.R @ Ra, Ra, 0.0
    elif kind == JT.UNIVERSAL:
        # x_A = axis1 (fixed in the parent), y_B = axis2 (fixed in the
        # child): a1 . R a2 keeps its rest value a1 . a2
        RA, RB = P.R @ _frame_with(0, joint.axis1), _frame_with(1, joint.axis2)
        offset = float(joint.axis1 @ joint.axis2)
    else:
        RA, RB, offset = P.R, np.eye(3), 0.0
    pitch = getattr(joint, "pitch", 0.0)
    for typ, a, b in _JOINT_ROWS[kind]:
        table.add(f"joint:{name}", typ, par, i, RA, P.p, RB, np.zeros(3), a, b,
                  offset if typ == "dot" else 0.0, pitch)


def _frames(poses, twists, body, R, p):
    """World rotation, origin, angular velocity, origin velocity and
    origin acceleration bias (``dV = 0``) of one frame per row, for every
    state: shapes (N, m, 3, 3), (N, m, 3) x 4.  Rows on the world (-1)
    take ``R``, ``p`` as they are, at rest."""
    N = poses.shape[0]
    on = body >= 0
    b = np.where(on, body, 0)
    Tb = poses[:, b]                                     # (N, m, 4, 4)
    Rb = Tb[..., :3, :3]
    Rw = np.where(on[None, :, None, None], Rb @ R, R)
    pw = np.where(on[None, :, None], np.einsum("nmij,mj->nmi", Rb, p) + Tb[..., :3, 3], p)
    if twists is None:
        z = np.zeros((N, len(body), 3))
        return Rw, pw, z, z, z, Rb
    V = twists[:, b]
    wb, vb = V[..., :3], V[..., 3:]
    vo = vb + cross_rows(wb, np.broadcast_to(p, vb.shape))       # origin velocity, body coords
    mask = on[None, :, None]
    w = np.where(mask, np.einsum("nmij,nmj->nmi", Rb, wb), 0.0)
    v = np.where(mask, np.einsum("nmij,nmj->nmi", Rb, vo), 0.0)
    ac = np.where(mask, np.einsum("nmij,nmj->nmi", Rb, cross_rows(wb, vo)), 0.0)
    return Rw, pw, w, v, ac, Rb


def evaluate(table, poses, twists=None, rows=True):
    """Residuals, rows and biases of every row for a batch of states.

    Parameters
    ----------
    table : RowTable
    poses : ndarray, shape (N, nb, 4, 4)
    twists : ndarray, shape (N, nb, 6), optional
        Needed for the bias (zero without).
    rows : bool
        False: only the residual ``g`` (the other keys are left out).

    Returns
    -------
    dict
        ``g`` (N, m); ``Fa``, ``Fb`` (N, m, 6) the wrenches on the bodies
        of {A} and {B} (zero on the world) with ``dg/dt = Fa . V_a + Fb .
        V_b``; ``bias`` (N, m).
    """
    t = table
    N, m = poses.shape[0], t.m
    out = {}
    if m == 0:
        return {"g": np.zeros((N, 0)), "Fa": np.zeros((N, 0, 6)), "Fb": np.zeros((N, 0, 6)),
                "bias": np.zeros((N, 0))}
    RA, pA, wA, vA, acA, RbA = _frames(poses, twists, t.ia, t.RA, t.pA)
    RB, pB, wB, vB, acB, RbB = _frames(poses, twists, t.ib, t.RB, t.pB)
    d = pB - pA
    dd = vB - vA
    ddd = acB - acA
    E = np.eye(3)
    ui = np.einsum("nmij,mj->nmi", RA, E[t.i])          # (N, m, 3): column i of R_A
    wj = np.einsum("nmij,mj->nmi", RB, E[t.j])          # column j of R_B
    g = np.empty((N, m))
    cwA, cvA = np.zeros((N, m, 3)), np.zeros((N, m, 3))
    cwB, cvB = np.zeros((N, m, 3)), np.zeros((N, m, 3))
    bias = np.zeros((N, m))
    ty = t.types

    k = ty == POS
    if k.any():
        e = np.eye(3)[t.i[k]]
        g[:, k] = np.einsum("nmi,mi->nm", d[:, k], e)
        cvB[:, k] = e
        cvA[:, k] = -e
        bias[:, k] = np.einsum("nmi,mi->nm", ddd[:, k], e)
    k = (ty == AXIS) | (ty == HELIX)
    if k.any():
        u, dk = ui[:, k], d[:, k]
        g[:, k] = np.einsum("nmi,nmi->nm", u, dk)
        cwA[:, k] = cross_rows(u, dk)
        cvA[:, k] = -u
        cvB[:, k] = u
        du = cross_rows(wA[:, k], u)
        ddu = cross_rows(wA[:, k], du)
        bias[:, k] = (np.einsum("nmi,nmi->nm", ddu, dk) + 2.0 * np.einsum("nmi,nmi->nm", du, dd[:, k])
                      + np.einsum("nmi,nmi->nm", u, ddd[:, k]))
    k = ty == HELIX
    if k.any():
        # the screw: theta is the angle of {B} about z_A, unwrapped to the
        # turn that the translation along the axis says
        z, h = ui[:, k], t.pitch[k]
        i1, i2 = (t.i[k] + 1) % 3, (t.i[k] + 2) % 3
        a1 = np.einsum("nmij,mj->nmi", RA[:, k], E[i1])
        a2 = np.einsum("nmij,mj->nmi", RA[:, k], E[i2])
        b1 = np.einsum("nmij,mj->nmi", RB[:, k], E[i1])
        sn, cs = np.einsum("nmi,nmi->nm", a2, b1), np.einsum("nmi,nmi->nm", a1, b1)
        th = np.arctan2(sn, cs)
        hs = np.where(h == 0.0, 1.0, h)
        th = np.where(h == 0.0, th, th + 2.0 * np.pi * np.round((g[:, k] / hs - th) / (2.0 * np.pi)))
        g[:, k] -= h * th
        # theta' = (c s' - s c') / rho with s' = p . D, c' = r . D, D = w_A - w_B
        # (p = a2 x b1, r = a1 x b1, rho = s^2 + c^2), exact off the axis too
        Dw = wA[:, k] - wB[:, k]
        pp, rr = cross_rows(a2, b1), cross_rows(a1, b1)
        rho = sn * sn + cs * cs
        nth = (cs[..., None] * pp - sn[..., None] * rr) / rho[..., None]
        cwA[:, k] -= h[:, None] * nth
        cwB[:, k] += h[:, None] * nth
        s1, c1 = np.einsum("nmi,nmi->nm", pp, Dw), np.einsum("nmi,nmi->nm", rr, Dw)
        wAk, wBk = wA[:, k], wB[:, k]
        dp = cross_rows(cross_rows(wAk, a2), b1) + cross_rows(a2, cross_rows(wBk, b1))
        dr = cross_rows(cross_rows(wAk, a1), b1) + cross_rows(a1, cross_rows(wBk, b1))
        s2, c2 = np.einsum("nmi,nmi->nm", dp, Dw), np.einsum("nmi,nmi->nm", dr, Dw)
        drho = 2.0 * (sn * s1 + cs * c1)
        th2 = ((cs * s2 - sn * c2) * rho - (cs * s1 - sn * c1) * drho) / (rho * rho)
        bias[:, k] -= h * th2
    k = ty == DOT
    if k.any():
        u, w = ui[:, k], wj[:, k]
        g[:, k] = np.einsum("nmi,nmi->nm", u, w) - t.offset[k]
        n = cross_rows(w, u)
        cwB[:, k] = n
        cwA[:, k] = -n
        du = cross_rows(wA[:, k], u)
        dw = cross_rows(wB[:, k], w)
        bias[:, k] = np.einsum("nmi,nmi->nm", wB[:, k] - wA[:, k], cross_rows(dw, u) + cross_rows(w, du))
    k = ty == DIST
    if k.any():
        dk = d[:, k]
        L = np.linalg.norm(dk, axis=-1)
        if (L < 1e-12).any():
            raise ValueError("a distance closure's two points coincide, so the direction of the rod "
                             "is undefined")
        e = dk / L[..., None]
        g[:, k] = L - t.offset[k]
        cvB[:, k] = e
        cvA[:, k] = -e
        ddk = dd[:, k]
        bias[:, k] = ((np.einsum("nmi,nmi->nm", ddk, ddk) - np.einsum("nmi,nmi->nm", e, ddk) ** 2) / L
                      + np.einsum("nmi,nmi->nm", e, ddd[:, k]))
    out["g"] = g
    if not rows:
        return out
    out["bias"] = bias if twists is not None else np.zeros((N, m))
    # world coefficients of (w, v_origin) -> body twist coefficients:
    # w = R_b w_b, v_origin = R_b (v_b + w_b x p): F = (R^T c_w + p x R^T c_v, R^T c_v)
    out["Fa"] = _to_body(RbA, t.pA, cwA, cvA, t.ia >= 0)
    out["Fb"] = _to_body(RbB, t.pB, cwB, cvB, t.ib >= 0)
    return out


def _to_body(Rb, p, cw, cv, on):
    fv = np.einsum("nmji,nmj->nmi", Rb, cv)
    fw = np.einsum("nmji,nmj->nmi", Rb, cw) + cross_rows(np.broadcast_to(p, fv.shape), fv)
    F = np.concatenate([fw, fv], axis=-1)
    F[:, ~on] = 0.0
    return F

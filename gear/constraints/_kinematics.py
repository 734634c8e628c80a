"""Frame kinematics for constraint rows: world poses, body Jacobians, body
twists and bias accelerations, in one parent-first pass (Kim eqs. 37, 41
with ``ddq = 0``), and the rows of :mod:`gear.constraints.closures`.
"""
from __future__ import annotations

import numpy as np


__all__ = ["tree_kinematics", "closure_rows"]


def _adj(R, p):
    """``Ad_T`` for ``T = (R, p)`` (Kim eq. 7) from raw arrays."""
    out = np.zeros((6, 6))
    out[:3, :3] = R
    out[3:, 3:] = R
    out[3:, :3] = np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]]) @ R
    return out


def _ad(V):
    """``ad_V`` (Kim eq. 11)."""
    w, v = V[:3], V[3:]
    W = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    out = np.zeros((6, 6))
    out[:3, :3] = W
    out[3:, 3:] = W
    out[3:, :3] = np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
    return out


def joint_step(model, i, qi, dqi=None):
    """Joint i at its coordinates ``qi`` (rates ``dqi`` or None): its motion
    subspace ``S`` (6, n) and ``dS`` (6, n; ``dS dq`` of Kim eq. 41, zeros
    without ``dqi``), the pose ``H`` (4, 4) of ``X = placement J(q)`` and
    ``Ad_{X^{-1}}`` (6, 6)."""
    from .. import _core

    joint = model.joints[i]
    n = joint.nv
    Jt, S, dS = _core.jcalc_py(joint.kind, joint.params, qi, dqi)
    Jt = np.asarray(Jt)
    P = model.placements[i]
    R = P.R @ Jt[:9].reshape(3, 3)
    p = P.R @ Jt[9:] + P.p
    H = np.eye(4)
    H[:3, :3], H[:3, 3] = R, p
    return np.asarray(S).reshape(6, n), np.asarray(dS).reshape(6, n), H, _adj(R.T, -R.T @ p)


def tree_kinematics(model, q, dq=None):
    """Per body: world pose ``(nb, 4, 4)``, body Jacobian ``(nb, 6, nv)``,
    body twist ``(nb, 6)`` and bias acceleration ``(nb, 6)``.

    ``V_i = Ad_{X^{-1}} V_p + S_i dq_i`` (eq. 37) and, with ``ddq = 0``,
    ``a_i = Ad_{X^{-1}} a_p + ad_{V_i} S_i dq_i + dS_i dq_i`` (eq. 41), so
    that ``dV_i/dt = J_i ddq + a_i``.  Twists and accelerations are zero
    when ``dq`` is None.  ``q``/``dq`` are trusted (validated by the caller).
    """
    nb, nv = model.nbodies, model.nv
    poses = np.empty((nb, 4, 4))
    J = np.zeros((nb, 6, nv))
    V = np.zeros((nb, 6))
    acc = np.zeros((nb, 6))
    iq, iv = model._iq, model._iv
    for i, joint in enumerate(model.joints):
        n = joint.nv
        qi = np.ascontiguousarray(q[iq[i]:iq[i] + joint.nq])
        dqi = None if dq is None or n == 0 else np.ascontiguousarray(dq[iv[i]:iv[i] + n])
        S, dS, H, Xinv = joint_step(model, i, qi, dqi)
        par = model.parents[i]
        poses[i] = H if par < 0 else poses[par] @ H
        if par >= 0:
            J[i] = Xinv @ J[par]
            V[i] = Xinv @ V[par]
            acc[i] = Xinv @ acc[par]
        if n:
            J[i][:, iv[i]:iv[i] + n] += S
            if dqi is not None:
                Sdq = S @ dqi
                V[i] += Sdq
                acc[i] += _ad(V[i]) @ Sdq + dS @ dqi
    return poses, J, V, acc


def _frame(kin, body, P):
    """World quantities of frame ``P`` on ``body`` (-1: the world): pose
    (R, p), world Jacobians (Jw, Jv), world angular velocity w, world
    velocity of the origin v, world angular acceleration bias al, world
    classical acceleration bias of the origin ac."""
    poses, J, V, acc = kin
    nv = J.shape[2]
    if body < 0:
        z3 = np.zeros(3)
        return P.R, P.p, np.zeros((3, nv)), np.zeros((3, nv)), z3, z3, z3, z3
    Xi = _adj(P.R.T, -P.R.T @ P.p)
    Tb = poses[body]
    R, p = Tb[:3, :3] @ P.R, Tb[:3, :3] @ P.p + Tb[:3, 3]
    JA = Xi @ J[body]
    VA = Xi @ V[body]
    aA = Xi @ acc[body]
    w, v = R @ VA[:3], R @ VA[3:]
    al = R @ aA[:3]
    ac = R @ (aA[3:] + np.cross(VA[:3], VA[3:]))
    return R, p, R @ JA[:3], R @ JA[3:], w, v, al, ac



def rod(d, closure):
    """``(L, e)``: the length and direction of a distance closure's rod
    ``d`` (the second point less the first), or a one-line ``ValueError``
    where the two points coincide."""
    L = float(np.linalg.norm(d))
    if L < 1e-12:
        raise ValueError(f"distance closure {closure.name or ''!s}: the two points "
                         "coincide, so the direction of the rod is undefined")
    return L, d / L


def closure_rows(kin, closure, ia, ib, dq=None, length=None):
    """Residual ``g``, rows ``A`` and bias ``dA dq`` of one loop closure.

    Parameters
    ----------
    kin : tuple
        From :func:`tree_kinematics`.
    closure : gear.LoopClosure
    ia, ib : int
        Resolved body indices of {A} and {B} (-1: the world).
    dq : ndarray or None
        Needed for the bias (else it is returned as zeros).
    length : float, optional
        Rod length of a ``distance`` closure.
    """
    from .closures import _ROWS

    RA, pA, JwA, JvA, wA, vA, alA, acA = _frame(kin, ia, closure.placement_a)
    RB, pB, JwB, JvB, wB, vB, alB, acB = _frame(kin, ib, closure.placement_b)
    d = pB - pA
    dd = vB - vA          # d/dt d
    ddd = acB - acA       # d^2/dt^2 d with ddq = 0
    rows = _ROWS[closure.kind]
    m = len(rows)
    nv = JwA.shape[1]
    g = np.empty(m)
    A = np.empty((m, nv))
    b = np.zeros(m)
    for r, (typ, i, j) in enumerate(rows):
        if typ == "pos":
            g[r] = d[i]
            A[r] = JvB[i] - JvA[i]
            b[r] = ddd[i]
        elif typ == "axis":
            u = RA[:, i]
            du = np.cross(wA, u)
            g[r] = u @ d
            A[r] = np.cross(u, d) @ JwA + u @ (JvB - JvA)
            ddu = np.cross(alA, u) + np.cross(wA, du)
            b[r] = ddu @ d + 2.0 * du @ dd + u @ ddd
        elif typ == "dot":
            u, w = RA[:, i], RB[:, j]
            du, dw = np.cross(wA, u), np.cross(wB, w)
            n = np.cross(w, u)
            g[r] = u @ w
            A[r] = n @ (JwB - JwA)
            b[r] = (alB - alA) @ n + (wB - wA) @ (np.cross(dw, u) + np.cross(w, du))
        else:  # "dist"
            L, e = rod(d, closure)
            g[r] = L - (L if length is None else length)
            A[r] = e @ (JvB - JvA)
            b[r] = (dd @ dd - (e @ dd) ** 2) / L + e @ ddd
    if dq is None:
        b[:] = 0.0
    return g, A, b


def wrench_on_b(kin, closure, ia, ib, lam):
    """The wrench ``(m, f)`` that multipliers ``lam`` of one closure exert on
    ``body_b``, at the origin of frame {B}, in {B}'s coordinates.

    The constraint force is ``A^T lam`` (eq. 54).  Each row's rate is
    linear in the world twists of the two frames, ``dg_r/dt = c_w . w_B +
    c_v . v_B + (terms of {A})``, so the part acting on {B} is the world
    moment ``sum_r lam_r c_w`` and world force ``sum_r lam_r c_v`` at B's
    origin (equal power).  Returns ``(6,)``.
    """
    from .closures import _ROWS

    RA, pA, *_ = _frame(kin, ia, closure.placement_a)
    RB, pB, *_ = _frame(kin, ib, closure.placement_b)
    d = pB - pA
    m_w = np.zeros(3)
    f_w = np.zeros(3)
    for r, (typ, i, j) in enumerate(_ROWS[closure.kind]):
        if typ == "pos":
            f_w[i] += lam[r]
        elif typ == "axis":
            f_w += lam[r] * RA[:, i]
        elif typ == "dot":
            m_w += lam[r] * np.cross(RB[:, j], RA[:, i])
        else:
            f_w += lam[r] * d / np.linalg.norm(d)
    return np.concatenate([RB.T @ m_w, RB.T @ f_w])

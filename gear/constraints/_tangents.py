"""Derivatives of the constraint rows: ``dA/dq``, ``d(dA dq)/dq`` and
``d(dA dq)/d(dq)``, analytic, in the tangent space of ``q``.

The rows of a loop closure (:func:`gear.constraints._kinematics.closure_rows`)
are functions of the poses, Jacobians, twists and bias accelerations of two
frames, which :func:`gear.constraints._kinematics.tree_kinematics` computes
in one parent-first pass (Kim eqs. 37, 41).  This module differentiates that
pass and the rows line by line (forward mode, by the product rule) along
``D = 2 nv`` directions at once: ``q (+) eps e_k`` (the right perturbation
``T exp(eps S e_k)`` of :meth:`gear.Model.integrate`) for ``k < nv`` and
``dq + eps e_k`` after.  The recursion is the forward half of Kim's Table 5:
with ``h_i = S_i dq_i/dp`` (Corollary 2, eq. 90),

    d(Ad_{X_i^-1}) = -ad_{h_i} Ad_{X_i^-1}
    dJ_i   = Ad_{X^-1} dJ_p   - ad_{h_i} Ad_{X^-1} J_p   + [dS_i] (own columns)
    dV_i   = Ad_{X^-1} dV_p   - ad_{h_i} Ad_{X^-1} V_p   + dS_i dq_i + S_i d(dq_i)
    da_i   = Ad_{X^-1} da_p   - ad_{h_i} Ad_{X^-1} a_p   + ad_{dV_i} S_i dq_i
             + ad_{V_i} (dS_i dq_i + S_i d(dq_i)) + d(Sdot_i dq_i)

and the pose of body i moves by the body twist ``J_i dq/dp``.  The joint's
own ``dS/dq`` and ``d(Sdot)/dq`` (universal and planar joints) come from
the joint switch (``jcalc_dSdq``, ``jcalc_ddSdq``).

:class:`gear.CustomConstraint` rows use the user's ``jacobian_derivative``
and ``bias_derivative`` when given, else central differences of
``jacobian`` and ``bias`` (step ``1e-6``, documented in
:class:`gear.CustomConstraint`).
"""
from __future__ import annotations

import numpy as np

from .closures import _ROWS, LoopClosure
from ._kinematics import _adj, _ad, joint_step, rod

__all__ = ["row_tangents"]


def _ad_batch(H):
    """``ad_h`` for each row of ``H`` (D, 6): (D, 6, 6)."""
    D = H.shape[0]
    out = np.zeros((D, 6, 6))
    W = _skew_batch(H[:, :3])
    out[:, :3, :3] = W
    out[:, 3:, 3:] = W
    out[:, 3:, :3] = _skew_batch(H[:, 3:])
    return out


def _skew_batch(w):
    """``[w]`` for each row of ``w`` (D, 3): (D, 3, 3)."""
    out = np.zeros(w.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2] = -w[..., 2], w[..., 1]
    out[..., 1, 0], out[..., 1, 2] = w[..., 2], -w[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -w[..., 1], w[..., 0]
    return out


def tangent_kinematics(model, q, dq):
    """Body poses, Jacobians, twists and bias accelerations (as
    :func:`gear.constraints._kinematics.tree_kinematics`) and their
    derivatives along the ``D = 2 nv`` directions.

    Returns
    -------
    kin : tuple
        ``(poses (nb, 4, 4), J (nb, 6, nv), V (nb, 6), acc (nb, 6))``.
    tan : tuple
        ``(xi (D, nb, 6), dJ (D, nb, 6, nv), dV (D, nb, 6), dacc (D, nb, 6))``;
        ``xi``: the body-frame twist by which each pose moves.
    """
    from .. import _core

    nb, nv = model.nbodies, model.nv
    D = 2 * nv
    poses = np.empty((nb, 4, 4))
    J = np.zeros((nb, 6, nv))
    V = np.zeros((nb, 6))
    acc = np.zeros((nb, 6))
    xi = np.zeros((D, nb, 6))
    dJ = np.zeros((D, nb, 6, nv))
    dV = np.zeros((D, nb, 6))
    dacc = np.zeros((D, nb, 6))
    iq, iv = model._iq, model._iv
    for i, joint in enumerate(model.joints):
        n = joint.nv
        s = slice(iv[i], iv[i] + n)
        qi = np.ascontiguousarray(q[iq[i]:iq[i] + joint.nq])
        dqi = np.ascontiguousarray(dq[s])
        S, dS, H, Xinv = joint_step(model, i, qi, dqi if n else None)
        par = model.parents[i]
        poses[i] = H if par < 0 else poses[par] @ H
        h = np.zeros((D, 6))                        # S_i d(q_i)/dp
        dSi = np.zeros((D, 6, n))                   # d(S_i)/dp
        ddqi = np.zeros((D, n))                     # d(dq_i)/dp
        if n:
            h[s] = S.T
            d1, d2 = _core.jcalc_tangent_py(joint.kind, joint.params, qi, dqi)
            dSi[s] = d1
            ddqi[nv + iv[i] + np.arange(n), np.arange(n)] = 1.0
        if par >= 0:
            adh = _ad_batch(h)
            XJ, XV, Xa = Xinv @ J[par], Xinv @ V[par], Xinv @ acc[par]
            J[i], V[i], acc[i] = XJ, XV, Xa
            dJ[:, i] = np.einsum("ab,dbn->dan", Xinv, dJ[:, par]) - np.einsum("dab,bn->dan", adh, XJ)
            dV[:, i] = dV[:, par] @ Xinv.T - adh @ XV
            dacc[:, i] = dacc[:, par] @ Xinv.T - adh @ Xa
        if n:
            J[i][:, s] += S
            dJ[:, i, :, s] += dSi
            Sdq = S @ dqi
            dSdq = np.einsum("dan,n->da", dSi, dqi) + ddqi @ S.T          # d(S_i dq_i)
            V[i] += Sdq
            dV[:, i] += dSdq
            acc[i] += _ad(V[i]) @ Sdq + dS @ dqi
            # d(Sdot dq_i): along q_c, d(Sdot)/dq_c dq_i; along dq_c, Sdot(e_c) dq_i + Sdot(dq_i) e_c
            dSd = np.zeros((D, 6))
            dSd[s] = d2 @ dqi
            dSd[nv + iv[i]:nv + iv[i] + n] = d1 @ dqi + dS.T
            dacc[:, i] += (-(dV[:, i] @ _ad(Sdq).T)            # ad_{dV} S dq = -ad_{S dq} dV
                           + dSdq @ _ad(V[i]).T + dSd)
        xi[:nv, i] = J[i].T                          # the pose moves by J_i e_k
    return (poses, J, V, acc), (xi, dJ, dV, dacc)


def _frame_tangent(kin, tan, body, P, D):
    """World quantities of frame ``P`` on ``body`` (as
    :func:`gear.constraints._kinematics._frame`) and their derivatives: a
    dict of (value, derivative with a leading D axis)."""
    poses, J, V, acc = kin
    nv = J.shape[2]
    if body < 0:
        z3 = np.zeros(3)
        zero = {"R": (P.R, np.zeros((D, 3, 3))), "p": (P.p, np.zeros((D, 3)))}
        for k in ("w", "v", "al", "ac"):
            zero[k] = (z3, np.zeros((D, 3)))
        for k in ("Jw", "Jv"):
            zero[k] = (np.zeros((3, nv)), np.zeros((D, 3, nv)))
        return zero
    xi, dJ, dV, dacc = tan
    Xi = _adj(P.R.T, -P.R.T @ P.p)
    Tb = poses[body]
    R, p = Tb[:3, :3] @ P.R, Tb[:3, :3] @ P.p + Tb[:3, 3]
    JA, VA, aA = Xi @ J[body], Xi @ V[body], Xi @ acc[body]
    xF = xi[:, body] @ Xi.T                         # the frame moves by this body twist
    dR = R @ _skew_batch(xF[:, :3])                 # (D, 3, 3)
    dp = xF[:, 3:] @ R.T
    dJA = np.einsum("ab,dbn->dan", Xi, dJ[:, body])
    dVA, daA = dV[:, body] @ Xi.T, dacc[:, body] @ Xi.T
    cw = np.cross(VA[:3], VA[3:])
    dcw = np.cross(dVA[:, :3], VA[3:]) + np.cross(VA[:3], dVA[:, 3:])
    out = {"R": (R, dR), "p": (p, dp)}
    out["w"] = (R @ VA[:3], dR @ VA[:3] + dVA[:, :3] @ R.T)
    out["v"] = (R @ VA[3:], dR @ VA[3:] + dVA[:, 3:] @ R.T)
    out["al"] = (R @ aA[:3], dR @ aA[:3] + daA[:, :3] @ R.T)
    out["ac"] = (R @ (aA[3:] + cw), dR @ (aA[3:] + cw) + (daA[:, 3:] + dcw) @ R.T)
    out["Jw"] = (R @ JA[:3], np.einsum("dab,bn->dan", dR, JA[:3]) + np.einsum("ab,dbn->dan", R, dJA[:, :3]))
    out["Jv"] = (R @ JA[3:], np.einsum("dab,bn->dan", dR, JA[3:]) + np.einsum("ab,dbn->dan", R, dJA[:, 3:]))
    return out


def _dot(a, da, b, db):
    """``a . b`` and its derivative (``da``, ``db``: (D, 3))."""
    return a @ b, da @ b + db @ a


def _cross(a, da, b, db):
    return np.cross(a, b), np.cross(da, b) + np.cross(a, db)


def closure_row_tangents(kin, tan, closure, ia, ib, D):
    """Rows ``A`` (m, nv) and bias ``dA dq`` (m,) of one loop closure and
    their derivatives ``dA`` (D, m, nv), ``db`` (D, m) -- the product rule
    applied to each line of :func:`gear.constraints._kinematics.closure_rows`."""
    fa = _frame_tangent(kin, tan, ia, closure.placement_a, D)
    fb = _frame_tangent(kin, tan, ib, closure.placement_b, D)
    (RA, dRA), (wA, dwA), (alA, dalA) = fa["R"], fa["w"], fa["al"]
    (RB, dRB), (wB, dwB), (alB, dalB) = fb["R"], fb["w"], fb["al"]
    d, dd_ = fb["p"][0] - fa["p"][0], fb["p"][1] - fa["p"][1]             # d and its derivative
    v, dv_ = fb["v"][0] - fa["v"][0], fb["v"][1] - fa["v"][1]             # d/dt d
    a, da_ = fb["ac"][0] - fa["ac"][0], fb["ac"][1] - fa["ac"][1]         # d^2/dt^2 d (ddq = 0)
    Jv, dJv = fb["Jv"][0] - fa["Jv"][0], fb["Jv"][1] - fa["Jv"][1]
    Jw, dJw = fb["Jw"][0] - fa["Jw"][0], fb["Jw"][1] - fa["Jw"][1]
    JwA, dJwA = fa["Jw"]
    rows = _ROWS[closure.kind]
    m = len(rows)
    nv = Jv.shape[1]
    A, b = np.empty((m, nv)), np.zeros(m)
    dA, db = np.empty((D, m, nv)), np.zeros((D, m))
    for r, (typ, i, j) in enumerate(rows):
        if typ == "pos":
            A[r], dA[:, r] = Jv[i], dJv[:, i]
            b[r], db[:, r] = a[i], da_[:, i]
        elif typ == "axis":
            u, du_ = RA[:, i], dRA[:, :, i]
            w1, dw1 = _cross(wA, dwA, u, du_)                            # du/dt
            c, dc = _cross(u, du_, d, dd_)
            A[r] = c @ JwA + u @ Jv
            dA[:, r] = dc @ JwA + np.einsum("a,dan->dn", c, dJwA) + du_ @ Jv + np.einsum("a,dan->dn", u, dJv)
            t1, dt1 = _cross(alA, dalA, u, du_)
            t2, dt2 = _cross(wA, dwA, w1, dw1)
            ddu, dddu = t1 + t2, dt1 + dt2
            x1, dx1 = _dot(ddu, dddu, d, dd_)
            x2, dx2 = _dot(w1, dw1, v, dv_)
            x3, dx3 = _dot(u, du_, a, da_)
            b[r], db[:, r] = x1 + 2.0 * x2 + x3, dx1 + 2.0 * dx2 + dx3
        elif typ == "dot":
            u, du_ = RA[:, i], dRA[:, :, i]
            w, dw = RB[:, j], dRB[:, :, j]
            nrm, dn = _cross(w, dw, u, du_)
            A[r] = nrm @ Jw
            dA[:, r] = dn @ Jw + np.einsum("a,dan->dn", nrm, dJw)
            rw, drw = _cross(wB, dwB, w, dw)                              # dw/dt
            ru, dru = _cross(wA, dwA, u, du_)                             # du/dt
            s1, ds1 = _cross(rw, drw, u, du_)
            s2, ds2 = _cross(w, dw, ru, dru)
            x1, dx1 = _dot(alB - alA, dalB - dalA, nrm, dn)
            x2, dx2 = _dot(wB - wA, dwB - dwA, s1 + s2, ds1 + ds2)
            b[r], db[:, r] = x1 + x2, dx1 + dx2
        else:  # "dist"
            L, e = rod(d, closure)
            dL = dd_ @ e
            de = (dd_ - dL[:, None] * e) / L
            A[r] = e @ Jv
            dA[:, r] = de @ Jv + np.einsum("a,dan->dn", e, dJv)
            ev = e @ v
            dev = de @ v + dv_ @ e
            num = v @ v - ev ** 2
            dnum = 2.0 * (dv_ @ v) - 2.0 * ev * dev
            b[r] = num / L + e @ a
            db[:, r] = dnum / L - num * dL / L ** 2 + de @ a + da_ @ e
    return A, b, dA, db


def _custom_tangents(sysm, c, q, dq, m, eps=1e-6):
    """``dA`` (nv, m, nv) along ``q``, ``db`` (2 nv, m) of a
    :class:`gear.CustomConstraint`: its own derivatives, else central
    differences of ``jacobian`` and ``bias``."""
    model = sysm.model
    nv = model.nv
    jd = getattr(c, "jacobian_derivative", None)
    bd = getattr(c, "bias_derivative", None)
    if jd is not None:
        dA = np.asarray(jd(q), dtype=float)
        if dA.shape != (nv, m, nv):
            raise ValueError(f"{c!r}: jacobian_derivative(q) returned shape {dA.shape}, expected {(nv, m, nv)} "
                             "(entry k: dA/dq along the tangent direction k)")
    else:
        dA = np.empty((nv, m, nv))
        for k in range(nv):
            e = np.zeros(nv)
            e[k] = eps
            dA[k] = (np.asarray(c.jacobian(model.integrate(q, e)), float)
                     - np.asarray(c.jacobian(model.integrate(q, -e)), float)) / (2.0 * eps)
    if bd is not None:
        out = bd(q, dq)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ValueError(f"{c!r}: bias_derivative(q, dq) must return (dbias_dq, dbias_ddq), each (m, nv)")
        bq, bv = (np.asarray(x, dtype=float) for x in out)
        if bq.shape != (m, nv) or bv.shape != (m, nv):
            raise ValueError(f"{c!r}: bias_derivative(q, dq) returned shapes {bq.shape}, {bv.shape}, "
                             f"expected {(m, nv)} each")
        db = np.concatenate([bq.T, bv.T])
    else:
        db = np.empty((2 * nv, m))
        for k in range(nv):
            e = np.zeros(nv)
            e[k] = eps
            db[k] = (np.asarray(c.bias(model.integrate(q, e), dq), float).reshape(m)
                     - np.asarray(c.bias(model.integrate(q, -e), dq), float).reshape(m)) / (2.0 * eps)
            db[nv + k] = (np.asarray(c.bias(q, dq + e), float).reshape(m)
                          - np.asarray(c.bias(q, dq - e), float).reshape(m)) / (2.0 * eps)
    return dA, db


def row_tangents(sysm, q, dq):
    """The rows of a :class:`gear.ConstrainedModel` and their derivatives.

    Parameters
    ----------
    sysm : gear.ConstrainedModel
    q : ndarray, shape (nq,)
    dq : ndarray, shape (nv,)

    Returns
    -------
    A : ndarray, shape (nc, nv)
    bias : ndarray, shape (nc,)
        ``dA dq``.
    dA : ndarray, shape (nv, nc, nv)
        ``dA[k] = dA/dq`` along ``q (+) eps e_k``.
    dbias_dq, dbias_ddq : ndarray, shape (nc, nv)
    """
    model = sysm.model
    nv, nc = model.nv, sysm.nc
    D = 2 * nv
    kin = tan = None
    A, bias = np.empty((nc, nv)), np.empty(nc)
    dA, db = np.empty((D, nc, nv)), np.empty((D, nc))
    r = 0
    for k, c in enumerate(sysm.constraints):
        m = sysm._nrows[k]
        if isinstance(c, LoopClosure):
            if kin is None:
                kin, tan = tangent_kinematics(model, q, dq)
            ia, ib = sysm._bodies[k]
            A[r:r + m], bias[r:r + m], dA[:, r:r + m], db[:, r:r + m] = closure_row_tangents(kin, tan, c, ia, ib, D)
        else:
            A[r:r + m] = np.asarray(c.jacobian(q), float)
            bias[r:r + m] = np.asarray(c.bias(q, dq), float).reshape(m)
            dAk, dbk = _custom_tangents(sysm, c, q, dq, m)
            dA[:nv, r:r + m] = dAk
            dA[nv:, r:r + m] = 0.0
            db[:, r:r + m] = dbk
        r += m
    return A, bias, dA[:nv], db[:nv].T.copy(), db[nv:].T.copy()

"""Time stepping in maximal coordinates: one step of a batch of states
``(T, V)`` on ``(SE(3) x R^6)^n``.

* ``"euler"`` -- Ruan, "Articulated rigid body systems", eq. 12: the
  velocity-level KKT system ``M (V+ - V) = h f + J^T mu``, ``J V+ = r``
  (``mu = h lam``, ``r = 0``, or ``-(beta / h) g`` with Baumgarte), then
  ``T+ = T exp(h V+)`` for every body.  Compliant rows take their spring
  and damper force at the start of the step (explicit).
* ``"implicit"`` -- the same step with the compliant rows' force taken at
  the end of the step, linearised: ``lam = -k (g + h J V+) - c J V+``.
  That is Ruan's eq. 14 with a position term, i.e. the regularised system
  ``(J M^{-1} J^T + CFM) mu = -(ERP / h) g - J V_free`` with
  ``ERP = h k / (h k + c)`` and ``CFM = 1 / (h (h k + c))`` per row (the
  error-reduction and constraint-force-mixing parameters of the Open
  Dynamics Engine).  Hard rows are its ``k -> inf`` limit: eq. 12.
* ``"rk4"``, ``"rkmk4"`` -- the classical Runge-Kutta tableau on the
  acceleration-level system (:meth:`MaximalModel.forward_dynamics`), both
  4th order.  ``"rkmk4"`` (Runge-Kutta-Munthe-Kaas) moves ``T = T0
  exp(theta)`` with ``theta' = dexp^{-1}_{-theta}(V)``, so every stage is
  a rigid pose; ``"rk4"`` integrates the pose matrices themselves, ``dT/dt
  = T V^``, and moves the result's rotation blocks to the nearest rotation
  (their polar factor) after the step.

Stabilisation of hard rows: ``None`` (the rows drift: joints separate and
twist, as Ruan's notes describe), ``"baumgarte"`` (``J V+ = -(beta/h) g``
at the velocity level, default ``beta = 0.2``; ``J dV + b = -2 alpha J V -
beta^2 g`` at the acceleration level, default ``alpha = beta = 1/(5 h)``),
``"projection"`` (:func:`project`).
"""
from __future__ import annotations

import numpy as np

from ..spatial.stacks import dexp_inv_se3_rows, exp_se3_rows
from .kkt import RowSystem
from .model import _minv_jt, rs_J_apply

__all__ = ["INTEGRATORS", "STABILIZATIONS", "step", "project", "acceleration_gains", "BAUMGARTE_BETA"]

INTEGRATORS = ("euler", "implicit", "rk4", "rkmk4")
STABILIZATIONS = (None, "baumgarte", "projection")
#: default velocity-level Baumgarte factor (the fraction of the position
#: error removed per step)
BAUMGARTE_BETA = 0.2


def _velocity_step(mx, P, V, h, tau, f_ext, stabilization, beta, implicit):
    f = mx._forces(P, V, tau, f_ext)
    vfree = V + h * np.einsum("bij,nbj->nbi", mx.Minv, f)
    if mx.nrows == 0:
        return P @ exp_se3_rows(h * vfree), vfree, np.zeros((P.shape[0], 0))
    ev = mx.evaluate(P)
    g = ev["g"]
    if mx.compliant and not implicit:
        lam = -mx.stiffness * g - mx.damping * rs_J_apply(mx, ev, V)
        Vn = vfree + h * _minv_jt(mx, ev, lam)
        return P @ exp_se3_rows(h * Vn), Vn, lam
    if mx.compliant:
        hk = h * mx.stiffness + mx.damping
        rs = RowSystem(mx, ev, cfm=1.0 / (h * hk))
        mu = rs.solve(-(mx.stiffness / hk) * g - rs.J_apply(vfree))
    else:
        rs = RowSystem(mx, ev)
        target = -(beta / h) * g if stabilization == "baumgarte" else np.zeros_like(g)
        mu = rs.solve(target - rs.J_apply(vfree))
    Vn = vfree + rs.minv_jt_apply(mu)
    return P @ exp_se3_rows(h * Vn), Vn, mu / h


def _hat(V):
    """Twists (..., 6) as 4x4 matrices of se(3)."""
    out = np.zeros(V.shape[:-1] + (4, 4))
    w, v = V[..., :3], V[..., 3:]
    out[..., 0, 1], out[..., 0, 2], out[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    out[..., 1, 0], out[..., 2, 0], out[..., 2, 1] = w[..., 2], -w[..., 1], w[..., 0]
    out[..., :3, 3] = v
    return out


def _rigid(T):
    """The nearest rigid transforms (polar factor of the rotation block)."""
    U, _, Vt = np.linalg.svd(T[..., :3, :3])
    out = T.copy()
    out[..., :3, :3] = U @ Vt
    out[..., 3, :] = (0.0, 0.0, 0.0, 1.0)
    return out


_RK_C = (0.5, 0.5, 1.0)
_RK_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


def _rk_step(mx, P, V, h, tau, f_ext, gains, munthe_kaas):
    """The classical tableau: on ``T = T0 exp(theta)`` with ``theta' =
    dexp^{-1}_{-theta}(V)`` (Munthe-Kaas), or on the matrices ``dT/dt = T
    V^`` themselves, the result's rotations moved to the nearest rotation
    (an O(h^5) change: both are 4th order)."""
    def accel(Pi, Vi):
        dV, lam, _ = mx._accel(Pi, Vi, tau, f_ext, gains)
        return dV, lam

    A1, lam0 = accel(P, V)
    kV = [A1]
    if munthe_kaas:
        kth = [V]
        for c in _RK_C:
            theta = h * c * kth[-1]
            Vi = V + h * c * kV[-1]
            kV.append(accel(P @ exp_se3_rows(theta), Vi)[0])
            kth.append(dexp_inv_se3_rows(theta, Vi))
        Pn = P @ exp_se3_rows(h * sum(b * k for b, k in zip(_RK_B, kth)))
    else:
        kT = [P @ _hat(V)]
        for c in _RK_C:
            Pi = P + h * c * kT[-1]
            Vi = V + h * c * kV[-1]
            kV.append(accel(Pi, Vi)[0])
            kT.append(Pi @ _hat(Vi))
        Pn = _rigid(P + h * sum(b * k for b, k in zip(_RK_B, kT)))
    return Pn, V + h * sum(b * k for b, k in zip(_RK_B, kV)), lam0


def acceleration_gains(h, gains=None):
    """The acceleration-level Baumgarte gains ``(alpha, beta)`` of a step
    ``h``: ``gains``, or ``1 / (5 h)`` each (critically damped, five steps)."""
    return tuple(gains) if gains is not None else (1.0 / (5.0 * h), 1.0 / (5.0 * h))


def step(mx, P, V, h, integrator, tau=None, f_ext=None, stabilization=None, beta=None, gains=None):
    """One step of every state of a batch.

    Parameters
    ----------
    mx : gear.MaximalModel
    P : ndarray, shape (N, nb, 4, 4)
    V : ndarray, shape (N, nb, 6)
    h : float
    integrator : {"euler", "implicit", "rk4", "rkmk4"}
    tau : ndarray, shape (N, nv), optional
    f_ext : ndarray, shape (N, nb, 6), optional
    stabilization : {None, "baumgarte", "projection"}
        ``"projection"`` is applied by the caller (:func:`project`) after
        the step.
    beta : float, optional
        Velocity-level Baumgarte factor (default :data:`BAUMGARTE_BETA`).
    gains : (float, float), optional
        Acceleration-level Baumgarte gains ``(alpha, beta)`` (default
        ``1 / (5 h)`` each).

    Returns
    -------
    P, V : ndarray
        The state after the step.
    lam : ndarray, shape (N, nrows)
        Row forces of the step (at its start for Runge-Kutta).
    """
    if integrator in ("euler", "implicit"):
        b = BAUMGARTE_BETA if beta is None else beta
        return _velocity_step(mx, P, V, h, tau, f_ext, stabilization, b, integrator == "implicit")
    if integrator in ("rk4", "rkmk4"):
        g = None
        if stabilization == "baumgarte" and not mx.compliant:
            g = acceleration_gains(h, gains)
        return _rk_step(mx, P, V, h, tau, f_ext, g, integrator == "rkmk4")
    raise ValueError(f"unknown integrator {integrator!r} for maximal coordinates; choose one of "
                     f"{list(INTEGRATORS)}")


def project(mx, P, V, tol=1e-12, max_iter=10):
    """Move every state back onto its rows: Gauss-Newton on the poses
    (the mass-weighted least-norm correction ``delta = -M^{-1} J^T K^{-1}
    g``, ``T <- T exp(delta)``, with ``K = J M^{-1} J^T`` factorised once
    per state and reused while it converges fast), then the twists
    projected onto ``J V = 0`` in the same metric.

    The reused factor (chord steps) brings an integrator step's drift to
    rounding in one or two steps.  Far from the rows (a start that
    violates its joints, a large step) chord steps contract slowly, so a
    state whose ``max |g|`` fell by less than 100x in a step (and is still
    above 1e-9) takes ``J`` and the factor afresh at its new poses:
    Newton's steps, which converge quadratically.

    Returns
    -------
    P, V : ndarray
    residual : float
        The largest ``|g|`` before the projection.
    """
    if mx.nrows == 0 or mx.compliant:
        return P, V, 0.0
    ev = mx.evaluate(P)
    g = ev["g"]
    err = np.abs(g).max(axis=1, initial=0.0)          # each state's max |g|
    before = float(err.max(initial=0.0))
    rs = RowSystem(mx, ev)
    active = np.ones(P.shape[0], dtype=bool)
    for _ in range(max_iter):
        # each state iterates until its own rows hold (batch-independent bits)
        active &= err > tol
        if not active.any():
            break
        P = np.where(active[:, None, None, None], P @ exp_se3_rows(-rs.minv_jt_apply(rs.solve(g))), P)
        g = mx.evaluate(P, rows=False)["g"]
        last, err = err, np.abs(g).max(axis=1, initial=0.0)
        slow = np.flatnonzero(active & (err > 1e-2 * last) & (err > 1e-9))
        if slow.size:
            rs.take(slow, RowSystem(mx, mx.evaluate(P[slow])))
    rs = RowSystem(mx, mx.evaluate(P))
    V = V - rs.minv_jt_apply(rs.solve(rs.J_apply(V)))
    return P, V, before

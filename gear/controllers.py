"""Controllers for :func:`gear.simulate`: callables ``tau(t, q, dq)`` that
work on one state or a batch (``(N, nq)``, ``(N, nv)``).

* :class:`PD` -- ``tau = kp (q_target - q) + kd (dq_target - dq)``, the
  position error taken on the manifold (``model.difference``).
* :class:`GravityCompensation` -- ``tau = g(q)``.
* :class:`ComputedTorque` -- ``tau = M(q) (ddq_ref + kp e + kd de) + b(q,
  dq)`` through one RNEA call (Kim Table 2), tracking a reference
  ``(q_ref(t), dq_ref(t), ddq_ref(t))``.

They evaluate with the native batched kernels, so a batch costs one
call per stage, not one per state.
"""
from __future__ import annotations

import numpy as np

from ._validate import as_array

__all__ = ["PD", "GravityCompensation", "ComputedTorque"]


def _gains(name, value, nv):
    arr = np.broadcast_to(np.asarray(value, dtype=float), (nv,)).copy() if np.ndim(value) <= 1 else None
    if arr is None or not np.isfinite(arr).all() or (arr < 0).any():
        raise ValueError(f"{name} must be a non-negative number or one per velocity coordinate ({nv},)")
    return arr


class PD:
    """``tau = kp * (q_target - q) + kd * (dq_target - dq)`` (+ ``g(q)`` when
    ``gravity_compensation``).

    Parameters
    ----------
    model : gear.Model
    kp, kd : float or array_like (nv,)
    q_target : array_like (nq,)
    dq_target : array_like (nv,), optional (default 0)
    gravity_compensation : bool
    """

    def __init__(self, model, kp, kd, q_target, dq_target=None, gravity_compensation=False):
        self.model = model
        self.kp, self.kd = _gains("kp", kp, model.nv), _gains("kd", kd, model.nv)
        self.q_target = as_array("q_target", q_target, (model.nq,))
        model.check_configuration(self.q_target[None], "q_target")
        self.dq_target = np.zeros(model.nv) if dq_target is None else as_array("dq_target", dq_target, (model.nv,))
        self.gravity_compensation = bool(gravity_compensation)

    def __call__(self, t, q, dq):
        q = np.asarray(q, dtype=float)
        qt = np.broadcast_to(self.q_target, q.shape)
        e = self.model.difference(q, qt)                        # q exp(e) = q_target
        tau = self.kp * e + self.kd * (self.dq_target - np.asarray(dq, dtype=float))
        if self.gravity_compensation:
            from .algorithms import gravity_forces

            tau = tau + gravity_forces(self.model, q)
        return tau


class GravityCompensation:
    """``tau = g(q)``: holds a tree still against gravity."""

    def __init__(self, model):
        self.model = model

    def __call__(self, t, q, dq):
        from .algorithms import gravity_forces

        return gravity_forces(self.model, np.asarray(q, dtype=float))


class ComputedTorque:
    """Computed-torque (inverse-dynamics) control of a tree.

    ``tau = RNEA(q, dq, ddq_ref + kp e + kd de)`` with ``e = q_ref - q``
    (on the manifold) and ``de = dq_ref - dq``: with a perfect model the
    error obeys ``de' + kd de + kp e = 0``.

    Parameters
    ----------
    model : gear.Model
    kp, kd : float or array_like (nv,)
    reference : callable
        ``reference(t) -> (q_ref (nq,), dq_ref (nv,), ddq_ref (nv,))``.
    """

    def __init__(self, model, kp, kd, reference):
        if not callable(reference):
            raise TypeError("reference must be a callable t -> (q_ref, dq_ref, ddq_ref)")
        self.model = model
        self.kp, self.kd = _gains("kp", kp, model.nv), _gains("kd", kd, model.nv)
        self.reference = reference

    def __call__(self, t, q, dq):
        from .algorithms import inverse_dynamics

        q = np.asarray(q, dtype=float)
        dq = np.asarray(dq, dtype=float)
        qr, dqr, ddqr = (np.asarray(x, dtype=float) for x in self.reference(t))
        e = self.model.difference(q, np.broadcast_to(qr, q.shape))
        a = ddqr + self.kp * e + self.kd * (dqr - dq)
        return inverse_dynamics(self.model, q, dq, np.ascontiguousarray(np.broadcast_to(a, dq.shape)))

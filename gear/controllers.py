"""Controllers for :func:`gear.simulate`: callables ``tau(t, q, dq)`` that
work on one state or a batch (``(N, nq)``, ``(N, nv)``).

* :class:`PD` -- ``tau = kp (q_target - q) + kd (dq_target - dq)``, the
  position error taken on the manifold (``model.difference``).
* :class:`GravityCompensation` -- ``tau = g(q)``.
* :class:`ComputedTorque` -- ``tau = M(q) (ddq_ref + kp e + kd de) + b(q,
  dq)`` through one RNEA call (Kim Table 2), tracking a reference
  ``(q_ref(t), dq_ref(t), ddq_ref(t))``: a Python callable, or a
  :class:`SampledReference` (samples on a uniform time grid, interpolated
  linearly).

They evaluate with the native batched kernels, so a batch costs one
call per stage, not one per state.  PD, GravityCompensation and
ComputedTorque with a SampledReference also run inside the native
rollout loop of :func:`gear.simulate` (vector-space joints; no Python
per step at all).
"""
from __future__ import annotations

import numpy as np

from ._validate import as_array

__all__ = ["PD", "GravityCompensation", "ComputedTorque", "SampledReference"]


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


class SampledReference:
    """A reference trajectory sampled on a uniform time grid, for
    :class:`ComputedTorque`; linear interpolation between samples, held at
    the first / last sample outside the grid.

    Parameters
    ----------
    t : array_like, shape (K,)
        Increasing, uniformly spaced sample times (``K >= 1``).
    q : array_like, shape (K, nq)
    dq, ddq : array_like, shape (K, nv)

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0.0, 1.0, 101)
    >>> ref = SampledReference(t, np.sin(t)[:, None], np.cos(t)[:, None], -np.sin(t)[:, None])
    >>> q, dq, ddq = ref(0.505)
    >>> bool(abs(q[0] - np.sin(0.505)) < 1e-5)
    True
    """

    def __init__(self, t, q, dq, ddq):
        t = np.asarray(t, dtype=float).ravel()
        K = t.size
        if K < 1 or not np.isfinite(t).all():
            raise ValueError("t must be a non-empty array of finite sample times")
        q = as_array("q", q, (K, np.shape(q)[-1] if np.ndim(q) == 2 else -1))
        nv = np.shape(dq)[-1] if np.ndim(dq) == 2 else -1
        dq = as_array("dq", dq, (K, nv))
        ddq = as_array("ddq", ddq, (K, dq.shape[1]))
        if K > 1:
            step = np.diff(t)
            if not (step > 0).all() or np.abs(step - step.mean()).max() > 1e-9 * max(1.0, abs(t).max()):
                raise ValueError("t must be increasing and uniformly spaced")
            self.dt = float((t[-1] - t[0]) / (K - 1))
        else:
            self.dt = 1.0
        self.t0 = float(t[0])
        self.nq, self.nv = q.shape[1], dq.shape[1]
        self.samples = np.ascontiguousarray(np.concatenate([q, dq, ddq], axis=1))

    @classmethod
    def from_callable(cls, reference, t):
        """Sample ``reference(t) -> (q, dq, ddq)`` at the times ``t``."""
        rows = [tuple(np.asarray(x, dtype=float) for x in reference(float(tk))) for tk in np.asarray(t, float)]
        return cls(t, np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows]),
                   np.stack([r[2] for r in rows]))

    def __call__(self, t):
        """``(q, dq, ddq)`` at time ``t`` (the native loop's arithmetic)."""
        X, K = self.samples, len(self.samples)
        s = (float(t) - self.t0) / self.dt
        if K == 1 or s <= 0.0:
            row = X[0]
        elif s >= K - 1:
            row = X[K - 1]
        else:
            i = int(s)
            f = s - i
            row = (1.0 - f) * X[i] + f * X[i + 1]
        nq, nv = self.nq, self.nv
        return row[:nq], row[nq:nq + nv], row[nq + nv:]


class ComputedTorque:
    """Computed-torque (inverse-dynamics) control of a tree.

    ``tau = RNEA(q, dq, ddq_ref + kp e + kd de)`` with ``e = q_ref - q``
    (on the manifold) and ``de = dq_ref - dq``: with a perfect model the
    error obeys ``de' + kd de + kp e = 0``.

    Parameters
    ----------
    model : gear.Model
    kp, kd : float or array_like (nv,)
    reference : callable or SampledReference
        ``reference(t) -> (q_ref (nq,), dq_ref (nv,), ddq_ref (nv,))``.  A
        :class:`SampledReference` also runs in :func:`gear.simulate`'s
        native loop (models with vector-space joints only); any other
        callable runs in the Python loop.
    """

    def __init__(self, model, kp, kd, reference):
        if not callable(reference):
            raise TypeError("reference must be a callable t -> (q_ref, dq_ref, ddq_ref)")
        if isinstance(reference, SampledReference) and (reference.nq, reference.nv) != (model.nq, model.nv):
            raise ValueError(f"reference has samples of {reference.nq} positions and {reference.nv} "
                             f"velocities; the model has nq = {model.nq}, nv = {model.nv}")
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

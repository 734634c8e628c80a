"""SE(3) and se(3) maps on stacks: the formulas of :mod:`gear.spatial`
(Kim eqs. 1-31) evaluated on every row of an ``(n, ...)`` array at once.

Used by the maximal-coordinate formulation (:mod:`gear.maximal`) and the
closed-loop rows, where one call handles every body (and every state of a
batch) without a Python loop.
"""
from __future__ import annotations

import numpy as np

__all__ = ["ad_inv_mats", "cross_rows", "dad_rows", "ad_rows", "skew_rows", "exp_so3_rows",
           "exp_se3_rows", "dexp_inv_se3_rows", "inverse_rows"]

_SMALL = 1e-6


def cross_rows(a, b):
    """Row-wise ``a x b`` for ``(..., 3)`` stacks (``np.cross``'s axis
    handling costs more than the products at small sizes)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a1 * b2 - a2 * b1
    out[..., 1] = a2 * b0 - a0 * b2
    out[..., 2] = a0 * b1 - a1 * b0
    return out


def skew_rows(w):
    """``[w]`` for a ``(..., 3)`` stack, shape ``(..., 3, 3)``."""
    W = np.zeros(w.shape[:-1] + (3, 3))
    W[..., 0, 1], W[..., 0, 2], W[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    W[..., 1, 0], W[..., 2, 0], W[..., 2, 1] = w[..., 2], -w[..., 1], w[..., 0]
    return W


def ad_inv_mats(T):
    """``Ad_{T^{-1}}`` for a stack of transforms ``T`` (n, 12) (R row-major,
    p), shape (n, 6, 6): ``[[R^T, 0], [-R^T [p], R^T]]`` (Kim eq. 7)."""
    R = T[:, :9].reshape(-1, 3, 3)
    p = T[:, 9:]
    Rt = np.transpose(R, (0, 2, 1))
    X = np.zeros((len(T), 6, 6))
    X[:, :3, :3] = Rt
    X[:, 3:, 3:] = Rt
    X[:, 3:, :3] = -Rt @ skew_rows(p)
    return X


def dad_rows(V, F):
    """``ad*_V F = ad_V^T F`` for ``(..., 6)`` stacks: ``(m x w + f x v,
    f x w)`` (Kim eq. 29)."""
    w, v, m, f = V[..., :3], V[..., 3:], F[..., :3], F[..., 3:]
    return np.concatenate([cross_rows(m, w) + cross_rows(f, v), cross_rows(f, w)], axis=-1)


def ad_rows(V, X):
    """``ad_V X = [V, X]`` for ``(..., 6)`` stacks: ``(w x wx, w x vx + v x
    wx)`` (Kim eq. 11)."""
    w, v, wx, vx = V[..., :3], V[..., 3:], X[..., :3], X[..., 3:]
    return np.concatenate([cross_rows(w, wx), cross_rows(w, vx) + cross_rows(v, wx)], axis=-1)


def _so3_coeffs(theta):
    """``sin(t)/t``, ``(1 - cos t)/t^2`` and ``(t - sin t)/t^3``, with their
    Taylor series below ``_SMALL``."""
    small = theta < _SMALL
    t = np.where(small, 1.0, theta)
    t2 = theta * theta
    a = np.where(small, 1.0 - t2 / 6.0, np.sin(t) / t)
    b = np.where(small, 0.5 - t2 / 24.0, (1.0 - np.cos(t)) / (t * t))
    c = np.where(small, 1.0 / 6.0 - t2 / 120.0, (t - np.sin(t)) / (t * t * t))
    return a, b, c


def exp_so3_rows(w):
    """Rodrigues' formula on a ``(..., 3)`` stack: rotations ``(..., 3, 3)``."""
    theta = np.linalg.norm(w, axis=-1)
    a, b, _ = _so3_coeffs(theta)
    W = skew_rows(w)
    return np.eye(3) + a[..., None, None] * W + b[..., None, None] * (W @ W)


def exp_se3_rows(V):
    """``exp`` of twists ``(w, v)`` on a ``(..., 6)`` stack: homogeneous
    transforms ``(..., 4, 4)`` (Kim eq. 15)."""
    w, v = V[..., :3], V[..., 3:]
    theta = np.linalg.norm(w, axis=-1)
    a, b, c = _so3_coeffs(theta)
    W = skew_rows(w)
    W2 = W @ W
    R = np.eye(3) + a[..., None, None] * W + b[..., None, None] * W2
    Jl = np.eye(3) + b[..., None, None] * W + c[..., None, None] * W2
    out = np.zeros(V.shape[:-1] + (4, 4))
    out[..., :3, :3] = R
    out[..., :3, 3] = np.einsum("...ij,...j->...i", Jl, v)
    out[..., 3, 3] = 1.0
    return out


def dexp_inv_se3_rows(theta, xi):
    """``theta'`` of ``T = T0 exp(theta)`` moving with body twist ``xi``
    (``T^{-1} dT/dt = xi``): ``dexp^{-1}_{-theta}(xi) ~ xi + [theta, xi]/2
    + [theta, [theta, xi]]/12`` on ``(..., 6)`` stacks, the series of
    Munthe-Kaas' method truncated after the terms a 4th-order
    Runge-Kutta-Munthe-Kaas step needs (``theta`` is O(h))."""
    c1 = ad_rows(theta, xi)
    return xi + 0.5 * c1 + ad_rows(theta, c1) / 12.0


def inverse_rows(T):
    """Inverse of homogeneous transforms ``(..., 4, 4)``."""
    R = T[..., :3, :3]
    Rt = np.swapaxes(R, -1, -2)
    out = np.zeros_like(T)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", Rt, T[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out

"""Joint models (Kim Sec. 2.1: ``T_{lambda(i),i} = placement_i J_i(q_i)``).

Every joint evaluates its transform ``T(q)``, its Jacobian in the child
frame ``S(q) = T^{-1} dT/dq`` and the time derivative ``dS(q, dq)`` through
the one Cython switch in ``gear/joints/_jcalc.pxd`` that the kernels use, so
the Python objects and the recursions can never disagree.

Configuration manifolds: Spherical and Free joints carry unit quaternions
``(w, x, y, z)`` and integrate by the right perturbation ``T exp(dt S dq)``
(body-frame velocities).  Every other joint has coordinates in R^n and
integrates as ``q + dt dq``; for Revolute, Prismatic, Helical and
Cylindrical joints this is exactly ``T exp(dt S dq)``, for Universal and
Planar joints it is the coordinate chart of their configuration set.
"""
from __future__ import annotations

import numpy as np

from .._validate import as_array
from ..spatial import SE3, _SMALL, quat_exp, quat_log, quat_mul, quat_to_rot, exp_se3, log_se3

__all__ = [
    "Joint", "Revolute", "Prismatic", "Helical", "Cylindrical", "Universal",
    "Planar", "Spherical", "Free", "Fixed", "KINDS",
]

FIXED, REVOLUTE, PRISMATIC, HELICAL, CYLINDRICAL, UNIVERSAL, PLANAR, SPHERICAL, FREE = range(9)
KINDS = {
    FIXED: "Fixed", REVOLUTE: "Revolute", PRISMATIC: "Prismatic", HELICAL: "Helical",
    CYLINDRICAL: "Cylindrical", UNIVERSAL: "Universal", PLANAR: "Planar",
    SPHERICAL: "Spherical", FREE: "Free",
}

# Tolerance on |q| - 1 for quaternions handed to the public API.
QUAT_TOL = 1e-6
#: joint limits of this magnitude and beyond count as none in ``random`` (files
#: write +-1e16 for "unlimited")
UNLIMITED = 1e6


def _unit(name, axis):
    a = as_array(name, axis, (3,))
    n = np.linalg.norm(a)
    if n < 1e-12:
        raise ValueError(f"{name} must be a non-zero 3-vector, got {a.tolist()}")
    return a / n


class Joint:
    """Base class of joint models.

    Attributes
    ----------
    kind : int
        Code of the joint kind in the jcalc switch.
    nq, nv : int
        Number of configuration and velocity coordinates.
    params : ndarray, shape (10,)
        Parameters read by jcalc (axes, pitch).
    lower, upper : ndarray, shape (nq,)
        Position limits used by :meth:`random` (``-inf``/``inf`` if none).
    """

    kind = FIXED
    nq = 0
    nv = 0

    def __init__(self):
        self.params = np.zeros(10)
        self.lower = np.full(self.nq, -np.inf)
        self.upper = np.full(self.nq, np.inf)

    # -- kinematics through the shared jcalc switch -----------------------
    def _jcalc(self, q, dq=None):
        from .. import _core

        q = as_array("q", q, (self.nq,))
        if self.kind in (SPHERICAL, FREE):
            _check_quat(q[-4:], "q")
        if dq is not None:
            dq = as_array("dq", dq, (self.nv,))
        return _core.jcalc_py(self.kind, self.params, q, dq)

    def T(self, q):
        """Joint transform ``J(q)`` as :class:`gear.SE3`.

        Parameters
        ----------
        q : array_like, shape (nq,)
        """
        J, _, _ = self._jcalc(q)
        return SE3(J[:9].reshape(3, 3), J[9:])

    def S(self, q):
        """Joint Jacobian ``S(q) = J^{-1} dJ/dq`` in the child frame, shape (6, nv)."""
        return self._jcalc(q)[1]

    def dS(self, q, dq):
        """Time derivative of ``S`` along ``dq``, shape (6, nv)."""
        return self._jcalc(q, dq)[2]

    # -- manifold operations (vectorised over a leading batch axis) ----------
    def neutral(self):
        """Neutral configuration, shape (nq,)."""
        return np.zeros(self.nq)

    def integrate(self, q, dq, dt=1.0):
        """Configuration reached from ``q`` with velocity ``dq`` after ``dt``."""
        return np.asarray(q, float) + dt * np.asarray(dq, float)

    def difference(self, q0, q1):
        """Velocity ``v`` with ``integrate(q0, v) = q1``."""
        return np.asarray(q1, float) - np.asarray(q0, float)

    def random(self, rng=None, size=None):
        """Random configurations within the joint's limits.

        Each coordinate is uniform between its limits, or where none is set
        in its default range (angles [-pi, pi], displacements [-1, 1]).
        Limits of 1e6 and beyond count as none (files write +-1e16 for
        "unlimited").

        Parameters
        ----------
        rng : numpy.random.Generator or int, optional
            Generator or seed (``numpy.random.default_rng``).
        size : int, optional
            Number of configurations.

        Returns
        -------
        ndarray, shape (nq,), or (size, nq) when ``size`` is given
        """
        rng = np.random.default_rng(rng)
        lo, hi = self._limited_range()
        return rng.uniform(lo, hi, size=None if size is None else (size, self.nq))

    def _limited_range(self):
        """The range :meth:`random` draws from: the limits where set, the
        default range elsewhere.  Limits of magnitude ``UNLIMITED`` (1e6)
        and above count as none: files write "unlimited" as +-1e16, and
        angles drawn from there (1e15 rad, where a double resolves no angle
        finer than 0.1 rad) would mean nothing."""
        d_lo, d_hi = self._default_range()
        lo = np.where(np.abs(self.lower) < UNLIMITED, self.lower, d_lo)
        hi = np.where(np.abs(self.upper) < UNLIMITED, self.upper, d_hi)
        return lo, hi

    def _default_range(self):
        return -np.pi * np.ones(self.nq), np.pi * np.ones(self.nq)

    def set_limits(self, lower, upper):
        """Set position limits (arrays of length nq); returns self."""
        lower = np.broadcast_to(np.asarray(lower, float), (self.nq,)).copy()
        upper = np.broadcast_to(np.asarray(upper, float), (self.nq,)).copy()
        if np.any(np.isnan(lower)) or np.any(np.isnan(upper)) or np.any(lower > upper):
            raise ValueError(f"invalid joint limits: lower={lower.tolist()} upper={upper.tolist()}")
        self.lower, self.upper = lower, upper
        return self

    def __repr__(self):
        return f"{type(self).__name__}()"


class Fixed(Joint):
    """Rigid attachment (no coordinates)."""

    kind = FIXED


class Revolute(Joint):
    """Rotation about a unit ``axis`` of the joint frame; ``q`` = angle."""

    kind = REVOLUTE
    nq = nv = 1

    def __init__(self, axis=(0.0, 0.0, 1.0)):
        super().__init__()
        self.axis = _unit("axis", axis)
        self.params[0:3] = self.axis

    def __repr__(self):
        return f"Revolute(axis={self.axis.tolist()})"


class Prismatic(Joint):
    """Translation along a unit ``axis``; ``q`` = displacement."""

    kind = PRISMATIC
    nq = nv = 1

    def __init__(self, axis=(0.0, 0.0, 1.0)):
        super().__init__()
        self.axis = _unit("axis", axis)
        self.params[0:3] = self.axis

    def _default_range(self):
        return -np.ones(1), np.ones(1)

    def __repr__(self):
        return f"Prismatic(axis={self.axis.tolist()})"


class Helical(Joint):
    """Screw motion: rotation ``q`` about ``axis`` with translation
    ``pitch * q`` along it (``pitch`` in length per radian)."""

    kind = HELICAL
    nq = nv = 1

    def __init__(self, axis=(0.0, 0.0, 1.0), pitch=0.0):
        super().__init__()
        self.axis = _unit("axis", axis)
        pitch = float(pitch)
        if not np.isfinite(pitch):
            raise ValueError(f"pitch must be finite, got {pitch}")
        self.pitch = pitch
        self.params[0:3] = self.axis
        self.params[9] = pitch

    def __repr__(self):
        return f"Helical(axis={self.axis.tolist()}, pitch={self.pitch})"


class Cylindrical(Joint):
    """Rotation and translation about/along one ``axis``; ``q`` = (angle, displacement)."""

    kind = CYLINDRICAL
    nq = nv = 2

    def __init__(self, axis=(0.0, 0.0, 1.0)):
        super().__init__()
        self.axis = _unit("axis", axis)
        self.params[0:3] = self.axis

    def _default_range(self):
        return np.array([-np.pi, -1.0]), np.array([np.pi, 1.0])

    def __repr__(self):
        return f"Cylindrical(axis={self.axis.tolist()})"


class Universal(Joint):
    """Two rotations, ``exp([a1] q1) exp([a2] q2)`` (axes must not be parallel)."""

    kind = UNIVERSAL
    nq = nv = 2

    def __init__(self, axis1=(1.0, 0.0, 0.0), axis2=(0.0, 1.0, 0.0)):
        super().__init__()
        self.axis1 = _unit("axis1", axis1)
        self.axis2 = _unit("axis2", axis2)
        if np.linalg.norm(np.cross(self.axis1, self.axis2)) < 1e-6:
            raise ValueError("Universal joint axes must not be parallel")
        self.params[0:3] = self.axis1
        self.params[3:6] = self.axis2

    def __repr__(self):
        return f"Universal(axis1={self.axis1.tolist()}, axis2={self.axis2.tolist()})"


class Planar(Joint):
    """Motion in the plane with unit ``normal``: ``q = (x, y, angle)`` with
    ``J = (exp([n] angle), x e1 + y e2)``; ``e1, e2, n`` right-handed."""

    kind = PLANAR
    nq = nv = 3

    def __init__(self, normal=(0.0, 0.0, 1.0)):
        super().__init__()
        n = _unit("normal", normal)
        # e1: the coordinate axis least aligned with n, orthogonalised
        t = np.eye(3)[int(np.argmin(np.abs(n)))]
        e1 = t - n * (t @ n)
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(n, e1)
        self.normal, self.e1, self.e2 = n, e1, e2
        self.params[0:3] = e1
        self.params[3:6] = e2
        self.params[6:9] = n

    def _default_range(self):
        return np.array([-1.0, -1.0, -np.pi]), np.array([1.0, 1.0, np.pi])

    def __repr__(self):
        return f"Planar(normal={self.normal.tolist()})"


def _check_quat(qq, name):
    n = np.linalg.norm(qq, axis=-1)
    if np.any(np.abs(n - 1.0) > QUAT_TOL):
        raise ValueError(
            f"{name} contains a quaternion of norm {np.atleast_1d(n).ravel()[np.argmax(np.abs(np.atleast_1d(n).ravel() - 1))]:.6g}; "
            "quaternions (w, x, y, z) must have unit norm (normalise q, or use model.integrate)"
        )


def _random_quat(rng, size=None):
    """Unit quaternions uniformly distributed on the rotations, on the
    hemisphere ``w >= 0``; shape (4,) or (size, 4).  A normalised Gaussian
    4-vector is uniform on the 3-sphere (Muller, "A note on a method for
    generating points uniformly on n-dimensional spheres"), and a uniform
    unit quaternion is a uniform rotation."""
    g = rng.standard_normal((4,) if size is None else (size, 4))
    g /= np.linalg.norm(g, axis=-1, keepdims=True)
    return np.where(g[..., :1] < 0, -g, g)


# -- batched quaternion and SE(3) maps (shape (N, .)) for the manifold
# operations on a batch: the formulas of gear.spatial (quat_mul, quat_exp,
# quat_log, exp_se3, log_se3) evaluated on every row at once, with their
# Taylor-series threshold _SMALL.


def _bquat_mul(a, b):
    aw, ax, ay, az = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
    bw, bx, by, bz = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    return np.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=1)


def _bquat_exp(w):
    theta = np.linalg.norm(w, axis=1)
    small = theta < _SMALL
    s = np.where(small, 0.5 - theta * theta / 48.0, np.sin(0.5 * theta) / np.where(small, 1.0, theta))
    return np.concatenate([np.cos(0.5 * theta)[:, None], s[:, None] * w], axis=1)


def _bquat_log(q):
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    q = np.where(q[:, :1] < 0, -q, q)
    w0 = q[:, 0]
    vn = np.linalg.norm(q[:, 1:], axis=1)
    small = vn < _SMALL
    w0s = np.where(small, w0, 1.0)          # w0 ~ 1 where vn is small
    k = np.where(small, 2.0 / w0s * (1.0 - vn * vn / (3.0 * w0s * w0s)),
                 2.0 * np.arctan2(vn, w0) / np.where(small, 1.0, vn))
    return k[:, None] * q[:, 1:]


def _bquat_to_rot(q):
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=1),
    ], axis=1)


def _bso3_bc(theta):
    """``(1-cos t)/t^2`` and ``(t-sin t)/t^3`` per row (Taylor series below
    ``_SMALL``, as ``gear.spatial``)."""
    small = theta < _SMALL
    t = np.where(small, 1.0, theta)
    t2 = theta * theta
    sh = np.sin(0.5 * t) / t
    b = np.where(small, 0.5 - t2 / 24.0 + t2 * t2 / 720.0, 2.0 * sh * sh)
    c = np.where(small, 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0, (t - np.sin(t)) / (t * t * t))
    return b, c


def _bleft_jacobian_apply(w, v):
    """``J_l(w) v = v + b w x v + c w x (w x v)`` per row."""
    b, c = _bso3_bc(np.linalg.norm(w, axis=1))
    wv = np.cross(w, v)
    return v + b[:, None] * wv + c[:, None] * np.cross(w, wv)


def _bleft_jacobian_inv_apply(w, v):
    """``J_l(w)^{-1} v = v - w x v / 2 + k w x (w x v)`` per row."""
    theta = np.linalg.norm(w, axis=1)
    small = theta < _SMALL
    t = np.where(small, 1.0, theta)
    k = np.where(small, 1.0 / 12.0 + theta * theta / 720.0,
                 1.0 / (t * t) - np.cos(0.5 * t) / (2.0 * t * np.sin(0.5 * t)))
    wv = np.cross(w, v)
    return v - 0.5 * wv + k[:, None] * np.cross(w, wv)


def _conj(q):
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def _rows(a, b):
    """``a`` and ``b`` broadcast over their leading axes and flattened to
    rows: ``(lead, a (n, ka), b (n, kb))``."""
    lead = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    a = np.broadcast_to(a, lead + a.shape[-1:]).reshape(-1, a.shape[-1])
    b = np.broadcast_to(b, lead + b.shape[-1:]).reshape(-1, b.shape[-1])
    return lead, a, b


class Spherical(Joint):
    """Ball joint: ``q`` = unit quaternion (w, x, y, z); ``dq`` = body angular velocity."""

    kind = SPHERICAL
    nq, nv = 4, 3

    def neutral(self):
        return np.array([1.0, 0.0, 0.0, 0.0])

    def integrate(self, q, dq, dt=1.0):
        q = np.asarray(q, float)
        dq = np.asarray(dq, float) * dt
        if q.ndim == 1 and dq.ndim == 1:
            out = quat_mul(q, quat_exp(dq))
            return out / np.linalg.norm(out)
        lead, q, dq = _rows(q, dq)
        out = _bquat_mul(q, _bquat_exp(dq))
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.reshape(lead + (4,))

    def difference(self, q0, q1):
        q0 = np.asarray(q0, float)
        q1 = np.asarray(q1, float)
        if q0.ndim == 1 and q1.ndim == 1:
            conj = q0 * np.array([1.0, -1.0, -1.0, -1.0])
            return quat_log(quat_mul(conj, q1))
        lead, q0, q1 = _rows(q0, q1)
        return _bquat_log(_bquat_mul(_conj(q0), q1)).reshape(lead + (3,))

    def random(self, rng=None, size=None):
        """Unit quaternions uniformly distributed on the rotations (``w >= 0``),
        shape (4,), or (size, 4) when ``size`` is given."""
        return _random_quat(np.random.default_rng(rng), size)


class Free(Joint):
    """6-DoF joint: ``q = (p, quaternion (w, x, y, z))``; ``dq`` = body twist (w, v)."""

    kind = FREE
    nq, nv = 7, 6

    def neutral(self):
        return np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])

    def integrate(self, q, dq, dt=1.0):
        q = np.asarray(q, float)
        dq = np.asarray(dq, float) * dt
        if q.ndim == 1 and dq.ndim == 1:
            T = SE3(quat_to_rot(q[3:]), q[:3]) * exp_se3(dq)
            out = np.empty(7)
            out[:3] = T.p
            out[3:] = quat_mul(q[3:], quat_exp(dq[:3]))
            out[3:] /= np.linalg.norm(out[3:])
            return out
        lead, q, dq = _rows(q, dq)
        w, v = dq[:, :3], dq[:, 3:]
        out = np.empty_like(q)
        # T exp(V): p + R(quat) J_l(w) v, quat * exp(w)
        out[:, :3] = q[:, :3] + np.einsum("nij,nj->ni", _bquat_to_rot(q[:, 3:]), _bleft_jacobian_apply(w, v))
        quat = _bquat_mul(q[:, 3:], _bquat_exp(w))
        out[:, 3:] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        return out.reshape(lead + (7,))

    def difference(self, q0, q1):
        q0 = np.asarray(q0, float)
        q1 = np.asarray(q1, float)
        if q0.ndim == 1 and q1.ndim == 1:
            T0 = SE3(quat_to_rot(q0[3:]), q0[:3])
            T1 = SE3(quat_to_rot(q1[3:]), q1[:3])
            return log_se3(T0.inverse() * T1)
        lead, q0, q1 = _rows(q0, q1)
        # log(T0^-1 T1): the rotation vector of conj(quat0) quat1 (the
        # rotation R0^T R1), the translation J_l(w)^-1 R0^T (p1 - p0)
        w = _bquat_log(_bquat_mul(_conj(q0[:, 3:]), q1[:, 3:]))
        p = np.einsum("nji,nj->ni", _bquat_to_rot(q0[:, 3:]), q1[:, :3] - q0[:, :3])
        out = np.concatenate([w, _bleft_jacobian_inv_apply(w, p)], axis=1)
        return out.reshape(lead + (6,))

    def _default_range(self):
        # the positions' (the quaternion is drawn on the rotations)
        return -np.ones(self.nq), np.ones(self.nq)

    def random(self, rng=None, size=None):
        """Positions uniform within the limits of the first three coordinates
        (default [-1, 1]; limits of 1e6 and beyond count as none) and a
        unit quaternion uniformly distributed on the rotations (``w >=
        0``); shape (7,), or (size, 7) when ``size`` is given."""
        rng = np.random.default_rng(rng)
        lo, hi = self._limited_range()
        p = rng.uniform(lo[:3], hi[:3], size=None if size is None else (size, 3))
        return np.concatenate([p, _random_quat(rng, size)], axis=-1)

"""Lie-group algebra of rigid motions: SE(3), se(3) and its dual dse(3).

Conventions (Kim, "Lie Group Formulation of Articulated Rigid Body
Dynamics", Sec. 1):

* ``T = (R, p)`` in SE(3) is the pose of a frame {B} relative to {A}
  (eq. 3); its inverse is eq. (4).
* A twist ``V = (w, v)`` (angular first) is an element of se(3) (eq. 5, 9,
  10); a wrench ``F = (m, f)`` is an element of dse(3) (eq. 12).
* ``Ad_T = [[R, 0], [[p]R, R]]`` (eq. 7), ``Ad*_T = Ad_T^T`` (eq. 8),
  ``ad_V = [[[w], 0], [[v], [w]]]`` (eq. 27), ``ad*_V = ad_V^T`` (eq. 29).
* The generalized inertia of eq. (20)/(22) is represented by
  :class:`Inertia`; it transforms by eq. (21).

The functions here are the NumPy reference implementations used by the
public API, the tests and the docs.  Kernels use the ``nogil`` twins in
``gear/spatial/_spatial.pxd``.
"""
from __future__ import annotations

import numpy as np

from .._validate import as_array

__all__ = [
    "skew", "unskew", "exp_so3", "log_so3", "exp_se3", "log_se3",
    "Ad", "ad", "Ad_star", "ad_star", "SE3", "Inertia", "InertiaWarning",
    "quat_to_rot", "rot_to_quat", "quat_mul", "quat_exp", "quat_log",
]

# Below this angle the trigonometric coefficients of exp/log are evaluated
# from their Taylor series (error below 1e-16 relative).
_SMALL = 1e-4


def skew(w):
    """Skew-symmetric matrix ``[w]`` with ``[w] x = w x x`` (Kim eq. 5)."""
    w = np.asarray(w, dtype=float)
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def unskew(W):
    """Inverse of :func:`skew` (the antisymmetric part is used)."""
    W = np.asarray(W, dtype=float)
    return 0.5 * np.array([W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]])


def _so3_coeffs(theta):
    """Return ``sin(t)/t``, ``(1-cos t)/t^2`` and ``(t-sin t)/t^3``."""
    t2 = theta * theta
    if theta < _SMALL:
        a = 1.0 - t2 / 6.0 + t2 * t2 / 120.0
        b = 0.5 - t2 / 24.0 + t2 * t2 / 720.0
        c = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0
    else:
        a = np.sin(theta) / theta
        # (1 - cos t) / t^2 = 2 sin^2(t/2) / t^2, free of the cancellation
        # that costs ~eps/t^2 relative accuracy just above _SMALL
        sh = np.sin(0.5 * theta) / theta
        b = 2.0 * sh * sh
        c = (theta - np.sin(theta)) / (t2 * theta)
    return a, b, c


def exp_so3(w):
    """Rotation matrix ``exp([w])`` (Rodrigues), accurate for small angles.

    Parameters
    ----------
    w : array_like, shape (3,)
        Rotation vector (axis times angle).

    Returns
    -------
    R : ndarray, shape (3, 3)
    """
    w = as_array("w", w, (3,))
    theta = float(np.linalg.norm(w))
    a, b, _ = _so3_coeffs(theta)
    W = skew(w)
    return np.eye(3) + a * W + b * (W @ W)


def rot_to_quat(R):
    """Unit quaternion ``(w, x, y, z)`` with ``w >= 0`` of a rotation matrix.

    Uses Shepperd's method (largest diagonal pivot), stable for every
    rotation including half turns.
    """
    R = np.asarray(R, dtype=float)
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    cands = [tr, R[0, 0], R[1, 1], R[2, 2]]
    k = int(np.argmax(cands))
    if k == 0:
        s = 2.0 * np.sqrt(1.0 + tr)
        q = np.array([0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s])
    elif k == 1:
        s = 2.0 * np.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = np.array([(R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s])
    elif k == 2:
        s = 2.0 * np.sqrt(1.0 - R[0, 0] + R[1, 1] - R[2, 2])
        q = np.array([(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s])
    else:
        s = 2.0 * np.sqrt(1.0 - R[0, 0] - R[1, 1] + R[2, 2])
        q = np.array([(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s])
    if q[0] < 0:
        q = -q
    return q / np.linalg.norm(q)


def quat_to_rot(q):
    """Rotation matrix of a quaternion ``(w, x, y, z)`` (normalised first)."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q)
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def quat_mul(a, b):
    """Hamilton product ``a * b`` of quaternions ``(w, x, y, z)``."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ])


def quat_exp(w):
    """Unit quaternion of the rotation ``exp([w])``."""
    w = np.asarray(w, dtype=float)
    theta = float(np.linalg.norm(w))
    h = 0.5 * theta
    if theta < _SMALL:
        s = 0.5 - theta * theta / 48.0  # sin(t/2)/t
    else:
        s = np.sin(h) / theta
    return np.array([np.cos(h), s * w[0], s * w[1], s * w[2]])


def quat_log(q):
    """Rotation vector ``w`` (``|w| <= pi``) of a unit quaternion."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q)
    if q[0] < 0:
        q = -q
    vn = float(np.linalg.norm(q[1:]))
    if vn < _SMALL:
        # theta = 2 atan2(vn, w); theta / vn = 2/w (1 - vn^2/(3 w^2) + ...)
        w0 = q[0]
        k = 2.0 / w0 * (1.0 - vn * vn / (3.0 * w0 * w0))
    else:
        k = 2.0 * np.arctan2(vn, q[0]) / vn
    return k * q[1:]


def log_so3(R):
    """Rotation vector ``w`` with ``exp([w]) = R`` and ``|w| <= pi``."""
    R = as_array("R", R, (3, 3))
    return quat_log(rot_to_quat(R))


def _left_jacobian(w):
    theta = float(np.linalg.norm(w))
    _, b, c = _so3_coeffs(theta)
    W = skew(w)
    return np.eye(3) + b * W + c * (W @ W)


def _left_jacobian_inv(w):
    theta = float(np.linalg.norm(w))
    W = skew(w)
    if theta < _SMALL:
        k = 1.0 / 12.0 + theta * theta / 720.0
    else:
        half = 0.5 * theta
        k = 1.0 / (theta * theta) - np.cos(half) / (2.0 * theta * np.sin(half))
    return np.eye(3) - 0.5 * W + k * (W @ W)


def exp_se3(V):
    """Matrix exponential of a twist ``V = (w, v)``: returns :class:`SE3`."""
    V = as_array("V", V, (6,))
    w, v = V[:3], V[3:]
    return SE3(exp_so3(w), _left_jacobian(w) @ v)


def log_se3(T):
    """Twist ``V = (w, v)`` with ``exp_se3(V) = T`` and ``|w| <= pi``."""
    if not isinstance(T, SE3):
        T = SE3.from_matrix(T)
    w = log_so3(T.R)
    return np.concatenate([w, _left_jacobian_inv(w) @ T.p])


def Ad(T):
    """Adjoint ``Ad_T = [[R, 0], [[p]R, R]]`` (Kim eq. 7), shape (6, 6)."""
    if not isinstance(T, SE3):
        T = SE3.from_matrix(T)
    out = np.zeros((6, 6))
    out[:3, :3] = T.R
    out[3:, 3:] = T.R
    out[3:, :3] = skew(T.p) @ T.R
    return out


def Ad_star(T):
    """Co-adjoint ``Ad*_T = Ad_T^T`` (Kim eq. 8) acting on wrenches."""
    return Ad(T).T


def ad(V):
    """Lie bracket matrix ``ad_V = [[[w], 0], [[v], [w]]]`` (Kim eq. 27)."""
    V = as_array("V", V, (6,))
    out = np.zeros((6, 6))
    W = skew(V[:3])
    out[:3, :3] = W
    out[3:, 3:] = W
    out[3:, :3] = skew(V[3:])
    return out


def ad_star(V):
    """``ad*_V = ad_V^T`` (Kim eq. 29)."""
    return ad(V).T


class SE3:
    """Rigid transform ``T = (R, p)`` in SE(3) (Kim eq. 3).

    Parameters
    ----------
    R : array_like, shape (3, 3), optional
        Rotation matrix (orthonormal, det +1).  Default: identity.
    p : array_like, shape (3,), optional
        Translation.  Default: zero.

    Examples
    --------
    >>> import numpy as np, gear
    >>> T = gear.SE3(p=[1.0, 0.0, 0.0])
    >>> (T * T).p
    array([2., 0., 0.])
    """

    __slots__ = ("R", "p")

    def __init__(self, R=None, p=None):
        R = np.eye(3) if R is None else as_array("R", R, (3, 3))
        p = np.zeros(3) if p is None else as_array("p", p, (3,))
        err = np.abs(R.T @ R - np.eye(3)).max()
        if err > 1e-6 or np.linalg.det(R) < 0:
            raise ValueError(
                f"R is not a rotation matrix (|R^T R - 1| = {err:.2e}, det = {np.linalg.det(R):.3f}); "
                "pass an orthonormal matrix with determinant +1"
            )
        self.R = R
        self.p = p

    @classmethod
    def identity(cls):
        return cls()

    @classmethod
    def from_matrix(cls, H):
        """Build from a homogeneous 4x4 matrix."""
        H = as_array("T", H, (4, 4))
        return cls(H[:3, :3], H[:3, 3])

    @classmethod
    def from_rpy(cls, rpy, p=None):
        """Build from URDF roll-pitch-yaw angles: ``R = Rz(y) Ry(p) Rx(r)``."""
        r, pi_, y = (float(x) for x in rpy)
        Rx = exp_so3([r, 0, 0])
        Ry = exp_so3([0, pi_, 0])
        Rz = exp_so3([0, 0, y])
        return cls(Rz @ Ry @ Rx, p)

    @classmethod
    def from_quat(cls, quat, p=None):
        """Build from a quaternion ``(w, x, y, z)`` and a translation."""
        return cls(quat_to_rot(as_array("quat", quat, (4,))), p)

    def homogeneous(self):
        """The 4x4 homogeneous matrix (Kim eq. 3)."""
        H = np.eye(4)
        H[:3, :3] = self.R
        H[:3, 3] = self.p
        return H

    def inverse(self):
        """``T^{-1} = (R^T, -R^T p)`` (Kim eq. 4)."""
        return SE3(self.R.T, -self.R.T @ self.p)

    def __mul__(self, other):
        if isinstance(other, SE3):
            return SE3(self.R @ other.R, self.R @ other.p + self.p)
        return NotImplemented

    __matmul__ = __mul__

    def act(self, x):
        """Transform points ``x`` (shape (3,) or (n, 3)): ``R x + p``."""
        x = np.asarray(x, dtype=float)
        return x @ self.R.T + self.p

    def Ad(self):
        return Ad(self)

    def __repr__(self):
        return f"SE3(R={self.R.tolist()}, p={self.p.tolist()})"

    def isclose(self, other, atol=1e-12):
        return np.allclose(self.R, other.R, atol=atol) and np.allclose(self.p, other.p, atol=atol)


class Inertia:
    """Generalized inertia of a rigid body (Kim eq. 20-22).

    Parameters
    ----------
    mass : float
        Mass, ``>= 0``.  Zero mass with zero rotational inertia is a
        massless frame (:attr:`is_massless`).
    com : array_like, shape (3,)
        Centre of mass in the body frame.
    I_com : array_like, shape (3, 3)
        Rotational inertia about the centre of mass, in body-frame axes
        (default zero: a point mass).  Must be symmetric and positive
        semidefinite; principal moments down to ``-(1e-9 max|moment| +
        1e-15 max(mass, 1))`` are rounding and clipped to zero
        (:data:`INERTIA_RTOL`, :data:`INERTIA_ATOL`).
    name : str, optional
        Body name used in messages.
    strict : bool
        Raise instead of warning for an inertia no rigid body can have.

    Raises
    ------
    ValueError
        For a negative or non-finite mass, non-finite entries, a
        non-symmetric or negative-definite rotational inertia, and, with
        ``strict=True``, for a physically impossible one.

    Warns
    -----
    InertiaWarning
        For a physically impossible inertia: indefinite (a principal moment
        clearly below zero), principal moments that violate the triangle
        inequality (``I1 <= I2 + I3`` and permutations), or rotational
        inertia with zero mass.  It is used as given, as Pinocchio and
        MuJoCo do (robot zoos contain such files).

    Examples
    --------
    >>> import numpy as np, gear
    >>> I = gear.Inertia(2.0, [0, 0, 0.1], np.diag([0.1, 0.1, 0.05]))
    >>> I.matrix().shape
    (6, 6)
    """

    __slots__ = ("mass", "com", "I_com")

    def __init__(self, mass, com=(0.0, 0.0, 0.0), I_com=None, *, name=None, strict=False):
        where = f" of body {name!r}" if name else ""
        try:
            mass = float(mass)
        except (TypeError, ValueError):
            raise TypeError(f"mass{where} must be a real number, got {mass!r}") from None
        if not np.isfinite(mass) or mass < 0.0:
            raise ValueError(f"mass{where} must be non-negative and finite, got {mass}")
        com = as_array("com" + where, com, (3,))
        I_com = np.zeros((3, 3)) if I_com is None else as_array("I_com" + where, I_com, (3, 3))
        self.mass = mass
        self.com = com
        self.I_com = _check_rotational_inertia(I_com, mass, where, name, strict)

    @classmethod
    def _make(cls, mass, com, I_com):
        """Construct without validation (for results of operations on
        already-validated inertias: transforms, lumping)."""
        self = object.__new__(cls)
        self.mass = float(mass)
        self.com = np.asarray(com, dtype=float)
        self.I_com = 0.5 * (I_com + I_com.T)
        return self

    @property
    def is_massless(self):
        """True for a massless frame: zero mass and zero rotational inertia."""
        return self.mass == 0.0 and not np.any(self.I_com)

    @classmethod
    def point_mass(cls, mass, com=(0.0, 0.0, 0.0)):
        """A point mass at ``com``: zero rotational inertia about the centre
        of mass (a valid, positive semidefinite inertia)."""
        return cls(mass, com, np.zeros((3, 3)))

    @classmethod
    def from_params(cls, params):
        """From the 10 inertial parameters ``(m, mc_x, mc_y, mc_z, Ixx, Iyy,
        Izz, Ixy, Ixz, Iyz)`` about the body-frame origin (system
        identification order)."""
        params = as_array("params", params, (10,))
        m = params[0]
        if m < 0:
            raise ValueError(f"mass must be non-negative, got {m}")
        Ibar = np.array([[params[4], params[7], params[8]],
                         [params[7], params[5], params[9]],
                         [params[8], params[9], params[6]]])
        if m == 0:
            if np.any(params[1:4]):
                raise ValueError(f"first moment m*c = {params[1:4].tolist()} with zero mass: "
                                 "no body has these parameters")
            return cls(0.0, np.zeros(3), Ibar)
        c = params[1:4] / m
        C = skew(c)
        return cls(m, c, Ibar + m * C @ C)

    def to_params(self):
        """The 10 parameters of :meth:`from_params`."""
        Ibar = self.I_origin()
        h = self.mass * self.com
        return np.array([self.mass, h[0], h[1], h[2], Ibar[0, 0], Ibar[1, 1], Ibar[2, 2],
                         Ibar[0, 1], Ibar[0, 2], Ibar[1, 2]])

    def I_origin(self):
        """Rotational inertia about the body-frame origin: ``Ic + m[c]^T[c]``."""
        C = skew(self.com)
        return self.I_com + self.mass * C.T @ C

    def matrix(self):
        """The 6x6 generalized inertia of eq. (22) (with ``R = 1``)."""
        C = skew(self.com)
        out = np.zeros((6, 6))
        out[:3, :3] = self.I_com + self.mass * C.T @ C
        out[:3, 3:] = self.mass * C
        out[3:, :3] = self.mass * C.T
        out[3:, 3:] = self.mass * np.eye(3)
        return out

    def transform(self, T):
        """Inertia of the same body expressed in a frame {B} with
        ``T: {B} -> {A}`` the pose of {A} (this inertia's frame) seen from
        {B}; the 6x6 result equals ``Ad*_{T^{-1}} I Ad_{T^{-1}}`` (eq. 21).
        """
        if not isinstance(T, SE3):
            T = SE3.from_matrix(T)
        return Inertia._make(self.mass, T.act(self.com), T.R @ self.I_com @ T.R.T)

    def __add__(self, other):
        """Lump two inertias expressed in the same frame."""
        if not isinstance(other, Inertia):
            return NotImplemented
        m = self.mass + other.mass
        if m == 0.0:    # two massless (or rotational-only) inertias
            return Inertia._make(0.0, np.zeros(3), self.I_origin() + other.I_origin())
        c = (self.mass * self.com + other.mass * other.com) / m
        C = skew(c)
        return Inertia._make(m, c, self.I_origin() + other.I_origin() - m * C.T @ C)

    @classmethod
    def from_origin(cls, mass, com, I_origin):
        """From the rotational inertia about the frame origin."""
        C = skew(com)
        return cls(mass, com, np.asarray(I_origin) - mass * C.T @ C)

    def __repr__(self):
        return f"Inertia(mass={self.mass}, com={self.com.tolist()}, I_com={self.I_com.tolist()})"


class InertiaWarning(UserWarning):
    """An inertia that no rigid body can have (principal moments violating
    the triangle inequality, or rotational inertia without mass) was
    accepted; pass ``strict=True`` to make it an error."""


#: Relative tolerance on principal moments: moments down to
#: ``-(INERTIA_RTOL * max|moment| + INERTIA_ATOL * max(mass, 1))`` are
#: rounding (e.g. ``-2e-22`` beside ``3e-6``) and are clipped to zero.
INERTIA_RTOL = 1e-9
#: Absolute part of the tolerance, in kg·m² per kg of mass.
INERTIA_ATOL = 1e-15


def _check_rotational_inertia(I, mass, where="", name=None, strict=False):
    """Validate a rotational inertia about the centre of mass and return it
    (symmetrised; rounding-level negative principal moments clipped to 0).

    Policy (the one the URDF and MJCF loaders use; ``docs/models.md``,
    "Errors"): positive semidefinite is valid (point masses,
    massless frames); rounding-level negatives are tolerated (clipped);
    negative-definite tensors raise; physically impossible inertias
    (indefinite, triangle inequality, rotational inertia without mass) warn
    with :class:`InertiaWarning`, or raise with ``strict=True``, and are
    used as given.
    """
    scale = max(np.abs(I).max(), 1e-300)
    if np.abs(I - I.T).max() > 1e-9 * scale + 1e-14:
        raise ValueError(f"I_com{where} must be symmetric, got {I.tolist()}")
    I = 0.5 * (I + I.T)
    eig, V = np.linalg.eigh(I)
    tol = INERTIA_RTOL * np.abs(eig).max() + INERTIA_ATOL * max(mass, 1.0)
    if eig[0] < -tol and eig[2] <= tol:
        raise ValueError(
            f"I_com{where} is negative definite: its principal moments are {eig.tolist()} "
            "(none is positive); a rotational inertia must be positive semidefinite"
        )
    if 0.0 > eig[0] >= -tol:          # rounding: clip to semidefinite
        eig = np.maximum(eig, 0.0)
        I = (V * eig) @ V.T
        I = 0.5 * (I + I.T)
    problem = None
    if eig[0] < -tol:
        problem = (f"is indefinite: its principal moments are {eig.tolist()} (the smallest is "
                   f"below -{tol:.3g}, more than rounding); no rigid body has this inertia")
    elif mass == 0.0 and eig[2] > tol:
        problem = (f"has rotational inertia (principal moments {eig.tolist()}) but zero mass; "
                   "no rigid body has this inertia")
    else:
        for k in range(3):
            others = eig.sum() - eig[k]
            if eig[k] > others + tol:
                problem = (f"violates the triangle inequality of principal moments "
                           f"({eig[k]:.6g} > {others:.6g}, moments {eig.tolist()}); "
                           "no rigid body has this inertia")
                break
    if problem is not None:
        if strict:
            raise ValueError(f"I_com{where} {problem}")
        import warnings

        who = f"body {name!r}" if name else "an inertia"
        warnings.warn(f"{who}: I_com {problem}; loaded as given (strict=True makes this an error)",
                      InertiaWarning, stacklevel=4)
    return I
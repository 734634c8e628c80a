"""Test utilities and a dense, obviously-correct NumPy reference.

Everything here is written with explicit 6x6 matrices from
:mod:`gear.spatial` (``Ad``, ``ad``, ``ad_star``, ``Inertia.matrix()``) and
the joint objects (``joint.T(q)``, ``joint.S(q)``, ``joint.dS(q, dq)``); it
never calls the Cython recursions, so the fast path can be checked against
it.  It is slow (Python loops, dense linear algebra) and meant for tests,
docs and debugging only.

Random models
    :func:`random_inertia`, :func:`random_tree`, :func:`random_chain`,
    :func:`random_state`.
Reference dynamics (Kim, "Lie Group Formulation of Articulated Rigid Body Dynamics", Sec. 2)
    :func:`reference_forward_kinematics`, :func:`reference_inverse_dynamics`
    (Table 2), :func:`reference_mass_matrix`,
    :func:`reference_mass_matrix_jacobian`, :func:`reference_bias`,
    :func:`reference_forward_dynamics`, :func:`reference_hybrid_dynamics`
    (eq. 34), :func:`reference_kinetic_energy`, :func:`reference_momentum`.
Finite differences
    :func:`fd_tangent`, :func:`se3_hat`, :func:`se3_vee`.

Examples
--------
>>> import numpy as np, gear
>>> from gear import testing
>>> rng = np.random.default_rng(0)
>>> model = testing.random_tree(rng, nbodies=9)
>>> q, dq, ddq, tau = testing.random_state(model, rng)
>>> tau_ref = testing.reference_inverse_dynamics(model, q, dq, ddq)
>>> bool(np.allclose(gear.inverse_dynamics(model, q, dq, ddq), tau_ref))
True
"""
from __future__ import annotations

import numpy as np

from . import joints as _joints
from .model import Model
from .spatial import SE3, Ad, Inertia, ad, ad_star, quat_to_rot, skew

__all__ = [
    "ALL_KINDS", "random_rotation", "random_se3", "random_unit", "random_inertia",
    "random_joint", "random_tree", "random_chain", "random_state",
    "reference_forward_kinematics", "reference_inverse_dynamics", "reference_mass_matrix",
    "reference_mass_matrix_jacobian", "reference_body_jacobians", "reference_bias",
    "reference_forward_dynamics", "reference_hybrid_dynamics", "reference_kinetic_energy",
    "reference_momentum", "prescribed_coordinates", "fd_tangent", "se3_hat", "se3_vee",
    "zoo_dir", "zoo_urdfs", "compare_with_pinocchio",
]

#: Every joint kind, by the lower-case name accepted by :func:`random_joint`.
ALL_KINDS = ("revolute", "prismatic", "helical", "cylindrical", "universal",
             "planar", "spherical", "free", "fixed")

_CLASSES = {
    "revolute": _joints.Revolute, "prismatic": _joints.Prismatic, "helical": _joints.Helical,
    "cylindrical": _joints.Cylindrical, "universal": _joints.Universal, "planar": _joints.Planar,
    "spherical": _joints.Spherical, "free": _joints.Free, "fixed": _joints.Fixed,
}


# ---------------------------------------------------------------------------
# random objects
# ---------------------------------------------------------------------------
def _rng(rng):
    return np.random.default_rng(rng)


def random_unit(rng=None):
    """A unit 3-vector uniformly distributed on the sphere, shape (3,)."""
    rng = _rng(rng)
    while True:
        a = rng.standard_normal(3)
        n = np.linalg.norm(a)
        if n > 1e-3:
            return a / n


def random_rotation(rng=None):
    """A rotation matrix drawn uniformly from SO(3), shape (3, 3)."""
    rng = _rng(rng)
    g = rng.standard_normal(4)
    return quat_to_rot(g / np.linalg.norm(g))


def random_se3(rng=None, scale=0.5):
    """A random :class:`gear.SE3`: uniform rotation, translation in
    ``[-scale, scale]^3``."""
    rng = _rng(rng)
    return SE3(random_rotation(rng), rng.uniform(-scale, scale, 3))


def random_inertia(rng=None, mass=(0.5, 2.0), com_scale=0.2, size=(0.05, 0.3)):
    """A physically valid random :class:`gear.Inertia`.

    The principal moments are those of a body with second moments of mass
    ``m s_x^2, m s_y^2, m s_z^2`` (``I_1 = m (s_y^2 + s_z^2)`` and so on),
    so they are positive and satisfy the triangle inequality strictly; the
    principal axes are a uniformly random rotation.

    Parameters
    ----------
    rng : numpy.random.Generator or seed, optional
    mass : (float, float)
        Range of the mass.
    com_scale : float
        Centre of mass drawn from ``[-com_scale, com_scale]^3``.
    size : (float, float)
        Range of the radii of gyration ``s_x, s_y, s_z``.

    Returns
    -------
    gear.Inertia
    """
    rng = _rng(rng)
    m = rng.uniform(*mass)
    com = rng.uniform(-com_scale, com_scale, 3)
    s2 = rng.uniform(*size, 3) ** 2
    moments = m * np.array([s2[1] + s2[2], s2[0] + s2[2], s2[0] + s2[1]])
    R = random_rotation(rng)
    I_com = R @ np.diag(moments) @ R.T
    return Inertia(m, com, 0.5 * (I_com + I_com.T))


def random_joint(kind, rng=None):
    """A joint of ``kind`` (a name in :data:`ALL_KINDS`, case-insensitive,
    or a joint class) with random axes (and a random non-zero pitch for
    :class:`~gear.joints.Helical`)."""
    rng = _rng(rng)
    if isinstance(kind, type) and issubclass(kind, _joints.Joint):
        kind = kind.__name__
    k = str(kind).lower()
    if k not in _CLASSES:
        raise ValueError(f"unknown joint kind {kind!r}; expected one of {ALL_KINDS}")
    if k in ("revolute", "prismatic", "cylindrical"):
        return _CLASSES[k](random_unit(rng))
    if k == "helical":
        pitch = rng.uniform(0.05, 0.3) * rng.choice([-1.0, 1.0])
        return _joints.Helical(random_unit(rng), pitch)
    if k == "universal":
        a1 = random_unit(rng)
        while True:
            a2 = random_unit(rng)
            if np.linalg.norm(np.cross(a1, a2)) > 0.3:
                return _joints.Universal(a1, a2)
    if k == "planar":
        return _joints.Planar(random_unit(rng))
    return _CLASSES[k]()


def _kind_list(kinds, nbodies, rng):
    pool = list(ALL_KINDS if kinds is None else ([kinds] if isinstance(kinds, str) else kinds))
    if not pool:
        raise ValueError("kinds must name at least one joint kind")
    if nbodies >= len(pool):
        seq = pool + [pool[int(k)] for k in rng.integers(0, len(pool), nbodies - len(pool))]
    else:
        seq = [pool[int(k)] for k in rng.choice(len(pool), nbodies, replace=False)]
    return [seq[int(k)] for k in rng.permutation(nbodies)]


def random_tree(rng=None, nbodies=8, kinds=None, gravity=(0.0, 0.0, -9.81), parents=None,
                root_free=False):
    """A seeded random kinematic tree.

    Body ``i`` hangs from a random earlier body (or the world), through a
    random placement and a joint with random axes; every body has a valid
    random inertia (:func:`random_inertia`).

    Parameters
    ----------
    rng : numpy.random.Generator or seed, optional
    nbodies : int
    kinds : sequence of str, optional
        Joint kinds to draw from (default :data:`ALL_KINDS`).  When
        ``nbodies >= len(kinds)`` every kind appears at least once.
    gravity : array_like, shape (3,)
    parents : sequence of int, optional
        Parent index of each body (``-1`` = world, ``parents[i] < i``);
        random by default.
    root_free : bool
        If true, body 0 is a floating base (a :class:`~gear.joints.Free`
        joint to the world) and every other body descends from it, so only
        internal forces act between the bodies and the world.

    Returns
    -------
    gear.Model
        Bodies ``"b0", "b1", ...`` with joints ``"j0", "j1", ...``.
    """
    rng = _rng(rng)
    nbodies = int(nbodies)
    if nbodies < 1:
        raise ValueError(f"nbodies must be >= 1, got {nbodies}")
    kind_seq = _kind_list(kinds, nbodies, rng)
    if root_free:
        kind_seq[0] = "free"
    model = Model(gravity=gravity)
    for i in range(nbodies):
        if parents is not None:
            p = int(parents[i])
        elif root_free:
            p = -1 if i == 0 else int(rng.integers(0, i))
        else:
            p = int(rng.integers(-1, i))
        if root_free and (p < 0) != (i == 0):
            raise ValueError("with root_free=True only body 0 may have the world as parent")
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}] = {p} must be in [-1, {i})")
        model.add_body(f"b{i}", "world" if p < 0 else p, random_joint(kind_seq[i], rng),
                       placement=random_se3(rng), inertia=random_inertia(rng),
                       joint_name=f"j{i}")
    return model


def random_chain(n, kind="revolute", rng=None, gravity=(0.0, 0.0, -9.81)):
    """A serial chain of ``n`` bodies (body ``i`` is the child of ``i - 1``).

    Parameters
    ----------
    n : int
    kind : str or sequence of str
        One joint kind for every body, or one per body (cycled).
    rng : numpy.random.Generator or seed, optional

    Returns
    -------
    gear.Model
    """
    rng = _rng(rng)
    ks = [kind] if isinstance(kind, str) else list(kind)
    model = Model(gravity=gravity)
    for i in range(int(n)):
        model.add_body(f"b{i}", "world" if i == 0 else i - 1, random_joint(ks[i % len(ks)], rng),
                       placement=random_se3(rng), inertia=random_inertia(rng),
                       joint_name=f"j{i}")
    return model


def random_state(model, rng=None, batch=None):
    """A random state ``(q, dq, ddq, tau)`` of ``model``.

    Parameters
    ----------
    model : gear.Model
    rng : numpy.random.Generator or seed, optional
    batch : int, optional
        Number of states; ``None`` for a single one.

    Returns
    -------
    q : ndarray, shape (nq,) or (batch, nq)
        Within joint limits, unit quaternions.
    dq, ddq, tau : ndarray, shape (nv,) or (batch, nv)
        Standard normal.
    """
    rng = _rng(rng)
    lead = () if batch is None else (int(batch),)
    q = model.random_configuration(rng, n=None if batch is None else int(batch))
    dq = rng.standard_normal(lead + (model.nv,))
    ddq = rng.standard_normal(lead + (model.nv,))
    tau = rng.standard_normal(lead + (model.nv,))
    return q, dq, ddq, tau


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------
def se3_hat(V):
    """4x4 matrix form of a twist ``V = (w, v)`` (Kim eq. 5)."""
    V = np.asarray(V, dtype=float)
    X = np.zeros((4, 4))
    X[:3, :3] = skew(V[:3])
    X[:3, 3] = V[3:]
    return X


def se3_vee(X):
    """Twist ``(w, v)`` of a 4x4 se(3) matrix (inverse of :func:`se3_hat`;
    the antisymmetric part of the rotation block is used)."""
    X = np.asarray(X, dtype=float)
    W = X[:3, :3]
    w = 0.5 * np.array([W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]])
    return np.concatenate([w, X[:3, 3]])


def _inertia6(I):
    return np.zeros((6, 6)) if I is None else I.matrix()


def _split(model, x, i, which):
    s = model.idx_q(model.joint_names[i]) if which == "q" else model.idx_v(model.joint_names[i])
    return x[s]


# Number of axes of one state's value of each per-state argument.
_INNER_NDIM = {"q": 1, "dq": 1, "ddq": 1, "tau": 1, "f_ext": 2}


def _batched(fun):
    """Loop ``fun(model, q, ...)`` over a leading batch axis of ``q``.

    An argument named in ``_INNER_NDIM`` is split along the batch when it
    has one axis more than a single state's value; anything else (a single
    state's value, ``prescribed``) is passed unchanged to every call.
    """
    import functools
    import inspect

    names = list(inspect.signature(fun).parameters)[1:]

    @functools.wraps(fun)
    def wrapper(model, *args, **kwargs):
        bound = dict(zip(names, args))
        bound.update(kwargs)
        q = np.asarray(bound["q"], dtype=float)
        if q.ndim == 1:
            return fun(model, **bound)
        N = q.shape[0]
        split = {}
        for name, value in bound.items():
            if name in _INNER_NDIM and value is not None:
                arr = np.asarray(value, dtype=float)
                if arr.ndim == _INNER_NDIM[name] + 1:
                    if arr.shape[0] != N:
                        raise ValueError(f"{name} has batch size {arr.shape[0]}, q has {N}")
                    split[name] = arr
        outs = [fun(model, **{**bound, **{n: a[k] for n, a in split.items()}}) for k in range(N)]
        if isinstance(outs[0], tuple):
            return tuple(np.stack(o) for o in zip(*outs))
        return np.stack(outs)

    return wrapper


def _joint_kinematics(model, q, dq=None):
    """Per body: (T_{lambda(i),i} as SE3, S_i (6, n_i), dS_i (6, n_i))."""
    out = []
    for i, joint in enumerate(model.joints):
        qi = _split(model, q, i, "q")
        Xi = model.placements[i] * joint.T(qi)
        Si = joint.S(qi)
        if dq is None or joint.nv == 0:
            dSi = np.zeros_like(Si)
        else:
            dSi = joint.dS(qi, _split(model, dq, i, "v"))
        out.append((Xi, Si, dSi))
    return out


# ---------------------------------------------------------------------------
# reference dynamics
# ---------------------------------------------------------------------------
@_batched
def reference_forward_kinematics(model, q, dq=None):
    """World poses ``T_{0,i}`` (and body twists ``V_i``) by composing
    ``T_{0,i} = T_{0,lambda(i)} placement_i J_i(q_i)`` with 4x4 matrices.

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq : array_like, shape (nv,) or (N, nv), optional

    Returns
    -------
    poses : ndarray, shape (nbodies, 4, 4) (or with a leading N)
    twists : ndarray, shape (nbodies, 6)
        Body twists ``V_i = Ad_{T_{lambda(i),i}^{-1}} V_{lambda(i)} + S_i dq_i``
        (eq. 37); returned only when ``dq`` is given.
    """
    q = np.asarray(q, dtype=float)
    kin = _joint_kinematics(model, q)
    poses = np.zeros((model.nbodies, 4, 4))
    V = np.zeros((model.nbodies, 6))
    for i, (Xi, Si, _) in enumerate(kin):
        p = model.parents[i]
        parent = np.eye(4) if p < 0 else poses[p]
        poses[i] = parent @ Xi.homogeneous()
        if dq is not None:
            Vp = np.zeros(6) if p < 0 else V[p]
            V[i] = Ad(Xi.inverse()) @ Vp + Si @ _split(model, np.asarray(dq, float), i, "v")
    return poses if dq is None else (poses, V)


def _rnea(model, q, dq, ddq, f_ext, gravity):
    """Kim Table 2 with explicit 6x6 matrices; returns (tau, V, dV, F)."""
    nb = model.nbodies
    kin = _joint_kinematics(model, q, dq)
    V = np.zeros((nb, 6))
    dV = np.zeros((nb, 6))
    F = np.zeros((nb, 6))
    dV0 = np.zeros(6)
    if gravity:
        dV0[3:] = -model.gravity  # dV_0 = (0, -g)
    for i, (Xi, Si, dSi) in enumerate(kin):
        p = model.parents[i]
        Ainv = Ad(Xi.inverse())
        dqi = _split(model, dq, i, "v")
        ddqi = _split(model, ddq, i, "v")
        Vp = np.zeros(6) if p < 0 else V[p]
        dVp = dV0 if p < 0 else dV[p]
        V[i] = Ainv @ Vp + Si @ dqi                                          # eq. (37)
        dV[i] = Ainv @ dVp + ad(V[i]) @ Si @ dqi + dSi @ dqi + Si @ ddqi    # eq. (41)
    tau = np.zeros(model.nv)
    for i in range(nb - 1, -1, -1):
        Xi, Si, _ = kin[i]
        I = _inertia6(model.inertias[i])
        F[i] += I @ dV[i] - ad_star(V[i]) @ I @ V[i]                         # eq. (42)
        if f_ext is not None:
            F[i] -= f_ext[i]
        tau[model.idx_v(model.joint_names[i])] = Si.T @ F[i]
        p = model.parents[i]
        if p >= 0:
            F[p] += Ad(Xi.inverse()).T @ F[i]   # Ad*_{T^{-1}_{p,i}} F_i
    return tau, V, dV, F


def _fext(model, f_ext):
    if f_ext is None:
        return None
    f = np.asarray(f_ext, dtype=float)
    if f.shape != (model.nbodies, 6):
        raise ValueError(f"f_ext has wrong shape: expected ({model.nbodies}, 6), got {f.shape}")
    return f


@_batched
def reference_inverse_dynamics(model, q, dq, ddq, f_ext=None):
    """Joint torques by Kim Table 2 with explicit 6x6 matrices.

    Gravity enters as the base acceleration ``dV_0 = (0, -g)``.

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq, ddq : array_like, shape (nv,) or (N, nv)
    f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional
        Body-frame external wrenches ``(m, f)``.

    Returns
    -------
    tau : ndarray, shape (nv,) or (N, nv)
    """
    return _rnea(model, np.asarray(q, float), np.asarray(dq, float), np.asarray(ddq, float),
                 _fext(model, f_ext), True)[0]


@_batched
def reference_mass_matrix(model, q):
    """Mass matrix whose column ``k`` is the RNEA torque of the unit
    acceleration ``e_k`` with ``dq = 0`` and no gravity.

    Returns
    -------
    M : ndarray, shape (nv, nv) or (N, nv, nv)
    """
    q = np.asarray(q, float)
    nv = model.nv
    M = np.zeros((nv, nv))
    zero = np.zeros(nv)
    for k in range(nv):
        M[:, k] = _rnea(model, q, zero, np.eye(nv)[k], None, False)[0]
    return M


@_batched
def reference_body_jacobians(model, q):
    """Body Jacobians ``J_i`` with ``V_i = J_i dq`` (body frame).

    Column block of joint ``j`` on the path from the root to ``i`` is
    ``Ad_{T_{0,i}^{-1} T_{0,j}} S_j``; other columns are zero.

    Returns
    -------
    J : ndarray, shape (nbodies, 6, nv) or (N, nbodies, 6, nv)
    """
    q = np.asarray(q, float)
    kin = _joint_kinematics(model, q)
    poses = reference_forward_kinematics(model, q)
    J = np.zeros((model.nbodies, 6, model.nv))
    for i in range(model.nbodies):
        Ti_inv = SE3.from_matrix(poses[i]).inverse()
        j = i
        while j >= 0:
            Tj = SE3.from_matrix(poses[j])
            J[i][:, model.idx_v(model.joint_names[j])] = Ad(Ti_inv * Tj) @ kin[j][1]
            j = model.parents[j]
    return J


@_batched
def reference_mass_matrix_jacobian(model, q):
    """Mass matrix ``M = sum_i J_i^T I_i J_i`` from the body Jacobians of
    :func:`reference_body_jacobians` (independent of the RNEA).

    Returns
    -------
    M : ndarray, shape (nv, nv) or (N, nv, nv)
    """
    J = reference_body_jacobians(model, q)
    M = np.zeros((model.nv, model.nv))
    for i, I in enumerate(model.inertias):
        M += J[i].T @ _inertia6(I) @ J[i]
    return 0.5 * (M + M.T)


@_batched
def reference_bias(model, q, dq, f_ext=None):
    """Bias ``b(q, dq)`` with ``M ddq + b = tau``: Table 2 with ``ddq = 0``
    (Coriolis, centrifugal, gravity and ``-J^T f_ext``).

    Returns
    -------
    b : ndarray, shape (nv,) or (N, nv)
    """
    return _rnea(model, np.asarray(q, float), np.asarray(dq, float), np.zeros(model.nv),
                 _fext(model, f_ext), True)[0]


@_batched
def reference_forward_dynamics(model, q, dq, tau, f_ext=None):
    """Accelerations solving ``M ddq = tau - b`` densely (eq. 32).

    Returns
    -------
    ddq : ndarray, shape (nv,) or (N, nv)
    """
    M = reference_mass_matrix(model, q)
    b = reference_bias(model, q, dq, f_ext)
    return np.linalg.solve(M, np.asarray(tau, float) - b)


def prescribed_coordinates(model, prescribed):
    """Per-coordinate boolean mask (shape (nv,)) of the prescribed joints.

    ``prescribed`` is a bool per joint (length ``nbodies``) or a list of
    joint names, as in :func:`gear.hybrid_dynamics`.
    """
    from ._validate import joint_mask

    per_joint = joint_mask(model, prescribed, "prescribed")
    u = np.zeros(model.nv, dtype=bool)
    for i, name in enumerate(model.joint_names):
        u[model.idx_v(name)] = per_joint[i]
    return u


@_batched
def reference_hybrid_dynamics(model, q, dq, ddq, tau, prescribed, f_ext=None):
    """Hybrid dynamics by the dense formula of Kim eq. (34).

    With ``u`` the prescribed coordinates and ``v`` the others::

        ddq_v = M_vv^{-1} (tau_v - b_v - M_vu ddq_u)
        tau_u = M_uu ddq_u + M_uv ddq_v + b_u

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq, ddq, tau : array_like, shape (nv,) or (N, nv)
        ``ddq`` is read on prescribed coordinates, ``tau`` on the others.
    prescribed : array_like of bool, shape (nbodies,), or list of joint names
    f_ext : array_like, shape (nbodies, 6), optional

    Returns
    -------
    tau_out, ddq_out : ndarray, shape (nv,) or (N, nv)
    """
    u = prescribed_coordinates(model, prescribed)
    v = ~u
    M = reference_mass_matrix(model, q)
    b = reference_bias(model, q, dq, f_ext)
    ddq_out = np.array(ddq, dtype=float)
    tau_out = np.array(tau, dtype=float)
    if v.any():
        rhs = tau_out[v] - b[v] - M[np.ix_(v, u)] @ ddq_out[u]
        ddq_out[v] = np.linalg.solve(M[np.ix_(v, v)], rhs)       # eq. (34)
    tau_out[u] = M[u] @ ddq_out + b[u]
    return tau_out, ddq_out


@_batched
def reference_kinetic_energy(model, q, dq):
    """Kinetic energy ``sum_i 1/2 V_i^T I_i V_i`` (eq. 15) with ``V_i`` from
    the body Jacobians.  Shape () or (N,)."""
    J = reference_body_jacobians(model, q)
    dq = np.asarray(dq, float)
    e = 0.0
    for i, I in enumerate(model.inertias):
        V = J[i] @ dq
        e += 0.5 * V @ _inertia6(I) @ V
    return np.float64(e)


@_batched
def reference_momentum(model, q, dq):
    """Total momentum in the world frame about its origin, ``(angular,
    linear)``: ``sum_i Ad*_{T_{0,i}^{-1}} I_i V_i`` (eqs. 23, 24).
    Shape (6,) or (N, 6)."""
    J = reference_body_jacobians(model, q)
    poses = reference_forward_kinematics(model, q)
    dq = np.asarray(dq, float)
    h = np.zeros(6)
    for i, I in enumerate(model.inertias):
        Ti_inv = SE3.from_matrix(poses[i]).inverse()
        h += Ad(Ti_inv).T @ _inertia6(I) @ (J[i] @ dq)
    return h


# ---------------------------------------------------------------------------
# finite differences on the configuration manifold
# ---------------------------------------------------------------------------
def fd_tangent(f, model, q, eps=1e-6):
    """Central finite differences of ``f(q)`` along the tangent basis.

    Column ``k`` is ``(f(q (+) eps e_k) - f(q (+) -eps e_k)) / (2 eps)``
    with ``(+)`` = ``model.integrate`` (the right perturbation
    ``T exp(eps S e_k)`` per joint), so the result is the derivative in the
    tangent space used by the analytic derivatives (as Pinocchio does).

    Parameters
    ----------
    f : callable
        ``f(q)`` returning an array of any shape ``s``.
    model : gear.Model
    q : array_like, shape (nq,)
    eps : float

    Returns
    -------
    ndarray, shape ``s + (nv,)``
    """
    q = np.asarray(q, dtype=float)
    cols = []
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = eps
        fp = np.asarray(f(model.integrate(q, e)), dtype=float)
        fm = np.asarray(f(model.integrate(q, -e)), dtype=float)
        cols.append((fp - fm) / (2.0 * eps))
    if not cols:
        return np.zeros(np.shape(f(q)) + (0,))
    return np.stack(cols, axis=-1)



# ---------------------------------------------------------------------------
# the robot zoo users have (example-robot-data) and Pinocchio as a reference
# ---------------------------------------------------------------------------
def zoo_dir():
    """The ``robots/`` folder of example-robot-data, or ``None``.

    The PyPI package ``example-robot-data`` (in gear's ``reference`` extra)
    installs its files under ``<site-packages>/cmeel.prefix/share/
    example-robot-data/robots``.
    """
    import os
    import sysconfig

    for key in ("purelib", "platlib"):
        d = os.path.join(sysconfig.get_paths()[key], "cmeel.prefix", "share",
                         "example-robot-data", "robots")
        if os.path.isdir(d):
            return d
    return None


def zoo_urdfs():
    """Sorted paths of every URDF file example-robot-data ships (``[]`` if
    it is not installed)."""
    import glob
    import os

    d = zoo_dir()
    if d is None:
        return []
    return sorted(glob.glob(os.path.join(d, "**", "*.urdf"), recursive=True))


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def compare_with_pinocchio(model, pin_model, n_states=2, seed=0):
    """Largest relative differences between gear and Pinocchio on random states.

    ``model`` and ``pin_model`` describe the same robot (e.g. both loaded
    from one URDF file); joints are matched by name
    (:func:`gear.interop.map_by_name`) and Pinocchio's gravity is used.

    Parameters
    ----------
    model : gear.Model
    pin_model : pinocchio.Model
    n_states : int
    seed : int

    Returns
    -------
    dict
        ``"fk"`` (body poses vs ``data.oMi``), ``"rnea"``, ``"crba"`` and
        ``"aba"``: max over the states of ``max|gear - pin| / max(1,
        max|pin|)``.  ``"aba"`` is ``None`` when gear reports a singular
        articulated inertia (a joint moving only massless bodies), where
        Pinocchio's answer is meaningless too.
    """
    import pinocchio as pin

    from . import algorithms as alg
    from .interop import map_by_name

    mp = map_by_name(model, pin_model)
    model.gravity = np.array(pin_model.gravity.linear)
    pd = pin_model.createData()
    rng = np.random.default_rng(seed)
    err = {"fk": 0.0, "rnea": 0.0, "crba": 0.0, "aba": 0.0}
    for _ in range(n_states):
        q = model.random_configuration(rng)
        dq, ddq, tau = rng.standard_normal((3, model.nv))
        qp, vp, ap = mp.q(q), mp.v(dq), mp.v(ddq)
        pin.forwardKinematics(pin_model, pd, qp)
        P = alg.forward_kinematics(model, q)
        for i in range(model.nbodies):
            err["fk"] = max(err["fk"], _rel(P[i], mp.body_placement(pd, i)))
        err["rnea"] = max(err["rnea"], _rel(alg.inverse_dynamics(model, q, dq, ddq),
                                            mp.v_back(pin.rnea(pin_model, pd, qp, vp, ap))))
        Mp = pin.crba(pin_model, pd, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        err["crba"] = max(err["crba"], _rel(alg.mass_matrix(model, q), mp.mat_back(Mp)))
        if err["aba"] is not None:
            try:
                a = alg.forward_dynamics(model, q, dq, tau)
            except alg.SingularInertiaError:
                err["aba"] = None
            else:
                err["aba"] = max(err["aba"], _rel(a, mp.v_back(pin.aba(pin_model, pd, qp, vp,
                                                                        mp.v(tau)))))
    return err


def consistent_velocity(sys, q, rng):
    """A random velocity in the null space of ``sys.constraint_jacobian(q)``
    (``A dq = 0`` to rounding), for tests of closed-loop systems."""
    rng = np.random.default_rng(rng)
    A = sys.constraint_jacobian(q)
    if A.size == 0:
        return rng.standard_normal(sys.model.nv)
    _, s, Vt = np.linalg.svd(A)
    r = int((s > 1e-9 * s[0]).sum())
    return Vt[r:].T @ rng.standard_normal(Vt.shape[0] - r)

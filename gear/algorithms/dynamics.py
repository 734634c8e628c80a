"""Public dynamics functions: validation at the boundary, then the kernels.

Every function accepts one state (``q`` of shape ``(nq,)``) or a batch
(``(N, nq)``, likewise for every per-state argument; a single state
argument is broadcast against a batch).  Batches run in native code without
the GIL on :func:`get_num_threads` threads.
"""
from __future__ import annotations

import os

import numpy as np

from .. import _core
from .._validate import as_batch, joint_mask

__all__ = [
    "set_num_threads", "get_num_threads", "forward_kinematics", "inverse_dynamics",
    "forward_dynamics", "hybrid_dynamics", "mass_matrix", "bias_forces",
    "gravity_forces", "coriolis_forces", "kinetic_energy", "potential_energy",
    "momentum", "SingularInertiaError",
]

_NUM_THREADS = [max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))]


class SingularInertiaError(np.linalg.LinAlgError, ValueError):
    """A joint's articulated inertia ``S^T Ihat S`` is singular (e.g. a
    massless leaf body); forward/hybrid dynamics is undefined there."""


def set_num_threads(n):
    """Number of threads used by batched calls (default: all cores)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    _NUM_THREADS[0] = n


def get_num_threads():
    """Number of threads used by batched calls."""
    return _NUM_THREADS[0]


class _Args:
    """Validated, batched arguments of one call."""

    def __init__(self, model, **arrays):
        self.batch = False
        self.N = None
        out = {}
        for name, (value, inner, optional) in arrays.items():
            if value is None and optional:
                out[name] = None
                continue
            arr, is_batch = as_batch(name, value, inner)
            if is_batch:
                if self.N is not None and self.batch and arr.shape[0] != self.N:
                    raise ValueError(
                        f"{name} has batch size {arr.shape[0]} but an earlier argument has {self.N}"
                    )
                self.batch = True
                self.N = arr.shape[0]
            out[name] = arr
        N = self.N if self.batch else 1
        self.N = N
        for name, arr in out.items():
            if arr is not None and arr.shape[0] != N:
                arr = np.ascontiguousarray(np.broadcast_to(arr, (N,) + arr.shape[1:]))
            out[name] = arr
        self.__dict__.update(out)
        if "q" in out:
            model.check_configuration(out["q"])

    def ret(self, arr):
        return arr if self.batch else arr[0]


def _fext_spec(model, f_ext):
    return (f_ext, (model.nbodies, 6), True)


def forward_kinematics(model, q, dq=None):
    """World poses of every body, and body twists if ``dq`` is given.

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq : array_like, shape (nv,) or (N, nv), optional

    Returns
    -------
    poses : ndarray, shape (nbodies, 4, 4) or (N, nbodies, 4, 4)
        Homogeneous transforms ``T_{0,i}`` of the body frames in the world.
    twists : ndarray, shape (nbodies, 6) or (N, nbodies, 6)
        Body twists ``V_i = (w, v)`` in body coordinates (Kim eq. 9);
        returned only when ``dq`` is given.
    """
    r = _core.fk_light(model.data, q, dq)
    if r is not None:
        return r
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), True))
    nb = model.nbodies
    poses = np.empty((a.N, nb, 4, 4))
    twists = np.empty((a.N, nb, 6)) if dq is not None else None
    _core.fk(model.data, a.q, a.dq, poses, twists, get_num_threads())
    if dq is None:
        return a.ret(poses)
    return a.ret(poses), a.ret(twists)


def _rnea_call(model, a, dq, ddq, fext, gravity):
    tau = np.empty((a.N, model.nv))
    _core.rnea(model.data, a.q, dq, ddq, fext, gravity, tau, get_num_threads())
    return tau


def inverse_dynamics(model, q, dq, ddq, f_ext=None, *, out=None):
    """Joint torques of the recursive Newton-Euler algorithm (Kim Table 2).

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq : array_like, shape (nv,) or (N, nv)
    ddq : array_like, shape (nv,) or (N, nv)
    f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional
        External wrenches ``(m, f)`` on each body, in the body frame.
    out : ndarray, optional
        Preallocated C-contiguous float64 result of shape (N, nv) (batch)
        or (nv,), filled in place and returned (no allocation).

    Returns
    -------
    tau : ndarray, shape (nv,) or (N, nv)
        ``tau = M(q) ddq + b(q, dq)`` (minus ``J^T f_ext``).

    Examples
    --------
    >>> import gear, numpy as np
    >>> m = gear.load_urdf(gear.data_path("arm7.urdf"))
    >>> tau = gear.inverse_dynamics(m, m.neutral(), np.zeros(m.nv), np.zeros(m.nv))
    >>> tau.shape
    (7,)
    """
    if f_ext is None:
        r = _core.rnea1(model.data, q, dq, ddq, out)
        if r is not None:
            return r
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), False),
              ddq=(ddq, (model.nv,), False), f_ext=_fext_spec(model, f_ext))
    res = _out(out, a, (model.nv,))
    _core.rnea(model.data, a.q, a.dq, a.ddq, a.f_ext, True, res, get_num_threads())
    return out if out is not None else a.ret(res)


def _out(out, a, inner):
    if out is None:
        return np.empty((a.N,) + inner)
    expect = ((a.N,) if a.batch else ()) + inner
    if not isinstance(out, np.ndarray) or out.dtype != np.float64 or not out.flags.c_contiguous \
            or not out.flags.writeable or out.shape != expect:
        raise ValueError(
            f"out must be a writeable C-contiguous float64 array of shape {expect}, got "
            f"{getattr(out, 'shape', type(out).__name__)} {getattr(out, 'dtype', '')}"
        )
    return out.reshape((a.N,) + inner)


def _check_status(model, status):
    bad = np.flatnonzero(status)
    if bad.size:
        body = int(status[bad[0]]) - 1
        raise SingularInertiaError(
            f"articulated inertia S^T Ihat S of joint {model.joint_names[body]!r} is singular "
            f"(state {int(bad[0])}); give the bodies beyond this joint positive mass and inertia"
        )


def forward_dynamics(model, q, dq, tau, f_ext=None, *, out=None):
    """Joint accelerations of the articulated-body algorithm (Kim Table 3).

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq, tau : array_like, shape (nv,) or (N, nv)
    f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional
    out : ndarray, optional
        Preallocated result, filled in place.

    Returns
    -------
    ddq : ndarray, shape (nv,) or (N, nv)

    Raises
    ------
    SingularInertiaError
        If a joint's articulated inertia is singular (massless subtree).
    """
    if f_ext is None:
        r = _core.aba1(model.data, q, dq, tau, out)
        if r is not None:
            return r
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), False),
              tau=(tau, (model.nv,), False), f_ext=_fext_spec(model, f_ext))
    ddq = _out(out, a, (model.nv,))
    status = np.zeros(a.N, dtype=np.int32)
    _core.hybrid(model.data, a.q, a.dq, ddq, a.tau, None, a.f_ext, status, get_num_threads())
    _check_status(model, status)
    return out if out is not None else a.ret(ddq)


def _cached(model, kind, joints, name, make):
    """The model's one cache of joint selections (``Model._masks``, emptied
    by ``add_body``, not pickled): ``make(model, joints, name)`` for
    ``joints`` given as one joint name or a list or tuple of names,
    converted once per distinct value, ``kind`` and ``name`` (read-only);
    anything else, and errors, every time."""
    t = type(joints)
    if t is str:
        key = (kind, name, joints)
    elif t is list or t is tuple:
        key = (kind, name, *joints)
    else:
        return make(model, joints, name)
    cache = model._masks
    try:
        hit = cache.get(key)                   # (only lists of names are ever stored)
    except TypeError:                          # unhashable entries: make() says what is wrong
        return make(model, joints, name)
    if hit is not None:
        return hit
    out = make(model, joints, name)
    if all(type(j) is str for j in key[2:]):
        out.flags.writeable = False
        cache[key] = out
    return out


def _make_mask(model, joints, name):
    return np.ascontiguousarray(joint_mask(model, joints, name), dtype=np.uint8)


def _prescribed_mask(model, prescribed, name="prescribed"):
    """``prescribed`` (joint names, one name, an empty list for none, or a
    bool per joint) as uint8 per joint, validated by
    :func:`gear._validate.joint_mask`.  Names are converted once per
    distinct list and model (:func:`_cached`); a bool array of the right
    length is viewed, not copied."""
    if type(prescribed) is np.ndarray and prescribed.dtype == bool and prescribed.shape == (model.nbodies,):
        return np.ascontiguousarray(prescribed).view(np.uint8)
    return _cached(model, "joints", prescribed, name, _make_mask)


def _make_dofs(model, joints, name):
    return _prescribed_dofs(model, _prescribed_mask(model, joints, name))


def _joint_dofs(model, joints, name="prescribed"):
    """Bool per velocity coordinate on the dofs of ``joints`` (as
    :func:`_prescribed_mask` takes them); cached with it for names."""
    return _cached(model, "dofs", joints, name, _make_dofs)


def _prescribed_dofs(model, mask):
    """Bool per velocity coordinate: True on the dofs of prescribed joints."""
    u = np.zeros(model.nv, dtype=bool)
    for i, j in enumerate(model.joints):
        if mask[i]:
            u[model._iv[i]:model._iv[i] + j.nv] = True
    return u


def hybrid_dynamics(model, q, dq, ddq, tau, prescribed, f_ext=None):
    """Hybrid dynamics (Kim Table 4): prescribed accelerations on some joints,
    prescribed torques on the others.

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq, ddq, tau : array_like, shape (nv,) or (N, nv)
        ``ddq`` is read on prescribed joints, ``tau`` on the others.
    prescribed : list of str, str, or array_like of bool, shape (nbodies,)
        Joints whose acceleration is prescribed: their names (an empty list
        for none -- forward dynamics with ``tau`` -- or one name), or a bool
        per joint.  A list of names is converted once per model and kept
        (about 2.5 µs a call on a 7-joint arm, against 5 µs converting it
        every time).
    f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional

    Returns
    -------
    tau_out, ddq_out : ndarray, shape (nv,) or (N, nv)
        Complete torques and accelerations (inputs copied where given).
    """
    mask = _prescribed_mask(model, prescribed)
    if f_ext is None:
        r = _core.hybrid_light(model.data, q, dq, ddq, tau, mask)
        if r is not None:
            return r
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), False),
              ddq=(ddq, (model.nv,), False), tau=(tau, (model.nv,), False),
              f_ext=_fext_spec(model, f_ext))
    ddq_out = a.ddq.copy()
    tau_out = a.tau.copy()
    status = np.zeros(a.N, dtype=np.int32)
    _core.hybrid(model.data, a.q, a.dq, ddq_out, tau_out, mask, a.f_ext, status, get_num_threads())
    _check_status(model, status)
    return a.ret(tau_out), a.ret(ddq_out)


def mass_matrix(model, q, *, out=None):
    """Joint-space mass matrix by the composite-rigid-body algorithm.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    out : ndarray, optional
        Preallocated result of shape (nv, nv) or (N, nv, nv).

    Returns
    -------
    M : ndarray, shape (nv, nv) or (N, nv, nv)
        Symmetric positive definite.
    """
    if out is None:
        r = _core.crba_light(model.data, q)
        if r is not None:
            return r
    a = _Args(model, q=(q, (model.nq,), False))
    M = _out(out, a, (model.nv, model.nv))
    _core.crba(model.data, a.q, M, get_num_threads())
    return out if out is not None else a.ret(M)


def bias_forces(model, q, dq, f_ext=None):
    """``b(q, dq)`` with ``M ddq + b = tau`` (Coriolis, centrifugal, gravity,
    and ``-J^T f_ext``): RNEA with ``ddq = 0``.  Shape (nv,) or (N, nv)."""
    if f_ext is None and dq is not None:
        r = _core.rnea_light(model.data, q, dq, None, True)
        if r is not None:
            return r
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), False),
              f_ext=_fext_spec(model, f_ext))
    return a.ret(_rnea_call(model, a, a.dq, None, a.f_ext, True))


def gravity_forces(model, q):
    """Generalized gravity ``g(q)``: RNEA with ``dq = ddq = 0``."""
    r = _core.rnea_light(model.data, q, None, None, True)
    if r is not None:
        return r
    a = _Args(model, q=(q, (model.nq,), False))
    return a.ret(_rnea_call(model, a, None, None, None, True))


def coriolis_forces(model, q, dq):
    """Coriolis and centrifugal terms ``C(q, dq) dq``: RNEA with ``ddq = 0``
    and no gravity."""
    r = _core.rnea_light(model.data, q, dq, None, False) if dq is not None else None
    if r is not None:
        return r
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), False))
    return a.ret(_rnea_call(model, a, a.dq, None, None, False))


def _body_inertia_matrices(model):
    mats = []
    for I in model.inertias:
        mats.append(np.zeros((6, 6)) if I is None else I.matrix())
    return np.array(mats)


def kinetic_energy(model, q, dq):
    """Kinetic energy ``sum_i 1/2 V_i^T I_i V_i`` (Kim eq. 15), shape () or (N,)."""
    if dq is None:
        raise TypeError(f"dq is required, got None; expected shape ({model.nv},) or (N, {model.nv})")
    poses, V = forward_kinematics(model, q, dq)
    Is = _body_inertia_matrices(model)
    return 0.5 * np.einsum("...bi,bij,...bj->...", V, Is, V)


def potential_energy(model, q):
    """Gravitational potential ``-sum_i m_i (g dot c_i)``, with ``c_i`` the world COM positions."""
    poses = forward_kinematics(model, q)
    m = np.array([0.0 if I is None else I.mass for I in model.inertias])
    c = np.array([np.zeros(3) if I is None else I.com for I in model.inertias])
    com_w = np.einsum("...bij,bj->...bi", poses[..., :3, :3], c) + poses[..., :3, 3]
    return -np.einsum("b,...bi,i->...", m, com_w, model.gravity)


def momentum(model, q, dq):
    """Total generalized momentum ``sum_i Ad*_{T_i^{-1}} I_i V_i`` (Kim eq. 23,
    24) expressed in the world frame at its origin: ``(angular, linear)``,
    shape (6,) or (N, 6)."""
    if dq is None:
        raise TypeError(f"dq is required, got None; expected shape ({model.nv},) or (N, {model.nv})")
    poses, V = forward_kinematics(model, q, dq)
    Is = _body_inertia_matrices(model)
    L = np.einsum("bij,...bj->...bi", Is, V)  # body momenta (eq. 23)
    R = poses[..., :3, :3]
    p = poses[..., :3, 3]
    # eq. (24): world momentum = Ad*_{T^{-1}} L = (R l_w + p x R l_v, R l_v)
    lw = np.einsum("...bij,...bj->...bi", R, L[..., :3])
    lv = np.einsum("...bij,...bj->...bi", R, L[..., 3:])
    ang = (lw + np.cross(p, lv)).sum(axis=-2)
    lin = lv.sum(axis=-2)
    return np.concatenate([ang, lin], axis=-1)

"""Analytic derivatives of inverse, forward and hybrid dynamics (Kim Sec. 4).

Derivatives with respect to ``q`` are taken in the tangent space of the
configuration manifold (right perturbation ``q (+) eps e_k`` of
:meth:`gear.Model.integrate`, shape ``(..., nv)``), as Pinocchio does.

* Inverse dynamics: Kim Table 5, evaluated column by column over the subtree
  each coordinate moves (O(n nv) per state).
* Forward dynamics: at ``ddq = ABA(tau)`` the equations of motion
  ``RNEA(q, dq, ddq) = tau`` give, by the implicit-function theorem,
  ``dddq/dq = -M^{-1} dtau/dq``, ``dddq/d(dq) = -M^{-1} dtau/d(dq)`` and
  ``dddq/dtau = M^{-1}`` -- the same derivatives Kim's Table 6 recursion
  produces, at O(n nv + nv^3) per state.
* Hybrid dynamics (Table 7 quantities): the same identity on the split of
  the coordinates into prescribed (u) and free (v) ones.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import _core
from .dynamics import (_Args, _fext_spec, _check_status, _prescribed_mask, _prescribed_dofs,
                       _out, get_num_threads, hybrid_dynamics, mass_matrix, SingularInertiaError)

__all__ = ["inverse_dynamics_derivatives", "forward_dynamics_derivatives",
           "hybrid_dynamics_derivatives", "HybridDerivatives", "linearize"]


def _outs(out, a, nv):
    if out is None:
        return [np.empty((a.N, nv, nv)) for _ in range(3)]
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise ValueError("out must be a tuple of three preallocated arrays")
    return [_out(o, a, (nv, nv)) for o in out]


def inverse_dynamics_derivatives(model, q, dq, ddq, f_ext=None, *, out=None):
    """Jacobians of ``tau = RNEA(q, dq, ddq, f_ext)`` (Kim Table 5).

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq, ddq : array_like, shape (nv,) or (N, nv)
    f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional
    out : tuple of three ndarrays, optional
        Preallocated C-contiguous float64 results (each (nv, nv) or
        (N, nv, nv)), filled in place and returned (no allocation).

    Returns
    -------
    dtau_dq : ndarray, shape (nv, nv) or (N, nv, nv)
        Derivative along the tangent space of ``q``.
    dtau_ddq : ndarray, shape (nv, nv) or (N, nv, nv)
        Derivative with respect to ``dq``.
    dtau_dddq : ndarray, shape (nv, nv) or (N, nv, nv)
        Derivative with respect to ``ddq``: the mass matrix ``M(q)``.

    Examples
    --------
    >>> import gear, numpy as np
    >>> m = gear.load_urdf(gear.data_path("arm7.urdf"))
    >>> q = m.neutral(); v = np.zeros(m.nv)
    >>> dq_, dv_, M = gear.inverse_dynamics_derivatives(m, q, v, v)
    >>> dq_.shape, bool(np.allclose(M, gear.mass_matrix(m, q)))
    ((7, 7), True)
    """
    if f_ext is None and out is None:
        r = _core.rnea_derivatives1(model.data, q, dq, ddq)
        if r is None:
            r = _core.rnea_derivatives_light(model.data, q, dq, ddq)
        if r is not None:
            return r
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), False),
              ddq=(ddq, (model.nv,), False), f_ext=_fext_spec(model, f_ext))
    d_q, d_v, M = _outs(out, a, model.nv)
    _core.rnea_derivatives(model.data, a.q, a.dq, a.ddq, a.f_ext, d_q, d_v, M, get_num_threads())
    if out is not None:
        return tuple(out)
    return a.ret(d_q), a.ret(d_v), a.ret(M)


def _fd_derivatives(model, a, out=None):
    nv = model.nv
    ddq = np.empty((a.N, nv))
    d_q, d_v, Minv = _outs(out, a, nv)
    status = np.zeros(a.N, dtype=np.int32)
    _core.aba_derivatives(model.data, a.q, a.dq, a.tau, a.f_ext, ddq, d_q, d_v, Minv, status,
                          get_num_threads())
    if np.any(status < 0):
        k = int(np.flatnonzero(status < 0)[0])
        raise SingularInertiaError(
            f"the mass matrix is not positive definite (state {k}): a joint moves no mass; "
            "give the bodies beyond every joint positive mass and inertia")
    _check_status(model, status)
    return ddq, d_q, d_v, Minv


def forward_dynamics_derivatives(model, q, dq, tau, f_ext=None, *, out=None):
    """Jacobians of ``ddq = ABA(q, dq, tau, f_ext)``.

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq, tau : array_like, shape (nv,) or (N, nv)
    f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional
    out : tuple of three ndarrays, optional
        Preallocated results, filled in place and returned.

    Returns
    -------
    dddq_dq : ndarray, shape (nv, nv) or (N, nv, nv)
        ``-M^{-1} dtau/dq`` at ``ddq = ABA(tau)`` (tangent space of q).
    dddq_ddq : ndarray, shape (nv, nv) or (N, nv, nv)
        ``-M^{-1} dtau/d(dq)``.
    dddq_dtau : ndarray, shape (nv, nv) or (N, nv, nv)
        ``M^{-1}``.
    """
    if f_ext is None and out is None:
        r = _core.aba_derivatives1(model.data, q, dq, tau)
        if r is None:
            r = _core.aba_derivatives_light(model.data, q, dq, tau)
        if r is not None:
            return r
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), False),
              tau=(tau, (model.nv,), False), f_ext=_fext_spec(model, f_ext))
    _, d_q, d_v, Minv = _fd_derivatives(model, a, out)
    if out is not None:
        return tuple(out)
    return a.ret(d_q), a.ret(d_v), a.ret(Minv)


HybridDerivatives = namedtuple(
    "HybridDerivatives",
    ["dtau_dq", "dtau_ddq", "dtau_dinput", "dddq_dq", "dddq_ddq", "dddq_dinput"])
HybridDerivatives.__doc__ = """Derivatives of the hybrid-dynamics outputs.

``input`` is the vector of given quantities: ``ddq`` on the coordinates of
prescribed joints, ``tau`` on the others (shape (nv,)); ``dtau_*`` and
``dddq_*`` are the derivatives of the complete outputs ``tau_out`` and
``ddq_out``; every array has shape (nv, nv) or (N, nv, nv)."""


def hybrid_dynamics_derivatives(model, q, dq, ddq, tau, prescribed, f_ext=None):
    """Jacobians of hybrid dynamics (the quantities of Kim Table 7).

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq, ddq, tau : array_like, shape (nv,) or (N, nv)
    prescribed : list of str, str, or array_like of bool, shape (nbodies,)
        Joint names (an empty list for none, or one name), or a bool per joint.
    f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional

    Returns
    -------
    HybridDerivatives
        ``(dtau_dq, dtau_ddq, dtau_dinput, dddq_dq, dddq_ddq, dddq_dinput)``.

    Notes
    -----
    With u the prescribed and v the free coordinates and ``D_q, D_dq`` the
    inverse-dynamics Jacobians at the hybrid solution, the free rows of
    ``M ddq + b = tau`` give ``dddq_v = M_vv^{-1} (dtau_v - D_q,v dq - D_dq,v ddq
    - M_vu dddq_u)`` and the prescribed rows ``dtau_u = D_u + M_uu dddq_u +
    M_uv dddq_v`` (the dense form of eq. 34, differentiated).
    """
    mask = _prescribed_mask(model, prescribed)
    # every per-state argument decides the batch (a batch in ddq or tau alone too)
    a = _Args(model, q=(q, (model.nq,), False), dq=(dq, (model.nv,), False),
              ddq=(ddq, (model.nv,), False), tau=(tau, (model.nv,), False),
              f_ext=_fext_spec(model, f_ext))
    tau_out, ddq_out = hybrid_dynamics(model, a.q, a.dq, a.ddq, a.tau, mask, a.f_ext)
    Dq, Dv, M = inverse_dynamics_derivatives(model, a.q, a.dq, ddq_out, a.f_ext)
    nv = model.nv
    u = _prescribed_dofs(model, mask)
    v = ~u
    N = a.N
    eye = np.eye(nv)
    out = {k: np.zeros((N, nv, nv)) for k in HybridDerivatives._fields}
    Mvv = M[:, v][:, :, v]
    Muv = M[:, u][:, :, v]
    Mvu = M[:, v][:, :, u]
    Muu = M[:, u][:, :, u]
    if v.any():
        sol_q = -np.linalg.solve(Mvv, Dq[:, v])          # dddq_v / dq
        sol_v = -np.linalg.solve(Mvv, Dv[:, v])          # dddq_v / d(dq)
        Mvv_inv = np.linalg.inv(Mvv)
        sol_in_u = -Mvv_inv @ Mvu                          # dddq_v / d(ddq_u)
        out["dddq_dq"][:, v] = sol_q
        out["dddq_ddq"][:, v] = sol_v
        tmp = np.zeros((N, int(v.sum()), nv))
        tmp[:, :, u] = sol_in_u
        tmp[:, :, v] = Mvv_inv
        out["dddq_dinput"][:, v] = tmp
    out["dddq_dinput"][:, u] = eye[u]
    # prescribed rows: tau_u = D_u + M_u. ddq
    out["dtau_dq"][:, u] = Dq[:, u] + M[:, u] @ out["dddq_dq"]
    out["dtau_ddq"][:, u] = Dv[:, u] + M[:, u] @ out["dddq_ddq"]
    out["dtau_dinput"][:, u] = M[:, u] @ out["dddq_dinput"]
    out["dtau_dinput"][:, v] = eye[v]
    del Muv, Muu
    return HybridDerivatives(*(a.ret(out[k]) for k in HybridDerivatives._fields))


def tangent_rate(model, dq):
    """``d/dt delta = d_dq + L delta``: the (nv, nv) block ``L`` of a
    linearisation in the tangent space (right perturbation, body-frame
    velocities): zero for joints with coordinates in R^n, ``-[w]`` for a
    Spherical joint and ``-ad_V`` for a Free one."""
    from ..joints import FREE, SPHERICAL
    from ..spatial import ad, skew

    L = np.zeros((model.nv, model.nv))
    for i, j in enumerate(model.joints):
        s = slice(model._iv[i], model._iv[i] + j.nv)
        if j.kind == SPHERICAL:
            L[s, s] = -skew(dq[s])
        elif j.kind == FREE:
            L[s, s] = -ad(dq[s])
    return L


def linearize(model, q, dq, tau, f_ext=None):
    """Continuous-time linearisation ``d/dt (dx) = A dx + B du`` of the
    forward dynamics about ``(q, dq, tau)``.

    The state perturbation is ``dx = (delta, d_dq)`` with ``q = q0 (+) delta``
    (tangent space, shape nv) and ``dq = dq0 + d_dq``; the input perturbation
    is ``du = d_tau``.

    Returns
    -------
    A : ndarray, shape (2 nv, 2 nv) or (N, 2 nv, 2 nv)
        ``[[-ad, 1], [dddq/dq, dddq/ddq]]``, where the upper-left block is
        zero for joints with coordinates in R^n and ``-ad_{S dq}`` for the
        Lie-group joints (``-[w]`` for Spherical, ``-ad_V`` for Free), since
        ``d/dt delta = d_dq - ad_{dq0} delta`` for a right perturbation with
        body-frame velocities.
    B : ndarray, shape (2 nv, nv) or (N, 2 nv, nv)
        ``[[0], [M^{-1}]]``.
    """
    d_q, d_v, Minv = forward_dynamics_derivatives(model, q, dq, tau, f_ext)
    batch = d_q.ndim == 3
    if not batch:
        d_q, d_v, Minv = d_q[None], d_v[None], Minv[None]
    dqb = np.atleast_2d(np.asarray(dq, dtype=float))
    dqb = np.broadcast_to(dqb, (d_q.shape[0], model.nv))
    N, nv = d_q.shape[0], model.nv
    A = np.zeros((N, 2 * nv, 2 * nv))
    B = np.zeros((N, 2 * nv, nv))
    A[:, :nv, nv:] = np.eye(nv)
    for k in range(N):
        A[k, :nv, :nv] = tangent_rate(model, dqb[k])
    A[:, nv:, :nv] = d_q
    A[:, nv:, nv:] = d_v
    B[:, nv:, :] = Minv
    return (A, B) if batch else (A[0], B[0])

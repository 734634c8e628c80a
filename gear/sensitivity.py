"""Sensitivities of the dynamics to arbitrary scalar parameters (Kim Sec. 4.2).

Kim's Table 5 differentiates the recursive inverse dynamics with respect to
"any scalar variable p" once the seeds of eq. (92) are set: ``dq/dp``,
``d(dq)/dp``, ``d(ddq)/dp``, ``dI_i/dp``, ``dh_i/dp`` and ``dF_i^ext/dp``.
This module exposes that directly:

* :func:`inverse_dynamics_sensitivity` -- ``dtau/dp`` along one or many
  directions given by their seeds;
* :func:`forward_dynamics_sensitivity` and :func:`hybrid_dynamics_sensitivity`
  -- ``dddq/dp`` (and ``dtau_u/dp``) through the implicit-function identity
  ``M dddq/dp = dtau/dp - dRNEA/dp``;
* :func:`parameter_jacobian` -- Jacobians over named physical parameters
  (``"mass:link"``, ``"com:link"``, ``"inertia:link"``, ``"standard:link"``,
  ``"placement:link"``, ``"gravity"``, ``"f_ext:link"``);
* :func:`inertial_regressor` -- the matrix ``Y`` with ``tau = Y pi`` for the
  10 standard inertial parameters of every body (system identification).

Seed conventions
----------------
``dq_dp`` : (nv,)
    Tangent perturbation of ``q`` (as :meth:`Model.integrate`).
``dv_dp``, ``da_dp`` : (nv,)
    Derivatives of ``dq`` and ``ddq``.
``dI_dp`` : (nbodies, 10)
    Derivatives of each body's standard parameters
    ``(m, m c_x, m c_y, m c_z, Ixx, Iyy, Izz, Ixy, Ixz, Iyz)`` (rotational
    inertia about the body-frame origin; :meth:`gear.Inertia.to_params`).
``dX_dp`` : (nbodies, 6)
    Twist ``xi`` of a perturbation ``placement exp(p xi)`` of each joint
    placement (rotation first, in the placement frame).
``dg_dp`` : (3,)
    Derivative of the gravity vector.
``dF_dp`` : (nbodies, 6)
    Derivative of the external wrenches.

Each seed may carry a leading axis of P directions (all seeds given with
that axis must agree on P; a seed without it is shared by every direction);
the result then has shape (P, nv).
"""
from __future__ import annotations

import numpy as np

from . import _core
from ._validate import as_array
from .algorithms.dynamics import (forward_dynamics, hybrid_dynamics, mass_matrix, _prescribed_mask,
                                  _prescribed_dofs)
from .spatial import skew

__all__ = ["inverse_dynamics_sensitivity", "forward_dynamics_sensitivity",
           "hybrid_dynamics_sensitivity", "parameter_jacobian", "inertial_regressor",
           "standard_parameters"]


def _state(model, q, dq, x, xname, f_ext):
    q = as_array("q", q, (model.nq,))
    model.check_configuration(q)
    dq = as_array("dq", dq, (model.nv,))
    x = as_array(xname, x, (model.nv,))
    fe = None if f_ext is None else as_array("f_ext", f_ext, (model.nbodies, 6))
    return q, dq, x, fe


def _seeds(model, **seeds):
    shapes = {"dq_dp": (model.nv,), "dv_dp": (model.nv,), "da_dp": (model.nv,),
              "dI_dp": (model.nbodies, 10), "dX_dp": (model.nbodies, 6), "dg_dp": (3,),
              "dF_dp": (model.nbodies, 6), "dtau_dp": (model.nv,), "dinput_dp": (model.nv,)}
    P = None
    batch = False
    out = {}
    for name, val in seeds.items():
        if val is None:
            out[name] = None
            continue
        inner = shapes[name]
        arr = np.asarray(val, dtype=float)
        single = arr.ndim == len(inner)
        if single:
            arr = as_array(name, arr, inner)[None]     # shared by every direction
        else:
            batch = True
            arr = as_array(name, arr, (None,) + inner)
        if not single:
            if P is not None and arr.shape[0] != P:
                raise ValueError(f"{name} has {arr.shape[0]} directions but another seed has {P}")
            P = arr.shape[0]
        out[name] = arr
    if all(v is None for v in out.values()):
        raise TypeError("give at least one seed (dq_dp, dv_dp, da_dp, dI_dp, dX_dp, dg_dp, dF_dp"
                        ", dtau_dp)")
    if P is None:
        P = 1
    for k, v in out.items():
        if v is not None and v.shape[0] != P:
            out[k] = np.ascontiguousarray(np.broadcast_to(v, (P,) + v.shape[1:]))
    return out, P, batch


def _rnea_p(model, q, dq, ddq, fe, s, P):
    out = np.empty((P, model.nv))
    _core.rnea_tangent(model.data, q, dq, ddq, None if fe is None else fe,
                       s.get("dq_dp"), s.get("dv_dp"), s.get("da_dp"), s.get("dI_dp"),
                       s.get("dX_dp"), s.get("dg_dp"), s.get("dF_dp"), out)
    return out


def inverse_dynamics_sensitivity(model, q, dq, ddq, f_ext=None, *, dq_dp=None, dv_dp=None,
                                 da_dp=None, dI_dp=None, dX_dp=None, dg_dp=None, dF_dp=None):
    """``dtau/dp`` of inverse dynamics along the given seeds (Kim Table 5).

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,)
    dq, ddq : array_like, shape (nv,)
    f_ext : array_like, shape (nbodies, 6), optional
    dq_dp, dv_dp, da_dp, dI_dp, dX_dp, dg_dp, dF_dp : array_like, optional
        Seeds (see the module docstring), each optionally with a leading
        axis of P directions.

    Returns
    -------
    ndarray, shape (nv,) or (P, nv)

    Examples
    --------
    Sensitivity of the torques to the mass of the last link:

    >>> import gear, numpy as np
    >>> m = gear.load_urdf(gear.data_path("arm7.urdf"))
    >>> q = m.neutral(); z = np.zeros(m.nv)
    >>> J, labels = gear.sensitivity.parameter_jacobian(m, q, z, z, ["mass:" + m.body_names[-1]])
    >>> J.shape
    (7, 1)
    """
    q, dq, ddq, fe = _state(model, q, dq, ddq, "ddq", f_ext)
    s, P, batch = _seeds(model, dq_dp=dq_dp, dv_dp=dv_dp, da_dp=da_dp, dI_dp=dI_dp,
                         dX_dp=dX_dp, dg_dp=dg_dp, dF_dp=dF_dp)
    out = _rnea_p(model, q, dq, ddq, fe, s, P)
    return out if batch else out[0]


def forward_dynamics_sensitivity(model, q, dq, tau, f_ext=None, *, dq_dp=None, dv_dp=None,
                                 dtau_dp=None, dI_dp=None, dX_dp=None, dg_dp=None, dF_dp=None):
    """``dddq/dp`` of forward dynamics: ``M^{-1} (dtau/dp - dRNEA/dp)`` at
    ``ddq = ABA(tau)``, where ``dRNEA/dp`` is Table 5 with ``d(ddq)/dp = 0``.

    Returns
    -------
    ndarray, shape (nv,) or (P, nv)
    """
    q, dq, tau, fe = _state(model, q, dq, tau, "tau", f_ext)
    s, P, batch = _seeds(model, dq_dp=dq_dp, dv_dp=dv_dp, dtau_dp=dtau_dp, dI_dp=dI_dp,
                         dX_dp=dX_dp, dg_dp=dg_dp, dF_dp=dF_dp)
    ddq = forward_dynamics(model, q, dq, tau, fe)
    rhs = -_rnea_p(model, q, dq, ddq, fe, s, P)
    if s["dtau_dp"] is not None:
        rhs += s["dtau_dp"]
    M = mass_matrix(model, q)
    out = np.linalg.solve(M, rhs.T).T
    return out if batch else out[0]


def hybrid_dynamics_sensitivity(model, q, dq, ddq, tau, prescribed, f_ext=None, *, dq_dp=None,
                                dv_dp=None, dinput_dp=None, dI_dp=None, dX_dp=None, dg_dp=None,
                                dF_dp=None):
    """Derivatives of the hybrid-dynamics outputs ``(tau_out, ddq_out)``.

    ``dinput_dp`` (nv,) is the derivative of the given inputs: ``ddq`` on
    prescribed coordinates, ``tau`` on the others.

    Returns
    -------
    dtau_dp, dddq_dp : ndarray, shape (nv,) or (P, nv)
    """
    mask = _prescribed_mask(model, prescribed)
    tau_out, ddq_out = hybrid_dynamics(model, q, dq, ddq, tau, mask, f_ext)
    q, dq, _, fe = _state(model, q, dq, ddq, "ddq", f_ext)
    s, P, batch = _seeds(model, dq_dp=dq_dp, dv_dp=dv_dp, dinput_dp=dinput_dp, dI_dp=dI_dp,
                         dX_dp=dX_dp, dg_dp=dg_dp, dF_dp=dF_dp)
    nv = model.nv
    u = _prescribed_dofs(model, mask)
    v = ~u
    din = s["dinput_dp"] if s["dinput_dp"] is not None else np.zeros((P, nv))
    R = _rnea_p(model, q, dq, ddq_out, fe, s, P)   # dRNEA/dp at fixed ddq
    M = mass_matrix(model, q)
    dddq = np.zeros((P, nv))
    dddq[:, u] = din[:, u]
    if v.any():
        rhs = din[:, v] - R[:, v] - dddq[:, u] @ M[np.ix_(v, u)].T
        dddq[:, v] = np.linalg.solve(M[np.ix_(v, v)], rhs.T).T
    dtau = np.zeros((P, nv))
    dtau[:, v] = din[:, v]
    dtau[:, u] = R[:, u] + dddq @ M[u].T
    return (dtau, dddq) if batch else (dtau[0], dddq[0])


def standard_parameters(model):
    """The standard inertial parameters of every body, shape (nbodies * 10,):
    per body ``(m, m c, Ixx, Iyy, Izz, Ixy, Ixz, Iyz)`` about the body-frame
    origin (zeros for massless bodies)."""
    return model.arrays()["inertia"].ravel().copy()


def inertial_regressor(model, q, dq, ddq):
    """The regressor ``Y(q, dq, ddq)`` with ``tau = Y @ standard_parameters(model)``.

    Returns
    -------
    Y : ndarray, shape (nv, 10 * nbodies)
        Column ``10 i + k`` is ``dtau / dpi_{i,k}`` (Table 5 with
        ``dI_i/dp = e_k``); inverse dynamics is linear in the parameters.
    """
    nb = model.nbodies
    dI = np.zeros((10 * nb, nb, 10))
    for i in range(nb):
        for k in range(10):
            dI[10 * i + k, i, k] = 1.0
    # the seeds leave dtau free of the current parameters (linearity)
    return inverse_dynamics_sensitivity(model, q, dq, ddq, dI_dp=dI).T


_KINDS = {"mass": 1, "com": 3, "inertia": 6, "standard": 10, "placement": 6, "gravity": 3,
          "f_ext": 6}


def _dpi_columns(model, kind, body):
    """Directions in the 10 standard parameters for physical parameters."""
    I = model.inertias[body]
    m = 0.0 if I is None else I.mass
    c = np.zeros(3) if I is None else I.com
    cols = []
    labels = []
    if kind == "mass":
        C = skew(c)
        d = np.zeros(10)
        d[0] = 1.0
        d[1:4] = c
        Ib = C.T @ C
        d[4:10] = [Ib[0, 0], Ib[1, 1], Ib[2, 2], Ib[0, 1], Ib[0, 2], Ib[1, 2]]
        cols.append(d)
        labels.append("mass")
    elif kind == "com":
        for k in range(3):
            e = np.eye(3)[k]
            Ib = m * (2 * c[k] * np.eye(3) - np.outer(e, c) - np.outer(c, e))
            d = np.zeros(10)
            d[1 + k] = m
            d[4:10] = [Ib[0, 0], Ib[1, 1], Ib[2, 2], Ib[0, 1], Ib[0, 2], Ib[1, 2]]
            cols.append(d)
            labels.append("com_" + "xyz"[k])
    elif kind == "inertia":
        for k, name in enumerate(["Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz"]):
            d = np.zeros(10)
            d[4 + k] = 1.0
            cols.append(d)
            labels.append(name)
    elif kind == "standard":
        for k, name in enumerate(["m", "mcx", "mcy", "mcz", "Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz"]):
            d = np.zeros(10)
            d[k] = 1.0
            cols.append(d)
            labels.append(name)
    return cols, labels


def parameter_jacobian(model, q, dq, x, params, f_ext=None, dynamics="inverse"):
    """Jacobian of the dynamics over named parameters.

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,)
    dq : array_like, shape (nv,)
    x : array_like, shape (nv,)
        ``ddq`` for ``dynamics="inverse"`` (output ``tau``), ``tau`` for
        ``dynamics="forward"`` (output ``ddq``).
    params : list of str
        Each ``"kind:body"`` or ``"gravity"``.  Kinds: ``mass`` (1 column;
        centre of mass and rotational inertia about it held fixed), ``com``
        (3), ``inertia`` (6: I_com xx, yy, zz, xy, xz, yz), ``standard`` (10
        standard parameters), ``placement`` (6: the joint placement's twist,
        rotation first), ``f_ext`` (6: the external wrench on the body),
        ``gravity`` (3).
    f_ext : array_like, shape (nbodies, 6), optional
    dynamics : {"inverse", "forward"}

    Returns
    -------
    J : ndarray, shape (nv, ncols)
    labels : list of str
        One label per column, e.g. ``"com_x:link3"``.
    """
    if dynamics not in ("inverse", "forward"):
        raise ValueError(f"dynamics must be 'inverse' or 'forward', got {dynamics!r}")
    nb = model.nbodies
    dI, dX, dg, dF = [], [], [], []
    labels = []

    def add(I=None, X=None, g=None, F=None):
        dI.append(np.zeros((nb, 10)) if I is None else I)
        dX.append(np.zeros((nb, 6)) if X is None else X)
        dg.append(np.zeros(3) if g is None else g)
        dF.append(np.zeros((nb, 6)) if F is None else F)

    for spec in params:
        if not isinstance(spec, str):
            raise TypeError(f"parameters are strings like 'mass:link3' or 'gravity', got {spec!r}")
        kind, _, body = spec.partition(":")
        if kind not in _KINDS:
            raise ValueError(f"unknown parameter kind {kind!r} in {spec!r}; kinds are {sorted(_KINDS)}")
        if kind == "gravity":
            for k in range(3):
                add(g=np.eye(3)[k])
                labels.append("gravity_" + "xyz"[k])
            continue
        if not body:
            raise ValueError(f"parameter {spec!r} needs a body name: '{kind}:<body>'")
        i = model.body_index(body)
        if kind in ("mass", "com", "inertia", "standard"):
            cols, names = _dpi_columns(model, kind, i)
            for d, name in zip(cols, names):
                I = np.zeros((nb, 10))
                I[i] = d
                add(I=I)
                labels.append(f"{name}:{body}")
        elif kind == "placement":
            for k in range(6):
                X = np.zeros((nb, 6))
                X[i, k] = 1.0
                add(X=X)
                labels.append(f"placement_{['rx', 'ry', 'rz', 'tx', 'ty', 'tz'][k]}:{body}")
        elif kind == "f_ext":
            for k in range(6):
                F = np.zeros((nb, 6))
                F[i, k] = 1.0
                add(F=F)
                labels.append(f"f_ext_{['mx', 'my', 'mz', 'fx', 'fy', 'fz'][k]}:{body}")
    seeds = dict(dI_dp=np.array(dI), dX_dp=np.array(dX), dg_dp=np.array(dg), dF_dp=np.array(dF))
    if not labels:
        return np.zeros((model.nv, 0)), []
    if dynamics == "inverse":
        J = inverse_dynamics_sensitivity(model, q, dq, x, f_ext, **seeds)
    else:
        J = forward_dynamics_sensitivity(model, q, dq, x, f_ext, **seeds)
    return np.atleast_2d(J).T, labels

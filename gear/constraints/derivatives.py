"""Analytic derivatives of closed-chain dynamics (Kim Secs. 3-4).

Forward dynamics of a closed system is the KKT system (Kim eqs. 54, 67-69)

    M(q) ddq + b(q, dq) = tau + A(q)^T lam,        A(q) ddq + (dA dq)(q, dq) = 0.

Differentiating both lines along a direction ``x`` (``q`` in the tangent
space, ``dq`` or ``tau``) at the solution gives a KKT system with the same
matrix for the derivatives:

    M dddq - A^T dlam = dtau - dRNEA/dx + d(A^T lam)/dx |_lam
    A dddq            = -d(A ddq + dA dq)/dx |_ddq

``dRNEA/dx`` is the tree's inverse-dynamics derivative at ``(q, dq, ddq)``
(Kim Table 5, :func:`gear.inverse_dynamics_derivatives`); the derivatives of
the rows ``A(q)`` and of ``dA dq`` come from
:mod:`gear.constraints._tangents`.  The system is solved through the
Schur complement ``K = A M^-1 A^T`` (eq. 68) with the same rank cut as the
solvers (``rcond``).

Redundant rows.  ``dddq`` is unique.  ``lam`` is the minimum-norm
multiplier; where the rank of ``A`` is locally constant its derivative is
the minimum-norm solution above plus ``N N^T dA y`` (``N`` an orthonormal
basis of ``null(A^T)``, ``lam = A y``): ``lam`` stays orthogonal to
``null(A^T)`` as that space turns.  (From ``A^T N = 0`` and ``N^T lam = 0``:
``N^T dlam = N^T dA A^+ lam``.)  Closed inverse dynamics is handled the same
way on ``A_p^T lam = RNEA_p - tau_p`` (eqs. 57-59).
"""
from __future__ import annotations

import numpy as np

from .. import algorithms as alg
from ..algorithms.dynamics import _cached, _joint_dofs
from ._tangents import row_tangents

__all__ = ["ClosedDerivatives", "forward_dynamics_derivatives", "inverse_dynamics_derivatives", "linearize"]


class ClosedDerivatives:
    """Derivatives of closed-chain dynamics at one state or a batch.

    Attributes (``(N, ...)`` with a leading batch axis for a batch)
    ----------
    ddq : ndarray, shape (nv,)
        The forward dynamics itself.
    lam : ndarray, shape (nc,)
    ddq_dq, ddq_ddq, ddq_dtau : ndarray, shape (nv, nv)
        ``d ddq / dq`` (tangent space), ``d ddq / d(dq)``, ``d ddq / d tau``.
    lam_dq, lam_ddq, lam_dtau : ndarray, shape (nc, nv)

    For :meth:`gear.ConstrainedModel.inverse_dynamics_derivatives` the
    attributes are ``tau``, ``lam``, ``tau_dq``, ``tau_ddq``, ``tau_dddq``
    (nv, nv) and ``lam_dq``, ``lam_ddq``, ``lam_dddq`` (nc, nv).  The
    derivative matrices are views of two blocks, ``X`` (nv, 3 nv) and ``Y``
    (nc, 3 nv), as the kernels write them.
    """

    def __init__(self, names, value, lam, X, Y):
        self._names, self.X, self.Y = names, X, Y
        setattr(self, names[0], value)
        self.lam = lam

    def __getattr__(self, name):
        names = self.__dict__.get("_names")
        if names is not None:
            for block, arr in ((names[1], self.X), (names[2], self.Y)):
                if name in block:
                    nv = arr.shape[-1] // 3
                    i = block.index(name)
                    return arr[..., i * nv:(i + 1) * nv]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self):
        names = self._names
        shapes = ", ".join(f"{k}{tuple(np.shape(getattr(self, k)))}"
                           for k in (names[0], "lam") + names[1] + names[2])
        return f"ClosedDerivatives({shapes})"


_FORWARD = ("ddq", ("ddq_dq", "ddq_ddq", "ddq_dtau"), ("lam_dq", "lam_ddq", "lam_dtau"))
_INVERSE = ("tau", ("tau_dq", "tau_ddq", "tau_dddq"), ("lam_dq", "lam_ddq", "lam_dddq"))


def _pinv_sym(K, rcond):
    """``K^+`` of a symmetric positive semi-definite ``K`` and an orthonormal
    basis of its null space (eigenvalues below ``rcond`` times the largest)."""
    w, U = np.linalg.eigh(K)
    top = w.max(initial=0.0)
    keep = w > rcond * top if top > 0 else np.zeros(w.shape, dtype=bool)
    Ur = U[:, keep]
    return (Ur / w[keep]) @ Ur.T, U[:, ~keep]


def _rcond(sysm):
    return float(sysm.solver.options.get("rcond", 1e-10))


def _check_exact(sysm):
    if sysm.solver.name == "soft":
        raise ValueError("the 'soft' solver regularises the constraints, so its answer is not the exact "
                         "dynamics these derivatives differentiate; use sys.with_solver('kkt')")


def _forward_one(sysm, q, dq, tau, f_ext, rcond):
    model = sysm.model
    nv = model.nv
    res = sysm.forward_dynamics(q, dq, tau, f_ext)
    ddq, lam = np.asarray(res.ddq, dtype=float), np.asarray(res.lam, dtype=float)
    A, _, dA, bq, bv = row_tangents(sysm, q, dq)
    dIq, dIv, M = alg.inverse_dynamics_derivatives(model, q, dq, ddq, f_ext)
    R1 = np.concatenate([-dIq + np.einsum("kcn,c->nk", dA, lam), -dIv, np.eye(nv)], axis=1)
    R2 = np.concatenate([-(np.einsum("kcn,n->ck", dA, ddq) + bq), -bv, np.zeros((sysm.nc, nv))], axis=1)
    Minv = np.linalg.inv(M)
    MiAt = Minv @ A.T
    Kp, N = _pinv_sym(A @ MiAt, rcond)
    Y = Kp @ (R2 - A @ (Minv @ R1))
    X = Minv @ R1 + MiAt @ Y
    if N.shape[1] and sysm.nc:
        y = np.linalg.lstsq(A, lam, rcond=rcond)[0]                     # lam = A y
        Y[:, :nv] += N @ (N.T @ np.einsum("kcn,n->ck", dA, y))
    return ddq, lam, X, Y


def _forward_batch(sysm, q, dq, tau, f_ext, rcond):
    """``ddq`` (N, nv), ``lam`` (N, nc), ``X`` (N, nv, 3 nv) and ``Y`` (N, nc,
    3 nv) at validated 2-D states: the native kernel
    (``gear/constraints/_derivatives.pxd``, in parallel over the states),
    and the NumPy reference for constraints it does not take (a
    :class:`gear.CustomConstraint`) or states with dependent rows."""
    from .. import _core
    from ..algorithms.dynamics import get_num_threads

    model = sysm.model
    N, nv, nc = q.shape[0], model.nv, sysm.nc
    nd = sysm._native(rcond)
    if nd is None:
        todo = range(N)
        ddq, lam = np.empty((N, nv)), np.empty((N, nc))
        X, Y = np.empty((N, nv, 3 * nv)), np.empty((N, nc, 3 * nv))
    else:
        ddq, lam = np.empty((N, nv)), np.empty((N, max(nc, 1)))
        X, Y = np.empty((N, nv, 3 * nv)), np.empty((N, max(nc, 1), 3 * nv))
        status = np.zeros(N, dtype=np.int32)
        fe = None if f_ext is None else np.ascontiguousarray(f_ext, dtype=float).reshape(N, model.nbodies, 6)
        _core.closed_forward_derivatives(model.data, nd, len(sysm.constraints), np.ascontiguousarray(q),
                                         np.ascontiguousarray(dq), np.ascontiguousarray(tau), fe, rcond,
                                         ddq, lam, X, Y, status, get_num_threads() if N > 1 else 1)
        lam, Y = lam[:, :nc], Y[:, :nc]
        for k in np.flatnonzero(status == -3):
            sysm._rows_numpy(q[k], dq[k])                 # a distance closure's coincident points say so
        if (status == -4).any():
            k = int(np.flatnonzero(status == -4)[0])
            raise ValueError(f"the mass matrix is not positive definite at state {k}")
        todo = np.flatnonzero(status != 0)                # dependent rows: the NumPy reference
    for k in todo:
        ddq[k], lam[k], X[k], Y[k] = _forward_one(sysm, q[k], dq[k], tau[k],
                                                  None if f_ext is None else f_ext[k], rcond)
    return ddq, lam, X, Y


def _validated(sysm, q, dq, tau, f_ext):
    q, N, dq, tau, f_ext = sysm._state(q, f_ext, dq=dq, tau=tau)
    if N is None:
        return q[None], dq[None], tau[None], None if f_ext is None else f_ext[None], True
    return q, dq, tau, f_ext, False


def fast_forward_derivatives(sysm):
    """A callable ``f(q, dq, tau)`` for one state or a batch without
    loads: the native kernel's answer as a :class:`ClosedDerivatives`
    (``_core.closed_forward_derivatives1``), or None when the arguments or
    a state need the general path; None itself when the
    constraints have no native rows.  Cached per system (as the solvers'
    fast paths are)."""
    from .. import _core

    _check_exact(sysm)
    rcond = _rcond(sysm)
    nd = sysm._native(rcond)
    if nd is None:
        return None
    md, nk, kernel = sysm.model.data, len(sysm.constraints), _core.closed_forward_derivatives1

    def fast(q, dq, tau):
        out = kernel(md, nd, nk, q, dq, tau, rcond)
        if out is None or out[4] != 0:
            return None
        return ClosedDerivatives(_FORWARD, out[0], out[1], out[2], out[3])
    return fast


def _dofs8(model, joints, name):
    # the dofs mask as uint8, for the native inverse derivatives
    return _joint_dofs(model, joints, name).view(np.uint8)


def fast_inverse_derivatives(sysm):
    """A callable ``f(q, dq, ddq, actuated, tau_passive)`` for one state or
    a batch without loads: the native kernel's answer as a
    :class:`ClosedDerivatives` (``_core.closed_inverse_derivatives1``), or
    None when the arguments or a state need the general path (which also
    names an under-actuated batch's state); None itself when the
    constraints have no native rows.  ``actuated`` as a list, tuple or
    name is converted once per distinct value and model (errors are
    raised, never kept).  Cached per system."""
    from .. import _core

    rcond = _rcond(sysm)
    nd = sysm._native(rcond)
    if nd is None:
        return None
    model = sysm.model
    md, nk, kernel = model.data, len(sysm.constraints), _core.closed_inverse_derivatives1

    def fast(q, dq, ddq, actuated, tau_passive):
        a = _cached(model, "dofs8", actuated, "actuated", _dofs8)
        out = kernel(md, nd, nk, q, dq, ddq, a, tau_passive, rcond)
        if out is None:
            return None
        if out[4] == -5 and np.ndim(out[0]) == 1:
            raise _under_actuated(None)
        if out[4] != 0:
            return None
        return ClosedDerivatives(_INVERSE, out[0], out[1], out[2], out[3])
    return fast


def forward_dynamics_derivatives(sysm, q, dq, tau, f_ext=None):
    """See :meth:`gear.ConstrainedModel.forward_dynamics_derivatives`."""
    _check_exact(sysm)
    rcond = _rcond(sysm)
    q, dq, tau, f_ext, single = _validated(sysm, q, dq, tau, f_ext)
    ddq, lam, X, Y = _forward_batch(sysm, q, dq, tau, f_ext, rcond)
    if single:
        return ClosedDerivatives(_FORWARD, ddq[0], lam[0], X[0], Y[0])
    return ClosedDerivatives(_FORWARD, ddq, lam, X, Y)


def _inverse_one(sysm, q, dq, ddq, actuated, a, tau_p, f_ext, rcond, k):
    model = sysm.model
    nv = model.nv
    res = sysm.inverse_dynamics(q, dq, ddq, actuated, tau_p, f_ext=f_ext)
    if not bool(np.all(res.exact)):
        raise _under_actuated(k)
    tau, lam = np.asarray(res.tau, dtype=float), np.asarray(res.lam, dtype=float)
    A, _, dA, _, _ = row_tangents(sysm, q, dq)
    dIq, dIv, M = alg.inverse_dynamics_derivatives(model, q, dq, ddq, f_ext)
    rhs = np.concatenate([dIq - np.einsum("kcn,c->nk", dA, lam), dIv, M], axis=1)   # d(RNEA - A^T lam)|_lam
    p = ~a
    nc = sysm.nc
    dlam = np.zeros((nc, 3 * nv))
    if nc and p.any():
        U, sv, Vt = np.linalg.svd(A[:, p].T, full_matrices=True)
        r = int((sv > rcond * sv[0]).sum()) if sv.size and sv[0] > 0 else 0
        Bp = Vt[:r].T @ (U[:, :r].T / sv[:r, None])                      # (A_p^T)^+
        dlam = Bp @ rhs[p]
        Nn = Vt[r:].T
        if Nn.shape[1]:
            y = np.zeros(nv)
            y[p] = U[:, :r] @ ((Vt[:r] @ lam) / sv[:r])                   # (A_p^T)^{+T} lam
            dlam[:, :nv] += Nn @ (Nn.T @ np.einsum("kcn,n->ck", dA, y))
    dtau = np.zeros((nv, 3 * nv))
    dtau[a] = rhs[a] - A[:, a].T @ dlam
    return tau, lam, dtau, dlam


def _under_actuated(k):
    where = "" if k is None else f" (state {k})"
    return ValueError(f"the system is under-actuated here{where}: the passive joints cannot follow ddq, so "
                      "the closed inverse dynamics is not defined (its answer is hybrid dynamics); "
                      "actuate more joints, or differentiate sys.forward_dynamics instead")


def inverse_dynamics_derivatives(sysm, q, dq, ddq, actuated, tau_passive=None, f_ext=None):
    """See :meth:`gear.ConstrainedModel.inverse_dynamics_derivatives`."""
    from .. import _core
    from ..algorithms.dynamics import get_num_threads

    rcond = _rcond(sysm)
    nd = sysm._native(rcond)
    nv, nc = sysm.model.nv, sysm.nc
    q, N, dq, ddq, tau_p, f_ext = sysm._state(q, f_ext, dq=dq, ddq=ddq,
                                              tau_passive=np.zeros(nv) if tau_passive is None else tau_passive)
    single = N is None
    a = sysm._joint_dofs(actuated, "actuated")
    if single:
        q, dq, ddq, tau_p = q[None], dq[None], ddq[None], tau_p[None]
        f_ext = None if f_ext is None else f_ext[None]
    n = q.shape[0]
    tau = np.array(tau_p, dtype=float, order="C")
    lam, X, Y = np.empty((n, max(nc, 1))), np.empty((n, nv, 3 * nv)), np.empty((n, max(nc, 1), 3 * nv))
    if nd is None:
        todo = range(n)
    else:
        status = np.zeros(n, dtype=np.int32)
        fe = None if f_ext is None else np.ascontiguousarray(f_ext, dtype=float).reshape(n, -1, 6)
        _core.closed_inverse_derivatives(sysm.model.data, nd, len(sysm.constraints), np.ascontiguousarray(q),
                                         np.ascontiguousarray(dq), np.ascontiguousarray(ddq),
                                         np.ascontiguousarray(a, dtype=np.uint8), tau, fe, rcond, lam, X, Y,
                                         status, get_num_threads() if n > 1 else 1)
        for k in np.flatnonzero(status == -3):
            sysm._rows_numpy(q[k], dq[k])                 # a distance closure's coincident points say so
        if (status == -5).any():
            raise _under_actuated(None if single else int(np.flatnonzero(status == -5)[0]))
        todo = np.flatnonzero(status != 0)                # dependent rows: the NumPy reference
    lam, Y = lam[:, :nc], Y[:, :nc]
    for k in todo:
        tau[k], lam[k], X[k], Y[k] = _inverse_one(sysm, q[k], dq[k], ddq[k], actuated, a, tau_p[k],
                                                  None if f_ext is None else f_ext[k], rcond,
                                                  None if single else k)
    if single:
        return ClosedDerivatives(_INVERSE, tau[0], lam[0], X[0], Y[0])
    return ClosedDerivatives(_INVERSE, tau, lam, X, Y)


def constraint_basis(A, rcond=1e-10):
    """An orthonormal basis ``G`` (nv, dof) of ``null(A)`` (singular values
    below ``rcond`` times the largest count as zero)."""
    nv = A.shape[1]
    if A.shape[0] == 0:
        return np.eye(nv)
    _, sv, Vt = np.linalg.svd(A, full_matrices=True)
    r = int((sv > rcond * sv[0]).sum()) if sv.size and sv[0] > 0 else 0
    return Vt[r:].T.copy()


def _linearize_one(sysm, q, dq, X, minimal, rcond):
    model = sysm.model
    nv = model.nv
    Fq, Fv, Ft = X[:, :nv], X[:, nv:2 * nv], X[:, 2 * nv:]
    L = alg.derivatives.tangent_rate(model, dq)
    if not minimal:
        Am = np.block([[L, np.eye(nv)], [Fq, Fv]])
        Bm = np.concatenate([np.zeros((nv, nv)), Ft])
        return Am, Bm
    A = sysm.constraint_jacobian(q)
    G = constraint_basis(A, rcond)
    H = np.zeros((nv, G.shape[1]))
    if sysm.nc and dq.any():                # at rest d(A dq)/dq is zero: no row derivatives
        dA = row_tangents(sysm, q, dq)[2]
        H = -np.linalg.pinv(A, rcond=rcond) @ np.einsum("kcn,n->ck", dA, dq) @ G
    d = G.shape[1]
    Ar = np.block([[G.T @ L @ G, np.eye(d)], [G.T @ (Fq @ G + Fv @ H), G.T @ Fv @ G]])
    Br = np.concatenate([np.zeros((d, nv)), G.T @ Ft])
    return Ar, Br, G


def linearize(sysm, q, dq, tau, f_ext=None, minimal=False):
    """See :meth:`gear.ConstrainedModel.linearize`."""
    _check_exact(sysm)
    q, dq, tau, f_ext, single = _validated(sysm, q, dq, tau, f_ext)
    rcond = _rcond(sysm)
    _, _, X, _ = _forward_batch(sysm, q, dq, tau, f_ext, rcond)
    outs = [_linearize_one(sysm, q[k], dq[k], X[k], minimal, rcond) for k in range(q.shape[0])]
    if single:
        return outs[0]
    if minimal and len({o[2].shape[1] for o in outs}) > 1:
        raise ValueError("the mobility (columns of G) differs between the states of the batch; linearise "
                         "them one at a time")
    return tuple(np.stack([o[i] for o in outs]) for i in range(len(outs[0])))

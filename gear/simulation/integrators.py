"""The right-hand side and one step of each integrator of
:func:`gear.simulate` (see :mod:`gear.simulation` for the methods), and
the projection of closed loops back onto their constraint manifold.

Everything here advances a batch of states ``(q, v)`` of shapes
``(N, nq)``, ``(N, nv)``; nothing here records or schedules.
"""
from __future__ import annotations

import numpy as np

from .._validate import as_batch

#: integrator names accepted by :func:`gear.simulate`
INTEGRATORS = ("euler", "rk4", "rkmk4", "implicit", "dop853", "rk45")
STABILIZATIONS = ("projection", "baumgarte", None)


# ---------------------------------------------------------------------------
# the right-hand side
# ---------------------------------------------------------------------------
class _System:
    """The batched acceleration ``a(t, q, v)`` of a model or constrained
    model, with the torque and external-force inputs of :func:`simulate`."""

    def __init__(self, target, tau, f_ext, N, single, stabilization, gains, prescribed=None):
        from ..constraints import ConstrainedModel
        from ..model import Model

        if isinstance(target, ConstrainedModel):
            self.sys, self.model = target, target.model
        elif isinstance(target, Model):
            self.sys, self.model = None, target
        else:
            raise TypeError(f"model_or_sys must be a gear.Model or gear.ConstrainedModel, "
                            f"got {type(target).__name__}")
        m = self.model
        self.N, self.single = N, single
        self.row0, self.total = 0, N        # where these rollouts sit in a campaign's batch
        self.tau = self._input("tau", tau, (m.nv,))
        self.f_ext = self._input("f_ext", f_ext, (m.nbodies, 6))
        self.stabilization = stabilization if self.sys is not None and self.sys.nc else None
        self.gains = gains
        self.evaluations = 0
        self.prescribed = self._prescribed(prescribed)
        self.prescribed_input = prescribed
        self.last_tau = None
        self.found = None

    def _prescribed(self, prescribed):
        """``{joint: motion}`` -> (body mask, q index, v index, motions)."""
        if prescribed is None:
            return None
        m = self.model
        if not isinstance(prescribed, dict) or not prescribed:
            raise TypeError("prescribed must be a dict {joint name: motion(t) -> (q, dq, ddq)}")
        mask = np.zeros(m.nbodies, dtype=bool)
        qi, vi, motions = [], [], []
        for name, motion in prescribed.items():
            try:
                i = m.joint_index(name)
            except KeyError:
                raise KeyError(f"prescribed: no joint named {name!r}; joints are {m.joint_names}") from None
            j = m.joints[i]
            if j.nq != j.nv or j.nv == 0:
                raise ValueError(f"prescribed: joint {name!r} ({type(j).__name__}) must be a vector-space "
                                 "joint with at least one dof (revolute, prismatic, ...)")
            if not callable(motion):
                raise TypeError(f"prescribed[{name!r}] must be a callable t -> (q, dq, ddq)")
            mask[i] = True
            qi.append(np.arange(m._iq[i], m._iq[i] + j.nq))
            vi.append(np.arange(m._iv[i], m._iv[i] + j.nv))
            motions.append(motion)
        return mask, qi, vi, motions

    def reference(self, t):
        """The prescribed joints' ``(q, dq, ddq)`` at ``t`` as three
        (n_prescribed,) arrays, in the order of the velocity indices."""
        out = [[], [], []]
        for vi, motion in zip(self.prescribed[2], self.prescribed[3]):
            vals = motion(t)
            if len(vals) != 3:
                raise ValueError("a prescribed motion must return (q, dq, ddq)")
            for k in range(3):
                arr = np.broadcast_to(np.asarray(vals[k], dtype=float), (len(vi),))
                if not np.isfinite(arr).all():
                    raise ValueError(f"a prescribed motion returned non-finite values at t = {t:g}")
                out[k].append(arr)
        return tuple(np.concatenate(x) for x in out)

    def free_dofs(self):
        free = np.ones(self.model.nv, dtype=bool)
        if self.prescribed is not None:
            free[np.concatenate(self.prescribed[2])] = False
        return free

    def impose(self, t, q, v):
        """Set the prescribed joints to their reference position and velocity."""
        qr, dqr, _ = self.reference(t)
        q, v = q.copy(), v.copy()
        q[:, np.concatenate(self.prescribed[1])] = qr
        v[:, np.concatenate(self.prescribed[2])] = dqr
        return q, v

    def _input(self, name, value, inner):
        if value is None or callable(value):
            return value
        arr, is_b = as_batch(name, value, inner)
        if is_b and arr.shape[0] != self.N:
            raise ValueError(f"{name} has {arr.shape[0]} rows but the batch has {self.N} states")
        return np.array(np.broadcast_to(arr, (self.N,) + inner), dtype=float, order="C")

    def _call_input(self, name, f, t, q, v, inner):
        if f is None or not callable(f):
            return f
        if self.single:
            out = np.asarray(f(t, q[0], v[0]), dtype=float)
        else:
            out = np.asarray(f(t, q, v), dtype=float)
        if out.shape == inner:
            out = np.broadcast_to(out, (self.N,) + inner)
        if out.shape != (self.N,) + inner:
            want = inner if self.single else (self.N,) + inner
            raise ValueError(f"the {name} callable returned shape {out.shape}, expected {want}")
        if not np.isfinite(out).all():
            raise ValueError(f"the {name} callable returned non-finite values at t = {t:g}")
        return np.array(out, dtype=float, order="C")

    def accel(self, t, q, v, held=None):
        """``(ddq, lam)`` for the batch; ``lam`` None for a tree.  A closed
        system's forward dynamics leave in ``self.found`` the rows the solve
        found dependent (None where the solver does not say); ``held``: such
        rows, from the step's start, to treat as dependent at its stages
        (:meth:`gear.ConstrainedModel._stage_dynamics`)."""
        from ..algorithms import forward_dynamics

        self.evaluations += 1
        m = self.model
        tau = self._call_input("tau", self.tau, t, q, v, (m.nv,))
        if tau is None:
            tau = np.zeros((self.N, m.nv))
        fe = self._call_input("f_ext", self.f_ext, t, q, v, (m.nbodies, 6))
        if self.prescribed is not None:
            from ..algorithms import hybrid_dynamics

            mask = self.prescribed[0]
            ddq_in = np.zeros((self.N, m.nv))
            ddq_in[:, np.concatenate(self.prescribed[2])] = self.reference(t)[2]
            if self.sys is None:
                tau_o, ddq = hybrid_dynamics(m, q, v, ddq_in, tau, mask, fe)
                self.last_tau = tau_o
                return ddq, None
            ddq, lam, found, self.last_tau = self.sys._stage_dynamics(q, v, tau, fe, held, ddq_in, mask)
            if held is None:
                self.found = found
            return ddq, lam
        if self.sys is None:
            return forward_dynamics(m, q, v, tau, fe), None
        ddq, lam, found, _ = self.sys._stage_dynamics(q, v, tau, fe, held)
        if held is None:
            self.found = found
        if self.stabilization == "baumgarte":
            return self._baumgarte(q, v, ddq, lam, held if held is not None else found)
        return ddq, lam

    def _baumgarte(self, q, v, ddq, lam, held):
        """The hard solve's ``(ddq, lam)`` plus the minimum-M-norm correction
        ``dv`` with ``A dv = -(2 alpha A v + beta^2 g)``: ``dv = M^{-1} A^T
        (A M^{-1} A^T)^+ rhs`` (the same constraint force route as Kim eq.
        69), on the rows the solve kept (``held``: (N, nc), 1.0 on those it
        left out as dependent, or None)."""
        from ..algorithms import mass_matrix

        alpha, beta = self.gains
        g, A, _ = self.sys._rows_batch(q)
        hol = self.sys._holonomic_mask()
        rhs = -2.0 * alpha * np.einsum("nij,nj->ni", A, v)
        rhs[:, hol] -= beta * beta * g
        if held is not None:
            A = np.where(held[:, :, None] != 0.0, 0.0, A)
            rhs = np.where(held != 0.0, 0.0, rhs)
        M = mass_matrix(self.model, q)
        if not _regular(M):
            dv, mu = _metric_min_norm(M, A, rhs)
            return ddq + dv, lam + mu
        MiAT = np.linalg.solve(M, np.transpose(A, (0, 2, 1)))
        K = A @ MiAT
        mu = np.einsum("nij,nj->ni", np.linalg.pinv(K, rcond=1e-10, hermitian=True), rhs)
        return ddq + np.einsum("nij,nj->ni", MiAT, mu), lam + mu


def _regular(M):
    """Whether every mass matrix of the batch ``M`` (N, n, n) is safely
    positive definite: a Cholesky factor whose pivots squared stay above
    1e-12 of the largest diagonal entry."""
    try:
        L = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        return False
    d = np.diagonal(L, axis1=1, axis2=2) ** 2
    return bool(np.all(d >= 1e-12 * np.diagonal(M, axis1=1, axis2=2).max(axis=1, keepdims=True)))


def _metric_min_norm(M, A, r):
    """``dv`` of least ``dv^T M dv`` with ``A dv = r`` (least squares in the
    rows), per state, and the minimum-norm ``mu`` with ``A^T mu = M dv``:
    the projection solver's null-space solve (``_solve``, ``_lam`` of
    ``gear/solvers/projection.py``, on its SVD split), which needs ``M``
    positive only on ``A dv = 0`` (a singular ``M``: joints on massless
    bodies that only the rows move, as in OpenSim-style models).  The
    regular case takes ``M^-1 A^T K^+`` (same answer)."""
    from ..algorithms.dynamics import SingularInertiaError
    from ..solvers.projection import _svd_split

    N, m, n = A.shape
    dv, mu = np.zeros((N, n)), np.zeros((N, m))
    for k in range(N):
        Ur, sr, Vr, G = _svd_split(A[k], 1e-10)
        x = Vr @ ((Ur.T @ r[k]) / sr)
        if G.shape[1]:
            try:
                x = x + G @ np.linalg.solve(G.T @ M[k] @ G, -G.T @ (M[k] @ x))
            except np.linalg.LinAlgError:
                raise SingularInertiaError(
                    "the mass matrix is singular on the motions the constraints allow (state "
                    f"{k}): some joint moves no mass even with the loops closed") from None
        dv[k] = x
        mu[k] = Ur @ ((Vr.T @ (M[k] @ x)) / sr)
    return dv, mu


# ---------------------------------------------------------------------------
# Lie-group helpers for rkmk4
# ---------------------------------------------------------------------------
def _lie_segments(model):
    """(start, kind) of the velocity segments of spherical and free joints."""
    from ..joints import FREE, SPHERICAL

    return [(model._iv[i], j.kind == FREE) for i, j in enumerate(model.joints)
            if j.kind in (SPHERICAL, FREE)]


def _bracket(a, b, free):
    """``[a, b] = ad_a b`` on so(3) (3-vectors) or se(3) ((w, v) twists)."""
    if not free:
        return np.cross(a, b)
    w = np.cross(a[:, :3], b[:, :3])
    v = np.cross(a[:, :3], b[:, 3:]) + np.cross(a[:, 3:], b[:, :3])
    return np.concatenate([w, v], axis=1)


def _dexpinv(segments, theta, xi):
    """``dexp^{-1}_{-theta}(xi)`` per joint, truncated after the
    ``1/12 ad^2`` term (the next non-zero term is O(theta^4): 4th order)."""
    out = xi.copy()
    for s, free in segments:
        n = 6 if free else 3
        th, x = theta[:, s:s + n], xi[:, s:s + n]
        c1 = _bracket(th, x, free)
        out[:, s:s + n] = x + 0.5 * c1 + _bracket(th, c1, free) / 12.0
    return out


# ---------------------------------------------------------------------------
# one step of each integrator: (q, v) at t -> (q1, v1); returns the first
# stage's lam (the multipliers at the start of the step)
# ---------------------------------------------------------------------------
def _step_euler(S, t, q, v, h, a0):
    a, lam = a0 if a0 is not None else S.accel(t, q, v)
    v1 = v + h * a
    return S.model.integrate(q, v1, h), v1, lam


def _step_rk(S, t, q, v, h, a0, munthe_kaas):
    m = S.model
    seg = _lie_segments(m) if munthe_kaas else []
    a1, lam = a0 if a0 is not None else S.accel(t, q, v)
    # the rows the start's solve found dependent stay so at the stages
    # (ConstrainedModel._stage_dynamics)
    held = S.found
    k1 = v                                                    # theta' at theta = 0
    th = 0.5 * h * k1
    v2 = v + 0.5 * h * a1
    a2, _ = S.accel(t + 0.5 * h, m.integrate(q, th), v2, held)
    k2 = _dexpinv(seg, th, v2) if seg else v2
    th = 0.5 * h * k2
    v3 = v + 0.5 * h * a2
    a3, _ = S.accel(t + 0.5 * h, m.integrate(q, th), v3, held)
    k3 = _dexpinv(seg, th, v3) if seg else v3
    th = h * k3
    v4 = v + h * a3
    a4, _ = S.accel(t + h, m.integrate(q, th), v4, held)
    k4 = _dexpinv(seg, th, v4) if seg else v4
    theta = (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    v1 = v + (h / 6.0) * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
    return m.integrate(q, theta), v1, lam


def _accel_derivatives(S, t, q, v):
    """``a``, ``da/dq`` (tangent) and ``da/dv`` for the batch."""
    from ..algorithms import forward_dynamics, forward_dynamics_derivatives

    m = S.model
    if S.sys is None and S.f_ext is None and not callable(S.tau):
        tau = np.zeros((S.N, m.nv)) if S.tau is None else S.tau
        da_dq, da_dv, _ = forward_dynamics_derivatives(m, q, v, tau)
        S.evaluations += 1
        return forward_dynamics(m, q, v, tau), None, da_dq, da_dv
    # central differences of the full right-hand side (solver, inputs), the
    # rows found dependent at (q, v) held so at the perturbed states (off
    # the rows, a difference across a change of rank would mean nothing)
    a, lam = S.accel(t, q, v)
    held = S.found
    eps = 1e-6
    nv = m.nv
    da_dq = np.empty((S.N, nv, nv))
    da_dv = np.empty((S.N, nv, nv))
    for k in range(nv):
        e = np.zeros((S.N, nv))
        e[:, k] = eps
        ap, _ = S.accel(t, m.integrate(q, e), v, held)
        am, _ = S.accel(t, m.integrate(q, -e), v, held)
        da_dq[:, :, k] = (ap - am) / (2 * eps)
        ap, _ = S.accel(t, q, v + e, held)
        am, _ = S.accel(t, q, v - e, held)
        da_dv[:, :, k] = (ap - am) / (2 * eps)
    return a, lam, da_dq, da_dv


def _quat_rate(quat, w):
    """``d quat/dt = quat * (0, w) / 2`` for stacks (N, 4), (N, 3)."""
    qw, qx, qy, qz = quat.T
    wx, wy, wz = w.T
    return 0.5 * np.stack([-qx * wx - qy * wy - qz * wz,
                           qw * wx + qy * wz - qz * wy,
                           qw * wy - qx * wz + qz * wx,
                           qw * wz + qx * wy - qy * wx], axis=1)


def _qdot(model, q, v):
    """Time derivative of the configuration coordinates: ``v`` on vector
    joints, the quaternion rate on spherical joints, ``(R v_lin, quaternion
    rate)`` on free joints (body twists)."""
    from ..joints import FREE, SPHERICAL

    out = np.empty_like(q)
    for i, j in enumerate(model.joints):
        a, b = model._iq[i], model._iv[i]
        if j.kind == SPHERICAL:
            out[:, a:a + 4] = _quat_rate(q[:, a:a + 4], v[:, b:b + 3])
        elif j.kind == FREE:
            quat = q[:, a + 3:a + 7] / np.linalg.norm(q[:, a + 3:a + 7], axis=1, keepdims=True)
            w_, x_, y_, z_ = quat.T
            R = np.stack([1 - 2 * (y_ * y_ + z_ * z_), 2 * (x_ * y_ - w_ * z_), 2 * (x_ * z_ + w_ * y_),
                          2 * (x_ * y_ + w_ * z_), 1 - 2 * (x_ * x_ + z_ * z_), 2 * (y_ * z_ - w_ * x_),
                          2 * (x_ * z_ - w_ * y_), 2 * (y_ * z_ + w_ * x_), 1 - 2 * (x_ * x_ + y_ * y_)],
                         axis=1).reshape(-1, 3, 3)
            out[:, a:a + 3] = np.einsum("nij,nj->ni", R, v[:, b + 3:b + 6])
            out[:, a + 3:a + 7] = _quat_rate(q[:, a + 3:a + 7], v[:, b:b + 3])
        else:
            out[:, a:a + j.nq] = v[:, b:b + j.nv]
    return out


def _normalized(model, q):
    from ..joints import FREE, SPHERICAL

    q = q.copy()
    for i, j in enumerate(model.joints):
        if j.kind in (SPHERICAL, FREE):
            s = slice(model._iq[i] + j.nq - 4, model._iq[i] + j.nq)
            q[:, s] /= np.linalg.norm(q[:, s], axis=1, keepdims=True)
    return q


def _step_adaptive(S, t, q, v, h, a0, method, rtol, atol):
    """One output step by ``scipy.integrate.solve_ivp`` (adaptive
    DOP853/RK45) on the configuration coordinates' exact rates
    (quaternion rates on spherical and free joints), quaternions
    normalised at the end of the step.  The step sizes are chosen for the
    batch as a whole."""
    from scipy.integrate import solve_ivp

    m = S.model
    N, nq, nv = S.N, m.nq, m.nv

    def rhs(tt, y):
        qq = _normalized(m, y[:N * nq].reshape(N, nq))
        vv = np.ascontiguousarray(y[N * nq:].reshape(N, nv))
        a, _ = S.accel(tt, qq, vv)
        return np.concatenate([_qdot(m, y[:N * nq].reshape(N, nq), vv).ravel(), a.ravel()])

    sol = solve_ivp(rhs, (t, t + h), np.concatenate([q.ravel(), v.ravel()]), method=method,
                    rtol=rtol, atol=atol)
    if not sol.success:
        raise FloatingPointError(f"solve_ivp ({method}) failed at t = {t:g}: {sol.message}")
    y = sol.y[:, -1]
    return (_normalized(m, y[:N * nq].reshape(N, nq)),
            np.ascontiguousarray(y[N * nq:].reshape(N, nv)), None)


def _step_implicit(S, t, q, v, h, a0):
    a, lam, da_dq, da_dv = _accel_derivatives(S, t, q, v)
    nv = S.model.nv
    Mat = np.eye(nv)[None] - h * da_dv - h * h * da_dq
    rhs = h * (a + h * np.einsum("nij,nj->ni", da_dq, v))
    v1 = v + np.linalg.solve(Mat, rhs[..., None])[..., 0]
    return S.model.integrate(q, v1, h), v1, lam


# ---------------------------------------------------------------------------
# stabilisation by projection
# ---------------------------------------------------------------------------
def _project(sys, q, v, tol=1e-12, max_iter=8, free=None, velocities=True, held=None):
    """Gauss-Newton onto ``g(q) = 0`` (minimum-norm steps), then the velocity
    onto ``A v = 0`` in the mass metric: ``v -= M^-1 A^T K^+ A v`` with
    ``K = A M^-1 A^T``, the nearest velocity in kinetic energy (the same
    correction as the maximal formulation's projection of the body
    twists, and independent of the joint coordinates); only the velocity
    coordinates in ``free`` (bool, nv) move (all when None: ``M`` and
    ``A`` restricted to them).  ``velocities`` False: the positions only
    (``v`` returned as given; the dense ``M`` and ``K`` are not formed).
    A Gauss-Newton step leaves out the rows ``held`` (N, nc) marks (those
    the step's start found dependent, ``_System.found``) and the rows that
    depend on the rows before them, as the native kernels' does
    (``_dependent_rows``): off the rows, a row redundant on them can be
    independent by a small angle, and a step along it would be large.
    Returns ``(q, v, max residual before projecting, Gauss-Newton
    iterations summed over the states)``."""
    from ..algorithms.dynamics import mass_matrix
    from ..constraints.system import _dependent_rows

    hol = sys._holonomic_mask()
    g, A, _ = sys._rows_batch(q)
    before = float(np.abs(g).max()) if g.size else 0.0
    nv = sys.model.nv
    free = np.ones(nv, dtype=bool) if free is None else free
    active = np.ones(q.shape[0], dtype=bool)
    iterations = 0
    for _ in range(max_iter):
        # each state iterates until its own rows hold (batch-independent bits)
        if not g.size:
            break
        active &= np.abs(g).max(axis=1) > tol
        if not active.any():
            break
        iterations += int(active.sum())
        dq = np.zeros((q.shape[0], nv))
        Ah, gh = A[active][:, hol][:, :, free], g[active]
        if held is not None:
            Ah = np.where(held[active][:, hol][:, :, None] != 0.0, 0.0, Ah)
        kh = _dependent_rows(Ah) == 0.0
        Ah, gh = np.where(kh[:, :, None], Ah, 0.0), np.where(kh, gh, 0.0)
        dq[np.ix_(active, free)] = -np.einsum("nij,nj->ni", np.linalg.pinv(Ah, rcond=1e-10), gh)
        q = np.where(active[:, None], sys.model.integrate(q, dq), q)
        g, A, _ = sys._rows_batch(q)
    if velocities and A.shape[1] and free.any():
        v = v.copy()
        Af = A[:, :, free]
        M = mass_matrix(sys.model, q)[:, free][:, :, free]
        if not _regular(M):
            v[:, free] += _metric_min_norm(M, Af, -np.einsum("nij,nj->ni", A, v))[0]
            return q, v, before, iterations
        MiAt = np.linalg.solve(M, Af.transpose(0, 2, 1))                  # M^-1 A^T (N, nf, m)
        K = Af @ MiAt
        y = np.einsum("nij,nj->ni", np.linalg.pinv(K, rcond=1e-10, hermitian=True),
                      np.einsum("nij,nj->ni", A, v))
        v[:, free] -= np.einsum("nij,nj->ni", MiAt, y)
    return q, v, before, iterations


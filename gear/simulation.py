"""``gear.simulate``: rollouts on the configuration manifold.

Every integrator advances a batch of states at once.  Each stage is one
batched call of the native dynamics: the articulated-body algorithm for
a :class:`gear.Model`, and the constrained model's solver for a
:class:`gear.ConstrainedModel`.  Configurations move with the exponential
map of each joint (:meth:`gear.Model.integrate`), never by adding to
quaternions.

* ``"euler"``: semi-implicit (symplectic) Euler,
  ``v1 = v + h a(q, v)``, ``q1 = q exp(h v1)``.
* ``"rk4"``: the classical Runge-Kutta method; the stage velocities are
  combined in the tangent space and applied with ``q exp(.)``.  It is 4th
  order on vector-space joints and lower on rotating ones.
* ``"rkmk4"``: Runge-Kutta-Munthe-Kaas.  The same tableau on
  ``q = q0 exp(theta)``, with ``theta' = dexp^{-1}_{-theta}(xi) = xi +
  [theta, xi]/2 + [theta, [theta, xi]]/12`` on spherical (so(3)) and free
  (se(3)) joints.  It is 4th order on every joint.
* ``"dop853"``, ``"rk45"``: adaptive, through ``scipy.integrate.solve_ivp``
  inside every output step (``dt`` is then the recording grid), on the
  exact rates of the configuration coordinates (quaternion rates on
  spherical and free joints, renormalised after every output step).
* ``"implicit"``: linearly implicit Euler,
  ``(I - h da/dv - h^2 da/dq) dv = h (a + h da/dq v)``, for stiff systems
  such as stiff soft constraints.  A tree uses the analytic derivatives
  (:func:`gear.forward_dynamics_derivatives`); a constrained model uses
  central differences of its solver.

Closed loops: ``stabilization="projection"`` moves each new state back
onto the constraint manifold after every step.  Gauss-Newton takes the
minimum-norm position correction and the velocity is projected onto the
null space of ``A``.  ``"baumgarte"`` instead adds
``2 alpha A dq + beta^2 g`` to the acceleration-level constraint (Baumgarte
1972), with default gains ``alpha = beta = 1 / (5 dt)`` (critically damped,
five steps).
"""
from __future__ import annotations

import hashlib
import time

import numpy as np

from ._output import STORE_FORMAT, claim_store
from ._progress import progress_bar
from ._validate import as_batch, check_scalar

__all__ = ["simulate", "Trajectory", "INTEGRATORS"]

#: integrator names accepted by :func:`simulate`
INTEGRATORS = ("euler", "rk4", "rkmk4", "implicit", "dop853", "rk45")
_STABILIZATIONS = ("projection", "baumgarte", None)


class Trajectory:
    """Result of :func:`simulate`.

    Attributes
    ----------
    t : ndarray, shape (T,)
        Recorded times: 0 (the initial state), every ``record_every``-th
        step, and ``t_final``.
    q : ndarray, shape (T, nq) or (N, T, nq)
    dq : ndarray, shape (T, nv) or (N, T, nv)
    lam : ndarray, shape (T, nc) or (N, T, nc), or None
        Constraint multipliers at the recorded states (constrained models).
    tau : ndarray, shape (T, nv) or (N, T, nv)
        Only with ``prescribed=``: the joint torques at the recorded states
        (the actuator torques on the prescribed joints).
    stats : dict
        ``steps``, ``wall_time``, ``evaluations`` (dynamics calls per
        state), ``integrator``, ``dt``, solver counters, and for closed
        loops the largest constraint residual seen (``max_residual``).

    With ``out=`` the arrays are the Zarr arrays of the store (read them
    with ``[...]``).
    """

    def __init__(self, t, q, dq, lam, stats):
        self.t, self.q, self.dq, self.lam, self.stats = t, q, dq, lam, stats

    def __repr__(self):
        return (f"Trajectory(T={len(self.t)}, q shape={tuple(self.q.shape)}, "
                f"steps={self.stats.get('steps')}, integrator={self.stats.get('integrator')!r})")


def model_hash(model):
    """SHA-256 of the arrays the kernels read (tree, joints, inertias,
    gravity): identifies the model a stored trajectory belongs to."""
    h = hashlib.sha256()
    arrays = model.arrays()
    for k in sorted(arrays):
        h.update(k.encode())
        h.update(np.ascontiguousarray(arrays[k]).tobytes())
    h.update(np.asarray(model.gravity, dtype=float).tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------
# the right-hand side
# ---------------------------------------------------------------------------
class _System:
    """The batched acceleration ``a(t, q, v)`` of a model or constrained
    model, with the torque and external-force inputs of :func:`simulate`."""

    def __init__(self, target, tau, f_ext, N, single, stabilization, gains, prescribed=None):
        from .constraints import ConstrainedModel
        from .model import Model

        if isinstance(target, ConstrainedModel):
            self.sys, self.model = target, target.model
        elif isinstance(target, Model):
            self.sys, self.model = None, target
        else:
            raise TypeError(f"model_or_sys must be a gear.Model or gear.ConstrainedModel, "
                            f"got {type(target).__name__}")
        m = self.model
        self.N, self.single = N, single
        self.tau = self._input("tau", tau, (m.nv,))
        self.f_ext = self._input("f_ext", f_ext, (m.nbodies, 6))
        self.stabilization = stabilization if self.sys is not None and self.sys.nc else None
        self.gains = gains
        self.evaluations = 0
        self.prescribed = self._prescribed(prescribed)
        self.last_tau = None

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

    def accel(self, t, q, v):
        """``(ddq, lam)`` for the batch; ``lam`` None for a tree."""
        from .algorithms import forward_dynamics

        self.evaluations += 1
        m = self.model
        tau = self._call_input("tau", self.tau, t, q, v, (m.nv,))
        if tau is None:
            tau = np.zeros((self.N, m.nv))
        fe = self._call_input("f_ext", self.f_ext, t, q, v, (m.nbodies, 6))
        if self.prescribed is not None:
            from .algorithms import hybrid_dynamics

            mask = self.prescribed[0]
            ddq_in = np.zeros((self.N, m.nv))
            ddq_in[:, np.concatenate(self.prescribed[2])] = self.reference(t)[2]
            if self.sys is None:
                tau_o, ddq = hybrid_dynamics(m, q, v, ddq_in, tau, mask, fe)
                self.last_tau = tau_o
                return ddq, None
            r = self.sys.hybrid_dynamics(q, v, ddq_in, tau, mask, fe)
            self.last_tau = r.tau
            return r.ddq, r.lam
        if self.sys is None:
            return forward_dynamics(m, q, v, tau, fe), None
        if self.stabilization == "baumgarte":
            return self._baumgarte(q, v, tau, fe)
        r = self.sys.forward_dynamics(q, v, tau, fe)
        return r.ddq, r.lam

    def _baumgarte(self, q, v, tau, fe):
        """Hard solver's answer plus the minimum-M-norm correction ``dv`` with
        ``A dv = -(2 alpha A v + beta^2 g)``: ``dv = M^{-1} A^T (A M^{-1}
        A^T)^+ rhs`` (the same constraint force route as Kim eq. 69)."""
        from .algorithms import mass_matrix

        alpha, beta = self.gains
        r = self.sys.forward_dynamics(q, v, tau, fe)
        g, A, _ = self.sys._rows_batch(q)
        hol = self.sys._holonomic_mask()
        rhs = -2.0 * alpha * np.einsum("nij,nj->ni", A, v)
        rhs[:, hol] -= beta * beta * g
        M = mass_matrix(self.model, q)
        MiAT = np.linalg.solve(M, np.transpose(A, (0, 2, 1)))
        K = A @ MiAT
        mu = np.einsum("nij,nj->ni", np.linalg.pinv(K, rcond=1e-10, hermitian=True), rhs)
        return r.ddq + np.einsum("nij,nj->ni", MiAT, mu), r.lam + mu


# ---------------------------------------------------------------------------
# Lie-group helpers for rkmk4
# ---------------------------------------------------------------------------
def _lie_segments(model):
    """(start, kind) of the velocity segments of spherical and free joints."""
    from .joints import FREE, SPHERICAL

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
    k1 = v                                                    # theta' at theta = 0
    th = 0.5 * h * k1
    v2 = v + 0.5 * h * a1
    a2, _ = S.accel(t + 0.5 * h, m.integrate(q, th), v2)
    k2 = _dexpinv(seg, th, v2) if seg else v2
    th = 0.5 * h * k2
    v3 = v + 0.5 * h * a2
    a3, _ = S.accel(t + 0.5 * h, m.integrate(q, th), v3)
    k3 = _dexpinv(seg, th, v3) if seg else v3
    th = h * k3
    v4 = v + h * a3
    a4, _ = S.accel(t + h, m.integrate(q, th), v4)
    k4 = _dexpinv(seg, th, v4) if seg else v4
    theta = (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    v1 = v + (h / 6.0) * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
    return m.integrate(q, theta), v1, lam


def _accel_derivatives(S, t, q, v):
    """``a``, ``da/dq`` (tangent) and ``da/dv`` for the batch."""
    from .algorithms import forward_dynamics, forward_dynamics_derivatives

    m = S.model
    if S.sys is None and S.f_ext is None and not callable(S.tau):
        tau = np.zeros((S.N, m.nv)) if S.tau is None else S.tau
        da_dq, da_dv, _ = forward_dynamics_derivatives(m, q, v, tau)
        S.evaluations += 1
        return forward_dynamics(m, q, v, tau), None, da_dq, da_dv
    # central differences of the full right-hand side (solver, inputs)
    a, lam = S.accel(t, q, v)
    eps = 1e-6
    nv = m.nv
    da_dq = np.empty((S.N, nv, nv))
    da_dv = np.empty((S.N, nv, nv))
    for k in range(nv):
        e = np.zeros((S.N, nv))
        e[:, k] = eps
        ap, _ = S.accel(t, m.integrate(q, e), v)
        am, _ = S.accel(t, m.integrate(q, -e), v)
        da_dq[:, :, k] = (ap - am) / (2 * eps)
        ap, _ = S.accel(t, q, v + e)
        am, _ = S.accel(t, q, v - e)
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
    from .joints import FREE, SPHERICAL

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
    from .joints import FREE, SPHERICAL

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
def _project(sys, q, v, tol=1e-12, max_iter=8, free=None):
    """Gauss-Newton onto ``g(q) = 0`` (minimum-norm steps), then the velocity
    onto ``A v = 0``; only the velocity coordinates in ``free`` (bool, nv)
    move (all when None).  Returns ``(q, v, max residual before
    projecting)``."""
    hol = sys._holonomic_mask()
    g, A, _ = sys._rows_batch(q)
    before = float(np.abs(g).max()) if g.size else 0.0
    nv = sys.model.nv
    free = np.ones(nv, dtype=bool) if free is None else free
    for _ in range(max_iter):
        if not g.size or np.abs(g).max() <= tol:
            break
        dq = np.zeros((q.shape[0], nv))
        dq[:, free] = -np.einsum("nij,nj->ni", np.linalg.pinv(A[:, hol][:, :, free], rcond=1e-10), g)
        q = sys.model.integrate(q, dq)
        g, A, _ = sys._rows_batch(q)
    if A.shape[1]:
        v = v.copy()
        v[:, free] -= np.einsum("nij,nj->ni", np.linalg.pinv(A[:, :, free], rcond=1e-10),
                                np.einsum("nij,nj->ni", A, v))
    return q, v, before


# ---------------------------------------------------------------------------
# output: memory or a Zarr store
# ---------------------------------------------------------------------------
class _Recorder:
    def __init__(self, S, T, nc, out, meta, chunk):
        self.S, self.T, self.out = S, T, out
        N, m = S.N, S.model
        shapes = {"q": (N, T, m.nq), "dq": (N, T, m.nv)}
        if nc is not None:
            shapes["lam"] = (N, T, nc)
        if S.prescribed is not None:
            shapes["tau"] = (N, T, m.nv)
        self.k = 0
        if out is None:
            self.arrays = {k: np.empty(s) for k, s in shapes.items()}
            self.t = np.empty(T)
            self.buf = None
            return
        try:
            import zarr
        except ImportError:
            raise ImportError("out= needs zarr: pip install 'gear[campaign]'") from None
        self.zarr = zarr
        # claim_store (in simulate) has checked the path and removed an earlier
        # gear store where mode="w" allowed it: "w-" never deletes anything
        root = zarr.open_group(str(out), mode="w-")
        root.attrs.update(meta)
        root.attrs["gear_store"] = {"format": STORE_FORMAT, "arrays": ["t"] + list(shapes)}
        lead = () if S.single else (N,)
        self.chunk = chunk
        self.zt = root.create_array("t", shape=(T,), chunks=(min(T, 4096),), dtype="f8")
        self.za = {k: root.create_array(k, shape=lead + (T, s[2]), chunks=lead + (min(T, chunk), s[2]),
                                        dtype="f8") for k, s in shapes.items()}
        self.buf = {k: np.empty((N, chunk, s[2])) for k, s in shapes.items()}
        self.tbuf = np.empty(chunk)
        self.nbuf = 0
        self.root = root

    def record(self, t, q, v, lam, tau=None):
        vals = {"q": q, "dq": v, "lam": lam, "tau": tau}
        if self.buf is None:
            self.t[self.k] = t
            for key, arr in self.arrays.items():
                arr[:, self.k] = vals[key]
        else:
            for key, arr in self.buf.items():
                arr[:, self.nbuf] = vals[key]
            self.tbuf[self.nbuf] = t
            self.nbuf += 1
        self.k += 1
        if self.buf is not None and self.nbuf == self.chunk:
            self.flush()

    def flush(self):
        if self.buf is None or self.nbuf == 0:
            return
        a, b = self.k - self.nbuf, self.k
        self.zt[a:b] = self.tbuf[:self.nbuf]
        for key, arr in self.za.items():
            block = self.buf[key][:, :self.nbuf]
            if self.S.single:
                arr[a:b] = block[0]
            else:
                arr[:, a:b] = block
        self.nbuf = 0

    def result(self, stats):
        if self.buf is None:
            pick = (lambda x: x[0]) if self.S.single else (lambda x: x)
            tr = Trajectory(self.t, pick(self.arrays["q"]), pick(self.arrays["dq"]),
                            pick(self.arrays["lam"]) if "lam" in self.arrays else None, stats)
            if "tau" in self.arrays:
                tr.tau = pick(self.arrays["tau"])
            return tr
        self.flush()
        self.root.attrs["stats"] = {k: v for k, v in stats.items() if isinstance(v, (int, float, str))}
        tr = Trajectory(self.zt, self.za["q"], self.za["dq"], self.za.get("lam"), stats)
        if "tau" in self.za:
            tr.tau = self.za["tau"]
        return tr


# ---------------------------------------------------------------------------
# the native rollout loop (gear/algorithms/_rollout.pxd)
# ---------------------------------------------------------------------------
def _native_plan(S, integrator, native):
    """The arguments of ``_core.rollout`` when the whole loop can run
    natively, else None (the loop then runs in Python over the batched
    kernels).  Native: euler/rk4 (and rkmk4 on vector-space joints, where
    it is rk4), torques None, an array, or a gear.controllers PD /
    GravityCompensation / ComputedTorque with a SampledReference (trees),
    no f_ext; closed chains with the kkt, projection, soft or (built with
    CHOLMOD) maximal solver on LoopClosure/coupler rows and projection or
    no stabilisation."""
    from . import controllers
    from .joints import FREE, SPHERICAL

    if not native:
        return None
    m = S.model
    lie = any(j.kind in (SPHERICAL, FREE) for j in m.joints)
    if integrator == "rkmk4" and lie:
        return None
    if integrator not in ("euler", "rk4", "rkmk4") or S.f_ext is not None:
        return None
    plan = dict(integrator=0 if integrator == "euler" else 1, tau=None, kp=None, kd=None,
                q_target=None, dq_target=None, gravity_comp=0, cd=None, route=0, project=0,
                ref=None, ref_t0=0.0, ref_dt=1.0, ckp=None, ckd=None)
    tau = S.tau
    if isinstance(tau, controllers.GravityCompensation) and tau.model is m:
        plan["gravity_comp"] = 1
    elif isinstance(tau, controllers.PD) and tau.model is m and not lie:
        plan.update(kp=tau.kp, kd=tau.kd, q_target=tau.q_target, dq_target=tau.dq_target,
                    gravity_comp=int(tau.gravity_compensation))
    elif (isinstance(tau, controllers.ComputedTorque) and tau.model is m and not lie
          and isinstance(tau.reference, controllers.SampledReference)
          and (S.sys is None or not S.sys.nc)):
        ref = tau.reference
        plan.update(ref=ref.samples, ref_t0=ref.t0, ref_dt=ref.dt, ckp=tau.kp, ckd=tau.kd)
    elif callable(tau):
        return None
    else:
        plan["tau"] = tau
    if S.sys is not None and S.sys.nc:
        from .solvers.kkt import KKTSolver
        from .solvers.maximal import MaximalSolver
        from .solvers.projection import ProjectionSolver
        from .solvers.soft import SoftSolver

        solver = S.sys.solver
        # exactly the built-in kkt, projection, soft and maximal solvers (a
        # subclass may change the answer), whose kernels run in the loop
        if (type(solver) not in (KKTSolver, ProjectionSolver, SoftSolver, MaximalSolver)
                or S.stabilization not in ("projection", None)):
            return None
        nd = solver._native_data()
        if nd is None:
            return None
        plan.update(cd=nd, route=solver._route, project=int(S.stabilization == "projection"))
    return plan


def _run_native(S, plan, q, v, steps, dt, last_dt, record_every, nthreads, first=True, k0=0):
    """One native segment: ``steps`` steps from (q, v); returns the recorded
    frames (N, T, .) and the largest pre-projection residual per state."""
    from . import _core
    from .algorithms.dynamics import SingularInertiaError, _check_status

    m = S.model
    T = len(range(0, steps + 1, record_every)) + (0 if steps % record_every == 0 else 1)
    N = q.shape[0]
    nc = 0 if plan["cd"] is None else S.sys.nc
    Q, V = np.empty((N, T, m.nq)), np.empty((N, T, m.nv))
    L = np.empty((N, T, nc)) if plan["cd"] is not None else None
    tmax = np.zeros(N)
    status = np.zeros(N, dtype=np.int32)
    _core.rollout(m.data, plan["cd"], q, v, plan["tau"], plan["integrator"], steps, dt, last_dt,
                  record_every, plan["route"], plan["project"], 1e-12, plan["kp"], plan["kd"],
                  plan["q_target"], plan["dq_target"], plan["gravity_comp"], Q, V, L, tmax, status,
                  nthreads, int(first), int(k0), plan["ref"], plan["ref_t0"], plan["ref_dt"],
                  plan["ckp"], plan["ckd"])
    bad = np.flatnonzero(status)
    if bad.size:
        st, k = int(status[bad[0]]), int(bad[0])
        which = "" if S.single else f" of rollout {k} (of {S.N})"
        span = f"between t = {k0 * dt:g} and t = {k0 * dt + (steps - 1) * dt + last_dt:g}"
        if st == -12:
            # the maximal kernel met a non-zero entry its K pattern left out:
            # re-plan with every entry and run the segment again
            plan["cd"] = S.sys.solver._replan()
            return _run_native(S, plan, q, v, steps, dt, last_dt, record_every, nthreads, first, k0)
        if st in (-11, -13):
            S.sys.solver._native_status(st, k, None, None)
        if st == -5 or not (np.isfinite(Q[k]).all() and np.isfinite(V[k]).all()):
            raise FloatingPointError(f"the state{which} became non-finite {span}; reduce dt, or use "
                                     "integrator='implicit' for stiff systems")
        if st > 0:
            # a singular articulated inertia mid-rollout on a model whose
            # inertias are fine at the segment's start: the state blew up
            from .algorithms.dynamics import forward_dynamics

            try:
                forward_dynamics(m, q[k], np.zeros(m.nv), np.zeros(m.nv))
            except (SingularInertiaError, ValueError):
                pass
            else:
                raise FloatingPointError(f"the state{which} became non-finite {span}; reduce dt, or use "
                                         "integrator='implicit' for stiff systems")
        _check_status(m, np.maximum(status, 0))     # a singular articulated inertia
        if st == -4:
            raise SingularInertiaError(f"the mass matrix{which} is not positive definite {span}")
        raise ValueError(f"the native rollout{which} failed with status {st} {span}: a distance "
                         "closure whose two points coincide?")
    return Q, V, L, tmax


def _stats(S, integrator, n, dt, wall, evaluations, max_res, native):
    stats = {"steps": n, "wall_time": wall, "evaluations": evaluations, "integrator": integrator,
             "dt": dt, "batch": S.N, "state_steps_per_s": n * S.N / max(wall, 1e-12), "native": native}
    if S.sys is not None:
        stats["solver"] = S.sys.solver.name
        stats["solver_counters"] = dict(S.sys.solver.counters)
        stats["max_residual"] = max_res
        stats["stabilization"] = str(S.stabilization)
    return stats


# ---------------------------------------------------------------------------
def simulate(model_or_sys, q0, dq0, t_final, dt, integrator="rk4", tau=None, f_ext=None,
             stabilization="projection", record_every=1, progress=None, out=None, client=None,
             baumgarte_gains=None, chunk=256, native=True, prescribed=None, rtol=1e-10, atol=1e-12,
             mode=None):
    """Integrate the equations of motion from ``(q0, dq0)`` to ``t_final``.

    Parameters
    ----------
    model_or_sys : gear.Model or gear.ConstrainedModel
        An open tree, or a closed-loop system (its solver computes the
        accelerations).
    q0 : array_like, shape (nq,) or (N, nq)
    dq0 : array_like, shape (nv,) or (N, nv)
        A single ``dq0`` is used for every state of a batch.
    t_final, dt : float
        ``dt > 0``.  The last step is shortened when ``t_final`` is not a
        multiple of ``dt``.
    integrator : {"euler", "rk4", "rkmk4", "implicit", "dop853", "rk45"}
        See :mod:`gear.simulation`.  ``"dop853"``/``"rk45"`` are adaptive
        (``scipy.integrate.solve_ivp`` within each output step ``dt``, on
        the exact quaternion rates of spherical and free joints),
        with tolerances ``rtol``/``atol``; their step sizes are chosen for
        the batch as a whole.
    tau : None, array_like (nv,) or (N, nv), or callable
        Joint torques; a callable ``tau(t, q, dq)`` is evaluated at every
        stage (batched runs pass ``(N, nq)``/``(N, nv)`` arrays and expect
        ``(N, nv)`` or ``(nv,)``).  The controllers of
        :mod:`gear.controllers` are such callables.
    f_ext : None, array_like (nbodies, 6) or (N, nbodies, 6), or callable
        External body wrenches, like ``tau``.
    stabilization : {"projection", "baumgarte", None}
        Closed loops only (ignored for a tree).
    record_every : int
        Record every k-th step (the initial and final states always).
    progress : bool, optional
        Show a tqdm progress bar (steps, states per second).  Default:
        only when standard error is a terminal.
    out : str or path, optional
        Stream the trajectory to this Zarr store (arrays ``t``, ``q``,
        ``dq``, ``lam``; attributes: ``model_hash``, ``integrator``, ``dt``,
        ``gear_version``...) in chunks of ``chunk`` recorded frames instead
        of holding it in memory; the returned arrays are the store's.
        A local path or a URL Zarr opens through fsspec.  The path is
        checked before any work: it must not exist, or be an empty
        directory, or (with ``mode="w"``) a gear store from an earlier
        run.  Anything else raises :class:`FileExistsError`, whatever
        ``mode`` is: gear never deletes what it did not write.
    mode : {None, "w"}
        ``"w"``: overwrite an earlier gear store at ``out`` (only the
        arrays gear wrote there are removed).  Default: an existing store
        raises :class:`FileExistsError`.
    client : dask.distributed.Client, optional
        Spread a batch over the client's workers (see
        :func:`gear.campaign.simulate_distributed`); results are identical
        to the local run.
    baumgarte_gains : (float, float), optional
        ``(alpha, beta)`` of ``stabilization="baumgarte"``; default
        ``(1/(5 dt), 1/(5 dt))``.
    prescribed : dict, optional
        ``{joint name: motion}`` with ``motion(t) -> (q, dq, ddq)``: drive
        these (vector-space) joints along a prescribed motion through
        hybrid dynamics (Kim Sec. 3.3).  The joints follow the reference
        exactly, the rest of the mechanism (and a closed chain's loops)
        follows, and ``traj.tau`` records the torques: the actuators'
        torques on the prescribed joints, the applied ``tau`` elsewhere.
    native : bool
        Run the whole loop natively (no GIL, parallel over the batch) when
        the configuration allows it: ``euler``/``rk4`` (and ``rkmk4`` on
        vector-space joints), ``tau`` None, an array or a
        :mod:`gear.controllers` PD/GravityCompensation/ComputedTorque (with a
        ``SampledReference``, trees), no ``f_ext``,
        closed chains with the ``kkt``, ``projection`` or ``soft`` solver and projection or no
        stabilisation.  ``stats["native"]`` says which loop ran.

    Returns
    -------
    Trajectory
        ``.t``, ``.q``, ``.dq``, ``.lam`` (constrained models), ``.stats``.

    Notes
    -----
    Joint limits (a URDF's ``<limit lower upper>``, an MJCF ``range``)
    are not enforced: they are read with the model and used by
    :meth:`gear.Model.random_configuration`, but no limit force enters the
    dynamics, so a joint can move past them in a rollout.

    Examples
    --------
    >>> import numpy as np, gear
    >>> arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    >>> traj = gear.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.1, 1e-3)
    >>> traj.q.shape, traj.t[-1]
    ((101, 7), 0.1)
    """
    from .constraints import ConstrainedModel
    from .model import Model

    if not isinstance(model_or_sys, (Model, ConstrainedModel)):
        raise TypeError(f"model_or_sys must be a gear.Model or gear.ConstrainedModel, "
                        f"got {type(model_or_sys).__name__}")
    model = model_or_sys.model if isinstance(model_or_sys, ConstrainedModel) else model_or_sys
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r}; choose one of {list(INTEGRATORS)}")
    if stabilization not in _STABILIZATIONS:
        raise ValueError(f"stabilization must be 'projection', 'baumgarte' or None, got {stabilization!r}")
    t_final = check_scalar("t_final", t_final)
    dt = check_scalar("dt", dt)
    if dt <= 0.0:
        raise ValueError(f"dt must be positive, got {dt}")
    if t_final <= 0.0:
        raise ValueError(f"t_final must be positive, got {t_final}")
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise ValueError(f"record_every must be a positive integer, got {record_every!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    q, is_batch = as_batch("q0", q0, (model.nq,))
    single = not is_batch
    model.check_configuration(q, "q0")
    N = q.shape[0]
    v, vb = as_batch("dq0", dq0, (model.nv,))
    if vb and v.shape[0] != N:
        raise ValueError(f"dq0 has {v.shape[0]} states but q0 has {N}")
    v = np.array(np.broadcast_to(v, (N, model.nv)), dtype=float, order="C")
    q = np.array(q, dtype=float, order="C")
    if out is not None:
        try:
            import zarr  # noqa: F401
        except ImportError:
            raise ImportError("out= needs zarr: pip install 'gear[campaign]'") from None
        out = claim_store(out, mode)
    elif mode is not None:
        raise ValueError("mode= applies to an out= store; give out= too, or leave mode=None")
    if client is not None:
        from .campaign import simulate_distributed

        return simulate_distributed(client, model_or_sys, q if not single else q[0],
                                    v if not single else v[0], t_final, dt, integrator=integrator,
                                    tau=tau, f_ext=f_ext, stabilization=stabilization,
                                    record_every=record_every, progress=progress, out=out, mode=mode,
                                    baumgarte_gains=baumgarte_gains, chunk=chunk)
    if baumgarte_gains is None:
        baumgarte_gains = (1.0 / (5.0 * dt), 1.0 / (5.0 * dt))
    else:
        baumgarte_gains = tuple(check_scalar("baumgarte_gains", g) for g in baumgarte_gains)
        if len(baumgarte_gains) != 2 or min(baumgarte_gains) < 0:
            raise ValueError("baumgarte_gains must be two non-negative numbers (alpha, beta)")
    if prescribed is not None and integrator == "implicit":
        raise ValueError("prescribed motions are not supported with integrator='implicit'")
    S = _System(model_or_sys, tau, f_ext, N, single, stabilization, baumgarte_gains, prescribed)
    n = max(1, int(np.ceil(t_final / dt - 1e-9)))
    rec_steps = sorted(set(range(0, n + 1, record_every)) | {n})
    T = len(rec_steps)
    nc = S.sys.nc if S.sys is not None else None
    from . import __version__

    meta = {"model_hash": model_hash(model), "integrator": integrator, "dt": dt, "t_final": t_final,
            "steps": n, "record_every": int(record_every), "batch": N, "gear_version": __version__,
            "stabilization": str(S.stabilization), "solver": S.sys.solver.name if S.sys is not None else "",
            "nq": model.nq, "nv": model.nv}
    rec = _Recorder(S, T, nc, out, meta, int(chunk))
    bar = progress_bar(progress, total=n, unit="step", desc=f"gear.simulate {integrator} x{N}")
    max_res = 0.0
    plan = _native_plan(S, integrator, native and S.prescribed is None)
    if plan is not None:
        from .algorithms.dynamics import get_num_threads

        wall = time.perf_counter()
        seg = max(1, int(chunk)) * int(record_every)          # steps per native call
        k0 = 0
        try:
            while True:
                steps = min(seg, n - k0)
                last = dt if k0 + steps < n else t_final - (n - 1) * dt
                Q, V, L, tmax = _run_native(S, plan, q, v, steps, dt, last, int(record_every),
                                            get_num_threads(), first=k0 == 0, k0=k0)
                max_res = max(max_res, float(tmax.max()) if tmax.size else 0.0)
                for j in range(0 if k0 == 0 else 1, Q.shape[1]):
                    kk = min(k0 + j * int(record_every), n)
                    tt = t_final if kk == n else kk * dt
                    rec.record(tt, Q[:, j], V[:, j], None if L is None else L[:, j])
                q = np.ascontiguousarray(Q[:, -1])
                v = np.ascontiguousarray(V[:, -1])
                k0 += steps
                bar.update(steps)
                el = time.perf_counter() - wall
                bar.set_postfix_str(f"{k0 * N / max(el, 1e-9):,.0f} state-steps/s")
                if k0 >= n:
                    break
        finally:
            bar.close()
        return rec.result(_stats(S, integrator, n, dt, time.perf_counter() - wall, None, max_res, True))
    if S.prescribed is not None:
        q, v = S.impose(0.0, q, v)
    if S.stabilization == "projection":
        q, v, _ = _project(S.sys, q, v, free=S.free_dofs())
    step = {"euler": _step_euler, "implicit": _step_implicit,
            "dop853": lambda S_, t_, q_, v_, h_, a_: _step_adaptive(S_, t_, q_, v_, h_, a_, "DOP853", rtol, atol),
            "rk45": lambda S_, t_, q_, v_, h_, a_: _step_adaptive(S_, t_, q_, v_, h_, a_, "RK45", rtol, atol),
            "rk4": lambda S_, t_, q_, v_, h_, a_: _step_rk(S_, t_, q_, v_, h_, a_, False),
            "rkmk4": lambda S_, t_, q_, v_, h_, a_: _step_rk(S_, t_, q_, v_, h_, a_, True)}[integrator]
    wall = time.perf_counter()
    t = 0.0
    next_rec = 0
    a0 = None
    try:
        for k in range(n + 1):
            if k == rec_steps[next_rec]:
                if (nc is not None or S.prescribed is not None) and a0 is None and integrator != "implicit":
                    a0 = S.accel(t, q, v)
                lam = a0[1] if a0 is not None else None
                if nc is not None and lam is None:
                    lam = S.accel(t, q, v)[1]
                rec.record(t, q, v, lam, None if S.prescribed is None else S.last_tau.copy())
                next_rec += 1
            if k == n:
                break
            h = dt if k < n - 1 else t_final - (n - 1) * dt
            try:
                q, v, _ = step(S, t, q, v, h, a0 if integrator != "implicit" else None)
            except ValueError as exc:
                if "non-finite" not in str(exc):
                    raise
                raise FloatingPointError(
                    f"the state became non-finite in step {k + 1} (t = {t:g}); reduce dt, or "
                    "use integrator='implicit' for stiff systems") from None
            a0 = None
            t = t_final if k == n - 1 else (k + 1) * dt
            if S.prescribed is not None:
                q, v = S.impose(t, q, v)
            if S.stabilization == "projection":
                q, v, r = _project(S.sys, q, v, free=S.free_dofs())
                max_res = max(max_res, r)
            elif S.sys is not None and S.sys.nc:
                g = S.sys._rows_batch(q)[0]
                max_res = max(max_res, float(np.abs(g).max()) if g.size else 0.0)
            if not (np.isfinite(q).all() and np.isfinite(v).all()):
                raise FloatingPointError(f"the state became non-finite at t = {t:g} (step {k + 1}); "
                                         "reduce dt or use integrator='implicit' for stiff systems")
            bar.update(1)
            if (k & 63) == 0:
                el = time.perf_counter() - wall
                bar.set_postfix_str(f"{(k + 1) * N / max(el, 1e-9):,.0f} state-steps/s")
    finally:
        bar.close()
    return rec.result(_stats(S, integrator, n, dt, time.perf_counter() - wall, S.evaluations, max_res, False))

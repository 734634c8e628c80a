"""The rollout loop of a :class:`gear.MaximalModel`: body poses and twists
advanced by :func:`gear.maximal.stepping.step`, recorded with their joint
coordinates read back (:meth:`gear.MaximalModel.to_reduced`) and the
largest row violation of every frame.
"""
from __future__ import annotations

import time

import numpy as np

from .._progress import progress_bar
from ..maximal import stepping
from .recorder import Trajectory
from .rollout import steps_and_frames

__all__ = ["run_maximal"]


def _angle_coordinates(model):
    """Mask of the configuration coordinates that are angles."""
    from .. import joints as JT

    mask = np.zeros(model.nq, dtype=bool)
    for i, j in enumerate(model.joints):
        a = model._iq[i]
        if j.kind in (JT.REVOLUTE, JT.HELICAL, JT.CYLINDRICAL):
            mask[a] = True
        elif j.kind == JT.UNIVERSAL:
            mask[a:a + 2] = True
        elif j.kind == JT.PLANAR:
            mask[a + 2] = True
    return mask


def _inputs(mx, N, tau, f_ext):
    def one(name, x, shape):
        if x is None:
            return None
        if callable(x):
            raise TypeError(f"{name}: a maximal-coordinate run takes a constant array (shape {shape} or "
                            f"(N, {', '.join(map(str, shape))})), not a callable")
        a = np.asarray(x, dtype=float)
        if a.shape == shape:
            a = np.broadcast_to(a, (N,) + shape)
        if a.shape != (N,) + shape:
            raise ValueError(f"{name} must have shape {shape} or ({N}, {', '.join(map(str, shape))}), "
                             f"got shape {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError(f"{name} contains non-finite values (NaN or inf)")
        return np.ascontiguousarray(a)
    return one("tau", tau, (mx.model.nv,)), one("f_ext", f_ext, (mx.nbodies, 6))


def run_maximal(mx, q0, dq0, t_final, dt, integrator="euler", tau=None, f_ext=None,
                stabilization="projection", record_every=1, progress=None, baumgarte_gains=None,
                poses0=None, twists0=None, beta=None):
    """Simulate a :class:`gear.MaximalModel` (see :func:`gear.simulate`).

    Returns
    -------
    Trajectory
        ``t``, ``q``, ``dq`` (read back with ``to_reduced``), ``lam``
        (row forces), ``poses`` (T, nb, 4, 4) / (N, T, nb, 4, 4),
        ``twists``, ``joint_error`` (T,) / (N, T): the largest ``|g|``
        of every frame, and ``stats`` (``max_joint_error``...).
    """
    if not dt > 0.0 or not t_final > 0.0:
        raise ValueError(f"dt and t_final must be positive, got dt = {dt}, t_final = {t_final}")
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise ValueError(f"record_every must be a positive integer, got {record_every!r}")
    if integrator not in stepping.INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r} for a MaximalModel; choose one of "
                         f"{list(stepping.INTEGRATORS)}")
    if stabilization not in stepping.STABILIZATIONS:
        raise ValueError(f"stabilization must be 'projection', 'baumgarte' or None, got {stabilization!r}")
    if poses0 is not None:
        P, V, _, _, single = mx._check_poses(poses0, twists0 if twists0 is not None
                                             else np.zeros(np.shape(poses0)[:-2] + (6,)))
        P, V = P.copy(), V.copy()
    else:
        if q0 is None:
            raise TypeError("give q0 (and dq0), or poses0= (and twists0=)")
        q = np.asarray(q0, dtype=float)
        single = q.ndim == 1
        mx.model.check_configuration(q, "q0")
        dq = np.zeros(mx.model.nv) if dq0 is None else np.asarray(dq0, dtype=float)
        if single and dq.ndim == 2:
            raise ValueError("dq0 is a batch but q0 is one state")
        qb = q[None] if single else q
        dqb = np.broadcast_to(dq, (qb.shape[0], mx.model.nv))
        P, V = mx.state(qb, dqb)
        P, V = np.ascontiguousarray(P), np.ascontiguousarray(V)
    N = P.shape[0]
    tau, f_ext = _inputs(mx, N, tau, f_ext)
    if integrator in ("euler", "implicit") and baumgarte_gains is not None:
        # velocity level: one factor beta (J V+ = -(beta / dt) g)
        if np.ndim(baumgarte_gains) != 0 or not 0.0 < float(baumgarte_gains) <= 1.0:
            raise ValueError("baumgarte_gains of a velocity-level maximal run (euler, implicit) is one number "
                             f"beta in (0, 1], got {baumgarte_gains!r}")
        beta, baumgarte_gains = float(baumgarte_gains), None
    stab = None if mx.compliant else stabilization
    n, rec_steps = steps_and_frames(t_final, dt, record_every)
    T = len(rec_steps)
    nb = mx.nbodies
    out = dict(P=np.empty((N, T, nb, 4, 4)), V=np.empty((N, T, nb, 6)), lam=np.zeros((N, T, mx.nrows)),
               err=np.empty((N, T)))
    tt = np.empty(T)
    if stab == "projection":
        P, V, _ = stepping.project(mx, P, V)
    bar = progress_bar(progress, total=n, unit="step", desc=f"gear.simulate maximal {integrator} x{N}")
    wall = time.perf_counter()
    max_err, k_rec, t = 0.0, 0, 0.0
    lam = None
    try:
        for k in range(n + 1):
            if k == rec_steps[k_rec]:
                err = np.abs(mx.joint_residual(P)).max(axis=-1, initial=0.0)
                max_err = max(max_err, float(err.max()))
                out["P"][:, k_rec], out["V"][:, k_rec], out["err"][:, k_rec] = P, V, err
                if lam is not None:
                    out["lam"][:, k_rec] = lam
                tt[k_rec] = t
                k_rec += 1
            if k == n:
                break
            h = dt if k < n - 1 else t_final - (n - 1) * dt
            # a state that blows up is reported below, as one error
            with np.errstate(over="ignore", invalid="ignore"):
                P, V, lam = stepping.step(mx, P, V, h, integrator, tau, f_ext, stab,
                                          beta, baumgarte_gains)
            if stab == "projection" and np.isfinite(P).all():
                P, V, _ = stepping.project(mx, P, V)
            if not (np.isfinite(P).all() and np.isfinite(V).all()):
                raise FloatingPointError(f"the maximal-coordinate state became non-finite in step {k + 1} "
                                         f"(t = {t:g}); reduce dt, or use integrator='implicit' for stiff "
                                         "compliant rows")
            t = t_final if k == n - 1 else (k + 1) * dt
            bar.update(1)
    finally:
        bar.close()
    wall = time.perf_counter() - wall
    q, dq = mx.to_reduced(out["P"].reshape((N * T, nb, 4, 4)), out["V"].reshape((N * T, nb, 6)))
    q, dq = q.reshape(N, T, -1), dq.reshape(N, T, -1)
    # angles read back lie in (-pi, pi]: continue them along the run, from q0's turn
    ang = _angle_coordinates(mx.model)
    if ang.any():
        q[:, :, ang] = np.unwrap(q[:, :, ang], axis=1)
        if poses0 is None:
            q0b = np.broadcast_to(np.asarray(q0, dtype=float), (N, mx.model.nq))
            q[:, :, ang] += 2.0 * np.pi * np.round((q0b[:, ang] - q[:, 0, ang]) / (2.0 * np.pi))[:, None, :]
    pick = (lambda x: x[0]) if single else (lambda x: x)
    stats = {"steps": n, "wall_time": wall, "integrator": integrator, "dt": dt, "batch": N,
             "state_steps_per_s": n * N / max(wall, 1e-12), "formulation": "maximal",
             "stabilization": str(stab), "max_joint_error": max_err, "native": False,
             "compliant": mx.compliant}
    tr = Trajectory(tt, pick(q), pick(dq), pick(out["lam"]), stats)
    tr.poses, tr.twists, tr.joint_error = pick(out["P"]), pick(out["V"]), pick(out["err"])
    return tr

"""The native maximal steps (the kernel is ``gear/maximal/_native.pyx``, in
the instruction set's build ``gear._core`` chose):
the velocity-level Euler step (Ruan, "Articulated rigid body systems",
eq. 12), its linearly implicit form for compliant rows (eq. 14), and the
acceleration-level Runge-Kutta steps (``"rk4"`` on the pose matrices,
``"rkmk4"`` Munthe-Kaas).

:func:`native_step` has the contract of :func:`gear.maximal.stepping.step`
for those integrators and runs the batch in parallel without the GIL;
:func:`step` takes every integrator and uses the native kernel where it
covers the call, NumPy otherwise; :func:`native_run` advances a batch
through many steps in one native call, recording every k-th frame.

The kernel covers hard and compliant rows of all five row types (pos,
axis, dot, dist, helix: every joint kind and loop closure) and joint
couplers (two parts of ``J`` a row, :func:`_coupler_plan`), with joint
torques on every joint kind: ``K`` dense up to
:data:`gear.maximal.kkt.DENSE_ROWS` rows, sparse above (its pattern, order
and factor planned once here), or the tree-ordered solve.  Outside its
integrators :func:`native_step` returns None (:func:`why_not` says why).
:func:`native_project` (and :func:`project`, with the NumPy fallback) is
the Gauss-Newton projection of :func:`gear.maximal.stepping.project`.
"""
from __future__ import annotations

import numpy as np

from .. import _core
from .. import joints as JT
from ..algorithms.dynamics import get_num_threads
from . import stepping
from .kkt import DENSE_ROWS

#: the kernel: ``gear/maximal/_native.pyx`` in the build gear._core chose
#: (generic, x86-64-v3 or x86-64-v4; ``gear.show_config()``)
_native = _core.area("maximal._native")

__all__ = ["use_route", "native_step", "native_accel", "native_project", "native_run", "step", "project", "plan", "why_not", "build"]


ROUTES = ("auto", "tree", "schur")


def build(mx, route="auto"):
    """``(plan, reason, gravity)`` for ``mx``: the kernel's frozen arrays,
    or None and the reason when the model is outside what the kernel
    covers, and the gravity they were built with.

    ``route``: how the kernel solves hard rows -- ``"schur"``: the
    factorisation of ``K = J M^-1 J^T`` (dense up to
    :data:`gear.maximal.kkt.DENSE_ROWS` rows, sparse above); ``"tree"``:
    the tree-ordered factorisation (``gear/maximal/_tree_step.pxd``,
    :func:`gear.maximal.tree.step_tree_plan`); ``"auto"``: the tree
    wherever the model has rows (see docs/maximal.md for the measurements
    behind it).  Compliant rows always take ``"schur"``."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    g = tuple(np.asarray(mx.model.gravity, dtype=float))
    m, t, nb = mx.model, mx.rows, mx.nbodies
    # joint torques: S (6 x nv_i, column-major) where constant, else the
    # placement's rotation and the axes S is built from
    nvb = np.array([j.nv for j in m.joints], dtype=np.int32)
    iv = np.array([m._iv[i] for i in range(nb)], dtype=np.int32)
    vary = np.zeros(nb, dtype=np.int32)
    S, RPl, axes = np.zeros((nb, 36)), np.zeros((nb, 9)), np.zeros((nb, 9))
    for i, j in enumerate(m.joints):
        RPl[i] = m.placements[i].R.ravel()
        if j.kind == JT.UNIVERSAL:
            vary[i] = 1
            axes[i, :6] = np.concatenate([j.axis1, j.axis2])
        elif j.kind == JT.PLANAR:
            vary[i] = 2
            axes[i] = np.concatenate([j.e1, j.e2, j.normal])
        Si = mx._S[i](np.eye(3)[None])[0] if j.nv else np.zeros((6, 0))   # R_Y = 1 for the varying ones
        S[i, :Si.size] = Si.T.ravel()
    couplers = _coupler_plan(mx)
    ia, ib, row = np.asarray(t.ia), np.asarray(t.ib), np.arange(t.m)
    if couplers is not None:
        ia, ib = np.concatenate([ia, couplers["bodies"][:, 0]]), np.concatenate([ib, couplers["bodies"][:, 1]])
        row = np.concatenate([row, t.m + np.arange(len(couplers["mul"])).repeat(2)])
    sparse = _sparse_plan(nb, ia, ib, row) if mx.nrows > DENSE_ROWS else None
    tree = None
    if route != "schur" and mx.stiffness is None and mx.nrows:
        from .tree import step_tree_plan

        tree = step_tree_plan(t, mx.I6, None if couplers is None else couplers["bodies"])[0]
    p = _native.Plan(mx.I6, mx.Minv, mx._parents, m.gravity, t.types, t.ia, t.ib, t.i, t.j, t.RA, t.pA, t.RB, t.pB,
                     t.offset, t.pitch, nvb, iv, vary, S, RPl, axes, sparse, mx.stiffness, mx.damping, tree,
                     couplers)
    return p, None, g


def _coupler_plan(mx):
    """The kernel's arrays of ``mx``'s joint couplers, or None: each coupler
    row is two parts of ``J``, one per joint (the coupled joint's, then
    its source's), each on the joint's child and parent bodies (``bodies``
    (2 nc, 2), -1: the world), with the joint's kind (``gear.joints``:
    revolute, prismatic or helical), ``S^T`` (the coordinate's rate ``s^T eta``),
    axis, pitch and inverse placement (as :meth:`MaximalModel._coupler`
    reads them); ``mul``, ``off`` (nc,) the couplers' ``q_j = mul q_s +
    off``."""
    cs = getattr(mx, "_couplers", None)
    if not cs:
        return None
    par = mx._parents
    out = {k: [] for k in ("bodies", "kind", "S", "axis", "pitch", "Pl", "mul", "off")}
    for sides, mult, off in cs:
        for i, jt, St in sides:
            H = mx.model.placements[i].homogeneous()
            out["bodies"].append((i, par[i]))
            out["kind"].append(jt.kind)
            out["S"].append(St)
            out["axis"].append(jt.axis)
            out["pitch"].append(getattr(jt, "pitch", 0.0))
            out["Pl"].append(np.concatenate([H[:3, :3].T.ravel(), -H[:3, :3].T @ H[:3, 3]]))
        out["mul"].append(mult)
        out["off"].append(off)
    return {k: np.asarray(v) for k, v in out.items()}


def use_route(mx, route):
    """Rebuild ``mx``'s native plan with ``route`` (:func:`build`) and
    return it; the plan's ``route`` says which one it took."""
    mx._native = build(mx, route)
    return mx._native[0]


def _sparse_plan(nb, ia, ib, row):
    """``K``'s sparse plan for more rows than the dense route takes: ``K``'s
    pattern (two rows meet when they share a body), its fill-reducing
    order and factor (``gear.constraints.sparse.factor_pattern``), and
    for each pair of segments (a part's 6-block on one body) that meet on
    a body, body by body: the offsets of the first's ``F`` and the second's
    ``G`` in the kernel's (parts, 12) arrays, the first's part (its type
    says whether ``F`` has a linear part) and where their product lands
    among the factor's values.  ``ia``, ``ib``: the parts' bodies (a
    geometric row is one part, a joint coupler two), ``row``: each part's
    row.  Two parts of one row meeting on a body add their product to the
    row's diagonal twice (``F_a . G_b`` and ``F_b . G_a``): the pair is
    listed both ways."""
    import scipy.sparse as sps

    from ..constraints.sparse import factor_pattern, factor_positions

    mp, m = len(ia), int(row.max(initial=-1)) + 1
    seg_body = np.concatenate([ia, ib])
    seg_row = np.concatenate([np.arange(mp), np.arange(mp)])
    seg_side = np.concatenate([np.zeros(mp, dtype=np.int64), np.ones(mp, dtype=np.int64)])
    keep = seg_body >= 0
    order = np.lexsort((seg_row[keep], seg_body[keep]))
    body, part, side = seg_body[keep][order], seg_row[keep][order], seg_side[keep][order]
    row_of = row[part]
    bptr = np.searchsorted(body, np.arange(nb + 1))
    # every pair i <= j of one body's segments, in the kernel's loop order
    pi, pj = [], []
    for b in range(nb):
        lo, hi = bptr[b], bptr[b + 1]
        i, j = np.triu_indices(hi - lo)
        pi.append(lo + i)
        pj.append(lo + j)
    pi = np.concatenate(pi) if pi else np.zeros(0, dtype=np.int64)
    pj = np.concatenate(pj) if pj else np.zeros(0, dtype=np.int64)
    both = (part[pi] != part[pj]) & (row_of[pi] == row_of[pj])
    pi, pj = np.concatenate([pi, pj[both]]), np.concatenate([pj, pi[both]])
    pattern = sps.coo_matrix((np.ones(len(pi)), (row_of[pi], row_of[pj])), shape=(m, m))
    pinv, sym, key = factor_pattern(pattern)
    dst = factor_positions(key, m, pinv[row_of[pi]], pinv[row_of[pj]])
    off = 12 * part + 6 * side
    return (*sym, pinv, off[pi], off[pj], part[pi], dst)


def plan(mx):
    """The kernel's plan for ``mx`` (:meth:`gear.MaximalModel.native_plan`,
    rebuilt when the model's gravity changed); None when the model is
    outside what the kernel covers (:func:`why_not` says why)."""
    cached = getattr(mx, "_native", None)
    if cached is not None and cached[2] != tuple(np.asarray(mx.model.gravity, dtype=float)):
        mx._native = None
    return mx.native_plan()


#: the integrators of the native kernel and their codes
INTEGRATOR_CODES = {"euler": 0, "rk4": 1, "rkmk4": 2, "implicit": 3}


def why_not(mx, integrator="euler"):
    """None when the native step covers the call, else the reason."""
    if integrator not in INTEGRATOR_CODES:
        return (f"integrator {integrator!r}: the native steps are "
                f"{', '.join(map(repr, INTEGRATOR_CODES))}")
    return None if plan(mx) is not None else mx._native[1]


def _inputs(mx, P, V, tau, f_ext):
    nb = mx.nbodies
    P = np.ascontiguousarray(P, dtype=float)
    V = np.ascontiguousarray(V, dtype=float)
    if P.ndim != 4 or P.shape[1:] != (nb, 4, 4) or V.shape != (P.shape[0], nb, 6):
        raise ValueError(f"P must have shape (N, {nb}, 4, 4) and V (N, {nb}, 6), got {P.shape} and {V.shape}")
    N = P.shape[0]
    tau = None if tau is None or not mx.model.nv else np.ascontiguousarray(
        np.broadcast_to(np.asarray(tau, dtype=float), (N, mx.model.nv)))
    if f_ext is not None:
        f_ext = np.ascontiguousarray(np.broadcast_to(np.asarray(f_ext, dtype=float), (N, nb, 6))).reshape(N, 6 * nb)
    return P.reshape(N, 16 * nb), V.reshape(N, 6 * nb), tau, f_ext


def _gains(h, integrator, stabilization, beta, gains, compliant=False):
    """``(integrator code, gain, ga, gb)`` of the kernel: Euler's velocity-
    level Baumgarte ``gain = beta / h``; Runge-Kutta's acceleration-level
    ``ga = 2 alpha``, ``gb = beta^2`` (as :func:`gear.maximal.stepping.step`)."""
    if not (np.isfinite(h) and h > 0):
        raise ValueError(f"the step h must be positive and finite, got {h!r}")
    if stabilization not in stepping.STABILIZATIONS:
        raise ValueError(f"stabilization must be 'baumgarte', 'projection' or None, got {stabilization!r}")
    if integrator not in INTEGRATOR_CODES:
        raise ValueError(f"the native steps are {list(INTEGRATOR_CODES)}, got {integrator!r}")
    code, gain, ga, gb = INTEGRATOR_CODES[integrator], 0.0, 0.0, 0.0
    if stabilization == "baumgarte" and not compliant:      # (compliant rows are springs)
        if code in (0, 3):
            gain = (stepping.BAUMGARTE_BETA if beta is None else float(beta)) / h
        else:
            alpha, bb = stepping.acceleration_gains(h, gains)
            ga, gb = 2.0 * alpha, bb ** 2
    return code, gain, ga, gb


def native_step(mx, P, V, h, tau=None, f_ext=None, stabilization=None, beta=None, integrator="euler",
                gains=None):
    """One step of a batch, natively: Euler (Ruan's eq. 12), ``"rk4"`` or
    ``"rkmk4"``.

    Parameters and results as :func:`gear.maximal.stepping.step`
    (``beta``: Euler's Baumgarte factor, ``gains``: Runge-Kutta's
    ``(alpha, beta)``): ``P`` (N, nb, 4, 4), ``V`` (N, nb, 6), ``tau``
    (N, nv) or None, ``f_ext`` (N, nb, 6) or None; returns ``(P, V, lam)``
    after the step, or None when the kernel does not cover the call
    (:func:`why_not`), so that the caller takes the NumPy step.
    """
    pl = plan(mx)
    if pl is None or integrator not in INTEGRATOR_CODES:
        return None
    code, gain, ga, gb = _gains(h, integrator, stabilization, beta, gains, mx.compliant)
    Pf, Vf, tau, f_ext = _inputs(mx, P, V, tau, f_ext)
    N, nb = Pf.shape[0], mx.nbodies
    Po, Vo = np.empty((N, nb, 4, 4)), np.empty((N, nb, 6))
    lam = np.empty((N, mx.nrows))
    status = np.empty(N, dtype=np.int32)
    if _native.step(pl, Pf, Vf, float(h), code, gain, ga, gb, tau, f_ext, Po.reshape(N, 16 * nb),
                    Vo.reshape(N, 6 * nb), lam, status, get_num_threads()):
        return None            # a coincident distance row or an indefinite K: NumPy's step says which
    return Po, Vo, lam


def step(mx, P, V, h, integrator, tau=None, f_ext=None, stabilization=None, beta=None, gains=None):
    """:func:`gear.maximal.stepping.step`, natively where the kernel covers
    the call (Euler, rk4, rkmk4; hard rows), NumPy otherwise."""
    out = native_step(mx, P, V, h, tau, f_ext, stabilization, beta, integrator, gains)
    if out is not None:
        return out
    return stepping.step(mx, P, V, h, integrator, tau, f_ext, stabilization, beta, gains)


def native_accel(mx, P, V, tau=None, f_ext=None):
    """Forward dynamics from poses and twists (:meth:`gear.MaximalModel.
    forward_dynamics`), natively: ``(dV, lam, residual)`` for ``P`` (N, nb,
    4, 4), ``V`` (N, nb, 6), or None when the kernel does not cover the
    model (or a state fails: NumPy's solve then says why)."""
    pl = plan(mx)
    if pl is None:
        return None
    Pf, Vf, tau, f_ext = _inputs(mx, P, V, tau, f_ext)
    N, nb = Pf.shape[0], mx.nbodies
    dV, lam = np.empty((N, nb, 6)), np.empty((N, mx.nrows))
    res, status = np.zeros(N), np.zeros(N, dtype=np.int32)
    _native.accel(pl, Pf, Vf, tau, f_ext, dV.reshape(N, 6 * nb), lam, res, status, get_num_threads())
    return None if status.any() else (dV, lam, res)


def native_project(mx, P, V, tol=1e-12, max_iter=10):
    """:func:`gear.maximal.stepping.project` of a batch, natively: the
    poses moved onto the rows by Gauss-Newton (``T <- T exp(-M^{-1} J^T
    K^{-1} g)``, ``J`` and the factor of ``K`` from the start), then the
    twists onto ``J V = 0``.  Returns ``(P, V, residual)`` (the largest
    ``|g|`` before), or None when the kernel does not cover the model."""
    if why_not(mx) is not None:
        return None
    if mx.nrows == 0 or mx.compliant:          # (springs: nothing to project, as NumPy's)
        return P, V, 0.0
    N, nb = np.shape(P)[0], mx.nbodies
    Pf, Vf, _, _ = _inputs(mx, P, V, None, None)
    Po, Vo = np.empty_like(Pf), np.empty_like(Vf)
    before = np.zeros(N)
    status = np.zeros(N, dtype=np.int32)
    _native.project(plan(mx), Pf, Vf, float(tol), int(max_iter), Po, Vo, before, status, get_num_threads())
    if status.any():
        return None
    return Po.reshape(N, nb, 4, 4), Vo.reshape(N, nb, 6), float(before.max(initial=0.0))


def project(mx, P, V, tol=1e-12, max_iter=10):
    """:func:`gear.maximal.stepping.project`, natively where the kernel
    covers the model, NumPy otherwise."""
    out = native_project(mx, P, V, tol, max_iter)
    return out if out is not None else stepping.project(mx, P, V, tol, max_iter)


def native_run(mx, P, V, h, steps, record_every=1, tau=None, f_ext=None, stabilization=None, beta=None,
               integrator="euler", gains=None, joint_error=False, out=None):
    """``steps`` steps of a batch in one native call (Euler, ``"rk4"`` or
    ``"rkmk4"``), every state on its own thread.

    Parameters
    ----------
    mx : gear.MaximalModel
    P, V : ndarray, shape (N, nb, 4, 4) and (N, nb, 6)
    h : float
    steps, record_every : int
        Frames are recorded at steps 0, k, 2k, ... and at the last step.
    tau, f_ext, stabilization, beta, integrator, gains
        As :func:`native_step` (constant over the run); ``"projection"``
        projects the state (:func:`native_project`) at the start and after
        every step, as :func:`gear.simulate` does.
    joint_error : bool
        Also return each frame's joint error.
    out : tuple of ndarray, optional
        ``(poses, twists, lam, joint_error)`` shaped as returned, to record
        into; returned.  Views of larger arrays will do (the kernel writes
        straight into C-contiguous ones, through a copy otherwise).

    Returns
    -------
    poses : ndarray, shape (N, T, nb, 4, 4)
    twists : ndarray, shape (N, T, nb, 6)
    lam : ndarray, shape (N, T, nrows)
        The row forces of the step that led to each frame (at its start
        for Runge-Kutta; zero at step 0).
    joint_error : ndarray, shape (N, T)
        With ``joint_error=True``: each frame's largest row residual
        ``max |g|``, as :meth:`gear.MaximalModel.joint_residual` gives it
        (the rows the next step evaluates at its start anyway; for the
        last frame, evaluated apart).

    Raises
    ------
    NotImplementedError
        When the kernel does not cover the model or call (use
        :func:`gear.simulate`).
    FloatingPointError
        When a state's step fails (coincident distance points, or ``K``
        not positive definite) or its state becomes non-finite.
    """
    reason = why_not(mx, integrator)
    if reason is not None:
        raise NotImplementedError(f"native_run does not cover this call: {reason}")
    steps, every = int(steps), int(record_every)
    if steps < 0 or every < 1:
        raise ValueError(f"steps must be >= 0 and record_every >= 1, got {steps} and {every}")
    code, gain, ga, gb = _gains(h, integrator, stabilization, beta, gains, mx.compliant)
    N, nb = np.shape(P)[0], mx.nbodies
    Pf, Vf, tau, f_ext = _inputs(mx, P, V, tau, f_ext)
    Pf, Vf = Pf.copy(), Vf.copy()
    T = len(range(0, steps, every)) + 1 if steps else 1
    if out is None:
        out = (np.empty((N, T, nb, 4, 4)), np.empty((N, T, nb, 6)), np.empty((N, T, mx.nrows)), np.empty((N, T)))
    shapes = [(N, T, nb, 4, 4), (N, T, nb, 6), (N, T, mx.nrows), (N, T)]
    if len(out) != 4 or any(np.shape(a) != sh for a, sh in zip(out, shapes)):
        raise ValueError(f"out must hold four arrays shaped {shapes}")
    rec = [out[0].reshape(N, T, 16 * nb), out[1].reshape(N, T, 6 * nb), out[2], out[3]]   # (views, or copies)
    rec = [a if a.flags.c_contiguous and np.shares_memory(a, o) else np.empty(a.shape) for a, o in zip(rec, out)]
    Prec, Vrec, lam, err = rec
    status = np.zeros(N, dtype=np.int32)
    _native.run(plan(mx), Pf, Vf, float(h), code, gain, ga, gb, stabilization == "projection", steps, every,
                tau, f_ext, Prec, Vrec, lam, err, status, get_num_threads())
    bad = np.flatnonzero(status)
    if bad.size:
        what = {1: "a distance row's two points coincide", 2: "K + delta I is not positive definite"}
        raise FloatingPointError(f"state {bad[0]}: {what.get(int(status[bad[0]]), 'the step failed')}")
    if not (np.isfinite(Prec).all() and np.isfinite(Vrec).all()):
        raise FloatingPointError("the maximal-coordinate state became non-finite; reduce h")
    for a, o in zip(rec, out):
        if not np.shares_memory(a, o):
            o[...] = a.reshape(o.shape)
    return tuple(out) if joint_error else tuple(out[:3])

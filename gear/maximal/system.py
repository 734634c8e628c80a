"""The maximal-coordinate view of a model: every body a free rigid body.

In maximal coordinates (Ruan, "Articulated rigid body systems", Sec. 3)
a body's state is its world pose ``T_i`` and body twist ``V_i``; joints are
constraints between bodies.  :func:`from_reduced` maps joint coordinates
``(q, dq)`` to that view and :func:`to_reduced` maps it back, checking that
the poses respect every joint.  :class:`MaximalSystem` assembles the sparse
maximal system of a closed-loop model (its ``Mb``, ``J`` and KKT matrices);
the ``"maximal"`` constraint solver (:class:`gear.solvers.MaximalSolver`)
solves it by sparse Cholesky, and ``gear.compare`` also simulates in these
coordinates.
"""
from __future__ import annotations

import numpy as np

from .. import joints as J
from .._validate import as_array
from ..spatial import rot_to_quat
from ..spatial.stacks import ad_inv_mats, dad_rows

__all__ = ["from_reduced", "to_reduced", "MaximalSystem"]


def from_reduced(model, q, dq=None):
    """Body poses (and twists) of a joint-space state.

    Parameters
    ----------
    model : gear.Model
    q : array_like, shape (nq,) or (N, nq)
    dq : array_like, shape (nv,) or (N, nv), optional

    Returns
    -------
    poses : ndarray, shape (nbodies, 4, 4) (or (N, nbodies, 4, 4))
        World poses ``T_i``.
    twists : ndarray, shape (nbodies, 6) (or (N, nbodies, 6))
        Body twists ``(w, v)`` in body coordinates; only when ``dq`` is given.
    """
    from ..algorithms import forward_kinematics

    return forward_kinematics(model, q, dq)


def _angle_about(R, a):
    """Angle ``t`` with ``R = exp([a] t)`` (``a`` unit), and the residual of
    that fit (``|R - exp([a] t)|``)."""
    from ..spatial import exp_so3

    s = 0.5 * a @ np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    c = 0.5 * (np.trace(R) - 1.0)
    t = float(np.arctan2(s, c))
    return t, float(np.abs(R - exp_so3(a * t)).max())


def _joint_coords(joint, X, name, tol):
    """Coordinates ``q`` with ``J(q) = X`` (a 4x4 relative transform)."""
    from ..spatial import exp_so3

    R, p = X[:3, :3], X[:3, 3]
    scale = max(1.0, float(np.abs(p).max()))

    def bad(what, err):
        raise ValueError(f"joint {name!r} ({type(joint).__name__}): the poses violate the joint "
                         f"({what} off by {err:.3g}); they are not a configuration of the tree")

    if isinstance(joint, J.Fixed):
        err = max(float(np.abs(R - np.eye(3)).max()), float(np.abs(p).max()) / scale)
        if err > tol:
            bad("relative pose", err)
        return np.zeros(0)
    if isinstance(joint, J.Revolute):
        t, err = _angle_about(R, joint.axis)
        err = max(err, float(np.abs(p).max()) / scale)
        if err > tol:
            bad("rotation about the axis / translation", err)
        return np.array([t])
    if isinstance(joint, J.Prismatic):
        d = float(joint.axis @ p)
        err = max(float(np.abs(R - np.eye(3)).max()), float(np.abs(p - d * joint.axis).max()) / scale)
        if err > tol:
            bad("translation along the axis / rotation", err)
        return np.array([d])
    if isinstance(joint, J.Helical):
        t, err = _angle_about(R, joint.axis)
        if joint.pitch != 0.0:
            t = float(joint.axis @ p) / joint.pitch            # unique, unlike the angle
            err = max(float(np.abs(R - exp_so3(joint.axis * t)).max()), 0.0)
        err = max(err, float(np.abs(p - joint.pitch * t * joint.axis).max()) / scale)
        if err > tol:
            bad("screw motion", err)
        return np.array([t])
    if isinstance(joint, J.Cylindrical):
        t, err = _angle_about(R, joint.axis)
        d = float(joint.axis @ p)
        err = max(err, float(np.abs(p - d * joint.axis).max()) / scale)
        if err > tol:
            bad("rotation about / translation along the axis", err)
        return np.array([t, d])
    if isinstance(joint, J.Universal):
        a1, a2 = joint.axis1, joint.axis2
        # R a2 = exp([a1] q1) a2: q1 turns a2's part normal to a1 onto (R a2)'s
        u = a2 - a1 * (a1 @ a2)
        w = R @ a2 - a1 * (a1 @ (R @ a2))
        q1 = float(np.arctan2(a1 @ np.cross(u, w), u @ w))
        q2, err = _angle_about(exp_so3(a1 * q1).T @ R, a2)
        err = max(err, float(np.abs(p).max()) / scale)
        if err > tol:
            bad("two rotations", err)
        return np.array([q1, q2])
    if isinstance(joint, J.Planar):
        t, err = _angle_about(R, joint.normal)
        err = max(err, abs(float(joint.normal @ p)) / scale)
        if err > tol:
            bad("in-plane motion", err)
        return np.array([float(joint.e1 @ p), float(joint.e2 @ p), t])
    if isinstance(joint, J.Spherical):
        if float(np.abs(p).max()) / scale > tol:
            bad("translation", float(np.abs(p).max()))
        return rot_to_quat(R)
    if isinstance(joint, J.Free):
        return np.concatenate([p, rot_to_quat(R)])
    raise TypeError(f"joint {name!r}: unsupported joint kind {type(joint).__name__}")


def to_reduced(model, poses, twists=None, tol=1e-9):
    """Joint coordinates of body poses (and joint velocities of body twists).

    Parameters
    ----------
    model : gear.Model
    poses : array_like, shape (nbodies, 4, 4)
        World poses of the bodies (rigid transforms).
    twists : array_like, shape (nbodies, 6), optional
        Body twists ``(w, v)``.
    tol : float
        Largest violation of a joint (relative) accepted.

    Returns
    -------
    q : ndarray, shape (nq,)
        Angles in ``(-pi, pi]``; quaternions with ``w >= 0``.
    dq : ndarray, shape (nv,)
        Only when ``twists`` is given: ``(S^T S)^{-1} S^T (V_i - Ad V_parent)``.

    Raises
    ------
    ValueError
        When the poses are not rigid transforms or violate a joint (the
        message names the joint), or for wrong shapes / non-finite values.
    """
    from ..constraints._kinematics import _adj

    nb = model.nbodies
    P = as_array("poses", poses, (nb, 4, 4))
    for i in range(nb):
        R = P[i, :3, :3]
        err = float(np.abs(R.T @ R - np.eye(3)).max())
        if err > 1e-9 or np.linalg.det(R) < 0 or np.abs(P[i, 3] - [0, 0, 0, 1]).max() > 1e-12:
            raise ValueError(f"poses[{i}] (body {model.body_names[i]!r}) is not a rigid transform "
                             f"(|R^T R - 1| = {err:.2e})")
    V = None if twists is None else as_array("twists", twists, (nb, 6))
    q = np.zeros(model.nq)
    dq = np.zeros(model.nv)
    for i, joint in enumerate(model.joints):
        name = model.joint_names[i]
        par = model.parents[i]
        Tp = np.eye(4) if par < 0 else P[par]
        Pl = model.placements[i].homogeneous()
        X = np.linalg.inv(Pl) @ np.linalg.inv(Tp) @ P[i]           # J(q_i)
        q[model.idx_q(name)] = _joint_coords(joint, X, name, tol)
        if V is not None and joint.nv:
            S = joint.S(q[model.idx_q(name)])
            Xf = Tp @ Pl @ X                                         # = P[i]
            Tpi = np.linalg.inv(Xf) @ Tp                             # T_{i, parent}
            Vp = np.zeros(6) if par < 0 else V[par]
            rel = V[i] - _adj(Tpi[:3, :3], Tpi[:3, 3]) @ Vp
            x, *_ = np.linalg.lstsq(S, rel, rcond=None)
            if np.abs(S @ x - rel).max() > tol * max(1.0, np.abs(rel).max()):
                raise ValueError(f"joint {name!r}: twists[{i}] moves body {model.body_names[i]!r} "
                                 "in a direction the joint does not allow")
            dq[model.idx_v(name)] = x
    return (q, dq) if V is not None else q


# ---------------------------------------------------------------------------
# the maximal-coordinate system of a ConstrainedModel (Ruan, "Articulated
# rigid body systems", Sec. 3.1, eq. 12)
# ---------------------------------------------------------------------------
class MaximalSystem:
    """The maximal-coordinate form of a closed-loop system.

    Every body is a free rigid body with body twist ``V_i`` (6 each);
    every tree joint and every loop closure is a set of rows ``J`` on the
    stacked twists.  The equations of motion are the KKT system of Ruan,
    "Articulated rigid body systems", Sec. 3.1, eq. (12):

        ``[[Mb, J^T], [J, 0]] [dV; -lam] = [f; c]``

    * ``Mb`` is block-diagonal: the body inertias (Kim eq. 22) in body
      coordinates.
    * ``f`` holds the body wrenches: ``ad*_V (I V)``, gravity
      ``I (0, R^T g)``, the external wrenches, and the joint torques
      (``w_i = S_i^{+T} tau_i`` on body i, so that ``S_i^T w_i = tau_i``,
      and ``-Ad*_{T^{-1}} w_i`` on its parent).
    * **Joint rows.** Joint i contributes ``C_i (dV_i - Ad_{T^{-1}} dV_p) =
      C_i eta_i``, where the rows of ``C_i`` (6 - nv_i of them) span the
      annihilator of ``S_i``, so the relative twist stays in the motion
      subspace (Kim eqs. 37 and 41).
    * **Loop rows.** A loop closure contributes
      ``F_rA . dV_a + F_rB . dV_b = -dA dq_r + F_rA . acc_a + F_rB . acc_b``,
      the same scalar rows as the reduced ``A``, written on the two bodies'
      twists.  Their multipliers are the reduced ``lam``.

    Parameters
    ----------
    sys : gear.ConstrainedModel or gear.Model
        Its constraints must be :class:`gear.LoopClosure` objects: joint
        couplers and custom constraints are rows in joint space, which this
        formulation does not take.  Every body needs positive mass and
        inertia.

    Examples
    --------
    >>> import numpy as np, gear
    >>> sys, q = gear.mechanisms.four_bar()
    >>> ms = gear.maximal.MaximalSystem(sys)
    >>> mats = ms.matrices(q, np.zeros(3))
    >>> mats["Mb"].shape, mats["J"].shape, mats["KKT"].shape
    ((18, 18), (18, 18), (36, 36))
    """

    def __init__(self, sys):
        from ..algorithms.dynamics import SingularInertiaError, _body_inertia_matrices
        from ..constraints import ConstrainedModel, LoopClosure
        from ..model import Model

        if isinstance(sys, Model):
            sys = ConstrainedModel(sys, [])
        if not isinstance(sys, ConstrainedModel):
            raise TypeError(f"sys must be a gear.ConstrainedModel or gear.Model, got {type(sys).__name__}")
        for k, c in enumerate(sys.constraints):
            if not isinstance(c, LoopClosure):
                what = (f"joint coupler {c.name!r} (a URDF <mimic> joint, a row in joint space)"
                        if getattr(c, "coupler", None) is not None else
                        f"{type(c).__name__} {c.name!r} (a row in joint space)" if getattr(c, "name", None)
                        else f"a {type(c).__name__} (a row in joint space)")
                raise NotImplementedError(
                    f"constraints[{k}] is a {what}; the 'maximal' solver takes gear.LoopClosure "
                    "constraints only: use the 'kkt' or 'projection' solver, or simulate "
                    "gear.MaximalModel(sys), which holds couplers too")
        self.sys = sys
        model = self.model = sys.model
        nb = self.nb = model.nbodies
        sys._native()            # the rows must encode natively (LoopClosure only)
        I6 = _body_inertia_matrices(model)
        for i in range(nb):
            if np.linalg.eigvalsh(0.5 * (I6[i] + I6[i].T)).min() <= 1e-12 * max(1.0, np.abs(I6[i]).max()):
                raise SingularInertiaError(
                    f"body {model.body_names[i]!r} has a singular spatial inertia; the maximal-"
                    "coordinate formulation needs positive mass and inertia on every body")
        self.I6 = I6
        self.Minv = np.linalg.inv(I6)
        self.nvi = np.array([j.nv for j in model.joints])
        self.parents = np.array(model.parents)
        self.iv = np.array(model._iv)
        ncj = 6 - self.nvi
        self.joint_row0 = np.concatenate([[0], np.cumsum(ncj)])[:-1]
        self.nJ = int(ncj.sum())
        self.nL = sys.nc
        self.nrows = self.nJ + self.nL
        # the pattern of J, in the order the values are produced (vectorised
        # per group of joints with the same number of dofs): C blocks, parent
        # blocks, then the loop rows' wrenches on body a, then on body b
        rows, cols = [], []
        self._groups = []
        for n in np.unique(self.nvi):
            idx = np.flatnonzero(self.nvi == n)
            r = 6 - n
            if r == 0:
                self._groups.append((n, idx, None, None))
                continue
            R = self.joint_row0[idx][:, None] + np.arange(r)[None, :]               # (g, r)
            self._groups.append((n, idx, R, self.parents[idx] >= 0))
        for n, idx, R, hp in self._groups:
            if R is None:
                continue
            rows.append(np.repeat(R[:, :, None], 6, axis=2).ravel())
            cols.append(np.broadcast_to((6 * idx)[:, None, None] + np.arange(6), R.shape + (6,)).ravel())
        for n, idx, R, hp in self._groups:
            if R is None or not hp.any():
                continue
            Rp, par = R[hp], self.parents[idx[hp]]
            rows.append(np.repeat(Rp[:, :, None], 6, axis=2).ravel())
            cols.append(np.broadcast_to((6 * par)[:, None, None] + np.arange(6), Rp.shape + (6,)).ravel())
        la, lb = [], []
        for k, c in enumerate(sys.constraints):
            ia, ib = sys._bodies[k]
            la += [ia] * sys._nrows[k]
            lb += [ib] * sys._nrows[k]
        self._la, self._lb = np.array(la, dtype=int), np.array(lb, dtype=int)
        self._loop_bodies = list(zip(la, lb))
        lrows = self.nJ + np.arange(self.nL)
        for body in (self._la, self._lb):
            msk = body >= 0
            rows.append(np.repeat(lrows[msk], 6))
            cols.append(((6 * body[msk])[:, None] + np.arange(6)).ravel())
        self._has_parent = self.parents >= 0
        # joints whose S_i does not depend on q: their C_i and S_i^+ are
        # computed once (checked at two configurations)
        self._const_blocks = None
        self._const_groups = None
        rows = np.concatenate(rows) if rows else np.zeros(0, int)
        cols = np.concatenate(cols) if cols else np.zeros(0, int)
        import scipy.sparse as sp

        pattern = sp.csr_matrix((np.arange(1, len(rows) + 1, dtype=float), (rows, cols)),
                                shape=(self.nrows, 6 * nb))
        self._perm = pattern.data.astype(np.int64) - 1            # COO order -> CSR order
        self._indices, self._indptr = pattern.indices, pattern.indptr
        self._Mb = sp.block_diag(list(I6), format="csr") if nb else sp.csr_matrix((0, 0))
        self._Minv = sp.block_diag(list(self.Minv), format="csr") if nb else sp.csr_matrix((0, 0))

    # -- per-state terms -------------------------------------------------------
    def _terms(self, q, dq):
        from .. import _core

        nb, m = self.nb, self.nL
        out = dict(T=np.empty((nb, 12)), S=np.empty((nb, 36)), eta=np.empty((nb, 6)),
                   V=np.empty((nb, 6)), Tw=np.empty((nb, 12)), acc=np.empty((nb, 6)),
                   F=np.empty((max(m, 1), 12)), bias=np.empty(max(m, 1)))
        nd = self.sys._native()
        st = _core.maximal_terms(self.model.data, nd, np.ascontiguousarray(q, dtype=float),
                                 np.zeros(0) if dq is None else np.ascontiguousarray(dq, dtype=float),
                                 out["T"], out["S"], out["eta"], out["V"], out["Tw"], out["acc"],
                                 out["F"], out["bias"])
        if st != 0:
            self.sys._rows_numpy(q, dq)          # raises the named error
            raise ValueError(f"maximal-coordinate terms failed with status {st}")
        return out

    def _const_group_mask(self):
        if self._const_groups is None:
            from .. import _core

            md, nb = self.model.data, self.nb
            Ss = []
            for q in (self.model.neutral(), self.model.random_configuration(np.random.default_rng(7))):
                S = np.empty((nb, 36))
                _core.maximal_terms(md, self.sys._native(), q, np.zeros(0), np.empty((nb, 12)), S,
                                    np.empty((nb, 6)), np.empty((nb, 6)), np.empty((nb, 12)),
                                    np.empty((nb, 6)), np.empty((max(self.nL, 1), 12)),
                                    np.empty(max(self.nL, 1)))
                Ss.append(S)
            self._const_groups = [bool(np.array_equal(Ss[0][idx], Ss[1][idx])) for _, idx, _, _ in self._groups]
        return self._const_groups

    def _joint_blocks(self, S):
        """Per group of joints with n dofs: ``C`` (g, 6 - n, 6) spanning the
        annihilator of each S_i, and ``S^+`` (g, n, 6), from one batched
        SVD of the S_i (cached for groups whose S does not depend on q)."""
        const = self._const_group_mask()
        if self._const_blocks is not None:
            fresh = self._joint_blocks_svd(S, [not c for c in const])
            return [cb if c else fb for c, cb, fb in zip(const, self._const_blocks, fresh)]
        out = self._joint_blocks_svd(S, [True] * len(self._groups))
        self._const_blocks = out
        return out

    def _joint_blocks_svd(self, S, which):
        out = []
        for (n, idx, R, hp), w in zip(self._groups, which):
            if not w:
                out.append(None)
                continue
            if n == 0:
                out.append((np.broadcast_to(np.eye(6), (len(idx), 6, 6)), np.zeros((len(idx), 0, 6))))
                continue
            Sg = np.transpose(S[idx].reshape(len(idx), 6, 6)[:, :n, :], (0, 2, 1))     # (g, 6, n)
            U, sv, Vt = np.linalg.svd(Sg)
            pinv = np.einsum("gji,gj,gkj->gik", Vt, 1.0 / sv, U[:, :, :n])           # V diag(1/s) U_n^T
            out.append((np.transpose(U[:, :, n:], (0, 2, 1)), pinv))
        return out

    def matrices(self, q, dq=None, tau=None, f_ext=None):
        """The maximal system at one state, as ``scipy.sparse`` matrices.

        Parameters
        ----------
        q : array_like, shape (nq,)
        dq : array_like, shape (nv,), optional (default zero)
        tau : array_like, shape (nv,), optional (default zero)
        f_ext : array_like, shape (nbodies, 6), optional

        Returns
        -------
        dict
            ``Mb`` (6 nb, 6 nb) block-diagonal body inertias; ``J``
            (rows, 6 nb) joint rows then loop rows; ``KKT`` the saddle-point
            matrix ``[[Mb, J^T], [J, 0]]``; ``f`` (6 nb,) body wrenches;
            ``c`` (rows,) right-hand side of ``J dV = c``; ``twists`` (nb,
            6); ``nJ`` and ``nL`` (joint and loop row counts).
        """
        import scipy.sparse as sp

        sys = self.sys
        q = sys._q(q)
        if q.ndim != 1:
            raise ValueError(f"q must be one state of shape ({self.model.nq},) for matrices, "
                             f"got shape {q.shape}")
        nv = self.model.nv
        dq = np.zeros(nv) if dq is None else sys._v(dq, "dq", None)
        tau = np.zeros(nv) if tau is None else sys._v(tau, "tau", None)
        if f_ext is not None:
            f_ext = sys._v(f_ext, "f_ext", None, (self.nb, 6))
        t = self._terms(q, dq)
        J, c, f, parts = self._assemble(t, tau, f_ext)
        Mb = self._Mb
        KKT = sp.bmat([[Mb, J.T], [J, None]], format="csc")
        return dict(Mb=Mb, J=J, KKT=KKT, f=f, c=c, twists=t["V"], nJ=self.nJ, nL=self.nL)

    def _assemble(self, t, tau, f_ext, J=None):
        """``J`` (CSR; when ``J`` is given, its ``data`` is overwritten in
        place: the pattern never changes), ``c``, ``f`` and the parts that
        map body accelerations back to joints."""
        import scipy.sparse as sp

        nb = self.nb
        X = ad_inv_mats(t["T"])
        blocks = self._joint_blocks(t["S"])
        c = np.empty(self.nrows)
        vals_c, vals_p = [], []
        V = t["V"]
        IV = np.einsum("bij,bj->bi", self.I6, V)
        R = t["Tw"][:, :9].reshape(nb, 3, 3)
        a_g = np.zeros((nb, 6))
        a_g[:, 3:] = np.einsum("bji,j->bi", R, self.model.gravity)             # R^T g
        f = dad_rows(V, IV) + np.einsum("bij,bj->bi", self.I6, a_g)
        if f_ext is not None:
            f = f + f_ext
        for (n, idx, Rr, hp), (C, Sp) in zip(self._groups, blocks):
            if Rr is not None:
                vals_c.append(C.ravel())
                if hp.any():
                    vals_p.append((-C[hp] @ X[idx[hp]]).ravel())
                c[Rr] = np.einsum("grk,gk->gr", C, t["eta"][idx])
            if n == 0:
                continue
            # joint torques: w_i = S_i^{+T} tau_i on body i (S_i^T w_i = tau_i),
            # -Ad*_{T^{-1}} w_i on the parent
            ii = idx
            tq = tau[self.iv[ii][:, None] + np.arange(n)]
            w = np.einsum("gnk,gn->gk", Sp, tq)
            f[ii] += w
            par = self.parents[ii]
            m = par >= 0
            np.add.at(f, par[m], -np.einsum("gkj,gk->gj", X[ii[m]], w[m]))
        F = t["F"][:self.nL]
        lr = -t["bias"][:self.nL].copy()
        ma, mb = self._la >= 0, self._lb >= 0
        lr[ma] += np.einsum("rk,rk->r", F[ma, :6], t["acc"][self._la[ma]])
        lr[mb] += np.einsum("rk,rk->r", F[mb, 6:], t["acc"][self._lb[mb]])
        c[self.nJ:] = lr
        vals = vals_c + vals_p + [F[ma, :6].ravel(), F[mb, 6:].ravel()]
        data = np.concatenate(vals)[self._perm] if vals else np.zeros(0)
        if J is None:
            J = sp.csr_matrix((data, self._indices, self._indptr), shape=(self.nrows, 6 * nb))
        else:
            J.data[:len(data)] = data
        return J, c, f.ravel(), dict(X=X, blocks=blocks)

    def joint_accelerations(self, t, dV, parts):
        """``ddq_i = S_i^+ (dV_i - Ad_{T^{-1}} dV_p - eta_i)`` (eq. 41 solved
        for ``ddq``)."""
        dV = dV.reshape(self.nb, 6)
        rel = dV - t["eta"]
        hp = self._has_parent
        rel[hp] -= np.einsum("bij,bj->bi", parts["X"][hp], dV[self.parents[hp]])
        ddq = np.empty(self.model.nv)
        for (n, idx, Rr, _), (C, Sp) in zip(self._groups, parts["blocks"]):
            if n:
                ddq[self.iv[idx][:, None] + np.arange(n)] = np.einsum("gnk,gk->gn", Sp, rel[idx])
        return ddq

    def pinv_rows(self, parts):
        """The rows of every ``S_i^+`` stacked by velocity coordinate, shape
        (nv, 6): row ``iv_i + k`` is row ``k`` of ``S_i^+`` (so that
        ``ddq = pinv_rows[dof] . (dV_i - Ad_{T^{-1}} dV_p - eta_i)``)."""
        P = np.zeros((self.model.nv, 6))
        for (n, idx, _, _), (C, Sp) in zip(self._groups, parts["blocks"]):
            if n:
                P[self.iv[idx][:, None] + np.arange(n)] = Sp
        return P

"""``MaximalModel``: maximal coordinates as a formulation with its own state
(Ruan, "Articulated rigid body systems", Sec. 3).

Every body is a free rigid body with world pose ``T_i`` and body twist
``V_i = (w, v)``; every tree joint and every loop closure is a set of
rows of ``J`` (:mod:`gear.maximal.rows`).  The equations of motion are

    ``M dV = f + J^T lam``,  ``J dV + b = 0``

with ``M`` block-diagonal (the body inertias, Kim eq. 22), ``f`` the
bias, gravity, external and joint forces, and ``b`` the rows' bias.  They
are solved through the Schur complement ``K = J M^{-1} J^T``, sparse
(every row touches two bodies), by sparse Cholesky.  Compliant rows
(``stiffness=``, ``damping=``) replace ``lam`` by a spring and damper on
the row, ``lam = -k g - c dg/dt`` (Ruan, eq. 13 with a position term).
"""
from __future__ import annotations

import numpy as np

from .. import joints as JT
from ..spatial.stacks import ad_rows, dad_rows, inverse_rows
from . import rows as R
from .kkt import RowSystem

__all__ = ["MaximalModel", "MaximalResult"]


class MaximalResult:
    """Result of :meth:`MaximalModel.forward_dynamics`.

    Attributes
    ----------
    dV : ndarray, shape (nb, 6) or (N, nb, 6)
        Time derivative of every body twist (body coordinates).
    lam : ndarray, shape (nrows,) or (N, nrows)
        Row forces (multipliers of hard rows; the spring-damper force of
        compliant rows).
    residual : float or ndarray (N,)
        ``max |J dV + b|`` over the hard rows (zero for compliant ones).
    """

    def __init__(self, dV, lam, residual):
        self.dV, self.lam, self.residual = dV, lam, residual

    def __repr__(self):
        return f"MaximalResult(dV shape={self.dV.shape}, residual={np.max(self.residual):.2e})"


class MaximalModel:
    """A model in maximal coordinates: every body free, joints and loops as
    rows.

    Parameters
    ----------
    model_or_sys : gear.Model or gear.ConstrainedModel
        The bodies, joints and (for a constrained model) loop closures.
        Closures must be :class:`gear.LoopClosure` objects; rows in joint
        space (couplers, custom constraints) have no maximal form.  Every
        body needs positive mass and inertia.
    stiffness, damping : float or array_like (nrows,), optional
        Make the rows compliant: ``lam = -stiffness * g - damping * dg/dt``
        (N/m or N·m/rad, and N·s/m).  ``None`` (default): hard rows.  Both
        are given together, or ``damping`` alone is 0.

    Attributes
    ----------
    model : gear.Model
    nbodies, nrows : int
    row_names : list of str
        ``"joint:NAME"`` or ``"loop:NAME"`` per row, joints first.

    Examples
    --------
    >>> import numpy as np, gear
    >>> sys, q0 = gear.mechanisms.four_bar()
    >>> mx = gear.MaximalModel(sys)
    >>> mx.nbodies, mx.nrows
    (3, 18)
    >>> poses, twists = mx.state(q0, np.zeros(3))
    >>> float(np.abs(mx.joint_residual(poses)).max()) < 1e-12
    True
    """

    def __init__(self, model_or_sys, stiffness=None, damping=None):
        from ..algorithms.dynamics import SingularInertiaError, _body_inertia_matrices
        from ..constraints import ConstrainedModel, LoopClosure
        from ..model import Model

        if isinstance(model_or_sys, ConstrainedModel):
            sys = model_or_sys
        elif isinstance(model_or_sys, Model):
            sys = ConstrainedModel(model_or_sys, []) if getattr(model_or_sys, "loop_closures", None) is None \
                else ConstrainedModel(model_or_sys)
        else:
            raise TypeError(f"model_or_sys must be a gear.Model or gear.ConstrainedModel, "
                            f"got {type(model_or_sys).__name__}")
        model = sys.model
        for k, c in enumerate(sys.constraints):
            if not isinstance(c, LoopClosure) and getattr(c, "coupler", None) is None:
                label = f" {c.name!r}" if getattr(c, "name", None) else ""
                raise ValueError(f"constraints[{k}]{label} ({type(c).__name__}) is a row in joint space and has no "
                                 "maximal-coordinate form; MaximalModel takes gear.LoopClosure and "
                                 "gear.JointCoupler constraints only")
        I6 = _body_inertia_matrices(model)
        for i in range(model.nbodies):
            if np.linalg.eigvalsh(0.5 * (I6[i] + I6[i].T)).min() <= 1e-12 * max(1.0, np.abs(I6[i]).max()):
                raise SingularInertiaError(
                    f"body {model.body_names[i]!r} has a singular spatial inertia; in maximal coordinates "
                    "every body is free and needs positive mass and rotational inertia; give it some")
        self.sys, self.model = sys, model
        self.nbodies = nb = model.nbodies
        self.I6 = I6
        self.Minv = np.linalg.inv(I6)
        self._parents = np.array(model.parents)
        self._S = [self._motion_basis(i) for i in range(nb)]
        table = R.RowTable()
        for i in range(nb):
            R.joint_rows(table, model, i)
        self.njoint_rows = len(table._rows)
        from ..constraints.closures import _ROWS

        for k, c in enumerate(sys.constraints):
            if not isinstance(c, LoopClosure):
                continue
            ia, ib = sys._bodies[k]
            name = c.name or f"constraint{k}"
            length = sys._lengths.get(k, 0.0) if c.kind == "distance" else 0.0
            for typ, a, b in _ROWS[c.kind]:
                table.add(f"loop:{name}", typ, ia, ib, c.placement_a.R, c.placement_a.p,
                          c.placement_b.R, c.placement_b.p, 0 if a is None else a, 0 if b is None else b,
                          length if typ == "dist" else 0.0)
        self.rows = table.freeze()
        self._couplers = [self._coupler(k, c.coupler) for k, c in enumerate(sys.constraints)
                          if not isinstance(c, LoopClosure)]
        self.nrows = table.m + len(self._couplers)
        self.row_names = list(table.owner) + [f"coupler:{c.name}" for c in (cc.coupler for cc in sys.constraints
                                                                          if not isinstance(cc, LoopClosure))]
        self.stiffness = self._per_row("stiffness", stiffness)
        self.damping = self._per_row("damping", damping)
        if self.stiffness is None and self.damping is not None:
            raise ValueError("damping= needs stiffness= (compliant rows); hard rows take neither")
        if self.stiffness is not None and self.damping is None:
            self.damping = np.zeros(self.nrows)

    def _per_row(self, name, value):
        if value is None:
            return None
        v = np.asarray(value, dtype=float)
        if v.ndim == 0:
            v = np.full(self.nrows, float(v))
        if v.shape != (self.nrows,):
            raise ValueError(f"{name} must be a number or one value per row, shape ({self.nrows},), got "
                             f"shape {v.shape}")
        if not np.isfinite(v).all() or (v < 0).any() or (name == "stiffness" and (v <= 0).any()):
            raise ValueError(f"{name} must be finite and {'positive' if name == 'stiffness' else 'non-negative'}")
        return v

    def __getstate__(self):
        """Pickles (for Dask workers, multiprocessing) without the native
        kernel's plan, which each process builds again on first use, and
        without the joints' motion-subspace closures."""
        state = self.__dict__.copy()
        state.pop("_native", None)
        state.pop("_S", None)                    # closures: rebuilt by __setstate__
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._S = [self._motion_basis(i) for i in range(self.nbodies)]

    @property
    def compliant(self):
        """True when the rows are springs and dampers (``stiffness=``)."""
        return self.stiffness is not None

    def __repr__(self):
        return (f"MaximalModel({self.nbodies} bodies, {self.nrows} rows"
                + (", compliant" if self.compliant else "") + ")")

    # -- joint couplers ---------------------------------------------------------
    def _coupler(self, k, c):
        """A :class:`gear.JointCoupler` ``q_j = m q_s + o`` as one row on the
        twists of up to four bodies: each joint's rate is ``s^T eta`` with
        ``eta = V_i - Ad_{X^-1} V_p`` its relative twist and ``s = (a, 0)``
        (the angle of a revolute or helical joint) or ``(0, a)`` (the
        displacement of a prismatic one).
        The residual is the coordinates read back from the relative poses
        (:meth:`to_reduced`'s fit); the row is its exact rate wherever the
        two joints hold (elsewhere, their rates along the axes)."""
        m = self.model
        sides = []
        for arg, name in (("joint", c.joint), ("source", c.source)):
            i = m.joint_index(name)
            jt = m.joints[i]
            if jt.kind not in (JT.REVOLUTE, JT.PRISMATIC, JT.HELICAL):
                raise ValueError(f"constraints[{k}] ({c!r}): {arg} {name!r} is a {type(jt).__name__} joint; "
                                 "couplers in maximal coordinates tie revolute, prismatic or helical joints")
            # the rate of the coordinate read back from the pose: the angle
            # of a revolute or helical joint, the displacement of a prismatic one
            St = np.concatenate([np.zeros(3), jt.axis] if jt.kind == JT.PRISMATIC else [jt.axis, np.zeros(3)])
            sides.append((i, jt, St))
        return sides, c.multiplier, c.offset

    def _joint_value(self, i, jt, Y):
        """The coordinate of a one-dof joint read from its relative pose."""
        RY, pY = Y[:, i, :3, :3], Y[:, i, :3, 3]
        if jt.kind == JT.PRISMATIC:
            return pY @ jt.axis
        th = _angle_about(RY, jt.axis)
        if jt.kind == JT.HELICAL and jt.pitch != 0.0:
            th = th + 2.0 * np.pi * np.round((pY @ jt.axis / jt.pitch - th) / (2.0 * np.pi))
        return th

    def evaluate(self, P, V=None, rows=True):
        """Every row of a batch of states (trusted inputs).

        Parameters
        ----------
        P : ndarray, shape (N, nb, 4, 4)
        V : ndarray, shape (N, nb, 6), optional
        rows : bool
            False: the residual only.

        Returns
        -------
        dict
            ``g`` (N, nrows); with ``rows``: ``bias`` (N, nrows) and
            ``slots``, a list of ``(body (nrows,), F (N, nrows, 6))``: row
            ``r``'s rate is ``sum F[:, r] . V[:, body[r]]`` over the slots
            (body -1: no body).
        """
        ev = R.evaluate(self.rows, P, V, rows=rows)
        if not self._couplers:
            if rows:
                t = self.rows
                ev["slots"] = [(t.ia, ev.pop("Fa")), (t.ib, ev.pop("Fb"))]
            return ev
        N, mg = P.shape[0], self.rows.m
        mc = len(self._couplers)
        X, Y = self._relative(P)
        g = np.empty((N, mc))
        bodies = -np.ones((4, mc), dtype=int)
        F = np.zeros((4, N, mc, 6))
        bias = np.zeros((N, mc))
        par = self._parents
        for r, (sides, mult, off) in enumerate(self._couplers):
            (ij, jj, _), (is_, js, _) = sides
            vj, vs = self._joint_value(ij, jj, Y), self._joint_value(is_, js, Y)
            if js.kind != JT.PRISMATIC and mult != 0.0:       # the source's turn nearest to the joint's
                vs = vs + 2.0 * np.pi * np.round(((vj - off) / mult - vs) / (2.0 * np.pi))
            g[:, r] = vj - mult * vs - off
            if not rows:
                continue
            for slot, ((i, jt, St), coef) in enumerate(zip(sides, (1.0, -mult))):
                bodies[2 * slot, r] = i
                F[2 * slot, :, r] = coef * St
                p = par[i]
                if p >= 0:
                    bodies[2 * slot + 1, r] = p
                    F[2 * slot + 1, :, r] = -coef * _ad_inv_T_apply(X[:, i], np.broadcast_to(St, (N, 6)))
                if V is not None:
                    Vp = _ad_inv_apply(X[:, i], V[:, p]) if p >= 0 else np.zeros((N, 6))
                    eta = V[:, i] - Vp
                    bias[:, r] += coef * (ad_rows(eta, Vp) @ St)
        out = {"g": np.concatenate([ev["g"], g], axis=1)}
        if not rows:
            return out
        out["bias"] = np.concatenate([ev["bias"], bias], axis=1)
        t = self.rows
        zero = np.zeros((N, mg, 6))
        out["slots"] = [(np.concatenate([t.ia, bodies[0]]), np.concatenate([ev["Fa"], F[0]], axis=1)),
                        (np.concatenate([t.ib, bodies[1]]), np.concatenate([ev["Fb"], F[1]], axis=1)),
                        (np.concatenate([-np.ones(mg, dtype=int), bodies[2]]), np.concatenate([zero, F[2]], axis=1)),
                        (np.concatenate([-np.ones(mg, dtype=int), bodies[3]]), np.concatenate([zero, F[3]], axis=1))]
        return out

    # -- joint motion subspaces from relative poses --------------------------
    def _motion_basis(self, i):
        """``S_i`` (6, nv_i) in the child's coordinates as a function of the
        joint's relative rotation ``R_Y`` (constant for every kind but the
        universal and planar joints)."""
        j = self.model.joints[i]
        k = j.kind
        z = np.zeros(3)
        if k == JT.REVOLUTE:
            return lambda RY: np.concatenate([j.axis, z])[None, :, None]
        if k == JT.PRISMATIC:
            return lambda RY: np.concatenate([z, j.axis])[None, :, None]
        if k == JT.HELICAL:
            return lambda RY: np.concatenate([j.axis, j.pitch * j.axis])[None, :, None]
        if k == JT.CYLINDRICAL:
            S = np.zeros((6, 2))
            S[:3, 0], S[3:, 1] = j.axis, j.axis
            return lambda RY: S[None]
        if k == JT.SPHERICAL:
            return lambda RY: np.eye(6)[:, :3][None]
        if k == JT.FREE:
            return lambda RY: np.eye(6)[None]
        if k == JT.UNIVERSAL:
            def S_univ(RY):
                out = np.zeros((RY.shape[0], 6, 2))
                out[:, :3, 0] = np.einsum("nji,j->ni", RY, j.axis1)          # R_Y^T a1
                out[:, :3, 1] = j.axis2
                return out
            return S_univ
        if k == JT.PLANAR:
            def S_planar(RY):
                out = np.zeros((RY.shape[0], 6, 3))
                out[:, 3:, 0] = np.einsum("nji,j->ni", RY, j.e1)
                out[:, 3:, 1] = np.einsum("nji,j->ni", RY, j.e2)
                out[:, :3, 2] = j.normal
                return out
            return S_planar
        return None                                                        # fixed

    def _relative(self, poses):
        """``X_i = T_p^{-1} T_i`` and ``Y_i = placement_i^{-1} X_i`` for every
        body: (N, nb, 4, 4) each."""
        par = self._parents
        Tp = np.where((par >= 0)[None, :, None, None], poses[:, np.maximum(par, 0)], np.eye(4))
        X = inverse_rows(Tp) @ poses
        Pinv = np.array([inverse_rows(P.homogeneous()[None])[0] for P in self.model.placements])
        return X, Pinv[None] @ X

    # -- state maps -------------------------------------------------------------
    def state(self, q, dq=None):
        """World poses (and body twists) of a joint-space state.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        dq : array_like, shape (nv,) or (N, nv), optional

        Returns
        -------
        poses : ndarray, shape (nb, 4, 4) or (N, nb, 4, 4)
        twists : ndarray, shape (nb, 6) or (N, nb, 6)
            Zero when ``dq`` is None.
        """
        from ..algorithms import forward_kinematics

        q = np.asarray(q, dtype=float)
        if dq is None:
            poses = forward_kinematics(self.model, q)
            return poses + 0.0, np.zeros(poses.shape[:-2] + (6,))
        poses, twists = forward_kinematics(self.model, q, dq)
        # (+ 0.0: every zero positive.  The batched kinematics takes four
        # states at a time, and a zero's sign can differ from the one-state
        # path's; the maximal steps carry it, and a state's run would then
        # depend on the batch it started in)
        return poses + 0.0, twists + 0.0

    def _check_poses(self, poses, twists=None, tau=None, f_ext=None):
        """Validate and batch the inputs: (N, nb, 4, 4), (N, nb, 6) or None,
        (N, nv) or None, (N, nb, 6) or None, and whether one state was given."""
        nb = self.nbodies
        P = np.asarray(poses, dtype=float)
        single = P.ndim == 3
        if P.shape[-3:] != (nb, 4, 4) or P.ndim not in (3, 4):
            raise ValueError(f"poses must have shape ({nb}, 4, 4) or (N, {nb}, 4, 4), got shape {P.shape}")
        P = P[None] if single else P
        if not np.isfinite(P).all():
            raise ValueError("poses contain non-finite values (NaN or inf); pass finite homogeneous transforms")
        Rm = P[..., :3, :3]
        err = np.abs(np.swapaxes(Rm, -1, -2) @ Rm - np.eye(3)).max(initial=0.0)
        det = np.linalg.det(Rm) if Rm.size else np.ones(1)
        if err > 1e-6 or (det < 0).any() or np.abs(P[..., 3, :] - [0, 0, 0, 1]).max(initial=0.0) > 1e-12:
            raise ValueError(f"poses must be rigid transforms: rotation blocks orthonormal with determinant "
                             f"+1 (largest |R^T R - I| is {err:.2e}) and last row (0, 0, 0, 1)")
        N = P.shape[0]
        return (np.ascontiguousarray(P), batch_input("twists", twists, (nb, 6), N),
                batch_input("tau", tau, (self.model.nv,), N), batch_input("f_ext", f_ext, (nb, 6), N), single)

    def to_reduced(self, poses, twists=None):
        """The nearest joint coordinates of a maximal state (least squares
        per joint; never raises on violated joints).

        Each joint's coordinates are fitted to the relative pose of its
        body (the rotation's nearest rotation about the joint's axes, in
        the Frobenius norm; translations projected on the joint's
        directions), and its rates to the relative twist (least squares on
        the joint's motion subspace).

        Parameters
        ----------
        poses : array_like, shape (nb, 4, 4) or (N, nb, 4, 4)
        twists : array_like, shape (nb, 6) or (N, nb, 6), optional

        Returns
        -------
        q : ndarray, shape (nq,) or (N, nq)
        dq : ndarray, shape (nv,) or (N, nv)
            Only when ``twists`` is given.
        """
        from ..spatial import rot_to_quat

        P, V, _, _, single = self._check_poses(poses, twists)
        m = self.model
        N = P.shape[0]
        X, Y = self._relative(P)
        q = np.empty((N, m.nq))
        for i, j in enumerate(m.joints):
            a = m._iq[i]
            RY, pY = Y[:, i, :3, :3], Y[:, i, :3, 3]
            k = j.kind
            if k in (JT.REVOLUTE, JT.HELICAL, JT.CYLINDRICAL):
                th = _angle_about(RY, j.axis)
                if k == JT.HELICAL and j.pitch != 0.0:
                    s = pY @ j.axis / j.pitch
                    th = th + 2.0 * np.pi * np.round((s - th) / (2.0 * np.pi))
                q[:, a] = th
                if k == JT.CYLINDRICAL:
                    q[:, a + 1] = pY @ j.axis
            elif k == JT.PRISMATIC:
                q[:, a] = pY @ j.axis
            elif k == JT.UNIVERSAL:
                a1, a2 = j.axis1, j.axis2
                Ra2 = RY @ a2
                perp = a2 - a1 * (a1 @ a2)
                q1 = np.arctan2(np.einsum("ni,i->n", np.cross(perp, Ra2), a1), Ra2 @ perp)
                from ..spatial.stacks import exp_so3_rows

                R1 = exp_so3_rows(np.outer(q1, a1))
                q[:, a] = q1
                q[:, a + 1] = _angle_about(np.swapaxes(R1, -1, -2) @ RY, a2)
            elif k == JT.PLANAR:
                q[:, a] = pY @ j.e1
                q[:, a + 1] = pY @ j.e2
                q[:, a + 2] = _angle_about(RY, j.normal)
            elif k == JT.SPHERICAL:
                q[:, a:a + 4] = _nearest_quat(RY, rot_to_quat)
            elif k == JT.FREE:
                q[:, a:a + 3] = pY
                q[:, a + 3:a + 7] = _nearest_quat(RY, rot_to_quat)
        if V is None:
            return q[0] if single else q
        # relative twists eta_i = V_i - Ad_{X^-1} V_p, then dq_i = S_i^+ eta_i
        eta = V - self._ad_inv_parent(X, V)
        dq = np.empty((N, m.nv))
        for i, j in enumerate(m.joints):
            if not j.nv:
                continue
            S = self._S[i](Y[:, i, :3, :3])
            if S.shape[0] == 1:                  # constant S: one pseudo-inverse for every frame
                dq[:, m._iv[i]:m._iv[i] + j.nv] = eta[:, i] @ np.linalg.pinv(S[0]).T
            else:                                # S (full column rank) per frame: normal equations
                St = np.swapaxes(S, 1, 2)
                dq[:, m._iv[i]:m._iv[i] + j.nv] = np.linalg.solve(St @ S, (St @ eta[:, i, :, None]))[..., 0]
        return (q[0], dq[0]) if single else (q, dq)

    def _readback(self, P, V):
        """:meth:`to_reduced` of states this model's kernels produced
        (``P`` (M, nb, 4, 4) rigid to rounding, ``V`` (M, nb, 6), C-contiguous
        float64), natively and without validation
        (``gear/maximal/_readback.pyx``): ``(q, dq)``, (M, nq) and (M, nv)."""
        from . import _readback
        from ..algorithms.dynamics import get_num_threads

        m = self.model
        data = getattr(self, "_readback_data", None)
        if data is None:
            nb = m.nbodies
            kind, pitch = np.zeros(nb, dtype=np.int32), np.zeros(nb)
            Pinv, axes = np.zeros((nb, 12)), np.zeros((nb, 9))
            for i, j in enumerate(m.joints):
                kind[i] = j.kind
                R, p = np.asarray(m.placements[i].R), np.asarray(m.placements[i].p)
                Pinv[i, :9], Pinv[i, 9:] = R.T.reshape(9), -R.T @ p
                if j.kind == JT.UNIVERSAL:
                    axes[i, :3], axes[i, 3:6] = j.axis1, j.axis2
                elif j.kind == JT.PLANAR:
                    axes[i, :3], axes[i, 3:6], axes[i, 6:] = j.e1, j.e2, j.normal
                elif hasattr(j, "axis"):
                    axes[i, :3] = j.axis
                pitch[i] = getattr(j, "pitch", 0.0)
            data = self._readback_data = (kind, np.asarray(self._parents, dtype=np.int32),
                                          np.asarray(m._iq, dtype=np.int32), np.asarray(m._iv, dtype=np.int32),
                                          Pinv, axes, pitch)
        M = P.shape[0]
        q, dq = np.empty((M, m.nq)), np.empty((M, m.nv))
        _readback.to_reduced(P, V, *data, q, dq, get_num_threads() if M > 64 else 1)
        return q, dq

    def _ad_inv_parent(self, X, V):
        """``Ad_{X_i^{-1}} V_p`` per body (zero for roots): (N, nb, 6)."""
        par = self._parents
        Vp = np.where((par >= 0)[None, :, None], V[:, np.maximum(par, 0)], 0.0)
        return _ad_inv_apply(X, Vp)

    def joint_residual(self, poses):
        """Position violation of every row: zero when every joint and loop
        holds (metres for point rows, the sine of the angle for axis rows).

        Parameters
        ----------
        poses : array_like, shape (nb, 4, 4) or (N, nb, 4, 4)

        Returns
        -------
        ndarray, shape (nrows,) or (N, nrows)
        """
        P, _, _, _, single = self._check_poses(poses)
        g = self.evaluate(P, rows=False)["g"]
        return g[0] if single else g

    def energy(self, poses, twists):
        """Kinetic plus potential energy of every state (J): ``sum_i 1/2
        V_i^T I_i V_i - m_i g . (p_i + R_i c_i)``.

        Parameters
        ----------
        poses : array_like, shape (nb, 4, 4) or (N, nb, 4, 4)
        twists : array_like, shape (nb, 6) or (N, nb, 6)

        Returns
        -------
        float or ndarray, shape (N,)
        """
        P, V, _, _, single = self._check_poses(poses, twists)
        kin = 0.5 * np.einsum("nbi,bij,nbj->n", V, self.I6, V)
        mass = self.I6[:, 3, 3]
        mc = np.stack([self.I6[:, 2, 4], self.I6[:, 0, 5], self.I6[:, 1, 3]], axis=1)     # m c, from m [c]
        com = P[..., :3, 3] + np.einsum("nbij,bj->nbi", P[..., :3, :3], mc / mass[:, None])
        pot = -np.einsum("b,nbi,i->n", mass, com, self.model.gravity)
        e = kin + pot
        return float(e[0]) if single else e

    # -- dynamics ------------------------------------------------------------------
    def _forces(self, P, V, tau, f_ext):
        """Body forces ``f`` (N, nb, 6): ``ad*_V (I V)``, gravity, external
        wrenches and the joint forces as equal and opposite wrenches."""
        I6 = self.I6
        IV = np.einsum("bij,nbj->nbi", I6, V)
        a_g = np.zeros(V.shape)
        a_g[..., 3:] = np.einsum("nbji,j->nbi", P[..., :3, :3], self.model.gravity)       # R^T g
        f = dad_rows(V, IV) + np.einsum("bij,nbj->nbi", I6, a_g)
        if f_ext is not None:
            f = f + f_ext
        if tau is not None and self.model.nv:
            X, Y = self._relative(P)
            m = self.model
            for i, j in enumerate(m.joints):
                if not j.nv:
                    continue
                S = np.broadcast_to(self._S[i](Y[:, i, :3, :3]), (P.shape[0], 6, j.nv))
                t = tau[:, m._iv[i]:m._iv[i] + j.nv]
                # w = S (S^T S)^{-1} tau on the child (S^T w = tau), -Ad*_{X^-1} w on the parent
                w = np.einsum("nij,nj->ni", S, np.linalg.solve(np.swapaxes(S, 1, 2) @ S, t[..., None])[..., 0])
                f[:, i] += w
                p = m.parents[i]
                if p >= 0:
                    f[:, p] -= _ad_inv_T_apply(X[:, i], w)
        return f

    def native_plan(self):
        """The native kernel's frozen arrays (:mod:`gear.maximal.native`),
        built once; None when the model is outside what the kernel covers."""
        if getattr(self, "_native", None) is None:
            from .native import build

            self._native = build(self)
        return self._native[0]

    def step(self, P, V, h, integrator="euler", tau=None, f_ext=None, stabilization=None, beta=None,
             gains=None):
        """One step of a batch (trusted inputs, as
        :func:`gear.maximal.stepping.step`): the native kernel where it
        covers the call (:func:`gear.maximal.native.step`), NumPy otherwise."""
        from .native import step

        return step(self, P, V, h, integrator, tau, f_ext, stabilization, beta, gains)

    def project(self, P, V, tol=1e-12, max_iter=10):
        """:func:`gear.maximal.stepping.project` of a batch (trusted inputs):
        the native kernel where it covers the model
        (:func:`gear.maximal.native.project`), NumPy otherwise."""
        from .native import project

        return project(self, P, V, tol, max_iter)

    def _J(self, ev, n):
        """``J`` of state ``n`` as CSR (nrows, 6 nb)."""
        import scipy.sparse as sp

        rows, cols, vals = [], [], []
        for body, F in ev["slots"]:
            on = np.flatnonzero(body >= 0)
            rows.append(np.repeat(on, 6))
            cols.append((6 * body[on][:, None] + np.arange(6)).ravel())
            vals.append(F[n, on].ravel())
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(self.nrows, 6 * self.nbodies))

    def _Minv_sparse(self):
        import scipy.sparse as sp

        if not hasattr(self, "_Minv_sp"):
            self._Minv_sp = sp.block_diag(list(self.Minv), format="csr") if self.nbodies else sp.csr_matrix((0, 0))
            self._M_sp = sp.block_diag(list(self.I6), format="csr") if self.nbodies else sp.csr_matrix((0, 0))
        return self._Minv_sp

    def forward_dynamics(self, poses, twists, tau=None, f_ext=None):
        """Body accelerations and row forces straight from poses and twists.

        Parameters
        ----------
        poses : array_like, shape (nb, 4, 4) or (N, nb, 4, 4)
        twists : array_like, shape (nb, 6) or (N, nb, 6)
        tau : array_like, shape (nv,) or (N, nv), optional
            Joint forces, applied as equal and opposite wrenches on each
            joint's two bodies.
        f_ext : array_like, shape (nb, 6) or (N, nb, 6), optional
            External wrenches in body coordinates.

        Returns
        -------
        MaximalResult
            ``.dV``, ``.lam``, ``.residual``.
        """
        if twists is None:
            raise TypeError("twists are required (body twists, shape (nb, 6)); pass zeros for a state at rest")
        P, V, tau, f_ext, single = self._check_poses(poses, twists, tau, f_ext)
        from .native import native_accel

        out = native_accel(self, P, V, tau, f_ext)
        dV, lam, res = out if out is not None else self._accel(P, V, tau, f_ext)
        if single:
            return MaximalResult(dV[0], lam[0], float(res[0]))
        return MaximalResult(dV, lam, res)

    def _accel(self, P, V, tau, f_ext, baumgarte=None):
        """(dV, lam, residual) for a batch (trusted inputs).  ``baumgarte``
        ``(alpha, beta)``: hard rows keep ``J dV + b = -2 alpha dg/dt -
        beta^2 g`` instead of ``J dV + b = 0``."""
        N, nb = P.shape[0], self.nbodies
        f = self._forces(P, V, tau, f_ext)
        ev = self.evaluate(P, V)
        Mf = np.einsum("bij,nbj->nbi", self.Minv, f)
        if self.compliant:
            lam = -self.stiffness * ev["g"] - self.damping * rs_J_apply(self, ev, V)
            return Mf + _minv_jt(self, ev, lam), lam, np.zeros(N)
        if self.nrows == 0:
            return Mf, np.zeros((N, 0)), np.zeros(N)
        rs = RowSystem(self, ev)
        target = -ev["bias"]
        if baumgarte is not None:
            target = target - 2.0 * baumgarte[0] * rs.J_apply(V) - baumgarte[1] ** 2 * ev["g"]
        lam = rs.solve(target - rs.J_apply(Mf))
        dV = Mf + rs.minv_jt_apply(lam)
        res = np.abs(rs.J_apply(dV) - target).max(axis=1, initial=0.0)
        return dV, lam, res

    def system(self, poses, twists=None, tau=None, f_ext=None):
        """The maximal system at one state, for inspection and teaching.

        Parameters
        ----------
        poses : array_like, shape (nb, 4, 4)
        twists, tau, f_ext : array_like, optional
            As for :meth:`forward_dynamics` (default zero).

        Returns
        -------
        dict
            ``M`` (6 nb, 6 nb) block-diagonal body inertias and ``J``
            (nrows, 6 nb) as ``scipy.sparse`` CSR; ``f`` (6 nb,) the body
            forces; ``bias`` (nrows,) with ``J dV + bias = 0``; ``g``
            (nrows,) the position residual; ``KKT`` the saddle-point matrix
            ``[[M, J^T], [J, 0]]`` (CSC), whose solution ``[dV; -lam]``
            has right-hand side ``[f; -bias]``.
        """
        import scipy.sparse as sp

        P, V, tau, f_ext, single = self._check_poses(poses, twists if twists is not None
                                                     else np.zeros((self.nbodies, 6)), tau, f_ext)
        if not single:
            raise ValueError("system() takes one state: poses of shape (nb, 4, 4)")
        ev = self.evaluate(P, V)
        J = self._J(ev, 0)
        self._Minv_sparse()
        KKT = sp.bmat([[self._M_sp, J.T], [J, None]], format="csc")
        return dict(M=self._M_sp, J=J, f=self._forces(P, V, tau, f_ext)[0].ravel(), bias=ev["bias"][0],
                    g=ev["g"][0], KKT=KKT)


# ---------------------------------------------------------------------------
def batch_input(name, x, shape, N):
    """``x`` of one state (``shape``, broadcast) or of ``N``, as a finite
    C-contiguous ``(N,) + shape`` array; None stays None."""
    if x is None:
        return None
    a = np.asarray(x, dtype=float)
    if a.shape == shape:
        a = np.broadcast_to(a, (N,) + shape)
    elif a.shape != (N,) + shape:
        raise ValueError(f"{name} must have shape {shape} or ({N}, {', '.join(map(str, shape))}), "
                         f"got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return np.ascontiguousarray(a)


def rs_J_apply(mx, ev, V):
    """``J V`` of every state without forming ``K`` (compliant rows)."""
    out = np.zeros(ev["g"].shape)
    for body, F in ev["slots"]:
        Vb = np.where((body >= 0)[None, :, None], V[:, np.maximum(body, 0)], 0.0)
        out += np.einsum("nri,nri->nr", F, Vb)
    return out


def _minv_jt(mx, ev, lam):
    """``M^{-1} J^T lam`` of every state without forming ``K``."""
    F = np.zeros((lam.shape[0], mx.nbodies, 6))
    for body, Fs in ev["slots"]:
        on = np.flatnonzero(body >= 0)
        np.add.at(F, (slice(None), body[on]), Fs[:, on] * lam[:, on, None])
    return np.einsum("bij,nbj->nbi", mx.Minv, F)


def _angle_about(R, a):
    """Angle of the rotation about unit ``a`` nearest to each ``R`` (N, 3, 3)
    in the Frobenius norm: ``atan2(a . vee(R - R^T), tr R - a^T R a)``."""
    vee = np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], axis=1)
    return np.arctan2(vee @ a, np.trace(R, axis1=1, axis2=2) - np.einsum("i,nij,j->n", a, R, a))


def _nearest_quat(R, rot_to_quat):
    """Unit quaternions of the rotations nearest to ``R`` (N, 3, 3) (polar
    factor), with ``w >= 0``."""
    U, _, Vt = np.linalg.svd(R)
    D = np.ones((R.shape[0], 3))
    D[:, 2] = np.sign(np.linalg.det(U @ Vt))
    Rn = U @ (D[:, :, None] * Vt)
    q = np.array([rot_to_quat(r) for r in Rn])
    return np.where(q[:, :1] < 0, -q, q)


def _ad_inv_apply(X, V):
    """``Ad_{X^{-1}} V`` for (N, nb, 4, 4) transforms and (N, nb, 6) twists:
    ``(R^T w, R^T (v - p x w))``."""
    Rm, p = X[..., :3, :3], X[..., :3, 3]
    w, v = V[..., :3], V[..., 3:]
    Rt_w = np.einsum("...ji,...j->...i", Rm, w)
    Rt_v = np.einsum("...ji,...j->...i", Rm, v - np.cross(p, w))
    return np.concatenate([Rt_w, Rt_v], axis=-1)


def _ad_inv_T_apply(X, F):
    """``Ad_{X^{-1}}^T F``: a wrench on the child frame expressed on the
    parent frame, for (N, 4, 4) and (N, 6): ``(R m + p x R f, R f)``."""
    Rm, p = X[..., :3, :3], X[..., :3, 3]
    Rm_m = np.einsum("...ij,...j->...i", Rm, F[..., :3])
    Rf = np.einsum("...ij,...j->...i", Rm, F[..., 3:])
    return np.concatenate([Rm_m + np.cross(p, Rf), Rf], axis=-1)

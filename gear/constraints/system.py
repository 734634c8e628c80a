"""``gear.ConstrainedModel``: a tree plus loop closures (Kim Sec. 3).

``M ddq + b = tau + A^T lam`` (eq. 54), ``A dq = 0`` (eq. 55).  This module
holds the bookkeeping (resolving bodies, stacking rows, batches, results)
and the mechanism analysis (mobility, assembly, velocity projection); the
dynamics are delegated to the solver object (``"kkt"``).
"""
from __future__ import annotations

import numpy as np

from .._validate import as_batch, joint_mask
from ..algorithms.dynamics import _cached, _joint_dofs, _prescribed_mask
from ..joints import FREE, SPHERICAL, _check_quat
from ..parsers.common import LoopClosureSpec
from . import _kinematics as K
from .closures import CustomConstraint, JointCoupler, LoopClosure

__all__ = ["ConstrainedModel", "ConstraintResult", "Mobility", "AssemblyError", "RANK_RTOL"]

#: Singular values of ``A`` below ``RANK_RTOL * max`` count as zero in
#: :meth:`ConstrainedModel.mobility` (assembly leaves residuals of ~1e-12,
#: which perturb structurally zero singular values to about that size).
RANK_RTOL = 1e-8

_MISSING = object()

#: singular values of the rows below this fraction of the largest count as
#: none in ``assemble``'s Gauss-Newton steps and ``project_velocity``'s
#: minimum-norm correction.  Redundant rows (the Bricard linkage's five
#: rows on five joints, of rank four) leave a singular value at the level
#: of rounding (0 to 2e-15 of the largest at nearby assembled states);
#: LAPACK's default cut (machine epsilon times the size) kept the larger
#: ones, and a step along one turned rounding into motion: assemble then
#: stalled above 1e-12 from 20 to 29 of 300 nearby guesses, on AMD and
#: Intel kernels alike.
_RCOND = 1e-10


from .._core import ConstraintResult  # noqa: E402  (C slots: the native single-call path)


class AssemblyError(RuntimeError):
    """The loop closures cannot be closed from the given guess; the message
    says why (residual left, locked joints, iterations)."""


class Mobility:
    """Result of :meth:`ConstrainedModel.mobility`.

    Attributes
    ----------
    dof : int
        ``nv - rank A``: the instantaneous degrees of freedom.
    rank : int
    redundant : list of int
        Indices of rows that depend on the others (column-pivoted QR of
        ``A^T``: the rows left out of the pivot set).
    singular : bool
        True when ``rank`` is below the rank at nearby assembled
        configurations (a singular configuration, e.g. a collinear four-bar).
    grubler : int
        ``nv - nc`` (the Grübler-Kutzbach count).
    """

    def __init__(self, dof, rank, redundant, singular, grubler, sigma):
        self.dof, self.rank, self.redundant = dof, rank, redundant
        self.singular, self.grubler, self.sigma = singular, grubler, sigma

    def __repr__(self):
        return (f"Mobility(dof={self.dof}, rank={self.rank}, redundant={self.redundant}, "
                f"singular={self.singular}, grubler={self.grubler})")


def _bools(model, joints, name):
    # the joint mask as bool, for the native hybrid path
    return _prescribed_mask(model, joints, name).view(bool)


def _dependent_rows(A, rtol=1e-10, row_rtol=1e-8):
    """1.0 on the rows of ``A`` (m, n), or of each of a batch (N, m, n),
    that depend on the rows before them (the native routes' rule,
    ``_psd.pxd``'s psd_factor, on ``K = A A^T``: a pivot below ``rtol``
    times the largest diagonal or ``row_rtol`` times its own row's), else
    0.0."""
    A = np.asarray(A, dtype=float)
    B = A[None] if A.ndim == 2 else A
    K = B @ np.swapaxes(B, 1, 2)
    N, m = K.shape[:2]
    dep = np.zeros((N, m))
    dmax = np.max(np.diagonal(K, axis1=1, axis2=2), axis=1, initial=0.0)
    L = np.zeros_like(K)
    for j in range(m):
        s = K[:, j, j] - np.einsum("nk,nk->n", L[:, j, :j], L[:, j, :j])
        bad = ~(s > rtol * dmax) | ~(s > row_rtol * K[:, j, j])
        dep[:, j] = bad
        d = np.where(bad, 1.0, np.sqrt(np.where(bad, 1.0, s)))
        col = (K[:, j + 1:, j] - np.einsum("nik,nk->ni", L[:, j + 1:, :j], L[:, j, :j])) / d[:, None]
        L[:, j + 1:, j] = np.where(bad[:, None], 0.0, col)
        L[:, j, j] = np.where(bad, 0.0, d)
    return dep[0] if A.ndim == 2 else dep


def _held_rows(A, nheld):
    """1.0 on the ``nheld`` rows to hold dependent at a step's stages: the
    last in the order of the pivoted QR of ``A^T`` (largest row first), as
    the native kernels choose them after the sparse route
    (``_manifold.pxd``'s hold_rows; after the others they pivot on their
    own ``K``), else 0.0.  ``A`` (m, n) with ``nheld`` an int, or a batch
    (N, m, n) with ``nheld`` (N,)."""
    from scipy.linalg import qr

    A = np.asarray(A, dtype=float)
    if A.ndim == 3:
        return np.stack([_held_rows(a, int(k)) for a, k in zip(A, nheld)]) if len(A) else np.zeros(A.shape[:2])
    out = np.zeros(A.shape[0])
    if nheld <= 0:
        return out
    if A.size == 0:
        return out + 1.0
    _, perm = qr(A.T, mode="r", pivoting=True)
    out[perm[A.shape[0] - nheld:]] = 1.0
    return out


class ConstrainedModel:
    """A kinematic tree closed by constraints (Kim Sec. 3).

    Parameters
    ----------
    model : gear.Model
        The spanning tree.
    constraints : sequence, optional
        :class:`gear.LoopClosure`, :class:`gear.CustomConstraint` or the
        ``LoopClosureSpec`` entries of ``model.loop_closures`` (read from
        MJCF).  Default: ``model.loop_closures``.
    solver : str or gear.solvers.ConstraintSolver subclass
        ``"kkt"`` (default; Lagrange multipliers in reduced coordinates),
        ``"projection"``, ``"soft"``, or a plugin's name
        (``gear.solvers.available()``).
    **solver_options
        Options of the solver, e.g. ``rcond`` (default 1e-10) of the hard
        solvers, ``stiffness`` and ``damping`` of ``"soft"``.

    Examples
    --------
    >>> import numpy as np, gear
    >>> fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    >>> sys = gear.ConstrainedModel(fb)
    >>> sys.nc, sys.mobility(fb.neutral()).dof
    (3, 1)
    """

    def __init__(self, model, constraints=None, solver="kkt", **solver_options):
        from ..model import Model

        if not isinstance(model, Model):
            raise TypeError(f"model must be a gear.Model, got {type(model).__name__}")
        self.model = model
        self._md = model.data
        if constraints is None:
            constraints = list(getattr(model, "loop_closures", []))
        items = []
        for k, c in enumerate(constraints):
            if isinstance(c, LoopClosureSpec):
                c = LoopClosure.from_spec(c)
            if isinstance(c, JointCoupler):
                c = self._coupler_rows(k, c)
            if not isinstance(c, (LoopClosure, CustomConstraint)):
                raise TypeError(f"constraints[{k}] must be a gear.LoopClosure, gear.CustomConstraint "
                                f"or gear.JointCoupler, got {type(c).__name__}")
            items.append(c)
        self.constraints = items
        self._bodies = []
        q0 = getattr(model, "qpos0", None)
        q0 = model.neutral() if q0 is None else np.asarray(q0, float)
        self._lengths = {}
        nrows = []
        for k, c in enumerate(items):
            if isinstance(c, LoopClosure):
                try:
                    ia, ib = model.body_index(c.body_a), model.body_index(c.body_b)
                except (KeyError, IndexError) as exc:
                    raise KeyError(f"constraints[{k}] ({c!r}): {exc.args[0]}") from None
                if ia == ib:
                    raise ValueError(f"constraints[{k}] ({c!r}) ties body {ia} to itself")
                if self._rigidly_connected(ia, ib):
                    raise ValueError(
                        f"constraints[{k}] ({c!r}) ties two bodies that only fixed joints connect "
                        f"({self._body_label(ia)} and {self._body_label(ib)}): its rows are zero "
                        "whatever the state, so it constrains nothing; remove it, or give a joint "
                        "between them a degree of freedom")
                self._bodies.append((ia, ib))
                nrows.append(c.nrows)
            else:
                self._bodies.append(None)
                A = np.asarray(c.jacobian(q0), float)
                if A.ndim != 2 or A.shape[1] != model.nv:
                    raise ValueError(f"constraints[{k}]: jacobian(q) must return (m, {model.nv}), "
                                     f"got shape {A.shape}")
                nrows.append(A.shape[0])
        self._nrows = nrows
        self.nc = int(sum(nrows))
        self._set_default_lengths(q0, only_missing=True)
        self.solver = self._make_solver(solver, solver_options)

    # -- construction helpers ---------------------------------------------
    def _coupler_rows(self, k, c):
        """A :class:`JointCoupler` as the constant row ``e_j - m e_s``."""
        model = self.model
        idx = []
        for arg, name in (("joint", c.joint), ("source", c.source)):
            try:
                i = model.joint_index(name)
            except KeyError:
                raise KeyError(f"constraints[{k}] ({c!r}): {arg}: no joint named {name!r}") from None
            jt = model.joints[i]
            if jt.nq != 1 or jt.nv != 1:
                raise ValueError(f"constraints[{k}] ({c!r}): joint {name!r} has nq={jt.nq}; "
                                 "couplers tie one-coordinate joints")
            idx.append((model.idx_q(name).start, model.idx_v(name).start))
        (qj, vj), (qs, vs) = idx
        row = np.zeros((1, model.nv))
        row[0, vj] = 1.0
        row[0, vs] -= c.multiplier
        m, o = c.multiplier, c.offset
        nv = model.nv
        cc = CustomConstraint(lambda q: row, lambda q, dq: np.zeros(1),
                              residual=lambda q: np.array([q[qj] - m * q[qs] - o]), name=c.name,
                              jacobian_derivative=lambda q: np.zeros((nv, 1, nv)),     # a constant row
                              bias_derivative=lambda q, dq: (np.zeros((1, nv)), np.zeros((1, nv))))
        cc.coupler = c
        cc._native_row = (qj, vj, qs, vs, float(m), float(o))
        return cc

    def _native(self, rcond=1e-10, cfm=0.0, damping=0.0, fresh=False):
        """The rows encoded for the native kernels (``ClosC`` of
        ``gear/constraints/_cwork.pxd``), or None when a constraint is a Python callable
        (:class:`CustomConstraint`), which only the NumPy path evaluates.
        Cached per rank tolerance and, for soft constraints, compliance
        ``cfm`` and ``damping`` (the cache is emptied when the rod lengths
        are set).  ``fresh``: a new object, not cached (for a solver that
        attaches its own plan to it)."""
        key = rcond if cfm == 0.0 and damping == 0.0 else (rcond, cfm, damping)
        if fresh:
            key = object()
        try:
            return self._native_cache[key]
        except KeyError:
            pass
        from .. import _core
        from .closures import _ROWS

        cache = self._native_cache
        codes = {"pos": 0, "axis": 1, "dot": 2, "dist": 3}
        rows = {n: [] for n in ("rtype", "ri", "rj", "rk", "rcoef", "roff", "rqi", "rqj")}
        nk = len(self.constraints)
        ba, bb = np.full(nk, -1), np.full(nk, -1)
        pa, pb, length = np.zeros((nk, 12)), np.zeros((nk, 12)), np.zeros(nk)

        def add(t, i, j, k, coef=0.0, off=0.0, qi=0, qj=0):
            for n, v in zip(rows, (t, i, j, k, coef, off, qi, qj)):
                rows[n].append(v)

        for k, c in enumerate(self.constraints):
            if isinstance(c, LoopClosure):
                ba[k], bb[k] = self._bodies[k]
                for arr, P in ((pa, c.placement_a), (pb, c.placement_b)):
                    arr[k, :9], arr[k, 9:] = np.asarray(P.R).reshape(9), P.p
                length[k] = self._lengths.get(k) or 0.0
                for typ, i, j in _ROWS[c.kind]:
                    add(codes[typ], i or 0, j or 0, k)
            elif getattr(c, "_native_row", None) is not None:
                qj, vj, qs, vs, m, o = c._native_row
                add(4, vj, vs, -1, m, o, qj, qs)
            else:
                cache[key] = None
                return None
        sup = set()
        for b in np.concatenate([ba, bb]):
            b = int(b)
            while b >= 0 and b not in sup:
                sup.add(b)
                b = int(self.model.parents[b])
        nd = _core.ClosureData(self.model.data, *(np.array(rows[n]) for n in rows),
                               ba, bb, pa, pb, length, np.array(sorted(sup), dtype=np.int32),
                               float(rcond), float(cfm), float(damping))
        if not fresh:
            cache[key] = nd
        return nd


    def _make_solver(self, solver, options):
        from ..solvers import get_solver

        return get_solver(solver)(self, **options)

    def with_solver(self, name, **options):
        """The same model and constraints with another solver (a name or a
        :class:`gear.solvers.ConstraintSolver` subclass)."""
        other = ConstrainedModel(self.model, self.constraints, solver=name, **options)
        other._lengths, other._lengths_fixed = dict(self._lengths), self._lengths_fixed
        return other

    def _set_default_lengths(self, q, only_missing):
        kin = None
        for k, c in enumerate(self.constraints):
            if isinstance(c, LoopClosure) and c.kind == "distance" and c.params.get("distance") is None:
                if only_missing and k in self._lengths:
                    continue
                if kin is None:
                    kin = K.tree_kinematics(self.model, q)
                ia, ib = self._bodies[k]
                g, _, _ = K.closure_rows(kin, c, ia, ib, None, length=0.0)
                self._lengths[k] = float(g[0])
            elif isinstance(c, LoopClosure) and c.kind == "distance":
                self._lengths[k] = c.params["distance"]
        self._lengths_fixed = not only_missing
        self._native_cache = {}

    # -- validation ----------------------------------------------------------
    def _q(self, q, name="q"):
        """``(nq,)`` or ``(N, nq)``: finite, unit quaternions."""
        out, is_b = as_batch(name, q, (self.model.nq,))
        for i, j in enumerate(self.model.joints):
            if j.kind == SPHERICAL or j.kind == FREE:
                s = self.model.idx_q(self.model.joint_names[i])
                _check_quat(out[:, s][:, -4:], f"{name} (joint {self.model.joint_names[i]!r})")
        return out if is_b else out[0]

    def _v(self, v, name, N, inner=None):
        """``inner`` (default ``(nv,)``) for a single state (``N`` None), or
        ``(N,) + inner`` (a single value is broadcast to the batch)."""
        inner = (self.model.nv,) if inner is None else inner
        out, is_b = as_batch(name, v, inner)
        if N is None:
            if is_b:
                raise ValueError(f"{name} has a batch axis ({out.shape[0]} states) but q is "
                                 f"a single state; expected shape {inner}")
            return out[0]
        if not is_b:
            return np.broadcast_to(out[0], (N,) + tuple(inner)).copy()
        if out.shape[0] != N:
            raise ValueError(f"{name} has {out.shape[0]} states but q has {N}")
        return out

    def _state(self, q, f_ext=None, **vectors):
        """Validate a state: ``(q, N, *vectors, f_ext)`` with ``N`` None for
        one state, each keyword a vector (nv,) or batch (N, nv) checked
        under its name, ``f_ext`` (nbodies, 6) or (N, nbodies, 6) or None."""
        q = self._q(q)
        N = q.shape[0] if q.ndim == 2 else None
        out = [self._v(v, name, N) for name, v in vectors.items()]
        if f_ext is not None:
            f_ext = self._v(f_ext, "f_ext", N, (self.model.nbodies, 6))
        return (q, N, *out, f_ext)

    # -- rows ----------------------------------------------------------------
    def _rows_native(self, q, dq=None):
        """``(g, A, dA dq)`` for a batch ``q`` (N, nq) from the native
        kernel, or None when a constraint is a Python callable or a
        distance closure's points coincide (the NumPy path says which)."""
        nd = self._native()
        if nd is None:
            return None
        from .. import _core

        N = q.shape[0]
        g, A, bias = np.empty((N, self.nc)), np.empty((N, self.nc, self.model.nv)), np.empty((N, self.nc))
        status = np.zeros(N, dtype=np.int32)
        _core.closed_rows(self.model.data, nd, np.ascontiguousarray(q, dtype=float),
                          None if dq is None else np.ascontiguousarray(dq, dtype=float),
                          g, A, bias, status)
        return None if status.any() else (g, A, bias)

    def _rows(self, q, dq=None, want_g=False):
        out = self._rows_native(q.reshape(1, -1), None if dq is None else np.reshape(dq, (1, -1)))
        if out is None:
            return self._rows_numpy(q, dq, want_g)
        g, A, bias = out
        return (g[0], A[0], bias[0]) if want_g else (A[0], bias[0])

    def _rows_batch(self, q, dq=None):
        """``(g, A, dA dq)`` for a batch ``q`` (N, nq) (``g``: the holonomic
        rows), natively when the constraints allow, else state by state."""
        out = self._rows_native(q, dq)
        if out is not None:
            return out
        outs = [self._rows(q[k], None if dq is None else dq[k], want_g=True) for k in range(q.shape[0])]
        return (np.stack([o[0] for o in outs]), np.stack([o[1] for o in outs]),
                np.stack([o[2] for o in outs]))

    def _rows_numpy(self, q, dq=None, want_g=False):
        kin = K.tree_kinematics(self.model, q, dq)
        A = np.empty((self.nc, self.model.nv))
        bias = np.zeros(self.nc)
        g = []
        r = 0
        for k, c in enumerate(self.constraints):
            m = self._nrows[k]
            if isinstance(c, LoopClosure):
                ia, ib = self._bodies[k]
                gk, A[r:r + m], bias[r:r + m] = K.closure_rows(kin, c, ia, ib, dq, self._lengths.get(k))
                g.append(gk)
            else:
                Ak = np.asarray(c.jacobian(q), float)
                if Ak.shape != (m, self.model.nv):
                    raise ValueError(f"constraints[{k}]: jacobian(q) returned shape {Ak.shape}, "
                                     f"expected {(m, self.model.nv)}")
                A[r:r + m] = Ak
                if dq is not None:
                    bias[r:r + m] = np.asarray(c.bias(q, dq), float).reshape(m)
                if c.residual is not None:
                    g.append(np.asarray(c.residual(q), float).reshape(m))
            r += m
        if want_g:
            return (np.concatenate(g) if g else np.zeros(0)), A, bias
        return A, bias

    def _holonomic_mask(self):
        mask = []
        for k, c in enumerate(self.constraints):
            mask += [c.holonomic] * self._nrows[k]
        return np.array(mask, dtype=bool)

    def constraint_residual(self, q):
        """Position residual of the holonomic rows, shape ``(n_holonomic,)``
        (or ``(N, n_holonomic)``); zero when every loop is closed."""
        q = self._q(q)
        if q.ndim == 2:
            return np.stack([self.constraint_residual(x) for x in q])
        return self._rows(q, want_g=True)[0]

    def constraint_jacobian(self, q):
        """``A(q)``, shape ``(nc, nv)`` (or ``(N, nc, nv)``)."""
        q = self._q(q)
        if q.ndim == 2:
            return self._rows_batch(q)[1]
        return self._rows(q)[0]

    def constraint_bias(self, q, dq):
        """``dA dq``, shape ``(nc,)`` (or ``(N, nc)``)."""
        q = self._q(q)
        dq = self._v(dq, "dq", q.shape[0] if q.ndim == 2 else None)
        if q.ndim == 2:
            return self._rows_batch(q, dq)[2]
        return self._rows(q, dq)[1]

    # -- the spanning tree -----------------------------------------------------
    def tree_statistics(self, q=None):
        """How the spanning tree shapes the reduced-coordinate solve.

        A closure's rows move the dofs on the two root paths of its bodies
        (less their common part); ``K = A M^{-1} A^T`` couples two rows
        when their dofs share a root path (``M^{-1} = L^{-1} L^{-T}`` with
        the tree-sparse factor ``L``).  A shallow tree whose loops close
        between neighbouring branches gives a sparse, banded ``K``; a deep
        chain whose every loop spans it gives a dense one.

        Parameters
        ----------
        q : array_like, shape (nq,), optional
            Where to read the rows' supports (default: the neutral
            configuration).  Only their pattern matters, but a row that
            vanishes at ``q`` (a planar loop's out-of-plane row) counts as
            empty: pass an assembled configuration.

        Returns
        -------
        dict
            ``depth`` (the most joints with a degree of freedom on a root
            path), ``rows`` (``nc``), ``nnz_A`` (non-zeros of ``A``),
            ``fill_K`` (the fraction of ``K``'s entries that are not
            structurally zero) and ``nnz_K``.
        """
        model = self.model
        q = model.neutral() if q is None else self._q(q)
        A = self.constraint_jacobian(q)
        m, nv = A.shape
        depth_of, anc = [], []
        for i, j in enumerate(model.joints):
            p = model.parents[i]
            up = set() if p < 0 else set(anc[p])
            if j.nv:
                up |= set(range(model._iv[i], model._iv[i] + j.nv))
            anc.append(up)
            depth_of.append((0 if p < 0 else depth_of[p]) + (1 if j.nv else 0))
        # the ancestors (root paths) of every dof
        dof_anc = [set() for _ in range(nv)]
        for i, j in enumerate(model.joints):
            for d in range(model._iv[i], model._iv[i] + j.nv):
                dof_anc[d] = anc[i]
        scale = np.abs(A).max(initial=0.0)
        nzA = np.abs(A) > 1e-12 * max(scale, 1e-300)
        # each row's support closed under ancestors; K couples two rows
        # whose closed supports meet (a boolean product, sparse)
        anc_mat = np.zeros((nv, nv), dtype=bool)
        for d in range(nv):
            anc_mat[d, list(dof_anc[d])] = True
        import scipy.sparse as sp

        R = sp.csr_matrix((sp.csr_matrix(nzA.astype(float)) @ sp.csr_matrix(anc_mat.astype(float))) > 0,
                          dtype=float)
        nnz_K = int(((R @ R.T) > 0).nnz)
        return {"depth": max(depth_of, default=0), "rows": m, "nnz_A": int(nzA.sum()),
                "nnz_K": nnz_K, "fill_K": nnz_K / (m * m) if m else 0.0}

    # -- mechanism analysis ----------------------------------------------------
    def _rank(self, A):
        if A.size == 0:
            return 0, np.zeros(0)
        s = np.linalg.svd(A, compute_uv=False)
        return int((s > RANK_RTOL * max(s[0], 1e-300)).sum()), s

    def mobility(self, q):
        """Instantaneous mobility at ``q`` (rank-revealing SVD and QR of ``A``;
        singular values below ``RANK_RTOL = 1e-8`` times the largest are zero).

        Returns
        -------
        Mobility
            ``.dof``, ``.rank``, ``.redundant``, ``.singular``, ``.grubler``.
        """
        from scipy.linalg import qr

        q = self._q(q)
        if q.ndim != 1:
            raise ValueError("mobility takes one configuration, shape (nq,)")
        A = self.constraint_jacobian(q)
        rank, s = self._rank(A)
        redundant = []
        if A.shape[0] > rank:
            _, _, piv = qr(A.T, pivoting=True, mode="economic")
            redundant = sorted(int(i) for i in piv[rank:])
        # generic rank: the rank at nearby configurations on the constraint
        # manifold (move along the null space of A, re-assemble)
        generic = rank
        rng = np.random.default_rng(12345)
        N = np.linalg.svd(A)[2][rank:].T if A.size else np.eye(self.model.nv)
        for _ in range(3):
            if N.shape[1] == 0:
                break
            step = N @ rng.standard_normal(N.shape[1])
            step *= 1e-2 / max(np.linalg.norm(step), 1e-300)
            try:
                qn = self.assemble(self.model.integrate(q, step), tol=1e-12)
            except AssemblyError:
                continue
            generic = max(generic, self._rank(self.constraint_jacobian(qn))[0])
        return Mobility(self.model.nv - rank, rank, redundant, rank < generic,
                        self.model.nv - self.nc, s)

    def _locked_dofs(self, locked, name="locked"):
        """Bool per velocity coordinate on the dofs of ``locked`` (None or
        an empty list: none; joint names, one name, or a bool per joint)."""
        if locked is None:
            return np.zeros(self.model.nv, dtype=bool)
        return self._joint_dofs(locked, name).copy()

    def assemble(self, q_guess, locked=None, tol=1e-12, max_iter=100, max_step=0.5):
        """Close every loop: Gauss-Newton on the holonomic residual with a
        backtracking line search, moving on the configuration manifold
        (``model.integrate``); the ``locked`` joints keep their guess.

        Parameters
        ----------
        q_guess : array_like, shape (nq,)
        locked : list of str, str, or array_like of bool (nbodies,), optional
            Joints held at their value in ``q_guess``: their names (None or
            an empty list: none; one name), or a bool per joint.
        tol : float
            Converged when ``max|residual| <= tol``.
        max_iter : int
        max_step : float
            Largest change of any coordinate in one iteration (rad or m): a
            trust region that keeps the steps bounded near singular
            configurations.

        Returns
        -------
        q : ndarray, shape (nq,)

        Raises
        ------
        AssemblyError
            When the residual cannot be brought below ``tol`` (the loop
            cannot close, e.g. links too short, or the locked joints forbid
            it); the message gives the residual reached.
        """
        q = self._q(q_guess, "q_guess")
        if q.ndim != 1:
            raise ValueError("assemble takes one configuration, shape (nq,)")
        if not self._lengths_fixed:
            self._set_default_lengths(q, only_missing=False)
        free = ~self._locked_dofs(locked)
        hol = self._holonomic_mask()
        g, A, _ = self._rows(q, want_g=True)
        A = A[hol]
        err = float(np.abs(g).max()) if g.size else 0.0
        it = 0
        while err > tol and it < max_iter:
            it += 1
            step = np.zeros(self.model.nv)
            if free.any():
                step[free] = -np.linalg.lstsq(A[:, free], g, rcond=_RCOND)[0]
            # trust region: near a singular configuration the minimum-norm
            # step along a tiny singular value is huge (angles of 1e10 rad);
            # no coordinate moves more than max_step per iteration
            big = float(np.abs(step).max(initial=0.0))
            if big > max_step:
                step *= max_step / big
            t = 1.0
            while True:
                qn = self.model.integrate(q, step * t)
                gn, An, _ = self._rows(qn, want_g=True)
                en = float(np.abs(gn).max())
                if en < err or t < 1e-6:
                    break
                t *= 0.5
            if en >= err:
                break
            q, g, A, err = qn, gn, An[hol], en
        if err > tol:
            # what is left where no joint can act: rows that are redundant
            # and disagree (a model file's anchors that close one loop twice,
            # differently at the level of their rounding)
            # (directions whose singular value is below 1e-6 of the largest
            # count as none: closing a 1e-8 gap along them takes radians)
            Af = A[:, free] if free.any() else np.zeros((len(g), 0))
            sv = np.linalg.svd(Af, compute_uv=False) if Af.size else np.zeros(0)
            cut = 1e-6 * float(sv.max(initial=0.0))
            rank = int((sv > cut).sum())
            left = g - (Af @ np.linalg.lstsq(Af, g, rcond=1e-6)[0] if Af.size else 0.0)
            if rank < len(g) and float(np.abs(left).max(initial=0.0)) > 0.5 * err:
                raise AssemblyError(
                    f"could not close the loops: max residual {err:.3g} after {it} iterations "
                    f"(tolerance {tol:g}), and no small joint motion reduces it: the rows are redundant (rank "
                    f"{rank} of {len(g)}, singular values below 1e-6 of the largest counted as none) "
                    f"and disagree by {float(np.abs(left).max()):.3g}, so no "
                    "configuration holds them all (a model file whose anchors close a loop twice, "
                    "differently at that level; MuJoCo's soft constraints absorb it). Pass a tol "
                    "above the disagreement to accept the closest configuration")
            raise AssemblyError(
                f"could not close the loops: max residual {err:.3g} after {it} iterations "
                f"(tolerance {tol:g}); the closure may be unreachable from this guess "
                "(links too short or too long, or the locked joints "
                f"{self._names_of(locked)} forbid it)")
        flipped = self._flipped(q)
        if flipped:
            raise AssemblyError(
                "the rows hold, but not as the closures mean: " + "; ".join(
                    f"{name} ({kind}) has its frames turned {deg:.0f} degrees apart"
                    for name, kind, deg in flipped)
                + ". A weld's or prismatic closure's orientation rows (dot products of the frames' "
                "axes) also vanish at half-turn and 120-degree turns of one frame; start from a "
                "guess nearer the intended assembly")
        return q

    def _flipped(self, q):
        """The weld and prismatic closures (whose frames must have equal
        orientations) that hold their rows at ``q`` with the frames turned
        apart: spurious roots of their orientation rows, ``(name, kind,
        angle in degrees)`` each."""
        out = []
        kin = None
        for k, c in enumerate(self.constraints):
            if not isinstance(c, LoopClosure) or c.kind not in ("weld", "prismatic"):
                continue
            if kin is None:
                kin = K.tree_kinematics(self.model, q)
            ia, ib = self._bodies[k]
            RA = K._frame(kin, ia, c.placement_a)[0]
            RB = K._frame(kin, ib, c.placement_b)[0]
            cos = float(np.clip((np.trace(RA.T @ RB) - 1.0) / 2.0, -1.0, 1.0))
            if cos < 0.5:                     # more than 60 degrees: no rounding
                out.append((repr(c.name) if c.name else f"constraints[{k}]", c.kind,
                            float(np.degrees(np.arccos(cos)))))
        return out

    def _names_of(self, joints):
        """The names of the joints in ``joints`` (as :meth:`_joint_mask`
        takes them; None: none), sorted, for messages."""
        if joints is None:
            return []
        mask = self._joint_mask(joints, "locked")
        return sorted(n for n, m in zip(self.model.joint_names, mask) if m)

    def project_velocity(self, q, dq, locked=None):
        """The velocity nearest ``dq`` (Euclidean) with ``A dq = 0``, the
        ``locked`` joints keeping their entries of ``dq``.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        dq : array_like, shape (nv,) or (N, nv)
        locked : list of str, str, or array_like of bool (nbodies,), optional
            Joints whose entries of ``dq`` are kept: their names (None or an
            empty list: none; one name), or a bool per joint.

        Returns
        -------
        ndarray, shape (nv,) or (N, nv)
        """
        q = self._q(q)
        dq = self._v(dq, "dq", q.shape[0] if q.ndim == 2 else None)
        if q.ndim == 2:
            return np.stack([self.project_velocity(x, v, locked) for x, v in zip(q, dq)])
        lock = self._locked_dofs(locked)
        A = self.constraint_jacobian(q)
        out = dq.copy()
        free = ~lock
        r = A @ dq
        out[free] -= np.linalg.lstsq(A[:, free], r, rcond=_RCOND)[0] if free.any() else 0.0
        return out

    # -- dynamics ----------------------------------------------------------------
    def forward_dynamics(self, q, dq, tau, f_ext=None):
        """Constrained forward dynamics (Kim eqs. 67-69).

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
            A configuration that closes the loops.
        dq : array_like, shape (nv,) or (N, nv)
            A velocity with ``A dq = 0``.
        tau : array_like, shape (nv,) or (N, nv)
        f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional

        Returns
        -------
        ConstraintResult
            ``.ddq``, ``.lam``, ``.residual`` (``|A ddq + dA dq|``),
            ``.success``, ``.message``, ``.solver``, ``.stats``.
        """
        if f_ext is None:
            ff = self._native_cache.get("ff", _MISSING)      # the allocation-light path
            if ff is _MISSING:
                ff = self._native_cache["ff"] = self.solver.fast_forward()
            if ff is not None:
                out = ff(q, dq, tau)
                if out is not None:
                    return out
        q, N, dq, tau, f_ext = self._state(q, f_ext, dq=dq, tau=tau)
        if N is None:
            ddq, lam, res, stats = self.solver.forward(q, dq, tau, f_ext)
            ok = bool(np.isfinite(ddq).all())
            return ConstraintResult(ddq=ddq, lam=lam, residual=res, success=ok,
                                    message="ok" if ok else "non-finite result",
                                    solver=self.solver.name, stats=stats)
        fast = self.solver.forward_batch(q, dq, tau, f_ext)
        if fast is not None:
            ddq, lam, res, stats = fast
            ok = np.isfinite(ddq).all(axis=1)
            return ConstraintResult(ddq=ddq, lam=lam, residual=res, success=ok,
                                    message="ok" if ok.all() else "non-finite result in some states",
                                    solver=self.solver.name, stats=stats)
        outs = [self.solver.forward(q[k], dq[k], tau[k], None if f_ext is None else f_ext[k])
                for k in range(N)]
        ddq = np.stack([o[0] for o in outs])
        ok = np.isfinite(ddq).all(axis=1)
        return ConstraintResult(ddq=ddq, lam=np.stack([o[1] for o in outs]),
                                residual=np.array([o[2] for o in outs]), success=ok,
                                message="ok" if ok.all() else "non-finite result in some states",
                                solver=self.solver.name,
                                stats={"factorizations": sum(o[3]["factorizations"] for o in outs)})

    def _stage_dynamics(self, q, dq, tau, f_ext=None, held=None, ddq=None, prescribed=None):
        """Forward dynamics (or, with ``prescribed``, hybrid dynamics with the
        accelerations ``ddq`` of those joints) of a batch ``(N, nq)`` within
        an integrator's step: ``(ddq, lam, found, tau)`` (``tau`` the
        prescribed joints' torques, None for forward dynamics).

        ``held`` None (the step's start): ``found`` (N, nc) is 1.0 on the
        rows to hold at the step's stages (those the solve found
        dependent, chosen as below).  Else (the step's stages) the rows
        marked in ``held`` are treated as dependent -- left out, with zero
        multipliers -- and ``found`` is None.  A stage's state is slightly
        off the rows (RK4's stages by O(h^2)), where a row that is
        redundant on them (an achilles rod's row, a distance that a closed
        loop already fixes) can be independent by a small angle; kept, its
        multiplier turns that angle into a large, wrong acceleration.  The
        "kkt" and "projection" solvers hold rows (their native routes in
        ``_psd.pxd``'s ``psd_factor``, ``_spchol.pxd`` and
        ``_projection.pxd``, their NumPy paths as zero rows); where the
        start's elimination chose which rows of a dependent set to mark,
        as many are chosen again by pivoting, largest first (native:
        ``_manifold.pxd``'s ``hold_rows``, as the native rollouts; NumPy
        path: ``_held_rows``).  Other solvers solve as
        :meth:`forward_dynamics` does (``found`` None)."""
        solver = self.solver
        N = q.shape[0]
        if not self.nc or not solver._holds_rows:
            if prescribed is None:
                r = self.forward_dynamics(q, dq, tau, f_ext)
                return r.ddq, r.lam, None, None
            r = self.hybrid_dynamics(q, dq, ddq, tau, prescribed, f_ext)
            return r.ddq, r.lam, None, r.tau
        if prescribed is None:
            q, _, dq, tau, fe = self._state(q, f_ext, dq=dq, tau=tau)
            u = None
        else:
            q, _, dq, ddq, tau, fe = self._state(q, f_ext, dq=dq, ddq=ddq, tau=tau)
            u = self._joint_dofs(prescribed, "prescribed")
        arr = np.zeros((N, self.nc)) if held is None else np.array(held, dtype=float, order="C")
        out = solver._native_call(q, dq, ddq, tau, u, fe, held=arr, hold=1 if held is None else 2)
        if out is not None:
            ddq_o, tau_o, lam, info = out
            solver._batch_stats(N, info)
            return ddq_o, lam, (arr if held is None else None), None if u is None else tau_o
        found = None
        if held is None:
            # the number held: the native routes' rule (_dependent_rows)
            A = self._free_columns(self._rows_batch(q)[1], u)
            found = _held_rows(A, _dependent_rows(A).sum(axis=1).astype(int))
        ddq_o, lam, tau_o = np.empty((N, self.model.nv)), np.empty((N, self.nc)), np.empty((N, self.model.nv))
        for k in range(N):
            solver._held = None if held is None else arr[k] != 0.0
            try:
                fk = None if fe is None else fe[k]
                if u is None:
                    ddq_o[k], lam[k], _, _ = solver.forward(q[k], dq[k], tau[k], fk)
                else:
                    tau_o[k], ddq_o[k], lam[k], _, _ = solver.hybrid(q[k], dq[k], ddq[k], tau[k], u, fk)
            finally:
                solver._held = None
                solver._cache = None
        return ddq_o, lam, found, None if u is None else tau_o

    @staticmethod
    def _free_columns(A, u):
        """``A`` without the prescribed dofs' columns (``u`` (nv,) bool, or
        None: all kept)."""
        return A if u is None else A[..., ~np.asarray(u, dtype=bool)]

    # -- derivatives -----------------------------------------------------------
    def forward_dynamics_derivatives(self, q, dq, tau, f_ext=None):
        """Analytic derivatives of :meth:`forward_dynamics` (ddq and lam).

        The KKT system (Kim eqs. 54, 67-69) differentiated at its solution:
        the tree's inverse-dynamics derivatives (Kim Table 5) and the
        derivatives of the rows ``A(q)`` and of ``dA dq``
        (:mod:`gear.constraints.derivatives`).  ``q`` is perturbed in the
        tangent space (``q (+) eps e_k``, as :func:`gear.forward_dynamics_derivatives`),
        off the constraint manifold too: the derivative of the KKT answer at
        the perturbed state.  With redundant rows ``ddq``'s derivative is
        unique and ``lam``'s is that of the minimum-norm multiplier, where
        the rank of ``A`` does not change nearby.  Exact solvers only (not
        ``"soft"``).  :class:`gear.CustomConstraint` rows use their
        ``jacobian_derivative`` / ``bias_derivative`` when given, else
        central differences.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        dq, tau : array_like, shape (nv,) or (N, nv)
        f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional

        Returns
        -------
        ClosedDerivatives
            ``.ddq_dq``, ``.ddq_ddq``, ``.ddq_dtau`` (nv, nv), ``.lam_dq``,
            ``.lam_ddq``, ``.lam_dtau`` (nc, nv), and ``.ddq``, ``.lam``
            (a leading axis N for a batch).

        Examples
        --------
        >>> import gear, numpy as np
        >>> sys, q = gear.mechanisms.four_bar()
        >>> d = sys.forward_dynamics_derivatives(q, np.zeros(3), np.zeros(3))
        >>> d.ddq_dq.shape, d.lam_dtau.shape
        ((3, 3), (3, 3))
        """
        if f_ext is None:
            fd = self._native_cache.get("fd", _MISSING)      # the allocation-light path
            if fd is _MISSING:
                from .derivatives import fast_forward_derivatives

                fd = self._native_cache["fd"] = fast_forward_derivatives(self)
            if fd is not None:
                out = fd(q, dq, tau)
                if out is not None:
                    return out
        from .derivatives import forward_dynamics_derivatives

        return forward_dynamics_derivatives(self, q, dq, tau, f_ext)

    def inverse_dynamics_derivatives(self, q, dq, ddq, actuated, tau_passive=None, f_ext=None):
        """Analytic derivatives of :meth:`inverse_dynamics` (``.tau`` and
        ``.lam``, objective ``"min_constraint_force"``) with respect to
        ``q`` (tangent space), ``dq`` and ``ddq``.

        Parameters
        ----------
        q, dq, ddq, actuated, tau_passive, f_ext
            As :meth:`inverse_dynamics`.  The actuation must make the state
            exact (a ``ValueError`` says when it is under-actuated).

        Returns
        -------
        ClosedDerivatives
            ``.tau_dq``, ``.tau_ddq``, ``.tau_dddq`` (nv, nv; zero rows for
            the passive joints), ``.lam_dq``, ``.lam_ddq``, ``.lam_dddq``
            (nc, nv), and ``.tau``, ``.lam``.
        """
        if f_ext is None:
            fi = self._native_cache.get("id", _MISSING)      # the allocation-light path
            if fi is _MISSING:
                from .derivatives import fast_inverse_derivatives

                fi = self._native_cache["id"] = fast_inverse_derivatives(self)
            if fi is not None:
                out = fi(q, dq, ddq, actuated, tau_passive)
                if out is not None:
                    return out
        from .derivatives import inverse_dynamics_derivatives

        return inverse_dynamics_derivatives(self, q, dq, ddq, actuated, tau_passive, f_ext)

    def linearize(self, q, dq, tau, f_ext=None, minimal=False):
        """Continuous-time linearisation of the closed-chain forward dynamics.

        Parameters
        ----------
        q, dq, tau, f_ext
            As :meth:`forward_dynamics`.
        minimal : bool
            False: ``(A, B)`` in ``dx = (delta, d_dq)`` (2 nv), as
            :func:`gear.linearize`.  True: ``(A_r, B_r, G)`` on the
            constraint manifold in ``dof`` coordinates: ``G`` (nv, dof) is an
            orthonormal basis of ``null(A(q))``, ``delta = G z`` and
            ``d_dq = G v + H z`` (``H = -A^+ d(A dq)/dq G`` keeps ``A dq = 0``
            to first order; zero at rest), and ``d/dt (z, v) = A_r (z, v) +
            B_r d_tau`` with ``A_r`` (2 dof, 2 dof), ``B_r`` (2 dof, nv).  For
            LQR on a parallel mechanism: the feedback ``d_tau = -K (z, v)``
            with ``z = G^T delta``, ``v = G^T d_dq``.

        Returns
        -------
        (A, B) or (A_r, B_r, G)
            With a leading batch axis for a batch.

        Examples
        --------
        >>> import gear, numpy as np
        >>> sys, q = gear.mechanisms.four_bar()
        >>> Ar, Br, G = sys.linearize(q, np.zeros(3), np.zeros(3), minimal=True)
        >>> Ar.shape, Br.shape, G.shape
        ((2, 2), (2, 3), (3, 1))
        """
        from .derivatives import linearize

        return linearize(self, q, dq, tau, f_ext, minimal)

    def _rigidly_connected(self, ia, ib):
        """True when no joint with a degree of freedom lies between bodies
        ia and ib (-1: the world) in the tree."""
        def path(i):
            out = set()
            while i >= 0:
                out.add(i)
                i = self.model.parents[i]
            return out

        return all(self.model.joints[i].nv == 0 for i in path(ia) ^ path(ib))

    def _body_label(self, i):
        return "the world" if i < 0 else repr(self.model.body_names[i])

    def _joint_mask(self, joints, name):
        """``joints`` (joint names, one name, an empty list for none, or a
        bool per joint) as a bool per joint; errors name the argument."""
        return joint_mask(self.model, joints, name)

    def _joint_dofs(self, joints, name):
        """Bool per velocity coordinate on the dofs of ``joints`` (joint
        names, one name, or a bool array per joint); names are converted
        once per model (``gear.algorithms.dynamics._cached``), read-only."""
        return _joint_dofs(self.model, joints, name)

    def _fast_mask(self, prescribed):
        """``prescribed`` as the bool array per joint the native hybrid path
        takes: a list or tuple of joint names (empty: none) or one name is
        converted once per model (validated like any other); anything else
        is passed on as is."""
        t = type(prescribed)
        if t is not str and t is not list and t is not tuple:
            return prescribed
        return _cached(self.model, "bools", prescribed, "prescribed", _bools)

    def inverse_dynamics(self, q, dq, ddq, actuated, tau_passive=None,
                         objective="min_constraint_force", f_ext=None):
        """Joint torques that produce ``ddq`` on the closed system (Kim Sec. 3.1).

        Parameters
        ----------
        q, dq, ddq : array_like, shape (nq,), (nv,), (nv,) (or batches)
            A consistent state (``A dq = 0``, ``A ddq + dA dq = 0``).
        actuated : list of str, str, or array_like of bool (nbodies,)
            The actuated joints (their names, one name, or a bool per
            joint); the others are passive.  An empty list: every joint
            passive, so unless the system cannot move the result is not
            exact and is the forward dynamics under ``tau_passive``.
        tau_passive : array_like, shape (nv,), optional
            Torques of the passive joints (read on passive entries; default 0).
        objective : {"min_constraint_force", "min_torque"}
            With redundant actuation (more constraints than passive
            coordinates), the minimum-norm ``lam`` (eq. 59 with zero null
            component) or the minimum-norm actuator torque (eqs. 62-64).
        f_ext : array_like, shape (nbodies, 6), optional

        Returns
        -------
        ConstraintResult
            ``.tau`` (nv; passive entries = ``tau_passive``), ``.lam``,
            ``.exact`` — False when the system is under-actuated: ``ddq``
            cannot be produced, and ``.tau``/``.ddq`` are then the closed-
            system hybrid dynamics with the actuated joints following
            ``ddq`` (``.message`` says so).
        """
        if objective not in ("min_constraint_force", "min_torque"):
            raise ValueError(f"objective must be 'min_constraint_force' or 'min_torque', got {objective!r}")
        if f_ext is None and objective == "min_constraint_force":
            fi = self._native_cache.get("fi", _MISSING)      # the allocation-light path
            if fi is _MISSING:
                fi = self._native_cache["fi"] = self.solver.fast_inverse()
            if fi is not None:
                out = fi(q, dq, ddq, self._joint_dofs(actuated, "actuated"), tau_passive)
                if out is not None:
                    return out
        q, N, dq, ddq, tau_p, f_ext = self._state(
            q, f_ext, dq=dq, ddq=ddq, tau_passive=np.zeros(self.model.nv) if tau_passive is None else tau_passive)
        a = self._joint_dofs(actuated, "actuated")
        if N is None:
            tau, lam, exact, ddq_o, stats = self.solver.inverse(q, dq, ddq, a, tau_p, objective, f_ext)
            return ConstraintResult(
                tau=tau, lam=lam, exact=exact, ddq=ddq_o, success=bool(np.isfinite(tau).all()),
                message="ok" if exact else (
                    "under-actuated: the passive joints cannot follow ddq; tau is the closed-system "
                    "hybrid dynamics with the actuated joints prescribed (see .ddq)"),
                solver=self.solver.name, stats=stats)
        fast = self.solver.inverse_batch(q, dq, ddq, a, tau_p, objective, f_ext)
        if fast is not None:
            tau, lam, exact, ddq_o, stats = fast
        else:
            outs = [self.solver.inverse(q[k], dq[k], ddq[k], a, tau_p[k], objective,
                                        None if f_ext is None else f_ext[k]) for k in range(N)]
            exact = np.array([o[2] for o in outs])
            tau, lam, ddq_o = (np.stack([o[i] for o in outs]) for i in (0, 1, 3))
            stats = {"factorizations": sum(o[4]["factorizations"] for o in outs)}
        return ConstraintResult(
            tau=tau, lam=lam, exact=exact, ddq=ddq_o, success=np.isfinite(tau).all(axis=1),
            message="ok" if exact.all() else "under-actuated in some states (see .exact)",
            solver=self.solver.name, stats=stats)

    def hybrid_dynamics(self, q, dq, ddq, tau, prescribed, f_ext=None):
        """Hybrid dynamics of the closed system (Kim Sec. 3.3, eqs. 70-77).

        Parameters
        ----------
        q, dq : array_like
            A consistent state.
        ddq : array_like, shape (nv,)
            Read on the prescribed joints.
        tau : array_like, shape (nv,)
            Read on the other joints.
        prescribed : list of str, str, or array_like of bool (nbodies,)
            The joints whose acceleration is prescribed: their names (an
            empty list: none, which is forward dynamics with ``tau``; one
            name), or a bool per joint.
            One state with ``prescribed`` joint names or a NumPy
            bool array (and no ``f_ext``) takes an allocation-light native
            path with the kkt and maximal solvers: a few µs per call
            instead of tens (a list is converted once per distinct list);
            so does a batch of float64 C-contiguous arrays with the kkt,
            projection and soft solvers.
        f_ext : array_like, shape (nbodies, 6), optional

        Returns
        -------
        ConstraintResult
            ``.tau`` (complete: the prescribed joints' torques computed),
            ``.ddq`` (complete), ``.lam``, ``.residual``.  With more
            constraint rows than free coordinates (m > n_v) ``lam`` is the
            minimum-norm one.
        """
        if f_ext is None:
            hf = self._native_cache.get("hf", _MISSING)      # the allocation-light path
            if hf is _MISSING:
                hf = self._native_cache["hf"] = self.solver.fast_hybrid()
            if hf is not None:
                out = hf(q, dq, ddq, tau, self._fast_mask(prescribed))
                if out is not None:
                    return out
        q, N, dq, ddq, tau, f_ext = self._state(q, f_ext, dq=dq, ddq=ddq, tau=tau)
        u = self._joint_dofs(prescribed, "prescribed")
        if N is None:
            t, d, lam, res, stats = self.solver.hybrid(q, dq, ddq, tau, u, f_ext)
            ok = bool(np.isfinite(d).all() and np.isfinite(t).all())
            return ConstraintResult(tau=t, ddq=d, lam=lam, residual=res, success=ok,
                                    message="ok" if ok else "non-finite result",
                                    solver=self.solver.name, stats=stats)
        fast = self.solver.hybrid_batch(q, dq, ddq, tau, u, f_ext)
        if fast is not None:
            t, d, lam, res, stats = fast
            return ConstraintResult(tau=t, ddq=d, lam=lam, residual=res,
                                    success=np.isfinite(d).all(axis=1) & np.isfinite(t).all(axis=1),
                                    message="ok", solver=self.solver.name, stats=stats)
        outs = [self.solver.hybrid(q[k], dq[k], ddq[k], tau[k], u, None if f_ext is None else f_ext[k])
                for k in range(N)]
        d = np.stack([o[1] for o in outs])
        return ConstraintResult(tau=np.stack([o[0] for o in outs]), ddq=d,
                                lam=np.stack([o[2] for o in outs]),
                                residual=np.array([o[3] for o in outs]),
                                success=np.isfinite(d).all(axis=1), message="ok",
                                solver=self.solver.name,
                                stats={"factorizations": sum(o[4]["factorizations"] for o in outs)})

    def constraint_wrenches(self, q, lam):
        """The wrench ``(m, f)`` each loop closure exerts on its ``body_b``,
        at frame {B}, in {B}'s coordinates (what a bearing carries).

        Returns
        -------
        ndarray, shape (nclosures, 6) (or (N, nclosures, 6)), one row per
        :class:`LoopClosure` in ``constraints`` order (custom constraints
        have no frame and are skipped).
        """
        q = self._q(q)
        N = q.shape[0] if q.ndim == 2 else None
        lam = self._v(lam, "lam", N, (self.nc,))
        if N is not None:
            return np.stack([self.constraint_wrenches(x, l) for x, l in zip(q, lam)])
        kin = K.tree_kinematics(self.model, q)
        out = []
        r = 0
        for k, c in enumerate(self.constraints):
            m = self._nrows[k]
            if isinstance(c, LoopClosure):
                ia, ib = self._bodies[k]
                out.append(K.wrench_on_b(kin, c, ia, ib, lam[r:r + m]))
            r += m
        return np.array(out).reshape(len(out), 6)

    def joint_wrenches(self, q, dq, ddq, lam, f_ext=None):
        """The wrench each tree joint transmits: what joint ``i``'s parent
        exerts on body ``i``, ``(m, f)`` at body ``i``'s frame, in its
        coordinates (the joint's bearing load).

        Kim Table 2's backward pass, ``F_i = I_i dV_i - ad*_{V_i} I_i V_i -
        F_i^ext + sum_k Ad*_{T^{-1}_{i,k}} F_k`` (eq. 42), with gravity as the
        base acceleration and every loop closure's constraint wrench as an
        external load: :meth:`constraint_wrenches` on ``body_b`` and its
        reaction (the same wrench, negated, about the same point) on
        ``body_a``.  ``S_i^T F_i`` is then the torque the joint's actuator
        supplies (``tau_i``, plus joint-space constraint forces of couplers
        and custom constraints, which act inside the joints).

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        dq, ddq : array_like, shape (nv,) or (N, nv)
            A consistent state and its accelerations (e.g. from
            :meth:`forward_dynamics` or :meth:`hybrid_dynamics`).
        lam : array_like, shape (nc,) or (N, nc)
            The multipliers that go with ``ddq``.
        f_ext : array_like, shape (nbodies, 6) or (N, nbodies, 6), optional
            The external wrenches of the dynamics call.

        Returns
        -------
        ndarray, shape (nbodies, 6) or (N, nbodies, 6)

        Examples
        --------
        >>> import numpy as np, gear
        >>> sys, q0 = gear.mechanisms.four_bar()
        >>> tau = np.array([0.5, 0.0, 0.0])
        >>> res = sys.forward_dynamics(q0, np.zeros(3), tau)
        >>> F = sys.joint_wrenches(q0, np.zeros(3), res.ddq, res.lam)
        >>> F.shape, bool(np.allclose(-F[:, 1], tau))      # S_i = (0, -1, 0, 0, 0, 0): S_i^T F_i = tau_i
        ((3, 6), True)
        """
        from .. import _core
        from ..algorithms.dynamics import _body_inertia_matrices
        from ..spatial.stacks import ad_inv_mats as _ad_inv_mats, dad_rows as _dad

        q = self._q(q)
        N = q.shape[0] if q.ndim == 2 else None
        dq = self._v(dq, "dq", N)
        ddq = self._v(ddq, "ddq", N)
        lam = self._v(lam, "lam", N, (self.nc,))
        nb = self.model.nbodies
        if f_ext is not None:
            f_ext = self._v(f_ext, "f_ext", N, (nb, 6))
        if N is not None:
            return np.stack([self.joint_wrenches(q[k], dq[k], ddq[k], lam[k],
                                                 None if f_ext is None else f_ext[k]) for k in range(N)])
        model = self.model
        m = max(self.nc, 1)
        T, S, eta, V, Tw = (np.empty((nb, 12)), np.empty((nb, 36)), np.empty((nb, 6)),
                            np.empty((nb, 6)), np.empty((nb, 12)))
        nd = self._native()
        if nd is None:
            # Python rows (a CustomConstraint): the kernel's per-body terms
            # come from the tree alone, with no rows encoded
            nd = self._native_cache.get("tree")
            if nd is None:
                nd = self._native_cache["tree"] = ConstrainedModel(model, [])._native()
        _core.maximal_terms(model.data, nd, q, dq, T, S, eta, V, Tw, np.empty((nb, 6)),
                            np.empty((m, 12)), np.empty(m))
        X = _ad_inv_mats(T)
        I6 = _body_inertia_matrices(model)
        W = np.zeros((nb, 6)) if f_ext is None else np.array(f_ext, dtype=float)
        kin = None
        r = 0
        Rw, pw = Tw[:, :9].reshape(nb, 3, 3), Tw[:, 9:]
        for k, c in enumerate(self.constraints):
            rows = self._nrows[k]
            if isinstance(c, LoopClosure):
                if kin is None:
                    kin = K.tree_kinematics(model, q)
                ia, ib = self._bodies[k]
                wb = K.wrench_on_b(kin, c, ia, ib, lam[r:r + rows])
                RB, pB, *_ = K._frame(kin, ib, c.placement_b)
                m_w, f_w = RB @ wb[:3], RB @ wb[3:]                 # world, about pB
                for body, sgn in ((ib, 1.0), (ia, -1.0)):
                    if body >= 0:
                        R, p = Rw[body], pw[body]
                        W[body, :3] += sgn * (R.T @ (m_w + np.cross(pB - p, f_w)))
                        W[body, 3:] += sgn * (R.T @ f_w)
            r += rows
        dV = np.zeros((nb, 6))
        dV0 = np.zeros(6)
        dV0[3:] = -model.gravity
        for i in range(nb):
            n, k = model.joints[i].nv, model._iv[i]
            a = X[i] @ (dV0 if model.parents[i] < 0 else dV[model.parents[i]]) + eta[i]
            if n:
                a += S[i].reshape(6, 6)[:n].T @ ddq[k:k + n]
            dV[i] = a
        IV = np.einsum("bij,bj->bi", I6, V)
        F = np.einsum("bij,bj->bi", I6, dV) - _dad(V, IV) - W       # _dad(V, F) = ad*_V F
        for i in range(nb - 1, -1, -1):
            p = model.parents[i]
            if p >= 0:
                F[p] += X[i].T @ F[i]
        return F

    def __getstate__(self):
        # the native data are rebuilt on demand (pickle, Dask workers)
        state = self.__dict__.copy()
        state["_md"] = None
        state["_native_cache"] = {}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._md = self.model.data

    def __repr__(self):
        return (f"ConstrainedModel({self.model!r}, nc={self.nc}, "
                f"constraints={len(self.constraints)}, solver={self.solver.name!r})")

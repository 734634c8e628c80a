"""``"kkt"``: Lagrange multipliers in reduced coordinates (Kim eqs. 67-77)."""
from __future__ import annotations

import numpy as np

from .. import _core
from .base import ConstraintSolver, PerformanceWarning

__all__ = ["KKTSolver", "lstsq_psd"]

# route_costs() above which route="auto" warns that reduced coordinates are
# cubic for the model: on this project's machines one unit is 0.5-1 ns, so
# about 25-50 ms a solve (the N-four-bar's chain tree from N ~ 320 on; its
# ground tree stays below 2e5 at N = 1000)
_SLOW_SOLVE = 5e7


def lstsq_psd(K, rhs, rcond):
    """Minimum-norm solution of the symmetric PSD system ``K x = rhs``:
    eigenvalues below ``rcond * max`` are dropped.  Returns ``(x, rank)``."""
    if K.shape[0] == 0:
        return np.zeros(0), 0
    w, U = np.linalg.eigh(0.5 * (K + K.T))
    keep = w > rcond * max(w.max(), 0.0)
    return U[:, keep] @ ((U[:, keep].T @ rhs) / w[keep]), int(keep.sum())


def _outside_gear():
    """The ``stacklevel`` of the first caller outside the package (a
    warning then names the user's line, however deep gear's calls went)."""
    import os
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    level, f = 1, sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(root):
        level += 1
        f = f.f_back
    return level


_MASS_HINT = ("Where dofs carry no mass or inertia of their own (joints on massless bodies that "
              "only the constraints move, as in OpenSim-style models; gear leaves out MuJoCo's "
              "armature), the 'kkt' solver, which factorises M, cannot run; the 'projection' "
              "solver needs M positive only on the motions the constraints allow: "
              "gear.ConstrainedModel(model, solver='projection')")


def _cho_mass(M):
    """``cho_factor(M)`` that names the cause when ``M`` is singular."""
    from scipy.linalg import cho_factor

    from ..algorithms.dynamics import SingularInertiaError

    try:
        return cho_factor(M)
    except np.linalg.LinAlgError:
        raise SingularInertiaError(f"the mass matrix is not positive definite. {_MASS_HINT}") from None


class _NativeClosed:
    """The native closed-loop kernels (``gear/constraints/_cwork.pxd`` and the route files it lists)
    behind a solver: ``self._route`` picks the kernel (0 articulated-body
    passes, 1 dense KKT, 2 projection, 3 maximal coordinates),
    ``self.options["rcond"]`` the rank cut-off.  ``_native_factorizations`` is the count reported per call."""

    _native_factorizations = 1

    def _native_enabled(self):
        """Whether the native kernel should run (a solver may leave large
        problems to LAPACK)."""
        return True

    def _native_data(self):
        """The encoded rows (``ConstrainedModel._native``) for this solver,
        or None (Python constraints, or the solver declines)."""
        if not self._native_enabled():
            return None
        return self.system._native(self.options["rcond"])

    # -- native path -----------------------------------------------------------
    def _native_call(self, q, dq, ddq, tau, u, f_ext, nd=None, held=None, hold=0):
        """Run the native kernel on a batch (2-D arrays); None if the
        constraints need the NumPy path.  ``nd``: the encoded rows to use
        (default ``self._native_data()``).  ``held`` (N, nc) float and
        ``hold``: 1 writes into it the rows to hold at a step's stages
        after each state's solve at the step's start, 2 treats its marked
        rows as dependent (the stages: see
        :meth:`gear.ConstrainedModel._stage_dynamics`)."""
        from ..algorithms.dynamics import _check_status, get_num_threads

        sys = self.system
        nd = self._native_data() if nd is None else nd
        if nd is None:
            return None
        model = sys.model
        N = q.shape[0]
        ddq = np.array(ddq, dtype=float, order="C") if ddq is not None else np.zeros((N, model.nv))
        tau = np.array(tau, dtype=float, order="C")
        lam = np.empty((N, sys.nc))
        info = np.empty((N, 2))
        status = np.zeros(N, dtype=np.int32)
        mask = None
        if u is not None:
            masks = self.__dict__.setdefault("_body_masks", {})     # u (bytes) -> per-body mask
            mask = masks.get(u.tobytes())
            if mask is None:
                mask = np.zeros(model.nbodies, dtype=np.uint8)
                for i, j in enumerate(model.joints):
                    mask[i] = bool(u[model._iv[i]:model._iv[i] + j.nv].any()) if j.nv else False
                masks[u.tobytes()] = mask
        fe = None if f_ext is None else np.ascontiguousarray(f_ext, dtype=float).reshape(N, model.nbodies, 6)
        _core.closed_dynamics(model.data, nd, np.ascontiguousarray(q, dtype=float),
                              np.ascontiguousarray(dq, dtype=float), ddq, tau, mask, fe, lam, info,
                              status, get_num_threads() if N > 1 else 1, self._route, held, hold)
        bad = np.flatnonzero(status)
        if bad.size:
            k = int(bad[0])
            self._native_status(int(status[k]), k, q, dq)
            if status[k] == -4:
                # the dense route's Cholesky failed: the ABA route names the
                # joint whose articulated inertia is singular
                s1 = np.zeros(1, dtype=np.int32)
                _core.closed_dynamics(model.data, nd, np.ascontiguousarray(q[k:k + 1], dtype=float),
                                      np.ascontiguousarray(dq[k:k + 1], dtype=float),
                                      np.zeros((1, model.nv)), np.array(tau[k:k + 1]), mask,
                                      None if fe is None else fe[k:k + 1], np.empty((1, sys.nc)),
                                      np.empty((1, 2)), s1, 1, 0)
                if s1[0] > 0:
                    status[k] = s1[0]
            _check_status(model, np.maximum(status, 0))      # a singular articulated inertia
            st = int(status[k])
            if st == -4:
                from ..algorithms.dynamics import SingularInertiaError

                raise SingularInertiaError(
                    f"the mass matrix is not positive definite (state {k}; route='aba' names "
                    f"the first joint concerned). {_MASS_HINT}")
            # a distance closure with coincident points: the NumPy rows raise the error
            sys._rows_numpy(q[k], dq[k])
            raise ValueError(f"native constraint kernel failed with status {st} (state {k})")
        return ddq, tau, lam, info

    def _native_status(self, st, k, q, dq):
        """Raise the error of a failure status ``st`` of state ``k`` that
        is particular to this solver's kernel (the generic ones follow)."""

    def fast_forward(self):
        sys = self.system
        nd = self._native_data()
        if nd is None:
            return None
        return _core.FastForward(sys._md, nd, self._route, self.name, self.counters,
                                 self._native_factorizations, self._extra_stats())

    def _extra_stats(self):
        """Stats every native call of this solver adds (None: none)."""
        return None

    def _batch_stats(self, N, info):
        self.counters["calls"] += N
        self.counters["factorizations"] += N * self._native_factorizations
        return {"factorizations": N * self._native_factorizations, "rank": info[:, 0].astype(int), "native": True}

    def _forward(self, q, dq, tau, f_ext):
        # one state through the native kernel, else the solver's NumPy path
        out = self._native_call(q[None], dq[None], None, tau[None], None,
                                None if f_ext is None else f_ext[None])
        if out is None:
            return self._forward_numpy(q, dq, tau, f_ext)
        ddq, _, lam, info = out
        return ddq[0], lam[0], {"factorizations": self._native_factorizations, "rank": int(info[0, 0]),
                                "residual": float(info[0, 1]), "native": True}

    def forward_batch(self, q, dq, tau, f_ext):
        out = self._native_call(q, dq, None, tau, None, f_ext)
        if out is None:
            return None
        ddq, _, lam, info = out
        return ddq, lam, info[:, 1], self._batch_stats(q.shape[0], info)



class _NativeHybrid(_NativeClosed):
    """:class:`_NativeClosed` for solvers whose hybrid dynamics the native
    kernel computes too (routes 0, 1 and 2: kkt, soft on the dense route,
    projection): one state, a batch and the allocation-light single call, with
    ``self._hybrid_numpy`` where the kernel cannot run."""

    def _hybrid(self, q, dq, ddq, tau, u, f_ext):
        out = self._native_call(q[None], dq[None], ddq[None], tau[None], u,
                                None if f_ext is None else f_ext[None])
        if out is None:
            return self._hybrid_numpy(q, dq, ddq, tau, u, f_ext)
        ddq_o, tau_o, lam, info = out
        return tau_o[0], ddq_o[0], lam[0], {"factorizations": self._native_factorizations,
                                            "rank": int(info[0, 0]), "residual": float(info[0, 1]),
                                            "native": True}

    def hybrid_batch(self, q, dq, ddq, tau, u, f_ext):
        out = self._native_call(q, dq, ddq, tau, u, f_ext)
        if out is None:
            return None
        ddq_o, tau_o, lam, info = out
        return tau_o, ddq_o, lam, info[:, 1], self._batch_stats(q.shape[0], info)

    def fast_hybrid(self):
        nd = self._native_data()
        if nd is None:
            return None
        extra = self._extra_stats()
        return _core.FastHybrid(self.system._md, lambda key: (nd, self._route, extra), self.name,
                                self.counters, self._native_factorizations)


class _Replan(Exception):
    """The sparse route's plan left out a row that is not zero here."""


class KKTSolver(_NativeHybrid, ConstraintSolver):
    """Lagrange multipliers in reduced coordinates (Kim eqs. 67-69).

    ``ddq_r = M^{-1} (tau - b)`` by the articulated-body algorithm, then
    ``(A M^{-1} A^T) lam = -(A ddq_r + dA dq)`` (eq. 67) and
    ``ddq = ddq_r + M^{-1} A^T lam`` (eq. 69).  Redundant or singular rows
    (eigenvalues of ``A M^{-1} A^T`` below ``rcond`` times the largest) give
    the minimum-norm ``lam``, while ``ddq`` and ``A^T lam`` stay unique.
    Hybrid dynamics: eqs. 70-77 with ``M_vv``.

    When every constraint is a :class:`gear.LoopClosure` or a joint coupler
    the native kernels run (batched in parallel without the GIL); a
    :class:`gear.CustomConstraint` (Python callables) takes the NumPy path:
    ``M^{-1} A^T`` from a Cholesky factorisation of ``M`` and a symmetric
    eigendecomposition.

    Options: ``rcond`` (default 1e-10); ``route`` (forward and hybrid
    dynamics of the native path):

    - ``"aba"`` (``gear/constraints/_aba_route.pxd``): one articulated-body
      pass, then one *unit pass* per row that reuses the articulated
      inertias to form ``A M^{-1} A^T`` without building ``M``
      (O(n m + m^3)), and a pivoted Cholesky with the minimum-norm
      completion;
    - ``"dense"`` (``_dense_route.pxd``): build ``M`` by CRBA and factorise
      it with Featherstone's tree-sparse ``M = L^T L``, no fill-in (for
      hybrid dynamics with the prescribed dofs' rows and columns replaced
      by the identity, which factorises ``M_vv``); ``K = Y^T Y`` with
      ``Y = L^{-T} A^T``, each column of Y only on the dofs its row acts
      on; rows of ``A`` that are exactly zero at the state -- the
      out-of-plane row of a ball closing a planar loop -- are left out,
      with a zero multiplier;
    - ``"sparse"`` (``_sparse_route.pxd``): the dense route with ``K`` kept
      sparse -- only the blocks of closures whose root paths meet, in a
      fill-reducing order fixed per model (``gear/constraints/sparse.py``),
      factorised by a fixed-pattern sparse Cholesky
      (``gear/algorithms/_spchol.pxd``): linear in the number of loops on a
      shallow tree whose loops close between neighbouring branches;
    - ``"auto"`` (default): the cheapest by a cost model from the dof tree,
      the rows' sparsity and the sparse factor's flops
      (:meth:`route_costs`); the route taken is ``self.route`` and every
      native result's ``stats["route"]``.

    ``benchmarks/bench_trees.py`` times the three routes on two spanning
    trees of the N-four-bar, ``benchmarks/bench_constraints.py`` on
    mechanisms and chains.
    """

    name = "kkt"
    _holds_rows = True            # rows held dependent at a step's stages (_stage_dynamics)
    default_options = {"rcond": 1e-10, "route": "auto"}
    _slow = None        # (route, modelled cost) to warn about at the first solve

    def _check_options(self):
        r = float(self.options["rcond"])
        if not (0.0 < r < 1.0):
            raise ValueError(f"rcond must be in (0, 1), got {r}")
        self.options["rcond"] = self._rcond = r
        route = self.options["route"]
        if route not in ("auto", "aba", "dense", "sparse"):
            raise ValueError(f"route must be 'auto', 'aba', 'dense' or 'sparse', got {route!r}")
        self._sparse_nd = None
        self._slow = None
        if route == "auto":
            route = self._auto_route()
        self.route = route
        self._route = 0 if route == "aba" else 1

    def _native_data(self):
        self._warn_if_slow()
        if self.route != "sparse":
            return super()._native_data()
        if self._sparse_nd is None:
            nd = self.system._native(self.options["rcond"], fresh=True)
            if nd is None:
                return None
            pat = self._pattern(nd)
            # inverse dynamics on the sparse route where A^T A is sparse
            # (its products per call within a few per dof and row); on a
            # deep chain it is dense and the dense route's QR does better
            model = self.system.model
            sparse_inv = pat.inverse_work() <= 64 * (model.nv + self.system.nc)
            nd.attach_sparse(self.system._md, pat.plan(), pat.inverse_plan() if sparse_inv else None)
            self._sparse_nd = nd
        return self._sparse_nd

    def _inverse_data(self):
        # the sparse route's inverse dynamics (A_p^T A_p by a sparse
        # factor) rides on the same rows as its forward dynamics
        if self.route == "sparse":
            return self._native_data()
        return super()._inverse_data()

    def _pattern(self, nd=None):
        """The structure of ``K`` (``gear.constraints.sparse.KKTPattern``),
        built once per solver.  Rows of ``A`` that are exactly zero at two
        random configurations (the out-of-plane rows of a planar mechanism
        built in its plane) are left out of the factor; the kernel checks on
        every call that they are still zero, and if one is not the plan is
        rebuilt with every row (:meth:`_replan`)."""
        if getattr(self, "_kpattern", None) is None:
            from ..constraints.sparse import KKTPattern

            nd = nd if nd is not None else self.system._native(self.options["rcond"])
            self._kpattern = KKTPattern(self.system.model, nd, keep=self._structural_rows())
        return self._kpattern

    def _structural_rows(self):
        """Rows of ``A`` not exactly zero at two random configurations (all
        rows when ``self._prune`` is off or the rows cannot be evaluated)."""
        sys = self.system
        if not getattr(self, "_prune", True) or sys.nc == 0:
            return None
        rng = np.random.default_rng(1)
        keep = np.zeros(sys.nc, dtype=bool)
        try:
            for _ in range(2):
                A = sys._rows(sys.model.random_configuration(rng))[0]
                keep |= np.any(A != 0.0, axis=1)
        except Exception:            # e.g. a distance closure whose points meet there
            return None
        return keep

    def _replan(self):
        """A row the plan left out is not zero at this state: plan again
        with every row, and drop the cached fast paths that hold the old
        plan."""
        self._prune = False
        self._kpattern = None
        self._sparse_nd = None
        for key in ("ff", "hf"):
            self.system._native_cache.pop(key, None)

    def _native_call(self, q, dq, ddq, tau, u, f_ext, nd=None, held=None, hold=0):
        try:
            return super()._native_call(q, dq, ddq, tau, u, f_ext, nd, held, hold)
        except _Replan:
            self._replan()
            return super()._native_call(q, dq, ddq, tau, u, f_ext, None, held, hold)

    def __getstate__(self):
        # the sparse plan is rebuilt on first use (pickle, Dask workers)
        state = self.__dict__.copy()
        state.update(_sparse_nd=None, _kpattern=None)
        return state

    def _native_status(self, st, k, q, dq):
        if st == -7 and self.route == "sparse" and getattr(self, "_prune", True):
            raise _Replan
        if st == -6:
            from ..constraints.sparse import MAX_COMPLETION

            raise np.linalg.LinAlgError(
                f"state {k}: more than {MAX_COMPLETION} constraint rows depend on the others "
                "(redundant closures); the sparse route completes at most that many to the "
                "minimum-norm multiplier: use route='dense'")

    def _extra_stats(self):
        return {"route": self.route, "rank": None}        # rank: the kernel's

    def _batch_stats(self, N, info):
        return {**super()._batch_stats(N, info), "route": self.route}

    def _forward(self, q, dq, tau, f_ext):
        ddq, lam, stats = super()._forward(q, dq, tau, f_ext)
        if stats.get("native"):
            stats["route"] = self.route
        return ddq, lam, stats

    def _hybrid(self, q, dq, ddq, tau, u, f_ext):
        out = super()._hybrid(q, dq, ddq, tau, u, f_ext)
        if out[3].get("native"):
            out[3]["route"] = self.route
        return out

    def _auto_route(self):
        """``route="auto"``: the cheapest of the three routes by a cost model
        from the shapes alone (:meth:`route_costs`)."""
        costs = self.route_costs()
        route = min(costs, key=costs.get)
        if costs[route] > _SLOW_SOLVE:
            self._slow = (route, costs[route])
        return route

    def _warn_if_slow(self):
        """A :class:`gear.PerformanceWarning` that reduced coordinates are
        cubic here (``self._slow`` set by :meth:`_auto_route`): the loops
        couple through a deep tree.  Given once, at the first solve (not at
        construction: a system built to be turned into maximal coordinates
        never solves here)."""
        if self._slow is None:
            return
        import warnings

        route, cost = self._slow
        self._slow = None
        sys = self.system
        model = sys.model
        passes = cost / (165.0 * max(model.nbodies, 1))
        d = []
        for p in model.parents:              # a parent comes before its children
            d.append(1 + (d[p] if p >= 0 else 0))
        depth = max(d, default=0)
        warnings.warn(
            f"reduced coordinates are slow for this model: one constrained solve is modelled at "
            f"about {passes:,.0f} articulated-body passes (route {route!r}). Its {sys.nc} loop rows "
            f"act on a tree {depth} bodies deep, so K = A M^-1 A^T ({sys.nc} x {sys.nc}) is dense "
            f"and every solve factorises it in O(nc^3). A spanning tree that closes each loop "
            f"near the root (cut the joints next to the ground; for gear.mechanisms.n_four_bar, "
            f"tree='ground') or the maximal formulation (gear.MaximalModel) costs time linear in the "
            f"bodies. Pass route= to the solver to choose a route without this check.",
            PerformanceWarning, stacklevel=_outside_gear())

    def route_costs(self):
        """The modelled work of each route, in units of one body's share of
        an articulated-body pass (what ``route="auto"`` compares).

        With ``d_k`` the depth of dof k in the dof tree, ``nz`` the rows of
        ``A`` that are not exactly zero at a random configuration (the dense
        route skips zero rows: the out-of-plane rows of balls closing planar
        loops are zero everywhere), ``s`` their mean number of non-zeros,
        ``P`` the sum over those rows of ``d_k`` over each row's non-zero
        dofs (the work of ``L^{-T} a`` on a row's root path), ``nnz_K`` and
        ``f`` the entries of ``K`` and the flops of its sparse factor
        (``gear/constraints/sparse.py``: the rows it keeps)::

            aba    ~ 165 nbodies (nc + 2)           articulated-body and unit passes
            dense  ~ sum d_k^2 + 2 P + nz^2 s / 2 + nz^3 / 6
                                                    L^T L, Y, K = Y^T Y, pivoted solve
            sparse ~ sum d_k^2 + 2 P + 3 nnz_K s' + f + 30 nc
                                                    the same with K's pairs only

        (``s'`` the mean overlap of two meeting rows' supports).  The factor
        165 was fitted on this project's machine class to the benchmark
        mechanisms and to serial chains of revolute joints held at the tip
        by a ball (the aba and dense routes cross at about 45 bodies); the
        sparse terms count its bookkeeping per entry (``benchmarks/
        bench_trees.py`` times the three routes on two spanning trees of the
        N-four-bar, ``benchmarks/bench_constraints.py`` on chains).

        Returns
        -------
        dict
            ``{"aba": ..., "dense": ...}`` and ``"sparse"`` where the rows
            are native and the system is large enough to consider it
            (``inf`` when ``K`` is mostly full).
        """
        sys = self.system
        model = sys.model
        vp = model.data.dof_parents()
        depth = np.zeros(model.nv)
        for k in range(model.nv):
            depth[k] = 1 + (depth[vp[k]] if vp[k] >= 0 else 0)
        try:
            q = model.random_configuration(np.random.default_rng(0))
            A = sys._rows(q)[0]
        except Exception:            # e.g. a distance closure whose points meet there
            A = np.ones((sys.nc, model.nv))
        rows = np.any(A != 0.0, axis=1)
        nz = int(rows.sum())
        s = float(np.count_nonzero(A[rows]) / nz) if nz else 0.0
        dmean = float(depth.mean()) if model.nv else 0.0
        tree = float((depth ** 2).sum())
        # the row solves' work: a row on a deep path costs its depths, not
        # its length times the mean depth (rows near a chain's root are cheap)
        paths = float(((A[rows] != 0.0) @ depth).sum())
        dense = tree + 2 * paths + nz * nz * s / 2 + nz ** 3 / 6
        costs = {"aba": 165.0 * model.nbodies * (sys.nc + 2), "dense": dense}
        if sys._native(self.options["rcond"]) is not None and sys.nc > 0 and dense > 2000.0:
            costs["sparse"] = self._sparse_cost(A, depth, tree, dmean, paths)
        return costs

    def _sparse_cost(self, A, depth, tree, dmean, paths):
        """The sparse route's modelled work (see :meth:`route_costs`)."""
        m = self.system.nc
        s = float(np.count_nonzero(A) / max(m, 1))
        # a dense K (the deep chain) is the dense route's work and more:
        # leave the pattern unbuilt
        pat = self._pattern()
        if pat.pair_fill > 0.25 and len(pat.groups) > 40:
            return float("inf")            # K dense: the dense route's work and more
        return (tree + 2 * paths + 3 * pat.nnz_K * min(s, dmean + 1)
                + pat.factor_flops + 30 * m)

    def _forward_numpy(self, q, dq, tau, f_ext):
        from scipy.linalg import cho_solve

        from .. import algorithms as alg

        self._warn_if_slow()
        model = self.system.model
        try:
            ddq_r = alg.forward_dynamics(model, q, dq, tau, f_ext)
        except alg.SingularInertiaError as exc:
            raise alg.SingularInertiaError(f"{exc}. {_MASS_HINT}") from None
        A, bias = self.rows(q, dq)
        if A.shape[0] == 0:
            return ddq_r, np.zeros(0), {"factorizations": 0, "rank": 0}
        c = _cho_mass(alg.mass_matrix(model, q))
        MiAT = cho_solve(c, A.T)                                  # M^{-1} A^T
        lam, rank = lstsq_psd(A @ MiAT, -(A @ ddq_r + bias), self.options["rcond"])   # eq. (67)
        return ddq_r + MiAT @ lam, lam, {"factorizations": 2, "rank": rank}          # eq. (69)

    def _hybrid_numpy(self, q, dq, ddq, tau, u, f_ext):
        from scipy.linalg import cho_solve

        from .. import algorithms as alg

        self._warn_if_slow()
        model = self.system.model
        v = ~u
        M = alg.mass_matrix(model, q)
        b = alg.bias_forces(model, q, dq, f_ext)
        A, bias = self.rows(q, dq)
        ddq_u = ddq[u]
        out = np.array(ddq, dtype=float)
        if v.any():
            c = _cho_mass(M[np.ix_(v, v)])
            ddq_rv = cho_solve(c, tau[v] - b[v] - M[np.ix_(v, u)] @ ddq_u)   # eq. (77)
            MiAT = cho_solve(c, A[:, v].T)                                    # M_vv^{-1} A_v^T
            rhs = -(A[:, u] @ ddq_u + A[:, v] @ ddq_rv + bias)               # eq. (75)
            lam, rank = lstsq_psd(A[:, v] @ MiAT, rhs, self.options["rcond"])
            out[v] = ddq_rv + MiAT @ lam                                      # eq. (72)
            nfac = 2
        else:
            # everything prescribed: lam is not determined by the motion; the
            # minimum-norm (zero) lam is returned
            lam, rank, nfac = np.zeros(A.shape[0]), 0, 0
        tau_out = M @ out + b - A.T @ lam
        tau_out[v] = tau[v]
        return tau_out, out, lam, {"factorizations": nfac, "rank": rank}

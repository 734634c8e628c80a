"""The constraint-solver plugin interface and registry.

A solver computes the dynamics of a :class:`gear.ConstrainedModel`
(``M ddq + b = tau + A^T lam``, Kim eq. 54) one state at a time; the
constrained model does the validation, batching and result objects.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from .. import _core

__all__ = ["ConstraintSolver", "PerformanceWarning", "available", "get_solver", "refresh"]


class PerformanceWarning(UserWarning):
    """A model on which a solver will be far slower than the mechanism
    needs: e.g. reduced coordinates whose loops couple through a deep
    spanning tree (``K = A M^-1 A^T`` full, every solve cubic in the loop
    rows), where another spanning tree or the maximal formulation is
    linear.  The answers are right; only the time is at stake."""


class ConstraintSolver:
    """Base class of constraint solvers (``solver=`` of :class:`gear.ConstrainedModel`).

    Rules for implementers
    ----------------------
    * Set ``name`` (the registry name) and ``hard`` (True when the solver
      satisfies ``A ddq + dA dq = 0`` exactly; soft solvers set False).
    * Declare options and their defaults in ``default_options`` (a dict);
      the base rejects unknown options with ``TypeError`` and stores the
      merged values in ``self.options``.  Override ``_check_options`` to
      validate values (raise ``ValueError`` naming the option).
    * Override ``_forward(q, dq, tau, f_ext) -> (ddq, lam, stats)`` and
      ``_hybrid(q, dq, ddq, tau, u, f_ext) -> (tau_out, ddq_out, lam,
      stats)`` (``u``: bool per velocity coordinate, True where ``ddq`` is
      prescribed).  ``stats`` is a dict of work counters, at least
      ``"factorizations"``.  Inputs arrive validated (shapes, finiteness,
      unit quaternions), one state at a time.
    * Use ``self.rows(q, dq)`` for ``(A, dA dq)`` (cached for the last
      state), ``self.system.model`` for the tree, and the tree algorithms of
      :mod:`gear` for ``M``, ``b`` and ABA.
    * Inverse dynamics is provided by the base (Kim eqs. 56-64 use only
      ``A`` and RNEA); override ``inverse`` only for something better.
    * Optionally put ``"residual"`` (``|A ddq + dA dq|``) in ``stats`` when
      it comes for free, and override ``forward_batch``/``hybrid_batch``
      for a native batched path (the default loops over states).

    What the base does: option handling, counters (``self.counters``:
    calls and factorizations), the residual ``|A ddq + dA dq|`` of every
    result, and the return conventions :class:`gear.ConstrainedModel`
    expects.  Register a solver through the entry-point group
    ``gear.solvers`` (``name = "module:Class"``) or pass the class itself as
    ``solver=``.
    """

    name = None
    hard = True
    default_options: dict = {}
    # rows held dependent at a step's stages (ConstrainedModel._stage_dynamics):
    # whether the solver can, and (while it solves a stage on its NumPy path)
    # the rows it leaves out as zero rows, a bool array (nc,)
    _holds_rows = False
    _held = None

    def __init__(self, system, **options):
        unknown = set(options) - set(self.default_options)
        if unknown:
            raise TypeError(f"solver {self.name!r} got unknown option(s) {sorted(unknown)}; "
                            f"its options are {sorted(self.default_options)}")
        self.system = system
        self.options = {**self.default_options, **options}
        self._check_options()
        self.counters = {"calls": 0, "factorizations": 0}
        self._cache = None

    def _check_options(self):
        """Validate ``self.options`` (override; raise ValueError)."""

    # -- helpers for implementers -------------------------------------------
    def rows(self, q, dq=None):
        """``(A, dA dq)`` at ``(q, dq)``, cached within one call (each public
        call starts with an empty cache)."""
        key = (q.tobytes(), None if dq is None else dq.tobytes())
        if self._cache is None or self._cache[0] != key:
            A, bias = self.system._rows(q, dq)
            if self._held is not None:
                A, bias = A.copy(), bias.copy()
                A[self._held] = 0.0
                bias[self._held] = 0.0
            self._cache = (key, (A, bias))
        return self._cache[1]

    def _count(self, stats):
        self.counters["calls"] += 1
        self.counters["factorizations"] += int(stats.get("factorizations", 0))

    # -- what ConstrainedModel calls ---------------------------------------------
    def forward(self, q, dq, tau, f_ext):
        self._cache = None
        ddq, lam, stats = self._forward(q, dq, tau, f_ext)
        res = stats.pop("residual", None)
        if res is None:
            A, bias = self.rows(q, dq)
            res = float(np.linalg.norm(A @ ddq + bias)) if A.size else 0.0
        self._count(stats)
        return ddq, lam, res, stats

    def hybrid(self, q, dq, ddq, tau, u, f_ext):
        self._cache = None
        tau_o, ddq_o, lam, stats = self._hybrid(q, dq, ddq, tau, u, f_ext)
        res = stats.pop("residual", None)
        if res is None:
            A, bias = self.rows(q, dq)
            res = float(np.linalg.norm(A @ ddq_o + bias)) if A.size else 0.0
        self._count(stats)
        return tau_o, ddq_o, lam, res, stats

    def fast_forward(self):
        """A callable ``(q, dq, tau) -> ConstraintResult or None`` for one
        state with no Python in between, or None (the default).  The
        callable returns None for anything it does not fully check."""
        return None

    def fast_hybrid(self):
        """Like :meth:`fast_forward` for hybrid dynamics: a callable
        ``(q, dq, ddq, tau, prescribed) -> ConstraintResult or None``
        (``prescribed`` a bool array per joint), or None (the default)."""
        return None

    def fast_inverse(self):
        """Like :meth:`fast_forward` for closed inverse dynamics with the
        default objective: a callable ``(q, dq, ddq, act, tau_passive) ->
        ConstraintResult or None`` (``act`` a bool array per velocity
        coordinate), or None.  The base class gives the native kernel's
        (``gear._core.FastInverse``) when the constraints allow it and
        :meth:`inverse` is not overridden."""
        if type(self).inverse is not ConstraintSolver.inverse:
            return None
        sys = self.system
        rcond = float(self.options.get("rcond", 1e-10))
        nd = self._inverse_data()
        if nd is None:
            return None
        return _core.FastInverse(sys._md, nd, rcond, self.name, self.counters)

    def _inverse_data(self):
        """The encoded rows (``gear._core.ClosureData``) the native inverse
        dynamics runs on, or None (Python constraints).  A solver may attach
        its own plan to them (the kkt solver's sparse route does)."""
        return self.system._native(float(self.options.get("rcond", 1e-10)))

    def forward_batch(self, q, dq, tau, f_ext):
        """A whole batch at once, or None to let the constrained model loop
        over states (the default).  Solvers with a native batched kernel
        override it and return ``(ddq, lam, residual, stats)``."""
        return None

    def hybrid_batch(self, q, dq, ddq, tau, u, f_ext):
        """Like :meth:`forward_batch` for hybrid dynamics: None or
        ``(tau, ddq, lam, residual, stats)``."""
        return None

    def _forward(self, q, dq, tau, f_ext):
        raise NotImplementedError(f"solver {self.name!r} does not implement forward dynamics")

    def _hybrid(self, q, dq, ddq, tau, u, f_ext):
        raise NotImplementedError(f"solver {self.name!r} does not implement hybrid dynamics")

    def _inverse_native(self, q, dq, ddq, a, tau_p, f_ext):
        """Closed inverse dynamics for the default objective on a batch
        (2-D arrays) through the native kernel (``closed_inverse`` in
        ``gear/constraints/_inverse.pxd``: one RNEA, the rows, the pivoted QR
        of ``A_p^T`` and the minimum-norm ``lam``), in parallel over the
        states.  Returns ``(tau, lam, exact, rank)`` -- the states that are
        not exact (under-actuated) are left for :meth:`hybrid` -- or None
        when the constraints need the NumPy path (a
        :class:`gear.CustomConstraint`)."""
        sys = self.system
        rcond = float(self.options.get("rcond", 1e-10))
        nd = self._inverse_data()
        if nd is None:
            return None
        model = sys.model
        N = q.shape[0]
        nthreads = 1
        if N > 1:
            from ..algorithms.dynamics import get_num_threads

            nthreads = get_num_threads()
        tau = np.array(tau_p, dtype=float, order="C")
        lam = np.empty((N, sys.nc))
        info = np.empty((N, 2))
        status = np.zeros(N, dtype=np.int32)
        fe = None if f_ext is None else np.ascontiguousarray(f_ext, dtype=float).reshape(N, model.nbodies, 6)
        act = np.ascontiguousarray(a, dtype=bool).view(np.uint8)
        _core.closed_inverse(model.data, nd, np.ascontiguousarray(q, dtype=float),
                             np.ascontiguousarray(dq, dtype=float), np.ascontiguousarray(ddq, dtype=float),
                             tau, act, fe, rcond, lam, info, status, nthreads)
        bad = np.flatnonzero((status != 0) & (status != -5))
        if bad.size:
            k = int(bad[0])
            sys._rows_numpy(q[k], dq[k])          # a distance closure with coincident points says so
            raise ValueError(f"native inverse-dynamics kernel failed with status {int(status[k])} (state {k})")
        return tau, lam, status == 0, info[:, 0].astype(int)

    def inverse(self, q, dq, ddq, a, tau_p, objective, f_ext):
        """Closed-system inverse dynamics with an actuated/passive split (Kim
        eqs. 56-64); ``a`` marks the actuated velocity coordinates.  Falls
        back to :meth:`hybrid` (actuated joints prescribed) when the system
        is under-actuated.  The default objective runs natively
        (:meth:`_inverse_native`) when the constraints allow it."""
        from .. import algorithms as alg

        self._cache = None
        if objective == "min_constraint_force":
            out = self._inverse_native(q[None], dq[None], ddq[None], a, tau_p[None],
                                       None if f_ext is None else f_ext[None])
            if out is not None and out[2][0]:
                stats = {"factorizations": 1, "rank": int(out[3][0]), "native": True}
                self._count(stats)
                return out[0][0], out[1][0], True, ddq, stats
            if out is not None:               # under-actuated: hybrid dynamics
                tau_h, ddq_h, lam_h, _, stats = self.hybrid(q, dq, ddq, tau_p, a, f_ext)
                return tau_h, lam_h, False, ddq_h, stats
        rcond = float(self.options.get("rcond", 1e-10))
        p = ~a
        tau_r = alg.inverse_dynamics(self.system.model, q, dq, ddq, f_ext)     # M ddq + b
        A, _ = self.rows(q, dq)
        Aa, Ap = A[:, a], A[:, p]
        rhs = tau_r[p] - tau_p[p]                                             # eq. (57)
        m = A.shape[0]
        scale = max(1.0, float(np.abs(tau_r).max()))
        if m == 0 or not p.any():
            lam0, N = np.zeros(m), np.eye(m)
        else:
            U, sv, Vt = np.linalg.svd(Ap.T, full_matrices=True)
            r = int((sv > rcond * sv[0]).sum()) if sv[0] > 0 else 0
            lam0 = Vt[:r].T @ ((U[:, :r].T @ rhs) / sv[:r])                  # (A_p^T)^+ rhs, eq. (59)
            N = Vt[r:].T                                                      # null space of A_p^T
        exact = float(np.linalg.norm(Ap.T @ lam0 - rhs)) <= 1e-9 * scale if p.any() else True
        if not exact:
            tau_h, ddq_h, lam_h, _, stats = self.hybrid(q, dq, ddq, tau_p, a, f_ext)
            return tau_h, lam_h, False, ddq_h, stats
        lam = lam0
        if N.shape[1] and objective == "min_torque":
            s = np.linalg.lstsq(Aa.T @ N, tau_r[a] - Aa.T @ lam0, rcond=None)[0]   # eq. (64)
            lam = lam0 + N @ s                                                # eq. (63)
        tau = tau_p.copy()
        tau[a] = tau_r[a] - Aa.T @ lam                                        # eqs. (58)/(60)
        stats = {"factorizations": 1, "rank": int(m - N.shape[1])}
        self._count(stats)
        return tau, lam, True, ddq, stats

    def inverse_batch(self, q, dq, ddq, a, tau_p, objective, f_ext):
        """:meth:`inverse` on a batch (2-D arrays) for the default objective:
        the native kernel in parallel (:meth:`_inverse_native`), or, for
        Python constraints, vectorised over the states (one native RNEA
        and one native row evaluation for the batch, and NumPy's stacked
        SVD of the ``A_p^T``).  Under-actuated states take :meth:`hybrid`
        one by one.
        Returns ``(tau, lam, exact, ddq, stats)`` with a leading batch axis,
        or None (the caller then loops over :meth:`inverse`): for
        ``objective="min_torque"``, whose null space differs in size from
        state to state, and for a solver that overrides :meth:`inverse`."""
        from .. import algorithms as alg

        if objective != "min_constraint_force" or type(self).inverse is not ConstraintSolver.inverse:
            return None
        sys = self.system
        p = ~a
        N = q.shape[0]
        self._cache = None
        out = self._inverse_native(q, dq, ddq, a, tau_p, f_ext)
        if out is not None:
            tau, lam, exact, _ = out
            ddq_o, nfac = self._batch_fallback(q, dq, ddq, a, tau_p, f_ext, tau, lam, exact)
            return tau, lam, exact, ddq_o, {"factorizations": nfac, "native": True}
        if not p.any() or sys.nc == 0:
            return None
        rcond = float(self.options.get("rcond", 1e-10))
        tau_r = alg.inverse_dynamics(sys.model, q, dq, ddq, f_ext)          # M ddq + b
        A = sys._rows_batch(q, dq)[1]                                       # (N, m, nv)
        B = np.swapaxes(A[:, :, p], 1, 2)                                   # A_p^T (N, n_p, m)
        rhs = tau_r[:, p] - tau_p[:, p]                                     # eq. (57)
        U, sv, Vt = np.linalg.svd(B, full_matrices=False)
        keep = sv > rcond * sv[:, :1]
        keep &= sv[:, :1] > 0
        inv = np.where(keep, 1.0 / np.where(keep, sv, 1.0), 0.0)
        lam = np.einsum("nkm,nk->nm", Vt, inv * np.einsum("npk,np->nk", U, rhs))   # eq. (59)
        scale = np.maximum(1.0, np.abs(tau_r).max(axis=1))
        exact = np.linalg.norm(np.einsum("npm,nm->np", B, lam) - rhs, axis=1) <= 1e-9 * scale
        tau = tau_p.copy()
        tau[:, a] = tau_r[:, a] - np.einsum("nma,nm->na", A[:, :, a], lam)   # eqs. (58)/(60)
        ddq_o, nfac = self._batch_fallback(q, dq, ddq, a, tau_p, f_ext, tau, lam, exact)
        return tau, lam, exact, ddq_o, {"factorizations": nfac}

    def _batch_fallback(self, q, dq, ddq, a, tau_p, f_ext, tau, lam, exact):
        """The end of :meth:`inverse_batch`: counts the exact states (one
        factorisation each) and answers the under-actuated ones with
        :meth:`hybrid` (actuated joints prescribed), in place in ``tau`` and
        ``lam``.  Returns ``(ddq, factorisations)``."""
        ddq_o = ddq.copy()
        nfac = int(exact.sum())
        self.counters["calls"] += nfac
        self.counters["factorizations"] += nfac
        for k in np.flatnonzero(~exact):
            t, d, lk, _, st = self.hybrid(q[k], dq[k], ddq[k], tau_p[k], a,
                                          None if f_ext is None else f_ext[k])
            tau[k], ddq_o[k], lam[k] = t, d, lk
            nfac += int(st.get("factorizations", 0))
        return ddq_o, nfac

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r}, options={self.options})"


# ---------------------------------------------------------------------------
# registry: built-ins + the entry-point group "gear.solvers"
# ---------------------------------------------------------------------------
_BUILTIN = {
    "kkt": ("gear.solvers.kkt", "KKTSolver"),
    "projection": ("gear.solvers.projection", "ProjectionSolver"),
    "soft": ("gear.solvers.soft", "SoftSolver"),
    "maximal": ("gear.solvers.maximal", "MaximalSolver"),
}


@functools.lru_cache(maxsize=1)
def _plugins():
    from importlib.metadata import entry_points

    found = {}
    for ep in entry_points(group="gear.solvers"):
        if ep.name in _BUILTIN:
            warnings.warn(f"gear.solvers plugin {ep.name!r} ({ep.value}) shadows a built-in "
                          "solver and is ignored", UserWarning, stacklevel=3)
            continue
        try:
            cls = ep.load()
        except Exception as exc:      # a broken plugin must never break gear
            warnings.warn(f"gear.solvers plugin {ep.name!r} ({ep.value}) could not be loaded: "
                          f"{type(exc).__name__}: {exc}", UserWarning, stacklevel=3)
            continue
        if not (isinstance(cls, type) and issubclass(cls, ConstraintSolver)):
            warnings.warn(f"gear.solvers plugin {ep.name!r} ({ep.value}) is not a "
                          "gear.solvers.ConstraintSolver subclass; ignored", UserWarning, stacklevel=3)
            continue
        found[ep.name] = cls
    return found


def refresh():
    """Forget the cached entry points (after installing a plugin)."""
    _plugins.cache_clear()


def available():
    """Names of the usable solvers: the built-ins and the plugins registered
    in the entry-point group ``gear.solvers`` (broken plugins warn and are
    left out)."""
    return sorted(set(_BUILTIN) | set(_plugins()))


def get_solver(solver):
    """The solver class for a name (built-in or plugin) or a class."""
    if isinstance(solver, type):
        if not issubclass(solver, ConstraintSolver):
            raise TypeError(f"solver class {solver.__name__} must subclass gear.solvers.ConstraintSolver")
        return solver
    if not isinstance(solver, str):
        raise TypeError(f"solver must be a name or a ConstraintSolver subclass, got {solver!r}")
    if solver in _BUILTIN:
        import importlib

        mod, cls = _BUILTIN[solver]
        return getattr(importlib.import_module(mod), cls)
    plugins = _plugins()
    if solver in plugins:
        return plugins[solver]
    raise ValueError(f"unknown solver {solver!r}; available: {available()}")

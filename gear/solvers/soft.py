"""``"soft"``: compliant constraints (Ruan, "Articulated rigid body systems",
Sec. 3.2, eq. 14)."""
from __future__ import annotations

import numpy as np

from .base import ConstraintSolver
from .kkt import _NativeHybrid

__all__ = ["SoftSolver"]


class SoftSolver(_NativeHybrid, ConstraintSolver):
    """Compliant (soft) constraints: the constraint force responds to the
    constraint's acceleration error like a stiff spring,

        ``lam = -stiffness * (A ddq + dA dq + damping * A dq)``,

    the acceleration-level form of Ruan's soft constraints ("Articulated rigid
    body systems", Sec. 3.2, eq. 14: ``-J v - lam / k = 0`` in a time step).
    With ``ddq = ddq_r + M^{-1} A^T lam`` this is the regularised system

        ``(A M^{-1} A^T + I / stiffness) lam = -(A ddq_r + dA dq + damping A dq)``,

    always solvable (redundant and singular rows need no rank decision).
    As ``stiffness -> inf`` the answer converges to the hard one with an
    error O(1 / stiffness) (``tests/test_solvers.py`` shows the rate); the
    residual ``|A ddq + dA dq|`` is not zero.  ``damping`` (1/s) adds a
    velocity-error term, useful when a simulation drifts off ``A dq = 0``.

    When every constraint is a :class:`gear.LoopClosure` or a joint coupler,
    forward dynamics runs natively (single calls, parallel batches and the
    native rollout loop): the kkt kernel's dense route with ``I /
    stiffness`` added to ``K`` and the damping term to its right-hand side,
    solved by Cholesky; hybrid dynamics too, on the same route (the
    prescribed dofs' rows and columns of ``M`` replaced by the identity).
    Python constraints take the NumPy path.

    Options: ``stiffness`` (default 1e8, in units of the rows' inverse
    mobility: kg for translational rows) and ``damping`` (default 0).
    """

    name = "soft"
    hard = False
    default_options = {"stiffness": 1e8, "damping": 0.0}
    _route = 1                    # the dense route, with K + I / stiffness
    _native_factorizations = 2    # M and K + I / stiffness

    def _native_data(self):
        return self.system._native(1e-10, 1.0 / self.options["stiffness"], self.options["damping"])

    def _check_options(self):
        k, c = float(self.options["stiffness"]), float(self.options["damping"])
        if not (np.isfinite(k) and k > 0):
            raise ValueError(f"stiffness must be positive and finite, got {self.options['stiffness']!r}")
        if not (np.isfinite(c) and c >= 0):
            raise ValueError(f"damping must be non-negative and finite, got {self.options['damping']!r}")
        self.options.update(stiffness=k, damping=c)
        self._rcond = 1e-10

    def _regularised(self, K, rhs):
        n = K.shape[0]
        return np.linalg.solve(K + np.eye(n) / self.options["stiffness"], rhs)

    def _forward_numpy(self, q, dq, tau, f_ext):
        from scipy.linalg import cho_factor, cho_solve

        from .. import algorithms as alg

        model = self.system.model
        ddq_r = alg.forward_dynamics(model, q, dq, tau, f_ext)
        A, bias = self.rows(q, dq)
        if A.shape[0] == 0:
            return ddq_r, np.zeros(0), {"factorizations": 0}
        MiAT = cho_solve(cho_factor(alg.mass_matrix(model, q)), A.T)
        rhs = -(A @ ddq_r + bias + self.options["damping"] * (A @ dq))
        lam = self._regularised(A @ MiAT, rhs)
        return ddq_r + MiAT @ lam, lam, {"factorizations": 2}

    def _hybrid_numpy(self, q, dq, ddq, tau, u, f_ext):
        from scipy.linalg import cho_factor, cho_solve

        from .. import algorithms as alg

        model = self.system.model
        v = ~u
        M = alg.mass_matrix(model, q)
        b = alg.bias_forces(model, q, dq, f_ext)
        A, bias = self.rows(q, dq)
        out = np.array(ddq, dtype=float)
        rhs = -(A[:, u] @ ddq[u] + bias + self.options["damping"] * (A @ dq))
        if v.any():
            c = cho_factor(M[np.ix_(v, v)])
            ddq_rv = cho_solve(c, tau[v] - b[v] - M[np.ix_(v, u)] @ ddq[u])
            MiAT = cho_solve(c, A[:, v].T)
            lam = self._regularised(A[:, v] @ MiAT, rhs - A[:, v] @ ddq_rv)
            out[v] = ddq_rv + MiAT @ lam
        else:
            # everything prescribed: the compliant forces still follow from
            # the rows' violation, lam = stiffness * rhs
            lam = self._regularised(np.zeros((A.shape[0], A.shape[0])), rhs)
        tau_out = M @ out + b - A.T @ lam
        tau_out[v] = tau[v]
        return tau_out, out, lam, {"factorizations": 2}

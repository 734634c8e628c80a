"""``"kkt"``: Lagrange multipliers in reduced coordinates (Kim eqs. 67-77)."""
from __future__ import annotations

import numpy as np

from .base import ConstraintSolver

__all__ = ["KKTSolver", "lstsq_psd"]


def lstsq_psd(K, rhs, rcond):
    """Minimum-norm solution of the symmetric PSD system ``K x = rhs``:
    eigenvalues below ``rcond * max`` are dropped.  Returns ``(x, rank)``."""
    if K.shape[0] == 0:
        return np.zeros(0), 0
    w, U = np.linalg.eigh(0.5 * (K + K.T))
    keep = w > rcond * max(w.max(), 0.0)
    return U[:, keep] @ ((U[:, keep].T @ rhs) / w[keep]), int(keep.sum())


class KKTSolver(ConstraintSolver):
    """Lagrange multipliers in reduced coordinates (Kim eqs. 67-69).

    ``ddq_r = M^{-1} (tau - b)`` by the articulated-body algorithm,
    ``M^{-1} A^T`` from one Cholesky factorisation of ``M``, then
    ``(A M^{-1} A^T) lam = -(A ddq_r + dA dq)`` (eq. 67) by a symmetric
    eigendecomposition that drops eigenvalues below ``rcond`` times the
    largest: redundant or singular rows give the minimum-norm ``lam``, while
    ``ddq = ddq_r + M^{-1} A^T lam`` (eq. 69) and ``A^T lam`` stay unique.
    Hybrid dynamics: eqs. 70-77 with ``M_vv``.

    Options: ``rcond`` (default 1e-10).
    """

    name = "kkt"
    default_options = {"rcond": 1e-10}

    def _check_options(self):
        r = float(self.options["rcond"])
        if not (0.0 < r < 1.0):
            raise ValueError(f"rcond must be in (0, 1), got {r}")
        self.options["rcond"] = r

    def _forward(self, q, dq, tau, f_ext):
        from scipy.linalg import cho_factor, cho_solve

        from .. import algorithms as alg

        model = self.system.model
        ddq_r = alg.forward_dynamics(model, q, dq, tau, f_ext)
        A, bias = self.rows(q, dq)
        if A.shape[0] == 0:
            return ddq_r, np.zeros(0), {"factorizations": 0, "rank": 0}
        c = cho_factor(alg.mass_matrix(model, q))
        MiAT = cho_solve(c, A.T)                                  # M^{-1} A^T
        lam, rank = lstsq_psd(A @ MiAT, -(A @ ddq_r + bias), self.options["rcond"])   # eq. (67)
        return ddq_r + MiAT @ lam, lam, {"factorizations": 2, "rank": rank}          # eq. (69)

    def _hybrid(self, q, dq, ddq, tau, u, f_ext):
        from scipy.linalg import cho_factor, cho_solve

        from .. import algorithms as alg

        model = self.system.model
        v = ~u
        M = alg.mass_matrix(model, q)
        b = alg.bias_forces(model, q, dq, f_ext)
        A, bias = self.rows(q, dq)
        ddq_u = ddq[u]
        out = np.array(ddq, dtype=float)
        if v.any():
            c = cho_factor(M[np.ix_(v, v)])
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

"""The rows of a batch of maximal-coordinate states as a linear system:
``J`` on the stacked body twists and solves with the Schur complement
``K = J M^{-1} J^T (+ CFM)`` of the KKT system (Ruan, "Articulated rigid
body systems", eqs. 12 and 14).

Two routes give the same answer: small systems (at most
:data:`DENSE_ROWS` rows) are dense and batched over the states (one
inverse of ``K`` per state, NumPy's stacked LAPACK calls); larger ones are
sparse per state (every row touches two bodies, so ``J`` has at most 12
entries a row), factorised by sparse Cholesky.  Redundant rows (a singular
``K``) are regularised by 1e-12 of ``K``'s largest diagonal and the
answer refined on ``K`` itself.
"""
from __future__ import annotations

import numpy as np

__all__ = ["RowSystem", "DENSE_ROWS", "sparse_solver"]

#: the largest row count solved by the dense, batched route
DENSE_ROWS = 96
_REG = 1e-12
_REFINE = 4


def sparse_solver(K):
    """A solve with the sparse symmetric positive semidefinite ``K``:
    Cholesky of ``K + delta I`` (CHOLMOD when scikit-sparse is installed,
    else SciPy's LU), then iterative refinement on ``K``."""
    import scipy.sparse as sp

    n = K.shape[0]
    dmax = float(K.diagonal().max()) if n else 1.0
    Kr = (K + _REG * max(dmax, 1e-300) * sp.identity(n, format="csc")).tocsc()
    try:
        from sksparse.cholmod import cholesky

        base = cholesky(Kr).solve_A
    except ImportError:
        from scipy.sparse.linalg import splu

        base = splu(Kr).solve

    def solve(r):
        x = base(r)
        for _ in range(_REFINE):
            res = r - K @ x
            if np.abs(res).max(initial=0.0) <= 1e-14 * max(1.0, np.abs(r).max(initial=0.0)):
                break
            x = x + base(res)
        return x
    return solve


class RowSystem:
    """``J`` and solves with ``K`` for a batch of states.

    Parameters
    ----------
    mx : gear.MaximalModel
    ev : dict
        :meth:`gear.MaximalModel.evaluate` of the batch (its ``slots``).
    cfm : ndarray, shape (m,), optional
        Added to ``K``'s diagonal (compliant rows, eq. 14).
    """

    def __init__(self, mx, ev, cfm=None):
        self.mx = mx
        N = ev["g"].shape[0]
        m, nb = mx.nrows, mx.nbodies
        self.N, self.m, self.nb = N, m, nb
        self.dense = m <= DENSE_ROWS
        if self.dense:
            J = np.zeros((N, m, nb, 6))
            for body, F in ev["slots"]:
                on = np.flatnonzero(body >= 0)
                np.add.at(J, (slice(None), on, body[on]), F[:, on])
            self.J = J.reshape(N, m, 6 * nb)
            MJt = np.einsum("bij,nrbj->nbir", mx.Minv, J).reshape(N, 6 * nb, m)
            self.MJt = MJt
            K = self.J @ MJt
            if cfm is not None:
                K = K + np.diag(cfm)
            self.K = K
            dmax = np.abs(K).max(axis=(1, 2), initial=0.0) if m else np.zeros(N)
            Kr = K + (_REG * np.maximum(dmax, 1e-300))[:, None, None] * np.eye(m)
            self.Kinv = np.linalg.inv(Kr) if m else np.zeros((N, 0, 0))
        else:
            import scipy.sparse as sp

            self.Js = [mx._J(ev, n) for n in range(N)]
            Minv = mx._Minv_sparse()
            self.Ks = []
            for J in self.Js:
                K = (J @ Minv @ J.T).tocsc()
                if cfm is not None:
                    K = (K + sp.diags(cfm)).tocsc()
                self.Ks.append(K)
            self._solvers = [None] * N

    def take(self, states, other):
        """Replace the data of ``states`` (indices) by ``other``'s, a
        :class:`RowSystem` of those states alone (in that order)."""
        if self.dense:
            for name in ("J", "MJt", "K", "Kinv"):
                getattr(self, name)[states] = getattr(other, name)
            return
        for i, n in enumerate(states):
            self.Js[n] = other.Js[i]
            self.Ks[n] = other.Ks[i]
            self._solvers[n] = None

    def J_apply(self, x):
        """``J x`` for body-twist-shaped ``x`` (N, nb, 6) or (N, 6 nb): (N, m)."""
        x = x.reshape(self.N, 6 * self.nb)
        if self.dense:
            return np.einsum("nrk,nk->nr", self.J, x)
        return np.stack([J @ x[n] for n, J in enumerate(self.Js)]) if self.N else np.zeros((0, self.m))

    def minv_jt_apply(self, y):
        """``M^{-1} J^T y`` for (N, m): (N, nb, 6)."""
        if self.dense:
            return np.einsum("nkr,nr->nk", self.MJt, y).reshape(self.N, self.nb, 6)
        Minv = self.mx._Minv_sparse()
        return np.stack([Minv @ (J.T @ y[n]) for n, J in enumerate(self.Js)]).reshape(self.N, self.nb, 6)

    def solve(self, r):
        """``x`` with ``K x = r`` for (N, m) right-hand sides (refined; the
        consistent answer where ``K`` is singular)."""
        if self.m == 0:
            return np.zeros((self.N, 0))
        if self.dense:
            # each state refines until its own residual is small, so that a
            # state's answer does not depend on the batch it is solved in
            x = np.einsum("nij,nj->ni", self.Kinv, r)
            tol = 1e-14 * np.maximum(1.0, np.abs(r).max(axis=1, initial=0.0))
            active = np.ones(self.N, dtype=bool)
            for _ in range(_REFINE):
                res = r - np.einsum("nij,nj->ni", self.K, x)
                active &= np.abs(res).max(axis=1, initial=0.0) > tol
                if not active.any():
                    break
                x = np.where(active[:, None], x + np.einsum("nij,nj->ni", self.Kinv, res), x)
            return x
        out = np.empty_like(r)
        for n in range(self.N):
            if self._solvers[n] is None:
                self._solvers[n] = sparse_solver(self.Ks[n])
            out[n] = self._solvers[n](r[n])
        return out

"""``"maximal"``: maximal coordinates with a sparse Cholesky factorisation
(CHOLMOD through scikit-sparse)."""
from __future__ import annotations

import numpy as np

from .base import ConstraintSolver

__all__ = ["MaximalSolver"]


def _cholmod():
    try:
        from sksparse import cholmod
    except ImportError:
        raise ImportError(
            "the 'maximal' solver needs scikit-sparse (CHOLMOD): pip install 'gear[sparse]' "
            "(with SuiteSparse installed, e.g. apt-get install libsuitesparse-dev)") from None
    return cholmod


class MaximalSolver(ConstraintSolver):
    """Maximal coordinates (seed 004, eq. 12) solved by sparse Cholesky.

    Every body is a free rigid body, and every joint and loop is a set of
    rows ``J`` on the stacked body twists (:class:`gear.maximal.
    MaximalSystem`).  ``Mb`` is block-diagonal, so the KKT system reduces to
    its Schur complement

        ``(J Mb^{-1} J^T) lam = c - J Mb^{-1} f``,  ``dV = Mb^{-1} (f + J^T lam)``,

    a sparse symmetric matrix whose pattern depends only on the topology.
    CHOLMOD analyses it once per model and prescribed set (symbolic
    factorisation with a fill-reducing ordering), and each call factorises
    it numerically.  The joint accelerations are then read off the body
    accelerations, ``ddq_i = S_i^+ (dV_i - Ad_{T^{-1}} dV_p - eta_i)``.

    **Redundant and singular rows.** The factorisation is of
    ``J Mb^{-1} J^T + beta I``, with ``beta = regularization`` times the
    largest diagonal entry.  This happens, for example, for a planar loop
    closed by a 3-D ball, or at a singular configuration.  ``refinement``
    steps of iterative refinement then solve the unregularised system:
    ``lam`` stays in the range of the matrix, which gives the
    minimum-norm multipliers, and each step cuts the error by
    ``beta / (sigma + beta)``.  ``ddq`` and ``A^T lam`` equal the
    reduced-coordinate solvers' (tested to 1e-8).

    **Hybrid dynamics** fixes the prescribed joints' relative
    accelerations with extra rows.  The prescribed joints' torques are
    ``[M ddq + b - A^T lam]_u``, from RNEA.

    Only :class:`gear.LoopClosure` constraints are taken, and every body
    needs positive mass and inertia.  Needs scikit-sparse (the ``sparse``
    extra).  Options: ``regularization`` (default 1e-12), ``refinement``
    (default 3), ``ordering`` (CHOLMOD's ``ordering_method``: ``"default"``,
    ``"amd"``, ``"metis"``, ``"nesdis"``, ``"natural"``...).
    """

    name = "maximal"
    default_options = {"regularization": 1e-12, "refinement": 3, "ordering": "default"}

    def _check_options(self):
        b = float(self.options["regularization"])
        if not (0.0 <= b < 1.0):
            raise ValueError(f"regularization must be in [0, 1), got {self.options['regularization']!r}")
        r = self.options["refinement"]
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
            raise ValueError(f"refinement must be a non-negative integer, got {r!r}")
        if not isinstance(self.options["ordering"], str):
            raise ValueError(f"ordering must be a CHOLMOD ordering name, got {self.options['ordering']!r}")
        from ..maximal import MaximalSystem

        _cholmod()
        self.maximal = MaximalSystem(self.system)
        self._symbolic = {}
        self.factor_nnz = None

    def _solve(self, q, dq, tau, f_ext, pres=None, ddq_pres=None):
        import scipy.sparse as sp

        cholmod = _cholmod()
        ms = self.maximal
        t = ms._terms(q, dq)
        J, c, f, parts = ms._assemble(t, tau, f_ext, pres)
        if pres is not None and pres.any():
            # rows S_i^+ (dV_i - Ad_{T^{-1}} dV_p) = ddq_i + S_i^+ eta_i on prescribed joints
            rows, rhs = [], []
            nb = ms.nb
            for i in np.flatnonzero(pres):
                n = ms.nvi[i]
                if n == 0:
                    continue
                Sp = ms.pinv_of(parts, i)
                blk = sp.lil_matrix((n, 6 * nb))
                blk[:, 6 * i:6 * i + 6] = Sp
                p = ms.parents[i]
                if p >= 0:
                    blk[:, 6 * p:6 * p + 6] = -Sp @ parts["X"][i]
                rows.append(blk.tocsr())
                s = slice(ms.iv[i], ms.iv[i] + n)
                rhs.append(ddq_pres[s] + Sp @ t["eta"][i])
            J = sp.vstack([J] + rows, format="csr")
            c = np.concatenate([c] + rhs)
        # J Mb^{-1}: same pattern as J (each row meets a body in one 6-block)
        if J.nnz % 6 == 0 and J.has_sorted_indices:
            seg = J.data.reshape(-1, 6)
            JM = sp.csr_matrix((np.einsum("sk,skj->sj", seg, ms.Minv[J.indices[::6] // 6]).ravel(),
                                J.indices, J.indptr), shape=J.shape)
        else:
            JM = J @ ms._Minv
        K = (JM @ J.T).tocsc()
        r = c - JM @ f
        key = None if pres is None else pres.tobytes()
        if key not in self._symbolic:
            self._symbolic[key] = cholmod.analyze(K, ordering_method=self.options["ordering"])
        fac = self._symbolic[key]
        d = K.diagonal()
        beta = self.options["regularization"] * (float(d.max()) if d.size else 0.0)
        if K.shape[0]:
            fac.cholesky_inplace(K, beta=beta)
            lam = fac(r)
            for _ in range(self.options["refinement"]):
                lam = lam + fac(r - K @ lam)
        else:
            lam = np.zeros(0)
        if self.factor_nnz is None and K.shape[0]:
            self.factor_nnz = int(fac.L().nnz)
        dV = ms._Minv @ (f + J.T @ lam)
        ddq = ms.joint_accelerations(t, dV, parts)
        # |A ddq + dA dq| = |J_loop dV - c_loop| (the loop rows in body twists)
        loop = slice(ms.nJ, ms.nJ + ms.nL)
        res = float(np.linalg.norm(J[loop] @ dV - c[loop])) if ms.nL else 0.0
        stats = {"factorizations": 1, "rows": int(K.shape[0]), "nnz_J": int(J.nnz),
                 "nnz_factor": self.factor_nnz or 0, "refinement": self.options["refinement"]}
        if pres is None:
            stats["residual"] = res
        return ddq, lam[ms.nJ:ms.nJ + ms.nL], stats

    def _forward(self, q, dq, tau, f_ext):
        return self._solve(q, dq, tau, f_ext)

    def _hybrid(self, q, dq, ddq, tau, u, f_ext):
        from .. import algorithms as alg

        ms = self.maximal
        pres = np.zeros(ms.nb, dtype=bool)
        for i in range(ms.nb):
            n = ms.nvi[i]
            pres[i] = n > 0 and bool(u[ms.iv[i]:ms.iv[i] + n].any())
        ddq_o, lam, stats = self._solve(q, dq, tau, f_ext, pres, ddq)
        ddq_o[u] = ddq[u]
        A, _ = self.rows(q, dq)
        tau_o = alg.inverse_dynamics(self.system.model, q, dq, ddq_o, f_ext) - A.T @ lam
        tau_o[~u] = tau[~u]
        return tau_o, ddq_o, lam, stats

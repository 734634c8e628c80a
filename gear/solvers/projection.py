"""``"projection"``: reduced coordinates through a null-space basis of A."""
from __future__ import annotations

import numpy as np

from .base import ConstraintSolver
from .kkt import _NativeHybrid

__all__ = ["ProjectionSolver"]


def _svd_split(A, rcond):
    """Row space and null space of ``A`` by SVD: ``(U_r, s_r, V_r, G)``."""
    U, s, Vt = np.linalg.svd(A, full_matrices=True)
    r = int((s > rcond * s[0]).sum()) if s.size and s[0] > 0 else 0
    return U[:, :r], s[:r], Vt[:r].T, Vt[r:].T


class ProjectionSolver(_NativeHybrid, ConstraintSolver):
    """Reduced-coordinate projection onto the constraint manifold.

    With ``G`` an orthonormal basis of the null space of ``A`` (SVD, rank
    cut-off ``rcond``) and ``g = -A^+ dA dq`` the minimum-norm particular
    solution of ``A ddq = -dA dq``, the accelerations are

        ``ddq = g + G (G^T M G)^{-1} G^T (tau - b - M g)``

    (the equations of motion projected on the admissible directions: Ruan,
    "Articulated rigid body systems", Sec. 4; Featherstone, ch. 3, Sec. 3.7).
    The constraint force is recovered after: ``A^T lam = M ddq + b - tau``
    (minimum-norm ``lam``).  Hybrid
    dynamics adds the prescribed coordinates as rows ``ddq_u = given``.
    Redundant rows are eliminated by the rank cut-off.

    When every constraint is a :class:`gear.LoopClosure` or a joint coupler,
    forward and hybrid dynamics run natively (``closed_forward_projection``
    in ``gear/constraints/_projection.pxd``, single states, batches in parallel
    and the native rollout loop): the null space comes from a Householder
    QR of ``A^T`` with column pivoting (rank where ``|R_kk| <= rcond
    |R_00|``) instead of the SVD, and gives the same ``ddq`` and minimum-norm
    ``lam``.  Natively, hybrid dynamics projects on the free coordinates
    ``v`` (``M_vv``, ``A_v``, the prescribed ``ddq_u`` moved to the right-hand
    sides) and reads ``tau_u`` off a second RNEA: the same ``ddq``, ``lam``
    (minimum-norm over ``A_v^T lam = (M ddq + b - tau)_v``) and ``tau`` as
    the augmented rows below.  :class:`gear.CustomConstraint` rows and
    models with more than 1000 velocity coordinates (where LAPACK's blocked
    SVD wins) take the NumPy path.

    Options: ``rcond`` (default 1e-10).
    """

    name = "projection"
    _holds_rows = True            # rows held dependent at a step's stages (_stage_dynamics)
    default_options = {"rcond": 1e-10}
    _route = 2                    # the native kernel: reduced-coordinate projection
    _native_factorizations = 4    # M, the QR of A^T, G^T M G and R_1 R_1^T

    def _native_enabled(self):
        # the native QR is unblocked: beyond ~1000 coordinates LAPACK's SVD
        # (blocked, vectorised) is faster, so large problems take NumPy
        return self.system.model.nv <= 1000

    def _check_options(self):
        r = float(self.options["rcond"])
        if not (0.0 < r < 1.0):
            raise ValueError(f"rcond must be in (0, 1), got {r}")
        self.options["rcond"] = self._rcond = r

    def _solve(self, M, f, A, c):
        """``ddq`` with ``A ddq = -c`` minimising the projected residual."""
        rc = self.options["rcond"]
        if A.shape[0] == 0:
            return np.linalg.solve(M, f), 1
        Ur, sr, Vr, G = _svd_split(A, rc)
        g = -Vr @ ((Ur.T @ c) / sr) if sr.size else np.zeros(M.shape[0])
        if G.shape[1] == 0:
            return g, 1
        Mr = G.T @ M @ G
        return g + G @ np.linalg.solve(Mr, G.T @ (f - M @ g)), 2

    def _lam(self, A, gen_force):
        if A.shape[0] == 0:
            return np.zeros(0)
        Ur, sr, Vr, _ = _svd_split(A, self.options["rcond"])
        return Ur @ ((Vr.T @ gen_force) / sr) if sr.size else np.zeros(A.shape[0])

    def _forward_numpy(self, q, dq, tau, f_ext):
        from .. import algorithms as alg

        model = self.system.model
        M = alg.mass_matrix(model, q)
        b = alg.bias_forces(model, q, dq, f_ext)
        A, bias = self.rows(q, dq)
        ddq, nfac = self._solve(M, tau - b, A, bias)
        lam = self._lam(A, M @ ddq + b - tau)                     # A^T lam = M ddq + b - tau
        return ddq, lam, {"factorizations": nfac + 1, "rank": int(np.linalg.matrix_rank(A)) if A.size else 0}

    def _hybrid_numpy(self, q, dq, ddq, tau, u, f_ext):
        from .. import algorithms as alg

        model = self.system.model
        v = ~u
        M = alg.mass_matrix(model, q)
        b = alg.bias_forces(model, q, dq, f_ext)
        A, bias = self.rows(q, dq)
        E = np.eye(model.nv)[u]
        Aug = np.vstack([A, E])
        f = np.where(v, tau, 0.0) - b
        out, nfac = self._solve(M, f, Aug, np.concatenate([bias, -ddq[u]]))
        out[u] = ddq[u]
        # lam from the free rows (as the kkt solver), then the prescribed torques
        gen = M @ out + b - tau
        lam = self._lam(A[:, v], gen[v]) if v.any() else np.zeros(A.shape[0])
        tau_out = M @ out + b - A.T @ lam
        tau_out[v] = tau[v]
        return tau_out, out, lam, {"factorizations": nfac + 1}

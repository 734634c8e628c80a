"""A third-party constraint solver written outside gear (test plugin).

Registered through the entry-point group ``gear.solvers`` by the
``gear_dummy_solver-0.1.dist-info`` next to it: the plain dense KKT system
solved by least squares.
"""
import numpy as np

import gear
from gear.solvers import ConstraintSolver


class DenseLstsqSolver(ConstraintSolver):
    name = "dense_lstsq"
    default_options = {}

    def _kkt(self, M, f, A, c):
        m = A.shape[0]
        K = np.block([[M, A.T], [A, np.zeros((m, m))]])
        sol = np.linalg.lstsq(K, np.concatenate([f, -c]), rcond=None)[0]
        return sol[:M.shape[0]], -sol[M.shape[0]:]

    def _forward(self, q, dq, tau, f_ext):
        model = self.system.model
        M, b = gear.mass_matrix(model, q), gear.bias_forces(model, q, dq, f_ext)
        A, bias = self.rows(q, dq)
        ddq, lam = self._kkt(M, tau - b, A, bias)
        return ddq, lam, {"factorizations": 1}

    def _hybrid(self, q, dq, ddq, tau, u, f_ext):
        model = self.system.model
        M, b = gear.mass_matrix(model, q), gear.bias_forces(model, q, dq, f_ext)
        A, bias = self.rows(q, dq)
        E = np.eye(model.nv)[u]
        out, mu = self._kkt(M, np.where(u, 0.0, tau) - b, np.vstack([A, E]),
                            np.concatenate([bias, -ddq[u]]))
        lam = mu[:A.shape[0]]
        tau_out = M @ out + b - A.T @ lam
        tau_out[~u] = tau[~u]
        return tau_out, out, lam, {"factorizations": 1}

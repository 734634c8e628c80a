# cython: language_level=3
"""Closed-system inverse dynamics with an actuated/passive split (Kim, Lie
Group Formulation of Articulated Rigid Body Dynamics, eqs. 56-64):
``closed_inverse``, the native twin of
``gear.solvers.ConstraintSolver.inverse`` for the minimum-norm constraint
force.  One RNEA gives ``tau_r = M ddq + b``; the passive dofs' equation
``A_p^T lam = tau_r,p - tau_p`` (eq. 57) is solved for the minimum-norm
``lam`` by the pivoted QR of ``_projection.pxd``; the actuated torques
follow (eqs. 58/60).
"""
from libc.math cimport sqrt, fabs
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._rnea cimport rnea
from gear.constraints._cwork cimport ST_MASS_NOT_PD, ST_INEXACT, ClosC, CWork
from gear.constraints._rows cimport constraint_rows
from gear.constraints._projection cimport qr_pivoted, qr_form_q, qr_min_norm


cdef inline int closed_inverse(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                               const double* ddq, double* tau, const unsigned char* act,
                               const double* fext, double rcond, double* lam, double* info,
                               Work* w, CWork* cw) noexcept nogil:
    """Closed-system inverse dynamics with an actuated/passive split (Kim
    eqs. 56-64) for the default objective (the minimum-norm constraint
    force), the native twin of ``gear.solvers.ConstraintSolver.inverse``:

        tau_r = M ddq + b                    RNEA
        A_p^T lam = tau_r,p - tau_p          eq. (57): minimum-norm lam from
                                             the pivoted QR of A_p^T (rank
                                             where |R_kk| <= rcond |R_00|)
        tau_a = tau_r,a - A_a^T lam          eqs. (58)/(60)

    ``act`` (nv,) 1 on the actuated dofs a, 0 on the passive ones p;
    ``tau`` holds the passive dofs' given torques on entry and the
    actuated ones on exit.  ``info`` = (rank, |A_p^T lam - rhs| / max(1,
    max |tau_r|)).  Returns 0; ST_INEXACT when that relative residual is
    above 1e-9 (the loops cannot follow ``ddq`` with the passive torques
    given: the caller falls back to hybrid dynamics, ``tau`` untouched);
    or ST_DIST_COINCIDE."""
    cdef int i, j, k, st, rank, np_ = 0, nr = c.m, nv = m.nv
    cdef double t, scale, r2
    cdef double* tr = cw.tx      # M ddq + b
    cdef double* pidx = cw.xs    # the passive dofs (as doubles)
    cdef double* e = cw.us       # (np,) the right-hand side of eq. (57)
    cdef double* hb = cw.ts
    cdef double* A = cw.Ad
    cdef double* X = cw.Bd       # A_p^T by columns
    rnea(m, q, dq, ddq, fext, True, tr, w)
    scale = 1.0
    for k in range(nv):
        if fabs(tr[k]) > scale:
            scale = fabs(tr[k])
        if not act[k]:
            pidx[np_] = k
            e[np_] = tr[k] - tau[k]
            np_ += 1
    for i in range(nr):
        lam[i] = 0.0
    info[0] = 0.0
    info[1] = 0.0
    if nr > 0:
        st = constraint_rows(m, c, q, dq, NULL, A, NULL, w, cw)
        if st != 0:
            return st
        if np_ > 0:
            for j in range(nr):
                for k in range(np_):
                    X[j * np_ + k] = A[j * nv + <int> pidx[k]]
            rank = qr_pivoted(X, np_, nr, rcond, cw.piv, hb)
            qr_form_q(X, hb, np_, rank, cw.Pq)
            if qr_min_norm(X, cw.Pq, cw.piv, np_, nr, rank, e, cw.tmp, cw.K, lam) != 0:
                return ST_MASS_NOT_PD
            info[0] = rank
    if np_ > 0:
        # |A_p^T lam - rhs| (no rows: |rhs|)
        r2 = 0.0
        for k in range(np_):
            t = -e[k]
            for j in range(nr):
                t += A[j * nv + <int> pidx[k]] * lam[j]
            r2 += t * t
        info[1] = sqrt(r2) / scale
        if not (info[1] <= 1e-9):
            return ST_INEXACT
    for k in range(nv):
        if act[k]:
            t = tr[k]
            for j in range(nr):
                t -= A[j * nv + k] * lam[j]
            tau[k] = t
    return 0

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Native rollouts (``gear/algorithms/_rollout.pxd``): the whole steps
loop of a batch of states without the GIL, in parallel over states, for
trees and closed chains."""
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free

from gear.algorithms._types cimport Work, work_from, Lanes, lanes_from, lanes_size, lanes_aligned, LANES_SLACK
from gear.algorithms._rollout cimport (RollC, rollout as _rollout, rollout_scratch, rollout_lanes,
                                       rollout_lanes_scratch)
from gear.spatial._lanes cimport LANES
from gear.constraints._cwork cimport ClosC, CWork, cwork_from_c, cwork_size_c
from gear.maximal._kernel cimport gear_chol, gear_chol_clone, gear_chol_free
from gear._data cimport ModelData, ClosureData, _row, _orow, _base1, _base2


def rollout(ModelData md not None, ClosureData cd, const double[:, ::1] q0, const double[:, ::1] v0,
            const double[:, ::1] tau, int integrator, int nsteps, double dt, double last_dt,
            int record_every, int route, int project, double tol, const double[::1] kp,
            const double[::1] kd, const double[::1] q_target, const double[::1] dq_target,
            int gravity_comp, double[:, :, ::1] Q, double[:, :, ::1] V, double[:, :, ::1] L,
            double[:, ::1] tmax, int[::1] status, int nthreads, int project_start=1, int k0=0,
            const double[:, ::1] ref=None, double ref_t0=0.0, double ref_dt=1.0,
            const double[::1] ckp=None, const double[::1] ckd=None, double bg_a=0.0,
            double bg_b=0.0):
    """Native rollouts of each row (see _rollout.pxd); ``cd`` None for a
    tree; ``tau``/``kp``/``L`` may be None; ``bg_a``, ``bg_b``: Baumgarte's
    ``2 alpha`` and ``beta^2`` (closed chains).  Parallel over rows, no GIL."""
    cdef RollC r
    cdef Py_ssize_t N = q0.shape[0], k
    cdef int nq = md.nq, nv = md.nv, nb = md.nb, m = 0 if cd is None else cd.m, st
    cdef int T = Q.shape[1]
    cdef int wsize = md.wsize
    cdef const ClosC* cp = NULL if cd is None else &cd.c
    cdef int cwsize = cwork_size_c(cp, nb, nv, m, True)
    cdef int ssize = rollout_scratch(nq, nv, m)
    cdef const double* qp = &q0[0, 0]
    cdef const double* vp = &v0[0, 0] if nv > 0 else NULL
    cdef const double* tp = _base2(tau)
    cdef double* Qp = &Q[0, 0, 0]
    cdef double* Vp = &V[0, 0, 0] if nv > 0 else NULL
    cdef double* Lp = NULL if (L is None or m == 0) else &L[0, 0, 0]
    cdef Work w
    cdef CWork cw
    cdef double* buf
    cdef double* lbuf
    r.integrator = integrator
    r.nsteps = nsteps
    r.dt = dt
    r.last_dt = last_dt
    r.record_every = record_every
    r.nrec = T
    r.route = route
    r.project = project
    r.project_start = project_start
    r.tol = tol
    r.kp = _base1(kp)
    r.kd = _base1(kd)
    r.q_target = _base1(q_target)
    r.dq_target = _base1(dq_target)
    r.gravity_comp = gravity_comp
    r.k0 = k0
    r.ref = _base2(ref)
    r.nref = 0 if ref is None else <int> ref.shape[0]
    r.ref_t0 = ref_t0
    r.ref_dt = ref_dt
    r.ckp = _base1(ckp)
    r.ckd = _base1(ckd)
    r.bg_a = bg_a
    r.bg_b = bg_b
    if ref is not None and (ref.shape[1] != nq + 2 * nv or ckp is None or ckd is None or ref_dt <= 0):
        raise ValueError("rollout: the reference samples need nq + 2 nv columns, gains and ref_dt > 0")
    if N == 0:
        return
    # a tree's states run LANES at a time (rollout_lanes), the rest one by one
    cdef Py_ssize_t nblk = N // LANES if cp == NULL and nv > 0 else 0
    cdef Py_ssize_t kb = nblk * LANES, b, j
    cdef Py_ssize_t lsize = lanes_size(nb, LANES) + rollout_lanes_scratch(nq, nv) if nblk > 0 else 0
    cdef Lanes lw
    with nogil, parallel(num_threads=max(1, min(nthreads, <int> (nblk + N - kb)))):
        buf = <double*> malloc((wsize + cwsize + ssize + 1 + lsize + LANES_SLACK) * sizeof(double))
        w = work_from(buf, nb)
        cw = cwork_from_c(cp, buf + wsize, nb, nv, m, True)
        cw.chol = gear_chol_clone(cd.h0) if cp != NULL and cp.mx != NULL else NULL
        lbuf = lanes_aligned(buf + wsize + cwsize + ssize + 1)
        lw = lanes_from(lbuf, nb, LANES)
        for b in prange(nblk + N - kb, schedule='dynamic'):
            if b < nblk:
                k = b * LANES
                st = rollout_lanes(&md.c, &r, qp + k * nq, _row(vp, k, nv), _row(tp, k, nv),
                                   Qp + k * T * nq, _orow(Vp, k, T * nv), &w, &lw,
                                   lbuf + lanes_size(nb, LANES))
                for j in range(k, k + LANES):
                    tmax[j, 0] = 0.0
                    tmax[j, 1] = 0.0
                    if st != 0:
                        # a lane failed: each state alone, for its status
                        status[j] = _rollout(&md.c, cp, &r, qp + j * nq, _row(vp, j, nv), _row(tp, j, nv),
                                             Qp + j * T * nq, _orow(Vp, j, T * nv), NULL, &tmax[j, 0],
                                             &w, &cw, buf + wsize + cwsize)
                    else:
                        status[j] = 0
            else:
                k = kb + b - nblk
                st = _rollout(&md.c, cp, &r, qp + k * nq, _row(vp, k, nv), _row(tp, k, nv),
                              Qp + k * T * nq, _orow(Vp, k, T * nv), _orow(Lp, k, T * m), &tmax[k, 0],
                              &w, &cw, buf + wsize + cwsize)
                status[k] = st
        gear_chol_free(<gear_chol*> cw.chol)
        free(buf)

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Native entry points: frozen model data and the single/batched drivers of
the recursions in ``gear/algorithms/*.pxd``.

Nothing here validates input: ``gear/algorithms/dynamics.py`` checks shapes,
dtypes, contiguity and finiteness before calling in.  Batched drivers run
``prange`` over states without the GIL; each thread owns its workspace.
"""
from cython.parallel cimport prange, parallel, threadid
from libc.stdlib cimport malloc, free
cimport openmp

import numpy as np

from gear.algorithms._types cimport ModelC, Work, work_from, WORK_PER_BODY
from gear.algorithms._rnea cimport rnea as _rnea
from gear.algorithms._aba cimport hybrid as _hybrid
from gear.algorithms._crba cimport crba as _crba
from gear.algorithms._fk cimport fk as _fk
from gear.joints._jcalc cimport jcalc, jcalc_dS, jcalc_nv


def omp_max_threads():
    """``omp_get_max_threads()`` of the OpenMP runtime this module links."""
    return openmp.omp_get_max_threads()


def omp_enabled():
    """True if the extension was compiled with OpenMP (prange is parallel)."""
    cdef int[::1] t = np.zeros(64, dtype=np.int32)
    cdef Py_ssize_t k
    for k in prange(64, nogil=True, num_threads=2, schedule='static'):
        t[k] = threadid()
    return max(t) > 0


cdef class ModelData:
    """Flat typed arrays of a frozen :class:`gear.Model` (see _types.pxd)."""
    cdef ModelC c
    cdef readonly object arrays
    cdef double[::1] ws
    cdef readonly int nb, nq, nv, wsize

    def __init__(self, parent, jtype, iq, iv, nvi, jparam, Xtree, inertia, gravity, int nq, int nv):
        cdef int[::1] a_parent = np.ascontiguousarray(parent, dtype=np.int32)
        cdef int[::1] a_jtype = np.ascontiguousarray(jtype, dtype=np.int32)
        cdef int[::1] a_iq = np.ascontiguousarray(iq, dtype=np.int32)
        cdef int[::1] a_iv = np.ascontiguousarray(iv, dtype=np.int32)
        cdef int[::1] a_nvi = np.ascontiguousarray(nvi, dtype=np.int32)
        cdef double[:, ::1] a_jparam = np.ascontiguousarray(jparam, dtype=np.float64)
        cdef double[:, ::1] a_X = np.ascontiguousarray(Xtree, dtype=np.float64)
        cdef double[:, ::1] a_I = np.ascontiguousarray(inertia, dtype=np.float64)
        cdef int nb = a_parent.shape[0]
        if nb < 1:
            raise ValueError("the model has no bodies; add one with Model.add_body")
        self.arrays = (a_parent, a_jtype, a_iq, a_iv, a_nvi, a_jparam, a_X, a_I)
        self.nb = nb
        self.nq = nq
        self.nv = nv
        self.c.nb = nb
        self.c.nq = nq
        self.c.nv = nv
        self.c.parent = &a_parent[0]
        self.c.jtype = &a_jtype[0]
        self.c.iq = &a_iq[0]
        self.c.iv = &a_iv[0]
        self.c.nvi = &a_nvi[0]
        self.c.jparam = &a_jparam[0, 0]
        self.c.Xtree = &a_X[0, 0]
        self.c.inertia = &a_I[0, 0]
        self.c.g[0] = gravity[0]
        self.c.g[1] = gravity[1]
        self.c.g[2] = gravity[2]
        self.wsize = WORK_PER_BODY * nb
        self.ws = np.zeros(self.wsize)

    def set_gravity(self, g):
        self.c.g[0] = g[0]
        self.c.g[1] = g[1]
        self.c.g[2] = g[2]


cdef const double* _base2(const double[:, ::1] a):
    # first element of a batch, or NULL for an absent (None) argument
    if a is None or a.shape[0] == 0 or a.shape[1] == 0:
        return NULL
    return &a[0, 0]


cdef const double* _base3(const double[:, :, ::1] a):
    if a is None or a.shape[0] == 0:
        return NULL
    return &a[0, 0, 0]


cdef inline const double* _row(const double* base, Py_ssize_t k, Py_ssize_t stride) noexcept nogil:
    if base == NULL:
        return NULL
    return base + k * stride


def rnea(ModelData md, const double[:, ::1] q, const double[:, ::1] dq,
         const double[:, ::1] ddq, const double[:, :, ::1] fext, bint gravity,
         double[:, ::1] out, int nthreads):
    """Kim Table 2 on each row; ``dq``/``ddq``/``fext`` may be None (zero)."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef const ModelC* mc = &md.c
    cdef Work w
    cdef double* buf
    cdef int nb = md.nb, wsize = md.wsize, nq = md.nq, nv = md.nv
    cdef const double* qp = &q[0, 0]
    cdef const double* dqp = _base2(dq)
    cdef const double* ddqp = _base2(ddq)
    cdef const double* fp = _base3(fext)
    cdef double* op = &out[0, 0]
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        for k in range(N):
            _rnea(mc, qp + k * nq, _row(dqp, k, nv), _row(ddqp, k, nv), _row(fp, k, 6 * nb),
                  gravity, op + k * nv, &w)
        return
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc(wsize * sizeof(double))
        w = work_from(buf, nb)
        for k in prange(N, schedule='static'):
            _rnea(mc, qp + k * nq, _row(dqp, k, nv), _row(ddqp, k, nv), _row(fp, k, 6 * nb),
                  gravity, op + k * nv, &w)
        free(buf)


def hybrid(ModelData md, const double[:, ::1] q, const double[:, ::1] dq,
           double[:, ::1] ddq, double[:, ::1] tau, const unsigned char[::1] prescribed,
           const double[:, :, ::1] fext, int[::1] status, int nthreads):
    """Kim Tables 3/4 in place on each row (``prescribed`` None = ABA).

    ``status[k]`` is 0, or 1 + the body whose S^T Ihat S is singular."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef const ModelC* mc = &md.c
    cdef Work w
    cdef double* buf
    cdef int nb = md.nb, wsize = md.wsize, nq = md.nq, nv = md.nv
    cdef const unsigned char* pres = NULL
    cdef const double* qp = &q[0, 0]
    cdef const double* dqp = _base2(dq)
    cdef const double* fp = _base3(fext)
    cdef double* ddqp = &ddq[0, 0] if nv > 0 else NULL
    cdef double* taup = &tau[0, 0] if nv > 0 else NULL
    cdef int* st = &status[0]
    if prescribed is not None:
        pres = &prescribed[0]
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        for k in range(N):
            st[k] = _hybrid(mc, qp + k * nq, _row(dqp, k, nv), ddqp + k * nv, taup + k * nv,
                            pres, _row(fp, k, 6 * nb), &w)
        return
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc(wsize * sizeof(double))
        w = work_from(buf, nb)
        for k in prange(N, schedule='static'):
            st[k] = _hybrid(mc, qp + k * nq, _row(dqp, k, nv), ddqp + k * nv, taup + k * nv,
                            pres, _row(fp, k, 6 * nb), &w)
        free(buf)


def crba(ModelData md, const double[:, ::1] q, double[:, :, ::1] out, int nthreads):
    """Mass matrix of each row."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef const ModelC* mc = &md.c
    cdef Work w
    cdef double* buf
    cdef int nb = md.nb, wsize = md.wsize, nq = md.nq, nv = md.nv
    cdef const double* qp = &q[0, 0]
    cdef double* op = &out[0, 0, 0]
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        for k in range(N):
            _crba(mc, qp + k * nq, op + k * nv * nv, &w)
        return
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc(wsize * sizeof(double))
        w = work_from(buf, nb)
        for k in prange(N, schedule='static'):
            _crba(mc, qp + k * nq, op + k * nv * nv, &w)
        free(buf)


def fk(ModelData md, const double[:, ::1] q, const double[:, ::1] dq,
       double[:, :, :, ::1] poses, double[:, :, ::1] twists, int nthreads):
    """World poses (and body twists when ``dq`` is given) of each row."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef const ModelC* mc = &md.c
    cdef Work w
    cdef double* buf
    cdef int nb = md.nb, wsize = md.wsize, nq = md.nq, nv = md.nv
    cdef const double* qp = &q[0, 0]
    cdef const double* dqp = _base2(dq)
    cdef double* pp = &poses[0, 0, 0, 0]
    cdef double* tp = <double*> _base3(twists)
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        for k in range(N):
            _fk(mc, qp + k * nq, _row(dqp, k, nv), pp + k * 16 * nb, <double*> _row(tp, k, 6 * nb), &w)
        return
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc(wsize * sizeof(double))
        w = work_from(buf, nb)
        for k in prange(N, schedule='static'):
            _fk(mc, qp + k * nq, _row(dqp, k, nv), pp + k * 16 * nb, <double*> _row(tp, k, 6 * nb), &w)
        free(buf)


def rnea_thread_ids(ModelData md, const double[:, ::1] q, int[::1] tid, int nthreads):
    """Run the batched RNEA driver and record which OpenMP thread handled
    each state (used by the tests to show the batch really runs in parallel)."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef const ModelC* mc = &md.c
    cdef Work w
    cdef double* buf
    cdef double* tau
    cdef int nb = md.nb, wsize = md.wsize, nv = md.nv, md_nq = md.nq
    cdef const double* qp = &q[0, 0]
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc((wsize + nv + 1) * sizeof(double))
        w = work_from(buf, nb)
        tau = buf + wsize
        for k in prange(N, schedule='static'):
            _rnea(mc, qp + k * md_nq, NULL, NULL, NULL, True, tau, &w)
            tid[k] = threadid()
        free(buf)


def jcalc_py(int kind, const double[::1] prm, const double[::1] q, const double[::1] dq):
    """Joint transform J (12,), S (6, n) and dS (6, n) of one joint."""
    cdef int n = jcalc_nv(kind)
    cdef double[::1] J = np.zeros(12)
    cdef double[::1] S = np.zeros(36)
    cdef double[::1] dS = np.zeros(36)
    cdef double qz[8]
    cdef const double* qp = qz
    cdef int k
    for k in range(8):
        qz[k] = 0.0
    if q.shape[0] > 0:
        qp = &q[0]
    jcalc(kind, &prm[0], qp, &J[0], &S[0])
    if dq is not None and n > 0:
        jcalc_dS(kind, &prm[0], qp, &dq[0], &S[0], &dS[0])
    Sa = np.asarray(S)[:6 * n].reshape(n, 6).T.copy()
    dSa = np.asarray(dS)[:6 * n].reshape(n, 6).T.copy()
    return np.asarray(J), Sa, dSa

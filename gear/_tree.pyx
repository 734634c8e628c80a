# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Native entry points of the tree algorithms: the batched drivers of
the recursions in ``gear/algorithms/*.pxd`` (RNEA, ABA / hybrid dynamics,
CRBA, forward kinematics, their derivatives, configuration integration)
and their single-state fast paths.

Nothing here validates input beyond the fast paths' checks:
``gear/algorithms/dynamics.py`` checks shapes, dtypes, contiguity and
finiteness before calling in.  Batched drivers share the states between
the parts of the fork-join team (``gear/_team.h``); each part owns its
workspace."""
from cython.parallel cimport prange, parallel, threadid
from libc.stdlib cimport malloc, calloc, free
cimport numpy as cnp
from libc.math cimport fabs, sqrt

import numpy as np

from gear.algorithms._types cimport ModelC, Work, work_from, Lanes, lanes_from, lanes_size, lanes_aligned, LANES_SLACK
from gear.algorithms._rnea cimport rnea as _rnea, rnea_lanes as _rnea_lanes
from gear.spatial._lanes cimport LANES, l_sin_cos
from gear.spatial._v4 cimport v4
from gear.spatial._spatial cimport sin_cos
from gear.algorithms._aba cimport hybrid as _hybrid, hybrid_lanes as _hybrid_lanes
from gear.algorithms._crba cimport crba as _crba, crba_lanes as _crba_lanes
from gear.algorithms._fk cimport fk as _fk, fk_lanes as _fk_lanes
from gear.algorithms._derivatives cimport (rnea_derivatives as _rnea_d, aba_derivatives as _aba_d,
                                           rnea_tangent as _rnea_t,
                                           rnea_derivatives_lanes as _rnea_d_lanes,
                                           aba_derivatives_lanes as _aba_d_lanes)
from gear.joints._jcalc cimport jcalc, jcalc_dS, jcalc_nv, jcalc_dSdq, jcalc_ddSdq
from gear.joints._integrate cimport integrate_config as _integrate_config
from gear._data cimport (ModelData, _PARALLEL_FROM, _base2, _base3, _row, _orow, _vec, _quats_ok, _empty,
                         _empty2, _copied, _flags, _batch_in, State1, _state1, _mat, _out_ok, batch_threads,
                         team_run, team_share, team_scratch)

cnp.import_array()


# ---------------------------------------------------------------------------
# Batched drivers.  A Call holds the base pointers and per-state strides of
# one batched call; _one() runs the kernel on state k (the one kernel switch
# of this module) and _run() runs all states, serially on the model's cached
# workspace or shared by the team's parts (_run_part), one workspace each.
# ---------------------------------------------------------------------------
cdef enum:
    K_RNEA = 0
    K_HYBRID = 1
    K_CRBA = 2
    K_FK = 3
    K_RNEA_D = 4
    K_ABA_D = 5


cdef struct Call:
    int kind
    bint gravity
    const double* q
    const double* dq          # NULL = zero velocity
    const double* ddq         # NULL = zero acceleration (K_RNEA)
    const double* tau         # K_ABA_D
    const double* fext        # NULL = no external wrenches
    const unsigned char* prescribed
    double* o1                # outputs; meaning per kind (see the drivers)
    double* o2
    double* o3
    double* o4
    Py_ssize_t so             # stride of o1..o4 (per state)
    Py_ssize_t so1            # stride of o1 when it differs (K_HYBRID, K_FK, K_ABA_D)
    int* status               # per state, or NULL


cdef inline int _one(const ModelC* m, const Call* c, Py_ssize_t k, Work* w,
                     double* scratch) noexcept nogil:
    cdef const double* q = c.q + k * m.nq
    cdef const double* dq = _row(c.dq, k, m.nv)
    cdef const double* fe = _row(c.fext, k, 6 * m.nb)
    if c.kind == K_RNEA:
        return _rnea(m, q, dq, _row(c.ddq, k, m.nv), fe, c.gravity, c.o1 + k * c.so, w)
    elif c.kind == K_HYBRID:
        # o1 = ddq, o2 = tau, both read and written in place
        return _hybrid(m, q, dq, c.o1 + k * c.so, c.o2 + k * c.so, c.prescribed, fe, w)
    elif c.kind == K_CRBA:
        return _crba(m, q, c.o1 + k * c.so, w)
    elif c.kind == K_FK:
        # o1 = poses (so1 per state), o2 = twists or NULL
        _fk(m, q, dq, c.o1 + k * c.so1, _orow(c.o2, k, c.so), w)
        return 0
    elif c.kind == K_RNEA_D:
        return _rnea_d(m, q, dq, _row(c.ddq, k, m.nv), fe, c.o1 + k * c.so, c.o2 + k * c.so,
                       c.o3 + k * c.so, w)
    elif c.kind == K_ABA_D:
        # o1 = ddq (so1), o2 = dddq/dq, o3 = dddq/d(dq), o4 = Minv; scratch: 2 nv x nv
        return _aba_d(m, q, dq, c.tau + k * m.nv, fe, c.o1 + k * c.so1, c.o2 + k * c.so,
                      c.o3 + k * c.so, c.o4 + k * c.so, scratch, w)
    return -2


cdef inline bint _has_lanes(const Call* c) noexcept nogil:
    # the kernels with a lane version (several states per instruction)
    return (c.kind == K_RNEA or c.kind == K_CRBA or c.kind == K_HYBRID or c.kind == K_FK
            or c.kind == K_RNEA_D or c.kind == K_ABA_D)


cdef inline void _block(const ModelC* m, const Call* c, Py_ssize_t k, Lanes* lw, Work* w,
                        double* scratch) noexcept nogil:
    """States ``k .. k + LANES - 1`` at once through the lane kernel of
    ``c.kind`` (results equal ``_one``'s on each state, bit for bit).  A
    block that fails (a singular joint inertia in some state) runs again
    state by state, for each state's status."""
    cdef int l, st = 0
    if c.kind == K_RNEA:
        _rnea_lanes(m, c.q + k * m.nq, _row(c.dq, k, m.nv), _row(c.ddq, k, m.nv),
                    _row(c.fext, k, 6 * m.nb), c.gravity, c.o1 + k * c.so, c.so, lw)
    elif c.kind == K_CRBA:
        _crba_lanes(m, c.q + k * m.nq, c.o1 + k * c.so, c.so, lw)
    elif c.kind == K_FK:
        # o1 = poses (so1 per state), o2 = twists or NULL
        _fk_lanes(m, c.q + k * m.nq, _row(c.dq, k, m.nv), c.o1 + k * c.so1, c.so1, _orow(c.o2, k, c.so),
                  c.so, lw)
    elif c.kind == K_RNEA_D:
        # 1: a joint whose S depends on q, each state alone below
        st = _rnea_d_lanes(m, c.q + k * m.nq, _row(c.dq, k, m.nv), _row(c.ddq, k, m.nv),
                           _row(c.fext, k, 6 * m.nb), c.o1 + k * c.so, c.o2 + k * c.so, c.o3 + k * c.so,
                           c.so, lw)
    elif c.kind == K_ABA_D:
        # as _one's; scratch: LANES x 2 nv x nv.  1: not covered, -1: some M not
        # positive definite (each state alone below, for its status)
        st = _aba_d_lanes(m, c.q + k * m.nq, _row(c.dq, k, m.nv), c.tau + k * m.nv,
                          _row(c.fext, k, 6 * m.nb), c.o1 + k * c.so1, c.so1, c.o2 + k * c.so,
                          c.o3 + k * c.so, c.o4 + k * c.so, c.so, scratch, lw)
    else:
        # o1 = ddq, o2 = tau, both read and written in place
        st = _hybrid_lanes(m, c.q + k * m.nq, _row(c.dq, k, m.nv), c.o1 + k * c.so, c.o2 + k * c.so, c.so,
                           c.prescribed, _row(c.fext, k, 6 * m.nb), lw)
    if st == 0:
        if c.status != NULL:
            for l in range(LANES):
                c.status[k + l] = 0
        return
    for l in range(LANES):
        st = _one(m, c, k + l, w, scratch)
        if c.status != NULL:
            c.status[k + l] = st


cdef struct RunJob:
    # one batched call shared by the team's parts (see _run)
    const ModelC* m
    const Call* c
    Py_ssize_t nblk             # blocks of LANES states, then the states from k0 one at a time
    Py_ssize_t k0
    Py_ssize_t N
    int wsize                   # the tree workspace, then the kernel's scratch
    int bsize                   # doubles of one part's workspace
    int lanes_at                # where its lanes workspace starts
    int failed                  # a part could not allocate its workspace


cdef void _run_part(void* job, int part, int nparts) noexcept nogil:
    """The team's part ``part``: its contiguous share of the blocks and single
    states (as OpenMP's static schedule), on a workspace of its own."""
    cdef RunJob* j = <RunJob*> job
    cdef Py_ssize_t b, b0, b1, k
    cdef int st
    cdef Work w
    cdef Lanes lw
    cdef double* buf = team_scratch(j.bsize)
    if buf == NULL:
        j.failed = 1
        return
    w = work_from(buf, j.m.nb)
    lw = lanes_from(lanes_aligned(buf + j.lanes_at), j.m.nb, LANES)
    team_share(j.nblk + j.N - j.k0, part, nparts, &b0, &b1)
    for b in range(b0, b1):
        if b < j.nblk:
            _block(j.m, j.c, b * LANES, &lw, &w, buf + j.wsize)
        else:
            k = j.k0 + b - j.nblk
            st = _one(j.m, j.c, k, &w, buf + j.wsize)
            if j.c.status != NULL:
                j.c.status[k] = st


cdef void _run(ModelData md, const Call* c, Py_ssize_t N, int nthreads):
    """All ``N`` states of ``c``: blocks of ``LANES`` states through the
    lane kernel where ``c.kind`` has one, the rest one at a time; serially
    on the model's cached workspace, or shared by ``nthreads`` parts of the
    fork-join team (``gear/_team.h``), one workspace each."""
    cdef Py_ssize_t k, b
    cdef int st
    cdef Work w
    cdef Lanes lw
    cdef double* lbuf = NULL
    cdef int nb = md.nb, wsize = md.wsize, extra = 2 * LANES * md.nv * md.nv   # K_ABA_D's scratch
    cdef Py_ssize_t nblk = N // LANES if _has_lanes(c) else 0
    cdef Py_ssize_t k0 = nblk * LANES
    cdef Py_ssize_t lsize = lanes_size(nb, LANES) if nblk > 0 else 0
    cdef RunJob job
    if nthreads > nblk + N - k0:
        nthreads = <int> (nblk + N - k0)       # no more parts than blocks and single states
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        if nblk > 0:
            lbuf = <double*> malloc((lsize + LANES_SLACK) * sizeof(double))
            if lbuf == NULL:
                raise MemoryError()
            lw = lanes_from(lanes_aligned(lbuf), nb, LANES)
        with nogil:
            for b in range(nblk):
                _block(&md.c, c, b * LANES, &lw, &w, &md.ws[wsize])
            for k in range(k0, N):
                st = _one(&md.c, c, k, &w, &md.ws[wsize])
                if c.status != NULL:
                    c.status[k] = st
        free(lbuf)
        return
    job.m = &md.c
    job.c = c
    job.nblk = nblk
    job.k0 = k0
    job.N = N
    job.wsize = wsize
    job.lanes_at = wsize + extra + 1
    job.bsize = <int> (job.lanes_at + lsize + LANES_SLACK)
    job.failed = 0
    with nogil:
        team_run(nthreads, _run_part, &job)
    if job.failed:
        raise MemoryError()


cdef Call _blank(int kind, const double* q, const double* dq) noexcept nogil:
    # a Call of ``kind`` on ``q``, ``dq`` (NULL: zero), gravity on, every
    # other field unset (NULL, 0)
    cdef Call c
    c.kind = kind
    c.gravity = True
    c.q = q
    c.dq = dq
    c.ddq = c.tau = c.fext = NULL
    c.prescribed = NULL
    c.o1 = c.o2 = c.o3 = c.o4 = NULL
    c.so = c.so1 = 0
    c.status = NULL
    return c


cdef Call _call(int kind, const double[:, ::1] q, const double[:, ::1] dq,
                const double[:, :, ::1] fext):
    cdef Call c = _blank(kind, &q[0, 0], _base2(dq))
    c.fext = _base3(fext)
    return c


def rnea(ModelData md not None, const double[:, ::1] q, const double[:, ::1] dq,
         const double[:, ::1] ddq, const double[:, :, ::1] fext, bint gravity,
         double[:, ::1] out, int nthreads):
    """Kim Table 2 on each row; ``dq``/``ddq``/``fext`` may be None (zero)."""
    cdef Call c = _call(K_RNEA, q, dq, fext)
    c.gravity = gravity
    c.ddq = _base2(ddq)
    c.o1 = &out[0, 0] if md.nv > 0 else NULL
    c.so = md.nv
    _run(md, &c, q.shape[0], nthreads)


def hybrid(ModelData md not None, const double[:, ::1] q, const double[:, ::1] dq,
           double[:, ::1] ddq, double[:, ::1] tau, const unsigned char[::1] prescribed,
           const double[:, :, ::1] fext, int[::1] status, int nthreads):
    """Kim Tables 3/4 in place on each row (``prescribed`` None = ABA).

    ``status[k]`` is 0, or 1 + the body whose S^T Ihat S is singular."""
    cdef Call c = _call(K_HYBRID, q, dq, fext)
    if prescribed is not None:
        c.prescribed = &prescribed[0]
    c.o1 = &ddq[0, 0] if md.nv > 0 else NULL
    c.o2 = &tau[0, 0] if md.nv > 0 else NULL
    c.so = md.nv
    c.status = &status[0]
    _run(md, &c, q.shape[0], nthreads)


def crba(ModelData md not None, const double[:, ::1] q, double[:, :, ::1] out, int nthreads):
    """Mass matrix of each row."""
    cdef Call c = _call(K_CRBA, q, None, None)
    c.o1 = &out[0, 0, 0] if md.nv > 0 else NULL
    c.so = md.nv * md.nv
    _run(md, &c, q.shape[0], nthreads)


def fk(ModelData md not None, const double[:, ::1] q, const double[:, ::1] dq,
       double[:, :, :, ::1] poses, double[:, :, ::1] twists, int nthreads):
    """World poses (and body twists when ``dq`` is given) of each row."""
    cdef Call c = _call(K_FK, q, dq, None)
    c.o1 = &poses[0, 0, 0, 0]
    c.so1 = 16 * md.nb
    c.o2 = <double*> _base3(twists)
    c.so = 6 * md.nb
    _run(md, &c, q.shape[0], nthreads)


def rnea_thread_ids(ModelData md not None, const double[:, ::1] q, int[::1] tid, int nthreads):
    """RNEA over the rows in an OpenMP loop, recording which thread
    handled each state (the tests' proof that the extensions were built
    with OpenMP, which the rollouts use; batched calls use the team)."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef const ModelC* mc = &md.c
    cdef Work w
    cdef double* buf
    cdef double* tau
    cdef int nb = md.nb, wsize = md.wsize, nv = md.nv, md_nq = md.nq
    cdef const double* qp = &q[0, 0]
    buf = NULL  # set per thread below; initialised for Cython's firstprivate copy
    tau = NULL
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc((wsize + nv + 1) * sizeof(double))
        w = work_from(buf, nb)
        tau = buf + wsize
        for k in prange(N, schedule='static'):
            _rnea(mc, qp + k * md_nq, NULL, NULL, NULL, True, tau, &w)
            tid[k] = threadid()
        free(buf)


def sin_cos_py(const double[::1] x, bint lanes):
    """``(sin x, cos x)`` as the kernels compute joint angles' (``_spatial
    sin_cos``; with ``lanes``, ``LANES`` at a time by ``_lanes.l_sin_cos``,
    ``x``'s length a multiple of ``LANES``).  For the tests."""
    cdef Py_ssize_t n = x.shape[0], k
    cdef double[::1] s = np.empty(n)
    cdef double[::1] c = np.empty(n)
    if lanes:
        if n % LANES:
            raise ValueError(f"x must hold a multiple of {LANES} values")
        for k in range(0, n, LANES):
            l_sin_cos((<const v4*> &x[k])[0], <v4*> &s[k], <v4*> &c[k])
    else:
        for k in range(n):
            sin_cos(x[k], &s[k], &c[k])
    return np.asarray(s), np.asarray(c)


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


def jcalc_tangent_py(int kind, const double[::1] prm, const double[::1] q, const double[::1] dq):
    """Derivatives of one joint's S (6, n) along its own coordinates:
    ``dS/dq_c`` and ``d(dS(q, dq))/dq_c`` for c < n, each (n, 6, n)."""
    cdef int n = jcalc_nv(kind)
    cdef double J[12]
    cdef double[::1] S = np.zeros(36)
    cdef double[::1] d1 = np.zeros(36 * 6)
    cdef double[::1] d2 = np.zeros(36 * 6)
    cdef double qz[8]
    cdef const double* qp = qz
    cdef int k
    for k in range(8):
        qz[k] = 0.0
    if q.shape[0] > 0:
        qp = &q[0]
    jcalc(kind, &prm[0], qp, J, &S[0])
    for k in range(n):
        jcalc_dSdq(kind, &prm[0], &S[0], k, &d1[36 * k])
        jcalc_ddSdq(kind, &prm[0], &S[0], k, &dq[0], &d2[36 * k])
    a1 = np.asarray(d1).reshape(6, 36)[:n, :6 * n].reshape(n, n, 6).transpose(0, 2, 1).copy()
    a2 = np.asarray(d2).reshape(6, 36)[:n, :6 * n].reshape(n, n, 6).transpose(0, 2, 1).copy()
    return a1, a2


# ---------------------------------------------------------------------------
# Single-state fast path.  Each function accepts arbitrary Python objects and
# returns None unless every argument is already a 1-D C-contiguous float64
# array of the right length with finite entries and unit quaternions; the
# caller then falls back to the general path, which converts or raises a
# clear error.  This keeps a single call from Python within a few hundred
# nanoseconds of the kernel itself.
# ---------------------------------------------------------------------------


def rnea1(ModelData md not None, q, dq, ddq, out=None):
    """Fast single-state RNEA (or a batch on the allocation-light path: :func:`_light`),
    or None (see above).  ``out``, if given, must be the result's exact
    array (:func:`_out_ok`), else None is returned."""
    cdef State1 st
    cdef Work w
    if not _state1(md, q, dq, ddq, &st):
        if dq is None or ddq is None:          # (the light path's None is zero)
            return None
        r = _light(md, K_RNEA, q, dq, ddq, True, out)
        return r[0] if r is not None else None
    out = _into(out, False, 1, md.nv)
    if out is None:
        return None
    w = work_from(&md.ws[0], md.nb)
    _rnea(&md.c, st.q, st.a, st.b, NULL, True, <double*> cnp.PyArray_DATA(out), &w)
    return out


def aba1(ModelData md not None, q, dq, tau, out=None):
    """Fast single-state ABA (or a batch on the allocation-light path: :func:`_hybrid_light`),
    or None; raises nothing (status via None).  ``out`` as for
    :func:`rnea1`."""
    cdef State1 st
    cdef Work w
    if not _state1(md, q, dq, tau, &st):
        r = _hybrid_light(md, q, dq, None, tau, NULL, out)
        return r[1] if r is not None else None
    out = _into(out, False, 1, md.nv)
    if out is None:
        return None
    w = work_from(&md.ws[0], md.nb)
    if _hybrid(&md.c, st.q, st.a, <double*> cnp.PyArray_DATA(out), <double*> st.b, NULL, NULL, &w) != 0:
        return None
    return out


cdef bint _light_in(ModelData md, q, a, b, Py_ssize_t* N, bint* batch, const double** qp,
                    const double** ap, const double** bp):
    """True if ``q`` is (nq,) or (N, nq) and ``a``, ``b`` are None or the
    same form with nv columns: float64 C-contiguous, finite, unit
    quaternions; fills the data pointers (NULL for None)."""
    cdef const double* unused
    batch[0] = cnp.PyArray_CheckExact(q) and cnp.PyArray_NDIM(<cnp.ndarray> q) == 2
    if batch[0]:
        if not _batch_in(md, q, a, b, None, 0, N, qp, ap, bp, &unused):
            return False
    else:
        N[0] = 1
        qp[0] = _vec(q, md.nq)
        ap[0] = _vec(a, md.nv) if a is not None else NULL
        bp[0] = _vec(b, md.nv) if b is not None else NULL
        if (qp[0] == NULL or (a is not None and ap[0] == NULL) or (b is not None and bp[0] == NULL)
                or not _quats_ok(md, qp[0])):
            return False
    return md.nv > 0


cdef cnp.ndarray _result(bint batch, Py_ssize_t N, int nd, Py_ssize_t d0, Py_ssize_t d1=0,
                         Py_ssize_t d2=0):
    # an empty float64 result of shape (N, d0[, d1[, d2]]), without N for one state
    cdef cnp.npy_intp dims[4]
    cdef int k = 0
    if batch:
        dims[0] = N
        k = 1
    dims[k] = d0
    dims[k + 1] = d1
    dims[k + 2] = d2
    return cnp.PyArray_EMPTY(nd + k, dims, cnp.NPY_DOUBLE, 0)


cdef bint _run_light(ModelData md, Call* c, Py_ssize_t N, bint checked) except -1:
    # ``_run`` for the allocation-light paths: in the calling thread below
    # _PARALLEL_FROM states (no team to start).  ``checked``: with a status
    # per state, False if one failed (the general path then names the joint)
    cdef int* sv = NULL
    cdef Py_ssize_t k
    if checked:
        sv = <int*> calloc(N, sizeof(int))
        if sv == NULL:
            raise MemoryError()
        c.status = sv
    try:
        _run(md, c, N, batch_threads() if N >= _PARALLEL_FROM else 1)
        if checked:
            for k in range(N):
                if sv[k] != 0:
                    return False
        return True
    finally:
        free(sv)


cdef object _into(out, bint batch, Py_ssize_t N, Py_ssize_t n):
    # the (N, n) result -- (n,) for one state: ``out`` if it can be filled
    # in place (:func:`_out_ok`), a new array if it is None, else None
    if out is None:
        return _result(batch, N, 1, n)
    return out if _out_ok(out, N if batch else -1, n) else None


cdef object _light(ModelData md, int kind, q, a, b, bint gravity, out=None):
    """The allocation-light path of the tree kernels without external
    wrenches, for one state or a batch of float64 C-contiguous finite
    arrays with unit quaternions (:func:`_light_in`): K_CRBA (``M``), K_FK
    (poses, and twists when ``a`` = dq is given), K_RNEA (``a``, ``b`` = dq,
    ddq, either None for zero; into ``out`` if given), K_RNEA_D and K_ABA_D
    (``a``, ``b`` = dq, ddq or tau).  None for anything else, or a failing
    state: the general path then converts, broadcasts or raises."""
    cdef Py_ssize_t N
    cdef bint batch
    cdef const double* qp
    cdef const double* ap
    cdef const double* bp
    cdef Call c
    cdef int nv = md.nv, nb = md.nb
    if not _light_in(md, q, a, b, &N, &batch, &qp, &ap, &bp):
        return None
    if (kind == K_RNEA_D or kind == K_ABA_D) and (ap == NULL or bp == NULL):
        return None
    c = _blank(kind, qp, ap)
    c.gravity = gravity
    c.ddq = bp if kind == K_RNEA or kind == K_RNEA_D else NULL
    c.tau = bp if kind == K_ABA_D else NULL
    if kind == K_CRBA:
        res = (_result(batch, N, 2, nv, nv),)
        c.so = nv * nv
    elif kind == K_FK:
        res = (_result(batch, N, 3, nb, 4, 4),)
        c.so1 = 16 * nb
        if ap != NULL:
            res = res + (_result(batch, N, 2, nb, 6),)
            c.o2 = <double*> cnp.PyArray_DATA(<cnp.ndarray> res[1])
            c.so = 6 * nb
    elif kind == K_RNEA:
        out = _into(out, batch, N, nv)
        if out is None:
            return None
        res = (out,)
        c.so = nv
    elif kind == K_RNEA_D:
        res = (_result(batch, N, 2, nv, nv), _result(batch, N, 2, nv, nv), _result(batch, N, 2, nv, nv))
        c.o2 = <double*> cnp.PyArray_DATA(<cnp.ndarray> res[1])
        c.o3 = <double*> cnp.PyArray_DATA(<cnp.ndarray> res[2])
        c.so = nv * nv
    else:
        # K_ABA_D: ddq first (dropped), then the three Jacobians
        res = (_result(batch, N, 1, nv), _result(batch, N, 2, nv, nv), _result(batch, N, 2, nv, nv),
               _result(batch, N, 2, nv, nv))
        c.so1 = nv
        c.o2 = <double*> cnp.PyArray_DATA(<cnp.ndarray> res[1])
        c.o3 = <double*> cnp.PyArray_DATA(<cnp.ndarray> res[2])
        c.o4 = <double*> cnp.PyArray_DATA(<cnp.ndarray> res[3])
        c.so = nv * nv
    c.o1 = <double*> cnp.PyArray_DATA(<cnp.ndarray> res[0])
    if not _run_light(md, &c, N, kind == K_ABA_D):
        return None
    return res[1:] if kind == K_ABA_D else res


cdef object _hybrid_light(ModelData md, q, dq, ddq, tau, const unsigned char* prescribed, out):
    """Hybrid dynamics (Kim Table 4; ``prescribed`` uint8 per joint) or,
    with ``prescribed`` NULL, ABA (Table 3: ``ddq`` unread, the result into
    ``out`` if given) without loads on the allocation-light path:
    ``(tau_out, ddq_out)``, or None for the general path (other inputs, a
    singular joint inertia)."""
    cdef Py_ssize_t N, Nt
    cdef bint batch
    cdef const double* qp
    cdef const double* ap
    cdef const double* bp
    cdef const double* tp
    cdef Call c
    if not _light_in(md, q, dq, ddq, &N, &batch, &qp, &ap, &bp) or ap == NULL:
        return None
    tp = _mat(tau, md.nv, &Nt) if batch else _vec(tau, md.nv)
    if tp == NULL or (batch and Nt != N):
        return None
    if prescribed != NULL:
        if bp == NULL:
            return None
        ddq_o = _copied(bp, batch, N, md.nv)     # read on the prescribed joints
    else:
        ddq_o = _into(out, batch, N, md.nv)
        if ddq_o is None:
            return None
    tau_o = _copied(tp, batch, N, md.nv)         # the kernel's tau argument is not const
    c = _blank(K_HYBRID, qp, ap)
    c.prescribed = prescribed
    c.o1 = <double*> cnp.PyArray_DATA(<cnp.ndarray> ddq_o)
    c.o2 = <double*> cnp.PyArray_DATA(<cnp.ndarray> tau_o)
    c.so = md.nv
    if not _run_light(md, &c, N, True):
        return None
    return tau_o, ddq_o


def hybrid_light(ModelData md not None, q, dq, ddq, tau, prescribed):
    """Hybrid dynamics on the allocation-light path (:func:`_hybrid_light`;
    ``prescribed`` a C-contiguous uint8 or bool array, one entry per
    joint): ``(tau_out, ddq_out)``, or None."""
    cdef const unsigned char* p = _flags(prescribed, md.nb)
    if p == NULL:
        return None
    return _hybrid_light(md, q, dq, ddq, tau, p, None)


def crba_light(ModelData md not None, q):
    """``M`` of one state or a batch on the allocation-light path, or None."""
    r = _light(md, K_CRBA, q, None, None, True)
    return r[0] if r is not None else None


def fk_light(ModelData md not None, q, dq):
    """Poses (and twists when ``dq`` is given) on the allocation-light path,
    or None."""
    r = _light(md, K_FK, q, dq, None, True)
    if r is None:
        return None
    return r if dq is not None else r[0]


def rnea_light(ModelData md not None, q, dq, ddq, bint gravity):
    """RNEA without loads, ``dq`` or ``ddq`` None for zero (bias, gravity and
    Coriolis forces), on the allocation-light path, or None."""
    r = _light(md, K_RNEA, q, dq, ddq, gravity)
    return r[0] if r is not None else None


def rnea_derivatives_light(ModelData md not None, q, dq, ddq):
    """Table 5 Jacobians and ``M`` of a batch on the allocation-light path,
    or None (one state: :func:`rnea_derivatives1`)."""
    return _light(md, K_RNEA_D, q, dq, ddq, True)


def aba_derivatives_light(ModelData md not None, q, dq, tau):
    """Forward-dynamics Jacobians of a batch on the allocation-light path,
    or None (one state: :func:`aba_derivatives1`)."""
    return _light(md, K_ABA_D, q, dq, tau, True)


def bad_quaternion(ModelData md not None, const double[:, ::1] q):
    """(row, joint index) of the first non-unit quaternion in a batch, or None."""
    cdef Py_ssize_t k, j
    cdef const double* u
    for k in range(q.shape[0]):
        for j in range(md.nquat):
            u = &q[k, md.quat_at[j]]
            if fabs(sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2] + u[3] * u[3]) - 1.0) > 1e-6:
                return (int(k), int(md.quat_joint[j]))
    return None


# ---------------------------------------------------------------------------
# Derivatives (Kim Sec. 4)
# ---------------------------------------------------------------------------


def rnea_derivatives(ModelData md not None, const double[:, ::1] q, const double[:, ::1] dq,
                     const double[:, ::1] ddq, const double[:, :, ::1] fext,
                     double[:, :, ::1] dtau_dq, double[:, :, ::1] dtau_ddq,
                     double[:, :, ::1] M, int nthreads):
    """Table 5 Jacobians and the mass matrix for each row."""
    cdef Call c = _call(K_RNEA_D, q, dq, fext)
    c.ddq = &ddq[0, 0]
    c.o1 = &dtau_dq[0, 0, 0]
    c.o2 = &dtau_ddq[0, 0, 0]
    c.o3 = &M[0, 0, 0]
    c.so = md.nv * md.nv
    _run(md, &c, q.shape[0], nthreads)


def aba_derivatives(ModelData md not None, const double[:, ::1] q, const double[:, ::1] dq,
                    const double[:, ::1] tau, const double[:, :, ::1] fext,
                    double[:, ::1] ddq, double[:, :, ::1] d_dq, double[:, :, ::1] d_ddq,
                    double[:, :, ::1] Minv, int[::1] status, int nthreads):
    """Forward-dynamics derivatives for each row (status as in hybrid; -1 if
    M is not positive definite)."""
    cdef Call c = _call(K_ABA_D, q, dq, fext)
    c.tau = &tau[0, 0]
    c.o1 = &ddq[0, 0]
    c.so1 = md.nv
    c.o2 = &d_dq[0, 0, 0]
    c.o3 = &d_ddq[0, 0, 0]
    c.o4 = &Minv[0, 0, 0]
    c.so = md.nv * md.nv
    c.status = &status[0]
    _run(md, &c, q.shape[0], nthreads)


def rnea_tangent(ModelData md not None, const double[::1] q, const double[::1] dq, const double[::1] ddq,
                 const double[:, ::1] fext, const double[:, ::1] q_p, const double[:, ::1] dq_p,
                 const double[:, ::1] ddq_p, const double[:, :, ::1] dI, const double[:, :, ::1] dX,
                 const double[:, ::1] dg, const double[:, :, ::1] dfext, double[:, ::1] out):
    """Table 5 along P general directions at one state (row p of each seed
    array is direction p; None = zero).  Writes out (P, nv)."""
    cdef Py_ssize_t P = out.shape[0], k
    cdef int nb = md.nb, nv = md.nv
    cdef Work w = work_from(&md.ws[0], nb)
    cdef const double* fp = _base2(fext)
    cdef const double* a1 = _base2(q_p)
    cdef const double* a2 = _base2(dq_p)
    cdef const double* a3 = _base2(ddq_p)
    cdef const double* a4 = _base3(dI)
    cdef const double* a5 = _base3(dX)
    cdef const double* a6 = _base2(dg)
    cdef const double* a7 = _base3(dfext)
    with nogil:
        for k in range(P):
            _rnea_t(&md.c, &q[0], &dq[0], &ddq[0], fp,
                    _row(a1, k, nv), _row(a2, k, nv), _row(a3, k, nv), _row(a4, k, 10 * nb),
                    _row(a5, k, 6 * nb), _row(a6, k, 3), _row(a7, k, 6 * nb), &out[k, 0], &w, k == 0)


def rnea_derivatives1(ModelData md not None, q, dq, ddq):
    """Fast single-state Table 5 Jacobians and M, or None (see rnea1)."""
    cdef State1 st
    cdef Work w
    if not _state1(md, q, dq, ddq, &st):
        return None
    A = _empty(md.nv, 2)
    B = _empty(md.nv, 2)
    M = _empty(md.nv, 2)
    w = work_from(&md.ws[0], md.nb)
    _rnea_d(&md.c, st.q, st.a, st.b, NULL, <double*> cnp.PyArray_DATA(A),
            <double*> cnp.PyArray_DATA(B), <double*> cnp.PyArray_DATA(M), &w)
    return A, B, M


def aba_derivatives1(ModelData md not None, q, dq, tau):
    """Fast single-state forward-dynamics derivatives, or None."""
    cdef State1 st
    cdef Work w
    if not _state1(md, q, dq, tau, &st):
        return None
    A = _empty(md.nv, 2)
    B = _empty(md.nv, 2)
    Mi = _empty(md.nv, 2)
    a = _empty(md.nv)
    w = work_from(&md.ws[0], md.nb)
    if _aba_d(&md.c, st.q, st.a, st.b, NULL, <double*> cnp.PyArray_DATA(a),
              <double*> cnp.PyArray_DATA(A), <double*> cnp.PyArray_DATA(B),
              <double*> cnp.PyArray_DATA(Mi), &md.ws[md.wsize], &w) != 0:
        return None
    return A, B, Mi


from gear.spatial._spatial cimport congruence_Ad_inv, congruence_Ad_inv_ref


def _check_congruence(const double[::1] T, const double[:, ::1] P):
    """(fast, reference) Ad*_{T^{-1}} P Ad_{T^{-1}} -- for the tests."""
    a = np.empty((6, 6))
    b = np.empty((6, 6))
    cdef double[:, ::1] av = a
    cdef double[:, ::1] bv = b
    congruence_Ad_inv(&T[0], &P[0, 0], &av[0, 0])
    congruence_Ad_inv_ref(&T[0], &P[0, 0], &bv[0, 0])
    return a, b


def integrate(ModelData md not None, const double[:, ::1] q, const double[:, ::1] v, double dt,
              double[:, ::1] out, int nthreads):
    """``out[k] = q[k] exp(dt v[k])`` joint by joint (see _integrate.pxd)."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef int nq = md.nq, nv = md.nv
    cdef const double* qp = &q[0, 0]
    cdef const double* vp = &v[0, 0] if nv > 0 else NULL
    cdef double* op = &out[0, 0]
    if N == 0 or nq == 0:
        return
    if N < 64 or nthreads <= 1:
        with nogil:
            for k in range(N):
                _integrate_config(&md.c, qp + k * nq, vp + k * nv, dt, op + k * nq)
        return
    for k in prange(N, nogil=True, num_threads=nthreads, schedule='static'):
        _integrate_config(&md.c, qp + k * nq, vp + k * nv, dt, op + k * nq)

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
from gear.algorithms._derivatives cimport (rnea_derivatives as _rnea_d, aba_derivatives as _aba_d,
                                           rnea_tangent as _rnea_t)
from gear.joints._jcalc cimport jcalc, jcalc_dS, jcalc_nv, jcalc_dSdq, jcalc_ddSdq
from gear.joints._integrate cimport integrate_config as _integrate_config
from gear.algorithms._rollout cimport RollC, rollout as _rollout, rollout_scratch
from gear.algorithms._spchol cimport SpChol, spchol_set
from gear.constraints._cwork cimport (SpInv, ClosC, SpKKT, CWork, cwork_from, cwork_size, cwork_from_c,
                                      cwork_size_c)
from gear.constraints._rows cimport constraint_rows as _crows
from gear.constraints._derivatives cimport (closed_forward_derivatives as _cfd,
                                            closed_inverse_derivatives as _cid, deriv_scratch)
from gear.constraints._aba_route cimport closed_dynamics as _cdyn_aba
from gear.constraints._dense_route cimport closed_dense as _cdense
from gear.constraints._projection cimport closed_forward_projection as _cproj
from gear.constraints._inverse cimport closed_inverse as _cinv_dense
from gear.constraints._sparse_route cimport closed_inverse_sparse as _cinv_sparse


cdef inline int _cinv(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                      const double* ddq, double* tau, const unsigned char* act,
                      const double* fext, double rcond, double* lam, double* info, Work* w,
                      CWork* cw) noexcept nogil:
    # closed inverse dynamics: the sparse route's when its plan is attached
    if c.spi != NULL:
        return _cinv_sparse(m, c, q, dq, ddq, tau, act, fext, rcond, lam, info, w, cw)
    return _cinv_dense(m, c, q, dq, ddq, tau, act, fext, rcond, lam, info, w, cw)
from gear.maximal._kernel cimport (MaxC, MaxW, maxwork, maximal_scratch, maximal_assemble, joint_frames,
                                   maximal_forward as _cmax, gear_chol, gear_chol_available,
                                   gear_chol_new, gear_chol_clone, gear_chol_free, gear_chol_lnz,
                                   gear_chol_perm)


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
    cdef int nquat
    cdef int[::1] quat_at      # q offset of each quaternion (Spherical, Free)
    cdef int[::1] quat_joint   # its joint index

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
        desc_np = np.zeros((nb, nb), dtype=np.uint8)
        for i in range(nb):
            j = i
            while j >= 0:
                desc_np[j, i] = 1
                j = a_parent[j]
        cdef unsigned char[:, ::1] a_desc = desc_np
        # the dof tree (Featherstone Sec. 6.5): each dof's parent dof
        vpar = np.full(max(nv, 1), -1, dtype=np.int32)
        for i in range(nb):
            for k in range(a_nvi[i]):
                if k > 0:
                    vpar[a_iv[i] + k] = a_iv[i] + k - 1
                else:
                    j = a_parent[i]
                    while j >= 0 and a_nvi[j] == 0:
                        j = a_parent[j]
                    vpar[a_iv[i]] = -1 if j < 0 else a_iv[j] + a_nvi[j] - 1
        cdef int[::1] a_vpar = vpar
        # each dof's ancestors as one packed list, root first (depth order):
        # the list of dof k is its parent's list and then the parent, so the
        # ancestors of k's ancestor at depth p are the first p entries of
        # k's list, which the packed factorisation relies on
        cdef int[::1] a_vdep = np.zeros(max(nv, 1), dtype=np.int32)
        cdef int[::1] a_voff = np.zeros(nv + 1, dtype=np.int32)
        cdef int kk, pp, dd, tt
        for kk in range(nv):
            pp = a_vpar[kk]
            a_vdep[kk] = 0 if pp < 0 else a_vdep[pp] + 1
            a_voff[kk + 1] = a_voff[kk] + a_vdep[kk]
        cdef int[::1] a_vanc = np.zeros(a_voff[nv] + 1, dtype=np.int32)
        for kk in range(nv):
            pp = a_vpar[kk]
            if pp >= 0:
                dd = a_vdep[pp]
                for tt in range(dd):
                    a_vanc[a_voff[kk] + tt] = a_vanc[a_voff[pp] + tt]
                a_vanc[a_voff[kk] + dd] = pp
        self.arrays = (a_parent, a_jtype, a_iq, a_iv, a_nvi, a_jparam, a_X, a_I, a_desc, a_vpar,
                       a_vdep, a_voff, a_vanc)
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
        self.c.desc = &a_desc[0, 0]
        self.c.vpar = &a_vpar[0]
        self.c.vdep = &a_vdep[0]
        self.c.voff = &a_voff[0]
        self.c.vanc = &a_vanc[0]
        self.c.g[0] = gravity[0]
        self.c.g[1] = gravity[1]
        self.c.g[2] = gravity[2]
        self.wsize = WORK_PER_BODY * nb
        self.ws = np.zeros(self.wsize + 2 * nv * nv + 1)   # + scratch of K_ABA_D
        at = []
        jt = []
        for k in range(nb):
            if a_jtype[k] == 7 or a_jtype[k] == 8:   # J_SPHERICAL, J_FREE: quaternion last
                at.append(a_iq[k] + (0 if a_jtype[k] == 7 else 3))
                jt.append(k)
        self.nquat = len(at)
        self.quat_at = np.array(at + [0], dtype=np.int32)
        self.quat_joint = np.array(jt + [0], dtype=np.int32)

    def dof_parents(self):
        """(nv,) int32: the parent dof of each dof (-1 for none), the tree of
        the mass matrix's sparsity (Featherstone Sec. 6.5)."""
        return np.asarray(self.arrays[9])[:self.nv].copy()

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


# ---------------------------------------------------------------------------
# Batched drivers.  A Call holds the base pointers and per-state strides of
# one batched call; _one() runs the kernel on state k (the one kernel switch
# of this module) and _run() runs all states, serially on the model's cached
# workspace or in parallel with one workspace per OpenMP thread.
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


cdef inline const double* _row(const double* base, Py_ssize_t k, Py_ssize_t stride) noexcept nogil:
    if base == NULL:
        return NULL
    return base + k * stride


cdef inline double* _orow(double* base, Py_ssize_t k, Py_ssize_t stride) noexcept nogil:
    if base == NULL:
        return NULL
    return base + k * stride


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


cdef void _run(ModelData md, const Call* c, Py_ssize_t N, int nthreads):
    cdef Py_ssize_t k
    cdef int st
    cdef Work w
    cdef double* buf
    cdef int nb = md.nb, wsize = md.wsize, extra = 2 * md.nv * md.nv
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        for k in range(N):
            st = _one(&md.c, c, k, &w, &md.ws[wsize])
            if c.status != NULL:
                c.status[k] = st
        return
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc((wsize + extra + 1) * sizeof(double))
        w = work_from(buf, nb)
        for k in prange(N, schedule='guided'):
            st = _one(&md.c, c, k, &w, buf + wsize)
            if c.status != NULL:
                c.status[k] = st
        free(buf)


cdef Call _call(int kind, const double[:, ::1] q, const double[:, ::1] dq,
                const double[:, :, ::1] fext):
    cdef Call c
    c.kind = kind
    c.gravity = True
    c.q = &q[0, 0]
    c.dq = _base2(dq)
    c.ddq = NULL
    c.tau = NULL
    c.fext = _base3(fext)
    c.prescribed = NULL
    c.o1 = NULL
    c.o2 = NULL
    c.o3 = NULL
    c.o4 = NULL
    c.so = 0
    c.so1 = 0
    c.status = NULL
    return c


def rnea(ModelData md, const double[:, ::1] q, const double[:, ::1] dq,
         const double[:, ::1] ddq, const double[:, :, ::1] fext, bint gravity,
         double[:, ::1] out, int nthreads):
    """Kim Table 2 on each row; ``dq``/``ddq``/``fext`` may be None (zero)."""
    cdef Call c = _call(K_RNEA, q, dq, fext)
    c.gravity = gravity
    c.ddq = _base2(ddq)
    c.o1 = &out[0, 0] if md.nv > 0 else NULL
    c.so = md.nv
    _run(md, &c, q.shape[0], nthreads)


def hybrid(ModelData md, const double[:, ::1] q, const double[:, ::1] dq,
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


def crba(ModelData md, const double[:, ::1] q, double[:, :, ::1] out, int nthreads):
    """Mass matrix of each row."""
    cdef Call c = _call(K_CRBA, q, None, None)
    c.o1 = &out[0, 0, 0] if md.nv > 0 else NULL
    c.so = md.nv * md.nv
    _run(md, &c, q.shape[0], nthreads)


def fk(ModelData md, const double[:, ::1] q, const double[:, ::1] dq,
       double[:, :, :, ::1] poses, double[:, :, ::1] twists, int nthreads):
    """World poses (and body twists when ``dq`` is given) of each row."""
    cdef Call c = _call(K_FK, q, dq, None)
    c.o1 = &poses[0, 0, 0, 0]
    c.so1 = 16 * md.nb
    c.o2 = <double*> _base3(twists)
    c.so = 6 * md.nb
    _run(md, &c, q.shape[0], nthreads)


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
cimport numpy as cnp
from libc.math cimport isfinite, fabs, sqrt

cnp.import_array()


cdef inline const double* _vec(object o, Py_ssize_t n):
    cdef cnp.ndarray a
    cdef const double* p
    cdef Py_ssize_t k
    if not cnp.PyArray_CheckExact(o):
        return NULL
    a = <cnp.ndarray> o
    if (cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or cnp.PyArray_NDIM(a) != 1
            or cnp.PyArray_DIM(a, 0) != n or not cnp.PyArray_IS_C_CONTIGUOUS(a)):
        return NULL
    p = <const double*> cnp.PyArray_DATA(a)
    for k in range(n):
        if not isfinite(p[k]):
            return NULL
    return p


cdef inline bint _quats_ok(ModelData md, const double* q):
    cdef Py_ssize_t k
    cdef const double* u
    cdef double n2
    for k in range(md.nquat):
        u = q + md.quat_at[k]
        n2 = u[0] * u[0] + u[1] * u[1] + u[2] * u[2] + u[3] * u[3]
        if fabs(sqrt(n2) - 1.0) > 1e-6:
            return False
    return True


cdef inline cnp.ndarray _empty(Py_ssize_t n, int ndim=1):
    # a float64 vector (n,) or square matrix (n, n)
    cdef cnp.npy_intp dims[2]
    dims[0] = n
    dims[1] = n
    return cnp.PyArray_EMPTY(ndim, dims, cnp.NPY_DOUBLE, 0)


cdef struct State1:
    # a single state's arguments, validated by _state1
    const double* q
    const double* a
    const double* b


cdef inline bint _state1(ModelData md, q, a, b, State1* st):
    """True if q (nq,), a (nv,), b (nv,) are finite 1-D C-contiguous float64
    arrays and q's quaternions are unit; fills ``st`` with their data."""
    st.q = _vec(q, md.nq)
    st.a = _vec(a, md.nv)
    st.b = _vec(b, md.nv)
    return st.q != NULL and st.a != NULL and st.b != NULL and _quats_ok(md, st.q)


def rnea1(ModelData md, q, dq, ddq):
    """Fast single-state RNEA (or a small-overhead batch: :func:`_batch3`),
    or None (see above)."""
    cdef State1 st
    cdef Work w
    if not _state1(md, q, dq, ddq, &st):
        return _batch3(md, K_RNEA, q, dq, ddq)
    out = _empty(md.nv)
    w = work_from(&md.ws[0], md.nb)
    _rnea(&md.c, st.q, st.a, st.b, NULL, True, <double*> cnp.PyArray_DATA(out), &w)
    return out


def aba1(ModelData md, q, dq, tau):
    """Fast single-state ABA (or a small-overhead batch: :func:`_batch3`),
    or None; raises nothing (status via None)."""
    cdef State1 st
    cdef Work w
    if not _state1(md, q, dq, tau, &st):
        return _batch3(md, K_HYBRID, q, dq, tau)
    out = _empty(md.nv)
    w = work_from(&md.ws[0], md.nb)
    if _hybrid(&md.c, st.q, st.a, <double*> cnp.PyArray_DATA(out), <double*> st.b, NULL, NULL, &w) != 0:
        return None
    return out


cdef object _batch3(ModelData md, int kind, q, a, b):
    """RNEA (``kind`` K_RNEA: ``a, b = dq, ddq``) or ABA (K_HYBRID: ``dq,
    tau``) of a batch of (N, n) float64 C-contiguous finite arrays with unit
    quaternions, with the least Python in between: no conversion, and the
    kernel in the calling thread below ``_PARALLEL_FROM`` states (no thread
    team to start).  Anything else, or a failing state, returns None for
    the general path."""
    cdef Py_ssize_t N, N2, N3, k
    cdef const double* qp = _mat(q, md.nq, &N)
    cdef const double* ap = _mat(a, md.nv, &N2)
    cdef const double* bp = _mat(b, md.nv, &N3)
    cdef Call c
    cdef int nthreads = 1
    if qp == NULL or ap == NULL or bp == NULL or N2 != N or N3 != N or N < 1 or md.nv == 0:
        return None
    for k in range(N):
        if not _quats_ok(md, qp + k * md.nq):
            return None
    out = _empty2(N, md.nv)
    c.kind = kind
    c.gravity = True
    c.q = qp
    c.dq = ap
    c.ddq = bp if kind == K_RNEA else NULL
    c.tau = NULL
    c.fext = NULL
    c.prescribed = NULL
    c.o1 = <double*> cnp.PyArray_DATA(out)
    c.o2 = NULL
    c.o3 = NULL
    c.o4 = NULL
    c.so = md.nv
    c.so1 = 0
    c.status = NULL
    status = None
    cdef int[::1] sv
    if kind == K_HYBRID:
        tau_c = np.array(b)                    # the kernel's tau argument is not const
        c.o2 = <double*> cnp.PyArray_DATA(<cnp.ndarray> tau_c)
        status = np.zeros(N, dtype=np.int32)
        sv = status
        c.status = &sv[0]
    if N >= _PARALLEL_FROM:
        from gear.algorithms.dynamics import get_num_threads
        nthreads = get_num_threads()
    _run(md, &c, N, nthreads)
    if status is not None:
        for k in range(N):
            if sv[k] != 0:
                return None                    # the general path names the joint
    return out


def crba1(ModelData md, q):
    """Fast single-state mass matrix, or None."""
    cdef const double* qp = _vec(q, md.nq)
    cdef Work w
    cdef cnp.npy_intp dims[2]
    if qp == NULL or not _quats_ok(md, qp):
        return None
    dims[0] = md.nv
    dims[1] = md.nv
    out = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    w = work_from(&md.ws[0], md.nb)
    _crba(&md.c, qp, <double*> cnp.PyArray_DATA(out), &w)
    return out


def bad_quaternion(ModelData md, const double[:, ::1] q):
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


def rnea_derivatives(ModelData md, const double[:, ::1] q, const double[:, ::1] dq,
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


def aba_derivatives(ModelData md, const double[:, ::1] q, const double[:, ::1] dq,
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


def rnea_tangent(ModelData md, const double[::1] q, const double[::1] dq, const double[::1] ddq,
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


def rnea_derivatives1(ModelData md, q, dq, ddq):
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


def aba_derivatives1(ModelData md, q, dq, tau):
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


# ---------------------------------------------------------------------------
# Closed loops (Kim Sec. 3): gear/constraints/_cwork.pxd and the route files it lists
# ---------------------------------------------------------------------------
def _padded(x, dtype):
    # a C-contiguous copy with one spare element (so that empty arrays have
    # a valid first address)
    a = np.ascontiguousarray(x, dtype=dtype).reshape(-1)
    return np.concatenate([a, np.zeros(1, dtype=dtype)])


cdef class ClosureData:
    """Frozen constraint rows of a :class:`gear.ConstrainedModel` for the
    native kernels (see ``gear/constraints/_cwork.pxd`` and ``_rows.pxd`` for
    the row encoding)."""
    cdef ClosC c
    cdef readonly object arrays
    cdef double[::1] cws
    cdef readonly int m, cwsize
    cdef readonly object maximal      # the MaximalData attached (route 3), or None
    cdef readonly object sparse       # the SparseKKTData attached (route 1, sparse K), or None
    cdef readonly object sparse_inverse   # the SparseInvData attached with it, or None
    cdef gear_chol* h0                # its CHOLMOD handle (serial calls)

    def __init__(self, ModelData md, rtype, ri, rj, rk, rcoef, roff, rqi, rqj,
                 body_a, body_b, place_a, place_b, length, sup, double rcond,
                 double cfm=0.0, double damping=0.0):
        cdef int[::1] a_rtype = _padded(rtype, np.int32)
        cdef int[::1] a_ri = _padded(ri, np.int32)
        cdef int[::1] a_rj = _padded(rj, np.int32)
        cdef int[::1] a_rk = _padded(rk, np.int32)
        cdef double[::1] a_rcoef = _padded(rcoef, np.float64)
        cdef double[::1] a_roff = _padded(roff, np.float64)
        cdef int[::1] a_rqi = _padded(rqi, np.int32)
        cdef int[::1] a_rqj = _padded(rqj, np.int32)
        cdef int[::1] a_ba = _padded(body_a, np.int32)
        cdef int[::1] a_bb = _padded(body_b, np.int32)
        cdef double[::1] a_pa = _padded(place_a, np.float64)
        cdef double[::1] a_pb = _padded(place_b, np.float64)
        cdef double[::1] a_len = _padded(length, np.float64)
        cdef int[::1] a_sup = _padded(sup, np.int32)
        self.arrays = (a_rtype, a_ri, a_rj, a_rk, a_rcoef, a_roff, a_rqi, a_rqj,
                       a_ba, a_bb, a_pa, a_pb, a_len, a_sup)
        self.m = a_rtype.shape[0] - 1
        self.c.m = self.m
        self.c.ncoupler = int((np.asarray(a_rtype)[:self.m] == 4).sum())
        self.c.rtype = &a_rtype[0]
        self.c.ri = &a_ri[0]
        self.c.rj = &a_rj[0]
        self.c.rk = &a_rk[0]
        self.c.rcoef = &a_rcoef[0]
        self.c.roff = &a_roff[0]
        self.c.rqi = &a_rqi[0]
        self.c.rqj = &a_rqj[0]
        self.c.body_a = &a_ba[0]
        self.c.body_b = &a_bb[0]
        self.c.place_a = &a_pa[0]
        self.c.place_b = &a_pb[0]
        self.c.length = &a_len[0]
        self.c.sup = &a_sup[0]
        self.c.nsup = a_sup.shape[0] - 1
        self.c.rcond = rcond
        self.c.cfm = cfm
        self.c.damping = damping
        self.cwsize = cwork_size(md.nb, md.nv, self.m)
        self.cws = np.zeros(self.cwsize)
        self.c.mx = NULL
        self.c.mxws = 0
        self.c.sp = NULL
        self.c.spi = NULL
        self.maximal = None
        self.sparse = None
        self.sparse_inverse = None
        self.h0 = NULL

    def attach_sparse(self, ModelData md, SparseKKTData sp, SparseInvData spi=None):
        """The dense route (route 1) with ``K`` kept sparse through ``sp``,
        and closed inverse dynamics through ``spi`` (both from
        ``gear/constraints/sparse.py``); the workspace grows by their scratch."""
        if sp.c.m != self.m or self.c.mx != NULL or (spi is not None and spi.c.ch.n != md.nv):
            raise ValueError("attach_sparse: the plan does not match these rows")
        self.sparse = sp
        self.sparse_inverse = spi
        self.c.sp = &sp.c
        self.c.spi = NULL if spi is None else &(<SparseInvData> spi).c
        self.cwsize = cwork_size_c(&self.c, md.nb, md.nv, self.m, True)
        self.cws = np.zeros(self.cwsize)

    def attach_maximal(self, ModelData md, MaximalData mx):
        """Route 3 (the maximal-coordinate kernel) through ``mx``; this
        object's workspace shrinks to what that kernel uses."""
        if mx.c.nL != self.m or mx.c.nb != md.nb:
            raise ValueError("attach_maximal: the plan does not match these rows")
        self.maximal = mx
        self.c.mx = &mx.c
        self.c.mxws = mx.nws
        self.h0 = mx.h
        self.cwsize = cwork_size_c(&self.c, md.nb, md.nv, self.m, False)
        self.cws = np.zeros(self.cwsize)


cdef class MaximalData:
    """The fixed plan of the native maximal-coordinate kernel (MaxC of
    ``gear/maximal/_kernel.pxd``) and, when ``analyse``, the CHOLMOD
    symbolic factorisation of its ``K`` pattern."""
    cdef MaxC c
    cdef readonly object arrays
    cdef gear_chol* h
    cdef readonly int nws

    def __init__(self, int nb, int nJ, int nL, double rel, int refinement, Minv, Lt, row0, rbody,
                 sptr, srow, soff, pa, pb, pk, int npk, perm, Kp, Ki, int nnzK, int nout,
                 bint analyse, pdof=None, pbody=None, pres=None, cfr=None, Cc=None, Spc=None):
        cdef double[::1] a_minv = _padded(Minv, np.float64)
        cdef double[::1] a_lt = _padded(Lt, np.float64)
        cdef int[::1] a_row0 = _padded(row0, np.int32)
        cdef int[::1] a_rbody = _padded(rbody, np.int32)
        cdef int[::1] a_sptr = _padded(sptr, np.int32)
        cdef int[::1] a_srow = _padded(srow, np.int32)
        cdef int[::1] a_soff = _padded(soff, np.int32)
        cdef int[::1] a_pa = _padded(pa, np.int32)
        cdef int[::1] a_pb = _padded(pb, np.int32)
        cdef int[::1] a_pk = _padded(pk, np.int32)
        cdef int[::1] a_perm = _padded(perm, np.int32)
        cdef int[::1] a_pdof = _padded(np.zeros(0) if pdof is None else pdof, np.int32)
        cdef int[::1] a_pbody = _padded(np.zeros(0) if pbody is None else pbody, np.int32)
        cdef unsigned char[::1] a_pres = _padded(np.zeros(nb) if pres is None else pres, np.uint8)
        cdef unsigned char[::1] a_cfr = _padded(np.zeros(nb) if cfr is None else cfr, np.uint8)
        cdef double[::1] a_cc = _padded(np.zeros(36 * nb) if Cc is None else Cc, np.float64)
        cdef double[::1] a_spc = _padded(np.zeros(36 * nb) if Spc is None else Spc, np.float64)
        cdef int[::1] a_kp = _padded(Kp, np.int32)
        cdef int[::1] a_ki = _padded(Ki, np.int32)
        cdef int st = 0
        self.arrays = dict(Minv=a_minv, Lt=a_lt, row0=a_row0, rbody=a_rbody, sptr=a_sptr, srow=a_srow,
                           soff=a_soff, pa=a_pa, pb=a_pb, pk=a_pk, perm=a_perm, Kp=a_kp, Ki=a_ki,
                           pdof=a_pdof, pbody=a_pbody, pres=a_pres, cfr=a_cfr, Cc=a_cc, Spc=a_spc)
        self.c.nb = nb
        self.c.nJ = nJ
        self.c.nL = nL
        self.c.nP = a_pdof.shape[0] - 1
        self.c.nrows = nJ + nL + self.c.nP
        self.c.pdof = &a_pdof[0]
        self.c.pbody = &a_pbody[0]
        self.c.pres = NULL if pres is None else &a_pres[0]
        self.c.cfr = NULL if cfr is None else &a_cfr[0]
        self.c.Cc = &a_cc[0]
        self.c.Spc = &a_spc[0]
        if a_cc.shape[0] - 1 != 36 * nb or a_spc.shape[0] - 1 != 36 * nb:
            raise ValueError("MaximalData: Cc and Spc need 36 entries per body")
        self.c.nnzK = nnzK
        self.c.nout = nout
        self.c.nseg = a_srow.shape[0] - 1
        self.c.npairs = a_pk.shape[0] - 1
        self.c.npk = npk
        self.c.rel = rel
        self.c.refinement = refinement
        self.c.Minv = &a_minv[0]
        self.c.Lt = &a_lt[0]
        self.c.row0 = &a_row0[0]
        self.c.rbody = &a_rbody[0]
        self.c.sptr = &a_sptr[0]
        self.c.srow = &a_srow[0]
        self.c.soff = &a_soff[0]
        self.c.pa = &a_pa[0]
        self.c.pb = &a_pb[0]
        self.c.pk = &a_pk[0]
        self.c.perm = &a_perm[0]
        self.c.Kp = &a_kp[0]
        self.c.Ki = &a_ki[0]
        if (a_perm.shape[0] - 1 != self.c.nrows or a_kp.shape[0] - 1 != self.c.nrows + 1
                or a_kp[self.c.nrows] != nnzK or a_pa.shape[0] != a_pk.shape[0]
                or a_pb.shape[0] != a_pk.shape[0] or not 0 <= npk <= self.c.npairs
                or a_pbody.shape[0] != a_pdof.shape[0]):
            raise ValueError("MaximalData: inconsistent plan arrays")
        self.nws = maximal_scratch(nb, self.c.nrows, nnzK, nout, self.c.nseg)
        self.h = NULL
        if analyse and self.c.nrows > 0:
            if not gear_chol_available():
                raise RuntimeError("gear was built without CHOLMOD")
            # the permuted upper triangle, natural order: no transpose or
            # permutation per factorisation
            self.h = gear_chol_new(self.c.nrows, &a_kp[0], &a_ki[0], 1, 0, &st)
            if self.h == NULL:
                raise MemoryError(f"CHOLMOD's symbolic analysis failed (status {st})")

    def __dealloc__(self):
        gear_chol_free(self.h)

    @property
    def factor_nnz(self):
        """Non-zeros of the factor (0 before analysis)."""
        return gear_chol_lnz(self.h)


cdef class SparseKKTData:
    """The fixed plan of the dense route's sparse ``K`` (SpKKT of
    ``gear/constraints/_cwork.pxd``): the factor's pattern
    (:func:`sparse_symbolic`), the row permutation and the group pairs'
    destinations.  Built by ``gear/constraints/sparse.py``."""
    cdef SpKKT c
    cdef readonly object arrays

    def __init__(self, int m, int n, Lp, Li, Rp, Rk, Rpos, pinv, pga, pgb, poff, dst, int nnmax,
                 coff, comb):
        cdef int[::1] a_lp = _padded(Lp, np.int32)
        cdef int[::1] a_li = _padded(Li, np.int32)
        cdef int[::1] a_rp = _padded(Rp, np.int32)
        cdef int[::1] a_rk = _padded(Rk, np.int32)
        cdef int[::1] a_rpos = _padded(Rpos, np.int32)
        cdef int[::1] a_pinv = _padded(pinv, np.int32)
        cdef int[::1] a_pga = _padded(pga, np.int32)
        cdef int[::1] a_pgb = _padded(pgb, np.int32)
        cdef int[::1] a_poff = _padded(poff, np.int32)
        cdef int[::1] a_dst = _padded(dst, np.int32)
        cdef int[::1] a_coff = _padded(coff, np.int32)
        cdef int[::1] a_comb = _padded(comb, np.int32)
        self.arrays = (a_lp, a_li, a_rp, a_rk, a_rpos, a_pinv, a_pga, a_pgb, a_poff, a_dst, a_coff,
                       a_comb)
        npair = a_pga.shape[0] - 1
        if (a_lp.shape[0] != n + 2 or a_rp.shape[0] != n + 2 or a_pinv.shape[0] != m + 1
                or a_pgb.shape[0] != npair + 1 or a_poff.shape[0] != npair + 2
                or a_lp[n] != a_li.shape[0] - 1 or a_rp[n] != a_rk.shape[0] - 1
                or a_rpos.shape[0] != a_rk.shape[0] or a_poff[npair] != a_dst.shape[0] - 1
                or a_coff.shape[0] != npair + 2 or 4 * a_coff[npair] != a_comb.shape[0] - 1):
            raise ValueError("SparseKKTData: inconsistent plan arrays")
        self.c.m = m
        spchol_set(&self.c.ch, n, &a_lp[0], &a_li[0], &a_rp[0], &a_rk[0], &a_rpos[0], min(n, nnmax))
        self.c.pinv = &a_pinv[0]
        self.c.npair = npair
        self.c.pga = &a_pga[0]
        self.c.pgb = &a_pgb[0]
        self.c.poff = &a_poff[0]
        self.c.dst = &a_dst[0]
        self.c.coff = &a_coff[0]
        self.c.comb = &a_comb[0]

    @property
    def factor_nnz(self):
        """Entries of the factor L (its diagonal included)."""
        return self.c.ch.nnz


cdef class SparseInvData:
    """The fixed plan of the sparse route's inverse dynamics (SpInv of
    ``gear/constraints/_cwork.pxd``): the pattern of ``A^T A`` over the
    dofs and where each row group's products land.  Built by
    ``gear/constraints/sparse.py``."""
    cdef SpInv c
    cdef readonly object arrays

    def __init__(self, int n, Lp, Li, Rp, Rk, Rpos, pinv, goff, gdst, gdoff, gdof):
        cdef int[::1] a_lp = _padded(Lp, np.int32)
        cdef int[::1] a_li = _padded(Li, np.int32)
        cdef int[::1] a_rp = _padded(Rp, np.int32)
        cdef int[::1] a_rk = _padded(Rk, np.int32)
        cdef int[::1] a_rpos = _padded(Rpos, np.int32)
        cdef int[::1] a_pinv = _padded(pinv, np.int32)
        cdef int[::1] a_goff = _padded(goff, np.int32)
        cdef int[::1] a_gdst = _padded(gdst, np.int32)
        cdef int[::1] a_gdoff = _padded(gdoff, np.int32)
        cdef int[::1] a_gdof = _padded(gdof, np.int32)
        self.arrays = (a_lp, a_li, a_rp, a_rk, a_rpos, a_pinv, a_goff, a_gdst, a_gdoff, a_gdof)
        ng = a_goff.shape[0] - 2
        if (a_lp.shape[0] != n + 2 or a_rp.shape[0] != n + 2 or a_pinv.shape[0] != n + 1
                or a_gdoff.shape[0] != ng + 2 or a_lp[n] != a_li.shape[0] - 1
                or a_goff[ng] != a_gdst.shape[0] - 1 or a_gdoff[ng] != a_gdof.shape[0] - 1):
            raise ValueError("SparseInvData: inconsistent plan arrays")
        spchol_set(&self.c.ch, n, &a_lp[0], &a_li[0], &a_rp[0], &a_rk[0], &a_rpos[0], 0)
        self.c.pinv = &a_pinv[0]
        self.c.ng = ng
        self.c.goff = &a_goff[0]
        self.c.gdst = &a_gdst[0]
        self.c.gdoff = &a_gdoff[0]
        self.c.gdof = &a_gdof[0]


def sparse_symbolic(int n, const int[::1] Rp, const int[::1] Ri):
    """Symbolic Cholesky factorisation of a symmetric pattern given by the
    rows of its lower triangle (``Ri[Rp[j]:Rp[j+1]]``: the columns k < j of
    row j; the diagonal implied).  Elimination tree by Liu's algorithm,
    then each row of ``L`` as the nodes its entries reach up the tree
    (Davis, "Direct methods for sparse linear systems", Secs. 4.1-4.3):
    O(nnz(L)).  Returns ``(Lp, Li, LRp, LRk, LRpos)``: the columns of L
    (diagonal first, rows ascending) and, for each row j, its off-diagonal
    entries' columns and positions in ``Li``."""
    cdef int j, p, i, inext, k, t, top
    parent_a = np.full(n, -1, dtype=np.int32)
    anc_a = np.full(n, -1, dtype=np.int32)
    mark_a = np.full(n, -1, dtype=np.int32)
    cnt_a = np.ones(n, dtype=np.int32)
    cdef int[::1] parent = parent_a
    cdef int[::1] anc = anc_a
    cdef int[::1] mark = mark_a
    cdef int[::1] cnt = cnt_a
    cdef long nrow = 0
    # elimination tree (path compression through anc)
    for j in range(n):
        for p in range(Rp[j], Rp[j + 1]):
            i = Ri[p]
            while i != -1 and i < j:
                inext = anc[i]
                anc[i] = j
                if inext == -1:
                    parent[i] = j
                i = inext
    # pass 1: column counts; pass 2: fill
    for j in range(n):
        mark[j] = j
        for p in range(Rp[j], Rp[j + 1]):
            i = Ri[p]
            while i != -1 and i < j and mark[i] != j:
                mark[i] = j
                cnt[i] += 1
                nrow += 1
                i = parent[i]
    Lp_a = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(cnt_a, out=Lp_a[1:])
    cdef int[::1] Lp = Lp_a
    Li_a = np.empty(Lp_a[n], dtype=np.int32)
    LRp_a = np.zeros(n + 1, dtype=np.int32)
    LRk_a = np.empty(nrow, dtype=np.int32)
    LRpos_a = np.empty(nrow, dtype=np.int32)
    nxt_a = Lp_a[:n].copy()
    cdef int[::1] Li = Li_a
    cdef int[::1] LRp = LRp_a
    cdef int[::1] LRk = LRk_a
    cdef int[::1] LRpos = LRpos_a
    cdef int[::1] nxt = nxt_a
    mark_a[:] = -1
    t = 0
    for j in range(n):
        Li[nxt[j]] = j
        nxt[j] += 1
        mark[j] = j
        top = t
        for p in range(Rp[j], Rp[j + 1]):
            i = Ri[p]
            while i != -1 and i < j and mark[i] != j:
                mark[i] = j
                LRk[t] = i
                t += 1
                i = parent[i]
        # columns ascending within the row (a fixed order of the updates)
        LRk_a[top:t].sort()
        for k in range(top, t):
            i = LRk[k]
            LRpos[k] = nxt[i]
            Li[nxt[i]] = j
            nxt[i] += 1
        LRp[j + 1] = t
    return Lp_a, Li_a, LRp_a, LRk_a, LRpos_a


def cholmod_ordering(int n, Kp, Ki, int ordering):
    """CHOLMOD's fill-reducing permutation (its analysis with ``ordering``:
    -1 default, -2 best, else a CHOLMOD_* method) of the symmetric pattern
    given by its lower triangle (CSC); row ``perm[k]`` becomes row k."""
    cdef int[::1] a_kp = np.ascontiguousarray(Kp, dtype=np.int32)
    cdef int[::1] a_ki = _padded(Ki, np.int32)
    cdef int st = 0
    cdef gear_chol* h
    out = np.arange(n, dtype=np.int32)
    cdef int[::1] o = out
    if n == 0:
        return out
    if not gear_chol_available():
        raise RuntimeError("gear was built without CHOLMOD")
    h = gear_chol_new(n, &a_kp[0], &a_ki[0], -1, ordering, &st)
    if h == NULL:
        raise MemoryError(f"CHOLMOD's symbolic analysis failed (status {st})")
    gear_chol_perm(h, &o[0])
    gear_chol_free(h)
    return out


def maximal_frames(ModelData md, ClosureData cd, const double[::1] q, double[:, ::1] C,
                   double[:, ::1] Sp):
    """``C_i`` and ``S_i^+`` (nb, 36 each, as the maximal kernel computes
    them) at ``q``; returns the row kernel's status."""
    cdef Work w = work_from(&md.ws[0], md.nb)
    cdef CWork cw
    cdef int st, i
    if cd.c.mx == NULL:
        raise ValueError("maximal_frames: no maximal plan attached")
    cw = cwork_from_c(&cd.c, &cd.cws[0], md.nb, md.nv, cd.m, False)
    with nogil:
        st = _crows(&md.c, &cd.c, &q[0], NULL, NULL, NULL, NULL, &w, &cw)
        if st == 0:
            for i in range(md.nb):
                joint_frames(md.c.nvi[i], w.S + 36 * i, &C[i, 0], &Sp[i, 0])
    return st


def cholmod_available():
    """Whether this build links CHOLMOD (the native maximal kernel)."""
    return bool(gear_chol_available())


def maximal_probe(ModelData md, ClosureData cd, const double[::1] q, double[::1] Kx):
    """The values of ``K = J Mb^{-1} J^T`` of the attached plan at ``q``
    (zero velocity and load) into ``Kx``; returns the kernel status."""
    cdef Work w = work_from(&md.ws[0], md.nb)
    cdef CWork cw
    cdef MaxW z
    cdef int st, k
    cdef const MaxC* x
    if cd.c.mx == NULL:
        raise ValueError("maximal_probe: no maximal plan attached")
    x = <const MaxC*> cd.c.mx
    if Kx.shape[0] != x.nnzK + x.nout:
        raise ValueError("maximal_probe: Kx has the wrong length")
    cw = cwork_from_c(&cd.c, &cd.cws[0], md.nb, md.nv, cd.m, False)
    z = maxwork(x, cw.mws)
    with nogil:
        st = maximal_assemble(&md.c, &cd.c, &q[0], NULL, NULL, NULL, NULL, &w, &cw, &z)
        if st == 0:
            for k in range(x.nnzK + x.nout):
                Kx[k] = z.Kx[k]
    return st


cdef inline int _cdyn(const ModelC* m, const ClosC* c, int route, const double* q,
                      const double* dq, double* ddq, double* tau, const unsigned char* pres,
                      const double* fext, double* lam, double* info, Work* w,
                      CWork* cw) noexcept nogil:
    # route 0: articulated-body passes (Kim eqs. 67-77); 1: build M (forward
    # and hybrid); 2: reduced-coordinate projection (forward and hybrid, the projection
    # solver); 3: maximal coordinates (needs the plan, whose prescription
    # rows fix which joints are prescribed)
    if route == 3 and c.mx != NULL:
        # the plan's prescription rows stand for ``pres`` (matched by the caller)
        return _cmax(m, c, q, dq, ddq, tau, fext, lam, info, w, cw)
    if route == 1:
        return _cdense(m, c, q, dq, ddq, tau, pres, fext, lam, info, w, cw)
    if route == 2:
        return _cproj(m, c, q, dq, ddq, tau, pres, fext, lam, info, w, cw)
    return _cdyn_aba(m, c, q, dq, ddq, tau, pres, fext, lam, info, w, cw)


def closed_rows(ModelData md, ClosureData cd, const double[:, ::1] q, const double[:, ::1] dq,
                double[:, ::1] g, double[:, :, ::1] A, double[:, ::1] bias, int[::1] status):
    """Residual, A and dA dq of each row of ``q`` (outputs may be None;
    ``dq`` None: zero bias).  ``status[k]``: 0 or ST_DIST_COINCIDE."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef int m = cd.m, nv = md.nv
    cdef Work w = work_from(&md.ws[0], md.nb)
    cdef CWork cw = cwork_from_c(&cd.c, &cd.cws[0], md.nb, md.nv, cd.m, False)
    cdef const double* dqp = _base2(dq)
    cdef double* gp = <double*> _base2(g) if m > 0 else NULL
    cdef double* bp = <double*> _base2(bias) if m > 0 else NULL
    cdef double* Ap = <double*> _base3(A) if m > 0 and nv > 0 else NULL
    with nogil:
        for k in range(N):
            status[k] = _crows(&md.c, &cd.c, &q[k, 0], _row(dqp, k, nv), _orow(gp, k, m),
                               _orow(Ap, k, m * nv), _orow(bp, k, m), &w, &cw)


cdef void _cdyn_batch(ModelData md, ClosureData cd, int route, Py_ssize_t N, const double* qp,
                      const double* dqp, double* ddqp, double* taup, const unsigned char* pp,
                      const double* fp, double* lp, double* ip, int* status, int nthreads,
                      bint full):
    """The kernel over N states: in the calling thread (one state, or
    ``nthreads`` 1), else in parallel without the GIL, one workspace per
    thread."""
    cdef Py_ssize_t k
    cdef int m = cd.m, nv = md.nv, nq = md.nq, nb = md.nb, st
    cdef int wsize = md.wsize, cwsize = cd.cwsize
    cdef Work w
    cdef CWork cw
    cdef double* buf
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        cw = cwork_from_c(&cd.c, &cd.cws[0], nb, nv, m, full)
        cw.chol = cd.h0
        with nogil:
            for k in range(N):
                status[k] = _cdyn(&md.c, &cd.c, route, qp + k * nq, _row(dqp, k, nv), _orow(ddqp, k, nv),
                                  _orow(taup, k, nv), pp, _row(fp, k, 6 * nb), _orow(lp, k, m),
                                  ip + 2 * k, &w, &cw)
        return
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc((wsize + cwsize + 1) * sizeof(double))
        w = work_from(buf, nb)
        cw = cwork_from_c(&cd.c, buf + wsize, nb, nv, m, full)
        cw.chol = gear_chol_clone(cd.h0)      # NULL without a maximal plan
        for k in prange(N, schedule='guided'):
            st = _cdyn(&md.c, &cd.c, route, qp + k * nq, _row(dqp, k, nv), _orow(ddqp, k, nv),
                       _orow(taup, k, nv), pp, _row(fp, k, 6 * nb), _orow(lp, k, m),
                       ip + 2 * k, &w, &cw)
            status[k] = st
        gear_chol_free(<gear_chol*> cw.chol)
        free(buf)


def closed_forward_derivatives(ModelData md, ClosureData cd, int nk, const double[:, ::1] q,
                               const double[:, ::1] dq, const double[:, ::1] tau,
                               const double[:, :, ::1] fext, double rcond, double[:, ::1] ddq,
                               double[:, ::1] lam, double[:, :, ::1] X, double[:, :, ::1] Y,
                               int[::1] status, int nthreads):
    """Closed-chain forward dynamics and its derivatives for each row
    (``gear/constraints/_derivatives.pxd``): ``X`` (N, nv, 3 nv), ``Y`` (N,
    m, 3 nv); ``status[k]`` 0, ST_MASS_NOT_PD, ST_DIST_COINCIDE or
    ST_DERIV_REDUNDANT (the caller takes the NumPy reference).  Serial for
    one state, else in parallel without the GIL."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef int m = cd.m, nv = md.nv, nq = md.nq, nb = md.nb, n3 = 3 * md.nv
    cdef int wsize = md.wsize, cwsize = cwork_size(md.nb, md.nv, cd.m)
    cdef int dsize = deriv_scratch(md.nb, md.nv, cd.m, nk)
    cdef const double* fp = NULL if fext is None else &fext[0, 0, 0]
    cdef double* lp = &lam[0, 0] if m > 0 else NULL
    cdef double* Yp = &Y[0, 0, 0] if m > 0 else NULL
    cdef Work w
    cdef CWork cw
    cdef double* buf
    if N == 1 or nthreads <= 1:
        nthreads = 1
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc((wsize + cwsize + dsize + 1) * sizeof(double))
        w = work_from(buf, nb)
        cw = cwork_from(buf + wsize, nb, nv, m)
        for k in prange(N, schedule='guided'):
            status[k] = _cfd(&md.c, &cd.c, nk, &q[k, 0], &dq[k, 0], &tau[k, 0], _row(fp, k, 6 * nb),
                             rcond, &ddq[k, 0], _orow(lp, k, m), &X[k, 0, 0], _orow(Yp, k, m * n3),
                             buf + wsize + cwsize, &w, &cw)
        free(buf)


def closed_inverse_derivatives(ModelData md, ClosureData cd, int nk, const double[:, ::1] q,
                               const double[:, ::1] dq, const double[:, ::1] ddq,
                               const unsigned char[::1] actuated, double[:, ::1] tau,
                               const double[:, :, ::1] fext, double rcond, double[:, ::1] lam,
                               double[:, :, ::1] X, double[:, :, ::1] Y, int[::1] status, int nthreads):
    """Closed inverse dynamics and its derivatives for each row
    (``gear/constraints/_derivatives.pxd``): ``tau`` (N, nv) holds the
    passive torques on entry; ``X`` (N, nv, 3 nv), ``Y`` (N, m, 3 nv);
    ``status[k]`` 0, ST_DIST_COINCIDE, ST_INEXACT or ST_DERIV_REDUNDANT."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef int m = cd.m, nv = md.nv, nb = md.nb, n3 = 3 * md.nv
    cdef int wsize = md.wsize, cwsize = cwork_size(md.nb, md.nv, cd.m)
    cdef int dsize = deriv_scratch(md.nb, md.nv, cd.m, nk)
    cdef const double* fp = NULL if fext is None else &fext[0, 0, 0]
    cdef double* lp = &lam[0, 0] if m > 0 else NULL
    cdef double* Yp = &Y[0, 0, 0] if m > 0 else NULL
    cdef Work w
    cdef CWork cw
    cdef double* buf
    if N == 1 or nthreads <= 1:
        nthreads = 1
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc((wsize + cwsize + dsize + 1) * sizeof(double))
        w = work_from(buf, nb)
        cw = cwork_from(buf + wsize, nb, nv, m)
        for k in prange(N, schedule='guided'):
            status[k] = _cid(&md.c, &cd.c, nk, &q[k, 0], &dq[k, 0], &ddq[k, 0], &actuated[0], &tau[k, 0],
                             _row(fp, k, 6 * nb), rcond, _orow(lp, k, m), &X[k, 0, 0],
                             _orow(Yp, k, m * n3), buf + wsize + cwsize, &w, &cw)
        free(buf)


def closed_inverse_derivatives1(ModelData md, ClosureData cd, int nk, q, dq, ddq,
                                const unsigned char[::1] actuated, tau_passive, double rcond):
    """Fast single state of :func:`closed_inverse_derivatives` (no loads):
    ``(tau, lam, X, Y, status)``, or None when the arguments need the
    general path (see :func:`_state1`; ``tau_passive`` (nv,) or None)."""
    cdef State1 st
    cdef Work w
    cdef CWork cw
    cdef cnp.npy_intp dims[2]
    cdef int m = cd.m, nv = md.nv, status, k
    cdef int cwsize = cwork_size(md.nb, md.nv, cd.m)
    cdef const double* tp = NULL
    if not _state1(md, q, dq, ddq, &st):
        return None
    if tau_passive is not None:
        tp = _vec(tau_passive, nv)
        if tp == NULL:
            return None
    tau = _empty(nv)
    for k in range(nv):
        (<double*> cnp.PyArray_DATA(tau))[k] = 0.0 if tp == NULL else tp[k]
    dims[0] = m
    lam = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = nv
    dims[1] = 3 * nv
    X = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = m
    Y = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = cwsize + deriv_scratch(md.nb, nv, m, nk) + 1
    buf = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
    w = work_from(&md.ws[0], md.nb)
    cw = cwork_from(<double*> cnp.PyArray_DATA(buf), md.nb, nv, m)
    status = _cid(&md.c, &cd.c, nk, st.q, st.a, st.b, &actuated[0], <double*> cnp.PyArray_DATA(tau), NULL,
                  rcond, <double*> cnp.PyArray_DATA(lam), <double*> cnp.PyArray_DATA(X),
                  <double*> cnp.PyArray_DATA(Y), <double*> cnp.PyArray_DATA(buf) + cwsize, &w, &cw)
    return tau, lam, X, Y, status


def closed_forward_derivatives1(ModelData md, ClosureData cd, int nk, q, dq, tau, double rcond):
    """Fast single state of :func:`closed_forward_derivatives` (no loads):
    ``(ddq, lam, X, Y, status)``, or None when the arguments need the
    general path (see :func:`_state1`)."""
    cdef State1 st
    cdef Work w
    cdef CWork cw
    cdef cnp.npy_intp dims[2]
    cdef int m = cd.m, nv = md.nv, status
    cdef int cwsize = cwork_size(md.nb, md.nv, cd.m)
    if not _state1(md, q, dq, tau, &st):
        return None
    ddq = _empty(nv)
    dims[0] = m
    lam = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = nv
    dims[1] = 3 * nv
    X = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = m
    Y = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = cwsize + deriv_scratch(md.nb, nv, m, nk) + 1
    buf = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
    w = work_from(&md.ws[0], md.nb)
    cw = cwork_from(<double*> cnp.PyArray_DATA(buf), md.nb, nv, m)
    status = _cfd(&md.c, &cd.c, nk, st.q, st.a, st.b, NULL, rcond, <double*> cnp.PyArray_DATA(ddq),
                  <double*> cnp.PyArray_DATA(lam), <double*> cnp.PyArray_DATA(X),
                  <double*> cnp.PyArray_DATA(Y), <double*> cnp.PyArray_DATA(buf) + cwsize, &w, &cw)
    return ddq, lam, X, Y, status


def closed_dynamics(ModelData md, ClosureData cd, const double[:, ::1] q, const double[:, ::1] dq,
                    double[:, ::1] ddq, double[:, ::1] tau, const unsigned char[::1] prescribed,
                    const double[:, :, ::1] fext, double[:, ::1] lam, double[:, ::1] info,
                    int[::1] status, int nthreads, int route=0):
    """Constrained forward (``prescribed`` None) or hybrid dynamics of each
    row, in place as ``hybrid``; ``lam`` (N, m) and ``info`` (N, 2: rank,
    residual) written; ``status`` as in ``hybrid``, or ST_DIST_COINCIDE /
    ST_MASS_NOT_PD.  ``route`` 1 builds M, 2 projects (forward dynamics only).
    Runs in parallel over rows without the GIL (one workspace per thread)."""
    cdef Py_ssize_t N = q.shape[0]
    cdef int m = cd.m, nv = md.nv
    cdef const unsigned char* pp = NULL
    cdef bint full = route != 3           # compact (cd.cwsize): the maximal kernel only
    if prescribed is not None:
        pp = &prescribed[0]
    if cd.c.mx != NULL and full:
        raise ValueError("closed_dynamics: rows with a maximal plan take route 3")
    _cdyn_batch(md, cd, route, N, &q[0, 0], _base2(dq), &ddq[0, 0] if nv > 0 else NULL,
                &tau[0, 0] if nv > 0 else NULL, pp, _base3(fext), &lam[0, 0] if m > 0 else NULL,
                &info[0, 0], &status[0], nthreads, full)


def closed_inverse(ModelData md, ClosureData cd, const double[:, ::1] q, const double[:, ::1] dq,
                   const double[:, ::1] ddq, double[:, ::1] tau, const unsigned char[::1] act,
                   const double[:, :, ::1] fext, double rcond, double[:, ::1] lam,
                   double[:, ::1] info, int[::1] status, int nthreads):
    """Closed-system inverse dynamics (``closed_inverse`` of
    gear/constraints/_inverse.pxd) of each row: ``tau`` holds the passive
    dofs' torques on entry and gets the actuated ones (``act`` (nv,) 1 on
    them); ``lam`` (N, m) and ``info`` (N, 2: rank, relative residual of
    eq. 57) written; ``status`` 0, ST_INEXACT (-5: fall back to hybrid
    dynamics), ST_DIST_COINCIDE or ST_MASS_NOT_PD.  Runs in parallel over
    rows without the GIL (one workspace per thread)."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef int m = cd.m, nv = md.nv, nq = md.nq, nb = md.nb, st
    cdef int wsize = md.wsize, cwsize = cd.cwsize
    cdef const double* qp = &q[0, 0]
    cdef const double* dqp = _base2(dq)
    cdef const double* ddqp = _base2(ddq)
    cdef const double* fp = _base3(fext)
    cdef double* taup = &tau[0, 0] if nv > 0 else NULL
    cdef double* lp = &lam[0, 0] if m > 0 else NULL
    cdef double* ip = &info[0, 0]
    cdef const unsigned char* ap = &act[0] if nv > 0 else NULL
    cdef Work w
    cdef CWork cw
    cdef double* buf
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        cw = cwork_from_c(&cd.c, &cd.cws[0], nb, nv, m, True)
        with nogil:
            for k in range(N):
                status[k] = _cinv(&md.c, &cd.c, qp + k * nq, _row(dqp, k, nv), _row(ddqp, k, nv),
                                  _orow(taup, k, nv), ap, _row(fp, k, 6 * nb), rcond, _orow(lp, k, m),
                                  ip + 2 * k, &w, &cw)
        return
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc((wsize + cwsize + 1) * sizeof(double))
        w = work_from(buf, nb)
        cw = cwork_from_c(&cd.c, buf + wsize, nb, nv, m, True)
        for k in prange(N, schedule='guided'):
            st = _cinv(&md.c, &cd.c, qp + k * nq, _row(dqp, k, nv), _row(ddqp, k, nv),
                       _orow(taup, k, nv), ap, _row(fp, k, 6 * nb), rcond, _orow(lp, k, m),
                       ip + 2 * k, &w, &cw)
            status[k] = st
        free(buf)


def integrate(ModelData md, const double[:, ::1] q, const double[:, ::1] v, double dt,
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


def maximal_terms(ModelData md, ClosureData cd, const double[::1] q, const double[::1] dq,
                  double[:, ::1] T, double[:, ::1] S, double[:, ::1] eta, double[:, ::1] V,
                  double[:, ::1] Tw, double[:, ::1] acc, double[:, ::1] F, double[::1] bias):
    """Per-body terms of the maximal-coordinate system at one state: the
    joint transforms T_{p,i} (nb, 12), motion subspaces S_i (nb, 36,
    column-major 6 x nv_i), eta_i (nb, 6), body twists V_i (nb, 6), world
    poses (nb, 12), bias accelerations (nb, 6), and the loop rows' body
    wrenches F (m, 12) and dA dq (m,).  ``dq`` may be empty (zero
    velocity).  Returns the kernel status (0, or ST_DIST_COINCIDE)."""
    cdef Work w = work_from(&md.ws[0], md.nb)
    cdef CWork cw = cwork_from_c(&cd.c, &cd.cws[0], md.nb, md.nv, cd.m, False)
    cdef const double* dqp = &dq[0] if dq.shape[0] > 0 else NULL
    cdef int st, i, k, nb = md.nb
    with nogil:
        st = _crows(&md.c, &cd.c, &q[0], dqp, NULL, NULL, NULL, &w, &cw)   # fills w and cw
        for i in range(nb):
            for k in range(12):
                T[i, k] = w.T[12 * i + k]
                Tw[i, k] = cw.Tw[12 * i + k]
            for k in range(36):
                S[i, k] = w.S[36 * i + k]
            for k in range(6):
                eta[i, k] = w.eta[6 * i + k]
                V[i, k] = w.V[6 * i + k]
                acc[i, k] = cw.acc[6 * i + k]
        for i in range(cd.m):
            for k in range(12):
                F[i, k] = cw.F[12 * i + k]
            bias[i] = cw.bias[i]
    return st


def rollout(ModelData md, ClosureData cd, const double[:, ::1] q0, const double[:, ::1] v0,
            const double[:, ::1] tau, int integrator, int nsteps, double dt, double last_dt,
            int record_every, int route, int project, double tol, const double[::1] kp,
            const double[::1] kd, const double[::1] q_target, const double[::1] dq_target,
            int gravity_comp, double[:, :, ::1] Q, double[:, :, ::1] V, double[:, :, ::1] L,
            double[::1] tmax, int[::1] status, int nthreads, int project_start=1, int k0=0,
            const double[:, ::1] ref=None, double ref_t0=0.0, double ref_dt=1.0,
            const double[::1] ckp=None, const double[::1] ckd=None):
    """Native rollouts of each row (see _rollout.pxd); ``cd`` None for a
    tree; ``tau``/``kp``/``L`` may be None.  Parallel over rows, no GIL."""
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
    cdef const double* tp = NULL if tau is None else &tau[0, 0]
    cdef double* Qp = &Q[0, 0, 0]
    cdef double* Vp = &V[0, 0, 0] if nv > 0 else NULL
    cdef double* Lp = NULL if (L is None or m == 0) else &L[0, 0, 0]
    cdef Work w
    cdef CWork cw
    cdef double* buf
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
    r.kp = NULL if kp is None else &kp[0]
    r.kd = NULL if kd is None else &kd[0]
    r.q_target = NULL if q_target is None else &q_target[0]
    r.dq_target = NULL if dq_target is None else &dq_target[0]
    r.gravity_comp = gravity_comp
    r.k0 = k0
    r.ref = NULL if ref is None else &ref[0, 0]
    r.nref = 0 if ref is None else <int> ref.shape[0]
    r.ref_t0 = ref_t0
    r.ref_dt = ref_dt
    r.ckp = NULL if ckp is None else &ckp[0]
    r.ckd = NULL if ckd is None else &ckd[0]
    if ref is not None and (ref.shape[1] != nq + 2 * nv or ckp is None or ckd is None or ref_dt <= 0):
        raise ValueError("rollout: the reference samples need nq + 2 nv columns, gains and ref_dt > 0")
    if N == 0:
        return
    with nogil, parallel(num_threads=max(1, min(nthreads, <int> N))):
        buf = <double*> malloc((wsize + cwsize + ssize + 1) * sizeof(double))
        w = work_from(buf, nb)
        cw = cwork_from_c(cp, buf + wsize, nb, nv, m, True)
        cw.chol = gear_chol_clone(cd.h0) if cp != NULL and cp.mx != NULL else NULL
        for k in prange(N, schedule='dynamic'):
            st = _rollout(&md.c, cp, &r, qp + k * nq, _row(vp, k, nv), _row(tp, k, nv),
                          Qp + k * T * nq, _orow(Vp, k, T * nv), _orow(Lp, k, T * m), &tmax[k],
                          &w, &cw, buf + wsize + cwsize)
            status[k] = st
        gear_chol_free(<gear_chol*> cw.chol)
        free(buf)


cdef object _UNSET = object()
cdef object _LAZY = object()


cdef inline object _field(object v, str name):
    if v is _UNSET:
        raise AttributeError(f"this ConstraintResult has no {name!r}")
    return v


def _make_result(fields):
    return ConstraintResult(**fields)


cdef class ConstraintResult:
    """Result of a constrained dynamics call.

    Attributes
    ----------
    ddq : ndarray, shape (nv,) or (N, nv)
    lam : ndarray, shape (nc,) or (N, nc)
        Multipliers: ``A^T lam`` is the generalized constraint force.
    residual : float or ndarray (N,)
        ``|A ddq + dA dq|``.
    success : bool or ndarray (N,)
    message : str
    solver : str
    stats : dict
        Work counters (``factorizations``, ``rank``).

    Other results carry more fields (inverse dynamics: ``tau``, ``exact``;
    hybrid dynamics: ``tau``); a field a result does not carry raises
    ``AttributeError``.  The common fields live in C slots so that the
    native single-call path builds a result in tens of nanoseconds.
    """
    cdef object _ddq, _lam, _residual, _success, _message, _solver, _stats, _extra
    cdef int _rank, _nfac
    cdef dict __dict__

    def __cinit__(self, *args, **kwargs):
        self._ddq = _UNSET
        self._lam = _UNSET
        self._residual = _UNSET
        self._success = _UNSET
        self._message = _UNSET
        self._solver = _UNSET
        self._stats = _UNSET
        self._extra = None

    def __init__(self, **fields):
        for k, v in fields.items():
            setattr(self, k, v)

    @property
    def ddq(self):
        return _field(self._ddq, "ddq")

    @ddq.setter
    def ddq(self, v):
        self._ddq = v

    @property
    def lam(self):
        return _field(self._lam, "lam")

    @lam.setter
    def lam(self, v):
        self._lam = v

    @property
    def residual(self):
        return _field(self._residual, "residual")

    @residual.setter
    def residual(self, v):
        self._residual = v

    @property
    def success(self):
        return _field(self._success, "success")

    @success.setter
    def success(self, v):
        self._success = v

    @property
    def message(self):
        return _field(self._message, "message")

    @message.setter
    def message(self, v):
        self._message = v

    @property
    def solver(self):
        return _field(self._solver, "solver")

    @solver.setter
    def solver(self, v):
        self._solver = v

    @property
    def stats(self):
        if self._stats is _LAZY:
            if self._extra is not None:
                # (an extra "rank": None asks for the kernel's rank)
                self._stats = dict(self._extra)
                self._stats.update(factorizations=self._nfac, native=True)
                if "rank" in self._stats and self._stats["rank"] is None:
                    self._stats["rank"] = self._rank
            else:
                self._stats = {"factorizations": self._nfac, "rank": self._rank, "native": True}
        return _field(self._stats, "stats")

    @stats.setter
    def stats(self, v):
        self._stats = v

    def _fields(self):
        out = {}
        for name in ("ddq", "lam", "residual", "success", "message", "solver", "stats"):
            try:
                out[name] = getattr(self, name)
            except AttributeError:
                pass
        out.update(vars(self))
        return out

    def __reduce__(self):
        return (_make_result, (self._fields(),))

    def __repr__(self):
        return f"ConstraintResult({', '.join(self._fields())})"


cdef ConstraintResult _native_result(ddq, lam, const double* info, int nfac, solver_name,
                                    dict counters, extra):
    # the result of a native single call (info = rank or factorisations,
    # residual); the stats dict is built when read; counts the call
    counters["calls"] += 1
    counters["factorizations"] += nfac
    cdef ConstraintResult out = ConstraintResult.__new__(ConstraintResult)
    out._ddq = ddq
    out._lam = lam
    out._residual = info[1]
    out._success = True
    out._message = "ok"
    out._solver = solver_name
    out._stats = _LAZY             # {"factorizations", "rank", "native"} (+ extra) when read
    out._rank = <int> info[0]
    out._nfac = nfac
    out._extra = extra
    return out


cdef class FastForward:
    """One-state constrained forward dynamics with the least Python in
    between: validates like ``rnea1`` (else returns None for the general
    path), runs the kernel, and builds the result object directly."""
    cdef ModelData md
    cdef ClosureData cd
    cdef int route
    cdef object solver_name
    cdef dict counters
    cdef int nfac
    cdef object extra

    def __init__(self, ModelData md, ClosureData cd, int route, solver_name, dict counters,
                 int factorizations=1, extra=None):
        # route 3 (maximal): the factorisations are counted per call, and the
        # stats are ``extra`` plus that count
        self.md, self.cd, self.route = md, cd, route
        self.solver_name, self.counters = solver_name, counters
        self.nfac = factorizations
        self.extra = extra

    def __call__(self, q, dq, tau):
        cdef State1 st
        cdef Work w
        cdef CWork cw
        cdef double info[2]
        cdef int s
        if not _state1(self.md, q, dq, tau, &st):
            if self.route != 3:
                return self._batch(q, dq, tau)
            return None
        ddq = _empty(self.md.nv)
        lam = _empty(self.cd.m)
        w = work_from(&self.md.ws[0], self.md.nb)
        cw = cwork_from_c(&self.cd.c, &self.cd.cws[0], self.md.nb, self.md.nv, self.cd.m, False)
        cw.chol = self.cd.h0
        cdef double* pd = <double*> cnp.PyArray_DATA(ddq)
        cdef double* pl = <double*> cnp.PyArray_DATA(lam)
        if self.md.nb >= 32:
            # releasing the GIL costs about 0.1 us: worth it on large models only
            with nogil:
                s = _cdyn(&self.md.c, &self.cd.c, self.route, st.q, st.a, pd, <double*> st.b, NULL, NULL,
                          pl, info, &w, &cw)
        else:
            s = _cdyn(&self.md.c, &self.cd.c, self.route, st.q, st.a, pd, <double*> st.b, NULL, NULL,
                      pl, info, &w, &cw)
        if s != 0:
            return None
        return _native_result(ddq, lam, info, <int> info[0] if self.route == 3 else self.nfac,
                              self.solver_name, self.counters, self.extra)

    cdef object _batch(self, q, dq, tau):
        """A batch (N, nq), (N, nv), (N, nv) of float64 C-contiguous finite
        arrays with unit quaternions, validated and run here with the least
        Python in between (the kernel in the calling thread below
        ``_PARALLEL_FROM`` states, no thread team to start); anything else
        returns None for the general path.  The same result as
        ``ConstrainedModel.forward_dynamics``'s batch path."""
        cdef Py_ssize_t N, k, i, nv = self.md.nv, nq = self.md.nq, m = self.cd.m
        cdef const double* qp = _mat(q, nq, &N)
        cdef Py_ssize_t N2, N3
        cdef const double* dqp = _mat(dq, nv, &N2)
        cdef const double* tp = _mat(tau, nv, &N3)
        cdef int nthreads = 1
        cdef bint okall = True
        if qp == NULL or dqp == NULL or tp == NULL or N2 != N or N3 != N or N < 1:
            return None
        for k in range(N):
            if not _quats_ok(self.md, qp + k * nq):
                return None
        ddq = _empty2(N, nv)
        tau_c = np.array(tau)                      # the kernel's tau argument is not const
        lam = _empty2(N, m)
        info = _empty2(N, 2)
        status = np.zeros(N, dtype=np.int32)
        cdef int[::1] stv = status
        if N >= _PARALLEL_FROM:
            from gear.algorithms.dynamics import get_num_threads
            nthreads = get_num_threads()
        _cdyn_batch(self.md, self.cd, self.route, N, qp, dqp, <double*> cnp.PyArray_DATA(ddq),
                    <double*> cnp.PyArray_DATA(<cnp.ndarray> tau_c), NULL, NULL,
                    <double*> cnp.PyArray_DATA(lam), <double*> cnp.PyArray_DATA(info), &stv[0],
                    nthreads, True)
        for k in range(N):
            if stv[k] != 0:
                return None                        # the general path reports it
        cdef double* dp = <double*> cnp.PyArray_DATA(ddq)
        cdef double* ip = <double*> cnp.PyArray_DATA(info)
        ok = np.empty(N, dtype=bool)
        cdef cnp.npy_bool* okp = <cnp.npy_bool*> cnp.PyArray_DATA(ok)
        for k in range(N):
            okp[k] = True
            for i in range(nv):
                if not isfinite(dp[k * nv + i]):
                    okp[k] = False
                    okall = False
                    break
        rank = np.empty(N, dtype=np.int64)
        cdef long[::1] rv = rank
        for k in range(N):
            rv[k] = <long> ip[2 * k]
        self.counters["calls"] += N
        self.counters["factorizations"] += N * self.nfac
        stats = {"factorizations": N * self.nfac, "rank": rank, "native": True}
        if self.extra is not None:
            stats.update({key: v for key, v in self.extra.items() if key != "rank"})
        cdef ConstraintResult out = ConstraintResult.__new__(ConstraintResult)
        out._ddq = ddq
        out._lam = lam
        out._residual = info[:, 1].copy()
        out._success = ok
        out._message = "ok" if okall else "non-finite result in some states"
        out._solver = self.solver_name
        out._stats = stats
        return out


cdef Py_ssize_t _PARALLEL_FROM = 32      # batches from this many states run on every thread


cdef inline const double* _mat(object o, Py_ssize_t n, Py_ssize_t* N):
    # (N, n) float64 C-contiguous with finite entries: its data, else NULL
    cdef cnp.ndarray a
    cdef const double* p
    cdef Py_ssize_t k
    if not cnp.PyArray_CheckExact(o):
        return NULL
    a = <cnp.ndarray> o
    if (cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or cnp.PyArray_NDIM(a) != 2
            or cnp.PyArray_DIM(a, 1) != n or not cnp.PyArray_IS_C_CONTIGUOUS(a)):
        return NULL
    N[0] = cnp.PyArray_DIM(a, 0)
    p = <const double*> cnp.PyArray_DATA(a)
    for k in range(N[0] * n):
        if not isfinite(p[k]):
            return NULL
    return p


cdef inline cnp.ndarray _empty2(Py_ssize_t n0, Py_ssize_t n1):
    cdef cnp.npy_intp dims[2]
    dims[0] = n0
    dims[1] = n1
    return cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)


cdef class FastInverse:
    """One-state closed inverse dynamics (default objective) with the least
    Python in between, like :class:`FastForward`: ``act`` must be a bool
    array per velocity coordinate and ``tau_passive`` None or a float64
    vector; anything else, an argument that does not pass the checks of
    ``rnea1``, or an under-actuated state (the general path then answers
    with hybrid dynamics) returns None."""
    cdef ModelData md
    cdef ClosureData cd
    cdef double rcond
    cdef object solver_name
    cdef dict counters

    def __init__(self, ModelData md, ClosureData cd, double rcond, solver_name, dict counters):
        self.md, self.cd, self.rcond = md, cd, rcond
        self.solver_name, self.counters = solver_name, counters

    def __call__(self, q, dq, ddq, act, tau_passive):
        cdef State1 st
        cdef const double* tp = NULL
        cdef Work w
        cdef CWork cw
        cdef double info[2]
        cdef int s, k
        cdef cnp.ndarray am
        cdef Py_ssize_t nv = self.md.nv
        if not _state1(self.md, q, dq, ddq, &st):
            return None
        if tau_passive is not None:
            tp = _vec(tau_passive, nv)
            if tp == NULL:
                return None
        if not cnp.PyArray_CheckExact(act):
            return None
        am = <cnp.ndarray> act
        if (cnp.PyArray_TYPE(am) != cnp.NPY_BOOL or cnp.PyArray_NDIM(am) != 1
                or cnp.PyArray_DIM(am, 0) != nv or not cnp.PyArray_IS_C_CONTIGUOUS(am)):
            return None
        tau = _empty(nv)
        ddq_o = _empty(nv)
        lam = _empty(self.cd.m)
        cdef double* pt = <double*> cnp.PyArray_DATA(tau)
        cdef double* po = <double*> cnp.PyArray_DATA(ddq_o)
        for k in range(nv):
            pt[k] = tp[k] if tp != NULL else 0.0
            po[k] = st.b[k]
        w = work_from(&self.md.ws[0], self.md.nb)
        cw = cwork_from_c(&self.cd.c, &self.cd.cws[0], self.md.nb, nv, self.cd.m, True)
        s = _cinv(&self.md.c, &self.cd.c, st.q, st.a, st.b, pt,
                  <const unsigned char*> cnp.PyArray_DATA(am), NULL, self.rcond,
                  <double*> cnp.PyArray_DATA(lam), info, &w, &cw)
        if s != 0:
            return None
        out = _native_result(ddq_o, lam, info, 1, self.solver_name, self.counters, None)
        out._residual = _UNSET          # (inverse dynamics carries no residual)
        out.tau = tau
        out.exact = True
        return out


cdef class FastHybrid:
    """One-state constrained hybrid dynamics with the least Python in
    between, like :class:`FastForward`: ``prescribed`` must be a bool
    array with one entry per joint (anything else, or an argument that
    does not pass the checks of ``rnea1``, returns None for the general
    path).  ``plan(mask_bytes)`` (a Python callable, called once per
    prescribed set) gives ``(ClosureData, route, extra_stats)`` or None."""
    cdef ModelData md
    cdef object solver_name
    cdef dict counters
    cdef object plan
    cdef dict plans
    cdef int nfac

    def __init__(self, ModelData md, plan, solver_name, dict counters, int factorizations=1):
        # factorisations counted per call (route 3: the kernel's own count)
        self.md, self.plan = md, plan
        self.solver_name, self.counters = solver_name, counters
        self.nfac = factorizations
        self.plans = {}

    def __call__(self, q, dq, ddq, tau, prescribed):
        cdef State1 st
        cdef const double* pd
        cdef Work w
        cdef CWork cw
        cdef double info[2]
        cdef int s, route, k
        cdef ClosureData cd
        cdef cnp.ndarray pm
        cdef Py_ssize_t nv = self.md.nv
        if not _state1(self.md, q, dq, tau, &st):
            return None
        pd = _vec(ddq, nv)
        if pd == NULL or not cnp.PyArray_CheckExact(prescribed):
            return None
        pm = <cnp.ndarray> prescribed
        if (cnp.PyArray_TYPE(pm) != cnp.NPY_BOOL or cnp.PyArray_NDIM(pm) != 1
                or cnp.PyArray_DIM(pm, 0) != self.md.nb or not cnp.PyArray_IS_C_CONTIGUOUS(pm)):
            return None
        key = pm.tobytes()
        p = self.plans.get(key, _UNSET)
        if p is _UNSET:
            p = self.plans[key] = self.plan(key)
        if p is None:
            return None
        cd, route, extra = p
        ddq_o = _empty(nv)
        tau_o = _empty(nv)
        lam = _empty(cd.m)
        cdef double* po = <double*> cnp.PyArray_DATA(ddq_o)
        cdef double* pt = <double*> cnp.PyArray_DATA(tau_o)
        for k in range(nv):
            po[k] = pd[k]
            pt[k] = st.b[k]
        w = work_from(&self.md.ws[0], self.md.nb)
        cw = cwork_from_c(&cd.c, &cd.cws[0], self.md.nb, self.md.nv, cd.m, route != 3)
        cw.chol = cd.h0
        s = _cdyn(&self.md.c, &cd.c, route, st.q, st.a, po, pt,
                  <const unsigned char*> cnp.PyArray_DATA(pm), NULL,
                  <double*> cnp.PyArray_DATA(lam), info, &w, &cw)
        if s != 0:
            return None
        out = _native_result(ddq_o, lam, info, <int> info[0] if route == 3 else self.nfac,
                             self.solver_name, self.counters, extra)
        out.tau = tau_o
        return out

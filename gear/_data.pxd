# cython: language_level=3
"""The native data every extension shares: the frozen model and the plans
of the closed-loop and maximal-coordinate kernels (implemented in
``gear/_data.pyx``), and the small input checks and pointer helpers of the
entry points (``gear/_tree.pyx``, ``gear/_closed.pyx``,
``gear/_rollouts.pyx``)."""
cimport numpy as cnp
from libc.math cimport fabs, sqrt
from libc.string cimport memcpy, memset
from gear.algorithms._types cimport ModelC
from gear.constraints._cwork cimport ClosC, SpKKT, SpInv
from gear.maximal._kernel cimport MaxC, gear_chol
from gear.maximal._tree_route cimport MaxTree


cdef class ModelData:
    cdef ModelC c
    cdef readonly object arrays
    cdef double[::1] ws
    cdef readonly int nb, nq, nv, wsize
    cdef int nquat
    cdef int[::1] quat_at      # q offset of each quaternion (Spherical, Free)
    cdef int[::1] quat_joint   # its joint index


cdef class ClosureData:
    cdef ClosC c
    cdef readonly object arrays
    cdef double[::1] cws
    cdef readonly int m, cwsize
    cdef readonly object maximal      # the MaximalData attached (route 3), or None
    cdef readonly object sparse       # the SparseKKTData attached (route 1, sparse K), or None
    cdef readonly object sparse_inverse   # the SparseInvData attached with it, or None
    cdef gear_chol* h0                # its CHOLMOD handle (serial calls)


cdef class MaximalData:
    cdef MaxC c
    cdef MaxTree tr
    cdef readonly object arrays
    cdef gear_chol* h
    cdef readonly int nws


cdef class SparseKKTData:
    cdef SpKKT c
    cdef readonly object arrays


cdef class SparseInvData:
    cdef SpInv c
    cdef readonly object arrays


cdef enum:
    _PARALLEL_FROM = 32      # batches from this many states run on every thread


# the batched kernels' fork-join team (gear/_team.h; one for every extension)
ctypedef void (*team_fn)(void* ctx, int part, int nparts) noexcept nogil
cdef void team_run(int nparts, team_fn fn, void* ctx) noexcept nogil
cdef double* team_scratch(Py_ssize_t n) noexcept nogil


cdef inline void team_share(Py_ssize_t count, int part, int nparts, Py_ssize_t* b0,
                            Py_ssize_t* b1) noexcept nogil:
    """The contiguous share ``[b0, b1)`` of ``count`` items that ``part`` of
    ``nparts`` takes (OpenMP's static schedule)."""
    cdef Py_ssize_t q = count // nparts, r = count % nparts
    b0[0] = part * q + (part if part < r else r)
    b1[0] = b0[0] + q + (1 if part < r else 0)


cdef inline const double* _base1(const double[::1] a):
    # first element of a vector, or NULL for an absent (None) argument
    if a is None or a.shape[0] == 0:
        return NULL
    return &a[0]


cdef inline const double* _base2(const double[:, ::1] a):
    # first element of a batch, or NULL for an absent (None) argument
    if a is None or a.shape[0] == 0 or a.shape[1] == 0:
        return NULL
    return &a[0, 0]


cdef inline const double* _base3(const double[:, :, ::1] a):
    if a is None or a.shape[0] == 0:
        return NULL
    return &a[0, 0, 0]


cdef inline const double* _row(const double* base, Py_ssize_t k, Py_ssize_t stride) noexcept nogil:
    if base == NULL:
        return NULL
    return base + k * stride


cdef inline double* _orow(double* base, Py_ssize_t k, Py_ssize_t stride) noexcept nogil:
    if base == NULL:
        return NULL
    return base + k * stride


cdef inline bint _all_finite(const double* p, Py_ssize_t n) noexcept nogil:
    # True if p[0 .. n) holds no inf or NaN.  x * 0 is 0 for finite x and
    # NaN for inf and NaN; eight sums side by side keep the loop free of
    # branches, so that the compiler runs it in vector registers (a batch's
    # check cost 3x less than a loop that stops at the first bad entry).
    # It needs IEEE arithmetic: -ffast-math (never in meson.build) would
    # fold x * 0 to 0 and let every NaN through
    # (tests/test_small_batches.py::test_every_entry_of_a_fast_batch_is_checked)
    cdef double acc[8]
    cdef double s = 0.0
    cdef Py_ssize_t k = 0
    cdef int j
    for j in range(8):
        acc[j] = 0.0
    while k + 8 <= n:
        for j in range(8):
            acc[j] += p[k + j] * 0.0
        k += 8
    while k < n:
        s += p[k] * 0.0
        k += 1
    for j in range(8):
        s += acc[j]
    return s == 0.0


cdef inline const double* _vec(object o, Py_ssize_t n):
    cdef cnp.ndarray a
    cdef const double* p
    if not cnp.PyArray_CheckExact(o):
        return NULL
    a = <cnp.ndarray> o
    if (cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or cnp.PyArray_NDIM(a) != 1
            or cnp.PyArray_DIM(a, 0) != n or not cnp.PyArray_IS_C_CONTIGUOUS(a)):
        return NULL
    p = <const double*> cnp.PyArray_DATA(a)
    return p if _all_finite(p, n) else NULL


cdef int batch_threads()


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


cdef inline const double* _mat(object o, Py_ssize_t n, Py_ssize_t* N):
    # (N, n) float64 C-contiguous with finite entries: its data, else NULL
    cdef cnp.ndarray a
    cdef const double* p
    if not cnp.PyArray_CheckExact(o):
        return NULL
    a = <cnp.ndarray> o
    if (cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or cnp.PyArray_NDIM(a) != 2
            or cnp.PyArray_DIM(a, 1) != n or not cnp.PyArray_IS_C_CONTIGUOUS(a)):
        return NULL
    N[0] = cnp.PyArray_DIM(a, 0)
    p = <const double*> cnp.PyArray_DATA(a)
    return p if _all_finite(p, N[0] * n) else NULL


cdef enum:
    # which of _batch_in's arrays a, b, c must be given
    NEED_A = 1
    NEED_B = 2
    NEED_C = 4


cdef inline bint _rows_of(object o, Py_ssize_t n, Py_ssize_t N, bint needed, const double** p):
    # ``o`` an (N, n) batch as _mat takes it (its data in p), or None where
    # it is not needed (p NULL)
    cdef Py_ssize_t No = 0
    if o is None:
        p[0] = NULL
        return not needed
    p[0] = _mat(o, n, &No)
    return p[0] != NULL and No == N


cdef inline bint _batch_in(ModelData md, q, a, b, c, int need, Py_ssize_t* N, const double** qp,
                           const double** ap, const double** bp, const double** cp):
    """True if ``q`` is a batch (N, nq), N >= 1, and ``a``, ``b``, ``c``
    are batches (N, nv), or None where ``need`` (NEED_A | NEED_B | NEED_C)
    does not name them: float64 C-contiguous, finite, unit quaternions
    (the light paths' batches).  Fills the data pointers (NULL for None)."""
    cdef Py_ssize_t k
    qp[0] = _mat(q, md.nq, N)
    if (qp[0] == NULL or N[0] < 1 or not _rows_of(a, md.nv, N[0], need & NEED_A, ap)
            or not _rows_of(b, md.nv, N[0], need & NEED_B, bp)
            or not _rows_of(c, md.nv, N[0], need & NEED_C, cp)):
        return False
    for k in range(N[0]):
        if not _quats_ok(md, qp[0] + k * md.nq):
            return False
    return True


cdef inline bint _out_ok(object o, Py_ssize_t N, Py_ssize_t n):
    # a writeable C-contiguous float64 array of shape (N, n), or (n,) for
    # N = -1: a result the fast paths may fill in place
    cdef cnp.ndarray a
    if not cnp.PyArray_CheckExact(o):
        return False
    a = <cnp.ndarray> o
    if (cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or not cnp.PyArray_IS_C_CONTIGUOUS(a)
            or not cnp.PyArray_ISWRITEABLE(a)):
        return False
    if N < 0:
        return cnp.PyArray_NDIM(a) == 1 and cnp.PyArray_DIM(a, 0) == n
    return cnp.PyArray_NDIM(a) == 2 and cnp.PyArray_DIM(a, 0) == N and cnp.PyArray_DIM(a, 1) == n


cdef inline cnp.ndarray _copied(const double* src, bint batch, Py_ssize_t N, Py_ssize_t n):
    # a new array (N, n) -- (n,) for one state (N = 1) -- holding src's
    # N n doubles, or zeros for NULL
    cdef cnp.npy_intp dims[2]
    dims[0] = N
    dims[1] = n
    cdef cnp.ndarray a
    if batch:
        a = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    else:
        a = cnp.PyArray_EMPTY(1, &dims[1], cnp.NPY_DOUBLE, 0)
    if src != NULL:
        memcpy(cnp.PyArray_DATA(a), src, N * n * sizeof(double))
    else:
        memset(cnp.PyArray_DATA(a), 0, N * n * sizeof(double))
    return a


cdef inline const unsigned char* _flags(object o, Py_ssize_t n):
    # the data of a C-contiguous uint8 or bool vector (n,) (prescribed
    # joints, actuated dofs), else NULL
    cdef cnp.ndarray a
    if not cnp.PyArray_CheckExact(o) or n == 0:
        return NULL
    a = <cnp.ndarray> o
    if ((cnp.PyArray_TYPE(a) != cnp.NPY_UINT8 and cnp.PyArray_TYPE(a) != cnp.NPY_BOOL)
            or cnp.PyArray_NDIM(a) != 1 or cnp.PyArray_DIM(a, 0) != n or not cnp.PyArray_IS_C_CONTIGUOUS(a)):
        return NULL
    return <const unsigned char*> cnp.PyArray_DATA(a)


cdef inline cnp.ndarray _empty2(Py_ssize_t n0, Py_ssize_t n1):
    cdef cnp.npy_intp dims[2]
    dims[0] = n0
    dims[1] = n1
    return cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)

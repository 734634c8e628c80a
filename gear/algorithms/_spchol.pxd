# cython: language_level=3
"""Sparse Cholesky factorisation of a symmetric positive semi-definite
matrix with a fixed pattern, and its minimum-norm solve, inside nogil
kernels (the sparse route, ``gear/constraints/_sparse_route.pxd``).

The symbolic work is done once per pattern, in Python
(``gear/constraints/sparse.py``): a fill-reducing order (CHOLMOD's AMD),
the elimination tree and the pattern of the factor ``L`` (``SpChol``,
column-compressed, each column's diagonal first and its rows ascending),
and for every row ``j`` of ``L`` the list of its off-diagonal entries
``L[j, k]`` (column ``k``, position in column ``k``).  Each call then
runs the left-looking numeric factorisation (George and Liu, "Computer
solution of large sparse positive definite systems", Sec. 5; Davis,
"Direct methods for sparse linear systems", Sec. 4.8)

    for each column j:   x = K[j:, j] - sum_k L[j:, k] L[j, k]   (k: row j of L)
                         L[j, j] = sqrt(x_j),  L[j+1:, j] = x[j+1:] / L[j, j]

in the pattern's positions only: its cost is the factor's flop count.

Semi-definite ``K`` (dependent rows).  As the dense route's pivoted
Cholesky (``psd_solve`` in ``gear/constraints/_psd.pxd``): a pivot ``x_j`` not above
``rtol`` times the largest diagonal of ``K`` marks row j dependent and its
column of ``L`` is set to zero.  The basic solution takes ``lam_D = 0``;
the minimum-norm one adds the null-space correction of ``psd_solve``: with
``W = L_DI L_II^{-1}`` (one sparse back substitution per dependent row)
``(I + W W^T) s = W y_I``, ``y_I -= W^T s``, ``y_D = s``.  A row that is
negligible in itself (``K_jj <= rtol^2 max diag K``: the out-of-plane row of
a ball closing a planar loop turned out of its plane, zero up to rounding)
keeps ``lam_j = 0`` without a correction: its coupling to the other rows is
below ``sqrt(K_jj)``, so the minimum-norm multiplier differs from zero by at
most ``rtol`` relative.  At most ``nnmax`` other dependent rows are
completed; more return -1 (the caller says so and points to the dense
route).
"""
from libc.math cimport sqrt
from gear.algorithms._dense cimport chol_factor, chol_solve


cdef inline double row_rtol() noexcept nogil:
    # ROW_RTOL: a pivot below this fraction of its row's own diagonal is a
    # dependent row (see the module docstring)
    return 1e-8


cdef struct SpChol:
    int n
    int nnz            # entries of L (the diagonal included)
    int nnmax          # dependent rows the minimum-norm completion takes
    const int* Lp      # (n + 1,) column pointers of L; the diagonal first in each
    const int* Li      # (nnz,) row indices, ascending within a column
    const int* Rp      # (n + 1,) row lists: row j's off-diagonal entries L[j, k] are
    const int* Rk      #   Rk[Rp[j]:Rp[j+1]] (columns k < j, ascending) at
    const int* Rpos    #   positions Rpos[...] of Lx


cdef inline void spchol_set(SpChol* s, int n, const int* Lp, const int* Li, const int* Rp,
                            const int* Rk, const int* Rpos, int nnmax) noexcept nogil:
    """``s`` from a factor's pattern (``gear._core.sparse_symbolic``'s
    arrays, kept alive by their owner)."""
    s.n = n
    s.nnz = Lp[n]
    s.nnmax = nnmax
    s.Lp = Lp
    s.Li = Li
    s.Rp = Rp
    s.Rk = Rk
    s.Rpos = Rpos


cdef inline int spchol_scratch(const SpChol* s) noexcept nogil:
    """Doubles of scratch :func:`spchol_factor` and :func:`spchol_solve` use
    (after ``Lx``)."""
    return 3 * s.n + s.nnmax * s.n + s.nnmax * s.nnmax + s.nnmax


cdef inline int spchol_factor(const SpChol* s, double* Lx, double* x, double* dep,
                              double rtol, double rowtol, const double* held=NULL) noexcept nogil:
    """In place: ``Lx`` holds the lower triangle of ``K`` in the pattern's
    positions (zero where the factor fills in) and gets ``L``, each
    column's diagonal entry as its reciprocal ``1 / L_jj`` (the solves
    multiply by it: a division's latency on every column of a triangular
    solve, whose columns wait for each other, was a fifth of it).  ``x`` (n,)
    scratch; ``dep`` (n,) gets 0 (independent), 1 (dependent) or 2
    (dependent and negligible).  ``rowtol``: the fraction of its own
    diagonal a pivot must exceed (``row_rtol()`` for a semi-definite K
    whose rank is wanted; 0 for a regularised, definite one).  ``held``
    (n,) or NULL: columns marked non-zero are taken as dependent and
    negligible (2) whatever their pivots (rows held across a step's
    stages, ``CWork.held``).  Returns the rank."""
    cdef int j, t, t0, p, k, r = 0, n = s.n
    cdef bint h
    cdef double dmax = 0.0, d, kjj, ljk, inv
    for j in range(n):
        if Lx[s.Lp[j]] > dmax:
            dmax = Lx[s.Lp[j]]
    for j in range(n):
        # x = K[j:, j] on the column's pattern, minus the earlier columns
        for t in range(s.Lp[j], s.Lp[j + 1]):
            x[s.Li[t]] = Lx[t]
        kjj = Lx[s.Lp[j]]
        for p in range(s.Rp[j], s.Rp[j + 1]):
            k = s.Rk[p]
            t0 = s.Rpos[p]
            ljk = Lx[t0]
            if ljk == 0.0:
                continue
            for t in range(t0, s.Lp[k + 1]):
                x[s.Li[t]] -= ljk * Lx[t]
        d = x[j]
        h = held != NULL and held[j] != 0.0
        if h or not (d > rtol * dmax) or not (d > rowtol * kjj):
            dep[j] = 2.0 if h or kjj <= rtol * rtol * dmax else 1.0
            for t in range(s.Lp[j], s.Lp[j + 1]):
                Lx[t] = 0.0
            continue
        dep[j] = 0.0
        r += 1
        d = sqrt(d)
        inv = 1.0 / d
        Lx[s.Lp[j]] = inv                   # (the solves multiply by it)
        for t in range(s.Lp[j] + 1, s.Lp[j + 1]):
            Lx[t] = x[s.Li[t]] * inv
    return r


cdef inline void spchol_solve_lt(const SpChol* s, const double* Lx, const double* dep,
                                 double* y, int top) noexcept nogil:
    """``y <- L^{-T} y`` on rows ``< top``, dependent rows set to zero."""
    cdef int j, t
    cdef double v
    for j in range(top - 1, -1, -1):
        if dep[j] != 0.0:
            y[j] = 0.0
            continue
        v = y[j]
        for t in range(s.Lp[j] + 1, s.Lp[j + 1]):
            v -= Lx[t] * y[s.Li[t]]
        y[j] = v * Lx[s.Lp[j]]


cdef inline void spchol_solve_basic(const SpChol* s, const double* Lx, const double* dep,
                                    double* y) noexcept nogil:
    """``y <- `` the basic solution of ``K x = y``: ``L L^T x = y`` with the
    dependent rows' unknowns zero and their equations dropped (a solution
    when the system is consistent; any one will do where only ``J x`` with
    ``null(K) = null(J)`` is wanted, as in the sparse inverse dynamics)."""
    cdef int j, t, n = s.n
    cdef double v
    # L y = b, column by column (dependent rows: y_j = 0, equation dropped)
    for j in range(n):
        if dep[j] != 0.0:
            y[j] = 0.0
            continue
        v = y[j] * Lx[s.Lp[j]]
        y[j] = v
        for t in range(s.Lp[j] + 1, s.Lp[j + 1]):
            y[s.Li[t]] -= Lx[t] * v
    spchol_solve_lt(s, Lx, dep, y, n)


cdef inline void min_norm_completion(const double* W, int nn, int n, const double* dep, double* y,
                                     double* Z, double* sv) noexcept nogil:
    """The minimum-norm solution from the basic one ``y`` (n,), given ``W``
    (nn, n: row a for the a-th row with ``dep == 1``, zero on the dependent
    columns): ``(I + W W^T) s = W y`` (SPD, eigenvalues >= 1), ``y_I -= W^T
    s``, ``y_D = s``.  ``Z`` (nn, nn) and ``sv`` (nn,) scratch.  Shared by
    the dense (``psd_solve`` of ``gear/constraints/_psd.pxd``) and the
    sparse factorisation."""
    cdef int a, b, i, j
    cdef double v
    for a in range(nn):
        for b in range(a + 1):
            v = 1.0 if a == b else 0.0
            for i in range(n):
                v += W[a * n + i] * W[b * n + i]
            Z[a * nn + b] = v
        v = 0.0
        for i in range(n):
            v += W[a * n + i] * y[i]
        sv[a] = v
    chol_factor(Z, nn)
    chol_solve(Z, nn, sv, 1)
    for a in range(nn):
        for i in range(n):
            y[i] -= W[a * n + i] * sv[a]
    a = 0
    for j in range(n):
        if dep[j] == 1.0:
            y[j] = sv[a]
            a += 1


cdef inline int spchol_solve(const SpChol* s, const double* Lx, const double* dep,
                             double* y, double* scratch) noexcept nogil:
    """``y <- K^+ y``: the minimum-norm solution of ``K lam = y`` with the
    factor of :func:`spchol_factor` (see the module docstring).  Returns
    0, or -1 when more than ``nnmax`` rows need the completion."""
    cdef int j, t, a, i, nn = 0, n = s.n
    cdef double* W = scratch                # (nnmax, n)
    cdef double* Z = W + s.nnmax * n        # (nnmax, nnmax)
    cdef double* sv = Z + s.nnmax * s.nnmax  # (nnmax,)
    spchol_solve_basic(s, Lx, dep, y)
    for j in range(n):
        if dep[j] == 1.0:
            nn += 1
    if nn == 0:
        return 0
    if nn > s.nnmax:
        return -1
    # W: row a solves L_II^T w = L[d, I]^T for the a-th dependent row d
    a = 0
    for j in range(n):
        if dep[j] != 1.0:
            continue
        for i in range(n):
            W[a * n + i] = 0.0
        for t in range(s.Rp[j], s.Rp[j + 1]):
            W[a * n + s.Rk[t]] = Lx[s.Rpos[t]]
        spchol_solve_lt(s, Lx, dep, W + a * n, j)
        a += 1
    min_norm_completion(W, nn, n, dep, y, Z, sv)
    return 0

# cython: language_level=3
"""Minimum-norm solve of a dense symmetric positive semi-definite system
``K lam = rhs`` (``K = A M^{-1} A^T`` of the closed-loop kernels, Kim, Lie
Group Formulation of Articulated Rigid Body Dynamics, eq. 67).

``K`` is factorised by Cholesky with diagonal pivoting: pivots below
``rcond`` times the largest diagonal, or below 1e-8 of the row's own
diagonal (``row_rtol`` of ``_spchol.pxd``: a row within 1e-4 rad of the span
of the rows before it), mark a row dependent (redundant rows, singular
configurations), and the minimum-norm ``lam`` is
taken among the solutions, so ``lam`` matches the pseudo-inverse while
``ddq`` and ``A^T lam`` are unique.  Used by the articulated-body route,
the dense route and the rollouts' projection onto the constraint
manifold; the sparse route's factorisation (``gear/algorithms/_spchol.pxd``)
treats dependent rows the same way.
"""
from libc.math cimport sqrt
from gear.algorithms._dense cimport dot
from gear.algorithms._spchol cimport row_rtol, min_norm_completion
from gear.constraints._cwork cimport CWork


cdef inline int psd_solve(double* K, int n, const double* rhs, double* x, CWork* cw,
                          double rtol, bint min_norm=True, bint rows=False) noexcept nogil:
    """Minimum-norm ``x`` with ``K x = rhs`` for symmetric PSD ``K`` (n x n,
    row-major; its lower triangle is overwritten by the factor):
    :func:`psd_factor`, then :func:`psd_apply`.  ``rows``: K's rows are
    the constraint rows, in order (the held rows and ``cw.rdep`` apply).
    Returns the rank."""
    cdef int r = psd_factor(K, n, cw, rtol, NULL, rows)
    psd_apply(K, n, rhs, x, cw, min_norm)
    return r


cdef inline int psd_factor(double* K, int n, CWork* cw, double rtol, const double* idx=NULL,
                           bint rows=False) noexcept nogil:
    """Factorise symmetric PSD ``K`` (n x n, row-major) in place for
    :func:`psd_apply`: left-looking Cholesky (row-contiguous dot
    products) in which a row whose pivot falls below ``rtol`` times the
    largest diagonal (or ``row_rtol()`` times its own) is marked dependent
    in ``cw.piv`` (1; 2: an exactly zero row of K, a zero row of A) and
    its column of L set to zero.  The factor keeps its pivots inverted
    (``1 / L_jj`` on the diagonal).

    ``rows``: K's row j is constraint row ``idx[j]`` (``idx`` NULL: row
    j); each is marked in ``cw.rdep`` (1 dependent on the rows before it,
    2 exactly zero or held), and while ``cw.hold``
    is set a row marked in ``cw.held`` is dependent (2: left out of the
    completion, its equation dropped) whatever its pivot: the rows a
    step's start found dependent stay so at its stages, where the state
    is slightly off the rows and a row redundant on them may not be
    (``gear/algorithms/_rollout.pxd``); ``cw.kn``, ``cw.kidx`` and ``cw.kd``
    (K's diagonal) are kept for it.  Returns the rank r."""
    cdef int i, j, r, row
    cdef bint held
    cdef double dmax = 0.0, s
    cdef double* dep = cw.piv
    cdef double* Ki
    cdef double* Kj
    cdef bint hold = rows and cw.hold
    if rows:
        cw.kn = n
        cw.kidx = idx
    for i in range(n):
        if rows:
            cw.kd[i] = K[i * n + i]
        if K[i * n + i] > dmax:
            dmax = K[i * n + i]
    if not (dmax > 0.0):
        for j in range(n):
            dep[j] = 2.0                       # K = 0: every x is zero
            if rows:
                cw.rdep[j if idx == NULL else <int> idx[j]] = 2.0
        return 0
    r = 0
    for j in range(n):
        Kj = K + j * n
        row = j if idx == NULL else <int> idx[j]
        held = hold and cw.held[row] != 0.0
        s = Kj[j] - dot(Kj, Kj, j)
        if held or not (s > rtol * dmax) or not (s > row_rtol() * Kj[j]):
            # dependent; 2: an exactly zero row of K (a zero row of A) or a
            # held row, whose minimum-norm multiplier is zero: left out of
            # the completion
            dep[j] = 2.0 if held or Kj[j] == 0.0 else 1.0
            for i in range(j, n):
                K[i * n + j] = 0.0
            if rows:
                cw.rdep[row] = dep[j]
            continue
        dep[j] = 0.0
        if rows:
            cw.rdep[row] = 0.0
        r += 1
        s = 1.0 / sqrt(s)
        Kj[j] = s                          # the pivot is kept inverted
        for i in range(j + 1, n):
            Ki = K + i * n
            Ki[j] = (Ki[j] - dot(Ki, Kj, j)) * s
    return r


cdef inline void psd_apply(const double* K, int n, const double* rhs, double* x, CWork* cw,
                           bint min_norm=True) noexcept nogil:
    """A solution ``x`` of ``K x = rhs`` from :func:`psd_factor`'s factor
    (and its ``cw.piv``): with the independent rows I (rank r) and the
    dependent rows D, ``K_II = L_II L_II^T`` and ``L_DI = K_DI
    L_II^{-T}``; the solutions are ``x_b + Z s`` with ``x_b`` the basic
    solution (``x_D = 0``), ``Z = [-W^T; I]`` (rows I, D) and ``W = L_DI
    L_II^{-1}`` (nn x r), and the minimum-norm one has ``(I + W W^T) s =
    W x_bI``.  Rows of K that are exactly zero have ``x = 0`` in it and
    are left out of ``W``.  ``min_norm`` False: the basic solution (enough
    where only ``A^T x`` is wanted of ``K = A A^T`` or ``A M^-1 A^T``:
    every solution has the same, ``null(K) = null(A^T)``).  Uses
    ``cw.tmp``, ``cw.W``, ``cw.Z``; ``rhs`` may be ``x``."""
    cdef int i, j, k, r = 0, nn, a
    cdef double t
    cdef const double* dep = cw.piv
    cdef double* y = cw.tmp
    cdef double* W = cw.W
    cdef double* Z = cw.Z
    cdef double* Ki
    cdef const double* Kj
    # basic solution: L_II L_II^T y_I = rhs_I, y_D = 0 (dependent columns of
    # L are zero, so the sums may run over every index)
    for i in range(n):
        if dep[i] != 0.0:
            y[i] = 0.0
            continue
        r += 1
        t = rhs[i]
        for k in range(i):
            t -= K[i * n + k] * y[k]
        y[i] = t * K[i * n + i]
    for i in range(n - 1, -1, -1):               # row-oriented: y_k -= L_ik y_i
        if dep[i] != 0.0:
            continue
        y[i] *= K[i * n + i]
        t = y[i]
        Kj = K + i * n
        for k in range(i):
            y[k] -= Kj[k] * t
    nn = 0
    for j in range(n):
        if dep[j] == 1.0:
            nn += 1
    if min_norm and nn > 0 and r > 0:
        # W (nn x n, zero on dependent columns): row a solves L_II^T w = L[d, I]^T
        a = 0
        for j in range(n):
            if dep[j] != 1.0:
                continue
            Ki = W + a * n
            for i in range(n):
                Ki[i] = K[j * n + i] if i < j else 0.0
            for i in range(j - 1, -1, -1):       # row-oriented back substitution
                if dep[i] != 0.0:
                    Ki[i] = 0.0
                    continue
                Ki[i] *= K[i * n + i]
                t = Ki[i]
                Kj = K + i * n
                for k in range(i):
                    Ki[k] -= Kj[k] * t
            a += 1
        # (I + W W^T) s = W y, y_I -= W^T s, y_D = s (s in x[0:nn])
        min_norm_completion(W, nn, n, dep, y, Z, x)
    for i in range(n):
        x[i] = y[i]


cdef inline void held_by_pivoting(CWork* cw) noexcept nogil:
    """``cw.held`` on the rows of the last ``K`` factorised for the rows
    (``cw.kn``, ``cw.kidx``; its strict upper triangle and ``cw.kd`` are
    ``K``): as many rows kept as it found independent, chosen by Cholesky
    with diagonal pivoting on a copy (largest Schur diagonal first), the
    others held."""
    cdef int i, j, s, p, n = cw.kn, nkeep = 0
    cdef double best, f
    cdef double* C = cw.W             # (n, n) the copy, reduced in place
    cdef double* kept = cw.Z          # (n,) 1.0 once chosen
    for i in range(n):
        if cw.rdep[i if cw.kidx == NULL else <int> cw.kidx[i]] == 0.0:
            nkeep += 1
        kept[i] = 0.0
        for j in range(n):
            C[i * n + j] = cw.kd[i] if i == j else (cw.K[i * n + j] if j > i else cw.K[j * n + i])
    for s in range(nkeep):
        p = -1
        best = 0.0
        for j in range(n):
            if kept[j] == 0.0 and C[j * n + j] > best:
                best = C[j * n + j]
                p = j
        if p < 0:
            break
        kept[p] = 1.0
        for i in range(n):
            if kept[i] == 0.0:
                f = C[i * n + p] / best
                for j in range(n):
                    if kept[j] == 0.0:
                        C[i * n + j] -= f * C[p * n + j]
    for i in range(n):
        cw.held[i if cw.kidx == NULL else <int> cw.kidx[i]] = 0.0 if kept[i] != 0.0 else 1.0

# cython: language_level=3
"""Small dense Cholesky factorisation and solves (row-major) for the
joint-space mass matrix inside nogil kernels."""
from libc.math cimport sqrt


cdef inline double dot(const double* a, const double* b, int n) noexcept nogil:
    """sum_k a[k] b[k] with four running sums: a plain loop is bound by the
    latency of its chain of additions (the compiler may not reorder them)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef int k = 0
    while k + 4 <= n:
        s0 += a[k] * b[k]
        s1 += a[k + 1] * b[k + 1]
        s2 += a[k + 2] * b[k + 2]
        s3 += a[k + 3] * b[k + 3]
        k += 4
    while k < n:
        s0 += a[k] * b[k]
        k += 1
    return (s0 + s1) + (s2 + s3)


cdef inline int chol_factor(double* A, int n, double rtol=0.0) noexcept nogil:
    """In-place lower Cholesky factor of an SPD n x n matrix (upper part left
    as is).  Returns 0, or 1 + the first pivot that is not above ``rtol``
    times the largest diagonal entry (singular or indefinite).

    Left-looking, by rows: each entry is its row's dot product with the
    pivot row (:func:`dot`, four running sums, contiguous)."""
    cdef int i, j
    cdef double s, inv, dmax = 0.0
    cdef double* Aj
    for j in range(n):
        if A[j * n + j] > dmax:
            dmax = A[j * n + j]
    for j in range(n):
        Aj = A + j * n
        s = Aj[j] - dot(Aj, Aj, j)
        if not (s > rtol * dmax) or not (s > 0.0):
            return 1 + j
        s = sqrt(s)
        Aj[j] = s
        inv = 1.0 / s
        for i in range(j + 1, n):
            A[i * n + j] = (A[i * n + j] - dot(A + i * n, Aj, j)) * inv
    return 0


cdef inline void chol_solve(const double* L, int n, double* B, int m) noexcept nogil:
    """B <- A^{-1} B for B of shape (n, m), with L from chol_factor.

    Row-oriented: every update is a contiguous row operation B[i, :] -=
    L[i, k] B[k, :] that the compiler vectorises."""
    cdef int i, k, c
    cdef double a
    cdef double* Bi
    cdef const double* Bk
    # L y = b
    for i in range(n):
        Bi = B + i * m
        for k in range(i):
            a = L[i * n + k]
            Bk = B + k * m
            for c in range(m):
                Bi[c] -= a * Bk[c]
        a = 1.0 / L[i * n + i]
        for c in range(m):
            Bi[c] *= a
    # L^T x = y
    for i in range(n - 1, -1, -1):
        Bi = B + i * m
        for k in range(i + 1, n):
            a = L[k * n + i]
            Bk = B + k * m
            for c in range(m):
                Bi[c] -= a * Bk[c]
        a = 1.0 / L[i * n + i]
        for c in range(m):
            Bi[c] *= a


cdef inline int chol_inv(double* A, int n, double* Ainv) noexcept nogil:
    """Inverse of a small SPD matrix (row-major); A is overwritten with its
    factor.  Returns 0, or nonzero if a pivot is below 1e-13 of the largest
    diagonal entry (Psi_i = (S^T Ihat S)^{-1} of Tables 3-4)."""
    cdef int k
    if chol_factor(A, n, 1e-13) != 0:
        return 1
    for k in range(n * n):
        Ainv[k] = 0.0
    for k in range(n):
        Ainv[k * n + k] = 1.0
    chol_solve(A, n, Ainv, n)
    return 0


cdef inline void chol_inverse(const double* L, int n, double* Ainv, double* Y) noexcept nogil:
    """Ainv = A^{-1} = L^{-T} L^{-1} from the factor of chol_factor, in about
    n^3/3 multiply-adds: Y = L^{-1} (lower triangular), then Ainv = Y^T Y
    (the lower triangle, mirrored).  Y: n x n scratch.  Both by rows, as
    contiguous row updates ``row_i += a row_k`` that the compiler
    vectorises: row i of Y is ``-(sum_k L_ik Y_k) / L_ii`` over k < i, and
    ``Y^T Y`` is the sum over k of the outer products of the rows of Y."""
    cdef int i, j, k
    cdef double a, inv
    cdef double* Yi
    cdef const double* Yk
    cdef double* Ai
    for i in range(n * n):
        Y[i] = 0.0
        Ainv[i] = 0.0
    for i in range(n):
        Yi = Y + i * n
        for k in range(i):
            a = L[i * n + k]
            Yk = Y + k * n
            for j in range(k + 1):
                Yi[j] += a * Yk[j]
        inv = 1.0 / L[i * n + i]
        for j in range(i):
            Yi[j] = -Yi[j] * inv
        Yi[i] = inv
    for k in range(n):
        Yk = Y + k * n
        for i in range(k + 1):
            a = Yk[i]
            Ai = Ainv + i * n
            for j in range(i + 1):
                Ai[j] += a * Yk[j]
    for i in range(n):
        for j in range(i):
            Ainv[j * n + i] = Ainv[i * n + j]


# ---------------------------------------------------------------------------
# Tree-sparse factorisation of the mass matrix (Featherstone, RBDA Sec. 6.5),
# packed by ancestors
# ---------------------------------------------------------------------------
# Row k of the packed lower triangle P holds M[k, j] for the ancestors j of
# dof k in the dof tree, root first: P[voff[k] + p] is the entry of the
# ancestor at depth p, vanc[voff[k] + p]; the diagonal is kept apart in D.
# The ancestors of the ancestor at depth p are the first p entries of the
# same list, so every update of the factorisation and of a solve along a
# root path is a contiguous run.

cdef inline double gather_dot(const double* a, const int* idx, const double* x,
                              int n) noexcept nogil:
    """sum_k a[k] x[idx[k]], with four running sums like :func:`dot`."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef int k = 0
    while k + 4 <= n:
        s0 += a[k] * x[idx[k]]
        s1 += a[k + 1] * x[idx[k + 1]]
        s2 += a[k + 2] * x[idx[k + 2]]
        s3 += a[k + 3] * x[idx[k + 3]]
        k += 4
    while k < n:
        s0 += a[k] * x[idx[k]]
        k += 1
    return (s0 + s1) + (s2 + s3)


cdef inline int tree_factor(double* P, double* D, int n, const int* vdep, const int* voff,
                            const int* vanc) noexcept nogil:
    """In place ``M = L^T L`` (RBDA Table 6.3) of the packed mass matrix
    (P, D): L has M's pattern (no fill-in), the cost is the sum of the
    squared dof depths.  L is left in P and the inverted diagonal
    ``1 / L_kk`` in D (the solves multiply instead of dividing).  Returns
    0, or 1 + k if the pivot of dof k is not positive."""
    cdef int k, p, q, d
    cdef double a, h
    cdef double* Pk
    cdef double* Pi
    for k in range(n - 1, -1, -1):
        a = D[k]
        if not (a > 0.0):
            return 1 + k
        a = 1.0 / sqrt(a)
        D[k] = a
        Pk = P + voff[k]
        d = vdep[k]
        for p in range(d):
            Pk[p] *= a
        # M_ij -= L_ki L_kj for each ancestor i of k (depth p) and j = i or
        # an ancestor of i (depth q < p, the same dof in both rows)
        for p in range(d):
            h = Pk[p]
            Pi = P + voff[vanc[voff[k] + p]]
            D[vanc[voff[k] + p]] -= h * h
            for q in range(p):
                Pi[q] -= h * Pk[q]
    return 0


cdef inline void tree_solve_Lt(const double* P, const double* D, int n, const int* vdep,
                               const int* voff, const int* vanc, double* x) noexcept nogil:
    """x <- L^{-T} x (RBDA Table 6.4) for L from ``tree_factor``."""
    cdef int i, p
    cdef double xi
    cdef const double* Pi
    cdef const int* ai
    for i in range(n - 1, -1, -1):
        xi = x[i] * D[i]
        x[i] = xi
        if xi == 0.0:
            continue
        Pi = P + voff[i]
        ai = vanc + voff[i]
        for p in range(vdep[i]):
            x[ai[p]] -= Pi[p] * xi


cdef inline void tree_solve_L(const double* P, const double* D, int n, const int* vdep,
                              const int* voff, const int* vanc, double* x) noexcept nogil:
    """x <- L^{-1} x for L from ``tree_factor``."""
    cdef int i
    for i in range(n):
        x[i] = (x[i] - gather_dot(P + voff[i], vanc + voff[i], x, vdep[i])) * D[i]


cdef inline void tree_solve_Lt_rows(const double* P, const double* D, int n, const int* vdep,
                                    const int* voff, const int* vanc, double* B, int m) noexcept nogil:
    """B <- L^{-T} B for B (n, m) row-major: :func:`tree_solve_Lt` on m
    right-hand sides at once, every update a contiguous row operation."""
    cdef int i, p, c
    cdef double a
    cdef double* Bi
    cdef double* Ba
    for i in range(n - 1, -1, -1):
        Bi = B + i * m
        a = D[i]
        for c in range(m):
            Bi[c] *= a
        for p in range(vdep[i]):
            a = P[voff[i] + p]
            Ba = B + vanc[voff[i] + p] * m
            for c in range(m):
                Ba[c] -= a * Bi[c]


cdef inline void tree_solve_L_rows(const double* P, const double* D, int n, const int* vdep,
                                   const int* voff, const int* vanc, double* B, int m) noexcept nogil:
    """B <- L^{-1} B for B (n, m) row-major (:func:`tree_solve_L` on m
    right-hand sides, by rows)."""
    cdef int i, p, c
    cdef double a
    cdef double* Bi
    cdef const double* Ba
    for i in range(n):
        Bi = B + i * m
        for p in range(vdep[i]):
            a = P[voff[i] + p]
            Ba = B + vanc[voff[i] + p] * m
            for c in range(m):
                Bi[c] -= a * Ba[c]
        a = D[i]
        for c in range(m):
            Bi[c] *= a


cdef inline void tree_path_solve_Lt(const double* P, const double* D, const int* vdep,
                                    const int* voff, const int* vanc, int kd, double* Y,
                                    int g, int lo, double* Yh, int nh) noexcept nogil:
    """Y <- L^{-T} Y for g columns that are non-zero only on the root path
    of dof ``kd``, stored by depth: column c's entries at the depths
    p >= ``lo`` in ``Y[c n + p - lo]`` (n = depth(kd) + 1 - lo, ``kd``
    itself last), those at p < ``lo`` in ``Yh[c nh + p]``.  L^{-T} keeps
    the path's support, and every update is a contiguous run.  With ``lo``
    > 0 only the depths from ``lo`` on are solved (their updates reach
    ``Yh``): the tail of a second path whose first ``lo`` dofs another
    call solves."""
    cdef int p, q, c, i, n = vdep[kd] + 1 - lo
    cdef double y
    cdef const double* Pi
    cdef double* Yc
    cdef double* Yhc
    for p in range(vdep[kd], lo - 1, -1):
        i = kd if p == vdep[kd] else vanc[voff[kd] + p]
        Pi = P + voff[i]
        for c in range(g):
            Yc = Y + c * n - lo
            y = Yc[p] * D[i]
            Yc[p] = y
            if y == 0.0:
                continue
            Yhc = Yh + c * nh
            for q in range(lo if lo < p else p):
                Yhc[q] -= Pi[q] * y
            for q in range(lo, p):
                Yc[q] -= Pi[q] * y

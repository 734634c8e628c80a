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
    times the largest diagonal entry (singular or indefinite)."""
    cdef int i, j, k
    cdef double s, dmax = 0.0
    for j in range(n):
        if A[j * n + j] > dmax:
            dmax = A[j * n + j]
    for j in range(n):
        s = A[j * n + j]
        for k in range(j):
            s -= A[j * n + k] * A[j * n + k]
        if not (s > rtol * dmax) or not (s > 0.0):
            return 1 + j
        s = sqrt(s)
        A[j * n + j] = s
        for i in range(j + 1, n):
            for k in range(j):
                A[i * n + j] -= A[i * n + k] * A[j * n + k]
            A[i * n + j] /= s
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
    (one triangle, mirrored).  Y: n x n scratch."""
    cdef int i, j, k
    cdef double s
    for i in range(n * n):
        Y[i] = 0.0
    for i in range(n):
        Y[i * n + i] = 1.0 / L[i * n + i]
        for j in range(i):
            s = 0.0
            for k in range(j, i):
                s += L[i * n + k] * Y[k * n + j]
            Y[i * n + j] = -s / L[i * n + i]
    for i in range(n):
        for j in range(i, n):
            s = 0.0
            for k in range(j, n):
                s += Y[k * n + i] * Y[k * n + j]
            Ainv[i * n + j] = s
            Ainv[j * n + i] = s


# ---------------------------------------------------------------------------
# Tree-sparse factorisation of the mass matrix (Featherstone, RBDA Sec. 6.5)
# ---------------------------------------------------------------------------
cdef inline int ltl_factor(double* H, int n, const int* ptr, const int* seg) noexcept nogil:
    """In place ``H = L^T L`` (RBDA Table 6.3) for the mass matrix ``H``
    (n x n row-major) of a tree: ``H[k, i]`` is non-zero only when i is k
    or an ancestor of k in the dof tree, and L keeps that pattern (no
    fill-in), so the cost is the sum of the squared dof depths instead of
    n^3 / 6.  The ancestors of dof k are the runs ``seg[2s] .. seg[2s+1]``,
    s = ``ptr[k] .. ptr[k+1]-1`` (``ModelC.aseg``).  L is left in the
    entries ``H[k, i]``, i the ancestors of k, with the diagonal stored
    inverted (``H[k, k] = 1 / L_kk``: the solves multiply instead of
    dividing).  Returns 0, or 1 + k if the pivot of dof k is not
    positive."""
    cdef int k, i, j, s, s2
    cdef double a, hki
    cdef double* Hk
    cdef double* Hi
    for k in range(n - 1, -1, -1):
        Hk = H + k * n
        a = Hk[k]
        if not (a > 0.0):
            return 1 + k
        a = 1.0 / sqrt(a)
        Hk[k] = a
        for s in range(ptr[k], ptr[k + 1]):
            for j in range(seg[2 * s], seg[2 * s + 1] + 1):
                Hk[j] *= a
        # H_ij -= H_ki H_kj for every ancestor i of k and j = i or an ancestor of i
        for s in range(ptr[k], ptr[k + 1]):
            for i in range(seg[2 * s], seg[2 * s + 1] + 1):
                hki = Hk[i]
                if hki == 0.0:
                    continue
                Hi = H + i * n
                Hi[i] -= hki * hki
                for s2 in range(ptr[i], ptr[i + 1]):
                    for j in range(seg[2 * s2], seg[2 * s2 + 1] + 1):
                        Hi[j] -= hki * Hk[j]
    return 0


cdef inline void ltl_solve_Lt(const double* L, int n, const int* ptr, const int* seg, double* x,
                              int top) noexcept nogil:
    """x <- L^{-T} x (RBDA Table 6.4) for L from ``ltl_factor``; the entries
    of x above ``top`` must be zero (they stay zero)."""
    cdef int i, j, s
    cdef double xi
    cdef const double* Li
    for i in range(top, -1, -1):
        if x[i] == 0.0:
            continue
        Li = L + i * n
        xi = x[i] * Li[i]
        x[i] = xi
        for s in range(ptr[i], ptr[i + 1]):
            for j in range(seg[2 * s], seg[2 * s + 1] + 1):
                x[j] -= Li[j] * xi


cdef inline void ltl_solve_L(const double* L, int n, const int* ptr, const int* seg,
                             double* x) noexcept nogil:
    """x <- L^{-1} x for L from ``ltl_factor``."""
    cdef int i, j, s
    cdef double t
    cdef const double* Li
    for i in range(n):
        Li = L + i * n
        t = x[i]
        for s in range(ptr[i], ptr[i + 1]):
            t -= dot(Li + seg[2 * s], x + seg[2 * s], seg[2 * s + 1] - seg[2 * s] + 1)
        x[i] = t * Li[i]

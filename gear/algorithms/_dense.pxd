# cython: language_level=3
"""Small dense Cholesky factorisation and solves (row-major) for the
joint-space mass matrix inside nogil kernels."""
from libc.math cimport sqrt


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

# cython: language_level=3
"""Small dense Cholesky factorisation and solves (row-major) for the
joint-space mass matrix inside nogil kernels."""
from libc.math cimport sqrt


cdef inline int chol_factor(double* A, int n) noexcept nogil:
    """In-place lower Cholesky factor of an SPD n x n matrix (upper part left
    as is).  Returns 0, or 1 + the failing pivot."""
    cdef int i, j, k
    cdef double s
    for j in range(n):
        s = A[j * n + j]
        for k in range(j):
            s -= A[j * n + k] * A[j * n + k]
        if not (s > 0.0):
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

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
    """B <- A^{-1} B for B of shape (n, m), with L from chol_factor."""
    cdef int i, k, c
    for c in range(m):
        for i in range(n):
            for k in range(i):
                B[i * m + c] -= L[i * n + k] * B[k * m + c]
            B[i * m + c] /= L[i * n + i]
        for i in range(n - 1, -1, -1):
            for k in range(i + 1, n):
                B[i * m + c] -= L[k * n + i] * B[k * m + c]
            B[i * m + c] /= L[i * n + i]

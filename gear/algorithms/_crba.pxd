# cython: language_level=3
"""Composite-rigid-body mass matrix (Featherstone Sec. 6.2 in Kim's notation).

    Ic_i = I_i + sum_{k in mu(i)} Ad*_{T^{-1}_{i,k}} Ic_k Ad_{T^{-1}_{i,k}}   (eq. 21; composite
           inertias stay rigid-body inertias, so they are kept in 10 parameters)
    F    = Ic_i S_i,          M_ii = S_i^T F
    j = i; while lambda(j) exists:
         F = Ad*_{T^{-1}_{lambda(j),j}} F;  j = lambda(j);  M_ji = S_j^T F = M_ij^T
"""
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._common cimport forward_pass, St_mul
from gear.spatial._spatial cimport dAd_inv, inertia_mul, inertia_to_parent


cdef inline int crba(const ModelC* m, const double* q, double* M, Work* w) noexcept nogil:
    """Mass matrix M (nv x nv, row-major, both triangles written)."""
    cdef int i, j, p, n, nj, r, c, k
    cdef int nv = m.nv
    cdef double D[10]
    cdef double Fc[36]
    cdef double t[6]
    cdef double s
    forward_pass(m, q, NULL, w, False)
    for k in range(nv * nv):
        M[k] = 0.0
    for i in range(m.nb):
        for r in range(10):
            w.Ih[36 * i + r] = m.inertia[10 * i + r]
    for i in range(m.nb - 1, -1, -1):
        p = m.parent[i]
        if p >= 0:
            inertia_to_parent(w.T + 12 * i, w.Ih + 36 * i, D)
            for r in range(10):
                w.Ih[36 * p + r] += D[r]
    for i in range(m.nb):
        n = m.nvi[i]
        if n == 0:
            continue
        for c in range(n):
            inertia_mul(w.Ih + 36 * i, w.S + 36 * i + 6 * c, Fc + 6 * c)
        for c in range(n):
            St_mul(w.S + 36 * i, n, Fc + 6 * c, t)
            for r in range(n):
                M[(m.iv[i] + r) * nv + m.iv[i] + c] = t[r]
        j = i
        while m.parent[j] >= 0:
            for c in range(n):
                dAd_inv(w.T + 12 * j, Fc + 6 * c, t)
                for r in range(6):
                    Fc[6 * c + r] = t[r]
            j = m.parent[j]
            nj = m.nvi[j]
            for c in range(n):
                St_mul(w.S + 36 * j, nj, Fc + 6 * c, t)
                for r in range(nj):
                    M[(m.iv[j] + r) * nv + m.iv[i] + c] = t[r]
                    M[(m.iv[i] + c) * nv + m.iv[j] + r] = t[r]
    return 0

# cython: language_level=3
"""Pieces shared by the recursions: the first forward pass and small
matrix-vector products with a joint's S (6 x n, column-major)."""
from gear.algorithms._types cimport ModelC, Work
from gear.spatial._spatial cimport Ad_inv, ad
from gear.joints._jcalc cimport jcalc_placed, jcalc_dS, jcalc_has_dS


cdef inline void S_mul(const double* S, int n, const double* x, double* out) noexcept nogil:
    # out = S x  (6-vector)
    cdef int r, k
    for r in range(6):
        out[r] = 0.0
    for k in range(n):
        for r in range(6):
            out[r] += S[6 * k + r] * x[k]


cdef inline void S_mul_add(const double* S, int n, const double* x, double* out) noexcept nogil:
    # out += S x
    cdef int r, k
    for k in range(n):
        for r in range(6):
            out[r] += S[6 * k + r] * x[k]


cdef inline void St_mul(const double* S, int n, const double* F, double* out) noexcept nogil:
    # out = S^T F  (n-vector)
    cdef int k
    for k in range(n):
        out[k] = (S[6 * k] * F[0] + S[6 * k + 1] * F[1] + S[6 * k + 2] * F[2]
                  + S[6 * k + 3] * F[3] + S[6 * k + 4] * F[4] + S[6 * k + 5] * F[5])


cdef inline void forward_pass(const ModelC* m, const double* q, const double* dq,
                              Work* w, bint with_eta) noexcept nogil:
    """First forward recursion of Tables 2-4:

        T_{lambda(i),i} = placement_i J_i(q_i)
        V_i   = Ad_{T^{-1}_{lambda(i),i}} V_{lambda(i)} + S_i dq_i          (eq. 37)
        eta_i = ad_{V_i} S_i dq_i + dS_i dq_i                               (Table 3)

    ``dq`` may be NULL (zero velocity): then V = eta = 0.
    """
    cdef int i, p, n, r
    cdef double Sdq[6]
    cdef double dS[36]
    cdef double* T
    cdef double* S
    cdef double* V
    for i in range(m.nb):
        p = m.parent[i]
        n = m.nvi[i]
        T = w.T + 12 * i
        S = w.S + 36 * i
        V = w.V + 6 * i
        jcalc_placed(m.jtype[i], m.jparam + 10 * i, q + m.iq[i], m.Xtree + 12 * i, T, S)
        if dq == NULL:
            for r in range(6):
                V[r] = 0.0
            if with_eta:
                for r in range(6):
                    w.eta[6 * i + r] = 0.0
            continue
        S_mul(S, n, dq + m.iv[i], Sdq)
        if p >= 0:
            Ad_inv(T, w.V + 6 * p, V)
            for r in range(6):
                V[r] += Sdq[r]
        else:
            for r in range(6):
                V[r] = Sdq[r]
        if with_eta:
            ad(V, Sdq, w.eta + 6 * i)
            if jcalc_has_dS(m.jtype[i]):
                jcalc_dS(m.jtype[i], m.jparam + 10 * i, q + m.iq[i], dq + m.iv[i], S, dS)
                S_mul_add(dS, n, dq + m.iv[i], w.eta + 6 * i)


cdef inline void base_acceleration(const ModelC* m, bint gravity, double* dV0) noexcept nogil:
    # gravity as a base acceleration: dV_0 = (0, -g)  (Kim footnote 6, Featherstone 5.3)
    dV0[0] = 0.0
    dV0[1] = 0.0
    dV0[2] = 0.0
    if gravity:
        dV0[3] = -m.g[0]
        dV0[4] = -m.g[1]
        dV0[5] = -m.g[2]
    else:
        dV0[3] = 0.0
        dV0[4] = 0.0
        dV0[5] = 0.0

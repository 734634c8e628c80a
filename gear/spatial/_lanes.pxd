# cython: language_level=3
"""Structure-of-arrays twins of ``_spatial.pxd``: the same operations on
``LANES`` = 4 independent states at once.

Storage ("lanes"): component ``k`` of lane ``l`` of an operand is
``x[k * LANES + l]``, so component ``k`` of all four lanes is one vector
``v4`` (four doubles: one AVX2 register, two SSE2 ones in the generic
build, through GCC's and Clang's vector extensions).  An SE(3) element
has 12 components (R row-major, then p, as in ``_spatial.pxd``), a twist
or wrench 6, a rigid-body inertia 10.  Every function is its scalar
twin's formula, term for term, on vectors: each lane's result is the
scalar function's, bit for bit (the builds compile in ISO C: no fused
multiply-adds, no reassociation).

Operands shared by every lane (a body's inertia, a joint's constant S)
are plain ``_spatial.pxd`` layouts, per-lane scalars ``double[LANES]``.
"""

from libc.math cimport sin, cos
from gear.spatial._v4 cimport v4, splat, gather, sin_cos_v4, sin_cos_in_range
from gear.spatial._spatial cimport inertia_to_mat


cdef enum:
    LANES = 4      # states per block: the width of v4


cdef inline void l_sin_cos(v4 x, v4* s, v4* c) noexcept nogil:
    # _spatial.sin_cos on every lane: the polynomial on all lanes, then
    # libm on any lane out of its range
    cdef const double* xl = <const double*> &x
    cdef int l
    sin_cos_v4(x, s, c)
    for l in range(LANES):
        if not sin_cos_in_range(xl[l]):
            (<double*> s)[l] = sin(xl[l])
            (<double*> c)[l] = cos(xl[l])


cdef inline void l_Ad_inv(const double* T, const double* V, double* out) noexcept nogil:
    # Ad_{T^{-1}} V = (R^T w, R^T (v - p x w))   (_spatial.Ad_inv)
    cdef const v4* T4 = <const v4*> T
    cdef const v4* V4 = <const v4*> V
    cdef v4* o = <v4*> out
    cdef v4 t0 = V4[3] - (T4[10] * V4[2] - T4[11] * V4[1])
    cdef v4 t1 = V4[4] - (T4[11] * V4[0] - T4[9] * V4[2])
    cdef v4 t2 = V4[5] - (T4[9] * V4[1] - T4[10] * V4[0])
    o[0] = T4[0] * V4[0] + T4[3] * V4[1] + T4[6] * V4[2]
    o[1] = T4[1] * V4[0] + T4[4] * V4[1] + T4[7] * V4[2]
    o[2] = T4[2] * V4[0] + T4[5] * V4[1] + T4[8] * V4[2]
    o[3] = T4[0] * t0 + T4[3] * t1 + T4[6] * t2
    o[4] = T4[1] * t0 + T4[4] * t1 + T4[7] * t2
    o[5] = T4[2] * t0 + T4[5] * t1 + T4[8] * t2


cdef inline void l_Ad(const double* T, const double* V, double* out) noexcept nogil:
    # Ad_T V = (R w, p x R w + R v)   (_spatial.Ad)
    cdef const v4* T4 = <const v4*> T
    cdef const v4* V4 = <const v4*> V
    cdef v4* o = <v4*> out
    cdef v4 a0 = T4[0] * V4[0] + T4[1] * V4[1] + T4[2] * V4[2]
    cdef v4 a1 = T4[3] * V4[0] + T4[4] * V4[1] + T4[5] * V4[2]
    cdef v4 a2 = T4[6] * V4[0] + T4[7] * V4[1] + T4[8] * V4[2]
    o[0] = a0
    o[1] = a1
    o[2] = a2
    o[3] = (T4[0] * V4[3] + T4[1] * V4[4] + T4[2] * V4[5]) + (T4[10] * a2 - T4[11] * a1)
    o[4] = (T4[3] * V4[3] + T4[4] * V4[4] + T4[5] * V4[5]) + (T4[11] * a0 - T4[9] * a2)
    o[5] = (T4[6] * V4[3] + T4[7] * V4[4] + T4[8] * V4[5]) + (T4[9] * a1 - T4[10] * a0)


cdef inline void l_dAd_inv_add(const double* T, const double* F, double* out) noexcept nogil:
    # out += Ad*_{T^{-1}} F = (R m + p x R f, R f)   (_spatial.dAd_inv)
    cdef const v4* T4 = <const v4*> T
    cdef const v4* F4 = <const v4*> F
    cdef v4* o = <v4*> out
    cdef v4 m0 = T4[0] * F4[0] + T4[1] * F4[1] + T4[2] * F4[2]
    cdef v4 m1 = T4[3] * F4[0] + T4[4] * F4[1] + T4[5] * F4[2]
    cdef v4 m2 = T4[6] * F4[0] + T4[7] * F4[1] + T4[8] * F4[2]
    cdef v4 f0 = T4[0] * F4[3] + T4[1] * F4[4] + T4[2] * F4[5]
    cdef v4 f1 = T4[3] * F4[3] + T4[4] * F4[4] + T4[5] * F4[5]
    cdef v4 f2 = T4[6] * F4[3] + T4[7] * F4[4] + T4[8] * F4[5]
    o[0] += m0 + (T4[10] * f2 - T4[11] * f1)
    o[1] += m1 + (T4[11] * f0 - T4[9] * f2)
    o[2] += m2 + (T4[9] * f1 - T4[10] * f0)
    o[3] += f0
    o[4] += f1
    o[5] += f2


cdef inline void l_cross3(const double* a, const double* b, double* out) noexcept nogil:
    # out = a x b   (_spatial.cross3); out may not alias
    cdef const v4* a4 = <const v4*> a
    cdef const v4* b4 = <const v4*> b
    cdef v4* o = <v4*> out
    o[0] = a4[1] * b4[2] - a4[2] * b4[1]
    o[1] = a4[2] * b4[0] - a4[0] * b4[2]
    o[2] = a4[0] * b4[1] - a4[1] * b4[0]


cdef inline void l_ad(const double* V, const double* X, double* out) noexcept nogil:
    # ad_V X = (w x xw, v x xw + w x xv)   (_spatial.ad)
    cdef const v4* V4 = <const v4*> V
    cdef const v4* X4 = <const v4*> X
    cdef v4* o = <v4*> out
    l_cross3(V, X, out)
    o[3] = (V4[4] * X4[2] - V4[5] * X4[1]) + (V4[1] * X4[5] - V4[2] * X4[4])
    o[4] = (V4[5] * X4[0] - V4[3] * X4[2]) + (V4[2] * X4[3] - V4[0] * X4[5])
    o[5] = (V4[3] * X4[1] - V4[4] * X4[0]) + (V4[0] * X4[4] - V4[1] * X4[3])


cdef inline void _l_inertia_twist(const double* I, const v4* V4, v4* o) noexcept nogil:
    # o = I V for an inertia I shared by the lanes   (_spatial.inertia_mul)
    cdef double m = I[0], hx = I[1], hy = I[2], hz = I[3]
    o[0] = I[4] * V4[0] + I[7] * V4[1] + I[8] * V4[2] + (hy * V4[5] - hz * V4[4])
    o[1] = I[7] * V4[0] + I[5] * V4[1] + I[9] * V4[2] + (hz * V4[3] - hx * V4[5])
    o[2] = I[8] * V4[0] + I[9] * V4[1] + I[6] * V4[2] + (hx * V4[4] - hy * V4[3])
    o[3] = m * V4[3] - (hy * V4[2] - hz * V4[1])
    o[4] = m * V4[4] - (hz * V4[0] - hx * V4[2])
    o[5] = m * V4[5] - (hx * V4[1] - hy * V4[0])


cdef inline void _l_dad(const v4* V4, const v4* P, v4* o) noexcept nogil:
    # o = ad*_V P = (p x w + f x v, f x w), P = (p, f)   (_spatial.dad)
    o[0] = (P[1] * V4[2] - P[2] * V4[1]) + (P[4] * V4[5] - P[5] * V4[4])
    o[1] = (P[2] * V4[0] - P[0] * V4[2]) + (P[5] * V4[3] - P[3] * V4[5])
    o[2] = (P[0] * V4[1] - P[1] * V4[0]) + (P[3] * V4[4] - P[4] * V4[3])
    o[3] = P[4] * V4[2] - P[5] * V4[1]
    o[4] = P[5] * V4[0] - P[3] * V4[2]
    o[5] = P[3] * V4[1] - P[4] * V4[0]


cdef inline void l_dad(const double* V, const double* F, double* out) noexcept nogil:
    # out = ad*_V F   (_spatial.dad); out may not alias
    _l_dad(<const v4*> V, <const v4*> F, <v4*> out)


cdef inline void l_inertia_force(const double* I, const double* V, const double* dV, double* out) noexcept nogil:
    # out = I dV - ad*_V (I V)   (Kim eq. 42 without the children)
    cdef v4 P[6]
    cdef v4 D[6]
    cdef v4* o = <v4*> out
    cdef int r
    _l_inertia_twist(I, <const v4*> dV, o)
    _l_inertia_twist(I, <const v4*> V, P)
    _l_dad(<const v4*> V, P, D)
    for r in range(6):
        o[r] -= D[r]


cdef inline void l_bias_force(const double* I, const double* V, const double* fext, int sf,
                              double* out) noexcept nogil:
    # out = -ad*_V (I V) - F^ext   (Kim eq. 50 before the children); fext:
    # lane l's wrench at fext + l sf, or NULL
    cdef v4 P[6]
    cdef v4 D[6]
    cdef v4* o = <v4*> out
    cdef int r, l
    _l_inertia_twist(I, <const v4*> V, P)
    _l_dad(<const v4*> V, P, D)
    for r in range(6):
        o[r] = -D[r]
    if fext != NULL:
        for l in range(LANES):
            for r in range(6):
                out[r * LANES + l] -= fext[l * sf + r]


cdef inline void l_inertia_mul(const double* I, const double* V, double* out) noexcept nogil:
    # out = I V, I a rigid-body inertia per lane (10 components)   (_spatial.inertia_mul)
    cdef const v4* I4 = <const v4*> I
    cdef const v4* V4 = <const v4*> V
    cdef v4* o = <v4*> out
    o[0] = I4[4] * V4[0] + I4[7] * V4[1] + I4[8] * V4[2] + (I4[2] * V4[5] - I4[3] * V4[4])
    o[1] = I4[7] * V4[0] + I4[5] * V4[1] + I4[9] * V4[2] + (I4[3] * V4[3] - I4[1] * V4[5])
    o[2] = I4[8] * V4[0] + I4[9] * V4[1] + I4[6] * V4[2] + (I4[1] * V4[4] - I4[2] * V4[3])
    o[3] = I4[0] * V4[3] - (I4[2] * V4[2] - I4[3] * V4[1])
    o[4] = I4[0] * V4[4] - (I4[3] * V4[0] - I4[1] * V4[2])
    o[5] = I4[0] * V4[5] - (I4[1] * V4[1] - I4[2] * V4[0])


cdef inline void l_inertia_mat(const double* I, double* M) noexcept nogil:
    # M = I as a 6x6 matrix on every lane   (_spatial.inertia_to_mat)
    cdef double X[36]
    cdef v4* M4 = <v4*> M
    cdef int k
    inertia_to_mat(I, X)
    for k in range(36):
        M4[k] = splat(X[k])


cdef inline void l_mat6_vec(const double* M, const double* x, double* out) noexcept nogil:
    # out = M x, M 6x6 row-major (36 components)   (_spatial.mat6_vec)
    cdef const v4* M4 = <const v4*> M
    cdef const v4* x4 = <const v4*> x
    cdef v4* o = <v4*> out
    cdef int i
    for i in range(6):
        o[i] = (M4[6 * i] * x4[0] + M4[6 * i + 1] * x4[1] + M4[6 * i + 2] * x4[2]
                + M4[6 * i + 3] * x4[3] + M4[6 * i + 4] * x4[4] + M4[6 * i + 5] * x4[5])


cdef inline void _l_sandwich3(const v4* T4, const v4* P4, int off, v4* o, bint sym) noexcept nogil:
    # o = R M R^T, M the 3x3 block of the 6x6 P at P[off]   (_spatial._sandwich3)
    cdef v4 t[9]
    cdef int i, j
    for i in range(3):
        for j in range(3):
            t[3 * i + j] = T4[3 * i] * P4[off + j] + T4[3 * i + 1] * P4[off + 6 + j] + T4[3 * i + 2] * P4[off + 12 + j]
    for i in range(3):
        for j in range(i if sym else 0, 3):
            o[3 * i + j] = t[3 * i] * T4[3 * j] + t[3 * i + 1] * T4[3 * j + 1] + t[3 * i + 2] * T4[3 * j + 2]


cdef inline void l_congruence_Ad_inv_add(const double* T, const double* P, double* out) noexcept nogil:
    # out += Ad*_{T^{-1}} P Ad_{T^{-1}}, P symmetric: Kim eq. (49)'s sum over
    # children (_spatial._congruence_Ad_inv with add, step for step)
    cdef const v4* T4 = <const v4*> T
    cdef v4* o = <v4*> out
    cdef v4 A[9]
    cdef v4 B[9]
    cdef v4 C[9]
    cdef v4 PC[9]
    cdef v4 Q[9]
    cdef v4 w[3]
    cdef v4 v
    cdef v4 px = T4[9], py = T4[10], pz = T4[11]
    cdef int i, j
    _l_sandwich3(T4, <const v4*> P, 0, A, True)
    _l_sandwich3(T4, <const v4*> P, 3, B, False)
    _l_sandwich3(T4, <const v4*> P, 21, C, True)
    C[3] = C[1]; C[6] = C[2]; C[7] = C[5]
    for j in range(3):
        PC[j] = -pz * C[3 + j] + py * C[6 + j]
        PC[3 + j] = pz * C[j] - px * C[6 + j]
        PC[6 + j] = -py * C[j] + px * C[3 + j]
        Q[j] = -pz * B[3 * j + 1] + py * B[3 * j + 2]
        Q[3 + j] = pz * B[3 * j] - px * B[3 * j + 2]
        Q[6 + j] = -py * B[3 * j] + px * B[3 * j + 1]
    for i in range(3):
        w[0] = -pz * PC[3 * i + 1] + py * PC[3 * i + 2]
        w[1] = pz * PC[3 * i] - px * PC[3 * i + 2]
        w[2] = -py * PC[3 * i] + px * PC[3 * i + 1]
        for j in range(i, 3):
            v = A[3 * i + j] + Q[3 * i + j] + Q[3 * j + i] + w[j]
            o[6 * i + j] += v
            if j != i:
                o[6 * j + i] += v
            v = C[3 * i + j]
            o[6 * (3 + i) + 3 + j] += v
            if j != i:
                o[6 * (3 + j) + 3 + i] += v
        for j in range(3):
            v = B[3 * i + j] + PC[3 * i + j]
            o[6 * i + 3 + j] += v
            o[6 * (3 + j) + i] += v


cdef inline void l_se3_mul(const double* A, const double* B, double* out) noexcept nogil:
    # out = A B = (Ra Rb, Ra pb + pa)   (_spatial.se3_mul)
    cdef const v4* A4 = <const v4*> A
    cdef const v4* B4 = <const v4*> B
    cdef v4* o = <v4*> out
    cdef int i, j
    for i in range(3):
        for j in range(3):
            o[3 * i + j] = A4[3 * i] * B4[j] + A4[3 * i + 1] * B4[3 + j] + A4[3 * i + 2] * B4[6 + j]
    for i in range(3):
        o[9 + i] = (A4[3 * i] * B4[9] + A4[3 * i + 1] * B4[10] + A4[3 * i + 2] * B4[11]) + A4[9 + i]


cdef inline void l_inertia_to_parent(const double* T, const double* I, double* out) noexcept nogil:
    # a body's inertia I (shared by the lanes) in the frame T = (R, p) of
    # each lane   (_spatial.inertia_to_parent, step for step)
    cdef const v4* T4 = <const v4*> T
    cdef v4* o = <v4*> out
    cdef double Ib[9]
    cdef v4 RI[9]
    cdef v4 Ip[9]
    cdef v4 Rh[3]
    cdef double m = I[0]
    cdef v4 px = T4[9], py = T4[10], pz = T4[11]
    cdef v4 pp, hp
    cdef int i, j
    Ib[0] = I[4]; Ib[4] = I[5]; Ib[8] = I[6]
    Ib[1] = I[7]; Ib[3] = I[7]
    Ib[2] = I[8]; Ib[6] = I[8]
    Ib[5] = I[9]; Ib[7] = I[9]
    for i in range(3):
        Rh[i] = T4[3 * i] * I[1] + T4[3 * i + 1] * I[2] + T4[3 * i + 2] * I[3]
    for i in range(3):
        for j in range(3):
            RI[3 * i + j] = T4[3 * i] * Ib[j] + T4[3 * i + 1] * Ib[3 + j] + T4[3 * i + 2] * Ib[6 + j]
    for i in range(3):
        for j in range(3):
            Ip[3 * i + j] = RI[3 * i] * T4[3 * j] + RI[3 * i + 1] * T4[3 * j + 1] + RI[3 * i + 2] * T4[3 * j + 2]
    pp = px * px + py * py + pz * pz
    hp = Rh[0] * px + Rh[1] * py + Rh[2] * pz
    o[0] = splat(m)
    o[1] = Rh[0] + m * px
    o[2] = Rh[1] + m * py
    o[3] = Rh[2] + m * pz
    o[4] = Ip[0] + m * (pp - px * px) + 2.0 * (hp - Rh[0] * px)
    o[5] = Ip[4] + m * (pp - py * py) + 2.0 * (hp - Rh[1] * py)
    o[6] = Ip[8] + m * (pp - pz * pz) + 2.0 * (hp - Rh[2] * pz)
    o[7] = Ip[1] - m * px * py - (px * Rh[1] + Rh[0] * py)
    o[8] = Ip[2] - m * px * pz - (px * Rh[2] + Rh[0] * pz)
    o[9] = Ip[5] - m * py * pz - (py * Rh[2] + Rh[1] * pz)


# Products with a vector ``s`` shared by every lane (a joint's constant S)
# and per-lane scalars ``x[l]``, for the one-dof joint steps of the
# recursions; each keeps the sum order of its _spatial / _common twin.

cdef inline void l_mat6_shared(const double* M, const double* s, double* out) noexcept nogil:
    # out = M s   (mat6_vec with a shared vector)
    cdef const v4* M4 = <const v4*> M
    cdef v4* o = <v4*> out
    cdef int r
    for r in range(6):
        o[r] = (M4[6 * r] * s[0] + M4[6 * r + 1] * s[1] + M4[6 * r + 2] * s[2]
                + M4[6 * r + 3] * s[3] + M4[6 * r + 4] * s[4] + M4[6 * r + 5] * s[5])


cdef inline void l_dot_shared(const double* s, const double* x, double* out) noexcept nogil:
    # out[l] = s . x_l   (St_mul of one column)
    cdef const v4* x4 = <const v4*> x
    (<v4*> out)[0] = (s[0] * x4[0] + s[1] * x4[1] + s[2] * x4[2]
                      + s[3] * x4[3] + s[4] * x4[4] + s[5] * x4[5])


cdef inline void l_dot(const double* u, const double* x, double* out) noexcept nogil:
    # out[l] = u_l . x_l
    cdef const v4* u4 = <const v4*> u
    cdef const v4* x4 = <const v4*> x
    (<v4*> out)[0] = (u4[0] * x4[0] + u4[1] * x4[1] + u4[2] * x4[2]
                      + u4[3] * x4[3] + u4[4] * x4[4] + u4[5] * x4[5])


cdef inline void l_scatter(v4 d, double* out, Py_ssize_t so) noexcept nogil:
    # lane l of d to out[l so] (a per-state output, stride so)
    cdef int l
    for l in range(LANES):
        out[l * so] = (<double*> &d)[l]


cdef inline void l_axpy(const double* u, const double* x, double* out) noexcept nogil:
    # out_l += u_l x[l]
    cdef const v4* u4 = <const v4*> u
    cdef v4 x4 = (<const v4*> x)[0]
    cdef v4* o = <v4*> out
    cdef int r
    for r in range(6):
        o[r] += u4[r] * x4


cdef inline void l_axpy_shared(const double* s, const double* x, double* out) noexcept nogil:
    # out_l += s x[l]   (S_mul_add of one column)
    cdef v4 x4 = (<const v4*> x)[0]
    cdef v4* o = <v4*> out
    cdef int r
    for r in range(6):
        o[r] += s[r] * x4


cdef inline void l_rank1_sub(const double* M, const double* u, const double* d, double* out) noexcept nogil:
    # out = M - (u d) u^T for a symmetric M: the upper triangle, mirrored
    # (Pi_i = Ihat_i - U_i Psi_i U_i^T for one dof, Kim Table 3)
    cdef const v4* M4 = <const v4*> M
    cdef const v4* u4 = <const v4*> u
    cdef v4 d4 = (<const v4*> d)[0]
    cdef v4* o = <v4*> out
    cdef v4 w
    cdef int r, c
    for r in range(6):
        w = u4[r] * d4
        for c in range(r, 6):
            o[6 * r + c] = M4[6 * r + c] - w * u4[c]
            o[6 * c + r] = o[6 * r + c]

# cython: language_level=3
"""Structure-of-arrays twins of ``_spatial.pxd``: the same operations on
``LANES`` independent states at once.

Storage ("lanes"): component ``k`` of lane ``l`` of an operand is
``x[k * LANES + l]``; an SE(3) element has 12 components (R row-major,
then p, as in ``_spatial.pxd``), a twist or wrench 6.  Every function is
a loop over the lanes whose body is the scalar formula of its twin, term
for term, so that the compiler turns each line into one vector
instruction over the lanes (four doubles: one AVX2 register, two SSE2
ones in the generic build).  Outputs never alias inputs (``restrict``).

Scalar operands shared by every lane (a body's inertia) are plain
``_spatial.pxd`` layouts.
"""

from libc.math cimport sin, cos
from gear.spatial._spatial cimport inertia_to_mat, sin_cos_poly, sin_cos_in_range


cdef extern from *:
    ctypedef double* dout "double *__restrict__"
    ctypedef const double* din "const double *__restrict__"


cdef enum:
    LANES = 4      # states per block; the trip count the vectoriser sees


cdef inline void l_sin_cos(din x, dout s, dout c) noexcept nogil:
    # _spatial.sin_cos on every lane: the polynomial on all lanes at once,
    # then libm on any lane out of its range
    cdef int l
    for l in range(LANES):
        sin_cos_poly(x[l], &s[l], &c[l])
    for l in range(LANES):
        if not sin_cos_in_range(x[l]):
            s[l] = sin(x[l])
            c[l] = cos(x[l])


cdef inline void l_Ad_inv(din T, din V, dout out) noexcept nogil:
    # Ad_{T^{-1}} V = (R^T w, R^T (v - p x w))   (_spatial.Ad_inv)
    cdef int l
    cdef double t0, t1, t2
    for l in range(LANES):
        t0 = V[3 * LANES + l] - (T[10 * LANES + l] * V[2 * LANES + l] - T[11 * LANES + l] * V[1 * LANES + l])
        t1 = V[4 * LANES + l] - (T[11 * LANES + l] * V[0 * LANES + l] - T[9 * LANES + l] * V[2 * LANES + l])
        t2 = V[5 * LANES + l] - (T[9 * LANES + l] * V[1 * LANES + l] - T[10 * LANES + l] * V[0 * LANES + l])
        out[0 * LANES + l] = (T[0 * LANES + l] * V[0 * LANES + l] + T[3 * LANES + l] * V[1 * LANES + l]
                              + T[6 * LANES + l] * V[2 * LANES + l])
        out[1 * LANES + l] = (T[1 * LANES + l] * V[0 * LANES + l] + T[4 * LANES + l] * V[1 * LANES + l]
                              + T[7 * LANES + l] * V[2 * LANES + l])
        out[2 * LANES + l] = (T[2 * LANES + l] * V[0 * LANES + l] + T[5 * LANES + l] * V[1 * LANES + l]
                              + T[8 * LANES + l] * V[2 * LANES + l])
        out[3 * LANES + l] = T[0 * LANES + l] * t0 + T[3 * LANES + l] * t1 + T[6 * LANES + l] * t2
        out[4 * LANES + l] = T[1 * LANES + l] * t0 + T[4 * LANES + l] * t1 + T[7 * LANES + l] * t2
        out[5 * LANES + l] = T[2 * LANES + l] * t0 + T[5 * LANES + l] * t1 + T[8 * LANES + l] * t2


cdef inline void l_dAd_inv_add(din T, din F, dout out) noexcept nogil:
    # out += Ad*_{T^{-1}} F = (R m + p x R f, R f)   (_spatial.dAd_inv)
    cdef int l
    cdef double m0, m1, m2, f0, f1, f2
    for l in range(LANES):
        m0 = T[0 * LANES + l] * F[0 * LANES + l] + T[1 * LANES + l] * F[1 * LANES + l] + T[2 * LANES + l] * F[2 * LANES + l]
        m1 = T[3 * LANES + l] * F[0 * LANES + l] + T[4 * LANES + l] * F[1 * LANES + l] + T[5 * LANES + l] * F[2 * LANES + l]
        m2 = T[6 * LANES + l] * F[0 * LANES + l] + T[7 * LANES + l] * F[1 * LANES + l] + T[8 * LANES + l] * F[2 * LANES + l]
        f0 = T[0 * LANES + l] * F[3 * LANES + l] + T[1 * LANES + l] * F[4 * LANES + l] + T[2 * LANES + l] * F[5 * LANES + l]
        f1 = T[3 * LANES + l] * F[3 * LANES + l] + T[4 * LANES + l] * F[4 * LANES + l] + T[5 * LANES + l] * F[5 * LANES + l]
        f2 = T[6 * LANES + l] * F[3 * LANES + l] + T[7 * LANES + l] * F[4 * LANES + l] + T[8 * LANES + l] * F[5 * LANES + l]
        out[0 * LANES + l] += m0 + (T[10 * LANES + l] * f2 - T[11 * LANES + l] * f1)
        out[1 * LANES + l] += m1 + (T[11 * LANES + l] * f0 - T[9 * LANES + l] * f2)
        out[2 * LANES + l] += m2 + (T[9 * LANES + l] * f1 - T[10 * LANES + l] * f0)
        out[3 * LANES + l] += f0
        out[4 * LANES + l] += f1
        out[5 * LANES + l] += f2


cdef inline void l_ad(din V, din X, dout out) noexcept nogil:
    # ad_V X = (w x xw, v x xw + w x xv)   (_spatial.ad)
    cdef int l
    cdef double w0, w1, w2, v0, v1, v2, a0, a1, a2, b0, b1, b2
    for l in range(LANES):
        w0 = V[0 * LANES + l]; w1 = V[1 * LANES + l]; w2 = V[2 * LANES + l]
        v0 = V[3 * LANES + l]; v1 = V[4 * LANES + l]; v2 = V[5 * LANES + l]
        a0 = X[0 * LANES + l]; a1 = X[1 * LANES + l]; a2 = X[2 * LANES + l]
        b0 = X[3 * LANES + l]; b1 = X[4 * LANES + l]; b2 = X[5 * LANES + l]
        out[0 * LANES + l] = w1 * a2 - w2 * a1
        out[1 * LANES + l] = w2 * a0 - w0 * a2
        out[2 * LANES + l] = w0 * a1 - w1 * a0
        out[3 * LANES + l] = (v1 * a2 - v2 * a1) + (w1 * b2 - w2 * b1)
        out[4 * LANES + l] = (v2 * a0 - v0 * a2) + (w2 * b0 - w0 * b2)
        out[5 * LANES + l] = (v0 * a1 - v1 * a0) + (w0 * b1 - w1 * b0)


cdef inline void l_inertia_force(const double* I, din V, din dV, dout out) noexcept nogil:
    # out = I dV - ad*_V (I V)   (Kim eq. 42 without the children; _spatial
    # inertia_mul twice and dad, I = (m, h, Ixx, Iyy, Izz, Ixy, Ixz, Iyz))
    cdef int l
    cdef double m = I[0], hx = I[1], hy = I[2], hz = I[3]
    cdef double Ixx = I[4], Iyy = I[5], Izz = I[6], Ixy = I[7], Ixz = I[8], Iyz = I[9]
    cdef double w0, w1, w2, v0, v1, v2, p0, p1, p2, f0, f1, f2
    cdef double a0, a1, a2, b0, b1, b2
    for l in range(LANES):
        # I dV
        a0 = dV[0 * LANES + l]; a1 = dV[1 * LANES + l]; a2 = dV[2 * LANES + l]
        b0 = dV[3 * LANES + l]; b1 = dV[4 * LANES + l]; b2 = dV[5 * LANES + l]
        out[0 * LANES + l] = Ixx * a0 + Ixy * a1 + Ixz * a2 + (hy * b2 - hz * b1)
        out[1 * LANES + l] = Ixy * a0 + Iyy * a1 + Iyz * a2 + (hz * b0 - hx * b2)
        out[2 * LANES + l] = Ixz * a0 + Iyz * a1 + Izz * a2 + (hx * b1 - hy * b0)
        out[3 * LANES + l] = m * b0 - (hy * a2 - hz * a1)
        out[4 * LANES + l] = m * b1 - (hz * a0 - hx * a2)
        out[5 * LANES + l] = m * b2 - (hx * a1 - hy * a0)
        # (p, f) = I V
        w0 = V[0 * LANES + l]; w1 = V[1 * LANES + l]; w2 = V[2 * LANES + l]
        v0 = V[3 * LANES + l]; v1 = V[4 * LANES + l]; v2 = V[5 * LANES + l]
        p0 = Ixx * w0 + Ixy * w1 + Ixz * w2 + (hy * v2 - hz * v1)
        p1 = Ixy * w0 + Iyy * w1 + Iyz * w2 + (hz * v0 - hx * v2)
        p2 = Ixz * w0 + Iyz * w1 + Izz * w2 + (hx * v1 - hy * v0)
        f0 = m * v0 - (hy * w2 - hz * w1)
        f1 = m * v1 - (hz * w0 - hx * w2)
        f2 = m * v2 - (hx * w1 - hy * w0)
        # - ad*_V (p, f) = -(p x w + f x v, f x w)
        out[0 * LANES + l] -= (p1 * w2 - p2 * w1) + (f1 * v2 - f2 * v1)
        out[1 * LANES + l] -= (p2 * w0 - p0 * w2) + (f2 * v0 - f0 * v2)
        out[2 * LANES + l] -= (p0 * w1 - p1 * w0) + (f0 * v1 - f1 * v0)
        out[3 * LANES + l] -= f1 * w2 - f2 * w1
        out[4 * LANES + l] -= f2 * w0 - f0 * w2
        out[5 * LANES + l] -= f0 * w1 - f1 * w0


cdef inline void l_add(din x, dout out, int n) noexcept nogil:
    # out += x over n components
    cdef int k
    for k in range(n * LANES):
        out[k] += x[k]


cdef inline void l_mat6_vec(din M, din x, dout out) noexcept nogil:
    # out = M x, M 6x6 row-major (36 components)   (_spatial.mat6_vec)
    cdef int i, l
    for i in range(6):
        for l in range(LANES):
            out[i * LANES + l] = (M[(6 * i) * LANES + l] * x[0 * LANES + l]
                                  + M[(6 * i + 1) * LANES + l] * x[1 * LANES + l]
                                  + M[(6 * i + 2) * LANES + l] * x[2 * LANES + l]
                                  + M[(6 * i + 3) * LANES + l] * x[3 * LANES + l]
                                  + M[(6 * i + 4) * LANES + l] * x[4 * LANES + l]
                                  + M[(6 * i + 5) * LANES + l] * x[5 * LANES + l])


cdef inline void l_bias_force(const double* I, din V, const double* fext, int sf, dout out) noexcept nogil:
    # out = -ad*_V (I V) - F^ext   (Kim eq. 50 before the children;
    # _spatial inertia_mul and dad); fext: lane l's wrench at fext + l sf, or NULL
    cdef int l
    cdef double m = I[0], hx = I[1], hy = I[2], hz = I[3]
    cdef double Ixx = I[4], Iyy = I[5], Izz = I[6], Ixy = I[7], Ixz = I[8], Iyz = I[9]
    cdef double w0, w1, w2, v0, v1, v2, p0, p1, p2, f0, f1, f2
    cdef int i
    for l in range(LANES):
        w0 = V[0 * LANES + l]; w1 = V[1 * LANES + l]; w2 = V[2 * LANES + l]
        v0 = V[3 * LANES + l]; v1 = V[4 * LANES + l]; v2 = V[5 * LANES + l]
        p0 = Ixx * w0 + Ixy * w1 + Ixz * w2 + (hy * v2 - hz * v1)
        p1 = Ixy * w0 + Iyy * w1 + Iyz * w2 + (hz * v0 - hx * v2)
        p2 = Ixz * w0 + Iyz * w1 + Izz * w2 + (hx * v1 - hy * v0)
        f0 = m * v0 - (hy * w2 - hz * w1)
        f1 = m * v1 - (hz * w0 - hx * w2)
        f2 = m * v2 - (hx * w1 - hy * w0)
        out[0 * LANES + l] = -((p1 * w2 - p2 * w1) + (f1 * v2 - f2 * v1))
        out[1 * LANES + l] = -((p2 * w0 - p0 * w2) + (f2 * v0 - f0 * v2))
        out[2 * LANES + l] = -((p0 * w1 - p1 * w0) + (f0 * v1 - f1 * v0))
        out[3 * LANES + l] = -(f1 * w2 - f2 * w1)
        out[4 * LANES + l] = -(f2 * w0 - f0 * w2)
        out[5 * LANES + l] = -(f0 * w1 - f1 * w0)
    if fext != NULL:
        for l in range(LANES):
            for i in range(6):
                out[i * LANES + l] -= fext[l * sf + i]


cdef inline void l_inertia_mat(const double* I, dout M) noexcept nogil:
    # M = I as a 6x6 matrix on every lane   (_spatial.inertia_to_mat)
    cdef double X[36]
    cdef int k, l
    inertia_to_mat(I, X)
    for k in range(36):
        for l in range(LANES):
            M[k * LANES + l] = X[k]


cdef inline void _l_sandwich3(din T, din P, int off, dout out, bint sym) noexcept nogil:
    # out = R M R^T, M the 3x3 block of the 6x6 P at P[off]   (_spatial._sandwich3)
    cdef double t[9 * LANES]
    cdef int i, j, l
    for i in range(3):
        for j in range(3):
            for l in range(LANES):
                t[(3 * i + j) * LANES + l] = (T[(3 * i) * LANES + l] * P[(off + j) * LANES + l]
                                              + T[(3 * i + 1) * LANES + l] * P[(off + 6 + j) * LANES + l]
                                              + T[(3 * i + 2) * LANES + l] * P[(off + 12 + j) * LANES + l])
    for i in range(3):
        for j in range(i if sym else 0, 3):
            for l in range(LANES):
                out[(3 * i + j) * LANES + l] = (t[(3 * i) * LANES + l] * T[(3 * j) * LANES + l]
                                                + t[(3 * i + 1) * LANES + l] * T[(3 * j + 1) * LANES + l]
                                                + t[(3 * i + 2) * LANES + l] * T[(3 * j + 2) * LANES + l])


cdef inline void l_congruence_Ad_inv_add(din T, din P, dout out) noexcept nogil:
    # out += Ad*_{T^{-1}} P Ad_{T^{-1}}, P symmetric: Kim eq. (49)'s sum over
    # children (_spatial._congruence_Ad_inv with add, step for step)
    cdef double A[9 * LANES]
    cdef double B[9 * LANES]
    cdef double C[9 * LANES]
    cdef double PC[9 * LANES]
    cdef double Q[9 * LANES]
    cdef double w[3 * LANES]
    cdef double v, px, py, pz
    cdef int i, j, l
    _l_sandwich3(T, P, 0, A, True)
    _l_sandwich3(T, P, 3, B, False)
    _l_sandwich3(T, P, 21, C, True)
    for l in range(LANES):
        C[3 * LANES + l] = C[1 * LANES + l]
        C[6 * LANES + l] = C[2 * LANES + l]
        C[7 * LANES + l] = C[5 * LANES + l]
    for j in range(3):
        for l in range(LANES):
            px = T[9 * LANES + l]; py = T[10 * LANES + l]; pz = T[11 * LANES + l]
            PC[j * LANES + l] = -pz * C[(3 + j) * LANES + l] + py * C[(6 + j) * LANES + l]
            PC[(3 + j) * LANES + l] = pz * C[j * LANES + l] - px * C[(6 + j) * LANES + l]
            PC[(6 + j) * LANES + l] = -py * C[j * LANES + l] + px * C[(3 + j) * LANES + l]
            Q[j * LANES + l] = -pz * B[(3 * j + 1) * LANES + l] + py * B[(3 * j + 2) * LANES + l]
            Q[(3 + j) * LANES + l] = pz * B[(3 * j) * LANES + l] - px * B[(3 * j + 2) * LANES + l]
            Q[(6 + j) * LANES + l] = -py * B[(3 * j) * LANES + l] + px * B[(3 * j + 1) * LANES + l]
    for i in range(3):
        for l in range(LANES):
            px = T[9 * LANES + l]; py = T[10 * LANES + l]; pz = T[11 * LANES + l]
            w[0 * LANES + l] = -pz * PC[(3 * i + 1) * LANES + l] + py * PC[(3 * i + 2) * LANES + l]
            w[1 * LANES + l] = pz * PC[(3 * i) * LANES + l] - px * PC[(3 * i + 2) * LANES + l]
            w[2 * LANES + l] = -py * PC[(3 * i) * LANES + l] + px * PC[(3 * i + 1) * LANES + l]
        for j in range(i, 3):
            for l in range(LANES):
                v = (A[(3 * i + j) * LANES + l] + Q[(3 * i + j) * LANES + l] + Q[(3 * j + i) * LANES + l]
                     + w[j * LANES + l])
                out[(6 * i + j) * LANES + l] += v
                if j != i:
                    out[(6 * j + i) * LANES + l] += v
                v = C[(3 * i + j) * LANES + l]
                out[(6 * (3 + i) + 3 + j) * LANES + l] += v
                if j != i:
                    out[(6 * (3 + j) + 3 + i) * LANES + l] += v
        for j in range(3):
            for l in range(LANES):
                v = B[(3 * i + j) * LANES + l] + PC[(3 * i + j) * LANES + l]
                out[(6 * i + 3 + j) * LANES + l] += v
                out[(6 * (3 + j) + i) * LANES + l] += v


# Products with a vector ``s`` shared by every lane (a joint's constant S)
# and per-lane scalars ``x[l]``, for the one-dof joint steps of the
# recursions; each keeps the sum order of its _spatial / _common twin.

cdef inline void l_mat6_shared(din M, const double* s, dout out) noexcept nogil:
    # out = M s   (mat6_vec with a shared vector)
    cdef int r, l
    for r in range(6):
        for l in range(LANES):
            out[r * LANES + l] = (M[(6 * r) * LANES + l] * s[0] + M[(6 * r + 1) * LANES + l] * s[1]
                                  + M[(6 * r + 2) * LANES + l] * s[2] + M[(6 * r + 3) * LANES + l] * s[3]
                                  + M[(6 * r + 4) * LANES + l] * s[4] + M[(6 * r + 5) * LANES + l] * s[5])


cdef inline void l_dot_shared(const double* s, din x, dout out) noexcept nogil:
    # out[l] = s . x_l   (St_mul of one column)
    cdef int l
    for l in range(LANES):
        out[l] = (s[0] * x[0 * LANES + l] + s[1] * x[1 * LANES + l] + s[2] * x[2 * LANES + l]
                  + s[3] * x[3 * LANES + l] + s[4] * x[4 * LANES + l] + s[5] * x[5 * LANES + l])


cdef inline void l_dot(din u, din x, dout out) noexcept nogil:
    # out[l] = u_l . x_l
    cdef int l
    for l in range(LANES):
        out[l] = (u[0 * LANES + l] * x[0 * LANES + l] + u[1 * LANES + l] * x[1 * LANES + l]
                  + u[2 * LANES + l] * x[2 * LANES + l] + u[3 * LANES + l] * x[3 * LANES + l]
                  + u[4 * LANES + l] * x[4 * LANES + l] + u[5 * LANES + l] * x[5 * LANES + l])


cdef inline void l_axpy(din u, din x, dout out) noexcept nogil:
    # out_l += u_l x[l]
    cdef int r, l
    for r in range(6):
        for l in range(LANES):
            out[r * LANES + l] += u[r * LANES + l] * x[l]


cdef inline void l_axpy_shared(const double* s, din x, dout out) noexcept nogil:
    # out_l += s x[l]   (S_mul_add of one column)
    cdef int r, l
    for r in range(6):
        for l in range(LANES):
            out[r * LANES + l] += s[r] * x[l]


cdef inline void l_rank1_sub(din M, din u, din d, dout out) noexcept nogil:
    # out = M - (u d) u^T for a symmetric M: the upper triangle, then its
    # mirror (Pi_i = Ihat_i - U_i Psi_i U_i^T for one dof, Kim Table 3)
    cdef double w[6 * LANES]
    cdef int r, c, l
    for r in range(6):
        for l in range(LANES):
            w[r * LANES + l] = u[r * LANES + l] * d[l]
    for r in range(6):
        for c in range(r, 6):
            for l in range(LANES):
                out[(6 * r + c) * LANES + l] = M[(6 * r + c) * LANES + l] - w[r * LANES + l] * u[c * LANES + l]
    for r in range(6):
        for c in range(r + 1, 6):
            for l in range(LANES):
                out[(6 * c + r) * LANES + l] = out[(6 * r + c) * LANES + l]


# The world-frame pieces of the composite-rigid-body algorithm

cdef inline void l_se3_mul(din A, din B, dout out) noexcept nogil:
    # out = A B = (Ra Rb, Ra pb + pa)   (_spatial.se3_mul)
    cdef int i, j, l
    for i in range(3):
        for j in range(3):
            for l in range(LANES):
                out[(3 * i + j) * LANES + l] = (A[(3 * i) * LANES + l] * B[j * LANES + l]
                                                + A[(3 * i + 1) * LANES + l] * B[(3 + j) * LANES + l]
                                                + A[(3 * i + 2) * LANES + l] * B[(6 + j) * LANES + l])
    for i in range(3):
        for l in range(LANES):
            out[(9 + i) * LANES + l] = (A[(3 * i) * LANES + l] * B[9 * LANES + l]
                                        + A[(3 * i + 1) * LANES + l] * B[10 * LANES + l]
                                        + A[(3 * i + 2) * LANES + l] * B[11 * LANES + l]) + A[(9 + i) * LANES + l]


cdef inline void l_Ad(din T, din V, dout out) noexcept nogil:
    # Ad_T V = (R w, p x R w + R v)   (_spatial.Ad)
    cdef int i, l
    for i in range(3):
        for l in range(LANES):
            out[i * LANES + l] = (T[(3 * i) * LANES + l] * V[0 * LANES + l] + T[(3 * i + 1) * LANES + l] * V[1 * LANES + l]
                                  + T[(3 * i + 2) * LANES + l] * V[2 * LANES + l])
            out[(3 + i) * LANES + l] = (T[(3 * i) * LANES + l] * V[3 * LANES + l]
                                        + T[(3 * i + 1) * LANES + l] * V[4 * LANES + l]
                                        + T[(3 * i + 2) * LANES + l] * V[5 * LANES + l])
    for l in range(LANES):
        out[3 * LANES + l] += T[10 * LANES + l] * out[2 * LANES + l] - T[11 * LANES + l] * out[1 * LANES + l]
        out[4 * LANES + l] += T[11 * LANES + l] * out[0 * LANES + l] - T[9 * LANES + l] * out[2 * LANES + l]
        out[5 * LANES + l] += T[9 * LANES + l] * out[1 * LANES + l] - T[10 * LANES + l] * out[0 * LANES + l]


cdef inline void l_inertia_mul(din I, din V, dout out) noexcept nogil:
    # out = I V, I a rigid-body inertia per lane (10 components)   (_spatial.inertia_mul)
    cdef int l
    cdef double w0, w1, w2, v0, v1, v2, m, hx, hy, hz
    for l in range(LANES):
        m = I[0 * LANES + l]; hx = I[1 * LANES + l]; hy = I[2 * LANES + l]; hz = I[3 * LANES + l]
        w0 = V[0 * LANES + l]; w1 = V[1 * LANES + l]; w2 = V[2 * LANES + l]
        v0 = V[3 * LANES + l]; v1 = V[4 * LANES + l]; v2 = V[5 * LANES + l]
        out[0 * LANES + l] = (I[4 * LANES + l] * w0 + I[7 * LANES + l] * w1 + I[8 * LANES + l] * w2
                              + (hy * v2 - hz * v1))
        out[1 * LANES + l] = (I[7 * LANES + l] * w0 + I[5 * LANES + l] * w1 + I[9 * LANES + l] * w2
                              + (hz * v0 - hx * v2))
        out[2 * LANES + l] = (I[8 * LANES + l] * w0 + I[9 * LANES + l] * w1 + I[6 * LANES + l] * w2
                              + (hx * v1 - hy * v0))
        out[3 * LANES + l] = m * v0 - (hy * w2 - hz * w1)
        out[4 * LANES + l] = m * v1 - (hz * w0 - hx * w2)
        out[5 * LANES + l] = m * v2 - (hx * w1 - hy * w0)


cdef inline void l_inertia_to_parent(din T, const double* I, dout out) noexcept nogil:
    # a body's inertia I (shared by the lanes) in the frame T = (R, p) of
    # each lane   (_spatial.inertia_to_parent, step for step)
    cdef double Ib[9]
    cdef double RI[9 * LANES]
    cdef double Ip[9 * LANES]
    cdef double Rh[3 * LANES]
    cdef double m = I[0]
    cdef double px, py, pz, pp, hp
    cdef int i, j, l
    Ib[0] = I[4]; Ib[4] = I[5]; Ib[8] = I[6]
    Ib[1] = I[7]; Ib[3] = I[7]
    Ib[2] = I[8]; Ib[6] = I[8]
    Ib[5] = I[9]; Ib[7] = I[9]
    for i in range(3):
        for l in range(LANES):
            Rh[i * LANES + l] = T[(3 * i) * LANES + l] * I[1] + T[(3 * i + 1) * LANES + l] * I[2] + T[(3 * i + 2) * LANES + l] * I[3]
    for i in range(3):
        for j in range(3):
            for l in range(LANES):
                RI[(3 * i + j) * LANES + l] = (T[(3 * i) * LANES + l] * Ib[j] + T[(3 * i + 1) * LANES + l] * Ib[3 + j]
                                               + T[(3 * i + 2) * LANES + l] * Ib[6 + j])
    for i in range(3):
        for j in range(3):
            for l in range(LANES):
                Ip[(3 * i + j) * LANES + l] = (RI[(3 * i) * LANES + l] * T[(3 * j) * LANES + l]
                                               + RI[(3 * i + 1) * LANES + l] * T[(3 * j + 1) * LANES + l]
                                               + RI[(3 * i + 2) * LANES + l] * T[(3 * j + 2) * LANES + l])
    for l in range(LANES):
        px = T[9 * LANES + l]; py = T[10 * LANES + l]; pz = T[11 * LANES + l]
        pp = px * px + py * py + pz * pz
        hp = Rh[0 * LANES + l] * px + Rh[1 * LANES + l] * py + Rh[2 * LANES + l] * pz
        out[0 * LANES + l] = m
        out[1 * LANES + l] = Rh[0 * LANES + l] + m * px
        out[2 * LANES + l] = Rh[1 * LANES + l] + m * py
        out[3 * LANES + l] = Rh[2 * LANES + l] + m * pz
        out[4 * LANES + l] = Ip[0 * LANES + l] + m * (pp - px * px) + 2.0 * (hp - Rh[0 * LANES + l] * px)
        out[5 * LANES + l] = Ip[4 * LANES + l] + m * (pp - py * py) + 2.0 * (hp - Rh[1 * LANES + l] * py)
        out[6 * LANES + l] = Ip[8 * LANES + l] + m * (pp - pz * pz) + 2.0 * (hp - Rh[2 * LANES + l] * pz)
        out[7 * LANES + l] = Ip[1 * LANES + l] - m * px * py - (px * Rh[1 * LANES + l] + Rh[0 * LANES + l] * py)
        out[8 * LANES + l] = Ip[2 * LANES + l] - m * px * pz - (px * Rh[2 * LANES + l] + Rh[0 * LANES + l] * pz)
        out[9 * LANES + l] = Ip[5 * LANES + l] - m * py * pz - (py * Rh[2 * LANES + l] + Rh[1 * LANES + l] * pz)

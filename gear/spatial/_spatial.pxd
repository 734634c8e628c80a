# cython: language_level=3
"""nogil twins of gear.spatial for kernels (Kim Sec. 1).

Storage:
  SE(3)  T = (R, p): double[12], R row-major in T[0:9], p in T[9:12]  (eq. 3)
  twist  V = (w, v): double[6], angular first                         (eq. 10)
  wrench F = (m, f): double[6], moment first                          (eq. 12)
  body inertia: double[10] = (m, h, Ibar) with h = m c and Ibar the
      rotational inertia about the frame origin stored as
      (Ixx, Iyy, Izz, Ixy, Ixz, Iyz); its 6x6 form is eq. (22):
      [[Ibar, [h]], [[h]^T, m 1]]
  6x6 matrices: double[36], row-major.
"""
from libc.math cimport sqrt, sin, cos, fabs
from gear.spatial._v4 cimport v4, splat, sin_cos_v4, sin_cos_in_range


cdef inline void cross3(const double* a, const double* b, double* out) noexcept nogil:
    cdef double x = a[1] * b[2] - a[2] * b[1]
    cdef double y = a[2] * b[0] - a[0] * b[2]
    cdef double z = a[0] * b[1] - a[1] * b[0]
    out[0] = x
    out[1] = y
    out[2] = z


cdef inline void matvec3(const double* R, const double* x, double* out) noexcept nogil:
    # out = R x (out may not alias x)
    out[0] = R[0] * x[0] + R[1] * x[1] + R[2] * x[2]
    out[1] = R[3] * x[0] + R[4] * x[1] + R[5] * x[2]
    out[2] = R[6] * x[0] + R[7] * x[1] + R[8] * x[2]


cdef inline void matTvec3(const double* R, const double* x, double* out) noexcept nogil:
    # out = R^T x (out may not alias x)
    out[0] = R[0] * x[0] + R[3] * x[1] + R[6] * x[2]
    out[1] = R[1] * x[0] + R[4] * x[1] + R[7] * x[2]
    out[2] = R[2] * x[0] + R[5] * x[1] + R[8] * x[2]


cdef inline void matmul3(const double* A, const double* B, double* out) noexcept nogil:
    # out = A B (3x3 row-major, out may not alias)
    cdef int i, j
    for i in range(3):
        for j in range(3):
            out[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j]


cdef inline void sin_cos(double x, double* s, double* c) noexcept nogil:
    """``s = sin x``, ``c = cos x`` for joint angles: ``_v4.sin_cos_v4``
    on one lane (the kernels over four states take the other three), libm
    beyond its range."""
    cdef v4 vs, vc
    if sin_cos_in_range(x):
        sin_cos_v4(splat(x), &vs, &vc)
        s[0] = (<double*> &vs)[0]
        c[0] = (<double*> &vc)[0]
    else:
        s[0] = sin(x)
        c[0] = cos(x)


cdef inline void rodrigues(const double* a, double angle, double* R) noexcept nogil:
    # R = exp([a] angle) for a unit axis a (Rodrigues' formula)
    cdef double s, c1
    sin_cos(angle, &s, &c1)
    c1 = 1.0 - c1
    R[0] = 1.0 - c1 * (a[1] * a[1] + a[2] * a[2])
    R[4] = 1.0 - c1 * (a[0] * a[0] + a[2] * a[2])
    R[8] = 1.0 - c1 * (a[0] * a[0] + a[1] * a[1])
    R[1] = c1 * a[0] * a[1] - s * a[2]
    R[3] = c1 * a[0] * a[1] + s * a[2]
    R[2] = c1 * a[0] * a[2] + s * a[1]
    R[6] = c1 * a[0] * a[2] - s * a[1]
    R[5] = c1 * a[1] * a[2] - s * a[0]
    R[7] = c1 * a[1] * a[2] + s * a[0]


cdef inline void quat_to_rot(const double* q, double* R) noexcept nogil:
    # q = (w, x, y, z), normalised here so that R is orthonormal
    cdef double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    cdef double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n
    R[0] = 1.0 - 2.0 * (y * y + z * z)
    R[1] = 2.0 * (x * y - w * z)
    R[2] = 2.0 * (x * z + w * y)
    R[3] = 2.0 * (x * y + w * z)
    R[4] = 1.0 - 2.0 * (x * x + z * z)
    R[5] = 2.0 * (y * z - w * x)
    R[6] = 2.0 * (x * z - w * y)
    R[7] = 2.0 * (y * z + w * x)
    R[8] = 1.0 - 2.0 * (x * x + y * y)


cdef inline void se3_mul(const double* A, const double* B, double* out) noexcept nogil:
    # out = A B = (Ra Rb, Ra pb + pa); out may not alias A or B
    matmul3(A, B, out)
    matvec3(A, B + 9, out + 9)
    out[9] += A[9]
    out[10] += A[10]
    out[11] += A[11]


cdef inline void se3_inv(const double* T, double* out) noexcept nogil:
    # eq. (4): T^{-1} = (R^T, -R^T p)
    cdef int i, j
    for i in range(3):
        for j in range(3):
            out[3 * i + j] = T[3 * j + i]
    matTvec3(T, T + 9, out + 9)
    out[9] = -out[9]
    out[10] = -out[10]
    out[11] = -out[11]


cdef inline void Ad(const double* T, const double* V, double* out) noexcept nogil:
    # eq. (7): Ad_T V = (R w, p x R w + R v); out may not alias V
    cdef double t[3]
    matvec3(T, V, out)
    matvec3(T, V + 3, out + 3)
    cross3(T + 9, out, t)
    out[3] += t[0]
    out[4] += t[1]
    out[5] += t[2]


cdef inline void Ad_inv(const double* T, const double* V, double* out) noexcept nogil:
    # Ad_{T^{-1}} V = (R^T w, R^T (v - p x w)); out may not alias V
    cdef double t[3]
    cross3(T + 9, V, t)
    t[0] = V[3] - t[0]
    t[1] = V[4] - t[1]
    t[2] = V[5] - t[2]
    matTvec3(T, V, out)
    matTvec3(T, t, out + 3)


cdef inline void dAd_inv(const double* T, const double* F, double* out) noexcept nogil:
    # eq. (8): Ad*_{T^{-1}} F = (Ad_{T^{-1}})^T F = (R m + p x R f, R f)
    # (a wrench of the child frame expressed in the parent frame)
    cdef double t[3]
    matvec3(T, F, out)
    matvec3(T, F + 3, out + 3)
    cross3(T + 9, out + 3, t)
    out[0] += t[0]
    out[1] += t[1]
    out[2] += t[2]


cdef inline void ad(const double* V, const double* X, double* out) noexcept nogil:
    # eq. (27): ad_V X = (w x xw, v x xw + w x xv); out may not alias
    cdef double t[3]
    cross3(V, X, out)
    cross3(V + 3, X, out + 3)
    cross3(V, X + 3, t)
    out[3] += t[0]
    out[4] += t[1]
    out[5] += t[2]


cdef inline void dad(const double* V, const double* F, double* out) noexcept nogil:
    # eq. (29): ad*_V F = ad_V^T F = (m x w + f x v, f x w); out may not alias
    cdef double t[3]
    cross3(F, V, out)
    cross3(F + 3, V + 3, t)
    out[0] += t[0]
    out[1] += t[1]
    out[2] += t[2]
    cross3(F + 3, V, out + 3)


cdef inline void inertia_mul(const double* I, const double* V, double* out) noexcept nogil:
    # eq. (22): I V = (Ibar w + h x v, m v - h x w); I = (m, h, Ixx, Iyy, Izz, Ixy, Ixz, Iyz)
    cdef const double* h = I + 1
    cdef const double* w = V
    cdef const double* v = V + 3
    cdef double t[3]
    cdef double u[3]
    cross3(h, v, t)
    cross3(h, w, u)
    out[0] = I[4] * w[0] + I[7] * w[1] + I[8] * w[2] + t[0]
    out[1] = I[7] * w[0] + I[5] * w[1] + I[9] * w[2] + t[1]
    out[2] = I[8] * w[0] + I[9] * w[1] + I[6] * w[2] + t[2]
    out[3] = I[0] * v[0] - u[0]
    out[4] = I[0] * v[1] - u[1]
    out[5] = I[0] * v[2] - u[2]


cdef inline void inertia_to_mat(const double* I, double* M) noexcept nogil:
    # eq. (22) as a 6x6 row-major matrix
    cdef double m = I[0], hx = I[1], hy = I[2], hz = I[3]
    # the twelve structural zeros, written one by one (a 36-entry clearing
    # loop compiles to a slow string store in the ABA's inner loop)
    M[3] = 0.0; M[10] = 0.0; M[17] = 0.0; M[18] = 0.0; M[22] = 0.0; M[23] = 0.0
    M[25] = 0.0; M[27] = 0.0; M[29] = 0.0; M[32] = 0.0; M[33] = 0.0; M[34] = 0.0
    M[0] = I[4]; M[7] = I[5]; M[14] = I[6]
    M[1] = I[7]; M[6] = I[7]
    M[2] = I[8]; M[12] = I[8]
    M[8] = I[9]; M[13] = I[9]
    # upper-right [h], lower-left [h]^T
    M[4] = -hz; M[5] = hy; M[9] = hz; M[11] = -hx; M[15] = -hy; M[16] = hx
    M[19] = hz; M[20] = -hy; M[24] = -hz; M[26] = hx; M[30] = hy; M[31] = -hx
    M[21] = m; M[28] = m; M[35] = m


cdef inline void mat6_vec(const double* M, const double* x, double* out) noexcept nogil:
    # out = M x (6x6 row-major); out may not alias x
    cdef int i
    for i in range(6):
        out[i] = (M[6 * i] * x[0] + M[6 * i + 1] * x[1] + M[6 * i + 2] * x[2]
                  + M[6 * i + 3] * x[3] + M[6 * i + 4] * x[4] + M[6 * i + 5] * x[5])


cdef inline void Ad_inv_mat(const double* T, double* X) noexcept nogil:
    # the 6x6 matrix Ad_{T^{-1}} = [[R^T, 0], [-R^T [p], R^T]]
    cdef int i, j
    cdef double P[9]
    cdef double px = T[9], py = T[10], pz = T[11]
    # P = [p]
    P[0] = 0.0; P[1] = -pz; P[2] = py
    P[3] = pz; P[4] = 0.0; P[5] = -px
    P[6] = -py; P[7] = px; P[8] = 0.0
    for i in range(3):
        for j in range(3):
            X[6 * i + j] = T[3 * j + i]
            X[6 * i + j + 3] = 0.0
            X[6 * (i + 3) + j + 3] = T[3 * j + i]
            # -(R^T [p])_ij = -sum_k R_ki P_kj
            X[6 * (i + 3) + j] = -(T[i] * P[j] + T[3 + i] * P[3 + j] + T[6 + i] * P[6 + j])


cdef inline void _sandwich3(const double* R, const double* P, int off, double* out,
                            bint sym) noexcept nogil:
    # out = R M R^T for the 3x3 block M of the 6x6 row-major P starting at
    # P[off]; ``sym`` (M symmetric): only out[3i+j], j >= i, is written
    cdef double t[9]
    cdef int i, j
    for i in range(3):
        for j in range(3):
            t[3 * i + j] = R[3 * i] * P[off + j] + R[3 * i + 1] * P[off + 6 + j] + R[3 * i + 2] * P[off + 12 + j]
    for i in range(3):
        for j in range(i if sym else 0, 3):
            out[3 * i + j] = t[3 * i] * R[3 * j] + t[3 * i + 1] * R[3 * j + 1] + t[3 * i + 2] * R[3 * j + 2]


cdef inline void _put(double* out, int k, double v, bint add) noexcept nogil:
    if add:
        out[k] += v
    else:
        out[k] = v


cdef inline void _congruence_Ad_inv(const double* T, const double* P, double* out, bint add) noexcept nogil:
    """out (=, or += when ``add``) Ad*_{T^{-1}} P Ad_{T^{-1}} for a
    symmetric 6x6 P (eq. 49).

    With T^{-1} = Rot(R^T) Trans(-p), rotate the blocks of
    P = [[A, B], [B^T, C]] to A = R A R^T, B = R B R^T, C = R C R^T, then
    shift by p (Ad_{Trans(-p)} = [[1, 0], [-[p], 1]]):
        A' = A + Q + Q^T + [p] C [p]^T  with  Q = [p] B^T,
        B' = B + [p] C,   C' = C.
    About a third of the flops of the two dense 6x6 products; each of the
    21 distinct entries is computed once and put in both symmetric places,
    so the result is exactly symmetric."""
    cdef double A[9]
    cdef double B[9]
    cdef double C[9]
    cdef double PC[9]
    cdef double Q[9]
    cdef double w[3]
    cdef double px = T[9], py = T[10], pz = T[11]
    cdef double v
    cdef int i, j
    _sandwich3(T, P, 0, A, True)
    _sandwich3(T, P, 3, B, False)
    _sandwich3(T, P, 21, C, True)
    C[3] = C[1]; C[6] = C[2]; C[7] = C[5]
    for j in range(3):
        # column j of PC = [p] C and of Q = [p] B^T (row j of B)
        PC[j] = -pz * C[3 + j] + py * C[6 + j]
        PC[3 + j] = pz * C[j] - px * C[6 + j]
        PC[6 + j] = -py * C[j] + px * C[3 + j]
        Q[j] = -pz * B[3 * j + 1] + py * B[3 * j + 2]
        Q[3 + j] = pz * B[3 * j] - px * B[3 * j + 2]
        Q[6 + j] = -py * B[3 * j] + px * B[3 * j + 1]
    for i in range(3):
        # row i of [p] C [p]^T:  ([p] C [p]^T)_ij = sum_k PC_ik [p]_jk
        w[0] = -pz * PC[3 * i + 1] + py * PC[3 * i + 2]
        w[1] = pz * PC[3 * i] - px * PC[3 * i + 2]
        w[2] = -py * PC[3 * i] + px * PC[3 * i + 1]
        for j in range(i, 3):
            v = A[3 * i + j] + Q[3 * i + j] + Q[3 * j + i] + w[j]
            _put(out, 6 * i + j, v, add)
            if j != i:
                _put(out, 6 * j + i, v, add)
            v = C[3 * i + j]
            _put(out, 6 * (3 + i) + 3 + j, v, add)
            if j != i:
                _put(out, 6 * (3 + j) + 3 + i, v, add)
        for j in range(3):
            v = B[3 * i + j] + PC[3 * i + j]
            _put(out, 6 * i + 3 + j, v, add)
            _put(out, 6 * (3 + j) + i, v, add)


cdef inline void congruence_Ad_inv(const double* T, const double* P, double* out) noexcept nogil:
    # out = Ad*_{T^{-1}} P Ad_{T^{-1}}  (see _congruence_Ad_inv)
    _congruence_Ad_inv(T, P, out, False)


cdef inline void congruence_Ad_inv_add(const double* T, const double* P, double* out) noexcept nogil:
    # out += Ad*_{T^{-1}} P Ad_{T^{-1}}: eq. (49)'s sum over children
    _congruence_Ad_inv(T, P, out, True)


cdef inline void congruence6_add(const double* A, const double* P, double* out) noexcept nogil:
    """out += A^T P A for a general 6 x 6 ``A`` and symmetric ``P``
    (row-major): ``B = P A``, then the lower triangle of ``A^T B``,
    mirrored."""
    cdef double B[36]
    cdef double x
    cdef int a, b, c
    for c in range(6):
        for b in range(6):
            x = 0.0
            for a in range(6):
                x += P[6 * c + a] * A[6 * a + b]
            B[6 * c + b] = x
    for a in range(6):
        for b in range(a + 1):
            x = 0.0
            for c in range(6):
                x += A[6 * c + a] * B[6 * c + b]
            out[6 * a + b] += x
            if b != a:
                out[6 * b + a] += x


cdef inline void congruence_Ad_inv_ref(const double* T, const double* P, double* out) noexcept nogil:
    # out = X^T P X with X = Ad_{T^{-1}} as explicit 6x6 products (reference)
    cdef double X[36]
    cdef int i
    Ad_inv_mat(T, X)
    for i in range(36):
        out[i] = 0.0
    congruence6_add(X, P, out)


cdef inline void inertia_to_parent(const double* T, const double* I, double* out) noexcept nogil:
    """Rigid-body inertia (m, h, Ibar) of a child frame re-expressed in the
    parent frame, T = T_{parent,child} = (R, p) (eq. 21 in 10 parameters):
        h' = R h + m p
        Ibar' = R Ibar R^T + m [p]^T [p] + [R h]^T [p] + [p]^T [R h]
    with [a]^T [b] = (a . b) 1 - b a^T."""
    cdef double m = I[0]
    cdef double Ib[9]
    cdef double RI[9]
    cdef double Rh[3]
    cdef double px = T[9], py = T[10], pz = T[11]
    cdef double pp, hp
    cdef int i, j
    Ib[0] = I[4]; Ib[4] = I[5]; Ib[8] = I[6]
    Ib[1] = I[7]; Ib[3] = I[7]
    Ib[2] = I[8]; Ib[6] = I[8]
    Ib[5] = I[9]; Ib[7] = I[9]
    matvec3(T, I + 1, Rh)
    for i in range(3):
        for j in range(3):
            RI[3 * i + j] = T[3 * i] * Ib[j] + T[3 * i + 1] * Ib[3 + j] + T[3 * i + 2] * Ib[6 + j]
    for i in range(3):
        for j in range(3):
            Ib[3 * i + j] = RI[3 * i] * T[3 * j] + RI[3 * i + 1] * T[3 * j + 1] + RI[3 * i + 2] * T[3 * j + 2]
    pp = px * px + py * py + pz * pz
    hp = Rh[0] * px + Rh[1] * py + Rh[2] * pz
    out[0] = m
    out[1] = Rh[0] + m * px
    out[2] = Rh[1] + m * py
    out[3] = Rh[2] + m * pz
    out[4] = Ib[0] + m * (pp - px * px) + 2.0 * (hp - Rh[0] * px)
    out[5] = Ib[4] + m * (pp - py * py) + 2.0 * (hp - Rh[1] * py)
    out[6] = Ib[8] + m * (pp - pz * pz) + 2.0 * (hp - Rh[2] * pz)
    out[7] = Ib[1] - m * px * py - (px * Rh[1] + Rh[0] * py)
    out[8] = Ib[2] - m * px * pz - (px * Rh[2] + Rh[0] * pz)
    out[9] = Ib[5] - m * py * pz - (py * Rh[2] + Rh[1] * pz)

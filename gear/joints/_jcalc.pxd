# cython: language_level=3
"""The one joint switch (jcalc) shared by every kernel.

For joint kind ``kind`` with parameters ``prm`` (double[10]) and
coordinates ``q`` it gives

* ``J(q)``: the joint's motion as an SE(3) element (double[12], see
  ``_spatial.pxd``); the body pose relative to its parent is
  ``T_{lambda(i),i} = placement_i J_i(q_i)`` (Kim Sec. 2.1);
* ``S(q) = J^{-1} dJ/dq`` (Kim's joint Jacobian in the child frame, Table 2
  symbol list), stored column-major: column ``k`` is ``S[6k:6k+6]``;
* ``dS(q, dq)``, the time derivative of ``S`` (Kim eq. 41), same layout.

Parameter layout ``prm``:
  REVOLUTE, PRISMATIC, CYLINDRICAL: unit axis a = prm[0:3]
  HELICAL: a = prm[0:3], pitch (translation per radian) = prm[9]
  UNIVERSAL: a1 = prm[0:3], a2 = prm[3:6]
  PLANAR: in-plane unit axes e1 = prm[0:3], e2 = prm[3:6], normal n = prm[6:9]
Adding a joint kind is one new case in each function below.
"""
from libc.math cimport sin, cos
from gear.spatial._spatial cimport rodrigues, quat_to_rot, cross3, matTvec3, se3_mul, sin_cos
from gear.spatial._lanes cimport LANES, l_sin_cos
from gear.spatial._v4 cimport v4, splat

cdef enum:
    J_FIXED = 0
    J_REVOLUTE = 1
    J_PRISMATIC = 2
    J_HELICAL = 3
    J_CYLINDRICAL = 4
    J_UNIVERSAL = 5
    J_PLANAR = 6
    J_SPHERICAL = 7
    J_FREE = 8


cdef inline void _zero(double* x, int n) noexcept nogil:
    cdef int k
    for k in range(n):
        x[k] = 0.0


cdef inline void _identity_se3(double* T) noexcept nogil:
    _zero(T, 12)
    T[0] = 1.0
    T[4] = 1.0
    T[8] = 1.0


cdef inline void jcalc(int kind, const double* prm, const double* q,
                       double* J, double* S) noexcept nogil:
    """Joint transform ``J(q)`` and motion subspace ``S(q)``."""
    cdef double R2[9]
    cdef int k
    if kind == J_FIXED:
        _identity_se3(J)
    elif kind == J_REVOLUTE:
        rodrigues(prm, q[0], J)
        J[9] = 0.0; J[10] = 0.0; J[11] = 0.0
        S[0] = prm[0]; S[1] = prm[1]; S[2] = prm[2]
        S[3] = 0.0; S[4] = 0.0; S[5] = 0.0
    elif kind == J_PRISMATIC:
        _identity_se3(J)
        J[9] = prm[0] * q[0]; J[10] = prm[1] * q[0]; J[11] = prm[2] * q[0]
        S[0] = 0.0; S[1] = 0.0; S[2] = 0.0
        S[3] = prm[0]; S[4] = prm[1]; S[5] = prm[2]
    elif kind == J_HELICAL:
        # J = (exp([a] q), pitch q a);  S = (a, pitch a) since R^T a = a
        rodrigues(prm, q[0], J)
        J[9] = prm[9] * q[0] * prm[0]
        J[10] = prm[9] * q[0] * prm[1]
        J[11] = prm[9] * q[0] * prm[2]
        S[0] = prm[0]; S[1] = prm[1]; S[2] = prm[2]
        S[3] = prm[9] * prm[0]; S[4] = prm[9] * prm[1]; S[5] = prm[9] * prm[2]
    elif kind == J_CYLINDRICAL:
        # J = (exp([a] q0), q1 a)
        rodrigues(prm, q[0], J)
        J[9] = q[1] * prm[0]; J[10] = q[1] * prm[1]; J[11] = q[1] * prm[2]
        _zero(S, 12)
        S[0] = prm[0]; S[1] = prm[1]; S[2] = prm[2]
        S[9] = prm[0]; S[10] = prm[1]; S[11] = prm[2]
    elif kind == J_UNIVERSAL:
        # J = (exp([a1] q0) exp([a2] q1), 0);  S = [(R2^T a1, 0), (a2, 0)]
        rodrigues(prm, q[0], J)
        rodrigues(prm + 3, q[1], R2)
        _mul3_inplace_right(J, R2)
        J[9] = 0.0; J[10] = 0.0; J[11] = 0.0
        _zero(S, 12)
        matTvec3(R2, prm, S)
        S[6] = prm[3]; S[7] = prm[4]; S[8] = prm[5]
    elif kind == J_PLANAR:
        # J = (exp([n] q2), q0 e1 + q1 e2);
        # S = [(0, R^T e1), (0, R^T e2), (n, 0)]
        rodrigues(prm + 6, q[2], J)
        for k in range(3):
            J[9 + k] = q[0] * prm[k] + q[1] * prm[3 + k]
        _zero(S, 18)
        matTvec3(J, prm, S + 3)
        matTvec3(J, prm + 3, S + 9)
        S[12] = prm[6]; S[13] = prm[7]; S[14] = prm[8]
    elif kind == J_SPHERICAL:
        # q = unit quaternion (w, x, y, z); dq = body angular velocity
        quat_to_rot(q, J)
        J[9] = 0.0; J[10] = 0.0; J[11] = 0.0
        _zero(S, 18)
        S[0] = 1.0; S[7] = 1.0; S[14] = 1.0
    elif kind == J_FREE:
        # q = (p, quaternion); dq = body twist (w, v);  S = identity
        quat_to_rot(q + 3, J)
        J[9] = q[0]; J[10] = q[1]; J[11] = q[2]
        _zero(S, 36)
        for k in range(6):
            S[7 * k] = 1.0


cdef inline bint revolute_z(int kind, const double* prm) noexcept nogil:
    """A revolute joint about its own z axis: S = (0, 0, 1, 0, 0, 0), which
    the kernels may use to skip products with S."""
    return kind == J_REVOLUTE and prm[0] == 0.0 and prm[1] == 0.0 and prm[2] == 1.0


cdef inline void jcalc_placed(int kind, const double* prm, const double* q, const double* X,
                              double* T, double* S) noexcept nogil:
    """``T = X J(q)`` (the body pose in its parent, X the joint placement)
    and ``S(q)``, as ``jcalc`` followed by ``se3_mul``.  A revolute joint
    about its frame's z axis -- the URDF and DH convention, most joints of
    real arms -- is written out: ``J = Rot_z(q)`` only mixes X's first two
    columns, 12 flops for the 45 of Rodrigues' formula and a 3x3 product."""
    cdef double J[12]
    cdef double c, s, x0, x1
    cdef int r
    if revolute_z(kind, prm):
        sin_cos(q[0], &s, &c)
        for r in range(3):
            x0 = X[3 * r]
            x1 = X[3 * r + 1]
            T[3 * r] = x0 * c + x1 * s
            T[3 * r + 1] = x1 * c - x0 * s
            T[3 * r + 2] = X[3 * r + 2]
        T[9] = X[9]; T[10] = X[10]; T[11] = X[11]
        S[0] = 0.0; S[1] = 0.0; S[2] = 1.0
        S[3] = 0.0; S[4] = 0.0; S[5] = 0.0
        return
    jcalc(kind, prm, q, J, S)
    se3_mul(X, J, T)


cdef inline bint jcalc_lanes_kind(int kind) noexcept nogil:
    """The kinds ``jcalc_placed_lanes`` computes on all lanes at once: one
    dof and a constant S (the others go lane by lane through
    ``jcalc_placed``)."""
    return kind == J_REVOLUTE or kind == J_PRISMATIC


cdef inline void jcalc_placed_lanes(int kind, const double* prm, v4 x,
                                    const double* X, double* T, double* S) noexcept nogil:
    """``jcalc_placed`` on ``LANES`` states at once for the kinds of
    ``jcalc_lanes_kind``: ``x`` the joint coordinate of each lane, ``T``
    in the lane layout of ``gear/spatial/_lanes.pxd`` (12 components), ``S``
    the constant 6-vector shared by the lanes.  The same arithmetic as
    ``jcalc_placed``, term for term (``sin`` and ``cos`` by ``l_sin_cos``)."""
    cdef int r
    cdef v4* T4 = <v4*> T
    cdef v4 c, s, c1
    cdef v4 R[9]
    if kind == J_PRISMATIC:
        # T = X (1, a q):  R = X_R, p = X_R a q + X_p
        for r in range(9):
            T4[r] = splat(X[r])
        for r in range(3):
            T4[9 + r] = (X[3 * r] * (prm[0] * x) + X[3 * r + 1] * (prm[1] * x)
                         + X[3 * r + 2] * (prm[2] * x)) + X[9 + r]
        S[0] = 0.0; S[1] = 0.0; S[2] = 0.0
        S[3] = prm[0]; S[4] = prm[1]; S[5] = prm[2]
        return
    l_sin_cos(x, &s, &c)
    S[0] = prm[0]; S[1] = prm[1]; S[2] = prm[2]
    S[3] = 0.0; S[4] = 0.0; S[5] = 0.0
    for r in range(3):
        T4[9 + r] = splat(X[9 + r])
    if revolute_z(kind, prm):
        for r in range(3):
            T4[3 * r] = X[3 * r] * c + X[3 * r + 1] * s
            T4[3 * r + 1] = X[3 * r + 1] * c - X[3 * r] * s
            T4[3 * r + 2] = splat(X[3 * r + 2])
        return
    # Rodrigues' formula (_spatial.rodrigues), then R = X_R J_R (se3_mul)
    c1 = 1.0 - c
    R[0] = 1.0 - c1 * (prm[1] * prm[1] + prm[2] * prm[2])
    R[4] = 1.0 - c1 * (prm[0] * prm[0] + prm[2] * prm[2])
    R[8] = 1.0 - c1 * (prm[0] * prm[0] + prm[1] * prm[1])
    R[1] = c1 * prm[0] * prm[1] - s * prm[2]
    R[3] = c1 * prm[0] * prm[1] + s * prm[2]
    R[2] = c1 * prm[0] * prm[2] + s * prm[1]
    R[6] = c1 * prm[0] * prm[2] - s * prm[1]
    R[5] = c1 * prm[1] * prm[2] - s * prm[0]
    R[7] = c1 * prm[1] * prm[2] + s * prm[0]
    for r in range(3):
        T4[3 * r] = X[3 * r] * R[0] + X[3 * r + 1] * R[3] + X[3 * r + 2] * R[6]
        T4[3 * r + 1] = X[3 * r] * R[1] + X[3 * r + 1] * R[4] + X[3 * r + 2] * R[7]
        T4[3 * r + 2] = X[3 * r] * R[2] + X[3 * r + 1] * R[5] + X[3 * r + 2] * R[8]


cdef inline void _mul3_inplace_right(double* A, const double* B) noexcept nogil:
    # A <- A B for 3x3 row-major
    cdef double a0, a1, a2
    cdef int i
    for i in range(3):
        a0 = A[3 * i]; a1 = A[3 * i + 1]; a2 = A[3 * i + 2]
        A[3 * i] = a0 * B[0] + a1 * B[3] + a2 * B[6]
        A[3 * i + 1] = a0 * B[1] + a1 * B[4] + a2 * B[7]
        A[3 * i + 2] = a0 * B[2] + a1 * B[5] + a2 * B[8]


cdef inline void jcalc_dS(int kind, const double* prm, const double* q,
                          const double* dq, const double* S, double* dS) noexcept nogil:
    """Time derivative of S (columns as in jcalc); ``S`` is jcalc's output.

    Only the universal and planar joints have a configuration-dependent S
    in their own coordinates; every other kind has dS = 0.
    """
    cdef int n = jcalc_nv(kind)
    _zero(dS, 6 * n)
    if kind == J_UNIVERSAL:
        # d/dt (R2^T a1) = (R2^T a1) x a2 dq1
        cross3(S, prm + 3, dS)
        dS[0] *= dq[1]; dS[1] *= dq[1]; dS[2] *= dq[1]
    elif kind == J_PLANAR:
        # d/dt (R^T e) = (R^T e) x n dq2
        cross3(S + 3, prm + 6, dS + 3)
        cross3(S + 9, prm + 6, dS + 9)
        for n in range(3):
            dS[3 + n] *= dq[2]
            dS[9 + n] *= dq[2]


cdef inline int jcalc_nv(int kind) noexcept nogil:
    if kind == J_FIXED:
        return 0
    elif kind == J_REVOLUTE or kind == J_PRISMATIC or kind == J_HELICAL:
        return 1
    elif kind == J_CYLINDRICAL or kind == J_UNIVERSAL:
        return 2
    elif kind == J_PLANAR or kind == J_SPHERICAL:
        return 3
    return 6


cdef inline bint jcalc_has_dS(int kind) noexcept nogil:
    return kind == J_UNIVERSAL or kind == J_PLANAR


cdef inline void jcalc_dSdq(int kind, const double* prm, const double* S, int c,
                            double* out) noexcept nogil:
    """dS/dq_c (6 x nv, column-major) in the joint's tangent coordinates.

    Zero except for the universal and planar joints; there S depends on q and
    dS(q, dq) = sum_c dS/dq_c dq_c (so this is jcalc_dS with dq = e_c)."""
    cdef double e[6]
    cdef int k
    for k in range(6):
        e[k] = 0.0
    e[c] = 1.0
    jcalc_dS(kind, prm, NULL, e, S, out)


cdef inline void jcalc_ddSdq(int kind, const double* prm, const double* S, int c,
                             const double* dq, double* out) noexcept nogil:
    """d(dS(q, dq))/dq_c (6 x nv, column-major): second derivatives of S.

    universal: dS col0 = (R2^T a1) x a2 dq1  ->  d/dq1 = ((R2^T a1) x a2) x a2 dq1
    planar:    dS col0,1 = (R^T e) x n dq2   ->  d/dq2 = ((R^T e) x n) x n dq2
    """
    cdef int n = jcalc_nv(kind)
    cdef double t[3]
    cdef int k
    _zero(out, 6 * n)
    if kind == J_UNIVERSAL and c == 1:
        cross3(S, prm + 3, t)
        cross3(t, prm + 3, out)
        for k in range(3):
            out[k] *= dq[1]
    elif kind == J_PLANAR and c == 2:
        cross3(S + 3, prm + 6, t)
        cross3(t, prm + 6, out + 3)
        cross3(S + 9, prm + 6, t)
        cross3(t, prm + 6, out + 9)
        for k in range(3):
            out[3 + k] *= dq[2]
            out[9 + k] *= dq[2]

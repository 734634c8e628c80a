# cython: language_level=3
"""A joint's coordinates read off its relative pose ``Y = placement^-1
T_p^-1 T_i`` (R row-major 9, then y 3), as
:meth:`gear.MaximalModel.to_reduced` reads them: the read-back of maximal
states (``_readback.pyx``) and the joint couplers' rows of the native
maximal steps (``_native.pyx``).

* revolute, helical, cylindrical: the angle of the rotation about the unit
  axis ``a`` nearest to ``R`` (Frobenius), ``atan2(a . vee(R - R^T), tr R -
  a^T R a)``; a helical joint takes the turn its translation ``y . a /
  pitch`` says; a cylindrical joint adds ``y . a``;
* prismatic ``y . a``; planar ``y . e1``, ``y . e2`` and the angle about the
  normal;
* universal: ``q1`` turns ``a2`` nearest to ``R a2`` about ``a1``, ``q2``
  the angle of ``exp(q1 a1)^T R`` about ``a2``;
* spherical and free: the unit quaternion of ``R`` (``w >= 0``; the body
  rotations of a maximal run are orthonormal to rounding, where this is
  the polar factor ``to_reduced`` takes), a free joint's translation ``y``.
"""
from libc.math cimport atan2, floor, sqrt, sin, cos, M_PI
from gear.spatial._spatial cimport cross3, matvec3
from gear.constraints._rows cimport dot3

cdef enum:
    FIXED = 0
    REVOLUTE = 1
    PRISMATIC = 2
    HELICAL = 3
    CYLINDRICAL = 4
    UNIVERSAL = 5
    PLANAR = 6
    SPHERICAL = 7
    FREE = 8


cdef inline double angle_about(const double* R, const double* a) noexcept nogil:
    cdef double vee[3]
    cdef double Ra[3]
    vee[0] = R[7] - R[5]
    vee[1] = R[2] - R[6]
    vee[2] = R[3] - R[1]
    matvec3(R, a, Ra)
    return atan2(dot3(vee, a), R[0] + R[4] + R[8] - dot3(a, Ra))


cdef inline void rot_quat(const double* R, double* q) noexcept nogil:
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation (Shepperd's
    method, as ``gear.spatial.rot_to_quat``)."""
    cdef double tr = R[0] + R[4] + R[8], s, n
    cdef int k = 0
    cdef double best = tr
    if R[0] > best:
        k, best = 1, R[0]
    if R[4] > best:
        k, best = 2, R[4]
    if R[8] > best:
        k = 3
    if k == 0:
        s = 2.0 * sqrt(1.0 + tr)
        q[0], q[1], q[2], q[3] = 0.25 * s, (R[7] - R[5]) / s, (R[2] - R[6]) / s, (R[3] - R[1]) / s
    elif k == 1:
        s = 2.0 * sqrt(1.0 + R[0] - R[4] - R[8])
        q[0], q[1], q[2], q[3] = (R[7] - R[5]) / s, 0.25 * s, (R[1] + R[3]) / s, (R[2] + R[6]) / s
    elif k == 2:
        s = 2.0 * sqrt(1.0 - R[0] + R[4] - R[8])
        q[0], q[1], q[2], q[3] = (R[2] - R[6]) / s, (R[1] + R[3]) / s, 0.25 * s, (R[5] + R[7]) / s
    else:
        s = 2.0 * sqrt(1.0 - R[0] - R[4] + R[8])
        q[0], q[1], q[2], q[3] = (R[3] - R[1]) / s, (R[2] + R[6]) / s, (R[5] + R[7]) / s, 0.25 * s
    if q[0] < 0.0:
        q[0], q[1], q[2], q[3] = -q[0], -q[1], -q[2], -q[3]
    n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    q[0] /= n
    q[1] /= n
    q[2] /= n
    q[3] /= n


cdef inline double round_even(double x) noexcept nogil:
    # numpy.round: half to even
    cdef double f = floor(x), d = x - f
    if d > 0.5:
        return f + 1.0
    if d < 0.5:
        return f
    return f if (<long> f) % 2 == 0 else f + 1.0


cdef inline void joint_q(int kind, const double* ax, double pitch, const double* Y,
                          double* q) noexcept nogil:
    """The joint's coordinates from ``Y`` (R 9, y 3); ``ax`` (9): the axis
    (or axis1 / e1), axis2 (or e2), the planar normal."""
    cdef const double* R = Y
    cdef const double* y = Y + 9
    cdef double th, s, c, co
    cdef double t[3]
    cdef double u[3]
    cdef double perp[3]
    cdef double R1[9]
    cdef double M[9]
    cdef int r, k
    if kind == REVOLUTE or kind == HELICAL or kind == CYLINDRICAL:
        th = angle_about(R, ax)
        if kind == HELICAL and pitch != 0.0:
            s = dot3(y, ax) / pitch
            th = th + (2.0 * M_PI) * round_even((s - th) / (2.0 * M_PI))
        q[0] = th
        if kind == CYLINDRICAL:
            q[1] = dot3(y, ax)
    elif kind == PRISMATIC:
        q[0] = dot3(y, ax)
    elif kind == UNIVERSAL:
        matvec3(R, ax + 3, t)                                  # R a2
        co = dot3(ax, ax + 3)
        for r in range(3):
            perp[r] = ax[3 + r] - ax[r] * co
        cross3(perp, t, u)
        th = atan2(dot3(u, ax), dot3(t, perp))
        q[0] = th
        # R1 = exp(th a1) (Rodrigues), then the angle of R1^T R about a2
        s, c = sin(th), cos(th)
        for r in range(3):
            for k in range(3):
                R1[3 * r + k] = (1.0 - c) * ax[r] * ax[k] + (c if r == k else 0.0)
        R1[1] -= s * ax[2]
        R1[2] += s * ax[1]
        R1[3] += s * ax[2]
        R1[5] -= s * ax[0]
        R1[6] -= s * ax[1]
        R1[7] += s * ax[0]
        for r in range(3):
            for k in range(3):
                M[3 * r + k] = R1[r] * R[k] + R1[3 + r] * R[3 + k] + R1[6 + r] * R[6 + k]
        q[1] = angle_about(M, ax + 3)
    elif kind == PLANAR:
        q[0] = dot3(y, ax)
        q[1] = dot3(y, ax + 3)
        q[2] = angle_about(R, ax + 6)
    elif kind == SPHERICAL:
        rot_quat(R, q)
    elif kind == FREE:
        q[0], q[1], q[2] = y[0], y[1], y[2]
        rot_quat(R, q + 3)

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Joint coordinates read back from maximal states, natively: the twin of
:meth:`gear.MaximalModel.to_reduced` (Ruan, "Articulated rigid body
systems", Sec. 3: a maximal state has no joint coordinates; these are the
nearest ones), frame by frame in parallel without the GIL.

Per body i with parent p (the world for a root): the relative pose ``X =
T_p^{-1} T_i`` and the joint's ``Y = placement^{-1} X`` (rotation ``R``,
translation ``y``).  Each kind's coordinates are the least-squares fit of
``to_reduced``:

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

Rates: the relative twist ``eta = V_i - Ad_{X^{-1}} V_p`` projected on the
joint's motion subspace by least squares (``S^+ eta``), in closed form for
each kind.
"""
from cython.parallel cimport prange
from libc.math cimport atan2, floor, sqrt, sin, cos
from gear.spatial._spatial cimport Ad_inv, cross3, matvec3, matTvec3
from gear.constraints._rows cimport dot3

import numpy as np

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

cdef double TWO_PI = 6.283185307179586


cdef inline double _angle_about(const double* R, const double* a) noexcept nogil:
    cdef double vee[3]
    cdef double Ra[3]
    vee[0] = R[7] - R[5]
    vee[1] = R[2] - R[6]
    vee[2] = R[3] - R[1]
    matvec3(R, a, Ra)
    return atan2(dot3(vee, a), R[0] + R[4] + R[8] - dot3(a, Ra))


cdef inline void _quat(const double* R, double* q) noexcept nogil:
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


cdef inline void _relative(const double* Tp, const double* Ti, const double* Pinv, double* X,
                           double* Y) noexcept nogil:
    """``X = T_p^{-1} T_i`` and ``Y = placement^{-1} X`` as (R row-major 9,
    p 3); ``Tp`` NULL: the world.  ``T`` are (4, 4) row-major."""
    cdef int r, c
    cdef double d[3]
    if Tp == NULL:
        for r in range(3):
            for c in range(3):
                X[3 * r + c] = Ti[4 * r + c]
            X[9 + r] = Ti[4 * r + 3]
    else:
        for r in range(3):
            d[r] = Ti[4 * r + 3] - Tp[4 * r + 3]
        for r in range(3):
            for c in range(3):
                X[3 * r + c] = Tp[r] * Ti[c] + Tp[4 + r] * Ti[4 + c] + Tp[8 + r] * Ti[8 + c]
            X[9 + r] = Tp[r] * d[0] + Tp[4 + r] * d[1] + Tp[8 + r] * d[2]
    for r in range(3):
        for c in range(3):
            Y[3 * r + c] = Pinv[3 * r] * X[c] + Pinv[3 * r + 1] * X[3 + c] + Pinv[3 * r + 2] * X[6 + c]
        Y[9 + r] = Pinv[3 * r] * X[9] + Pinv[3 * r + 1] * X[10] + Pinv[3 * r + 2] * X[11] + Pinv[9 + r]


cdef inline double _round(double x) noexcept nogil:
    # numpy.round: half to even
    cdef double f = floor(x), d = x - f
    if d > 0.5:
        return f + 1.0
    if d < 0.5:
        return f
    return f if (<long> f) % 2 == 0 else f + 1.0


cdef inline void _joint_q(int kind, const double* ax, double pitch, const double* Y,
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
        th = _angle_about(R, ax)
        if kind == HELICAL and pitch != 0.0:
            s = dot3(y, ax) / pitch
            th = th + TWO_PI * _round((s - th) / TWO_PI)
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
        q[1] = _angle_about(M, ax + 3)
    elif kind == PLANAR:
        q[0] = dot3(y, ax)
        q[1] = dot3(y, ax + 3)
        q[2] = _angle_about(R, ax + 6)
    elif kind == SPHERICAL:
        _quat(R, q)
    elif kind == FREE:
        q[0], q[1], q[2] = y[0], y[1], y[2]
        _quat(R, q + 3)


cdef inline void _joint_dq(int kind, const double* ax, double pitch, const double* Y, const double* eta,
                           double* v) noexcept nogil:
    """``S^+ eta`` for the joint's motion subspace S (child coordinates)."""
    cdef double b1[3]
    cdef double b2[3]
    cdef double c, r1, r2, det
    cdef int r
    if kind == REVOLUTE:
        v[0] = dot3(ax, eta)
    elif kind == PRISMATIC:
        v[0] = dot3(ax, eta + 3)
    elif kind == HELICAL:
        v[0] = (dot3(ax, eta) + pitch * dot3(ax, eta + 3)) / (1.0 + pitch * pitch)
    elif kind == CYLINDRICAL:
        v[0] = dot3(ax, eta)
        v[1] = dot3(ax, eta + 3)
    elif kind == UNIVERSAL:
        matTvec3(Y, ax, b1)                                    # R^T a1
        c = dot3(b1, ax + 3)
        r1 = dot3(b1, eta)
        r2 = dot3(ax + 3, eta)
        det = 1.0 - c * c
        v[0] = (r1 - c * r2) / det
        v[1] = (r2 - c * r1) / det
    elif kind == PLANAR:
        matTvec3(Y, ax, b1)
        matTvec3(Y, ax + 3, b2)
        v[0] = dot3(b1, eta + 3)
        v[1] = dot3(b2, eta + 3)
        v[2] = dot3(ax + 6, eta)
    elif kind == SPHERICAL:
        for r in range(3):
            v[r] = eta[r]
    elif kind == FREE:
        for r in range(6):
            v[r] = eta[r]


cdef void _frame(const double* P, const double* V, int nb, const int* kind, const int* parent,
                 const int* iq, const int* iv, const double* Pinv, const double* axes,
                 const double* pitch, double* q, double* dq) noexcept nogil:
    # one frame: P (nb, 4, 4), V (nb, 6) or NULL, into q (nq,), dq (nv,)
    cdef int i, p, r
    cdef double X[12]
    cdef double Y[12]
    cdef double eta[6]
    cdef const double* Pp
    for i in range(nb):
        if kind[i] == FIXED:
            continue
        p = parent[i]
        Pp = NULL
        if p >= 0:
            Pp = P + 16 * p
        _relative(Pp, P + 16 * i, Pinv + 12 * i, X, Y)
        _joint_q(kind[i], axes + 9 * i, pitch[i], Y, q + iq[i])
        if V == NULL:
            continue
        if p >= 0:
            Ad_inv(X, V + 6 * p, eta)
            for r in range(6):
                eta[r] = V[6 * i + r] - eta[r]
        else:
            for r in range(6):
                eta[r] = V[6 * i + r]
        _joint_dq(kind[i], axes + 9 * i, pitch[i], Y, eta, dq + iv[i])


def to_reduced(const double[:, :, :, ::1] P, const double[:, :, ::1] V, const int[::1] kind,
               const int[::1] parent, const int[::1] iq, const int[::1] iv, const double[:, ::1] Pinv,
               const double[:, ::1] axes, const double[::1] pitch, double[:, ::1] q, double[:, ::1] dq,
               int nthreads):
    """Joint coordinates ``q`` (M, nq) and, if ``V`` is not None, rates
    ``dq`` (M, nv) of M maximal states ``P`` (M, nb, 4, 4), ``V`` (M, nb,
    6).  Per body: joint ``kind``, ``parent`` (-1: the world), first q / v
    index, the placement's inverse ``Pinv`` (R 9, p 3), ``axes`` (9) and
    ``pitch``.  Frames in parallel over ``nthreads`` threads."""
    cdef Py_ssize_t M = P.shape[0], f
    cdef int nb = P.shape[1], nq = q.shape[1], nv = 0 if dq is None else dq.shape[1]
    cdef const double* Vp = NULL
    cdef double* dqp = NULL
    cdef const double* Vf
    cdef double* dqf
    cdef double* qf
    if V is not None:
        Vp = &V[0, 0, 0]
    if dq is not None:
        dqp = &dq[0, 0]
    if M == 0 or nb == 0:
        return
    # (ifs, not conditional expressions: those make Cython's temporaries drop const)
    for f in prange(M, nogil=True, num_threads=max(1, nthreads), schedule='static'):
        Vf = NULL
        dqf = NULL
        qf = NULL
        if Vp != NULL:
            Vf = Vp + f * 6 * nb
        if dqp != NULL:
            dqf = dqp + f * nv
        if nq > 0:
            qf = &q[f, 0]
        _frame(&P[f, 0, 0, 0], Vf, nb, &kind[0], &parent[0], &iq[0], &iv[0], &Pinv[0, 0], &axes[0, 0],
               &pitch[0], qf, dqf)

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Joint coordinates read back from maximal states, natively: the twin of
:meth:`gear.MaximalModel.to_reduced` (Ruan, "Articulated rigid body
systems", Sec. 3: a maximal state has no joint coordinates; these are the
nearest ones), frame by frame in parallel without the GIL.

Per body i with parent p (the world for a root): the relative pose ``X =
T_p^{-1} T_i`` and the joint's ``Y = placement^{-1} X`` (rotation ``R``,
translation ``y``).  Each kind's coordinates are the least-squares fit of
``to_reduced`` (``joint_q``, ``gear/maximal/_coords.pxd``, which the joint
couplers' rows of the native maximal steps read too).

Rates: the relative twist ``eta = V_i - Ad_{X^{-1}} V_p`` projected on the
joint's motion subspace by least squares (``S^+ eta``), in closed form for
each kind.
"""
from cython.parallel cimport prange
from gear.spatial._spatial cimport Ad_inv, matTvec3
from gear.constraints._rows cimport dot3
from gear.maximal._coords cimport (FIXED, REVOLUTE, PRISMATIC, HELICAL, CYLINDRICAL, UNIVERSAL, PLANAR,
                                     SPHERICAL, FREE, joint_q)

import numpy as np


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
        joint_q(kind[i], axes + 9 * i, pitch[i], Y, q + iq[i])
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

# cython: language_level=3
"""``q exp(dt S dq)`` per joint, natively (the twin of ``Joint.integrate``):
vector-space joints add ``dt dq``; a spherical joint right-multiplies its
quaternion by ``exp(dt w)``; a free joint moves on SE(3),
``(R, p) exp(dt (w, v)) = (R exp(dt w), p + R J_l(dt w) dt v)`` with the
left Jacobian ``J_l`` of SO(3).  Quaternions are renormalised."""
from libc.math cimport sqrt, sin, cos
from gear.algorithms._types cimport ModelC
from gear.spatial._spatial cimport quat_to_rot, cross3, matvec3
from gear.joints._jcalc cimport J_SPHERICAL, J_FREE


cdef inline void quat_step(const double* q, const double* w, double dt, double* out) noexcept nogil:
    # out = q * exp(dt w) (Hamilton product, (w, x, y, z)), normalised
    cdef double a0, a1, a2, th, h, s, c, b0, b1, b2, b3, n
    a0 = dt * w[0]
    a1 = dt * w[1]
    a2 = dt * w[2]
    th = sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    h = 0.5 * th
    if th < 1e-6:
        s = 0.5 - th * th / 48.0
    else:
        s = sin(h) / th
    c = cos(h)
    b0 = c
    b1 = s * a0
    b2 = s * a1
    b3 = s * a2
    out[0] = q[0] * b0 - q[1] * b1 - q[2] * b2 - q[3] * b3
    out[1] = q[0] * b1 + q[1] * b0 + q[2] * b3 - q[3] * b2
    out[2] = q[0] * b2 - q[1] * b3 + q[2] * b0 + q[3] * b1
    out[3] = q[0] * b3 + q[1] * b2 - q[2] * b1 + q[3] * b0
    n = sqrt(out[0] * out[0] + out[1] * out[1] + out[2] * out[2] + out[3] * out[3])
    out[0] /= n
    out[1] /= n
    out[2] /= n
    out[3] /= n


cdef inline void integrate_config(const ModelC* m, const double* q, const double* v, double dt,
                                  double* out) noexcept nogil:
    """``out = q exp(dt v)`` joint by joint; ``out`` may not alias ``q``."""
    cdef int i, k, iq, iv, nq
    cdef double R[9]
    cdef double w[3]
    cdef double u[3]
    cdef double t1[3]
    cdef double t2[3]
    cdef double th, A, B
    for i in range(m.nb):
        iq = m.iq[i]
        iv = m.iv[i]
        if m.jtype[i] == J_SPHERICAL:
            quat_step(q + iq, v + iv, dt, out + iq)
        elif m.jtype[i] == J_FREE:
            # p += R (I + A [w] + B [w]^2) u,  w = dt omega, u = dt v_lin
            for k in range(3):
                w[k] = dt * v[iv + k]
                u[k] = dt * v[iv + 3 + k]
            th = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
            if th < 1e-6:
                A = 0.5 - th * th / 24.0
                B = 1.0 / 6.0 - th * th / 120.0
            else:
                A = (1.0 - cos(th)) / (th * th)
                B = (th - sin(th)) / (th * th * th)
            cross3(w, u, t1)
            cross3(w, t1, t2)
            for k in range(3):
                t2[k] = u[k] + A * t1[k] + B * t2[k]
            quat_to_rot(q + iq + 3, R)
            matvec3(R, t2, t1)
            for k in range(3):
                out[iq + k] = q[iq + k] + t1[k]
            quat_step(q + iq + 3, v + iv, dt, out + iq + 3)
        else:
            nq = m.nvi[i]
            for k in range(nq):
                out[iq + k] = q[iq + k] + dt * v[iv + k]

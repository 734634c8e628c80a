# cython: language_level=3
"""Forward kinematics: world poses T_{0,i} = T_{0,lambda(i)} T_{lambda(i),i} and
body twists V_i (eq. 37)."""
from gear.algorithms._types cimport ModelC, Work, Lanes
from gear.algorithms._common cimport forward_pass, forward_lanes, world_pose_lanes
from gear.spatial._spatial cimport se3_mul
from gear.spatial._lanes cimport LANES


cdef inline void fk(const ModelC* m, const double* q, const double* dq,
                    double* poses, double* twists, Work* w) noexcept nogil:
    """poses: (nb, 4, 4) homogeneous; twists: (nb, 6) or NULL."""
    cdef int i, p, r, c
    cdef double T0[12]
    cdef double* H
    cdef double* Ti
    forward_pass(m, q, dq, w, False)
    # world poses are accumulated in w.Ih (12 doubles per body of its 36)
    for i in range(m.nb):
        p = m.parent[i]
        Ti = w.Ih + 36 * i
        if p >= 0:
            se3_mul(w.Ih + 36 * p, w.T + 12 * i, Ti)
        else:
            for r in range(12):
                Ti[r] = w.T[12 * i + r]
        H = poses + 16 * i
        for r in range(3):
            for c in range(3):
                H[4 * r + c] = Ti[3 * r + c]
            H[4 * r + 3] = Ti[9 + r]
        H[12] = 0.0; H[13] = 0.0; H[14] = 0.0; H[15] = 1.0
        if twists != NULL:
            for r in range(6):
                twists[6 * i + r] = w.V[6 * i + r]


cdef inline void fk_lanes(const ModelC* m, const double* q, const double* dq, double* poses,
                          Py_ssize_t sp, double* twists, Py_ssize_t st, Lanes* w) noexcept nogil:
    """``fk`` on ``LANES`` consecutive states (lane ``l``: ``q + l nq``,
    ``dq + l nv``, ``poses + l sp``, ``twists + l st``; ``dq``, ``twists``
    may be NULL), the poses composed on all lanes at once (the same bits)."""
    cdef int i, r, c, l
    cdef double* T0
    cdef double* H
    forward_lanes(m, q, dq, NULL, w, False)
    for i in range(m.nb):
        T0 = world_pose_lanes(m, i, w)
        for l in range(LANES):
            H = poses + l * sp + 16 * i
            for r in range(3):
                for c in range(3):
                    H[4 * r + c] = T0[(3 * r + c) * LANES + l]
                H[4 * r + 3] = T0[(9 + r) * LANES + l]
            H[12] = 0.0; H[13] = 0.0; H[14] = 0.0; H[15] = 1.0
            if twists != NULL:
                for r in range(6):
                    twists[l * st + 6 * i + r] = w.V[(6 * i + r) * LANES + l] if dq != NULL else 0.0

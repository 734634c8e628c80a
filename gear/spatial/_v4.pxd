# cython: language_level=3
"""Four doubles at once: the vector type of the lane kernels
(``_lanes.pxd``) and the sine and cosine of joint angles.

``v4`` is four doubles in one vector through GCC's and Clang's vector
extensions (one AVX2 register, two SSE2 ones in the generic build):
Cython sees a double, C does the arithmetic on all four.  Unaligned, and
allowed to alias plain doubles.

The kernels take joint angles' sine and cosine from the polynomials
below rather than from libm, so that four states compute them at once in
vector registers; one state (``_spatial.sin_cos``) runs the same code on
one lane, so a batch's states equal single calls bit for bit.  Cody and
Waite's reduction by pi/2 in three parts, then the minimax polynomials of
Sun's fdlibm (k_sin.c, k_cos.c: below 1 ulp on [-pi/4, pi/4]).  Against
libm: within 1 ulp for |x| <= 100, 2 ulp up to 2^19 pi/2, beyond which
the callers use libm (tests/test_lanes.py).
"""
from libc.math cimport fabs


cdef extern from *:
    """
    typedef double gear_v4 __attribute__((vector_size(32), aligned(8), may_alias));
    static inline gear_v4 gear_v4_set(double a, double b, double c, double d) {
        gear_v4 v = {a, b, c, d};
        return v;
    }
    """
    ctypedef double v4 "gear_v4"
    # (a, b, c, d) built in registers: building it in memory with four
    # scalar stores and loading it whole would stall the load until they
    # retire (store forwarding fails)
    v4 v4_set "gear_v4_set"(double a, double b, double c, double d) noexcept nogil


cdef inline v4 splat(double x) noexcept nogil:
    # x on all four lanes
    return v4_set(x, x, x, x)


cdef inline v4 gather(const double* x, Py_ssize_t stride) noexcept nogil:
    # x[0], x[stride], x[2 stride], x[3 stride]
    return v4_set(x[0], x[stride], x[2 * stride], x[3 * stride])


cdef inline bint sin_cos_in_range(double x) noexcept nogil:
    return fabs(x) <= 823549.6551425558               # 2^19 pi / 2


cdef inline void sin_cos_v4(v4 x, v4* s, v4* c) noexcept nogil:
    """sin x, cos x on four lanes, for arguments in ``sin_cos_in_range``."""
    # n = nearest integer to x / (pi/2) (adding 1.5 * 2^52 rounds it)
    cdef v4 n = (x * 6.36619772367581382433e-01 + 6755399441055744.0) - 6755399441055744.0
    # r = x - n pi/2 with pi/2 in three parts (33 + 33 bits, then the
    # rest): the first two products are exact
    cdef v4 r = (((x - n * 1.57079632673412561417e+00) - n * 6.07710050630396597660e-11)
                 - n * 2.02226624879595063154e-21)
    cdef v4 z = r * r
    cdef v4 ks = r + (z * r) * (-1.66666666666666324348e-01 + z * (8.33333333332248946124e-03
                 + z * (-1.98412698298579493134e-04 + z * (2.75573137070700676789e-06
                 + z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))))
    cdef v4 hz = 0.5 * z
    cdef v4 w = 1.0 - hz
    cdef v4 kc = w + (((1.0 - w) - hz) + (z * z) * (4.16666666666666019037e-02
                 + z * (-1.38888888888741095749e-03 + z * (2.48015872894767294178e-05
                 + z * (-2.75573143513906633035e-07 + z * (2.08757232129817482790e-09
                 + z * -1.13596475577881948265e-11))))))
    # the quadrant j = n mod 4 = 2 hi + odd picks the signs and which
    # polynomial is which, in arithmetic rather than branches or floor():
    # the shifter rounds n/4 - 3/8 and j/2 - 1/4 to their floors, exactly;
    # each product below is by 0 or +-1
    cdef v4 j = n - 4.0 * (((0.25 * n - 0.375) + 6755399441055744.0) - 6755399441055744.0)
    cdef v4 hi = ((0.5 * j - 0.25) + 6755399441055744.0) - 6755399441055744.0
    cdef v4 odd = j - 2.0 * hi
    cdef v4 ss = 1.0 - 2.0 * hi                                  # sin < 0 in quadrants 2, 3
    cdef v4 sc = 1.0 - 2.0 * (odd + hi - 2.0 * odd * hi)         # cos < 0 in quadrants 1, 2
    s[0] = ss * (odd * kc + (1.0 - odd) * ks)
    c[0] = sc * (odd * ks + (1.0 - odd) * kc)

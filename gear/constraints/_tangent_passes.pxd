# cython: language_level=3
"""The tangent passes of the closed-chain derivatives
(``gear/constraints/_derivatives.pxd``; Kim, Lie Group Formulation of
Articulated Rigid Body Dynamics, Sec. 4): derivatives of the bodies', the
closure frames' and the rows' kinematics along one direction of ``q``
(tangent) or ``dq`` at a time.

``body_tangents`` is the forward half of Kim's Table 5 over the subtree
the direction moves: with ``h = S_j e_c`` on the direction's joint j,

    dV_j = -ad_h Ad V_p + dS dq_j + S d(dq_j)
    da_j = -ad_h Ad a_p + ad_{dV_j} S dq_j + ad_{V_j} (dS dq_j + S d(dq_j))
           + d(Sdot dq_j) + dS ddq_j

and below j everything is carried rigidly.  ``frame_tangent`` turns a
body's tangents into its closure frame's world quantities (each ``R_b x``
moves by ``R_b (xi_w x x + dx)``), and ``row_tangent`` differentiates each
row type's acceleration-level value ``A_r ddq + (dA dq)_r = d^2 g_r/dt^2``
(read from the frames' full accelerations, so ``A``'s own derivative is
never formed), the world wrenches the row puts on its two frames, and,
for rows with a zero multiplier, the rate ``A_r y``.  ``tangent_passes``
runs them all: into ``X``'s columns ``J^T dF/dq`` (the multipliers' body
wrenches as they turn with the frames), into ``Y``'s ``-d(A ddq + dA
dq)``.  ``loaded_tree_derivatives`` is Kim Table 5 with the multipliers'
wrenches as external loads.  The NumPy twin is
``gear/constraints/_tangents.py``.
"""
from libc.math cimport sqrt
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._common cimport S_mul, S_mul_add, St_mul
from gear.algorithms._derivatives cimport rnea_derivatives
from gear.spatial._spatial cimport Ad_inv, dAd_inv, ad, cross3, matvec3, matTvec3
from gear.joints._jcalc cimport jcalc_dS, jcalc_dSdq, jcalc_ddSdq, jcalc_has_dS
from gear.constraints._cwork cimport ROW_POS, ROW_AXIS, ROW_DOT, ROW_DIST, ROW_COUPLER, ClosC, CWork
from gear.constraints._rows cimport frame_world, dot3, motion_pass


cdef inline int tan_size(int nb, int nv, int nk) noexcept nogil:
    return 49 * nb + nv + 60 * nk


cdef inline double sqrt3(const double* d) noexcept nogil:
    return sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])


cdef inline void _rot_tangent(const double* R, const double* th, const double* x, const double* dx,
                              double* out) noexcept nogil:
    # d(R x) for R moving by R [th] and x by dx:  R (th x x + dx)
    cdef double t[3]
    cross3(th, x, t)
    t[0] += dx[0]
    t[1] += dx[1]
    t[2] += dx[2]
    matvec3(R, t, out)


cdef inline void _dcross(const double* a, const double* da, const double* b, const double* db,
                         double* out, double* dout) noexcept nogil:
    # a x b and its derivative
    cdef double t[3]
    cross3(a, b, out)
    cross3(da, b, dout)
    cross3(a, db, t)
    dout[0] += t[0]
    dout[1] += t[1]
    dout[2] += t[2]


cdef inline double _ddot(const double* a, const double* da, const double* b,
                         const double* db) noexcept nogil:
    # the derivative of a . b
    return dot3(da, b) + dot3(a, db)


# ---------------------------------------------------------------------------
# tangents of the bodies, the frames and the rows along one direction
# ---------------------------------------------------------------------------
cdef inline int body_tangents(const ModelC* m, const Work* w, const double* q, const double* dq,
                              const double* ddq, const double* af, const double* Sd, const double* y,
                              const double* Vy, int l, bint vel, double* xi, double* dV, double* da,
                              double* dVy, double* moved) noexcept nogil:
    """Tangents of every body's pose (the body twist ``xi`` it moves by),
    twist, full acceleration (``af``, with ``ddq``) and, if ``Vy`` is not
    NULL, twist at the velocity ``y``, along ``q (+) eps e_l`` (``vel``
    False) or ``dq + eps e_l``.  Only the subtree of the dof's joint j moves
    (``moved[i] = 1``); ``Sd`` holds every ``S_i dq_i``.  With ``h = S_j e_c``
    (q) on joint j (Kim Table 5,
    forward half),

        dV_j = -ad_h Ad V_p + dS dq_j + S d(dq_j)
        da_j = -ad_h Ad a_p + ad_{dV_j} S dq_j + ad_{V_j} (dS dq_j + S d(dq_j))
               + d(Sdot dq_j) + dS ddq_j

    (``Ad V_p = V_j - S dq_j``, ``Ad a_p = a_j - eta_j - S ddq_j``), and
    below j everything is carried rigidly: ``x_i = Ad x_p``, plus
    ``ad_{dV_i} S dq_i`` in ``da_i``.  Returns j."""
    cdef int nb = m.nb, i, j = 0, c, r, n, p
    cdef double h[6]
    cdef double X[6]
    cdef double t[6]
    cdef double u[6]
    cdef double Sdq[6]
    cdef double dSc[36]
    cdef double ddS[36]
    cdef const double* S
    cdef bint hasd
    while j < nb and not (m.iv[j] <= l < m.iv[j] + m.nvi[j]):
        j += 1
    for i in range(nb):
        moved[i] = 0.0
    c = l - m.iv[j]
    n = m.nvi[j]
    S = w.S + 36 * j
    hasd = jcalc_has_dS(m.jtype[j])
    S_mul(S, n, dq + m.iv[j], Sdq)
    for r in range(36):
        dSc[r] = 0.0
    if hasd:
        jcalc_dSdq(m.jtype[j], m.jparam + 10 * j, S, c, dSc)     # dS/dq_c
    for r in range(6):
        h[r] = 0.0 if vel else S[6 * c + r]
        xi[6 * j + r] = h[r]
        u[r] = 0.0                                             # d(S dq_j)
    if vel:
        for r in range(6):
            u[r] = S[6 * c + r]
    else:
        S_mul_add(dSc, n, dq + m.iv[j], u)
    # dV_j
    for r in range(6):
        X[r] = w.V[6 * j + r] - Sdq[r]
    ad(h, X, t)
    for r in range(6):
        dV[6 * j + r] = u[r] - t[r]
    # da_j
    ad(dV + 6 * j, Sdq, da + 6 * j)
    ad(w.V + 6 * j, u, t)
    for r in range(6):
        da[6 * j + r] += t[r]
    if not vel:
        S_mul(S, n, ddq + m.iv[j], t)
        for r in range(6):
            X[r] = af[6 * j + r] - w.eta[6 * j + r] - t[r]
        ad(h, X, t)
        for r in range(6):
            da[6 * j + r] -= t[r]
        if hasd:
            jcalc_ddSdq(m.jtype[j], m.jparam + 10 * j, S, c, dq + m.iv[j], ddS)
            S_mul_add(ddS, n, dq + m.iv[j], da + 6 * j)        # d(Sdot)/dq_c dq
            S_mul_add(dSc, n, ddq + m.iv[j], da + 6 * j)       # dS ddq
    elif hasd:
        S_mul_add(dSc, n, dq + m.iv[j], da + 6 * j)            # Sdot(e_c) dq
        jcalc_dS(m.jtype[j], m.jparam + 10 * j, q + m.iq[j], dq + m.iv[j], S, ddS)
        for r in range(6):
            da[6 * j + r] += ddS[6 * c + r]                    # Sdot(dq) e_c
    if Vy != NULL:
        # dVy_j = -ad_h (Vy_j - S y_j) + dS y_j  (zero along dq)
        S_mul(S, n, y + m.iv[j], t)
        for r in range(6):
            X[r] = Vy[6 * j + r] - t[r]
        ad(h, X, t)
        for r in range(6):
            dVy[6 * j + r] = -t[r]
        S_mul_add(dSc, n, y + m.iv[j], dVy + 6 * j)
    moved[j] = 1.0
    for i in range(j + 1, nb):
        p = m.parent[i]
        if p < 0 or moved[p] == 0.0:
            continue
        moved[i] = 1.0
        if vel:
            for r in range(6):
                xi[6 * i + r] = 0.0                    # a velocity moves no pose
        else:
            Ad_inv(w.T + 12 * i, xi + 6 * p, xi + 6 * i)
        Ad_inv(w.T + 12 * i, dV + 6 * p, dV + 6 * i)
        Ad_inv(w.T + 12 * i, da + 6 * p, da + 6 * i)
        ad(dV + 6 * i, Sd + 6 * i, t)                   # ad_{dV} S dq_i
        for r in range(6):
            da[6 * i + r] += t[r]
        if Vy != NULL:
            Ad_inv(w.T + 12 * i, dVy + 6 * p, dVy + 6 * i)
    return j


cdef inline void frame_tangent(const CWork* cw, const Work* w, const double* af, const double* Vy,
                               int b, const double* P, const double* xi, const double* dV,
                               const double* da, const double* dVy, const double* moved,
                               double* tf) noexcept nogil:
    """World tangents of frame ``P`` on body ``b`` into ``tf`` (24): the
    rotation's ``th`` (``dR = [th] R``), ``dp``, ``dw``, ``dv`` (origin),
    ``dal``, ``dac`` (classical origin acceleration, with ``ddq``) and, with
    ``Vy``, ``dw_y``, ``dv_y``.  Each world quantity ``R_b x`` moves by
    ``R_b (xi_w x x + dx)``; zero if the body did not move."""
    cdef int r
    cdef double s[3]
    cdef double ds[3]
    cdef double t[3]
    cdef double dt[3]
    cdef double e[3]
    cdef const double* R
    cdef const double* pP = P + 9
    cdef const double* V
    cdef const double* a
    cdef const double* x
    cdef const double* dx
    for r in range(24):
        tf[r] = 0.0
    if b < 0 or moved[b] == 0.0:
        return
    R = cw.Tw + 12 * b
    V = w.V + 6 * b
    a = af + 6 * b
    x = xi + 6 * b
    matvec3(R, x, tf)                                   # th = R xi_w
    cross3(x, pP, e)
    for r in range(3):
        e[r] += x[3 + r]
    matvec3(R, e, tf + 3)                               # dp = R (xi_v + xi_w x p_P)
    _rot_tangent(R, x, V, dV + 6 * b, tf + 6)           # dw
    cross3(V, pP, s)
    cross3(dV + 6 * b, pP, ds)
    for r in range(3):
        s[r] += V[3 + r]                                # s = v + w x p_P
        ds[r] += dV[6 * b + 3 + r]
    _rot_tangent(R, x, s, ds, tf + 9)                   # dv
    _rot_tangent(R, x, a, da + 6 * b, tf + 12)          # dal
    cross3(a, pP, t)
    cross3(V, s, e)
    for r in range(3):
        t[r] += a[3 + r] + e[r]                         # t = a_v + al x p_P + w x s
    cross3(da + 6 * b, pP, dt)
    cross3(dV + 6 * b, s, e)
    for r in range(3):
        dt[r] += da[6 * b + 3 + r] + e[r]
    cross3(V, ds, e)
    for r in range(3):
        dt[r] += e[r]
    _rot_tangent(R, x, t, dt, tf + 15)                  # dac
    if Vy != NULL:
        _rot_tangent(R, x, Vy + 6 * b, dVy + 6 * b, tf + 18)
        cross3(Vy + 6 * b, pP, s)
        cross3(dVy + 6 * b, pP, ds)
        for r in range(3):
            s[r] += Vy[6 * b + 3 + r]
            ds[r] += dVy[6 * b + 3 + r]
        _rot_tangent(R, x, s, ds, tf + 21)


cdef inline double row_tangent(int typ, int i, int j, double length, const double* fa,
                               const double* fb, const double* ta, const double* tb,
                               const double* ya, const double* yb, double* mw, double* dmw,
                               double* fw, double* dfw, double* drate,
                               double* dratev=NULL) noexcept nogil:
    """The derivative of one row's acceleration-level value ``A_r ddq + (dA
    dq)_r = d^2 g_r/dt^2`` (frames ``fa``, ``fb`` from ``frame_world`` with
    full accelerations; tangents ``ta``, ``tb`` from ``frame_tangent``).
    Also the world moment and force the row puts on {A} (``mw[0:3]``,
    ``fw[0:3]``) and {B} (``mw[3:6]``, ``fw[3:6]``) with their
    derivatives, (``ya`` not NULL: frame twists at ``y``) the derivative
    of the rate ``A_r y`` in ``drate``, and (``dratev`` not NULL) the
    derivative of the rate ``A_r dq`` at the velocity itself, ``dq`` held."""
    cdef int k
    cdef double d[3]
    cdef double dd_[3]
    cdef double v[3]
    cdef double dv_[3]
    cdef double a[3]
    cdef double da_[3]
    cdef double u[3]
    cdef double du_[3]
    cdef double z[3]
    cdef double dz[3]
    cdef double w1[3]
    cdef double dw1[3]
    cdef double t1[3]
    cdef double dt1[3]
    cdef double t2[3]
    cdef double dt2[3]
    cdef double n[3]
    cdef double dn[3]
    cdef double s1[3]
    cdef double ds1[3]
    cdef double s2[3]
    cdef double ds2[3]
    cdef double x[3]
    cdef double dx[3]
    cdef double L, dL, ev, dev, num, dnum, out = 0.0
    for k in range(3):
        d[k] = fb[9 + k] - fa[9 + k]
        dd_[k] = tb[3 + k] - ta[3 + k]
        v[k] = fb[15 + k] - fa[15 + k]
        dv_[k] = tb[9 + k] - ta[9 + k]
        a[k] = fb[21 + k] - fa[21 + k]
        da_[k] = tb[15 + k] - ta[15 + k]
    for k in range(6):
        mw[k] = 0.0
        dmw[k] = 0.0
        fw[k] = 0.0
        dfw[k] = 0.0
    drate[0] = 0.0
    if typ == ROW_POS:
        fw[i] = -1.0
        fw[3 + i] = 1.0
        if ya != NULL:
            drate[0] = (tb[21 + i] - ta[21 + i])
        if dratev != NULL:
            dratev[0] = dv_[i]                        # rate (v_B - v_A)_i
        return da_[i]
    if typ == ROW_DIST:
        L = sqrt3(d)
        for k in range(3):
            u[k] = d[k] / L
        dL = dot3(dd_, u)
        for k in range(3):
            du_[k] = (dd_[k] - u[k] * dL) / L
        ev = dot3(u, v)
        dev = _ddot(u, du_, v, dv_)
        num = dot3(v, v) - ev * ev
        dnum = 2.0 * dot3(dv_, v) - 2.0 * ev * dev
        for k in range(3):
            fw[k] = -u[k]
            fw[3 + k] = u[k]
            dfw[k] = -du_[k]
            dfw[3 + k] = du_[k]
        if ya != NULL:
            for k in range(3):
                x[k] = yb[3 + k] - ya[3 + k]          # dd at y
                dx[k] = tb[21 + k] - ta[21 + k]
            drate[0] = _ddot(u, du_, x, dx)
        if dratev != NULL:
            dratev[0] = dev                           # rate u . (v_B - v_A)
        return dnum / L - num * dL / (L * L) + _ddot(u, du_, a, da_)
    for k in range(3):
        u[k] = fa[3 * k + i]                          # column i of R_A
    cross3(ta, u, du_)                                # d u = th_A x u
    if typ == ROW_AXIS:
        _dcross(fa + 12, ta + 6, u, du_, w1, dw1)     # du/dt = w_A x u
        _dcross(u, du_, d, dd_, z, dz)                # m_A = u x d
        for k in range(3):
            mw[k] = z[k]
            dmw[k] = dz[k]
            fw[k] = -u[k]
            fw[3 + k] = u[k]
            dfw[k] = -du_[k]
            dfw[3 + k] = du_[k]
        _dcross(fa + 18, ta + 12, u, du_, t1, dt1)    # al_A x u
        _dcross(fa + 12, ta + 6, w1, dw1, t2, dt2)    # w_A x du/dt
        for k in range(3):
            t1[k] += t2[k]
            dt1[k] += dt2[k]
        out = _ddot(t1, dt1, d, dd_) + 2.0 * _ddot(w1, dw1, v, dv_) + _ddot(u, du_, a, da_)
        if ya != NULL:
            _dcross(ya, ta + 18, u, du_, w1, dw1)     # w_A^y x u
            for k in range(3):
                x[k] = yb[3 + k] - ya[3 + k]
                dx[k] = tb[21 + k] - ta[21 + k]
            drate[0] = _ddot(w1, dw1, d, dd_) + _ddot(u, du_, x, dx)
        if dratev != NULL:
            dratev[0] = _ddot(w1, dw1, d, dd_) + _ddot(u, du_, v, dv_)   # (w_A x u) . d + u . v
        return out
    # ROW_DOT
    for k in range(3):
        z[k] = fb[3 * k + j]                          # column j of R_B
    cross3(tb, z, dz)
    _dcross(z, dz, u, du_, n, dn)                     # n = z x u
    for k in range(3):
        mw[k] = -n[k]
        mw[3 + k] = n[k]
        dmw[k] = -dn[k]
        dmw[3 + k] = dn[k]
    _dcross(fb + 12, tb + 6, z, dz, w1, dw1)          # dz/dt = w_B x z
    _dcross(fa + 12, ta + 6, u, du_, t2, dt2)         # du/dt = w_A x u
    _dcross(w1, dw1, u, du_, s1, ds1)
    _dcross(z, dz, t2, dt2, s2, ds2)
    for k in range(3):
        s1[k] += s2[k]
        ds1[k] += ds2[k]
        x[k] = fb[18 + k] - fa[18 + k]
        dx[k] = tb[12 + k] - ta[12 + k]
        t1[k] = fb[12 + k] - fa[12 + k]
        dt1[k] = tb[6 + k] - ta[6 + k]
    out = _ddot(x, dx, n, dn) + _ddot(t1, dt1, s1, ds1)
    if dratev != NULL:
        dratev[0] = _ddot(t1, dt1, n, dn)             # rate (w_B - w_A) . (z x u)
    if ya != NULL:
        for k in range(3):
            x[k] = yb[k] - ya[k]
            dx[k] = tb[18 + k] - ta[18 + k]
        drate[0] = _ddot(x, dx, n, dn)
    return out


# ---------------------------------------------------------------------------
# the whole derivative at one state
# ---------------------------------------------------------------------------
cdef inline void _body_wrench_tangent(const CWork* cw, int b, const double* P, const double* th,
                                      const double* mw, const double* dmw, const double* fw,
                                      const double* dfw, double lam, double* G) noexcept nogil:
    """``G_b += lam dF`` for the body-coordinate wrench ``F = (R^T m + p_P x
    R^T f, R^T f)`` of world moment ``mw`` and force ``fw`` at frame P's
    origin, as the body turns by ``th`` (body frame; NULL: it does not) and
    ``mw``, ``fw`` change by ``dmw``, ``dfw``: ``d(R^T x) = R^T dx - th x
    R^T x``."""
    cdef int r
    cdef double Rf[3]
    cdef double Rm[3]
    cdef double dF[6]
    cdef double t[3]
    cdef const double* R = cw.Tw + 12 * b
    matTvec3(R, dfw, dF + 3)
    matTvec3(R, dmw, dF)
    if th != NULL:
        matTvec3(R, fw, Rf)
        matTvec3(R, mw, Rm)
        cross3(th, Rf, t)
        for r in range(3):
            dF[3 + r] -= t[r]
        cross3(th, Rm, t)
        for r in range(3):
            dF[r] -= t[r]
    cross3(P + 9, dF + 3, t)
    for r in range(3):
        dF[r] += t[r]
    for r in range(6):
        G[6 * b + r] += lam * dF[r]


cdef inline void _frame_twist(const CWork* cw, const double* Vb, int b, const double* P,
                              double* out) noexcept nogil:
    """World angular velocity and origin velocity (6) of frame P on body b
    for body twists ``Vb`` (zero on the world)."""
    cdef int r
    cdef double t[3]
    if b < 0:
        for r in range(6):
            out[r] = 0.0
        return
    matvec3(cw.Tw + 12 * b, Vb + 6 * b, out)
    cross3(Vb + 6 * b, P + 9, t)
    for r in range(3):
        t[r] += Vb[6 * b + 3 + r]
    matvec3(cw.Tw + 12 * b, t, out + 3)


cdef inline bint _closure_moved(const ClosC* c, int k, const double* moved) noexcept nogil:
    return ((c.body_a[k] >= 0 and moved[c.body_a[k]] != 0.0)
            or (c.body_b[k] >= 0 and moved[c.body_b[k]] != 0.0))


cdef struct TanW:
    # the tangent passes' workspace (carved by ``tan_carve``)
    double* af      # (nb, 6) full body accelerations (with ddq, without gravity)
    double* Sd      # (nb, 6) S_i dq_i
    double* y       # (nv,) a velocity with lam = A y (zero rows), or unused
    double* Vy      # (nb, 6) body twists at y; NULL: no zero rows
    double* xi      # (nb, 6) the tangents of one direction: pose (body twist),
    double* dV      #   twist,
    double* da      #   full acceleration,
    double* dVy     #   twist at y,
    double* G       #   and the multipliers' body wrenches
    double* moved   # (nb,) bodies the direction moves
    double* frs     # (nk, 48) closure frames (frame_world, full accelerations)
    double* ys      # (nk, 12) their twists at y


cdef inline double* tan_carve(TanW* T, double* s, int nb, int nv, int nk) noexcept nogil:
    """Point ``T`` into ``s``; returns the first double after it."""
    T.af = s
    T.Sd = T.af + 6 * nb
    T.y = T.Sd + 6 * nb
    T.Vy = T.y + nv
    T.xi = T.Vy + 6 * nb
    T.dV = T.xi + 6 * nb
    T.da = T.dV + 6 * nb
    T.dVy = T.da + 6 * nb
    T.G = T.dVy + 6 * nb
    T.moved = T.G + 6 * nb
    T.frs = T.moved + nb
    T.ys = T.frs + 48 * nk
    return T.ys + 12 * nk


cdef inline void tan_setup(const ModelC* m, const ClosC* c, int nk, const double* dq, const double* ddq,
                           const Work* w, CWork* cw, TanW* T) noexcept nogil:
    """Full accelerations ``a_i = Ad a_p + eta_i + S_i ddq_i`` (also into
    ``cw.acc``, where ``frame_world`` reads them), ``S_i dq_i``, and the
    closure frames, at the state ``forward_pass`` left in ``w``."""
    cdef int i, p, r, k
    for i in range(m.nb):
        p = m.parent[i]
        if p >= 0:
            Ad_inv(w.T + 12 * i, T.af + 6 * p, T.af + 6 * i)
        else:
            for r in range(6):
                T.af[6 * i + r] = 0.0
        for r in range(6):
            T.af[6 * i + r] += w.eta[6 * i + r]
        S_mul_add(w.S + 36 * i, m.nvi[i], ddq + m.iv[i], T.af + 6 * i)
        S_mul(w.S + 36 * i, m.nvi[i], dq + m.iv[i], T.Sd + 6 * i)
    for i in range(6 * m.nb):
        cw.acc[i] = T.af[i]
    for k in range(nk):
        frame_world(w, cw, c.body_a[k], c.place_a + 12 * k, T.frs + 48 * k)
        frame_world(w, cw, c.body_b[k], c.place_b + 12 * k, T.frs + 48 * k + 24)


cdef inline void tan_twists_at_y(const ModelC* m, const ClosC* c, int nk, const Work* w, const CWork* cw,
                                 TanW* T) noexcept nogil:
    """Body and frame twists at the velocity ``T.y`` (zero rows' multiplier
    derivative ``d(A y)/dq``)."""
    cdef int k
    motion_pass(m, w, T.y, T.Vy)                   # V_i = J_i y
    for k in range(nk):
        _frame_twist(cw, T.Vy, c.body_a[k], c.place_a + 12 * k, T.ys + 12 * k)
        _frame_twist(cw, T.Vy, c.body_b[k], c.place_b + 12 * k, T.ys + 12 * k + 6)


cdef inline void tangent_passes(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                                const double* ddq, const double* lam, int ndir, int n3, const Work* w,
                                const CWork* cw, TanW* T, double* X, double* Y, double* Zr,
                                bint sym=False) noexcept nogil:
    """One tangent pass per direction l < ``ndir`` (q first, then dq): into
    column l of ``X`` (nv, n3) ``J^T dF/dq`` (q directions: how the
    multipliers' body wrenches turn with the frames, carried to the root
    and paired with S), into column l of ``Y`` (m, n3; NULL: not wanted)
    ``-d(A ddq + dA dq)/dl``, and into ``Zr`` (m, nv) ``d(A_r y)/dq`` of the
    rows with a zero multiplier when ``T.Vy`` is set.  ``X`` and ``Y`` are
    added to / written in their columns l only.

    ``sym`` (every joint of at most one dof, so that the coordinates are a
    vector space and ``d^2 g / dq dq`` is symmetric): the dq columns of
    ``Y`` come from the q passes, ``d(dA dq)_r / d(dq_l) = 2 d(A_r dq) /
    dq_l`` (``dA dq = dq^T (d^2 g_r) dq``), and the caller passes only the
    q directions."""
    cdef int nv = m.nv, nb = m.nb, nr = c.m
    cdef int i, k, r, l, side, b, p
    cdef double drate, val, dratev
    cdef double ta[24]
    cdef double tb[24]
    cdef double mw[6]
    cdef double dmw[6]
    cdef double fw[6]
    cdef double dfw[6]
    cdef double u[6]
    cdef bint vel
    cdef const double* vy
    for l in range(ndir):
        vel = l >= nv
        vy = T.Vy if (T.Vy != NULL and not vel) else NULL
        body_tangents(m, w, q, dq, ddq, T.af, T.Sd, T.y, vy, l - nv if vel else l, vel, T.xi, T.dV, T.da,
                      T.dVy, T.moved)
        if not vel:
            for i in range(6 * nb):
                T.G[i] = 0.0
        for r in range(nr):
            if c.rtype[r] == ROW_COUPLER:
                continue
            k = c.rk[r]
            if not _closure_moved(c, k, T.moved):
                continue
            if r == 0 or c.rk[r - 1] != k:
                frame_tangent(cw, w, T.af, vy, c.body_a[k], c.place_a + 12 * k, T.xi, T.dV, T.da, T.dVy,
                              T.moved, ta)
                frame_tangent(cw, w, T.af, vy, c.body_b[k], c.place_b + 12 * k, T.xi, T.dV, T.da, T.dVy,
                              T.moved, tb)
            val = row_tangent(c.rtype[r], c.ri[r], c.rj[r], c.length[k], T.frs + 48 * k,
                              T.frs + 48 * k + 24, ta, tb,
                              NULL if vy == NULL else T.ys + 12 * k,
                              NULL if vy == NULL else T.ys + 12 * k + 6,
                              mw, dmw, fw, dfw, &drate, &dratev if (sym and not vel) else NULL)
            if Y != NULL:
                Y[r * n3 + l] = -val
                if sym and not vel:
                    Y[r * n3 + m.nv + l] = -2.0 * dratev
            if vel:
                continue
            if lam[r] != 0.0:
                for side in range(2):
                    b = c.body_a[k] if side == 0 else c.body_b[k]
                    if b >= 0:
                        _body_wrench_tangent(cw, b, (c.place_a if side == 0 else c.place_b) + 12 * k,
                                             T.xi + 6 * b if T.moved[b] != 0.0 else NULL,
                                             mw + 3 * side, dmw + 3 * side, fw + 3 * side,
                                             dfw + 3 * side, lam[r], T.G)
            elif vy != NULL:
                Zr[r * nv + l] = drate
        if not vel:
            # J^T dF: the wrenches carried to the root, paired with S on the way
            for i in range(nb - 1, -1, -1):
                St_mul(w.S + 36 * i, m.nvi[i], T.G + 6 * i, u)
                for r in range(m.nvi[i]):
                    X[(m.iv[i] + r) * n3 + l] += u[r]
                p = m.parent[i]
                if p >= 0:
                    dAd_inv(w.T + 12 * i, T.G + 6 * i, u)
                    for r in range(6):
                        T.G[6 * p + r] += u[r]


cdef inline void loaded_tree_derivatives(const ModelC* m, const ClosC* c, const double* q,
                                         const double* dq, const double* ddq, const double* fext,
                                         const double* lam, double* fe, double* dIq, double* dIv,
                                         double* M, Work* w, const CWork* cw) noexcept nogil:
    """Kim Table 5 (``rnea_derivatives``) with the multipliers' row wrenches
    ``cw.F`` as external body wrenches beside ``fext``: ``d(A^T lam)/dq``
    for wrenches fixed in their bodies is in it."""
    cdef int i, r, k, side, b
    for i in range(6 * m.nb):
        fe[i] = fext[i] if fext != NULL else 0.0
    for r in range(c.m):
        if c.rtype[r] == ROW_COUPLER or lam[r] == 0.0:
            continue
        k = c.rk[r]
        for side in range(2):
            b = c.body_a[k] if side == 0 else c.body_b[k]
            if b >= 0:
                for i in range(6):
                    fe[6 * b + i] += lam[r] * cw.F[12 * r + 6 * side + i]
    rnea_derivatives(m, q, dq, ddq, fe, dIq, dIv, M, w)

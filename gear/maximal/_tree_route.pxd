# cython: language_level=3
"""Maximal-coordinate forward dynamics by a tree-ordered factorisation of
the KKT system (Baraff, "Linear-time dynamics using Lagrange
multipliers", 1996): the ``"tree"`` route of the ``"maximal"`` solver,
beside CHOLMOD's factorisation of the Schur complement (``_kernel.pxd``).

The unknowns are the body accelerations ``dV_k`` and the multipliers of
the rows; ``Mb dV = f + J^T lam``, ``J dV = c`` (Ruan, Articulated rigid
body systems, eq. 12).  Joint k's ``6 - n_k`` rows are ``C_k dV_k - C_k X_k
dV_p = C_k eta_k`` (``X_k = Ad_{T_k^-1}``, ``C_k S_k = 0``).  Eliminating
each body and then its joint's rows, from the leaves to the ground,
leaves no fill.  With ``Mt_k`` the body's inertia plus what its children
passed on and ``ft_k`` its wrench likewise, eliminating ``dV_k`` leaves
the block ``G_k = C Mt^-1 C^T`` on the joint's multipliers, and
eliminating those passes on to the parent

    Mt_p += X^T C^T G^-1 C X,    ft_p += X^T C^T G^-1 C (Mt^-1 ft - eta).

The (6 - n) x (6 - n) block is never formed: since ``[S, Mt^-1 C^T]``
spans R^6, ``C^T (C Mt^-1 C^T)^-1 C = Mt - U D^-1 U^T`` with ``U = Mt S``
and ``D = S^T U`` (n x n), so that

    Mt_p += X^T (Mt - U D^-1 U^T) X,
    ft_p += X^T (ft - Mt eta + U D^-1 (U^T eta - S^T ft)),
    dV_k  = a + S D^-1 (S^T ft - U^T a),   a = X dV_p + eta_k

-- the arithmetic of the articulated-body recursion (Kim, Lie Group
Formulation of Articulated Rigid Body Dynamics, Table 3, eq. 49), which
is what Baraff's elimination of a tree amounts to.  Each body costs an
n x n pivot and one congruence.

Loop rows stay in a Schur complement of their own, ``K_L = J_L Phi
J_L^T`` with ``Phi`` the tree's response to body wrenches.  A wrench ``w``
at body k contributes ``y = Ld^-1 S^T w`` (``D = Ld Ld^T``) and passes
``X^T (w - U D^-1 S^T w)`` on to the parent, so that ``w^T Phi w'`` is the
sum of ``y . y'`` over the bodies on both paths to the ground: ``K_L`` has
an entry for two loop rows only where their paths meet.  Its pattern, a
fill-reducing order and the factor's pattern are planned once
(``MaxTree``, ``gear/maximal/tree.py``); each call factorises ``K_L``
with the sparse Cholesky of ``gear/algorithms/_spchol.pxd``.  Where every
row the factorisation finds dependent is negligible in itself (a row no
wrench of the tree loads: the out-of-plane rows of balls closing planar
loops) the basic solution is used as it is (:func:`kl_factor_plain`).
Otherwise ``K_L + beta I`` is factorised and refined against ``K_L`` as
the CHOLMOD route does (``beta = rel * max diag``, raised 1000-fold up to
1e-6 when a pivot is not positive; refinement until ``|r - K_L mu| <=
1e-14 |r|``; the part of ``r`` outside the range removed when there is no
exact solution): the minimum-norm multipliers of dependent rows.  Then the loop forces
``J_L^T mu`` join the wrenches ``ft`` (each visit's wrench is its row's
share at that body: ``ft += mu W`` over the visits) and one more sweep
from the ground gives ``dV`` and, on the way, each joint's ``D^-1 (S^T ft
- U^T a) = S^+ (dV_k - a)``: the joint accelerations read off the body
accelerations.

Forward dynamics only: hybrid dynamics keeps the CHOLMOD route.

The sweeps (:func:`eliminate`, :func:`sweep_up`, :func:`sweep_down`,
:func:`loop_schur`) run over a ``Topo``: the model's joints here
(:func:`joint_topo`), or the edges of the maximal steps' tree
(``_tree_step.pxd``), whose maps of the parent's twist are general 6 x 6
matrices in place of ``Ad``.
"""
from libc.math cimport sqrt, fabs
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._spchol cimport SpChol, spchol_factor, spchol_solve_basic, row_rtol
from gear.constraints._cwork cimport ClosC, CWork
from gear.spatial._spatial cimport Ad_inv, dAd_inv, mat6_vec, congruence_Ad_inv_add, congruence6_add
from gear.algorithms._common cimport S_mul_add
from gear.maximal._kernel cimport (MaxC, MaxW, maxwork, maximal_assemble, maximal_forward,
                                   maximal_readback, row_residual, dot6, fmax, ST_NOT_PSD)


cdef struct MaxTree:
    const double* I6     # (nb, 36) body inertias, row-major
    int nvis             # visits: a loop row at a body on the path of one of its bodies to the ground
    const int* vptr      # (nb + 1,) each body's visits
    const int* vrow      # (nvis,) the visit's loop row (0 .. nL - 1)
    const int* vpar      # (nvis,) the same row's visit at the parent body, or -1
    const int* vseg      # (nvis, 2) offsets in Jv of the row's segments on this body, or -1
    int npair
    const int* pptr      # (nb + 1,) each body's pairs of visits (i <= j, i the outer loop) ...
    const int* pdst      # (npair,) ... and the entry of K_L's factor their product adds to
    const int* pinv      # (nL,) loop row -> its row in the factor
    SpChol ch            # K_L's factor pattern


cdef inline double plain_rtol() noexcept nogil:
    # a pivot of K_L not above this fraction of its largest diagonal entry
    # marks a dependent row (kl_factor_plain; the steps' tree_factor in
    # gear/maximal/_native.pyx)
    return 1e-10


cdef inline int tree_scratch(int nb, int nv, int nL, int nvis, int nnz) noexcept nogil:
    # Mt (36 per body), U, Ld (6 per velocity coordinate), ft (6 per body),
    # W, Y (6 per visit), KL, Lx (nnz), r, mu, e, de, y, dep (nL), xs (3 nL)
    return 42 * nb + 12 * nv + 12 * nvis + 2 * nnz + 9 * nL + 8


cdef inline bint chol_small(const double* A, int n, double* L) noexcept nogil:
    # A = L L^T (n x n, row-major, stride 6), L's diagonal stored inverted;
    # False when A is not positive definite
    cdef int i, j, k
    cdef double s
    for j in range(n):
        s = A[6 * j + j]
        for k in range(j):
            s -= L[6 * j + k] * L[6 * j + k]
        if not (s > 0.0):
            return False
        L[6 * j + j] = 1.0 / sqrt(s)
        for i in range(j + 1, n):
            s = A[6 * i + j]
            for k in range(j):
                s -= L[6 * i + k] * L[6 * j + k]
            L[6 * i + j] = s * L[6 * j + j]
    return True


cdef inline void lower_solve(const double* L, int n, double* x) noexcept nogil:
    # x <- L^-1 x (n = 3, a ball's edge: the loop's operations written
    # out, in the same order)
    cdef int i, k
    if n == 3:
        x[0] *= L[0]
        x[1] -= L[6] * x[0]
        x[1] *= L[7]
        x[2] -= L[12] * x[0]
        x[2] -= L[13] * x[1]
        x[2] *= L[14]
        return
    for i in range(n):
        for k in range(i):
            x[i] -= L[6 * i + k] * x[k]
        x[i] *= L[6 * i + i]


cdef inline void upper_solve(const double* L, int n, double* x) noexcept nogil:
    # x <- L^-T x (n = 3 written out as lower_solve)
    cdef int i, k
    if n == 3:
        x[2] *= L[14]
        x[0] -= L[12] * x[2]
        x[1] -= L[13] * x[2]
        x[1] *= L[7]
        x[0] -= L[6] * x[1]
        x[0] *= L[0]
        return
    for i in range(n - 1, -1, -1):
        x[i] *= L[6 * i + i]
        for k in range(i):
            x[k] -= L[6 * i + k] * x[i]


cdef struct TreeW:
    double* Mt      # (nb, 36) articulated inertias
    double* U       # (nv, 6) U = Mt S, a joint's n columns of 6 from 6 iv
    double* Ld      # (nv, 6) D = S^T U = Ld Ld^T, stride 6 (fits in 6 n)
    double* ft      # (nb, 6) the wrenches plus what the children passed on
    double* W       # (nvis, 6) a loop row's wrench at a body of its paths
    double* Y       # (nvis, 6) Ld^-1 S^T W (n entries; zero beyond n where n > 1, whose pairs take dot6)
    double* KL
    double* Lx
    double* r
    double* mu
    double* e
    double* de
    double* y
    double* dep
    double* xs


cdef inline TreeW treework(int nb, int nv, int nL, int nvis, int nnz, double* base) noexcept nogil:
    cdef TreeW t
    t.Mt = base
    t.U = t.Mt + 36 * nb
    t.Ld = t.U + 6 * nv
    t.ft = t.Ld + 6 * nv
    t.W = t.ft + 6 * nb
    t.Y = t.W + 6 * nvis
    t.KL = t.Y + 6 * nvis
    t.Lx = t.KL + nnz
    t.r = t.Lx + nnz
    t.mu = t.r + nL
    t.e = t.mu + nL
    t.de = t.e + nL
    t.y = t.de + nL
    t.dep = t.y + nL
    t.xs = t.dep + nL
    return t


cdef struct Topo:
    # a tree for the sweeps below: the solver's joints (joint_topo) or the
    # maximal steps' edges (_tree_step.pxd)
    int nb
    const int* parent    # (nb,) the parent's position, -1: the ground; parents first
    const int* nvi       # (nb,) each joint's freedoms n
    const int* iv        # (nb,) its first column of U and Ld
    const int* body      # (nb,) the body at each position (dV's rows), or NULL: the position
    const double* S      # (nb, 36) the joint's motion subspace, n columns of 6
    const double* X      # the parent's twist to the body's frame: (nb, 12) transforms T
    bint general         #   (Ad_{T^-1}), or with ``general`` (nb, 36) 6 x 6 maps A
    const double* eta    # (nb, 6) the rows' particular solution


cdef inline Topo joint_topo(const ModelC* m, const Work* w) noexcept nogil:
    cdef Topo g
    g.nb = m.nb
    g.parent = m.parent
    g.nvi = m.nvi
    g.iv = m.iv
    g.body = NULL
    g.S = w.S
    g.X = w.T
    g.general = False
    g.eta = w.eta
    return g


cdef inline int body_of(const Topo* g, int k) noexcept nogil:
    return k if g.body == NULL else g.body[k]


cdef inline void to_child(const Topo* g, int k, const double* v, double* out) noexcept nogil:
    # out = X_k v: the parent's twist in body k's frame
    if g.general:
        mat6_vec(g.X + 36 * k, v, out)
    else:
        Ad_inv(g.X + 12 * k, v, out)


cdef inline void to_parent_add(const Topo* g, int k, const double* f, double* out) noexcept nogil:
    # out += X_k^T f: body k's wrench on its parent
    cdef double b[6]
    cdef int a, c
    if g.general:
        for c in range(6):
            for a in range(6):
                out[c] += g.X[36 * k + 6 * a + c] * f[a]
        return
    dAd_inv(g.X + 12 * k, f, b)
    for a in range(6):
        out[a] += b[a]


cdef inline void congruence_to_parent(const Topo* g, int k, const double* P, double* out) noexcept nogil:
    # out += X_k^T P X_k (P symmetric, 6 x 6 row-major)
    if g.general:
        congruence6_add(g.X + 36 * k, P, out)
    else:
        congruence_Ad_inv_add(g.X + 12 * k, P, out)


cdef inline int eliminate(const Topo* g, const double* I6, TreeW* t) noexcept nogil:
    """The matrix sweep from the leaves: ``Mt``, ``U`` and ``Ld`` of every
    body (see the module docstring), from the inertias ``I6`` (nb, 36) in
    the tree's order."""
    cdef int k, i, j, a, n, p
    cdef double D[36]
    cdef double Pa[36]
    cdef double V[36]
    cdef double x
    cdef double* Mk
    cdef double* Uk
    cdef double* Lk
    cdef const double* S
    for k in range(36 * g.nb):
        t.Mt[k] = I6[k]
    for k in range(g.nb - 1, -1, -1):
        n = g.nvi[k]
        p = g.parent[k]
        Mk = t.Mt + 36 * k
        Uk = t.U + 6 * g.iv[k]
        Lk = t.Ld + 6 * g.iv[k]
        S = g.S + 36 * k
        if n == 1:
            # (one dof, the common case: D = S^T Mt S a number)
            mat6_vec(Mk, S, Uk)
            x = dot6(S, Uk)
            if not (x > 0.0):
                return ST_NOT_PSD
            x = 1.0 / sqrt(x)
            Lk[0] = x
            if p < 0:
                continue
            for a in range(6):
                V[a] = Uk[a] * x
            for a in range(6):
                for i in range(a + 1):
                    Pa[6 * a + i] = Mk[6 * a + i] - V[a] * V[i]
                    Pa[6 * i + a] = Pa[6 * a + i]
            congruence_to_parent(g, k, Pa, t.Mt + 36 * p)
            continue
        for j in range(n):
            mat6_vec(Mk, S + 6 * j, Uk + 6 * j)
        for i in range(n):
            for j in range(i + 1):
                D[6 * i + j] = dot6(S + 6 * i, Uk + 6 * j)
        if not chol_small(D, n, Lk):
            return ST_NOT_PSD
        if p < 0 or n == 6:
            continue                   # the ground, or a free joint: nothing passed on
        # Pa = Mt - U D^-1 U^T = Mt - V^T V with V = Ld^-1 U^T (n rows of 6)
        for a in range(6):
            for j in range(n):
                D[j] = Uk[6 * j + a]
            lower_solve(Lk, n, D)
            for j in range(n):
                V[6 * j + a] = D[j]
        for a in range(6):
            for i in range(a + 1):
                x = Mk[6 * a + i]
                for j in range(n):
                    x -= V[6 * j + a] * V[6 * j + i]
                Pa[6 * a + i] = x
                Pa[6 * i + a] = x
        congruence_to_parent(g, k, Pa, t.Mt + 36 * p)
    return 0


cdef inline void sweep_up(const Topo* g, TreeW* t, const double* f) noexcept nogil:
    """``t.ft``: the body wrenches ``f`` (by position; NULL: zero) plus
    what the children pass on (the vector sweep from the leaves, after
    :func:`eliminate`)."""
    cdef int k, j, a, n, p
    cdef double h[6]
    cdef double v[6]
    cdef const double* S
    cdef const double* Uk
    cdef const double* Lk
    cdef double* fk
    for k in range(6 * g.nb):
        t.ft[k] = f[k] if f != NULL else 0.0
    for k in range(g.nb - 1, -1, -1):
        n = g.nvi[k]
        p = g.parent[k]
        if p < 0 or n == 6:
            continue
        S = g.S + 36 * k
        Uk = t.U + 6 * g.iv[k]
        Lk = t.Ld + 6 * g.iv[k]
        fk = t.ft + 6 * k
        # X^T (ft - Mt eta + U D^-1 (U^T eta - S^T ft)) to the parent
        for j in range(n):
            h[j] = dot6(Uk + 6 * j, g.eta + 6 * k) - dot6(S + 6 * j, fk)
        lower_solve(Lk, n, h)
        upper_solve(Lk, n, h)
        mat6_vec(t.Mt + 36 * k, g.eta + 6 * k, v)
        for a in range(6):
            v[a] = fk[a] - v[a]
        S_mul_add(Uk, n, h, v)
        to_parent_add(g, k, v, t.ft + 6 * p)


cdef inline void sweep_down(const Topo* g, const TreeW* t, double* dV, double* ddq) noexcept nogil:
    """``dV`` (by body) from the ground to the leaves, after
    :func:`sweep_up`, and (where not NULL) ``ddq``: each joint's ``D^-1
    (S^T ft - U^T a)``, which is ``S^+ (dV_k - a)``, the joint acceleration
    read off the body's."""
    cdef int k, j, a, n, p
    cdef double h[6]
    cdef double v[6]
    cdef const double* S
    cdef const double* Uk
    cdef const double* Lk
    cdef const double* fk
    for k in range(g.nb):
        n = g.nvi[k]
        p = g.parent[k]
        S = g.S + 36 * k
        Uk = t.U + 6 * g.iv[k]
        Lk = t.Ld + 6 * g.iv[k]
        fk = t.ft + 6 * k
        # a = X dV_p + eta;  dV = a + S D^-1 (S^T ft - U^T a)
        if p >= 0:
            to_child(g, k, dV + 6 * body_of(g, p), v)
            for a in range(6):
                v[a] += g.eta[6 * k + a]
        else:
            for a in range(6):
                v[a] = g.eta[6 * k + a]
        for j in range(n):
            h[j] = dot6(S + 6 * j, fk) - dot6(Uk + 6 * j, v)
        lower_solve(Lk, n, h)
        upper_solve(Lk, n, h)
        S_mul_add(S, n, h, v)
        for a in range(6):
            dV[6 * body_of(g, k) + a] = v[a]
        if ddq != NULL:
            for j in range(n):
                ddq[g.iv[k] + j] = h[j]


cdef inline void loop_schur(const Topo* g, const MaxTree* tr, const double* Jv, TreeW* t,
                            double* KL) noexcept nogil:
    """``K_L``'s values in the factor's positions (``KL``: ``t.KL``, or
    ``t.Lx`` where no copy is kept to refine against): each loop row's
    wrenches (its two 6-blocks in ``Jv`` at the visits' ``vseg``) passed
    along its paths to the ground, and the products of the visits that
    meet on a body."""
    cdef int k, v, j, a, n, q, p
    cdef double a0, a1, a2
    cdef double h[6]
    cdef double b[6]
    cdef double* Wv
    cdef double* Yv
    cdef const double* y1
    cdef const double* y2
    cdef const double* S
    cdef const double* Uk
    cdef const double* Lk
    cdef const double* Js
    for k in range(6 * tr.nvis):
        t.W[k] = 0.0
    for k in range(g.nb - 1, -1, -1):
        n = g.nvi[k]
        S = g.S + 36 * k
        Uk = t.U + 6 * g.iv[k]
        Lk = t.Ld + 6 * g.iv[k]
        for v in range(tr.vptr[k], tr.vptr[k + 1]):
            Wv = t.W + 6 * v
            Yv = t.Y + 6 * v
            for j in range(2):
                if tr.vseg[2 * v + j] >= 0:
                    Js = Jv + tr.vseg[2 * v + j]
                    for a in range(6):
                        Wv[a] += Js[a]
            q = tr.vpar[v]
            if n == 1:
                # (one dof: y a number, the only entry the pairs read)
                Yv[0] = dot6(S, Wv) * Lk[0]
                if q < 0:
                    continue
                h[0] = Yv[0] * Lk[0]
                for a in range(6):
                    b[a] = Wv[a] - Uk[a] * h[0]
            else:
                for j in range(6):
                    Yv[j] = dot6(S + 6 * j, Wv) if j < n else 0.0
                lower_solve(Lk, n, Yv)
                if q < 0 or n == 6:
                    continue
                # X^T (w - U D^-1 S^T w) = X^T (w + U Ld^-T (-y)) to the parent's visit
                for j in range(n):
                    h[j] = -Yv[j]
                upper_solve(Lk, n, h)
                for a in range(6):
                    b[a] = Wv[a]
                S_mul_add(Uk, n, h, b)
            to_parent_add(g, k, b, t.W + 6 * q)
    for k in range(tr.ch.nnz):
        KL[k] = 0.0
    for k in range(g.nb):
        # every pair i <= j of the body's visits, in the plan's order
        n = g.nvi[k]
        p = tr.pptr[k]
        for v in range(tr.vptr[k], tr.vptr[k + 1]):
            y1 = t.Y + 6 * v
            # (y1's entries held in locals: KL's stores may not touch them)
            a0 = y1[0]
            if n == 1:
                for j in range(v, tr.vptr[k + 1]):
                    KL[tr.pdst[p]] += a0 * t.Y[6 * j]
                    p += 1
            elif n <= 3:
                # (y's entries past n are zero: the same sum as dot6's)
                a1 = y1[1]
                a2 = y1[2]
                for j in range(v, tr.vptr[k + 1]):
                    y2 = t.Y + 6 * j
                    KL[tr.pdst[p]] += (a0 * y2[0] + a1 * y2[1]) + a2 * y2[2]
                    p += 1
            else:
                for j in range(v, tr.vptr[k + 1]):
                    KL[tr.pdst[p]] += dot6(y1, t.Y + 6 * j)
                    p += 1


cdef inline void kl_mul(const MaxTree* tr, const double* KL, const double* v, double* out) noexcept nogil:
    # out = K_L v from its lower triangle in the factor's pattern (diagonal first)
    cdef int j, p, i, n = tr.ch.n
    for j in range(n):
        out[j] = KL[tr.ch.Lp[j]] * v[j]
    for j in range(n):
        for p in range(tr.ch.Lp[j] + 1, tr.ch.Lp[j + 1]):
            i = tr.ch.Li[p]
            out[i] += KL[p] * v[j]
            out[j] += KL[p] * v[i]


cdef inline void kl_refined(int refinement, const MaxTree* tr, TreeW* t, const double* r,
                            double* mu) noexcept nogil:
    # mu = K_L^-1 r by the regularised factor, refined as _kernel's ``refined``;
    # t.e is left holding r - K_L mu
    cdef int it, i, n = tr.ch.n
    cdef double emax, rmax = 0.0
    for i in range(n):
        rmax = fmax(rmax, fabs(r[i]))
        mu[i] = r[i]
    spchol_solve_basic(&tr.ch, t.Lx, t.dep, mu)
    it = 0
    while True:
        kl_mul(tr, t.KL, mu, t.e)
        emax = 0.0
        for i in range(n):
            t.e[i] = r[i] - t.e[i]
            emax = fmax(emax, fabs(t.e[i]))
        if it == refinement or emax <= 1e-14 * rmax:
            return
        for i in range(n):
            t.de[i] = t.e[i]
        spchol_solve_basic(&tr.ch, t.Lx, t.dep, t.de)
        for i in range(n):
            mu[i] += t.de[i]
        it += 1


cdef inline int kl_factor(const MaxTree* tr, TreeW* t, double rel) noexcept nogil:
    """The factor of ``K_L + beta I`` (``K_L``'s values in ``t.KL``), ``beta
    = rel max diag``, raised 1000-fold up to 1e-6 while a pivot is not
    positive.  Returns the number of factorisations, or -1 (not positive
    definite)."""
    cdef int nL = tr.ch.n, l, k, nfac = 0
    cdef double dmax = 0.0
    for l in range(nL):
        dmax = fmax(dmax, t.KL[tr.ch.Lp[l]])
    while True:
        nfac += 1
        for k in range(tr.ch.nnz):
            t.Lx[k] = t.KL[k]
        for l in range(nL):
            t.Lx[tr.ch.Lp[l]] += rel * dmax
        if spchol_factor(&tr.ch, t.Lx, t.xs, t.dep, 0.0, 0.0) == nL:
            return nfac
        if rel >= 1e-6:
            return -1
        rel = min(max(rel, 1e-15) * 1e3, 1e-6)


cdef inline bint kl_factor_plain(const MaxTree* tr, TreeW* t) noexcept nogil:
    """The factor of ``K_L`` itself, unregularised, if every row it finds
    dependent is negligible in itself (``dep`` 2 of ``spchol_factor``: a
    row no wrench of the tree loads, such as the out-of-plane row of a
    ball closing a planar loop); False otherwise.  Then the basic solution
    is exact on the other rows and, the negligible rows' multipliers left
    at zero, the minimum-norm one to within ``row_rtol()`` relative
    (``gear/algorithms/_spchol.pxd``): no regularisation to refine away."""
    cdef int nL = tr.ch.n, l, k
    for k in range(tr.ch.nnz):
        t.Lx[k] = t.KL[k]
    spchol_factor(&tr.ch, t.Lx, t.xs, t.dep, plain_rtol(), row_rtol())
    for l in range(nL):
        if t.dep[l] == 1.0:
            return False
    return True


cdef inline void kl_apply(const MaxTree* tr, TreeW* t, int refinement) noexcept nogil:
    """``t.mu = K_L^-1 t.y`` (both in the factor's order) on the factor of
    :func:`kl_factor`, refined against ``K_L``; where ``t.y`` has no exact
    solution the part outside the range of ``K_L`` is taken out first."""
    cdef int nL = tr.ch.n, l
    cdef double emax = 0.0, rmax = 1.0
    kl_refined(refinement, tr, t, t.y, t.mu)
    for l in range(nL):
        emax = fmax(emax, fabs(t.e[l]))
        rmax = fmax(rmax, fabs(t.y[l]))
    if emax > 1e-9 * rmax:
        for l in range(nL):
            t.r[l] = t.y[l] - t.e[l]
        kl_refined(refinement, tr, t, t.r, t.mu)


cdef inline void add_loop_forces(const MaxTree* tr, int nb, TreeW* t) noexcept nogil:
    """The loop forces ``t.mu`` (in the factor's order) join the swept
    wrenches of the ``nb`` bodies: ``ft`` is linear in them and each
    visit's ``W`` is its row's share at that body, so ``ft += mu W`` over
    the visits (then the sweep down again)."""
    cdef int k, i, a
    cdef double v
    for k in range(nb):
        for i in range(tr.vptr[k], tr.vptr[k + 1]):
            v = t.mu[tr.pinv[tr.vrow[i]]]
            for a in range(6):
                t.ft[6 * k + a] += t.W[6 * i + a] * v


cdef inline int tree_forward(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                             double* ddq, double* tau, const double* fext, double* lam_out,
                             double* info, Work* w, CWork* cw) noexcept nogil:
    """Constrained forward dynamics in maximal coordinates by the tree
    route (the module docstring): the same arguments, results and statuses
    as ``maximal_forward``."""
    cdef const MaxC* x = <const MaxC*> c.mx
    cdef const MaxTree* tr = <const MaxTree*> x.tree
    cdef int nb = m.nb, nL = x.nL, nJ = x.nJ
    cdef int st, l, nfac = 0
    cdef MaxW z = maxwork(x, cw.mws)
    cdef TreeW t = treework(nb, m.nv, nL, tr.nvis, tr.ch.nnz, cw.mws + x.nws_kernel)
    cdef Topo g = joint_topo(m, w)
    st = maximal_assemble(m, c, q, dq, NULL, tau, fext, w, cw, &z, False, False)
    if st != 0:
        return st
    st = eliminate(&g, tr.I6, &t)
    if st != 0:
        return st
    sweep_up(&g, &t, z.f)
    sweep_down(&g, &t, z.dV, ddq if nL == 0 else NULL)
    if nL > 0:
        loop_schur(&g, tr, z.Jv, &t, t.KL)
        # r = c_L - J_L dV0, in the factor's order
        for l in range(nL):
            t.y[tr.pinv[l]] = row_residual(x, &z, nJ + l, z.dV)
        if kl_factor_plain(tr, &t):
            nfac = 1
            for l in range(nL):
                t.mu[l] = t.y[l]
            spchol_solve_basic(&tr.ch, t.Lx, t.dep, t.mu)
        else:
            nfac = kl_factor(tr, &t, x.rel)
            if nfac < 0:
                return ST_NOT_PSD
            nfac += 1
            kl_apply(tr, &t, x.refinement)
        for l in range(nL):
            lam_out[l] = t.mu[tr.pinv[l]]
        add_loop_forces(tr, nb, &t)
        sweep_down(&g, &t, z.dV, ddq)
    maximal_readback(m, c, x, &z, w, cw, ddq, info, False)
    info[0] = nfac if nfac > 0 else 1         # the tree's elimination, or K_L's factorisations
    return 0


cdef inline int maximal_dynamics(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                                 double* ddq, double* tau, const double* fext, double* lam_out,
                                 double* info, Work* w, CWork* cw) noexcept nogil:
    """The ``"maximal"`` solver's forward (or hybrid) dynamics by the route
    of its plan: the tree-ordered factorisation when the plan has one, else
    CHOLMOD's (``maximal_forward``)."""
    if (<const MaxC*> c.mx).tree != NULL:
        return tree_forward(m, c, q, dq, ddq, tau, fext, lam_out, info, w, cw)
    return maximal_forward(m, c, q, dq, ddq, tau, fext, lam_out, info, w, cw)

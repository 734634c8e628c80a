# cython: language_level=3
"""The dense route of the closed-loop kernels: constrained forward and
hybrid dynamics by building ``M`` (``closed_dense``; the route Kim, Lie
Group Formulation of Articulated Rigid Body Dynamics, eqs. 67-69 avoid,
kept to show where each wins).

CRBA and RNEA give ``M`` and the bias ``b``; Featherstone's tree-sparse
factorisation ``M = L^T L`` (Featherstone, Rigid Body Dynamics
Algorithms, Sec. 6.5: no fill-in, cost the sum of squared dof depths),
packed by ancestors (``gear/algorithms/_dense.pxd``), then

    x = L^{-T} (tau - b),   Y = L^{-T} A^T,   K = A M^{-1} A^T = Y^T Y,
    K lam = -(Y^T x + dA dq),   ddq = L^{-1} (x + Y lam)

with Y computed on the row groups' pieces of root paths (``_groups.pxd``).
K is formed dense (``dense_gram``) and solved for the minimum-norm ``lam``
(``_psd.pxd``), or by Cholesky of ``K + cfm I`` for soft rows; with a
sparse plan (``ClosC.sp``) it is never formed dense (``_sparse_route.pxd``).
Hybrid dynamics (Kim eqs. 70-77) factorise ``M_vv`` and finish with the
prescribed joints' torques (``dense_finish``).
"""
from libc.math cimport sqrt
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._rnea cimport rnea
from gear.algorithms._common cimport forward_pass
from gear.algorithms._crba cimport crba_packed
from gear.algorithms._dense cimport (chol_factor, chol_solve, tree_factor, tree_solve_Lt, tree_solve_L,
                                     tree_path_solve_Lt)
from gear.constraints._cwork cimport ST_MASS_NOT_PD, ROWS_POSE, ROWS_BIAS, ROWS_ALL, ClosC, CWork
from gear.constraints._rows cimport (world_rows, world_rows_times,
                                     applied_forces)
from gear.constraints._psd cimport psd_factor, psd_apply
from gear.constraints._groups cimport (RowGroup, dense_groups, group_pieces, group_block, path_dot,
                                       path_axpy)
from gear.constraints._sparse_route cimport sparse_factor, sparse_solve_factored


cdef inline void dense_gram(const ModelC* m, CWork* cw, const RowGroup* G, int ng,
                            int na) noexcept nogil:
    """``cw.K = Y^T Y`` (na x na) from the groups' columns of Y, block by
    block (the blocks on and above the diagonal, then mirrored)."""
    cdef int a, b, i, j
    cdef double* Kr
    for i in range(na * na):
        cw.K[i] = 0.0
    for a in range(ng):
        for b in range(a, ng):
            group_block(m, cw, &G[a], &G[b], cw.K + G[a].a0 * na + G[b].a0, na)
    for i in range(na):
        Kr = cw.K + i * na
        for j in range(i):
            Kr[j] = cw.K[j * na + i]


cdef inline void scatter_lam(int nr, int na, CWork* cw, double* lam) noexcept nogil:
    # lam = the multipliers cw.lc of the active rows, zero on the others
    cdef int r
    for r in range(nr):
        lam[r] = 0.0
    for r in range(na):
        lam[<int> cw.act[r]] = cw.lc[r]


cdef inline int closed_dense(const ModelC* m, const ClosC* c, const double* q,
                             const double* dq, double* ddq, double* tau,
                             const unsigned char* pres, const double* fext, double* lam,
                             double* info, Work* w, CWork* cw, bint residual=True) noexcept nogil:
    """Constrained forward dynamics by building ``M`` (the route Kim's
    eqs. 67-69 avoid; kept to show where each wins): CRBA, RNEA for the
    bias, then Featherstone's tree-sparse factorisation ``M = L^T L``
    (RBDA Sec. 6.5: no fill-in, cost sum of squared dof depths), packed by
    ancestors (``_dense.pxd``), and

        x = L^{-T} (tau - b),   Y = L^{-T} A^T,   K = A M^{-1} A^T = Y^T Y,
        K lam = -(Y^T x + dA dq)        (Y^T x = A M^{-1} (tau - b)),
        ddq = L^{-1} (x + Y lam).

    A row of A is the sum of its closure's two sides, each non-zero only
    on the root path of its body (a coupler row: of its two dofs), so the
    row lives on the first side's path (the "main" piece, by depth) plus
    the part of the second side's path below the common ancestors (the
    "tail"), and so does its column of Y, since L^{-T} keeps a root path's
    support.  The rows of one closure share these pieces and are solved
    together on them (a ``RowGroup``); K's block of two groups is a sum
    over the depths where their pieces meet.  Rows of A that are exactly
    zero are left out (zero multiplier).  With ``c.cfm > 0`` (the soft
    solver) every row is kept and ``(K + cfm I) lam = rhs - damping A dq``
    is solved by Cholesky.  Same outputs and status codes as
    :func:`closed_dynamics`, plus ST_MASS_NOT_PD.

    Hybrid dynamics (``pres``, per body: ``ddq`` read on the prescribed
    dofs u and written on the others v, ``tau`` the other way round, as in
    :func:`closed_dynamics`; eqs. 70-77): RNEA at ``ddq_u`` (``ddq_v = 0``)
    gives ``h = b + M_.u ddq_u``; the u rows and columns of the packed M
    are replaced by the identity, so the same factorisation is that of
    ``M_vv``; A's u columns are left out of the pieces and their term
    ``A_u ddq_u`` joins ``dA dq``.  Then ``tau_u = h_u + M_uv ddq_v -
    (A^T lam)_u`` (``dense_finish``).

    RNEA first, then :func:`dense_qphase` (what depends on ``q`` alone)
    and :func:`dense_vphase` (the rest); a projected rollout runs the two
    phases apart, to project the velocity with the first's factors."""
    cdef int ng, na, rank, st, k
    cdef double* x = ddq
    cdef double* fixed
    if pres != NULL:
        # RNEA at ddq_u (ddq_v = 0): x := b + M_.u ddq_u
        fixed = fixed_dofs(m, c, pres, cw)
        x = cw.ts
        for k in range(m.nv):
            cw.us[k] = ddq[k] if fixed[k] != 0.0 else 0.0
        rnea(m, q, dq, cw.us, fext, True, x, w)
    else:
        rnea(m, q, dq, NULL, fext, True, x, w)          # x := b(q, dq)
    st = dense_qphase(m, c, q, pres, w, cw, &ng, &na, &rank, True)
    if st != 0:
        return st
    return dense_vphase(m, c, q, dq, ddq, tau, pres, fext, lam, info, w, cw, ng, na, rank, True,
                        residual)


cdef inline double* fixed_dofs(const ModelC* m, const ClosC* c, const unsigned char* pres,
                               CWork* cw) noexcept nogil:
    # (nv,) 1 on the dofs of prescribed joints (hybrid dynamics), in cw.Pv
    cdef int i, k
    cdef double* fixed = cw.Pv + c.m
    for i in range(m.nb):
        for k in range(m.nvi[i]):
            fixed[m.iv[i] + k] = 1.0 if pres[i] else 0.0
    return fixed


cdef inline int dense_qphase(const ModelC* m, const ClosC* c, const double* q,
                             const unsigned char* pres, Work* w, CWork* cw, int* ng_out,
                             int* na_out, int* rank_out, bint after_rnea=False,
                             bint unit_mass=False) noexcept nogil:
    """The part of :func:`closed_dense` that depends on ``q`` alone: the
    joint transforms, ``M``'s tree-sparse factor (``cw.Md``; for hybrid
    dynamics that of ``M_vv``), the rows (``cw.g`` their residual), their
    groups with ``Y = L^{-T} A^T`` on the pieces (``cw.Ad``) and ``K = Y^T
    Y`` factorised (dense, or on the sparse plan's pattern; ``rank_out``
    its rank); the joint
    transforms stay in ``w`` for :func:`dense_vphase` at this ``q``.
    ``after_rnea``: RNEA has run at this ``q`` and the velocity (as
    :func:`closed_dense` does first), so the transforms are there and the
    rows' bias is already right.  ``unit_mass``: ``M`` taken as the
    identity (``L = I``, ``Y = A^T``, ``K = A A^T``: the minimum-norm
    solve of Gauss-Newton's step on the sparse route,
    ``_manifold.sparse_gauss_newton``)."""
    cdef int i, a, k, p, s1, ng, na, nr = c.m, nv = m.nv
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef double* pY[2]
    cdef double* P = cw.Md
    cdef double* D = cw.Md + nv * nv - nv
    cdef RowGroup* G = <RowGroup*> cw.gd
    cdef double* fixed = NULL           # (nv,) 1 on prescribed dofs (hybrid)
    cdef double* P0 = cw.Pq             # the packed M before the identity goes in (hybrid)
    ng_out[0] = 0
    na_out[0] = 0
    rank_out[0] = 0
    if pres != NULL:
        fixed = fixed_dofs(m, c, pres, cw)
    if not after_rnea:
        forward_pass(m, q, NULL, w, True)               # T, S
    crba_packed(m, P, D, w)                             # (reuses rnea's T and S)
    if unit_mass:
        # (CRBA still ran: the rows read its world Jacobians)
        for i in range(m.voff[nv]):
            P[i] = 0.0
        for k in range(nv):
            D[k] = 1.0
    if pres != NULL:
        for i in range(m.voff[nv]):
            P0[i] = P[i]
        # M_vv: the prescribed dofs' rows and columns become the identity
        for k in range(nv):
            if fixed[k] != 0.0:
                D[k] = 1.0
                for p in range(m.vdep[k]):
                    P[m.voff[k] + p] = 0.0
            else:
                for p in range(m.vdep[k]):
                    if fixed[m.vanc[m.voff[k] + p]] != 0.0:
                        P[m.voff[k] + p] = 0.0
    if tree_factor(P, D, nv, m.vdep, m.voff, m.vanc) != 0:
        return ST_MASS_NOT_PD
    if nr == 0:
        return 0
    # rnea's forward pass left T, S, V, eta for these (q, dq) (or, without
    # it, zero velocities: the bias follows in the velocity pass); with
    # ddq_u in RNEA its dV are not the bias accelerations: recompute them
    st = world_rows(m, c, q, w, cw, pres == NULL, ROWS_ALL if after_rnea else ROWS_POSE)
    if st != 0:
        return st
    ng = dense_groups(m, c, w, cw, G, &na, fixed, c.cfm > 0.0 or c.sp != NULL)
    for i in range(nr):
        cw.rdep[i] = 2.0                 # (rows left out, exactly zero: dependent)
    # Y = L^{-T} A^T on the pieces, in place (the tail first: it updates the main piece)
    for a in range(ng):
        group_pieces(m, cw, &G[a], pk, plo, phi, pY)
        for s1 in range(1, -1, -1):
            # (main piece k = -1: a soft row with no dofs on either side)
            if pk[s1] >= 0:
                tree_path_solve_Lt(P, D, m.vdep, m.voff, m.vanc, pk[s1], pY[s1], G[a].g,
                                   plo[s1], pY[0], phi[0])
    ng_out[0] = ng
    na_out[0] = na
    if c.sp != NULL:
        # the sparse route: K = Y^T Y on its pattern, never formed dense
        k = sparse_factor(m, c, cw, G, ng)
        if k < 0:
            return k              # ST_SPARSE_PATTERN
        rank_out[0] = k
        return 0
    dense_gram(m, cw, G, ng, na)
    if c.cfm > 0.0:
        # soft: K + cfm I, positive definite
        for a in range(na):
            cw.K[a * na + a] += c.cfm
        if chol_factor(cw.K, na) != 0:
            return ST_MASS_NOT_PD
        for a in range(na):
            cw.rdep[<int> cw.act[a]] = 0.0
        rank_out[0] = na
    else:
        rank_out[0] = psd_factor(cw.K, na, cw, c.rcond, cw.act, True)
    return 0


cdef inline int dense_vphase(const ModelC* m, const ClosC* c, const double* q,
                             const double* dq, double* ddq, double* tau,
                             const unsigned char* pres, const double* fext, double* lam,
                             double* info, Work* w, CWork* cw, int ng, int na,
                             int rank, bint after_rnea=False, bint residual=True) noexcept nogil:
    """The rest of :func:`closed_dense` after :func:`dense_qphase` at the
    same ``q``: RNEA's bias at ``dq``, the rows' bias, the right-hand side
    and the solve with ``K``'s factor.  ``after_rnea``: both biases are
    there already (RNEA's in ``ddq``, or ``cw.ts`` for hybrid dynamics).
    ``residual`` False: ``info[1]`` is left at zero (rollouts do not
    read it)."""
    cdef int i, j, a, k, s1, st, nr = c.m, nv = m.nv
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef double* pY[2]
    cdef double t, acc2
    cdef double* P = cw.Md
    cdef double* D = cw.Md + nv * nv - nv
    cdef RowGroup* G = <RowGroup*> cw.gd
    cdef double* x = ddq                # x = L^{-T} (tau - b), then L^{-1} (x + Y lam)
    cdef double* fixed = NULL
    cdef double* Aud = cw.Pv            # (m,) A_u ddq_u (hybrid)
    cdef double* h = cw.Pv + nr + nv    # (nv,) b + M_.u ddq_u (hybrid)
    cdef double* P0 = cw.Pq
    if pres != NULL:
        fixed = cw.Pv + nr
        x = cw.ts
        if not after_rnea:
            for k in range(nv):
                cw.us[k] = ddq[k] if fixed[k] != 0.0 else 0.0
    if not after_rnea:
        w.poses_ok = True               # dense_qphase's transforms are those of q
        rnea(m, q, dq, cw.us if pres != NULL else NULL, fext, True, x, w)   # x := b (+ M_.u ddq_u)
    if pres != NULL:
        for i in range(nv):
            h[i] = x[i]
    for i in range(nv):
        x[i] = tau[i] - x[i]
    if pres != NULL:
        for k in range(nv):
            if fixed[k] != 0.0:
                x[k] = 0.0
    tree_solve_Lt(P, D, nv, m.vdep, m.voff, m.vanc, x)
    info[0] = 0.0
    info[1] = 0.0
    if nr == 0:
        tree_solve_L(P, D, nv, m.vdep, m.voff, m.vanc, x)
        return dense_finish(m, c, ddq, tau, pres, lam, x, fixed, P0, h, w, cw)
    if not after_rnea:
        # the rows' bias at dq (dense_qphase's rows were at zero velocity)
        st = world_rows(m, c, q, w, cw, pres == NULL, ROWS_BIAS)
        if st != 0:
            return st
    if pres != NULL:
        world_rows_times(m, c, w, cw, cw.us, Aud)         # A_u ddq_u
    if c.damping != 0.0 and dq != NULL:
        world_rows_times(m, c, w, cw, dq, cw.g)           # A dq
    # rhs = -(A M^{-1} (tau - b) + dA dq)                                  (eq. 67)
    for a in range(ng):
        group_pieces(m, cw, &G[a], pk, plo, phi, pY)
        for j in range(G[a].g):
            i = G[a].a0 + j
            t = cw.bias[<int> cw.act[i]]
            for s1 in range(2):
                t += path_dot(m, pk[s1], plo[s1], pY[s1] + j * (phi[s1] - plo[s1]), x)
            if c.damping != 0.0 and dq != NULL:
                t += c.damping * cw.g[<int> cw.act[i]]
            if pres != NULL:
                t += Aud[<int> cw.act[i]]
            cw.rhs[i] = -t
    st = k_solve(m, c, cw, ng, na)
    if st < 0:
        return st                 # ST_SPARSE_REDUNDANT
    info[0] = rank                # (K + cfm I: na)
    scatter_lam(nr, na, cw, lam)
    # ddq = L^{-1} (x + Y lam)                                           (eq. 69)
    dense_back_solve(m, cw, ng, cw.lc, x)
    st = dense_finish(m, c, ddq, tau, pres, lam, x, fixed, P0, h, w, cw)
    if not residual:
        return st
    # |A ddq + dA dq| over every row, A ddq from the body motions
    world_rows_times(m, c, w, cw, ddq, cw.g)
    acc2 = 0.0
    for i in range(nr):
        t = cw.g[i] + cw.bias[i]
        acc2 += t * t
    info[1] = sqrt(acc2)
    return st


cdef inline int k_solve(const ModelC* m, const ClosC* c, CWork* cw, int ng, int na,
                        bint min_norm=True) noexcept nogil:
    """``cw.lc`` from ``cw.rhs`` (one value per active row) on
    :func:`dense_qphase`'s factor of ``K``: the sparse plan's
    (``sparse_solve_factored``, minimum-norm), ``K + cfm I``'s Cholesky
    (soft rows) or the pivoted PSD factor (``min_norm`` False: its basic
    solution, ``psd_apply``).  Returns 0 or ST_SPARSE_REDUNDANT."""
    cdef int a
    if c.sp != NULL:
        return sparse_solve_factored(m, c, cw, <const RowGroup*> cw.gd, ng)
    if c.cfm > 0.0:
        for a in range(na):
            cw.lc[a] = cw.rhs[a]
        chol_solve(cw.K, na, cw.lc, 1)
        return 0
    psd_apply(cw.K, na, cw.rhs, cw.lc, cw, min_norm)
    return 0


cdef inline void dense_back_solve(const ModelC* m, CWork* cw, int ng, const double* y,
                                  double* x) noexcept nogil:
    """``x <- L^{-1} (x + Y y)`` with :func:`dense_qphase`'s factor and
    pieces (``y``: one value per active row, group by group): with ``x =
    L^{-T} f`` it gives ``M^{-1} (f + A^T y)``."""
    cdef int a, s1, nv = m.nv
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef double* pY[2]
    cdef RowGroup* G = <RowGroup*> cw.gd
    for a in range(ng):
        group_pieces(m, cw, &G[a], pk, plo, phi, pY)
        for s1 in range(2):
            if pk[s1] >= 0:
                path_axpy(m, pk[s1], plo[s1], pY[s1], G[a].g, y + G[a].a0, x)
    tree_solve_L(cw.Md, cw.Md + nv * nv - nv, nv, m.vdep, m.voff, m.vanc, x)


cdef inline int dense_finish(const ModelC* m, const ClosC* c, double* ddq, double* tau,
                             const unsigned char* pres, const double* lam, const double* x,
                             const double* fixed, const double* P0, const double* h, Work* w,
                             CWork* cw) noexcept nogil:
    """Hybrid dynamics' last step on the dense route: ``ddq_v = x_v`` and

        tau_u = (M ddq + b - A^T lam)_u = h_u + M_uv ddq_v - (A^T lam)_u

    with ``h = b + M_.u ddq_u`` from the first RNEA and ``M_uv`` from the
    packed M as CRBA left it (``P0``: the entries coupling a prescribed and
    a free dof are read, each from the row of the deeper one).  ``cw.xs``
    scratch.  Forward dynamics (``pres`` NULL): nothing to do (x is ddq)."""
    cdef int k, p, j
    if pres == NULL:
        return 0
    for k in range(m.nv):
        if fixed[k] == 0.0:
            ddq[k] = x[k]
        else:
            tau[k] = h[k]
    for k in range(m.nv):
        for p in range(m.vdep[k]):
            j = m.vanc[m.voff[k] + p]
            if fixed[k] != 0.0 and fixed[j] == 0.0:
                tau[k] += P0[m.voff[k] + p] * ddq[j]
            elif fixed[k] == 0.0 and fixed[j] != 0.0:
                tau[j] += P0[m.voff[k] + p] * ddq[k]
    if c.m > 0:
        applied_forces(m, c, w, cw, lam, cw.xs)
        for k in range(m.nv):
            if fixed[k] != 0.0:
                tau[k] -= cw.xs[k]
    return 0


cdef inline int closed_forward_dense(const ModelC* m, const ClosC* c, const double* q,
                                     const double* dq, double* ddq, const double* tau,
                                     const double* fext, double* lam, double* info, Work* w,
                                     CWork* cw, bint residual=True) noexcept nogil:
    """Forward dynamics by :func:`closed_dense` (``tau`` read only)."""
    return closed_dense(m, c, q, dq, ddq, <double*> tau, NULL, fext, lam, info, w, cw, residual)

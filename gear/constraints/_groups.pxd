# cython: language_level=3
"""Row groups of the dense and sparse routes and their pieces of
``Y = L^{-T} A^T`` on root paths (``M = L^T L`` factorised by
Featherstone's tree-sparse algorithm: Featherstone, Rigid Body Dynamics
Algorithms, Sec. 6.5).

A row of A is the sum of its closure's two sides, each non-zero only on
the root path of its body (a coupler row: of its two dofs), so the row
lives on the first side's path (the "main" piece, by depth) plus the part
of the second side's path below the common ancestors (the "tail"), and so
does its column of Y, since ``L^{-T}`` keeps a root path's support.  The
rows of one closure (at most six; a coupler row alone) share these pieces
and are solved together on them: a ``RowGroup`` (``dense_groups`` forms
them and A's values on their pieces, ``side_values`` one side's values,
``group_pieces`` a group's two pieces).  K's block of two groups is a sum
over the depths where their pieces meet, up to their paths' common
ancestors (``group_block``, ``block_add``); ``path_dot`` and
``path_axpy`` apply a piece to a vector of dofs.
"""
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._dense cimport gather_dot
from gear.constraints._cwork cimport ROW_COUPLER, ClosC, CWork
from gear.constraints._rows cimport body_dof, path_dof, path_len, path_common


cdef struct RowGroup:
    # the rows of one closure (or one coupler row) on the dense route, with
    # their values on two pieces of root paths (see closed_forward_dense)
    int a0      # first active index (into cw.act, cw.lc and K)
    int g       # rows (active ones only)
    int k1      # deepest dof of the main piece's path (-1: none)
    int k2      # deepest dof of the tail's path (-1: no tail)
    int lo      # first depth of the tail (below the two paths' common ancestors)
    int off     # offset of the values in cw.Ad: the main piece's g columns, then the tail's


cdef inline void side_values(const ModelC* m, const ClosC* c, const Work* w, const CWork* cw,
                             int r0, int g, int side, int kd, double* V) noexcept nogil:
    """Rows r0 .. r0 + g - 1 of A restricted to the root path of dof ``kd``,
    from side ``side`` of their closure (a coupler row: its dof ``ri`` on
    side 0, ``-rcoef`` at ``rj`` on side 1), by depth: row r0 + j at depth
    p in ``V[j n + p]``, n = depth(kd) + 1.  As in ``dense_rows``:
    ``A_r[v] = S0_v^T F0`` with the world-frame Jacobians ``S0`` that
    ``crba_packed`` leaves in ``w.U`` and the world-frame wrenches of
    ``closure_rows`` (``world``)."""
    cdef int r, col, i, b, p, n = m.vdep[kd] + 1
    cdef const double* S
    cdef const double* F
    if c.rtype[r0] == ROW_COUPLER:
        for i in range(n):
            V[i] = 0.0
        V[n - 1] = 1.0 if side == 0 else -c.rcoef[r0]
        return
    b = c.body_a[c.rk[r0]] if side == 0 else c.body_b[c.rk[r0]]
    i = b
    while i >= 0:
        for r in range(m.nvi[i]):
            S = w.U + 36 * i + 6 * r
            p = m.vdep[m.iv[i]] + r
            for col in range(g):
                F = cw.F + 12 * (r0 + col) + 6 * side
                V[col * n + p] = (S[0] * F[0] + S[1] * F[1] + S[2] * F[2]
                                  + S[3] * F[3] + S[4] * F[4] + S[5] * F[5])
        i = m.parent[i]


cdef inline int dense_groups(const ModelC* m, const ClosC* c, const Work* w, CWork* cw,
                             RowGroup* G, int* na_out, const double* fixed,
                             bint keep) noexcept nogil:
    """The row groups of the dense route and A's values on their pieces
    (in ``cw.Ad``), rows of A that are exactly zero left out unless
    ``keep`` (the soft solver and the sparse route keep every row).  ``fixed`` (nv,) or NULL: dofs whose columns
    are left out (set to zero: the prescribed dofs of hybrid dynamics).
    Writes the active rows into ``cw.act``, their count into ``na_out``;
    returns the number of groups."""
    cdef int j, i, p, g, ga, k1, k2, n0, n1, nt, nc, r0 = 0, na = 0, ng = 0, off = 0
    cdef double* V0
    cdef double* V1
    cdef bint nz
    while r0 < c.m:
        g = 1
        if c.rtype[r0] == ROW_COUPLER:
            k1 = c.ri[r0]
            k2 = c.rj[r0]
        else:
            while (g < 6 and r0 + g < c.m and c.rtype[r0 + g] != ROW_COUPLER
                   and c.rk[r0 + g] == c.rk[r0]):
                g += 1
            k1 = body_dof(m, c.body_a[c.rk[r0]])
            k2 = body_dof(m, c.body_b[c.rk[r0]])
        n0 = path_len(m, k1)
        n1 = path_len(m, k2)
        nc = 0
        nt = 0
        V0 = cw.Ad + off
        V1 = V0 + n0 * g
        if k1 >= 0:
            side_values(m, c, w, cw, r0, g, 0, k1, V0)
        if k2 >= 0:
            side_values(m, c, w, cw, r0, g, 1, k2, V1)
            if k1 < 0:
                # side 1 alone: it is the main piece
                k1 = k2
                k2 = -1
                n0 = n1
            else:
                # side 1 on the common ancestors goes into the main piece
                # (summed as dense A would be), the rest is the tail
                nc = path_common(m, k1, k2, 0, n0 if n0 < n1 else n1)
                nt = n1 - nc
                for j in range(g):
                    for p in range(nc):
                        V0[j * n0 + p] += V1[j * n1 + p]
                    for p in range(nt):
                        V1[j * nt + p] = V1[j * n1 + nc + p]
        if fixed != NULL:
            for p in range(n0):
                if fixed[path_dof(m, k1, p)] != 0.0:
                    for j in range(g):
                        V0[j * n0 + p] = 0.0
            for p in range(nt):
                if fixed[path_dof(m, k2, nc + p)] != 0.0:
                    for j in range(g):
                        V1[j * nt + p] = 0.0
        # keep the rows that are not exactly zero, compacted in place
        ga = 0
        for j in range(g):
            nz = keep
            p = 0
            while not nz and p < n0:
                nz = V0[j * n0 + p] != 0.0
                p += 1
            p = 0
            while not nz and p < nt:
                nz = V1[j * nt + p] != 0.0
                p += 1
            if nz:
                cw.act[na + ga] = r0 + j
                ga += 1
        if ga > 0:
            if ga != g:
                for j in range(ga):
                    i = <int> cw.act[na + j] - r0
                    for p in range(n0):
                        V0[j * n0 + p] = V0[i * n0 + p]
                for j in range(ga):
                    i = <int> cw.act[na + j] - r0
                    for p in range(nt):
                        V0[n0 * ga + j * nt + p] = V1[i * nt + p]
            G[ng].a0 = na
            G[ng].g = ga
            G[ng].k1 = k1
            G[ng].k2 = k2 if nt > 0 else -1
            G[ng].lo = nc
            G[ng].off = off
            ng += 1
            na += ga
            off += (n0 + nt) * ga
        r0 += g
    na_out[0] = na
    return ng


cdef inline void group_pieces(const ModelC* m, const CWork* cw, const RowGroup* G, int* k,
                              int* lo, int* hi, double** Y) noexcept nogil:
    # the group's two pieces: deepest dof, depth range [lo, hi) and columns
    # of Y (the main piece from depth 0, then the tail from G.lo)
    k[0] = G.k1
    k[1] = G.k2
    lo[0] = 0
    lo[1] = G.lo
    hi[0] = path_len(m, k[0])
    hi[1] = path_len(m, k[1])
    Y[0] = cw.Ad + G.off
    Y[1] = Y[0] + hi[0] * G.g


cdef inline double path_dot(const ModelC* m, int kd, int lo, const double* V,
                            const double* x) noexcept nogil:
    # sum over the depths p >= lo of the root path of dof kd: V[p - lo] x[dof at p]
    cdef int n
    if kd < 0:
        return 0.0
    n = m.vdep[kd]
    return gather_dot(V, m.vanc + m.voff[kd] + lo, x, n - lo) + V[n - lo] * x[kd]


cdef inline void path_axpy(const ModelC* m, int kd, int lo, const double* V, int g,
                           const double* y, double* x) noexcept nogil:
    # x[dof at p] += sum_j V[j n + p - lo] y[j] over the depths p >= lo of
    # the root path of dof kd (n = depth(kd) + 1 - lo)
    cdef int p, j, n = m.vdep[kd] + 1 - lo
    cdef double t
    for p in range(lo, m.vdep[kd] + 1):
        t = 0.0
        for j in range(g):
            t += V[j * n + p - lo] * y[j]
        x[path_dof(m, kd, p)] += t


cdef inline void block_add(const double* Y1, int ld1, int g1, const double* Y2, int ld2,
                           int g2, int n, double* K, int ld) noexcept nogil:
    """K[:g1, :g2] (leading dimension ld) += Y1^T Y2 over n rows, for the
    columns Y1[i ld1 : i ld1 + n] and Y2[j ld2 : j ld2 + n]: two entries of
    a row of K at a time, each with two running sums (independent chains
    of additions)."""
    cdef int i, j, p
    cdef double s0, s1, t0, t1
    cdef const double* a
    cdef const double* b0
    cdef const double* b1
    for i in range(g1):
        a = Y1 + i * ld1
        j = 0
        while j < g2:
            b0 = Y2 + j * ld2
            b1 = b0 + ld2 if j + 1 < g2 else b0
            s0 = s1 = t0 = t1 = 0.0
            p = 0
            while p + 2 <= n:
                s0 += a[p] * b0[p]
                s1 += a[p] * b1[p]
                t0 += a[p + 1] * b0[p + 1]
                t1 += a[p + 1] * b1[p + 1]
                p += 2
            if p < n:
                s0 += a[p] * b0[p]
                s1 += a[p] * b1[p]
            K[i * ld + j] += s0 + t0
            if j + 1 < g2:
                K[i * ld + j + 1] += s1 + t1
            j += 2


cdef inline void group_block(const ModelC* m, const CWork* cw, const RowGroup* Ga,
                             const RowGroup* Gb, double* K, int ld) noexcept nogil:
    """``K[:g_a, :g_b] += Y_a^T Y_b`` (leading dimension ld) for two groups'
    columns of Y: two pieces meet on the depths both cover, up to their
    paths' common ancestors."""
    cdef int s1, s2, lo, hi
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef int qk[2]
    cdef int qlo[2]
    cdef int qhi[2]
    cdef double* pY[2]
    cdef double* qY[2]
    group_pieces(m, cw, Ga, pk, plo, phi, pY)
    group_pieces(m, cw, Gb, qk, qlo, qhi, qY)
    for s1 in range(2):
        if pk[s1] < 0:
            continue
        for s2 in range(2):
            if qk[s2] < 0:
                continue
            lo = plo[s1] if plo[s1] > qlo[s2] else qlo[s2]
            hi = phi[s1] if phi[s1] < qhi[s2] else qhi[s2]
            hi = path_common(m, pk[s1], qk[s2], lo, hi)
            if hi > lo:
                block_add(pY[s1] + lo - plo[s1], phi[s1] - plo[s1], Ga.g,
                          qY[s2] + lo - qlo[s2], qhi[s2] - qlo[s2], Gb.g, hi - lo, K, ld)


cdef inline void groups_axpy(const ModelC* m, const CWork* cw, const RowGroup* G, int ng,
                             const double* lam, double* z) noexcept nogil:
    """``z = sum_r lam_r V_r`` (nv,) over every group row's pieces ``V_r``
    (``Y lam`` when the pieces hold Y, ``A^T lam`` when they hold A)."""
    cdef int a, j, s1
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef double* pY[2]
    for j in range(m.nv):
        z[j] = 0.0
    for a in range(ng):
        group_pieces(m, cw, &G[a], pk, plo, phi, pY)
        for s1 in range(2):
            if pk[s1] >= 0:
                path_axpy(m, pk[s1], plo[s1], pY[s1], G[a].g, lam + G[a].a0, z)


cdef inline void groups_dot(const ModelC* m, const CWork* cw, const RowGroup* G, int ng,
                            const double* x, double* out, bint add) noexcept nogil:
    """``out_r = V_r . x`` for every group row (``+=`` with ``add``): the
    row's pieces dotted with ``x`` (nv,) on their dofs."""
    cdef int a, j, s1
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef double* pY[2]
    cdef double t
    for a in range(ng):
        group_pieces(m, cw, &G[a], pk, plo, phi, pY)
        for j in range(G[a].g):
            t = 0.0
            for s1 in range(2):
                if pk[s1] >= 0:
                    t += path_dot(m, pk[s1], plo[s1], pY[s1] + j * (phi[s1] - plo[s1]), x)
            if add:
                out[G[a].a0 + j] += t
            else:
                out[G[a].a0 + j] = t


cdef inline void gram_times(const ModelC* m, const CWork* cw, const RowGroup* G, int ng,
                            const double* lam, double* z, double* out) noexcept nogil:
    """``out = Y^T (Y lam) = K lam`` (one entry per group row) without
    forming K: ``z = Y lam`` (nv,), then each row's pieces dotted with it.
    O(nnz Y)."""
    groups_axpy(m, cw, G, ng, lam, z)
    groups_dot(m, cw, G, ng, z, out, False)

# cython: language_level=3
"""The sparse route of the closed-loop kernels: ``K = Y^T Y`` assembled
only on the group pairs whose root paths meet, into a fixed pattern, and
factorised by a fixed-pattern sparse Cholesky (``sparse_factor`` in the
dense route's q-phase, ``sparse_solve_factored`` in its v-phase, for
forward and hybrid dynamics); and closed inverse
dynamics through the normal equations of ``A_p^T lam = e`` on the same
kind of pattern (``closed_inverse_sparse``).

On the dense route (``_dense_route.pxd``) the column of Y of a row is
non-zero only on the dofs of the root paths of the bodies it acts on
(``_groups.pxd``), so ``K = Y^T Y`` couples two row groups only when
those paths share a dof.  The plan (``SpKKT`` of ``_cwork.pxd``) is
structural, built once per set of rows by ``gear/constraints/sparse.py``:
the group pairs whose supports meet (the blocks of K that can be
non-zero), a fill-reducing order of the rows (approximate minimum degree,
or reverse Cuthill--McKee without CHOLMOD), the pattern of the factor and
where each entry of each pair's block lands among its values.  Each call
adds the pairs' blocks (``group_block``) into those values, plus ``cfm``
on the diagonal for soft rows, and runs the left-looking numeric
factorisation of ``gear/algorithms/_spchol.pxd`` (George and Liu,
Computer Solution of Large Sparse Positive Definite Systems; Davis,
Direct Methods for Sparse Linear Systems, Sec. 4.8), whose cost is the
factor's flop count.  Dependent rows are handled as by the dense route's
pivoted Cholesky (``_psd.pxd``): the minimum-norm multipliers, with a
bounded number of dependent rows completed (more: ST_SPARSE_REDUNDANT).
When rows are completed, two steps of iterative refinement against ``K``
itself (``K lam`` as ``Y^T (Y lam)``, never formed) follow: the
fill-reducing order may leave the rows it keeps as independent less well
conditioned than the dense route's order, and refinement recovers the
lost digits (measured: ``ddq`` of a locked random tree closed by every
closure kind, where ``K``'s smallest eigenvalue is 1e-5 of its largest,
from 5e-7 to rounding).

On a shallow spanning tree whose loops close between neighbouring
branches K is banded and the solve linear in the number of loops; on a
deep chain whose every loop spans it, K is dense and this route does the
dense route's work with more bookkeeping.
"""
from libc.math cimport sqrt, fabs
from gear.algorithms._types cimport ModelC, Work
from gear.algorithms._rnea cimport rnea
from gear.algorithms._crba cimport crba_packed
from gear.algorithms._spchol cimport spchol_factor, spchol_solve, spchol_solve_basic, row_rtol
from gear.constraints._cwork cimport (SpKKT, SpInv, ClosC, CWork, ST_SPARSE_REDUNDANT,
                                      ST_SPARSE_PATTERN, ST_INEXACT, sparse_inverse_offset)
from gear.constraints._rows cimport world_kinematics, closure_rows
from gear.constraints._groups cimport (RowGroup, dense_groups, group_pieces, block_add,
                                       gram_times, groups_dot, groups_axpy)


cdef inline int sparse_factor(const ModelC* m, const ClosC* c, CWork* cw,
                              const RowGroup* G, int ng) noexcept nogil:
    """``K = Y^T Y`` (plus ``cfm I`` for soft rows) assembled block by
    block into the pattern of its factor -- only the group pairs whose
    rows' supports meet -- and factorised by ``_spchol.pxd`` into
    ``cw.sws`` (the factor's values, then its dependent-row marks), for
    :func:`sparse_solve_factored`.  Returns the rank, or
    ST_SPARSE_PATTERN when a row the plan left out is not zero."""
    cdef const SpKKT* sp = c.sp
    cdef int n = sp.ch.n, p, i, j, t, ga, gb, r
    cdef double* Lx = cw.sws
    cdef double* held
    cdef double* dep = Lx + sp.ch.nnz
    cdef double* x = dep + n
    cdef double blk[36]
    cdef int s1, s2, lo, hi
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef int qk[2]
    cdef int qlo[2]
    cdef int qhi[2]
    cdef double* pY[2]
    cdef double* qY[2]
    for t in range(sp.ch.nnz):
        Lx[t] = 0.0
    for p in range(sp.npair):
        ga = G[sp.pga[p]].g
        gb = G[sp.pgb[p]].g
        for i in range(ga * gb):
            blk[i] = 0.0
        # Y_a^T Y_b on the depths the pieces share (planned: no path search)
        group_pieces(m, cw, &G[sp.pga[p]], pk, plo, phi, pY)
        group_pieces(m, cw, &G[sp.pgb[p]], qk, qlo, qhi, qY)
        for t in range(sp.coff[p], sp.coff[p + 1]):
            s1 = sp.comb[4 * t]
            s2 = sp.comb[4 * t + 1]
            lo = sp.comb[4 * t + 2]
            hi = sp.comb[4 * t + 3]
            block_add(pY[s1] + lo - plo[s1], phi[s1] - plo[s1], ga,
                      qY[s2] + lo - qlo[s2], qhi[s2] - qlo[s2], gb, hi - lo, blk, gb)
        for i in range(ga * gb):
            t = sp.dst[sp.poff[p] + i]
            if t >= 0:
                Lx[t] += blk[i]
            elif t == -2 and blk[i] != 0.0:
                return ST_SPARSE_PATTERN
    if c.cfm > 0.0:
        for j in range(n):
            Lx[sp.ch.Lp[j]] += c.cfm
    held = NULL
    if cw.hold and c.cfm == 0.0:
        # the rows held dependent, in the factor's order (scratch after x)
        held = x + n
        for j in range(n):
            held[j] = 0.0
        for i in range(sp.m):
            if sp.pinv[i] >= 0:
                held[sp.pinv[i]] = cw.held[i]
    r = spchol_factor(&sp.ch, Lx, x, dep, c.rcond, row_rtol(), held)
    for i in range(sp.m):
        cw.rdep[i] = 2.0 if sp.pinv[i] < 0 else dep[sp.pinv[i]]
    return r


cdef inline int sparse_solve_factored(const ModelC* m, const ClosC* c, CWork* cw,
                                      const RowGroup* G, int ng) noexcept nogil:
    """The sparse route's ``lam`` (``cw.lc``) from ``cw.rhs`` on the factor
    of :func:`sparse_factor` (minimum-norm on dependent rows), refined
    when rows were completed.  Every row is kept
    (``dense_groups(keep=True)``: row r is group row r); rows the plan
    left out get a zero multiplier.  Returns 0, or ST_SPARSE_REDUNDANT
    when too many rows are dependent."""
    cdef const SpKKT* sp = c.sp
    cdef int n = sp.ch.n, i, it, completed = 0
    cdef double* Lx = cw.sws
    cdef double* dep = Lx + sp.ch.nnz
    cdef double* x = dep + n
    cdef double* y = x + n
    for i in range(n):
        if dep[i] == 1.0:
            completed = 1
    for i in range(sp.m):
        if sp.pinv[i] >= 0:
            y[sp.pinv[i]] = cw.rhs[i]
    if spchol_solve(&sp.ch, Lx, dep, y, y + n) != 0:
        return ST_SPARSE_REDUNDANT
    for i in range(sp.m):
        cw.lc[i] = y[sp.pinv[i]] if sp.pinv[i] >= 0 else 0.0
    for it in range(2 if completed else 0):
        # lam += K^+ (rhs - K lam)  (K lam = Y^T (Y lam): x holds sp.m values)
        gram_times(m, cw, G, ng, cw.lc, cw.tx, cw.tmp)
        for i in range(sp.m):
            if sp.pinv[i] >= 0:
                y[sp.pinv[i]] = cw.rhs[i] - cw.tmp[i] - c.cfm * cw.lc[i]
        spchol_solve(&sp.ch, Lx, dep, y, y + n)
        for i in range(sp.m):
            if sp.pinv[i] >= 0:
                cw.lc[i] += y[sp.pinv[i]]
    return 0


cdef inline double piece_entry(const int* pk, const int* plo, const int* phi, double** pY,
                               int j, int p) noexcept nogil:
    # entry p of row j of a group's pieces (the main piece's entries, then the tail's)
    cdef int n0 = phi[0] - plo[0]
    if p < n0:
        return pY[0][j * n0 + p]
    return pY[1][j * (phi[1] - plo[1]) + p - n0]


cdef inline int closed_inverse_sparse(const ModelC* m, const ClosC* c, const double* q,
                                      const double* dq, const double* ddq, double* tau,
                                      const unsigned char* act, const double* fext, double rcond,
                                      double* lam, double* info, Work* w,
                                      CWork* cw) noexcept nogil:
    """Closed-system inverse dynamics (Kim eqs. 56-64, the minimum-norm
    constraint force) on the sparse route, the twin of ``closed_inverse``
    of ``_inverse.pxd`` whose dense QR of ``A_p^T`` it replaces:

        tau_r = M ddq + b                            RNEA
        lam   = A_p mu,  (A_p^T A_p) mu = e          e = tau_r,p - tau_p (eq. 57)
        tau_a = tau_r,a - A_a^T lam                  eqs. (58)/(60)

    ``lam = A_p (A_p^T A_p)^+ e`` is the minimum-norm solution of
    ``A_p^T lam = e`` (any solution ``mu`` gives the same ``lam``: they
    differ in ``null(A_p)``), so the basic solution of the sparse factor
    suffices.  ``A_p^T A_p`` is assembled from the rows' pieces on root
    paths (``dense_groups``, A's values before the dense route's L^{-T})
    into the fixed pattern of ``SpInv``, with the identity on the actuated
    dofs, and factorised by ``_spchol.pxd``; the normal equations square
    the conditioning, so one step of refinement follows (the corrected
    semi-normal equations: ``mu' = (A_p^T A_p)^+ (e - A_p^T lam)``,
    ``lam += A_p mu'``).  The rank is that of ``A_p`` (pivots of
    ``A_p^T A_p`` above ``rcond`` times the largest).  Same outputs and
    status codes as ``closed_inverse``."""
    cdef const SpInv* sp = c.spi
    cdef int nv = m.nv, nr = c.m, n = sp.ch.n
    cdef int i, j, k, a, p, q2, t, e0, ne, it, st, na, ng, rank, nact = 0
    cdef int pk[2]
    cdef int plo[2]
    cdef int phi[2]
    cdef double* pY[2]
    cdef double* tr = cw.tx          # M ddq + b
    cdef double* e = cw.us           # eq. (57)'s right-hand side, 0 on actuated dofs
    cdef double* z = cw.xs           # A^T lam
    cdef double* mu = cw.ts          # (nv,)
    cdef double* Lx = cw.sws + sparse_inverse_offset(c)
    cdef double* dep = Lx + sp.ch.nnz
    cdef double* x = dep + n
    cdef double* y = x + n
    cdef RowGroup* G = <RowGroup*> cw.gd
    cdef double scale = 1.0, r2, v
    rnea(m, q, dq, ddq, fext, True, tr, w)
    for k in range(nv):
        if fabs(tr[k]) > scale:
            scale = fabs(tr[k])
        e[k] = 0.0 if act[k] else tr[k] - tau[k]
        z[k] = 0.0
        if act[k]:
            nact += 1
    for i in range(nr):
        lam[i] = 0.0
    info[0] = 0.0
    info[1] = 0.0
    if nr > 0:
        crba_packed(m, cw.Md, cw.Md + nv * nv - nv, w)    # the world Jacobians the pieces read
        world_kinematics(m, w, cw, False)                # (RNEA's dV holds ddq: not after_crba)
        st = closure_rows(m, c, q, w, cw, True)
        if st != 0:
            return st
        ng = dense_groups(m, c, w, cw, G, &na, NULL, True)
        # A_p^T A_p into the factor's pattern; the identity on actuated dofs
        for t in range(sp.ch.nnz):
            Lx[t] = 0.0
        for a in range(ng):
            group_pieces(m, cw, &G[a], pk, plo, phi, pY)
            e0 = sp.gdoff[a]
            ne = sp.gdoff[a + 1] - e0
            t = sp.goff[a]
            for p in range(ne):
                for q2 in range(p, ne):
                    if not act[sp.gdof[e0 + p]] and not act[sp.gdof[e0 + q2]]:
                        v = 0.0
                        for j in range(G[a].g):
                            v += (piece_entry(pk, plo, phi, pY, j, p)
                                  * piece_entry(pk, plo, phi, pY, j, q2))
                        Lx[sp.gdst[t]] += v
                    t += 1
        for k in range(nv):
            if act[k]:
                Lx[sp.ch.Lp[sp.pinv[k]]] = 1.0
        rank = spchol_factor(&sp.ch, Lx, x, dep, rcond, row_rtol()) - nact
        info[0] = rank if rank > 0 else 0
        for it in range(2):
            # mu = (A_p^T A_p)^+ (e - A_p^T lam);  lam += A_p mu;  z = A^T lam
            for k in range(nv):
                y[sp.pinv[k]] = 0.0 if act[k] else e[k] - z[k]
            spchol_solve_basic(&sp.ch, Lx, dep, y)
            for k in range(nv):
                mu[k] = 0.0 if act[k] else y[sp.pinv[k]]
            groups_dot(m, cw, G, ng, mu, lam, True)
            groups_axpy(m, cw, G, ng, lam, z)
    if nact < nv:
        # |A_p^T lam - e| (no rows: |e|)
        r2 = 0.0
        for k in range(nv):
            if not act[k]:
                r2 += (z[k] - e[k]) * (z[k] - e[k])
        info[1] = sqrt(r2) / scale
        if not (info[1] <= 1e-9):
            return ST_INEXACT
    for k in range(nv):
        if act[k]:
            tau[k] = tr[k] - z[k]
    return 0

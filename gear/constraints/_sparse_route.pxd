# cython: language_level=3
"""The sparse route of the closed-loop kernels: ``K = Y^T Y`` assembled
only on the group pairs whose root paths meet, into a fixed pattern, and
factorised by a fixed-pattern sparse Cholesky (``sparse_solve``).

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
from gear.algorithms._types cimport ModelC
from gear.algorithms._spchol cimport spchol_factor, spchol_solve
from gear.constraints._cwork cimport SpKKT, ClosC, CWork, ST_SPARSE_REDUNDANT, ST_SPARSE_PATTERN
from gear.constraints._groups cimport RowGroup, group_block, gram_times


cdef inline int sparse_solve(const ModelC* m, const ClosC* c, CWork* cw,
                             const RowGroup* G, int ng) noexcept nogil:
    """The sparse route's ``lam`` (``cw.lc``) from ``cw.rhs``: ``K = Y^T Y``
    (plus ``cfm I`` for soft rows) assembled block by block into the
    pattern of its factor -- only the group pairs whose rows' supports meet
    -- and solved by ``_spchol.pxd`` (minimum-norm on dependent rows), then
    refined when rows were completed.  Every row is kept
    (``dense_groups(keep=True)``: row r is group row r); rows the plan
    left out get a zero multiplier once their diagonal of K is checked to
    be zero.  ``cw.tx`` scratch.  Returns the rank, ST_SPARSE_REDUNDANT
    when too many rows are dependent, or ST_SPARSE_PATTERN when a row left
    out is not zero."""
    cdef const SpKKT* sp = c.sp
    cdef int n = sp.ch.n, p, i, j, t, ga, gb, it, completed = 0
    cdef double* Lx = cw.sws
    cdef double* dep = Lx + sp.ch.nnz
    cdef double* x = dep + n
    cdef double* y = x + n
    cdef double blk[36]
    cdef int rank
    for t in range(sp.ch.nnz):
        Lx[t] = 0.0
    for p in range(sp.npair):
        ga = G[sp.pga[p]].g
        gb = G[sp.pgb[p]].g
        for i in range(ga * gb):
            blk[i] = 0.0
        group_block(m, cw, &G[sp.pga[p]], &G[sp.pgb[p]], blk, gb)
        for i in range(ga * gb):
            t = sp.dst[sp.poff[p] + i]
            if t >= 0:
                Lx[t] += blk[i]
            elif t == -2 and blk[i] != 0.0:
                return ST_SPARSE_PATTERN
    if c.cfm > 0.0:
        for j in range(n):
            Lx[sp.ch.Lp[j]] += c.cfm
    rank = spchol_factor(&sp.ch, Lx, x, dep, c.rcond)
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
    return rank

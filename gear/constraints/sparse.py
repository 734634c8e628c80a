"""The plan of the sparse route of the ``kkt`` solver: which entries of
``K = A M^{-1} A^T`` can be non-zero, in which order to factorise it, and
where each block goes.

On the dense route (``gear/constraints/_dense_route.pxd``, ``closed_dense``),
``M = L^T L`` is factorised by Featherstone's tree-sparse algorithm
(Featherstone, "Rigid Body Dynamics Algorithms", Sec. 6.5: no fill-in) and
``Y = L^{-T} A^T`` is computed column by column on each row's root paths:
the column of a row is non-zero only on the dofs of the root paths of the
bodies it acts on.  So ``K = Y^T Y`` couples two rows only when those
paths share a dof.  On a shallow spanning tree whose loops close between
neighbouring branches (every crank of the N-four-bar pivoted on the
ground) ``K`` is banded and the whole solve linear in the number of loops;
on a deep chain whose every loop spans it, ``K`` is dense and the sparse
route does the dense route's work with more bookkeeping.

The plan is structural, built once per set of rows:

- the rows' groups as the kernel forms them (the rows of one closure, at
  most six; a coupler row alone) and each group's support (a set of dofs,
  closed under dof ancestors);
- the group pairs whose supports meet (the blocks of ``K`` that can be
  non-zero);
- a fill-reducing order of the rows (CHOLMOD's AMD when gear is built with
  CHOLMOD, else SciPy's reverse Cuthill--McKee), the factor's pattern and
  row lists (``gear._core.sparse_symbolic``);
- for each pair, where each entry of its block lands among the factor's
  values (the lower triangle in the factor's order).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import _core

__all__ = ["KKTPattern", "row_groups", "factor_pattern", "factor_positions", "MAX_COMPLETION"]

#: dependent rows that are not negligible (see ``gear/algorithms/_spchol.pxd``)
#: the sparse route completes to the minimum-norm multiplier per state
MAX_COMPLETION = 64

_COUPLER = 4


def row_groups(rtype, rk):
    """The kernel's row groups: ``(start, count)`` per group, in order --
    the rows of one closure together (at most six), a coupler row alone
    (``dense_groups`` of ``gear/constraints/_groups.pxd``)."""
    groups, r0, m = [], 0, len(rtype)
    while r0 < m:
        g = 1
        if rtype[r0] != _COUPLER:
            while g < 6 and r0 + g < m and rtype[r0 + g] != _COUPLER and rk[r0 + g] == rk[r0]:
                g += 1
        groups.append((r0, g))
        r0 += g
    return groups


def _body_dof(model, b):
    """The deepest dof on the root path of body ``b`` (-1: none)."""
    while b >= 0 and model.joints[b].nv == 0:
        b = model.parents[b]
    return -1 if b < 0 else model._iv[b] + model.joints[b].nv - 1


def _common(p1, p2, lo, hi):
    """``min(hi, c)`` for the c dofs two root paths (root first) share, or
    ``lo`` if that is not above ``lo``: they agree on a prefix, so a check at
    ``hi - 1`` and at ``lo`` and a bisection between (``path_common`` of
    ``gear/constraints/_rows.pxd``)."""
    if hi <= lo or p1[hi - 1] == p2[hi - 1]:
        return hi
    if p1[lo] != p2[lo]:
        return lo
    hi -= 1
    while hi - lo > 1:                       # agree at lo, differ at hi
        mid = (lo + hi) // 2
        if p1[mid] == p2[mid]:
            lo = mid
        else:
            hi = mid
    return lo + 1


def _ordering(pattern):
    """A fill-reducing permutation of the symmetric ``pattern`` (CSC):
    ``perm[k]`` is the row that becomes row k."""
    n = pattern.shape[0]
    low = sp.tril(pattern, format="csc")
    low.sort_indices()
    if _core.cholmod_available():
        return np.asarray(_core.cholmod_ordering(n, low.indptr, low.indices, 2), dtype=np.int64)
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    return np.asarray(reverse_cuthill_mckee(pattern.tocsr(), symmetric_mode=True), dtype=np.int64)


def factor_pattern(pattern):
    """The symbolic factorisation of a symmetric pattern (``n x n``,
    scipy.sparse, any values): a fill-reducing order (:func:`_ordering`)
    and ``gear._core.sparse_symbolic`` of the permuted pattern.  Returns
    ``(pinv, (Lp, Li, LRp, LRk, LRpos), key)``: row r becomes row
    ``pinv[r]`` of the factor, and ``key`` the sorted keys ``col * n + row``
    of the factor's entries (for :func:`factor_positions`)."""
    n = pattern.shape[0]
    pat = ((sp.csc_matrix(pattern) + sp.csc_matrix(pattern).T + sp.identity(n, format="csc")) != 0)
    pat = pat.astype(float).tocsc()
    perm = _ordering(pat)
    pinv = np.empty(n, dtype=np.int64)
    pinv[perm] = np.arange(n)
    P = sp.coo_matrix(pat)
    pr, pc = pinv[P.row], pinv[P.col]
    low = pr > pc
    R = sp.csr_matrix((np.ones(int(low.sum())), (pr[low], pc[low])), shape=(n, n))
    R.sort_indices()
    sym = _core.sparse_symbolic(n, R.indptr.astype(np.int32), R.indices.astype(np.int32))
    key = np.repeat(np.arange(n, dtype=np.int64), np.diff(sym[0])) * n + sym[1]
    return pinv, sym, key


def factor_positions(key, n, i, j):
    """Where the entries ``(i, j)`` (rows of the factor, either triangle)
    land among the factor's values: the lower entry ``(max, min)``."""
    want = np.minimum(i, j) * n + np.maximum(i, j)
    pos = np.searchsorted(key, want)
    if len(want) and (not len(key) or not np.array_equal(key[np.minimum(pos, len(key) - 1)], want)):
        raise RuntimeError("sparse plan: an entry is outside its factor's pattern")
    return pos


class KKTPattern:
    """The structure of ``K`` for the rows encoded in ``nd`` (a
    ``gear._core.ClosureData``) on ``model``: the groups, the meeting pairs,
    the fill-reducing order and the factor's pattern (see the module
    docstring).

    Attributes
    ----------
    groups : list of (int, int)
        ``(first row, rows)`` of every group.
    pga, pgb : ndarray of int32
        The meeting group pairs, ``pga <= pgb``.
    nnz_K : int
        Structurally non-zero entries of ``K`` (both triangles).
    factor_nnz : int
        Entries of its Cholesky factor in the chosen order.
    factor_flops : float
        Multiply-adds of the numeric factorisation (sum of squared column
        counts).
    """

    def __init__(self, model, nd, keep=None):
        """``keep``: bool per row, the rows the factor takes (default all);
        the others are rows of ``A`` known to be zero (their multiplier is
        zero, and the kernel checks that they still are)."""
        rtype, ri, rj, rk = (np.asarray(a)[:-1] for a in nd.arrays[:4])
        ba, bb = (np.asarray(a)[:-1] for a in nd.arrays[8:10])
        self.m = m = len(rtype)
        self.keep = np.ones(m, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
        self.groups = row_groups(rtype, rk)
        self._rows = (rtype, ri, rj, rk, ba, bb)
        self._model = model
        # a group's support: the dofs on its two sides' root paths (its pieces)
        supports = [set(main) | set(tail) for (main, _), (tail, _) in self.pieces()]
        # group pairs whose supports meet: through a group x dof incidence
        ng = len(self.groups)
        inc_r = np.repeat(np.arange(ng), [len(s) for s in supports])
        inc_c = np.fromiter((d for s in supports for d in sorted(s)), dtype=np.int64,
                            count=len(inc_r))
        B = sp.csr_matrix((np.ones(len(inc_r)), (inc_r, inc_c)), shape=(ng, max(model.nv, 1)))
        G = sp.triu(B @ B.T, format="coo")
        order = np.lexsort((G.col, G.row))
        self.pga = G.row[order].astype(np.int32)
        self.pgb = G.col[order].astype(np.int32)
        self.pair_fill = len(self.pga) / max(ng * (ng + 1) / 2, 1)
        self.size = np.array([g for _, g in self.groups], dtype=np.int64)
        self.start = np.array([r0 for r0, _ in self.groups], dtype=np.int64)
        self._symbolic = None

    @property
    def symbolic(self):
        """``(Lp, Li, LRp, LRk, LRpos)`` of ``gear._core.sparse_symbolic`` in
        the fill-reducing order (computed on first use)."""
        if self._symbolic is None:
            self._analyse()
        return self._symbolic

    @property
    def nnz_K(self):
        self.symbolic
        return self._nnz_K

    @property
    def factor_nnz(self):
        return int(np.diff(self.symbolic[0]).sum())

    @property
    def factor_flops(self):
        return float((np.diff(self.symbolic[0]).astype(float) ** 2).sum())

    def _analyse(self):
        m = self.m
        # every entry of every pair's block (row-major per block), as rows of K
        ra, rb, self.poff = self._entries()
        kept = np.flatnonzero(self.keep)
        n = len(kept)
        local = np.full(m, -1, dtype=np.int64)         # row of K -> row among the kept
        local[kept] = np.arange(n)
        both = self.keep[ra] & self.keep[rb]
        la, lb = local[ra[both]], local[rb[both]]
        pat = sp.coo_matrix((np.ones(len(la)), (la, lb)), shape=(n, n))
        pinv, self._symbolic, self._key = factor_pattern(pat)
        self._nnz_K = int(((pat + pat.T + sp.identity(n)) != 0).nnz)
        self.n = n
        self.pinv = np.full(m, -1, dtype=np.int64)
        self.pinv[kept] = pinv
        self._entry_rows = (ra, rb)

    def _entries(self):
        """Rows (i, j) of K of every entry of every pair's block, and the
        blocks' offsets."""
        ga, gb = self.size[self.pga], self.size[self.pgb]
        n = ga * gb
        poff = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
        pid = np.repeat(np.arange(len(n)), n)
        local = np.arange(int(poff[-1])) - poff[pid]
        i = self.start[self.pga][pid] + local // gb[pid]
        j = self.start[self.pgb][pid] + local % gb[pid]
        return i, j, poff

    def plan(self, nnmax=None):
        """The kernel's plan, ``gear._core.SparseKKTData``."""
        Lp, Li, LRp, LRk, LRpos = self.symbolic
        n = self.n
        ra, rb = self._entry_rows
        i, j = self.pinv[ra], self.pinv[rb]
        both = (i >= 0) & (j >= 0)
        dst = np.full(len(ra), -1, dtype=np.int64)
        dst[both] = factor_positions(self._key, n, i[both], j[both])
        diag = np.repeat(self.pga == self.pgb, np.diff(self.poff))
        dst[diag & (i < j)] = -1                         # diagonal blocks: lower entries only
        dst[~both] = -1                                  # a row left out ...
        dst[~both & (ra == rb)] = -2                     # ... whose K_rr is checked to be zero
        return _core.SparseKKTData(self.m, n, Lp, Li, LRp, LRk, LRpos, self.pinv, self.pga,
                                   self.pgb, self.poff, dst,
                                   MAX_COMPLETION if nnmax is None else nnmax, *self.pair_combos())

    def pieces(self):
        """Each group's two pieces of root paths as ``dense_groups`` of
        ``gear/constraints/_groups.pxd`` lays them out: ``((main, 0), (path,
        lo))`` with ``main`` the root path (dofs, root first) of the first
        side's deepest dof, ``path`` the second side's root path and ``lo``
        the depth where it leaves the main one (empty when there is no
        second side or it lies inside the main path)."""
        if getattr(self, "_pieces", None) is not None:
            return self._pieces
        model = self._model
        rtype, ri, rj, rk, ba, bb = self._rows
        vp = np.asarray(model.data.dof_parents())

        def path(k):                                    # root first
            out = []
            while k >= 0:
                out.append(int(k))
                k = vp[k]
            return out[::-1]

        out = []
        for r0, _ in self.groups:
            if rtype[r0] == _COUPLER:
                k1, k2 = int(ri[r0]), int(rj[r0])
            else:
                k = int(rk[r0])
                k1, k2 = _body_dof(model, int(ba[k])), _body_dof(model, int(bb[k]))
            if k1 < 0:
                k1, k2 = k2, -1
            main = path(k1) if k1 >= 0 else []
            p2, nc = [], 0
            if k2 >= 0:
                p2 = path(k2)
                while nc < min(len(main), len(p2)) and main[nc] == p2[nc]:
                    nc += 1
                if nc == len(p2):                       # inside the main path: no tail
                    p2, nc = [], 0
            out.append(((main, 0), (p2, nc)))
        self._pieces = out
        return out

    def pair_combos(self):
        """For every meeting group pair (``pga``, ``pgb``), the combinations
        of their pieces that share depths, ``(s1, s2, lo, hi)``: piece s1 of
        group a and piece s2 of group b hold the same dofs on depths
        ``[lo, hi)`` (where their ranges overlap, up to their paths' common
        ancestors).  Returns ``(coff, comb)``: pair p's combinations are
        ``comb[coff[p]:coff[p + 1]]`` (4 ints each)."""
        pcs = self.pieces()

        def ranges(a):
            (main, _), (p2, nc) = pcs[a]
            out = []
            if main:
                out.append((0, main, 0, len(main)))
            if p2:
                out.append((1, p2, nc, len(p2)))
            return out

        coff, comb = [0], []
        for a, b in zip(self.pga, self.pgb):
            for s1, path1, lo1, hi1 in ranges(int(a)):
                for s2, path2, lo2, hi2 in ranges(int(b)):
                    lo, hi = max(lo1, lo2), min(hi1, hi2)
                    hi = _common(path1, path2, lo, hi)
                    if hi > lo:
                        comb.extend((s1, s2, lo, hi))
            coff.append(len(comb) // 4)
        return np.array(coff, dtype=np.int64), np.array(comb, dtype=np.int64)

    def inverse_work(self):
        """The products per call the sparse inverse dynamics would form
        (sum over groups of its pieces' entries squared): small on shallow
        trees, quadratic in the depth on deep chains."""
        return sum((len(main) + len(tail) - lo) ** 2 for (main, _), (tail, lo) in self.pieces())

    def inverse_plan(self):
        """The plan of the sparse route's inverse dynamics,
        ``gear._core.SparseInvData``: the pattern of ``A^T A`` over the dofs
        (two dofs meet when one group's pieces hold both) in a fill-reducing
        order, and for every group the dofs of its pieces' entries (the
        main piece, the root path of its first side's deepest dof, then the
        tail, the second side's path below the common ancestors: as
        ``dense_groups`` of ``gear/constraints/_groups.pxd`` lays them out)
        with where each product of two entries lands."""
        model = self._model
        nv = model.nv
        entries = [main + tail[lo:] for (main, _), (tail, lo) in self.pieces()]
        # the pattern: every pair of one group's entries
        ii, jj = [], []
        for ent in entries:
            e = np.asarray(ent, dtype=np.int64)
            ii.append(np.repeat(e, len(e)))
            jj.append(np.tile(e, len(e)))
        ii = np.concatenate(ii) if ii else np.zeros(0, dtype=np.int64)
        jj = np.concatenate(jj) if jj else np.zeros(0, dtype=np.int64)
        pat = sp.coo_matrix((np.ones(len(ii)), (ii, jj)), shape=(nv, nv))
        pinv, (Lp, Li, LRp, LRk, LRpos), key = factor_pattern(pat)
        gdst, goff, gdof, gdoff = [], [0], [], [0]
        for ent in entries:
            e = pinv[np.asarray(ent, dtype=np.int64)]
            n = len(e)
            p, q = np.triu_indices(n)
            pos = factor_positions(key, nv, e[p], e[q])
            gdst.append(pos)
            goff.append(goff[-1] + len(pos))
            gdof.extend(ent)
            gdoff.append(gdoff[-1] + n)
        gdst = np.concatenate(gdst) if gdst else np.zeros(0, dtype=np.int64)
        return _core.SparseInvData(nv, Lp, Li, LRp, LRk, LRpos, pinv, np.array(goff), gdst,
                                   np.array(gdoff), np.array(gdof, dtype=np.int64))

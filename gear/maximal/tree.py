"""The plans of the tree-ordered factorisation of the maximal KKT system
(Baraff, "Linear-time dynamics using Lagrange multipliers", 1996): the
``"tree"`` route of the ``"maximal"`` solver (:func:`tree_plan`; the
kernel and its equations: ``gear/maximal/_tree_route.pxd``) and of the
native maximal steps (:func:`step_tree_plan`; ``gear/maximal/_tree_step.pxd``).

The bodies and their joints' rows are eliminated from the leaves to the
ground without fill.  What is planned here is the loop rows' Schur
complement ``K_L``: each loop row *visits* every body on the paths of its
two bodies to the ground, two loop rows meet where their visits share a
body, and ``K_L``'s pattern is those meetings (a fill-reducing order and
the factor's pattern from :func:`gear.constraints.sparse.factor_pattern`).
On a mechanism whose loops close across short branches of the tree (the
N-four-bar on its ground tree) ``K_L`` is banded; on a long chain every
path runs to the root and ``K_L`` is dense, where CHOLMOD's factorisation
of the whole Schur complement is the faster route (:func:`choose_route`).
"""
from __future__ import annotations

import numpy as np

from .rows import AXIS, DIST, HELIX, POS

__all__ = ["tree_plan", "visit_plan", "route_costs", "choose_route", "step_tree_plan"]


def tree_plan(ms):
    """The arrays of ``MaximalData.attach_tree`` for the rows of ``ms`` (a
    :class:`gear.maximal.MaximalSystem`), and statistics.

    Returns
    -------
    arrays : dict
        ``I6, vptr, vrow, vpar, vseg, pptr, pdst, pinv, Lp, Li,
        Rp, Rk, Rpos`` (see ``MaxTree`` in ``gear/maximal/_tree_route.pxd``).
    stats : dict
        ``visits``, ``pairs`` and ``nnz_factor`` (of ``K_L``'s factor).
    """
    nb, nJ, nL = ms.nb, ms.nJ, ms.nL
    parents = np.asarray(ms.parents)
    if np.any(parents >= np.arange(nb)):
        raise ValueError("tree plan: every body's parent must come before it")
    return visit_plan(parents, ms._la, ms._lb, nJ + np.arange(nL), ms.I6)


def visit_plan(parents, la, lb, seg_row, I6, more=None):
    """The loop rows' visits and ``K_L``'s plan on a tree whose every
    body's parent comes before it (``parents`` (nb,), -1: the ground): loop
    row ``l`` acts on bodies ``la[l]`` and ``lb[l]`` (-1: the world), with
    its two 6-blocks at ``12 seg_row[l]`` and ``+ 6`` of the kernel's (rows,
    12) array of ``J``, and (``more``: {l: [(body, offset), ...]}) on
    further bodies with the 6-blocks at those offsets (a joint coupler's
    second part).  A body takes at most two of one row's blocks.
    ``I6`` (nb, 6, 6): the bodies' inertias in the tree's order.  Returns
    ``(arrays, stats)`` as :func:`tree_plan`."""
    import scipy.sparse as sps

    from ..constraints.sparse import factor_pattern, factor_positions

    parents = np.asarray(parents)
    nb, nL = len(parents), len(seg_row)
    la, lb = np.asarray(la), np.asarray(lb)
    vis_body, vis_row, vis_seg = [], [], []
    index = {}
    more = {} if more is None else more
    for l in range(nL):
        slots = [(la[l], 12 * seg_row[l]), (lb[l], 12 * seg_row[l] + 6)] + list(more.get(l, ()))
        on = set()
        for k, _ in slots:
            while k >= 0 and k not in on:
                on.add(int(k))
                k = parents[k]
        for k in on:
            index[l, k] = len(vis_body)
            vis_body.append(k)
            vis_row.append(l)
            seg = [off for b, off in slots if b == k]
            if len(seg) > 2:
                raise ValueError(f"tree plan: loop row {l} has {len(seg)} blocks on one body (at most two)")
            vis_seg.append(tuple(seg + [-1] * (2 - len(seg))))
    nvis = len(vis_body)
    body = np.array(vis_body, dtype=np.int64)
    row = np.array(vis_row, dtype=np.int64)
    order = np.lexsort((row, body))
    new = np.empty(nvis, dtype=np.int64)
    new[order] = np.arange(nvis)
    vpar = np.full(nvis, -1, dtype=np.int64)
    for (l, k), v in index.items():
        p = parents[k]
        if p >= 0:
            vpar[new[v]] = new[index[l, p]]
    body, row = body[order], row[order]
    vseg = np.array(vis_seg, dtype=np.int64).reshape(nvis, 2)[order]
    vptr = np.searchsorted(body, np.arange(nb + 1))
    pv1, pv2 = [], []
    for k in range(nb):
        i, j = np.triu_indices(vptr[k + 1] - vptr[k])
        pv1.append(vptr[k] + i)
        pv2.append(vptr[k] + j)
    pptr = np.concatenate([[0], np.cumsum([len(x) for x in pv1])]).astype(np.int64)
    pv1 = np.concatenate(pv1) if nb else np.zeros(0, dtype=np.int64)
    pv2 = np.concatenate(pv2) if nb else np.zeros(0, dtype=np.int64)
    pattern = sps.coo_matrix((np.ones(len(pv1)), (row[pv1], row[pv2])), shape=(nL, nL))
    pinv, (Lp, Li, Rp, Rk, Rpos), key = factor_pattern(pattern)
    pdst = factor_positions(key, nL, pinv[row[pv1]], pinv[row[pv2]])
    arrays = dict(I6=np.ascontiguousarray(np.asarray(I6, dtype=float).reshape(nb, 36)), vptr=vptr, vrow=row,
                  vpar=vpar, vseg=vseg.ravel(), pptr=pptr, pdst=pdst, pinv=pinv, Lp=Lp, Li=Li,
                  Rp=Rp, Rk=Rk, Rpos=Rpos)
    return arrays, {"visits": nvis, "pairs": len(pv1), "nnz_factor": int(Lp[-1])}


def route_costs(ms, mx):
    """``(tree, cholmod)``: the products each route forms per call, a
    proxy for their cost.  The tree route's visits and pairs are counted
    from subtree sums (a loop row counted at every ancestor of each of
    its two bodies: an upper bound), without planning it; CHOLMOD's are
    the segment pairs of ``K = J Mb^-1 J^T`` and its factor's entries
    (``mx``, a ``gear._core.MaximalData``).  Per pair and per factor entry
    both do a product of 6 or a multiply-add; a visit costs about six."""
    parents = np.asarray(ms.parents)
    count = np.zeros(ms.nb)
    for side in (np.asarray(ms._la), np.asarray(ms._lb)):
        np.add.at(count, side[side >= 0], 1.0)
    for k in range(ms.nb - 1, -1, -1):
        if parents[k] >= 0:
            count[parents[k]] += count[k]
    visits = float(count.sum())
    pairs = float((count * (count + 1) / 2).sum())
    tree = pairs + 6.0 * visits
    cholmod = float(len(mx.arrays["pk"]) - 1) + 2.0 * float(mx.factor_nnz)
    return tree, cholmod


def choose_route(ms, mx):
    """``"tree"`` or ``"cholmod"`` for forward dynamics of ``ms`` (a
    :class:`gear.maximal.MaximalSystem`): the route with the smaller
    :func:`route_costs`.  On the N-four-bar this picks the tree route on
    its ground tree (N = 1 to 1000: 1.8-2.1x faster) and CHOLMOD on its
    chain tree from N = 10 on (where every loop row's path runs to the
    root and ``K_L`` fills in), as measured (docs/solvers.md)."""
    tree, cholmod = route_costs(ms, mx)
    return "tree" if tree <= cholmod else "cholmod"


def step_tree_plan(table, I6, couplers=None):
    """The tree-ordered factorisation of a :class:`gear.MaximalModel`'s
    steps (``StepTree`` in ``gear/maximal/_tree_step.pxd``): a spanning
    tree over its bodies, whose edges are joints or loop closures alike.

    In maximal coordinates every joint and every closure is a group of
    rows between two bodies (or a body and the world); which of them are
    the tree is a choice of the solve, not of the model.  The tree here
    is found breadth first from the world, so that every body is as few
    edges from the world as it can be (on the N-four-bar on its chain
    tree: each crank hangs from the world by its pivot, each coupler
    from a crank), preferring at equal depth the group with the most
    rows (they leave fewer loop rows).  A group of more than six rows,
    or of rows on one body, is never an edge.

    Parameters
    ----------
    table : gear.maximal.rows.RowTable
    I6 : ndarray, shape (nb, 6, 6)
        The bodies' inertias.
    couplers : ndarray, shape (2 nc, 2), optional
        The joint couplers' parts' bodies (child, parent; -1: the world),
        two parts a coupler (``gear.maximal.native._coupler_plan``): rows
        ``table.m ..`` on up to four bodies, loop rows always, their parts
        at ``table.m + 2 c`` and ``+ 1`` of the kernel's array of ``J``.

    Returns
    -------
    arrays : dict
        ``visit_plan``'s arrays (in the tree's order of the bodies) and
        ``body`` (the body at each position), ``tpar`` (the parent's
        position, -1: the world), ``nvi`` (6 minus the edge's rows),
        ``iv``, ``er0`` (the edge's first row, -1: no edge), ``side``
        (1: the body is the rows' {B}), ``lrow`` (the loop rows), ``lpart``
        (their parts of ``J``, two a row, -1: none), ``xb`` and ``rigid``
        (:func:`_edge_points`).
    stats : dict
        ``visits``, ``pairs``, ``nnz_factor``, ``loop_rows`` and ``rigid``.
    """
    I6 = np.asarray(I6, dtype=float).reshape(-1, 6, 6)
    nb, m = len(I6), table.m
    ia, ib = np.asarray(table.ia), np.asarray(table.ib)
    owner = list(table.owner)
    groups = []                                   # (first row, rows, body a, body b)
    r = 0
    while r < m:
        e = r + 1
        while e < m and owner[e] == owner[r] and ia[e] == ia[r] and ib[e] == ib[r]:
            e += 1
        groups.append((r, e - r, int(ia[r]), int(ib[r])))
        r = e
    at = [[] for _ in range(nb + 1)]              # the groups on each body; nb: the world
    for gi, (r0, n, a, b) in enumerate(groups):
        if a != b and n <= 6:
            at[a if a >= 0 else nb].append(gi)
            at[b if b >= 0 else nb].append(gi)
    depth = np.full(nb, -1)
    edge = np.full(nb, -1)
    order = []
    level = [nb]
    d = 0
    while level:
        best = {}
        for k in level:
            for gi in at[k]:
                r0, n, a, b = groups[gi]
                other = b if (a if a >= 0 else nb) == k else a
                if other < 0 or depth[other] >= 0:
                    continue
                if other not in best or n > groups[best[other]][1]:
                    best[other] = gi
        d += 1
        level = sorted(best)
        for k in level:
            depth[k] = d
            edge[k] = best[k]
        order.extend(level)
    order.extend(k for k in range(nb) if depth[k] < 0)      # free bodies: roots of their own
    pos = np.empty(nb, dtype=np.int64)
    pos[order] = np.arange(nb)
    tpar = np.full(nb, -1, dtype=np.int64)
    nvi = np.full(nb, 6, dtype=np.int64)
    er0 = np.full(nb, -1, dtype=np.int64)
    side = np.zeros(nb, dtype=np.int64)
    in_tree = np.zeros(m, dtype=bool)
    for k in range(nb):
        gi = edge[order[k]]
        if gi < 0:
            continue
        r0, n, a, b = groups[gi]
        body = order[k]
        other = a if b == body else b
        tpar[k] = pos[other] if other >= 0 else -1
        nvi[k] = 6 - n
        er0[k] = r0
        side[k] = 1 if b == body else 0
        in_tree[r0:r0 + n] = True
    lrow = np.flatnonzero(~in_tree)
    to_pos = lambda x: np.where(x >= 0, pos[np.maximum(x, 0)], -1)
    la, lb, seg = to_pos(ia[lrow]), to_pos(ib[lrow]), lrow
    lpart = np.stack([lrow, np.full(len(lrow), -1)], axis=1)
    more = {}
    if couplers is not None and len(couplers):
        cb = to_pos(np.asarray(couplers).reshape(-1, 2, 2))          # (nc, part, child/parent)
        nc = len(cb)
        parts = m + 2 * np.arange(nc)
        more = {len(lrow) + c: [(cb[c, 1, 0], 12 * (parts[c] + 1)), (cb[c, 1, 1], 12 * (parts[c] + 1) + 6)]
                for c in range(nc)}
        la, lb, seg = np.concatenate([la, cb[:, 0, 0]]), np.concatenate([lb, cb[:, 0, 1]]), np.concatenate([seg, parts])
        lpart = np.concatenate([lpart, np.stack([parts, parts + 1], axis=1)])
        lrow = np.concatenate([lrow, m + np.arange(nc)])
    arrays, stats = visit_plan(tpar, la, lb, seg, I6[order], more)
    iv = np.concatenate([[0], np.cumsum(nvi)[:-1]]).astype(np.int64)
    xb, rigid = _edge_points(table, er0, 6 - nvi)
    arrays.update(body=np.asarray(order, dtype=np.int64), tpar=tpar, nvi=nvi, iv=iv, er0=er0, side=side,
                  lrow=lrow, lpart=lpart.ravel(), xb=xb, rigid=np.array([int(rigid)]))
    stats["loop_rows"] = len(lrow)
    stats["rigid"] = rigid
    return arrays, stats


def _edge_points(table, er0, mk):
    """Whether every edge's parent map can be a rigid transform, and at
    which point (``_tree_step.pxd``, "rigid maps").

    Every row's two 6-blocks are ``+-c . (w, v(x))`` with one world
    covector ``c`` and the twists of its two bodies taken at points
    ``x_A``, ``x_B`` in the world: ``x_B`` is always the {B} frame's
    origin; ``x_A`` is the {A} frame's origin for ``pos`` and ``dist`` rows
    and {B}'s for ``axis`` and ``helix`` rows (their angular term ``u x d``
    moves it there); ``dot`` rows have no linear part, any point will do.
    An edge whose rows share their frames' positions and agree on
    ``x_A`` has a rigid map; returns ``xb`` (per position, 1: ``x_A`` is
    {B}'s origin) and ``rigid`` (every edge has one)."""
    ty = np.asarray(table.types)
    pA, pB = np.asarray(table.pA), np.asarray(table.pB)
    xb = np.zeros(len(er0), dtype=np.int64)
    rigid = True
    for k, r0 in enumerate(er0):
        if r0 < 0:
            continue
        rows = np.arange(r0, r0 + mk[k])
        at_a = np.isin(ty[rows], (POS, DIST)).any()
        at_b = np.isin(ty[rows], (AXIS, HELIX)).any()
        same = (pA[rows] == pA[r0]).all() and (pB[rows] == pB[r0]).all()
        if (at_a and at_b) or not same:
            rigid = False
        xb[k] = int(at_b)
    return xb, rigid

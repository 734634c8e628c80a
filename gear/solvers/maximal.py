"""``"maximal"``: maximal coordinates with a sparse Cholesky factorisation
(CHOLMOD through scikit-sparse)."""
from __future__ import annotations

import numpy as np

from .. import _core
from .base import ConstraintSolver
from .kkt import _NativeClosed

__all__ = ["MaximalSolver"]

#: CHOLMOD ordering names of the native kernel (-1: CHOLMOD's default
#: strategy, -2: try every method)
_ORDERINGS = {"default": -1, "best": -2, "natural": 0, "amd": 2, "metis": 3, "nesdis": 4,
              "colamd": 5}


class _Replan(Exception):
    """A left-out entry of the native K pattern became non-zero."""


def _cholmod():
    try:
        from sksparse import cholmod
    except ImportError:
        raise ImportError(
            "the 'maximal' solver needs scikit-sparse (CHOLMOD): pip install 'gear[sparse]' "
            "(with SuiteSparse installed, e.g. apt-get install libsuitesparse-dev)") from None
    return cholmod


class MaximalSolver(_NativeClosed, ConstraintSolver):
    """Maximal coordinates (Ruan, "Articulated rigid body systems", Sec. 3.1,
    eq. 12) solved by sparse Cholesky.

    Every body is a free rigid body, and every joint and loop is a set of
    rows ``J`` on the stacked body twists (:class:`gear.maximal.
    MaximalSystem`).  ``Mb`` is block-diagonal, so the KKT system reduces to
    its Schur complement

        ``(J Mb^{-1} J^T) lam = c - J Mb^{-1} f``,  ``dV = Mb^{-1} (f + J^T lam)``,

    a sparse symmetric matrix whose pattern depends only on the topology
    (and on the prescribed set in hybrid dynamics).
    CHOLMOD analyses it once per model and prescribed set (symbolic
    factorisation with a fill-reducing ordering), and each call factorises
    it numerically.  The joint accelerations are then read off the body
    accelerations, ``ddq_i = S_i^+ (dV_i - Ad_{T^{-1}} dV_p - eta_i)``.

    **Redundant and singular rows.** The factorisation is of
    ``J Mb^{-1} J^T + beta I``, with ``beta = regularization`` times the
    largest diagonal entry (raised 1000-fold, up to 1e-6, if rounding
    still makes the factorisation fail; then ``numpy.linalg.LinAlgError``).
    Redundant rows occur, for example, for a planar loop
    closed by a 3-D ball, or at a singular configuration.  Up to
    ``refinement`` steps of iterative refinement (the native kernel stops
    once ``|r - K lam| <= 1e-14 |r|``) then solve the unregularised system:
    ``lam`` stays in the range of the matrix, which gives the
    minimum-norm multipliers, and each step cuts the error by
    ``beta / (sigma + beta)``.  ``ddq`` and ``A^T lam`` equal the
    reduced-coordinate solvers' (tested to 1e-8).  When the system has no
    exact solution (at a branch point with a velocity the loops cannot
    follow), the part ``e`` of the right-hand side outside the range of
    the matrix, left in the residual, is removed and the system solved
    again: the least-squares answer of the reduced solvers.

    **Hybrid dynamics** adds one row per prescribed velocity coordinate
    ``k`` of joint ``i``: ``s_k . (dV_i - Ad_{T^{-1}} dV_p - eta_i) =
    ddq_k`` (``s_k`` row ``k`` of ``S_i^+``); its multiplier is that
    coordinate's torque, since ``S_i^T S_i^{+T} e_k = e_k``.  ``ddq`` is
    unique and equals the reduced solvers'.  When the free coordinates'
    rows ``A_v`` have a lower rank than ``A`` (e.g. the RSSR with its
    spherical joint prescribed) ``tau[u]`` and ``lam`` are not unique:
    this solver returns one exact solution of ``M ddq + b = tau + A^T
    lam`` (not necessarily kkt's minimum-norm ``lam``).

    **Native kernel.** When gear is built with CHOLMOD (meson finds
    ``libcholmod`` and ``suitesparse/cholmod.h``: Debian's
    ``libsuitesparse-dev``; :meth:`MaximalSolver.native_available` tells),
    forward dynamics runs in one native call
    (``gear/maximal/_kernel.pxd``): the rows, ``K``'s values in a
    fixed pattern, CHOLMOD's numeric factorisation and solves, and the
    joint accelerations, with the arithmetic above (``C_i`` from a
    Householder QR of ``S_i`` instead of an SVD: another orthonormal
    basis, the same ``ddq`` and ``lam``).  Hybrid dynamics with whole
    joints prescribed runs there too, with the prescription rows below (a
    plan per prescribed set).  Batches run in parallel without the GIL (a
    CHOLMOD workspace and factor per thread), and :func:`gear.simulate`
    runs its rollouts natively.  Joints prescribed in only some of their
    coordinates, and ``native=False``, take the scikit-sparse path.

    **Two routes for forward dynamics** (option ``route``).
    ``"cholmod"`` factorises the Schur complement above.  ``"tree"``
    factorises the KKT system itself in tree order (Baraff, "Linear-time
    dynamics using Lagrange multipliers", 1996;
    ``gear/maximal/_tree_route.pxd``): each body and then its joint's rows
    are eliminated from the leaves to the ground without fill, the joint
    blocks through ``C^T (C Mt^-1 C^T)^-1 C = Mt - U D^-1 U^T`` (``U = Mt
    S``, ``D = S^T U``), and only the loop rows are left in a Schur
    complement ``K_L``, factorised by gear's sparse Cholesky: as it is
    where every row it finds dependent is negligible in itself (no wrench
    of the tree loads it, as the out-of-plane row of a ball closing a
    planar loop; those multipliers are zero, the minimum-norm ones), else
    with the same regularisation and refinement.  Its cost grows with the bodies plus
    the pairs of loop rows whose paths to the ground meet: small where
    loops close across short branches (the N-four-bar on its ground tree:
    1.8-2.1x faster than CHOLMOD's), large where every path runs down a
    long chain.  ``"auto"`` (the default) takes the route with the fewer
    products per call (:func:`gear.maximal.tree.choose_route`);
    ``stats["route"]`` says which ran.  Hybrid dynamics always takes
    CHOLMOD's.  Both routes give the same ``ddq`` and loop forces ``A^T
    lam`` to rounding (tested to 1e-10); ``lam`` itself differs where a
    dependent row takes force, whose multipliers are not unique (each
    route's are minimum-norm in its own Schur complement).

    Only :class:`gear.LoopClosure` constraints are taken, and every body
    needs positive mass and inertia.  The scikit-sparse path needs
    scikit-sparse (the ``sparse`` extra).  Options: ``regularization``
    (default 1e-14), ``refinement`` (default 3), ``ordering`` (CHOLMOD's
    ordering: ``"default"``, ``"amd"``, ``"metis"``, ``"nesdis"``,
    ``"colamd"``, ``"natural"``, ``"best"``), ``native`` (default True),
    ``route`` (``"auto"``, ``"tree"`` or ``"cholmod"``; native kernel only).
    """

    name = "maximal"
    default_options = {"regularization": 1e-14, "refinement": 3, "ordering": "default",
                       "native": True, "route": "auto"}
    _route = 3

    def _check_options(self):
        b = float(self.options["regularization"])
        if not (0.0 <= b < 1.0):
            raise ValueError(f"regularization must be in [0, 1), got {self.options['regularization']!r}")
        r = self.options["refinement"]
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
            raise ValueError(f"refinement must be a non-negative integer, got {r!r}")
        if not isinstance(self.options["ordering"], str):
            raise ValueError(f"ordering must be a CHOLMOD ordering name, got {self.options['ordering']!r}")
        if not isinstance(self.options["native"], (bool, np.bool_)):
            raise ValueError(f"native must be True or False, got {self.options['native']!r}")
        if self.options["route"] not in ("auto", "tree", "cholmod"):
            raise ValueError(f"route must be 'auto', 'tree' or 'cholmod', got {self.options['route']!r}")
        self._tree = None            # the tree route's plan (arrays, stats), built on first use
        from ..maximal import MaximalSystem

        self._nd = None              # the rows with the native plan attached (built on first use)
        self._nd_h = {}              # prescribed joints (mask bytes) -> the plan of hybrid dynamics
        self._masks = {}             # u (bytes) -> its per-joint mask (None: a joint partly prescribed)
        if not self._native_enabled():
            _cholmod()
        self.maximal = MaximalSystem(self.system)
        ms = self.maximal
        # body of every velocity coordinate
        self._dof_body = np.repeat(np.arange(ms.nb), ms.nvi)
        self._symbolic = {}          # prescribed set -> CHOLMOD factor (symbolic analysis reused)
        self._factor_nnz = {}        # prescribed set -> nnz(L)
        self._extra = {}             # prescribed set -> CSR pattern of the prescription rows
        self._plans = {}             # prescribed set -> persistent J, K and the index maps between them

    @property
    def factor_nnz(self):
        """nnz of the Cholesky factor of forward dynamics (None before the first call)."""
        if self._nd is not None:
            return int(self._nd.maximal.factor_nnz)
        return self._factor_nnz.get(None)

    def __getstate__(self):
        # the native plan and CHOLMOD factors are rebuilt on first use
        # (pickle, Dask workers)
        state = self.__dict__.copy()
        state.update(_nd=None, _nd_h={}, _symbolic={}, _factor_nnz={}, _plans={}, _tree=None)
        return state

    # -- the native kernel -----------------------------------------------------
    @staticmethod
    def native_available():
        """Whether this build of gear links CHOLMOD, i.e. has the native
        maximal-coordinate kernel (else the scikit-sparse path runs).

        >>> import gear
        >>> isinstance(gear.solvers.MaximalSolver.native_available(), bool)
        True
        """
        return bool(_core.cholmod_available())

    def _native_enabled(self):
        return (bool(self.options["native"]) and _core.cholmod_available()
                and self.options["ordering"] in _ORDERINGS)

    def _native_data(self):
        if not self._native_enabled():
            return None
        if self._nd is None:
            self._nd = self._build_native(prune=True)
        return self._nd

    def _build_native(self, prune, leave_out=(), pres=None):
        """The fixed plan of the native kernel (``MaxC`` of
        ``gear/maximal/_kernel.pxd``): every row's two bodies, each
        body's segments and segment pairs, and K's pattern: CHOLMOD's
        fill-reducing order, then the upper triangle of the permuted matrix
        with its symbolic analysis.  With ``prune``, entries of the
        block pattern that are exactly zero at two random configurations
        (structural zeros: a planar mechanism's out-of-plane couplings) are
        left out of the factor; the kernel checks them on every call.
        ``leave_out``: entries ``(i, j)`` of K (row numbers of
        :class:`gear.maximal.MaximalSystem`) to leave out as well (tests use
        it to exercise the re-planning).  ``pres`` (bool per body): the
        plan of hybrid dynamics with those joints prescribed, one
        prescription row per velocity coordinate after the loop rows."""
        ms = self.maximal
        sys = self.system
        nb, nJ, nL = ms.nb, ms.nJ, ms.nL
        pbody = [] if pres is None else [i for i in range(nb) if pres[i] for _ in range(int(ms.nvi[i]))]
        pdof = [] if pres is None else [int(ms.iv[i]) + k for i in range(nb) if pres[i]
                                        for k in range(int(ms.nvi[i]))]
        nrows = nJ + nL + len(pdof)
        rbody = np.full((nrows, 2), -1, dtype=np.int64)
        for i in range(nb):
            for j in range(6 - int(ms.nvi[i])):
                rbody[ms.joint_row0[i] + j] = (i, ms.parents[i])
        rbody[nJ:nJ + nL, 0], rbody[nJ:nJ + nL, 1] = ms._la, ms._lb
        for r, i in enumerate(pbody):
            rbody[nJ + nL + r] = (i, ms.parents[i])
        segs = [[] for _ in range(nb)]
        for r in range(nrows):
            for slot in (0, 1):
                if rbody[r, slot] >= 0:
                    segs[rbody[r, slot]].append((r, slot))
        sptr = np.concatenate([[0], np.cumsum([len(x) for x in segs])])
        srow = np.array([r for x in segs for r, _ in x], dtype=np.int64)
        soff = np.array([12 * r + 6 * t for x in segs for r, t in x], dtype=np.int64)
        pa, pb, prow, pcol = [], [], [], []
        for x, s0 in zip(segs, sptr[:-1]):
            rows = [r for r, _ in x]
            for a in range(len(rows)):
                for b in range(a, len(rows)):
                    # a row meeting one body twice: its cross pair counts twice
                    for _ in range(2 if a != b and rows[a] == rows[b] else 1):
                        pa.append(s0 + a)
                        pb.append(s0 + b)
                        prow.append(max(rows[a], rows[b]))
                        pcol.append(min(rows[a], rows[b]))
        pa, pb = np.array(pa, dtype=np.int64), np.array(pb, dtype=np.int64)
        pkey = np.array(pcol, dtype=np.int64) * nrows + np.array(prow, dtype=np.int64)
        diag = np.arange(nrows, dtype=np.int64) * (nrows + 1)
        keys, inv = np.unique(np.concatenate([pkey, diag]), return_inverse=True)
        inv = inv[:len(pkey)]
        Minv = np.ascontiguousarray(ms.Minv.reshape(nb, 36))
        Lt = np.ascontiguousarray(np.transpose(np.linalg.cholesky(0.5 * (ms.Minv + np.transpose(ms.Minv, (0, 2, 1)))),
                                               (0, 2, 1)).reshape(nb, 36))

        def plan(kept, analyse, frames=(None, None, None)):
            # K's kept entries: CHOLMOD's fill-reducing order (analysed on
            # the lower triangle), then the upper triangle of the permuted
            # matrix in CSC order; the left-out entries after them; the
            # pairs of kept entries first
            kk, out = keys[kept], keys[~kept]
            col, row = kk // nrows, kk % nrows
            perm = np.arange(nrows)
            if analyse:
                Kp = np.concatenate([[0], np.cumsum(np.bincount(col, minlength=nrows))])
                perm = _core.cholmod_ordering(nrows, Kp, row, _ORDERINGS[self.options["ordering"]])
            pinv = np.empty(nrows, dtype=np.int64)
            pinv[perm] = np.arange(nrows)
            ucol, urow = np.maximum(pinv[row], pinv[col]), np.minimum(pinv[row], pinv[col])
            order = np.argsort(ucol * nrows + urow)
            pos = np.empty(len(kk), dtype=np.int64)
            pos[order] = np.arange(len(kk))
            Kp = np.concatenate([[0], np.cumsum(np.bincount(ucol, minlength=nrows))])
            where = np.empty(len(keys), dtype=np.int64)
            where[kept] = pos
            where[~kept] = len(kk) + np.arange(len(out))
            pk = where[inv]
            first = np.argsort(pk >= len(kk), kind="stable")
            npk = int((pk < len(kk)).sum())
            mx = _core.MaximalData(nb, nJ, nL, float(self.options["regularization"]),
                                   int(self.options["refinement"]), Minv, Lt, ms.joint_row0,
                                   rbody.ravel(), sptr, srow, soff, pa[first], pb[first], pk[first], npk,
                                   perm, Kp, urow[order], len(kk), len(out), analyse,
                                   pdof=np.array(pdof, dtype=np.int64), pbody=np.array(pbody, dtype=np.int64),
                                   pres=None if pres is None else np.asarray(pres, dtype=np.uint8),
                                   cfr=frames[0], Cc=frames[1], Spc=frames[2])
            if analyse and pres is None and self._tree_route(mx):
                mx.attach_tree(sys.model.nv, **self._tree[0])
            nd = sys._native(1e-10, fresh=True)
            nd.attach_maximal(sys.model.data, mx)
            return nd, where

        kept = np.ones(len(keys), dtype=bool)
        probe, where = plan(kept, False)
        rng = np.random.default_rng(12345)
        qs = [sys.model.random_configuration(rng) for _ in range(2)]
        # joints whose C_i and S_i^+ are equal at both configurations (S_i
        # constant in the body frame: revolute, prismatic, ...) get them once
        fr = []
        for q in qs:
            C, Sp = np.zeros((nb, 36)), np.zeros((nb, 36))
            if _core.maximal_frames(sys.model.data, probe, q, C, Sp) != 0:
                break
            fr.append((C, Sp))
        frames = (None, None, None)
        if len(fr) == 2:
            cfr = np.all(fr[0][0] == fr[1][0], axis=1) & np.all(fr[0][1] == fr[1][1], axis=1)
            frames = (cfr.astype(np.uint8), fr[0][0].ravel(), fr[0][1].ravel())
        if prune and len(keys):
            nz = np.zeros(len(keys), dtype=bool)
            for q in qs:
                Kx = np.empty(len(keys))
                if _core.maximal_probe(sys.model.data, probe, q, Kx) != 0:
                    nz[:] = True                  # e.g. coincident distance points: keep all
                    break
                nz |= Kx[where] != 0.0
            kept = nz
        for i, j in leave_out:
            k = int(np.searchsorted(keys, min(i, j) * nrows + max(i, j)))
            if k < len(keys) and keys[k] == min(i, j) * nrows + max(i, j):
                kept[k] = False
        kept |= keys // nrows == keys % nrows            # the diagonal always (read for beta)
        return plan(kept, True, frames)[0]

    def _tree_route(self, mx):
        """Whether forward dynamics takes the tree route: ``route="tree"``,
        or ``"auto"`` when :func:`gear.maximal.tree.choose_route` prefers it
        to the CHOLMOD plan ``mx``."""
        from ..maximal.tree import choose_route, tree_plan

        route = self.options["route"]
        if route == "cholmod" or (route == "auto" and choose_route(self.maximal, mx) != "tree"):
            return False
        if self._tree is None:
            self._tree = tree_plan(self.maximal)
        return True

    def _native_status(self, st, k, q, dq):
        if st == -11:
            raise np.linalg.LinAlgError(
                "maximal solver: the Schur complement J Mb^-1 J^T is not positive semi-definite "
                f"(state {k}: the factorisation failed with regularization 1e-06)")
        if st == -12:
            raise _Replan()
        if st == -13:
            raise MemoryError(f"maximal solver: CHOLMOD failed (state {k}; out of memory?)")

    def _plan_for(self, pres=None):
        """The plan of forward dynamics (``pres`` None or no joint
        prescribed), or of hybrid dynamics with the joints ``pres``
        (bool per body) prescribed, built on first use."""
        if pres is None or not pres.any():
            return self._native_data()
        key = pres.tobytes()
        if key not in self._nd_h:
            self._nd_h[key] = self._build_native(prune=True, pres=pres.copy())
        return self._nd_h[key]

    def _replan(self, pres=None):
        """An entry left out of K's pattern became non-zero: rebuild the plan
        of ``pres`` (as :meth:`_plan_for`) with every entry."""
        if pres is None or not pres.any():
            nd = self._nd = self._build_native(prune=False)
        else:
            nd = self._nd_h[pres.tobytes()] = self._build_native(prune=False, pres=pres.copy())
        self.system._native_cache.pop("ff", None)
        self.system._native_cache.pop("hf", None)
        return nd

    def _native_run(self, q, dq, ddq, tau, u, f_ext, pres=None):
        """``(ddq, tau, lam, info, plan)`` of a batch from the native kernel
        (forward dynamics, or hybrid with the joints ``pres`` prescribed),
        re-planning once if a left-out entry of K became non-zero."""
        nd = self._plan_for(pres)
        try:
            out = self._native_call(q, dq, ddq, tau, u, f_ext, nd=nd)
        except _Replan:
            nd = self._replan(pres)
            out = self._native_call(q, dq, ddq, tau, u, f_ext, nd=nd)
        return out + (nd,)

    def _joint_mask(self, u):
        """The prescribed joints of ``u`` (bool per velocity coordinate) as
        a per-body mask, or None when a joint is only partly prescribed
        (the scikit-sparse path takes that)."""
        key = u.tobytes()
        if key in self._masks:
            return self._masks[key]
        ms = self.maximal
        pres = np.zeros(ms.nb, dtype=bool)
        for i in range(ms.nb):
            n, k = int(ms.nvi[i]), int(ms.iv[i])
            if n:
                part = u[k:k + n]
                if part.any() and not part.all():
                    pres = None
                    break
                pres[i] = part[0]
        self._masks[key] = pres
        return pres

    def _native_hybrid(self, q, dq, ddq, tau, u, f_ext):
        """``(ddq, tau, lam, info, plan)`` of a batch of hybrid dynamics from
        the native kernel, or None (not built with CHOLMOD, a partly
        prescribed joint)."""
        if not self._native_enabled():
            return None
        pres = self._joint_mask(np.asarray(u, dtype=bool))
        if pres is None:
            return None
        return self._native_run(q, dq, ddq, tau, u, f_ext, pres)

    def _batch_stats(self, N, info, nd=None):
        """Counts a native batch and returns its stats."""
        nfac = int(info[:, 0].sum())
        self.counters["calls"] += N
        self.counters["factorizations"] += nfac
        stats = self._static_stats(nd)
        stats.update(factorizations=nfac, native=True)
        return stats

    def _call_stats(self, nd, info):
        """The stats of one native call (counted by the base class)."""
        stats = self._static_stats(nd)
        stats.update(factorizations=int(info[0, 0]), residual=float(info[0, 1]), native=True)
        return stats

    def _static_stats(self, nd=None):
        mx = (self._nd if nd is None else nd).maximal
        ms = self.maximal
        nrows = len(mx.arrays["Kp"]) - 2
        nseg = len(mx.arrays["srow"]) - 1
        nnz_low = int(np.asarray(mx.arrays["Kp"])[nrows])
        return {"rows": int(nrows), "bodies": int(ms.nb), "nnz_J": 6 * nseg,
                "nnz_K": 2 * nnz_low - nrows, "nnz_factor": int(mx.factor_nnz),
                "refinement": self.options["refinement"], "route": mx.route}

    def _forward(self, q, dq, tau, f_ext):
        if self._native_data() is None:
            return self._forward_sparse(q, dq, tau, f_ext)
        ddq, _, lam, info, nd = self._native_run(q[None], dq[None], None, tau[None], None,
                                                 None if f_ext is None else f_ext[None])
        return ddq[0], lam[0], self._call_stats(nd, info)

    def forward_batch(self, q, dq, tau, f_ext):
        if self._native_data() is None:
            return None
        ddq, _, lam, info, nd = self._native_run(q, dq, None, tau, None, f_ext)
        return ddq, lam, info[:, 1], self._batch_stats(q.shape[0], info, nd)

    def fast_forward(self):
        nd = self._native_data()
        if nd is None:
            return None
        return _core.FastForward(self.system._md, nd, 3, self.name, self.counters, 1,
                                 self._static_stats())

    def fast_hybrid(self):
        if not self._native_enabled():
            return None

        def plan(key):
            nd = self._plan_for(np.frombuffer(key, dtype=bool))
            return nd, 3, self._static_stats(nd)

        return _core.FastHybrid(self.system._md, plan, self.name, self.counters)

    def _prescription_rows(self, key, u, parts, t, ddq):
        """Rows ``s_k . (dV_i - Ad_{T^{-1}} dV_p) = ddq_k + s_k . eta_i`` for
        every prescribed velocity coordinate ``k`` of joint ``i`` (``s_k``:
        row ``k`` of ``S_i^+``), as CSR arrays with explicit zeros (every
        row meets a body in one full 6-block), and their right-hand side.
        The multiplier of row ``k`` is the torque of coordinate ``k``:
        ``S_i^T S_i^{+T} e_k = e_k``."""
        ms = self.maximal
        dofs = np.flatnonzero(u)
        body = self._dof_body[dofs]
        par = ms.parents[body]
        hp = par >= 0
        if key not in self._extra:
            cols, counts = [], []
            for b, p in zip(body, par):
                blocks = sorted([b] if p < 0 else [b, p])
                cols.append((6 * np.array(blocks)[:, None] + np.arange(6)).ravel())
                counts.append(6 * len(blocks))
            order = [np.argsort([b, p] if p >= 0 else [b], kind="stable") for b, p in zip(body, par)]
            self._extra[key] = (np.concatenate(cols).astype(ms._indices.dtype),
                                np.concatenate([[0], np.cumsum(counts)]), order)
        indices, indptr, order = self._extra[key]
        P = ms.pinv_rows(parts)[dofs]                                            # (p, 6)
        Pp = -np.einsum("pk,pkj->pj", P, parts["X"][body])                       # on the parent
        data = np.empty(indptr[-1])
        for r, (o, h) in enumerate(zip(order, hp)):
            vals = (P[r], Pp[r]) if h else (P[r],)
            data[indptr[r]:indptr[r + 1]] = np.concatenate([vals[j] for j in o])
        rhs = ddq[dofs] + np.einsum("pk,pk->p", P, t["eta"][body])
        return data, indices, indptr, rhs

    def _plan(self, key, indices, indptr, shape):
        """The fixed sparsity of one prescribed set, built once: a
        persistent CSR ``J`` (its ``data`` is overwritten by every call) and
        its transpose sharing that data, and, when every row meets each body
        in one full aligned 6-block (as ``J`` is built), a persistent CSC
        Schur complement ``K = J Mb^-1 J^T`` with the map from pairs of
        row-blocks on the same body to ``K.data``:
        ``K[r(s), r(s')] += (J_s Mb_b^-1) . J_s'``.  No sparse object is
        created per call."""
        import scipy.sparse as sp

        ms = self.maximal
        J = sp.csr_matrix((np.zeros(len(indices)), indices, indptr), shape=shape)
        plan = {"J": J, "JT": J.transpose(copy=False), "aligned": False}
        nrows = shape[0]
        ind = indices
        if not (ind.size % 6 == 0 and not (indptr % 6).any()
                and (ind.reshape(-1, 6) == ind[::6, None] + np.arange(6)).all()
                and not (ind[::6] % 6).any()):
            return plan
        segb = ind[::6] // 6
        segr = np.repeat(np.arange(nrows), np.diff(indptr) // 6)
        nseg = len(segb)
        order = np.argsort(segb, kind="stable")
        counts = np.bincount(segb, minlength=ms.nb)
        C = int(counts.max(initial=0))
        # each body's row-blocks, padded to C with the index of a zero block
        pad = np.full((ms.nb, C), nseg)
        starts = np.concatenate([[0], np.cumsum(counts)])
        for b in range(ms.nb):
            pad[b, :counts[b]] = order[starts[b]:starts[b + 1]]
        valid = pad < nseg
        rr = np.where(valid, segr[np.minimum(pad, max(nseg - 1, 0))] if nseg else 0, -1)
        vi = valid[:, :, None] & valid[:, None, :]
        rows_k = np.broadcast_to(rr[:, :, None], vi.shape)[vi]
        cols_k = np.broadcast_to(rr[:, None, :], vi.shape)[vi]
        keys = cols_k.astype(np.int64) * nrows + rows_k                 # CSC order: column, then row
        uniq, inv = np.unique(keys, return_inverse=True)
        kpos = np.full(vi.shape, len(uniq), dtype=np.int64)            # padding -> a dropped bin
        kpos[vi] = inv.ravel()
        plan.update(aligned=True, K=None, keep=None, uniq=uniq, nrows=nrows, segb=segb, segr=segr,
                    pad=pad, kpos=kpos.ravel(), nseg=nseg, itype=indices.dtype)
        return plan

    def _schur_pattern(self, key, plan, vals):
        """The persistent ``K`` of ``plan``: the entries of the block pattern
        that are not exactly zero (a planar mechanism's out-of-plane
        couplings are zero at every configuration; keeping them would
        double the factor's fill).  Checked on every call: if an entry
        outside the pattern becomes non-zero, it joins the pattern and the
        symbolic analysis is redone."""
        import scipy.sparse as sp

        keep = plan["keep"]
        if keep is not None:
            scale = float(np.abs(vals).max(initial=0.0))
            if float(np.abs(vals[~keep]).max(initial=0.0)) <= 1e-300 * max(scale, 1.0) and plan["K"] is not None:
                return plan["K"]
            keep = keep | (vals != 0.0)
        else:
            keep = vals != 0.0
        nrows, uniq = plan["nrows"], plan["uniq"][keep]
        col, row = uniq // nrows, uniq % nrows
        kptr = np.concatenate([[0], np.cumsum(np.bincount(col, minlength=nrows))])
        it = plan["itype"]
        plan["K"] = sp.csc_matrix((np.zeros(len(uniq)), row.astype(it), kptr.astype(it)), shape=(nrows, nrows))
        plan["keep"] = keep
        self._symbolic.pop(key, None)
        self._factor_nnz.pop(key, None)
        return plan["K"]

    def _solve(self, q, dq, tau, f_ext, u=None, ddq_pres=None):
        ms = self.maximal
        t = ms._terms(q, dq)
        key = None
        if u is not None and u.any():
            key = u.tobytes()
            tau = np.where(u, 0.0, tau)          # prescribed torques are the unknown multipliers
        if None not in self._plans:
            self._plans[None] = self._plan(None, ms._indices, ms._indptr, (ms.nrows, 6 * ms.nb))
        base = self._plans[None]["J"]
        plan = self._plans.get(key)
        J, c, f, parts = ms._assemble(t, tau, f_ext, base)
        if key is not None:
            data, indices, indptr, rhs = self._prescription_rows(key, u, parts, t, ddq_pres)
            if plan is None:
                plan = self._plans[key] = self._plan(
                    key, np.concatenate([ms._indices, indices]),
                    np.concatenate([ms._indptr, ms._indptr[-1] + indptr[1:]]),
                    (ms.nrows + len(rhs), 6 * ms.nb))
            J = plan["J"]
            n0 = len(ms._indices)
            J.data[:n0] = base.data
            J.data[n0:] = data
            c = np.concatenate([c, rhs])
        JT = plan["JT"]
        if plan["aligned"]:
            # K = sum over bodies of S_b Mb_b^-1 S_b^T, S_b: the body's row-blocks (padded)
            seg = np.concatenate([J.data.reshape(-1, 6), np.zeros((1, 6))])
            S = seg[plan["pad"]]                                             # (nb, C, 6)
            KB = np.matmul(np.matmul(S, ms.Minv), np.transpose(S, (0, 2, 1)))
            vals = np.bincount(plan["kpos"], KB.ravel(), minlength=len(plan["uniq"]) + 1)[:-1]
            K = self._schur_pattern(key, plan, vals)
            K.data[:] = vals[plan["keep"]]
            w = np.matmul(ms.Minv, f.reshape(-1, 6, 1))[:, :, 0]            # Mb^-1 f per body
            r = c - np.bincount(plan["segr"], (seg[:-1] * w[plan["segb"]]).sum(axis=1),
                                minlength=J.shape[0])
        else:
            JM = J @ ms._Minv
            K = (JM @ J.T).tocsc()
            r = c - JM @ f
        nfac = 0
        if K.shape[0]:
            lam, nfac = self._factor_solve(key, K, r)
        else:
            lam = np.zeros(0)
        dV = np.einsum("bij,bj->bi", ms.Minv, (f + JT @ lam).reshape(-1, 6)).ravel()
        ddq = ms.joint_accelerations(t, dV, parts)
        # |A ddq + dA dq| = |J_loop dV - c_loop| (the loop rows in body twists)
        # when dV meets the joint rows, i.e. is the body acceleration of ddq;
        # otherwise (no exact solution) the base computes it from A
        g = J @ dV - c
        res = None
        if float(np.abs(g[:ms.nJ]).max(initial=0.0)) <= 1e-12 * max(1.0, float(np.abs(dV).max(initial=0.0))):
            res = float(np.linalg.norm(g[ms.nJ:ms.nJ + ms.nL]))
        stats = {"factorizations": nfac, "rows": int(K.shape[0]), "bodies": int(ms.nb),
                 "nnz_J": int(J.nnz), "nnz_K": int(K.nnz), "nnz_factor": self._factor_nnz.get(key, 0),
                 "refinement": self.options["refinement"]}
        if key is None and res is not None:
            stats["residual"] = res
        return ddq, lam, stats

    def _factor_solve(self, key, K, r):
        """``K lam = r`` by CHOLMOD: symbolic analysis once per prescribed
        set, numeric factorisation of ``K + beta I`` and iterative
        refinement against ``K``.  When rounding makes ``K + beta I``
        numerically indefinite (beta too small for the scale of a
        redundant ``K``), beta is raised 1000-fold, up to 1e-6 of the
        largest diagonal entry."""
        cholmod = _cholmod()
        if key not in self._symbolic:
            # simplicial LDL^T: its pivots D are read cheaply to check definiteness
            # (CHOLMOD's LDL^T factorises indefinite matrices without an error)
            self._symbolic[key] = cholmod.analyze(K, mode="simplicial",
                                                  ordering_method=self.options["ordering"])
        fac = self._symbolic[key]
        dmax = float(K.diagonal().max())
        rel = self.options["regularization"]
        nfac = 0
        while True:
            nfac += 1
            try:
                fac.cholesky_inplace(K, beta=rel * dmax)
                if not (fac.D() > 0.0).all():
                    raise cholmod.CholmodNotPositiveDefiniteError("non-positive pivot")
                break
            except cholmod.CholmodNotPositiveDefiniteError:
                if rel >= 1e-6:
                    raise np.linalg.LinAlgError(
                        "maximal solver: the Schur complement J Mb^-1 J^T is not positive "
                        f"semi-definite (factorisation failed with regularization {rel:g})") from None
                rel = min(max(rel, 1e-15) * 1e3, 1e-6)
        lam = self._refined(fac, K, r)
        # An inconsistent r (no exact solution: prescribed accelerations the
        # loops cannot follow, or A ddq = -dA dq unsolvable at a singular
        # configuration) leaves its part e outside range(K) in the residual,
        # amplified by 1/beta in lam; solving again with r - e gives the
        # least-squares, null-space-free lam.
        e = r - K @ lam
        if float(np.abs(e).max()) > 1e-9 * max(1.0, float(np.abs(r).max())):
            lam = self._refined(fac, K, r - e)
        if key not in self._factor_nnz:
            self._factor_nnz[key] = int(fac.L().nnz)
        return lam, nfac

    def _refined(self, fac, K, r):
        lam = fac(r)
        for _ in range(self.options["refinement"]):
            lam = lam + fac(r - K @ lam)
        return lam

    def _forward_sparse(self, q, dq, tau, f_ext):
        ddq, lam, stats = self._solve(q, dq, tau, f_ext)
        ms = self.maximal
        return ddq, lam[ms.nJ:ms.nJ + ms.nL], stats

    def _hybrid(self, q, dq, ddq, tau, u, f_ext):
        out = self._native_hybrid(q[None], dq[None], ddq[None], tau[None], u,
                                  None if f_ext is None else f_ext[None])
        if out is not None:
            ddq_o, tau_o, lam, info, nd = out
            return tau_o[0], ddq_o[0], lam[0], self._call_stats(nd, info)
        return self._hybrid_sparse(q, dq, ddq, tau, u, f_ext)

    def hybrid_batch(self, q, dq, ddq, tau, u, f_ext):
        out = self._native_hybrid(q, dq, ddq, tau, u, f_ext)
        if out is None:
            return None
        ddq_o, tau_o, lam, info, nd = out
        return tau_o, ddq_o, lam, info[:, 1], self._batch_stats(q.shape[0], info, nd)

    def _hybrid_sparse(self, q, dq, ddq, tau, u, f_ext):
        ms = self.maximal
        u = np.asarray(u, dtype=bool)
        ddq_o, lam, stats = self._solve(q, dq, tau, f_ext, u, ddq)
        ddq_o[u] = ddq[u]
        tau_o = np.array(tau, dtype=float)
        # the prescription rows' multipliers are the prescribed coordinates' torques
        tau_o[u] = lam[ms.nrows:]
        return tau_o, ddq_o, lam[ms.nJ:ms.nJ + ms.nL], stats

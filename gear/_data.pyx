# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The frozen model (``ModelData``: flat typed arrays of a
:class:`gear.Model`, see ``gear/algorithms/_types.pxd``) and the fixed plans
of the closed-loop kernels (``ClosureData``, ``SparseKKTData``,
``SparseInvData``) and of the maximal-coordinate kernel (``MaximalData``),
with the symbolic analyses that build them.  Declared in ``_data.pxd`` for
the entry points of ``gear/_tree.pyx``, ``gear/_closed.pyx`` and
``gear/_rollouts.pyx``."""
from cython.parallel cimport prange, threadid
cimport openmp

import numpy as np

from gear.algorithms._types cimport WORK_PER_BODY
from gear.spatial._lanes cimport LANES
from gear.algorithms._spchol cimport spchol_set
from gear.constraints._cwork cimport SpInv, SpKKT, cwork_size, cwork_size_c
from gear.maximal._tree_route cimport tree_scratch
from gear.maximal._kernel cimport (MaxC, maximal_scratch, gear_chol, gear_chol_available, gear_chol_new,
                                   gear_chol_free, gear_chol_lnz, gear_chol_perm)


cdef extern from "_team.h" nogil:
    ctypedef void (*gear_team_fn)(void* ctx, int part, int nparts) noexcept nogil
    void gear_team_run(int n, gear_team_fn fn, void* ctx)
    double* gear_team_scratch(long n)

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    pthread_t pthread_self()


cdef void team_run(int nparts, team_fn fn, void* ctx) noexcept nogil:
    """``fn(ctx, part, nparts)`` for every part, part 0 in the calling
    thread and the others on the team's workers (``gear/_team.h``)."""
    gear_team_run(nparts, <gear_team_fn> fn, ctx)


cdef double* team_scratch(Py_ssize_t n) noexcept nogil:
    """The calling thread's workspace of at least ``n`` doubles (64-byte
    aligned), kept from one call to the next; NULL if out of memory.  For
    the team's parts: one at a time per thread."""
    return gear_team_scratch(n)


cdef void _record_thread(void* ctx, int part, int nparts) noexcept nogil:
    (<unsigned long*> ctx)[part] = <unsigned long> pthread_self()


def team_thread_ids(int nparts):
    """The thread that ran each of ``nparts`` parts of one team job, and the
    calling thread (for the tests: parts 1 .. nparts-1 run on workers)."""
    cdef unsigned long[::1] ids = np.zeros(max(nparts, 1), dtype=np.uint64)
    with nogil:
        team_run(nparts, _record_thread, &ids[0])
    return [int(i) for i in ids[:nparts]], int(<unsigned long> pthread_self())


def omp_max_threads():
    """``omp_get_max_threads()`` of the OpenMP runtime this module links."""
    return openmp.omp_get_max_threads()


def omp_enabled():
    """True if the extension was compiled with OpenMP (prange is parallel)."""
    cdef int[::1] t = np.zeros(64, dtype=np.int32)
    cdef Py_ssize_t k
    for k in prange(64, nogil=True, num_threads=2, schedule='static'):
        t[k] = threadid()
    return max(t) > 0


cdef class ModelData:
    """Flat typed arrays of a frozen :class:`gear.Model` (see _types.pxd)."""

    def __init__(self, parent, jtype, iq, iv, nvi, jparam, Xtree, inertia, gravity, int nq, int nv):
        cdef int[::1] a_parent = np.ascontiguousarray(parent, dtype=np.int32)
        cdef int[::1] a_jtype = np.ascontiguousarray(jtype, dtype=np.int32)
        cdef int[::1] a_iq = np.ascontiguousarray(iq, dtype=np.int32)
        cdef int[::1] a_iv = np.ascontiguousarray(iv, dtype=np.int32)
        cdef int[::1] a_nvi = np.ascontiguousarray(nvi, dtype=np.int32)
        cdef double[:, ::1] a_jparam = np.ascontiguousarray(jparam, dtype=np.float64)
        cdef double[:, ::1] a_X = np.ascontiguousarray(Xtree, dtype=np.float64)
        cdef double[:, ::1] a_I = np.ascontiguousarray(inertia, dtype=np.float64)
        cdef int nb = a_parent.shape[0]
        if nb < 1:
            raise ValueError("the model has no bodies; add one with Model.add_body")
        desc_np = np.zeros((nb, nb), dtype=np.uint8)
        for i in range(nb):
            j = i
            while j >= 0:
                desc_np[j, i] = 1
                j = a_parent[j]
        cdef unsigned char[:, ::1] a_desc = desc_np
        # the dof tree (Featherstone Sec. 6.5): each dof's parent dof
        vpar = np.full(max(nv, 1), -1, dtype=np.int32)
        for i in range(nb):
            for k in range(a_nvi[i]):
                if k > 0:
                    vpar[a_iv[i] + k] = a_iv[i] + k - 1
                else:
                    j = a_parent[i]
                    while j >= 0 and a_nvi[j] == 0:
                        j = a_parent[j]
                    vpar[a_iv[i]] = -1 if j < 0 else a_iv[j] + a_nvi[j] - 1
        cdef int[::1] a_vpar = vpar
        # each dof's ancestors as one packed list, root first (depth order):
        # the list of dof k is its parent's list and then the parent, so the
        # ancestors of k's ancestor at depth p are the first p entries of
        # k's list, which the packed factorisation relies on
        cdef int[::1] a_vdep = np.zeros(max(nv, 1), dtype=np.int32)
        cdef int[::1] a_voff = np.zeros(nv + 1, dtype=np.int32)
        cdef int kk, pp, dd, tt
        for kk in range(nv):
            pp = a_vpar[kk]
            a_vdep[kk] = 0 if pp < 0 else a_vdep[pp] + 1
            a_voff[kk + 1] = a_voff[kk] + a_vdep[kk]
        cdef int[::1] a_vanc = np.zeros(a_voff[nv] + 1, dtype=np.int32)
        for kk in range(nv):
            pp = a_vpar[kk]
            if pp >= 0:
                dd = a_vdep[pp]
                for tt in range(dd):
                    a_vanc[a_voff[kk] + tt] = a_vanc[a_voff[pp] + tt]
                a_vanc[a_voff[kk] + dd] = pp
        self.arrays = (a_parent, a_jtype, a_iq, a_iv, a_nvi, a_jparam, a_X, a_I, a_desc, a_vpar,
                       a_vdep, a_voff, a_vanc)
        self.nb = nb
        self.nq = nq
        self.nv = nv
        self.c.nb = nb
        self.c.nq = nq
        self.c.nv = nv
        self.c.parent = &a_parent[0]
        self.c.jtype = &a_jtype[0]
        self.c.iq = &a_iq[0]
        self.c.iv = &a_iv[0]
        self.c.nvi = &a_nvi[0]
        self.c.jparam = &a_jparam[0, 0]
        self.c.Xtree = &a_X[0, 0]
        self.c.inertia = &a_I[0, 0]
        self.c.desc = &a_desc[0, 0]
        self.c.vpar = &a_vpar[0]
        self.c.vdep = &a_vdep[0]
        self.c.voff = &a_voff[0]
        self.c.vanc = &a_vanc[0]
        self.c.g[0] = gravity[0]
        self.c.g[1] = gravity[1]
        self.c.g[2] = gravity[2]
        self.wsize = WORK_PER_BODY * nb
        self.ws = np.zeros(self.wsize + 2 * LANES * nv * nv + 1)   # + scratch of K_ABA_D (four states)
        at = []
        jt = []
        for k in range(nb):
            if a_jtype[k] == 7 or a_jtype[k] == 8:   # J_SPHERICAL, J_FREE: quaternion last
                at.append(a_iq[k] + (0 if a_jtype[k] == 7 else 3))
                jt.append(k)
        self.nquat = len(at)
        self.quat_at = np.array(at + [0], dtype=np.int32)
        self.quat_joint = np.array(jt + [0], dtype=np.int32)

    def dof_parents(self):
        """(nv,) int32: the parent dof of each dof (-1 for none), the tree of
        the mass matrix's sparsity (Featherstone Sec. 6.5)."""
        return np.asarray(self.arrays[9])[:self.nv].copy()

    def set_gravity(self, g):
        self.c.g[0] = g[0]
        self.c.g[1] = g[1]
        self.c.g[2] = g[2]


cdef object _THREADS = None


cdef int batch_threads():
    """``gear.get_num_threads()`` for the batched fast paths: the setting's
    list is looked up once (an import statement in the call cost 1.3 us,
    as much as 20 RNEA states of a batch)."""
    global _THREADS
    if _THREADS is None:
        from gear.algorithms.dynamics import _NUM_THREADS
        _THREADS = _NUM_THREADS
    return _THREADS[0]


def _padded(x, dtype):
    # a C-contiguous copy with one spare element (so that empty arrays have
    # a valid first address)
    a = np.ascontiguousarray(x, dtype=dtype).reshape(-1)
    return np.concatenate([a, np.zeros(1, dtype=dtype)])


cdef class ClosureData:
    """Frozen constraint rows of a :class:`gear.ConstrainedModel` for the
    native kernels (see ``gear/constraints/_cwork.pxd`` and ``_rows.pxd`` for
    the row encoding)."""

    def __init__(self, ModelData md not None, rtype, ri, rj, rk, rcoef, roff, rqi, rqj,
                 body_a, body_b, place_a, place_b, length, sup, double rcond,
                 double cfm=0.0, double damping=0.0):
        cdef int[::1] a_rtype = _padded(rtype, np.int32)
        cdef int[::1] a_ri = _padded(ri, np.int32)
        cdef int[::1] a_rj = _padded(rj, np.int32)
        cdef int[::1] a_rk = _padded(rk, np.int32)
        cdef double[::1] a_rcoef = _padded(rcoef, np.float64)
        cdef double[::1] a_roff = _padded(roff, np.float64)
        cdef int[::1] a_rqi = _padded(rqi, np.int32)
        cdef int[::1] a_rqj = _padded(rqj, np.int32)
        cdef int[::1] a_ba = _padded(body_a, np.int32)
        cdef int[::1] a_bb = _padded(body_b, np.int32)
        cdef double[::1] a_pa = _padded(place_a, np.float64)
        cdef double[::1] a_pb = _padded(place_b, np.float64)
        cdef double[::1] a_len = _padded(length, np.float64)
        cdef int[::1] a_sup = _padded(sup, np.int32)
        self.arrays = (a_rtype, a_ri, a_rj, a_rk, a_rcoef, a_roff, a_rqi, a_rqj,
                       a_ba, a_bb, a_pa, a_pb, a_len, a_sup)
        self.m = a_rtype.shape[0] - 1
        self.c.m = self.m
        self.c.ncoupler = int((np.asarray(a_rtype)[:self.m] == 4).sum())
        self.c.rtype = &a_rtype[0]
        self.c.ri = &a_ri[0]
        self.c.rj = &a_rj[0]
        self.c.rk = &a_rk[0]
        self.c.rcoef = &a_rcoef[0]
        self.c.roff = &a_roff[0]
        self.c.rqi = &a_rqi[0]
        self.c.rqj = &a_rqj[0]
        self.c.body_a = &a_ba[0]
        self.c.body_b = &a_bb[0]
        self.c.place_a = &a_pa[0]
        self.c.place_b = &a_pb[0]
        self.c.length = &a_len[0]
        self.c.sup = &a_sup[0]
        self.c.nsup = a_sup.shape[0] - 1
        self.c.rcond = rcond
        self.c.cfm = cfm
        self.c.damping = damping
        self.cwsize = cwork_size(md.nb, md.nv, self.m)
        self.cws = np.zeros(self.cwsize)
        self.c.mx = NULL
        self.c.mxws = 0
        self.c.sp = NULL
        self.c.spi = NULL
        self.maximal = None
        self.sparse = None
        self.sparse_inverse = None
        self.h0 = NULL

    def attach_sparse(self, ModelData md not None, SparseKKTData sp not None, SparseInvData spi=None):
        """The dense route (route 1) with ``K`` kept sparse through ``sp``,
        and closed inverse dynamics through ``spi`` (both from
        ``gear/constraints/sparse.py``); the workspace grows by their scratch."""
        if sp.c.m != self.m or self.c.mx != NULL or (spi is not None and spi.c.ch.n != md.nv):
            raise ValueError("attach_sparse: the plan does not match these rows")
        self.sparse = sp
        self.sparse_inverse = spi
        self.c.sp = &sp.c
        self.c.spi = NULL if spi is None else &(<SparseInvData> spi).c
        self.cwsize = cwork_size_c(&self.c, md.nb, md.nv, self.m, True)
        self.cws = np.zeros(self.cwsize)

    def attach_maximal(self, ModelData md not None, MaximalData mx not None):
        """Route 3 (the maximal-coordinate kernel) through ``mx``; this
        object's workspace shrinks to what that kernel uses."""
        if mx.c.nL != self.m or mx.c.nb != md.nb:
            raise ValueError("attach_maximal: the plan does not match these rows")
        self.maximal = mx
        self.c.mx = &mx.c
        self.c.mxws = mx.nws
        self.h0 = mx.h
        self.cwsize = cwork_size_c(&self.c, md.nb, md.nv, self.m, False)
        self.cws = np.zeros(self.cwsize)


cdef class MaximalData:
    """The fixed plan of the native maximal-coordinate kernel (MaxC of
    ``gear/maximal/_kernel.pxd``) and, when ``analyse``, the CHOLMOD
    symbolic factorisation of its ``K`` pattern."""

    def __init__(self, int nb, int nJ, int nL, double rel, int refinement, Minv, Lt, row0, rbody,
                 sptr, srow, soff, pa, pb, pk, int npk, perm, Kp, Ki, int nnzK, int nout,
                 bint analyse, pdof=None, pbody=None, pres=None, cfr=None, Cc=None, Spc=None):
        cdef double[::1] a_minv = _padded(Minv, np.float64)
        cdef double[::1] a_lt = _padded(Lt, np.float64)
        cdef int[::1] a_row0 = _padded(row0, np.int32)
        cdef int[::1] a_rbody = _padded(rbody, np.int32)
        cdef int[::1] a_sptr = _padded(sptr, np.int32)
        cdef int[::1] a_srow = _padded(srow, np.int32)
        cdef int[::1] a_soff = _padded(soff, np.int32)
        cdef int[::1] a_pa = _padded(pa, np.int32)
        cdef int[::1] a_pb = _padded(pb, np.int32)
        cdef int[::1] a_pk = _padded(pk, np.int32)
        cdef int[::1] a_perm = _padded(perm, np.int32)
        cdef int[::1] a_pdof = _padded(np.zeros(0) if pdof is None else pdof, np.int32)
        cdef int[::1] a_pbody = _padded(np.zeros(0) if pbody is None else pbody, np.int32)
        cdef unsigned char[::1] a_pres = _padded(np.zeros(nb) if pres is None else pres, np.uint8)
        cdef unsigned char[::1] a_cfr = _padded(np.zeros(nb) if cfr is None else cfr, np.uint8)
        cdef double[::1] a_cc = _padded(np.zeros(36 * nb) if Cc is None else Cc, np.float64)
        cdef double[::1] a_spc = _padded(np.zeros(36 * nb) if Spc is None else Spc, np.float64)
        cdef int[::1] a_kp = _padded(Kp, np.int32)
        cdef int[::1] a_ki = _padded(Ki, np.int32)
        cdef int st = 0
        self.arrays = dict(Minv=a_minv, Lt=a_lt, row0=a_row0, rbody=a_rbody, sptr=a_sptr, srow=a_srow,
                           soff=a_soff, pa=a_pa, pb=a_pb, pk=a_pk, perm=a_perm, Kp=a_kp, Ki=a_ki,
                           pdof=a_pdof, pbody=a_pbody, pres=a_pres, cfr=a_cfr, Cc=a_cc, Spc=a_spc)
        self.c.nb = nb
        self.c.nJ = nJ
        self.c.nL = nL
        self.c.nP = a_pdof.shape[0] - 1
        self.c.nrows = nJ + nL + self.c.nP
        self.c.pdof = &a_pdof[0]
        self.c.pbody = &a_pbody[0]
        self.c.pres = NULL if pres is None else &a_pres[0]
        self.c.cfr = NULL if cfr is None else &a_cfr[0]
        self.c.Cc = &a_cc[0]
        self.c.Spc = &a_spc[0]
        if a_cc.shape[0] - 1 != 36 * nb or a_spc.shape[0] - 1 != 36 * nb:
            raise ValueError("MaximalData: Cc and Spc need 36 entries per body")
        self.c.nnzK = nnzK
        self.c.nout = nout
        self.c.nseg = a_srow.shape[0] - 1
        self.c.npairs = a_pk.shape[0] - 1
        self.c.npk = npk
        self.c.rel = rel
        self.c.refinement = refinement
        self.c.Minv = &a_minv[0]
        self.c.Lt = &a_lt[0]
        self.c.row0 = &a_row0[0]
        self.c.rbody = &a_rbody[0]
        self.c.sptr = &a_sptr[0]
        self.c.srow = &a_srow[0]
        self.c.soff = &a_soff[0]
        self.c.pa = &a_pa[0]
        self.c.pb = &a_pb[0]
        self.c.pk = &a_pk[0]
        self.c.perm = &a_perm[0]
        self.c.Kp = &a_kp[0]
        self.c.Ki = &a_ki[0]
        if (a_perm.shape[0] - 1 != self.c.nrows or a_kp.shape[0] - 1 != self.c.nrows + 1
                or a_kp[self.c.nrows] != nnzK or a_pa.shape[0] != a_pk.shape[0]
                or a_pb.shape[0] != a_pk.shape[0] or not 0 <= npk <= self.c.npairs
                or a_pbody.shape[0] != a_pdof.shape[0]):
            raise ValueError("MaximalData: inconsistent plan arrays")
        self.nws = maximal_scratch(nb, self.c.nrows, nnzK, nout, self.c.nseg)
        self.c.nws_kernel = self.nws
        self.c.tree = NULL
        self.h = NULL
        if analyse and self.c.nrows > 0:
            if not gear_chol_available():
                raise RuntimeError("gear was built without CHOLMOD")
            # the permuted upper triangle, natural order: no transpose or
            # permutation per factorisation
            self.h = gear_chol_new(self.c.nrows, &a_kp[0], &a_ki[0], 1, 0, &st)
            if self.h == NULL:
                raise MemoryError(f"CHOLMOD's symbolic analysis failed (status {st})")

    def attach_tree(self, int nv, I6, vptr, vrow, vpar, vseg, pptr, pdst, pinv, Lp, Li, Rp, Rk, Rpos):
        """The tree route (``MaxTree`` of ``gear/maximal/_tree_route.pxd``):
        forward dynamics by the tree-ordered factorisation instead of
        CHOLMOD's (``nv``: the model's velocity coordinates).  Before ``ClosureData.attach_maximal`` (the scratch
        grows)."""
        cdef double[::1] a_i6 = _padded(I6, np.float64)
        cdef int[::1] a_vptr = _padded(vptr, np.int32)
        cdef int[::1] a_vrow = _padded(vrow, np.int32)
        cdef int[::1] a_vpar = _padded(vpar, np.int32)
        cdef int[::1] a_vseg = _padded(vseg, np.int32)
        cdef int[::1] a_pptr = _padded(pptr, np.int32)
        cdef int[::1] a_pdst = _padded(pdst, np.int32)
        cdef int[::1] a_pinv = _padded(pinv, np.int32)
        cdef int[::1] a_lp = _padded(Lp, np.int32)
        cdef int[::1] a_li = _padded(Li, np.int32)
        cdef int[::1] a_rp = _padded(Rp, np.int32)
        cdef int[::1] a_rk = _padded(Rk, np.int32)
        cdef int[::1] a_rpos = _padded(Rpos, np.int32)
        cdef int nb = self.c.nb, nL = self.c.nL
        cdef int nvis = a_vrow.shape[0] - 1
        if (self.c.nP != 0 or a_i6.shape[0] - 1 != 36 * nb or a_vptr.shape[0] - 1 != nb + 1
                or a_vpar.shape[0] - 1 != nvis or a_vseg.shape[0] - 1 != 2 * nvis
                or a_pptr.shape[0] - 1 != nb + 1 or a_pptr[nb] != a_pdst.shape[0] - 1
                or a_pinv.shape[0] - 1 != nL or a_lp.shape[0] - 1 != nL + 1):
            raise ValueError("MaximalData.attach_tree: inconsistent plan arrays")
        self.arrays.update(I6=a_i6, vptr=a_vptr, vrow=a_vrow, vpar=a_vpar, vseg=a_vseg, pptr=a_pptr,
                           pdst=a_pdst, tpinv=a_pinv, tLp=a_lp, tLi=a_li, tRp=a_rp,
                           tRk=a_rk, tRpos=a_rpos)
        self.tr.I6 = &a_i6[0]
        self.tr.nvis = nvis
        self.tr.vptr = &a_vptr[0]
        self.tr.vrow = &a_vrow[0]
        self.tr.vpar = &a_vpar[0]
        self.tr.vseg = &a_vseg[0]
        self.tr.npair = a_pdst.shape[0] - 1
        self.tr.pptr = &a_pptr[0]
        self.tr.pdst = &a_pdst[0]
        self.tr.pinv = &a_pinv[0]
        spchol_set(&self.tr.ch, nL, &a_lp[0], &a_li[0], &a_rp[0], &a_rk[0], &a_rpos[0], 0)
        self.c.tree = &self.tr
        self.nws = self.c.nws_kernel + tree_scratch(nb, nv, nL, nvis, self.tr.ch.nnz)

    @property
    def route(self):
        """``"tree"`` or ``"cholmod"``: the route of forward dynamics."""
        return "tree" if self.c.tree != NULL else "cholmod"

    def __dealloc__(self):
        gear_chol_free(self.h)

    @property
    def factor_nnz(self):
        """Non-zeros of the factor (0 before analysis)."""
        return gear_chol_lnz(self.h)


cdef class SparseKKTData:
    """The fixed plan of the dense route's sparse ``K`` (SpKKT of
    ``gear/constraints/_cwork.pxd``): the factor's pattern
    (:func:`sparse_symbolic`), the row permutation and the group pairs'
    destinations.  Built by ``gear/constraints/sparse.py``."""

    def __init__(self, int m, int n, Lp, Li, Rp, Rk, Rpos, pinv, pga, pgb, poff, dst, int nnmax,
                 coff, comb):
        cdef int[::1] a_lp = _padded(Lp, np.int32)
        cdef int[::1] a_li = _padded(Li, np.int32)
        cdef int[::1] a_rp = _padded(Rp, np.int32)
        cdef int[::1] a_rk = _padded(Rk, np.int32)
        cdef int[::1] a_rpos = _padded(Rpos, np.int32)
        cdef int[::1] a_pinv = _padded(pinv, np.int32)
        cdef int[::1] a_pga = _padded(pga, np.int32)
        cdef int[::1] a_pgb = _padded(pgb, np.int32)
        cdef int[::1] a_poff = _padded(poff, np.int32)
        cdef int[::1] a_dst = _padded(dst, np.int32)
        cdef int[::1] a_coff = _padded(coff, np.int32)
        cdef int[::1] a_comb = _padded(comb, np.int32)
        self.arrays = (a_lp, a_li, a_rp, a_rk, a_rpos, a_pinv, a_pga, a_pgb, a_poff, a_dst, a_coff,
                       a_comb)
        npair = a_pga.shape[0] - 1
        if (a_lp.shape[0] != n + 2 or a_rp.shape[0] != n + 2 or a_pinv.shape[0] != m + 1
                or a_pgb.shape[0] != npair + 1 or a_poff.shape[0] != npair + 2
                or a_lp[n] != a_li.shape[0] - 1 or a_rp[n] != a_rk.shape[0] - 1
                or a_rpos.shape[0] != a_rk.shape[0] or a_poff[npair] != a_dst.shape[0] - 1
                or a_coff.shape[0] != npair + 2 or 4 * a_coff[npair] != a_comb.shape[0] - 1):
            raise ValueError("SparseKKTData: inconsistent plan arrays")
        self.c.m = m
        spchol_set(&self.c.ch, n, &a_lp[0], &a_li[0], &a_rp[0], &a_rk[0], &a_rpos[0], min(n, nnmax))
        self.c.pinv = &a_pinv[0]
        self.c.npair = npair
        self.c.pga = &a_pga[0]
        self.c.pgb = &a_pgb[0]
        self.c.poff = &a_poff[0]
        self.c.dst = &a_dst[0]
        self.c.coff = &a_coff[0]
        self.c.comb = &a_comb[0]

    @property
    def factor_nnz(self):
        """Entries of the factor L (its diagonal included)."""
        return self.c.ch.nnz


cdef class SparseInvData:
    """The fixed plan of the sparse route's inverse dynamics (SpInv of
    ``gear/constraints/_cwork.pxd``): the pattern of ``A^T A`` over the
    dofs and where each row group's products land.  Built by
    ``gear/constraints/sparse.py``."""

    def __init__(self, int n, Lp, Li, Rp, Rk, Rpos, pinv, goff, gdst, gdoff, gdof):
        cdef int[::1] a_lp = _padded(Lp, np.int32)
        cdef int[::1] a_li = _padded(Li, np.int32)
        cdef int[::1] a_rp = _padded(Rp, np.int32)
        cdef int[::1] a_rk = _padded(Rk, np.int32)
        cdef int[::1] a_rpos = _padded(Rpos, np.int32)
        cdef int[::1] a_pinv = _padded(pinv, np.int32)
        cdef int[::1] a_goff = _padded(goff, np.int32)
        cdef int[::1] a_gdst = _padded(gdst, np.int32)
        cdef int[::1] a_gdoff = _padded(gdoff, np.int32)
        cdef int[::1] a_gdof = _padded(gdof, np.int32)
        self.arrays = (a_lp, a_li, a_rp, a_rk, a_rpos, a_pinv, a_goff, a_gdst, a_gdoff, a_gdof)
        ng = a_goff.shape[0] - 2
        if (a_lp.shape[0] != n + 2 or a_rp.shape[0] != n + 2 or a_pinv.shape[0] != n + 1
                or a_gdoff.shape[0] != ng + 2 or a_lp[n] != a_li.shape[0] - 1
                or a_goff[ng] != a_gdst.shape[0] - 1 or a_gdoff[ng] != a_gdof.shape[0] - 1):
            raise ValueError("SparseInvData: inconsistent plan arrays")
        spchol_set(&self.c.ch, n, &a_lp[0], &a_li[0], &a_rp[0], &a_rk[0], &a_rpos[0], 0)
        self.c.pinv = &a_pinv[0]
        self.c.ng = ng
        self.c.goff = &a_goff[0]
        self.c.gdst = &a_gdst[0]
        self.c.gdoff = &a_gdoff[0]
        self.c.gdof = &a_gdof[0]


def sparse_symbolic(int n, const int[::1] Rp, const int[::1] Ri):
    """Symbolic Cholesky factorisation of a symmetric pattern given by the
    rows of its lower triangle (``Ri[Rp[j]:Rp[j+1]]``: the columns k < j of
    row j; the diagonal implied).  Elimination tree by Liu's algorithm,
    then each row of ``L`` as the nodes its entries reach up the tree
    (Davis, "Direct methods for sparse linear systems", Secs. 4.1-4.3):
    O(nnz(L)).  Returns ``(Lp, Li, LRp, LRk, LRpos)``: the columns of L
    (diagonal first, rows ascending) and, for each row j, its off-diagonal
    entries' columns and positions in ``Li``."""
    cdef int j, p, i, inext, k, t, top
    parent_a = np.full(n, -1, dtype=np.int32)
    anc_a = np.full(n, -1, dtype=np.int32)
    mark_a = np.full(n, -1, dtype=np.int32)
    cnt_a = np.ones(n, dtype=np.int32)
    cdef int[::1] parent = parent_a
    cdef int[::1] anc = anc_a
    cdef int[::1] mark = mark_a
    cdef int[::1] cnt = cnt_a
    cdef long nrow = 0
    # elimination tree (path compression through anc)
    for j in range(n):
        for p in range(Rp[j], Rp[j + 1]):
            i = Ri[p]
            while i != -1 and i < j:
                inext = anc[i]
                anc[i] = j
                if inext == -1:
                    parent[i] = j
                i = inext
    # pass 1: column counts; pass 2: fill
    for j in range(n):
        mark[j] = j
        for p in range(Rp[j], Rp[j + 1]):
            i = Ri[p]
            while i != -1 and i < j and mark[i] != j:
                mark[i] = j
                cnt[i] += 1
                nrow += 1
                i = parent[i]
    Lp_a = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(cnt_a, out=Lp_a[1:])
    cdef int[::1] Lp = Lp_a
    Li_a = np.empty(Lp_a[n], dtype=np.int32)
    LRp_a = np.zeros(n + 1, dtype=np.int32)
    LRk_a = np.empty(nrow, dtype=np.int32)
    LRpos_a = np.empty(nrow, dtype=np.int32)
    nxt_a = Lp_a[:n].copy()
    cdef int[::1] Li = Li_a
    cdef int[::1] LRp = LRp_a
    cdef int[::1] LRk = LRk_a
    cdef int[::1] LRpos = LRpos_a
    cdef int[::1] nxt = nxt_a
    mark_a[:] = -1
    t = 0
    for j in range(n):
        Li[nxt[j]] = j
        nxt[j] += 1
        mark[j] = j
        top = t
        for p in range(Rp[j], Rp[j + 1]):
            i = Ri[p]
            while i != -1 and i < j and mark[i] != j:
                mark[i] = j
                LRk[t] = i
                t += 1
                i = parent[i]
        # columns ascending within the row (a fixed order of the updates)
        LRk_a[top:t].sort()
        for k in range(top, t):
            i = LRk[k]
            LRpos[k] = nxt[i]
            Li[nxt[i]] = j
            nxt[i] += 1
        LRp[j + 1] = t
    return Lp_a, Li_a, LRp_a, LRk_a, LRpos_a


def cholmod_ordering(int n, Kp, Ki, int ordering):
    """CHOLMOD's fill-reducing permutation (its analysis with ``ordering``:
    -1 default, -2 best, else a CHOLMOD_* method) of the symmetric pattern
    given by its lower triangle (CSC); row ``perm[k]`` becomes row k."""
    cdef int[::1] a_kp = np.ascontiguousarray(Kp, dtype=np.int32)
    cdef int[::1] a_ki = _padded(Ki, np.int32)
    cdef int st = 0
    cdef gear_chol* h
    out = np.arange(n, dtype=np.int32)
    cdef int[::1] o = out
    if n == 0:
        return out
    if not gear_chol_available():
        raise RuntimeError("gear was built without CHOLMOD")
    h = gear_chol_new(n, &a_kp[0], &a_ki[0], -1, ordering, &st)
    if h == NULL:
        raise MemoryError(f"CHOLMOD's symbolic analysis failed (status {st})")
    gear_chol_perm(h, &o[0])
    gear_chol_free(h)
    return out


def cholmod_available():
    """Whether this build links CHOLMOD (the native maximal kernel)."""
    return bool(gear_chol_available())

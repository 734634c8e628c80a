# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Native entry points of closed loops (Kim Sec. 3): the constraint
rows, constrained forward, hybrid and inverse dynamics on every route of
``gear/constraints/`` (and the maximal-coordinate solver's kernel,
``gear/maximal/_kernel.pxd``), their derivatives
(``gear/constraints/_derivatives.pxd``), and the result class and the
allocation-light one-state paths (``FastForward``, ``FastInverse``,
``FastHybrid``).  Batched forward, hybrid and inverse dynamics share the
states between the parts of the fork-join team (``gear/_team.h``, one
workspace per part); the derivatives, tens of microseconds a state, take
an OpenMP loop."""
from cython.parallel cimport prange, parallel
from libc.string cimport memset
from libc.stdlib cimport malloc, free
cimport numpy as cnp

import numpy as np

from gear.algorithms._types cimport ModelC, Work, work_from
from gear.constraints._cwork cimport ClosC, CWork, cwork_from, cwork_size, cwork_from_c
from gear.constraints._rows cimport constraint_rows as _crows
from gear.constraints._derivatives cimport (closed_forward_derivatives as _cfd,
                                            closed_inverse_derivatives as _cid, deriv_scratch)
from gear.constraints._aba_route cimport closed_dynamics as _cdyn_aba
from gear.constraints._dense_route cimport closed_dense as _cdense
from gear.constraints._projection cimport closed_forward_projection as _cproj
from gear.constraints._inverse cimport closed_inverse as _cinv_dense
from gear.constraints._manifold cimport hold_rows
from gear.constraints._sparse_route cimport closed_inverse_sparse as _cinv_sparse
from gear.maximal._tree_route cimport maximal_dynamics as _cmax
from gear.maximal._kernel cimport (MaxC, MaxW, maxwork, maximal_assemble, joint_frames,
                                   gear_chol, gear_chol_clone, gear_chol_free)
from gear._data cimport (ModelData, ClosureData, _PARALLEL_FROM, _base2, _base3, _row, _orow, _vec,
                         _empty, State1, _state1, _empty2, _copied, _flags, _batch_in, _all_finite,
                         NEED_A, NEED_B, NEED_C, batch_threads, team_run, team_share, team_scratch)

cnp.import_array()


cdef inline int _cinv(const ModelC* m, const ClosC* c, const double* q, const double* dq,
                      const double* ddq, double* tau, const unsigned char* act,
                      const double* fext, double rcond, double* lam, double* info, Work* w,
                      CWork* cw) noexcept nogil:
    # closed inverse dynamics: the sparse route's when its plan is attached
    if c.spi != NULL:
        return _cinv_sparse(m, c, q, dq, ddq, tau, act, fext, rcond, lam, info, w, cw)
    return _cinv_dense(m, c, q, dq, ddq, tau, act, fext, rcond, lam, info, w, cw)


def maximal_frames(ModelData md not None, ClosureData cd not None, const double[::1] q, double[:, ::1] C,
                   double[:, ::1] Sp):
    """``C_i`` and ``S_i^+`` (nb, 36 each, as the maximal kernel computes
    them) at ``q``; returns the row kernel's status."""
    cdef Work w = work_from(&md.ws[0], md.nb)
    cdef CWork cw
    cdef int st, i
    if cd.c.mx == NULL:
        raise ValueError("maximal_frames: no maximal plan attached")
    cw = cwork_from_c(&cd.c, &cd.cws[0], md.nb, md.nv, cd.m, False)
    with nogil:
        st = _crows(&md.c, &cd.c, &q[0], NULL, NULL, NULL, NULL, &w, &cw)
        if st == 0:
            for i in range(md.nb):
                joint_frames(md.c.nvi[i], w.S + 36 * i, &C[i, 0], &Sp[i, 0])
    return st


def maximal_probe(ModelData md not None, ClosureData cd not None, const double[::1] q, double[::1] Kx):
    """The values of ``K = J Mb^{-1} J^T`` of the attached plan at ``q``
    (zero velocity and load) into ``Kx``; returns the kernel status."""
    cdef Work w = work_from(&md.ws[0], md.nb)
    cdef CWork cw
    cdef MaxW z
    cdef int st, k
    cdef const MaxC* x
    if cd.c.mx == NULL:
        raise ValueError("maximal_probe: no maximal plan attached")
    x = <const MaxC*> cd.c.mx
    if Kx.shape[0] != x.nnzK + x.nout:
        raise ValueError("maximal_probe: Kx has the wrong length")
    cw = cwork_from_c(&cd.c, &cd.cws[0], md.nb, md.nv, cd.m, False)
    z = maxwork(x, cw.mws)
    with nogil:
        st = maximal_assemble(&md.c, &cd.c, &q[0], NULL, NULL, NULL, NULL, &w, &cw, &z)
        if st == 0:
            for k in range(x.nnzK + x.nout):
                Kx[k] = z.Kx[k]
    return st


cdef inline int _cdyn(const ModelC* m, const ClosC* c, int route, const double* q,
                      const double* dq, double* ddq, double* tau, const unsigned char* pres,
                      const double* fext, double* lam, double* info, Work* w,
                      CWork* cw) noexcept nogil:
    # route 0: articulated-body passes (Kim eqs. 67-77); 1: build M (forward
    # and hybrid); 2: reduced-coordinate projection (forward and hybrid, the projection
    # solver); 3: maximal coordinates (needs the plan, whose prescription
    # rows fix which joints are prescribed)
    if route == 3 and c.mx != NULL:
        # the plan's prescription rows stand for ``pres`` (matched by the caller)
        return _cmax(m, c, q, dq, ddq, tau, fext, lam, info, w, cw)
    if route == 1:
        return _cdense(m, c, q, dq, ddq, tau, pres, fext, lam, info, w, cw)
    if route == 2:
        return _cproj(m, c, q, dq, ddq, tau, pres, fext, lam, info, w, cw)
    return _cdyn_aba(m, c, q, dq, ddq, tau, pres, fext, lam, info, w, cw)


cdef inline int _cdyn_held(const ModelC* m, const ClosC* c, int route, const double* q,
                           const double* dq, double* ddq, double* tau, const unsigned char* pres,
                           const double* fext, double* lam, double* info, double* held, int hold,
                           Work* w, CWork* cw) noexcept nogil:
    # _cdyn with rows held dependent (``held`` (m,), hold 2; see _psd.pxd's
    # psd_factor), or writing into ``held`` the rows to hold at a step's
    # stages after this solve at its start (hold 1: _manifold.pxd's
    # hold_rows, as the rollouts choose them); ``held`` NULL or route 3: _cdyn
    cdef int i, st
    if held == NULL or route == 3:
        return _cdyn(m, c, route, q, dq, ddq, tau, pres, fext, lam, info, w, cw)
    if hold == 2:
        for i in range(c.m):
            cw.held[i] = held[i]
        cw.hold = True
    st = _cdyn(m, c, route, q, dq, ddq, tau, pres, fext, lam, info, w, cw)
    cw.hold = False
    if hold == 1 and st == 0:
        st = hold_rows(m, c, q, w, cw, pres)
        for i in range(c.m):
            held[i] = cw.held[i]
    return st


def closed_rows(ModelData md not None, ClosureData cd not None, const double[:, ::1] q, const double[:, ::1] dq,
                double[:, ::1] g, double[:, :, ::1] A, double[:, ::1] bias, int[::1] status):
    """Residual, A and dA dq of each row of ``q`` (outputs may be None;
    ``dq`` None: zero bias).  ``status[k]``: 0 or ST_DIST_COINCIDE."""
    cdef Py_ssize_t N = q.shape[0], k
    cdef int m = cd.m, nv = md.nv
    cdef Work w = work_from(&md.ws[0], md.nb)
    cdef CWork cw = cwork_from_c(&cd.c, &cd.cws[0], md.nb, md.nv, cd.m, False)
    cdef const double* dqp = _base2(dq)
    cdef double* gp = <double*> _base2(g) if m > 0 else NULL
    cdef double* bp = <double*> _base2(bias) if m > 0 else NULL
    cdef double* Ap = <double*> _base3(A) if m > 0 and nv > 0 else NULL
    with nogil:
        for k in range(N):
            status[k] = _crows(&md.c, &cd.c, &q[k, 0], _row(dqp, k, nv), _orow(gp, k, m),
                               _orow(Ap, k, m * nv), _orow(bp, k, m), &w, &cw)


cdef struct CJob:
    # one batched closed-loop call shared by the team's parts (see _closed_part)
    bint inverse                # closed inverse dynamics, else forward/hybrid (_cdyn)
    const ModelC* m
    const ClosC* c
    int route, rows, wsize, cwsize
    bint full
    Py_ssize_t N
    const double* q
    const double* dq
    const double* ddq_in        # inverse: the accelerations
    double* ddq                 # forward: the accelerations out
    double* tau
    const unsigned char* sel    # forward: prescribed joints; inverse: actuated dofs
    const double* fext
    double rcond
    double* lam
    double* info
    int* status
    gear_chol* h0               # forward: the CHOLMOD handle each part clones
    double* held                # forward: (N, rows) rows held dependent / found dependent, or NULL
    int hold                    # ... 2 held, 1 found (_cdyn_held)
    int failed                  # a part could not allocate its workspace


cdef void _closed_part(void* job, int part, int nparts) noexcept nogil:
    """The team's part ``part``: its contiguous share of the states (as
    OpenMP's static schedule), on a workspace of its own."""
    cdef CJob* j = <CJob*> job
    cdef const ModelC* m = j.m
    cdef int nv = m.nv, nq = m.nq, nb = m.nb, r = j.rows
    cdef Py_ssize_t k, k0, k1
    cdef Work w
    cdef CWork cw
    cdef double* buf = team_scratch(j.wsize + j.cwsize + 1)
    if buf == NULL:
        j.failed = 1
        return
    w = work_from(buf, nb)
    cw = cwork_from_c(j.c, buf + j.wsize, nb, nv, r, j.full)
    team_share(j.N, part, nparts, &k0, &k1)
    if j.inverse:
        for k in range(k0, k1):
            j.status[k] = _cinv(m, j.c, j.q + k * nq, _row(j.dq, k, nv), _row(j.ddq_in, k, nv),
                                _orow(j.tau, k, nv), j.sel, _row(j.fext, k, 6 * nb), j.rcond,
                                _orow(j.lam, k, r), j.info + 2 * k, &w, &cw)
    else:
        cw.chol = gear_chol_clone(j.h0)      # NULL without a maximal plan
        for k in range(k0, k1):
            j.status[k] = _cdyn_held(m, j.c, j.route, j.q + k * nq, _row(j.dq, k, nv),
                                     _orow(j.ddq, k, nv), _orow(j.tau, k, nv), j.sel,
                                     _row(j.fext, k, 6 * nb), _orow(j.lam, k, r), j.info + 2 * k,
                                     _orow(j.held, k, r), j.hold, &w, &cw)
        gear_chol_free(<gear_chol*> cw.chol)


cdef void _closed_run(ModelData md, ClosureData cd, bint inverse, int route, bint full, Py_ssize_t N,
                      const double* q, const double* dq, const double* ddq_in, double* ddq, double* tau,
                      const unsigned char* sel, const double* fext, double rcond, double* lam,
                      double* info, int* status, int nthreads, double* held=NULL, int hold=0):
    # the states of one batched call (the fields of CJob) shared by
    # ``nthreads`` parts of the team
    cdef CJob j
    j.inverse = inverse
    j.m = &md.c
    j.c = &cd.c
    j.route = route
    j.rows = cd.m
    j.wsize = md.wsize
    j.cwsize = cd.cwsize
    j.full = full
    j.N = N
    j.q = q
    j.dq = dq
    j.ddq_in = ddq_in
    j.ddq = ddq
    j.tau = tau
    j.sel = sel
    j.fext = fext
    j.rcond = rcond
    j.lam = lam
    j.info = info
    j.status = status
    j.h0 = NULL if inverse else cd.h0
    j.held = held
    j.hold = hold
    j.failed = 0
    with nogil:
        team_run(nthreads, _closed_part, &j)
    if j.failed:
        raise MemoryError()


cdef void _cdyn_batch(ModelData md, ClosureData cd, int route, Py_ssize_t N, const double* qp,
                      const double* dqp, double* ddqp, double* taup, const unsigned char* pp,
                      const double* fp, double* lp, double* ip, int* status, int nthreads,
                      bint full, double* held=NULL, int hold=0):
    """The kernel over N states: in the calling thread (one state, or
    ``nthreads`` 1), else shared by the fork-join team (``gear/_team.h``),
    one workspace per part.  ``held`` (N, m) and ``hold``: as
    :func:`_cdyn_held`."""
    cdef Py_ssize_t k
    cdef int m = cd.m, nv = md.nv, nq = md.nq, nb = md.nb
    cdef Work w
    cdef CWork cw
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        cw = cwork_from_c(&cd.c, &cd.cws[0], nb, nv, m, full)
        cw.chol = cd.h0
        with nogil:
            for k in range(N):
                status[k] = _cdyn_held(&md.c, &cd.c, route, qp + k * nq, _row(dqp, k, nv),
                                       _orow(ddqp, k, nv), _orow(taup, k, nv), pp, _row(fp, k, 6 * nb),
                                       _orow(lp, k, m), ip + 2 * k, _orow(held, k, m), hold, &w, &cw)
        return
    _closed_run(md, cd, False, route, full, N, qp, dqp, NULL, ddqp, taup, pp, fp, 0.0, lp, ip, status,
                nthreads, held, hold)


cdef inline int _deriv_one(const ModelC* m, const ClosC* c, int nk, bint inverse, const double* q,
                           const double* dq, const double* x, const unsigned char* act, double* v,
                           const double* fext, double rcond, double* lam, double* X, double* Y,
                           double* s, Work* w, CWork* cw) noexcept nogil:
    # one state of the forward (x = tau in, v = ddq out) or the inverse
    # (x = ddq in, v = tau: passive in, actuated out) derivative kernel
    if inverse:
        return _cid(m, c, nk, q, dq, x, act, v, fext, rcond, lam, X, Y, s, w, cw)
    return _cfd(m, c, nk, q, dq, x, fext, rcond, v, lam, X, Y, s, w, cw)


cdef void _deriv_batch(ModelData md, ClosureData cd, int nk, bint inverse, Py_ssize_t N, const double* q,
                       const double* dq, const double* x, const unsigned char* act, double* v,
                       const double* fp, double rcond, double* lp, double* X, double* Yp, int* status,
                       int nthreads):
    # the kernel over N states (rows of q (N, nq), dq, x, v (N, nv), lam (N,
    # m), X (N, nv, 3 nv), Y (N, m, 3 nv), loads (N, nb, 6) or NULL): serial
    # for one state, else in parallel without the GIL, one workspace (Work,
    # CWork, the kernel's scratch) per thread
    cdef Py_ssize_t k
    cdef int m = cd.m, nv = md.nv, nq = md.nq, nb = md.nb, n3 = 3 * md.nv
    cdef int wsize = md.wsize, cwsize = cwork_size(md.nb, md.nv, cd.m)
    cdef int dsize = deriv_scratch(md.nb, md.nv, cd.m, nk)
    cdef Work w
    cdef CWork cw
    cdef double* buf = NULL        # each thread sets its own (initialised for the firstprivate copy)
    if m == 0:
        lp = NULL
        Yp = NULL
    if N == 1 or nthreads <= 1:
        nthreads = 1
    with nogil, parallel(num_threads=nthreads):
        buf = <double*> malloc((wsize + cwsize + dsize + 1) * sizeof(double))
        w = work_from(buf, nb)
        cw = cwork_from(buf + wsize, nb, nv, m)
        for k in prange(N, schedule='guided'):
            status[k] = _deriv_one(&md.c, &cd.c, nk, inverse, q + k * nq, dq + k * nv, x + k * nv, act,
                                   v + k * nv, _row(fp, k, 6 * nb), rcond, _orow(lp, k, m),
                                   X + k * nv * n3, _orow(Yp, k, m * n3), buf + wsize + cwsize, &w, &cw)
        free(buf)


cdef tuple _deriv_single(ModelData md, ClosureData cd, int nk, bint inverse, const State1* st,
                         const unsigned char* act, v, double rcond):
    # one state without loads into fresh arrays (``v``: ddq out, or tau in/out)
    cdef CWork cw
    cdef cnp.npy_intp dims[2]
    cdef int m = cd.m, nv = md.nv, status
    cdef int cwsize = cwork_size(md.nb, md.nv, cd.m)
    cdef Work w = work_from(&md.ws[0], md.nb)
    dims[0] = m
    lam = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = nv
    dims[1] = 3 * nv
    X = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = m
    Y = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
    dims[0] = cwsize + deriv_scratch(md.nb, nv, m, nk) + 1
    buf = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
    cw = cwork_from(<double*> cnp.PyArray_DATA(buf), md.nb, nv, m)
    status = _deriv_one(&md.c, &cd.c, nk, inverse, st.q, st.a, st.b, act, <double*> cnp.PyArray_DATA(v), NULL,
                        rcond, <double*> cnp.PyArray_DATA(lam), <double*> cnp.PyArray_DATA(X),
                        <double*> cnp.PyArray_DATA(Y), <double*> cnp.PyArray_DATA(buf) + cwsize, &w, &cw)
    return v, lam, X, Y, status


def closed_forward_derivatives(ModelData md not None, ClosureData cd not None, int nk, const double[:, ::1] q,
                               const double[:, ::1] dq, const double[:, ::1] tau,
                               const double[:, :, ::1] fext, double rcond, double[:, ::1] ddq,
                               double[:, ::1] lam, double[:, :, ::1] X, double[:, :, ::1] Y,
                               int[::1] status, int nthreads):
    """Closed-chain forward dynamics and its derivatives for each row
    (``gear/constraints/_derivatives.pxd``): ``X`` (N, nv, 3 nv), ``Y`` (N,
    m, 3 nv); ``status[k]`` 0, ST_MASS_NOT_PD, ST_DIST_COINCIDE or
    ST_DERIV_REDUNDANT (the caller takes the NumPy reference).  Serial for
    one state, else in parallel without the GIL."""
    _deriv_batch(md, cd, nk, False, q.shape[0], &q[0, 0], &dq[0, 0], &tau[0, 0], NULL, &ddq[0, 0],
                 _base3(fext), rcond, &lam[0, 0] if cd.m > 0 else NULL, &X[0, 0, 0],
                 &Y[0, 0, 0] if cd.m > 0 else NULL, &status[0], nthreads)


def closed_inverse_derivatives(ModelData md not None, ClosureData cd not None, int nk, const double[:, ::1] q,
                               const double[:, ::1] dq, const double[:, ::1] ddq,
                               const unsigned char[::1] actuated, double[:, ::1] tau,
                               const double[:, :, ::1] fext, double rcond, double[:, ::1] lam,
                               double[:, :, ::1] X, double[:, :, ::1] Y, int[::1] status, int nthreads):
    """Closed inverse dynamics and its derivatives for each row
    (``gear/constraints/_derivatives.pxd``): ``tau`` (N, nv) holds the
    passive torques on entry; ``X`` (N, nv, 3 nv), ``Y`` (N, m, 3 nv);
    ``status[k]`` 0, ST_DIST_COINCIDE, ST_INEXACT or ST_DERIV_REDUNDANT."""
    _deriv_batch(md, cd, nk, True, q.shape[0], &q[0, 0], &dq[0, 0], &ddq[0, 0], &actuated[0], &tau[0, 0],
                 _base3(fext), rcond, &lam[0, 0] if cd.m > 0 else NULL, &X[0, 0, 0],
                 &Y[0, 0, 0] if cd.m > 0 else NULL, &status[0], nthreads)


cdef object _deriv_light(ModelData md, ClosureData cd, int nk, bint inverse, q, dq, x,
                         const unsigned char* act, tau_passive, double rcond):
    """The allocation-light path of both derivative kernels (no loads): one
    state (see :func:`_state1`) or a batch of float64 C-contiguous (N, n)
    arrays, finite, with unit quaternions, run in the calling thread below
    ``_PARALLEL_FROM`` states.  ``(v, lam, X, Y, status)`` (``v``: ddq, or
    tau with ``tau_passive`` (None: zero) on the passive dofs; ``status``
    0, or the first nonzero status of a batch), or None when the arguments
    need the general path."""
    cdef State1 st
    cdef Py_ssize_t N, k, nv = md.nv
    cdef const double* qp
    cdef const double* dqp
    cdef const double* xp
    cdef const double* tp = NULL
    cdef int nthreads = 1
    cdef int* stv
    cdef cnp.npy_intp dims[3]
    if _state1(md, q, dq, x, &st):
        if tau_passive is not None:
            tp = _vec(tau_passive, nv)
            if tp == NULL:
                return None
        return _deriv_single(md, cd, nk, inverse, &st, act, _copied(tp, False, 1, nv), rcond)
    if not _batch_in(md, q, dq, x, tau_passive, NEED_A | NEED_B, &N, &qp, &dqp, &xp, &tp):
        return None
    v = _copied(tp, True, N, nv)
    lam = _empty2(N, cd.m)
    dims[0] = N
    dims[1] = nv
    dims[2] = 3 * nv
    X = cnp.PyArray_EMPTY(3, dims, cnp.NPY_DOUBLE, 0)
    dims[1] = cd.m
    Y = cnp.PyArray_EMPTY(3, dims, cnp.NPY_DOUBLE, 0)
    status = cnp.PyArray_ZEROS(1, dims, cnp.NPY_INT32, 0)
    stv = <int*> cnp.PyArray_DATA(status)
    if N >= _PARALLEL_FROM:
        nthreads = batch_threads()
    _deriv_batch(md, cd, nk, inverse, N, qp, dqp, xp, act, <double*> cnp.PyArray_DATA(v), NULL, rcond,
                 <double*> cnp.PyArray_DATA(lam), <double*> cnp.PyArray_DATA(X), <double*> cnp.PyArray_DATA(Y),
                 stv, nthreads)
    for k in range(N):
        if stv[k] != 0:
            return v, lam, X, Y, stv[k]
    return v, lam, X, Y, 0


def closed_inverse_derivatives1(ModelData md not None, ClosureData cd not None, int nk, q, dq, ddq, actuated, tau_passive,
                                double rcond):
    """Fast :func:`closed_inverse_derivatives` of one state or a batch (no
    loads): ``(tau, lam, X, Y, status)``, or None when the arguments need
    the general path (see :func:`_deriv_light`; ``actuated`` a uint8 or
    bool C-contiguous array, one entry per dof; ``tau_passive`` None or
    shaped as ``ddq``)."""
    cdef const unsigned char* a = _flags(actuated, md.nv)
    if a == NULL:
        return None
    return _deriv_light(md, cd, nk, True, q, dq, ddq, a, tau_passive, rcond)


def closed_forward_derivatives1(ModelData md not None, ClosureData cd not None, int nk, q, dq, tau, double rcond):
    """Fast :func:`closed_forward_derivatives` of one state or a batch (no
    loads): ``(ddq, lam, X, Y, status)``, or None when the arguments need
    the general path (see :func:`_deriv_light`)."""
    return _deriv_light(md, cd, nk, False, q, dq, tau, NULL, None, rcond)


def closed_dynamics(ModelData md not None, ClosureData cd not None, const double[:, ::1] q, const double[:, ::1] dq,
                    double[:, ::1] ddq, double[:, ::1] tau, const unsigned char[::1] prescribed,
                    const double[:, :, ::1] fext, double[:, ::1] lam, double[:, ::1] info,
                    int[::1] status, int nthreads, int route=0, double[:, ::1] held=None, int hold=0):
    """Constrained forward (``prescribed`` None) or hybrid dynamics of each
    row, in place as ``hybrid``; ``lam`` (N, m) and ``info`` (N, 2: rank,
    residual) written; ``status`` as in ``hybrid``, or ST_DIST_COINCIDE /
    ST_MASS_NOT_PD.  ``route`` 1 builds M, 2 projects (forward dynamics only).
    ``held`` (N, m): with ``hold`` 1 gets the rows to hold dependent at a
    step's stages after this solve at its start (1.0; the rows the solve
    found dependent, chosen by pivoting, ``_manifold.pxd``'s hold_rows),
    with ``hold`` 2 gives rows to treat as dependent (the stages).
    Shared by the team's parts (one workspace each)."""
    cdef Py_ssize_t N = q.shape[0]
    cdef int m = cd.m, nv = md.nv
    cdef const unsigned char* pp = NULL
    cdef bint full = route != 3           # compact (cd.cwsize): the maximal kernel only
    if prescribed is not None:
        pp = &prescribed[0]
    if cd.c.mx != NULL and full:
        raise ValueError("closed_dynamics: rows with a maximal plan take route 3")
    cdef double* hp = NULL
    if held is not None and m > 0:
        if held.shape[0] != N or held.shape[1] != m or hold not in (1, 2):
            raise ValueError("closed_dynamics: held must be (N, m) with hold 1 or 2")
        hp = &held[0, 0]
    _cdyn_batch(md, cd, route, N, &q[0, 0], _base2(dq), &ddq[0, 0] if nv > 0 else NULL,
                &tau[0, 0] if nv > 0 else NULL, pp, _base3(fext), &lam[0, 0] if m > 0 else NULL,
                &info[0, 0], &status[0], nthreads, full, hp, hold)


def closed_inverse(ModelData md not None, ClosureData cd not None, const double[:, ::1] q, const double[:, ::1] dq,
                   const double[:, ::1] ddq, double[:, ::1] tau, const unsigned char[::1] act,
                   const double[:, :, ::1] fext, double rcond, double[:, ::1] lam,
                   double[:, ::1] info, int[::1] status, int nthreads):
    """Closed-system inverse dynamics (``closed_inverse`` of
    gear/constraints/_inverse.pxd) of each row: ``tau`` holds the passive
    dofs' torques on entry and gets the actuated ones (``act`` (nv,) 1 on
    them); ``lam`` (N, m) and ``info`` (N, 2: rank, relative residual of
    eq. 57) written; ``status`` 0, ST_INEXACT (-5: fall back to hybrid
    dynamics), ST_DIST_COINCIDE or ST_MASS_NOT_PD.  Shared by the team's
    parts (one workspace each)."""
    cdef int m = cd.m, nv = md.nv
    _closed_inverse_batch(md, cd, q.shape[0], &q[0, 0], _base2(dq), _base2(ddq),
                          &tau[0, 0] if nv > 0 else NULL, &act[0] if nv > 0 else NULL, _base3(fext),
                          rcond, &lam[0, 0] if m > 0 else NULL, &info[0, 0], &status[0], nthreads)


cdef void _closed_inverse_batch(ModelData md, ClosureData cd, Py_ssize_t N, const double* qp,
                                const double* dqp, const double* ddqp, double* taup,
                                const unsigned char* ap, const double* fp, double rcond, double* lp,
                                double* ip, int* status, int nthreads):
    """The inverse kernel over N states: in the calling thread (one state,
    or ``nthreads`` 1), else shared by the team."""
    cdef Py_ssize_t k
    cdef int m = cd.m, nv = md.nv, nq = md.nq, nb = md.nb
    cdef Work w
    cdef CWork cw
    if N == 1 or nthreads <= 1:
        w = work_from(&md.ws[0], nb)
        cw = cwork_from_c(&cd.c, &cd.cws[0], nb, nv, m, True)
        with nogil:
            for k in range(N):
                status[k] = _cinv(&md.c, &cd.c, qp + k * nq, _row(dqp, k, nv), _row(ddqp, k, nv),
                                  _orow(taup, k, nv), ap, _row(fp, k, 6 * nb), rcond, _orow(lp, k, m),
                                  ip + 2 * k, &w, &cw)
        return
    _closed_run(md, cd, True, 0, True, N, qp, dqp, ddqp, NULL, taup, ap, fp, rcond, lp, ip, status,
                nthreads)


def maximal_terms(ModelData md not None, ClosureData cd not None, const double[::1] q, const double[::1] dq,
                  double[:, ::1] T, double[:, ::1] S, double[:, ::1] eta, double[:, ::1] V,
                  double[:, ::1] Tw, double[:, ::1] acc, double[:, ::1] F, double[::1] bias):
    """Per-body terms of the maximal-coordinate system at one state: the
    joint transforms T_{p,i} (nb, 12), motion subspaces S_i (nb, 36,
    column-major 6 x nv_i), eta_i (nb, 6), body twists V_i (nb, 6), world
    poses (nb, 12), bias accelerations (nb, 6), and the loop rows' body
    wrenches F (m, 12) and dA dq (m,).  ``dq`` may be empty (zero
    velocity).  Returns the kernel status (0, or ST_DIST_COINCIDE)."""
    cdef Work w = work_from(&md.ws[0], md.nb)
    cdef CWork cw = cwork_from_c(&cd.c, &cd.cws[0], md.nb, md.nv, cd.m, False)
    cdef const double* dqp = &dq[0] if dq.shape[0] > 0 else NULL
    cdef int st, i, k, nb = md.nb
    with nogil:
        st = _crows(&md.c, &cd.c, &q[0], dqp, NULL, NULL, NULL, &w, &cw)   # fills w and cw
        for i in range(nb):
            for k in range(12):
                T[i, k] = w.T[12 * i + k]
                Tw[i, k] = cw.Tw[12 * i + k]
            for k in range(36):
                S[i, k] = w.S[36 * i + k]
            for k in range(6):
                eta[i, k] = w.eta[6 * i + k]
                V[i, k] = w.V[6 * i + k]
                acc[i, k] = cw.acc[6 * i + k]
        for i in range(cd.m):
            for k in range(12):
                F[i, k] = cw.F[12 * i + k]
            bias[i] = cw.bias[i]
    return st


cdef object _UNSET = object()
cdef object _LAZY = object()


cdef inline object _field(object v, str name):
    if v is _UNSET:
        raise AttributeError(f"this ConstraintResult has no {name!r}")
    return v


cdef class ConstraintResult:
    """Result of a constrained dynamics call.

    Attributes
    ----------
    ddq : ndarray, shape (nv,) or (N, nv)
    lam : ndarray, shape (nc,) or (N, nc)
        Multipliers: ``A^T lam`` is the generalized constraint force.
    residual : float or ndarray (N,)
        ``|A ddq + dA dq|``.
    success : bool or ndarray (N,)
    message : str
    solver : str
    stats : dict
        Work counters (``factorizations``, ``rank``).

    Other results carry more fields (inverse dynamics: ``tau``, ``exact``;
    hybrid dynamics: ``tau``); a field a result does not carry raises
    ``AttributeError``.  The common fields live in C slots so that the
    native single-call path builds a result in tens of nanoseconds.
    """
    cdef object _ddq, _lam, _residual, _success, _message, _solver, _stats, _extra
    cdef int _rank, _nfac
    cdef dict __dict__

    def __cinit__(self, *args, **kwargs):
        self._ddq = _UNSET
        self._lam = _UNSET
        self._residual = _UNSET
        self._success = _UNSET
        self._message = _UNSET
        self._solver = _UNSET
        self._stats = _UNSET
        self._extra = None

    def __init__(self, **fields):
        for k, v in fields.items():
            setattr(self, k, v)

    @property
    def ddq(self):
        return _field(self._ddq, "ddq")

    @ddq.setter
    def ddq(self, v):
        self._ddq = v

    @property
    def lam(self):
        return _field(self._lam, "lam")

    @lam.setter
    def lam(self, v):
        self._lam = v

    @property
    def residual(self):
        return _field(self._residual, "residual")

    @residual.setter
    def residual(self, v):
        self._residual = v

    @property
    def success(self):
        return _field(self._success, "success")

    @success.setter
    def success(self, v):
        self._success = v

    @property
    def message(self):
        return _field(self._message, "message")

    @message.setter
    def message(self, v):
        self._message = v

    @property
    def solver(self):
        return _field(self._solver, "solver")

    @solver.setter
    def solver(self, v):
        self._solver = v

    @property
    def stats(self):
        if self._stats is _LAZY:
            if self._extra is not None:
                # (an extra "rank": None asks for the kernel's rank)
                self._stats = dict(self._extra)
                self._stats.update(factorizations=self._nfac, native=True)
                if "rank" in self._stats and self._stats["rank"] is None:
                    self._stats["rank"] = self._rank
            else:
                self._stats = {"factorizations": self._nfac, "rank": self._rank, "native": True}
        return _field(self._stats, "stats")

    @stats.setter
    def stats(self, v):
        self._stats = v

    def _fields(self):
        out = {}
        for name in ("ddq", "lam", "residual", "success", "message", "solver", "stats"):
            try:
                out[name] = getattr(self, name)
            except AttributeError:
                pass
        out.update(vars(self))
        return out

    def __reduce__(self):
        # through gear._core, not this build's module: a pickle may be loaded
        # where another build of this extension runs
        from gear import _core
        return (_core._make_result, (self._fields(),))

    def __repr__(self):
        return f"ConstraintResult({', '.join(self._fields())})"


cdef ConstraintResult _native_result(ddq, lam, const double* info, int nfac, solver_name,
                                    dict counters, extra):
    # the result of a native single call (info = rank or factorisations,
    # residual); the stats dict is built when read; counts the call
    counters["calls"] += 1
    counters["factorizations"] += nfac
    cdef ConstraintResult out = ConstraintResult.__new__(ConstraintResult)
    out._ddq = ddq
    out._lam = lam
    out._residual = info[1]
    out._success = True
    out._message = "ok"
    out._solver = solver_name
    out._stats = _LAZY             # {"factorizations", "rank", "native"} (+ extra) when read
    out._rank = <int> info[0]
    out._nfac = nfac
    out._extra = extra
    return out


cdef tuple _rank_residual(const double* info, Py_ssize_t N):
    # the (N, 2) info of a batch as its ranks (int64) and residuals
    cdef cnp.npy_intp n1 = N
    cdef Py_ssize_t k
    rank = cnp.PyArray_EMPTY(1, &n1, cnp.NPY_INT64, 0)
    residual = _empty(N)
    cdef cnp.int64_t* rv = <cnp.int64_t*> cnp.PyArray_DATA(rank)
    cdef double* rp = <double*> cnp.PyArray_DATA(residual)
    for k in range(N):
        rv[k] = <cnp.int64_t> info[2 * k]
        rp[k] = info[2 * k + 1]
    return rank, residual


cdef ConstraintResult _batch_result(ddq, lam, residual, const double* a, const double* b, Py_ssize_t N,
                                    Py_ssize_t n, solver_name, stats, bad_message="ok"):
    # a batch's result: ``success`` True for the states whose rows (n) of
    # ``a`` and of ``b`` (if not NULL) are all finite; message "ok", or
    # ``bad_message`` where some state is not
    cdef cnp.npy_intp n1 = N
    cdef Py_ssize_t k, i
    cdef bint okall = True
    success = cnp.PyArray_EMPTY(1, &n1, cnp.NPY_BOOL, 0)
    cdef cnp.npy_bool* okp = <cnp.npy_bool*> cnp.PyArray_DATA(success)
    for k in range(N):
        okp[k] = _all_finite(a + k * n, n) and (b == NULL or _all_finite(b + k * n, n))
        okall = okall and okp[k]
    cdef ConstraintResult out = ConstraintResult.__new__(ConstraintResult)
    out._ddq = ddq
    out._lam = lam
    out._residual = residual
    out._success = success
    out._message = "ok" if okall else bad_message
    out._solver = solver_name
    out._stats = stats
    return out


cdef object _cdyn_light(ModelData md, ClosureData cd, int route, Py_ssize_t N, const double* qp,
                        const double* dqp, double* ddqp, double* taup, const unsigned char* pp):
    # the forward (pp NULL) or hybrid kernel on a light-path batch (routes
    # 0-2), in the calling thread below _PARALLEL_FROM states: (lam, info),
    # or None where some state failed
    cdef cnp.npy_intp n1 = N
    cdef Py_ssize_t k
    lam = _empty2(N, cd.m)
    info = _empty2(N, 2)
    status = cnp.PyArray_ZEROS(1, &n1, cnp.NPY_INT32, 0)
    cdef int* stv = <int*> cnp.PyArray_DATA(status)
    _cdyn_batch(md, cd, route, N, qp, dqp, ddqp, taup, pp, NULL, <double*> cnp.PyArray_DATA(lam),
                <double*> cnp.PyArray_DATA(info), stv, batch_threads() if N >= _PARALLEL_FROM else 1, True)
    for k in range(N):
        if stv[k] != 0:
            return None
    return lam, info


cdef class FastForward:
    """One-state constrained forward dynamics with the least Python in
    between: validates like ``rnea1`` (else returns None for the general
    path), runs the kernel, and builds the result object directly."""
    cdef ModelData md
    cdef ClosureData cd
    cdef int route
    cdef object solver_name
    cdef dict counters
    cdef int nfac
    cdef object extra

    def __init__(self, ModelData md not None, ClosureData cd not None, int route, solver_name, dict counters,
                 int factorizations=1, extra=None):
        # route 3 (maximal): the factorisations are counted per call, and the
        # stats are ``extra`` plus that count
        self.md, self.cd, self.route = md, cd, route
        self.solver_name, self.counters = solver_name, counters
        self.nfac = factorizations
        self.extra = extra

    def __call__(self, q, dq, tau):
        cdef State1 st
        cdef Work w
        cdef CWork cw
        cdef double info[2]
        cdef int s
        if not _state1(self.md, q, dq, tau, &st):
            if self.route != 3:
                return self._batch(q, dq, tau)
            return None
        ddq = _empty(self.md.nv)
        lam = _empty(self.cd.m)
        w = work_from(&self.md.ws[0], self.md.nb)
        cw = cwork_from_c(&self.cd.c, &self.cd.cws[0], self.md.nb, self.md.nv, self.cd.m, False)
        cw.chol = self.cd.h0
        cdef double* pd = <double*> cnp.PyArray_DATA(ddq)
        cdef double* pl = <double*> cnp.PyArray_DATA(lam)
        if self.md.nb >= 32:
            # releasing the GIL costs about 0.1 us: worth it on large models only
            with nogil:
                s = _cdyn(&self.md.c, &self.cd.c, self.route, st.q, st.a, pd, <double*> st.b, NULL, NULL,
                          pl, info, &w, &cw)
        else:
            s = _cdyn(&self.md.c, &self.cd.c, self.route, st.q, st.a, pd, <double*> st.b, NULL, NULL,
                      pl, info, &w, &cw)
        if s != 0:
            return None
        return _native_result(ddq, lam, info, <int> info[0] if self.route == 3 else self.nfac,
                              self.solver_name, self.counters, self.extra)

    cdef object _batch(self, q, dq, tau):
        """A batch (N, nq), (N, nv), (N, nv) of float64 C-contiguous finite
        arrays with unit quaternions, validated and run here with the least
        Python in between (the kernel in the calling thread below
        ``_PARALLEL_FROM`` states, no thread team to start); anything else
        returns None for the general path.  The same result as
        ``ConstrainedModel.forward_dynamics``'s batch path."""
        cdef Py_ssize_t N, nv = self.md.nv
        cdef const double* qp
        cdef const double* dqp
        cdef const double* tp
        cdef const double* unused
        if not _batch_in(self.md, q, dq, tau, None, NEED_A | NEED_B, &N, &qp, &dqp, &tp, &unused):
            return None
        ddq = _empty2(N, nv)
        r = _cdyn_light(self.md, self.cd, self.route, N, qp, dqp, <double*> cnp.PyArray_DATA(ddq),
                        <double*> tp, NULL)        # (tau read only: no joint is prescribed)
        if r is None:
            return None                            # the general path reports it
        lam, info = r
        rank, residual = _rank_residual(<const double*> cnp.PyArray_DATA(info), N)
        self.counters["calls"] += N
        self.counters["factorizations"] += N * self.nfac
        stats = {"factorizations": N * self.nfac, "rank": rank, "native": True}
        if self.extra is not None:
            stats.update({key: v for key, v in self.extra.items() if key != "rank"})
        return _batch_result(ddq, lam, residual, <const double*> cnp.PyArray_DATA(ddq), NULL, N, nv,
                             self.solver_name, stats, "non-finite result in some states")


cdef class FastInverse:
    """One-state closed inverse dynamics (default objective) with the least
    Python in between, like :class:`FastForward`: ``act`` must be a bool
    array per velocity coordinate and ``tau_passive`` None or a float64
    vector; anything else, an argument that does not pass the checks of
    ``rnea1``, or an under-actuated state (the general path then answers
    with hybrid dynamics) returns None."""
    cdef ModelData md
    cdef ClosureData cd
    cdef double rcond
    cdef object solver_name
    cdef dict counters

    def __init__(self, ModelData md not None, ClosureData cd not None, double rcond, solver_name, dict counters):
        self.md, self.cd, self.rcond = md, cd, rcond
        self.solver_name, self.counters = solver_name, counters

    def __call__(self, q, dq, ddq, act, tau_passive):
        cdef State1 st
        cdef const double* tp = NULL
        cdef Work w
        cdef CWork cw
        cdef double info[2]
        cdef int s
        cdef cnp.ndarray am
        cdef Py_ssize_t nv = self.md.nv
        if not _bools_ok(act, nv):
            return None
        am = <cnp.ndarray> act
        if not _state1(self.md, q, dq, ddq, &st):
            return self._batch(q, dq, ddq, am, tau_passive)
        if tau_passive is not None:
            tp = _vec(tau_passive, nv)
            if tp == NULL:
                return None
        tau = _copied(tp, False, 1, nv)
        ddq_o = _copied(st.b, False, 1, nv)
        lam = _empty(self.cd.m)
        w = work_from(&self.md.ws[0], self.md.nb)
        cw = cwork_from_c(&self.cd.c, &self.cd.cws[0], self.md.nb, nv, self.cd.m, True)
        s = _cinv(&self.md.c, &self.cd.c, st.q, st.a, st.b, <double*> cnp.PyArray_DATA(tau),
                  <const unsigned char*> cnp.PyArray_DATA(am), NULL, self.rcond,
                  <double*> cnp.PyArray_DATA(lam), info, &w, &cw)
        if s != 0:
            return None
        out = _native_result(ddq_o, lam, info, 1, self.solver_name, self.counters, None)
        out._residual = _UNSET          # (inverse dynamics carries no residual)
        out.tau = tau
        out.exact = True
        return out


    cdef object _batch(self, q, dq, ddq, cnp.ndarray act, tau_passive):
        """A batch of float64 C-contiguous finite arrays (``tau_passive``
        None or (N, nv)) with unit quaternions, as :meth:`FastForward._batch`;
        None for anything else or when some state is under-actuated (the
        general path answers those with hybrid dynamics).  The general batch
        path's result, bit for bit."""
        cdef Py_ssize_t N, k, nv = self.md.nv
        cdef const double* qp
        cdef const double* dqp
        cdef const double* ap
        cdef const double* tp
        cdef int nthreads = 1
        if nv == 0 or not _batch_in(self.md, q, dq, ddq, tau_passive, NEED_A | NEED_B, &N, &qp, &dqp, &ap,
                                    &tp):
            return None
        tau = _copied(tp, True, N, nv)
        lam = _empty2(N, self.cd.m)
        info = _empty2(N, 2)
        cdef cnp.npy_intp n1 = N
        status = cnp.PyArray_ZEROS(1, &n1, cnp.NPY_INT32, 0)
        cdef int* stv = <int*> cnp.PyArray_DATA(status)
        if N >= _PARALLEL_FROM:
            nthreads = batch_threads()
        _closed_inverse_batch(self.md, self.cd, N, qp, dqp, ap, <double*> cnp.PyArray_DATA(tau),
                              <const unsigned char*> cnp.PyArray_DATA(act), NULL, self.rcond,
                              <double*> cnp.PyArray_DATA(lam) if self.cd.m > 0 else NULL,
                              <double*> cnp.PyArray_DATA(info), stv, nthreads)
        for k in range(N):
            if stv[k] != 0:
                return None                    # under-actuated or failing: the general path
        self.counters["calls"] += N
        self.counters["factorizations"] += N
        exact = cnp.PyArray_EMPTY(1, &n1, cnp.NPY_BOOL, 0)
        memset(cnp.PyArray_DATA(exact), 1, N)
        out = _batch_result(_copied(ap, True, N, nv), lam, _UNSET, <const double*> cnp.PyArray_DATA(tau), NULL, N,
                            nv, self.solver_name, {"factorizations": N, "native": True})
        out.tau = tau
        out.exact = exact
        return out


cdef inline bint _bools_ok(object a, Py_ssize_t n):
    # a bool C-contiguous vector (n,): the actuated dofs, the prescribed joints
    cdef cnp.ndarray am
    if not cnp.PyArray_CheckExact(a):
        return False
    am = <cnp.ndarray> a
    return (cnp.PyArray_TYPE(am) == cnp.NPY_BOOL and cnp.PyArray_NDIM(am) == 1
            and cnp.PyArray_DIM(am, 0) == n and cnp.PyArray_IS_C_CONTIGUOUS(am))


cdef class FastHybrid:
    """Constrained hybrid dynamics of one state or a batch with the least
    Python in between, like :class:`FastForward`: ``prescribed`` must be a
    bool array with one entry per joint (anything else, or an argument
    that does not pass the checks of ``rnea1`` or of
    :meth:`FastForward._batch`, returns None for the general path).
    ``plan(mask_bytes)`` (a Python callable, called once per prescribed
    set) gives ``(ClosureData, route, extra_stats)`` or None."""
    cdef ModelData md
    cdef object solver_name
    cdef dict counters
    cdef object plan
    cdef dict plans
    cdef int nfac

    def __init__(self, ModelData md not None, plan, solver_name, dict counters, int factorizations=1):
        # factorisations counted per call (route 3: the kernel's own count)
        self.md, self.plan = md, plan
        self.solver_name, self.counters = solver_name, counters
        self.nfac = factorizations
        self.plans = {}

    def __call__(self, q, dq, ddq, tau, prescribed):
        cdef State1 st
        cdef const double* pd
        cdef Work w
        cdef CWork cw
        cdef double info[2]
        cdef int s, route
        cdef ClosureData cd
        cdef cnp.ndarray pm
        cdef Py_ssize_t nv = self.md.nv
        if not _bools_ok(prescribed, self.md.nb):
            return None
        pm = <cnp.ndarray> prescribed
        if not _state1(self.md, q, dq, tau, &st):
            return self._batch(q, dq, ddq, tau, pm)
        pd = _vec(ddq, nv)
        if pd == NULL:
            return None
        p = self._plan_of(pm)
        if p is None:
            return None
        cd, route, extra = p
        ddq_o = _copied(pd, False, 1, nv)
        tau_o = _copied(st.b, False, 1, nv)
        lam = _empty(cd.m)
        w = work_from(&self.md.ws[0], self.md.nb)
        cw = cwork_from_c(&cd.c, &cd.cws[0], self.md.nb, self.md.nv, cd.m, route != 3)
        cw.chol = cd.h0
        s = _cdyn(&self.md.c, &cd.c, route, st.q, st.a, <double*> cnp.PyArray_DATA(ddq_o),
                  <double*> cnp.PyArray_DATA(tau_o),
                  <const unsigned char*> cnp.PyArray_DATA(pm), NULL,
                  <double*> cnp.PyArray_DATA(lam), info, &w, &cw)
        if s != 0:
            return None
        out = _native_result(ddq_o, lam, info, <int> info[0] if route == 3 else self.nfac,
                             self.solver_name, self.counters, extra)
        out.tau = tau_o
        return out

    cdef object _plan_of(self, cnp.ndarray pm):
        # (ClosureData, route, extra stats) of a prescribed mask, or None
        key = pm.tobytes()
        p = self.plans.get(key, _UNSET)
        if p is _UNSET:
            p = self.plans[key] = self.plan(key)
        return p

    cdef object _batch(self, q, dq, ddq, tau, cnp.ndarray pm):
        """A batch of float64 C-contiguous finite arrays with unit
        quaternions, as :meth:`FastForward._batch` (routes 0-2; the maximal
        solver's batches keep the general path): the general batch path's
        result, bit for bit, or None for anything else."""
        cdef Py_ssize_t N, nv = self.md.nv
        cdef const double* qp
        cdef const double* dqp
        cdef const double* ap
        cdef const double* tp
        cdef int route
        cdef ClosureData cd
        if not _batch_in(self.md, q, dq, ddq, tau, NEED_A | NEED_B | NEED_C, &N, &qp, &dqp, &ap, &tp):
            return None
        p = self._plan_of(pm)                  # (after the checks, as the general path plans)
        if p is None:
            return None
        cd, route, extra = p
        if route == 3:
            return None
        ddq_o = _copied(ap, True, N, nv)
        tau_o = _copied(tp, True, N, nv)
        r = _cdyn_light(self.md, cd, route, N, qp, dqp, <double*> cnp.PyArray_DATA(ddq_o),
                        <double*> cnp.PyArray_DATA(tau_o), <const unsigned char*> cnp.PyArray_DATA(pm))
        if r is None:
            return None                            # the general path reports it
        lam, info = r
        self.counters["calls"] += N
        self.counters["factorizations"] += N * self.nfac
        rank, residual = _rank_residual(<const double*> cnp.PyArray_DATA(info), N)
        stats = {"factorizations": N * self.nfac, "rank": rank, "native": True}
        if extra is not None:
            stats.update({key: v for key, v in extra.items() if key != "rank"})
        out = _batch_result(ddq_o, lam, residual, <const double*> cnp.PyArray_DATA(ddq_o),
                            <const double*> cnp.PyArray_DATA(tau_o), N, nv, self.solver_name, stats)
        out.tau = tau_o
        return out

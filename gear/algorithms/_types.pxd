# cython: language_level=3
"""Frozen model arrays and per-state workspace shared by all kernels."""
from libc.stdint cimport uintptr_t

cdef struct ModelC:
    int nb            # number of bodies (one joint each)
    int nq
    int nv
    const int* parent     # parent body index, -1 for the world; parent[i] < i
    const int* jtype      # joint kind (gear/joints/_jcalc.pxd)
    const int* iq         # first q index of each joint
    const int* iv         # first v index of each joint
    const int* nvi        # joint dof
    const double* jparam  # (nb, 10) joint parameters
    const double* Xtree   # (nb, 12) placements, SE(3) layout of _spatial.pxd
    const double* inertia # (nb, 10) body inertias (m, h, Ibar), _spatial.pxd
    double g[3]           # gravity in the world frame
    const unsigned char* desc  # (nb, nb): desc[j * nb + i] = 1 if body i is in the subtree of j
    # the dof tree (ModelData.dof_parents), for the packed tree-sparse factor of _dense.pxd:
    const int* vpar       # (nv,) parent dof, -1 at a root (parent < child)
    const int* vdep       # (nv,) depth: the number of ancestors of dof k
    const int* voff       # (nv + 1,) packed row k (its ancestors' entries) starts at voff[k]
    const int* vanc       # (voff[nv],) the ancestors of dof k, root first: vanc[voff[k] + p] has depth p


cdef struct Work:
    double* T      # (nb, 12) T_{lambda(i), i}
    double* S      # (nb, 36) S_i, column-major 6 x nv_i
    double* V      # (nb, 6) body twists V_i
    double* dV     # (nb, 6) dV_i
    double* F      # (nb, 6) joint wrenches F_i
    double* eta    # (nb, 6) eta_i = ad_{V_i} S_i dq_i + dS_i dq_i
    double* Ih     # (nb, 36) articulated (or composite) inertias
    double* Bh     # (nb, 6) bias forces
    double* U      # (nb, 36) U_i = Ihat_i S_i (6 x nv_i, column-major)
    double* Dinv   # (nb, 36) Psi_i = (S_i^T Ihat_i S_i)^{-1}
    double* u      # (nb, 6) u_i = tau_i - S_i^T (Ihat_i eta_i + Bhat_i)
    double* A      # (nb, 6) Ad_{T^{-1}_{lambda(i),i}} dV_{lambda(i)}  (derivatives)
    double* D      # (nb, 36) per-direction tangents dV, ddV, dF (derivatives)
    double* C      # (nb, 10) composite inertias in the world frame (derivatives)
    double* G      # (nb, 54) derivatives: per dof r of joint i, (Y_i^T S_ir)_angular (3)
                   # and Ic_i S_ir (6) at G[54 i + 9 r] (_derivatives.pxd)
    bint poses_ok  # T and S already hold the next forward_pass's q: it skips the joint
                   # transforms once (set by the projecting rollout, gear/algorithms/_rollout.pxd)


cdef enum:
    WORK_PER_BODY = 12 + 36 + 6 + 6 + 6 + 6 + 36 + 6 + 36 + 36 + 6 + 6 + 36 + 10 + 54


cdef inline Work work_from(double* base, int nb) noexcept nogil:
    cdef Work w
    w.T = base
    w.S = w.T + 12 * nb
    w.V = w.S + 36 * nb
    w.dV = w.V + 6 * nb
    w.F = w.dV + 6 * nb
    w.eta = w.F + 6 * nb
    w.Ih = w.eta + 6 * nb
    w.Bh = w.Ih + 36 * nb
    w.U = w.Bh + 6 * nb
    w.Dinv = w.U + 36 * nb
    w.u = w.Dinv + 36 * nb
    w.A = w.u + 6 * nb
    w.D = w.A + 6 * nb
    w.C = w.D + 36 * nb
    w.G = w.C + 10 * nb
    w.poses_ok = False
    return w


cdef struct Lanes:
    # the workspace of the lane kernels (gear/spatial/_lanes.pxd layout:
    # component k of lane l at [k * LANES + l]); "scalar" arrays hold each
    # lane's own copy in the layout of Work
    double* T      # (nb, 12, LANES) T_{lambda(i), i}
    double* V      # (nb, 6, LANES) body twists
    double* dV     # (nb, 6, LANES)
    double* F      # (nb, 6, LANES) joint wrenches
    double* Sdq    # (nb, 6, LANES) S_i dq_i
    double* Sddq   # (nb, 6, LANES) S_i ddq_i (one-dof joints)
    double* eta    # (nb, 6, LANES) eta_i
    double* Ih     # (nb, 36, LANES) articulated inertias (ABA); world poses and
                   # composite inertias (CRBA, FK: as Work.Ih in crba_world)
    double* Bh     # (nb, 6, LANES) bias forces (ABA)
    double* U      # (nb, 6, LANES) U_i = Ihat_i S_i of the joints jcalc_placed_lanes covers (ABA)
    double* Dinv   # (nb, LANES) their Psi_i
    double* u      # (nb, LANES) their u_i
    double* S      # scalar (LANES, nb, 36): each lane's S_i (lane 0's for jcalc_lanes_kind)
    double* Us     # scalar (LANES, nb, 36): U_i of the other joints (ABA);
                   # CRBA: the world S columns, (nb, 36, LANES)
    double* Dinvs  # scalar (LANES, nb, 36): their Psi_i
    double* us     # scalar (LANES, nb, 6): their u_i
    double* t      # (6, LANES) scratch
    double* Pi     # (36, LANES) scratch: Pi_i; Ihat_i dV_i + Bhat_i (prescribed joints)
    double* dV0    # (6, LANES) the base acceleration (0, -g)
    double* G      # (nb, 64, LANES) derivatives: Work.G's per-dof vectors (54), then the
                   # composite inertia (10); they also
                   # keep world quantities in Ih (T0 | I0 | V0 | A0), the world S
                   # columns in Us and Work.Dinv's (h | p | F0 | P | mu) in Dinvs


cdef inline Lanes lanes_from(double* base, int nb, int lanes) noexcept nogil:
    # ``base`` holds lanes_size(nb, lanes) doubles
    cdef Lanes w
    w.T = base
    w.V = w.T + 12 * lanes * nb
    w.dV = w.V + 6 * lanes * nb
    w.F = w.dV + 6 * lanes * nb
    w.Sdq = w.F + 6 * lanes * nb
    w.Sddq = w.Sdq + 6 * lanes * nb
    w.eta = w.Sddq + 6 * lanes * nb
    w.Ih = w.eta + 6 * lanes * nb
    w.Bh = w.Ih + 36 * lanes * nb
    w.U = w.Bh + 6 * lanes * nb
    w.Dinv = w.U + 6 * lanes * nb
    w.u = w.Dinv + lanes * nb
    w.S = w.u + lanes * nb
    w.Us = w.S + 36 * lanes * nb
    w.Dinvs = w.Us + 36 * lanes * nb
    w.us = w.Dinvs + 36 * lanes * nb
    w.t = w.us + 6 * lanes * nb
    w.Pi = w.t + 6 * lanes
    w.dV0 = w.Pi + 36 * lanes
    w.G = w.dV0 + 6 * lanes
    return w


cdef enum:
    LANES_SLACK = 8    # doubles a lanes workspace is allocated beyond lanes_size, for lanes_aligned


cdef inline double* lanes_aligned(double* p) noexcept nogil:
    # the first 64-byte boundary at or after p: a lanes workspace starts there,
    # so that no vector of four doubles straddles two cache lines (misaligned
    # by 16 bytes, the tree rollouts lost 13-15 %)
    return <double*> ((<uintptr_t> p + 63) & ~(<uintptr_t> 63))


cdef inline Py_ssize_t lanes_size(int nb, int lanes) noexcept nogil:
    return (12 + 6 * 6 + 36 + 6 + 6 + 2 + 36 * 3 + 6 + 64) * lanes * nb + 48 * lanes

"""Maximal vs reduced coordinates on the N-four-bar chain (IFToMM-style).

Run:  python benchmarks/bench_maximal.py [--quick]

For N = 1, 10, 100, 1000 (``gear.mechanisms.n_four_bar``) this prints µs
per constrained forward-dynamics call from Python. The columns are:

- **maximal**: CHOLMOD on the Schur complement of the sparse maximal KKT
  system, linear in N: the native kernel (CHOLMOD's C API, one call from
  Python) when gear is built with CHOLMOD; **batch** is its time per state
  in a batch of states on every thread; **sksparse** the same solver's
  scikit-sparse path (``native=False``), the NumPy assembly it replaces.
- **kkt**: the native reduced solver, whose ``m^3`` dense solve makes it
  cubic in N. It is timed once at N = 1000; ``--quick`` skips it there.
- **projection**: a dense SVD null space, up to N = 100.
- **soft**: the soft solver at its default stiffness (1e8; the kkt
  kernel's dense route with ``K + I/stiffness``, cubic like kkt: timed
  once at N = 1000, skipped there with ``--quick``); its relative ddq
  difference from kkt in brackets (O(1/stiffness)).
- **Pinocchio's constraintDynamics**: up to N = 100; it is optional, and
  its data grows as joints^3.

Each row also gives the problem sizes, the nonzeros of the maximal
system's J and Cholesky factor, and the largest ddq difference from the
kkt solver.

The same mechanism has another spanning tree, ``n_four_bar(N,
tree="ground")``: every crank pivoted on the ground and each coupler
hanging from a crank, two deep, the model a MuJoCo user would write. The
chain's mass matrix is dense, the ground tree's sparse; reduced-coordinate
solvers feel this, the maximal one hardly does. The second table times
MuJoCo's ``mj_forward`` on both trees (exported by
``gear.interop.to_mjcf`` with the ball closures as soft ``equality
connect``, contacts off; its relative ``ddq`` error against gear in
brackets; on the ground tree also stiffened as far as MuJoCo allows) next
to gear's maximal and kkt solvers on the ground tree, and
gives the ratio of gear's maximal solver to MuJoCo on the same ground
tree, MuJoCo's best case.  The two are timed in alternating rounds and
the ratio is the median of the rounds' ratios (``common.paired_times``):
timed a minute apart, as the other columns are, the two calls' ratio
moved between 0.96 and 1.19 on this machine from run to run.

**Exudyn** (optional, ``pip install exudyn``) runs the same chain in its
redundant (maximal) coordinates. It uses ``NodeRigidBody2D`` bodies with
the same masses, inertias and geometry, ``RevoluteJoint2D`` joints and its
implicit generalized-alpha integrator (``h = 1e-3``, modified Newton).
From N = 10 it uses Eigen's sparse solver.
Its column gives the **µs per implicit step**, the figure gear's
maximal stepping is measured against. For N <= 10 its crank angle after 0.2 s is checked against a gear rk4
rollout (relative error in brackets).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# numpy's BLAS threads spin after each call and take cores from gear's
# parallel batches (whose kernels use no BLAS): keep BLAS on one thread
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gear  # noqa: E402
from common import best_time, paired_times, pinocchio_constraint_dynamics  # noqa: E402


def once(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def pinocchio_time(s, q, dq, tau):
    call, a = pinocchio_constraint_dynamics(s, q, dq, tau)
    if call is None:
        return None, None
    return best_time(call, repeat=3, target=0.1), a


def mujoco_call(s, q, dq, tau, ref, stiff=False):
    """MuJoCo's mj_forward on the same mechanism (gear.interop.to_mjcf: ball
    closures as soft ``equality connect``), contacts off; returns (the
    call, max |qacc - ddq| relative to max |ddq|), (message, None) when
    MuJoCo cannot load the model, or (None, None) without MuJoCo.
    ``stiff``: the equality constraints stiffened as far as MuJoCo lets
    them (``solref = (1e-4, 1)`` with its safety clamp off, ``solimp`` at
    0.9999)."""
    try:
        import mujoco
        from gear.interop import mujoco_state_maps, to_mjcf
    except ImportError:
        return None, None
    try:
        m = mujoco.MjModel.from_xml_string(to_mjcf(s))
    except ValueError as exc:                 # e.g. its XML parser's nesting limit (N = 1000)
        return str(exc).splitlines()[-1], None
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    if stiff:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_REFSAFE
        m.eq_solref[:] = (1e-4, 1.0)
        m.eq_solimp[:] = (0.9999, 0.9999, 0.001, 0.5, 2.0)
    d = mujoco.MjData(m)
    iq, iv = mujoco_state_maps(s.model, m)
    d.qpos[iq], d.qvel[iv], d.qfrc_applied[iv] = q, dq, tau
    mujoco.mj_forward(m, d)
    err = float(np.abs(d.qacc[iv] - ref).max() / max(1e-300, np.abs(ref).max()))
    return (lambda: mujoco.mj_forward(m, d)), err


def mujoco_time(s, q, dq, tau, ref, stiff=False):
    """As :func:`mujoco_call`, with the call's best time (s) in its place."""
    call, err = mujoco_call(s, q, dq, tau, ref, stiff)
    if not callable(call):
        return call, err
    return best_time(call, repeat=3, target=0.1), err


def exudyn_time(s, N, q, t_check=0.2, h=1e-3):
    """Exudyn's generalized-alpha step on the N-four-bar chain, at rest under
    gravity; returns (µs per step, |crank angle - gear's| at t_check) or
    (None, None) without exudyn."""
    try:
        import exudyn as exu
        from exudyn import itemInterface as ii
    except ImportError:
        return None, None
    import warnings

    with warnings.catch_warnings():        # parameter names Exudyn renamed across versions
        warnings.simplefilter("ignore", DeprecationWarning)
        return _exudyn_time(exu, ii, s, N, q, t_check, h)


def _exudyn_time(exu, ii, s, N, q, t_check, h):
    L = 1.0
    theta = float(q[0])
    # gear's bars (gear.mechanisms._bar): uniform, mass rho L, inertia about the COM
    mass = float(s.model.inertias[0].mass)
    Izz = float(s.model.inertias[0].I_com[1, 1])   # about the joint axis (y in gear, z in 2-D)
    SC = exu.SystemContainer()
    mbs = SC.AddSystem()
    ground = mbs.AddObject(ii.ObjectGround())
    ends = []
    c, sn = np.cos(theta), np.sin(theta)

    def bar(x, y, ang):
        n = mbs.AddNode(ii.NodeRigidBody2D(referenceCoordinates=[x, y, ang]))
        b = mbs.AddObject(ii.RigidBody2D(nodeNumber=n, physicsMass=mass, physicsInertia=Izz))
        mm = mbs.AddMarker(ii.MarkerBodyMass(bodyNumber=b))
        mbs.AddLoad(ii.LoadMassProportional(markerNumber=mm, loadVector=[0, -9.81, 0]))
        m0 = mbs.AddMarker(ii.MarkerBodyPosition(bodyNumber=b, localPosition=[-0.5 * L, 0, 0]))
        m1 = mbs.AddMarker(ii.MarkerBodyPosition(bodyNumber=b, localPosition=[0.5 * L, 0, 0]))
        return n, m0, m1

    cranks, couplers = [], []
    for k in range(N + 1):
        cranks.append(bar(k * L + 0.5 * L * c, 0.5 * L * sn, theta))
        g = mbs.AddMarker(ii.MarkerBodyRigid(bodyNumber=ground, localPosition=[k * L, 0, 0]))
        mbs.AddObject(ii.RevoluteJoint2D(markerNumbers=[g, cranks[k][1]]))
    for k in range(1, N + 1):
        couplers.append(bar((k - 1) * L + L * c + 0.5 * L, L * sn, 0.0))
        mbs.AddObject(ii.RevoluteJoint2D(markerNumbers=[cranks[k - 1][2], couplers[-1][1]]))
        mbs.AddObject(ii.RevoluteJoint2D(markerNumbers=[couplers[-1][2], cranks[k][2]]))
    mbs.Assemble()

    def settings(steps):
        ss = exu.SimulationSettings()
        ss.timeIntegration.numberOfSteps = steps
        ss.timeIntegration.endTime = steps * h
        ss.timeIntegration.verboseMode = 0
        ss.solutionSettings.writeSolutionToFile = False
        ss.timeIntegration.generalizedAlpha.spectralRadius = 0.95
        ss.timeIntegration.generalizedAlpha.computeInitialAccelerations = True
        ss.timeIntegration.newton.useModifiedNewton = True
        ss.displayStatistics = False
        if N >= 10:            # Eigen's sparse LU, as Exudyn recommends for large systems
            ss.linearSolverType = exu.LinearSolverType.EigenSparse
        return ss

    steps = int(round(t_check / h))
    t0 = time.perf_counter()
    exu.SolveDynamic(mbs, settings(steps))
    wall = time.perf_counter() - t0
    if N > 10:             # the reference rollout is the expensive part; the mechanism is the same
        return wall / steps, None
    ang = theta + mbs.GetNodeOutput(cranks[0][0], exu.OutputVariableType.Coordinates)[2]
    ref = gear.simulate(s, q, np.zeros(s.model.nv), t_check, h / 4, integrator="rk4")
    # gear's angle turns x towards +z about -y; Exudyn's turns x towards +y about +z: the same angle
    err = abs(ang - float(ref.q[-1][0])) / max(1e-12, abs(float(ref.q[-1][0]) - theta))
    return wall / steps, err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the dense solvers at N = 1000")
    ap.add_argument("--no-exudyn", action="store_true", help="leave Exudyn out")
    a = ap.parse_args(argv)
    print(f"# gear {gear.__version__} | numpy {np.__version__} | {os.cpu_count()} cores")
    print("\nus per call (one state); |ddq - kkt| in brackets\n")
    print(f"{'N':>5} {'nv':>5} {'nc':>5} {'rows':>6} {'nnz J':>7} {'nnz L':>7} {'maximal':>10} "
          f"{'batch':>8} {'sksparse':>9} {'kkt':>12} {'projection':>12} {'soft':>18} {'pinocchio':>16} {'kkt/maximal':>12} "
          f"{'exudyn µs/step':>22}")
    mj = []
    rng = np.random.default_rng(0)
    for N in (1, 10, 100, 1000):
        s, q = gear.mechanisms.n_four_bar(N)
        nv = s.model.nv
        dq = s.project_velocity(q, rng.standard_normal(nv))
        tau = rng.standard_normal(nv)
        mx = s.with_solver("maximal")
        rm = mx.forward_dynamics(q, dq, tau)
        tm = best_time(lambda: mx.forward_dynamics(q, dq, tau), repeat=3, target=0.2)
        B = max(8, 4000 // N)
        Q, DQ, TAU = np.tile(q, (B, 1)), np.tile(dq, (B, 1)), np.tile(tau, (B, 1))
        tb = best_time(lambda: mx.forward_dynamics(Q, DQ, TAU), repeat=3, target=0.2) / B
        try:
            ms = s.with_solver("maximal", native=False)
            ts = best_time(lambda: ms.forward_dynamics(q, dq, tau), repeat=3, target=0.1)
            cell_s = f"{ts * 1e6:9,.0f}"
        except ImportError:
            cell_s = "-"
        def dense(sn):
            # the cubic solvers: timed once at N = 1000, skipped there with --quick
            if N < 1000:
                return (best_time(lambda: sn.forward_dynamics(q, dq, tau), repeat=3, target=0.1),
                        sn.forward_dynamics(q, dq, tau))
            if not a.quick:
                return once(lambda: sn.forward_dynamics(q, dq, tau))
            return None, None

        tk, rk = dense(s)
        cell_k = "-" if tk is None else f"{tk * 1e6:12,.0f}"
        tso, rso = dense(s.with_solver("soft"))
        cell_so = "-" if tso is None else (
            f"{tso * 1e6:10,.0f} [{np.abs(rso.ddq - rm.ddq).max() / np.abs(rm.ddq).max():.0e}]")
        dm = "" if rk is None else f" [{np.abs(rm.ddq - rk.ddq).max():.0e}]"
        if N <= 100:
            sp = s.with_solver("projection")
            tp = best_time(lambda: sp.forward_dynamics(q, dq, tau), repeat=3, target=0.1)
            cell_p = f"{tp * 1e6:12,.0f}"
            tpin, apin = pinocchio_time(s, q, dq, tau)
            cell_pin = "-" if tpin is None else f"{tpin * 1e6:8,.0f} [{np.abs(apin - rm.ddq).max():.0e}]"
        else:
            cell_p, cell_pin = "-", "-"
        ratio = "-" if tk is None else f"{tk / tm:12.1f}"
        tex, eex = (None, None) if a.no_exudyn else exudyn_time(s, N, q)
        cell_ex = "-" if tex is None else f"{tex * 1e6:10,.0f}" + ("" if eex is None else f" [{eex:.0e}]")
        print(f"{N:>5} {nv:>5} {s.nc:>5} {rm.stats['rows']:>6} {rm.stats['nnz_J']:>7} "
              f"{rm.stats['nnz_factor']:>7} {tm * 1e6:10,.1f}{dm} {tb * 1e6:8,.1f} {cell_s} {cell_k} {cell_p} {cell_so:>18} {cell_pin:>16} "
              f"{ratio} {cell_ex:>22}")
        # the same N on the ground tree, for MuJoCo
        g, qg = gear.mechanisms.n_four_bar(N, tree="ground")
        dqg = g.project_velocity(qg, rng.standard_normal(nv))
        taug = rng.standard_normal(nv)
        mg = g.with_solver("maximal")
        rg = mg.forward_dynamics(qg, dqg, taug)
        tg = best_time(lambda: mg.forward_dynamics(qg, dqg, taug), repeat=3, target=0.2)
        tbg = best_time(lambda: mg.forward_dynamics(np.tile(qg, (B, 1)), np.tile(dqg, (B, 1)),
                                                    np.tile(taug, (B, 1))), repeat=3, target=0.2) / B
        tkg = best_time(lambda: g.forward_dynamics(qg, dqg, taug), repeat=3, target=0.1) if N <= 100 else None
        mgc = g.with_solver("maximal", route="cholmod")
        tcg = best_time(lambda: mgc.forward_dynamics(qg, dqg, taug), repeat=3, target=0.2)
        route = rg.stats.get("route", "-")
        tmc, emc = mujoco_time(s, q, dq, tau, rm.ddq)
        cmg, emg = mujoco_call(g, qg, dqg, taug, rg.ddq)
        tmg, ratio = cmg, None
        if callable(cmg):
            # gear's and MuJoCo's calls in alternating rounds: the ratio is
            # the median of the rounds' ratios (common.paired_times)
            tg2, tmg, ratio, spread = paired_times(lambda: mg.forward_dynamics(qg, dqg, taug), cmg)
            tg = min(tg, tg2)
            ratio = (ratio, spread)
        tms, ems = mujoco_time(g, qg, dqg, taug, rg.ddq, stiff=True)
        mj.append((N, tg, tbg, tkg, tmc, emc, tmg, emg, tms, ems, tcg, route, ratio))
    print("\n(exudyn: µs per implicit generalized-alpha step at h = 1e-3, and its crank angle after "
          "0.2 s against gear's rk4, relative to the angle travelled)")
    print("\nMuJoCo's mj_forward (soft constraints: relative ddq error in brackets) on both spanning "
          "trees, against gear's maximal solver on the ground tree (us per call, one state)\n")
    print(f"{'N':>5} {'mujoco, chain tree':>22} {'mujoco, ground tree':>22} {'stiffened':>18} "
          f"{'maximal, ground tree':>21} {'route':>7} {'cholmod route':>14} {'batch':>8} {'kkt, ground tree':>17} "
          f"{'maximal/mujoco':>20}")

    def cell(t, e):
        if t is None:
            return "-"
        if isinstance(t, str):
            return "cannot load"
        return f"{t * 1e6:9,.1f} [{e:.0e}]"

    for N, tg, tbg, tkg, tmc, emc, tmg, emg, tms, ems, tcg, route, r in mj:
        ratio = "-" if r is None else f"{r[0]:6.2f} ({r[1][0]:.2f}-{r[1][1]:.2f})"
        ck = "-" if tkg is None else f"{tkg * 1e6:17,.1f}"
        print(f"{N:>5} {cell(tmc, emc):>22} {cell(tmg, emg):>22} {cell(tms, ems):>18} {tg * 1e6:21,.1f} "
              f"{route:>7} {tcg * 1e6:14,.1f} {tbg * 1e6:8,.1f} {ck:>17} {ratio:>20}")
    print("\n(maximal: the solver's default route, \"auto\" (gear.maximal.tree.choose_route); "
          "cholmod route: the same solve through CHOLMOD's factorisation of the Schur complement; "
          "maximal/mujoco: the median over 11 alternating rounds of the two calls of the ratio within "
          "each round, the quartiles in brackets)")


if __name__ == "__main__":
    main()

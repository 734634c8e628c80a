"""Batched rollouts: state-steps per second, beside MuJoCo and Pinocchio.

Run:  python benchmarks/bench_simulation.py [--states N] [--steps S]
      python benchmarks/bench_simulation.py --euler-only        (the table against mujoco.rollout alone)
      python benchmarks/bench_simulation.py --projection-cost   (what projection costs per step)

The cases are:

- The bundled 7-DoF arm (arm7.urdf) with RK4 at dt = 1 ms, all joints
  unactuated (passive swing under gravity), on 1 and 2 threads.
  ``mujoco.rollout`` (optional) loads the same URDF, with contacts and
  joint limits disabled so that both integrate the same ODE (their
  accelerations agree to 1e-13), and uses its RK4 integrator. A Python
  loop integrates the same arm by RK4 over Pinocchio's ABA (optional, on
  fewer states: it is slow).
- The bundled closed four-bar (fourbar.xml) with RK4 and projection
  stabilisation, exact to 1e-12, on 1 and 2 threads. MuJoCo gets the same
  file with its soft ``equality connect``.

Throughput is ``states * steps / wall time``, the best of up to five calls
(fewer past 2 s) after one to warm up (plans, thread teams, caches), and the ratios are gear /
peer, all from one run of the script.  Defaults: 1,000 states x 1,000 steps for the arm, and
200 x 500 for the four-bar (``--quick`` divides both by 10).
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
import gear.campaign  # noqa: E402
from common import paired_times  # noqa: E402


def _rate(N, steps, fn, repeat=5):
    """State-steps per second of ``fn`` (N states x ``steps`` steps): one
    call to warm up (plans, thread teams, caches), then the best of up to
    ``repeat`` calls (fewer once they have taken 2 s), for gear and its
    peers alike (``repeat=0``: one timed call, for the slow Python loops)."""
    if repeat:
        fn()
    best, spent, k = float("inf"), 0.0, 0
    while k < max(repeat, 1) and (k == 0 or spent < 2.0):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, spent, k = min(best, dt), spent + dt, k + 1
    return N * steps / best


def gear_rate(target, q0, dq0, steps, dt, threads, **kw):
    old = gear.get_num_threads()
    gear.set_num_threads(threads)
    try:
        N = q0.shape[0]
        out = {}
        r = _rate(N, steps, lambda: out.setdefault("t", gear.simulate(target, q0, dq0, steps * dt, dt,
                                                                      record_every=steps, **kw)))
        return r, out["t"]
    finally:
        gear.set_num_threads(old)


def gear_call(target, q0, dq0, steps, dt, threads, **kw):
    """A call of ``gear.simulate`` on ``threads`` threads (for
    :func:`thread_scaling`)."""
    def call():
        old = gear.get_num_threads()
        gear.set_num_threads(threads)
        try:
            gear.simulate(target, q0, dq0, steps * dt, dt, record_every=steps, **kw)
        finally:
            gear.set_num_threads(old)
    return call


def thread_scaling(one, two, rounds=7):
    """Two threads' rate over one thread's, for the calls ``one`` and
    ``two``: the median (and quartiles) over alternating rounds of the
    ratio within each round (``common.paired_times``), which the machine's
    drift between two best times taken seconds apart does not decide."""
    one(), two()
    _, _, r, (lo, hi) = paired_times(one, two, rounds=rounds, target=0.2)
    return f"{r:.2f} ({lo:.2f}-{hi:.2f})"


def mujoco_rate(xml, q0, dq0, steps, dt, threads, integrator="RK4", call=False):
    """``mujoco.rollout``'s state-steps per second (``call``: the call
    itself, for :func:`thread_scaling`), or None without MuJoCo."""
    try:
        import mujoco
        from mujoco import rollout
    except ImportError:
        return None
    m = mujoco.MjModel.from_xml_path(xml)
    m.opt.timestep = dt
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator}")
    datas = [mujoco.MjData(m) for _ in range(threads)]
    N = q0.shape[0]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    d = datas[0]
    states = np.empty((N, mujoco.mj_stateSize(m, spec)))
    for k in range(N):
        d.qpos[:] = q0[k]
        d.qvel[:] = dq0[k]
        mujoco.mj_forward(m, d)
        mujoco.mj_getState(m, d, states[k], spec)
    rollout.rollout(m, datas, states[:2], nstep=2)          # warm the pool
    if call:
        return lambda: rollout.rollout(m, datas, states, nstep=steps)
    return _rate(N, steps, lambda: rollout.rollout(m, datas, states, nstep=steps))


def pinocchio_rate(urdf, q0, dq0, steps, dt):
    try:
        import pinocchio as pin
    except ImportError:
        return None
    pm = pin.buildModelFromUrdf(urdf)
    pd = pm.createData()
    tau = np.zeros(pm.nv)

    def run():
        for q, v in zip(q0, dq0):
            q, v = q.copy(), v.copy()
            for _ in range(steps):
                a1 = pin.aba(pm, pd, q, v, tau)
                a2 = pin.aba(pm, pd, q + 0.5 * dt * v, v + 0.5 * dt * a1, tau)
                a3 = pin.aba(pm, pd, q + 0.5 * dt * (v + 0.5 * dt * a1), v + 0.5 * dt * a2, tau)
                a4 = pin.aba(pm, pd, q + dt * (v + 0.5 * dt * a2), v + dt * a3, tau)
                q = q + dt / 6 * (v + 2 * (v + 0.5 * dt * a1) + 2 * (v + 0.5 * dt * a2) + (v + dt * a3))
                v = v + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)

    return _rate(len(q0), steps, run, repeat=0)


def euler_table(N=256, steps=200, dt=1e-3):
    """Rollouts of N states x ``steps`` steps against ``mujoco.rollout``,
    Euler to Euler (gear's semi-implicit Euler; MuJoCo's Euler, also
    semi-implicit) with the RK4 rows beside, on 1 and 2 threads: panda
    (example-robot-data, exported to MJCF by gear.interop.to_mjcf so that
    both load the same inertias without meshes) and the closed four-bar
    (gear exact: Baumgarte's stabilisation, or projection to 1e-12;
    MuJoCo's soft ``equality connect``)."""
    import atexit
    import tempfile

    import gear.interop
    from gear.testing import zoo_dir

    rng = np.random.default_rng(1)
    cases = []
    d = zoo_dir()
    if d is not None and os.path.isfile(os.path.join(d, "panda_description/urdf/panda.urdf")):
        panda = gear.load_urdf(os.path.join(d, "panda_description/urdf/panda.urdf"))
        panda.loop_closures = []   # the tree alone (its finger <mimic>), as MuJoCo gets it
        fd, xml = tempfile.mkstemp(suffix=".xml")
        with os.fdopen(fd, "w") as fh:
            fh.write(gear.interop.to_mjcf(panda))
        atexit.register(os.remove, xml)    # (the file this run made, gone when it ends)
        q0 = panda.random_configuration(rng, n=N)
        dq0 = 0.5 * rng.standard_normal((N, panda.nv))
        cases.append(("panda", panda, xml, q0, dq0, {}))
    else:
        print("# example-robot-data not installed: no panda row")
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    sysm = gear.ConstrainedModel(fb)
    q = sysm.assemble(fb.neutral())
    qs = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(3))) for _ in range(N)])
    dqs = np.stack([sysm.project_velocity(x, rng.standard_normal(3)) for x in qs])
    cases.append(("four-bar, Baumgarte", sysm, gear.data_path("fourbar.xml"), qs, dqs,
                  {"stabilization": "baumgarte"}))
    cases.append(("four-bar, projection", sysm, gear.data_path("fourbar.xml"), qs, dqs,
                  {"stabilization": "projection"}))
    print(f"\n## rollouts against mujoco.rollout: {N} states x {steps} steps, dt = {dt:g} s; "
          "state-steps per second\n")
    print(f"{'case':<22} {'integrator':>10} {'threads':>7} {'gear':>12} {'mujoco':>12} {'gear/mujoco':>11} "
          f"{'gear 2/1 thr':>17} {'mujoco 2/1 thr':>17} {'max resid':>10}")
    for name, target, xml, q0, dq0, kw in cases:
        for integ, mj_integ in (("euler", "EULER"), ("rk4", "RK4")):
            for th in (1, 2):
                g, tr = gear_rate(target, q0, dq0, steps, dt, th, integrator=integ, **kw)
                mj = mujoco_rate(xml, q0, dq0, steps, dt, th, integrator=mj_integ)
                res = "-"
                if isinstance(target, gear.ConstrainedModel):
                    res = f"{max(np.abs(target.constraint_residual(x)).max() for x in tr.q[:, -1]):10.1e}"
                gs = ms = ""
                if th == 2:
                    gs = thread_scaling(*(gear_call(target, q0, dq0, steps, dt, t, integrator=integ, **kw)
                                          for t in (1, 2)))
                    if mj is not None:
                        ms = thread_scaling(*(mujoco_rate(xml, q0, dq0, steps, dt, t, integrator=mj_integ, call=True)
                                              for t in (1, 2)))
                print(f"{name:<22} {integ:>10} {th:>7} {g:12,.0f} {'-' if mj is None else f'{mj:12,.0f}'} "
                      f"{'-' if mj is None else f'{g / mj:11.2f}'} {gs:>17} {ms:>17} {res:>10}")
    print("\n(goal: gear >= 2x mujoco.rollout at 1 and 2 threads, Euler to Euler; two threads >= 1.9x one. "
          "2/1 thr: one thread's time over two threads', the median of 7 alternating rounds, quartiles in "
          "brackets)")


def projection_cost_table(N=64, steps=100, dt=1e-3, rounds=5):
    """What projection costs per step on each bundled mechanism: µs per
    state-step of Euler rollouts (``N`` x ``steps``, one thread, best of
    ``rounds`` calls) with projection, with Baumgarte's stabilisation and
    with none, beside the batched ``sys.forward_dynamics`` (one solve per
    state), and the projected step's ratios to the Baumgarte step and to
    the solve, with the projection's Gauss-Newton iterations per step."""
    import gear.mechanisms as mech

    rng = np.random.default_rng(1)
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    fbs = gear.ConstrainedModel(fb)
    cases = [("fourbar.xml", fbs, fbs.assemble(fb.neutral()))]
    for name in ("four_bar", "slider_crank", "five_bar", "rssr", "bricard", "stewart"):
        cases.append((name,) + tuple(getattr(mech, name)()))
    old = gear.get_num_threads()
    gear.set_num_threads(1)
    print(f"\n## what projection costs: Euler, dt = {dt:g} s, {N} states x {steps} steps, one thread; "
          "us per state-step\n")
    print(f"{'mechanism':<14} {'nv':>3} {'rows':>4} {'solve':>7} {'none':>7} {'baumgarte':>9} {'projection':>10} "
          f"{'proj/baumgarte':>14} {'proj/solve':>10} {'GN per step':>11}")
    try:
        for name, sysm, q in cases:
            nv = sysm.model.nv
            qs = np.stack([sysm.assemble(sysm.model.integrate(q, 0.02 * rng.standard_normal(nv)))
                           for _ in range(N)])
            dqs = np.stack([sysm.project_velocity(x, 0.5 * rng.standard_normal(nv)) for x in qs])
            zero = np.zeros_like(dqs)
            t = {"solve": _rate(N, 1, lambda: sysm.forward_dynamics(qs, dqs, zero), 25)}
            runs = {}
            for stab in ("none", "baumgarte", "projection"):
                run = (lambda st=stab: runs.__setitem__(st, gear.simulate(
                    sysm, qs, dqs, steps * dt, dt, integrator="euler", stabilization=None if st == "none" else st,
                    record_every=steps, progress=False)))
                t[stab] = _rate(N, steps, run, rounds)
            us = {k: 1e6 / v for k, v in t.items()}
            print(f"{name:<14} {nv:>3} {sysm.nc:>4} {us['solve']:7.2f} {us['none']:7.2f} {us['baumgarte']:9.2f} "
                  f"{us['projection']:10.2f} {us['projection'] / us['baumgarte']:14.2f} "
                  f"{us['projection'] / us['solve']:10.2f} "
                  f"{runs['projection'].stats['gauss_newton_per_step']:11.3f}")
    finally:
        gear.set_num_threads(old)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dask", action="store_true", help="also time the Dask path on a 2-process LocalCluster")
    ap.add_argument("--euler-only", action="store_true",
                    help="only the table against mujoco.rollout, Euler to Euler (256 x 200)")
    ap.add_argument("--projection-cost", action="store_true",
                    help="only the table of what projection costs per step on the bundled mechanisms")
    a = ap.parse_args(argv)
    print(f"# gear {gear.__version__} | numpy {np.__version__} | {os.cpu_count()} cores")
    if a.projection_cost:
        projection_cost_table()
        return
    if a.euler_only:
        euler_table()
        return
    div = 10 if a.quick else 1
    N, S = a.states // div, a.steps // div
    rng = np.random.default_rng(0)
    print("\n## 7-DoF arm (arm7.urdf), RK4, dt = 1 ms: state-steps per second\n")
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    q0 = 0.5 * rng.standard_normal((N, arm.nq))
    dq0 = 0.5 * rng.standard_normal((N, arm.nv))
    print(f"{'threads':>7} {'gear':>12} {'mujoco':>12} {'gear/mujoco':>12}")
    for th in (1, 2):
        g, _ = gear_rate(arm, q0, dq0, S, 1e-3, th, integrator="rk4")
        mj = mujoco_rate(gear.data_path("arm7.urdf"), q0, dq0, S, 1e-3, th)
        print(f"{th:>7} {g:12,.0f} {'-' if mj is None else f'{mj:12,.0f}'} "
              f"{'-' if mj is None else f'{g / mj:12.2f}'}")
    np_ = max(1, N // 50)
    pr = pinocchio_rate(gear.data_path("arm7.urdf"), q0[:np_], dq0[:np_], S, 1e-3)
    if pr is not None:
        g1, _ = gear_rate(arm, q0, dq0, S, 1e-3, 1, integrator="rk4")
        print(f"\nPython RK4 loop over Pinocchio's ABA ({np_} states): {pr:,.0f} state-steps/s "
              f"(gear on 1 thread: {g1 / pr:.1f}x)")
    print("\n## closed four-bar (fourbar.xml), RK4 + projection (exact), dt = 1 ms\n")
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    sysm = gear.ConstrainedModel(fb)
    q = sysm.assemble(fb.neutral())
    Nf, Sf = max(2, N // 5), max(2, S // 2)
    qs = np.stack([sysm.assemble(sysm.model.integrate(q, 0.05 * rng.standard_normal(3))) for _ in range(Nf)])
    dqs = np.stack([sysm.project_velocity(x, rng.standard_normal(3)) for x in qs])
    print(f"{'threads':>7} {'gear':>12} {'max resid':>10} {'mujoco (soft)':>14} {'gear/mujoco':>12}")
    for th in (1, 2):
        g, tr = gear_rate(sysm, qs, dqs, Sf, 1e-3, th, integrator="rk4")
        res = max(np.abs(sysm.constraint_residual(x)).max() for x in tr.q[:, -1])
        mj = mujoco_rate(gear.data_path("fourbar.xml"), qs, dqs, Sf, 1e-3, th)
        print(f"{th:>7} {g:12,.0f} {res:10.1e} {'-' if mj is None else f'{mj:14,.0f}'} "
              f"{'-' if mj is None else f'{g / mj:12.2f}'}")
    euler_table()
    # the maximal-coordinate solver in the native loop (gear built with CHOLMOD)
    mx = sysm.with_solver("maximal")
    print(f"\nthe same rollouts with solver='maximal' (native loop: {gear._core.cholmod_available()})\n")
    print(f"{'threads':>7} {'gear':>12} {'max resid':>10} {'|q - kkt|':>10}")
    ref = gear.simulate(sysm, qs, dqs, Sf * 1e-3, 1e-3, record_every=Sf, integrator="rk4")
    for th in (1, 2):
        g, tr = gear_rate(mx, qs, dqs, Sf, 1e-3, th, integrator="rk4")
        res = max(np.abs(sysm.constraint_residual(x)).max() for x in tr.q[:, -1])
        print(f"{th:>7} {g:12,.0f} {res:10.1e} {np.abs(tr.q - ref.q).max():10.1e}")
    if a.dask:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            print("\n(dask.distributed is not installed: pip install 'gear[campaign]')")
            return
        print("\n## the same arm rollouts through Dask (LocalCluster, 2 worker processes x 1 thread)\n")
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            gear.simulate(arm, q0[:4], dq0[:4], 0.01, 1e-3, client=client)          # warm the workers
            for chunks in (2, 8):
                tr = gear.campaign.simulate_distributed(client, arm, q0, dq0, S * 1e-3, 1e-3,
                                                        chunks=chunks, record_every=S)
                st = tr.stats
                print(f"{chunks} chunks: {st['state_steps_per_s']:,.0f} state-steps/s, "
                      f"overhead {st['overhead_per_chunk'] * 1e3:.1f} ms per chunk "
                      f"(chunk rollouts {np.mean(st['chunk_wall_times']):.2f} s each)")


if __name__ == "__main__":
    main()

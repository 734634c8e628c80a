"""Per-state cost of RNEA, ABA, hybrid dynamics and CRBA beside Pinocchio.

Run:  python benchmarks/bench_dynamics.py [--quick]

Prints five tables, each from one run on this machine:
  1. single call from Python: gear vs ``pin.rnea/aba/crba`` from Python;
  2. batched, one thread, per state: gear vs Pinocchio's own C++ call (no
     Python in between; benchmarks/pin_bench.cpp) and vs a Python loop over pin;
  3. threads: a batch of 10,000 states on 1 and 2 threads;
  4. serial chains of n = 1..64 bodies: batched per-state times (linear in n);
  5. against Pinocchio's parallel C++ (``pin.rneaInParallel``,
     ``pin.abaInParallel`` over a ``pin.ModelPool``), 10,000 states, 1 and 2
     threads each, on ur5, panda and talos_reduced.
Ratios are gear / Pinocchio (below 1 means gear is faster).  ``--table 5``
prints one table only.
"""
from __future__ import annotations

import argparse
import os
import sys

# numpy's BLAS threads spin after each call and take cores from gear's
# parallel batches (whose kernels use no BLAS): keep BLAS on one thread
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gear  # noqa: E402
from common import best_time, chain_urdf, fmt_ratio, pin_model, robots, states  # noqa: E402
import pin_cpp  # noqa: E402


def pin_states(pm, N, seed=0):
    import pinocchio as pin

    np.random.seed(seed)
    pm.lowerPositionLimit[:] = np.maximum(pm.lowerPositionLimit, -3)
    pm.upperPositionLimit[:] = np.minimum(pm.upperPositionLimit, 3)
    q = [pin.randomConfiguration(pm) for _ in range(N)]
    v = [np.random.randn(pm.nv) for _ in range(N)]
    a = [np.random.randn(pm.nv) for _ in range(N)]
    return q, v, a


def single_call_table(quick):
    print("\n## 1. Single call from Python (us per call)\n")
    print(f"{'robot':<10} {'algo':<6} {'gear':>8} {'pin':>8} {'gear/pin':>9}")
    for label, path, floating in robots():
        m = gear.load_urdf(path, floating_base=floating)
        q, dq, ddq = states(m, 1)
        q, dq, ddq = q[0], dq[0], ddq[0]
        tau = gear.inverse_dynamics(m, q, dq, ddq)
        pm = pin_model(path, floating)
        pin_t = {}
        if pm is not None:
            import pinocchio as pin

            pd = pm.createData()
            pq, pv, pa = pin_states(pm, 1)
            pq, pv, pa = pq[0], pv[0], pa[0]
            ptau = pin.rnea(pm, pd, pq, pv, pa).copy()
            pin_t = {"RNEA": best_time(lambda: pin.rnea(pm, pd, pq, pv, pa)),
                     "ABA": best_time(lambda: pin.aba(pm, pd, pq, pv, ptau)),
                     "CRBA": best_time(lambda: pin.crba(pm, pd, pq))}
        gear_t = {"RNEA": best_time(lambda: gear.inverse_dynamics(m, q, dq, ddq)),
                  "ABA": best_time(lambda: gear.forward_dynamics(m, q, dq, tau)),
                  "CRBA": best_time(lambda: gear.mass_matrix(m, q))}
        for algo in gear_t:
            p = pin_t.get(algo)
            print(f"{label:<10} {algo:<6} {gear_t[algo] * 1e6:8.3f} "
                  f"{'-' if p is None else f'{p * 1e6:8.3f}':>8} {fmt_ratio(gear_t[algo], p):>9}")


def gear_batch_times(m, N, threads=1):
    q, dq, ddq = states(m, N)
    tau = gear.inverse_dynamics(m, q, dq, ddq)
    mask = np.arange(m.nbodies) % 2 == 0
    out = np.empty((N, m.nv))
    Mout = np.empty((N, m.nv, m.nv))
    old = gear.get_num_threads()
    gear.set_num_threads(threads)
    try:
        t = {"RNEA": best_time(lambda: gear.inverse_dynamics(m, q, dq, ddq, out=out), number=1) / N,
             "ABA": best_time(lambda: gear.forward_dynamics(m, q, dq, tau, out=out), number=1) / N,
             "HD": best_time(lambda: gear.hybrid_dynamics(m, q, dq, ddq, tau, mask), number=1) / N,
             "CRBA": best_time(lambda: gear.mass_matrix(m, q, out=Mout), number=1) / N}
    finally:
        gear.set_num_threads(old)
    return t


def batched_table(quick, exe):
    N = 2000 if quick else 20000
    print(f"\n## 2. Batched, 1 thread, per state (us), N = {N}\n")
    print(f"{'robot':<10} {'algo':<6} {'gear':>8} {'pin C++':>8} {'gear/C++':>9} "
          f"{'pin py loop':>12} {'loop/gear':>10}")
    for label, path, floating in robots():
        m = gear.load_urdf(path, floating_base=floating)
        g = gear_batch_times(m, N)
        pm = pin_model(path, floating)
        cpp = {}
        loop = {}
        if pm is not None:
            import pinocchio as pin

            if exe:
                c = pin_cpp.run(exe, pm, reps=20000 if quick else 200000)
                cpp = {"RNEA": c["rnea"], "ABA": c["aba"], "CRBA": c["crba"]}
            pd = pm.createData()
            pq, pv, pa = pin_states(pm, 64)

            def loop_rnea():
                for k in range(64):
                    pin.rnea(pm, pd, pq[k], pv[k], pa[k])

            def loop_aba():
                for k in range(64):
                    pin.aba(pm, pd, pq[k], pv[k], pa[k])

            def loop_crba():
                for k in range(64):
                    pin.crba(pm, pd, pq[k])

            loop = {"RNEA": best_time(loop_rnea) / 64, "ABA": best_time(loop_aba) / 64,
                    "CRBA": best_time(loop_crba) / 64}
        for algo in ("RNEA", "ABA", "HD", "CRBA"):
            c = cpp.get(algo)
            lp = loop.get(algo)
            print(f"{label:<10} {algo:<6} {g[algo] * 1e6:8.3f} "
                  f"{'-' if c is None else f'{c * 1e6:8.3f}':>8} {fmt_ratio(g[algo], c):>9} "
                  f"{'-' if lp is None else f'{lp * 1e6:10.3f}':>12} "
                  f"{'-' if lp is None else f'{lp / g[algo]:8.1f}x':>10}")


def threads_table(quick):
    N = 2000 if quick else 10000
    print(f"\n## 3. Threads: batch of {N} states (ms per batch; best of interleaved runs)\n")
    print(f"{'robot':<10} {'algo':<6} {'1 thread':>9} {'2 threads':>10} {'speed-up':>9}")
    for label, path, floating in robots(zoo=False):
        m = gear.load_urdf(path, floating_base=floating)
        best1, best2 = {}, {}
        # this class of machine has noisy neighbours: interleave the two
        # settings and keep the best of each
        for _ in range(3 if quick else 6):
            for threads, best in ((1, best1), (2, best2)):
                for algo, t in gear_batch_times(m, N, threads).items():
                    best[algo] = min(best.get(algo, np.inf), t)
        for algo in best1:
            print(f"{label:<10} {algo:<6} {best1[algo] * N * 1e3:9.3f} {best2[algo] * N * 1e3:10.3f} "
                  f"{best1[algo] / best2[algo]:8.2f}x")


def chains_table(quick, exe):
    N = 1000 if quick else 5000
    sizes = [1, 2, 4, 8, 16, 32, 64]
    print(f"\n## 4. Serial revolute chains, batched, 1 thread, per state (us), N = {N}\n")
    print(f"{'n':>3} {'RNEA':>8} {'ABA':>8} {'HD':>8} {'CRBA':>8} | {'pin RNEA':>9} {'pin ABA':>8} "
          f"{'pin CRBA':>9} | {'RNEA/pin':>8} {'ABA/pin':>8} {'RNEA/n':>7} {'ABA/n':>7}")
    for n in sizes:
        path = chain_urdf(n)
        try:
            m = gear.load_urdf(path)
            g = gear_batch_times(m, N)
            cpp = {}
            pm = pin_model(path, False)
            if exe and pm is not None:
                c = pin_cpp.run(exe, pm, reps=20000 if quick else 100000)
                cpp = {"RNEA": c["rnea"], "ABA": c["aba"], "CRBA": c["crba"]}
        finally:
            os.remove(path)

        def f(x):
            return "-" if x is None else f"{x * 1e6:8.3f}"

        print(f"{n:3d} {g['RNEA'] * 1e6:8.3f} {g['ABA'] * 1e6:8.3f} {g['HD'] * 1e6:8.3f} "
              f"{g['CRBA'] * 1e6:8.3f} | {f(cpp.get('RNEA')):>9} {f(cpp.get('ABA')):>8} "
              f"{f(cpp.get('CRBA')):>9} | {fmt_ratio(g['RNEA'], cpp.get('RNEA')):>8} "
              f"{fmt_ratio(g['ABA'], cpp.get('ABA')):>8} {g['RNEA'] / n * 1e9:5.0f}ns "
              f"{g['ABA'] / n * 1e9:5.0f}ns")


def parallel_table(quick):
    """gear's batched RNEA and ABA against Pinocchio's rneaInParallel and
    abaInParallel: the same states, the same number of threads."""
    N = 2000 if quick else 10000
    print(f"\n## 5. Against Pinocchio's parallel C++: batch of {N} states, us per state "
          f"(best of interleaved runs)\n")
    try:
        import pinocchio as pin
    except ImportError:
        print("pinocchio not installed: skipped")
        return
    if not hasattr(pin, "rneaInParallel"):
        print(f"pinocchio {pin.__version__} has no rneaInParallel: skipped")
        return
    print(f"{'robot':<10} {'algo':<5} {'threads':>7} {'gear':>8} {'pin':>8} {'gear/pin':>9}")
    for label, path, floating in robots():
        if label not in ("ur5", "panda", "talos_red"):
            continue
        m = gear.load_urdf(path, floating_base=floating)
        pm = pin_model(path, floating)
        if pm is None:
            continue
        pool = pin.ModelPool(pm, 2)
        # each library its own random states (one per row for gear, one per
        # column for Pinocchio): the cost of a state does not depend on it
        Q, V, A = (np.asfortranarray(np.array(x).T) for x in pin_states(pm, N))
        gq, gv, ga = states(m, N)
        gtau = gear.inverse_dynamics(m, gq, gv, ga)
        ptau = np.asfortranarray(np.random.default_rng(1).standard_normal(V.shape))
        out = np.empty_like(gv)
        pout = np.asfortranarray(np.empty_like(V))
        old = gear.get_num_threads()
        best = {}
        try:
            for _ in range(2 if quick else 4):
                for th in (1, 2):
                    gear.set_num_threads(th)
                    for algo, g, p in (
                            ("RNEA", lambda: gear.inverse_dynamics(m, gq, gv, ga, out=out),
                             lambda: pin.rneaInParallel(th, pool, Q, V, A, pout)),
                            ("ABA", lambda: gear.forward_dynamics(m, gq, gv, gtau, out=out),
                             lambda: pin.abaInParallel(th, pool, Q, V, ptau, pout))):
                        for who, fn in (("gear", g), ("pin", p)):
                            t = best_time(fn, number=1) / N
                            key = (algo, th, who)
                            best[key] = min(best.get(key, np.inf), t)
        finally:
            gear.set_num_threads(old)
        for algo in ("RNEA", "ABA"):
            for th in (1, 2):
                g, p = best[(algo, th, "gear")], best[(algo, th, "pin")]
                print(f"{label:<10} {algo:<5} {th:>7} {g * 1e6:8.3f} {p * 1e6:8.3f} {g / p:9.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches (a smoke run)")
    parser.add_argument("--no-cpp", action="store_true", help="skip Pinocchio's C++ reference")
    parser.add_argument("--table", type=int, choices=range(1, 6), help="print this table only")
    args = parser.parse_args(argv)
    import platform

    print(f"# gear {gear.__version__} | numpy {np.__version__} | {platform.processor() or platform.machine()} "
          f"| {os.cpu_count()} cores")
    try:
        import pinocchio as pin

        print(f"# pinocchio {pin.__version__}")
    except ImportError:
        print("# pinocchio not installed: gear times only")
    need_cpp = not args.no_cpp and args.table in (None, 2, 4)
    exe = pin_cpp.build(verbose=True) if need_cpp else None
    tables = {1: lambda: single_call_table(args.quick), 2: lambda: batched_table(args.quick, exe),
              3: lambda: threads_table(args.quick), 4: lambda: chains_table(args.quick, exe),
              5: lambda: parallel_table(args.quick)}
    for k, fn in tables.items():
        if args.table in (None, k):
            fn()


if __name__ == "__main__":
    main()

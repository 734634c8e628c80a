"""Per-state cost of the analytic derivatives beside Pinocchio and finite differences.

Run:  python benchmarks/bench_derivatives.py [--quick]

Tables (one run each):
  1. bundled robots: gear batched per state (1 thread) and single call vs
     Pinocchio's computeRNEADerivatives / computeABADerivatives from Python
     and in C++ (benchmarks/pin_bench.cpp);
     and the gain over central finite differences (4 nv + 1 dynamics calls
     for the q and dq Jacobians, timed with gear's own batched RNEA/ABA);
  2. serial chains n = 1..64: per-state time of the full Jacobians (O(n^2)).
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


def gear_times(m, N):
    q, dq, ddq = states(m, N)
    tau = gear.inverse_dynamics(m, q, dq, ddq)
    old = gear.get_num_threads()
    gear.set_num_threads(1)
    # the non-allocating form (out=): fresh N x nv x nv results would add
    # page-fault time that has nothing to do with the algorithm
    outs = tuple(np.empty((N, m.nv, m.nv)) for _ in range(3))
    try:
        t_id = best_time(lambda: gear.inverse_dynamics_derivatives(m, q, dq, ddq, out=outs), number=1) / N
        t_fd = best_time(lambda: gear.forward_dynamics_derivatives(m, q, dq, tau, out=outs), number=1) / N
        # central finite differences of (q, dq) Jacobians cost 4 nv + 1 dynamics
        # calls; timed as gear's own batched calls per state
        t_rnea = best_time(lambda: gear.inverse_dynamics(m, q, dq, ddq), number=1) / N
        t_aba = best_time(lambda: gear.forward_dynamics(m, q, dq, tau), number=1) / N
    finally:
        gear.set_num_threads(old)
    q1, dq1, ddq1, tau1 = q[0], dq[0], ddq[0], tau[0]
    s_id = best_time(lambda: gear.inverse_dynamics_derivatives(m, q1, dq1, ddq1))
    s_fd = best_time(lambda: gear.forward_dynamics_derivatives(m, q1, dq1, tau1))
    # a finite-difference Jacobian w.r.t. (q, dq) needs 2 * 2 nv + 1 calls
    calls = 4 * m.nv + 1
    return dict(id=t_id, fd=t_fd, id1=s_id, fd1=s_fd, fd_rnea=calls * t_rnea, fd_aba=calls * t_aba)


def robots_table(quick, exe):
    N = 500 if quick else 4000
    print(f"\n## 1. Bundled robots (us per state; batched N = {N}, 1 thread)\n")
    print(f"{'robot':<10} {'algo':<9} {'gear batch':>10} {'gear 1 call':>11} {'pin py':>8} "
          f"{'pin C++':>8} {'batch/py':>8} {'batch/C++':>9} {'FD (gear)':>10} {'FD/analytic':>11}")
    for label, path, floating in robots():
        m = gear.load_urdf(path, floating_base=floating)
        g = gear_times(m, N)
        pm = pin_model(path, floating)
        py = {}
        cpp = {}
        if pm is not None:
            import pinocchio as pin

            pd = pm.createData()
            np.random.seed(0)
            pm.lowerPositionLimit[:] = np.maximum(pm.lowerPositionLimit, -3)
            pm.upperPositionLimit[:] = np.minimum(pm.upperPositionLimit, 3)
            pq = pin.randomConfiguration(pm)
            pv = np.random.randn(pm.nv)
            pa = np.random.randn(pm.nv)
            py["id"] = best_time(lambda: pin.computeRNEADerivatives(pm, pd, pq, pv, pa))
            py["fd"] = best_time(lambda: pin.computeABADerivatives(pm, pd, pq, pv, pa))
            if exe:
                c = pin_cpp.run(exe, pm, reps=5000 if quick else 50000)
                cpp = {"id": c["rnea_derivatives"], "fd": c["aba_derivatives"]}
        for algo, name, fdk in (("id", "ID derivs", "fd_rnea"), ("fd", "FD derivs", "fd_aba")):
            p, c = py.get(algo), cpp.get(algo)
            print(f"{label:<10} {name:<9} {g[algo] * 1e6:10.3f} {g[algo + '1'] * 1e6:11.3f} "
                  f"{'-' if p is None else f'{p * 1e6:8.3f}':>8} {'-' if c is None else f'{c * 1e6:8.3f}':>8} "
                  f"{fmt_ratio(g[algo], p):>8} {fmt_ratio(g[algo], c):>9} "
                  f"{g[fdk] * 1e6:10.3f} {g[fdk] / g[algo]:10.1f}x")


def chains_table(quick, exe):
    N = 200 if quick else 1000
    print(f"\n## 2. Serial revolute chains (us per state, batched N = {N}, 1 thread)\n")
    print(f"{'n':>3} {'ID derivs':>10} {'FD derivs':>10} {'pin ID C++':>10} {'pin FD C++':>10} "
          f"{'ID/pin':>7} {'FD/pin':>7} {'ID/n^2':>8}")
    for n in [1, 2, 4, 8, 16, 32, 64]:
        path = chain_urdf(n)
        try:
            m = gear.load_urdf(path)
            q, dq, ddq = states(m, N)
            tau = gear.inverse_dynamics(m, q, dq, ddq)
            old = gear.get_num_threads()
            gear.set_num_threads(1)
            outs = tuple(np.empty((N, m.nv, m.nv)) for _ in range(3))
            try:
                t_id = best_time(lambda: gear.inverse_dynamics_derivatives(m, q, dq, ddq, out=outs),
                                 number=1, repeat=3) / N
                t_fd = best_time(lambda: gear.forward_dynamics_derivatives(m, q, dq, tau, out=outs),
                                 number=1, repeat=3) / N
            finally:
                gear.set_num_threads(old)
            cpp = {}
            pm = pin_model(path, False)
            if exe and pm is not None:
                c = pin_cpp.run(exe, pm, reps=2000 if quick else 20000)
                cpp = {"id": c["rnea_derivatives"], "fd": c["aba_derivatives"]}
        finally:
            os.remove(path)
        ci, cf = cpp.get("id"), cpp.get("fd")
        print(f"{n:3d} {t_id * 1e6:10.3f} {t_fd * 1e6:10.3f} "
              f"{'-' if ci is None else f'{ci * 1e6:10.3f}':>10} {'-' if cf is None else f'{cf * 1e6:10.3f}':>10} "
              f"{fmt_ratio(t_id, ci):>7} {fmt_ratio(t_fd, cf):>7} {t_id / n / n * 1e9:6.1f}ns")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-cpp", action="store_true")
    args = parser.parse_args(argv)
    exe = None if args.no_cpp else pin_cpp.build(verbose=True)
    robots_table(args.quick, exe)
    chains_table(args.quick, exe)


if __name__ == "__main__":
    main()

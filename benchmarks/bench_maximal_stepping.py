"""Simulation in maximal coordinates (gear.MaximalModel) beside reduced
coordinates and Exudyn, per step, one state, one thread.

The IFToMM N-four-bar (``gear.mechanisms.n_four_bar``) on its chain tree,
dt = 1 ms:

* ``maximal euler+bg``: Ruan's eq. 12 with velocity-level Baumgarte
  (``integrator="euler", stabilization="baumgarte"``);
* ``maximal euler+proj``: the same with Gauss-Newton projection;
* ``maximal rkmk4``: Runge-Kutta-Munthe-Kaas, no stabilisation;
* ``reduced euler``, ``reduced rk4``: gear's native rollout loop with the
  kkt solver and projection (``gear.simulate(sys, ...)``);
* ``exudyn``: Exudyn's implicit generalized-alpha step on its
  redundant-coordinate model of the same chain (``pip install exudyn``;
  see benchmarks/bench_maximal.py), when installed.

Each column is the wall time of a short run divided by its steps (the
run's start-up included, as a user sees it).

    .venv/bin/python benchmarks/bench_maximal_stepping.py [--ns 1 10 100]
"""
import argparse
import os
import sys
import time

import numpy as np

import gear

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def per_step(fn, steps):
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / steps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--no-exudyn", action="store_true")
    a = ap.parse_args(argv)
    gear.set_num_threads(1)
    dt = 1e-3
    print(f"# gear {gear.__version__} | numpy {np.__version__} | one thread | dt = {dt:g} s")
    print("\nus per step, one state (N-four-bar, chain tree)\n")
    cols = ["maximal euler+bg", "maximal euler+proj", "maximal rkmk4", "reduced euler", "reduced rk4", "exudyn",
            "maximal e+bg / exudyn"]
    print(f"{'N':>5} {'bodies':>7} {'rows':>6} " + " ".join(f"{c:>20}" for c in cols))
    try:
        from bench_maximal import exudyn_time
    except ImportError:
        exudyn_time = None
    rng = np.random.default_rng(0)
    for N in a.ns:
        s, q = gear.mechanisms.n_four_bar(N)
        dq = s.project_velocity(q, rng.standard_normal(s.model.nv))
        mx = gear.MaximalModel(s)
        steps = 20 if N <= 10 else 5
        T = steps * dt
        t = {
            "maximal euler+bg": per_step(lambda: gear.simulate(mx, q, dq, T, dt, integrator="euler",
                                                               stabilization="baumgarte"), steps),
            "maximal euler+proj": per_step(lambda: gear.simulate(mx, q, dq, T, dt, integrator="euler",
                                                                 stabilization="projection"), steps),
            "maximal rkmk4": per_step(lambda: gear.simulate(mx, q, dq, T, dt, integrator="rkmk4",
                                                            stabilization=None), steps),
            "reduced euler": per_step(lambda: gear.simulate(s, q, dq, 20 * T, dt, integrator="euler"), 20 * steps),
            "reduced rk4": per_step(lambda: gear.simulate(s, q, dq, 20 * T, dt, integrator="rk4"), 20 * steps),
        }
        tex = None
        if exudyn_time is not None and not a.no_exudyn:
            tex, _ = exudyn_time(s, N, q)
        cells = [f"{t[c] * 1e6:20,.1f}" for c in cols[:5]]
        cells.append(f"{'-':>20}" if tex is None else f"{tex * 1e6:20,.1f}")
        cells.append(f"{'-':>20}" if tex is None else f"{t['maximal euler+bg'] / tex:20.2f}")
        print(f"{N:>5} {mx.nbodies:>7} {mx.nrows:>6} " + " ".join(cells))


if __name__ == "__main__":
    main()

"""The kernels' builds for wider instruction sets against the generic one.

Run:  python benchmarks/bench_builds.py

gear's kernels are built generic and, on x86-64 where the compiler can,
for x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512); ``GEAR_SIMD`` chooses
one (``gear.show_config()``).  This runs the same calls under every build
this processor supports, each in a fresh process on one thread, and prints
µs per state (the closed-chain derivatives per call, the maximal steps per
step) with the ratios to the generic build.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

_CHILD = r'''
import json, os, sys
import numpy as np
import gear
sys.path.insert(0, sys.argv[1])
from common import best_time
gear.set_num_threads(1)
rng = np.random.default_rng(0)
out = {}
arm = gear.load_urdf(gear.data_path("arm7.urdf"))
N = 1024
q = arm.random_configuration(rng, n=N)
dq, x = rng.standard_normal((N, arm.nv)), rng.standard_normal((N, arm.nv))
out["arm7 RNEA (batch of 1,024)"] = best_time(lambda: gear.inverse_dynamics(arm, q, dq, x)) / N * 1e6
out["arm7 ABA"] = best_time(lambda: gear.forward_dynamics(arm, q, dq, x)) / N * 1e6
out["arm7 ABA derivatives"] = best_time(lambda: gear.forward_dynamics_derivatives(arm, q, dq, x)) / N * 1e6
s, q4 = gear.mechanisms.four_bar()
qs, z = np.repeat(q4[None], N, 0), np.zeros((N, 3))
out["four-bar forward dynamics (batch of 1,024)"] = best_time(lambda: s.forward_dynamics(qs, z, z)) / N * 1e6
for name, make in (("Stewart platform", gear.mechanisms.stewart),
                   ("N-four-bar (N = 10)", lambda: gear.mechanisms.n_four_bar(10))):
    sm, q0 = make()
    nv = sm.model.nv
    v, t = sm.project_velocity(q0, rng.standard_normal(nv)), rng.standard_normal(nv)
    out[f"{name}: forward dynamics + derivatives"] = best_time(lambda: sm.forward_dynamics_derivatives(q0, v, t)) * 1e6
sg, qg = gear.mechanisms.n_four_bar(100, tree="ground")
vg, tg = sg.project_velocity(qg, rng.standard_normal(sg.model.nv)), rng.standard_normal(sg.model.nv)
for route in ("dense", "sparse"):
    sr = sg.with_solver("kkt", route=route)
    out[f"N-four-bar (N = 100, ground): kkt {route}"] = best_time(lambda: sr.forward_dynamics(qg, vg, tg)) * 1e6
from gear.maximal.native import native_run
for n, tree in ((10, "chain"), (100, "ground")):
    sm, qm = gear.mechanisms.n_four_bar(n, tree=tree)
    mx = gear.MaximalModel(sm)
    P, V = mx.state(qm, sm.project_velocity(qm, rng.standard_normal(sm.model.nv)))
    out[f"maximal Euler step, N-four-bar (N = {n}, {tree})"] = best_time(
        lambda: native_run(mx, P[None], V[None], 1e-3, 200, 200, stabilization="baumgarte")) / 200 * 1e6
q0, d0 = arm.random_configuration(rng, n=64), rng.standard_normal((64, arm.nv))
out["arm7 RK4 rollout step (64 states)"] = best_time(
    lambda: gear.simulate(arm, q0, d0, 0.2, 1e-3, integrator="rk4", progress=False), repeat=3) / (64 * 200) * 1e6
print(json.dumps(out))
'''


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    import gear

    builds = {"_v4": "v4", "_v3": "v3", "": "generic"}
    avail = [(builds[s], name) for s, name in reversed(gear._core.available_variants())]
    results = {}
    for key, name in avail:
        env = dict(os.environ, GEAR_SIMD=key, OPENBLAS_NUM_THREADS="1")
        p = subprocess.run([sys.executable, "-c", _CHILD, here], capture_output=True, text=True, env=env,
                           check=True)
        results[name] = json.loads(p.stdout.strip().splitlines()[-1])
    names = [n for _, n in avail]
    rows = list(results[names[0]])
    print("µs per state on one thread (closed-chain derivatives: per call; maximal steps: per step); "
          "ratio to the generic build\n")
    print(f"{'kernel':48s} " + " ".join(f"{n:>24s}" for n in names))
    for r in rows:
        base = results[names[0]][r]
        cells = [f"{results[n][r]:10.3f} ({results[n][r] / base:4.2f}x)" for n in names]
        print(f"{r:48s} " + " ".join(f"{c:>24s}" for c in cells))


if __name__ == "__main__":
    main()

"""Maximal vs reduced coordinates on the N-four-bar chain (IFToMM-style).

Run:  python benchmarks/bench_maximal.py [--quick]

For N = 1, 10, 100, 1000 (``gear.mechanisms.n_four_bar``) this prints µs
per constrained forward-dynamics call from Python. The columns are:

- **maximal**: CHOLMOD on the Schur complement of the sparse maximal KKT
  system, linear in N.
- **kkt**: the native reduced solver, whose ``m^3`` dense solve makes it
  cubic in N. It is timed once at N = 1000; ``--quick`` skips it there.
- **projection**: a dense SVD null space, up to N = 100.
- **Pinocchio's constraintDynamics**: up to N = 100; it is optional, and
  its data grows as joints^3.

Each row also gives the problem sizes, the nonzeros of the maximal
system's J and Cholesky factor, and the largest ddq difference from the
kkt solver. For N = 1 MuJoCo's ``mj_forward`` on the bundled fourbar.xml
(soft ``equality connect``) is shown for scale.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gear  # noqa: E402
from common import best_time, pinocchio_constraint_dynamics  # noqa: E402


def once(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def pinocchio_time(s, q, dq, tau):
    call, a = pinocchio_constraint_dynamics(s, q, dq, tau)
    if call is None:
        return None, None
    return best_time(call, repeat=3, target=0.1), a


def mujoco_fourbar():
    try:
        import mujoco
    except ImportError:
        return None
    m = mujoco.MjModel.from_xml_path(gear.data_path("fourbar.xml"))
    d = mujoco.MjData(m)
    return best_time(lambda: mujoco.mj_forward(m, d), repeat=3, target=0.1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the dense solvers at N = 1000")
    a = ap.parse_args(argv)
    print(f"# gear {gear.__version__} | numpy {np.__version__} | {os.cpu_count()} cores")
    print("\nus per call (one state); |ddq - kkt| in brackets\n")
    print(f"{'N':>5} {'nv':>5} {'nc':>5} {'rows':>6} {'nnz J':>7} {'nnz L':>7} {'maximal':>10} "
          f"{'kkt':>12} {'projection':>12} {'pinocchio':>16} {'kkt/maximal':>12}")
    rng = np.random.default_rng(0)
    for N in (1, 10, 100, 1000):
        s, q = gear.mechanisms.n_four_bar(N)
        nv = s.model.nv
        dq = s.project_velocity(q, rng.standard_normal(nv))
        tau = rng.standard_normal(nv)
        mx = s.with_solver("maximal")
        rm = mx.forward_dynamics(q, dq, tau)
        tm = best_time(lambda: mx.forward_dynamics(q, dq, tau), repeat=3, target=0.2)
        if N < 1000:
            tk = best_time(lambda: s.forward_dynamics(q, dq, tau), repeat=3, target=0.1)
            rk = s.forward_dynamics(q, dq, tau)
        elif not a.quick:
            tk, rk = once(lambda: s.forward_dynamics(q, dq, tau))
        else:
            tk, rk = None, None
        cell_k = "-" if tk is None else f"{tk * 1e6:12,.0f}"
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
        print(f"{N:>5} {nv:>5} {s.nc:>5} {rm.stats['rows']:>6} {rm.stats['nnz_J']:>7} "
              f"{rm.stats['nnz_factor']:>7} {tm * 1e6:10,.0f}{dm} {cell_k} {cell_p} {cell_pin:>16} {ratio}")
    tmj = mujoco_fourbar()
    if tmj is not None:
        print(f"\nMuJoCo mj_forward on fourbar.xml (soft equality connect): {tmj * 1e6:.1f} us per call")


if __name__ == "__main__":
    main()

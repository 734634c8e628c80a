"""A campaign's throughput and the client's memory: local vs Dask.

Run:  python benchmarks/bench_campaign.py [--states N] [--t T] [--workers W] [--quick]

The campaign is N rollouts of the bundled 7-DoF arm (arm7.urdf), RK4 at
dt = 1 ms for T seconds, every step recorded (defaults: 256 rollouts x
10 s, 287 MB of trajectories).  It runs four ways, each in a fresh
process so that its peak memory is its own:

- ``local``: in this process's memory (no ``out=``);
- ``local out=``: this process writes a Zarr store, chunk by chunk;
- ``dask gather``: a ``LocalCluster`` of W worker processes x 1 thread,
  trajectories gathered into the client (no ``out=``);
- ``dask out=``: the same cluster, every worker writing its chunks into
  the store (only summaries return).

Columns: wall time, state-steps per second (N x steps / wall time), and
the growth of the client's peak resident memory during the campaign
(``resource.getrusage(RUSAGE_SELF).ru_maxrss`` after minus before; the
local runs use ``gear.set_num_threads(W)`` so that both sides use W
cores).  The scheduler of the LocalCluster lives in the client's process,
the workers in their own.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CASES = ("local", "local out=", "dask gather", "dask out=")


def _peak_mb():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_case(case, states, t_final, workers, store_dir):
    """Run one case in this process; returns its figures."""
    import numpy as np

    import gear

    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(0)
    q0, dq0 = arm.random_configuration(rng, n=states), rng.standard_normal((states, arm.nv))
    out = os.path.join(store_dir, "campaign.zarr") if case.endswith("out=") else None
    warm = os.path.join(store_dir, "warm.zarr") if out else None
    if case.startswith("local"):
        gear.set_num_threads(workers)
        gear.simulate(arm, q0[:4], dq0[:4], 0.01, 1e-3, out=warm, progress=False)
        before = _peak_mb()
        tr = gear.simulate(arm, q0, dq0, t_final, 1e-3, out=out, progress=False)
        after = _peak_mb()
    else:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=50) as cluster, Client(cluster) as client:
            gear.simulate(arm, q0[:4], dq0[:4], 0.01, 1e-3, out=warm, client=client, progress=False)
            before = _peak_mb()
            tr = gear.simulate(arm, q0, dq0, t_final, 1e-3, out=out, client=client, progress=False)
            after = _peak_mb()
    st = tr.stats
    nbytes = sum(int(np.prod(getattr(tr, k).shape)) * 8 for k in ("t", "q", "dq"))
    return {"case": case, "wall": st["wall_time"], "rate": st["steps"] * states / st["wall_time"],
            "growth_mb": after - before, "mb": nbytes / 1e6, "chunks": st.get("chunks", 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--states", type=int, default=256)
    p.add_argument("--t", type=float, default=10.0, help="seconds simulated (steps of 1 ms)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="a tenth of the states")
    p.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    states = max(4, a.states // 10) if a.quick else a.states
    if a.case:
        print(json.dumps(run_case(a.case, states, a.t, a.workers, a.dir)))
        return 0
    try:
        import distributed  # noqa: F401
        import zarr  # noqa: F401
    except ImportError:
        print("bench_campaign needs the 'campaign' extra: pip install 'gear[campaign]'")
        return 1
    print(f"arm7, RK4, dt = 1 ms, {states} rollouts x {a.t:g} s, every step recorded; "
          f"{a.workers} cores (local threads / Dask workers x 1 thread)\n")
    print(f"{'case':<12} {'chunks':>6} {'wall (s)':>9} {'state-steps/s':>14} {'data (MB)':>10} "
          f"{'client peak +MB':>16}")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for case in CASES:
        with tempfile.TemporaryDirectory() as d:
            args = [sys.executable, os.path.abspath(__file__), "--case", case, "--states", str(a.states),
                    "--t", str(a.t), "--workers", str(a.workers), "--dir", d] + (["--quick"] if a.quick else [])
            res = subprocess.run(args, capture_output=True, text=True, env=env)
            if res.returncode != 0:
                print(f"{case:<12} failed: {res.stderr.strip().splitlines()[-1] if res.stderr else '?'}")
                continue
            r = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{case:<12} {r['chunks']:>6} {r['wall']:>9.2f} {r['rate']:>14,.0f} {r['mb']:>10.0f} "
                  f"{r['growth_mb']:>16.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

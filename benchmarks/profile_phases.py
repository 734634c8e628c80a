"""Where the time goes: a perf profile of one scenario, summed by the
Cython source file and function each sample's C line came from.

Run:  python benchmarks/profile_phases.py SCENARIO [--by-file]

SCENARIO is one of ``aba`` (arm7 ABA, a batch of 4,096 states), ``closed``
(four-bar constrained forward dynamics, 4,096 states), ``rollout``
(four-bar Euler rollouts with projection, 256 states), ``derivatives``
(N-four-bar closed-chain derivatives, 256 states) and ``maximal`` (the
maximal-coordinate Euler step at N = 100), all on one thread.

It needs Linux ``perf`` and a build with line information, for example
``pip install --no-build-isolation -e . -Csetup-args=-Dc_args=-g`` (the
kernels are the same ``-O3`` code; ``-g`` only adds the line tables).
Inlined helpers (``cross3``, ``matvec3`` ...) count where they are
written, in ``gear/spatial/_spatial.pxd``, not in their callers.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

SCENARIOS = {
    "aba": """
import numpy as np, gear, time
gear.set_num_threads(1)
arm = gear.load_urdf(gear.data_path("arm7.urdf"))
rng = np.random.default_rng(0); N = 4096
q = arm.random_configuration(rng, n=N); dq, tau = rng.standard_normal((2, N, arm.nv))
t = time.perf_counter()
while time.perf_counter() - t < 4: gear.forward_dynamics(arm, q, dq, tau)
""",
    "closed": """
import numpy as np, gear, time
gear.set_num_threads(1)
s, q = gear.mechanisms.four_bar(); rng = np.random.default_rng(0); N = 4096
qs = np.repeat(q[None], N, 0); dq = np.array([s.project_velocity(q, rng.standard_normal(3)) for _ in range(N)])
tau = rng.standard_normal((N, 3))
t = time.perf_counter()
while time.perf_counter() - t < 4: s.forward_dynamics(qs, dq, tau)
""",
    "rollout": """
import numpy as np, gear
gear.set_num_threads(1)
fb = gear.load_mjcf(gear.data_path("fourbar.xml")); s = gear.ConstrainedModel(fb); q = s.assemble(fb.neutral())
rng = np.random.default_rng(0); N = 256
qs = np.stack([s.assemble(s.model.integrate(q, 0.05 * rng.standard_normal(3))) for _ in range(N)])
dqs = np.stack([s.project_velocity(x, rng.standard_normal(3)) for x in qs])
gear.simulate(s, qs, dqs, 8.0, 1e-3, integrator="euler", record_every=8000, progress=False)
""",
    "derivatives": """
import numpy as np, gear, time
gear.set_num_threads(1)
s, q0 = gear.mechanisms.n_four_bar(10); rng = np.random.default_rng(0); nv = s.model.nv; B = 256
qs = np.repeat(q0[None], B, 0); dq = np.array([s.project_velocity(q0, rng.standard_normal(nv)) for _ in range(B)])
tau = rng.standard_normal((B, nv))
t = time.perf_counter()
while time.perf_counter() - t < 4: s.forward_dynamics_derivatives(qs, dq, tau)
""",
    "maximal": """
import os, numpy as np, gear, time
from gear.maximal.native import native_run
gear.set_num_threads(1)
s, q = gear.mechanisms.n_four_bar(int(os.environ.get("GEAR_PROFILE_N", 100))); mx = gear.MaximalModel(s); rng = np.random.default_rng(0)
P, V = mx.state(q, s.project_velocity(q, rng.standard_normal(s.model.nv)))
t = time.perf_counter()
while time.perf_counter() - t < 4: native_run(mx, P[None], V[None], 1e-3, 200, 200, stabilization="baumgarte")
""",
}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _marks(path, cache={}):
    """(C line, source file, source line) of every Cython source comment."""
    if path not in cache:
        out = []
        for i, t in enumerate(open(path, errors="replace"), 1):
            m = re.match(r'\s*/\* "([^"]+)":(\d+)', t)
            if m:
                out.append((i, m.group(1), int(m.group(2))))
        cache[path] = out
    return cache[path]


def _function(src, line, cache={}):
    """The cdef/def function of ``src`` (a path in the repository) around ``line``."""
    if src not in cache:
        out = []
        p = os.path.join(ROOT, src)
        if os.path.isfile(p):
            for i, t in enumerate(open(p), 1):
                m = re.match(r"\s*(?:cdef|cpdef|def)\s+(?:inline\s+)?[\w\*\s\[\]]*?\b(\w+)\(", t)
                if m:
                    out.append((i, m.group(1)))
        cache[src] = out
    fs = cache[src]
    k = bisect.bisect_right([a for a, _ in fs], line) - 1
    return fs[k][1] if k >= 0 else "?"


def summarise(data, by_file):
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "srcline", "--percent-limit", "0.02"],
                         capture_output=True, text=True, check=True).stdout
    cfiles = {os.path.basename(p): p for p in glob.glob(os.path.join(ROOT, "build", "**", "*.c"), recursive=True)}
    agg = collections.Counter()
    for ln in rep.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+):(\d+)", ln)
        if not m:
            continue
        pct, cfile, cline = float(m.group(1)), m.group(2), int(m.group(3))
        marks = _marks(cfiles[cfile]) if cfile in cfiles else []
        k = bisect.bisect_right([a for a, _, _ in marks], cline) - 1
        if k < 0:
            agg[f"(outside gear: {cfile.split('.')[0]})"] += pct
            continue
        _, src, sline = marks[k]
        agg[src if by_file else f"{src}:{_function(src, sline)}"] += pct
    return agg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--by-file", action="store_true", help="sum by source file instead of by function")
    a = ap.parse_args(argv)
    if shutil.which("perf") is None:
        sys.exit("profile_phases: needs Linux perf (apt-get install linux-perf)")
    with tempfile.TemporaryDirectory() as d:
        script, data = os.path.join(d, "scenario.py"), os.path.join(d, "perf.data")
        with open(script, "w") as fh:
            fh.write(SCENARIOS[a.scenario])
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        subprocess.run(["perf", "record", "-q", "-o", data, sys.executable, script], check=True, env=env,
                       stderr=subprocess.DEVNULL)
        agg = summarise(data, a.by_file)
    if not any(k.startswith("gear/") for k in agg):
        sys.exit("profile_phases: no line information in the build (rebuild with -Csetup-args=-Dc_args=-g)")
    for k, v in agg.most_common(20):
        print(f"{v:6.1f}%  {k}")
    print(f"({sum(agg.values()):.1f}% of the samples attributed)")


if __name__ == "__main__":
    main()

"""Reduced vs maximal coordinates on two spanning trees of the same mechanism.

Run:  python benchmarks/bench_trees.py [--quick] [--ns 1 10 100 1000]
                                       [--json PATH [--overwrite]]

``gear.mechanisms.n_four_bar(N, tree=...)`` is one mechanism (a chain of N
parallelogram four-bars) modelled on two spanning trees:

- **ground**: every crank pivoted on the ground, each coupler hanging from
  a crank (two deep). ``M`` is block diagonal and ``K = A M^-1 A^T`` banded:
  reduced coordinates can be linear in N.
- **chain**: crank, coupler, crank, ... (``2 N + 1`` deep). ``K`` is dense:
  reduced coordinates are cubic in N, maximal ones stay linear.

Everything runs on one thread (``OPENBLAS_NUM_THREADS=1``,
``gear.set_num_threads(1)``). Each (tree, N) uses one state drawn with
seed 0: the closed configuration ``q0``, a random ``dq`` projected onto
the constraints (``sys.project_velocity``) and a random ``tau``.

Timing table, one per tree (µs per ``sys.forward_dynamics`` call on that
single state, from Python; best of 3 auto-sized loops, or one timed call
after a warm-up call when a call takes more than 0.2 s):

- **nv, nc**: the problem size (dofs, constraint rows).
- **depth, fill K**: ``sys.tree_statistics(q0)``: the deepest root path
  (joints) and the fraction of ``K``'s entries that are not structurally
  zero. (Its Python pair loop takes ~45 s on the chain at N = 1000; there
  the same numbers come from two boolean matrix products.)
- **kkt/aba, kkt/dense, kkt/sparse**: ``sys.with_solver("kkt", route=...)``;
  ``n/a`` when the route is not available (``ValueError``).
- **kkt/auto**: ``route="auto"``, with the route it ran in brackets (from
  ``res.stats["route"]``; any other column shows it only if it is not the
  route asked for).
- **projection**: the dense null-space solver.
- **maximal**: CHOLMOD on the sparse maximal-coordinate system.
- **mujoco**: ``mj_forward`` on the same tree (``gear.interop.to_mjcf``, ball
  closures as *soft* ``equality connect``, contacts off; timed as in
  ``bench_maximal.py``); its relative ddq error against gear in brackets.
  "cannot load": MuJoCo's XML parser refuses the model (its nesting limit,
  the chain at N = 1000).
- **pinocchio**: ``constraintDynamics`` (``common.pinocchio_constraint_dynamics``)
  up to N = 100; its relative ddq difference in brackets.

A cell reads "skipped (cubic)" when the call would exceed its budget
(estimated as the previous N's time times (N / N_prev)^3): 2 s for
projection, 0.25 s for every solver with ``--quick``.

After each timing table:

- **agreement**: the largest ``|ddq - ddq_ref| / max |ddq_ref|`` of every
  gear solver against kkt/dense (kkt/aba when dense is skipped); all must
  be <= 1e-10.
- **best exact / mujoco**: the fastest exact gear solver per N and its
  time over MuJoCo's (goal <= 0.7 on the ground tree).
- **growth exponent k**: the least-squares slope of log time against log N
  over the N >= 10 measured (goal k <= 1.15 for kkt/sparse on the ground
  tree).
- **crossover**: the first N at which maximal beats the best reduced route
  (and a log-log interpolation between the measured N).

``--json PATH`` writes every number (schema ``gear.bench.trees/1``). An
existing file is replaced only if it is such a file and ``--overwrite``
is given (``gear._output.claim_file``, as ``gear bench --json``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

# one thread: numpy's BLAS (projection, the dense fallbacks) and gear's batches
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gear  # noqa: E402
from bench_maximal import mujoco_time, once  # noqa: E402
from common import best_time, pinocchio_constraint_dynamics  # noqa: E402

SCHEMA = "gear.bench.trees/1"
TREES = ("ground", "chain")
SOLVERS = ("kkt/aba", "kkt/dense", "kkt/sparse", "kkt/auto", "projection", "maximal")
REDUCED = ("kkt/aba", "kkt/dense", "kkt/sparse", "kkt/auto", "projection")
SLOW = 0.2                  # s per call: above this, one timed call instead of best_time
BUDGET = {"projection": 2.0}  # s per call (estimated) above which a solver is skipped
QUICK_BUDGET = 0.25
PIN_MAX_N = 100
AGREE = 1e-10               # goal: every route's ddq against the reference
GOAL_RATIO, GOAL_K = 0.7, 1.15


# -- measuring -----------------------------------------------------------------
def state(s, q0, seed=0):
    """q0, a random dq projected onto the constraints, a random tau."""
    rng = np.random.default_rng(seed)
    nv = s.model.nv
    return q0, s.project_velocity(q0, rng.standard_normal(nv)), rng.standard_normal(nv)


def with_solver(s, name):
    """``s`` with solver ``name`` ("kkt/<route>" or a solver name)."""
    if name.startswith("kkt/"):
        return s.with_solver("kkt", route=name[4:])
    return s.with_solver(name)


def time_call(fn):
    """(seconds per call, result of a call): best_time, or one timed call
    after the warm-up call when a call takes more than SLOW."""
    t, out = once(fn)                     # warm-up: the first call builds the native data
    if t > SLOW:
        t, out = once(fn)
        if t > SLOW:
            return t, out
    return best_time(fn, repeat=3, target=0.1), out


def rel_diff(a, ref):
    return float(np.abs(a - ref).max() / max(1e-300, np.abs(ref).max()))


def tree_stats(s, q):
    """``s.tree_statistics(q)``, or the same numbers from boolean matrix
    products where its pair loop would be slow (the deep chain, large N)."""
    A = s.constraint_jacobian(q)
    sup = np.abs(A) > 1e-12 * max(np.abs(A).max(initial=0.0), 1e-300)
    if A.shape[0] * sup.sum() < 5e7:
        return s.tree_statistics(q)
    return _tree_stats_numpy(s.model, sup)


def _tree_stats_numpy(model, sup):
    """``tree_statistics`` from the support ``sup`` (nc, nv) of ``A``."""
    m, nv = sup.shape
    anc = np.zeros((nv, nv), np.float32)      # anc[d, e] = 1: dof e on dof d's root path
    joint_anc, depth = [], []
    for i, j in enumerate(model.joints):
        p = model.parents[i]
        row = np.zeros(nv, np.float32) if p < 0 else joint_anc[p].copy()
        sv = model.idx_v(model.joint_names[i])
        row[sv] = 1.0
        joint_anc.append(row)
        anc[sv] = row
        depth.append((0 if p < 0 else depth[p]) + (1 if j.nv else 0))
    closures = (sup.astype(np.float32) @ anc) > 0       # the dofs each row moves, and their ancestors
    c = closures.astype(np.float32)
    nnz_K = int(((c @ c.T) > 0).sum())
    return {"depth": max(depth, default=0), "rows": m, "nnz_A": int(sup.sum()),
            "nnz_K": nnz_K, "fill_K": nnz_K / (m * m) if m else 0.0}


def skip_reason(name, N, last, quick):
    """'skipped (cubic)' when the call's cubic estimate from the previous N
    exceeds its budget, else None. ``last``: (N, seconds) or None."""
    budget = QUICK_BUDGET if quick else BUDGET.get(name, np.inf)
    if last is None:
        return None
    return "skipped (cubic)" if last[1] * (N / last[0]) ** 3 > budget else None


def measure_gear(s, q, dq, tau, N, last, quick):
    """{solver: cell} with cell keys seconds, route, note, and the ddq
    answers; ``last`` ({solver: (N, seconds)}) is updated."""
    cells, ddq = {}, {}
    for name in SOLVERS:
        note = skip_reason(name, N, last.get(name), quick)
        if note:
            cells[name] = {"seconds": None, "route": None, "note": note}
            n0, t0 = last[name]
            last[name] = (N, t0 * (N / n0) ** 3)       # the estimate, for the next N
            continue
        try:
            sn = with_solver(s, name)
            t, res = time_call(lambda: sn.forward_dynamics(q, dq, tau))
        except ValueError as exc:                     # e.g. a route not available yet
            cells[name] = {"seconds": None, "route": None, "note": "n/a", "error": str(exc)}
            continue
        route = res.stats.get("route")
        # the route in brackets when it is not the one the column asked for (auto)
        cells[name] = {"seconds": t, "route": route, "note": None,
                       "show_route": route is not None and name != f"kkt/{route}"}
        ddq[name] = res.ddq
        last[name] = (N, t)
    ref = "kkt/dense" if "kkt/dense" in ddq else "kkt/aba" if "kkt/aba" in ddq else None
    for name, a in ddq.items():
        cells[name]["rel_diff"] = None if ref is None else rel_diff(a, ddq[ref])
    return cells, (None if ref is None else ddq[ref]), ref


def measure_pinocchio(s, q, dq, tau, ref):
    call, a = pinocchio_constraint_dynamics(s, q, dq, tau)
    if call is None or ref is None:
        return {"seconds": None, "rel_err": None, "note": "not installed" if call is None else None}
    return {"seconds": best_time(call, repeat=3, target=0.1), "rel_err": rel_diff(a, ref), "note": None}


def measure_mujoco(s, q, dq, tau, ref):
    t, err = (None, None) if ref is None else mujoco_time(s, q, dq, tau, ref)
    if isinstance(t, str):
        return {"seconds": None, "rel_err": None, "note": "cannot load", "error": t}
    return {"seconds": t, "rel_err": err, "note": None if t is not None else "not installed"}


def measure(tree, N, last, quick):
    s, q0 = gear.mechanisms.n_four_bar(N, tree=tree)
    q, dq, tau = state(s, q0)
    cells, ref_ddq, ref = measure_gear(s, q, dq, tau, N, last, quick)
    st = tree_stats(s, q)
    row = {"N": N, "nv": s.model.nv, "nc": s.nc, "depth": st["depth"], "fill_K": st["fill_K"],
           "nnz_A": st["nnz_A"], "nnz_K": st["nnz_K"], "reference": ref, "gear": cells,
           "mujoco": measure_mujoco(s, q, dq, tau, ref_ddq)}
    if N <= PIN_MAX_N:
        row["pinocchio"] = measure_pinocchio(s, q, dq, tau, ref_ddq)
    else:
        row["pinocchio"] = {"seconds": None, "rel_err": None, "note": f"N > {PIN_MAX_N}"}
    return row


# -- summaries -----------------------------------------------------------------
def best_exact(row):
    """(solver, seconds) of the fastest exact gear solver."""
    ts = {k: c["seconds"] for k, c in row["gear"].items() if c["seconds"] is not None}
    return min(ts.items(), key=lambda kv: kv[1]) if ts else (None, None)


def growth(rows, name):
    """Least-squares slope of log seconds vs log N over the N >= 10 measured."""
    pts = [(r["N"], r["gear"][name]["seconds"]) for r in rows
           if r["N"] >= 10 and r["gear"][name]["seconds"] is not None]
    if len(pts) < 2:
        return None
    n, t = np.log(np.array(pts, float)).T
    return float(np.polyfit(n, t, 1)[0])


def crossover(rows):
    """(N_before, N_at, N_interpolated) where maximal first beats the best
    reduced route: (None, N0, None) if it does at the first N, None if never."""
    prev = None
    for r in rows:
        red = [r["gear"][k]["seconds"] for k in REDUCED if r["gear"][k]["seconds"] is not None]
        tm = r["gear"]["maximal"]["seconds"]
        if not red or tm is None:
            continue
        ratio = tm / min(red)
        if ratio < 1.0:
            if prev is None:
                return None, r["N"], None
            (n0, r0), n1 = prev, r["N"]
            # log ratio linear in log N between the two measured N
            x = np.log(n0) + (np.log(n1) - np.log(n0)) * np.log(r0) / (np.log(r0) - np.log(ratio))
            return n0, n1, float(np.exp(x))
        prev = (r["N"], ratio)
    return None


def summaries(tree, rows):
    out = {"best_over_mujoco": [], "growth": {k: growth(rows, k) for k in SOLVERS},
           "crossover": crossover(rows)}
    for r in rows:
        name, t = best_exact(r)
        tm = r["mujoco"]["seconds"]
        out["best_over_mujoco"].append({"N": r["N"], "solver": name,
                                        "ratio": None if t is None or tm is None else t / tm})
    return out


# -- printing ------------------------------------------------------------------
def us(t):
    if t is None:
        return "-"
    return f"{t * 1e6:,.1f}" if t < 1e-2 else f"{t * 1e6:,.0f}"


def gear_cell(c):
    if c["seconds"] is None:
        return c["note"]
    return us(c["seconds"]) + (f" ({c['route']})" if c.get("route") and c.get("show_route") else "")


def ext_cell(c):
    if c["seconds"] is None:
        return c["note"] or "-"
    return f"{us(c['seconds'])} [{c['rel_err']:.0e}]"


WIDTH = {"kkt/aba": 16, "kkt/dense": 18, "kkt/sparse": 19, "kkt/auto": 19, "projection": 16,
         "maximal": 10}


def print_table(tree, rows):
    print(f"\n## {tree} tree: µs per forward_dynamics call (one state, one thread)\n")
    print(f"{'N':>5} {'nv':>5} {'nc':>5} {'depth':>5} {'fill K':>7} "
          + " ".join(f"{k:>{WIDTH[k]}}" for k in SOLVERS)
          + f" {'mujoco [err]':>19} {'pinocchio [err]':>18}")
    for r in rows:
        print(f"{r['N']:>5} {r['nv']:>5} {r['nc']:>5} {r['depth']:>5} {r['fill_K']:>7.4f} "
              + " ".join(f"{gear_cell(r['gear'][k]):>{WIDTH[k]}}" for k in SOLVERS)
              + f" {ext_cell(r['mujoco']):>19} {ext_cell(r['pinocchio']):>18}")


def print_agreement(rows):
    print(f"\nagreement: max |ddq - ddq_ref| / max |ddq_ref| (goal <= {AGREE:.0e})\n")
    print(f"{'N':>5} {'ref':>10} " + " ".join(f"{k:>11}" for k in SOLVERS) + f" {'worst':>8}")
    for r in rows:
        d = {k: c.get("rel_diff") for k, c in r["gear"].items()}
        cells = ["ref" if k == r["reference"] else "-" if d[k] is None else f"{d[k]:.0e}" for k in SOLVERS]
        worst = max((v for v in d.values() if v is not None), default=None)
        verdict = "-" if worst is None else ("ok" if worst <= AGREE else "FAIL")
        print(f"{r['N']:>5} {r['reference'] or '-':>10} " + " ".join(f"{c:>11}" for c in cells)
              + f" {verdict:>8}")


def print_summaries(tree, summ):
    goal = f" (goal <= {GOAL_RATIO})" if tree == "ground" else ""
    print(f"\nbest exact gear solver / mujoco{goal}: " + ", ".join(
        f"N = {b['N']}: " + ("-" if b["ratio"] is None else f"{b['ratio']:.2f} ({b['solver']})")
        for b in summ["best_over_mujoco"]))
    ks = summ["growth"]
    goal = f"; goal kkt/sparse <= {GOAL_K}" if tree == "ground" else ""
    print(f"growth exponent k (time ~ N^k, N >= 10{goal}): " + ", ".join(
        f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in ks.items()))
    c = summ["crossover"]
    if c is None:
        print("crossover: maximal is not faster than the best reduced route at any N measured")
    elif c[0] is None:
        print(f"crossover: maximal is faster than the best reduced route from the first N measured ({c[1]})")
    else:
        print(f"crossover: maximal becomes faster than the best reduced route between N = {c[0]} and "
              f"N = {c[1]} (about N = {c[2]:.0f} by log-log interpolation)")


# -- main ----------------------------------------------------------------------
def versions():
    out = {"gear": gear.__version__, "numpy": np.__version__, "cores": os.cpu_count()}
    for mod in ("mujoco", "pinocchio"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = None
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", type=int, nargs="+", default=[1, 10, 100, 1000], help="the N to run")
    ap.add_argument("--quick", action="store_true",
                    help=f"skip every solver whose cubic estimate exceeds {QUICK_BUDGET} s per call")
    ap.add_argument("--json", metavar="PATH", help=f"write the numbers (schema {SCHEMA})")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier bench file at --json PATH")
    a = ap.parse_args(argv)
    if a.json:
        from gear._output import claim_file

        try:
            claim_file(a.json, "trees bench file", "gear.bench.trees", overwrite=a.overwrite,
                       option="--overwrite")
        except (FileExistsError, PermissionError) as exc:
            ap.error(str(exc))
    if hasattr(gear, "set_num_threads"):
        gear.set_num_threads(1)
    ver = versions()
    print("# " + " | ".join(f"{k} {v}" for k, v in ver.items()) + " | 1 thread")
    report = {"schema": SCHEMA, "versions": ver, "ns": sorted(a.ns), "quick": a.quick, "trees": {}}
    for tree in TREES:
        rows, last = [], {}
        for N in sorted(a.ns):
            rows.append(measure(tree, N, last, a.quick))
        summ = summaries(tree, rows)
        print_table(tree, rows)
        print_agreement(rows)
        print_summaries(tree, summ)
        report["trees"][tree] = {"rows": rows, **summ}
    report["projected_rollouts"] = projected_rollouts([n for n in sorted(a.ns) if n >= 10] or [10])
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(report, fh, indent=1)
        print(f"\nwrote {a.json}")


def projected_rollouts(ns, steps=100, dt=1e-3):
    """Per step of a projected Euler rollout (``gear.simulate(...,
    stabilization="projection")``, the native loop, from a start 1e-3 off
    the rows) on the ground tree, next to one forward-dynamics call, by the
    kkt solver's dense and sparse routes (the dense one up to N = 100:
    its projection forms ``A`` and ``A A^T`` dense)."""
    print("\n## ground tree: projected Euler rollouts (native loop, 100 steps from a start 1e-3 off the rows)\n")
    print(f"{'N':>5} {'route':>7} {'step µs':>10} {'solve µs':>10} {'step/solve':>11} {'max |g| after':>14}")
    out = []
    for N in ns:
        s, q0 = gear.mechanisms.n_four_bar(N, tree="ground")
        q, dq, tau = state(s, q0)
        qo = q + 1e-3 * np.random.default_rng(1).standard_normal(q.shape)
        for route in ("dense", "sparse"):
            if route == "dense" and N > 100:
                continue
            r = s.with_solver("kkt", route=route)
            t_solve, _ = time_call(lambda: r.forward_dynamics(q, dq, tau))
            t_run, tr = time_call(lambda: gear.simulate(r, qo, dq, steps * dt, dt, integrator="euler",
                                                        stabilization="projection", progress=False))
            step = t_run / steps
            g = max(float(np.abs(s.constraint_residual(x)).max()) for x in tr.q[-3:])
            out.append({"N": N, "route": route, "step_s": step, "solve_s": t_solve, "max_g": g})
            print(f"{N:>5} {route:>7} {us(step):>10} {us(t_solve):>10} {step / t_solve:>11.2f} {g:>14.1e}")
    return out


if __name__ == "__main__":
    main()

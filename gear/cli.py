"""The ``gear`` command line.

::

    gear info MODEL                      tree, joints, dof, loops and their mobility
    gear simulate MODEL --t T --dt DT    rollouts (progress bar; --out run.zarr)
    gear compare MODEL --out DIR         maximal vs reduced coordinates: table, PNGs, JSON
    gear analyze MODEL --sweep JOINT     mobility and a sweep of an input joint: PNG, JSON
    gear bench                           per-call times on the bundled models
    gear demo                            the README's demo
    gear config                          how gear was built and what it runs (gear.show_config)

``MODEL`` is a URDF (``.urdf``) or MJCF (``.xml``) path, a model bundled in
``gear/data`` (``arm7``, ``quadruped``, ``fourbar``), or a bundled mechanism:
``four-bar``, ``slider-crank``, ``five-bar``, ``rssr``, ``stewart``,
``bricard``, ``rolling-ball``, ``n-four-bar:N`` (``n-four-bar:N:ground``
for its tree with every crank on the ground).  Errors are one line on
stderr naming the problem (``GEAR_DEBUG=1`` shows the traceback); the exit code is 0 on success, 1 when the work
failed (bad model file, loops that do not close...), 2 for bad usage.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys

__all__ = ["main", "load", "build_parser", "CLIError", "MECHANISMS"]

MECHANISMS = ("four-bar", "slider-crank", "five-bar", "rssr", "stewart", "bricard", "rolling-ball",
              "n-four-bar:N", "n-four-bar:N:ground")


class CLIError(Exception):
    """A problem to report on one line (exit code 1)."""


class UsageError(CLIError):
    """Bad usage (a flag's value the command cannot take): exit code 2."""


def _solver_names(flag, names):
    """Check solver names against the registry before any work."""
    from gear.solvers import available

    known = available()
    bad = [s for s in names if s not in known]
    if bad:
        raise UsageError(f"{flag}: unknown solver {bad[0]!r}; choose from {', '.join(known)}")
    return names


def load(spec, floating_base=False, fixed_base=False):
    """Resolve a MODEL argument.

    Parameters
    ----------
    spec : str
        A path, a bundled model file's name (with or without extension) or
        a bundled mechanism's name (see :data:`MECHANISMS`).
    floating_base : bool
        For URDF files: a free joint at the root.
    fixed_base : bool
        For MJCF files: the top-level free bodies welded where the file
        puts them (``gear.load_mjcf(..., fixed_base=True)``).

    Returns
    -------
    model_or_sys : gear.Model or gear.ConstrainedModel
        A ``ConstrainedModel`` when the model has loops (mechanisms, MJCF
        ``equality``, URDF ``mimic``).
    q0 : ndarray, shape (nq,)
        An assembled configuration (the neutral one for a tree).
    name : str
    """
    import numpy as np

    import gear
    from gear import mechanisms as M

    builders = {"four-bar": M.four_bar, "slider-crank": M.slider_crank, "five-bar": M.five_bar,
                "rssr": M.rssr, "stewart": M.stewart, "bricard": M.bricard,
                "rolling-ball": M.rolling_ball}
    key = spec.strip().lower().replace("_", "-")
    if key in builders:
        sys_, q0 = builders[key]()
        return sys_, q0, key
    if key.startswith("n-four-bar"):
        _, _, rest = key.partition(":")
        n, _, tree = rest.partition(":")
        try:
            n = int(n) if n else 10
        except ValueError:
            raise CLIError(f"n-four-bar:N needs an integer N, got {n!r}") from None
        if not 1 <= n <= 100000:
            raise CLIError(f"n-four-bar:N needs 1 <= N <= 100000, got {n}")
        tree = tree or "chain"
        if tree not in ("chain", "ground"):
            raise CLIError(f"n-four-bar:N:TREE takes the spanning tree chain or ground, got {tree!r}")
        sys_, q0 = M.n_four_bar(n, tree=tree)
        return sys_, q0, f"n-four-bar:{n}" + ("" if tree == "chain" else ":ground")
    path = spec
    if not os.path.exists(path):
        data = gear.data_path()
        hits = [f for f in sorted(os.listdir(data)) if f == spec or os.path.splitext(f)[0] == spec]
        if not hits:
            raise CLIError(f"no model {spec!r}: not a file, not a bundled model "
                           f"({', '.join(sorted({os.path.splitext(f)[0] for f in os.listdir(data)}))}) "
                           f"and not a mechanism ({', '.join(MECHANISMS)})")
        path = os.path.join(data, hits[0])
    if os.path.isdir(path):
        raise CLIError(f"{spec!r} is a directory, not a URDF or MJCF file")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".urdf" and fixed_base:
        raise UsageError("--fixed-base is for MJCF files (their free joints); a URDF model is "
                       "fixed-base unless --floating-base")
    if ext in (".xml", ".mjcf") and floating_base:
        raise UsageError("--floating-base is for URDF files; an MJCF file declares its own free "
                       "joints (--fixed-base welds them)")
    if ext == ".urdf":
        model = gear.load_urdf(path, floating_base=floating_base)
    elif ext in (".xml", ".mjcf"):
        model = gear.load_mjcf(path, fixed_base=fixed_base)
    else:
        raise CLIError(f"{spec!r}: unknown model format {ext or '(no extension)'!r}; "
                       "give a .urdf or an MJCF .xml file")
    name = os.path.splitext(os.path.basename(path))[0]
    if getattr(model, "loop_closures", None):
        sys_ = gear.ConstrainedModel(model)
        q0 = model.neutral()
        if float(np.abs(sys_.constraint_residual(q0)).max()) > 1e-10:
            q0 = sys_.assemble(q0)
        return sys_, q0, name
    return model, model.neutral(), name


def _split(obj):
    import gear

    if isinstance(obj, gear.ConstrainedModel):
        return obj.model, obj
    return obj, None


# ---------------------------------------------------------------------------
def cmd_info(args):
    import numpy as np

    obj, q0, name = load(args.model, args.floating_base, args.fixed_base)
    model, sys_ = _split(obj)
    print(f"{name}: {model.nbodies} bodies, nq = {model.nq}, nv = {model.nv}, "
          f"mass {model.total_mass():.4g} kg, gravity {tuple(float(g) for g in model.gravity)}")
    print(f"  {'#':>3} {'body':<24} {'parent':<24} {'joint':<24} kind")
    for k, (b, j, p) in enumerate(zip(model.body_names, model.joints, model.parents)):
        parent = "world" if p < 0 else model.body_names[p]
        print(f"  {k:3d} {b:<24} {parent:<24} {model.joint_names[k]:<24} {type(j).__name__} "
              f"(nq {j.nq}, nv {j.nv})")
    if sys_ is None:
        print("  no loops: an open tree with", model.nv, "degrees of freedom")
        return 0
    print(f"  loops: {len(sys_.constraints)} constraints, {sys_.nc} rows")
    for k, c in enumerate(sys_.constraints):
        kind = getattr(c, "kind", None) or type(c).__name__
        print(f"    {getattr(c, 'name', None) or f'constraint{k}'}: {kind}, {sys_._nrows[k]} rows")
    st = sys_.tree_statistics(q0)
    print(f"  spanning tree: depth {st['depth']} (joints with dofs on the longest root path); "
          f"K = A M^-1 A^T couples {st['fill_K']:.1%} of its {st['rows']}x{st['rows']} entries "
          f"(nnz A {st['nnz_A']}, nnz K {st['nnz_K']})")
    if all(hasattr(c, "kind") or getattr(c, "_native_row", None) is not None for c in sys_.constraints):
        kkt = sys_.with_solver("kkt").solver
        costs = kkt.route_costs()
        print(f"  kkt solver's route: {kkt.route} (modelled work: "
              + ", ".join(f"{k} {v:,.0f}" for k, v in costs.items() if np.isfinite(v)) + ")")
    if name.startswith("n-four-bar:"):
        import gear

        n = int(name.split(":")[1])
        for tree in ("chain", "ground"):
            other_sys, other_q = gear.mechanisms.n_four_bar(n, tree=tree)
            other = other_sys.tree_statistics(other_q)
            print(f"    tree={tree}: depth {other['depth']}, K fill {other['fill_K']:.1%}, "
                  f"kkt route {other_sys.with_solver('kkt').solver.route}"
                  + ("  (this one)" if name.endswith(":ground") == (tree == "ground") else ""))
    mob = sys_.mobility(q0)
    res = float(np.abs(sys_.constraint_residual(q0)).max(initial=0.0))
    print(f"  mobility at the assembled configuration (residual {res:.1e}): dof {mob.dof}, "
          f"rank {mob.rank}, redundant rows {mob.redundant}, Grübler count {mob.grubler}"
          + (", singular" if mob.singular else ""))
    return 0


def cmd_simulate(args):
    import numpy as np

    import gear
    from gear._output import claim_store

    _solver_names("--solver", [args.solver])
    if args.resume and not args.out:
        raise UsageError("--resume continues an --out store; give --out too")
    if args.resume and args.overwrite:
        raise UsageError("--resume continues the --out store and --overwrite would replace it; give one "
                         "or the other")
    if args.chunks is not None and not args.out:
        raise UsageError("--chunks splits an --out campaign; give --out too")
    if args.out:
        try:
            import zarr  # noqa: F401
        except ImportError:
            raise CLIError("--out needs zarr: pip install 'gear[campaign]'") from None
        claim_store(args.out, "w" if args.overwrite else None, option="--overwrite", flag="--out",
                    resume=args.resume)
    obj, q0, name = load(args.model, args.floating_base, args.fixed_base)
    model, sys_ = _split(obj)
    if sys_ is not None:
        obj = sys_.with_solver(args.solver)
    elif args.solver != "kkt":
        print(f"gear simulate: note: {name} is an open tree; --solver {args.solver} is not used",
              file=sys.stderr)
    rng = np.random.default_rng(args.seed)
    dq0 = np.zeros(model.nv)
    if args.batch > 1:
        if sys_ is None:
            q0 = model.random_configuration(rng, n=args.batch)
        else:
            dq0 = np.stack([sys_.project_velocity(q0, rng.standard_normal(model.nv))
                            for _ in range(args.batch)])
            q0 = np.broadcast_to(q0, (args.batch, model.nq)).copy()
    stab = None if args.stabilization == "none" else args.stabilization
    traj = gear.simulate(obj, q0, dq0, args.t, args.dt, integrator=args.integrator,
                         stabilization=stab, record_every=args.record_every,
                         progress=False if args.no_progress else None, out=args.out,
                         mode="w" if args.overwrite else None, resume=args.resume, chunks=args.chunks)
    st = traj.stats
    print(f"{name}: {st['batch']} rollout(s) x {st['steps']} steps of {args.dt:g} s "
          f"({args.integrator}) in {st['wall_time']:.3g} s: {st['state_steps_per_s']:,.0f} state-steps/s"
          + (" (native loop)" if st.get("native") else ""))
    if "max_residual" in st:
        where = "before each step's projection" if st["stabilization"] == "projection" else "of the states"
        its = st.get("gauss_newton_per_step")
        print(f"  solver {st['solver']}, stabilization {st['stabilization']}, "
              f"largest constraint residual {where}: {st['max_residual']:.2e}"
              + ("" if its is None else f" (Gauss-Newton iterations per step: {its:.2f})"))
    q = np.asarray(traj.q[..., -1, :])
    print(f"  final q{' (first rollout)' if q.ndim > 1 else ''}: "
          + np.array2string(q[0] if q.ndim > 1 else q, precision=4, max_line_width=200))
    if args.out:
        print(f"  wrote {args.out} (arrays t {tuple(traj.t.shape)}, q {tuple(traj.q.shape)}, "
              f"dq {tuple(traj.dq.shape)}): {st['chunks_run']} chunk(s) run, {st['chunks_skipped']} "
              f"already complete, of {st['chunks']}")
    return 0


def cmd_compare(args):
    import gear
    from gear._output import claim_directory

    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    if not solvers:
        raise UsageError("--solvers is empty; name at least one solver, e.g. --solvers kkt,projection")
    _solver_names("--solvers", solvers)
    integrators = [s.strip() for s in args.integrator.split(",") if s.strip()]
    bad = [s for s in integrators if s not in ("euler", "rk4", "rkmk4")]
    if not integrators or bad:
        raise UsageError(f"--integrator: expected one or more of euler, rk4, rkmk4 (comma-separated), "
                         f"got {args.integrator!r}")
    if args.work_precision.strip().lower() == "none":
        factors = None
    else:
        try:
            factors = [float(s) for s in args.work_precision.split(",") if s.strip()]
        except ValueError:
            factors = []
        if not factors or not all(f > 0 and math.isfinite(f) for f in factors):
            raise UsageError(f"--work-precision: expected positive factors of --dt, comma-separated "
                             f"(e.g. 0.5,1,2,4,8), or 'none', got {args.work_precision!r}")
    claim_directory(args.out, "compare report", overwrite=args.overwrite, option="--overwrite")
    obj, q0, name = load(args.model, args.floating_base, args.fixed_base)
    trees = None
    if name.startswith("n-four-bar:"):
        # the N-four-bar has two spanning trees: time the reduced solvers on both, the loaded one first
        n, _, tree = name.partition(":")[2].partition(":")
        tree = tree or "chain"
        other = "ground" if tree == "chain" else "chain"
        trees = {tree: (obj, q0), other: gear.mechanisms.n_four_bar(int(n), tree=other)}
    runs = [f"{'maximal solver' if s == 'maximal' else s} / {i}" for s in solvers for i in integrators]
    if not args.no_maximal:
        runs += [f"maximal / {i}" + x for i in integrators for x in ("", ", unstabilised")]
    print(f"gear compare {name}: {args.t:g} s at dt = {args.dt:g} s, runs: {', '.join(runs)}; "
          "then " + ("work precision, " if factors else "") + "stability limits"
          + (", spanning trees" if trees else ""), flush=True)
    rep = gear.compare(obj, q0, t_final=args.t, dt=args.dt, integrators=integrators,
                       solvers=solvers, maximal=not args.no_maximal, name=name, trees=trees,
                       work_precision=factors, progress=False if args.no_progress else None)
    paths = rep.save(args.out)
    print()
    print(rep.table())
    print(rep.summary())
    print()
    print("wrote " + ", ".join(paths))
    for reason in rep.failed.values():
        print(f"gear compare: {_cli_terms(reason)}", file=sys.stderr)
    if rep.failed and (args.strict or len(rep.failed) == len(rep.runs)):
        return 1
    return 0


def _cli_terms(reason):
    """A run's failure reason with compare's advice in the flags' names."""
    for py, flag in (("(maximal=False)", "(--no-maximal)"), ("out of solvers", "out of --solvers"),
                     ("reduce dt", "reduce --dt")):
        reason = reason.replace(py, flag)
    return reason


def cmd_analyze(args):
    import numpy as np

    import gear
    from gear._output import claim_directory

    if args.range is not None:
        lo, hi = args.range
        if not (np.isfinite(lo) and np.isfinite(hi)) or hi == lo:
            raise UsageError(f"--range needs two different finite numbers, got {lo:g} {hi:g}")
    if not np.isfinite(args.speed):
        raise UsageError(f"--speed needs a finite number, got {args.speed}")
    obj, q0, name = load(args.model, args.floating_base, args.fixed_base)
    model, sys_ = _split(obj)
    if sys_ is None:
        raise CLIError(f"{name} is an open tree (no loops): analyze takes a closed chain, e.g. four-bar")
    if args.sweep is not None and args.sweep not in model.joint_names:
        raise UsageError(f"--sweep: {name} has no joint named {args.sweep!r}; its joints are "
                         f"{', '.join(model.joint_names)}")
    values = None
    if args.range is not None:
        values = np.linspace(args.range[0], args.range[1], args.points)
    claim_directory(args.out, "analysis", overwrite=args.overwrite, option="--overwrite")
    rep = gear.analysis.report(sys_, args.sweep, values, q0, speed=args.speed, name=name,
                               progress=False if args.no_progress else None)
    paths = rep.save(args.out)
    print(rep.summary())
    print("wrote " + ", ".join(paths))
    return 0


def cmd_bench(args):
    import json

    import numpy as np

    import gear
    from gear._output import claim_file
    from gear.comparison import _time_call, scaling

    if args.json:
        claim_file(args.json, "bench file", "gear.bench", overwrite=args.overwrite, option="--overwrite")
    rows = []
    rng = np.random.default_rng(0)
    n = 2000 if args.quick else 20000
    for fname, fb in (("arm7.urdf", False), ("quadruped.urdf", True)):
        m = gear.load_urdf(gear.data_path(fname), floating_base=fb)
        Q = m.random_configuration(rng, n=n)
        V, A = rng.standard_normal((2, n, m.nv))
        for alg, fn in (("rnea", lambda: gear.inverse_dynamics(m, Q, V, A)),
                        ("aba", lambda: gear.forward_dynamics(m, Q, V, A)),
                        ("crba", lambda: gear.mass_matrix(m, Q))):
            rows.append((fname, alg, f"per state of {n:,}", _time_call(fn, 0.05) / n))
    try:
        import sksparse  # noqa: F401

        solvers = ("kkt", "projection", "soft", "maximal")
    except ImportError:
        print("gear bench: note: scikit-sparse is not installed; the maximal solver is left out",
              file=sys.stderr)
        solvers = ("kkt", "projection", "soft")
    sys_, q0 = gear.mechanisms.four_bar()
    z = np.zeros(sys_.model.nv)
    for s in solvers:
        sx = sys_.with_solver(s)
        rows.append(("four-bar", f"forward ({s})", "one call", _time_call(lambda: sx.forward_dynamics(q0, z, z), 0.05)))
    ns = (1, 10) if args.quick else (1, 10, 100)
    sc = scaling(ns, solvers=[s for s in solvers if s != "soft"])
    for k, N in enumerate(sc["ns"]):
        for s, secs in sc["seconds"].items():
            rows.append((f"n-four-bar:{N}", f"forward ({s})", "one call", secs[k]))
    print(f"gear {gear.__version__}, {gear.get_num_threads()} thread(s) for the batches "
          "(gear.set_num_threads); single calls run on one")
    print(f"{'model':<16} {'what':<22} {'how':<20} {'µs':>12}")
    for r in rows:
        print(f"{r[0]:<16} {r[1]:<22} {r[2]:<20} {r[3] * 1e6:12,.2f}")
    print("fastest solver on the N-four-bar: " + ", ".join(f"N = {N}: {s}" for N, s in zip(sc["ns"], sc["fastest"])))
    if args.json:
        tmp = args.json + ".partial"
        with open(tmp, "w") as fh:
            json.dump({"schema": "gear.bench/1", "gear_version": gear.__version__,
                       "threads": gear.get_num_threads(),
                       "rows": [{"model": a, "what": b, "how": c, "seconds": t} for a, b, c, t in rows],
                       "scaling": sc}, fh, indent=1)
        os.replace(tmp, args.json)
        print(f"wrote {args.json}")
    return 0


def cmd_demo(args):
    from .demo import main as demo_main

    demo_main(["--seed", str(args.seed), "--batch", str(args.batch)])
    return 0


# ---------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    # negative numbers in every spelling (-1e-3, -.5, -inf) are values, so
    # that "--dt -1e-3" reaches the check that says what is wrong with it
    _NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._negative_number_matcher = self._NUMBER

    def error(self, message):
        """Usage errors: one line, exit code 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive(kind):
    def conv(s):
        try:
            x = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {s!r}") from None
        if not x > 0 or (kind is float and x != x):
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {s!r}")
        return x
    return conv


def build_parser():
    p = _Parser(prog="gear", description="gear: articulated rigid-body dynamics (Kim's Lie-group "
                "formulation): models, closed loops, solvers, simulation.",
                epilog="MODEL: a .urdf/.xml path, a bundled model (arm7, quadruped, fourbar) or a "
                "mechanism (" + ", ".join(MECHANISMS) + ").")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=_Parser)

    def model_arg(sp):
        sp.add_argument("model", metavar="MODEL", help="URDF/MJCF path, bundled model or mechanism name")
        sp.add_argument("--floating-base", action="store_true", help="URDF: a free joint at the root")
        sp.add_argument("--fixed-base", action="store_true",
                        help="MJCF: weld the top-level free bodies where the file puts them")

    s = sub.add_parser("info", help="describe a model: tree, joints, dof, loops and their mobility",
                       description="Describe a model: its tree, joints, degrees of freedom, and for a "
                       "closed chain its loops and their mobility.")
    model_arg(s)
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("simulate", help="simulate rollouts (progress bar, optional Zarr output)",
                       description="Simulate from the model's assembled (or neutral) configuration; "
                       "--batch N draws N random configurations (trees) or N random consistent "
                       "velocities (closed chains). Joint limits are not enforced: no limit force "
                       "enters the dynamics, so joints can pass their limits.")
    model_arg(s)
    s.add_argument("--t", type=_positive(float), default=1.0, help="duration in s (default 1)")
    s.add_argument("--dt", type=_positive(float), default=1e-3, help="time step in s (default 1e-3)")
    s.add_argument("--integrator", default="rk4",
                   choices=["euler", "rk4", "rkmk4", "implicit", "dop853", "rk45"])
    s.add_argument("--solver", default="kkt", help="closed chains: kkt, projection, soft, maximal, or a plugin")
    s.add_argument("--stabilization", default="projection", choices=["projection", "baumgarte", "none"])
    s.add_argument("--batch", type=_positive(int), default=1, help="number of rollouts (default 1)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--record-every", type=_positive(int), default=1)
    s.add_argument("--out", help="stream the trajectory to this Zarr store (needs the campaign extra); "
                   "a new path or an empty directory")
    s.add_argument("--overwrite", action="store_true",
                   help="replace an earlier gear store at --out (never anything else)")
    s.add_argument("--resume", action="store_true",
                   help="continue the campaign in the --out store: run only its incomplete chunks (the "
                   "same model, options and --seed; any difference is named); a new --out starts one")
    s.add_argument("--chunks", type=_positive(int), default=None,
                   help="split the batch into this many chunks (the unit of writing and of --resume; "
                   "default: 1, more when a chunk's Zarr block would exceed 32 MiB)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_simulate)

    s = sub.add_parser("compare", help="maximal vs reduced coordinates: table, PNGs and JSON",
                       description="Simulate the mechanism with every hard solver in reduced "
                       "coordinates, with soft constraints and in maximal coordinates (projected and "
                       "unstabilised), each with every --integrator; measure every run against a "
                       "reference (kkt, rkmk4 + projection at dt/64): work precision, stability limits "
                       "and, for n-four-bar:N, both spanning trees; write report.json, report.md and "
                       "PNGs to --out.")
    model_arg(s)
    s.add_argument("--t", type=_positive(float), default=1.0, help="duration in s (default 1)")
    s.add_argument("--dt", type=_positive(float), default=1e-3, help="time step in s (default 1e-3)")
    s.add_argument("--integrator", default="euler,rk4",
                   help="comma-separated integrators, each run by every formulation: euler, rk4, rkmk4 "
                   "(default euler,rk4)")
    s.add_argument("--solvers", default="kkt,projection,maximal,soft",
                   help="comma-separated reduced-coordinate runs (default kkt,projection,maximal,soft)")
    s.add_argument("--no-maximal", action="store_true", help="skip the maximal-coordinate runs")
    s.add_argument("--work-precision", default="1,2,4,8", metavar="FACTORS",
                   help="comma-separated factors of --dt at which the work-precision study repeats every "
                   "run (default 1,2,4,8; factors below 1 step finer than --dt; 'none' skips the study)")
    s.add_argument("--out", default="gear-compare",
                   help="output directory, new or empty (default ./gear-compare)")
    s.add_argument("--overwrite", action="store_true",
                   help="replace an earlier gear compare report in --out (never other files)")
    s.add_argument("--strict", action="store_true",
                   help="exit 1 if any run failed (default: only if every run failed)")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("analyze", help="mechanism analysis: mobility, sweep, singularities, loads",
                       description="Mobility and redundant rows at the assembled configuration, then "
                       "a sweep of one input joint: positions, velocity ratios, singular "
                       "configurations, input torque and peak closure loads; writes analysis.json "
                       "and sweep.png to --out.")
    model_arg(s)
    s.add_argument("--sweep", metavar="JOINT", default=None,
                   help="input joint (default: the first one-coordinate joint)")
    s.add_argument("--range", nargs=2, type=float, metavar=("FROM", "TO"),
                   help="input range (default: a full turn from the assembled value)")
    s.add_argument("--points", type=_positive(int), default=181)
    s.add_argument("--speed", type=float, default=1.0, help="input rate for the torque (default 1)")
    s.add_argument("--out", default="gear-analyze",
                   help="output directory, new or empty (default ./gear-analyze)")
    s.add_argument("--overwrite", action="store_true",
                   help="replace an earlier gear analysis in --out (never other files)")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=cmd_analyze)

    s = sub.add_parser("bench", help="per-call times on the bundled models",
                       description="Time the tree kernels (batched) on the bundled robots, each "
                       "constraint solver on the four-bar, and the solvers on the N-four-bar chain.")
    s.add_argument("--quick", action="store_true", help="smaller batches, N <= 10")
    s.add_argument("--json", metavar="PATH", help="also write the numbers as JSON (a new file)")
    s.add_argument("--overwrite", action="store_true", help="replace an earlier gear bench JSON at --json")
    s.set_defaults(func=cmd_bench)

    s = sub.add_parser("demo", help="run the README's demo on the bundled robots and the four-bar")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--batch", type=_positive(int), default=20000)
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("config", help="how gear was built and what it runs (gear.show_config)",
                       description="The version, the build of the kernels in use (generic, AVX2 or "
                       "AVX-512) and the builds this processor runs, OpenMP, threads and CHOLMOD.")
    s.set_defaults(func=cmd_config)
    return p


def cmd_config(args):
    """``gear config``: :func:`gear.show_config`."""
    import gear

    gear.show_config()
    return 0


def main(argv=None):
    """Entry point of the ``gear`` script; returns the exit code."""
    args = build_parser().parse_args(argv)
    import gear

    errors = (CLIError, gear.ModelFileError, gear.AssemblyError, OSError, ValueError, KeyError,
              TypeError, NotImplementedError, ImportError, ArithmeticError)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"gear {args.cmd}: error: {exc} (see gear {args.cmd} --help)", file=sys.stderr)
        return 2
    except errors as exc:
        if os.environ.get("GEAR_DEBUG"):
            raise
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        msg = " ".join(str(msg).split())
        print(f"gear {args.cmd}: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"gear {args.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

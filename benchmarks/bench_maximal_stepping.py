"""Simulation in maximal coordinates (gear.MaximalModel) beside reduced
coordinates and Exudyn, per step, one state, one thread.

The IFToMM N-four-bar (``gear.mechanisms.n_four_bar``) on its chain tree,
dt = 1 ms:

* ``maximal euler+bg``: Ruan's eq. 12 with velocity-level Baumgarte
  (``gear.simulate(mx, integrator="euler", stabilization="baumgarte")``,
  which runs natively where the kernel covers the model, with recording
  and the read-back of joint coordinates);
* ``maximal euler+bg (native)``: the same step in gear's native kernel
  (``gear.maximal.native.native_run``: the state from ``q``, ``dq``, then
  every step and frame in one call; "-" above the dense route's 96 rows);
* ``maximal euler+proj``: the same with Gauss-Newton projection;
* ``maximal euler+proj (native)``: both natively (``native_run`` with
  ``stabilization="projection"``);
* ``maximal rkmk4``: Runge-Kutta-Munthe-Kaas, no stabilisation (natively
  where the kernel covers the model, as Euler);
* ``reduced euler``, ``reduced rk4``: gear's native rollout loop with the
  kkt solver and projection (``gear.simulate(sys, ...)``);
* ``exudyn``: Exudyn's implicit generalized-alpha step on its
  redundant-coordinate model of the same chain (``pip install exudyn``;
  see benchmarks/bench_maximal.py), when installed.

Each column is the wall time of a short run divided by its steps (the
run's start-up included, as a user sees it).

A second table: the native Euler + Baumgarte step by each of the
kernel's routes (``gear.maximal.native.use_route``: ``"schur"`` factorises
``K = J M^-1 J^T``, ``"tree"``, the default, eliminates along a spanning
tree), on the N-four-bar built on each of its spanning trees (in maximal
coordinates one mechanism: the cranks' pivots are revolute joints on the
ground tree, ball closures on the chain tree), next to Exudyn's step.

A third table: a hanging chain of N revolute links (one URDF file, written
here) in maximal coordinates, gear's ``MaximalModel`` against PyBullet with
``useMaximalCoordinates=True`` (``pip install pybullet``), per step at
dt = 1 ms, and gear's angle error at 0.2 s against its reduced RK4 at
0.1 ms (PyBullet's constraint solver iterates; gear solves exactly).
gear's columns: ``gear.simulate`` recording every frame (each frame's
joint coordinates and joint errors are read back), recording every 10th,
and the native kernel alone; PyBullet's step records nothing.

A fourth table: example-robot-data's robots with URDF mimic joints (joint
couplers, rows on four bodies) in maximal coordinates, when the package is
installed: the native Euler + Baumgarte step by each route against the
NumPy step (``gear.maximal.stepping.step``) the kernel replaced.

    .venv/bin/python benchmarks/bench_maximal_stepping.py [--ns 1 10 100] [--no-reduced]
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

import gear
from gear.maximal.native import why_not

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def per_step(fn, steps):
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / steps


def native_run(mx, q, dq, dt, steps, stabilization):
    """The native kernel's run from a joint-space state, every frame kept."""
    from gear.maximal import native

    P, V = mx.state(q, dq)
    return native.native_run(mx, P[None], V[None], dt, steps, stabilization=stabilization)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--no-exudyn", action="store_true")
    ap.add_argument("--no-reduced", action="store_true",
                    help="leave the reduced runs out (at N = 1000 they take minutes a step)")
    ap.add_argument("--routes-only", action="store_true",
                    help="only the table of the native step by route against Exudyn")
    a = ap.parse_args(argv)
    gear.set_num_threads(1)
    dt = 1e-3
    try:
        from bench_maximal import exudyn_time
    except ImportError:
        exudyn_time = None
    if a.routes_only:
        route_table(a.ns, None if a.no_exudyn else exudyn_time)
        return
    print(f"# gear {gear.__version__} | numpy {np.__version__} | one thread | dt = {dt:g} s")
    print("\nus per step, one state (N-four-bar, chain tree)\n")
    cols = ["maximal euler+bg", "maximal euler+bg (native)", "maximal euler+proj", "maximal euler+proj (native)",
            "maximal rkmk4", "reduced euler", "reduced rk4", "exudyn", "maximal e+bg / exudyn",
            "native e+bg / exudyn"]
    print(f"{'N':>5} {'bodies':>7} {'rows':>6} " + " ".join(f"{c:>26}" for c in cols))
    rng = np.random.default_rng(0)
    for N in a.ns:
        s, q = gear.mechanisms.n_four_bar(N)
        dq = s.project_velocity(q, rng.standard_normal(s.model.nv))
        mx = gear.MaximalModel(s)
        steps = 200 if N <= 100 else 5
        T = steps * dt
        rs = 400 if N <= 10 else (100 if N <= 100 else 2)
        # every frame recorded (and its joint coordinates read back) up to
        # N = 100; above, the first and last (the read-back of 13,000 rows a
        # frame would be the whole time)
        re = 1 if N <= 100 else 200
        # gear.simulate's Euler runs natively where the kernel covers the
        # model: time 200 steps there, so that start-up counts as for reduced runs
        se = 200 if why_not(mx) is None else steps
        t = {
            "maximal euler+bg": per_step(lambda: gear.simulate(mx, q, dq, se * dt, dt, integrator="euler",
                                                               stabilization="baumgarte", record_every=re), se),
            "maximal euler+bg (native)": (per_step(lambda: native_run(mx, q, dq, dt, steps, "baumgarte"), steps)
                                          if why_not(mx) is None else None),
            "maximal euler+proj (native)": (per_step(lambda: native_run(mx, q, dq, dt, steps, "projection"), steps)
                                            if why_not(mx) is None else None),
            "maximal euler+proj": per_step(lambda: gear.simulate(mx, q, dq, se * dt, dt, integrator="euler",
                                                                 stabilization="projection", record_every=re), se),
            "maximal rkmk4": per_step(lambda: gear.simulate(mx, q, dq, se * dt, dt, integrator="rkmk4",
                                                            stabilization=None, record_every=re), se),
            # (the chain tree's reduced K is dense: about a second a step at
            # N = 1000, so two steps there)
            "reduced euler": None if a.no_reduced else per_step(
                lambda: gear.simulate(s, q, dq, rs * dt, dt, integrator="euler"), rs),
            "reduced rk4": None if a.no_reduced else per_step(
                lambda: gear.simulate(s, q, dq, rs * dt, dt, integrator="rk4"), rs),
        }
        tex = None
        if exudyn_time is not None and not a.no_exudyn:
            tex = min(exudyn_time(s, N, q)[0] for _ in range(3))      # (best of three, as gear's)
        cells = [f"{'-':>26}" if t[c] is None else f"{t[c] * 1e6:26,.1f}" for c in cols[:7]]
        cells.append(f"{'-':>26}" if tex is None else f"{tex * 1e6:26,.1f}")
        cells.append(f"{'-':>26}" if tex is None else f"{t['maximal euler+bg'] / tex:26.2f}")
        nat = t["maximal euler+bg (native)"]
        cells.append(f"{'-':>26}" if tex is None or nat is None else f"{nat / tex:26.2f}")
        print(f"{N:>5} {mx.nbodies:>7} {mx.nrows:>6} " + " ".join(cells))
    route_table(a.ns, None if a.no_exudyn else exudyn_time)
    chain_table([n for n in (10, 100) if n <= max(a.ns)] or [10])
    mimic_table()


def mimic_table(dt=1e-3, steps=1000):
    from gear.maximal import native, stepping
    from gear.testing import zoo_dir

    if zoo_dir() is None:
        return
    print("\nrobots with mimic joints (example-robot-data), maximal coordinates, native Euler + Baumgarte step "
          "by route against the NumPy step, us per step, one state\n")
    cols = ("bodies", "rows", "couplers", "tree", "schur", "numpy", "numpy/tree")
    print(f"{'robot':>28} " + " ".join(f"{c:>10}" for c in cols))
    for rel in ("panda_description/urdf/panda.urdf", "baxter_description/urdf/baxter.urdf",
                "pr2_description/urdf/pr2.urdf", "tiago_pro_description/robots/tiago_pro.urdf",
                "talos_data/robots/talos_full_v2.urdf"):
        path = os.path.join(zoo_dir(), rel)
        if not os.path.exists(path):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                m = gear.load_urdf(path)
                mx = gear.MaximalModel(m)
            except (gear.ModelFileError, gear.SingularInertiaError, ValueError):
                continue
        nc = sum(name.startswith("coupler:") for name in mx.row_names)
        P, V = mx.state(m.neutral(), np.zeros(m.nv))
        t = {}
        for route in ("tree", "schur"):
            native.use_route(mx, route)
            t[route] = per_step(lambda: native.native_run(mx, P[None], V[None], dt, steps, record_every=steps,
                                                          stabilization="baumgarte"), steps)
        native.use_route(mx, "auto")

        def numpy_steps(n=20):
            Pn, Vn = P[None], V[None]
            for _ in range(n):
                Pn, Vn, _ = stepping.step(mx, Pn, Vn, dt, "euler", stabilization="baumgarte")
        t["numpy"] = per_step(numpy_steps, 20)
        cells = [mx.nbodies, mx.nrows, nc] + [f"{t[k] * 1e6:,.1f}" for k in ("tree", "schur", "numpy")]
        cells.append(f"{t['numpy'] / t['tree']:,.0f}")
        print(f"{os.path.basename(path):>28} " + " ".join(f"{c:>10}" for c in cells))


# rounds of the route table: Exudyn's step and gear's routes alternate,
# and a ratio is the median over the rounds of the ratio within each
ROUNDS = 9


def route_table(ns, exudyn_time, dt=1e-3):
    """The native Euler + Baumgarte step by each of the kernel's routes
    (gear.maximal.native.use_route: "schur" factorises K = J M^-1 J^T,
    "tree" eliminates along a spanning tree), on the N-four-bar built on
    each of its spanning trees -- in maximal coordinates one mechanism, the
    pivots of the cranks a revolute joint (ground tree) or a ball closure
    (chain tree) -- against one Exudyn step of the mechanism."""
    print("\nThe native Euler + Baumgarte step by route, us per step, one state (recording the last frame;"
          f" best of {ROUNDS} rounds, 3 at N = 1000; tree/exudyn: the median of the rounds' ratios, quartiles"
          " in brackets)\n")
    print(f"{'N':>5} {'built on':>9} {'rows':>6} {'loop rows':>10} {'schur':>10} {'tree':>10} {'tree/schur':>11} "
          f"{'exudyn':>10} {'tree/exudyn':>21}")
    from gear.maximal import native
    from gear.maximal.tree import step_tree_plan

    for N in ns:
        # the machine's speed drifts by up to 2x within minutes: each time is
        # the best of the rounds, Exudyn's and gear's interleaved, and each
        # ratio the median of the rounds' ratios
        steps = max(5, 20000 // N)
        runs = {}
        for tree in ("chain", "ground"):
            s, q = gear.mechanisms.n_four_bar(N, tree=tree)
            mx = gear.MaximalModel(s)
            P, V = mx.state(q, s.project_velocity(q, np.random.default_rng(0).standard_normal(s.model.nv)))
            runs[tree] = (mx, P, V)
        best, ratios = {}, {tree: [] for tree in runs}
        for _ in range(ROUNDS if N <= 100 else 3):
            tex = None
            if exudyn_time is not None:
                s, q = gear.mechanisms.n_four_bar(N)
                tex, _ = exudyn_time(s, N, q)
                best["exudyn"] = min(best.get("exudyn", np.inf), tex if tex is not None else np.inf)
            for tree, (mx, P, V) in runs.items():
                for route in ("schur", "tree"):
                    native.use_route(mx, route)
                    t = per_step(lambda: native.native_run(mx, P[None], V[None], dt, steps, steps,
                                                           stabilization="baumgarte"), steps)
                    best[tree, route] = min(best.get((tree, route), np.inf), t)
                    if route == "tree" and tex is not None:
                        ratios[tree].append(t / tex)
        tex = best.get("exudyn", np.inf)
        tex = None if not np.isfinite(tex) else tex
        for tree, (mx, P, V) in runs.items():
            native.use_route(mx, "auto")
            loops = step_tree_plan(mx.rows, mx.I6)[1]["loop_rows"]
            t = {route: best[tree, route] for route in ("schur", "tree")}
            ex = "-" if tex is None else f"{tex * 1e6:10,.1f}"
            r = np.array(ratios[tree])
            rx = "-" if tex is None else (f"{np.median(r):5.3f} ({np.quantile(r, 0.25):.3f}-"
                                          f"{np.quantile(r, 0.75):.3f})")
            print(f"{N:>5} {tree:>9} {mx.nrows:>6} {loops:>10} {t['schur'] * 1e6:10,.1f} {t['tree'] * 1e6:10,.1f} "
                  f"{t['tree'] / t['schur']:11.2f} {ex:>10} {rx:>21}")


def chain_urdf(n, path):
    """A chain of ``n`` rods (0.1 m, 0.1 kg) on revolute joints about y,
    hanging from the world; its first joint's frame is turned 0.3 rad, so
    that ``q = 0`` starts it swinging (PyBullet's maximal coordinates have
    no joint state to set)."""
    links = ['<link name="world"/>']
    joints = []
    for k in range(n):
        links.append(f'''<link name="l{k}"><inertial><origin xyz="0 0 -0.05"/><mass value="0.1"/>
  <inertia ixx="1e-4" iyy="1e-4" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>''')
        parent = "world" if k == 0 else f"l{k - 1}"
        z = 0.0 if k == 0 else -0.1
        joints.append(f'''<joint name="j{k}" type="continuous"><parent link="{parent}"/><child link="l{k}"/>
  <origin xyz="0 0 {z}" rpy="0 {0.3 if k == 0 else 0.0} 0"/><axis xyz="0 1 0"/></joint>''')
    with open(path, "w") as fh:
        fh.write('<robot name="chain">' + "\n".join(links + joints) + "</robot>")


def pybullet_chain(path, dt, t_final):
    """Seconds per step in PyBullet's maximal coordinates, or None without
    pybullet.  (Its maximal-coordinate bodies expose no joint state, so
    their angles are not compared.)"""
    try:
        import pybullet as pb
    except ImportError:
        return None
    cid = pb.connect(pb.DIRECT)
    try:
        pb.setGravity(0, 0, -9.81, physicsClientId=cid)
        pb.setTimeStep(dt, physicsClientId=cid)
        pb.loadURDF(path, useFixedBase=True, useMaximalCoordinates=True, physicsClientId=cid)
        steps = int(round(t_final / dt))
        t0 = time.perf_counter()
        for _ in range(steps):
            pb.stepSimulation(physicsClientId=cid)
        return (time.perf_counter() - t0) / steps
    finally:
        pb.disconnect(cid)


def chain_table(ns, dt=1e-3, t_final=0.2):
    """The hanging chain in gear (``gear.simulate`` recording every frame,
    then every 10th; and the native kernel alone, ``native_run``) and in
    PyBullet (its step records nothing: a user queries states when needed)."""
    import tempfile

    from gear.maximal import native

    print(f"\nhanging chain of N revolute links, maximal coordinates, us per step at dt = {dt:g} s; "
          f"gear's max |angle error| at {t_final:g} s in brackets\n")
    cols = ["gear euler+bg", "gear euler+proj", "gear e+bg, every 10th", "gear e+bg kernel", "pybullet",
            "gear e+bg / pybullet", "every 10th / pybullet"]
    print(f"{'N':>5} " + " ".join(f"{c:>24}" for c in cols))
    with tempfile.TemporaryDirectory() as tmp:   # (the chains this run writes)
        for n in ns:
            path = os.path.join(tmp, f"chain{n}.urdf")
            chain_urdf(n, path)
            m = gear.load_urdf(path)
            q0 = np.zeros(m.nv)
            ref = gear.simulate(m, q0, np.zeros(m.nv), t_final, dt / 10, integrator="rk4").q[-1]
            mx = gear.MaximalModel(m)
            cells = []
            t = {}
            for key, stab, every in (("bg", "baumgarte", 1), ("proj", "projection", 1), ("bg10", "baumgarte", 10)):
                best = np.inf
                for _ in range(3):
                    t0 = time.perf_counter()
                    tr = gear.simulate(mx, q0, np.zeros(m.nv), t_final, dt, integrator="euler", stabilization=stab,
                                       record_every=every)
                    best = min(best, (time.perf_counter() - t0) / tr.stats["steps"])
                t[key] = best
                cells.append(f"{best * 1e6:12,.1f} [{np.abs(tr.q[-1] - ref).max():.0e}]")
            steps = int(round(t_final / dt))
            P, V = mx.state(q0, np.zeros(m.nv))
            t["kernel"] = per_step(lambda: native.native_run(mx, P[None], V[None], dt, steps, record_every=steps,
                                                             stabilization="baumgarte"), steps)
            cells.append(f"{t['kernel'] * 1e6:12,.1f}")
            tp = pybullet_chain(path, dt, t_final)
            cells.append("-" if tp is None else f"{tp * 1e6:12,.1f}")
            cells.append("-" if tp is None else f"{t['bg'] / tp:12.2f}")
            cells.append("-" if tp is None else f"{t['bg10'] / tp:12.2f}")
            print(f"{n:>5} " + " ".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()

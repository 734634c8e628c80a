"""Constrained forward dynamics beside Pinocchio's constraintDynamics.

Run:  python benchmarks/bench_constraints.py [--quick]

Mechanisms: the bundled four-bar (fourbar.xml), the IFToMM N-four-bar chain
(N = 1, 10, 30; gear.mechanisms.n_four_bar) and talos_reduced from
example-robot-data with both soles welded to the ground.  For each: nv, nc,
µs per call of gear's ConstrainedModel.forward_dynamics (one state, and per
state in a batch of 2,000 by default, ``--batch``), Pinocchio's constraintDynamics from Python on the
same model (gear.interop; ball closures -> 3-D, welds -> 6-D constraints,
proximal mu = 1e-9 because the planar mechanisms have redundant rows), and
the largest difference in ddq.  Ratios are gear / Pinocchio (one call
from Python, and per state of a batch run on all threads).  A second table
times the two routes of the native kkt kernel per state on one thread:
Kim's articulated-body passes (eqs. 67-69, O(n m + m^3)) and building M
(CRBA + Featherstone's tree-sparse L^T L, O(sum of squared dof depths +
m x support x depth)), with the one ``route="auto"`` picks, on the
mechanisms and on serial chains held at the tip by a ball (m << n, where
the articulated-body route wins).
A third times each built-in solver on the same states, and a fourth
their closed hybrid dynamics with the first one-dof joint prescribed (at
the forward answer, an acceleration the loops allow; Pinocchio has no
closed-loop hybrid dynamics to set beside it): µs per call and the
largest difference in tau from kkt.  (Prescribing talos' floating base
instead would leave the free joints' rows of rank 10 for 12 rows: tau on
the base is then not unique, and each solver gives its own exact answer.)
A fifth times closed inverse dynamics (default objective, the solver-
independent native kernel) with the mechanisms' actuators: one call, and
per state in a batch on all threads (Pinocchio has none to compare).
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
from common import best_time, pinocchio_constraint_dynamics  # noqa: E402


def talos_feet_welded():
    from gear.testing import zoo_dir

    d = zoo_dir()
    if d is None:
        return None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gear.InertiaWarning)
        m = gear.load_urdf(os.path.join(d, "talos_data/robots/talos_reduced.urdf"), floating_base=True)
    q = m.neutral()
    q[2] = 1.0
    poses = gear.forward_kinematics(m, q)
    closures = []
    for side in ("left", "right"):
        b, T = m.frames[f"{side}_sole_link"]
        W = poses[b] @ T.homogeneous()
        closures.append(gear.LoopClosure(b, T, "world", gear.SE3(W[:3, :3], W[:3, 3]), "weld",
                                         name=f"{side}_sole"))
    return gear.ConstrainedModel(m, closures), q


def cases():
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    yield "fourbar.xml", gear.ConstrainedModel(fb), fb.neutral()
    s, q = gear.mechanisms.stewart()
    yield "stewart", s, q
    for n in (1, 10, 30):
        s, q = gear.mechanisms.n_four_bar(n)
        yield f"n_four_bar {n}", s, q
    t = talos_feet_welded()
    if t is not None:
        yield "talos 2 feet", t[0], t[1]


def chain_cases():
    """Serial chains of n revolute joints whose tip is held by a ball at
    the world (m = 3 << n): where the articulated-body route wins."""
    from gear.testing import random_chain

    for n in (10, 20, 40, 60):
        m = random_chain(n, "revolute", rng=0)
        q = m.neutral()
        W = np.asarray(gear.forward_kinematics(m, q)[-1])          # 4 x 4 pose of the tip
        c = gear.LoopClosure(n - 1, gear.SE3(np.eye(3), np.zeros(3)), "world",
                             gear.SE3(W[:3, :3], W[:3, 3]), "ball", name="tip")
        yield f"chain {n} ball", gear.ConstrainedModel(m, [c]), q


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batch", type=int, default=2000,
                    help="states per batched call (default 2000, as in bench_dynamics; --quick: 20)")
    args = ap.parse_args(argv)
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    print(f"# gear {gear.__version__} | numpy {np.__version__} | {os.cpu_count()} cores"
          + (f" | pinocchio {pin.__version__}" if pin else " | pinocchio not installed"))
    print(f"\n{'mechanism':<14} {'nv':>4} {'nc':>4} {'gear 1 call':>12} {'gear batch':>11} "
          f"{'pin':>9} {'1 call/pin':>11} {'batch/pin':>10} {'|ddq diff|':>11}")
    rng = np.random.default_rng(0)
    N = 20 if args.quick else args.batch
    rows = []
    for label, s, q in cases():
        model = s.model
        dq = s.project_velocity(q, rng.standard_normal(model.nv))
        tau = rng.standard_normal(model.nv)
        t1 = best_time(lambda: s.forward_dynamics(q, dq, tau), repeat=3, target=0.1)
        Q, DQ, TAU = np.tile(q, (N, 1)), np.tile(dq, (N, 1)), np.tile(tau, (N, 1))
        tb = best_time(lambda: s.forward_dynamics(Q, DQ, TAU), number=1, repeat=7) / N
        ddq = s.forward_dynamics(q, dq, tau).ddq
        tp, diff = None, None
        call, a = pinocchio_constraint_dynamics(s, q, dq, tau)
        if call is not None:
            diff = float(np.abs(a - ddq).max())
            tp = best_time(call, repeat=3, target=0.1)
        print(f"{label:<14} {model.nv:>4} {s.nc:>4} {t1 * 1e6:12.1f} {tb * 1e6:11.1f} "
              f"{'-' if tp is None else f'{tp * 1e6:9.1f}'} "
              f"{'-' if tp is None else f'{t1 / tp:11.2f}'} "
              f"{'-' if tp is None else f'{tb / tp:10.2f}'} "
              f"{'-' if diff is None else f'{diff:11.1e}'}")
        rows.append((label, s, q, dq, tau, ddq))
    print(f"\n## kkt routes (us per state, batch of {N} on one thread; max |ddq aba - dense|)\n")
    print(f"{'mechanism':<14} {'nbodies':>7} {'nv':>4} {'nc':>4} {'aba':>9} {'dense':>9} {'diff':>8} {'auto':>6}")
    old = gear.get_num_threads()
    gear.set_num_threads(1)
    chains = []
    for label, s, q in chain_cases():
        dq = s.project_velocity(q, rng.standard_normal(s.model.nv))
        chains.append((label, s, q, dq, rng.standard_normal(s.model.nv), None))
    try:
        for label, s, q, dq, tau, _ in rows + chains:
            Q, DQ, TAU = np.tile(q, (N, 1)), np.tile(dq, (N, 1)), np.tile(tau, (N, 1))
            t, out = {}, {}
            for route in ("aba", "dense"):
                sr = s.with_solver("kkt", route=route)
                t[route] = best_time(lambda: sr.forward_dynamics(Q, DQ, TAU), number=1, repeat=5) / N
                out[route] = sr.forward_dynamics(q, dq, tau).ddq
            auto = "dense" if s.with_solver("kkt").solver._route == 1 else "aba"
            print(f"{label:<14} {s.model.nbodies:>7} {s.model.nv:>4} {s.nc:>4} {t['aba'] * 1e6:9.1f} "
                  f"{t['dense'] * 1e6:9.1f} {np.abs(out['aba'] - out['dense']).max():8.1e} {auto:>6}")
    finally:
        gear.set_num_threads(old)
    print(f"\n## Solvers (us per call, one state; max |ddq - kkt|)\n")
    from gear.solvers import available

    names = [n for n in ("kkt", "projection", "soft") if n in available()]
    try:
        if not gear._core.cholmod_available():
            import sksparse  # noqa: F401
        names.append("maximal")          # maximal coordinates, CHOLMOD (native kernel or scikit-sparse)
    except ImportError:
        print("(gear was built without CHOLMOD and scikit-sparse is not installed: the maximal "
              "solver is left out)")
    print(f"{'mechanism':<14} " + " ".join(f"{n:>12} {'diff':>8}" for n in names))
    for label, s, q, dq, tau, ddq in rows:
        cells = []
        for n in names:
            sn = s.with_solver(n)
            t = best_time(lambda: sn.forward_dynamics(q, dq, tau), repeat=3, target=0.05)
            d = float(np.abs(sn.forward_dynamics(q, dq, tau).ddq - ddq).max())
            cells.append(f"{t * 1e6:12.1f} {d:8.1e}")
        print(f"{label:<14} " + " ".join(cells))
    print(f"\n## Hybrid dynamics, first one-dof joint prescribed (us per call, one state; max |tau - kkt|)\n")
    print(f"{'mechanism':<14} " + " ".join(f"{n:>12} {'diff':>8}" for n in names))
    for label, s, q, dq, tau, ddq in rows:
        model = s.model
        pres = [next(n for i, n in enumerate(model.joint_names) if model.joints[i].nv == 1)]
        ref = s.with_solver("kkt").hybrid_dynamics(q, dq, ddq, tau, pres)
        cells = []
        for n in names:
            sn = s.with_solver(n)
            t = best_time(lambda: sn.hybrid_dynamics(q, dq, ddq, tau, pres), repeat=3, target=0.05)
            d = float(np.abs(sn.hybrid_dynamics(q, dq, ddq, tau, pres).tau - ref.tau).max())
            cells.append(f"{t * 1e6:12.1f} {d:8.1e}")
        print(f"{label:<14} " + " ".join(cells))
    print(f"\n## Closed inverse dynamics (us; batch: per state of {N} on all threads; "
          f"|M ddq + b - tau - A^T lam|)\n")
    print(f"{'mechanism':<14} {'actuated':>9} {'1 call':>8} {'batch':>8} {'eom':>8}")
    for label, s, q, dq, tau, ddq in rows:
        model = s.model
        moving = [n for i, n in enumerate(model.joint_names) if model.joints[i].nv]
        if label == "stewart":
            act = [n for n in moving if n.endswith("_slide")]
        elif label.startswith("talos"):
            act = [n for i, n in enumerate(model.joint_names) if model.joints[i].nv == 1]
        else:
            act = moving[:1]
        t1 = best_time(lambda: s.inverse_dynamics(q, dq, ddq, act), repeat=3, target=0.05)
        Q, DQ, DDQ = np.tile(q, (N, 1)), np.tile(dq, (N, 1)), np.tile(ddq, (N, 1))
        tb = best_time(lambda: s.inverse_dynamics(Q, DQ, DDQ, act), number=1, repeat=5) / N
        r = s.inverse_dynamics(q, dq, ddq, act)
        M, b = gear.mass_matrix(model, q), gear.bias_forces(model, q, dq)
        eom = float(np.abs(M @ ddq + b - r.tau - s.constraint_jacobian(q).T @ r.lam).max())
        print(f"{label:<14} {len(act):>9} {t1 * 1e6:8.1f} {tb * 1e6:8.2f} {eom:8.1e}")


if __name__ == "__main__":
    main()

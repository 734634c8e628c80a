"""Small batches: what a batched call costs per state, from 1 to 4096 states.

Run:  python benchmarks/bench_small_batches.py [--threads 1]

Model-predictive control, sampling planners and small campaigns live on
batches of 8 to 256 states, where a batched call's fixed cost (validation,
allocation, result objects, starting a thread team) used to dominate. For
each batch size N this prints µs per state of

- **four-bar**: ``sys.forward_dynamics`` on the closed four-bar (kkt);
- **arm7 ABA** / **arm7 RNEA**: ``gear.forward_dynamics`` /
  ``gear.inverse_dynamics`` on the bundled 7-DoF arm;

with float64 C-contiguous (N, n) inputs (what the allocation-light path
takes; other inputs are converted by the general path), and beside them
the one-state call (``N = 1`` with 1-D arrays) and Pinocchio's one-state
``constraintDynamics`` / ``aba`` / ``rnea`` from Python when it is
installed (Pinocchio has no batched Python call). The ratios it reports,
with the project's goals:

- a batch of 8 against 8 one-state calls (goal <= 1.5);
- the per-state time of a batch of 64 against a batch of 4096 (goal <= 1.15);
- the four-bar's batch of 64, per state, against Pinocchio's one-state
  ``constraintDynamics`` (goal <= 0.25).

Batches of 32 states and more are shared by every thread
(``gear.set_num_threads``; the fork-join team of ``gear/_team.h``); below,
they run in the calling thread.  The last row passes a preallocated
``out=``.  A second table gives the arm's other batched calls (mass
matrix, forward kinematics, bias forces, both derivatives) per state, a
third the four-bar's other closed-chain calls (inverse and hybrid
dynamics with the crank actuated or prescribed, both derivatives), each
with its batch of 8 against 8 one-state calls.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gear  # noqa: E402
from common import best_time, pinocchio_constraint_dynamics  # noqa: E402

SIZES = (1, 8, 64, 512, 4096)


def per_states(fns, rounds=5):
    """µs per state of each ``{N: fn}`` (key 0: one state), best of ``rounds`` interleaved
    rounds (this machine's speed drifts within a minute: the ratios
    compare sizes timed in the same seconds)."""
    best = {N: np.inf for N in fns}
    for _ in range(rounds):
        for N, fn in fns.items():
            best[N] = min(best[N], best_time(fn, repeat=1, target=0.05) / max(N, 1) * 1e6)
    return best


def pinocchio_calls(urdf):
    """µs per one-state aba and rnea call from Python, or (None, None)."""
    try:
        import pinocchio as pin
    except ImportError:
        return None, None
    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    q = pin.neutral(model)
    v = np.zeros(model.nv)
    t = np.ones(model.nv)
    return (best_time(lambda: pin.aba(model, data, q, v, t)) * 1e6,
            best_time(lambda: pin.rnea(model, data, q, v, t)) * 1e6)


def rows():
    rng = np.random.default_rng(0)
    sysm, q4 = gear.mechanisms.four_bar()
    urdf = gear.data_path("arm7.urdf")
    arm = gear.load_urdf(urdf)

    def four_bar(N):
        Q = np.tile(q4, (N, 1))
        dQ = np.zeros((N, 3))
        T = rng.standard_normal((N, 3))
        return lambda: sysm.forward_dynamics(Q, dQ, T)

    def tree(fn, out=False):
        def make(N):
            Q = arm.random_configuration(rng, n=N)
            dQ = rng.standard_normal((N, arm.nv))
            X = rng.standard_normal((N, arm.nv))
            if out:
                res = np.empty((N, arm.nv))
                return lambda: fn(arm, Q, dQ, X, out=res)
            return lambda: fn(arm, Q, dQ, X)
        return make

    t3 = rng.standard_normal(3)
    q7, v7, x7 = arm.neutral(), np.zeros(arm.nv), np.ones(arm.nv)
    pin_aba, pin_rnea = pinocchio_calls(urdf)
    pin_cd, _ = pinocchio_constraint_dynamics(sysm, q4, np.zeros(3), t3)
    pin_cd = best_time(pin_cd) * 1e6 if pin_cd is not None else None
    yield ("four-bar forward", four_bar, lambda: sysm.forward_dynamics(q4, np.zeros(3), t3), pin_cd)
    yield ("arm7 ABA", tree(gear.forward_dynamics), lambda: gear.forward_dynamics(arm, q7, v7, x7), pin_aba)
    yield ("arm7 RNEA", tree(gear.inverse_dynamics), lambda: gear.inverse_dynamics(arm, q7, v7, x7), pin_rnea)
    o7 = np.empty(arm.nv)
    yield ("arm7 RNEA, out=", tree(gear.inverse_dynamics, out=True),
           lambda: gear.inverse_dynamics(arm, q7, v7, x7, out=o7), pin_rnea)


def other_rows():
    """(name, make(N)) of the arm's other batched calls (N = 0: one state)."""
    rng = np.random.default_rng(1)
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))

    def make(fn, nargs):
        def mk(N):
            Q = arm.random_configuration(rng, n=max(N, 1))
            X = [rng.standard_normal((max(N, 1), arm.nv)) for _ in range(nargs)]
            if N == 0:
                Q, X = Q[0], [x[0] for x in X]
            return lambda: fn(arm, Q, *X)
        return mk
    yield "mass_matrix", make(gear.mass_matrix, 0)
    yield "forward_kinematics (poses, twists)", make(gear.forward_kinematics, 1)
    yield "bias_forces", make(gear.bias_forces, 1)
    yield "inverse_dynamics_derivatives", make(gear.inverse_dynamics_derivatives, 2)
    yield "forward_dynamics_derivatives", make(gear.forward_dynamics_derivatives, 2)


def closed_rows():
    """(name, make(N)) of the four-bar's other closed-chain calls (N = 0: one state)."""
    rng = np.random.default_rng(2)
    sysm, q = gear.mechanisms.four_bar()

    def make(fn):
        def mk(N):
            n = max(N, 1)
            Q = np.tile(q, (n, 1))
            dQ = np.array([sysm.project_velocity(q, rng.standard_normal(3)) for _ in range(n)])
            T = rng.standard_normal((n, 3))
            ddQ = sysm.forward_dynamics(Q, dQ, T).ddq
            if N == 0:
                Q, dQ, T, ddQ = Q[0], dQ[0], T[0], ddQ[0]
            return lambda: fn(Q, dQ, T, ddQ)
        return mk
    yield "inverse_dynamics (crank actuated)", make(lambda q, dq, t, a: sysm.inverse_dynamics(q, dq, a, ["crank"]))
    yield "hybrid_dynamics (crank prescribed)", make(
        lambda q, dq, t, a: sysm.hybrid_dynamics(q, dq, a, t, ["crank"]))
    yield "forward_dynamics_derivatives", make(lambda q, dq, t, a: sysm.forward_dynamics_derivatives(q, dq, t))
    yield "inverse_dynamics_derivatives", make(
        lambda q, dq, t, a: sysm.inverse_dynamics_derivatives(q, dq, a, ["crank"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="gear.set_num_threads (default: all cores)")
    a = ap.parse_args(argv)
    if a.threads:
        gear.set_num_threads(a.threads)
    print(f"# gear {gear.__version__} | numpy {np.__version__} | threads {gear.get_num_threads()}")
    print("\nµs per state of a batched call (float64 (N, n) inputs)\n")
    head = " ".join(f"{'N=' + str(n):>9}" for n in SIZES)
    print(f"{'call':<18} {'1 state':>9} {head} {'pin 1':>8} {'8 / 8x1':>9} {'64 / 4096':>10} {'64 / pin':>9}")
    for name, make, single, pin in rows():
        t = per_states({0: single, **{N: make(N) for N in SIZES}})
        one = t[0]
        cells = " ".join(f"{t[N]:9.2f}" for N in SIZES)
        pin_s = f"{pin:8.2f}" if pin is not None else f"{'-':>8}"
        vs_pin = f"{t[64] / pin:9.2f}" if pin is not None else f"{'-':>9}"
        print(f"{name:<18} {one:9.2f} {cells} {pin_s} {t[8] / one:9.2f} {t[64] / t[4096]:10.2f} {vs_pin}")
    print("\nthe other tree calls: µs per state, one state (1-D arrays) and batches\n")
    for title, rows_ in (("", other_rows()),
                         ("\nthe four-bar's other closed-chain calls: µs per state, one state and batches\n\n",
                          closed_rows())):
        print(title, end="")
        print(f"{'call':<36} {'1 state':>9} {'N=8':>9} {'N=64':>9} {'N=4096':>9} {'8 / 8x1':>9}")
        for name, make in rows_:
            t = per_states({0: make(0), 8: make(8), 64: make(64), 4096: make(4096)})
            print(f"{name:<36} {t[0]:9.2f} {t[8]:9.2f} {t[64]:9.2f} {t[4096]:9.2f} {t[8] / t[0]:9.2f}")
    print("\ngoals: a batch of 8 within 1.5x of 8 one-state calls (8 / 8x1 <= 1.5); "
          "a batch of 64 within 1.15x of 4096 per state (64 / 4096 <= 1.15); "
          "the four-bar's batch of 64 per state <= 0.25x Pinocchio's constraintDynamics (64 / pin)")


if __name__ == "__main__":
    main()

"""Derivatives of closed-chain forward dynamics against Pinocchio.

Run:  python benchmarks/bench_closed_derivatives.py [--threads 2] [--batch 256]

For each mechanism this prints µs per state of

- **gear 1 call**: ``sys.forward_dynamics_derivatives(q, dq, tau)`` on one
  state (``ddq`` and ``lam`` with their derivatives in q, dq and tau);
- **gear batch**: the same on a batch of states (per state, every thread
  of ``gear.set_num_threads``);
- **Pinocchio**: ``constraintDynamics`` followed by
  ``computeConstraintDynamicsDerivatives`` from Python on one state (what a
  Pinocchio user calls for the same answer; Pinocchio has no batched
  call), on the same model through ``gear.interop`` (ball closures as 3-D
  contacts, proximal settings mu = 1e-10);

with the ratios gear / Pinocchio (goals: <= 1.0 per call, <= 0.4 batched
per state), the largest relative difference between the two analytic
``dddq/dq``, ``dddq/d(dq)``, ``dddq/dtau`` and, as an oracle for both,
between gear's ``dddq/dq`` and central differences of Pinocchio's own
``constraintDynamics`` (step 1e-6).  (On the Stewart platform Pinocchio's
analytic ``dddq/dq`` differs from its own differences by about 3e-2 in the
columns of the legs' universal joints, which it models as composite
joints, when the velocity is not zero; gear agrees with those differences.)  Mechanisms: the four-bar closed
by a ball (a planar mechanism: one of its three rows is zero), the
Stewart platform (six ball-closed legs on a free platform) and the IFToMM
N-four-bar with N = 10 on its chain tree.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gear  # noqa: E402
from common import best_time, fmt_ratio  # noqa: E402

MECHANISMS = {
    "four-bar (ball)": lambda: gear.mechanisms.four_bar(closure="ball"),
    "Stewart platform": gear.mechanisms.stewart,
    "N-four-bar, N=10": lambda: gear.mechanisms.n_four_bar(10),
}


def pinocchio_derivatives(sysm, q, dq, tau):
    """A no-argument callable running Pinocchio's constraintDynamics and its
    derivatives, and its three ddq Jacobians in gear's coordinates; (None,
    None) without Pinocchio."""
    try:
        import pinocchio as pin
        from gear.interop import pinocchio_constraint_problem
    except ImportError:
        return None, None
    pm, pd, cms, cds, mp = pinocchio_constraint_problem(sysm.model, sysm.constraints)
    prox = pin.ProximalSettings(1e-12, 1e-10, 200)
    qp, vp, tp = mp.q(q), mp.v(dq), mp.v(tau)

    def call():
        pin.constraintDynamics(pm, pd, qp, vp, tp, cms, cds, prox)
        pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds, prox)

    call()
    analytic = [mp.mat_back(m) for m in (pd.ddq_dq, pd.ddq_dv, pd.ddq_dtau)]
    # Pinocchio's own answers, differenced in its tangent space (an oracle for both)
    h, fd = 1e-6, np.zeros((pm.nv, pm.nv))
    for k in range(pm.nv):
        e = np.zeros(pm.nv)
        e[k] = h
        ap = pin.constraintDynamics(pm, pd, pin.integrate(pm, qp, e), vp, tp, cms, cds, prox).copy()
        am = pin.constraintDynamics(pm, pd, pin.integrate(pm, qp, -e), vp, tp, cms, cds, prox).copy()
        fd[:, k] = (ap - am) / (2 * h)
    return call, analytic + [mp.mat_back(fd)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="threads for the batch (default: all)")
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    if args.threads:
        gear.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"closed-chain forward dynamics + derivatives, µs per state; batch of {args.batch} on "
          f"{gear.get_num_threads()} thread(s); kernels: {gear.show_config(file=False)['simd']} build")
    head = (f"{'mechanism':18s} {'nv':>3s} {'nc':>3s} {'gear 1 call':>11s} {'gear batch':>10s} "
            f"{'Pinocchio':>9s} {'1 call/pin':>10s} {'batch/pin':>9s} {'vs pin':>8s} {'vs pin FD':>9s}")
    print(head)
    print("-" * len(head))
    for name, make in MECHANISMS.items():
        sysm, q0 = make()
        nv = sysm.model.nv
        dq = sysm.project_velocity(q0, rng.standard_normal(nv))
        tau = rng.standard_normal(nv)
        one = best_time(lambda: sysm.forward_dynamics_derivatives(q0, dq, tau)) * 1e6
        N = args.batch
        qs = np.stack([sysm.model.integrate(q0, 0.01 * rng.standard_normal(nv)) for _ in range(N)])
        dqs = np.repeat(dq[None], N, axis=0)
        taus = np.repeat(tau[None], N, axis=0)
        batch = best_time(lambda: sysm.forward_dynamics_derivatives(qs, dqs, taus), repeat=3) / N * 1e6
        call, ref = pinocchio_derivatives(sysm, q0, dq, tau)
        tp = best_time(call) * 1e6 if call is not None else None
        diff = fdiff = "-"
        if ref is not None:
            d = sysm.forward_dynamics_derivatives(q0, dq, tau)
            diff = max(np.abs(a - b).max() / max(1.0, np.abs(b).max())
                       for a, b in zip((d.ddq_dq, d.ddq_ddq, d.ddq_dtau), ref[:3]))
            diff = f"{diff:8.1e}"
            fdiff = f"{np.abs(d.ddq_dq - ref[3]).max() / max(1.0, np.abs(ref[3]).max()):9.1e}"
        print(f"{name:18s} {nv:3d} {sysm.nc:3d} {one:11.2f} {batch:10.2f} "
              f"{'-' if tp is None else f'{tp:9.2f}':>9s} {fmt_ratio(one, tp):>10s} {fmt_ratio(batch, tp):>9s} "
              f"{diff:>8s} {fdiff:>9s}")


if __name__ == "__main__":
    main()

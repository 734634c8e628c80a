"""Demo on the bundled robots: ``python -m gear.demo`` (or ``gear demo``).

Loads the 7-DoF arm and the floating-base quadruped, draws a random state
and prints tau (RNEA), ddq (ABA), M (CRBA), a hybrid-dynamics split, the
cross-algorithm identities that tie them together, and batched throughput.
Then closes a loop: the bundled four-bar (``fourbar.xml``), its mobility,
constrained forward and inverse dynamics, and a sweep of the crank.
"""
from __future__ import annotations

import argparse

import numpy as np

import gear
from gear.comparison import _time_call


def _show(name, x, width=10):
    x = np.atleast_1d(x)
    print(f"  {name:<8}= " + np.array2string(x, precision=4, suppress_small=True, max_line_width=120,
                                             floatmode="fixed"))


def demo_robot(model, title, rng, batch=20000):
    print(f"\n=== {title}: {model.nbodies} bodies, nq = {model.nq}, nv = {model.nv}, "
          f"mass = {model.total_mass():.3f} kg ===")
    print("  joints:", ", ".join(f"{n}({type(j).__name__})" for n, j in zip(model.joint_names, model.joints)))
    q = model.random_configuration(rng)
    dq = rng.standard_normal(model.nv)
    ddq = rng.standard_normal(model.nv)
    _show("q", q)
    _show("dq", dq)
    tau = gear.inverse_dynamics(model, q, dq, ddq)
    _show("tau", tau)
    acc = gear.forward_dynamics(model, q, dq, tau)
    _show("ddq", acc)
    M = gear.mass_matrix(model, q)
    b = gear.bias_forces(model, q, dq)
    with np.printoptions(precision=3, suppress=True, linewidth=150):
        print("  M =")
        print("   " + str(M).replace("\n", "\n   "))
    prescribed = np.arange(model.nbodies) % 2 == 0
    t_h, d_h = gear.hybrid_dynamics(model, q, dq, ddq, tau, prescribed)
    print("  identities (max abs error):")
    print(f"    RNEA(ABA(tau)) - tau         {np.abs(gear.inverse_dynamics(model, q, dq, acc) - tau).max():.2e}")
    print(f"    ABA(tau) - ddq               {np.abs(acc - ddq).max():.2e}")
    print(f"    M ddq + b - tau              {np.abs(M @ ddq + b - tau).max():.2e}")
    print(f"    M - M^T, min eig(M)          {np.abs(M - M.T).max():.2e}, {np.linalg.eigvalsh(M).min():.3e}")
    print(f"    hybrid (half prescribed)     {np.abs(t_h - tau).max():.2e}, {np.abs(d_h - ddq).max():.2e}")
    print(f"    1/2 dq'M dq - kinetic energy {abs(0.5 * dq @ M @ dq - gear.kinetic_energy(model, q, dq)):.2e}")

    Q = model.random_configuration(rng, n=batch)
    DQ = rng.standard_normal((batch, model.nv))
    DDQ = rng.standard_normal((batch, model.nv))
    TAU = gear.inverse_dynamics(model, Q, DQ, DDQ)
    # the best of repeated calls: on a virtual machine one call in a few took
    # ten times as long (the quadruped's 52 MB of mass matrices)
    print(f"  batched over {batch} states on {gear.get_num_threads()} threads (per state, best of repeated calls):")
    for name, fn in [("RNEA", lambda: gear.inverse_dynamics(model, Q, DQ, DDQ)),
                     ("ABA", lambda: gear.forward_dynamics(model, Q, DQ, TAU)),
                     ("CRBA", lambda: gear.mass_matrix(model, Q))]:
        print(f"    {name:<5} {_time_call(fn, 0.05) / batch * 1e6:8.3f} us")


def demo_fourbar():
    fb = gear.load_mjcf(gear.data_path("fourbar.xml"))
    sys = gear.ConstrainedModel(fb)
    q = fb.neutral()
    mob = sys.mobility(q)
    print(f"\n=== fourbar.xml (closed loop): nv = {fb.nv}, {sys.nc} constraint rows "
          f"({sys.constraints[0].kind} closure) ===")
    print(f"  mobility: dof {mob.dof}, rank {mob.rank}, redundant rows {mob.redundant}, "
          f"Grübler count {mob.grubler}")
    dq = sys.project_velocity(q, [2.0, 0.0, 0.0], locked=["crank_joint"])
    _show("dq", dq)
    tau = np.array([0.05, 0.0, 0.0])
    res = sys.forward_dynamics(q, dq, tau)
    _show("ddq", res.ddq)
    inv = sys.inverse_dynamics(q, dq, res.ddq, actuated=["crank_joint"])
    A = sys.constraint_jacobian(q)
    print("  identities (max abs error):")
    print(f"    A ddq + dA dq                {res.residual:.2e}")
    print(f"    {'ID(FD(tau)) - tau':<29}{np.abs(inv.tau - tau).max():.2e}")
    M, b = gear.mass_matrix(fb, q), gear.bias_forces(fb, q, dq)
    print(f"    M ddq + b - tau - A^T lam    {np.abs(M @ res.ddq + b - tau - A.T @ res.lam).max():.2e}")
    W = sys.constraint_wrenches(q, res.lam)[0]
    print(f"  pivot load on the rocker: |f| = {np.linalg.norm(W[3:]):.3f} N")
    print("  every solver on the same state (gear.solvers):")
    print(f"    {'solver':<11} {'max |ddq - kkt|':>16} {'|A ddq + dA dq|':>16} {'us per call':>12}")
    for name in [n for n in ("kkt", "projection", "soft", "maximal") if n in gear.solvers.available()]:
        try:
            s2 = sys.with_solver(name)
        except ImportError as exc:           # "maximal" without scikit-sparse
            print(f"    {name:<11} unavailable: {exc}")
            continue
        r2 = s2.forward_dynamics(q, dq, tau)
        dt = _time_call(lambda s2=s2: s2.forward_dynamics(q, dq, tau), 0.02)
        print(f"    {name:<11} {np.abs(r2.ddq - res.ddq).max():16.2e} {r2.residual:16.2e} {dt * 1e6:12.1f}")
    r = gear.analysis.sweep(sys, "crank_joint", np.linspace(q[0], q[0] + 2 * np.pi, 37), q)
    print(f"  crank sweep (37 poses): all assembled {bool(r.assembled.all())}, "
          f"input torque in [{np.nanmin(r.torque):.3f}, {np.nanmax(r.torque):.3f}] N m at 1 rad/s, "
          f"peak pivot load {r.peak_wrenches[0, 1]:.3f} N")
    # a batch of rollouts of the closed chain (gear.simulate), exact to 1e-12
    rng = np.random.default_rng(1)
    qs = np.stack([sys.assemble(fb.integrate(q, 0.1 * rng.standard_normal(fb.nv))) for _ in range(64)])
    dqs = np.stack([sys.project_velocity(x, rng.standard_normal(fb.nv)) for x in qs])
    traj = gear.simulate(sys, qs, dqs, 2.0, 1e-3, integrator="rk4", record_every=100)
    worst = max(np.abs(sys.constraint_residual(x)).max() for x in traj.q[:, -1])
    print(f"  64 rollouts x 2 s (RK4, dt 1 ms, projection): {traj.stats['state_steps_per_s']:,.0f} "
          f"state-steps/s, worst loop residual {worst:.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=20000)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    demo_robot(arm, "arm7.urdf (fixed base)", rng, args.batch)
    quad = gear.load_urdf(gear.data_path("quadruped.urdf"), floating_base=True)
    demo_robot(quad, "quadruped.urdf (floating base)", rng, args.batch)
    demo_fourbar()


if __name__ == "__main__":
    main()

"""
Balancing a four-bar linkage with LQR on the constraint manifold
================================================================

The crank-rocker of ``gear.mechanisms.four_bar`` is held at its default
pose (crank at 60°) by a constant crank torque ``tau*`` that exactly
cancels gravity there.  That pose is an equilibrium, but an unstable one:
nudge the crank back by 0.2 rad and, with the constant torque alone, the
linkage falls, swings through its hanging pose and back up, and keeps
swinging in a large cycle that never settles (nothing dissipates energy).

The mechanism has three joint angles but one degree of freedom: the
angles are not independent states.  ``sys.linearize(q, dq, tau,
minimal=True)`` returns the dynamics
on the constraint manifold: an orthonormal basis ``G`` of the null space
of the constraint Jacobian, and ``(A_r, B_r)`` in the coordinates
``delta_q = G z``, ``delta_dq = G v`` (at rest).  A continuous-time LQR gain for the
crank torque alone, designed on ``(z, v)``, gives the feedback

``tau = tau* - K [G^T (q ⊖ q*); G^T dq]``

on the crank.  Both runs start from the same perturbed, assembled pose
(crank angle 0.2 rad smaller than at ``q*``, at rest) and are integrated by
``gear.simulate`` (RK4, with projection back onto the loop constraint
after every step).
"""
import matplotlib.pyplot as plt
import numpy as np
import scipy.linalg

import gear

# %%
# The operating point and the torque that holds it
# ------------------------------------------------
# ``inverse_dynamics`` with ``dq = ddq = 0`` and only the crank actuated
# gives the static torque; the loop-closure forces carry the rest.
sys, q_star = gear.mechanisms.four_bar()
model = sys.model
nv = model.nv
crank = model.idx_v("crank")                  # slice of the crank's velocity coordinate
zero = np.zeros(nv)
tau_star = sys.inverse_dynamics(q_star, zero, zero, actuated=["crank"]).tau
print(f"q* = {np.round(q_star, 4)} rad, tau* = {np.round(tau_star, 4)} N m, "
      f"dof = {sys.mobility(q_star).dof}")

# %%
# Linearisation on the constraint manifold
# ----------------------------------------
# ``A_r`` is (2 dof, 2 dof) = (2, 2); ``B_r`` has one column per joint
# torque, and only the crank's column is an actuator.
Ar, Br, G = sys.linearize(q_star, zero, tau_star, minimal=True)
B = Br[:, crank]                              # (2, 1): the crank torque only
print("open-loop eigenvalues  :", np.round(np.linalg.eigvals(Ar), 3))

Q = np.diag([10.0, 0.1])                      # weights on (z, v)
R = np.array([[1.0]])                         # weight on the crank torque
P = scipy.linalg.solve_continuous_are(Ar, B, Q, R)
K = np.linalg.solve(R, B.T @ P)               # (1, 2)
eig_cl = np.linalg.eigvals(Ar - B @ K)
print("LQR gain K             :", np.round(K, 3))
print("closed-loop eigenvalues:", np.round(eig_cl, 3))
assert (eig_cl.real < 0).all()


# %%
# The controller is a ``tau(t, q, dq)`` callable for ``gear.simulate``;
# it accepts one state or a batch.
def lqr(t, q, dq):
    q, dq = np.asarray(q, dtype=float), np.asarray(dq, dtype=float)
    dz = model.difference(np.broadcast_to(q_star, q.shape), q) @ G      # z = G^T (q ⊖ q*)
    x = np.concatenate([dz, dq @ G], axis=-1)                          # (z, v)
    tau = np.broadcast_to(tau_star, q.shape[:-1] + (nv,)).copy()
    tau[..., crank] -= x @ K.T
    return tau


def feed_forward(t, q, dq):
    return np.broadcast_to(tau_star, np.shape(dq)).copy()


# %%
# Both runs from the same perturbed pose
# --------------------------------------
# Move the crank back by 0.2 rad and let ``assemble`` close the loop with the
# crank locked.
guess = q_star.copy()
guess[crank] -= 0.2
q0 = sys.assemble(guess, locked=["crank"])
T, dt = 3.0, 1e-3
runs = {name: gear.simulate(sys, q0, zero, T, dt, tau=ctrl, integrator="rk4", stabilization="projection")
        for name, ctrl in [("feed-forward tau* only", feed_forward), ("LQR", lqr)]}

ff, tr_lqr = runs["feed-forward tau* only"], runs["LQR"]
err = {}
for name, tr in runs.items():
    err[name] = np.abs(model.difference(np.broadcast_to(q_star, tr.q.shape), tr.q)).max(axis=-1)
    print(f"{name:<23}: final |q - q*| = {err[name][-1]:.2e} rad, largest = {err[name].max():.3f} rad, "
          f"max constraint residual {tr.stats['max_residual']:.1e}")
assert err["LQR"][-1] < 1e-3                  # the LQR run settles on q*
assert err["feed-forward tau* only"].max() > 1.0      # without feedback it really falls


# %%
# Plot: the linkage, the crank angle, the error and the crank torque
# ------------------------------------------------------------------
# On a log scale the open-loop error follows ``cosh(7.2 t)`` (it starts at
# rest) until the swing is large, and the LQR error decays at the slowest
# closed-loop rate down to round-off.
def points(q, L=(0.2, 0.5, 0.4)):
    """Joint positions in the x-z plane (the joint angles are relative)."""
    p = [np.zeros(2)]
    for Li, ai in zip(L, np.cumsum(q)):
        p.append(p[-1] + Li * np.array([np.cos(ai), np.sin(ai)]))
    return np.array(p)


lam_open = np.linalg.eigvals(Ar).real.max()
lam_slow = eig_cl.real.max()
fig, axes = plt.subplots(2, 2, figsize=(11, 8))

ax = axes[0, 0]
k_low = np.argmin(ff.q[:, 0])                 # the feed-forward run's lowest crank angle
snaps = [(q_star, "k-o", "q* (balanced by tau*)"), (q0, "C1--o", "start: crank -0.2 rad"),
         (ff.q[k_low], "C0:o", f"feed-forward only, t = {ff.t[k_low]:.2f} s")]
for q, style, label in snaps:
    p = points(q)
    ax.plot(p[:, 0], p[:, 1], style, label=label, lw=2, ms=4)
ax.plot([0, 0.6], [0, 0], "s", color="0.4", ms=8, label="ground pivots")
ax.set_aspect("equal")
ax.set_xlabel("x (m)")
ax.set_ylabel("z (m)   (gravity along -z)")
ax.set_title("four-bar poses")
ax.legend(fontsize=8, loc="upper left")

ax = axes[0, 1]
for (name, tr), c in zip(runs.items(), ["C0", "C3"]):
    ax.plot(tr.t, np.degrees(tr.q[:, 0]), color=c, label=name)
ax.axhline(np.degrees(q_star[0]), color="k", ls=":", lw=1, label="crank at q*")
ax.set_xlabel("t (s)")
ax.set_ylabel("crank angle (deg)")
ax.set_title("crank angle")
ax.legend(fontsize=8, loc="lower right")

ax = axes[1, 0]
for (name, tr), c in zip(runs.items(), ["C0", "C3"]):
    ax.semilogy(tr.t, err[name], color=c, label=name)
t = ff.t
ax.semilogy(t, err["feed-forward tau* only"][0] * np.cosh(lam_open * t), "C0--", lw=1,
            label=f"cosh({lam_open:.1f} t): open-loop eigenvalues ±{lam_open:.1f}")
ax.semilogy(t, err["LQR"][0] * np.exp(lam_slow * t), "C3--", lw=1,
            label=f"exp({lam_slow:.1f} t): slowest closed-loop eigenvalue")
ax.set_ylim(1e-13, 30)
ax.set_xlabel("t (s)")
ax.set_ylabel("max |q ⊖ q*| over the joints (rad)")
ax.set_title("distance from the operating point")
ax.legend(fontsize=8, loc="lower left")

ax = axes[1, 1]
ax.plot(tr_lqr.t, lqr(None, tr_lqr.q, tr_lqr.dq)[:, crank], color="C3", label="LQR: tau* - K (z, v)")
ax.axhline(tau_star[crank][0], color="C0", ls="--", lw=1, label="feed-forward: tau*")
ax.set_xlim(0, 1)
ax.set_xlabel("t (s)")
ax.set_ylabel("crank torque (N m)")
ax.set_title(f"crank torque (first second), K = [{K[0, 0]:.2f}, {K[0, 1]:.3f}]")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

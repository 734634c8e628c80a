"""
A robot's dynamics: RNEA, ABA, the mass matrix and their identities
===================================================================

The bundled 7-DoF arm (``gear/data/arm7.urdf``) follows a smooth joint
trajectory.  Inverse dynamics (RNEA, Kim Table 2) gives the torques that
produce it; forward dynamics (ABA, Table 3) of those torques gives the
accelerations back; and ``M ddq + b = tau`` ties both to the mass matrix
(CRBA).  The whole trajectory is one batched call.
"""
import matplotlib.pyplot as plt
import numpy as np

import gear

arm = gear.load_urdf(gear.data_path("arm7.urdf"))
t = np.linspace(0.0, 2.0, 400)
w = 2 * np.pi * 0.5
amp = np.linspace(0.3, 0.9, arm.nv)
q = amp * np.sin(w * t)[:, None]                  # (400, 7): one state per time
dq = amp * w * np.cos(w * t)[:, None]
ddq = -amp * w**2 * np.sin(w * t)[:, None]

tau = gear.inverse_dynamics(arm, q, dq, ddq)      # batched RNEA
ddq_back = gear.forward_dynamics(arm, q, dq, tau)  # batched ABA
M = gear.mass_matrix(arm, q)                      # (400, 7, 7)
b = gear.bias_forces(arm, q, dq)
print(f"max |ABA(RNEA(ddq)) - ddq|  = {np.abs(ddq_back - ddq).max():.1e}")
print(f"max |M ddq + b - tau|       = {np.abs(np.einsum('nij,nj->ni', M, ddq) + b - tau).max():.1e}")

fig, ax = plt.subplots(1, 2, figsize=(10, 4))
for j in range(arm.nv):
    ax[0].plot(t, tau[:, j], label=arm.joint_names[j])
ax[0].set_xlabel("t (s)")
ax[0].set_ylabel("joint torque (N m)")
ax[0].legend(fontsize=7)
im = ax[1].imshow(M[0], cmap="viridis")
ax[1].set_title("mass matrix M(q) at t = 0")
fig.colorbar(im, ax=ax[1])
fig.tight_layout()

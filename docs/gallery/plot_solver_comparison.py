"""
Every constraint solver on one mechanism
========================================

The same closed chain, the same state, four solvers: ``kkt`` (Kim's
articulated-body route), ``projection`` (a null-space basis), ``maximal``
(maximal coordinates, sparse Cholesky through CHOLMOD) and ``soft``
(compliant rows).  The hard solvers agree to round-off; the soft one is
within its compliance.  The bars are the time of one call.
"""
import time

import matplotlib.pyplot as plt
import numpy as np

import gear

sys, q0 = gear.mechanisms.four_bar()
dq = sys.project_velocity(q0, [1.0, 0.0, 0.0], locked=["crank"])
tau = np.array([0.5, 0.0, 0.0])
names = ["kkt", "projection", "maximal", "soft"]
ref = sys.forward_dynamics(q0, dq, tau)
diff, cost = [], []
for name in names:
    s = sys.with_solver(name)
    res = s.forward_dynamics(q0, dq, tau)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.05:
        s.forward_dynamics(q0, dq, tau)
        n += 1
    cost.append((time.perf_counter() - t0) / n * 1e6)
    diff.append(np.abs(res.ddq - ref.ddq).max())
    print(f"{name:<11} ddq {np.array2string(res.ddq, precision=6)}  |ddq - kkt| {diff[-1]:.1e}  "
          f"{cost[-1]:8.1f} µs per call")

fig, ax = plt.subplots(1, 2, figsize=(10, 4))
ax[0].bar(names, np.maximum(diff, 1e-17))
ax[0].set_yscale("log")
ax[0].set_ylabel("max |ddq - ddq_kkt|")
ax[1].bar(names, cost)
ax[1].set_yscale("log")
ax[1].set_ylabel("µs per call")
fig.suptitle("four-bar: constrained forward dynamics by every solver")
fig.tight_layout()

"""Smoke test of an installed gear (run from outside the source tree).

Imports gear, checks it is the installed copy (not a source checkout),
loads a bundled robot and runs one RNEA, one ABA and the identity
ABA(RNEA(ddq)) = ddq, the four-bar through the native maximal-coordinate
kernel when the build linked CHOLMOD (required when GEAR_REQUIRE_CHOLMOD=1,
as CI sets it), then the installed ``gear`` command (``gear info
four-bar``: a closed chain, its loops and mobility).  Exit code 0 on
success.

    python scripts/smoke.py
"""
import os
import shutil
import subprocess
import sys

import numpy as np

import gear

here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
where = os.path.dirname(os.path.abspath(gear.__file__))
if where.startswith(here + os.sep) and "site-packages" not in where:
    sys.exit(f"smoke: imported gear from the source tree ({where}), not an installed copy")

model = gear.load_urdf(gear.data_path("arm7.urdf"))
rng = np.random.default_rng(0)
q = model.random_configuration(rng)
dq, ddq = rng.standard_normal((2, model.nv))
tau = gear.inverse_dynamics(model, q, dq, ddq)
back = gear.forward_dynamics(model, q, dq, tau)
err = float(np.max(np.abs(back - ddq)))
if not (np.all(np.isfinite(tau)) and err < 1e-10):
    sys.exit(f"smoke: ABA(RNEA(ddq)) differs from ddq by {err:.3g}")
print(f"smoke: gear {gear.__version__} from {where}: arm7 nq={model.nq}, "
      f"|tau|={np.linalg.norm(tau):.4f}, ABA(RNEA) error {err:.1e}")

if gear.solvers.MaximalSolver.native_available():
    sysm, q4 = gear.mechanisms.four_bar()
    tau4 = np.array([0.3, -0.2, 0.1])
    a = sysm.with_solver("maximal").forward_dynamics(q4, np.zeros(3), tau4)
    b = sysm.forward_dynamics(q4, np.zeros(3), tau4)
    err = float(np.max(np.abs(a.ddq - b.ddq)))
    if not (a.stats.get("native") and err < 1e-10):
        sys.exit(f"smoke: the native maximal kernel differs from kkt by {err:.3g}")
    print(f"smoke: native maximal kernel (CHOLMOD) on the four-bar, |ddq - kkt| = {err:.1e}")
elif os.environ.get("GEAR_REQUIRE_CHOLMOD") == "1":
    sys.exit("smoke: this build did not link CHOLMOD (libsuitesparse-dev missing at build time?)")
else:
    print("smoke: built without CHOLMOD: the maximal solver uses scikit-sparse")

# maximal coordinates: the installed wheel carries the native Euler kernel
sys4, q4 = gear.mechanisms.four_bar()
dq4 = sys4.project_velocity(q4, [1.0, 0, 0], locked=["crank"])
mtr = gear.simulate(gear.MaximalModel(sys4), q4, dq4, 0.05, 1e-3, integrator="euler")
if not (mtr.stats["native"] and mtr.stats["max_joint_error"] < 1e-10):
    sys.exit(f"smoke: the maximal-coordinate run was not native or drifted ({mtr.stats})")
print(f"smoke: maximal coordinates, native Euler: joint error {mtr.stats['max_joint_error']:.1e}")

# progress bars need nothing beyond a plain install (tqdm is a core dependency)
tr = gear.simulate(model, q, np.zeros(model.nv), 0.01, 1e-3, progress=True)
print(f"smoke: simulate with a progress bar: {tr.q.shape[0]} frames")

exe = shutil.which("gear", path=os.path.dirname(sys.executable))
if exe is None:
    sys.exit("smoke: the 'gear' command is not installed next to this Python")
p = subprocess.run([exe, "info", "four-bar"], capture_output=True, text=True)
if p.returncode != 0 or "dof 1" not in p.stdout:
    sys.exit(f"smoke: 'gear info four-bar' failed ({p.returncode}): {p.stderr.strip()}")
print("smoke: " + p.stdout.strip().splitlines()[-1].strip())

"""Sweep the crank of the bundled four-bar through a full turn and plot
positions, velocity ratios, input torque and the pivot's bearing load.

    python docs/examples/fourbar_sweep.py [out.png]

(default output: docs/img/fourbar_sweep.png)
"""
import os
import sys

import numpy as np

import gear

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "img", "fourbar_sweep.png")
mech, q0 = gear.mechanisms.four_bar()
r = gear.analysis.sweep(mech, "crank", np.linspace(q0[0], q0[0] + 2 * np.pi, 145), q0)
r.plot(out, title="four-bar (crank 0.2, coupler 0.5, rocker 0.4, ground 0.6 m): crank driven at 1 rad/s")
print(f"peak pivot load {r.peak_wrenches[0, 1]:.2f} N, torque range "
      f"[{np.nanmin(r.torque):.3f}, {np.nanmax(r.torque):.3f}] N m; wrote {out}")

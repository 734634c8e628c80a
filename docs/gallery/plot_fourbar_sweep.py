"""
A four-bar linkage, swept: mobility, velocity ratios, torque and loads
======================================================================

``gear.mechanisms.four_bar`` builds a planar crank-rocker closed by a ball
joint (one of its three rows is redundant in the plane).
``gear.analysis.report`` computes its mobility and sweeps the crank through
a full turn: the coupler and rocker angles, their velocity ratios, the
crank torque that drives it at 1 rad/s, and the ground pivot's bearing
load.
"""
import matplotlib.pyplot as plt
import numpy as np

import gear

sys, q0 = gear.mechanisms.four_bar()
rep = gear.analysis.report(sys, "crank", q0[0] + np.linspace(0, 2 * np.pi, 73), q0, name="four-bar")
print(rep.summary())
fig = rep.sweep.plot(title="four-bar: crank driven at 1 rad/s")
plt.show()

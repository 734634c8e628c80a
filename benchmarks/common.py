"""Shared helpers of the benchmarks: timing, chain URDFs, Pinocchio models."""
from __future__ import annotations

import atexit
import os
import tempfile
import time

import numpy as np

import gear

HERE = os.path.dirname(os.path.abspath(__file__))


def _loop(fn, enough):
    """``(n, seconds)``: the first loop of 1, 4, 16 ... calls of ``fn()``
    that takes more than ``enough`` seconds (or 4**11 calls)."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt > enough or n > 1 << 22:
            return n, dt
        n *= 4


def best_time(fn, number=None, repeat=5, target=0.2):
    """Best-of-``repeat`` seconds per call of ``fn()`` (auto-sized loops)."""
    if number is None:
        number = _loop(fn, target / 5)[0]
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def paired_times(fa, fb, rounds=11, target=0.05):
    """Two calls timed in alternating rounds, for a ratio that the
    machine's drift does not decide.

    This VM's speed moves by up to 2x within minutes, so two best times
    taken a minute apart can put a ratio on either side of 1.  Here each
    round times ``fa`` and then ``fb`` (loops of about ``target`` seconds
    each), and the ratio is the median over the rounds of the ratio within
    each round.

    Returns
    -------
    best_a, best_b : float
        The best seconds per call of each over the rounds.
    ratio : float
        The median over the rounds of (``fa``'s time / ``fb``'s time).
    spread : tuple of float
        The ratios' lower and upper quartiles.
    """
    def number(fn):
        # calls in a loop of about ``target`` seconds
        n, dt = _loop(fn, target / 4)
        return max(1, round(n * target / max(dt, 1e-9)))

    def per_call(fn, n):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n

    na, nb = number(fa), number(fb)
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(per_call(fa, na))
        tb.append(per_call(fb, nb))
    r = np.array(ta) / np.array(tb)
    return min(ta), min(tb), float(np.median(r)), (float(np.quantile(r, 0.25)), float(np.quantile(r, 0.75)))


def chain_urdf(n, path=None):
    """A serial chain of ``n`` revolute joints (axes alternating z, y) as URDF."""
    links = []
    joints = []
    for i in range(n + 1):
        if i == 0:
            links.append('<link name="base"/>')
            continue
        links.append(f"""<link name="l{i}"><inertial><origin xyz="0.1 0.01 0.02" rpy="0.1 0.2 0.3"/>
<mass value="{1.0 + 0.1 * i}"/><inertia ixx="0.02" ixy="0.001" ixz="0.0" iyy="0.03" iyz="0.002" izz="0.04"/></inertial></link>""")
        parent = "base" if i == 1 else f"l{i - 1}"
        axis = "0 0 1" if i % 2 else "0 1 0"
        joints.append(f"""<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>
<origin xyz="0.2 0.0 0.05" rpy="0.0 0.1 0.0"/><axis xyz="{axis}"/>
<limit lower="-3" upper="3" effort="100" velocity="10"/></joint>""")
    text = '<robot name="chain%d">\n%s\n%s\n</robot>\n' % (n, "\n".join(links), "\n".join(joints))
    if path is None:
        fd, path = tempfile.mkstemp(suffix=".urdf")
        os.close(fd)
        atexit.register(os.remove, path)   # (the file this run made, gone when it ends)
    with open(path, "w") as f:
        f.write(text)
    return path


# Robots from example-robot-data (the ``reference`` extra), the zoo users
# already have: (label, path under its ``robots/`` folder, floating_base).
ZOO = [("ur5", "ur_description/urdf/ur5_robot.urdf", False),
       ("panda", "panda_description/urdf/panda.urdf", False),
       ("solo12", "solo_description/robots/solo12.urdf", True),
       ("talos_red", "talos_data/robots/talos_reduced.urdf", True)]


def robots(zoo=True):
    """(label, urdf path, floating_base) of the bundled robots and, when
    example-robot-data is installed and ``zoo``, of ur5, panda, solo12 and
    talos_reduced."""
    out = [("arm7", gear.data_path("arm7.urdf"), False),
           ("quadruped", gear.data_path("quadruped.urdf"), True)]
    from gear.testing import zoo_dir

    d = zoo_dir() if zoo else None
    if d is None:
        if zoo:
            print("# example-robot-data not installed: bundled robots only")
        return out
    for label, rel, floating in ZOO:
        path = os.path.join(d, rel)
        if os.path.isfile(path):
            out.append((label, path, floating))
    return out


def pin_model(urdf, floating):
    """Pinocchio's model of a URDF file (its own parser), or None if absent."""
    try:
        import pinocchio as pin
    except ImportError:
        return None
    if floating:
        return pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(urdf)


def states(model, N, seed=0):
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, n=N)
    dq = rng.standard_normal((N, model.nv))
    ddq = rng.standard_normal((N, model.nv))
    return q, dq, ddq


def fmt_ratio(a, b):
    """``a / b`` formatted, or '-' if ``b`` is missing."""
    return "-" if b is None or not np.isfinite(b) else f"{a / b:6.2f}"


def pinocchio_constraint_dynamics(s, q, dq, tau):
    """Pinocchio's ``constraintDynamics`` on the same closed-loop system (the
    model through gear.interop; ball closures -> 3-D, welds -> 6-D
    constraints, proximal mu = 1e-9 for the redundant planar rows).
    Returns ``(call, ddq)``: a no-argument callable for timing and its
    answer in gear's coordinates; ``(None, None)`` without Pinocchio."""
    try:
        import pinocchio as pin
        from gear.interop import pinocchio_constraint_problem
    except ImportError:
        return None, None
    pm, pd, cms, cds, mp = pinocchio_constraint_problem(s.model, s.constraints)
    prox = pin.ProximalSettings(1e-12, 1e-9, 200)
    qp, vp, tp = mp.q(q), mp.v(dq), mp.v(tau)

    def call():
        return pin.constraintDynamics(pm, pd, qp, vp, tp, cms, cds, prox)

    return call, mp.v_back(call())

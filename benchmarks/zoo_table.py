"""The example-robot-data table of docs/models.md: every URDF, loaded by gear
and by Pinocchio, and their largest disagreement on random states.

Run:  python benchmarks/zoo_table.py

Columns: the file; gear's nq and nv (Pinocchio's nq in brackets where it
differs: it stores a continuous joint as (cos, sin)); whether gear loads it
(fixed base / floating base); the largest relative difference from Pinocchio
over forward kinematics, RNEA, CRBA and ABA on 2 random states, for each base.
"""
from __future__ import annotations

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gear  # noqa: E402
from gear.testing import compare_with_pinocchio, zoo_dir, zoo_urdfs  # noqa: E402


def _one(path, floating):
    import pinocchio as pin

    try:
        pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating \
            else pin.buildModelFromUrdf(path)
    except Exception:
        pm = None
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always", gear.InertiaWarning)
            m = gear.load_urdf(path, floating_base=floating)
    except gear.ModelFileError as exc:
        why = "rejected" + (" (so does Pinocchio)" if pm is None else " — Pinocchio loads it")
        if "'world'" in str(exc) and floating:
            why = "n/a (root welded to `world`)"
        return None, why
    nwarn = sum(issubclass(x.category, gear.InertiaWarning) for x in w)
    note = f", {nwarn} inertia warning{'s' * (nwarn != 1)}" if nwarn else ""
    if m.nbodies == 0:
        return m, f"yes (nothing moves){note}"
    e = compare_with_pinocchio(m, pm, n_states=2, seed=7)
    errs = [e["fk"], e["rnea"], e["crba"]] + ([] if e["aba"] is None else [e["aba"]])
    sing = "; ABA singular as in Pinocchio" if e["aba"] is None else ""
    return (m, pm), f"yes, {max(errs):.1e}{sing}{note}"


def main():
    d = zoo_dir()
    if d is None:
        sys.exit("example-robot-data is not installed (pip install example-robot-data)")
    print("| file | nq | nv | fixed base: loads, max error | floating base: loads, max error |")
    print("|---|---|---|---|---|")
    for path in zoo_urdfs():
        fixed = _one(path, False)
        floating = _one(path, True)
        mods = fixed[0]
        nq = nv = "-"
        if isinstance(mods, tuple):
            m, pm = mods
            nq = f"{m.nq}" + (f" ({pm.nq})" if pm.nq != m.nq else "")
            nv = f"{m.nv}"
        elif mods is not None:
            nq, nv = f"{mods.nq}", f"{mods.nv}"
        print(f"| {os.path.relpath(path, d)} | {nq} | {nv} | {fixed[1]} | {floating[1]} |")


if __name__ == "__main__":
    main()

"""The robot zoo users already have: every URDF of example-robot-data.

Each file loads in gear exactly when it loads in Pinocchio (fixed base, and
floating base unless the file welds its root to a link named ``world``),
with the same number of joints and velocity coordinates; on random states
forward kinematics, RNEA, CRBA and ABA agree with Pinocchio (its own URDF
parser, an independent implementation) to 1e-10 relative.  Where a joint
moves only massless links, gear's forward dynamics raises
SingularInertiaError naming the joint and Pinocchio's ABA returns NaN.

The table in docs/models.md is printed by ``python benchmarks/zoo_table.py``.
"""
import os
import warnings

import numpy as np
import pytest

import gear
from gear.interop import map_by_name
from gear.testing import compare_with_pinocchio, zoo_dir, zoo_urdfs

pin = pytest.importorskip("pinocchio", reason="Pinocchio (pip package 'pin') is an optional "
                                              "reference; install gear[reference] to run")
if zoo_dir() is None:
    pytest.skip("example-robot-data is not installed (pip install example-robot-data, "
                "or gear[reference])", allow_module_level=True)

FILES = zoo_urdfs()
IDS = [os.path.relpath(f, zoo_dir()) for f in FILES]


def _root_is_world(path):
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    children = {j.find("child").get("link") for j in root.findall("joint") if j.find("child") is not None}
    roots = [ln.get("name") for ln in root.findall("link") if ln.get("name") not in children]
    return roots == ["world"]


def _pin_load(path, floating):
    try:
        if floating:
            return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()), None
        return pin.buildModelFromUrdf(path), None
    except Exception as exc:       # Pinocchio raises ValueError/RuntimeError
        return None, exc


def test_the_zoo_is_there():
    assert len(FILES) >= 60, "example-robot-data ships about 70 URDF files"


@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_zoo_robot_loads_and_agrees_with_pinocchio(path, floating):
    if floating and _root_is_world(path):
        # the file welds its root to "world": a floating base makes no sense
        with pytest.raises(gear.ModelFileError, match="'world'.*floating_base=True"):
            gear.load_urdf(path, floating_base=True)
        return
    pm, pin_error = _pin_load(path, floating)
    if pin_error is not None:
        # what Pinocchio rejects, gear rejects too, naming the file
        with pytest.raises(gear.ModelFileError) as info:
            gear.load_urdf(path, floating_base=floating)
        assert path in str(info.value)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gear.InertiaWarning)    # tested in test_parsers
        warnings.filterwarnings("ignore", message=".*<mimic>.*ignored")
        model = gear.load_urdf(path, floating_base=floating)
    assert model.nbodies == pm.njoints - 1
    assert model.nv == pm.nv
    names = {("root_joint" if n == "root" else n) for n in model.joint_names}
    assert names == set(pm.names[1:])
    if model.nbodies == 0:
        # nothing moves (a root link only): loads, and dynamics says why it can't run
        with pytest.raises(ValueError, match="no bodies"):
            gear.inverse_dynamics(model, model.neutral(), np.zeros(0), np.zeros(0))
        return
    err = compare_with_pinocchio(model, pm, n_states=2, seed=7)
    assert err["fk"] < 1e-10 and err["rnea"] < 1e-10 and err["crba"] < 1e-10, err
    if err["aba"] is None:
        # singular: a joint moves only massless links; Pinocchio's ABA is NaN there
        mp = map_by_name(model, pm)
        q = model.neutral()
        a = pin.aba(pm, pm.createData(), mp.q(q), np.zeros(pm.nv), np.zeros(pm.nv))
        assert not np.all(np.isfinite(a))
        with pytest.raises(gear.SingularInertiaError, match="joint '"):
            gear.forward_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv))
    else:
        assert err["aba"] < 1e-10, err

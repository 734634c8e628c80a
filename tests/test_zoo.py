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
    # the same joints in the same order: q and dq are laid out as Pinocchio's
    # (a depth-first walk, the child joints of each link by name; 35 of these
    # files came in document order before 2026-11-26)
    names = [("root_joint" if n == "root" else n) for n in model.joint_names]
    assert names == list(pm.names[1:])
    if model.nbodies == 0:
        # nothing moves (a root link only): loads, and dynamics says why it can't run
        with pytest.raises(ValueError, match="no moving bodies"):
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


def _two_leaves(model):
    """Two bodies deep in different branches (the last body of the
    deepest chain, then the deepest body that is not on its root path)."""
    parents = model.parents
    depth = []
    for i, p in enumerate(parents):
        depth.append(1 + (depth[p] if p >= 0 else 0))
    a = int(np.argmax(depth))
    path = set()
    i = a
    while i >= 0:
        path.add(i)
        i = parents[i]
    others = [i for i in range(model.nbodies) if i not in path]
    if not others:
        return a, None
    return a, max(others, key=lambda i: depth[i])


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_zoo_robot_with_closed_loops_on_both_kkt_routes(path):
    """Every zoo robot (floating base where the file allows it), with its
    deepest body welded to the world and the deepest body of another
    branch held by a ball, plus the file's mimic couplers: the packed
    dense route, the articulated-body route and the NumPy path give the
    same ddq (1e-8 relative), and the constraints hold."""
    floating = not _root_is_world(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = gear.load_urdf(path, floating_base=floating)
        except gear.ModelFileError:
            pytest.skip("the file does not load (test_zoo_robot_loads_and_agrees_with_pinocchio "
                        "checks that Pinocchio rejects it too)")
    if model.nbodies == 0 or model.nv == 0:
        pytest.skip("nothing moves in this file")
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    poses = gear.forward_kinematics(model, q)
    a, b = _two_leaves(model)
    cs = list(model.loop_closures)
    for body, kind in ((a, "weld"), (b, "ball")):
        if body is not None:
            W = np.asarray(poses[body])
            cs.append(gear.LoopClosure(body, gear.SE3(np.eye(3), np.zeros(3)), "world",
                                       gear.SE3(W[:3, :3], W[:3, 3]), kind))
    sysm = gear.ConstrainedModel(model, cs)
    dense = sysm.with_solver("kkt", route="dense")
    aba = sysm.with_solver("kkt", route="aba")
    dq = sysm.project_velocity(q, rng.standard_normal(model.nv))
    tau = rng.standard_normal(model.nv)
    try:
        ra = aba.forward_dynamics(q, dq, tau)
    except gear.SingularInertiaError:
        # a joint moves only massless links: M is singular, on both routes
        with pytest.raises(gear.SingularInertiaError):
            dense.forward_dynamics(q, dq, tau)
        return
    rd = dense.forward_dynamics(q, dq, tau)
    assert rd.stats["native"] and dense.solver._route == 1
    scale = max(1.0, np.abs(ra.ddq).max())
    # the two routes run the same pivoted solve of K: the same answer, to
    # the conditioning of K (icub, the worst here, moves by 1e-9 to 6e-9
    # of this scale when q moves by one rounding)
    assert np.abs(rd.ddq - ra.ddq).max() < 1e-8 * scale
    assert rd.stats["rank"] == ra.stats["rank"]
    # the equations of motion hold with the NumPy rows, mass matrix and bias
    A, bias = sysm._rows_numpy(q, dq)
    M = gear.mass_matrix(model, q)
    b = gear.inverse_dynamics(model, q, dq, np.zeros(model.nv))
    force = max(1.0, np.abs(tau).max(), np.abs(A.T @ rd.lam).max(), np.abs(M @ rd.ddq).max())
    assert np.abs(M @ rd.ddq + b - tau - A.T @ rd.lam).max() < 1e-9 * force
    # where K's eigenvalues are either structural zeros or well above the
    # solver's rcond (1e-10), every min-norm method gives the same unique
    # ddq: equal to the NumPy path's (eigendecomposition), constraints held.
    # Near-dependent rows (a weld on a fingertip of a few grams puts an
    # eigenvalue near 1e-11 of the largest) are solved by each method's own
    # regularisation and are only held to the checks above.
    ev = np.linalg.eigvalsh(A @ np.linalg.solve(M, A.T))
    ev = ev / ev.max()
    if np.all((ev < 1e-13) | (ev > 1e-8)):
        ddq, lam, stats = sysm.solver._forward_numpy(q, dq, tau, None)
        assert stats["rank"] == rd.stats["rank"] == int((ev > 1e-8).sum())
        assert np.abs(rd.ddq - ddq).max() < 1e-8 * scale
        assert np.abs(A @ rd.ddq + bias).max() < 1e-8 * scale


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_zoo_robot_in_maximal_coordinates(path):
    """Every zoo robot as free bodies and rows (gear.MaximalModel, mimic
    joints as couplers): its body accelerations from poses and twists equal
    the reduced dynamics' (1e-9 relative), or it is refused with a one-line
    error naming a body without mass or inertia (every body is free in
    maximal coordinates)."""
    from gear.constraints._kinematics import tree_kinematics

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            m = gear.load_urdf(path)
        except gear.ModelFileError:
            pytest.skip("the file does not load (test_zoo_robot_loads_and_agrees_with_pinocchio checks "
                        "that Pinocchio rejects it too)")
    try:
        mx = gear.MaximalModel(m)
    except gear.SingularInertiaError as exc:
        assert "singular spatial inertia" in str(exc) and "\n" not in str(exc)
        return
    except ValueError as exc:
        assert "no moving bodies" in str(exc)
        return
    rng = np.random.default_rng(1)
    q, dq, tau = m.random_configuration(rng), rng.standard_normal(m.nv), rng.standard_normal(m.nv)
    if getattr(m, "loop_closures", None):
        sys = gear.ConstrainedModel(m)
        q = sys.assemble(q)
        dq = sys.project_velocity(q, dq)
        ddq = sys.forward_dynamics(q, dq, tau).ddq
    else:
        ddq = gear.forward_dynamics(m, q, dq, tau)
    _, J, _, acc = tree_kinematics(m, q, dq)
    ref = np.einsum("bij,j->bi", J, ddq) + acc
    poses, twists = mx.state(q, dq)
    dV = mx.forward_dynamics(poses, twists, tau).dV
    assert np.abs(dV - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max())
    # the native Runge-Kutta steps (every joint kind the zoo has) give
    # NumPy's steps (gear.maximal.stepping), where the kernel covers the model
    from gear.maximal import native, stepping

    if native.why_not(mx, "rk4") is None:
        for integ in ("rk4", "rkmk4"):
            Pa, Va, _ = stepping.step(mx, poses[None], twists[None], 1e-3, integ, tau[None])
            Pb, Vb, _ = native.native_step(mx, poses[None], twists[None], 1e-3, tau[None], integrator=integ)
            assert np.abs(Pa - Pb).max() < 1e-9
            assert np.abs(Va - Vb).max() <= 1e-9 * max(1.0, np.abs(Va).max())

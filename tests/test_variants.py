"""The builds of the kernels for wider instruction sets (x86-64-v3: AVX2 and
FMA; x86-64-v4: AVX-512) against the generic build, through the public API:
every build the processor runs, on random trees of every joint kind, the
closed mechanisms on every solver route, the closed-chain derivatives,
native rollouts and the native maximal-coordinate steps.  The builds compile the same source with ISO C semantics
(``c_std=c11``: no contraction into fused multiply-adds, no reassociation),
so the wider instructions change the speed, not the arithmetic: the
results are the same bits.
"""
import contextlib
import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

import gear
from gear import _core
from gear import mechanisms as mech
from gear.testing import random_tree

WIDE = [s for s, _ in _core.available_variants() if s]
needs_wide = pytest.mark.skipif(
    not WIDE, reason="no build for a wider instruction set runs here (not x86-64, or one the compiler "
                     "could not target): only the generic kernels exist")


@contextlib.contextmanager
def build(suffix):
    """Route gear's calls through the build ``suffix`` of every area (the
    maximal steps' kernel too)."""
    from gear.maximal import native

    saved = {}
    for area in _core._AREAS:
        mod = importlib.import_module(f"gear.{area}{suffix}")
        for k, v in vars(mod).items():
            if not k.startswith("__") and k != "_make_result":
                saved.setdefault(k, vars(_core).get(k))
                setattr(_core, k, v)
    kernel = native._native
    native._native = importlib.import_module(f"gear.maximal._native{suffix}")
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(_core, k, v)
        native._native = kernel


def _both(suffix, fn):
    """``fn()`` under the generic build and under ``suffix``."""
    with build(""):
        ref = fn()
    with build(suffix):
        got = fn()
    return ref, got


@needs_wide
def test_the_best_build_runs_by_default():
    want = os.environ.get("GEAR_SIMD", "").strip().lower()
    if want:
        # the suite run on a chosen build (GEAR_SIMD=generic|v3|v4): that one runs
        assert _core.VARIANT == ("" if want == "generic" else "_" + want)
    else:
        assert _core.VARIANT == _core.available_variants()[0][0]
    cfg = gear.show_config(file=False)
    assert cfg["simd"] == _core.VARIANT_NAME and cfg["simd_available"][-1] == "generic"


@needs_wide
@pytest.mark.parametrize("suffix", WIDE or ["-"])
def test_tree_kernels(suffix):
    rng = np.random.default_rng(0)
    model = random_tree(rng, nbodies=12)
    q = model.random_configuration(rng, n=40)
    dq, x = rng.standard_normal((40, model.nv)), rng.standard_normal((40, model.nv))
    f_ext = 0.3 * rng.standard_normal((40, model.nbodies, 6))
    calls = {
        "rnea": lambda: gear.inverse_dynamics(model, q, dq, x, f_ext),
        "aba": lambda: gear.forward_dynamics(model, q, dq, x, f_ext),
        "crba": lambda: gear.mass_matrix(model, q),
        "fk": lambda: gear.forward_kinematics(model, q, dq)[0],
        "rnea one state": lambda: gear.inverse_dynamics(model, q[0], dq[0], x[0]),
        "rnea derivatives": lambda: np.concatenate(gear.inverse_dynamics_derivatives(model, q, dq, x), axis=-1),
        "aba derivatives": lambda: np.concatenate(gear.forward_dynamics_derivatives(model, q, dq, x), axis=-1),
    }
    for name, fn in calls.items():
        ref, got = _both(suffix, fn)
        assert np.array_equal(got, ref), name


@needs_wide
@pytest.mark.parametrize("suffix", WIDE or ["-"])
@pytest.mark.parametrize("solver, opts", [("kkt", {"route": "dense"}), ("kkt", {"route": "aba"}),
                                          ("kkt", {"route": "sparse"}), ("projection", {}), ("maximal", {})])
def test_closed_kernels(suffix, solver, opts):
    base, q = mech.n_four_bar(4, tree="ground")
    rng = np.random.default_rng(1)
    nv = base.model.nv
    qs = np.stack([base.model.integrate(q, 0.02 * rng.standard_normal(nv)) for _ in range(8)])
    dqs, taus = rng.standard_normal((8, nv)), rng.standard_normal((8, nv))

    def run():
        sysm = base.with_solver(solver, **opts)       # a fresh system: no fast path cached from a build
        a = sysm.forward_dynamics(qs, dqs, taus)
        b = sysm.forward_dynamics(qs[0], dqs[0], taus[0])
        return np.concatenate([a.ddq.ravel(), a.lam.ravel(), b.ddq, b.lam])
    ref, got = _both(suffix, run)
    assert np.array_equal(got, ref)


@needs_wide
@pytest.mark.parametrize("suffix", WIDE or ["-"])
def test_closed_chain_derivatives_and_inverse_dynamics(suffix):
    sysm, q = mech.stewart()
    rng = np.random.default_rng(2)
    nv = sysm.model.nv
    dq = sysm.project_velocity(q, rng.standard_normal(nv))
    tau = rng.standard_normal(nv)
    legs = [f"leg{k}_slide" for k in range(6)]

    def run():
        s = sysm.with_solver("kkt")
        d = s.forward_dynamics_derivatives(q, dq, tau)
        ddq = d.ddq
        i = s.inverse_dynamics_derivatives(q, dq, ddq, legs)
        inv = s.inverse_dynamics(q, dq, ddq, legs)
        return [d.X, d.Y, i.X, i.Y, inv.tau]
    ref, got = _both(suffix, run)
    for r, g in zip(ref, got):
        assert np.array_equal(g, r)


@needs_wide
@pytest.mark.parametrize("suffix", WIDE or ["-"])
def test_rollouts(suffix):
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(3)
    q0, dq0 = arm.random_configuration(rng, n=6), rng.standard_normal((6, arm.nv))
    four, qf = mech.four_bar()
    qfs = np.stack([four.assemble(four.model.integrate(qf, 0.05 * rng.standard_normal(3))) for _ in range(4)])
    dqfs = np.stack([four.project_velocity(x, rng.standard_normal(3)) for x in qfs])
    runs = {
        "arm rk4": lambda: gear.simulate(arm, q0, dq0, 0.2, 1e-3, integrator="rk4").q,
        "four-bar euler + projection": lambda: gear.simulate(four, qfs, dqfs, 0.2, 1e-3,
                                                             stabilization="projection").q,
    }
    for name, fn in runs.items():
        ref, got = _both(suffix, fn)
        assert np.array_equal(got, ref), name


@needs_wide
@pytest.mark.parametrize("suffix", WIDE or ["-"])
def test_maximal_steps(suffix):
    """The native maximal steps (``gear/maximal/_native.pyx``) on both trees
    of the N-four-bar (the tree-ordered solve), the Stewart platform (the
    one whose multipliers the auto-vectoriser changed) and Bricard's loop
    (a dependent row that takes force), every integrator, without
    stabilisation, with Baumgarte's and with projection, and the joint error
    gear.simulate records: the same bits in every build."""
    from gear.maximal import native

    rng = np.random.default_rng(5)
    cases = [mech.n_four_bar(3, tree="chain"), mech.n_four_bar(3, tree="ground"), mech.stewart(), mech.bricard()]
    states = [(s, q, s.project_velocity(q, rng.standard_normal(s.model.nv))) for s, q in cases]

    def run():
        out = []
        for s, q, dq in states:
            mx = gear.MaximalModel(s)                # a fresh model: no plan cached from a build
            P, V = mx.state(q, dq)
            for integrator in ("euler", "rk4", "rkmk4"):
                for stab in (None, "baumgarte", "projection"):
                    r = native.native_run(mx, P[None], V[None], 1e-3, 30, 1, stabilization=stab,
                                          integrator=integrator)
                    out += [np.asarray(x) for x in r]
            out.append(gear.simulate(mx, q, dq, 0.01, 1e-3, stabilization="baumgarte").joint_error)
        return out
    ref, got = _both(suffix, run)
    assert len(ref) == len(got) == 4 * (9 * 3 + 1)       # poses, twists, lam a run; the joint error
    for r, g in zip(ref, got):
        assert np.array_equal(g, r)


def test_the_build_can_be_chosen_and_a_wrong_choice_is_refused():
    code = "import gear; print(gear.show_config(file=False)['simd'])"
    env = dict(os.environ, GEAR_SIMD="generic")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "generic", p.stderr
    env["GEAR_SIMD"] = "v9"
    p = subprocess.run([sys.executable, "-c", "import gear"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode != 0 and "GEAR_SIMD='v9': choose one of 'generic', 'v3', 'v4'" in p.stderr

"""Every example of the documentation's gallery (docs/gallery/plot_*.py)
runs as a script and prints what it promises."""
import os
import pathlib
import subprocess
import sys

import pytest

GALLERY = pathlib.Path(__file__).resolve().parents[1] / "docs" / "gallery"
EXAMPLES = sorted(p.name for p in GALLERY.glob("plot_*.py"))


def test_the_gallery_has_its_seven_examples():
    assert EXAMPLES == ["plot_closed_lqr.py", "plot_dask_campaign.py", "plot_fourbar_sweep.py",
                        "plot_maximal_drift.py", "plot_robot_dynamics.py", "plot_solver_comparison.py",
                        "plot_spanning_trees.py"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_gallery_example_runs(name, tmp_path):
    if name == "plot_dask_campaign.py":
        pytest.importorskip("distributed", reason="the Dask example needs the 'campaign' extra")
    if name in ("plot_solver_comparison.py", "plot_spanning_trees.py"):
        pytest.importorskip("sksparse", reason="the maximal solver needs the 'sparse' extra")
    env = dict(os.environ, MPLBACKEND="Agg")
    p = subprocess.run([sys.executable, str(GALLERY / name)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout
    if name == "plot_robot_dynamics.py":
        errs = [float(line.split("=")[-1]) for line in out.splitlines() if line.startswith("max |")]
        assert len(errs) == 2 and max(errs) < 1e-9
    elif name == "plot_fourbar_sweep.py":
        assert "mobility at q0: dof 1" in out and "73/73 inputs assemble" in out
    elif name == "plot_solver_comparison.py":
        diffs = {line.split()[0]: float(line.split("|ddq - kkt|")[1].split()[0]) for line in out.splitlines()}
        assert max(diffs["projection"], diffs["maximal"]) < 1e-10 and diffs["soft"] < 1e-5
    elif name == "plot_maximal_drift.py":
        rows = {line.split(" native")[0].strip(): line for line in out.splitlines() if " native " in line}
        assert len(rows) == 5 and all("native True" in r for r in rows.values())
        err = {k: float(v.split("max joint error ")[1].split(",")[0]) for k, v in rows.items()}
        assert err["euler, unstabilised"] > 1e-4 and err["euler, baumgarte"] < 0.2 * err["euler, unstabilised"]
        assert err["euler, projection"] < 1e-11 and err["rkmk4, projection"] < 1e-11
    elif name == "plot_dask_campaign.py":
        assert "Dask run equals the local run: True" in out


def test_api_reference_covers_every_public_module_and_name():
    """docs/api has a page for every public module of gear (each documents
    its ``__all__`` with automodule), and the top-level page lists every
    non-module name of ``gear.__all__``."""
    import importlib
    import inspect
    import pkgutil

    import gear

    api = GALLERY.parent / "api"
    pages = {p.stem for p in api.glob("gear*.rst")}
    public = {"gear"}
    for info in pkgutil.walk_packages(gear.__path__, "gear."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        if info.name.startswith(("gear.algorithms.", "gear.constraints.", "gear.parsers.", "gear.joints.",
                                 "gear.spatial.", "gear.maximal.", "gear.simulation.")):
            continue          # documented through their package's __all__
        if info.name in ("gear.demo", "gear.solvers.base"):
            continue          # the demo script; the solver base is gear.solvers' own __all__
        public.add(info.name)
    assert public <= pages, sorted(public - pages)
    index = (api / "index.rst").read_text()
    for p in pages - {"gear"}:
        assert f"   {p}\n" in index, p
        text = (api / f"{p}.rst").read_text()
        assert f".. automodule:: {p}\n   :members:" in text, p
        mod = importlib.import_module(p)
        assert getattr(mod, "__all__", None), f"{p} has no __all__: automodule would document nothing"
    top = (api / "gear.rst").read_text()
    for name in gear.__all__:
        obj = getattr(gear, name)
        if inspect.ismodule(obj):
            assert f":mod:`{obj.__name__}`" in top or obj.__name__ in pages, name
        elif name != "data_path":
            assert f".{name}\n" in top, name

"""Every example of the documentation's gallery (docs/gallery/plot_*.py)
runs as a script and prints what it promises."""
import os
import pathlib
import subprocess
import sys

import pytest

GALLERY = pathlib.Path(__file__).resolve().parents[1] / "docs" / "gallery"
EXAMPLES = sorted(p.name for p in GALLERY.glob("plot_*.py"))


def test_the_gallery_has_its_four_examples():
    assert EXAMPLES == ["plot_dask_campaign.py", "plot_fourbar_sweep.py", "plot_robot_dynamics.py",
                        "plot_solver_comparison.py"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_gallery_example_runs(name, tmp_path):
    if name == "plot_dask_campaign.py":
        pytest.importorskip("distributed", reason="the Dask example needs the 'campaign' extra")
    if name == "plot_solver_comparison.py":
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
    elif name == "plot_dask_campaign.py":
        assert "Dask run equals the local run: True" in out

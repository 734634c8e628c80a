"""The README's Python example and the demo run as documented."""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    import tempfile

    # the README's store goes to tempfile.mkdtemp(), as a reader's would:
    # here under pytest's own directory, not left behind in /tmp
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})


def test_demo_runs_and_prints_identities():
    out = subprocess.run([sys.executable, "-m", "gear.demo", "--batch", "200"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "arm7.urdf" in out and "quadruped.urdf" in out
    assert "RNEA(ABA(tau)) - tau" in out and "M =" in out
    # the printed identity errors are tiny
    errs = [float(x) for x in re.findall(r"RNEA\(ABA\(tau\)\) - tau\s+([0-9.e+-]+)", out)]
    assert errs and max(errs) < 1e-9
    assert "fourbar.xml (closed loop)" in out
    for name in ("kkt", "projection", "soft", "maximal"):
        assert re.search(rf"^\s+{name}\s+[0-9.e+-]+", out, flags=re.M), name
    worst = float(re.search(r"64 rollouts .* worst loop residual ([0-9.e+-]+)", out).group(1))
    assert worst < 1e-10
    proj = float(re.search(r"^\s+projection\s+([0-9.e+-]+)", out, flags=re.M).group(1))
    assert proj < 1e-9
    closed = [float(x) for x in re.findall(r"ID\(FD\(tau\)\) - tau\s+([0-9.e+-]+)", out)]
    assert closed and closed[0] < 1e-9


def test_cli_info_and_demo_entry_point():
    from gear.cli import main

    assert main(["info", str(ROOT / "gear" / "data" / "arm7.urdf")]) == 0
    assert main(["info", str(ROOT / "tests" / "data" / "urdf_cycle.urdf")]) == 1


def test_docs_dynamics_doctest():
    import doctest

    res = doctest.testfile(str(ROOT / "docs" / "dynamics.md"), module_relative=False,
                           optionflags=doctest.ELLIPSIS)
    assert res.attempted > 5 and res.failed == 0


def test_docstring_examples_run():
    """The Examples sections of the public docstrings are doctests."""
    import doctest
    import importlib

    total = 0
    for name in ["gear.spatial", "gear.model", "gear.algorithms.dynamics",
                 "gear.algorithms.derivatives", "gear.sensitivity", "gear.comparison",
                 "gear.analysis", "gear.maximal", "gear.solvers.maximal"]:
        mod = importlib.import_module(name)
        res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert res.failed == 0, name
        total += res.attempted
    assert total > 10


def test_docs_conventions_doctest():
    """The conventions page's claims run as doctests."""
    import doctest

    res = doctest.testfile(str(ROOT / "docs" / "conventions.md"), module_relative=False,
                           optionflags=doctest.ELLIPSIS)
    assert res.attempted > 10 and res.failed == 0

#!/usr/bin/env bash
# Set everything up, then build the documentation site (Sphinx + numpydoc +
# MyST + sphinx-gallery) with warnings as errors into docs/_build/html.
# The gallery examples run during the build (their figures are theirs).
# Every build also checks the finished site (docs/conf.py, build-finished):
# a link to a file of the site that does not exist, or a public name (a
# module's __all__) the API reference does not describe, is a warning,
# so it fails this build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rm -rf docs/_build docs/auto_examples docs/sg_execution_times.rst
MPLBACKEND=Agg .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html "$@"
echo "docs: open docs/_build/html/index.html"

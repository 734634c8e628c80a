#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine with Python >= 3.11:
# system packages (SuiteSparse for scikit-sparse), a virtual environment in
# .venv, the build tools and gear itself (editable, with every extra).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

need_apt=()
dpkg -s libsuitesparse-dev >/dev/null 2>&1 || need_apt+=(libsuitesparse-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
$PY -c "import venv, ensurepip" >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing system packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  $PY -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
echo "setup: installing build tools and gear (this takes a few minutes the first time)"
python -m pip install -q --upgrade pip
# setuptools and wheel: scikit-sparse 0.4.16 has no wheels and is built from
# source inside .venv (--no-build-isolation), which needs both.
python -m pip install -q "meson-python>=0.15" "meson>=1.4" ninja "cython>=3.0" "numpy>=2.0" setuptools wheel
# The editable install rebuilds the extension on import after a source
# change; a native file names cython by its absolute path so that rebuild
# works without the venv on PATH (e.g. `.venv/bin/python -m pytest`).
NATIVE="$PWD/.venv/gear-native.ini"
printf "[binaries]\ncython = '%s'\n" "$PWD/.venv/bin/cython" > "$NATIVE"
python -m pip install -q --no-build-isolation \
  -Csetup-args=--native-file="$NATIVE" -e ".[test,sparse,reference,progress,plot,campaign,docs]"
python -c "import gear, gear._core as c; print('setup: gear', gear.__version__, '| OpenMP threads:', c.omp_max_threads())"

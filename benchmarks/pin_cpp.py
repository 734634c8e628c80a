"""Build and run benchmarks/pin_bench.cpp against the pin wheel's headers.

Pinocchio's C++ time per call is the figure the batched gear kernels are
compared with.  The wheel ships Pinocchio's headers and libraries; Eigen
comes from Debian's ``libeigen3-dev`` (installed by the benchmark script
when missing and when run as root).  Returns ``None`` when it can't build.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "results")


def _prefix():
    try:
        import cmeel  # noqa: F401
    except ImportError:
        pass
    p = os.path.join(sysconfig.get_paths()["purelib"], "cmeel.prefix")
    return p if os.path.isdir(os.path.join(p, "include", "pinocchio")) else None


def _eigen_include():
    for d in ("/usr/include/eigen3",):
        if os.path.isdir(os.path.join(d, "Eigen")):
            return d
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "libeigen3-dev"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if os.path.isdir("/usr/include/eigen3/Eigen"):
            return "/usr/include/eigen3"
    return None


def build(verbose=False):
    """Compile pin_bench; return the executable path or None."""
    prefix = _prefix()
    eigen = _eigen_include()
    cxx = shutil.which("g++") or shutil.which("c++")
    if prefix is None or eigen is None or cxx is None:
        if verbose:
            print(f"# pin C++ benchmark unavailable (pinocchio headers: {prefix}, Eigen: {eigen}, c++: {cxx})")
        return None
    os.makedirs(BUILD, exist_ok=True)
    exe = os.path.join(BUILD, "pin_bench")
    src = os.path.join(HERE, "pin_bench.cpp")
    if os.path.exists(exe) and os.path.getmtime(exe) > os.path.getmtime(src):
        return exe
    lib = os.path.join(prefix, "lib")
    cmd = [cxx, "-O3", "-DNDEBUG", "-std=c++17", "-w", src, "-o", exe,
           "-I", os.path.join(prefix, "include"), "-I", eigen,
           # the definitions pinocchio's CMake config exports to its users
           "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_MPL_LIMIT_LIST_SIZE=30",
           "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30", "-DBOOST_FUSION_INVOKE_MAX_ARITY=12",
           "-DPINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION",
           "-L", lib, f"-Wl,-rpath,{lib}", "-lpinocchio_default", "-lboost_serialization",
           "-lboost_filesystem"]
    if verbose:
        print("# building Pinocchio C++ reference benchmark (about a minute)...", flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        if verbose:
            print("# pin C++ benchmark failed to build:\n" + r.stderr[-2000:], file=sys.stderr)
        return None
    return exe


def run(exe, pin_model, reps=200000):
    """Seconds per call for rnea, aba, crba, rnea_derivatives, aba_derivatives
    of a ``pinocchio.Model`` (saved to a binary file for the C++ program)."""
    os.makedirs(BUILD, exist_ok=True)
    path = os.path.join(BUILD, f"model_{os.getpid()}.bin")
    pin_model.saveToBinary(path)
    try:
        r = subprocess.run([exe, path, str(reps)], capture_output=True, text=True, check=True)
    finally:
        os.remove(path)
    out = {}
    for line in r.stdout.splitlines():
        name, ns = line.split()
        out[name] = float(ns) * 1e-9
    return out

"""The native entry points, one extension per area, gathered under one name
for the Python layers above them.

* ``gear/_data.pyx``: the frozen model and the kernels' plans;
* ``gear/_tree.pyx``: tree algorithms;
* ``gear/_closed.pyx``: closed loops and the maximal-coordinate solver;
* ``gear/_rollouts.pyx``: native rollouts;
* ``gear/maximal/_native.pyx``: the native maximal-coordinate steps, which
  ``gear.maximal.native`` imports (:func:`area`), not gathered here.

The last four are also built for x86-64-v3 (AVX2, FMA: ``_tree_v3``, ...)
and x86-64-v4 (AVX-512: ``_tree_v4``, ...) where the compiler can; this
module imports the best build the processor runs, as NumPy chooses its
kernels.  ``GEAR_SIMD=generic|v3|v4`` in the environment chooses another
(never one the processor lacks).  :func:`gear.show_config` reports the
choice.
"""
from __future__ import annotations

import importlib
import os

from ._data import *  # noqa: F401,F403
from ._data import _padded  # noqa: F401

#: the builds of the kernels, best first: (suffix, name)
VARIANTS = (("_v4", "x86-64-v4 (AVX-512)"), ("_v3", "x86-64-v3 (AVX2, FMA)"), ("", "generic"))
_AREAS = ("_tree", "_closed", "_rollouts")
#: every area built for each instruction set: these, and the maximal steps
_BUILT = _AREAS + ("maximal._native",)
_LEVEL = {"_v4": "X86_V4", "_v3": "X86_V3"}


def _cpu_has(suffix):
    """True if this processor runs the build ``suffix`` (NumPy's
    detection of the x86-64 levels)."""
    if not suffix:
        return True
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as f
    except ImportError:                                    # NumPy < 2
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as f
        except ImportError:
            return False
    if _LEVEL[suffix] in f:
        return bool(f[_LEVEL[suffix]])
    need = {"_v3": ("AVX2", "FMA3", "BMI2", "F16C"),
            "_v4": ("AVX2", "FMA3", "AVX512F", "AVX512CD", "AVX512BW", "AVX512DQ", "AVX512VL")}[suffix]
    return all(f.get(k, False) for k in need)


def _built(suffix):
    """True if the build ``suffix`` of every area is installed."""
    import importlib.util

    return all(importlib.util.find_spec(f"gear.{a}{suffix}") is not None for a in _BUILT)


def available_variants():
    """The builds installed and runnable here, best first: ``[(suffix, name)]``."""
    return [(s, n) for s, n in VARIANTS if _built(s) and _cpu_has(s)]


def _choose():
    want = os.environ.get("GEAR_SIMD", "").strip().lower()
    avail = available_variants()
    if want:
        suffix = {"generic": "", "v3": "_v3", "v4": "_v4"}.get(want)
        if suffix is None:
            raise ImportError(f"GEAR_SIMD={want!r}: choose one of 'generic', 'v3', 'v4'")
        if suffix not in [s for s, _ in avail]:
            raise ImportError(f"GEAR_SIMD={want!r}: that build is not installed or this processor cannot run it; "
                              f"available: {[n for _, n in avail]}")
        return suffix
    return avail[0][0]


VARIANT = _choose()
VARIANT_NAME = dict(VARIANTS)[VARIANT]
for _area in _AREAS:
    _mod = importlib.import_module(f"gear.{_area}{VARIANT}")
    globals().update({k: v for k, v in vars(_mod).items() if not k.startswith("__")})
del _area, _mod


def area(name):
    """The chosen build of the area ``name`` (``"maximal._native"``: the
    module ``gear.maximal._native`` or its ``_v3`` / ``_v4`` build)."""
    return importlib.import_module(f"gear.{name}{VARIANT}")


def _make_result(fields):
    """Unpickle a :class:`ConstraintResult` (whichever build made it)."""
    return ConstraintResult(**fields)  # noqa: F405

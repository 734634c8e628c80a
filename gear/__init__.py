"""gear: articulated rigid-body dynamics on the Lie-group formulation of
J. Kim ("Lie Group Formulation of Articulated Rigid Body Dynamics").

Public API: the documentation site's API reference (``docs/api``).
Twists are ``(w, v)``, wrenches ``(m, f)``, both in body coordinates;
``T_{lambda(i),i} = placement_i J_i(q_i)``.
"""
from . import joints, spatial
from .spatial import SE3, Inertia, InertiaWarning
from .model import Model
from .algorithms import *  # noqa: F401,F403
from .algorithms import __all__ as _dyn_all
from . import sensitivity
from .parsers import load_urdf, load_mjcf, LoopClosureSpec, ModelFileError, ModelFileWarning
from .constraints import (LoopClosure, CustomConstraint, JointCoupler, ConstrainedModel,
                          AssemblyError)

from . import mechanisms, analysis, solvers, maximal, controllers  # noqa: E402
from .solvers import PerformanceWarning  # noqa: E402
from .maximal import MaximalModel  # noqa: E402
from .simulation import simulate, Trajectory  # noqa: E402
from . import comparison  # noqa: E402
from .comparison import compare  # noqa: E402

__version__ = "0.1.0"


def data_path(name=""):
    """Path of a model file bundled in ``gear/data`` (e.g. ``"arm7.urdf"``)."""
    import os

    return os.path.join(os.path.dirname(__file__), "data", name)


def show_config(file=None):
    """Print, and return, how this installation of gear was built and what
    it runs.

    The kernels' extensions are built generic (x86-64) and, where the
    compiler can, for x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512); gear
    imports the best build the processor runs (``GEAR_SIMD=generic|v3|v4``
    in the environment chooses another).

    Parameters
    ----------
    file : file-like, optional
        Where to print (default ``sys.stdout``); ``False``: do not print.

    Returns
    -------
    dict
        ``version``; ``simd``: the build in use; ``simd_available``: the
        builds installed that this processor runs, best first;
        ``simd_override``: ``GEAR_SIMD`` or None; ``openmp``: whether the
        batched kernels run in parallel; ``threads``:
        :func:`gear.get_num_threads`; ``cholmod``: whether the native
        maximal-coordinate kernel has CHOLMOD; ``numpy``, ``python``.

    Examples
    --------
    >>> import gear
    >>> cfg = gear.show_config(file=False)
    >>> cfg["simd"] in [name for name in cfg["simd_available"]]
    True
    """
    import os
    import platform
    import sys

    import numpy

    from . import _core

    cfg = {"version": __version__, "simd": _core.VARIANT_NAME,
           "simd_available": [name for _, name in _core.available_variants()],
           "simd_override": os.environ.get("GEAR_SIMD") or None, "openmp": bool(_core.omp_enabled()),
           "threads": get_num_threads(), "cholmod": bool(_core.cholmod_available()),  # noqa: F405
           "numpy": numpy.__version__, "python": platform.python_version()}
    if file is not False:
        out = sys.stdout if file is None else file
        width = max(map(len, cfg))
        for k, v in cfg.items():
            print(f"{k:>{width}} : {', '.join(v) if isinstance(v, list) else v}", file=out)
    return cfg


__all__ = ["joints", "spatial", "SE3", "Inertia", "InertiaWarning", "Model", "load_urdf", "load_mjcf",
           "LoopClosureSpec", "ModelFileError", "ModelFileWarning", "PerformanceWarning", "LoopClosure", "CustomConstraint", "JointCoupler",
           "ConstrainedModel", "AssemblyError", "MaximalModel", "mechanisms", "analysis", "solvers", "maximal", "data_path", "sensitivity", "controllers", "simulate", "Trajectory", "comparison", "compare", "show_config", *_dyn_all]

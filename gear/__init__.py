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
from .maximal import MaximalModel  # noqa: E402
from .simulation import simulate, Trajectory  # noqa: E402
from . import comparison  # noqa: E402
from .comparison import compare  # noqa: E402

__version__ = "0.1.0"


def data_path(name=""):
    """Path of a model file bundled in ``gear/data`` (e.g. ``"arm7.urdf"``)."""
    import os

    return os.path.join(os.path.dirname(__file__), "data", name)


__all__ = ["joints", "spatial", "SE3", "Inertia", "InertiaWarning", "Model", "load_urdf", "load_mjcf",
           "LoopClosureSpec", "ModelFileError", "ModelFileWarning", "LoopClosure", "CustomConstraint", "JointCoupler",
           "ConstrainedModel", "AssemblyError", "MaximalModel", "mechanisms", "analysis", "solvers", "maximal", "data_path", "sensitivity", "controllers", "simulate", "Trajectory", "comparison", "compare", *_dyn_all]

"""Model file loaders (URDF, MJCF)."""
from .common import ModelFileError, ModelFileWarning, LoopClosureSpec
from .urdf import load_urdf
from .mjcf import load_mjcf

__all__ = ["load_urdf", "load_mjcf", "ModelFileError", "ModelFileWarning", "LoopClosureSpec"]

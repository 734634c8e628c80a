"""Closed loops: loop closures, custom constraints and the constrained
model (Kim Sec. 3).  See ``docs/constraints.md``."""
from .closures import KINDS, CustomConstraint, JointCoupler, LoopClosure
from .system import AssemblyError, ConstrainedModel, ConstraintResult, Mobility

__all__ = ["LoopClosure", "CustomConstraint", "JointCoupler", "KINDS", "ConstrainedModel", "ConstraintResult",
           "Mobility", "AssemblyError"]

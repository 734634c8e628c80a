"""Interchangeable constraint solvers for :class:`gear.ConstrainedModel`.

Built in: ``"kkt"`` (Lagrange multipliers in reduced coordinates, Kim eqs.
67-77), ``"projection"`` (null-space projection), ``"soft"`` (compliant
constraints) and ``"maximal"`` (maximal coordinates, CHOLMOD;
:meth:`MaximalSolver.native_available` tells whether its native kernel was
built).  Third-party solvers subclass :class:`ConstraintSolver` and
register in the entry-point group ``gear.solvers``; see
``docs/solvers.md``.
"""
from .base import ConstraintSolver, PerformanceWarning, available, get_solver, refresh
from .maximal import MaximalSolver

__all__ = ["ConstraintSolver", "MaximalSolver", "PerformanceWarning", "available", "get_solver", "refresh"]

"""Maximal coordinates: every body a free rigid body, every joint and loop
closure a set of constraint rows (Ruan, "Articulated rigid body systems",
Sec. 3).

The rooms of this package:

* :mod:`gear.maximal.system` -- :class:`MaximalSystem`, the maximal system
  of a closed-loop model at a *joint-space* state, which the ``"maximal"``
  constraint solver (:class:`gear.solvers.MaximalSolver`) factorises to
  answer joint-space questions, and the joint-space maps
  :func:`from_reduced` / :func:`to_reduced`.
"""
from .system import MaximalSystem, from_reduced, to_reduced

__all__ = ["from_reduced", "to_reduced", "MaximalSystem"]

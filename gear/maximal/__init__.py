"""Maximal coordinates: every body a free rigid body, every joint and loop
closure a set of constraint rows (Ruan, "Articulated rigid body systems",
Sec. 3).

The rooms of this package, imports pointing down:

* :mod:`gear.maximal.model` -- :class:`MaximalModel`: the formulation with
  its own state (world poses and body twists), forward dynamics and sparse
  system;
* :mod:`gear.maximal.rows` -- the constraint rows of tree joints and loop
  closures, evaluated straight from body poses and twists (position
  residual, rows of ``J`` on the stacked twists, acceleration bias);
* :mod:`gear.maximal.system` -- :class:`MaximalSystem`, the maximal system
  of a closed-loop model at a *joint-space* state, which the ``"maximal"``
  constraint solver (:class:`gear.solvers.MaximalSolver`) factorises to
  answer joint-space questions, and the joint-space maps
  :func:`from_reduced` / :func:`to_reduced`;
* :mod:`gear.maximal.tree` -- the plan of that solver's tree route
  (Baraff's tree-ordered factorisation of the KKT system) and the choice
  between it and CHOLMOD's.
"""
from .system import MaximalSystem, from_reduced, to_reduced
from .model import MaximalModel, MaximalResult

__all__ = ["MaximalModel", "MaximalResult", "from_reduced", "to_reduced", "MaximalSystem"]

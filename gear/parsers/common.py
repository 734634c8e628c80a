"""Shared pieces of the model-file loaders."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..spatial import SE3

__all__ = ["ModelFileError", "LoopClosureSpec"]


class ModelFileError(ValueError):
    """A model file is malformed; the message names the file and element."""


@dataclass
class LoopClosureSpec:
    """A loop closure read from a model file (MJCF ``<equality>``), kept as a
    description until it is turned into a constraint.

    Attributes
    ----------
    kind : str
        ``"ball"`` (MJCF ``connect``: 3 rows) or ``"weld"`` (6 rows).
    body_a, body_b : str
        Body names (``"world"`` allowed).
    placement_a, placement_b : gear.SE3
        Constraint frames in each body's frame.
    name : str or None
    """

    kind: str
    body_a: str
    placement_a: SE3
    body_b: str
    placement_b: SE3
    name: str | None = None
    params: dict = field(default_factory=dict)

"""Simulation campaigns beyond one machine (kept for imports written
before :mod:`gear.simulation` became a package): :func:`simulate_distributed`
is :func:`gear.simulation.cluster.simulate_distributed`."""
from __future__ import annotations

from .simulation.cluster import simulate_distributed

__all__ = ["simulate_distributed"]

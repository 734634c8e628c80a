"""Simulation campaigns on a Dask cluster: :func:`simulate_distributed`
is :func:`gear.simulate` with a ``client`` (kept for code written before
``client=`` existed).  The cluster driver is
:mod:`gear.simulation.cluster`; see the "Running on a cluster" section of
the simulation guide.
"""
from __future__ import annotations

from .simulation import simulate

__all__ = ["simulate_distributed"]


def simulate_distributed(client, model_or_sys, q0, dq0, t_final, dt, *, chunks=None, out=None, mode=None,
                         resume=False, progress=None, **options):
    """:func:`gear.simulate` on the workers of ``client``.

    Parameters
    ----------
    client : dask.distributed.Client
    model_or_sys, q0, dq0, t_final, dt, **options
        As for :func:`gear.simulate` (``tau``, ``integrator``,
        ``record_every``...).  Callables (``tau``, controllers) must be
        picklable.
    chunks, out, mode, resume, progress
        As for :func:`gear.simulate`.

    Returns
    -------
    Trajectory
    """
    return simulate(model_or_sys, q0, dq0, t_final, dt, client=client, chunks=chunks, out=out, mode=mode,
                    resume=resume, progress=progress, **options)

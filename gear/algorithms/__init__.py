"""Recursive dynamics algorithms (Kim Sec. 2): kernels in ``_*.pxd``,
public functions in :mod:`gear.algorithms.dynamics`."""
from .dynamics import *  # noqa: F401,F403
from .dynamics import __all__  # noqa: F401

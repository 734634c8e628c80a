"""Recursive dynamics algorithms (Kim Sec. 2 and 4): kernels in ``_*.pxd``,
public functions in :mod:`gear.algorithms.dynamics` and
:mod:`gear.algorithms.derivatives`."""
from .dynamics import *  # noqa: F401,F403
from .derivatives import *  # noqa: F401,F403
from . import dynamics as _d, derivatives as _dd

__all__ = [*_d.__all__, *_dd.__all__]

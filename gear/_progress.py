"""Progress bars (tqdm, a core dependency) for long work.

``progress=None`` everywhere means "show a bar only when standard error is
a terminal": interactive users see one, logs and pipes stay clean.
``True`` and ``False`` force it on or off.
"""
from __future__ import annotations

import sys

__all__ = ["progress_bar", "wants_progress"]


def wants_progress(progress):
    """``progress`` resolved to a bool (``None``: stderr is a terminal)."""
    if progress is None:
        try:
            return bool(sys.stderr.isatty())
        except (AttributeError, ValueError):     # closed or replaced stderr
            return False
    return bool(progress)


class _NoBar:
    """The part of tqdm's interface gear uses, doing nothing."""

    def __init__(self, iterable=None):
        self._it = iterable

    def __iter__(self):
        return iter(self._it if self._it is not None else ())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_postfix_str(self, s="", refresh=True):
        pass

    def set_description_str(self, s="", refresh=True):
        pass

    def write(self, s):
        print(s, file=sys.stderr)

    def close(self):
        pass


def progress_bar(progress, iterable=None, **kwargs):
    """A tqdm bar when :func:`wants_progress` says so, else a silent
    stand-in with the same methods (``update``, ``set_postfix_str``,
    ``close``, iteration, context manager).

    Parameters
    ----------
    progress : bool or None
    iterable : iterable, optional
        Wrapped as ``tqdm(iterable)`` would.
    **kwargs
        ``total``, ``desc``, ``unit``... passed to tqdm.
    """
    if not wants_progress(progress):
        return _NoBar(iterable)
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)

"""Where gear writes, and the one rule for it: never over what a user owns.

Every command and function that writes (``gear.simulate(out=)``, the
reports of :mod:`gear.comparison` and :mod:`gear.analysis`, ``gear bench
--json``) claims its output location here *before* any long work:

* a path that does not exist is created (with its missing parents);
* an empty directory is taken as it is;
* a path that holds earlier output of the same kind from gear is replaced
  only when the caller says so (``mode="w"`` / ``overwrite=True`` /
  ``--overwrite``), and then only the files gear wrote there are removed;
  otherwise :class:`FileExistsError`;
* anything else that exists (a user's folder, a file, another program's
  data) is refused with a :class:`FileExistsError` naming it, whatever the
  mode: gear deletes nothing it did not create.

gear recognises its own output by a marker: the ``gear_store`` attribute
of a Zarr store's root group (with the names of the arrays gear wrote), a
``.gear-output.json`` file in a report directory (with the names of the
files gear wrote), and the ``"schema": "gear..."`` key of a JSON file.
"""
from __future__ import annotations

import json
import os
import re
import shutil

__all__ = ["claim_directory", "claim_file", "claim_store", "record_files", "STORE_FORMAT"]

MARKER = ".gear-output.json"
#: version of the layout of gear's Zarr stores (their ``gear_store``
#: attribute): 2 adds a fifth column to ``chunk_stats`` (the projection's
#: Gauss-Newton iterations per step); stores of format 1 are still
#: resumed, those of a later format are refused
STORE_FORMAT = 2
# arrays of stores written before the ``gear_store`` attribute existed
_LEGACY_ARRAYS = ("t", "q", "dq", "lam", "tau")
# the temporary file of Zarr's atomic write of the root's zarr.json, left
# behind when a writer is killed mid-write: part of gear's store
_ZARR_PARTIAL = re.compile(r"^zarr\.[0-9a-f]{32}\.partial$")


def _listing(entries, limit=4):
    entries = sorted(entries)
    shown = ", ".join(entries[:limit])
    return shown + (f" and {len(entries) - limit} more" if len(entries) > limit else "")


def _is_url(path):
    return "://" in str(path)


def _version():
    from . import __version__

    return __version__


# ---------------------------------------------------------------------------
# report directories
# ---------------------------------------------------------------------------
def _read_marker(path):
    try:
        with open(os.path.join(path, MARKER)) as fh:
            m = json.load(fh)
        return m if isinstance(m, dict) and isinstance(m.get("files"), list) else None
    except (OSError, ValueError):
        return None


def _write_marker(path, kind, files):
    with open(os.path.join(path, MARKER), "w") as fh:
        json.dump({"gear_output": kind, "gear_version": _version(), "files": sorted(set(files))}, fh)


def claim_directory(path, kind, overwrite=False, option="overwrite=True"):
    """Make ``path`` a directory that gear may write ``kind`` output into.

    Parameters
    ----------
    path : str or path-like
    kind : str
        What goes there (``"compare report"``, ``"analysis"``); a directory
        holding another kind of gear output is refused.
    overwrite : bool
        Replace an earlier output of the same kind (its files, listed in
        the directory's marker, are removed; nothing else is touched).
    option : str
        How the caller's interface says "overwrite" (for the message).

    Returns
    -------
    str
        The directory, created if it did not exist.

    Raises
    ------
    FileExistsError
        ``path`` is a file, holds files gear did not write, or holds an
        earlier output and ``overwrite`` is false.
    """
    p = os.fspath(path)
    if os.path.lexists(p) and not os.path.isdir(p):
        raise FileExistsError(f"{p!r} exists and is not a directory; choose a new directory for the {kind}")
    if os.path.isdir(p):
        entries = set(os.listdir(p))
        marker = _read_marker(p)
        ours = set() if marker is None else set(marker["files"]) | {MARKER}
        foreign = entries - ours
        if foreign:
            raise FileExistsError(f"{p!r} exists and holds files gear did not write ({_listing(foreign)}); "
                                  f"choose a new or empty directory for the {kind}")
        if marker is not None and marker.get("gear_output") != kind:
            raise FileExistsError(f"{p!r} holds a gear {marker.get('gear_output')}, not a {kind}; "
                                  "choose another directory")
        earlier = entries - {MARKER}
        if earlier and not overwrite:
            raise FileExistsError(f"{p!r} holds an earlier gear {kind} ({_listing(earlier)}); pass "
                                  f"{option} to replace it, or choose a new directory")
        for name in earlier:
            os.remove(os.path.join(p, name))
    else:
        os.makedirs(p)
    _write_marker(p, kind, [])
    return p


def record_files(path, kind, names):
    """Add ``names`` to the files gear wrote in a claimed directory (call
    *before* writing them, so that an interrupted write is still known as
    gear's)."""
    marker = _read_marker(path) or {"files": []}
    _write_marker(path, kind, list(marker["files"]) + [os.path.basename(n) for n in names])


# ---------------------------------------------------------------------------
# single files
# ---------------------------------------------------------------------------
def claim_file(path, kind, schema, overwrite=False, option="overwrite=True"):
    """Check, before any long work, that ``path`` may receive a JSON file.

    A missing parent directory is created; an existing file is replaced
    only if it is gear's own (its ``"schema"`` starts with ``schema``)
    and ``overwrite`` is true.

    Returns
    -------
    str
        The path.

    Raises
    ------
    FileExistsError
        The path exists and is not gear's file of this kind, or is and
        ``overwrite`` is false.
    PermissionError
        The directory cannot be written.
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        raise FileExistsError(f"{p!r} is a directory; give a file name for the {kind}")
    if os.path.lexists(p):
        try:
            with open(p) as fh:
                own = str(json.load(fh).get("schema", "")).startswith(schema)
        except (OSError, ValueError, AttributeError):
            own = False
        if not own:
            raise FileExistsError(f"{p!r} exists and is not a gear {kind}; choose a new file name")
        if not overwrite:
            raise FileExistsError(f"{p!r} holds an earlier gear {kind}; pass {option} to replace it, "
                                  "or choose a new file name")
    parent = os.path.dirname(os.path.abspath(p))
    os.makedirs(parent, exist_ok=True)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write the {kind} to {p!r}: its directory is not writable")
    return p


# ---------------------------------------------------------------------------
# Zarr stores
# ---------------------------------------------------------------------------
def _store_arrays(attrs):
    """The arrays a gear store says it holds, or None if it is not one."""
    mark = attrs.get("gear_store")
    if isinstance(mark, dict) and isinstance(mark.get("arrays"), list):
        return [str(a) for a in mark["arrays"]]
    if "gear_version" in attrs and "model_hash" in attrs:      # before the marker existed
        return list(_LEGACY_ARRAYS)
    return None


def _local_store_attrs(p):
    try:
        with open(os.path.join(p, "zarr.json")) as fh:
            meta = json.load(fh)
        return meta.get("attributes", {}) if meta.get("node_type") == "group" else None
    except (OSError, ValueError, AttributeError):
        return None


def claim_store(out, mode=None, option="mode='w'", flag="out=", resume=False):
    """Check, before any work, that a Zarr store may be created at ``out``.

    Parameters
    ----------
    out : str or path-like
        A local path (``file://`` URLs are taken as one), or a URL that
        Zarr opens through fsspec.
    mode : {None, "w"}
        ``None``: the store must not exist yet (an empty directory is
        fine).  ``"w"``: an earlier gear store there is replaced (only
        the arrays gear wrote are removed; anything else in it is refused).
    option, flag : str
        How the caller's interface says "overwrite" and names ``out`` (for
        the messages).
    resume : bool
        An earlier gear store at ``out`` is accepted as it is (to be
        continued; nothing is removed); a new path as usual.  Whether the
        store belongs to the same campaign is the caller's check.

    Raises
    ------
    FileExistsError
        ``out`` exists and is not a gear store, or is one and neither
        ``mode="w"`` nor ``resume`` is given.
    ValueError
        ``mode`` is not None or ``"w"``, or ``resume`` with ``mode="w"``.
    """
    if mode not in (None, "w"):
        raise ValueError(f"mode must be None (refuse an existing store) or 'w' (overwrite it), got {mode!r}")
    if resume and mode == "w":
        raise ValueError(f"resume continues the store at {flag} and {option} would overwrite it; "
                         "give one or the other")
    if str(out).startswith("file://"):       # a local path: checked (and created) as one
        out = str(out)[len("file://"):]
    if _is_url(out):
        return _claim_remote_store(str(out), mode, option, flag, resume)
    p = os.fspath(out)
    if os.path.lexists(p) and not os.path.isdir(p):
        raise FileExistsError(f"{p!r} exists and is a file, not a gear store; choose a new path for {flag}")
    if not os.path.isdir(p) or not os.listdir(p):
        return p
    entries = set(os.listdir(p))
    attrs = _local_store_attrs(p)
    arrays = None if attrs is None else _store_arrays(attrs)
    if arrays is None:
        raise FileExistsError(f"{p!r} exists and is not a gear store (it holds {_listing(entries)}); "
                              f"choose a new path for {flag}")
    foreign = {e for e in entries - set(arrays) - {"zarr.json"} if not _ZARR_PARTIAL.match(e)}
    if foreign:
        raise FileExistsError(f"{p!r} is a gear store that also holds files gear did not write "
                              f"({_listing(foreign)}); move them or choose a new path for {flag}")
    if resume:
        return p
    if mode != "w":
        raise FileExistsError(f"{p!r} holds a gear store from an earlier run; pass {option} to "
                              "overwrite it, or choose a new path")
    for name in entries:
        full = os.path.join(p, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.remove(full)
    return p


def _claim_remote_store(url, mode, option, flag, resume=False):
    import zarr

    try:
        root = zarr.open_group(url, mode="r")
    except (FileNotFoundError, KeyError, ValueError, zarr.errors.GroupNotFoundError):
        return url
    arrays = _store_arrays(dict(root.attrs))
    if arrays is None:
        raise FileExistsError(f"{url!r} holds a Zarr group that gear did not write; choose a new URL for {flag}")
    if resume:
        return url
    if mode != "w":
        raise FileExistsError(f"{url!r} holds a gear store from an earlier run; pass {option} to "
                              "overwrite it, or choose a new URL")
    zarr.open_group(url, mode="w")          # the group gear wrote, replaced
    return url

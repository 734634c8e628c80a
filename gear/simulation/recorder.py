"""Where a rollout's frames go: memory, or a campaign's Zarr store.

The store of ``gear.simulate(..., out=STORE)`` (format
:data:`gear._output.STORE_FORMAT`):

* arrays ``t`` (T,), ``q`` (N, T, nq), ``dq`` (N, T, nv), ``lam`` (N, T, nc)
  on constrained models, ``tau`` (N, T, nv) with ``prescribed=``; a
  :class:`gear.MaximalModel`'s run adds ``poses`` (N, T, nb, 4, 4),
  ``twists`` (N, T, nb, 6) and ``joint_error`` (N, T), with ``lam`` its
  row forces (N, T, nrows); a single rollout drops the leading N.  Their
  Zarr chunks are ``(rows, frames, width)``: ``rows`` is the campaign chunk's number of rollouts, so that
  each campaign chunk (one task on one worker) writes Zarr chunks no other
  chunk touches, and ``frames`` is ``simulate``'s ``chunk=``;
* per campaign chunk ``c``: ``attempts[c]`` (uint32, incremented when a
  task for the chunk starts), ``chunk_stats[c]`` (:data:`CHUNK_STATS`:
  wall time, dynamics evaluations, largest constraint residual, native
  loop, the projection's Gauss-Newton iterations per step; NaN where not
  applicable; stores of format 1 have the first four) and ``done[c]``
  (uint8), each entry in a Zarr chunk of its own.  ``done[c]`` is set to
  1 only after every array of the chunk has been written, so a process
  killed at any instant never leaves a half-written chunk marked
  complete;
* root attributes: the metadata (``model_hash``, ``integrator``, ``dt``,
  ``t_final``, ``steps``, ``solver``, ``gear_version``...), the
  ``gear_store`` marker (:mod:`gear._output`), ``campaign`` (the identity
  that ``resume=True`` compares, see :func:`campaign_identity`; written
  last when the store is created, so a store without it was interrupted
  while being laid out), ``campaign_id`` (random, given when the store is
  laid out: a chunk's task writes only while the store at its path still
  has its id, so a task left running by a killed client never writes
  into a store since replaced with ``mode="w"``) and, after each run,
  ``stats``.
"""
from __future__ import annotations

import hashlib
import json
import math
import pickle
import uuid

import numpy as np

from .._output import STORE_FORMAT

__all__ = ["Trajectory", "model_hash", "campaign_identity", "check_identity"]

#: the columns of a store's ``chunk_stats`` (one row per campaign chunk)
CHUNK_STATS = ("wall_time", "evaluations", "max_residual", "native", "gauss_newton_per_step")

#: the target size in bytes of one Zarr chunk of ``q``, ``dq``... that sets
#: the default number of rollouts per campaign chunk
CHUNK_BYTES = 32 * 2**20


class Trajectory:
    """Result of :func:`simulate`.

    Attributes
    ----------
    t : ndarray, shape (T,)
        Recorded times: 0 (the initial state), every ``record_every``-th
        step, and ``t_final``.
    q : ndarray, shape (T, nq) or (N, T, nq)
    dq : ndarray, shape (T, nv) or (N, T, nv)
    lam : ndarray, shape (T, nc) or (N, T, nc), or None
        Constraint multipliers at the recorded states (constrained models).
    tau : ndarray, shape (T, nv) or (N, T, nv)
        Only with ``prescribed=``: the joint torques at the recorded states
        (the actuator torques on the prescribed joints).
    stats : dict
        ``steps``, ``wall_time``, ``evaluations`` (dynamics calls per
        state), ``integrator``, ``dt``, solver counters, and for closed
        loops the largest constraint residual seen (``max_residual``):
        with ``stabilization="projection"`` the residual each step leaves
        before its projection (the recorded states are on the rows to
        1e-12), otherwise that of the states themselves; with projection
        also ``gauss_newton_per_step``, the projection's iterations per
        step and state: 1 where the first iteration reaches the rows (the
        native loop's first one takes the rows' second-order term where
        Gauss-Newton alone would need a second, the Python loop's does
        not); in a campaign, over its chunks complete so far (a store
        written before gear kept it has none).

    With ``out=`` the arrays are the Zarr arrays of the store (read them
    with ``[...]``).
    """

    def __init__(self, t, q, dq, lam, stats):
        self.t, self.q, self.dq, self.lam, self.stats = t, q, dq, lam, stats

    def __repr__(self):
        return (f"Trajectory(T={self.t.shape[0]}, q shape={tuple(self.q.shape)}, "
                f"steps={self.stats.get('steps')}, integrator={self.stats.get('integrator')!r})")


def model_hash(model):
    """SHA-256 of the arrays the kernels read (tree, joints, inertias,
    gravity): identifies the model a stored trajectory belongs to."""
    h = hashlib.sha256()
    arrays = model.arrays()
    for k in sorted(arrays):
        h.update(k.encode())
        h.update(np.ascontiguousarray(arrays[k]).tobytes())
    h.update(np.asarray(model.gravity, dtype=float).tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------
# the recorder: memory, or rows [a, b) of a store's arrays
# ---------------------------------------------------------------------------
def frame_widths(S, nc):
    """``{array: width}`` of the recorded arrays of system ``S``."""
    m = S.model
    widths = {"q": m.nq, "dq": m.nv}
    if nc is not None:
        widths["lam"] = nc
    if S.prescribed is not None:
        widths["tau"] = m.nv
    return widths


class _Recorder:
    """Collect the recorded frames of a batch of ``S.N`` rollouts.

    In memory (``root`` None) the frames fill (N, T, width) arrays.  With a
    store's group ``root`` they fill rows ``rows = (a, b)`` of its arrays,
    buffered ``chunk`` frames at a time (each flush writes whole Zarr
    chunks of this campaign chunk, except at the edges), calling ``guard()``
    (if given) before each write; ``t`` is written by the campaign, not
    here.
    """

    def __init__(self, S, T, nc, root=None, rows=None, chunk=256, guard=None):
        self.S, self.T = S, T
        N = S.N
        widths = frame_widths(S, nc)
        self.k = 0
        if root is None:
            self.buf = None
            self.arrays = {k: np.empty((N, T, w)) for k, w in widths.items()}
            self.t = np.empty(T)
            return
        self.rows, self.guard = rows, guard
        self.za = {k: root[k] for k in widths}
        self.chunk = int(chunk)
        self.buf = {k: np.empty((N, self.chunk, w)) for k, w in widths.items()}
        self.nbuf = 0

    def record(self, t, q, v, lam, tau=None):
        vals = {"q": q, "dq": v, "lam": lam, "tau": tau}
        if self.buf is None:
            self.t[self.k] = t
            for key, arr in self.arrays.items():
                arr[:, self.k] = vals[key]
        else:
            for key, arr in self.buf.items():
                arr[:, self.nbuf] = vals[key]
            self.nbuf += 1
        self.k += 1
        if self.buf is not None and self.nbuf == self.chunk:
            self.flush()

    def flush(self):
        """Write the buffered frames to the store (a no-op in memory)."""
        if self.buf is None or self.nbuf == 0:
            return
        if self.guard is not None:
            self.guard()
        a, b = self.k - self.nbuf, self.k
        r0, r1 = self.rows
        for key, arr in self.za.items():
            block = self.buf[key][:, :self.nbuf]
            if self.S.single:
                arr[a:b] = block[0]
            else:
                arr[r0:r1, a:b] = block
        self.nbuf = 0

    def result(self, stats):
        """The in-memory :class:`Trajectory`."""
        pick = (lambda x: x[0]) if self.S.single else (lambda x: x)
        tr = Trajectory(self.t, pick(self.arrays["q"]), pick(self.arrays["dq"]),
                        pick(self.arrays["lam"]) if "lam" in self.arrays else None, stats)
        if "tau" in self.arrays:
            tr.tau = pick(self.arrays["tau"])
        return tr


# ---------------------------------------------------------------------------
# campaigns: identity, layout, completion markers
# ---------------------------------------------------------------------------
def _array_id(x):
    if x is None:
        return "none"
    a = np.ascontiguousarray(np.asarray(x, dtype=float))
    h = hashlib.sha256(str(a.shape).encode())
    h.update(a.tobytes())
    return "sha256:" + h.hexdigest()


def _input_id(x):
    """An array's hash; a callable's pickle's hash (module-level functions
    pickle as their name, gear.controllers objects with their gains and
    model), or its qualified name when it cannot be pickled."""
    if x is None or not callable(x):
        return _array_id(x)
    try:
        return "pickle-sha256:" + hashlib.sha256(pickle.dumps(x, protocol=4)).hexdigest()
    except Exception:                        # lambdas, closures: named only
        return f"callable:{getattr(x, '__module__', '?')}.{getattr(x, '__qualname__', type(x).__name__)}"


def version_policy(version):
    """The part of gear's version a resumed campaign must share:
    ``major.minor`` (``"0.1.0"`` and ``"0.1.7"`` may continue each other's
    stores, ``"0.2.0"`` may not)."""
    return ".".join(str(version).split(".")[:2])


def campaign_identity(model_hash_, q, v, tau, f_ext, prescribed, t_final, dt, integrator, solver,
                      stabilization, gains, record_every, frames, rows, n_chunks, native, rtol, atol,
                      single, version, maximal=None):
    """What makes two runs the same campaign, in the order
    ``resume=True`` compares it (the first difference is reported).

    Parameters
    ----------
    model_hash_ : str
        :func:`model_hash` of the model.
    q, v : ndarray, shape (N, nq), (N, nv)
        The initial states (hashed).
    tau, f_ext : None, ndarray or callable
        Inputs as given to ``simulate`` (arrays hashed; callables by their
        pickle, see ``_input_id``).
    prescribed : dict or None
    t_final, dt, integrator, solver, stabilization, gains, record_every
        As for ``simulate`` (``gains`` only with Baumgarte stabilisation,
        ``rtol``/``atol`` only for the adaptive integrators).
    frames, rows, n_chunks : int
        The chunking: recorded frames per Zarr chunk, rollouts per
        campaign chunk, number of campaign chunks.
    native : bool
    single : bool
        A single rollout (no batch axis).
    version : str
        gear's version, compared by :func:`version_policy`.
    maximal : dict, optional
        A run of a :class:`gear.MaximalModel`: what its rows add to the
        identity (see :func:`gear.simulation.maximal.prepare_campaign`:
        the formulation, the rows' hash, ``stiffness``, ``damping``, how
        the run starts), compared right after the model hash.

    Returns
    -------
    dict
        JSON-compatible.
    """
    adaptive = integrator in ("dop853", "rk45")
    ident = {
        "gear_version": version_policy(version),
        "model_hash": model_hash_,
        **(maximal or {}),
        "solver": solver,
        "stabilization": stabilization,
        "integrator": integrator,
        "dt": float(dt),
        "t_final": float(t_final),
        "record_every": int(record_every),
        "batch": "single" if single else int(q.shape[0]),
        "q0": _array_id(q),
        "dq0": _array_id(v),
        "tau": _input_id(tau),
        "f_ext": _input_id(f_ext),
        "prescribed": None if prescribed is None else
        {str(k): _input_id(f) for k, f in sorted(prescribed.items(), key=lambda kv: str(kv[0]))},
        "baumgarte_gains": [float(g) for g in gains] if stabilization == "baumgarte" else None,
        "rtol": float(rtol) if adaptive else None,
        "atol": float(atol) if adaptive else None,
        "native": bool(native),
        "chunks": int(n_chunks),
        "rows_per_chunk": int(rows),
        "frames_per_chunk": int(frames),
    }
    return json.loads(json.dumps(ident))


def check_identity(stored, now, where):
    """Raise :class:`ValueError` naming the first key of ``now`` whose
    value differs from ``stored`` (the store's ``campaign`` attribute)."""
    if not isinstance(stored, dict):
        raise ValueError(f"resume=True: {where!r} is a gear store without a campaign record (written by "
                         "an earlier gear, or interrupted while it was being laid out); overwrite it "
                         "(mode='w', gear simulate --overwrite) or choose a new path")
    # the formulation first (a reduced run's identity has no such key);
    # keys only the stored campaign has are differences too
    kinds = [d.get("formulation", "reduced") for d in (stored, now)]
    if kinds[0] != kinds[1]:
        raise ValueError(f"resume=True: {where!r} holds a different campaign: its formulation is "
                         f"{kinds[0]!r}, this run's is {kinds[1]!r}; overwrite it (mode='w', gear simulate "
                         "--overwrite) or choose a new path")
    keys = list(now) + [k for k in stored if k not in now]
    for key in keys:
        value = now.get(key, "(missing)")
        old = stored.get(key, "(missing)")
        if old != value:
            what = "gear version (major.minor)" if key == "gear_version" else key
            raise ValueError(f"resume=True: {where!r} holds a different campaign: its {what} is "
                             f"{_short(old)}, this run's is {_short(value)}; overwrite it (mode='w', "
                             "gear simulate --overwrite) or choose a new path")


def _short(x):
    s = json.dumps(x) if not isinstance(x, str) else repr(x)
    return s if len(s) <= 40 else s[:37] + "..."


def default_rows(N, T, width, frames, slots):
    """Rollouts per campaign chunk by default: enough chunks for ``slots``
    (2 per worker thread on a cluster, 1 locally), and chunks no larger
    than :data:`CHUNK_BYTES` per Zarr chunk of all the recorded arrays
    (``width`` numbers per frame, ``frames`` frames per Zarr chunk)."""
    cap = max(1, CHUNK_BYTES // (min(T, frames) * width * 8))
    n = max(int(slots), math.ceil(N / cap))
    return max(1, math.ceil(N / min(n, N)))


def campaign_layout(out, resume, chunks, single, N, default):
    """Where a campaign writes and how it splits its batch: ``(out, root,
    stored, rows, n_chunks)`` -- the store path (absolute unless a URL), the
    existing store's group and ``campaign`` attribute when resuming (else
    None), rollouts per chunk and the chunk count.  ``chunks``: the
    requested count (None: the stored one when resuming, else
    ``default()`` rollouts per chunk); one state is one chunk."""
    import os

    from .._output import _is_url

    out = str(out) if _is_url(out) else os.path.abspath(os.fspath(out))
    root = open_store(out) if resume else None
    stored = None
    if root is not None:
        fmt = (root.attrs.get("gear_store") or {}).get("format", 1)
        if not isinstance(fmt, int) or fmt > STORE_FORMAT:
            raise ValueError(f"resume=True: {out!r} was written by a later gear (store format {fmt!r}; this "
                             f"gear writes format {STORE_FORMAT}): resume it with that gear, or overwrite it "
                             "(mode='w', gear simulate --overwrite) or choose a new path")
        stored = root.attrs.get("campaign")
        if chunks is None and isinstance(stored, dict) and stored.get("rows_per_chunk"):
            chunks = int(stored["chunks"])
    if single:
        rows = 1
    elif chunks is not None:
        rows = -(-N // min(int(chunks), N))
    else:
        rows = default()
    return out, root, stored, rows, -(-N // rows)


def create_store(out, meta, identity, widths, N, T, single, rows, n_chunks, frames, t):
    """Lay out a new campaign store at ``out`` (refuses an existing group:
    Zarr mode ``"w-"``; :func:`gear._output.claim_store` has checked the
    path) and write ``t``.  The ``campaign`` attribute is written last.

    ``widths`` maps each recorded array to what follows its (N, T) axes:
    a width, or a shape (``()`` for one number per frame, ``(nb, 4, 4)``
    for a maximal run's poses).

    Returns
    -------
    zarr.Group
    """
    import zarr

    root = zarr.open_group(str(out), mode="w-")
    names = ["t"] + list(widths) + ["done", "attempts", "chunk_stats"]
    root.attrs.update({**meta, "gear_store": {"format": STORE_FORMAT, "arrays": names}})
    lead, lead_chunk = ((), ()) if single else ((N,), (rows,))
    zt = root.create_array("t", shape=(T,), chunks=(min(T, 4096),), dtype="f8")
    for k, w in widths.items():
        tail = (int(w),) if np.ndim(w) == 0 else tuple(int(x) for x in w)
        root.create_array(k, shape=lead + (T,) + tail, chunks=lead_chunk + (min(T, frames),) + tail, dtype="f8")
    root.create_array("done", shape=(n_chunks,), chunks=(1,), dtype="u1", fill_value=0, compressors=None)
    root.create_array("attempts", shape=(n_chunks,), chunks=(1,), dtype="u4", fill_value=0,
                      compressors=None)
    ncol = len(CHUNK_STATS)
    root.create_array("chunk_stats", shape=(n_chunks, ncol), chunks=(1, ncol), dtype="f8",
                      fill_value=float("nan"), compressors=None)
    zt[:] = t
    root.attrs.update({"campaign_id": uuid.uuid4().hex, "campaign": identity})
    return root


def check_store_id(out, expected):
    """Raise :class:`RuntimeError` unless the store at ``out`` is still the
    one with ``campaign_id`` ``expected`` (re-read from the store: a task
    left running by a killed client must not write into a store that was
    since replaced with ``mode="w"``)."""
    root = open_store(out, mode="r")
    found = None if root is None else root.attrs.get("campaign_id")
    if found != expected:
        raise RuntimeError(f"the store {out!r} was replaced by another campaign while this chunk ran; "
                           "its task stops without writing")


def open_store(out, mode="r+"):
    """The group of an existing store, or None when there is none."""
    import zarr

    try:
        return zarr.open_group(str(out), mode=mode)
    except (FileNotFoundError, KeyError, zarr.errors.GroupNotFoundError, zarr.errors.NodeTypeValidationError):
        return None


def chunk_done(root, c):
    """Is campaign chunk ``c`` complete?"""
    return bool(root["done"][c])


def store_trajectory(root, stats):
    """The :class:`Trajectory` whose arrays are the store's Zarr arrays."""
    tr = Trajectory(root["t"], root["q"], root["dq"], root["lam"] if "lam" in root else None, stats)
    for k in ("tau", "poses", "twists", "joint_error"):
        if k in root:
            setattr(tr, k, root[k])
    return tr

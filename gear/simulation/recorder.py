"""Where a rollout's frames go: memory, or a Zarr store
(:class:`Trajectory`, :func:`model_hash` and the recorder)."""
from __future__ import annotations

import hashlib

import numpy as np

from .._output import STORE_FORMAT

__all__ = ["Trajectory", "model_hash"]


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
        loops the largest constraint residual seen (``max_residual``).

    With ``out=`` the arrays are the Zarr arrays of the store (read them
    with ``[...]``).
    """

    def __init__(self, t, q, dq, lam, stats):
        self.t, self.q, self.dq, self.lam, self.stats = t, q, dq, lam, stats

    def __repr__(self):
        return (f"Trajectory(T={len(self.t)}, q shape={tuple(self.q.shape)}, "
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
# output: memory or a Zarr store
# ---------------------------------------------------------------------------
class _Recorder:
    def __init__(self, S, T, nc, out, meta, chunk):
        self.S, self.T, self.out = S, T, out
        N, m = S.N, S.model
        shapes = {"q": (N, T, m.nq), "dq": (N, T, m.nv)}
        if nc is not None:
            shapes["lam"] = (N, T, nc)
        if S.prescribed is not None:
            shapes["tau"] = (N, T, m.nv)
        self.k = 0
        if out is None:
            self.arrays = {k: np.empty(s) for k, s in shapes.items()}
            self.t = np.empty(T)
            self.buf = None
            return
        try:
            import zarr
        except ImportError:
            raise ImportError("out= needs zarr: pip install 'gear[campaign]'") from None
        self.zarr = zarr
        # claim_store (in simulate) has checked the path and removed an earlier
        # gear store where mode="w" allowed it: "w-" never deletes anything
        root = zarr.open_group(str(out), mode="w-")
        root.attrs.update(meta)
        root.attrs["gear_store"] = {"format": STORE_FORMAT, "arrays": ["t"] + list(shapes)}
        lead = () if S.single else (N,)
        self.chunk = chunk
        self.zt = root.create_array("t", shape=(T,), chunks=(min(T, 4096),), dtype="f8")
        self.za = {k: root.create_array(k, shape=lead + (T, s[2]), chunks=lead + (min(T, chunk), s[2]),
                                        dtype="f8") for k, s in shapes.items()}
        self.buf = {k: np.empty((N, chunk, s[2])) for k, s in shapes.items()}
        self.tbuf = np.empty(chunk)
        self.nbuf = 0
        self.root = root

    def record(self, t, q, v, lam, tau=None):
        vals = {"q": q, "dq": v, "lam": lam, "tau": tau}
        if self.buf is None:
            self.t[self.k] = t
            for key, arr in self.arrays.items():
                arr[:, self.k] = vals[key]
        else:
            for key, arr in self.buf.items():
                arr[:, self.nbuf] = vals[key]
            self.tbuf[self.nbuf] = t
            self.nbuf += 1
        self.k += 1
        if self.buf is not None and self.nbuf == self.chunk:
            self.flush()

    def flush(self):
        if self.buf is None or self.nbuf == 0:
            return
        a, b = self.k - self.nbuf, self.k
        self.zt[a:b] = self.tbuf[:self.nbuf]
        for key, arr in self.za.items():
            block = self.buf[key][:, :self.nbuf]
            if self.S.single:
                arr[a:b] = block[0]
            else:
                arr[:, a:b] = block
        self.nbuf = 0

    def result(self, stats):
        if self.buf is None:
            pick = (lambda x: x[0]) if self.S.single else (lambda x: x)
            tr = Trajectory(self.t, pick(self.arrays["q"]), pick(self.arrays["dq"]),
                            pick(self.arrays["lam"]) if "lam" in self.arrays else None, stats)
            if "tau" in self.arrays:
                tr.tau = pick(self.arrays["tau"])
            return tr
        self.flush()
        self.root.attrs["stats"] = {k: v for k, v in stats.items() if isinstance(v, (int, float, str))}
        tr = Trajectory(self.zt, self.za["q"], self.za["dq"], self.za.get("lam"), stats)
        if "tau" in self.za:
            tr.tau = self.za["tau"]
        return tr


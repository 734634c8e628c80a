"""The articulated-body model: a Python builder that freezes into flat arrays.

A :class:`Model` is a tree of bodies, each attached to its parent by one
joint (Kim Sec. 2.1).  Bodies are added parent-first, so ``parent[i] < i``
and every recursion is a plain loop over ``i``.  The first call into a
kernel freezes the model into typed arrays (``Model.data``); adding a body
afterwards re-freezes on the next call.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from ._validate import as_array, as_batch, check_scalar
from .joints import FREE, SPHERICAL, Joint, _check_quat
from .spatial import SE3, Inertia

__all__ = ["Model"]



def _pair(na, a, abatch, nb, b, bbatch):
    """Two (N, n) batches of one size: a single state (not a batch) against
    a batch is repeated; two batches must agree."""
    if a.shape[0] == b.shape[0]:
        return a, b
    if not abatch:
        return np.ascontiguousarray(np.broadcast_to(a, (b.shape[0], a.shape[1]))), b
    if not bbatch:
        return a, np.ascontiguousarray(np.broadcast_to(b, (a.shape[0], b.shape[1])))
    raise ValueError(f"{na} and {nb} batch sizes differ: {a.shape[0]} vs {b.shape[0]}")

class Model:
    """A kinematic tree of rigid bodies.

    Parameters
    ----------
    gravity : array_like, shape (3,)
        Gravity in the world frame, applied as the base acceleration
        ``dV_0 = (0, -g)``.

    Examples
    --------
    >>> import numpy as np, gear
    >>> m = gear.Model()
    >>> b = m.add_body("link1", "world", gear.joints.Revolute([0, 0, 1]),
    ...                inertia=gear.Inertia(1.0, [0.5, 0, 0], np.diag([0.01, 0.02, 0.02])))
    >>> m.nq, m.nv, m.body_names
    (1, 1, ['link1'])
    """

    def __init__(self, gravity=(0.0, 0.0, -9.81)):
        self._gravity = as_array("gravity", gravity, (3,))
        self.body_names: list[str] = []
        self.joint_names: list[str] = []
        self.parents: list[int] = []
        self.joints: list[Joint] = []
        self.placements: list[SE3] = []
        self.inertias: list[Inertia | None] = []
        self.loop_closures: list = []
        # Named frames rigidly attached to bodies: name -> (body index, SE3 in
        # that body's frame).  Loaders record merged fixed links here.
        self.frames: dict[str, tuple[int, SE3]] = {}
        self._iq: list[int] = []
        self._iv: list[int] = []
        self.nq = 0
        self.nv = 0
        self._masks = {}            # joint selections by name (gear.algorithms.dynamics._cached)

    # -- building -----------------------------------------------------------
    def body_index(self, name):
        """Index of a body given its name or index; ``"world"`` is -1."""
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            i = int(name)
            if i < -1 or i >= len(self.body_names):
                raise IndexError(f"body index {i} out of range (model has {len(self.body_names)} bodies)")
            return i
        if name == "world":
            return -1
        try:
            return self.body_names.index(name)
        except ValueError:
            raise KeyError(f"no body named {name!r}; bodies are {self.body_names}") from None

    def joint_index(self, name):
        """Index (= body index) of a joint given its name."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(f"no joint named {name!r}; joints are {self.joint_names}") from None

    def add_body(self, name, parent, joint, placement=None, inertia=None, joint_name=None):
        """Attach a new body to ``parent`` through ``joint``.

        Parameters
        ----------
        name : str
            Unique body name.
        parent : str or int
            Parent body name or index, or ``"world"``.
        joint : gear.joints.Joint
            The joint connecting parent and body.
        placement : gear.SE3, optional
            Pose of the joint frame in the parent body frame; the body frame
            is the joint's child frame, ``T_{parent,body} = placement J(q)``.
        inertia : gear.Inertia, optional
            Body inertia in its own frame.  ``None`` makes a massless body
            (allowed only where the articulated inertia stays invertible).
        joint_name : str, optional
            Defaults to ``name``.

        Returns
        -------
        int
            The new body's index.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"body name must be a non-empty string, got {name!r}")
        if name in self.body_names or name == "world":
            raise ValueError(f"duplicate body name {name!r}")
        jname = name if joint_name is None else joint_name
        if not isinstance(jname, str) or not jname:
            raise TypeError(f"joint name must be a non-empty string, got {jname!r}")
        if jname in self.joint_names:
            raise ValueError(f"duplicate joint name {jname!r}")
        p = self.body_index(parent)
        if not isinstance(joint, Joint):
            raise TypeError(f"joint must be a gear.joints.Joint instance, got {type(joint).__name__}")
        if placement is None:
            placement = SE3()
        elif not isinstance(placement, SE3):
            placement = SE3.from_matrix(placement)
        if inertia is not None and not isinstance(inertia, Inertia):
            raise TypeError(f"inertia must be a gear.Inertia, got {type(inertia).__name__}")
        self.body_names.append(name)
        self.joint_names.append(jname)
        self.parents.append(p)
        self.joints.append(joint)
        self.placements.append(placement)
        self.inertias.append(inertia)
        self._iq.append(self.nq)
        self._iv.append(self.nv)
        self.nq += joint.nq
        self.nv += joint.nv
        self.__dict__.pop("data", None)     # (refrozen on demand)
        self._masks = {}
        return len(self.body_names) - 1

    @property
    def nbodies(self):
        return len(self.body_names)

    @property
    def gravity(self):
        return self._gravity.copy()

    @gravity.setter
    def gravity(self, g):
        self._gravity = as_array("gravity", g, (3,))
        if "data" in self.__dict__:
            self.__dict__["data"].set_gravity(self._gravity)

    def idx_q(self, name):
        """Slice of joint ``name``'s coordinates in ``q``."""
        i = self.joint_index(name)
        return slice(self._iq[i], self._iq[i] + self.joints[i].nq)

    def idx_v(self, name):
        """Slice of joint ``name``'s coordinates in ``dq`` (and ``tau``)."""
        i = self.joint_index(name)
        return slice(self._iv[i], self._iv[i] + self.joints[i].nv)

    def children(self, i):
        return [k for k, p in enumerate(self.parents) if p == i]

    def total_mass(self):
        return sum(I.mass for I in self.inertias if I is not None)

    # -- frozen arrays ------------------------------------------------------
    @functools.cached_property
    def data(self):
        """The frozen native model (``gear._core.ModelData``), made on first
        use and kept in the instance's ``__dict__`` (a plain attribute read
        after that: 20 ns where a property took 50, on every fast call)."""
        return self._freeze()

    def arrays(self):
        """The flat arrays the kernels read, as a dict of NumPy arrays."""
        nb = self.nbodies
        X = np.zeros((nb, 12))
        inertia = np.zeros((nb, 10))
        jparam = np.zeros((nb, 10))
        for i in range(nb):
            T = self.placements[i]
            X[i, :9] = T.R.ravel()
            X[i, 9:] = T.p
            jparam[i] = self.joints[i].params
            I = self.inertias[i]
            if I is not None:
                Ib = I.I_origin()
                inertia[i] = [I.mass, *(I.mass * I.com), Ib[0, 0], Ib[1, 1], Ib[2, 2],
                              Ib[0, 1], Ib[0, 2], Ib[1, 2]]
        return dict(
            parent=np.array(self.parents, dtype=np.int32),
            jtype=np.array([j.kind for j in self.joints], dtype=np.int32),
            iq=np.array(self._iq, dtype=np.int32),
            iv=np.array(self._iv, dtype=np.int32),
            nvi=np.array([j.nv for j in self.joints], dtype=np.int32),
            jparam=jparam, Xtree=X, inertia=inertia,
        )

    def _freeze(self):
        from . import _core

        if self.nbodies == 0:
            raise ValueError("the model has no moving bodies (a file whose links are all welded to the "
                             "world loads with none: nq = nv = 0); there is nothing to compute, or add "
                             "one with Model.add_body")
        a = self.arrays()
        return _core.ModelData(a["parent"], a["jtype"], a["iq"], a["iv"], a["nvi"], a["jparam"],
                               a["Xtree"], a["inertia"], self._gravity, self.nq, self.nv)

    # -- configurations -----------------------------------------------------
    def neutral(self):
        """Neutral configuration (zero angles, identity quaternions), shape (nq,)."""
        q = np.zeros(self.nq)
        for i, j in enumerate(self.joints):
            q[self._iq[i]:self._iq[i] + j.nq] = j.neutral()
        return q

    def random_configuration(self, rng=None, n=None):
        """Random configurations.

        Joint limits are respected where set (URDF ``<limit>``); unlimited
        angles are drawn uniformly from [-pi, pi], displacements from
        [-1, 1], and quaternions uniformly on the rotations (``w >= 0``).
        Limits of 1e6 and beyond count as unlimited (files write +-1e16).
        A batch is drawn joint by joint for all states at once.

        Parameters
        ----------
        rng : numpy.random.Generator or int, optional
            Generator or seed (``numpy.random.default_rng``); the same seed
            gives the same configurations.
        n : int, optional
            Number of configurations.

        Returns
        -------
        q : ndarray, shape (nq,), or (n, nq) when ``n`` is given
        """
        if n is not None:
            if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
                raise TypeError(f"n must be a non-negative integer (the number of configurations) "
                                f"or None, got {type(n).__name__} {n!r}")
            if n < 0:
                raise ValueError(f"n must be a non-negative integer (the number of configurations), got {n}")
            n = int(n)
        rng = np.random.default_rng(rng)
        q = np.zeros((self.nq,) if n is None else (n, self.nq))
        for i, j in enumerate(self.joints):
            s = slice(self._iq[i], self._iq[i] + j.nq)
            if n is None:
                q[s] = j.random(rng)
            elif "size" in inspect.signature(j.random).parameters:
                q[:, s] = j.random(rng, size=n)
            else:                             # a joint class whose random() draws one state
                q[:, s] = np.reshape([j.random(rng) for _ in range(n)], (n, j.nq))
        return q

    def check_configuration(self, q, name="q"):
        """Raise ``ValueError`` if a quaternion in ``q`` (shape (..., nq)) is not unit."""
        if q.ndim == 2 and q.dtype == np.float64 and q.flags.c_contiguous:
            from . import _core

            if self.nbodies == 0 or _core.bad_quaternion(self.data, q) is None:
                return
        for i, j in enumerate(self.joints):
            if j.kind in (SPHERICAL, FREE):
                s = self._iq[i] + j.nq
                _check_quat(q[..., s - 4:s], f"{name} (joint {self.joint_names[i]!r})")

    def integrate(self, q, dq, dt=1.0):
        """Right perturbation ``T exp(dt S dq)`` per joint (see gear.joints).

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        dq : array_like, shape (nv,) or (N, nv)
            One state against a batch is broadcast (one ``q`` moved by
            ``N`` velocities, or ``N`` configurations by one).
        dt : float

        Returns
        -------
        ndarray, shape (nq,) or (N, nq)
        """
        dt = check_scalar("dt", dt)
        qb, qbatch = as_batch("q", q, (self.nq,))
        vb, vbatch = as_batch("dq", dq, (self.nv,))
        qb, vb = _pair("q", qb, qbatch, "dq", vb, vbatch)
        batch = qbatch or vbatch
        self.check_configuration(qb)
        out = np.empty((qb.shape[0], self.nq))
        if self.nbodies:
            from . import _core
            from .algorithms.dynamics import get_num_threads

            _core.integrate(self.data, np.ascontiguousarray(qb, dtype=float),
                            np.ascontiguousarray(vb, dtype=float), dt, out, get_num_threads())
        return out if batch else out[0]

    def _integrate_reference(self, q, dq, dt=1.0):
        """:meth:`integrate` joint by joint in NumPy (``Joint.integrate``;
        the tests' reference for the native map)."""
        qb, batch = as_batch("q", q, (self.nq,))
        vb, _ = as_batch("dq", dq, (self.nv,))
        out = np.empty_like(qb)
        for i, j in enumerate(self.joints):
            sq = slice(self._iq[i], self._iq[i] + j.nq)
            sv = slice(self._iv[i], self._iv[i] + j.nv)
            out[:, sq] = j.integrate(qb[:, sq], vb[:, sv], dt)
        return out if batch else out[0]

    def difference(self, q0, q1):
        """Velocity ``v`` with ``integrate(q0, v) = q1``.

        Parameters
        ----------
        q0, q1 : array_like, shape (nq,) or (N, nq)
            One configuration against a batch is broadcast.

        Returns
        -------
        ndarray, shape (nv,) or (N, nv)
        """
        a, abatch = as_batch("q0", q0, (self.nq,))
        b, bbatch = as_batch("q1", q1, (self.nq,))
        a, b = _pair("q0", a, abatch, "q1", b, bbatch)
        batch = abatch or bbatch
        self.check_configuration(a, "q0")
        self.check_configuration(b, "q1")
        out = np.empty((a.shape[0], self.nv))
        for i, j in enumerate(self.joints):
            sq = slice(self._iq[i], self._iq[i] + j.nq)
            sv = slice(self._iv[i], self._iv[i] + j.nv)
            out[:, sv] = j.difference(a[:, sq], b[:, sq])
        return out if batch else out[0]

    def __getstate__(self):
        # the frozen native arrays are rebuilt on demand (pickle, copy.deepcopy)
        state = self.__dict__.copy()
        state.pop("data", None)
        state["_masks"] = {}
        return state

    def copy(self):
        """A deep copy (bodies, joints, inertias, frames, loop closures)."""
        import copy

        return copy.deepcopy(self)

    def __repr__(self):
        return f"Model(nbodies={self.nbodies}, nq={self.nq}, nv={self.nv})"

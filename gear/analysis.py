"""Mechanism analysis: drive one joint of a closed chain through a range.

:func:`sweep` assembles the mechanism at every value of an input joint and
records what a designer reads off a kinematic and kinetostatic analysis:
the positions of every joint, the velocity ratios (joint rates per unit
input rate), the instantaneous mobility and singular configurations, the
actuator torque that drives the input at constant speed through the closed
system's hybrid dynamics (Kim Sec. 3.3), and the closure wrenches (bearing
loads) along the way.
"""
from __future__ import annotations

import numpy as np

from .constraints import AssemblyError, ConstrainedModel

__all__ = ["sweep", "SweepResult"]


class SweepResult:
    """What :func:`sweep` recorded, one row per input value.

    Attributes
    ----------
    joint : str
    values : ndarray, shape (K,)
    assembled : ndarray of bool, shape (K,)
        False where the loops could not close (rows of the other arrays are
        NaN there).
    q : ndarray, shape (K, nq)
    ratios : ndarray, shape (K, nv)
        ``dq`` per unit input rate (the input's own entry is 1).
    dof, rank : ndarray of int, shape (K,)
    singular : ndarray of bool, shape (K,)
        Singular (or within ``singular_tol`` of singular) configurations.
    sigma_min : ndarray, shape (K,)
        Smallest non-zero singular value of ``A`` relative to the largest at
        the generic rank: it dips towards 0 near singular configurations.
    torque : ndarray, shape (K, n_input)
        Input-joint torque for constant input speed ``speed`` (gravity and
        velocity terms included, other joints passive with zero torque).
    wrenches : ndarray, shape (K, nclosures, 6)
        Closure wrenches ``(m, f)`` on ``body_b`` at frame {B}.
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    @property
    def peak_wrenches(self):
        """Largest ``|m|`` and ``|f|`` of each closure over the sweep,
        shape ``(nclosures, 2)``."""
        W = self.wrenches
        m = np.linalg.norm(W[..., :3], axis=-1)
        f = np.linalg.norm(W[..., 3:], axis=-1)
        return np.stack([np.nanmax(m, axis=0), np.nanmax(f, axis=0)], axis=-1)

    def plot(self, path=None, title=None):
        """Four panels against the input value: joint positions, velocity
        ratios, input torque, closure force magnitudes; singular
        configurations are marked by vertical lines.  Saves to ``path``
        (PNG, ...) when given; returns the matplotlib figure."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        x = self.values
        fig, ax = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
        names = self.coordinate_names
        for k, n in enumerate(names):
            ax[0, 0].plot(x, self.q[:, self.q_index[k]], label=n)
            ax[0, 1].plot(x, self.ratios[:, self.v_index[k]], label=n)
        ax[0, 0].set_ylabel("joint position")
        ax[0, 1].set_ylabel("velocity ratio  dq / d(input)")
        ax[1, 0].plot(x, self.torque)
        ax[1, 0].set_ylabel(f"input torque at {self.speed:g} rad/s")
        f = np.linalg.norm(self.wrenches[..., 3:], axis=-1)
        for c in range(f.shape[1]):
            ax[1, 1].plot(x, f[:, c], label=self.closure_names[c])
        ax[1, 1].set_ylabel("closure force |f| (N)")
        for a in ax.ravel():
            for xs in x[self.singular]:
                a.axvline(xs, color="red", lw=0.8, alpha=0.6)
            a.grid(alpha=0.3)
        for a in ax[1]:
            a.set_xlabel(f"{self.joint} (rad or m)")
        ax[0, 0].legend(fontsize=7)
        ax[1, 1].legend(fontsize=7)
        fig.suptitle(title or f"sweep of {self.joint}" + (" (red: singular)" if self.singular.any() else ""))
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
        return fig


def sweep(sys, joint, values, q0=None, speed=1.0, singular_tol=1e-5, progress=False):
    """Drive ``joint`` of a closed chain through ``values`` and record the
    kinematics and kinetostatics (see :class:`SweepResult`).

    Parameters
    ----------
    sys : gear.ConstrainedModel
    joint : str
        The input joint (its first coordinate is driven).
    values : array_like, shape (K,)
        Input positions, visited in order; each assembly starts from the
        previous one (continuation), so neighbouring values should be close.
    q0 : array_like, shape (nq,), optional
        Starting guess (default: the model's neutral configuration).
    speed : float
        Constant input rate used for the velocity terms of the torque.
    singular_tol : float
        A configuration is marked singular when :meth:`~gear.ConstrainedModel.mobility`
        says so or when ``sigma_min`` (the smallest singular value of ``A`` at
        the sweep's generic rank, relative to the largest) is below this.
        Near a singular point Newton's method converges only linearly, so an
        assembled configuration is typically ~1e-6 away from the exact
        singular one and the rank test alone misses it.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    SweepResult

    Examples
    --------
    >>> import numpy as np, gear
    >>> sys, q0 = gear.mechanisms.four_bar()
    >>> r = gear.analysis.sweep(sys, "crank", np.linspace(0.5, 1.5, 5), q0)
    >>> bool(r.assembled.all()), r.ratios.shape
    (True, (5, 3))
    """
    if not isinstance(sys, ConstrainedModel):
        raise TypeError(f"sys must be a gear.ConstrainedModel, got {type(sys).__name__}")
    model = sys.model
    j = model.joint_index(joint)
    sl_q, sl_v = model.idx_q(joint), model.idx_v(joint)
    if model.joints[j].nv == 0:
        raise ValueError(f"joint {joint!r} has no coordinate to drive")
    values = np.asarray(values, dtype=float).ravel()
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError("values must be a non-empty array of finite numbers")
    q = model.neutral() if q0 is None else sys._q(q0, "q0").copy()
    K, nq, nv = values.size, model.nq, model.nv
    nclos = sum(1 for c in sys.constraints if hasattr(c, "placement_a"))
    out = dict(q=np.full((K, nq), np.nan), ratios=np.full((K, nv), np.nan),
               dof=np.zeros(K, dtype=int), rank=np.zeros(K, dtype=int),
               singular=np.zeros(K, dtype=bool), sigma_min=np.full(K, np.nan),
               torque=np.full((K, model.joints[j].nv), np.nan),
               wrenches=np.full((K, nclos, 6), np.nan), assembled=np.zeros(K, dtype=bool))
    it = range(K)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=f"sweep {joint}", unit="pose")
    prescribed = [joint]
    ranks = []
    for k in it:
        g = q.copy()
        g[sl_q.start] = values[k]
        try:
            qk = sys.assemble(g, locked=[joint])
        except AssemblyError:
            continue
        q = qk
        e = np.zeros(nv)
        e[sl_v.start] = 1.0
        ratio = sys.project_velocity(qk, e, locked=[joint])
        mob = sys.mobility(qk)
        dq = speed * ratio
        hd = sys.hybrid_dynamics(qk, dq, np.zeros(nv), np.zeros(nv), prescribed)
        out["q"][k], out["ratios"][k] = qk, ratio
        out["dof"][k], out["rank"][k], out["singular"][k] = mob.dof, mob.rank, mob.singular
        ranks.append((k, mob.sigma))
        out["torque"][k] = hd.tau[sl_v]
        out["wrenches"][k] = sys.constraint_wrenches(qk, hd.lam)
        out["assembled"][k] = True
    if ranks:
        generic = max(int(r) for r in out["rank"][out["assembled"]])
        for k, sv in ranks:
            if generic > 0 and sv.size >= generic:
                out["sigma_min"][k] = sv[generic - 1] / sv[0]
                if out["sigma_min"][k] < singular_tol:
                    out["singular"][k] = True
    names, qidx, vidx = [], [], []
    for i, n in enumerate(model.joint_names):
        jt = model.joints[i]
        if jt.nv == 1 and jt.nq == 1:
            names.append(n)
            qidx.append(model.idx_q(n).start)
            vidx.append(model.idx_v(n).start)
    closure_names = [c.name or f"closure{i}" for i, c in enumerate(sys.constraints)
                     if hasattr(c, "placement_a")]
    return SweepResult(joint=joint, values=values, speed=float(speed), coordinate_names=names,
                       q_index=qidx, v_index=vidx, closure_names=closure_names, **out)

"""Mechanism analysis: drive one joint of a closed chain through a range.

:func:`sweep` assembles the mechanism at every value of an input joint and
records what a designer reads off a kinematic and kinetostatic analysis:
the positions of every joint, the velocity ratios (joint rates per unit
input rate), the instantaneous mobility and singular configurations, the
actuator torque that drives the input at constant speed through the closed
system's hybrid dynamics (Kim Sec. 3.3), and the closure wrenches and
the wrench every tree joint transmits (bearing loads) along the way.
"""
from __future__ import annotations

import numpy as np

from ._progress import progress_bar
from .constraints import AssemblyError, ConstrainedModel

__all__ = ["sweep", "SweepResult", "report", "AnalysisReport", "REPORT_SCHEMA", "check_output"]


#: what :func:`check_output` and :meth:`AnalysisReport.save` call the directory's contents
OUTPUT_KIND = "analysis"


def _unit(joint):
    """``"m"`` for a prismatic joint's coordinate, ``"rad"`` otherwise
    (revolute, helical: the angle)."""
    from . import joints as J

    return "m" if isinstance(joint, J.Prismatic) else "rad"


def check_output(directory, overwrite=False, option="overwrite=True"):
    """Claim ``directory`` for an analysis report before the long work.

    Call it before :func:`report` so that a directory that cannot take the
    report is refused at once, not after the sweep;
    :meth:`AnalysisReport.save` then writes into it.

    Parameters
    ----------
    directory : str or path-like
        Created if missing; an empty directory is taken as it is.
    overwrite : bool
        Replace an earlier gear analysis there (only the files gear wrote
        are removed).
    option : str
        How the caller spells "overwrite" in its error messages (the
        command line passes ``"--overwrite"``).

    Returns
    -------
    str
        The directory.

    Raises
    ------
    FileExistsError
        ``directory`` is a file, holds files gear did not write (gear
        never deletes those), holds another kind of gear output, or holds
        an earlier analysis and ``overwrite`` is false.
    """
    from ._output import claim_directory

    return claim_directory(directory, OUTPUT_KIND, overwrite=overwrite, option=option)


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
    joint_loads : ndarray, shape (K, nbodies, 6)
        The wrench each tree joint transmits to its child body
        (:meth:`gear.ConstrainedModel.joint_wrenches`): the joints' bearing
        loads.
    units : dict
        ``{coordinate name: "rad" or "m"}`` of the one-coordinate joints
        (revolute and helical joints: rad; prismatic: m).
    input_unit, effort, effort_unit : str
        The input joint's unit (``"rad"`` or ``"m"``), what drives it
        (``"torque"`` or ``"force"``) and its unit (``"N·m"`` or ``"N"``).

    Notes
    -----
    On a mechanism with more than one degree of freedom only the input is
    driven; the others are not held (:attr:`other_dof`).
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    @property
    def mobility(self):
        """The largest number of degrees of freedom over the assembled
        poses (0 when none assembled)."""
        ok = self.assembled
        return int(self.dof[ok].max()) if ok.any() else 0

    @property
    def other_dof(self):
        """How the degrees of freedom besides the input are treated during
        the sweep (None for a one-degree-of-freedom mechanism)."""
        extra = self.mobility - 1
        if extra < 1:
            return None
        return (f"{self.mobility} degrees of freedom: only {self.joint!r} is driven and the other "
                f"{'one is' if extra == 1 else f'{extra} are'} not held: each pose closes the loops "
                "from the previous one with the smallest joint change, the velocity ratios are the "
                "smallest joint rates (least squares) that give a unit input rate, and the input "
                f"{self.effort} is the one with the other joints passive (zero torque, free to "
                "accelerate under gravity)")

    def _rate_unit(self, name):
        return f"{self.units.get(name, 'rad')}/{self.input_unit}"

    @property
    def peak_wrenches(self):
        """Largest ``|m|`` and ``|f|`` of each closure over the sweep,
        shape ``(nclosures, 2)``."""
        W = self.wrenches
        m = np.linalg.norm(W[..., :3], axis=-1)
        f = np.linalg.norm(W[..., 3:], axis=-1)
        return np.stack([np.nanmax(m, axis=0), np.nanmax(f, axis=0)], axis=-1)

    @property
    def peak_joint_loads(self):
        """Largest ``|m|`` and ``|f|`` each tree joint transmits over the
        sweep, shape ``(nbodies, 2)``."""
        W = self.joint_loads
        m = np.linalg.norm(W[..., :3], axis=-1)
        f = np.linalg.norm(W[..., 3:], axis=-1)
        return np.stack([np.nanmax(m, axis=0), np.nanmax(f, axis=0)], axis=-1)

    def plot(self, path=None, title=None):
        """Four panels against the input value: joint positions, velocity
        ratios, input torque (or force), bearing force magnitudes of the
        closures and of every tree joint; singular configurations are
        marked by vertical lines, and a mechanism with more than one
        degree of freedom says how the others are treated.  Saves to
        ``path`` (PNG, ...) when given; returns the matplotlib figure."""
        import textwrap

        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        x = self.values
        fig, ax = plt.subplots(2, 2, figsize=(11, 7.4), sharex=True)
        names = self.coordinate_names
        colors = {n: f"C{k % 10}" for k, n in enumerate(names)}
        for k, n in enumerate(names):
            ax[0, 0].plot(x, self.q[:, self.q_index[k]], color=colors[n], label=f"{n} ({self.units[n]})")
            ax[0, 1].plot(x, self.ratios[:, self.v_index[k]], color=colors[n],
                          label=f"{n} ({self._rate_unit(n)})")
        kinds = sorted({self.units[n] for n in names})
        ax[0, 0].set_ylabel(f"joint position ({' or '.join(kinds) or 'rad'})")
        ax[0, 1].set_ylabel(f"velocity ratio dq / d({self.joint}) "
                            f"({kinds[0] + '/' + self.input_unit if len(kinds) == 1 else 'see legend'})")
        ax[1, 0].plot(x, self.torque, color="k")
        ax[1, 0].set_ylabel(f"input {self.effort} ({self.effort_unit})\n"
                            f"at {self.speed:g} {self.input_unit}/s")
        f = np.linalg.norm(self.wrenches[..., 3:], axis=-1)
        for c in range(f.shape[1]):
            ax[1, 1].plot(x, f[:, c], color="k", lw=1.6 - 0.3 * c, ls=["-", "--", ":"][c % 3],
                          label=f"closure {self.closure_names[c]}")
        fj = np.linalg.norm(self.joint_loads[..., 3:], axis=-1)
        for c in range(fj.shape[1]):
            n = self.joint_names[c]
            ax[1, 1].plot(x, fj[:, c], "--", lw=1, color=colors.get(n, f"C{c % 10}"), label=f"joint {n}")
        ax[1, 1].set_ylabel("bearing force |f| (N)")
        for a in ax.ravel():
            for xs in x[self.singular]:
                a.axvline(xs, color="red", lw=0.8, alpha=0.6)
            a.grid(alpha=0.3)
        for a in ax[1]:
            a.set_xlabel(f"{self.joint} ({self.input_unit})")
        ax[0, 0].legend(fontsize=7)
        ax[0, 1].legend(fontsize=7)
        ax[1, 1].legend(fontsize=7)
        head = title or f"sweep of {self.joint}" + (" (red: singular)" if self.singular.any() else "")
        note = self.other_dof
        if note:
            fig.suptitle(head + "\n" + "\n".join(textwrap.wrap(note, 150)), fontsize=9.5)
        else:
            fig.suptitle(head)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
        return fig


def sweep(sys, joint, values, q0=None, speed=1.0, singular_tol=1e-5, progress=None):
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
    progress : bool, optional
        Show a progress bar.  Default: only when standard error is a
        terminal.

    Returns
    -------
    SweepResult

    Notes
    -----
    Only ``joint`` is driven.  On a mechanism with more degrees of
    freedom the others are not held: each pose closes the loops from the
    previous one with the smallest joint change (Gauss-Newton, minimum-norm
    steps), the velocity ratios are the minimum-norm joint rates with a
    unit input rate, and the input torque is computed with the other
    joints passive (zero torque, free to accelerate).

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
               wrenches=np.full((K, nclos, 6), np.nan), assembled=np.zeros(K, dtype=bool),
               joint_loads=np.full((K, model.nbodies, 6), np.nan))
    it = progress_bar(progress, range(K), total=K, desc=f"sweep {joint}", unit="pose")
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
        out["joint_loads"][k] = sys.joint_wrenches(qk, dq, hd.ddq, hd.lam)
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
    units = {n: _unit(model.joints[model.joint_index(n)]) for n in names}
    iu = _unit(model.joints[j])
    return SweepResult(joint=joint, values=values, speed=float(speed), coordinate_names=names,
                       q_index=qidx, v_index=vidx, closure_names=closure_names,
                       joint_names=list(model.joint_names), units=units, input_unit=iu,
                       effort="force" if iu == "m" else "torque", effort_unit="N" if iu == "m" else "N·m",
                       **out)


#: JSON Schema (draft 2020-12) of :meth:`AnalysisReport.to_dict`.
REPORT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "gear mechanism analysis report",
    "type": "object",
    "required": ["schema", "gear_version", "name", "model", "mobility", "sweep"],
    "properties": {
        "schema": {"const": "gear.analyze/1"},
        "gear_version": {"type": "string"},
        "name": {"type": "string"},
        "model": {"type": "object", "required": ["nq", "nv", "bodies", "constraint_rows", "constraints"]},
        "mobility": {"type": "object",
                     "required": ["dof", "rank", "redundant_rows", "singular", "grubler"]},
        "sweep": {"type": "object",
                  "required": ["joint", "values", "assembled", "singular_values", "dof", "sigma_min",
                               "torque", "torque_range", "peak_wrenches", "peak_joint_loads", "speed"]},
    },
}


def _few(values, k=8):
    if not values:
        return "none"
    shown = ", ".join(f"{v:.4g}" for v in values[:k])
    return shown + (f", ... ({len(values)} inputs)" if len(values) > k else "")


class AnalysisReport:
    """What :func:`report` found: the mobility at the start configuration
    and a :class:`SweepResult` of the input joint.

    Attributes
    ----------
    name : str
    sys : gear.ConstrainedModel
    mobility : gear.constraints.system.Mobility
        At ``q0``.
    sweep : SweepResult
    """

    def __init__(self, name, sys, q0, mobility, sweep):
        self.name, self.sys, self.q0, self.mobility, self.sweep = name, sys, q0, mobility, sweep

    def __repr__(self):
        return (f"AnalysisReport({self.name!r}, dof={self.mobility.dof}, "
                f"singular along the sweep: {int(self.sweep.singular.sum())})")

    def to_dict(self):
        """A JSON-ready dict (schema :data:`REPORT_SCHEMA`).  NaN (input
        values where the loops do not close) become null."""
        from . import __version__

        def f(x):
            x = float(x)
            return x if np.isfinite(x) else None

        def arr(a):
            a = np.asarray(a)
            if a.dtype == bool:
                return [bool(v) for v in a.ravel()] if a.ndim == 1 else a.tolist()
            if np.issubdtype(a.dtype, np.integer):
                return a.tolist()
            return [arr(v) for v in a] if a.ndim > 1 else [f(v) for v in a]

        sys, mob, r = self.sys, self.mobility, self.sweep
        model = sys.model
        cons = [{"name": getattr(c, "name", None) or f"constraint{i}", "type": type(c).__name__,
                 "kind": getattr(c, "kind", None), "rows": int(sys._nrows[i])}
                for i, c in enumerate(sys.constraints)]
        ok = r.assembled
        tq = r.torque[ok] if ok.any() else np.zeros((0, r.torque.shape[1]))
        peaks = r.peak_wrenches if ok.any() else np.full((len(r.closure_names), 2), np.nan)
        jpeaks = r.peak_joint_loads if ok.any() else np.full((len(r.joint_names), 2), np.nan)
        return {
            "schema": "gear.analyze/1",
            "gear_version": __version__,
            "name": self.name,
            "model": {"nq": model.nq, "nv": model.nv, "bodies": model.nbodies,
                      "constraint_rows": sys.nc, "constraints": cons,
                      "joints": list(model.joint_names)},
            "mobility": {"dof": int(mob.dof), "rank": int(mob.rank),
                         "redundant_rows": [int(i) for i in mob.redundant],
                         "singular": bool(mob.singular), "grubler": int(mob.grubler)},
            "sweep": {"joint": r.joint, "speed": float(r.speed), "values": arr(r.values),
                      "assembled": arr(r.assembled),
                      "singular_values": [f(v) for v in r.values[r.singular & ok]],
                      "dof": arr(r.dof), "sigma_min": arr(r.sigma_min), "torque": arr(r.torque),
                      "torque_range": [f(tq.min()), f(tq.max())] if tq.size else [None, None],
                      "peak_wrenches": [{"closure": n, "moment": f(peaks[k, 0]), "force": f(peaks[k, 1])}
                                        for k, n in enumerate(r.closure_names)],
                      "peak_joint_loads": [{"joint": n, "moment": f(jpeaks[k, 0]), "force": f(jpeaks[k, 1])}
                                           for k, n in enumerate(r.joint_names)],
                      "q": arr(r.q), "ratios": arr(r.ratios),
                      "units": {"input": r.input_unit, "effort": r.effort, "effort_unit": r.effort_unit,
                                "coordinates": dict(r.units)},
                      "other_dof": r.other_dof},
        }

    def to_json(self, path=None):
        """The report as JSON text; written to ``path`` when given."""
        import json

        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            with open(path, "w") as fh:
                fh.write(text + "\n")
        return text

    def summary(self):
        """A few lines of text: mobility, singular inputs, torque range, peak loads."""
        d = self.to_dict()
        m, s = d["mobility"], d["sweep"]
        lines = [f"{self.name}: nv = {d['model']['nv']}, {d['model']['constraint_rows']} constraint rows",
                 f"  mobility at q0: dof {m['dof']}, rank {m['rank']}, redundant rows "
                 f"{m['redundant_rows']}, Grübler count {m['grubler']}"
                 + (", singular" if m["singular"] else ""),
                 f"  sweep of {s['joint']!r}: {sum(s['assembled'])}/{len(s['values'])} inputs assemble; "
                 f"singular at {_few(s['singular_values'])}"]
        if s["other_dof"]:
            lines.append(f"  {s['other_dof']}")
        lo, hi = s["torque_range"]
        u = s["units"]
        if lo is not None:
            lines.append(f"  input {u['effort']} at {s['speed']:g} {u['input']}/s: "
                         f"[{lo:.4g}, {hi:.4g}] {u['effort_unit']}")
        # a load below 1e-9 of the largest of its kind is rounding (a planar
        # mechanism's out-of-plane moments): shown as 0, kept in analysis.json
        loads = [p for p in s["peak_wrenches"] + s["peak_joint_loads"] if p["force"] is not None]
        big = {k: max([p[k] for p in loads], default=0.0) for k in ("force", "moment")}

        def shown(p, k):
            return "0" if p[k] <= 1e-9 * big[k] else f"{p[k]:.4g}"

        for p in loads:
            what = f"closure {p['closure']!r}" if "closure" in p else f"joint {p['joint']!r}"
            lines.append(f"  peak load on {what}: |f| {shown(p, 'force')} N, |m| {shown(p, 'moment')} N·m")
        return "\n".join(lines)

    def save(self, directory, overwrite=False):
        """Write ``analysis.json`` and ``sweep.png`` to ``directory``.

        Parameters
        ----------
        directory : str or path-like
            A new or empty directory, or (with ``overwrite``) one holding
            an earlier analysis; claimed by :func:`check_output` before
            anything is written.
        overwrite : bool
            Replace an earlier analysis there (only the files gear wrote
            are removed; a directory with anything else in it is refused
            whatever ``overwrite`` says).

        Returns
        -------
        list of str
            The two paths.

        Raises
        ------
        FileExistsError
            See :func:`check_output`.
        """
        import os

        from ._output import record_files

        directory = check_output(directory, overwrite=overwrite)
        record_files(directory, OUTPUT_KIND, ["analysis.json", "sweep.png"])
        pj = os.path.join(directory, "analysis.json")
        self.to_json(pj)
        pp = os.path.join(directory, "sweep.png")
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        fig = self.sweep.plot(pp, title=f"{self.name}: sweep of {self.sweep.joint}"
                              + (" (red: singular)" if self.sweep.singular.any() else ""))
        plt.close(fig)
        return [pj, pp]


def report(sys, joint=None, values=None, q0=None, speed=1.0, name=None, progress=None):
    """Mechanism analysis of a closed chain: mobility and redundant rows at
    ``q0``, then a :func:`sweep` of one input joint with singular
    configurations, the input torque and the peak closure loads.

    Parameters
    ----------
    sys : gear.ConstrainedModel
    joint : str, optional
        The input joint (default: the first joint with one coordinate).
    values : array_like, optional
        Input positions (default: a full turn from the joint's value in
        ``q0``, 181 points, for a revolute joint; +-0.5 about it otherwise).
    q0 : array_like, shape (nq,), optional
        An assembled configuration (default: the neutral one, assembled).
    speed : float
        Input rate for the velocity terms of the torque.
    name : str, optional
    progress : bool, optional
        Show a progress bar over the sweep.  Default: only when standard
        error is a terminal.

    Returns
    -------
    AnalysisReport

    Examples
    --------
    >>> import numpy as np, gear
    >>> sys, q0 = gear.mechanisms.four_bar()
    >>> rep = gear.analysis.report(sys, "crank", np.linspace(1.0, 1.2, 3), q0)
    >>> rep.to_dict()["mobility"]["dof"], len(rep.to_dict()["sweep"]["values"])
    (1, 3)
    """
    from . import joints as J

    if not isinstance(sys, ConstrainedModel):
        raise TypeError(f"sys must be a gear.ConstrainedModel, got {type(sys).__name__}")
    model = sys.model
    if joint is None:
        cands = [n for n, j in zip(model.joint_names, model.joints) if j.nq == 1 and j.nv == 1]
        if not cands:
            raise ValueError("the model has no one-coordinate joint to sweep; name one with joint=")
        joint = cands[0]
    try:
        ji = model.joint_index(joint)
    except KeyError:
        raise KeyError(f"joint: no joint named {joint!r}; joints are {list(model.joint_names)}") from None
    jt = model.joints[ji]
    if not (jt.nq == 1 and jt.nv == 1):
        raise ValueError(f"joint {joint!r} ({type(jt).__name__}) has {jt.nq} coordinates; sweep a "
                         "one-coordinate joint (revolute, prismatic, helical)")
    if q0 is None:
        q0 = sys.assemble(model.neutral()) if sys.nc else model.neutral()
    q0 = sys._q(q0, "q0")
    x0 = float(q0[model.idx_q(joint).start])
    if values is None:
        if isinstance(jt, J.Revolute):
            values = x0 + np.linspace(0.0, 2 * np.pi, 181)
        else:
            values = x0 + np.linspace(-0.5, 0.5, 101)
    mob = sys.mobility(q0)
    r = sweep(sys, joint, values, q0, speed=speed, progress=progress)
    return AnalysisReport(name or f"closed chain ({model.nv} dof joints, {sys.nc} rows)", sys, q0, mob, r)

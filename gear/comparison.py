"""Maximal versus reduced coordinates: one mechanism, every formulation.

:func:`compare` simulates the same closed chain (or tree) from the same
state

* in **reduced coordinates** with each hard solver (``"kkt"``, Kim's
  articulated-body route; ``"projection"``, a null-space basis of ``A``;
  ``"maximal"``, the sparse maximal KKT system mapped back to joint
  accelerations), integrated by :func:`gear.simulate` with position and
  velocity projection;
* with **soft constraints** (``"soft"``, compliant rows, no projection);
* in **maximal coordinates**: the state is every body's world pose ``T_i``
  and body twist ``V_i`` (6 coordinates per body); the accelerations ``dV``
  come from the maximal KKT system (seed 004, eq. 12) solved by CHOLMOD at
  the joint coordinates nearest to the body states
  (:func:`gear.maximal.to_reduced`), and every body is advanced on SE(3) by
  semi-implicit Euler, ``V <- V + h dV``, ``T <- T exp(h V)``, with no
  stabilisation, so the joints and loops drift as they do in a
  maximal-coordinate code.

and reports, for each run: problem sizes (``nv``, constraint rows, the
maximal system's rows and nonzeros), cost per step and per solver call,
constraint drift, energy drift and the deviation from the reference run
(the first reduced run) over time; as a table (:meth:`Comparison.table`),
PNG plots (:meth:`Comparison.plot`) and JSON (:meth:`Comparison.to_json`,
schema :data:`SCHEMA`).  :func:`scaling` times one solver call of each
solver on the N-four-bar chain for growing N: which formulation is faster
at which size.
"""
from __future__ import annotations

import json
import time

import numpy as np

__all__ = ["compare", "Comparison", "scaling", "plot_scaling", "SCHEMA", "validate"]

#: JSON Schema (draft 2020-12) of :meth:`Comparison.to_dict`.
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "gear comparison report",
    "type": "object",
    "required": ["schema", "gear_version", "name", "sizes", "settings", "runs", "series"],
    "properties": {
        "schema": {"const": "gear.compare/1"},
        "gear_version": {"type": "string"},
        "name": {"type": "string"},
        "sizes": {
            "type": "object",
            "required": ["nq", "nv", "bodies", "constraint_rows", "dof", "maximal_coordinates",
                         "maximal_rows", "nnz_J", "nnz_K", "nnz_factor"],
            "properties": {k: {"type": ["integer", "null"]} for k in
                           ["nq", "nv", "bodies", "constraint_rows", "dof", "maximal_coordinates",
                            "maximal_rows", "nnz_J", "nnz_K", "nnz_factor"]},
        },
        "settings": {
            "type": "object",
            "required": ["t_final", "dt", "integrator", "steps", "record_every"],
        },
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "formulation", "solver", "integrator", "stabilization",
                             "steps", "wall_s", "step_s", "solve_s", "max_constraint_residual",
                             "max_energy_drift", "max_deviation"],
                "properties": {
                    "name": {"type": "string"},
                    "formulation": {"enum": ["reduced", "soft", "maximal"]},
                    "solver": {"type": "string"},
                    "integrator": {"type": "string"},
                    "stabilization": {"type": ["string", "null"]},
                    "steps": {"type": "integer", "minimum": 1},
                    "wall_s": {"type": "number", "minimum": 0},
                    "step_s": {"type": "number", "minimum": 0},
                    "solve_s": {"type": "number", "minimum": 0},
                    "max_constraint_residual": {"type": "number", "minimum": 0},
                    "max_energy_drift": {"type": "number", "minimum": 0},
                    "max_deviation": {"type": "number", "minimum": 0},
                },
            },
        },
        "series": {
            "type": "object",
            "required": ["t", "residual", "energy_drift", "deviation"],
            "properties": {
                "t": {"type": "array", "items": {"type": "number"}},
                "residual": {"type": "object"},
                "energy_drift": {"type": "object"},
                "deviation": {"type": "object"},
            },
        },
    },
}


def validate(report):
    """Check a report dict (or JSON file path) against :data:`SCHEMA`
    without third-party packages; raises ``ValueError`` naming the first
    problem, returns the dict."""
    if isinstance(report, (str, bytes)) or hasattr(report, "__fspath__"):
        with open(report) as fh:
            report = json.load(fh)

    def check(node, schema, where):
        if "const" in schema and node != schema["const"]:
            raise ValueError(f"{where}: expected {schema['const']!r}, got {node!r}")
        if "enum" in schema and node not in schema["enum"]:
            raise ValueError(f"{where}: {node!r} is not one of {schema['enum']}")
        types = schema.get("type")
        if types is not None:
            types = [types] if isinstance(types, str) else types
            py = {"object": dict, "array": list, "string": str, "null": type(None),
                  "integer": int, "number": (int, float), "boolean": bool}
            ok = any(isinstance(node, py[t]) and not (t in ("integer", "number") and isinstance(node, bool))
                     for t in types)
            if not ok:
                raise ValueError(f"{where}: expected {'/'.join(types)}, got {type(node).__name__}")
        if isinstance(node, (int, float)) and not isinstance(node, bool) and "minimum" in schema:
            if not node >= schema["minimum"]:
                raise ValueError(f"{where}: {node!r} is below {schema['minimum']}")
        if isinstance(node, dict):
            for k in schema.get("required", []):
                if k not in node:
                    raise ValueError(f"{where}: missing key {k!r}")
            for k, sub in schema.get("properties", {}).items():
                if k in node:
                    check(node[k], sub, f"{where}.{k}")
        if isinstance(node, list):
            if len(node) < schema.get("minItems", 0):
                raise ValueError(f"{where}: needs at least {schema['minItems']} items")
            for i, item in enumerate(node):
                check(item, schema.get("items", {}), f"{where}[{i}]")

    check(report, SCHEMA, "report")
    series = report["series"]
    n = len(series["t"])
    names = [r["name"] for r in report["runs"]]
    for key in ("residual", "energy_drift", "deviation"):
        for name in names:
            if name not in series[key] or len(series[key][name]) != n:
                raise ValueError(f"report.series.{key}: run {name!r} needs {n} values")
    return report


# ---------------------------------------------------------------------------
def _exp_se3_batch(W):
    """``exp`` of body twists ``(w, v)``, shape (n, 6) -> (n, 4, 4)
    (Rodrigues, with the left Jacobian of SO(3) for the translation)."""
    w, v = W[:, :3], W[:, 3:]
    th = np.linalg.norm(w, axis=1)
    small = th < 1e-8
    ths = np.where(small, 1.0, th)
    A = np.where(small, 1.0 - th**2 / 6.0, np.sin(ths) / ths)
    B = np.where(small, 0.5 - th**2 / 24.0, (1.0 - np.cos(ths)) / ths**2)
    C = np.where(small, 1.0 / 6.0 - th**2 / 120.0, (ths - np.sin(ths)) / ths**3)
    K = np.zeros((len(W), 3, 3))
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -w[:, 2], w[:, 1], -w[:, 0]
    K[:, 1, 0], K[:, 2, 0], K[:, 2, 1] = w[:, 2], -w[:, 1], w[:, 0]
    K2 = K @ K
    I = np.eye(3)
    T = np.zeros((len(W), 4, 4))
    T[:, :3, :3] = I + A[:, None, None] * K + B[:, None, None] * K2
    T[:, :3, 3] = np.einsum("nij,nj->ni", I + B[:, None, None] * K + C[:, None, None] * K2, v)
    T[:, 3, 3] = 1.0
    return T


class _MaximalRun:
    """Semi-implicit Euler in maximal coordinates (body poses and twists)."""

    def __init__(self, sys):
        from .maximal import MaximalSystem

        self.sys = sys.with_solver("maximal")
        self.ms = MaximalSystem(self.sys)
        self.model = model = sys.model
        from . import joints as J

        self.angles = np.zeros(model.nq, dtype=bool)       # coordinates that are angles
        for name, j in zip(model.joint_names, model.joints):
            k = model.idx_q(name).start
            if isinstance(j, (J.Revolute, J.Universal)) or (isinstance(j, J.Helical) and j.pitch == 0.0):
                self.angles[k:k + j.nq] = True
            elif isinstance(j, J.Cylindrical):
                self.angles[k] = True
            elif isinstance(j, J.Planar):
                self.angles[k + 2] = True
        self._fast = self._setup_fast()
        I6 = self.ms.I6
        self.I6 = I6
        self.mass = I6[:, 3, 3].copy()
        Sx = I6[:, :3, 3:]
        with np.errstate(invalid="ignore", divide="ignore"):
            self.com = np.stack([Sx[:, 2, 1], Sx[:, 0, 2], Sx[:, 1, 0]], axis=1) / np.where(
                self.mass > 0, self.mass, 1.0)[:, None]

    def energy(self, P, V):
        ke = 0.5 * np.einsum("bi,bij,bj->", V, self.I6, V)
        com_w = np.einsum("bij,bj->bi", P[:, :3, :3], self.com) + P[:, :3, 3]
        return ke - float(np.einsum("b,bi,i->", self.mass, com_w, self.model.gravity))

    def _setup_fast(self):
        """Batched joint-coordinate recovery when every joint is revolute or
        prismatic (the mechanisms' case): the per-body Python loop of
        :func:`gear.maximal.to_reduced` costs ~0.2 ms per body and step."""
        from . import joints as J

        model = self.model
        if not all(isinstance(j, (J.Revolute, J.Prismatic)) for j in model.joints):
            return None
        nb = model.nbodies
        Pl = np.array([model.placements[i].homogeneous() for i in range(nb)])
        Pl_inv = np.zeros_like(Pl)
        Pl_inv[:, :3, :3] = np.transpose(Pl[:, :3, :3], (0, 2, 1))
        Pl_inv[:, :3, 3] = -np.einsum("bji,bj->bi", Pl[:, :3, :3], Pl[:, :3, 3])
        Pl_inv[:, 3, 3] = 1.0
        return dict(Pl_inv=Pl_inv, axis=np.array([j.axis for j in model.joints]),
                    rev=np.array([isinstance(j, J.Revolute) for j in model.joints]),
                    par=np.array(model.parents), iq=np.array([model.idx_q(n).start for n in model.joint_names]))

    def _reduced_fast(self, P, V):
        f = self._fast
        par, nb = f["par"], len(f["par"])
        Tp = np.broadcast_to(np.eye(4), (nb, 4, 4)).copy()
        Tp[par >= 0] = P[par[par >= 0]]
        Tp_inv = np.zeros_like(Tp)
        Tp_inv[:, :3, :3] = np.transpose(Tp[:, :3, :3], (0, 2, 1))
        Tp_inv[:, :3, 3] = -np.einsum("bji,bj->bi", Tp[:, :3, :3], Tp[:, :3, 3])
        Tp_inv[:, 3, 3] = 1.0
        X = f["Pl_inv"] @ Tp_inv @ P                               # J(q_i), the joint's own motion
        R, p, a = X[:, :3, :3], X[:, :3, 3], f["axis"]
        vee = np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], axis=1)
        ang = np.arctan2(0.5 * np.einsum("bi,bi->b", a, vee), 0.5 * (np.trace(R, axis1=1, axis2=2) - 1.0))
        disp = np.einsum("bi,bi->b", a, p)
        q = np.zeros(self.model.nq)
        q[f["iq"]] = np.where(f["rev"], ang, disp)
        # dq: the part of V_i - Ad_{T_{i,p}} V_p along S_i = (a, 0) or (0, a)
        Tip = np.linalg.inv(P) @ Tp                                # T_{i, parent}
        Rr, pr = Tip[:, :3, :3], Tip[:, :3, 3]
        Vp = np.zeros((nb, 6))
        Vp[par >= 0] = V[par[par >= 0]]
        w = np.einsum("bij,bj->bi", Rr, Vp[:, :3])
        v = np.einsum("bij,bj->bi", Rr, Vp[:, 3:]) + np.cross(pr, w)
        rel = V - np.concatenate([w, v], axis=1)
        dq = np.zeros(self.model.nv)
        dq[f["iq"]] = np.where(f["rev"], np.einsum("bi,bi->b", a, rel[:, :3]),
                               np.einsum("bi,bi->b", a, rel[:, 3:]))
        return q, dq

    def reduced(self, P, V, prev=None):
        """Joint coordinates nearest to the body states; angles continued
        from ``prev`` (to_reduced returns them in (-pi, pi])."""
        from .maximal import to_reduced

        if self._fast is not None:
            q, dq = self._reduced_fast(P, V)
        else:
            q, dq = to_reduced(self.model, P, V, tol=np.inf)
        if prev is not None:
            m = self.angles
            q[m] = prev[m] + np.remainder(q[m] - prev[m] + np.pi, 2 * np.pi) - np.pi
        return q, dq

    def residual(self, P, q):
        """Largest joint violation (the poses against the poses of the
        nearest joint coordinates) or loop residual ``|g(q)|``."""
        from .algorithms import forward_kinematics

        Pq = forward_kinematics(self.model, q)
        joint = float(np.abs(Pq[:, :3, :] - P[:, :3, :]).max()) if len(P) else 0.0
        loop = float(np.abs(self.sys.constraint_residual(q)).max(initial=0.0))
        return max(joint, loop)

    def body_accelerations(self, q, dq, ddq):
        """``dV_i = Ad_{T^{-1}} dV_p + S_i ddq_i + eta_i`` (Kim eq. 41)."""
        from .maximal import _ad_inv_mats

        ms = self.ms
        t = ms._terms(q, dq)
        X = _ad_inv_mats(t["T"])
        dV = np.empty((ms.nb, 6))
        for i in range(ms.nb):
            n, k = int(ms.nvi[i]), int(ms.iv[i])
            a = t["eta"][i].copy()
            if n:
                a += t["S"][i].reshape(6, 6)[:n, :].T @ ddq[k:k + n]
            p = ms.parents[i]
            if p >= 0:
                a += X[i] @ dV[p]
            dV[i] = a
        return dV


def _time_call(fn, min_time=0.05):
    """Best time per call of ``fn()`` (seconds): repeat until ``min_time``."""
    fn()
    best, n, total = np.inf, 1, 0.0
    while total < min_time:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        total += dt
        best = min(best, dt / n)
        n *= 2
    return best


class Comparison:
    """What :func:`compare` measured.

    Attributes
    ----------
    name : str
    sizes : dict
        ``nq``, ``nv``, ``bodies``, ``constraint_rows``, ``dof`` (mobility
        at ``q0``), and the maximal system's ``maximal_coordinates``
        (``6 bodies``), ``maximal_rows`` (joint plus loop rows), ``nnz_J``,
        ``nnz_K`` (its Schur complement ``J Mb^-1 J^T``) and
        ``nnz_factor`` (CHOLMOD's factor); None where not applicable.
    settings : dict
        ``t_final``, ``dt``, ``integrator``, ``steps``, ``record_every``.
    runs : list of dict
        One per formulation: ``name``, ``formulation`` (``"reduced"``,
        ``"soft"``, ``"maximal"``), ``solver``, ``integrator``,
        ``stabilization``, ``steps``, ``wall_s`` (whole run), ``step_s``
        (wall time per step), ``solve_s`` (one solver call at the initial
        state, best of repeats), ``max_constraint_residual``,
        ``max_energy_drift`` (``|E - E0|`` relative to the energy scale),
        ``max_deviation`` (largest ``|q - q_ref|`` on the manifold, against
        the first run).
    t : ndarray, shape (T,)
    series : dict
        ``residual``, ``energy_drift``, ``deviation``: ``{run name: ndarray
        (T,)}``.
    trajectories : dict
        ``{run name: (q (T, nq), dq (T, nv))}``.
    """

    def __init__(self, name, sizes, settings, runs, t, series, trajectories):
        self.name, self.sizes, self.settings, self.runs = name, sizes, settings, runs
        self.t, self.series, self.trajectories = t, series, trajectories

    def __repr__(self):
        return f"Comparison({self.name!r}, runs={[r['name'] for r in self.runs]})"

    def to_dict(self):
        """A JSON-ready dict (schema :data:`SCHEMA`)."""
        from . import __version__

        def num(x):
            return None if x is None else float(x)

        return {
            "schema": "gear.compare/1",
            "gear_version": __version__,
            "name": self.name,
            "sizes": {k: (None if v is None else int(v)) for k, v in self.sizes.items()},
            "settings": dict(self.settings),
            "runs": [{k: (num(v) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()}
                     for r in self.runs],
            "series": {"t": [float(x) for x in self.t],
                       **{key: {n: [float(x) for x in s] for n, s in self.series[key].items()}
                          for key in ("residual", "energy_drift", "deviation")}},
        }

    def to_json(self, path=None):
        """The report as JSON text; written to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            with open(path, "w") as fh:
                fh.write(text + "\n")
        return text

    def table(self):
        """A Markdown table: one row per run."""
        s = self.sizes
        head = (f"**{self.name}**: nv = {s['nv']}, {s['constraint_rows']} constraint rows, "
                f"dof {s['dof']}; maximal: {s['maximal_coordinates']} coordinates, "
                f"{s['maximal_rows']} rows, nnz(J) = {s['nnz_J']}, nnz(K) = {s['nnz_K']}, "
                f"nnz(L) = {s['nnz_factor']}.  {self.settings['steps']} steps of "
                f"dt = {self.settings['dt']:g} s.\n\n")
        rows = ["| run | formulation | integrator | stabilisation | µs per step | µs per solve "
                "| max residual | max energy drift | max deviation |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in self.runs:
            rows.append(f"| {r['name']} | {r['formulation']} | {r['integrator']} | "
                        f"{r['stabilization'] or 'none'} | {r['step_s'] * 1e6:,.1f} | "
                        f"{r['solve_s'] * 1e6:,.1f} | {r['max_constraint_residual']:.1e} | "
                        f"{r['max_energy_drift']:.1e} | {r['max_deviation']:.1e} |")
        ref = self.runs[0]["name"]
        dt = self.settings["dt"]
        agree = ", ".join(f"{r['name']} {r['max_deviation']:.1e} ({r['max_deviation'] / dt:.3g} dt)"
                          for r in self.runs[1:])
        tail = (f"\nLargest deviation from the reference run `{ref}` over "
                f"{self.settings['t_final']:g} s: {agree or 'no other run'}.\n") if len(self.runs) > 1 else ""
        return head + "\n".join(rows) + "\n" + tail

    def plot(self, directory, prefix=""):
        """Write PNGs to ``directory``: ``residual.png`` (constraint drift),
        ``energy.png`` (energy drift), ``deviation.png`` (distance to the
        reference run) over time (log scale), and ``cost.png`` (time per
        step and per solver call).  Returns the list of paths."""
        import os

        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        os.makedirs(directory, exist_ok=True)
        paths = []
        labels = {"residual": "constraint residual (joint + loop)",
                  "energy_drift": "|E - E0| / energy scale",
                  "deviation": "|q - q_ref| (on the manifold)"}
        files = {"residual": "residual.png", "energy_drift": "energy.png", "deviation": "deviation.png"}
        colors = {r["name"]: f"C{k % 10}" for k, r in enumerate(self.runs)}
        for key, label in labels.items():
            fig, ax = plt.subplots(figsize=(7, 4))
            for name, s in self.series[key].items():
                y = np.maximum(np.asarray(s, dtype=float), 1e-17)
                if key == "deviation" and name == self.runs[0]["name"]:
                    continue
                ax.semilogy(self.t, y, label=name, color=colors[name])
            ax.set_xlabel("t (s)")
            ax.set_ylabel(label)
            ax.set_title(f"{self.name}: {label}")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=8)
            fig.tight_layout()
            p = os.path.join(directory, prefix + files[key])
            fig.savefig(p, dpi=100)
            plt.close(fig)
            paths.append(p)
        fig, ax = plt.subplots(figsize=(7, 4))
        names = [r["name"] for r in self.runs]
        x = np.arange(len(names))
        ax.bar(x - 0.2, [r["step_s"] * 1e6 for r in self.runs], 0.4, label="per step (whole loop)",
               color=[colors[n] for n in names])
        ax.bar(x + 0.2, [r["solve_s"] * 1e6 for r in self.runs], 0.4, label="per solver call",
               color=[colors[n] for n in names], alpha=0.5, hatch="//")
        ax.set_xticks(x, names, rotation=15)
        ax.set_yscale("log")
        ax.set_ylabel("µs")
        ax.set_title(f"{self.name}: cost")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y", which="both")
        fig.tight_layout()
        p = os.path.join(directory, prefix + "cost.png")
        fig.savefig(p, dpi=100)
        plt.close(fig)
        paths.append(p)
        return paths

    def save(self, directory):
        """Write ``report.json``, ``report.md`` (the table) and the PNGs of
        :meth:`plot` to ``directory``; returns the list of paths."""
        import os

        os.makedirs(directory, exist_ok=True)
        pj = os.path.join(directory, "report.json")
        self.to_json(pj)
        pm = os.path.join(directory, "report.md")
        with open(pm, "w") as fh:
            fh.write(self.table())
        return [pj, pm] + self.plot(directory)


def compare(model_or_sys, q0=None, dq0=None, t_final=1.0, dt=1e-3, integrator="rk4",
            solvers=("kkt", "projection", "maximal", "soft"), maximal=True, tau=None,
            record_every=None, name=None, progress=False):
    """Simulate one mechanism in every formulation and compare (see
    :mod:`gear.comparison`).

    Parameters
    ----------
    model_or_sys : gear.ConstrainedModel or gear.Model
        A closed chain, or a tree (then the "constraints" are its joints
        alone, which only the maximal run can violate).
    q0 : array_like, shape (nq,), optional
        Initial configuration (default: the neutral configuration,
        assembled).
    dq0 : array_like, shape (nv,), optional
        Initial velocity (default zero; projected onto the constraints).
    t_final, dt : float
        Duration and step of every run.
    integrator : str
        Integrator of the reduced and soft runs (:func:`gear.simulate`);
        the maximal run is semi-implicit Euler on SE(3).
    solvers : sequence of str
        Reduced-coordinate runs, in order; the first hard one is the
        reference of ``max_deviation``.  ``"soft"`` runs without
        projection.
    maximal : bool
        Include the maximal-coordinate run (needs scikit-sparse, and
        :class:`gear.LoopClosure` constraints only).
    tau : array_like, shape (nv,), optional
        Constant joint torques (default zero: the mechanism moves under
        gravity, and its energy is conserved).
    record_every : int, optional
        Record every k-th step (default: about 200 frames).
    name : str, optional
        Title of the report.
    progress : bool
        Print one line per run as it finishes.

    Returns
    -------
    Comparison

    Examples
    --------
    >>> import gear
    >>> sys, q0 = gear.mechanisms.four_bar()
    >>> rep = gear.compare(sys, q0, t_final=0.05, dt=1e-3, solvers=("kkt", "soft"), maximal=False)
    >>> [r["name"] for r in rep.runs], rep.runs[0]["max_deviation"]
    (['kkt', 'soft'], 0.0)
    """
    from .constraints import ConstrainedModel
    from .model import Model
    from .simulation import simulate

    if isinstance(model_or_sys, Model):
        sys = ConstrainedModel(model_or_sys, [])
    elif isinstance(model_or_sys, ConstrainedModel):
        sys = model_or_sys
    else:
        raise TypeError(f"model_or_sys must be a gear.Model or gear.ConstrainedModel, "
                        f"got {type(model_or_sys).__name__}")
    model = sys.model
    t_final, dt = float(t_final), float(dt)
    if not (np.isfinite(t_final) and t_final > 0):
        raise ValueError(f"t_final must be a positive number, got {t_final!r}")
    if not (np.isfinite(dt) and 0 < dt <= t_final):
        raise ValueError(f"dt must be in (0, t_final], got {dt!r}")
    solvers = list(solvers)
    known = ("kkt", "projection", "maximal", "soft")
    for s in solvers:
        if s not in known:
            raise ValueError(f"solvers: unknown solver {s!r}; choose from {known}")
    if not solvers and not maximal:
        raise ValueError("nothing to compare: give at least one solver or maximal=True")
    if q0 is None:
        q0 = model.neutral()
        if sys.nc:
            q0 = sys.assemble(q0)
    q0 = sys._q(q0, "q0")
    if q0.ndim != 1:
        raise ValueError(f"q0 must be one configuration of shape ({model.nq},), got {q0.shape}")
    if sys.nc and float(np.abs(sys.constraint_residual(q0)).max()) > 1e-8:
        raise ValueError("q0 does not close the loops (constraint residual "
                         f"{float(np.abs(sys.constraint_residual(q0)).max()):.2e}); assemble it first "
                         "(ConstrainedModel.assemble)")
    dq0 = np.zeros(model.nv) if dq0 is None else sys._v(dq0, "dq0", None)
    if sys.nc:
        dq0 = sys.project_velocity(q0, dq0)
    tau0 = np.zeros(model.nv) if tau is None else sys._v(tau, "tau", None)
    steps = int(np.ceil(t_final / dt - 1e-9))
    if record_every is None:
        record_every = max(1, steps // 200)
    record_every = int(record_every)
    name = name or f"{model.nv}-dof model, {sys.nc} constraint rows"

    from .algorithms import kinetic_energy, potential_energy

    def energy(q, dq):
        return kinetic_energy(model, q, dq) + potential_energy(model, q)

    E0 = float(energy(q0, dq0))
    Escale = max(abs(E0), float(kinetic_energy(model, q0, dq0)),
                 float(np.sum([0.0 if I is None else I.mass for I in model.inertias]))
                 * float(np.linalg.norm(model.gravity)) * 1e-2, 1e-12)

    runs, series, trajs = [], {"residual": {}, "energy_drift": {}, "deviation": {}}, {}
    t_rec = None
    q_ref = None

    def deviation(q):
        return np.array([float(np.abs(model.difference(a, b)).max(initial=0.0)) for a, b in zip(q_ref, q)])

    def residual(sysx, q, dq):
        if not sysx.nc:
            return np.zeros(len(q))
        g = np.abs(sysx.constraint_residual(q)).max(axis=-1)
        A = sysx.constraint_jacobian(q)
        v = np.abs(np.einsum("tij,tj->ti", A, dq)).max(axis=-1)
        return np.maximum(g, v)

    def finish(run, q, dq, res, E):
        nonlocal q_ref
        if q_ref is None:
            q_ref = np.asarray(q)
        dev = deviation(q)
        drift = np.abs(np.asarray(E) - E0) / Escale
        run.update(max_constraint_residual=float(np.max(res)), max_energy_drift=float(np.max(drift)),
                   max_deviation=float(np.max(dev)))
        series["residual"][run["name"]] = res
        series["energy_drift"][run["name"]] = drift
        series["deviation"][run["name"]] = dev
        trajs[run["name"]] = (np.asarray(q), np.asarray(dq))
        runs.append(run)
        if progress:
            print(f"  {run['name']:<12} {run['wall_s']:8.2f} s  residual {run['max_constraint_residual']:.1e}"
                  f"  energy drift {run['max_energy_drift']:.1e}  deviation {run['max_deviation']:.1e}",
                  flush=True)

    sizes = {"nq": model.nq, "nv": model.nv, "bodies": model.nbodies, "constraint_rows": sys.nc,
             "dof": int(sys.mobility(q0).dof) if sys.nc else model.nv,
             "maximal_coordinates": 6 * model.nbodies, "maximal_rows": None, "nnz_J": None,
             "nnz_K": None, "nnz_factor": None}

    for s in solvers:
        sx = sys.with_solver(s)
        stab = None if s == "soft" else "projection"
        tr = simulate(sx, q0, dq0, t_final, dt, integrator=integrator, tau=tau0,
                      stabilization=stab, record_every=record_every)
        q, dq = np.asarray(tr.q), np.asarray(tr.dq)
        if t_rec is None:
            t_rec = np.asarray(tr.t)
        solve = _time_call(lambda: sx.forward_dynamics(q0, dq0, tau0))
        res_fd = sx.forward_dynamics(q0, dq0, tau0)
        if s == "maximal":
            st = res_fd.stats
            sizes.update(maximal_rows=st.get("rows"), nnz_J=st.get("nnz_J"), nnz_K=st.get("nnz_K"),
                         nnz_factor=st.get("nnz_factor"))
        wall = float(tr.stats["wall_time"])
        run = dict(name=s, formulation="soft" if s == "soft" else "reduced", solver=s,
                   integrator=integrator, stabilization=stab, steps=int(tr.stats["steps"]),
                   wall_s=wall, step_s=wall / max(int(tr.stats["steps"]), 1), solve_s=solve)
        finish(run, q, dq, residual(sys, q, dq), energy(q, dq))

    if maximal:
        mr = _MaximalRun(sys)
        from .maximal import from_reduced

        P, V = from_reduced(model, q0, dq0)
        P, V = P.copy(), V.copy()
        qs, dqs, res, E = [], [], [], []
        t = 0.0
        times = [0.0]

        def record(P, V):
            q, dq = mr.reduced(P, V, qs[-1] if qs else q0)
            qs.append(q)
            dqs.append(dq)
            res.append(mr.residual(P, q))
            E.append(mr.energy(P, V))
            return q, dq

        q, dq = record(P, V)
        t0 = time.perf_counter()
        for k in range(steps):
            h = min(dt, t_final - t) if k == steps - 1 else dt
            if k:
                q, dq = mr.reduced(P, V, q)
            r = mr.sys.forward_dynamics(q, dq, tau0)
            dV = mr.body_accelerations(q, dq, r.ddq)
            V = V + h * dV
            P = P @ _exp_se3_batch(h * V)
            t = t_final if k == steps - 1 else (k + 1) * dt
            if (k + 1) % record_every == 0 or k == steps - 1:
                record(P, V)
                times.append(t)
        wall = time.perf_counter() - t0
        if t_rec is None:
            t_rec = np.array(times)
        solve = _time_call(lambda: mr.sys.forward_dynamics(q0, dq0, tau0))
        st = mr.sys.forward_dynamics(q0, dq0, tau0).stats
        sizes.update(maximal_rows=st.get("rows"), nnz_J=st.get("nnz_J"), nnz_K=st.get("nnz_K"),
                     nnz_factor=st.get("nnz_factor"))
        run = dict(name="maximal-coordinates", formulation="maximal", solver="maximal",
                   integrator="euler (SE(3))", stabilization=None, steps=steps, wall_s=wall,
                   step_s=wall / steps, solve_s=solve)
        finish(run, np.array(qs), np.array(dqs), np.array(res), np.array(E))

    settings = dict(t_final=t_final, dt=dt, integrator=integrator, steps=steps, record_every=record_every)
    return Comparison(name, sizes, settings, runs, t_rec, series, trajs)


def scaling(ns=(1, 10, 100), solvers=("kkt", "projection", "maximal"), min_time=0.05, progress=False):
    """Time one forward-dynamics call of each solver on the N-four-bar chain
    (:func:`gear.mechanisms.n_four_bar`) at rest under gravity.

    Returns
    -------
    dict
        ``{"ns": [...], "nv": [...], "rows": [...], "seconds": {solver:
        [...]}, "fastest": [solver per N]}`` (JSON-ready).
    """
    from .mechanisms import n_four_bar

    out = {"ns": [int(n) for n in ns], "nv": [], "rows": [], "seconds": {s: [] for s in solvers},
           "fastest": []}
    for n in ns:
        sys, q0 = n_four_bar(int(n))
        dq, tau = np.zeros(sys.model.nv), np.zeros(sys.model.nv)
        out["nv"].append(sys.model.nv)
        out["rows"].append(sys.nc)
        best = None
        for s in solvers:
            sx = sys.with_solver(s)
            sec = _time_call(lambda: sx.forward_dynamics(q0, dq, tau), min_time)
            out["seconds"][s].append(sec)
            if best is None or sec < best[1]:
                best = (s, sec)
        out["fastest"].append(best[0])
        if progress:
            print(f"  N = {n}: " + ", ".join(f"{s} {out['seconds'][s][-1] * 1e6:,.0f} µs" for s in solvers),
                  flush=True)
    return out


def plot_scaling(sc, path=None):
    """Log-log plot of a :func:`scaling` result: time per call against N,
    one line per solver.  Saves to ``path`` when given; returns the figure."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for k, (s, secs) in enumerate(sc["seconds"].items()):
        ax.loglog(sc["ns"], np.asarray(secs) * 1e6, "o-", label=s, color=f"C{k}")
    ax.set_xlabel("N (four-bars in the chain)")
    ax.set_ylabel("µs per forward-dynamics call")
    ax.set_title("N-four-bar: one constrained forward-dynamics call")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
    return fig

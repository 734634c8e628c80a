"""Maximal versus reduced coordinates: one mechanism, every formulation.

:func:`compare` simulates the same closed chain (or tree) from the same
state

* in **reduced coordinates** with each hard solver (``"kkt"``, Kim's
  articulated-body route; ``"projection"``, a null-space basis of ``A``;
  ``"maximal"``, the sparse maximal KKT system mapped back to joint
  accelerations), integrated by :func:`gear.simulate` with position and
  velocity projection;
* with **soft constraints** (``"soft"``, compliant rows, no projection).
  Ruan's soft constraint ("Articulated rigid body systems", eq. 13,
  ``lam = -k J v``) pushes back on the velocity error ``J v``; the soft
  solver does so through its ``damping`` option, which compare sets to
  ``1 / (5 dt)`` (the velocity error decays over about five steps, the
  time constant of :func:`gear.simulate`'s Baumgarte default).  With the
  solver's own default (no damping) nothing pulls a velocity error back:
  it grows, and on the N-four-bar chain at N = 50 the explicit RK4 run
  diverges at t = 0.5 s; with ``1 / (5 dt)`` it stays within 1e-5 rad of
  the hard solvers (``h * damping = 0.2`` lies well inside the stability
  interval of RK4 and of semi-implicit Euler);
* in **maximal coordinates**: the state is every body's world pose ``T_i``
  and body twist ``V_i`` (6 coordinates per body); the accelerations ``dV``
  come from the maximal KKT system (Ruan, "Articulated rigid body
  systems", eq. 12) solved by CHOLMOD at the joint coordinates nearest to
  the body states (:func:`gear.maximal.to_reduced`), and every body is
  advanced on SE(3) by semi-implicit Euler, ``V <- V + h dV``, ``T <- T
  exp(h V)``, with no stabilisation, so the joints and loops drift as they
  do in a maximal-coordinate code.

and reports, for each run: problem sizes (``nv``, constraint rows, the
maximal system's rows and nonzeros), cost per step and per solver call,
constraint drift, energy drift and the deviation from the reference run
(the first run that completed) over time; as a table
(:meth:`Comparison.table`), PNG plots (:meth:`Comparison.plot`) and JSON
(:meth:`Comparison.to_json`, schema :data:`SCHEMA`).  :func:`scaling`
times one solver call of each solver on the N-four-bar chain for growing
N: which formulation is faster at which size.

A run that fails (its state diverges, its solver raises) does not stop the
others: it is kept in the report as failed, with a one-line reason that
names the run and what to change (:attr:`Comparison.failed`).
"""
from __future__ import annotations

import json
import re
import time

import numpy as np

__all__ = ["compare", "Comparison", "scaling", "plot_scaling", "SCHEMA", "validate", "check_output"]

#: what :func:`check_output` and :meth:`Comparison.save` call the directory's contents
OUTPUT_KIND = "compare report"

_METRICS = ("wall_s", "step_s", "solve_s", "max_constraint_residual", "max_energy_drift", "max_deviation")

#: JSON Schema (draft 2020-12) of :meth:`Comparison.to_dict`.  Version 2:
#: runs carry ``status`` (``"ok"`` or ``"failed"``) and ``error`` (the
#: reason, or null); a failed run's measurements are null and it has no
#: series; ``settings`` name the ``reference`` run and the ``energy_scale``.
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "gear comparison report",
    "type": "object",
    "required": ["schema", "gear_version", "name", "sizes", "settings", "runs", "series"],
    "properties": {
        "schema": {"const": "gear.compare/2"},
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
            "required": ["t_final", "dt", "integrator", "steps", "record_every", "reference",
                         "energy_scale"],
            "properties": {"reference": {"type": ["string", "null"]},
                           "energy_scale": {"type": "number", "minimum": 0}},
        },
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "formulation", "solver", "integrator", "stabilization",
                             "status", "error", "steps", *_METRICS],
                "properties": {
                    "name": {"type": "string"},
                    "formulation": {"enum": ["reduced", "soft", "maximal"]},
                    "solver": {"type": "string"},
                    "integrator": {"type": "string"},
                    "stabilization": {"type": ["string", "null"]},
                    "solver_options": {"type": "object"},
                    "status": {"enum": ["ok", "failed"]},
                    "error": {"type": ["string", "null"]},
                    "steps": {"type": "integer", "minimum": 1},
                    **{k: {"type": ["number", "null"], "minimum": 0} for k in _METRICS},
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
    for i, r in enumerate(report["runs"]):
        where = f"report.runs[{i}] ({r['name']!r})"
        if r["status"] == "failed":
            if not r["error"]:
                raise ValueError(f"{where}: a failed run needs its reason in 'error'")
            continue
        for k in _METRICS:
            if r[k] is None:
                raise ValueError(f"{where}: a completed run needs a number for {k!r}")
        for key in ("residual", "energy_drift", "deviation"):
            if r["name"] not in series[key] or len(series[key][r["name"]]) != n:
                raise ValueError(f"report.series.{key}: run {r['name']!r} needs {n} values")
    return report


def check_output(directory, overwrite=False, option="overwrite=True"):
    """Claim ``directory`` for a comparison report before the long work.

    Call it before :func:`compare` so that a directory that cannot take
    the report is refused at once, not after the runs; :meth:`Comparison.save`
    then writes into it.

    Parameters
    ----------
    directory : str or path-like
        Created if missing; an empty directory is taken as it is.
    overwrite : bool
        Replace an earlier gear comparison report there (only the files
        gear wrote are removed).
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
        an earlier report and ``overwrite`` is false.
    """
    from ._output import claim_directory

    return claim_directory(directory, OUTPUT_KIND, overwrite=overwrite, option=option)


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
        from .spatial.stacks import ad_inv_mats as _ad_inv_mats

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


def _short(reason, limit=60):
    """The cause in a failure reason, without the run's name and the advice
    (for plot legends)."""
    text = reason.split(": ", 1)[1] if ": " in reason else reason
    text = text.split(";", 1)[0].strip()
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _coincide(a, b):
    """Whether two positive series lie on top of each other on a log plot
    (within 0.05 decades at 90 % of the points)."""
    a, b = np.log10(np.maximum(a, 1e-17)), np.log10(np.maximum(b, 1e-17))
    return a.shape == b.shape and a.size > 0 and float(np.quantile(np.abs(a - b), 0.9)) <= 0.05


_STYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


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
        ``t_final``, ``dt``, ``integrator``, ``steps``, ``record_every``,
        ``reference`` (the run the deviations are measured against: the
        first one that completed, None if none did), ``E0`` (the energy at
        the start, J), ``energy_scale`` (J, see ``max_energy_drift``) and
        ``coordinate_unit`` (``"rad"``, ``"m"`` or ``"rad or m"``).
    runs : list of dict
        One per formulation: ``name``, ``formulation`` (``"reduced"``,
        ``"soft"``, ``"maximal"``), ``solver``, ``integrator``,
        ``stabilization``, ``solver_options`` (the soft run's),
        ``status`` (``"ok"`` or ``"failed"``), ``error`` (a failed run's
        one-line reason, else None), ``steps``, ``wall_s`` (whole run),
        ``step_s`` (wall time per step), ``solve_s`` (one solver call at
        the initial state, best of repeats), ``max_constraint_residual``,
        ``max_energy_drift`` (``max |E - E0| / E_s``, with the energy scale
        ``E_s = max(|E0|, kinetic energy at t = 0, total weight x 1 cm)``),
        ``max_deviation`` (largest ``|q - q_ref|`` on the manifold, against
        the reference run).  A failed run's measurements are None.
    t : ndarray, shape (T,)
    series : dict
        ``residual``, ``energy_drift``, ``deviation``: ``{run name: ndarray
        (T,)}``, for the runs that completed.
    trajectories : dict
        ``{run name: (q (T, nq), dq (T, nv))}``, for the runs that
        completed.
    """

    def __init__(self, name, sizes, settings, runs, t, series, trajectories):
        self.name, self.sizes, self.settings, self.runs = name, sizes, settings, runs
        self.t, self.series, self.trajectories = t, series, trajectories

    def __repr__(self):
        bad = f", failed={list(self.failed)}" if self.failed else ""
        return f"Comparison({self.name!r}, runs={[r['name'] for r in self.runs]}{bad})"

    @property
    def failed(self):
        """``{run name: reason}`` of the runs that failed (empty when all
        completed).  Every run failed when ``len(failed) == len(runs)``."""
        return {r["name"]: r["error"] for r in self.runs if r.get("status") == "failed"}

    @property
    def completed(self):
        """The runs that completed, in order."""
        return [r for r in self.runs if r.get("status", "ok") == "ok"]

    def to_dict(self):
        """A JSON-ready dict (schema :data:`SCHEMA`)."""
        from . import __version__

        def num(x):
            return None if x is None else float(x)

        def clean(v):
            if isinstance(v, (float, np.floating)):
                return num(v)
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return v

        return {
            "schema": "gear.compare/2",
            "gear_version": __version__,
            "name": self.name,
            "sizes": {k: (None if v is None else int(v)) for k, v in self.sizes.items()},
            "settings": clean(dict(self.settings)),
            "runs": [clean(dict(r)) for r in self.runs],
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
        """A Markdown table: one row per run; failed runs with their
        reason below it."""
        s = self.sizes
        st = self.settings
        head = (f"**{self.name}**: nv = {s['nv']}, {s['constraint_rows']} constraint rows, "
                f"dof {s['dof']}; maximal: {s['maximal_coordinates']} coordinates, "
                f"{s['maximal_rows']} rows, nnz(J) = {s['nnz_J']}, nnz(K) = {s['nnz_K']}, "
                f"nnz(L) = {s['nnz_factor']}.  {st['steps']} steps of "
                f"dt = {st['dt']:g} s.\n\n")
        rows = ["| run | formulation | integrator | stabilisation | µs per step | µs per solve "
                "| max residual | max energy drift | max deviation |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in self.runs:
            stab = r["stabilization"] or "none"
            damping = (r.get("solver_options") or {}).get("damping")
            if damping:
                stab += f"; damping {damping:g}/s"
            lead = f"| {r['name']} | {r['formulation']} | {r['integrator']} | {stab} | "
            if r.get("status") == "failed":
                rows.append(lead + "failed | – | – | – | – |")
                continue
            rows.append(lead + f"{r['step_s'] * 1e6:,.1f} | {r['solve_s'] * 1e6:,.1f} | "
                        f"{r['max_constraint_residual']:.1e} | {r['max_energy_drift']:.1e} | "
                        f"{r['max_deviation']:.1e} |")
        done = self.completed
        ref = st.get("reference")
        dt = st["dt"]
        tail = ""
        if ref is not None and len(done) > 1:
            agree = ", ".join(f"{r['name']} {r['max_deviation']:.1e} ({r['max_deviation'] / dt:.3g} dt)"
                              for r in done if r["name"] != ref)
            tail += f"\nLargest deviation from the reference run `{ref}` over {st['t_final']:g} s: {agree}.\n"
        if "energy_scale" in st:
            tail += (f"\nEnergy drift: max |E − E0| / E_s, with E0 = {st['E0']:.4g} J and the energy scale "
                     f"E_s = max(|E0|, kinetic energy at t = 0, total weight × 1 cm) = "
                     f"{st['energy_scale']:.4g} J.\n")
        if self.failed:
            tail += "\nFailed runs (the others are kept):\n\n" + "\n".join(
                f"- `{n}`: {reason}" for n, reason in self.failed.items()) + "\n"
        return head + "\n".join(rows) + "\n" + tail

    def plot(self, directory, prefix="", overwrite=False):
        """Write the PNGs: ``residual.png`` (constraint drift),
        ``energy.png`` (energy drift, J), ``deviation.png`` (distance to
        the reference run) over time (log scale), and ``cost.png`` (time
        per step and per solver call).  Failed runs are listed in the
        legends with their reason.

        Parameters
        ----------
        directory : str or path-like
            Claimed like :meth:`save` does (see :func:`check_output`).
        prefix : str
            Put in front of every file name.
        overwrite : bool
            Replace an earlier comparison report in ``directory``.

        Returns
        -------
        list of str
            The paths written.
        """
        directory = check_output(directory, overwrite=overwrite)
        return self._plot(directory, prefix)

    _FILES = {"residual": "residual.png", "energy_drift": "energy.png", "deviation": "deviation.png",
              "cost": "cost.png"}

    def _plot(self, directory, prefix=""):
        import os

        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        from ._output import record_files

        record_files(directory, OUTPUT_KIND, [prefix + f for f in self._FILES.values()])
        paths = []
        for key, fig in self.figures().items():
            p = os.path.join(directory, prefix + self._FILES[key])
            fig.savefig(p, dpi=100)
            plt.close(fig)
            paths.append(p)
        return paths

    def figures(self):
        """The figures of :meth:`plot`, not saved: ``{"residual", "energy_drift",
        "deviation", "cost": matplotlib Figure}`` (close them when done)."""
        import matplotlib.pyplot as plt

        figs = {}
        st = self.settings
        ref = st.get("reference")
        unit = st.get("coordinate_unit", "rad or m")
        escale = float(st.get("energy_scale", 1.0))
        E0 = st.get("E0")
        order = [r["name"] for r in self.runs]
        style = {n: dict(color=f"C{k % 10}", ls=_STYLES[k % len(_STYLES)], marker=_MARKERS[k % len(_MARKERS)])
                 for k, n in enumerate(order)}
        failed = self.failed
        t = np.asarray(self.t, dtype=float)
        panels = {
            "residual": ("constraint residual: |g(q)| (m, rad) and |A dq| (m/s, rad/s), the larger",
                         "constraint residual (m, rad; m/s, rad/s)", 1.0),
            "energy_drift": ("energy drift |E − E0|" + (f", E0 = {E0:.4g} J" if E0 is not None else ""),
                             "|E − E0| (J)", escale),
            "deviation": (f"deviation from the reference run {ref!r}" if ref else "deviation (no run completed)",
                          f"max |q − q_{ref or 'ref'}| ({unit})", 1.0),
        }
        for key, (title, ylabel, factor) in panels.items():
            fig, ax = plt.subplots(figsize=(9.5, 4.2))
            shown = [n for n in order if n in self.series[key] and not (key == "deviation" and n == ref)]
            ys = {n: np.maximum(np.asarray(self.series[key][n], dtype=float) * factor, 1e-17) for n in shown}
            # runs whose curves lie on top of each other: say so in the legend
            groups, seen = [], set()
            for a in shown:
                if a in seen:
                    continue
                g = [a] + [b for b in shown if b != a and b not in seen and _coincide(ys[a], ys[b])]
                seen.update(g)
                if len(g) > 1:
                    groups.append(g)
            every = max(1, len(t) // 8)
            for k, n in enumerate(shown):
                # markers at sparse, staggered points: coinciding curves all stay visible
                ax.semilogy(t, ys[n], label=n, lw=1.4, ms=5, mfc="none",
                            markevery=(min(k * every // max(len(shown), 1), max(len(t) - 1, 0)), every),
                            **style[n])
            for g in groups:
                ax.plot([], [], " ", label=" and ".join([", ".join(g[:-1]), g[-1]]) + " coincide")
            if key == "deviation" and ref:
                ax.plot([], [], " ", label=f"{ref}: the reference (deviation 0)")
            for n, reason in failed.items():
                ax.plot([], [], " ", label=f"{n} (failed: {_short(reason)})")
            if not shown:
                ax.text(0.5, 0.5, "no run to show" if not failed else "no run completed", ha="center",
                        va="center", transform=ax.transAxes)
            ax.set_xlabel("t (s)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{self.name}: {title}", fontsize=10)
            ax.grid(alpha=0.3, which="both")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
            fig.tight_layout()
            figs[key] = fig
        from matplotlib.patches import Patch

        fig, ax = plt.subplots(figsize=(9.5, 4.2))
        x = np.arange(len(order))
        ok = [r.get("status", "ok") == "ok" for r in self.runs]
        step = [r["step_s"] * 1e6 if o else np.nan for r, o in zip(self.runs, ok)]
        solve = [r["solve_s"] * 1e6 if o else np.nan for r, o in zip(self.runs, ok)]
        colors = [style[n]["color"] for n in order]
        ax.bar(x - 0.2, step, 0.4, color=colors)
        ax.bar(x + 0.2, solve, 0.4, color=colors, alpha=0.5, hatch="//")
        handles = [Patch(facecolor="0.35", label="per step (whole loop)"),
                   Patch(facecolor="0.35", alpha=0.5, hatch="//", label="per solver call")]
        ax.set_xticks(x, [n + ("\n(failed)" if not o else "") for n, o in zip(order, ok)], rotation=15)
        if any(ok):
            ax.set_yscale("log")
        ax.set_ylabel("time (µs)")
        ax.set_title(f"{self.name}: cost", fontsize=10)
        handles += [Patch(facecolor="none", edgecolor="none", label=f"{n} (failed: {_short(reason)})")
                    for n, reason in failed.items()]
        ax.legend(handles=handles, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        ax.grid(alpha=0.3, axis="y", which="both")
        fig.tight_layout()
        figs["cost"] = fig
        return figs

    def save(self, directory, overwrite=False):
        """Write ``report.json``, ``report.md`` (the table) and the PNGs of
        :meth:`plot` to ``directory``.

        Parameters
        ----------
        directory : str or path-like
            A new or empty directory, or (with ``overwrite``) one holding
            an earlier comparison report; claimed by :func:`check_output`
            before anything is written.
        overwrite : bool
            Replace an earlier comparison report there (only the files
            gear wrote are removed; a directory with anything else in it
            is refused whatever ``overwrite`` says).

        Returns
        -------
        list of str
            The paths written.

        Raises
        ------
        FileExistsError
            See :func:`check_output`.
        """
        import os

        from ._output import record_files

        directory = check_output(directory, overwrite=overwrite)
        record_files(directory, OUTPUT_KIND, ["report.json", "report.md"])
        pj = os.path.join(directory, "report.json")
        self.to_json(pj)
        pm = os.path.join(directory, "report.md")
        with open(pm, "w") as fh:
            fh.write(self.table())
        return [pj, pm] + self._plot(directory)


# gear.simulate's advice names its own options (integrator='implicit'), which
# compare does not take: it is replaced by compare's
_SIMULATE_ADVICE = re.compile(r";\s*reduce dt\b.*$")


def _failure(run, exc, dt):
    """The one-line reason a run failed: what happened and what to change,
    in :func:`compare`'s own terms (``dt``, ``solvers``, ``maximal``)."""
    import numpy.linalg

    text = " ".join(str(exc).split()) or type(exc).__name__
    text = _SIMULATE_ADVICE.sub("", text).rstrip(" ;.")
    if not isinstance(exc, (ValueError, FloatingPointError, numpy.linalg.LinAlgError)):
        text = f"{type(exc).__name__}: {text}"
    diverged = (isinstance(exc, (FloatingPointError, numpy.linalg.LinAlgError))
                or "non-finite" in text or "not positive definite" in text)
    leave = ("leave out the maximal-coordinate run (maximal=False)" if run == "maximal-coordinates"
             else f"leave {run!r} out of solvers")
    advice = f"reduce dt (it was {dt:g} s) or {leave}" if diverged else leave
    return f"the {run} run failed: {text}; {advice}"


def _coordinate_unit(model):
    from . import joints as J

    angular, linear = False, False
    for j in model.joints:
        if j.nv == 0:
            continue
        if isinstance(j, (J.Revolute, J.Universal, J.Spherical)):
            angular = True
        elif isinstance(j, J.Prismatic):
            linear = True
        else:
            angular = linear = True
    return "rad or m" if angular == linear else ("rad" if angular else "m")


def compare(model_or_sys, q0=None, dq0=None, t_final=1.0, dt=1e-3, integrator="rk4",
            solvers=("kkt", "projection", "maximal", "soft"), maximal=True, tau=None,
            record_every=None, name=None, progress=None, soft_options=None):
    """Simulate one mechanism in every formulation and compare (see
    :mod:`gear.comparison`).

    A run that fails does not stop the others: it is recorded in the
    report as failed with its reason (:attr:`Comparison.failed`), and the
    runs that completed are compared.  Only bad arguments raise.

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
    solvers : sequence of str or gear.solvers.ConstraintSolver subclasses
        Reduced-coordinate runs, in order: the built-in solvers
        (``"kkt"``, ``"projection"``, ``"maximal"``, ``"soft"``), a
        registered plugin's name, or a solver class.  Hard solvers run
        with projection; soft ones (``hard = False``) without.  The first
        run that completes is the reference of ``max_deviation``.
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
    progress : bool, optional
        A progress bar over the runs, with one line per finished run.
        Default: only when standard error is a terminal.
    soft_options : dict, optional
        Options of the ``"soft"`` run's solver.  Default ``{"damping": 1 /
        (5 dt)}``: the constraints' velocity error ``A dq`` decays over
        about five steps (Ruan, "Articulated rigid body systems", eq. 13:
        the soft constraint force opposes the velocity error).  Without
        damping (the solver's own default) nothing pulls a velocity error
        back: on the N-four-bar chain the soft run then drifts 4e-3 rad
        from the hard solvers at N = 10 in 1 s and diverges at N = 50;
        with ``1 / (5 dt)`` it stays within 2e-6 rad at N = 10 and 1e-5
        rad at N = 50.

    Returns
    -------
    Comparison

    Raises
    ------
    ValueError, TypeError
        Bad arguments (before any run starts).

    Examples
    --------
    >>> import gear
    >>> sys, q0 = gear.mechanisms.four_bar()
    >>> rep = gear.compare(sys, q0, t_final=0.05, dt=1e-3, solvers=("kkt", "soft"), maximal=False)
    >>> [r["name"] for r in rep.runs], rep.runs[0]["max_deviation"], rep.failed
    (['kkt', 'soft'], 0.0, {})
    """
    from ._progress import progress_bar, wants_progress
    from .constraints import ConstrainedModel
    from .model import Model
    from .simulation import INTEGRATORS, simulate
    from .solvers import ConstraintSolver, available, get_solver

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
    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator: unknown integrator {integrator!r}; choose one of {list(INTEGRATORS)}")
    if isinstance(solvers, str):
        solvers = [s for s in solvers.split(",") if s]
    classes = []
    for s in solvers:
        if isinstance(s, type) and issubclass(s, ConstraintSolver):
            if not s.name:
                raise ValueError(f"solvers: solver class {s.__name__} has no name; set its 'name' attribute")
            classes.append(s)
        elif isinstance(s, str) and s in available():
            classes.append(get_solver(s))
        else:
            raise ValueError(f"solvers: unknown solver {s!r}; choose from {available()} "
                             "or pass a gear.solvers.ConstraintSolver subclass")
    run_names = [c.name for c in classes]
    dup = sorted({n for n in run_names if run_names.count(n) > 1})
    if dup:
        raise ValueError(f"solvers: {dup} given more than once; give each solver once")
    if not classes and not maximal:
        raise ValueError("nothing to compare: give at least one solver or maximal=True")
    soft_options = {"damping": 0.2 / dt} if soft_options is None else dict(soft_options)
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
    soft_sys = None
    if "soft" in run_names:
        try:                                  # bad options raise here, before any run
            soft_sys = sys.with_solver("soft", **soft_options)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"soft_options: {exc}") from None

    from .algorithms import kinetic_energy, potential_energy

    def energy(q, dq):
        return kinetic_energy(model, q, dq) + potential_energy(model, q)

    E0 = float(energy(q0, dq0))
    Escale = max(abs(E0), float(kinetic_energy(model, q0, dq0)),
                 float(np.sum([0.0 if I is None else I.mass for I in model.inertias]))
                 * float(np.linalg.norm(model.gravity)) * 1e-2, 1e-12)

    runs, series, trajs = [], {"residual": {}, "energy_drift": {}, "deviation": {}}, {}
    t_rec = None
    ref = {"name": None, "q": None}

    def deviation(q):
        return np.array([float(np.abs(model.difference(a, b)).max(initial=0.0)) for a, b in zip(ref["q"], q)])

    def residual(sysx, q, dq):
        if not sysx.nc:
            return np.zeros(len(q))
        g = np.abs(sysx.constraint_residual(q)).max(axis=-1)
        A = sysx.constraint_jacobian(q)
        v = np.abs(np.einsum("tij,tj->ti", A, dq)).max(axis=-1)
        return np.maximum(g, v)

    sizes = {"nq": model.nq, "nv": model.nv, "bodies": model.nbodies, "constraint_rows": sys.nc,
             "dof": int(sys.mobility(q0).dof) if sys.nc else model.nv,
             "maximal_coordinates": 6 * model.nbodies, "maximal_rows": None, "nnz_J": None,
             "nnz_K": None, "nnz_factor": None}

    def finish(run, q, dq, res, E):
        q, res, E = np.asarray(q), np.asarray(res, dtype=float), np.asarray(E, dtype=float)
        if not (np.isfinite(q).all() and np.isfinite(res).all() and np.isfinite(E).all()):
            raise FloatingPointError("the state became non-finite")
        dev = deviation(q) if ref["q"] is not None else np.zeros(len(q))
        drift = np.abs(E - E0) / Escale
        run.update(status="ok", error=None, max_constraint_residual=float(np.max(res)),
                   max_energy_drift=float(np.max(drift)), max_deviation=float(np.max(dev)))
        series["residual"][run["name"]] = res
        series["energy_drift"][run["name"]] = drift
        series["deviation"][run["name"]] = dev
        trajs[run["name"]] = (q, np.asarray(dq))
        if ref["q"] is None:
            ref.update(name=run["name"], q=q)

    def reduced_run(cls):
        nonlocal t_rec
        s = cls.name
        sx = soft_sys if s == "soft" else sys.with_solver(cls)
        stab = "projection" if cls.hard else None
        run = dict(name=s, formulation="reduced" if cls.hard else "soft", solver=s, integrator=integrator,
                   stabilization=stab, steps=steps)
        if s == "soft":
            run["solver_options"] = dict(sx.solver.options)
        runs.append(run)
        tr = simulate(sx, q0, dq0, t_final, dt, integrator=integrator, tau=tau0,
                      stabilization=stab, record_every=record_every, progress=False)
        q, dq = np.asarray(tr.q), np.asarray(tr.dq)
        solve = _time_call(lambda: sx.forward_dynamics(q0, dq0, tau0))
        if s == "maximal":
            st = sx.forward_dynamics(q0, dq0, tau0).stats
            sizes.update(maximal_rows=st.get("rows"), nnz_J=st.get("nnz_J"), nnz_K=st.get("nnz_K"),
                         nnz_factor=st.get("nnz_factor"))
        wall = float(tr.stats["wall_time"])
        run.update(steps=int(tr.stats["steps"]), wall_s=wall, step_s=wall / max(int(tr.stats["steps"]), 1),
                   solve_s=solve)
        finish(run, q, dq, residual(sys, q, dq), energy(q, dq))
        if t_rec is None:
            t_rec = np.asarray(tr.t)

    def maximal_run():
        nonlocal t_rec
        run = dict(name="maximal-coordinates", formulation="maximal", solver="maximal",
                   integrator="euler (SE(3))", stabilization=None, steps=steps)
        runs.append(run)
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
            if not (np.isfinite(V).all() and np.isfinite(P).all()):
                raise FloatingPointError(f"the body states became non-finite at t = {t:g} s (step {k + 1})")
            if (k + 1) % record_every == 0 or k == steps - 1:
                record(P, V)
                times.append(t)
        wall = time.perf_counter() - t0
        solve = _time_call(lambda: mr.sys.forward_dynamics(q0, dq0, tau0))
        st = mr.sys.forward_dynamics(q0, dq0, tau0).stats
        sizes.update(maximal_rows=st.get("rows"), nnz_J=st.get("nnz_J"), nnz_K=st.get("nnz_K"),
                     nnz_factor=st.get("nnz_factor"))
        run.update(wall_s=wall, step_s=wall / steps, solve_s=solve)
        finish(run, np.array(qs), np.array(dqs), np.array(res), np.array(E))
        if t_rec is None:
            t_rec = np.array(times)

    jobs = [(c.name, (lambda c=c: reduced_run(c))) for c in classes]
    if maximal:
        jobs.append(("maximal-coordinates", maximal_run))
    show = wants_progress(progress)
    bar = progress_bar(show, total=len(jobs), desc="gear compare", unit="run")
    try:
        for run_name, job in jobs:
            bar.set_postfix_str(run_name)
            try:
                job()
            except Exception as exc:          # keep the other runs; the reason goes in the report
                run = runs[-1] if runs and runs[-1]["name"] == run_name else None
                if run is None:
                    run = dict(name=run_name, formulation="reduced", solver=run_name,
                               integrator=integrator, stabilization=None, steps=steps)
                    runs.append(run)
                run.update(status="failed", error=_failure(run_name, exc, dt),
                           **{k: None for k in _METRICS})
                for key in series:
                    series[key].pop(run_name, None)
                trajs.pop(run_name, None)
            r = runs[-1]
            if show:
                bar.write(f"  {r['name']:<20} FAILED: {r['error']}" if r["status"] == "failed" else
                          f"  {r['name']:<20} {r['wall_s']:8.2f} s  residual {r['max_constraint_residual']:.1e}"
                          f"  energy drift {r['max_energy_drift']:.1e}  deviation {r['max_deviation']:.1e}")
            bar.update(1)
    finally:
        bar.close()

    settings = dict(t_final=t_final, dt=dt, integrator=integrator, steps=steps, record_every=record_every,
                    reference=ref["name"], E0=E0, energy_scale=Escale,
                    coordinate_unit=_coordinate_unit(model))
    return Comparison(name, sizes, settings, runs, np.zeros(0) if t_rec is None else t_rec, series, trajs)


def scaling(ns=(1, 10, 100), solvers=("kkt", "projection", "maximal"), min_time=0.05, progress=None):
    """Time one forward-dynamics call of each solver on the N-four-bar chain
    (:func:`gear.mechanisms.n_four_bar`) at rest under gravity.

    Parameters
    ----------
    ns : sequence of int
        Chain lengths N.
    solvers : sequence of str
    min_time : float
        Repeat each call for at least this long (s); the best time counts.
    progress : bool, optional
        A progress bar over N, with one line per N.  Default: only when
        standard error is a terminal.

    Returns
    -------
    dict
        ``{"ns": [...], "nv": [...], "rows": [...], "seconds": {solver:
        [...]}, "fastest": [solver per N]}`` (JSON-ready).
    """
    from ._progress import progress_bar, wants_progress
    from .mechanisms import n_four_bar

    out = {"ns": [int(n) for n in ns], "nv": [], "rows": [], "seconds": {s: [] for s in solvers},
           "fastest": []}
    show = wants_progress(progress)
    bar = progress_bar(show, total=len(out["ns"]), desc="gear scaling", unit="N")
    try:
        for n in out["ns"]:
            bar.set_postfix_str(f"N = {n}")
            sys, q0 = n_four_bar(n)
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
            if show:
                bar.write(f"  N = {n}: " + ", ".join(f"{s} {out['seconds'][s][-1] * 1e6:,.0f} µs"
                                                     for s in solvers))
            bar.update(1)
    finally:
        bar.close()
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

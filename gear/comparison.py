"""Maximal versus reduced coordinates: one mechanism, every formulation,
several integrators, measured against a high-accuracy reference.

:func:`compare` simulates the same closed chain (or tree) from the same
state, once per *run*; a run is a formulation, an integrator and a
stabilisation:

* **reduced coordinates** (formulation ``"reduced"``), one run per hard
  solver and integrator: ``"kkt"`` (Kim's articulated-body route),
  ``"projection"`` (a null-space basis of ``A``), ``"maximal"`` (the
  sparse maximal KKT system mapped back to joint accelerations), each
  integrated by :func:`gear.simulate` with position and velocity
  projection.  The joints hold exactly by construction; only the loop
  closures can drift, and the projection removes that drift.
* **soft constraints** (``"soft"``): compliant loop rows, no projection.
  Ruan's soft constraint ("Articulated rigid body systems", eq. 13,
  ``lam = -k J v``) pushes back on the velocity error; the soft solver
  does so through its ``damping`` option, which compare sets to ``1 / (5
  dt)`` (the velocity error decays over about five steps of the study's
  ``dt``; without it the N-four-bar chain at N = 50 diverges).
* **maximal coordinates** (``"maximal"``): :class:`gear.MaximalModel`
  advanced by :func:`gear.simulate`: every body's world pose and twist is
  the state, joints and loops are rows of ``J``; ``"euler"`` is Ruan's
  velocity-level step (eq. 12), ``"rk4"``/``"rkmk4"`` the classical
  tableau on the acceleration-level system.  Each integrator runs with
  projection onto the rows and once without any stabilisation, so that
  the joints' drift is shown as it is.

By default every formulation runs with ``"euler"`` and ``"rk4"``.  Run
names read ``"kkt / rk4"``, ``"soft / euler"``, ``"maximal / rk4"``
(maximal coordinates, projected) and ``"maximal / rk4, unstabilised"``;
the reduced run with the ``"maximal"`` solver is ``"maximal solver /
rk4"``.

**The reference.**  Every run is measured against one reference
trajectory: the reduced ``"kkt"`` solver with ``"rkmk4"`` and projection
at ``dt / 64`` (:data:`REFERENCE`).  It is a fourth-order method run with
a step 64 times smaller than any run's, so where the motion is smooth its
error is about ``64^-4 = 6e-8`` times that of the rk4 runs at ``dt`` and
far below every first-order run's; the reduced formulation keeps the
joints exact, so its only error is the integrator's.  compare measures it
rather than assuming it: ``settings["reference_error"]`` is ``|q(dt/32) -
q(dt/64)|`` at ``t_final``, how far the reference moves when its step is
halved (for a converged 4th-order run about 15 times its error, so an
upper bound), drawn in the work-precision plot and stated under the
table, with a warning when it is not far below the runs' errors (a
mechanism that passes a singular configuration, like the N-four-bar
chain when its cranks lie flat, has no converged solution past it).
scipy's DOP853 was not chosen because gear's adaptive integrators do not
project onto the loops.

The report (:class:`Comparison`) holds, per run, the problem sizes, cost
per step and per solver call, constraint drift, energy drift, the error
at ``t_final`` and the deviation over time from the reference, and three
studies:

* **work precision** (``work_precision``): every run again at ``dt``
  times each factor of ``work_precision=`` (default 1, 2, 4, 8): the error
  at ``t_final`` against the reference versus the wall time per
  simulated second (a work-precision diagram, as Hairer, Lubich and
  Wanner, "Geometric Numerical Integration", compare integrators).  The
  summary's verdict counts a tolerance only where the sweep settles who
  is cheapest: not where a formulation that misses it was still
  converging at the smallest step and, extrapolated with its order,
  would reach it for less than the run that does
  (:meth:`Comparison.converging`);
* **stability limits** (``stability``): the largest ``dt`` at which each
  run stays stable over a short horizon, by bisection
  (:data:`STABILITY` states the criterion);
* **spanning trees** (``trees=``): the reduced cost per step on each
  spanning tree of the same mechanism, beside the maximal one (the
  maximal formulation has no tree: its rows are the same whichever joints
  are cut).

as a table (:meth:`Comparison.table`), PNG plots (:meth:`Comparison.plot`)
and JSON (:meth:`Comparison.to_json`, schema :data:`SCHEMA`).
:func:`scaling` times one solver call of each solver on the N-four-bar
chain for growing N.

A run that fails (its state diverges, its solver raises) does not stop the
others: it is kept in the report as failed, with a one-line reason that
names the run and what to change (:attr:`Comparison.failed`).
"""
from __future__ import annotations

import json
import re
import time

import numpy as np

__all__ = ["compare", "Comparison", "scaling", "plot_scaling", "SCHEMA", "validate", "check_output",
           "REFERENCE", "STABILITY"]

#: what :func:`check_output` and :meth:`Comparison.save` call the directory's contents
OUTPUT_KIND = "compare report"

#: the reference run every run is measured against: solver, integrator,
#: stabilisation and how many times smaller its step is than ``dt``
REFERENCE = {"solver": "kkt", "integrator": "rkmk4", "stabilization": "projection", "refine": 64}

#: the stability study's criterion and search.  A run is *stable* at
#: ``dt`` when, simulated over ``horizon`` seconds from the study's initial
#: state, it completes with finite states, its energy stays within
#: ``energy * E_s`` of ``E0`` (``E_s`` the report's energy scale; the
#: systems compared are conservative, and an explicit integrator that goes
#: unstable gains energy without bound) and the largest position residual
#: of its rows (loop closures; joints too in maximal coordinates) stays
#: below ``rows`` (m, or the sine of an angle: a mechanism whose joints
#: open by more is no longer the mechanism, whatever its energy).
#: ``horizon`` None: ``min(t_final, 1 s)``.  The search starts at the
#: study's ``dt``, multiplies it by ``grow`` until a ``dt`` fails or
#: ``horizon / min_steps`` is reached (reported as a lower bound, in
#: ``settings["stability"]["capped"]``), or divides it (twice at most)
#: when ``dt`` itself fails; then it bisects geometrically ``bisections``
#: times between the last stable and the first unstable ``dt`` (4 with
#: ``grow`` 4: within 9 %).  It assumes stability is lost once as ``dt``
#: grows, and it holds for this horizon and state only.
STABILITY = {"energy": 1.0, "rows": 1e-2, "horizon": None, "grow": 4.0, "min_steps": 10, "bisections": 4}

_METRICS = ("wall_s", "step_s", "solve_s", "max_constraint_residual", "max_energy_drift", "max_deviation",
            "final_error")
_SERIES = ("residual", "position_residual", "energy_drift", "deviation")

#: JSON Schema (draft 2020-12) of :meth:`Comparison.to_dict`.  Version 3:
#: runs are a formulation x integrator x stabilisation (``name`` like
#: ``"kkt / rk4"``), ``final_error`` against the reference run of
#: :data:`REFERENCE` (``settings.reference``, ``settings.reference_error``),
#: ``series.position_residual`` (joint and loop rows' position error),
#: ``work_precision``, ``stability`` and ``trees``.
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "gear comparison report",
    "type": "object",
    "required": ["schema", "gear_version", "name", "sizes", "settings", "runs", "series", "work_precision",
                 "stability", "trees"],
    "properties": {
        "schema": {"const": "gear.compare/3"},
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
            "required": ["t_final", "dt", "integrators", "steps", "record_every", "reference",
                         "reference_error", "energy_scale", "work_precision_factors", "stability"],
            "properties": {"reference": {"type": ["string", "null"]},
                           "reference_error": {"type": ["number", "null"], "minimum": 0},
                           "energy_scale": {"type": "number", "minimum": 0},
                           "integrators": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                           "work_precision_factors": {"type": "array", "items": {"type": "number",
                                                                                  "minimum": 0}},
                           "stability": {"type": ["object", "null"]}},
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
            "required": ["t", *_SERIES],
            "properties": {"t": {"type": "array", "items": {"type": "number"}},
                           **{k: {"type": "object"} for k in _SERIES}},
        },
        "work_precision": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["run", "formulation", "integrator", "stabilization", "dt", "error", "cost_s"],
                "properties": {
                    "run": {"type": "string"},
                    "formulation": {"enum": ["reduced", "soft", "maximal"]},
                    "integrator": {"type": "string"},
                    "stabilization": {"type": ["string", "null"]},
                    "dt": {"type": "number", "minimum": 0},
                    "error": {"type": "number", "minimum": 0},
                    "cost_s": {"type": "number", "minimum": 0},
                },
            },
        },
        "stability": {"type": "object"},
        "trees": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tree", "nv", "constraint_rows", "depth", "maximal_rows", "step_s",
                             "body_deviation"],
                "properties": {
                    "tree": {"type": "string"},
                    "nv": {"type": "integer"},
                    "constraint_rows": {"type": "integer"},
                    "depth": {"type": "integer"},
                    "maximal_rows": {"type": ["integer", "null"]},
                    "step_s": {"type": "object"},
                    "body_deviation": {"type": ["number", "null"], "minimum": 0},
                },
            },
        },
    },
}


def validate(report):
    """Check a report dict (or JSON file path) against :data:`SCHEMA`
    without third-party packages, and the cross-references the schema
    cannot express (every completed run has its series and a number for
    every measurement, a failed run has its reason, work-precision points
    and stability limits name runs of the report).

    Parameters
    ----------
    report : dict or str or path-like

    Returns
    -------
    dict
        The report.

    Raises
    ------
    ValueError
        Naming the first problem.
    """
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
    if len(set(names)) != len(names):
        raise ValueError(f"report.runs: run names must be unique, got {names}")
    for i, r in enumerate(report["runs"]):
        where = f"report.runs[{i}] ({r['name']!r})"
        if r["status"] == "failed":
            if not r["error"]:
                raise ValueError(f"{where}: a failed run needs its reason in 'error'")
            continue
        for k in _METRICS:
            # final_error needs the separate reference (settings.reference_error says there was one)
            if r[k] is None and not (k == "final_error" and report["settings"]["reference_error"] is None):
                raise ValueError(f"{where}: a completed run needs a number for {k!r}")
        for key in _SERIES:
            if r["name"] not in series[key] or len(series[key][r["name"]]) != n:
                raise ValueError(f"report.series.{key}: run {r['name']!r} needs {n} values")
    for i, p in enumerate(report["work_precision"]):
        if p["run"] not in names:
            raise ValueError(f"report.work_precision[{i}]: {p['run']!r} is not a run of the report")
    for k, v in report["stability"].items():
        if k not in names:
            raise ValueError(f"report.stability: {k!r} is not a run of the report")
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
            raise ValueError(f"report.stability[{k!r}]: expected a positive dt or null, got {v!r}")
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
#: the batch whose per-state time is a maximal run's "µs per solve"
_SOLVE_BATCH = 32


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


def _joint_motion(model, q):
    """The largest change of a joint other than a free one over the
    frames ``q`` (rad or m), or None without frames."""
    from .joints import FREE

    if q is None or len(q) == 0:
        return None
    keep = np.ones(model.nv, bool)
    for i, j in enumerate(model.joints):
        if j.kind == FREE:
            keep[model.idx_v(model.joint_names[i])] = False
    if not keep.any():
        return 0.0
    return max(float(np.abs(model.difference(q[0], qk)[keep]).max(initial=0.0)) for qk in q)


def _coincide(a, b):
    """Whether two positive series lie on top of each other on a log plot
    (within 0.05 decades at 90 % of the points)."""
    a, b = np.log10(np.maximum(a, 1e-17)), np.log10(np.maximum(b, 1e-17))
    return a.shape == b.shape and a.size > 0 and float(np.quantile(np.abs(a - b), 0.9)) <= 0.05


_STYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def _fmt_dt(h):
    return "–" if h is None else (f"{h * 1e3:.3g} ms" if h < 1 else f"{h:.3g} s")


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
        ``t_final``, ``dt``, ``integrators``, ``steps``, ``record_every``,
        ``reference`` (the reference run, :data:`REFERENCE`, e.g. ``"kkt /
        rkmk4 + projection at dt/64"``; when it failed, the first run that
        completed stands in for deviations and there are no errors at
        ``t_final``), ``reference_error`` (how far it moves at ``t_final``
        when its step is halved, ``|q(dt/32) - q(dt/64)|``: an upper bound
        of its error once it converges), ``E0`` (the energy at
        the start, J), ``energy_scale`` (J, see ``max_energy_drift``),
        ``coordinate_unit`` (``"rad"``, ``"m"`` or ``"rad or m"``),
        ``work_precision_factors``, ``stability`` (the criterion's
        settings, with ``horizon`` and ``capped``: the runs stable up to
        the largest ``dt`` tried) and ``trees_horizon``.
    runs : list of dict
        One per run: ``name``, ``formulation`` (``"reduced"``, ``"soft"``,
        ``"maximal"``), ``solver``, ``integrator``, ``stabilization``,
        ``solver_options`` (the soft runs'), ``status`` (``"ok"`` or
        ``"failed"``), ``error`` (a failed run's one-line reason, else
        None), ``steps``, ``native`` (whether gear.simulate ran it in its
        native loop), ``wall_s`` (whole run), ``step_s`` (wall time
        per step), ``solve_s`` (one acceleration solve at the initial
        state, best of repeats; maximal runs: per state of a batch of 32
        copies, the kernel's cost without the single call's input
        checks), ``max_constraint_residual`` (position or
        velocity, joints included in maximal coordinates),
        ``max_energy_drift`` (``max |E - E0| / E_s``, with the energy
        scale ``E_s = max(|E0|, kinetic energy at t = 0, total weight x 1
        cm)``), ``max_deviation`` (largest ``|q - q_ref|`` on the
        manifold over time, against the reference) and ``final_error``
        (``|q - q_ref|`` at ``t_final``).  A failed run's measurements
        are None.
    t : ndarray, shape (T,)
    series : dict
        ``residual``, ``position_residual`` (largest ``|g|`` of the rows:
        joints and loops in maximal coordinates, loops in reduced ones),
        ``energy_drift``, ``deviation``: ``{run name: ndarray (T,)}``,
        for the runs that completed.
    trajectories : dict
        ``{run name: (q (T, nq), dq (T, nv))}``, for the runs that
        completed (maximal runs: the joint coordinates read back).
    work_precision : list of dict
        ``{"run", "formulation", "integrator", "stabilization", "dt",
        "error", "cost_s"}``: the error at ``t_final`` against the
        reference (coordinate unit) and the wall time per simulated second.
    stability : dict
        ``{run name: largest dt found stable (s), or None}``.
    trees : list of dict
        ``{"tree", "nv", "constraint_rows", "depth", "maximal_rows",
        "step_s": {run name: s}, "body_deviation"}`` per spanning tree.
    """

    def __init__(self, name, sizes, settings, runs, t, series, trajectories, work_precision=(),
                 stability=None, trees=()):
        self.name, self.sizes, self.settings, self.runs = name, sizes, settings, runs
        self.t, self.series, self.trajectories = t, series, trajectories
        self.work_precision = list(work_precision)
        self.stability = dict(stability or {})
        self.trees = list(trees)

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

        def clean(v):
            if isinstance(v, (float, np.floating)):
                return float(v)
            if isinstance(v, (np.integer,)):
                return int(v)
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v

        return {
            "schema": "gear.compare/3",
            "gear_version": __version__,
            "name": self.name,
            "sizes": {k: (None if v is None else int(v)) for k, v in self.sizes.items()},
            "settings": clean(dict(self.settings)),
            "runs": [clean(dict(r)) for r in self.runs],
            "series": {"t": [float(x) for x in self.t],
                       **{key: {n: [float(x) for x in s] for n, s in self.series[key].items()}
                          for key in _SERIES}},
            "work_precision": [clean(dict(p)) for p in self.work_precision],
            "stability": clean(dict(self.stability)),
            "trees": [clean(dict(t)) for t in self.trees],
        }

    def to_json(self, path=None):
        """The report as JSON text; written to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            with open(path, "w") as fh:
                fh.write(text + "\n")
        return text

    # -- text --------------------------------------------------------------------------
    def table(self):
        """A Markdown table: one row per run; failed runs with their
        reason below it, and what the columns measure."""
        s = self.sizes
        st = self.settings
        unit = st.get("coordinate_unit", "rad or m")
        def n(x):                   # a size that could not be had (its run failed): a dash
            return "–" if x is None else x

        nc = s["constraint_rows"]
        head = (f"**{self.name}**: nv = {s['nv']}, {nc} constraint row{'' if nc == 1 else 's'}, "
                f"dof {s['dof']}; maximal: {s['maximal_coordinates']} coordinates, "
                f"{n(s['maximal_rows'])} rows, nnz(J) = {n(s['nnz_J'])}, nnz(K) = {n(s['nnz_K'])}, "
                f"nnz(L) = {n(s['nnz_factor'])}.  {st['steps']} steps of "
                f"dt = {st['dt']:g} s.\n\n")
        rows = ["| run | formulation | integrator | stabilisation | µs per step | µs per solve "
                "| max residual (position or velocity) | max energy drift "
                f"| error at t_final ({unit}) | largest stable dt |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        capped = set((st.get("stability") or {}).get("capped", []))
        for r in self.runs:
            stab = r["stabilization"] or "none"
            damping = (r.get("solver_options") or {}).get("damping")
            if damping:
                stab += f"; damping {damping:g}/s"
            lead = f"| {r['name']} | {r['formulation']} | {r['integrator']} | {stab} | "
            if r.get("status") == "failed":
                rows.append(lead + "failed | – | – | – | – | – |")
                continue
            fe = r.get("final_error")
            lim = self.stability.get(r["name"]) if self.stability else None
            lim_text = "–" if r["name"] not in self.stability else (
                "none found" if lim is None else ("≥ " if r["name"] in capped else "") + _fmt_dt(lim))
            rows.append(lead + f"{r['step_s'] * 1e6:,.1f} | {r['solve_s'] * 1e6:,.1f} | "
                        f"{r['max_constraint_residual']:.1e} | {r['max_energy_drift']:.1e} | "
                        + ("–" if fe is None else f"{fe:.1e}") + f" | {lim_text} |")
        tail = ""
        ref = st.get("reference")
        if ref is not None and st.get("reference_is_separate", True):
            err = st.get("reference_error")
            tail += (f"\nErrors are `|q − q_ref|` against the reference run `{ref}`; halving the reference's "
                     "step moves it by " + ("–" if err is None else f"{err:.1e}")
                     + f" {unit} at t_final = {st['t_final']:g} s (its error is below that once it converges).\n")
            errs = [r["final_error"] for r in self.completed if r.get("final_error") is not None]
            # not converged: the reference moves by as much as the best run's error (at rounding
            # level a tenth of it is normal, the runs are then ranked to within that)
            if err is not None and errs and err > 0.5 * min(errs):
                tail += (f"\n**Warning: the reference is not converged here.** It moves by {err:.1e} {unit} when its "
                         f"step is halved, {err / max(min(errs), 1e-300):.2g}× the smallest error of a run: errors "
                         f"below about {err:.0e} {unit} are not resolved, and runs whose errors lie there cannot be "
                         "ranked. A mechanism that passes a singular configuration (the N-four-bar chain when its "
                         "cranks lie flat) has no converged solution past it; choose a t_final before it.\n")
        elif ref is not None:
            tail += (f"\nThe reference run failed: deviations are measured against `{ref}`, the first run "
                     "that completed, and there are no errors at t_final.\n")
        if "energy_scale" in st:
            tail += (f"\nEnergy drift: max |E − E0| / E_s, with E0 = {st['E0']:.4g} J and the energy scale "
                     f"E_s = max(|E0|, kinetic energy at t = 0, total weight × 1 cm) = "
                     f"{st['energy_scale']:.4g} J.\n")
        if self.failed:
            tail += "\nFailed runs (the others are kept):\n\n" + "\n".join(
                f"- `{n}`: {reason}" for n, reason in self.failed.items()) + "\n"
        return head + "\n".join(rows) + "\n" + tail

    def _cheapest(self, target):
        """The cheapest work-precision point with ``error <= target``,
        overall and per formulation: ``{formulation or "all": point}``."""
        out = {}
        for p in self.work_precision:
            if p["error"] is None or p["error"] > target:
                continue
            for key in ("all", p["formulation"]):
                if key not in out or p["cost_s"] < out[key]["cost_s"]:
                    out[key] = p
        return out

    def _points_by_run(self):
        """Each run's work-precision points that have an error, by
        increasing ``dt``: ``{run: [point]}``."""
        pts = {}
        for p in self.work_precision:
            if p.get("error") is not None:
                pts.setdefault(p["run"], []).append(p)
        return {run: sorted(ps, key=lambda p: p["dt"]) for run, ps in pts.items()}

    def orders(self):
        """The order of convergence each run shows in the work-precision
        points: the slope of ``log error`` against ``log dt`` between its
        two smallest steps whose error is above ten times the reference's
        own (``{run: order}``; runs without two such points are left out)."""
        floor = 10.0 * (self.settings.get("reference_error") or 0.0)
        out = {}
        for run, ps in self._points_by_run().items():
            ps = [p for p in ps if p["error"] > floor][:2]
            if len(ps) == 2 and ps[1]["dt"] > ps[0]["dt"] and ps[0]["error"] > 0:
                out[run] = float(np.log(ps[1]["error"] / ps[0]["error"]) / np.log(ps[1]["dt"] / ps[0]["dt"]))
        return out

    def converging(self):
        """The runs whose error still falls at their smallest
        work-precision step, by formulation: ``{formulation: [{"run",
        "dt", "error", "cost_s", "order"}]}``, the point at the smallest
        step of each run whose error there is above ten times the
        reference's own and below half its error at the next step, with
        the order the two points show (:meth:`orders`).  A tolerance such a
        run misses might be reached with a smaller step, which the sweep
        did not take, at about ``cost_s (error / tolerance)^(1 / order)``
        (a soft run's compliance, by contrast, sets a floor no step goes
        below)."""
        floor = 10.0 * (self.settings.get("reference_error") or 0.0)
        orders = self.orders()
        out = {}
        for run, ps in self._points_by_run().items():
            if len(ps) >= 2 and floor < ps[0]["error"] < 0.5 * ps[1]["error"] and run in orders:
                p = ps[0]
                out.setdefault(p["formulation"], []).append({"run": run, "dt": p["dt"], "error": p["error"],
                                                             "cost_s": p["cost_s"], "order": orders[run]})
        return out

    def _reach_cost(self, converging, formulation, target):
        """The least cost per simulated second at which a still-converging
        run of ``formulation`` would reach ``target``, extrapolated with its
        order (:meth:`converging`); inf when none is converging."""
        return min((c["cost_s"] * (c["error"] / target) ** (1.0 / c["order"])
                    for c in converging.get(formulation, ())), default=np.inf)

    def summary(self):
        """Who wins where, from the measurements: a list of Markdown
        bullets (accuracy, work precision, drift, stability, trees)."""
        st = self.settings
        unit = st.get("coordinate_unit", "rad or m")
        done = self.completed
        lines = []
        moved = st.get("joint_motion")
        if moved is not None and moved < 1e-9:
            lines.append(f"**Nothing moves inside the mechanism**: over the reference run no joint other "
                         f"than a free one changes by more than {max(moved, 1e-300):.0e} {unit}. Started at "
                         "rest and floating (or held in equilibrium), the model moves as one rigid body and "
                         "its loops carry no load, so every formulation gives that same motion and the runs "
                         "differ only in cost; hold the base (an MJCF file: `load_mjcf(..., fixed_base=True)`, "
                         "`gear compare --fixed-base`), or start from a velocity (`dq0` of `gear.compare`), "
                         "to compare the formulations.")
        orders = self.orders() if self.work_precision else {}
        low = [(n, o) for n, o in orders.items()
               if o < 3.0 and any(r["name"] == n and r["formulation"] != "maximal" and r["integrator"] == "rk4"
                                  for r in done)]
        high = [(n, o) for n, o in orders.items()
                if o > 3.5 and any(r["name"] == n and r["formulation"] == "maximal" and r["integrator"] == "rk4"
                                   for r in done)]
        if low and high and st.get("lie_joints"):
            lines.append("**Integrator order**: " + ", ".join(f"`{n}` converges at order {o:.1f}" for n, o in low)
                         + " here, against " + ", ".join(f"`{n}`'s {o:.1f}" for n, o in high)
                         + f". The model has {st['lie_joints']} spherical or free joint(s), and in joint "
                         "coordinates `rk4` combines its stages in the tangent space, which is below fourth "
                         "order on them; `rkmk4` (Munthe-Kaas) is fourth order there, so compare with it "
                         "(`integrators=('rkmk4', ...)`, `--integrator rkmk4`) before crediting the maximal "
                         "formulation with the accuracy.")
        with_err = [r for r in done if r.get("final_error") is not None]
        if with_err:
            best = {}
            for r in with_err:
                f = r["formulation"]
                if f not in best or r["final_error"] < best[f]["final_error"]:
                    best[f] = r
            lines.append("**Accuracy at dt = " + f"{st['dt']:g} s** (error at t_final = {st['t_final']:g} s): "
                         + "; ".join(f"best {f} run `{r['name']}` {r['final_error']:.1e} {unit}"
                                     for f, r in best.items()) + ".")
        if self.work_precision:
            errs = sorted(p["error"] for p in self.work_precision)
            # the tolerances some runs reach and others do not
            floor = 10.0 * (st.get("reference_error") or 0.0)      # what the reference resolves
            targets = [10.0 ** k for k in range(-2, -13, -2) if max(errs[0], floor) <= 10.0 ** k < errs[-1]]
            forms = [f for f in ("reduced", "soft", "maximal") if any(p["formulation"] == f
                                                                     for p in self.work_precision)]
            converging = self.converging()
            finest = min(p["dt"] for p in self.work_precision)
            parts, seen = [], []
            for target in targets:
                ch = self._cheapest(target)
                if "all" not in ch:
                    continue
                key = sorted((f, p["run"], p["dt"]) for f, p in ch.items())
                if seen and seen[-1][0] == key:        # the same answer as the looser tolerance
                    seen[-1][1].append(target)
                    continue
                seen.append((key, [target], ch))
            compared = []                               # (formulation that wins, tolerances) of fair ones
            for key, tols, ch in seen:
                a = ch["all"]
                tol = f"{tols[0]:.0e}" + (f" down to {tols[-1]:.0e}" if len(tols) > 1 else "")
                missing = [f for f in forms if f not in ch]
                # the sweep stopped before they got there, and a smaller step
                # would get them there for less (extrapolated with their order)
                reach = {f: self._reach_cost(converging, f, tols[0]) for f in missing}
                short = [f for f in missing if reach[f] < a["cost_s"]]
                lead = "only" if short and len(ch) == 2 else "cheapest"
                txt = (f"error ≤ {tol} {unit}: {lead} `{a['run']}` at dt = {_fmt_dt(a['dt'])}, "
                       f"{a['cost_s'] * 1e3:.3g} ms per simulated second")
                others = [f"{f} {ch[f]['cost_s'] / a['cost_s']:.3g}× that (`{ch[f]['run']}`)"
                          for f in forms if f in ch and f != a["formulation"]]
                if others:
                    txt += "; " + ", ".join(others)
                absent = [f for f in missing if f not in short]
                if absent:
                    txt += "; no " + " or ".join(absent) + " run reaches it"
                if short:
                    txt += (f"; the {' and '.join(short)} runs were still converging at the sweep's smallest "
                            f"step ({_fmt_dt(finest)}), and a smaller one would reach it at about "
                            + " and ".join(f"{reach[f] * 1e3:.3g}" for f in short)
                            + " ms per simulated second (extrapolated with their order), so this tolerance is "
                            "left out of the verdict (a finer sweep settles it: `work_precision=` factors "
                            "below 1, `--work-precision 0.5,1,2,4,8` on the command line)")
                else:
                    compared.append((a["formulation"], tols))
                parts.append(txt)
            if parts:
                lines.append("**Work precision**: " + ". ".join(parts) + ".")
                wins = {}
                for f, tols in compared:
                    wins.setdefault(f, []).extend(tols)
                every = sorted((t for _, tols in compared for t in tols), reverse=True)
                span = (f"{every[0]:.0e}" + (f" down to {every[-1]:.0e}" if len(every) > 1 else "") + f" {unit}"
                        if every else "")
                if not wins:
                    verdict = ("**Verdict**: none drawn: at every tolerance the work-precision runs reach, "
                               "some formulation was still converging at the sweep's smallest step "
                               f"({_fmt_dt(finest)}); repeat with `work_precision=` factors below 1 "
                               "(`--work-precision 0.5,1,2,4,8`) or a smaller `dt` (work precision below).")
                elif "maximal" not in wins:
                    verdict = ("**Verdict**: joint coordinates (" + " and ".join(sorted(wins)) + " runs) are the "
                               f"cheapest at every tolerance compared ({span}); maximal coordinates reach the "
                               "same accuracy only at a higher cost per simulated second, and keep their joints "
                               "closed only when stabilised (joint drift below).")
                else:
                    verdict = ("**Verdict**: maximal coordinates are the cheapest at error ≤ "
                               + ", ".join(f"{t:.0e}" for t in wins["maximal"]) + f" {unit}; joint coordinates "
                               f"elsewhere (of the tolerances compared, {span}; work precision below).")
                lines.insert(0, verdict)
        drift = [r for r in done if r["formulation"] == "maximal"]
        if drift and "position_residual" in self.series:
            pr = self.series["position_residual"]
            txt = "; ".join(f"`{r['name']}` {float(np.max(pr[r['name']])):.1e}" for r in drift if r["name"] in pr)
            red = [r for r in done if r["formulation"] != "maximal" and r["name"] in pr]
            if red:
                worst = max(red, key=lambda r: float(np.max(pr[r["name"]])))
                txt += (f"; the reduced and soft runs' loops at most {float(np.max(pr[worst['name']])):.1e} "
                        f"(`{worst['name']}`), their joints exact")
            lines.append("**Joint drift** (largest row residual over the run, m or sine of an angle): " + txt + ".")
        if self.stability:
            capped = set((st.get("stability") or {}).get("capped", []))
            items = sorted(((k, v) for k, v in self.stability.items()), key=lambda kv: -(kv[1] or 0.0))
            lines.append("**Largest stable dt** over " + f"{(st.get('stability') or {}).get('horizon', 0):g} s: "
                         + ", ".join(f"`{k}` " + ("none found" if v is None else
                                                 ("≥ " if k in capped else "") + _fmt_dt(v)) for k, v in items)
                         + ".")
        if self.trees:
            parts = []
            for t in self.trees:
                costs = ", ".join(f"{k} {v * 1e6:,.1f} µs" for k, v in t["step_s"].items())
                parts.append(f"`{t['tree']}` (depth {t['depth']}): {costs}")
            lines.append("**Spanning trees** (µs per step): " + "; ".join(parts) + ".")
        return "\n".join(f"- {ln}" for ln in lines)

    def report(self):
        """The whole ``report.md``: the table, the studies, what every
        figure shows and who wins where (:meth:`summary`), with the
        reasons (Ruan, "Articulated rigid body systems", Sec. 5)."""
        st = self.settings
        unit = st.get("coordinate_unit", "rad or m")
        out = [f"# gear compare: {self.name}", "", self.table(), "## Who wins where", "", self.summary(), "",
               "Why (Ruan, \"Articulated rigid body systems\", Sec. 5): maximal coordinates give every body "
               "6 coordinates and every joint its rows, so the system they solve is larger (here "
               f"{self.sizes['maximal_coordinates']} coordinates and {self.sizes['maximal_rows']} rows against "
               f"nv = {self.sizes['nv']}) but sparse, and loops are just more rows; the joints are "
               "satisfied only as well as the integrator keeps the rows, so they drift unless stabilised. "
               "Reduced coordinates keep every joint exact by construction and solve a smaller, denser "
               "system; loops need multipliers (and their drift a projection).", ""]
        kinds = {r.get("native") for r in self.completed if "native" in r}
        if kinds == {True, False}:
            slow = [r["name"] for r in self.completed if r.get("native") is False]
            out += [f"Cost caveat: {', '.join(f'`{n}`' for n in slow)} step in NumPy (gear.simulate has no "
                    "native loop for them yet), the others in gear's native loop, so their cost ratio measures "
                    "implementations as much as formulations; `gear.comparison.scaling` compares one native "
                    "acceleration solve of each formulation on the N-four-bar. Timings are wall times of one run "
                    "each (the best of a few for runs under 50 ms).", ""]
        out += ["## Figures", "",
                "- `residual.png`: the largest constraint residual over time, position `|g|` or velocity "
                "(`|A dq|`, `|J V|`), whichever is larger; joints count in maximal coordinates only "
                "(reduced ones cannot violate them).",
                "- `energy.png`: `|E − E0|` over time (J); the system is conservative, so this is the "
                "integrators' energy error.",
                f"- `deviation.png`: `|q − q_ref|` over time ({unit}) against the reference run "
                f"`{st.get('reference')}`.",
                "- `cost.png`: wall time per step of each run's whole loop, and of one acceleration solve at "
                "the initial state (maximal runs: per state of a batch of 32 copies, the native kernel "
                "without the input checks of one call).",
                "- `drift.png`: the joints' drift. Left, the maximal-coordinate runs' largest row residual "
                "(joints and loops) with and without stabilisation; right, the reduced and soft runs' loop "
                "residual `|g(q)|` (their joints are exact)."]
        if self.work_precision:
            fac = ", ".join(f"{f:g}" for f in st.get("work_precision_factors", []))
            out.append(f"- `work_precision.png`: each run repeated at dt × ({fac}); the error at t_final against "
                       "the reference versus the wall time per simulated second (down and left is better; the "
                       "slope of a line is the integrator's order; the dotted line is the reference's own "
                       "error bound: errors near it are not resolved).")
        out.append("")
        if self.stability:
            c = st.get("stability") or {}
            out += ["## Stability limits", "",
                    f"The largest dt found stable for each run, by bisection: over {c.get('horizon', 0):g} s from "
                    f"the same initial state, a run is stable when it completes with finite states, "
                    f"`max |E − E0| ≤ {c.get('energy', 1):g} E_s` and its rows' position residual stays below "
                    f"{c.get('rows', 0):g} (m, or the sine of an angle). The search grows dt by "
                    f"{c.get('grow', 4):g}× from the study's dt until a run fails or dt reaches horizon / "
                    f"{c.get('min_steps', 10):g} (shown as ≥), then bisects {c.get('bisections', 4):g} times "
                    "between the last stable and the first unstable dt; it assumes stability is lost once, "
                    "and it is a property of this horizon and state, not a proof.", ""]
        if self.trees:
            names = list(dict.fromkeys(k for t in self.trees for k in t["step_s"]))
            out += ["## Spanning trees", "",
                    f"The same mechanism on each spanning tree: µs per step over "
                    f"{st.get('trees_horizon') or 0:g} s (reduced: the hard solvers with projection; maximal: "
                    "projection, 20 steps). The maximal formulation has no tree: its rows are the same "
                    "whichever joints are cut, so its cost hardly moves; the reduced cost follows the tree's "
                    "depth (a deep chain has a dense mass matrix). `body deviation`: the largest distance (m) "
                    "of a body's centre of mass from the first tree's at the end of the first run (bodies "
                    "matched by name): the trees simulate the same motion.", "",
                    "| tree | depth | nv | loop rows | " + " | ".join(names) + " | body deviation (m) |",
                    "|---|---|---|---|" + "---|" * len(names) + "---|"]
            for t in self.trees:
                cells = [f"{t['step_s'][n] * 1e6:,.1f}" if n in t["step_s"] else "–" for n in names]
                bd = t["body_deviation"]
                out.append(f"| {t['tree']} | {t['depth']} | {t['nv']} | {t['constraint_rows']} | "
                           + " | ".join(cells) + " | " + ("–" if bd is None else f"{bd:.1e}") + " |")
            out.append("")
        return "\n".join(out)

    # -- plots ------------------------------------------------------------------------------
    def plot(self, directory, prefix="", overwrite=False):
        """Write the PNGs: ``residual.png`` (constraint drift),
        ``energy.png`` (energy drift, J), ``deviation.png`` (distance to
        the reference) over time (log scale), ``cost.png`` (time per step
        and per solver call), ``drift.png`` (the joints' drift with and
        without stabilisation) and ``work_precision.png``.  Failed runs
        are listed in the legends with their reason.

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
              "cost": "cost.png", "drift": "drift.png", "work_precision": "work_precision.png"}

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

    def _styles(self):
        order = [r["name"] for r in self.runs]
        import matplotlib

        # tab10's colours, then their lighter tab20 partners: twelve runs stay apart
        tab20 = matplotlib.colormaps["tab20"].colors
        colors = [tab20[2 * k] for k in range(10)] + [tab20[2 * k + 1] for k in range(10)]
        return order, {n: dict(color=colors[k % 20], ls=_STYLES[k % len(_STYLES)], marker=_MARKERS[k % len(_MARKERS)])
                       for k, n in enumerate(order)}

    def figures(self):
        """The figures of :meth:`plot`, not saved: ``{"residual", "energy_drift",
        "deviation", "cost", "drift", "work_precision": matplotlib Figure}``
        (close them when done)."""
        import matplotlib.pyplot as plt

        figs = {}
        st = self.settings
        ref = st.get("reference")
        separate = st.get("reference_is_separate", True)
        unit = st.get("coordinate_unit", "rad or m")
        E0 = st.get("E0")
        order, style = self._styles()
        failed = self.failed
        t = np.asarray(self.t, dtype=float)
        panels = {
            "residual": ("constraint residual: |g| (m, rad) or velocity |A dq|, |J V| (m/s, rad/s), the larger",
                         "constraint residual (m, rad; m/s, rad/s)"),
            "energy_drift": ("energy drift |E − E0|" + (f", E0 = {E0:.4g} J" if E0 is not None else ""),
                             "|E − E0| (J)"),
            "deviation": (f"deviation from the reference {ref!r}" if ref else "deviation (no run completed)",
                          f"max |q − q_ref| ({unit})"),
        }
        for key, (title, ylabel) in panels.items():
            fig, ax = plt.subplots(figsize=(10, 4.6))
            factor = float(st.get("energy_scale", 1.0)) if key == "energy_drift" else 1.0
            shown = [n for n in order if n in self.series[key] and not (key == "deviation" and n == ref
                                                                         and not separate)]
            self._lines(ax, t, {n: np.asarray(self.series[key][n], dtype=float) * factor for n in shown},
                        style, failed)
            if key == "deviation" and ref and not separate:
                ax.plot([], [], " ", label=f"{ref}: the reference (deviation 0)")
            ax.set_xlabel("t (s)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{self.name}\n{title}", fontsize=10)
            self._legend(ax)
            fig.tight_layout()
            figs[key] = fig
        figs["cost"] = self._cost_figure(order, style, failed)
        figs["drift"] = self._drift_figure(t, style, failed)
        figs["work_precision"] = self._wp_figure(style, failed)
        return figs

    @staticmethod
    def _legend(ax):
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)

    @staticmethod
    def _lines(ax, t, ys, style, failed, note_failed=True):
        """Log-scale lines with sparse staggered markers; coinciding curves named."""
        shown = list(ys)
        ys = {n: np.maximum(v, 1e-17) for n, v in ys.items()}
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
            ax.semilogy(t, ys[n], label=n, lw=1.3, ms=5, mfc="none",
                        markevery=(min(k * every // max(len(shown), 1), max(len(t) - 1, 0)), every), **style[n])
        for g in groups:
            import textwrap

            text = " and ".join([", ".join(g[:-1]), g[-1]]) + " coincide"
            ax.plot([], [], " ", label="\n".join(textwrap.wrap(text, 48)))
        if note_failed:
            for n, reason in failed.items():
                ax.plot([], [], " ", label=f"{n} (failed: {_short(reason)})")
        if not shown:
            ax.text(0.5, 0.5, "no run to show" if not failed else "no run completed", ha="center",
                    va="center", transform=ax.transAxes)

    def _cost_figure(self, order, style, failed):
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch

        fig, ax = plt.subplots(figsize=(10, 4.8))
        x = np.arange(len(order))
        ok = [r.get("status", "ok") == "ok" for r in self.runs]
        step = [r["step_s"] * 1e6 if o else np.nan for r, o in zip(self.runs, ok)]
        solve = [r["solve_s"] * 1e6 if o else np.nan for r, o in zip(self.runs, ok)]
        colors = [style[n]["color"] for n in order]
        ax.bar(x - 0.2, step, 0.4, color=colors)
        ax.bar(x + 0.2, solve, 0.4, color=colors, alpha=0.5, hatch="//")
        handles = [Patch(facecolor="0.35", label="per step (whole loop)"),
                   Patch(facecolor="0.35", alpha=0.5, hatch="//", label="per acceleration solve")]
        ax.set_xticks(x, [n + ("\n(failed)" if not o else "\n(NumPy loop)" if r.get("native") is False else "")
                          for n, o, r in zip(order, ok, self.runs)], rotation=30, ha="right", fontsize=7.5)
        if any(ok):
            from matplotlib.ticker import LogFormatter

            ax.set_yscale("log")
            # plain numbers (2, 5, 20) rather than 2×10⁰; the minor ticks
            # labelled only where the axis spans few decades
            ax.yaxis.set_major_formatter(LogFormatter())
            ax.yaxis.set_minor_formatter(LogFormatter(minor_thresholds=(2, 0.5)))
        ax.set_ylabel("time (µs)")
        ax.set_title(f"{self.name}: cost (gear's native loop unless marked)", fontsize=10)
        handles += [Patch(facecolor="none", edgecolor="none", label=f"{n} (failed: {_short(reason)})")
                    for n, reason in failed.items()]
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        ax.grid(alpha=0.3, axis="y", which="both")
        fig.tight_layout()
        return fig

    def _drift_figure(self, t, style, failed):
        import matplotlib.pyplot as plt

        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 5.6), sharey=True)
        pr = self.series.get("position_residual", {})
        kinds = {r["name"]: r["formulation"] for r in self.runs}
        mx = {n: np.asarray(v, dtype=float) for n, v in pr.items() if kinds.get(n) == "maximal"}
        red = {n: np.asarray(v, dtype=float) for n, v in pr.items() if kinds.get(n) != "maximal"}
        fm = {n: r for n, r in failed.items() if kinds.get(n) == "maximal"}
        fr = {n: r for n, r in failed.items() if kinds.get(n) != "maximal"}
        self._lines(a1, t, mx, style, fm)
        self._lines(a2, t, red, style, fr)
        a1.set_title("maximal coordinates: joint and loop rows, max |g|", fontsize=10)
        a2.set_title("reduced coordinates: loop closures, max |g(q)| (joints exact)", fontsize=10)
        a1.set_ylabel("largest row residual (m, or sine of an angle)")
        for a in (a1, a2):
            a.set_xlabel("t (s)")
            a.grid(alpha=0.3, which="both")
            if a.get_legend_handles_labels()[0]:      # below the axes: the curves fill them
                a.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
        fig.suptitle(f"{self.name}: joint drift with and without stabilisation", fontsize=11)
        fig.tight_layout()
        return fig

    def _wp_figure(self, style, failed):
        import matplotlib.pyplot as plt

        st = self.settings
        unit = st.get("coordinate_unit", "rad or m")
        fig, ax = plt.subplots(figsize=(11, 5.6))
        by = {}
        for p in self.work_precision:
            by.setdefault(p["run"], []).append(p)
        for n, pts in by.items():
            pts = sorted(pts, key=lambda p: p["dt"])
            ax.loglog([p["cost_s"] * 1e3 for p in pts], [max(p["error"], 1e-17) for p in pts], label=n,
                      lw=1.3, ms=5, mfc="none", **style[n])
        err = st.get("reference_error")
        if err is not None and by:
            ax.axhline(max(err, 1e-17), color="0.4", ls=":", lw=1.0,
                       label=f"reference's own error ≤ {err:.0e}\n(its change when its step is halved)")
        for n, reason in failed.items():
            ax.plot([], [], " ", label=f"{n} (failed: {_short(reason)})")
        if not by:
            ax.text(0.5, 0.5, "no work-precision study (no reference, or work_precision=None)", ha="center",
                    va="center", transform=ax.transAxes)
        ax.set_xlabel("wall time per simulated second (ms)")
        ax.set_ylabel(f"error at t = {st['t_final']:g} s, max |q − q_ref| ({unit})")
        fac = ", ".join(f"{f:g}" for f in st.get("work_precision_factors", []))
        ax.set_title(f"{self.name}: work precision, each run at dt × ({fac}), dt = {_fmt_dt(st['dt'])}\n"
                     f"(rightmost point: dt) against {st.get('reference')}", fontsize=10)
        self._legend(ax)
        fig.tight_layout()
        return fig

    def save(self, directory, overwrite=False):
        """Write ``report.json``, ``report.md`` (:meth:`report`) and the
        PNGs of :meth:`plot` to ``directory``.

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
            fh.write(self.report())
        return [pj, pm] + self._plot(directory)


# gear.simulate's advice names its own options (integrator='implicit'), which
# compare does not take: it is replaced by compare's
_SIMULATE_ADVICE = re.compile(r";\s*reduce dt\b.*$")


def _failure(run, exc, dt, formulation="reduced", solver=None):
    """The one-line reason a run failed: what happened and what to change,
    in :func:`compare`'s own terms (``dt``, ``solvers``, ``maximal``)."""
    import numpy.linalg

    text = " ".join(str(exc).split()) or type(exc).__name__
    text = _SIMULATE_ADVICE.sub("", text).rstrip(" ;.")
    if not isinstance(exc, (ValueError, FloatingPointError, numpy.linalg.LinAlgError)):
        text = f"{type(exc).__name__}: {text}"
    diverged = (isinstance(exc, (FloatingPointError, numpy.linalg.LinAlgError))
                or "non-finite" in text or "not positive definite" in text)
    leave = ("leave out the maximal-coordinate runs (maximal=False)" if formulation == "maximal"
             else f"leave {solver or run!r} out of solvers")
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


class _Run:
    """One run family (formulation x integrator x stabilisation): simulates
    at any ``dt`` and horizon, and measures energy and row residuals of
    what it simulated."""

    def __init__(self, name, formulation, solver, integrator, stabilization, target, q0, dq0, tau, sys):
        self.name, self.formulation, self.solver = name, formulation, solver
        self.integrator, self.stabilization = integrator, stabilization
        self.target, self.q0, self.dq0, self.tau, self.sys = target, q0, dq0, tau, sys

    def info(self, steps):
        return dict(name=self.name, formulation=self.formulation, solver=self.solver, integrator=self.integrator,
                    stabilization=self.stabilization, steps=steps)

    def simulate(self, dt, t_final, record_every):
        from .simulation import simulate

        return simulate(self.target, self.q0, self.dq0, t_final, dt, integrator=self.integrator, tau=self.tau,
                        stabilization=self.stabilization, record_every=record_every, progress=False)

    def energy(self, tr):
        if self.formulation == "maximal":
            return np.asarray(self.target.energy(tr.poses, tr.twists), dtype=float)
        from .algorithms import kinetic_energy, potential_energy

        m = self.sys.model
        q, dq = np.asarray(tr.q), np.asarray(tr.dq)
        return np.asarray(kinetic_energy(m, q, dq) + potential_energy(m, q), dtype=float)

    def position_residual(self, tr):
        """Largest ``|g|`` per frame: every row (joints and loops) in maximal
        coordinates, the loop closures in reduced ones (joints are exact)."""
        if self.formulation == "maximal":
            return np.asarray(tr.joint_error, dtype=float)
        q = np.asarray(tr.q)
        if not self.sys.nc:
            return np.zeros(len(q))
        return np.abs(self.sys.constraint_residual(q)).max(axis=-1)

    def residual(self, tr):
        """The larger of the position residual and the velocity residual
        (``|A dq|``; ``|J V|`` of the body twists in maximal coordinates)."""
        pos = self.position_residual(tr)
        if self.formulation == "maximal":
            if self.target.nrows == 0:
                return pos
            vel = np.array([float(np.abs(self.target.system(P)["J"] @ V.ravel()).max())
                            for P, V in zip(tr.poses, tr.twists)])
            return np.maximum(pos, vel)
        if not self.sys.nc:
            return pos
        q, dq = np.asarray(tr.q), np.asarray(tr.dq)
        A = self.sys.constraint_jacobian(q)
        return np.maximum(pos, np.abs(np.einsum("tij,tj->ti", A, dq)).max(axis=-1))

    def solve_time(self):
        """One acceleration solve at the initial state (best of repeats).
        Maximal coordinates: per state of a batch of ``_SOLVE_BATCH``
        copies through the native kernel where it covers the model (one
        call of ``MaximalModel.forward_dynamics`` is mostly its input
        checks, some 50 µs, where the reduced solvers have an
        allocation-light single-state path), on one thread as the reduced
        solvers' one-state calls are; else one call."""
        if self.formulation == "maximal":
            from .algorithms.dynamics import get_num_threads, set_num_threads
            from .maximal.native import native_accel

            P, V = self.target.state(self.q0, self.dq0)
            Pb, Vb = np.repeat(P[None], _SOLVE_BATCH, 0), np.repeat(V[None], _SOLVE_BATCH, 0)
            tau = None if self.tau is None else np.repeat(np.asarray(self.tau, float)[None], _SOLVE_BATCH, 0)
            threads = get_num_threads()
            set_num_threads(1)
            try:
                if native_accel(self.target, Pb, Vb, tau) is not None:
                    return _time_call(lambda: native_accel(self.target, Pb, Vb, tau)) / _SOLVE_BATCH
            finally:
                set_num_threads(threads)
            return _time_call(lambda: self.target.forward_dynamics(P, V, self.tau))
        return _time_call(lambda: self.target.forward_dynamics(self.q0, self.dq0, self.tau))


def _best_wall(fam, dt, t_final, record_every, min_time=0.05, repeats=5):
    """Simulate and return ``(trajectory, wall seconds)``: the loop's own
    wall time (``stats["wall_time"]``), the best of up to ``repeats`` runs
    when one run is shorter than ``min_time`` (timer resolution and
    caches weigh on short runs)."""
    tr = fam.simulate(dt, t_final, record_every)
    wall = float(tr.stats["wall_time"])
    total, k = wall, 1
    while total < min_time and k < repeats:
        w = float(fam.simulate(dt, t_final, record_every).stats["wall_time"])
        wall, total, k = min(wall, w), total + w, k + 1
    return tr, wall


def _stable(fam, dt, horizon, E0, energy_scale, energy_tol=STABILITY["energy"], rows_tol=STABILITY["rows"]):
    """The stability criterion of the ``stability`` study (:data:`STABILITY`).

    A run is stable at ``dt`` when, simulated over ``horizon`` seconds
    (about 50 frames recorded), it completes with finite states, its
    energy stays within ``energy_tol * energy_scale`` of ``E0`` (the
    system is conservative: an explicit integrator that goes unstable
    gains energy without bound) and its rows' position residual stays
    below ``rows_tol`` (joints and loops that open by more than ``rows_tol``
    metres, or by an angle whose sine is ``rows_tol``, are no longer the
    mechanism, even when the energy looks right).

    Parameters
    ----------
    fam : run family (internal)
    dt, horizon : float
    E0, energy_scale : float
        J.
    energy_tol, rows_tol : float

    Returns
    -------
    ok : bool
    why : str
        What failed (empty when stable).
    """
    n = max(1, int(np.ceil(horizon / dt - 1e-9)))
    try:
        with np.errstate(all="ignore"):
            tr = fam.simulate(dt, horizon, max(1, n // 50))
            E = fam.energy(tr)
            r = fam.position_residual(tr)
    except Exception as exc:                   # a diverged run is an unstable one
        return False, " ".join(str(exc).split())[:80] or type(exc).__name__
    if not (np.isfinite(np.asarray(tr.q)).all() and np.isfinite(E).all() and np.isfinite(r).all()):
        return False, "non-finite state"
    dE = float(np.abs(E - E0).max()) / energy_scale
    if dE > energy_tol:
        return False, f"energy drift {dE:.2g} E_s"
    if float(r.max(initial=0.0)) > rows_tol:
        return False, f"rows open by {float(r.max()):.2g}"
    return True, ""


def _stability_limit(fam, dt, horizon, E0, escale, opts, known=None):
    """Largest ``dt`` found stable by :func:`_stable`: from ``dt`` grow by
    ``opts["grow"]`` until a ``dt`` fails or ``horizon / min_steps`` is
    reached (then that cap is returned), or shrink (twice at most) when
    ``dt`` itself fails; then bisect geometrically between the last stable
    and the first unstable ``dt``.  ``known``: ``{dt: stable}`` already
    decided (the run itself, when it covers the horizon).  Returns ``(dt
    or None, capped)``."""
    cap = horizon / opts["min_steps"]
    known = known or {}

    def ok(h):
        if h in known:
            return known[h]
        return _stable(fam, h, horizon, E0, escale, opts["energy"], opts["rows"])[0]

    lo, hi = None, None
    h = min(dt, cap)
    if ok(h):
        lo = h
        while hi is None:
            h = min(lo * opts["grow"], cap)
            if h <= lo:
                return lo, True
            if ok(h):
                lo = h
            else:
                hi = h
    else:
        hi = h
        for _ in range(2):
            h = hi / opts["grow"]
            if ok(h):
                lo = h
                break
            hi = h
        if lo is None:
            return None, False
    for _ in range(int(opts["bisections"])):
        mid = float(np.sqrt(lo * hi))
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo, False


def _depth(model):
    """Depth of the kinematic tree (the longest chain of bodies)."""
    d = []
    for p in model.parents:
        d.append(1 if p < 0 else d[p] + 1)
    return max(d, default=0)


def _tree_study(trees, hard, integrators, tau, dt, t_final, maximal_ok, progress_write):
    """Cost per step of every hard reduced solver and of the maximal
    formulation (projection) on each spanning tree, and how far apart the
    trees' bodies' centres of mass end up (they simulate the same
    mechanism)."""
    from .algorithms import forward_kinematics
    from .constraints import ConstrainedModel
    from .simulation import simulate

    out, first = [], None
    horizon = min(t_final, 100 * dt)
    for label, spec in trees.items():
        tsys, tq0 = spec if isinstance(spec, tuple) else (spec, None)
        if not isinstance(tsys, ConstrainedModel):
            tsys = ConstrainedModel(tsys, [])
        m = tsys.model
        if tq0 is None:
            tq0 = tsys.assemble(m.neutral()) if tsys.nc else m.neutral()
        tq0 = np.asarray(tq0, dtype=float)
        dq = np.zeros(m.nv)
        tau_t = None if tau is None or not np.any(tau) else np.asarray(tau, dtype=float)
        if tau_t is not None and tau_t.shape != (m.nv,):
            tau_t = None
        entry = dict(tree=str(label), nv=int(m.nv), constraint_rows=int(tsys.nc), depth=_depth(m),
                     maximal_rows=None, step_s={}, body_deviation=None)
        final = None
        for cls in hard:
            sx = tsys.with_solver(cls)
            for integ in integrators:
                fam = _Run(f"{_solver_label(cls.name)} / {integ}", "reduced", cls.name, integ, "projection",
                           sx, tq0, dq, tau_t, tsys)
                tr, wall = _best_wall(fam, dt, horizon, 10 ** 9)
                entry["step_s"][fam.name] = wall / int(tr.stats["steps"])
                if final is None:
                    final = np.asarray(tr.q)[-1]
        if maximal_ok:
            from .maximal import MaximalModel

            mx = MaximalModel(tsys)
            entry["maximal_rows"] = int(mx.nrows)
            for integ in integrators:
                fam = _Run(f"maximal / {integ}", "maximal", "maximal", integ, "projection", mx, tq0, dq,
                           tau_t, tsys)
                # 20 steps, timed as the reduced runs are (the best of a few
                # runs while they are short: one 20-step run is noise)
                tr, wall = _best_wall(fam, dt, 20 * dt, 10 ** 9)
                entry["step_s"][fam.name] = wall / int(tr.stats["steps"])
        if final is not None:
            # centres of mass: the same material points whatever frame each tree gives a body
            P = forward_kinematics(m, final)
            pos = {b: P[i, :3, :3] @ (np.zeros(3) if m.inertias[i] is None else m.inertias[i].com) + P[i, :3, 3]
                   for i, b in enumerate(m.body_names)}
            if first is None:
                first = pos
                entry["body_deviation"] = 0.0
            elif set(first) == set(pos):
                entry["body_deviation"] = float(max(np.abs(pos[b] - first[b]).max() for b in pos))
        out.append(entry)
        progress_write(f"  tree {label}: " + ", ".join(f"{k} {v * 1e6:,.1f} µs" for k, v in entry["step_s"].items()))
    return out, horizon


def _maximal_model(sys):
    """The :class:`gear.MaximalModel` of the maximal runs (raises when the
    system has no maximal form: joint-space rows, massless bodies)."""
    from .maximal import MaximalModel

    return MaximalModel(sys)


def _solver_label(s):
    """A reduced run's name for a solver: the ``"maximal"`` solver is
    ``"maximal solver"`` (``"maximal / rk4"`` is the maximal-coordinate run)."""
    return "maximal solver" if s == "maximal" else s


class _NoReference(Exception):
    """compare(reference=False)."""


def compare(model_or_sys, q0=None, dq0=None, t_final=1.0, dt=1e-3, integrators=("euler", "rk4"),
            solvers=("kkt", "projection", "maximal", "soft"), maximal=True,
            maximal_stabilization=("projection", None), tau=None, record_every=None, name=None,
            progress=None, soft_options=None, reference=True, work_precision=(1, 2, 4, 8), stability=True,
            trees=None):
    """Simulate one mechanism in every formulation and integrator, and
    compare against a high-accuracy reference (see :mod:`gear.comparison`).

    A run that fails does not stop the others: it is recorded in the
    report as failed with its reason (:attr:`Comparison.failed`), and the
    runs that completed are compared.  Only bad arguments raise.

    Parameters
    ----------
    model_or_sys : gear.ConstrainedModel or gear.Model
        A closed chain, or a tree (then the "constraints" are its joints
        alone, which only the maximal runs can violate).
    q0 : array_like, shape (nq,), optional
        Initial configuration (default: the neutral configuration,
        assembled).
    dq0 : array_like, shape (nv,), optional
        Initial velocity (default zero; projected onto the constraints).
    t_final, dt : float
        Duration and step of every run.
    integrators : str or sequence of str
        Each formulation runs with each of these (``"euler"``, ``"rk4"``,
        ``"rkmk4"``; a comma-separated string works too).  ``"euler"`` is
        semi-implicit Euler in reduced coordinates and Ruan's velocity-level
        step (eq. 12) in maximal ones.
    solvers : sequence of str or gear.solvers.ConstraintSolver subclasses
        Reduced-coordinate runs, in order: the built-in solvers
        (``"kkt"``, ``"projection"``, ``"maximal"``, ``"soft"``), a
        registered plugin's name, or a solver class.  Hard solvers run
        with projection; soft ones (``hard = False``) without.
    maximal : bool
        Include the maximal-coordinate runs (:class:`gear.MaximalModel`:
        :class:`gear.LoopClosure` constraints only, every body with mass).
    maximal_stabilization : sequence of {"projection", "baumgarte", None}
        One maximal-coordinate run per integrator and entry; the default
        shows the projected run and the joints' drift without any
        stabilisation.
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
        Options of the ``"soft"`` runs' solver.  Default ``{"damping": 1 /
        (5 dt)}`` with the study's ``dt`` (kept when the work-precision
        and stability studies change ``dt``: the same soft model
        throughout).  Ruan, "Articulated rigid body systems", eq. 13: the
        soft constraint force opposes the velocity error; without damping
        the N-four-bar chain drifts 4e-3 rad from the hard solvers at N =
        10 in 1 s and diverges at N = 50.
    reference : bool
        Compute the reference run (:data:`REFERENCE`).  False: no errors
        at ``t_final`` and no work-precision study; deviations are then
        measured against the first run that completed (for quick looks:
        the reference costs ``1.5 x 64`` steps of the kkt solver per
        ``dt``).
    work_precision : sequence of float or None
        Factors of ``dt``: every completed run is repeated at ``dt *
        factor`` (factor 1 is the run itself) and its error at ``t_final``
        against the reference and its wall time per simulated second are
        recorded (:attr:`Comparison.work_precision`).  None or empty: no
        study.
    stability : bool or dict
        Find each completed run's largest stable ``dt`` by bisection
        (the criterion and the search: :data:`STABILITY`; a dict overrides
        its entries).
        False: no study.
    trees : dict, optional
        Spanning trees of the same mechanism to time: ``{label: sys}`` or
        ``{label: (sys, q0)}``, e.g. ``{"chain": gear.mechanisms.n_four_bar(10),
        "ground": gear.mechanisms.n_four_bar(10, tree="ground")}`` (the
        mechanism builders return ``(sys, q0)``; without ``q0`` the
        neutral configuration is assembled).  For each tree: the reduced
        cost per step of every hard solver in ``solvers`` and of the
        maximal formulation, over ``min(t_final, 100 dt)``, and the largest
        distance of a body's centre of mass (bodies matched by name) from
        the first tree's at the end of its first run
        (:attr:`Comparison.trees`).  ``gear compare
        n-four-bar:N`` passes both trees of the N-four-bar.

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
    >>> rep = gear.compare(sys, q0, t_final=0.05, dt=1e-3, integrators="rk4", solvers=("kkt", "soft"),
    ...                    maximal=False, work_precision=None, stability=False)
    >>> [r["name"] for r in rep.runs], rep.runs[0]["final_error"] < 1e-9, rep.failed
    (['kkt / rk4', 'soft / rk4'], True, {})
    """
    from ._progress import progress_bar, wants_progress
    from .constraints import ConstrainedModel
    from .model import Model
    from .simulation import simulate
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
    if isinstance(integrators, str):
        integrators = [s.strip() for s in integrators.split(",") if s.strip()]
    integrators = list(integrators)
    if not integrators:
        raise ValueError("integrators: give at least one of 'euler', 'rk4', 'rkmk4'")
    for s in integrators:
        if s not in ("euler", "rk4", "rkmk4"):
            raise ValueError(f"integrators: unknown integrator {s!r}; choose from 'euler', 'rk4', 'rkmk4' "
                             "(each runs in reduced and in maximal coordinates)")
    if len(set(integrators)) != len(integrators):
        raise ValueError(f"integrators: {integrators} names one more than once")
    mstab = [None if s in (None, "none") else s for s in maximal_stabilization]
    for s in mstab:
        if s not in (None, "baumgarte", "projection"):
            raise ValueError(f"maximal_stabilization: {s!r} is not 'projection', 'baumgarte' or None")
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
    solver_names = [c.name for c in classes]
    dup = sorted({n for n in solver_names if solver_names.count(n) > 1})
    if dup:
        raise ValueError(f"solvers: {dup} given more than once; give each solver once")
    if not classes and not maximal:
        raise ValueError("nothing to compare: give at least one solver or maximal=True")
    factors = [] if not work_precision else sorted({float(f) for f in work_precision})
    if any(not (np.isfinite(f) and f > 0) for f in factors):
        raise ValueError(f"work_precision: factors of dt must be positive, got {work_precision!r}")
    stab_opts = None
    if stability:
        stab_opts = dict(STABILITY)
        if isinstance(stability, dict):
            bad = set(stability) - set(STABILITY)
            if bad:
                raise ValueError(f"stability: unknown option(s) {sorted(bad)}; known: {list(STABILITY)}")
            stab_opts.update(stability)
    if trees is not None and not isinstance(trees, dict):
        raise TypeError("trees must be a dict {label: sys or (sys, q0)}")
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
    if "soft" in solver_names:
        try:                                  # bad options raise here, before any run
            soft_sys = sys.with_solver("soft", **soft_options)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"soft_options: {exc}") from None

    from .algorithms import kinetic_energy, potential_energy
    from .joints import FREE, SPHERICAL

    E0 = float(kinetic_energy(model, q0, dq0) + potential_energy(model, q0))
    Escale = max(abs(E0), float(kinetic_energy(model, q0, dq0)),
                 float(np.sum([0.0 if I is None else I.mass for I in model.inertias]))
                 * float(np.linalg.norm(model.gravity)) * 1e-2, 1e-12)

    # -- the run families ------------------------------------------------------
    families = []          # (family or an exception to record, info)
    solver_errors = {}     # a solver that does not take this mechanism's rows: its runs fail, the rest go on
    for cls in classes:
        try:
            sx = soft_sys if cls.name == "soft" else sys.with_solver(cls)
        except NotImplementedError as exc:    # (the maximal solver and joint couplers, for one)
            sx, solver_errors[cls.name] = None, exc
        hard = bool(cls.hard)
        for integ in integrators:
            fam = _Run(f"{_solver_label(cls.name)} / {integ}", "reduced" if hard else "soft", cls.name, integ,
                       "projection" if hard else None, sx, q0, dq0, tau0, sys)
            if not hard and sx is not None:
                fam.solver_options = dict(sx.solver.options)
            families.append(fam)
    mx, mx_error = None, None
    if maximal:
        try:
            mx = _maximal_model(sys)
        except Exception as exc:              # recorded as the maximal runs' failure
            mx_error = exc
        for integ in integrators:
            for s in mstab:
                label = f"maximal / {integ}" + ("" if s == "projection" else
                                                ", unstabilised" if s is None else f", {s}")
                families.append(_Run(label, "maximal", "maximal", integ, s, mx, q0, dq0, tau0, sys))

    show = wants_progress(progress)
    n_studies = 1 + len(families) + (len(families) if factors else 0) + (len(families) if stab_opts else 0) \
        + (1 if trees else 0)
    bar = progress_bar(show, total=n_studies, desc="gear compare", unit="task")

    def say(text):
        if show:
            bar.write(text)

    # -- the reference -------------------------------------------------------------
    ref = dict(name=None, t=None, q=None, final=None, error=None)
    refine = int(REFERENCE["refine"])
    ref_label = (f"{REFERENCE['solver']} / {REFERENCE['integrator']} + {REFERENCE['stabilization']} "
                 f"at dt/{refine}")
    try:
        if not reference:
            raise _NoReference()
        bar.set_postfix_str("reference")
        rsys = sys.with_solver(REFERENCE["solver"])
        kw = dict(integrator=REFERENCE["integrator"], tau=tau0, stabilization=REFERENCE["stabilization"],
                  progress=False)
        tr = simulate(rsys, q0, dq0, t_final, dt / refine, record_every=refine * record_every, **kw)
        half = simulate(rsys, q0, dq0, t_final, 2 * dt / refine, record_every=10 ** 9, **kw)
        q_ref = np.asarray(tr.q)
        if not np.isfinite(q_ref).all():
            raise FloatingPointError("the state became non-finite")
        # how far the reference moves when its step is halved: its error, and an upper bound
        # (by about 15 for a 4th-order method) once it converges; a mechanism that passes a
        # singular configuration does not converge there, and this says so
        ref.update(name=ref_label, t=np.asarray(tr.t), q=q_ref, final=q_ref[-1],
                   error=float(np.abs(model.difference(np.asarray(half.q)[-1], q_ref[-1])).max(initial=0.0)))
        say(f"  reference {ref_label}: {tr.stats['wall_time']:.2f} s, error estimate {ref['error']:.1e}")
    except _NoReference:
        pass
    except Exception as exc:                  # no reference: the first completed run stands in for it
        say(f"  reference {ref_label} FAILED: {' '.join(str(exc).split())}")
    bar.update(1)

    def final_error(q_last):
        if ref["final"] is None:
            return None
        return float(np.abs(model.difference(ref["final"], q_last)).max(initial=0.0))

    # -- the runs ----------------------------------------------------------------------
    runs, series, trajs = [], {k: {} for k in _SERIES}, {}
    t_rec = None
    done = []                                 # (family, run dict, final q, wall)
    sizes = {"nq": model.nq, "nv": model.nv, "bodies": model.nbodies, "constraint_rows": sys.nc,
             "dof": int(sys.mobility(q0).dof) if sys.nc else model.nv,
             "maximal_coordinates": 6 * model.nbodies, "maximal_rows": None, "nnz_J": None,
             "nnz_K": None, "nnz_factor": None}
    if mx is not None:
        try:
            P0, _ = mx.state(q0, dq0)
            J = mx.system(P0)["J"]
            K = J @ mx._Minv_sparse() @ J.T
            sizes.update(maximal_rows=int(mx.nrows), nnz_J=int(J.nnz), nnz_K=int(K.nnz))
            st = sys.with_solver("maximal").forward_dynamics(q0, dq0, tau0).stats
            sizes.update(nnz_factor=st.get("nnz_factor"))
        except Exception:                     # sizes stay None where they cannot be had
            pass

    def deviation_against(q, t):
        if ref["q"] is not None:
            rq, rt = ref["q"], ref["t"]
            if len(rt) != len(t) or not np.allclose(rt, t, rtol=0, atol=1e-9 * max(dt, 1e-300)):
                rq = np.stack([np.interp(t, rt, rq[:, k]) for k in range(rq.shape[1])], axis=1)
            return np.array([float(np.abs(model.difference(a, b)).max(initial=0.0)) for a, b in zip(rq, q)])
        return None

    for fam in families:
        bar.set_postfix_str(fam.name)
        run = fam.info(steps)
        if hasattr(fam, "solver_options"):
            run["solver_options"] = fam.solver_options
        runs.append(run)
        try:
            if fam.formulation == "maximal" and mx_error is not None:
                raise mx_error
            if fam.formulation != "maximal" and fam.solver in solver_errors:
                raise solver_errors[fam.solver]
            tr = fam.simulate(dt, t_final, record_every)
            q, dq, t = np.asarray(tr.q), np.asarray(tr.dq), np.asarray(tr.t)
            E, res, pos = fam.energy(tr), fam.residual(tr), fam.position_residual(tr)
            if not (np.isfinite(q).all() and np.isfinite(res).all() and np.isfinite(E).all()):
                raise FloatingPointError("the state became non-finite")
            wall = float(tr.stats["wall_time"])
            if wall < 0.05:                   # a short run: the best of a few (timer, caches, a busy machine)
                wall = min(wall, _best_wall(fam, dt, t_final, record_every)[1])
            n = int(tr.stats["steps"])
            dev = deviation_against(q, t)
            if dev is None:                   # no reference: against the first completed run
                dev = (np.zeros(len(q)) if not done else np.array(
                    [float(np.abs(model.difference(a, b)).max(initial=0.0))
                     for a, b in zip(trajs[done[0][1]["name"]][0], q)]))
            drift = np.abs(E - E0) / Escale
            run.update(steps=n, wall_s=wall, step_s=wall / max(n, 1), solve_s=fam.solve_time(),
                       native=bool(tr.stats.get("native", False)),
                       status="ok", error=None, max_constraint_residual=float(np.max(res)),
                       max_energy_drift=float(np.max(drift)), max_deviation=float(np.max(dev)),
                       final_error=final_error(q[-1]))
            for key, val in (("residual", res), ("position_residual", pos), ("energy_drift", drift),
                             ("deviation", dev)):
                series[key][fam.name] = np.asarray(val, dtype=float)
            trajs[fam.name] = (q, dq)
            # the stability criterion on the run itself (it covers the stability horizon when
            # t_final does): the search need not repeat it
            within = t <= (float(stab_opts["horizon"] or min(t_final, 1.0)) if stab_opts else 0.0) + 1e-12
            run_stable = bool(np.abs(E[within] - E0).max(initial=0.0) <= stab_opts["energy"] * Escale
                              and pos[within].max(initial=0.0) <= stab_opts["rows"]) if stab_opts else None
            done.append((fam, run, q[-1], wall, run_stable))
            if t_rec is None:
                t_rec = t
        except Exception as exc:              # keep the other runs; the reason goes in the report
            run.update(status="failed", error=_failure(fam.name, exc, dt, fam.formulation, fam.solver),
                       **{k: None for k in _METRICS})
            for key in series:
                series[key].pop(fam.name, None)
            trajs.pop(fam.name, None)
        if run["status"] == "failed":
            say(f"  {run['name']:<28} FAILED: {run['error']}")
        else:
            fe = run["final_error"]
            say(f"  {run['name']:<28} {run['wall_s']:8.2f} s  residual {run['max_constraint_residual']:.1e}"
                f"  energy drift {run['max_energy_drift']:.1e}  error at t_final "
                + ("–" if fe is None else f"{fe:.1e}"))
        bar.update(1)

    # -- work precision ------------------------------------------------------------------
    wp = []
    if factors and ref["final"] is not None:
        for fam, run, q_last, wall, _ in done:
            bar.set_postfix_str(f"work precision: {fam.name}")
            for f in factors:
                h = dt * f
                if h > t_final:
                    continue
                if f == 1.0:
                    err, cost = run["final_error"], wall / t_final
                else:
                    try:
                        # the angles read back from maximal poses are continued frame to frame,
                        # which needs less than half a turn between frames: frames 1 rad apart at
                        # the run's fastest joint rate (read-back is part of the wall time)
                        n_h = int(np.ceil(t_final / h - 1e-9))
                        vmax = float(np.abs(trajs[fam.name][1]).max(initial=0.0))
                        every = max(1, min(n_h, int(1.0 / max(vmax * h, 1e-12))))
                        tr, w = _best_wall(fam, h, t_final, every if fam.formulation == "maximal" else n_h)
                        ql = np.asarray(tr.q)[-1]
                        if not np.isfinite(ql).all():
                            continue
                        err, cost = final_error(ql), w / t_final
                    except Exception:         # a coarse step that diverges: no point
                        continue
                wp.append(dict(run=fam.name, formulation=fam.formulation, integrator=fam.integrator,
                               stabilization=fam.stabilization, dt=h, error=err, cost_s=cost))
            bar.update(1)

    # -- stability ----------------------------------------------------------------------------
    stab, capped, horizon = {}, [], None
    if stab_opts:
        horizon = float(stab_opts["horizon"] or min(t_final, 1.0))
        for fam, run, _, _, run_stable in done:
            bar.set_postfix_str(f"stability: {fam.name}")
            known = {dt: run_stable} if horizon <= t_final and dt <= horizon / stab_opts["min_steps"] else None
            lim, cap = _stability_limit(fam, dt, horizon, E0, Escale, stab_opts, known)
            stab[fam.name] = lim
            if cap:
                capped.append(fam.name)
            say(f"  {fam.name:<28} largest stable dt " + ("none found" if lim is None else
                                                          f"{'≥ ' if cap else ''}{lim:.3g} s"))
            bar.update(1)

    # -- spanning trees ----------------------------------------------------------------------
    tree_rows, tree_horizon = [], None
    if trees:
        bar.set_postfix_str("spanning trees")
        hard = [c for c in classes if c.hard]
        tree_rows, tree_horizon = _tree_study(trees, hard, integrators, tau, dt, t_final,
                                              maximal and mx is not None, say)
        bar.update(1)
    bar.close()

    settings = dict(t_final=t_final, dt=dt, integrators=integrators, steps=steps, record_every=record_every,
                    reference=ref["name"] if ref["name"] else (done[0][1]["name"] if done else None),
                    reference_error=ref["error"], reference_is_separate=ref["name"] is not None,
                    E0=E0, energy_scale=Escale, coordinate_unit=_coordinate_unit(model),
                    work_precision_factors=factors,
                    stability=None if not stab_opts else dict(stab_opts, horizon=horizon, capped=capped),
                    trees_horizon=tree_horizon, joint_motion=_joint_motion(model, ref["q"]),
                    lie_joints=sum(j.kind in (SPHERICAL, FREE) for j in model.joints))
    return Comparison(name, sizes, settings, runs, np.zeros(0) if t_rec is None else t_rec, series, trajs,
                      work_precision=wp, stability=stab, trees=tree_rows)


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

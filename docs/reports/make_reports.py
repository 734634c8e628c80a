"""Regenerate the committed comparison and analysis reports under
docs/reports/ (under a minute on a 2-core machine):

    .venv/bin/python docs/reports/make_reports.py
    .venv/bin/python docs/reports/make_reports.py --docs-only   # refill docs/compare.md only

Equivalent to ``gear compare four-bar --t 1 --dt 1e-3 --out
docs/reports/four-bar`` and ``gear compare n-four-bar:10 --t 0.5 --out
docs/reports/n-four-bar-10`` (both spanning trees; 0.5 s stops before
the chain's parallelograms lie flat at t = 0.55 s, a singular
configuration past which no reference converges), plus ``gear analyze
four-bar`` and the solver scaling on the N-four-bar.
"""
import json
import os
import sys as _sys

import gear

here = os.path.dirname(os.path.abspath(__file__))


def make_reports():
    """Run the comparisons, the analysis and the scaling; write them under docs/reports/."""
    M = gear.mechanisms
    cases = [("four-bar", M.four_bar(), 1.0, 1e-3, None),
             ("n-four-bar-10", M.n_four_bar(10), 0.5, 1e-3,
              {"chain": M.n_four_bar(10), "ground": M.n_four_bar(10, tree="ground")})]
    for name, (sys, q0), t_final, dt, trees in cases:
        print(f"{name}: {t_final} s at dt = {dt}", flush=True)
        rep = gear.compare(sys, q0, t_final=t_final, dt=dt, name=name.replace("n-four-bar-", "n-four-bar:"),
                           trees=trees, progress=True)
        rep.save(os.path.join(here, name), overwrite=True)
        print(rep.table())
        print(rep.summary())

    sys, q0 = gear.mechanisms.four_bar()
    an = gear.analysis.report(sys, "crank", q0=q0, name="four-bar")
    an.save(os.path.join(here, "four-bar-analysis"), overwrite=True)
    print(an.summary())

    sc = gear.comparison.scaling((1, 3, 10, 30, 100, 300, 1000), progress=True)
    with open(os.path.join(here, "scaling.json"), "w") as fh:
        json.dump(sc, fh, indent=1)
    gear.comparison.plot_scaling(sc, os.path.join(here, "scaling.png"))


def fill_docs():
    """Put the tables of the reports just written into docs/compare.md
    (between its ``<!-- KIND:NAME -->`` and ``<!-- /report -->`` markers;
    KIND ``report``: the runs' table, ``summary``: who wins where,
    ``trees``: the spanning-tree table)."""
    import re

    page = os.path.join(here, "..", "compare.md")
    text = open(page).read()

    def tables(md):
        """The Markdown tables of a report, in order."""
        out, cur = [], []
        for ln in md.splitlines() + [""]:
            if ln.startswith("|"):
                cur.append(ln)
            elif cur:
                out.append("\n".join(cur))
                cur = []
        return out

    def block(kind, name):
        if name == "scaling":
            sc = json.load(open(os.path.join(here, "scaling.json")))
            rows = ["| N | nv | loop rows | kkt (µs) | projection (µs) | maximal (µs) | fastest "
                    "| kkt time / maximal time |", "|---|---|---|---|---|---|---|---|"]
            for k, n in enumerate(sc["ns"]):
                t = {s: v[k] * 1e6 for s, v in sc["seconds"].items()}
                rows.append(f"| {n:,} | {sc['nv'][k]:,} | {sc['rows'][k]:,} | {t['kkt']:,.0f} | "
                            f"{t['projection']:,.0f} | {t['maximal']:,.0f} | {sc['fastest'][k]} | "
                            f"{t['kkt'] / t['maximal']:.3g}× |")
            return "\n".join(rows)
        md = open(os.path.join(here, name, "report.md")).read()
        if kind == "summary":
            part = md.split("## Who wins where", 1)[1].split("\n## ", 1)[0]
            return "\n".join(ln for ln in part.strip().splitlines() if ln.startswith("- "))
        if kind == "trees":
            return tables(md.split("## Spanning trees", 1)[1])[0]
        return tables(md)[0]

    def repl(m):
        return f"<!-- {m.group(1)}:{m.group(2)} -->\n{block(m.group(1), m.group(2))}\n<!-- /report -->"

    text = re.sub(r"<!-- (report|summary|trees):([\w-]+) -->\n.*?\n<!-- /report -->", repl, text, flags=re.S)
    with open(page, "w") as fh:
        fh.write(text)


if "--docs-only" not in _sys.argv:
    make_reports()
fill_docs()

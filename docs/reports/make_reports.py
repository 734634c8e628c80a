"""Regenerate the committed comparison and analysis reports under
docs/reports/ (about a minute on a 2-core machine):

    .venv/bin/python docs/reports/make_reports.py

Equivalent to ``gear compare four-bar --t 1 --dt 1e-3 --out
docs/reports/four-bar`` and the lines below for the N-four-bar chain, plus
``gear analyze four-bar`` and the solver scaling on the N-four-bar.
"""
import json
import os

import gear

here = os.path.dirname(os.path.abspath(__file__))
cases = [("four-bar", gear.mechanisms.four_bar(), 1.0, 1e-3),
         ("four-bar-dt-half", gear.mechanisms.four_bar(), 1.0, 5e-4),
         ("n-four-bar-10", gear.mechanisms.n_four_bar(10), 0.5, 1e-3),
         ("n-four-bar-100", gear.mechanisms.n_four_bar(100), 0.1, 1e-3)]
for name, (sys, q0), t_final, dt in cases:
    print(f"{name}: {t_final} s at dt = {dt}", flush=True)
    solvers = ("kkt",) if name.endswith("dt-half") else ("kkt", "projection", "maximal", "soft")
    rep = gear.compare(sys, q0, t_final=t_final, dt=dt, solvers=solvers,
                       name=name.replace("-dt-half", f" (dt = {dt:g})"), progress=True)
    rep.save(os.path.join(here, name), overwrite=True)
    print(rep.table())

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
    (between its ``<!-- report:NAME -->`` and ``<!-- /report -->`` markers)."""
    import re

    page = os.path.join(here, "..", "compare.md")
    text = open(page).read()

    def table(name):
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
        return "\n".join(ln for ln in md.splitlines() if ln.startswith("|"))

    def repl(m):
        return f"<!-- report:{m.group(1)} -->\n{table(m.group(1))}\n<!-- /report -->"

    text = re.sub(r"<!-- report:([\w-]+) -->\n.*?\n<!-- /report -->", repl, text, flags=re.S)
    with open(page, "w") as fh:
        fh.write(text)


fill_docs()

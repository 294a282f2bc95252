"""A metric's history over training, per row of a study, from its tracking store: at every logged
step (tokens), the mean over the row's seeds with their range, and with ``--base ROW`` each other
row's paired difference from that row at that step (mean of the per-seed differences, 95% t CI,
two-sided paired t-test p: foxwb.workbench.analysis.stats.paired). Prints a Markdown table; ``--json`` also
writes the numbers. Errors exit 2.

    python scripts/metric_history.py --workdir DIR --study acp_16k --metric acp_kept_fraction
    python scripts/metric_history.py --workdir DIR --study acp_16k --metric val_loss --base "FoX (Pro)"

A row is a variant at one search point (the table's rows, foxwb.workbench.analysis.table); a step counts the
seeds that logged the metric there. Use it for what a run's final value hides: when two arms part
during training, or how a logged share (acp_kept_fraction) moves as the gates learn.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl

from foxwb.workbench.analysis import runs as results, stats, table


def history_by_row(store, runs: list, frame: pl.DataFrame, metric: str) -> dict[str, dict[int, dict[int, float]]]:
    """row -> tokens -> seed -> value (one trial run per seed; aliases are the same runs)."""
    by_run = results.with_row_labels(frame).filter(pl.col("alias_of").is_null()).select("run_id", "row", "seed")
    hist = results.histories(store, runs, metric).join(by_run, on="run_id")
    out: dict[str, dict[int, dict[int, float]]] = {}
    for row, tokens, seed, value in hist.select("row", "tokens", "seed", "value").iter_rows():
        out.setdefault(row, {}).setdefault(tokens, {})[seed] = value
    return out


def summarise(curves: dict[str, dict[int, dict[int, float]]], order: list[str], base: str | None) -> list[dict]:
    """One entry per logged step: each row's mean, min, max and n over seeds, and with a base each
    other row's paired difference from it."""
    steps = sorted({t for row in curves.values() for t in row})
    out = []
    for t in steps:
        entry = {"tokens": t, "rows": {}, "paired": {}}
        for row in order:
            seeds = curves.get(row, {}).get(t)
            if seeds:
                values = list(seeds.values())
                entry["rows"][row] = {"mean": sum(values) / len(values), "min": min(values), "max": max(values), "n": len(values)}
            if base and row != base and seeds and curves[base].get(t):
                entry["paired"][row] = stats.paired(seeds, curves[base][t])._asdict()
        out.append(entry)
    return out


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.4g}"


def markdown(summary: list[dict], order: list[str], base: str | None) -> str:
    others = [r for r in order if base and r != base]
    head = ["tokens"] + [f"{r}: mean (min-max, n)" for r in order] + [f"{r} minus {base} (paired)" for r in others]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for e in summary:
        cells = [f"{e['tokens']:,}"]
        for r in order:
            s = e["rows"].get(r)
            cells.append(f"{_num(s['mean'])} ({_num(s['min'])}-{_num(s['max'])}, {s['n']})" if s else "")
        for r in others:
            p = e["paired"].get(r)
            if not p or p["delta"] is None:
                cells.append("")
                continue
            ci = f" ±{_num(p['half_width'])}" if p["half_width"] is not None else ""
            cells.append(f"{p['delta']:+.4g}{ci} (n {p['n']}" + (f", p {p['p']:.2g})" if p["p"] is not None else ")"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, required=True, help="the folder of the study's store (mlflow.db)")
    ap.add_argument("--study", required=True)
    ap.add_argument("--metric", required=True, help="a metric the trials log over training (val_loss, acp_kept_fraction, ...)")
    ap.add_argument("--base", default=None, metavar="ROW", help="pair every other row with this row, seed by seed, at each step")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args(argv)
    store = results.read_store(args.workdir, args.study)
    if store is None:
        ap.error(f"no study {args.study!r} in a tracking store at {args.workdir}")
    runs = results.finished_runs(store, args.study)
    frame = results.trial_runs(args.workdir, args.study, runs=runs)
    if frame.is_empty():
        ap.error(f"study {args.study!r}: no finished runs in {args.workdir}")
    logged = sorted({k for r in runs for k in r.data.metrics})
    if args.metric not in logged:
        ap.error(f"--metric {args.metric!r}: the study's runs log no such metric; they log: {', '.join(logged)}")
    parent = results.study_parent(store, args.study)
    info = table.study_info(args.study, frame, parent_tags=parent.data.tags if parent else {})
    order = table.study_table(frame, info).filter(pl.col("n_seeds") > 0)["row"].to_list()  # the table's order
    if args.base is not None and args.base not in order:
        ap.error(f"--base {args.base!r} is not a row of study {args.study!r}; its rows: {', '.join(order)}")
    curves = history_by_row(store, runs, frame, args.metric)
    order = [r for r in order if r in curves]
    if args.base is not None and args.base not in curves:
        ap.error(f"--base {args.base!r} logged no {args.metric} history")
    summary = summarise(curves, order, args.base)
    print(f"study {args.study!r}: {args.metric} over training, per row (mean over seeds)"
          + (f"; paired differences from {args.base!r}: mean, 95% t CI, paired t-test p" if args.base else ""))
    print(markdown(summary, order, args.base))
    if args.json:
        args.json.write_text(json.dumps({"study": args.study, "metric": args.metric, "base": args.base, "rows": order,
                                         "steps": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""L(i), the loss by position, averaged over spans of positions, per row of a study, from the
trials' result files (each trial's `per_position_loss`, to the longest evaluated length).

    python scripts/position_spans.py --workdir DIR --study fox_table3_4096 --results RDIR \
        --spans 0,1024,2048,3072,4096,8192,16384

DIR holds the study's store (its runs name each trial's row, point and seed by spec hash); RDIR
holds `trials/<spec_hash>/result.json` (a workdir, or the archive `bash benchmarks/gpu.sh
stability` returns as stability-results.tgz, unpacked): this reads the result files, not the
store's artifacts, which a store carried back without its artifact folder lacks. A row is a
variant at one search point; its value over a span is the mean over the span's positions of the
mean over the seeds whose result file is there (the count is printed). Prints a Markdown table.
With ``--base ROW``, a second table gives each other row's paired difference from that row over
each span: the mean over the seeds both rows have of the per-seed differences of span means, its
95% t CI and the paired t-test's p (foxwb.workbench.analysis.stats.paired). With ``--seeds ROW``, a table of
that row's seeds, best val_ppl first, each with its span means: whether a row's slow seeds lose
over the whole context or only far into it. ``--json PATH`` also writes the numbers: each row's
seeds, span means and per-seed span means, and with ``--base`` the paired differences.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import polars as pl

from foxwb.workbench.analysis import runs as results, stats


def spans_by_row(frame: pl.DataFrame, found: dict[str, dict], edges: list[int]) -> list[dict]:
    """One entry per row of the study's table (a variant at one search point) with a result file:
    its seeds and span means."""
    out = []
    for (row,), rows in results.with_row_labels(frame).group_by(["row"], maintain_order=True):
        hashes = {seed: h for seed, h in rows.sort("seed").select("seed", "spec_hash").unique(maintain_order=True).iter_rows()
                  if h in found}
        by_seed = {seed: found[h]["per_position_loss"] for seed, h in hashes.items()}
        if not by_seed or len({len(c) for c in by_seed.values()}) != 1:
            continue
        per_seed = {seed: [float(np.mean(c[a:b])) if b <= len(c) else None for a, b in zip(edges[:-1], edges[1:])]
                    for seed, c in by_seed.items()}
        # A span's mean over seeds of the seeds' span means (the same equal-length curves' mean over both).
        spans = [None if v[0] is None else float(np.mean(v)) for v in zip(*per_seed.values())]
        out.append({"row": row, "seeds": len(by_seed), "spans": spans, "per_seed": per_seed,
                    "val_ppl": {seed: found[h].get("val_ppl") for seed, h in hashes.items()}})
    return out


def paired_spans(rows: list[dict], base: str) -> list[dict]:
    """Each row but ``base``: per span, its paired difference from the base over the seeds both have."""
    ref = next(r for r in rows if r["row"] == base)
    out = []
    for r in rows:
        if r["row"] == base:
            continue
        diffs = []
        for i in range(len(r["spans"])):
            mine = {s: v[i] for s, v in r["per_seed"].items()}
            theirs = {s: v[i] for s, v in ref["per_seed"].items()}
            diffs.append(stats.paired(mine, theirs))
        out.append({"row": r["row"], "spans": diffs})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, required=True, help="the folder of the study's store (mlflow.db)")
    ap.add_argument("--study", required=True)
    ap.add_argument("--results", type=Path, required=True, help="a folder with trials/<spec_hash>/result.json")
    ap.add_argument("--spans", default="0,1024,2048,3072,4096", help="span edges in positions, comma-separated")
    ap.add_argument("--base", default=None, metavar="ROW", help="also pair every other row with this one, seed by seed")
    ap.add_argument("--seeds", default=None, metavar="ROW", help="also list this row's seeds, best val_ppl first, "
                                                                  "each with its span means")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args(argv)
    edges = [int(e) for e in args.spans.split(",")]
    if len(edges) < 2 or edges != sorted(set(edges)) or edges[0] < 0:
        raise SystemExit(f"--spans {args.spans!r}: at least two increasing positions from 0 up")
    frame = results.trial_runs(args.workdir, args.study)
    if frame is None or frame.is_empty():
        raise SystemExit(f"no runs of study {args.study!r} in {args.workdir}")
    frame = frame.filter(pl.col("status") == "FINISHED")
    found = {p.parent.name: json.loads(p.read_text()) for p in sorted(args.results.glob("trials/*/result.json"))}
    rows = spans_by_row(frame, found, edges)
    if not rows:
        raise SystemExit(f"no result file in {args.results}/trials/ belongs to a finished run of {args.study!r}")
    heads = [f"{a}-{b}" for a, b in zip(edges[:-1], edges[1:])]
    print("| row | seeds | " + " | ".join(heads) + " |")
    print("|---|---|" + "---|" * len(heads))
    for r in rows:
        cells = ["" if v is None else f"{v:.3f}" for v in r["spans"]]
        print(f"| {r['row']} | {r['seeds']} | " + " | ".join(cells) + " |")
    for flag, row in (("--base", args.base), ("--seeds", args.seeds)):
        if row is not None and row not in {r["row"] for r in rows}:
            raise SystemExit(f"{flag} {row!r} is not a row with result files; the rows: {', '.join(r['row'] for r in rows)}")
    if args.seeds is not None:
        r = next(r for r in rows if r["row"] == args.seeds)
        print(f"\n{args.seeds!r} by seed, best val_ppl first")
        print("| seed | val_ppl | " + " | ".join(heads) + " |")
        print("|---|---|" + "---|" * len(heads))
        for seed in sorted(r["per_seed"], key=lambda s: (r["val_ppl"][s] is None, r["val_ppl"][s])):
            cells = ["" if v is None else f"{v:.3f}" for v in r["per_seed"][seed]]
            ppl = r["val_ppl"][seed]
            print(f"| {seed} | {'' if ppl is None else f'{ppl:.3f}'} | " + " | ".join(cells) + " |")
    paired = [] if args.base is None else paired_spans(rows, args.base)
    if args.json:
        args.json.write_text(json.dumps({
            "study": args.study, "spans": [[a, b] for a, b in zip(edges[:-1], edges[1:])], "base": args.base,
            "rows": [{"row": r["row"], "seeds": r["seeds"], "spans": r["spans"],
                      "per_seed": {str(seed): v for seed, v in r["per_seed"].items()}} for r in rows],
            "paired": [{"row": r["row"], "spans": [d._asdict() for d in r["spans"]]} for r in paired]}, indent=1) + "\n")
    if args.base is None:
        return
    print(f"\npaired with {args.base!r}: mean of the per-seed differences, 95% t CI (n seeds, paired t-test p)")
    print("| row minus base | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for r in paired:
        cells = ["" if d.delta is None else f"{d.delta:+.3f}" + (f" ±{d.half_width:.3f}" if d.half_width is not None else "")
                 + f" (n {d.n}" + (f", p {d.p:.2g})" if d.p is not None else ")") for d in r["spans"]]
        print(f"| {r['row']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

"""The Table 3 reproduction's numbers and figure, from a study's tracking store.

    python scripts/reproduction.py --workdir runs/table3 --out-json experiments/table3_1024/table3.json \
        --out-png experiments/table3_1024/reproduction-per-position.png

Reads the finished runs the dashboard reads (foxwb.workbench.analysis.runs), prints a Markdown table of
val_ppl (mean and 95% CI over seeds, every seed's value) beside the paper's Table 3, writes the
same as JSON with each variant's L(i) averaged over seeds in 32-token bins, and renders the
dashboard's per-position figure (foxwb.dashboards.figures.per_position_figure) for the rows the paper's
findings compare as a PNG (plotly + kaleido, which drives a local Chrome or Chromium; set
BROWSER_PATH if it is not found).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl

from foxwb.dashboards import figures
from foxwb.dashboards.png import write_png
from foxwb.dashboards.site import position_curves, training_context
from foxwb.workbench.analysis import runs as results, table

# docs/fox-notes.md, "Table 3" (360M params, 7.5B tokens, context 16384; one seed per row).
PAPER = {
    "Transformer (LLaMA) w/o RoPE": 29.30, "Transformer (LLaMA)": 7.49, "Transformer (LLaMA) + forget gate": 7.19,
    "FoX (LLaMA)": 7.25, "FoX (LLaMA) + QK-norm": 7.08, "FoX (LLaMA) + QK-norm + output gate": 6.88,
    "FoX (LLaMA) + QK-norm + output gate + output norm": 6.80, "FoX (Pro)": 6.62, "FoX (Pro) - QK-norm": 6.79,
    "FoX (Pro) - output gate": 6.86, "FoX (Pro) - output norm": 6.69, "FoX (Pro) - KV-shift": 6.80,
    "FoX (Pro) + RoPE": 6.63, "Transformer (Pro)": 6.82, "FoX (Pro) - forget gate": 7.40,
}
FIGURE_ROWS = ["FoX (Pro)", "Transformer (Pro)", "FoX (LLaMA)", "Transformer (LLaMA)", "FoX (Pro) - forget gate"]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--study", default="fox_table3")
    ap.add_argument("--base", default="FoX (Pro)", help="the row deltas are taken against (must be a variant)")
    ap.add_argument("--out-json", type=Path, required=True)
    ap.add_argument("--out-png", type=Path)
    args = ap.parse_args(argv)
    store = results.open_store(args.workdir, args.study)
    if store is None:
        raise SystemExit(f"no tracking store in {args.workdir}")
    runs = results.finished_runs(store, args.study)
    frame = results.trial_runs(args.workdir, args.study, runs=runs)
    # Table 3's rows in the paper's order; any other study in its own order (the store's).
    parent = results.study_parent(store, args.study)
    info = table.study_info(args.study, frame, parent_tags=parent.data.tags if parent else {}, base=args.base)
    order = [v for v in PAPER if v in set(frame["variant"])] or info.order
    info = table.StudyInfo(args.study, info.base, order, info.seeds, info.alpha, base_from=info.base_from)
    summary = table.study_table(frame, info)
    curves = position_curves(store, runs, frame, order)
    context = training_context(runs)
    rows = []
    print("| variant | seeds | val_ppl mean | 95% CI | per seed | delta vs " + args.base + " | paper PPL |")
    print("|---|---|---|---|---|---|---|")
    for r in summary.iter_rows(named=True):
        seeds = frame.filter(pl.col("variant") == r["row"]).sort("seed")
        per_seed = [round(v, 3) for v in seeds["val_ppl"].to_list()]
        curve = curves.get(r["row"])
        binned = None if curve is None else curve.mean(0)[: curve.shape[1] // 32 * 32].reshape(-1, 32).mean(1)
        rows.append({"variant": r["row"], "seeds": r["n_seeds"], "val_ppl_mean": r["mean"], "ci95": r["ci95"],
                     "val_ppl_per_seed": per_seed, "delta_vs_base": r["delta"], "paper_ppl": PAPER.get(r["row"]),
                     "n_params": int(seeds["n_params"][0]),
                     "loss_by_position_32_token_bins": None if binned is None else [round(float(v), 4) for v in binned]})
        delta = "" if r["row"] == args.base or r["delta"] is None else f"{r['delta']:+.3f}"
        print(f"| {r['row']} | {r['n_seeds']} | {r['mean']:.3f} | ±{r['ci95']:.3f} | "
              f"{', '.join(f'{v:.2f}' for v in per_seed)} | {delta} | {PAPER.get(r['row'], '')} |")
    out = {"study": args.study, "base": args.base, "context": context, "trials": frame.height, "rows": rows}
    args.out_json.write_text(json.dumps(out, indent=1))
    if args.out_png:
        shown = {k: curves[k] for k in FIGURE_ROWS if k in curves} or curves
        fig = figures.per_position_figure(shown, context)
        fig.update_layout(width=1300, height=480, title=f"{args.study}: per-position loss, {len(next(iter(shown.values())))} seeds")
        write_png(fig, args.out_png)
        print(f"figure: {args.out_png}")


if __name__ == "__main__":
    main()

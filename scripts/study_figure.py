"""A study's figure from its tracking store, as a PNG for the docs: a scaling study's laws (loss
against parameters, each variant's law with its 95% bootstrap band and its prediction); a scaling
or crossed study's effect versus the design's axis (each variant's paired difference from the
base, 95% CI; ``--pair VARIANT=BASE``, repeatable, draws chosen pairs instead: FoX (Pro) against
Transformer (Pro) beside FoX (LLaMA) against Transformer (LLaMA)); or any study's ``history``, a
metric over training per row (mean and min-max band over seeds: the dashboard's training curves,
or ``--metric acp_kept_fraction`` for the share pruning keeps); or any study's ``seeds``, each row's
seeds around its mean (the dashboard's seed spread, ``--metric val_ppl`` as the table). The effect and the history are in
``--metric`` (val_loss by default: a difference in nats, comparable across points whose
perplexities differ). Errors exit 2.

    python scripts/study_figure.py --workdir DIR --study scaling_fox_vs_transformer --figure laws \
        --out experiments/scaling_ladder/scaling-ladder-laws.png

The figures are the dashboard's (dashboards/figures.py), rendered by kaleido (dashboards/png.py).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from foxwb.dashboards import figures
from foxwb.dashboards.png import write_png
from foxwb.dashboards.site import training_curves
from foxwb.workbench.analysis import runs as results, table
from foxwb.workbench.analysis.effects import effects
from foxwb.workbench.analysis.scaling.laws import fit_study
from foxwb.workbench.spec.errors import SpecError


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--study", required=True)
    ap.add_argument("--figure", choices=("laws", "effect", "history", "seeds"), required=True)
    ap.add_argument("--out", type=Path, required=True, help="the PNG to write")
    ap.add_argument("--title", default=None)
    ap.add_argument("--metric", default="val_loss", help="the effect's or the history's metric (default val_loss)")
    ap.add_argument("--pair", action="append", default=[], metavar="VARIANT=BASE",
                    help="with --figure effect: draw VARIANT's difference from BASE (repeatable); default: "
                         "every variant against the design's base")
    args = ap.parse_args(argv)
    pairs = []
    for pair in args.pair:
        variant, sep, base = pair.partition("=")
        if not (sep and variant.strip() and base.strip()):
            ap.error(f"--pair {pair!r}: expected VARIANT=BASE, two variant names joined by '='")
        pairs.append((variant.strip(), base.strip()))
    if pairs and args.figure != "effect":
        ap.error("--pair goes with --figure effect")
    store = results.read_store(args.workdir, args.study)
    if store is None:
        ap.error(f"no study {args.study!r} in a tracking store at {args.workdir}")
    frame = results.trial_runs(args.workdir, args.study, runs=results.finished_runs(store, args.study))
    if frame.is_empty():
        ap.error(f"study {args.study!r}: no finished runs in {args.workdir}")
    parent = results.study_parent(store, args.study)
    tags = parent.data.tags if parent else {}
    info = table.study_info(args.study, frame, parent_tags=tags)
    if args.figure in ("laws", "effect") and (info.design_kind not in ("scaling", "crossed")
                                     or (args.figure == "laws" and info.design_kind != "scaling")):
        ap.error(f"study {args.study!r} is a {info.design_kind or 'plain'} study: --figure laws needs a "
                 "scaling design, --figure effect a scaling or crossed one (--figure history and seeds take any)")
    if args.metric not in frame.columns:
        logged = sorted(c for c in frame.columns if frame.schema[c].is_numeric() and c not in ("seed", "start_time", "workers"))
        ap.error(f"--metric {args.metric!r}: the study's runs have no such metric; they have: {', '.join(logged)}")
    if args.figure == "history":
        rows = table.study_table(frame, info).filter(pl.col("n_seeds") > 0)["row"].to_list()  # the table's order
        curves = training_curves(store, results.finished_runs(store, args.study), table.normalise(frame), rows, args.metric)
        if not curves:
            ap.error(f"--metric {args.metric!r}: no run of study {args.study!r} logged it during training")
        fig = figures.training_curves_figure(curves, args.metric)
    elif args.figure == "seeds":
        rows = table.study_table(frame, info, args.metric).filter(pl.col("n_seeds") > 1)["row"].to_list()
        if not rows:
            ap.error(f"study {args.study!r}: no row has two finished seeds or more: no spread to draw")
        fig = figures.seeds_figure(table.row_seed_values(frame, info, args.metric), rows, args.metric)
    elif args.figure == "laws":
        ladder, fits, _ = fit_study(table.normalise(frame), info.order, info.extrapolate_to)
        fig = figures.scaling_figure(ladder, fits, info.order)
    else:
        found = []
        for variant, base in pairs or [(None, info.base)]:
            try:
                for name in (variant, base):
                    if name is not None:
                        table.check_variant(name, args.study, info.order)
            except SpecError as e:
                ap.error(f"--pair {variant}={base}: {e}")
            with_base = table.study_info(args.study, frame, parent_tags=tags, base=base)
            chosen = [e for e in effects(table.study_table(frame, with_base, args.metric), info.axis)
                      if variant is None or e["variant"] == variant]
            if variant is not None and not chosen:
                ap.error(f"--pair {variant}={base}: {variant!r} has no rows compared with {base!r} at the axis's "
                         f"points; the variants: {', '.join(info.order)}")
            found += chosen
        fig = figures.effect_figure(found, args.metric, info.axis[0].split("=")[0] if info.axis else "the axis")
    fig.update_layout(width=1000, height=560, title=args.title or f"{args.study}: {args.figure}")
    write_png(fig, args.out)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()

"""A scaling or crossed study's figure from its tracking store, as a PNG for the docs: the laws
(loss against parameters, each variant's law with its 95% bootstrap band and its prediction) or
the effect versus the design's axis (each variant's paired difference from the base, 95% CI).

    python scripts/study_figure.py --workdir DIR --study scaling_fox_vs_transformer --figure laws \
        --out docs/scaling-ladder-laws.png

The figures are the dashboard's (dashboards/figures.py), rendered by kaleido (dashboards/png.py).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from dashboards import figures
from dashboards.png import write_png
from workbench import results, table


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--study", required=True)
    ap.add_argument("--figure", choices=("laws", "effect"), required=True)
    ap.add_argument("--out", type=Path, required=True, help="the PNG to write")
    ap.add_argument("--title", default=None)
    args = ap.parse_args(argv)
    store = results.open_store(args.workdir, args.study)
    if store is None:
        raise SystemExit(f"no tracking store in {args.workdir}")
    frame = results.trial_runs(args.workdir, args.study, runs=results.finished_runs(store, args.study))
    if frame.is_empty():
        raise SystemExit(f"study {args.study!r}: no finished runs in {args.workdir}")
    parent = results.study_parent(store, args.study)
    info = table.study_info(args.study, frame, parent_tags=parent.data.tags if parent else {})
    if info.design_kind not in ("scaling", "crossed") or (args.figure == "laws" and info.design_kind != "scaling"):
        raise SystemExit(f"study {args.study!r} is a {info.design_kind or 'plain'} study: --figure laws needs a "
                         "scaling design, --figure effect a scaling or crossed one")
    if args.figure == "laws":
        from workbench.scaling_study import fit_study

        ladder, fits, _ = fit_study(table.normalise(frame), info.order, info.extrapolate_to)
        fig = figures.scaling_figure(ladder, fits, info.order)
    else:
        from workbench.effects import effects

        found = effects(table.study_table(frame, info, "val_loss"), info.axis)
        fig = figures.effect_figure(found, "val_loss", info.axis[0].split("=")[0] if info.axis else "the axis")
    fig.update_layout(width=1000, height=560, title=args.title or f"{args.study}: {args.figure}")
    write_png(fig, args.out)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()

"""``wb results``: a study's claims with their verdicts, then its table from the tracking store (mean
and 95% CI over seeds, the paired comparison with the base, its power; effects and scaling fits
where the design has them), as text,
CSV, parquet, JSON, Markdown or LaTeX; or two studies' shared rows side by side."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from foxwb.components import sources
from foxwb.workbench.analysis import export, fairness, paper_table, report, table
from foxwb.workbench.analysis import runs as results
from foxwb.workbench.analysis.claims import declared, study_claims
from foxwb.workbench.analysis.effects import effects, grid_effects
from foxwb.workbench.analysis.scaling.laws import study_fits
from foxwb.workbench.cli.study_runs import check_metric, no_trials, results_of
from foxwb.workbench.downstream.study import store_comparisons
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.study import SeedPlan, expand


def command(args: argparse.Namespace) -> int:
    if args.format == "parquet" and not args.out:
        raise SpecError("--format parquet needs --out FILE (parquet is binary)")
    if len(args.study) > 2:
        raise SpecError(f"wb results takes one study, or two to compare; got {len(args.study)}")
    loaded = [results_of(target, args) for target in args.study]
    for name, _, runs, _, _ in loaded:
        if runs.is_empty():  # nothing there to read: an error of what was asked, code 2 as in `wb status`
            raise SpecError(no_trials(name, args))
    # The test split's perplexity where every study's runs record it (docs/trials-and-data.md, "Three splits").
    args.metric = args.metric or min(table.report_metric(runs) for _, _, runs, _, _ in loaded)
    for _, _, runs, _, _ in loaded:
        check_metric(runs, args.metric)
    if len(loaded) == 2:
        return compare(args, loaded)
    # The study file's trials, expanded once (results_of) for the table, the fairness report and the stale check.
    name, study, runs, tags, trials = loaded[0]
    info = table.study_info(name, runs, study, tags, args.base, trials=trials)
    rows = table.study_table(runs, info, args.metric)
    about = {"study": name, "metric": args.metric, "metric_split": table.split_note(runs, args.metric),
             "small_test_sets": table.small_test_sets(runs), "base": info.base, "base_from": info.base_from,
             "alpha": info.alpha, "p": "p_holm" if args.p == "holm" else "p_unadjusted", "seeds": info.seeds}
    if info.variant_seeds:
        about["variant_seeds"] = info.variant_seeds
    # Each claim's verdict (the declared ones, else one per compared row at the default sesoi), first.
    about["claims"] = study_claims(runs, info, declared(study, tags), plan=plan_of(study, tags))
    if info.design_kind == "scaling":
        about |= study_fits(runs, info.order, info.extrapolate_to)
    if info.design_kind in ("scaling", "crossed"):
        about["effects"] = effects(rows, info.axis)
    elif info.design_kind == "grid" and info.grid_axes:
        about["effects"] = grid_effects(runs, info.grid_axes, args.metric)
    about["fairness"] = fairness_of(args, name, study, runs, tags, trials)  # after the table (docs/results.md)
    about["stale"] = stale_of(study, runs, trials)
    # Each variant against the base item by item, on the tasks `wb eval` ran (docs/evaluation.md).
    about["downstream"] = downstream_of(args, name, study, info.base)
    # The library versions of the study's last `wb run` (its parent run's tags version.<name>).
    about["versions"] = {k.removeprefix("version."): v for k, v in tags.items() if k.startswith("version.")}
    if args.format == "table":
        lines = (loud_lines(about, args.study[0]) + report.claim_lines(about["claims"], info.alpha)
                 + report.table_lines(rows, info, args.metric, args.p == "holm", about["metric_split"]))
        if info.design_kind == "scaling":
            lines += report.fit_lines(about)
        lines += report.effect_lines(about)
        lines += report.downstream_lines(about["downstream"])
        lines += fairness.lines(about["fairness"])
        emit("\n".join(lines) + "\n", args.out)
    elif args.format in paper_table.FORMATS:
        emit(paper_table.study(rows, about, info, args.format, loud_lines(about, args.study[0])), args.out)
    else:
        export.write(rows, args.format, args.out, about)
    return 0


def loud_lines(about: dict, target: str) -> list[str]:
    """What the table must not be read without: a small test set, trials run on component code changed since."""
    loud = [about["small_test_sets"]] if about["small_test_sets"] else []
    if about["stale"]:
        rows_named = sorted({r for r, _ in about["stale"].values()})
        loud.append(f"stale: {len(about['stale'])} finished trial(s) of {', '.join(rows_named)} ran with component code "
                    f"changed since (docs/models.md, \"Stale results\"): `wb run {target} --rerun stale`")
    return loud


def plan_of(study, tags: dict):
    """The study's seed plan: from its file, else as tagged on its parent run; None without one."""
    if study is not None:
        return study.plan()
    return SeedPlan.model_validate_json(tags["seed_plan"]) if tags.get("seed_plan") else None


def stale_of(study, runs, trials: list | None = None) -> dict[str, tuple[str, str]]:
    """spec hash -> (row, why) of each finished trial of the study file whose components' sources
    changed since it ran; {} without the file (the components are the file's) or the digests.
    ``trials``: the file's, expanded (expanded here where not given)."""
    if study is None or runs.is_empty() or "components_source" not in runs.columns:
        return {}
    done = runs.filter(runs["status"] == "FINISHED")
    recorded = dict(zip(done["spec_hash"].to_list(), done["components_source"].to_list()))
    out = {}
    for t in expand(study) if trials is None else trials:
        why = sources.stale(t.spec.model.components(), recorded.get(t.spec_hash))
        if why:
            out[t.spec_hash] = (t.row, why)
    return out


def compare(args: argparse.Namespace, loaded) -> int:
    # Each study's rows as its own table reads them: a tune-then-confirm study's confirmation rows included.
    (a, values_a), (b, values_b) = [(name, table.row_seed_values(runs, table.study_info(name, runs, study, tags, trials=trials),
                                                                  args.metric))
                                    for name, study, runs, tags, trials in loaded]
    frame = report.compare_studies(values_a, values_b)
    if frame.is_empty():
        print(f"studies {a!r} and {b!r} share no row (variant and searched values, or a confirmation row) with finished seeds", file=sys.stderr)
        return 1
    shared = set(frame["row"])
    only_a, only_b = sorted(set(values_a) - shared), sorted(set(values_b) - shared)
    if args.format in paper_table.FORMATS:
        emit(paper_table.comparison(frame, a, b, args.metric, only_a, only_b, args.format), args.out)
        return 0
    if args.format != "table":
        export.write(frame, args.format, args.out, {"studies": [a, b], "metric": args.metric})
        return 0
    lines = report.comparison_lines(frame, a, b, args.metric, only_a, only_b)
    emit("\n".join(lines) + "\n", args.out)
    return 0


def downstream_of(args: argparse.Namespace, name: str, study, base: str | None) -> dict:
    """Each variant against the base on the tasks `wb eval STUDY` logged to the trials' runs, read
    from the store as the dashboard reads them (downstream.study.store_comparisons)."""
    store = results.read_store(Path(args.workdir), name, study.experiment if study else None, args.tracking_uri)
    return store_comparisons(store, results.all_runs(store, name), base) if store else {}


def fairness_of(args: argparse.Namespace, name: str, study, runs, tags: dict, trials: list | None = None) -> dict:
    """The fairness report: from the study file (``trials``: its, expanded) where given, else from the
    store's runs alone."""
    if study is not None:
        return fairness.of_study(study, tags, runs, trials=trials)
    store = results.read_store(Path(args.workdir), name, None, args.tracking_uri)
    return fairness.of_runs(results.all_runs(store, name), tags) if store else {"rows": [], "flags": []}


def emit(text: str, out: str | None) -> None:
    if out:
        Path(out).write_text(text)
    else:
        sys.stdout.write(text)

"""The `wb` commands that read what a study did: `results` (the study table, its export, two
studies side by side), `status`, `run --dry-run` (the trials' states, seeds for an effect), `info`
on a study file and `--version`. They sit on top of the engine, beside workbench/cli/main.py."""
from __future__ import annotations

import argparse
import sys

from foxwb.workbench.train import layout
from foxwb.workbench.run import live_view as progress
from foxwb.workbench.spec.errors import SpecError


def load_study(path: str):
    """A study file read and validated (foxwb.workbench.spec.study.load_study), imported late: the
    spec stage brings torch, which `wb --help` and `wb --version` do without."""
    from foxwb.workbench.spec.study import load_study as read

    return read(path)


def is_study_file(target: str) -> bool:
    from foxwb.workbench.spec.errors import read_yaml
    from foxwb.workbench.spec.presets import PRESETS

    if target in PRESETS:
        return False
    data = read_yaml(target)
    return isinstance(data, dict) and "design" in data


def cmd_info_study(args: argparse.Namespace) -> int:
    """Each variant of a study: its slots, parameters and FLOPs per token at its trials' context."""
    from foxwb.workbench.spec.cost import flops_per_token, param_counts
    from foxwb.workbench.spec.study import expand

    study = load_study(args.spec)
    models: dict[str, tuple] = {}
    for t in expand(study):
        for name in (t.variant, *t.aliases):
            models.setdefault(name, (t.spec.model, args.context or t.spec.data.context))
    width = max(len("variant"), *map(len, models))
    print(f"study {study.name!r}: {len(models)} variants")
    print(f"{'variant':<{width}}  {'params':>13}  {'w/o input emb.':>14}  {'FLOPs/token fwd':>15}  {'train (3x)':>10}"
          f"  {'context':>7}  slots that differ from the first variant")
    first = None
    for name, (model, context) in models.items():
        counts, flops = param_counts(model), flops_per_token(model, context)
        kinds = {k: v.kind for k, v in model.attention.slots().items()}
        first = first or kinds
        differs = ", ".join(f"{k}={v}" for k, v in kinds.items() if v != first[k])
        print(f"{name:<{width}}  {counts['total']:>13,}  {counts['non_embedding']:>14,}  {flops['forward']:>15.3e}  "
              f"{flops['train']:>10.3e}  {context:>7}  {differs}")
    return 0

def results_of(target: str, args: argparse.Namespace):
    """(name, study spec or None, runs frame, parent run's tags) of a study file or name; reading
    creates nothing in the store."""
    from pathlib import Path

    from foxwb.workbench.analysis import runs as results

    study = load_study(target) if target.endswith((".yaml", ".yml")) else None
    name = study.name if study else target
    store = results.read_store(Path(args.workdir), name, study.experiment if study else None, args.tracking_uri)
    if store is None:
        return name, study, __import__("polars").DataFrame(), {}
    parent = results.study_parent(store, name)
    runs = results.trial_runs(Path(args.workdir), name, runs=results.all_runs(store, name))
    if study is not None:
        from foxwb.workbench.spec.study import expand

        runs, renamed = results.as_planned(runs, expand(study))
        for old, new in renamed.items():
            print(f"note: the runs recorded as {old!r} are the trials {target} now names {new!r} (the same "
                  "spec hashes); they are shown under the file's name", file=sys.stderr)
    return name, study, runs, (parent.data.tags if parent else {})


def no_trials(name: str, args: argparse.Namespace) -> str:
    """Why a study has nothing to show: no store there, or the studies the store does hold."""
    from pathlib import Path

    from foxwb.workbench.analysis import runs as results
    from foxwb.workbench.run.tracking import local_tracking_uri

    where = args.tracking_uri or args.workdir
    if not layout.has_store(Path(args.workdir), args.tracking_uri):
        return f"no trials of study {name!r} in {where}: no tracking store there (run the study there first, or give the --workdir it ran in)"
    held = [s for s, _ in results.studies(args.tracking_uri or local_tracking_uri(Path(args.workdir)))]
    return f"no trials of study {name!r} in {where}; " + (f"its store holds {', '.join(map(repr, held))}" if held
                                                           else "its store holds no study yet")


def check_metric(runs, metric: str) -> None:
    done = runs.filter(runs["status"] == "FINISHED")
    recorded = sorted(c for c in done.columns if done[c].dtype.is_float() and done[c].drop_nulls().len())
    if done.height and metric not in recorded:
        raise SpecError(f"--metric {metric!r} is not a final metric of these trials; recorded: {', '.join(recorded)}")


def dry_run(study, workdir, args: argparse.Namespace) -> int:
    """The trials, their spec hashes and state in the store; with --effect, the seeds that would
    detect it, from the pilot runs' spread."""
    from foxwb.workbench.analysis import runs as results, status, table
    from foxwb.workbench.spec.cost import flops_per_token, param_counts
    # The runner's public helpers, imported here as the spec stage is (load_study): the runner
    # imports the study's spec, which brings torch, and `wb --help` does without it. (It imports
    # neither Ray nor MLflow, nor changes the environment, when imported.)
    from foxwb.workbench.run.runner import no_gpu_here, optuna_draws_done, to_run
    from foxwb.workbench.spec.study import expand, schedule_notes, variant_names

    if getattr(args, "base", None) is not None:  # checked before anything is printed
        if args.effect is None:
            raise SpecError("--base goes with --effect (the variant the effect is measured against)")
        table.check_variant(args.base, study.name, variant_names(study), "--base")
    trials = expand(study)
    store = results.read_store(workdir, study.name, study.experiment, args.tracking_uri)
    runs = results.all_runs(store, study.name) if store is not None else []
    gone = status.no_driver(store, study.name)
    states = {s.spec_hash: s for s in status.trial_states(store, runs, trials, no_driver=gone)}
    # Done as `wb run` counts it (a trial ASHA stopped early is done; an Optuna search once it has
    # its draws); the states in brackets are this stage's trials', not the confirmation's.
    todo = trials if store is None else to_run(store, study, trials, store.finished_trials(study.name))
    done = len(trials) - len(todo)
    parts = [status.summary([states[t.spec_hash] for t in trials if t.spec_hash in states])]
    optuna = [t for t in trials if t.optuna_samples]
    if optuna:
        drawn = 0 if store is None else sum(min(optuna_draws_done(store, study, t), t.optuna_samples) for t in optuna)
        parts.append(f"{drawn} of {sum(t.optuna_samples for t in optuna)} optuna draws finished")
    parts = ", ".join(p for p in parts if p)
    print(f"study {study.name!r}: {progress.count(len(trials), 'trial')}, {done} done" + (f" ({parts})" if parts else ""))
    names = [t.row for t in trials]
    width = max(len("variant"), *map(len, names))
    print(f"{'variant':<{width}} {'seed':>4}  {'spec hash':<16}  {'params':>12}  {'tokens':>13}  {'train FLOPs':>11}  status")
    for t, name in zip(trials, names):
        s = states.get(t.spec_hash)
        text = "done" if s is None or s.state == "finished" else \
            "done (stopped early by ASHA)" if s.state == "stopped" else s.state
        if s is not None and s.state in ("running", "stalled", "failed", "killed") and s.detail:
            text += f": {s.detail}"
        if t.optuna_samples:
            text = f"optuna search of {t.optuna_samples} draws"
        also = f"  (also: {', '.join(t.aliases)})" if t.aliases else ""
        tokens = t.spec.train.trained_tokens(t.spec.data.context)  # train.tokens in whole steps, as trained
        flops = flops_per_token(t.spec.model, t.spec.data.context)["train"] * tokens
        print(f"{name:<{width}} {t.seed:>4}  {t.spec_hash:<16}  {param_counts(t.spec.model)['total']:>12,}  "
              f"{tokens:>13,}  {flops:>11.3g}  {text}{also}")
    for note in schedule_notes(trials):
        print(f"note: {note}")
    if done < len(trials) and getattr(args, "ray_address", None) is None:
        if no_gpu_here(study):  # what runner.check_gpus refuses a local run for
            print(f"note: the study asks resources.gpu={study.resources.gpu} a trial and this machine has no GPU: "
                  "`wb run` here stops at once; run it on a GPU machine, or pass --ray-address of a cluster with GPUs")
        else:
            # Imported here, not with this module: importing ray_train sets RAY_TRAIN_V2_ENABLED (it
            # must come before Ray Train's own imports), which `wb --help` and the commands that
            # use no Ray Train have no business doing.
            from foxwb.workbench.run.ray_train import check_study

            try:
                check_study(study, trials, None)
            except SpecError as e:
                print(f"note: `wb run` here stops at once: {e}")
    if study.search is not None and study.search.confirm is not None:
        confirm_lines(study, store, runs, done == len(trials), gone)
    if getattr(args, "rerun", None):
        from foxwb.workbench.run import rerun

        hashes = rerun.select(trials, runs, args.rerun)  # a selector that names nothing is refused here too
        print(f"--rerun would delete the tracked runs and checkpoints of {progress.count(len(hashes), 'trial')} and run them "
              f"afresh: {', '.join(sorted(hashes)) or 'none'}")
    if args.effect is not None:
        plan_seeds(study, workdir, args)
    return 0


def confirm_lines(study, store, runs: list, searched: bool, gone: str | None) -> None:
    """The confirmation stage of a tune-then-confirm study: its trials once the search has
    finished (each variant's chosen point, workbench/run/confirm.py), else what it will be; ``gone``:
    status.no_driver of the study, read once by the dry run."""
    from foxwb.workbench.analysis import status
    from foxwb.workbench.run.confirm import choose, confirmation_trials, edge_note

    confirm = study.search.confirm
    choices = choose(study, runs) if searched else {}
    if not choices:
        each = "each cell's (a variant at a point)" if study.design.kind == "crossed" else "each variant's"
        print(f"then the confirmation: {each} best search point by {confirm.metric} on seeds "
              f"{', '.join(map(str, confirm.seeds))} (chosen once the search has finished)")
        return
    print(f"then the confirmation, at each {'cell' if study.design.kind == 'crossed' else 'variant'}'s best search point "
          f"by {confirm.metric}:")
    trials = confirmation_trials(study, choices)
    states = {s.spec_hash: s for s in status.trial_states(store, runs, trials, no_driver=gone)}
    for t in trials:
        s = states.get(t.spec_hash)
        text = "to run" if s is None else "done" if s.state == "finished" else s.state
        print(f"  {t.variant} [{t.point_label}]  seed {t.seed}  {t.spec_hash}  {text}")
    for c in choices.values():
        edge = edge_note(study, c)
        if edge:
            print(f"note: {c.variant}: {edge}")


def plan_seeds(study, workdir, args: argparse.Namespace) -> None:
    from foxwb.workbench.analysis import report, table

    _, _, runs, tags = results_of(args.study, args)
    if runs.is_empty() or not (runs["status"] == "FINISHED").any():
        print(f"\n--effect {args.effect}: no finished pilot runs of {study.name!r} to measure the seeds' spread from")
        return
    check_metric(runs, args.metric)
    info = table.study_info(study.name, runs, study, tags, args.base)
    print()
    print("\n".join(report.seeds_lines(table.study_table(runs, info, args.metric), info, args.metric, args.effect)))


def cmd_status(args: argparse.Namespace) -> int:
    from pathlib import Path

    from foxwb.workbench.analysis import runs as results, status
    from foxwb.workbench.spec.study import expand
    from foxwb.workbench.run.tracking import local_tracking_uri

    workdir = Path(args.workdir)
    if not layout.has_store(workdir, args.tracking_uri):
        first = (f"`wb run {args.study} --workdir {workdir}` starts it" if args.study and args.study.endswith((".yaml", ".yml"))
                 else "run a study first")
        raise SpecError(f"--workdir {workdir}: no tracking store here (mlflow.db); {first}")
    if args.study:
        study = load_study(args.study) if args.study.endswith((".yaml", ".yml")) else None
        name = study.name if study else args.study
        store = results.read_store(workdir, name, study.experiment if study else None, args.tracking_uri)
        where = args.tracking_uri or workdir
        held = ", ".join(n for n, _ in results.studies(args.tracking_uri or local_tracking_uri(workdir))) or "none"
        if store is None and study is None:
            raise SpecError(f"study {name!r}: not in {where} (the studies there: {held})")
        runs = results.all_runs(store, name) if store is not None else []
        states = status.trial_states(store, runs, expand(study) if study else None, no_driver=status.no_driver(store, name))
        print("\n".join(status.lines(name, states)))
        if store is None:
            print(f"study {name!r} has not run in {where} (the studies there: {held}); "
                  f"`wb run {args.study} --workdir {workdir}"
                  + (f" --tracking-uri {args.tracking_uri}" if args.tracking_uri else "") + "` starts it")
        return 0
    uri = args.tracking_uri or local_tracking_uri(workdir)
    found = results.studies(uri)
    for name, experiment in found:
        store = results.read_store(workdir, name, experiment, args.tracking_uri)
        states = status.trial_states(store, results.all_runs(store, name), no_driver=status.no_driver(store, name))
        print("\n".join(status.lines(name, states)))
    if not found:
        print(f"no studies in {args.tracking_uri or workdir}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from foxwb.workbench.analysis import export, report, table

    if args.format == "parquet" and not args.out:
        raise SpecError("--format parquet needs --out FILE (parquet is binary)")
    if len(args.study) > 2:
        raise SpecError(f"wb results takes one study, or two to compare; got {len(args.study)}")
    loaded = [results_of(target, args) for target in args.study]
    for name, _, runs, _ in loaded:
        if runs.is_empty():  # nothing there to read: an error of what was asked, code 2 as in `wb status`
            raise SpecError(no_trials(name, args))
        check_metric(runs, args.metric)
    if len(loaded) == 2:
        return compare_results(args, loaded)
    name, study, runs, tags = loaded[0]
    info = table.study_info(name, runs, study, tags, args.base)
    rows = table.study_table(runs, info, args.metric)
    about = {"study": name, "metric": args.metric, "base": info.base, "base_from": info.base_from,
             "alpha": info.alpha, "holm": args.holm, "seeds": info.seeds}
    if info.variant_seeds:
        about["variant_seeds"] = info.variant_seeds
    if info.design_kind == "scaling":
        from foxwb.workbench.analysis.scaling.laws import study_fits

        about |= study_fits(runs, info.order, info.extrapolate_to)
    if info.design_kind in ("scaling", "crossed"):
        from foxwb.workbench.analysis.effects import effects

        about["effects"] = effects(rows, info.axis)
    elif info.design_kind == "grid" and info.grid_axes:
        from foxwb.workbench.analysis.effects import grid_effects

        about["effects"] = grid_effects(runs, info.grid_axes, args.metric)
    if args.format == "table":
        lines = report.table_lines(rows, info, args.metric, args.holm)
        if info.design_kind == "scaling":
            lines += report.fit_lines(about)
        lines += report.effect_lines(about)
        emit("\n".join(lines) + "\n", args.out)
    else:
        export.write(rows, args.format, args.out, about)
    return 0


def compare_results(args: argparse.Namespace, loaded) -> int:
    from foxwb.workbench.analysis import export, report, table

    # Each study's rows as its own table reads them: a tune-then-confirm study's confirmation rows included.
    (a, values_a), (b, values_b) = [(name, table.row_seed_values(runs, table.study_info(name, runs, study, tags), args.metric))
                                    for name, study, runs, tags in loaded]
    frame = report.compare_studies(values_a, values_b)
    if frame.is_empty():
        print(f"studies {a!r} and {b!r} share no row (variant and searched values, or a confirmation row) with finished seeds", file=sys.stderr)
        return 1
    if args.format != "table":
        export.write(frame, args.format, args.out, {"studies": [a, b], "metric": args.metric})
        return 0
    shared = set(frame["row"])
    lines = report.comparison_lines(frame, a, b, args.metric, sorted(set(values_a) - shared), sorted(set(values_b) - shared))
    emit("\n".join(lines) + "\n", args.out)
    return 0


def emit(text: str, out: str | None) -> None:
    if out:
        from pathlib import Path

        Path(out).write_text(text)
    else:
        sys.stdout.write(text)

class Version(argparse.Action):
    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import version

        from foxwb.workbench.train.trial import code_version, source_fingerprint

        print(f"wb {version('fox-workbench')} (commit {code_version()}, source {source_fingerprint()})")
        parser.exit()


def add_commands(sub, store_options) -> None:
    """The `status` and `results` commands' parsers."""
    p = sub.add_parser("status", help="every trial of a study and its state in the tracking store "
                       "(running with tokens, loss and ETA; finished; failed with the reason; to run)")
    p.add_argument("study", nargs="?", help="the study's YAML file (its trials not yet run are listed too) or its "
                   "name; default: every study in the store")
    store_options(p)
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("results", help="a study's table from the tracking store: mean and 95%% CI over seeds, "
                       "the paired comparison with the base, its power; or two studies side by side")
    p.add_argument("study", nargs="+", help="the study's YAML file or its name; two of them: their shared rows side by side")
    store_options(p)
    p.add_argument("--base", help="the variant deltas are taken against (default: the design's base)")
    p.add_argument("--metric", default="val_ppl",
                   help="a final metric of the trials (default val_ppl; e.g. val_loss, tokens_per_s, mfu)")
    p.add_argument("--holm", action="store_true",
                   help="adjust the rows' paired p-values for the many comparisons (Holm-Bonferroni)")
    p.add_argument("--format", choices=["table", "csv", "parquet", "json"], default="table",
                   help="table (text, default), csv, parquet or json (an object whose rows are the table's rows)")
    p.add_argument("--out", help="write to this file instead of stdout (parquet needs one)")
    p.set_defaults(func=cmd_results)

"""The ``wb`` command line."""
from __future__ import annotations

import argparse
import sys

from workbench.errors import SpecError


def _load_model_spec(target: str):
    from workbench.errors import read_yaml, validate
    from workbench.presets import PRESETS
    from workbench.specs import ModelSpec

    if target in PRESETS:
        return ModelSpec(preset=target)
    data = read_yaml(target)
    # A trial file holds its model under `model`; a model file is the ModelSpec itself.
    if isinstance(data, dict) and "model" in data and isinstance(data["model"], dict):
        data = data["model"]
    return validate(ModelSpec, data, target)


def _is_study_file(target: str) -> bool:
    from workbench.errors import read_yaml
    from workbench.presets import PRESETS

    if target in PRESETS:
        return False
    data = read_yaml(target)
    return isinstance(data, dict) and "design" in data


def cmd_info_study(args: argparse.Namespace) -> int:
    """Each variant of a study: its slots, parameters and FLOPs per token at its trials' context."""
    from workbench.info import flops_per_token, param_counts
    from workbench.study import expand

    study = _load_study(args.spec)
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


def cmd_info(args: argparse.Namespace) -> int:
    from workbench.info import flops_per_token, param_breakdown, param_counts

    if _is_study_file(args.spec):
        return cmd_info_study(args)
    args.context = args.context or 2048
    spec = _load_model_spec(args.spec)
    counts, parts = param_counts(spec), param_breakdown(spec)
    flops = flops_per_token(spec, args.context)
    slots = ", ".join(f"{k}={v.kind}" for k, v in spec.attention.slots().items())
    if spec.attention.log_pruning_tolerance is not None:
        slots += f"; pruning ln eps {spec.attention.log_pruning_tolerance:g}"
    print(f"model        {spec.n_layers} x {spec.d_model}, {spec.n_heads} heads of {spec.head_dim}, vocab {spec.vocab_size}")
    print(f"attention    {slots}")
    print(f"mlp / norm   {spec.mlp.kind} / {spec.norm.kind}")
    print(f"spec hash    {spec.spec_hash()}")
    print(f"params       total {counts['total']:,}   without input embedding {counts['non_embedding']:,}"
          f"   blocks + final norm {counts['blocks']:,}")
    print("per component (summed over layers):")
    for name, n in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {n:>14,}  {100 * n / counts['total']:5.1f}%")
    print(f"FLOPs/token  forward {flops['forward']:.3e}   train (3x) {flops['train']:.3e}   at context {args.context}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.errors import read_yaml, validate
    from workbench.specs import TrialSpec
    from workbench.train import TrainError
    from workbench.trial import run_trial

    trial = validate(TrialSpec, read_yaml(args.trial), args.trial)
    out = Path(args.out)
    if not args.resume and (out / "checkpoint.pt").exists():
        (out / "checkpoint.pt").unlink()
    print(f"trial {trial.spec_hash()}  ->  {out}", file=sys.stderr)
    try:
        result = run_trial(trial, out, progress=True)
    except TrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    rate = f"{result['tokens_per_s']:,.0f} tokens/s" if result["tokens_per_s"] else "n/a"
    mfu = f", MFU {100 * result['mfu']:.1f}%" if result["mfu"] else ""
    print(f"val_loss {result['val_loss']:.4f} nats/token (ppl {result['val_ppl']:.3f}); unigram entropy "
          f"{result['unigram_entropy']:.4f}; {rate}{mfu}; {result['n_params']:,} params")
    for length, ppl in result["ppl_at_length"].items():
        print(f"  P({length}) = {ppl:.3f}")
    print(f"wrote {out / 'result.json'}")
    return 0


def _load_study(path: str):
    from workbench.errors import read_yaml, validate
    from workbench.study import StudySpec

    return validate(StudySpec, read_yaml(path), path)


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.info import param_counts
    from workbench.runner import plan, run_study

    study = _load_study(args.study)
    workdir = Path(args.workdir)
    if args.dry_run:
        return _dry_run(study, workdir, args)
    from workbench.telemetry import Telemetry

    run = run_study(study, workdir, ray_address=args.ray_address, tracking_uri=args.tracking_uri,
                    max_concurrent=args.max_concurrent, telemetry=Telemetry(period_s=args.gpu_sample_seconds),
                    progress_seconds=args.progress_seconds)
    ran = list(run.outcomes.values())
    before = sum(t.spec_hash in run.done for t in run.trials if not t.optuna_samples)
    print(f"\nstudy {study.name!r}: {len(run.trials)} trials or searches; {before} trials were already done; "
          f"{sum(o.status == 'FINISHED' for o in ran)} finished now; {sum(o.status != 'FINISHED' for o in ran)} failed")
    for o in ran:
        detail = f"val_ppl {o.val_ppl:.3f}" if o.val_ppl else o.reason.strip().splitlines()[-1][:200] if o.reason else ""
        point = f" [{o.trial.point_label}]" if o.trial.search_point else ""
        print(f"  {o.status:<9} {o.trial.variant}{point} / seed {o.trial.seed}  {detail}")
    failures = [o for o in ran if o.status != "FINISHED"]
    if failures:
        print(f"{len(failures)} trial(s) failed: " + "; ".join(f"{o.trial.variant} / seed {o.trial.seed}" for o in failures))
    print(f"results: wb results {args.study} --workdir {args.workdir}")
    return 1 if failures else 0


def _results_of(target: str, args: argparse.Namespace):
    """(name, study spec or None, runs frame, parent run's tags) of a study file or name; reading
    creates nothing in the store."""
    from pathlib import Path

    from workbench import results

    study = _load_study(target) if target.endswith((".yaml", ".yml")) else None
    name = study.name if study else target
    store = results.read_store(Path(args.workdir), name, study.experiment if study else None, args.tracking_uri)
    if store is None:
        return name, study, __import__("polars").DataFrame(), {}
    parent = results.study_parent(store, name)
    return name, study, results.trial_runs(Path(args.workdir), name, runs=results.all_runs(store, name)), (
        parent.data.tags if parent else {})


def _check_metric(runs, metric: str) -> None:
    done = runs.filter(runs["status"] == "FINISHED")
    recorded = sorted(c for c in done.columns if done[c].dtype.is_float() and done[c].drop_nulls().len())
    if done.height and metric not in recorded:
        raise SpecError(f"--metric {metric!r} is not a final metric of these trials; recorded: {', '.join(recorded)}")


def _dry_run(study, workdir, args: argparse.Namespace) -> int:
    """The trials, their spec hashes and state in the store; with --effect, the seeds that would
    detect it, from the pilot runs' spread."""
    from workbench import results, status
    from workbench.info import param_counts
    from workbench.study import expand

    trials = expand(study)
    store = results.read_store(workdir, study.name, study.experiment, args.tracking_uri)
    runs = results.all_runs(store, study.name) if store is not None else []
    states = {s.spec_hash: s for s in status.trial_states(store, runs, trials)}
    done = sum(states[t.spec_hash].state == "finished" for t in trials if t.spec_hash in states)
    print(f"study {study.name!r}: {len(trials)} trials, {done} done ({status.summary(list(states.values()))})")
    names = [f"{t.variant} [{t.point_label}]" if t.search_point else t.variant for t in trials]
    width = max(len("variant"), *map(len, names))
    print(f"{'variant':<{width}} {'seed':>4}  {'spec hash':<16}  {'params':>12}  status")
    for t, name in zip(trials, names):
        s = states.get(t.spec_hash)
        text = "done" if s is None or s.state == "finished" else s.state
        if s is not None and s.state in ("running", "failed", "killed") and s.detail:
            text += f": {s.detail}"
        if t.optuna_samples:
            text = f"optuna search of {t.optuna_samples} draws"
        also = f"  (also: {', '.join(t.aliases)})" if t.aliases else ""
        print(f"{name:<{width}} {t.seed:>4}  {t.spec_hash:<16}  {param_counts(t.spec.model)['total']:>12,}  {text}{also}")
    if args.effect is not None:
        _plan_seeds(study, workdir, args)
    return 0


def _plan_seeds(study, workdir, args: argparse.Namespace) -> None:
    from workbench import report, table

    _, _, runs, tags = _results_of(args.study, args)
    if runs.is_empty() or not (runs["status"] == "FINISHED").any():
        print(f"\n--effect {args.effect}: no finished pilot runs of {study.name!r} to measure the seeds' spread from")
        return
    _check_metric(runs, args.metric)
    info = table.study_info(study.name, runs, study, tags)
    print()
    print("\n".join(report.seeds_lines(table.study_table(runs, info, args.metric), info, args.metric, args.effect)))


def cmd_status(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench import results, status
    from workbench.study import expand
    from workbench.tracking import local_tracking_uri

    workdir = Path(args.workdir)
    if args.tracking_uri is None and not (workdir / "mlflow.db").exists():
        raise SpecError(f"--workdir {workdir}: no tracking store here (mlflow.db); run a study first")
    if args.study:
        study = _load_study(args.study) if args.study.endswith((".yaml", ".yml")) else None
        name = study.name if study else args.study
        store = results.read_store(workdir, name, study.experiment if study else None, args.tracking_uri)
        if store is None and study is None:
            raise SpecError(f"study {name!r}: not in {args.tracking_uri or workdir}")
        runs = results.all_runs(store, name) if store is not None else []
        print("\n".join(status.lines(name, status.trial_states(store, runs, expand(study) if study else None))))
        return 0
    uri = args.tracking_uri or local_tracking_uri(workdir)
    found = results.studies(uri)
    for name, experiment in found:
        store = results.read_store(workdir, name, experiment, args.tracking_uri)
        print("\n".join(status.lines(name, status.trial_states(store, results.all_runs(store, name)))))
    if not found:
        print(f"no studies in {args.tracking_uri or workdir}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from workbench import export, report, table

    if args.format == "parquet" and not args.out:
        raise SpecError("--format parquet needs --out FILE (parquet is binary)")
    if len(args.study) > 2:
        raise SpecError(f"wb results takes one study, or two to compare; got {len(args.study)}")
    loaded = [_results_of(target, args) for target in args.study]
    for name, _, runs, _ in loaded:
        if runs.is_empty():
            print(f"no trials of study {name!r} in {args.tracking_uri or args.workdir}", file=sys.stderr)
            return 1
        _check_metric(runs, args.metric)
    if len(loaded) == 2:
        return _compare_results(args, loaded)
    name, study, runs, tags = loaded[0]
    info = table.study_info(name, runs, study, tags, args.base)
    rows = table.study_table(runs, info, args.metric)
    about = {"study": name, "metric": args.metric, "base": info.base, "base_from": info.base_from,
             "alpha": info.alpha, "holm": args.holm, "seeds": info.seeds}
    if args.format == "table":
        _emit("\n".join(report.table_lines(rows, info, args.metric, args.holm)) + "\n", args.out)
    else:
        export.write(rows, args.format, args.out, about)
    return 0


def _compare_results(args: argparse.Namespace, loaded) -> int:
    from workbench import export, report, table

    (a, _, runs_a, _), (b, _, runs_b, _) = loaded
    frame = report.compare_studies(runs_a, runs_b, args.metric)
    if frame.is_empty():
        print(f"studies {a!r} and {b!r} share no row (variant and searched values) with finished seeds", file=sys.stderr)
        return 1
    if args.format != "table":
        export.write(frame, args.format, args.out, {"studies": [a, b], "metric": args.metric})
        return 0
    rows_a = set(table.seed_values(table.normalise(runs_a), args.metric))
    rows_b = set(table.seed_values(table.normalise(runs_b), args.metric))
    shared = set(frame["row"])
    lines = report.comparison_lines(frame, a, b, args.metric, sorted(rows_a - shared), sorted(rows_b - shared))
    _emit("\n".join(lines) + "\n", args.out)
    return 0


def _emit(text: str, out: str | None) -> None:
    if out:
        from pathlib import Path

        Path(out).write_text(text)
    else:
        sys.stdout.write(text)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dashboards.site import build_site
    from workbench.tracking import local_tracking_uri

    workdir = Path(args.workdir)
    if args.tracking_uri is None and not (workdir / "mlflow.db").exists():
        raise SpecError(f"--workdir {workdir}: no tracking store here (mlflow.db); run a study first")
    out = Path(args.out) if args.out else workdir / "dashboard"
    try:
        pages = build_site(args.tracking_uri or local_tracking_uri(workdir), out, workdir / "mlartifacts", args.study)
    except ValueError as e:
        raise SpecError(str(e)) from None
    print(f"dashboard: {out / 'index.html'} ({len(pages)} studies)")
    if args.serve:
        import functools
        import http.server

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler)
        print(f"serving on http://127.0.0.1:{server.server_address[1]}/  (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default="wb-runs",
                   help="tracking store (mlflow.db), artifacts, checkpoints, Ray results (default: wb-runs)")
    p.add_argument("--tracking-uri", help="an MLflow server (default: sqlite in the workdir)")


class _Version(argparse.Action):
    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import version

        from workbench.trial import code_version, source_fingerprint

        print(f"wb {version('fox-workbench')} (commit {code_version()}, source {source_fingerprint()})")
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wb", description="The FoX ablation workbench.")
    parser.add_argument("--version", action=_Version, help="the workbench's version, git commit and source fingerprint")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="parameter counts and FLOPs of a model spec, preset or each variant of a study")
    p.add_argument("spec", help="a preset name (fox_pro, ...), a YAML model or trial file, or a study file")
    p.add_argument("--context", type=int,
                   help="context length for FLOPs (tokens; default 2048, for a study its trials' context)")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("train", help="train and evaluate one trial; writes DIR/result.json")
    p.add_argument("trial", help="a trial YAML file (model, data, train, eval, seed)")
    p.add_argument("--out", required=True, help="output folder: checkpoint, metrics.jsonl, result.json")
    p.add_argument("--no-resume", dest="resume", action="store_false",
                   help="start from scratch even if DIR holds a checkpoint of this trial")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("run", help="run a study: every trial not yet finished, on Ray Tune, tracked in MLflow")
    p.add_argument("study", help="a study YAML file")
    _store_options(p)
    p.add_argument("--dry-run", action="store_true",
                   help="list the trials and the state of each in the store (done, running, failed, to run); run nothing")
    p.add_argument("--effect", type=float,
                   help="with --dry-run: the seeds that would detect this effect (a fraction of the base's mean: "
                        "0.01 = 1%%) with 80%% power, from the spread of the study's finished pilot runs")
    p.add_argument("--metric", default="val_ppl", help="the metric --effect is stated in (default val_ppl)")
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start Ray locally)")
    p.add_argument("--max-concurrent", type=int, help="at most this many trials at once")
    p.add_argument("--gpu-sample-seconds", type=float, default=5.0,
                   help="sample each trial's GPU (utilisation, memory, power) this often; 0: never (default 5)")
    p.add_argument("--progress-seconds", type=float, default=10.0,
                   help="a running trial sends its tokens and loss to the driver and the store this often "
                        "between validations; 0: at validations only (default 10)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("status", help="every trial of a study and its state in the tracking store "
                       "(running with tokens, loss and ETA; finished; failed with the reason; to run)")
    p.add_argument("study", nargs="?", help="the study's YAML file (its trials not yet run are listed too) or its "
                   "name; default: every study in the store")
    _store_options(p)
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("results", help="a study's table from the tracking store: mean and 95%% CI over seeds, "
                       "the paired comparison with the base, its power; or two studies side by side")
    p.add_argument("study", nargs="+", help="the study's YAML file or its name; two of them: their shared rows side by side")
    _store_options(p)
    p.add_argument("--base", help="the variant deltas are taken against (default: the design's base)")
    p.add_argument("--metric", default="val_ppl",
                   help="a final metric of the trials (default val_ppl; e.g. val_loss, tokens_per_s, mfu)")
    p.add_argument("--holm", action="store_true",
                   help="adjust the rows' paired p-values for the many comparisons (Holm-Bonferroni)")
    p.add_argument("--format", choices=["table", "csv", "parquet", "json"], default="table",
                   help="table (text, default), csv, parquet or json (an object whose rows are the table's rows)")
    p.add_argument("--out", help="write to this file instead of stdout (parquet needs one)")
    p.set_defaults(func=cmd_results)
    p = sub.add_parser("dashboard", help="build the static dashboard site from the tracking store")
    p.add_argument("--study", help="only this study (default: every study in the store)")
    _store_options(p)
    p.add_argument("--out", help="site folder (default: WORKDIR/dashboard)")
    p.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 after building it")
    p.add_argument("--port", type=int, default=8765, help="port of --serve on 127.0.0.1 (default 8765; 0: any free one)")
    p.set_defaults(func=cmd_dashboard)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

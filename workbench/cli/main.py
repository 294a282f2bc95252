"""The ``wb`` command line."""
from __future__ import annotations

import argparse
import sys

from foxwb.workbench.cli import reports as cli_reports
from foxwb.workbench.train import faults, layout
from foxwb.workbench.spec.errors import SpecError


def _load_model_spec(target: str):
    from foxwb.workbench.spec.errors import read_yaml, validate
    from foxwb.workbench.spec.presets import PRESETS
    from foxwb.workbench.spec.trial import ModelSpec

    if target in PRESETS:
        return ModelSpec(preset=target)
    from foxwb.workbench.spec.base import Spec

    class TrialModel(Spec):  # errors then name a trial file's field as `wb train` does: model.d_model
        model: ModelSpec

    data = read_yaml(target)
    # A trial file holds its model under `model`; a model file is the ModelSpec itself.
    if isinstance(data, dict) and "model" in data:  # a ModelSpec has no field `model`
        return validate(TrialModel, {"model": data["model"]}, target).model
    return validate(ModelSpec, data, target)


def _component(spec) -> str:
    """A slot's kind and the options it sets away from their defaults: `kv(logit_normalizer=16)`."""
    options = {k: v for k, v in spec.model_dump(mode="json", exclude_defaults=True).items() if k != "kind"}
    return spec.kind + (f"({', '.join(f'{k}={v:g}' if isinstance(v, float) else f'{k}={v}' for k, v in options.items())})"
                        if options else "")


def _check_info_target(target: str) -> None:
    """A name that is neither a file nor a preset is most likely a preset misspelt."""
    from pathlib import Path

    from foxwb.workbench.spec.errors import SpecError
    from foxwb.workbench.spec.fields import did_you_mean
    from foxwb.workbench.spec.presets import PRESETS

    from foxwb.components.registry import SLOTS

    looks_like_a_path = "/" in target or Path(target).suffix in (".yaml", ".yml", ".json")
    if target not in PRESETS and not Path(target).exists() and not looks_like_a_path:
        hint = did_you_mean(target, [*PRESETS, *SLOTS, "components"])
        raise SpecError(f"{target}: no such file, and not a preset or a slot{hint}" + ("" if hint else (
            f" (presets: {', '.join(PRESETS)}; slots: {', '.join(SLOTS)}, or components for all)")))


def _slot_kinds(names: list[str]) -> int:
    """`wb info SLOT` (or `components`): each slot's registered kinds and their options with defaults."""
    from foxwb.components.registry import kinds, options_class

    for slot in names:
        print(slot)
        for kind in kinds(slot):
            fields = options_class(slot, kind).model_fields
            options = ", ".join(f"{name}={field.default!r}" for name, field in fields.items() if name != "kind")
            print(f"  {kind}" + (f"  ({options})" if options else ""))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from foxwb.components.registry import SLOTS
    from foxwb.workbench.spec.cost import flops_per_token, param_breakdown, param_counts

    if args.spec in (*SLOTS, "components"):
        return _slot_kinds(list(SLOTS) if args.spec == "components" else [args.spec])
    _check_info_target(args.spec)
    if cli_reports.is_study_file(args.spec):
        return cli_reports.cmd_info_study(args)
    args.context = args.context or 2048
    spec = _load_model_spec(args.spec)
    counts, parts = param_counts(spec), param_breakdown(spec)
    flops = flops_per_token(spec, args.context)
    slots = ", ".join(f"{k}={_component(v)}" for k, v in spec.attention.slots().items())
    if spec.attention.log_pruning_tolerance is not None:
        slots += f"; pruning ln eps {spec.attention.log_pruning_tolerance:g}"
    print(f"model        {spec.n_layers} x {spec.d_model}, {spec.n_heads} heads of {spec.head_dim}, vocab {spec.vocab_size}")
    print(f"attention    {slots}")
    print(f"mlp / norm   {_component(spec.mlp)} / {_component(spec.norm)}")
    print(f"spec hash    {spec.spec_hash()}")
    print(f"params       total {counts['total']:,}   without input embedding {counts['non_embedding']:,}"
          f"   blocks + final norm {counts['blocks']:,}")
    print("per component (summed over layers):")
    for name, n in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {n:>14,}  {100 * n / counts['total']:5.1f}%")
    print(f"FLOPs/token  forward {flops['forward']:.3e}   train (3x) {flops['train']:.3e}   at context {args.context}")
    return 0


def stop_as_ctrl_c() -> None:
    """SIGTERM (`kill`, a batch scheduler's end of a job) and SIGHUP (the terminal closed) stop
    `wb train` as Ctrl-C does: its folder lock given back, exit 130 (not killed outright). Under
    `nohup` SIGHUP stays ignored."""
    import signal

    def stop(signum, frame):
        if signum == signal.SIGHUP:
            faults.silence_output()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, stop)


def cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from foxwb.workbench.spec.errors import check_file_kind, read_yaml, validate
    from foxwb.workbench.train.folder_lock import FolderLock
    from foxwb.workbench.spec.trial import FEWER_SEQUENCES, TrialSpec
    from foxwb.workbench.train.loop import TrainError
    from foxwb.workbench.train.trial import run_trial

    data = read_yaml(args.trial)
    check_file_kind(data, args.trial, "trial")
    trial = validate(TrialSpec, data, args.trial)
    if args.workers is not None:
        from foxwb.workbench.run.ray_train import with_workers

        trial = with_workers(trial, args.workers, "--workers")
    out = Path(args.out)
    faults.check_folder(out, "--out", write=True)
    with FolderLock(out) as lock:
        if not lock.held:
            print(f"error: --out {out} is in use by another `wb train`: two trials writing one folder would mix "
                  "their checkpoints and metrics; wait for it to end or give another --out", file=sys.stderr)
            return 2
        if not args.resume and (out / layout.CHECKPOINT).exists():
            (out / layout.CHECKPOINT).unlink()
        print(f"trial {trial.spec_hash()}  ->  {out}", file=sys.stderr)
        note = trial.train.warmup_note(trial.data.context)
        if note:
            print(f"note: {note}", file=sys.stderr)
        stop_as_ctrl_c()
        try:
            if trial.train.workers > 1:
                from foxwb.workbench.run.ray_train import run_workers

                result = run_workers(trial, out)
            else:
                result = run_trial(trial, out, progress=True)
        except TrainError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            if (out / layout.CHECKPOINT).exists():
                print(f"\nstopped: `wb train {args.trial} --out {out}` again resumes from its last checkpoint", file=sys.stderr)
            raise
    rate = f"{result['tokens_per_s']:,.0f} tokens/s" if result["tokens_per_s"] else "n/a"
    mfu = f", MFU {100 * result['mfu']:.1f}%" if result["mfu"] else ""
    print(f"val_loss {result['val_loss']:.4f} nats/token (ppl {result['val_ppl']:.3f}); unigram entropy "
          f"{result['unigram_entropy']:.4f}; {rate}{mfu}; {result['n_params']:,} params")
    for length, ppl in result["ppl_at_length"].items():
        print(f"  P({length}) = {ppl:.3f}")
    if result.get("eval_sequences", 0) < result.get("eval_sequences_asked", 0):
        print(f"note: validated on {result['eval_sequences']} of the {result['eval_sequences_asked']} held-out sequences "
              f"eval.sequences asks: {FEWER_SEQUENCES}")
    print(f"wrote {out / 'result.json'}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from foxwb.workbench.run.runner import run_study

    planning = [flag for flag, value in (("--effect", args.effect), ("--base", args.base), ("--metric", args.metric))
                if value is not None]
    if planning and not args.dry_run:  # refused before the study is read: never a run by a forgotten flag
        raise SpecError(f"{' and '.join(planning)} go{'es' if len(planning) == 1 else ''} with --dry-run "
                        "(they plan the seeds; `wb run` without --dry-run runs the study)")
    study = cli_reports.load_study(args.study)
    workdir = Path(args.workdir)
    if args.dry_run:
        args.metric = args.metric or "val_ppl"
        return cli_reports.dry_run(study, workdir, args)
    from foxwb.workbench.train.telemetry import Telemetry

    from foxwb.workbench.run.summary import report

    faults.check_store(workdir)
    command = f"wb run {args.study} --workdir {args.workdir}"
    run = run_study(study, workdir, ray_address=args.ray_address, tracking_uri=args.tracking_uri,
                    max_concurrent=args.max_concurrent, telemetry=Telemetry(period_s=args.gpu_sample_seconds),
                    progress_seconds=args.progress_seconds, take_over=args.take_over, rerun_selectors=args.rerun,
                    report=lambda r: report(study, r, command))
    code = report(study, run, command)
    print(f"results: wb results {args.study} --workdir {args.workdir}")
    return code


def cmd_dashboard(args: argparse.Namespace) -> int:
    from pathlib import Path

    from foxwb.dashboards.site import build_site
    from foxwb.workbench.run.tracking import local_tracking_uri

    workdir = Path(args.workdir)
    if args.serve and not 0 <= args.port <= 65535:
        raise SpecError(f"--port {args.port}: a port is 0-65535 (0: any free one)")
    if not layout.has_store(workdir, args.tracking_uri):
        raise SpecError(f"--workdir {workdir}: no tracking store here (mlflow.db); run a study first")
    out = Path(args.out) if args.out else workdir / "dashboard"
    faults.check_folder(out, "--out" if args.out else "the dashboard folder", write=True)
    try:
        # --study takes a study's name or its file, as `wb results` and `wb status` do.
        only = (cli_reports.load_study(args.study).name if args.study and args.study.endswith((".yaml", ".yml"))
                else args.study)
        pages = build_site(args.tracking_uri or local_tracking_uri(workdir), out, layout.artifacts(workdir), only,
                           where=str(args.tracking_uri or workdir))
    except ValueError as e:
        raise SpecError(str(e)) from None
    print(f"dashboard: {out / 'index.html'} ({len(pages)} {'study' if len(pages) == 1 else 'studies'})")
    if args.serve:
        import functools
        import http.server

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
        try:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler)
        except OSError as e:
            raise SpecError(f"--port {args.port}: cannot serve on 127.0.0.1:{args.port} ({e.strerror}); "
                            "pass another --port, or --port 0 for any free one") from None
        print(f"serving on http://127.0.0.1:{server.server_address[1]}/  (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


def _effect(text: str) -> float:
    """--effect: a positive fraction of the base's mean (0.02 = 2%)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a positive fraction of the base's mean (0.02 = 2%)")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive fraction of the base's mean (0.02 = 2%); "
                                         "a difference either way is tested, so give its size")
    return value


def _positive_int(text: str) -> int:
    """A count of at least 1 (--max-concurrent, --context)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give 1 or more")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give 1 or more")
    return value


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default="wb-runs",
                   help="tracking store (mlflow.db), artifacts, checkpoints, Ray results (default: wb-runs)")
    p.add_argument("--tracking-uri", help="an MLflow server (default: sqlite in the workdir)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wb", description="The FoX ablation workbench.")
    parser.add_argument("--version", action=cli_reports.Version, help="the workbench's version, git commit and source fingerprint")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="parameter counts and FLOPs of a model spec, preset or each variant of a study")
    p.add_argument("spec", help="a preset name (fox_pro, ...), a YAML model or trial file, a study file, or a slot "
                                "(forget_gate, ...; components: every slot) to list its kinds and their options")
    p.add_argument("--context", type=_positive_int,
                   help="context length for FLOPs (tokens; default 2048, for a study its trials' context)")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("train", help="train and evaluate one trial; writes DIR/result.json")
    p.add_argument("trial", help="a trial YAML file (model, data, train, eval, seed)")
    p.add_argument("--out", required=True, help="output folder: checkpoint, metrics.jsonl, result.json")
    p.add_argument("--no-resume", dest="resume", action="store_false",
                   help="start from scratch even if DIR holds a checkpoint of this trial")
    p.add_argument("--workers", type=int,
                   help="train on N processes (Ray Train; one GPU each where there are GPUs), default the trial's "
                        "train.workers (1: one process, no Ray)")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("run", help="run a study: every trial not yet finished, on Ray Tune, tracked in MLflow")
    p.add_argument("study", help="a study YAML file")
    _store_options(p)
    p.add_argument("--dry-run", action="store_true",
                   help="list the trials and the state of each in the store (done, running, failed, to run); run nothing")
    p.add_argument("--effect", type=_effect,
                   help="with --dry-run: the seeds that would detect this effect (a fraction of the base's mean: "
                        "0.01 = 1%%) with 80%% power, from the spread of the study's finished pilot runs")
    p.add_argument("--metric", help="with --effect: the metric it is stated in (default val_ppl)")
    p.add_argument("--base", help="with --effect: the variant the effect is measured against (default: the design's "
                                  "base)")
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start Ray locally)")
    p.add_argument("--max-concurrent", type=_positive_int, help="at most this many trials at once")
    p.add_argument("--take-over", action="store_true",
                   help="take the study over from a driver whose heartbeat stopped (refused while it is fresh)")
    p.add_argument("--rerun", action="append", metavar="SELECTOR",
                   help="run these trials again from scratch, deleting their tracked runs and checkpoints: "
                        "'failed', a variant name, or a spec hash or its prefix (repeatable)")
    p.add_argument("--gpu-sample-seconds", type=float, default=5.0,
                   help="sample each trial's GPU (utilisation, memory, power) this often; 0: never (default 5)")
    p.add_argument("--progress-seconds", type=float, default=10.0,
                   help="a running trial sends its tokens and loss to the driver and the store this often "
                        "between validations; 0: at validations only (default 10)")
    p.set_defaults(func=cmd_run)
    cli_reports.add_commands(sub, _store_options)
    p = sub.add_parser("dashboard", help="build the static dashboard site from the tracking store")
    p.add_argument("--study", help="only this study, by name or study file (default: every study in the store)")
    _store_options(p)
    p.add_argument("--out", help="site folder (default: WORKDIR/dashboard)")
    p.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 after building it")
    p.add_argument("--port", type=int, default=8765, help="port of --serve on 127.0.0.1 (default 8765; 0: any free one)")
    p.set_defaults(func=cmd_dashboard)
    args = parser.parse_args(argv)
    faults.quiet_store_logs()
    try:
        if getattr(args, "workdir", None):
            from pathlib import Path

            writes = args.command == "run" and not args.dry_run
            faults.check_folder(Path(args.workdir), "--workdir", write=writes)
        return args.func(args)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a study's run (which handles its own, foxwb.workbench.run.stops)
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `wb ... | head`: the reader has all it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:
        if not faults.is_environment(e):
            raise
        print(f"error: {faults.sentence(e) if not isinstance(e, faults.WriteError) else e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

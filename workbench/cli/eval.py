"""``wb eval``: lm-evaluation-harness tasks on a trained trial (its folder), or on every finished
trial of a study (its file), offline from task files on disk; per-item results kept with each trial
(docs/evaluation.md)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def command(args: argparse.Namespace) -> int:
    # Offline unless the user says otherwise: a task reads its data from disk (a local json file, a
    # dataset saved or cached there), never a download in the middle of an evaluation.
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # After the two lines above: the Hugging Face libraries read them when first imported.
    from foxwb.workbench.downstream.harness import check_tasks_dir

    tasks_dir = check_tasks_dir(args.tasks_dir)
    names = list(dict.fromkeys(args.task))
    if args.target.endswith((".yaml", ".yml")):
        return study(args, names, tasks_dir)
    # A trial's folder: torch and lm_eval are needed from here on (the study's path reads its store first).
    from foxwb.workbench.downstream.harness import run_tasks
    from foxwb.workbench.downstream.trial_folder import open_trial

    from foxwb.workbench.downstream.items import EVAL_DIR, replacing

    trial = open_trial(Path(args.target), args.device)
    print(f"trial {trial.spec_hash} ({trial.folder}) on {trial.device}", file=sys.stderr)
    for line in replacing(trial.folder / EVAL_DIR, names, args.limit):
        print(line, file=sys.stderr)
    show(run_tasks(trial, names, tasks_dir, args.limit, args.batch_size), trial.folder)
    return 0


def show(summaries: dict[str, dict], folder: Path, prefix: str = "") -> None:
    for task, summary in summaries.items():
        metrics = summary["metrics"]
        shown = [f"{m} {v:.4f}" + (f" ± {metrics[m + '_stderr']:.4f}" if metrics.get(m + "_stderr") is not None else "")
                 for m, v in metrics.items() if not m.endswith("_stderr") and v is not None]
        print(f"{prefix}{task}: {', '.join(shown)} on {summary['items']} items  ->  {folder / 'eval' / (task + '.jsonl')}")


def study(args: argparse.Namespace, names: list[str], tasks_dir) -> int:
    """Every finished trial of the study's store not yet evaluated on a task of ``names``; each
    one's metrics and per-item file logged to its tracked run."""
    # MLflow and torch: imported with the study's path only, as the trial's path imports its own.
    from foxwb.workbench.downstream import study as downstream
    from foxwb.workbench.spec.study import load_study

    spec = load_study(args.target)
    trials = downstream.finished_trials(Path(args.workdir), spec.name, spec.experiment, args.tracking_uri)
    if not trials:
        from foxwb.workbench.spec.errors import SpecError  # only on this refusal

        raise SpecError(f"{args.target}: no finished trial of study {spec.name!r} in {args.tracking_uri or args.workdir} "
                        "with its folder there; run it first (`wb run`), or give the --workdir it ran in")
    done = 0
    # Only one writer of a study's runs at a time: refused while a `wb run` of it holds the study.
    with downstream.holding(Path(args.workdir), spec.name, spec.experiment, args.tracking_uri):
        for trial in trials:
            todo = [n for n in names if not downstream.evaluated(trial.folder, n, args.limit)]
            label = f"{trial.variant} seed {trial.seed} ({trial.spec_hash})"
            # Evaluated in its folder alone (`wb eval TRIAL`): logged now, for the study's comparisons to read.
            unlogged = downstream.unlogged(trial, [n for n in names if n not in todo])
            if unlogged:
                downstream.log_evaluated(trial, unlogged)
                print(f"{label}: its evaluation on {', '.join(unlogged)} logged to its run", file=sys.stderr)
            if not todo:
                print(f"{label}: already evaluated on {', '.join(names)}", file=sys.stderr)
                continue
            for line in downstream.items.replacing(trial.folder / downstream.EVAL_DIR, todo, args.limit):
                print(f"{label}: {line}", file=sys.stderr)
            summaries = downstream.evaluate_and_log(trial, todo, tasks_dir, args.limit, args.batch_size, args.device)
            show(summaries, trial.folder, prefix=f"{label}  ")
            done += 1
    print(f"evaluated {done} of {len(trials)} finished trial(s); `wb results {args.target} --format json` compares "
          "the variants item by item under \"downstream\"", file=sys.stderr)
    return 0

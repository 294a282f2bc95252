"""A study's downstream evaluation: its finished trials (their folders in the workdir, their tracked
runs), each one's task metrics logged to its run (``eval.<task>.<metric>``, the per-item file as an
artifact under ``eval/``), and every variant compared with the base item by item (paired.py), for
`wb results`."""
from __future__ import annotations

import json
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from foxwb.workbench.analysis.runs import artifact_uri, finished_runs, read_store, study_parent
from foxwb.workbench.downstream import items, paired
from foxwb.workbench.downstream.items import EVAL_DIR
from foxwb.workbench.run.lease import Lease
from foxwb.workbench.train import layout


@dataclass(frozen=True)
class StudyTrial:
    variant: str
    seed: int
    spec_hash: str
    run_id: str
    folder: Path
    tracking_uri: str


def finished_trials(workdir: Path, study: str, experiment: str | None, tracking_uri: str | None) -> list[StudyTrial]:
    """The study's FINISHED trial runs whose folder (checkpoint and result) is in ``workdir``, by
    variant and seed."""
    store = read_store(Path(workdir), study, experiment, tracking_uri)
    if store is None:
        return []
    uri = store.client.tracking_uri
    out = []
    for run in finished_runs(store, study):
        tags = run.data.tags
        folder = layout.trial_dir(Path(workdir), tags["spec_hash"])
        if (folder / "result.json").is_file() and (folder / layout.CHECKPOINT).is_file():
            out.append(StudyTrial(tags["variant"], int(tags["seed"]), tags["spec_hash"], run.info.run_id, folder, uri))
    return sorted(out, key=lambda t: (t.variant, t.seed, t.spec_hash))


@contextmanager
def holding(workdir: Path, study: str, experiment: str | None, tracking_uri: str | None):
    """The study's lease (workbench/run/lease.py) held while its runs are written to: one writer of a
    study's runs at a time, a `wb run` of it or this; LeaseHeld (exit 2, naming the holder) if one runs."""
    store = read_store(Path(workdir), study, experiment, tracking_uri)
    parent = study_parent(store, study) if store is not None else None
    lease = Lease(store.client, parent.info.run_id, study).claim() if parent is not None else None
    try:
        yield
    finally:
        if lease is not None:
            lease.release()


def evaluated(folder: Path, task: str, limit: int | None) -> bool:
    """Whether ``task`` was evaluated on the trial at ``folder`` with this ``limit``."""
    return items.recorded_limit(folder / EVAL_DIR, task) == (True, limit)


def unlogged(trial: StudyTrial, names: list[str]) -> list[str]:
    """The tasks of ``names`` whose per-item file is not among the trial's run's artifacts (an
    evaluation of its folder alone, `wb eval TRIAL`): what `wb results` and the dashboard cannot see yet."""
    if not names:
        return []
    # MLflow is slow to import: only when a study's trials are evaluated.
    from mlflow.tracking import MlflowClient

    logged = {Path(a.path).name for a in MlflowClient(trial.tracking_uri).list_artifacts(trial.run_id, EVAL_DIR)}
    return [n for n in names if items.paths(Path("."), n)[0].name not in logged]


def log_evaluated(trial: StudyTrial, names: list[str]) -> None:
    """Log to the trial's run the evaluations of ``names`` already in its folder."""
    log_to_run(trial, {n: json.loads(items.paths(trial.folder / EVAL_DIR, n)[1].read_text()) for n in names})


def log_to_run(trial: StudyTrial, summaries: dict[str, dict]) -> None:
    """Each task's metrics on the trial's tracked run, and its per-item file as an artifact."""
    # MLflow is slow to import: only when logging.
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(trial.tracking_uri)
    for task, summary in summaries.items():
        metrics = [Metric(f"eval.{task}.{name}", float(value), 0, 0)
                   for name, value in summary["metrics"].items() if value is not None]
        client.log_batch(trial.run_id, metrics=metrics)
        client.log_artifact(trial.run_id, str(items.paths(trial.folder / EVAL_DIR, task)[0]), EVAL_DIR)


def evaluate_and_log(trial: StudyTrial, names: list[str], tasks_dir, limit, batch_size: int, device) -> dict[str, dict]:
    # lm_eval through these: `wb results` reads this module's comparisons without it.
    from foxwb.workbench.downstream.harness import run_tasks
    from foxwb.workbench.downstream.trial_folder import open_trial

    summaries = run_tasks(open_trial(trial.folder, device), names, tasks_dir, limit, batch_size)
    log_to_run(trial, summaries)
    return summaries


def store_comparisons(store, runs: list, base: str | None) -> dict:
    """{task: [each variant against ``base`` (paired.compare, with ``a`` and ``b`` named)]} over the
    per-item files logged to the finished trial ``runs`` (MLflow runs) of ``store`` by `wb eval
    STUDY`: what `wb results` and the dashboard both read, as every other number of a study, with
    no trial folder at hand. Empty where no trial was evaluated."""
    # MLflow takes seconds to import: only when a study's comparisons are read.
    import mlflow.artifacts

    found: dict = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        if run.info.status != "FINISHED":
            continue
        home = f"{artifact_uri(store, run)}/{EVAL_DIR}"
        try:
            logged = [a.path for a in mlflow.artifacts.list_artifacts(artifact_uri=home) if a.path.endswith(".jsonl")]
        except Exception:  # no eval/ folder: the trial was not evaluated
            continue
        for name in logged:
            path = mlflow.artifacts.download_artifacts(artifact_uri=f"{home}/{Path(name).name}")
            tags = run.data.tags
            found[Path(name).stem][tags["variant"]][int(tags["seed"])] = items.read_items(Path(path))
    return _compared(found, base)


def _compared(found: dict, base: str | None) -> dict:
    out = {}
    for task, by_variant in sorted(found.items()):
        if base not in by_variant:
            continue
        compared = [{"a": variant, "b": base, **result} for variant, seeds in by_variant.items() if variant != base
                    for result in [paired.compare(seeds, by_variant[base])] if result is not None]
        if compared:
            out[task] = compared
    return out

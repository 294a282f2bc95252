"""The tracking store: MLflow, written by the driver only, in batches.

One experiment per study (of MLflow's classic ML kind: EXPERIMENT_KIND); a parent run per study; a
child run per trial, named as `wb run` names the trial (run_name), with the flattened spec as
params and tags ``study``, ``variant``, ``seed``, ``spec_hash``, ``code_version``; metrics with
step = training tokens; the resolved spec, result.json and the per-position loss as artifacts; the
corpus it read as a dataset input. The parent run holds the library versions and, once ``wb
dashboard`` has built its page, the study's figures (foxwb.workbench.run.records).
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

from foxwb.components import sources
from foxwb.components.registry import plugins_used
from foxwb.workbench.run import records
from foxwb.workbench.train import layout
from foxwb.workbench.train.spikes import KEYS as SPIKE_KEYS

# MLflow is imported where a store is opened, not with this module, which others import for its
# names and tags too: MLflow takes seconds to import.
MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME = "mlflow.parentRunId", "mlflow.runName"
# The experiment tag by which the MLflow 3 UI picks an experiment's page: without it, it opens on an
# empty GenAI overview; "custom_model_development" (MLflow's classic ML kind) opens on the runs.
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")

KIND = "wb_kind"  # tag: "study" or "trial"
# With the stability figures of foxwb.workbench.train.spikes (docs/stability.md): spike counts, the largest
# gradient norm after warmup and its ratio to the median.
FINAL_METRICS = ("val_loss", "val_ppl", "test_loss", "test_ppl", "val_bpb", "test_bpb", "test_bytes", "test_tokens",
                 "test_documents", "test_tokens_available",
                 "unigram_entropy", "tokens_per_s", "mfu", "n_params",
                 "n_params_non_embedding", "train_tokens", "mqar_accuracy", "acp_kept_fraction",
                 "peak_memory_train_mb", "peak_memory_eval_mb", "peak_rss_mb", "gpu_utilization_mean",
                 "gpu_power_watts_mean", "data_epochs", "eval_sequences", "eval_sequences_asked") + SPIKE_KEYS


TEST_DOCUMENTS = "test_documents.json"  # a run's per-document test losses (docs/statistics.md)


def local_tracking_uri(workdir: Path) -> str:
    return f"sqlite:///{layout.store(workdir).resolve()}"


def open_store(workdir: Path, experiment: str, tracking_uri: str | None = None) -> "Store | None":
    """The store, or None where a local one was never created (reading must not create it)."""
    if not layout.has_store(workdir, tracking_uri):
        return None
    return Store(tracking_uri or local_tracking_uri(workdir), experiment, layout.artifacts(workdir))


def create_local_store(workdir: Path) -> None:
    """Create ``mlflow.db`` whole or not at all: MLflow builds its schema with migrations, and a
    reader (``wb results``, ``wb dashboard``) opening a half-built file would run them too and
    leave the store broken. The file is made under a temporary name, then renamed into place:
    a copy of an empty store built once per MLflow version (schema_template), since running
    MLflow's fifty-odd migrations takes seconds for every new workdir."""
    db = layout.store(workdir)
    if db.exists():
        return
    tmp = workdir / f"mlflow.db.creating-{os.getpid()}"
    template = schema_template()
    if template is None:  # no cache to keep one in: built here
        template = _empty_store(tmp)
    else:
        shutil.copyfile(template, tmp)
    # MLflow keeps an experiment 'Default' (id 0) that no study uses, deleted in the template (a
    # missing one it makes again, its artifacts under ./mlruns of wherever a command runs): it
    # points into this workdir.
    with sqlite3.connect(tmp) as con:
        con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                    ((layout.artifacts(workdir) / "0").resolve().as_uri(),))
    con.close()
    os.replace(tmp, db)


def _empty_store(path: Path) -> Path:
    """An empty MLflow store at ``path``: the schema, and experiment 'Default' deleted."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # MLflow is slow to import: see the note at the top

    store = SqlAlchemyStore(f"sqlite:///{path.resolve()}", path.parent.resolve().as_uri())
    store.delete_experiment(SqlAlchemyStore.DEFAULT_EXPERIMENT_ID)
    store.engine.dispose()
    return path


def schema_template() -> Path | None:
    """``~/.cache/fox-workbench/mlflow/<MLflow version>.db``, an empty store built on first use;
    None where the cache cannot be written."""
    import mlflow  # mlflow.__version__: the distribution may be mlflow or mlflow-skinny

    folder = Path.home() / ".cache" / "fox-workbench" / "mlflow"
    path = folder / f"{mlflow.__version__}.db"
    if path.exists():
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = _empty_store(folder / f"{path.name}.creating-{os.getpid()}")
        os.replace(tmp, path)  # whole or not at all, as the store itself
    except OSError:
        return None
    return path


def flatten(data, prefix: str = "") -> dict[str, str]:
    out = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return out


class Store:
    def __init__(self, tracking_uri: str, experiment: str, artifact_root: Path | None = None):
        from mlflow.tracking import MlflowClient  # MLflow is slow to import: see the note at the top

        self.client = MlflowClient(tracking_uri)
        self.artifact_root = artifact_root
        exp = self.client.get_experiment_by_name(experiment)
        if exp is None:
            location = artifact_root.resolve().as_uri() if artifact_root is not None else None
            self.experiment_id = self.client.create_experiment(experiment, artifact_location=location,
                                                               tags=dict([EXPERIMENT_KIND]))
            self.kind_tagged = True
        else:
            self.experiment_id = exp.experiment_id
            self.kind_tagged = exp.tags.get(EXPERIMENT_KIND[0]) is not None

    def _tag_kind(self) -> None:
        """Tag an experiment made before EXPERIMENT_KIND was set (a store of an earlier version), once
        it is written to: a reader leaves the store as it found it."""
        if not self.kind_tagged:
            self.client.set_experiment_tag(self.experiment_id, *EXPERIMENT_KIND)
            self.kind_tagged = True

    def _search(self, filter_string: str):
        runs, token = [], None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string, max_results=1000, page_token=token)
            runs += list(page)
            token = page.token
            if not token:
                return runs

    def finished_trials(self, study: str) -> dict[str, str]:
        """spec_hash -> run id of every FINISHED trial of the study."""
        runs = self._search(f"tags.{KIND} = 'trial' and tags.study = {quote(study)} and attributes.status = 'FINISHED'")
        return {r.data.tags["spec_hash"]: r.info.run_id for r in runs}

    def trial_runs(self, study: str) -> list:
        """Every trial run of the study, with its tags and final metrics."""
        return self._search(f"tags.{KIND} = 'trial' and tags.study = {quote(study)}")

    def study_parent(self, study: str) -> str | None:
        """The run id of the study's parent run, if it has one (its state untouched)."""
        found = self._search(f"tags.{KIND} = 'study' and tags.study = {quote(study)}")
        return found[0].info.run_id if found else None

    def finished_runs_of(self, study: str, variant: str, seed: int) -> list:
        return self._search(f"tags.{KIND} = 'trial' and tags.study = {quote(study)} and tags.variant = "
                            f"{quote(variant)} and tags.seed = '{seed}' and attributes.status = 'FINISHED'")

    def study_run(self, study: str, description: str, code_version: str, base_variant: str | None = None) -> str:
        """The study's parent run, reused across resumed invocations; ``base_variant`` (the row
        deltas are taken against) is kept as a tag for readers without the study file."""
        from mlflow.entities import RunTag  # MLflow is slow to import: see the note at the top

        run_id = self.parent_run(study, description)
        self.client.update_run(run_id, status="RUNNING")
        # The versions of this invocation, which runs the study's search and schedules its trials.
        tags = {"code_version": code_version, **records.version_tags()}
        if base_variant:
            tags["base_variant"] = base_variant
        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        for key in self.client.get_run(run_id).data.tags:  # a library an earlier invocation had, gone since
            if key.startswith(records.VERSION_TAG) and key not in tags:
                self.client.delete_tag(run_id, key)
        return run_id

    def parent_run(self, study: str, description: str = "") -> str:
        """The study's parent run, created where there is none. Two drivers that create one at the
        same moment both settle on the older (then the lower id), and the other is deleted."""
        self._tag_kind()  # the driver's first write to the study's experiment
        found = self._search(f"tags.{KIND} = 'study' and tags.study = {quote(study)}")
        if not found:
            tags = {KIND: "study", "study": study, MLFLOW_RUN_NAME: study, "mlflow.note.content": description}
            mine = self.client.create_run(self.experiment_id, tags=tags).info.run_id
            found = self._search(f"tags.{KIND} = 'study' and tags.study = {quote(study)}")
            oldest = min(found, key=lambda r: (r.info.start_time, r.info.run_id)).info.run_id
            if oldest != mine:
                self.client.delete_run(mine)
            return oldest
        return min(found, key=lambda r: (r.info.start_time, r.info.run_id)).info.run_id

    def describe_study(self, run_id: str, tags: dict[str, str]) -> None:
        """Tags of the study's parent run for readers without its file (foxwb.workbench.spec.study.design_tags:
        the variants in order, the seeds, alpha), in one batch."""
        from mlflow.entities import RunTag  # MLflow is slow to import: see the note at the top

        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def reap_stale(self, study: str) -> int:
        """Trials left RUNNING by a driver that died are marked KILLED; they will run again."""
        stale = self._search(f"tags.{KIND} = 'trial' and tags.study = {quote(study)} and attributes.status = 'RUNNING'")
        for run in stale:
            self.client.set_tag(run.info.run_id, "error", "the driver stopped before this trial finished")
            self.client.set_terminated(run.info.run_id, "KILLED")
        return len(stale)

    def start_trial(self, parent_id: str, study: str, trial, code_version: str) -> str:
        from mlflow.entities import Param  # MLflow is slow to import: see the note at the top

        tags = {KIND: "trial", MLFLOW_PARENT_RUN_ID: parent_id, MLFLOW_RUN_NAME: run_name(trial),
                "study": study, "variant": trial.variant, "seed": str(trial.seed), "spec_hash": trial.spec_hash,
                "code_version": code_version, "aliases": json.dumps(list(trial.aliases)),
                "search_point": trial.point_label, "search_values": json.dumps(dict(trial.search_point)),
                "workers": str(trial.spec.train.workers),
                # What it trains: train.tokens in whole steps (foxwb.workbench.analysis.status shows progress against it).
                "trained_tokens": str(trial.spec.train.trained_tokens(trial.spec.data.context))}
        if trial.stage:
            tags["stage"] = trial.stage
        tags[sources.TAG] = sources.digest(trial.spec.model.components())  # a later change marks it stale
        used = plugins_used(trial.spec.model.components())
        if used:  # the plug-in distributions (name, version) whose kinds the trial's model uses
            tags["plugins"] = json.dumps(used, sort_keys=True)
        run_id = self.client.create_run(self.experiment_id, tags=tags).info.run_id
        params = [Param(k[:250], v[:6000]) for k, v in flatten(trial.spec.model_dump(mode="json")).items()]
        for i in range(0, len(params), 100):
            self.client.log_batch(run_id, params=params[i : i + 100])
        return run_id

    def log_metrics(self, run_id: str, rows: list[tuple]) -> None:
        """Rows of (name, value, step) logged now, or (name, value, step, time in ms since the epoch)."""
        from mlflow.entities import Metric  # MLflow is slow to import: see the note at the top

        now = int(time.time() * 1000)
        metrics = [Metric(r[0], float(r[1]), int(r[3]) if len(r) > 3 else now, int(r[2])) for r in rows if r[1] is not None]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=metrics[i : i + 1000])

    def finish_trial(self, run_id: str, result: dict, stopped_early: bool = False) -> None:
        from mlflow.entities import RunTag  # MLflow is slow to import: see the note at the top

        step = int(result.get("train_tokens") or result.get("tokens") or 0)
        self.log_metrics(run_id, [(k, result[k], step) for k in FINAL_METRICS if isinstance(result.get(k), (int, float))])
        if "spec" in result:
            self.client.log_dict(run_id, result["spec"], "spec.json")
            self.client.log_dict(run_id, result, "result.json")
        if "acp_kept_fraction_per_head" in result:
            self.client.log_dict(run_id, {"acp_log_eps": result.get("acp_log_eps"),
                                          "per_head": result["acp_kept_fraction_per_head"]}, "acp_kept_per_head.json")
        if result.get("test_doc_loss") is not None:  # the seed x document interval reads it
            self.client.log_dict(run_id, {"digest": result.get("test_digest"), "doc_loss": result["test_doc_loss"],
                                          "doc_tokens": result["test_doc_tokens"]}, TEST_DOCUMENTS)
        if "per_position_loss" in result:
            self.client.log_dict(run_id, {"per_position_loss": result["per_position_loss"],
                                          "ppl_at_length": result.get("ppl_at_length")}, "per_position_loss.json")
        inputs = records.dataset_inputs(result)
        if inputs:
            self.client.log_inputs(run_id, datasets=inputs)
        tags = [RunTag("stopped_early", str(stopped_early).lower())]
        self.client.log_batch(run_id, tags=tags)
        self.client.set_terminated(run_id, "FINISHED")

    def log_figures(self, run_id: str, figures: dict) -> None:
        """The study page's plotly figures (name -> figure) as the run's ``figures/<name>.html``,
        replacing an earlier build's (records.log_figures)."""
        records.log_figures(self.client, run_id, figures, self.artifact_root)

    def resumed(self, run_id: str, tokens: int) -> None:
        """The trial picked up from its checkpoint at ``tokens``: the steps up to there that it sends
        again are its earlier run's, with their times (wb status's rate leaves them out)."""
        self.client.set_tag(run_id, "resumed_tokens", str(tokens))

    def fail_trial(self, run_id: str, reason: str, traceback: str = "") -> None:
        self.client.set_tag(run_id, "error", reason[:5000])
        if traceback:  # its end: where it was raised
            self.client.set_tag(run_id, "traceback", traceback[-7000:])
        self.client.set_terminated(run_id, "FAILED")

    def kill_trial(self, run_id: str, reason: str) -> None:
        """A trial stopped from outside (interrupted, Ray lost): KILLED, with the reason as its error."""
        self.client.set_tag(run_id, "error", reason[:5000])
        self.client.set_terminated(run_id, "KILLED")

    def delete_trial_runs(self, study: str, spec_hashes: set[str]) -> int:
        """Delete every tracked run of those trials (any status): the next run starts them afresh."""
        runs = self._search(f"tags.{KIND} = 'trial' and tags.study = {quote(study)}")
        doomed = [r for r in runs if r.data.tags.get("spec_hash") in spec_hashes]
        for run in doomed:
            self.client.delete_run(run.info.run_id)
        return len(doomed)

    def end_study(self, run_id: str, failed: int, status: str | None = None) -> None:
        """FINISHED, FAILED where ``failed`` trials did not finish, or the ``status`` given (KILLED)."""
        self.client.set_terminated(run_id, status or ("FAILED" if failed else "FINISHED"))


def run_name(trial) -> str:
    """A trial's full name, its MLflow run's and `wb run`'s lines' (foxwb.workbench.run.runner.Outcome.label):
    variant, searched values, seed, so that two points of a search do not share one name."""
    return f"{trial.row} / seed {trial.seed}"


def quote(text: str) -> str:
    """``text`` as a string literal of an MLflow filter. MLflow takes '...' or "..." and no escapes,
    so a name is quoted with the kind it does not contain (StudySpec refuses names with both)."""
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    raise ValueError(f"{text!r} holds both kinds of quotes; an MLflow filter cannot match it")


__all__ = ["Store", "flatten", "local_tracking_uri", "open_store", "quote", "run_name"]

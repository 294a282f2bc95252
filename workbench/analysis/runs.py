"""Tracked runs as polars frames (runs, metric histories, per-position loss, artifacts), read from
the tracking store; foxwb.workbench.analysis.table turns them into the study table. The CLI and the dashboards
both read results through here."""
from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path

import polars as pl

from foxwb.workbench.analysis.table import normalise
from foxwb.workbench.run.tracking import KIND, TEST_DOCUMENTS, Store, local_tracking_uri, open_store, quote
from foxwb.workbench.train import layout


def read_store(workdir: Path, study: str, experiment: str | None = None, tracking_uri: str | None = None) -> Store | None:
    """The store holding ``study`` (its experiment found by the study's parent run when not given),
    or None; unlike Store() it never creates the store or an experiment."""
    # MLflow takes seconds to import: only when a store is read, not with this module, which
    # `wb run --dry-run` and `wb status` import (as foxwb.workbench.run.tracking keeps it late too).
    from mlflow.tracking import MlflowClient

    if not layout.has_store(workdir, tracking_uri):
        return None
    uri = tracking_uri or local_tracking_uri(workdir)
    experiment = experiment or dict(studies(uri)).get(study, study)
    if MlflowClient(uri).get_experiment_by_name(experiment) is None:
        return None
    return Store(uri, experiment, layout.artifacts(workdir))


def finished_runs(store: Store, study: str) -> list:
    return store._search(f"tags.{KIND} = 'trial' and tags.study = {quote(study)} and attributes.status = 'FINISHED'")


def all_runs(store: Store, study: str) -> list:
    """Every trial run of the study, whatever its state (FINISHED, FAILED, KILLED, RUNNING)."""
    return store._search(f"tags.{KIND} = 'trial' and tags.study = {quote(study)}")


def study_parent(store: Store, study: str):
    """The study's parent run (its tags hold the base, the variants in order, the seeds), or None."""
    found = store._search(f"tags.{KIND} = 'study' and tags.study = {quote(study)}")
    return found[0] if found else None


def trial_runs(workdir: Path, study: str, experiment: str | None = None, tracking_uri: str | None = None,
               runs: list | None = None) -> pl.DataFrame:
    """One row per trial run of the study (and per alias of it): its state, tags, final metrics,
    the component kind of every slot and when it started (ms since the epoch). ``runs`` default:
    every run of the study in the store (all_runs)."""
    if runs is None:
        store = open_store(workdir, experiment or study, tracking_uri)
        if store is None:
            return pl.DataFrame()
        runs = all_runs(store, study)
    rows = []
    for r in runs:
        row = {"run_id": r.info.run_id, "variant": r.data.tags["variant"], "seed": int(r.data.tags["seed"]),
               "spec_hash": r.data.tags["spec_hash"], "search_point": r.data.tags.get("search_point", ""),
               "status": r.info.status, "error": r.data.tags.get("error", ""), "start_time": int(r.info.start_time or 0),
               "stopped_early": r.data.tags.get("stopped_early") == "true", "alias_of": None,
               "workers": int(r.data.tags.get("workers", "1")),  # processes the trial trained on (Ray Train)
               "components_source": r.data.tags.get("components_source"),  # foxwb.components.sources
               **{f"slot.{k.split('.')[2]}": v for k, v in r.data.params.items()
                  if k.startswith("model.attention.") and k.endswith(".kind")},
               **{k: float(v) for k, v in r.data.metrics.items()}}
        rows.append(row)
        # A trial that several variant names build counts for each of them (see study.Trial.aliases).
        rows += [{**row, "variant": alias, "alias_of": row["variant"]} for alias in json.loads(r.data.tags.get("aliases", "[]"))]
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def as_planned(runs: pl.DataFrame, trials: list) -> tuple[pl.DataFrame, dict[str, str]]:
    """The runs under the names the study file gives their trials now (``trials``: study.expand),
    matched by spec hash as `wb run` matches them: a variant renamed in the file keeps its runs.
    Runs of trials the file does not plan (an Optuna search's draws, a row since removed) keep their
    recorded names. Returns the frame and {recorded name: the file's name} of the names changed."""
    if runs.is_empty():
        return runs, {}
    planned = {t.spec_hash: t for t in trials}
    kept = runs.filter(~pl.col("spec_hash").is_in(list(planned)))
    rows, renamed = [], {}
    for row in runs.filter(pl.col("spec_hash").is_in(list(planned)) & pl.col("alias_of").is_null()).iter_rows(named=True):
        trial = planned[row["spec_hash"]]
        if row["variant"] != trial.variant and row["variant"] not in trial.aliases:
            renamed[row["variant"]] = trial.variant
        rows.append({**row, "variant": trial.variant})
        rows += [{**row, "variant": alias, "alias_of": trial.variant} for alias in trial.aliases]
    return pl.concat([kept, pl.DataFrame(rows, schema=runs.schema)]) if rows else kept, renamed


def with_row_labels(runs: pl.DataFrame) -> pl.DataFrame:
    """Adds ``row``: the variant, and in a search study its searched values ("FoX (Pro) [lr=0.002]"):
    the table's rows and the dashboards' curves group by it (foxwb.workbench.analysis.table)."""
    return normalise(runs)


def searched_values(runs: list) -> pl.DataFrame:
    """run_id and the numeric value of every param that differs between runs of one variant."""
    by_variant: dict[str, list] = {}
    for r in runs:
        by_variant.setdefault(r.data.tags["variant"], []).append(r)
    rows = []
    for group in by_variant.values():
        keys = {k for r in group for k in r.data.params if k not in ("seed",)}
        varying = [k for k in keys if len({r.data.params.get(k) for r in group}) > 1]
        for r in group:
            for k in varying:
                try:
                    rows.append({"run_id": r.info.run_id, "param": k, "value": float(r.data.params[k])})
                except (KeyError, ValueError):
                    continue
    return pl.DataFrame(rows, schema={"run_id": pl.String, "param": pl.String, "value": pl.Float64})


def histories(store: Store, runs: list, metric: str = "val_loss") -> pl.DataFrame:
    """Long frame: run_id, tokens (the step), value."""
    rows = [{"run_id": r.info.run_id, "tokens": m.step, "value": m.value}
            for r in runs for m in store.client.get_metric_history(r.info.run_id, metric)]
    return pl.DataFrame(rows, schema={"run_id": pl.String, "tokens": pl.Int64, "value": pl.Float64})


def per_position(store: Store, runs: list) -> dict[str, dict]:
    """run_id -> {"per_position_loss": [...], "ppl_at_length": {...}} from the run's artifact."""
    return _artifacts(store, runs, "per_position_loss.json")


def with_test_documents(store: Store, frame: pl.DataFrame, runs: list) -> pl.DataFrame:
    """``frame`` with each finished run's per-document test losses from its artifact (the seed x
    document interval, docs/statistics.md): ``test_digest``, ``test_doc_loss`` and
    ``test_doc_tokens`` (lists); null for a run without them (one from before the test split)."""
    found = _artifacts(store, [r for r in runs if r.info.status == "FINISHED"], TEST_DOCUMENTS)
    if frame.is_empty() or not found:
        return frame
    extra = pl.DataFrame([{"run_id": k, "test_digest": v.get("digest"), "test_doc_loss": v["doc_loss"],
                           "test_doc_tokens": v["doc_tokens"]} for k, v in found.items()],
                         schema={"run_id": pl.String, "test_digest": pl.String, "test_doc_loss": pl.List(pl.Float64),
                                 "test_doc_tokens": pl.List(pl.Int64)})
    return frame.join(extra, on="run_id", how="left")


def kept_per_head(store: Store, runs: list) -> dict[str, dict]:
    """run_id -> {"acp_log_eps": ln eps, "per_head": [[share per head] per layer]}: the share of
    causal pairs above adaptive computation pruning's threshold (gated models only)."""
    return _artifacts(store, runs, "acp_kept_per_head.json")


def _artifacts(store: Store, runs: list, name: str) -> dict[str, dict]:
    import mlflow.artifacts  # MLflow takes seconds to import: see read_store

    # One download per run: MLflow's progress bar would print a line for each.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    out = {}
    for r in runs:
        try:
            out[r.info.run_id] = mlflow.artifacts.load_dict(f"{artifact_uri(store, r)}/{name}")
        except Exception:  # an early-stopped trial has no final evaluation; an ungated one no map
            continue
    return out


def artifact_uri(store: Store, run) -> str:
    """The run's artifact folder, found again when the workdir has moved (copied from the GPU
    machine, say): MLflow records absolute file URIs, so a moved store keeps pointing at the old
    place; the part below ``mlartifacts/`` is looked up under this store's own artifact root."""
    uri, root = run.info.artifact_uri, store.artifact_root
    if root is None or not uri.startswith("file:"):
        return uri
    path = Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
    if path.exists() or "mlartifacts" not in path.parts:
        return uri
    below = path.parts[len(path.parts) - path.parts[::-1].index("mlartifacts"):]
    moved = Path(root).joinpath(*below)
    return moved.resolve().as_uri() if moved.exists() else uri


def studies(store_uri: str) -> list[tuple[str, str]]:
    """(study name, experiment name) of every study in the store."""
    from mlflow.tracking import MlflowClient  # MLflow takes seconds to import: see read_store

    client = MlflowClient(store_uri)
    found = []
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], f"tags.{KIND} = 'study'"):
            found.append((run.data.tags["study"], exp.name))
    return sorted(set(found))

"""Tracked runs as polars frames, and the study table: mean and 95% CI over seeds, delta vs base.
The CLI and the dashboards both read results through here."""
from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path

import polars as pl

from workbench import stats
from workbench.tracking import KIND, Store, open_store, quote

def finished_runs(store: Store, study: str) -> list:
    return store._search(f"tags.{KIND} = 'trial' and tags.study = {quote(study)} and attributes.status = 'FINISHED'")


def trial_runs(workdir: Path, study: str, experiment: str | None = None, tracking_uri: str | None = None,
               runs: list | None = None) -> pl.DataFrame:
    """One row per FINISHED trial run of the study (and per alias of it): tags, final metrics, the
    component kind of every slot and the searched fields' values."""
    if runs is None:
        store = open_store(workdir, experiment or study, tracking_uri)
        if store is None:
            return pl.DataFrame()
        runs = finished_runs(store, study)
    rows = []
    for r in runs:
        row = {"run_id": r.info.run_id, "variant": r.data.tags["variant"], "seed": int(r.data.tags["seed"]),
               "spec_hash": r.data.tags["spec_hash"], "search_point": r.data.tags.get("search_point", ""),
               "stopped_early": r.data.tags.get("stopped_early") == "true", "alias_of": None,
               **{f"slot.{k.split('.')[2]}": v for k, v in r.data.params.items()
                  if k.startswith("model.attention.") and k.endswith(".kind")},
               **{k: float(v) for k, v in r.data.metrics.items()}}
        rows.append(row)
        # A trial that several variant names build counts for each of them (see study.Trial.aliases).
        rows += [{**row, "variant": alias, "alias_of": row["variant"]} for alias in json.loads(r.data.tags.get("aliases", "[]"))]
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def with_row_labels(runs: pl.DataFrame) -> pl.DataFrame:
    """Adds ``row``: the variant, and in a search study its searched values ("FoX (Pro) [lr=0.002]"):
    a table row averages the seeds of one row label."""
    return runs.with_columns(
        pl.when(pl.col("search_point") != "").then(pl.col("variant") + " [" + pl.col("search_point") + "]")
        .otherwise(pl.col("variant")).alias("row"))


def study_table(runs: pl.DataFrame, base: str, metric: str = "val_ppl", order: list[str] | None = None) -> pl.DataFrame:
    """Per row label: its variant, seeds, mean, 95% CI half-width (Student t over seeds), delta of
    the mean vs the ``base`` variant, and the paired comparison by seed (``_paired``); rows in the
    study's design ``order`` of variants."""
    runs = with_row_labels(runs)
    rank = {v: i for i, v in enumerate(order or dict.fromkeys(runs["variant"].to_list()))}
    table = (
        runs.filter(~pl.col("stopped_early"))
        .group_by("row", maintain_order=True)
        .agg(pl.col("variant").first(), pl.len().alias("seeds"), pl.col(metric).mean().alias("mean"),
             pl.col(metric).std().alias("std"))
        .with_columns(_ci95("seeds", "std").alias("ci95"))
    )
    base_mean = table.filter(pl.col("row") == base)["mean"]
    ref = base_mean[0] if len(base_mean) else None
    table = table.with_columns((pl.col("mean") - ref).alias("delta") if ref is not None else pl.lit(None, pl.Float64).alias("delta"))
    table = table.join(_paired(runs, base, metric), on="row", how="left")
    position = pl.col("variant").replace_strict(rank, default=len(rank), return_dtype=pl.Int64)
    return table.with_columns(position.alias("_o")).sort("_o", "row").drop("_o")


def _paired(runs: pl.DataFrame, base: str, metric: str) -> pl.DataFrame:
    """Per row: the seeds it shares with the base row (``paired_seeds``), the mean of its per-seed
    differences from the base (``paired_delta``) and that mean's 95% CI half-width (Student t,
    ``paired_ci95``). A seed fixes the data order for every variant (and the initialisation of
    what they share), so the per-seed differences cancel what the seed alone moves: the same study
    can show a delta the unpaired CIs cannot tell from zero, or the reverse."""
    schema = {"row": pl.String, "paired_seeds": pl.UInt32, "paired_delta": pl.Float64, "paired_ci95": pl.Float64}
    per_seed = (runs.filter(~pl.col("stopped_early")).group_by("row", "seed").agg(pl.col(metric).mean())
                .filter(pl.col(metric).is_not_null()))
    base_by_seed = dict(per_seed.filter(pl.col("row") == base).select("seed", metric).iter_rows())
    rows = []
    for (row,), group in per_seed.filter(pl.col("row") != base).group_by("row", maintain_order=True):
        p = stats.paired(dict(group.select("seed", metric).iter_rows()), base_by_seed)
        if p.n:
            rows.append({"row": row, "paired_seeds": p.n, "paired_delta": p.delta, "paired_ci95": p.half_width})
    return pl.DataFrame(rows, schema=schema)


def _ci95(count: str, std: str) -> pl.Expr:
    """95% CI half-width of a mean (Student t, workbench.stats) from the columns holding n and the
    sample std."""
    return pl.struct(count, std).map_elements(lambda r: stats.t_half_width(r[std], r[count]), return_dtype=pl.Float64)


def print_table(table: pl.DataFrame, base: str, metric: str = "val_ppl") -> None:
    # Names are printed whole (a cut name can read as another variant, as "Transformer (LLaMA)" for
    # "Transformer (LLaMA) w/o RoPE"); the base of the deltas gets a line of its own. Columns are
    # as wide as their widest entry (tokens/s runs to six digits, a perplexity to one).
    print(f"delta = mean - mean of {base!r}; paired = mean of the per-seed differences from it, 95% CI "
          "(the seeds both have)")
    lines = [["variant", "seeds", f"{metric} mean", "95% CI", "delta", "paired"]]
    for r in table.iter_rows(named=True):
        ci = f"±{r['ci95']:.3f}" if r["ci95"] is not None else "n/a"
        delta = "" if r["delta"] is None or r["row"] == base else f"{r['delta']:+.3f}"
        paired = ""
        if r["row"] != base and r.get("paired_seeds"):
            pci = f"±{r['paired_ci95']:.3f}" if r["paired_ci95"] is not None else "±n/a"
            paired = f"{r['paired_delta']:+.3f} {pci} ({r['paired_seeds']})"
        lines.append([r["row"], str(r["seeds"]), f"{r['mean']:.3f}", ci, delta, paired])
    widths = [max(len(line[c]) for line in lines) for c in range(len(lines[0]))]
    for line in lines:
        print("  ".join([line[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(line[1:], widths[1:])]).rstrip())


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


def kept_per_head(store: Store, runs: list) -> dict[str, dict]:
    """run_id -> {"acp_log_eps": ln eps, "per_head": [[share per head] per layer]}: the share of
    causal pairs above adaptive computation pruning's threshold (gated models only)."""
    return _artifacts(store, runs, "acp_kept_per_head.json")


def _artifacts(store: Store, runs: list, name: str) -> dict[str, dict]:
    import mlflow.artifacts

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
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri)
    found = []
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], f"tags.{KIND} = 'study'"):
            found.append((run.data.tags["study"], exp.name))
    return sorted(set(found))

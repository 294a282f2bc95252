"""Tracked runs as polars frames, and the study table: mean and 95% CI over seeds, delta vs base.
The CLI and the dashboards both read results through here."""
from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from workbench.tracking import KIND, Store, local_tracking_uri

# Two-sided 95% Student t quantiles t(0.975, df) for df = 1..30; beyond that the normal's 1.96.
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def trial_runs(workdir: Path, study: str, experiment: str | None = None, tracking_uri: str | None = None) -> pl.DataFrame:
    """One row per FINISHED trial run of the study: tags and final metrics."""
    if tracking_uri is None and not (workdir / "mlflow.db").exists():
        return pl.DataFrame()
    store = Store(tracking_uri or local_tracking_uri(workdir), experiment or study, workdir / "mlartifacts")
    runs = store._search(f"tags.{KIND} = 'trial' and tags.study = '{study}' and attributes.status = 'FINISHED'")
    rows = []
    for r in runs:
        row = {"run_id": r.info.run_id, "variant": r.data.tags["variant"], "seed": int(r.data.tags["seed"]),
               "spec_hash": r.data.tags["spec_hash"], "search_point": r.data.tags.get("search_point", ""),
               "stopped_early": r.data.tags.get("stopped_early") == "true", "alias_of": None,
               **{k: float(v) for k, v in r.data.metrics.items()}}
        rows.append(row)
        # A trial that several variant names build counts for each of them (see study.Trial.aliases).
        rows += [{**row, "variant": alias, "alias_of": row["variant"]} for alias in json.loads(r.data.tags.get("aliases", "[]"))]
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def study_table(runs: pl.DataFrame, base: str, metric: str = "val_ppl", order: list[str] | None = None) -> pl.DataFrame:
    """Per variant: seeds, mean, 95% CI half-width (Student t over seeds), delta of the mean vs
    ``base``; rows in ``order`` (the study's design order), unknown variants last."""
    seen = list(dict.fromkeys(runs["variant"].to_list()))
    order = [v for v in (order or []) if v in seen] + [v for v in seen if v not in (order or [])]
    # A search study has one row per (variant, searched values); seeds are what a row averages.
    runs = runs.with_columns(
        pl.when(pl.col("search_point") != "").then(pl.col("variant") + " [" + pl.col("search_point") + "]")
        .otherwise(pl.col("variant")).alias("variant"))
    seen = list(dict.fromkeys(runs["variant"].to_list()))
    order = [v for v in order if v in seen] + [v for v in seen if v not in order]
    table = (
        runs.filter(~pl.col("stopped_early"))
        .group_by("variant")
        .agg(pl.len().alias("seeds"), pl.col(metric).mean().alias("mean"), pl.col(metric).std().alias("std"))
        .with_columns(pl.struct("seeds", "std").map_elements(
            lambda r: t975(r["seeds"] - 1) * r["std"] / math.sqrt(r["seeds"]) if r["seeds"] > 1 else None,
            return_dtype=pl.Float64).alias("ci95"))
    )
    base_mean = table.filter(pl.col("variant") == base)["mean"]
    ref = base_mean[0] if len(base_mean) else None
    table = table.with_columns((pl.col("mean") - ref).alias("delta") if ref is not None else pl.lit(None, pl.Float64).alias("delta"))
    rank = {v: i for i, v in enumerate(order)}
    return table.with_columns(pl.col("variant").replace_strict(rank, return_dtype=pl.Int64).alias("_o")).sort("_o").drop("_o")


def print_table(table: pl.DataFrame, base: str, metric: str = "val_ppl") -> None:
    print(f"{'variant':<40} {'seeds':>5}  {metric + ' mean':>14}  {'95% CI':>9}  {'delta vs ' + base[:20]:>12}")
    for r in table.iter_rows(named=True):
        ci = f"±{r['ci95']:.3f}" if r["ci95"] is not None else "n/a"
        delta = "" if r["delta"] is None or r["variant"] == base else f"{r['delta']:+.3f}"
        print(f"{r['variant'][:40]:<40} {r['seeds']:>5}  {r['mean']:>14.3f}  {ci:>9}  {delta:>12}")

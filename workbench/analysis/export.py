"""The study table written as CSV, parquet or JSON, by polars. JSON is an object whose ``rows``
are the table's rows (one object per row, the columns of foxwb.workbench.analysis.table.SCHEMA) beside what the
table was computed with (study, metric, base, alpha); other designs may add keys beside ``rows``."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import polars as pl

# Every --format of `wb results`: markdown and latex are paper tables (foxwb.workbench.analysis.paper_table).
FORMATS = ("table", "csv", "parquet", "json", "markdown", "latex")


def flat(table: pl.DataFrame) -> pl.DataFrame:
    """CSV holds no lists: a list column (the reasons of failed runs, the seeds run and their values)
    becomes one string, ' | ' between."""
    lists = [c for c, t in table.schema.items() if isinstance(t, pl.List)]
    return table.with_columns(pl.col(c).cast(pl.List(pl.String)).list.join(" | ") for c in lists) if lists else table


def as_json(table: pl.DataFrame, about: dict) -> str:
    return json.dumps({**about, "rows": json.loads(table.write_json())}, indent=1)


def write(table: pl.DataFrame, fmt: str, out: str | None, about: dict) -> None:
    """``fmt`` csv, parquet or json to ``out`` (a file), or to stdout where ``out`` is None (not
    parquet: binary)."""
    if fmt == "parquet":
        table.write_parquet(Path(out))
        return
    if fmt == "csv":
        buffer = io.StringIO()
        flat(table).write_csv(buffer)
        text = buffer.getvalue()
    else:
        text = as_json(table, about) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        Path(out).write_text(text)

"""Tables of documents, read one batch of rows at a time so that no file is held whole: parquet
(by row group), arrow IPC files and streams (memory-mapped), JSON lines (line by line), and
Hugging Face ``datasets`` saved to disk (``load_from_disk``: memory-mapped arrow). Each row of
the named column is one document: text, or a list of token ids. Offline: nothing is downloaded."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from foxwb.workbench.spec.errors import SpecError

SUFFIXES = {"parquet": (".parquet", ".pq"), "arrow": (".arrow", ".feather", ".ipc"),
            "jsonl": (".jsonl", ".ndjson", ".json")}
BATCH_ROWS = 1024


def suffixes(fmt: str) -> tuple[str, ...]:
    return sum(SUFFIXES.values(), ()) if fmt == "auto" else SUFFIXES[fmt]


def file_format(path: Path, fmt: str, field: str) -> str:
    if fmt != "auto":
        return fmt
    for name, ends in SUFFIXES.items():
        if path.name.endswith(ends):
            return name
    raise SpecError(f"{field}: cannot tell the format of {path} by its suffix; set data.format to one of "
                    f"{list(SUFFIXES)} (suffixes: {', '.join(suffixes('auto'))})")


def _missing(column: str, field: str, where: str, names: list[str]) -> SpecError:
    return SpecError(f"data.{field}={column!r}: no such column in {where}; its columns are {names}")


def _parquet(path: Path, column: str, field: str) -> Iterator[pa.Array]:
    f = pq.ParquetFile(path)
    if column not in f.schema_arrow.names:
        raise _missing(column, field, str(path), f.schema_arrow.names)
    for batch in f.iter_batches(batch_size=BATCH_ROWS, columns=[column]):
        yield batch.column(0)


def _arrow(path: Path, column: str, field: str) -> Iterator[pa.Array]:
    source = pa.memory_map(str(path))
    try:
        reader = pa.ipc.open_file(source)
        batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:  # not the file format: the stream format (as `datasets` writes)
        source.seek(0)
        try:
            reader = pa.ipc.open_stream(source)
        except pa.ArrowInvalid:
            raise SpecError(f"data.paths: {path} is neither an arrow IPC file nor an arrow stream") from None
        batches = iter(reader)
    if column not in reader.schema.names:
        raise _missing(column, field, str(path), reader.schema.names)
    for batch in batches:
        yield batch.column(batch.schema.get_field_index(column))


def _jsonl(path: Path, column: str, field: str) -> Iterator[pa.Array]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SpecError(f"data.paths: {path} line {number} is not JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise SpecError(f"data.paths: {path} line {number} is not a JSON object (JSON lines: one object per line)")
            if column not in row:
                raise _missing(column, field, f"{path} line {number}", list(row))
            rows.append(row[column])
            if len(rows) == BATCH_ROWS:
                yield _array(rows, column, field, path)
                rows = []
    if rows:
        yield _array(rows, column, field, path)


def _array(rows: list, column: str, field: str, path: Path) -> pa.Array:
    try:
        return pa.array(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise SpecError(f"data.{field}={column!r}: the values in {path} are of mixed types ({e})") from None


def file_batches(path: Path, fmt: str, column: str, field: str) -> Iterator[pa.Array]:
    """The column ``column`` of ``path``, a batch of rows at a time."""
    reader = {"parquet": _parquet, "arrow": _arrow, "jsonl": _jsonl}[file_format(path, fmt, "data.format")]
    return reader(path, column, field)


def open_dataset(path: str, split: str | None, field: str):
    """A split of a ``save_to_disk`` folder and its name: ``split`` of a DatasetDict (``train`` when
    not given), or the Dataset itself (name None)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # After the two variables, which datasets reads when first imported; and only for a brought
    # dataset folder: datasets takes over a second to import, which other data kinds do without.
    from datasets import DatasetDict, load_from_disk

    if not Path(path).expanduser().is_dir():
        raise SpecError(f"data.path: no such folder: {path!r} (a folder written by datasets' save_to_disk)")
    try:
        ds = load_from_disk(str(Path(path).expanduser()))
    except FileNotFoundError as e:
        raise SpecError(f"data.path: {path!r} is not a folder written by datasets' save_to_disk ({e})") from None
    if isinstance(ds, DatasetDict):
        name = split or "train"
        if name not in ds:
            raise SpecError(f"data.{field}={name!r}: no such split in {path}; its splits are {list(ds)}")
        return ds[name], name
    if split is not None:
        raise SpecError(f"data.{field}={split!r}: {path} holds a single Dataset, which has no splits; leave {field} out")
    return ds, None


def dataset_batches(ds, column: str, field: str, where: str) -> Iterator[pa.Array]:
    if column not in ds.column_names:
        raise _missing(column, field, where, ds.column_names)
    for table in ds.select_columns([column]).with_format("arrow").iter(batch_size=BATCH_ROWS):
        yield table.column(0).combine_chunks()


def dataset_files(ds) -> list[Path]:
    """The arrow files a dataset split is read from (their sizes and times key the token cache)."""
    return sorted(Path(f["filename"]) for f in ds.cache_files)


def documents(values: pa.Array, column: str, field: str, where: str) -> tuple[str, object]:
    """One batch of a column as documents, nulls skipped: ("text", [str]) or ("ids", (the ids of
    every document one after another as int64, each document's length))."""
    values = values.drop_null()
    kind = values.type
    if field == "text_column":
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
            raise SpecError(f"data.text_column={column!r} holds {kind} values in {where}, not text; "
                            "for token ids use ids_column")
        return "text", values.to_pylist()
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)) \
            or not pa.types.is_integer(kind.value_type):
        raise SpecError(f"data.ids_column={column!r} holds {kind} values in {where}, not lists of token ids; "
                        "for text use text_column")
    lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
    flat = values.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    if flat.size and flat.min() < 0:
        raise SpecError(f"data.ids_column={column!r}: negative token id {int(flat.min())} in {where}")
    return "ids", (flat, lengths.astype(np.int64))

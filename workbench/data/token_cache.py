"""Tokenized documents on disk, built once per (source files, column, tokenizer) and memory-mapped
by every trial after: ``tokens.bin`` (the ids of all documents one after another), ``offsets.npy``
(int64, where each document starts, and the end) and ``meta.json``. Built in a private folder and
renamed into place, so trials that start together never read a half-written cache (the first to
finish wins; the others discard theirs).

The cache lives under ``$WB_DATA_CACHE``, else ``~/.cache/fox-workbench/tokens``. A source file is
known by its resolved path, size and modification time, so an edited file is read again.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from foxwb.workbench.spec.errors import SpecError

FORMAT = 1  # bump when the layout or the tokenization changes


def cache_root() -> Path:
    return Path(os.environ.get("WB_DATA_CACHE") or Path.home() / ".cache" / "fox-workbench" / "tokens")


def file_stamps(files: Iterable[Path]) -> list[list]:
    out = []
    for path in files:
        stat = path.stat()
        out.append([str(path.resolve()), stat.st_size, stat.st_mtime_ns])
    return out


class TokenWriter:
    """Appends documents' ids to ``tokens.bin`` of ``dtype``; counts documents, tokens and the largest id."""

    def __init__(self, folder: Path, dtype, field: str, limit: int | None = None):
        self.folder, self.dtype, self.field, self.limit = folder, np.dtype(dtype), field, limit
        self._file = open(folder / "tokens.bin", "wb")
        self._lengths: list[np.ndarray] = []
        self.documents, self.tokens, self.top = 0, 0, -1

    @property
    def full(self) -> bool:
        return self.limit is not None and self.documents >= self.limit

    def add(self, flat: np.ndarray, lengths: np.ndarray) -> None:
        """Documents given as their ids one after another and each one's length."""
        if self.limit is not None and self.documents + len(lengths) > self.limit:
            lengths = lengths[: self.limit - self.documents]
            flat = flat[: int(lengths.sum())]
        if flat.size:
            top = int(flat.max())
            if top > np.iinfo(self.dtype).max:
                raise SpecError(f"data.{self.field}: token id {top} does not fit {self.dtype.name}, the widest the cache keeps")
            self.top = max(self.top, top)
            self._file.write(flat.astype(self.dtype).tobytes())
        self._lengths.append(np.asarray(lengths, dtype=np.int64))
        self.documents += len(lengths)
        self.tokens += int(flat.size)

    def close(self, meta: dict) -> None:
        self._file.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, dtype=np.int64)
        np.save(self.folder / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        meta = {**meta, "dtype": self.dtype.name, "documents": self.documents, "tokens": self.tokens, "max_id": self.top}
        (self.folder / "meta.json").write_text(json.dumps(meta, indent=1))


def cached(key: dict, build: Callable[[Path], None]) -> Path:
    """The cache folder for ``key``, built by ``build(folder)`` when it is not there yet."""
    digest = hashlib.sha256(json.dumps({"format": FORMAT, **key}, sort_keys=True).encode()).hexdigest()[:24]
    root = cache_root()
    final = root / digest
    if (final / "meta.json").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{digest}.building-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        build(tmp)
        try:
            os.rename(tmp, final)
        except OSError:  # another trial finished the same cache first
            if not (final / "meta.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def open_cache(folder: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """(tokens memory-mapped, document offsets, meta) of a built cache."""
    meta = json.loads((folder / "meta.json").read_text())
    offsets = np.load(folder / "offsets.npy", mmap_mode="r")
    if meta["tokens"] == 0:
        return np.zeros(0, dtype=meta["dtype"]), offsets, meta
    return np.memmap(folder / "tokens.bin", dtype=meta["dtype"], mode="r"), offsets, meta

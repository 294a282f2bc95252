"""LongCrawl64 (foxwb.workbench.spec.data.LongCrawl64Data; docs/trials-and-data.md, "LongCrawl64"), the
FoX paper's corpus, read from its zarr store a block at a time.

The release is a folder of two 2-D arrays, ``train.zarr`` (6,609,334 rows) and ``heldout.zarr``
(52,131 rows), one document a row of 65,536 GPT-2 token ids (uint16, zarr format 2, chunks of
2048 x 2048 compressed with blosc-lz4): about 800 GB, so nothing here reads more than the block a
batch needs (zarr decompresses only the chunks a slice touches).

- **A document** is a row behind the end-of-text id 50256: position 0 is that id, position i + 1
  the row's token i, so the workbench's held-out sequences (the first length + 1 tokens: inputs,
  then the targets one further on) predict a row's tokens from its first as the paper's loader
  does, the end-of-text id standing before it.
- **A training sequence** is as the paper's loader cuts it: an aligned block of ``context`` tokens
  of one training row (block b is tokens [b x context, (b + 1) x context)), its inputs the
  end-of-text id then the block's tokens but its last, its targets the block. A micro-batch is
  ``batch_size`` consecutive rows at one block, a tile of the paper's: tile and block drawn by
  (seed, step, micro-batch), with replacement, as every other kind here draws its windows (the
  paper reads its tiles in order, each once). Consecutive rows share zarr chunks, so a micro-batch
  decompresses about context / 2048 chunks, not that many a row. The rows past the last whole tile
  and the tokens past a row's last whole block are never trained on, as in the paper.
- **Held out**: the rows of ``heldout.zarr``, the select split the even ones, the test split the
  odd ones (foxwb.workbench.data.held_out); the two stores share no document.

A read checks what a partial download or a mismatched model would otherwise pass silently: a row
of a block that reads as all zeros (zarr fills a missing chunk with 0), and an id beyond
``model.vocab_size``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from foxwb.workbench.data.batch import Batch
from foxwb.workbench.data.corpus import DocumentData
from foxwb.workbench.data.held_out import SELECT, TEST
from foxwb.workbench.data.tokenizer import FileTokenizer
from foxwb.workbench.spec.data import LONGCRAWL64_EOT, LongCrawl64Data
from foxwb.workbench.spec.errors import SpecError

TRAIN, HELDOUT = "train.zarr", "heldout.zarr"
ENTROPY_TOKENS = 1 << 24  # held-out tokens the unigram entropy counts (the first rows'), not 3.4 billion
ZERO_CHECK = 256  # a read this long or longer whose row is all zeros is a missing chunk, not text
INSTALL = "pip install -e '.[longcrawl]' in the workbench's checkout (or pip install zarr)"


def _zarr():
    """The zarr package: an optional dependency (the ``longcrawl`` extra) that only this kind reads."""
    try:
        import zarr  # late: optional, and only a LongCrawl64 trial needs it
    except ImportError:
        raise SpecError(f"data.kind=longcrawl64 reads zarr stores and the zarr package is not installed: {INSTALL}") from None
    return zarr


def open_array(root: Path, name: str):
    """The 2-D integer array ``root / name``, opened read-only (nothing read yet)."""
    path, zarr = root / name, _zarr()
    try:
        array = zarr.open_array(str(path), mode="r")
    except Exception as e:  # noqa: BLE001 -- zarr 2 and 3 raise different types for a folder that is no array
        said = (str(e).strip().splitlines() or [""])[0]
        raise SpecError(f"data.path: {path} is not a zarr array ({type(e).__name__}: {said}); LongCrawl64's {name} "
                        "is one (a .zarray beside its chunks)") from None
    if len(array.shape) != 2:
        raise SpecError(f"data.path: {path} has shape {tuple(array.shape)}; LongCrawl64's arrays are 2-D, "
                        "documents x tokens (65,536 a row)")
    dtype = np.dtype(array.dtype)
    if dtype.kind not in "ui":
        raise SpecError(f"data.path: {path} holds {dtype} values; LongCrawl64's are token ids, integers "
                        "(uint16 in the release; uint32, int32 and int64 are read too)")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise SpecError(f"data.path: {path} is empty (shape {tuple(array.shape)})")
    return array


def open_store(spec: LongCrawl64Data) -> tuple[object, object]:
    """(train, heldout): the store's two arrays, each checked against ``data.context``."""
    root = Path(spec.path).expanduser()
    if not root.exists():
        raise SpecError(f"data.path: no such folder {spec.path!r} (LongCrawl64's folder, holding {TRAIN} and {HELDOUT})")
    if not root.is_dir():
        raise SpecError(f"data.path: {spec.path!r} is a file; give LongCrawl64's folder, holding {TRAIN} and {HELDOUT}")
    missing = [name for name in (TRAIN, HELDOUT) if not (root / name).is_dir()]
    if missing:
        found = sorted(p.name for p in root.iterdir())[:8]
        raise SpecError(f"data.path: {spec.path!r} holds no {' and no '.join(missing)} (it holds: "
                        f"{', '.join(found) or 'nothing'}); LongCrawl64's folder holds {TRAIN} and {HELDOUT}")
    arrays = [open_array(root, TRAIN), open_array(root, HELDOUT)]
    for name, array in zip((TRAIN, HELDOUT), arrays):
        if spec.context > array.shape[1]:
            raise SpecError(f"data.context={spec.context} is longer than the rows of {name} ({array.shape[1]:,} tokens "
                            "each; the paper's sequences are blocks of a row): lower data.context")
    if arrays[1].shape[0] < 2:
        raise SpecError(f"data.path: {HELDOUT} holds {arrays[1].shape[0]} row; the select and test splits need one each")
    return arrays[0], arrays[1]


class Rows:
    """A store's rows as documents, read only where sliced: what DocumentData and the held-out
    splits ask of their documents (len, [i], lengths, subset). ``index`` picks array rows."""

    def __init__(self, array, name: str, vocab_size: int, index: np.ndarray | None = None):
        self.array, self.name, self.vocab_size = array, name, vocab_size
        self.width = int(array.shape[1])  # tokens a row
        self.index = np.arange(int(array.shape[0]), dtype=np.int64) if index is None else np.asarray(index, np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> "Document":
        return Document(self, int(self.index[i]))

    def __iter__(self) -> Iterator["Document"]:
        return (self[i] for i in range(len(self)))

    def lengths(self) -> np.ndarray:
        """Tokens per document: the end-of-text id and the row's tokens."""
        return np.full(len(self), self.width + 1, dtype=np.int64)

    def subset(self, index) -> "Rows":
        return Rows(self.array, self.name, self.vocab_size, self.index[np.asarray(index, dtype=np.int64)])

    def read(self, rows, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop) of array rows ``rows`` (a slice, or ascending row numbers) as int64,
        (rows, stop - start), each chunk they touch decompressed once; checked."""
        if isinstance(rows, slice):
            block = self.array[rows, start:stop]
            first = rows.start or 0
            numbers = np.arange(first, first + block.shape[0])
        else:
            numbers = np.asarray(rows, dtype=np.int64)
            block = self.array.oindex[numbers, start:stop] if len(numbers) else np.zeros((0, stop - start), np.int64)
        block = np.asarray(block).astype(np.int64)
        if block.size:
            self._check(block, numbers, start, stop)
        return block

    def _check(self, block: np.ndarray, numbers: np.ndarray, start: int, stop: int) -> None:
        if stop - start >= ZERO_CHECK:
            empty = np.flatnonzero(~block.any(axis=1))
            if len(empty):
                raise SpecError(f"data.path: row {int(numbers[empty[0]])} of {self.name} reads as zeros at tokens "
                                f"{start}-{stop}: the store lacks that chunk (zarr fills a missing one with 0; a "
                                "partial or interrupted download?)")
        low, top = int(block.min()), int(block.max())
        if low < 0:
            row = int(numbers[np.argmax(block.min(axis=1) < 0)])
            raise SpecError(f"data.path: token id {low} in row {row} of {self.name} is negative: not a token id")
        if top >= self.vocab_size:
            row = int(numbers[np.argmax(block.max(axis=1) >= self.vocab_size)])
            raise SpecError(f"data.path: token id {top} in row {row} of {self.name} is outside the vocabulary "
                            f"(model.vocab_size={self.vocab_size}); LongCrawl64's ids are GPT-2's (below 50257): "
                            "set model.vocab_size to at least 50257, or check the store")


class Document:
    """Row ``row`` as a document: the end-of-text id, then the row's tokens, read when sliced."""

    def __init__(self, rows: Rows, row: int):
        self.rows, self.row = rows, row

    def __len__(self) -> int:
        return self.rows.width + 1

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                return np.asarray(self)[key]
            if stop <= start:
                return np.zeros(0, dtype=np.int64)
            tokens = self.rows.read(slice(self.row, self.row + 1), max(start - 1, 0), stop - 1)[0]
            return np.concatenate([[LONGCRAWL64_EOT], tokens]) if start == 0 else tokens
        i = int(key) + (len(self) if int(key) < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(f"position {key} of a document of {len(self)} tokens")
        return self[i : i + 1][0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype)


class LongCrawlData(DocumentData):
    """DocumentData over a LongCrawl64 store: training sequences as the paper cuts them, held-out
    sequences read a batch of rows at a time."""

    def __init__(self, spec: LongCrawl64Data, train: Rows, heldout: Rows, vocab_size: int, tokenizer, info: dict):
        super().__init__(train, heldout, spec.context, vocab_size, tokenizer, source=f"data.path ({TRAIN})")
        self.info = info
        self.blocks = train.width // spec.context  # whole blocks a training row holds
        self.train_tokens_available = len(train) * self.blocks * spec.context

    def train_batch(self, seed: int, step: int, micro: int, batch_size: int) -> Batch:
        tiles = len(self.train_docs) // batch_size
        if tiles == 0:
            raise SpecError(f"train.batch_size={batch_size} is more than the {len(self.train_docs)} rows of {TRAIN}: "
                            "a micro-batch is that many consecutive rows; lower train.batch_size")
        tile, block = divmod(int(np.random.default_rng([seed, step, micro]).integers(tiles * self.blocks)), self.blocks)
        y = self.train_docs.read(slice(tile * batch_size, (tile + 1) * batch_size),
                                 block * self.context, (block + 1) * self.context)
        x = np.empty_like(y)
        x[:, 0], x[:, 1:] = LONGCRAWL64_EOT, y[:, :-1]
        return Batch(torch.from_numpy(x), torch.from_numpy(y))

    def eval_batches(self, length: int, sequences: int, batch_size: int, split: str = SELECT) -> list[Batch]:
        """The first ``length`` + 1 tokens (the end-of-text id, then the row's) of the first
        ``sequences`` documents of ``split``: DocumentData's, read a batch of rows at once."""
        docs = self.test_docs if split == TEST else self.select_docs
        if length > docs.width:
            return []
        n = min(sequences, len(docs))
        out = []
        for i in range(0, n, batch_size):
            y = docs.read(docs.index[i : min(i + batch_size, n)], 0, length)
            x = np.empty_like(y)
            x[:, 0], x[:, 1:] = LONGCRAWL64_EOT, y[:, :-1]
            out.append(Batch(torch.from_numpy(x), torch.from_numpy(y)))
        return out

    def val_tokens(self) -> Iterator[np.ndarray]:
        """The first held-out rows' tokens, ENTROPY_TOKENS at most, a few rows at a time."""
        docs = self.val_docs
        rows = min(len(docs), max(1, ENTROPY_TOKENS // docs.width))
        step = max(1, (1 << 22) // docs.width)
        for i in range(0, rows, step):
            yield docs.read(slice(int(docs.index[i]), int(docs.index[min(i + step, rows) - 1]) + 1), 0, docs.width).ravel()


def _tokenizer(spec: LongCrawl64Data) -> tuple[object, dict]:
    if spec.tokenizer is None:
        return None, {"kind": "none"}
    tok = FileTokenizer(spec.tokenizer.path, spec.tokenizer.sha256)
    return tok, tok.identity()


def load_longcrawl(spec: LongCrawl64Data, vocab_size: int) -> LongCrawlData:
    """The trial's LongCrawl64 data: the store opened (nothing read but its metadata) and checked."""
    train_array, heldout_array = open_store(spec)
    train, heldout = Rows(train_array, TRAIN, vocab_size), Rows(heldout_array, HELDOUT, vocab_size)
    tokenizer, tok_info = _tokenizer(spec)
    split = {"method": f"the store's own held-out rows ({HELDOUT})", "train_documents": len(train),
             "val_documents": len(heldout), "train_tokens": len(train) * train.width,
             "val_tokens": len(heldout) * heldout.width}
    entropy_rows = min(len(heldout), max(1, ENTROPY_TOKENS // heldout.width))
    store = {"path": str(Path(spec.path).expanduser().resolve()), "row_tokens": train.width,
             "dtype": str(np.dtype(train_array.dtype)), "chunks": [int(c) for c in train_array.chunks],
             "unigram_entropy_rows": entropy_rows}
    return LongCrawlData(spec, train, heldout, vocab_size, tokenizer,
                         {"data_split": split, "tokenizer": tok_info, "longcrawl64": store})

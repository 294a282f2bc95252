"""The held-out documents as two disjoint splits, *select* and *test*, and the test set's windows
(docs/trials-and-data.md, "Three splits").

- **select**: what every choice reads: the validation loss during training, ASHA, a search's and a
  confirmation's choice. Held-out documents 0, 2, 4, ... (in the held-out part's own order).
- **test**: read once, after training, for what the table reports. Held-out documents 1, 3, 5, ...
  A held-out part of a single document (a token file with no end-of-text token) is cut in two at
  its middle: the first half selects, the second tests.

Training reads neither: the training documents are those of the split between training and
held-out, unchanged.

The **test set** is the test split's documents in order until it holds ``eval.test_tokens`` scored
tokens (the last one cut there); every token of a document but its first is scored. A document
longer than the context is read through a sliding window: windows of ``context`` tokens, ``stride``
apart, each scoring only the tokens no earlier window scored, so every token is predicted from at
least ``context - stride`` tokens before it (or all of its document before it). The set depends on
the documents alone, not on the context or the model: every cell of a crossed design that shares
the data source is scored on the same tokens.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from foxwb.workbench.data.batch import IGNORE, Batch, doc_lengths

SELECT, TEST = "select", "test"


def halves(docs) -> tuple[object, object]:
    """(select, test): the held-out documents at even positions, and at odd ones."""
    n = len(docs)
    if n == 1:
        doc = docs[0]
        half = len(doc) // 2
        return [doc[:half]], [doc[half:]]
    even, odd = np.arange(0, n, 2), np.arange(1, n, 2)
    if hasattr(docs, "subset"):  # memory-mapped documents (foxwb.workbench.data.documents.FlatDocs)
        return docs.subset(even), docs.subset(odd)
    return [docs[int(i)] for i in even], [docs[int(i)] for i in odd]


@dataclass(frozen=True)
class TestSet:
    """The documents scored for the table, and how many tokens they give."""

    docs: list  # token arrays; the last may be cut where the set reaches ``asked``
    scored: int  # tokens predicted: every token of each document but its first
    asked: int  # eval.test_tokens
    available: int  # scored tokens in the whole test split

    @property
    def digest(self) -> str:
        """The first 16 hex digits of the SHA-256 of its documents' tokens: two trials with the same
        digest were scored on the same tokens."""
        h = hashlib.sha256()
        for doc in self.docs:
            h.update(np.asarray(doc, dtype=np.int64).tobytes() + b"|")
        return h.hexdigest()[:16]


def test_set(test_docs, asked: int) -> TestSet:
    lengths = doc_lengths(test_docs)
    available = int(np.maximum(lengths - 1, 0).sum())
    docs, scored = [], 0
    for i, n in enumerate(lengths):
        if scored >= asked:
            break
        if n < 2:
            continue
        doc = np.asarray(test_docs[i][: asked - scored + 1], dtype=np.int64)
        docs.append(doc)
        scored += len(doc) - 1
    return TestSet(docs, scored, asked, available)


def stride_tokens(context: int, stride: float) -> int:
    return max(1, round(stride * context))


def windows(doc: np.ndarray, context: int, step: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(input, targets) windows of at most ``context`` tokens over one document; targets an earlier
    window scored are IGNORE, so each token is scored once."""
    out, start, done = [], 0, 0  # done: targets 1..done are scored
    last = len(doc) - 1
    while done < last:
        end = min(start + context, last)
        x, y = doc[start:end], doc[start + 1 : end + 1].copy()
        y[: done - start] = IGNORE
        out.append((x, y))
        done = end
        start += step
    return out


def test_batches(test: TestSet, context: int, stride: float, batch_size: int) -> list[tuple[Batch, np.ndarray]]:
    """The test set's windows in batches of ``batch_size`` rows of ``context`` tokens (a shorter
    window padded, its padding IGNORE), each with the test document of every row."""
    step = stride_tokens(context, stride)
    rows = [(d, x, y) for d, doc in enumerate(test.docs) for x, y in windows(doc, context, step)]
    out = []
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        width = max(len(x) for _, x, _ in chunk)
        xs = np.zeros((len(chunk), width), dtype=np.int64)
        ys = np.full((len(chunk), width), IGNORE, dtype=np.int64)
        for r, (_, x, y) in enumerate(chunk):
            xs[r, : len(x)], ys[r, : len(y)] = x, y
        out.append((Batch(torch.from_numpy(xs), torch.from_numpy(ys)), np.array([d for d, _, _ in chunk])))
    return out


def too_small(test: TestSet, minimum: int, spec) -> str | None:
    """The refusal when the test split holds fewer scored tokens than ``minimum``, with advice for
    the data source ``spec`` (a DataSpec member); None when it holds enough."""
    if test.available >= minimum:
        return None
    return (f"data: the test split holds {test.available:,} scored tokens, fewer than eval.min_test_tokens="
            f"{minimum:,}: a verdict would rest on them (docs/trials-and-data.md, \"Three splits\"). {advice(spec)}; or lower "
            "eval.min_test_tokens to accept a smaller test set (the result states its size)")


def advice(spec) -> str:
    """How to give a data source ``spec`` a larger test split: the test split is every other held-out document."""
    fraction = getattr(spec, "val_fraction", None)
    raise_fraction = f"raise data.val_fraction (now {fraction or 'the default'}; half of the held-out documents test)"
    if spec.kind == "builtin":
        more = [f"raise data.max_bytes (now {spec.max_bytes:,})"] if spec.max_bytes else []
        if spec.sources == "stdlib":
            more.append("set data.sources: stdlib+packages")
        joined = "; ".join([*more, raise_fraction])
        return joined[0].upper() + joined[1:]
    if spec.kind == "text":
        more = [f"raise data.max_bytes (now {spec.max_bytes:,})"] if spec.max_bytes else []
        return "; ".join(["Add text to data.paths", *more, raise_fraction])
    if spec.kind == "english":
        larger = "Use the larger set (data.set: en-permissive); or " if spec.set == "core" else ""
        return larger + (raise_fraction if larger else raise_fraction[0].upper() + raise_fraction[1:])
    if spec.kind == "tokens":
        return "Give a longer data.val file (half of its documents test; split at data.eot_token)"
    if spec.kind == "longcrawl64":
        return "Give the store's whole heldout.zarr (its odd rows test; a partial download holds fewer)"
    if spec.kind == "hf_dataset" and spec.val_split or getattr(spec, "val_paths", None):
        part = "data.val_split" if spec.kind == "hf_dataset" else "data.val_paths"
        return f"Give a larger held-out part ({part}; half of its documents test)"
    return f"Add documents, or {raise_fraction}"

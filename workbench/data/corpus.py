"""Data for one trial: documents as token arrays, training windows, held-out sequences.

Sources (foxwb.workbench.spec.trial): the built-in corpus (the Python standard library's own source files,
on every Python installation: no download), the user's text files, pre-tokenized token files
(memory-mapped) and the synthetic MQAR task. Training windows are drawn from an rng seeded by
(seed, step), so the data order is fixed by the seed and a resumed run sees what it would have.
Held-out sequences start at a document's first token, so position i of a sequence is position i
of its document: what per-position loss L(i) needs.
"""
from __future__ import annotations

import hashlib
import os
import platform
import sysconfig
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from foxwb.workbench.data.batch import IGNORE, Batch, doc_lengths
from foxwb.workbench.data import held_out
from foxwb.workbench.data.tokenizer import FileTokenizer, byte_lengths
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.trial import CorpusData, MQARData, TokenData

class ByteTokenizer:
    vocab_size = 256

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def byte_lengths(self, size: int) -> tuple[np.ndarray, None]:
        """One byte per id of 0..255 (-1 beyond: no such token); see tokenizer.byte_lengths."""
        return np.where(np.arange(size) < 256, 1, -1), None


class BPETokenizer:
    """Byte-level BPE trained on the training documents with the ``tokenizers`` package."""

    def __init__(self, texts: list[str], vocab_size: int):
        self._tok = Tokenizer(models.BPE())
        self._tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        self._tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        self._tok.train_from_iterator(texts, trainer=trainer)
        self.vocab_size = vocab_size

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self._tok.encode(text).ids, dtype=np.int64)

    def decode(self, ids) -> str:
        return self._tok.decode([int(i) for i in ids])

    def byte_lengths(self, size: int) -> tuple[np.ndarray | None, str | None]:
        return byte_lengths(self._tok, size)


class DocumentData:
    """Documents as int64 arrays; training windows anywhere inside a long-enough document; the
    held-out documents as the select and test splits (foxwb.workbench.data.held_out)."""

    def __init__(self, train_docs, val_docs, context: int, vocab_size: int, tokenizer=None, source="data"):
        self.train_docs, self.val_docs = train_docs, val_docs  # val_docs: every held-out document
        self.select_docs, self.test_docs = held_out.halves(val_docs)
        self.context, self.vocab_size, self.tokenizer = context, vocab_size, tokenizer
        self.info: dict = {}  # what the result states about the data (split, tokenizer)
        lengths = doc_lengths(train_docs)
        if lengths.sum() == 0:
            raise SpecError(f"{source}: the corpus is empty (no training documents with any tokens)")
        self._eligible = np.flatnonzero(lengths > context)
        if len(self._eligible) == 0:
            raise SpecError(
                f"data.context={context} is longer than every training document (longest: "
                f"{lengths.max()} tokens); lower data.context or use longer documents"
            )
        if not (doc_lengths(self.select_docs) > context).any():
            raise SpecError(
                f"data: no document of the select split is longer than data.context={context} "
                f"({len(self.select_docs)} select document(s) of {len(val_docs)} held out; the select split "
                "is every other held-out document: docs/trials-and-data.md, \"Three splits\"); add documents or raise data.val_fraction"
            )
        # The tokens training can see: a window lies inside a document longer than the context.
        self.train_tokens_available = int(lengths[self._eligible].sum())
        # A window start is uniform over all valid starts of all eligible documents.
        starts = lengths[self._eligible] - context
        self._cum = np.cumsum(starts)

    def train_batch(self, seed: int, step: int, micro: int, batch_size: int) -> Batch:
        rng = np.random.default_rng([seed, step, micro])
        picks = rng.integers(0, self._cum[-1], size=batch_size)
        doc_idx = np.searchsorted(self._cum, picks, side="right")
        offsets = picks - np.concatenate(([0], self._cum))[doc_idx]
        rows = [self.train_docs[self._eligible[d]][o : o + self.context + 1] for d, o in zip(doc_idx, offsets)]
        seq = torch.from_numpy(np.stack(rows).astype(np.int64))
        return Batch(seq[:, :-1], seq[:, 1:])

    def eval_batches(self, length: int, sequences: int, batch_size: int, split: str = held_out.SELECT) -> list[Batch]:
        """The first ``length`` + 1 tokens of the first ``sequences`` documents of ``split`` (select
        or test) that long."""
        docs = self.test_docs if split == held_out.TEST else self.select_docs
        picks = np.flatnonzero(doc_lengths(docs) > length)[:sequences]
        rows = [np.asarray(docs[int(i)][: length + 1], dtype=np.int64) for i in picks]
        out = []
        for i in range(0, len(rows), batch_size):
            seq = torch.from_numpy(np.stack(rows[i : i + batch_size]))
            out.append(Batch(seq[:, :-1], seq[:, 1:]))
        return out

    def test_set(self, asked: int) -> held_out.TestSet:
        return held_out.test_set(self.test_docs, asked)

    def val_tokens(self) -> np.ndarray:
        return np.concatenate(list(self.val_docs)) if len(self.val_docs) else np.zeros(0, dtype=np.int64)


class MQARTask:
    """Fixed train, select and test sets of MQAR sequences (keys [0, n_keys), values after them); the
    select and test sets hold ``n_val`` sequences each."""

    def __init__(self, spec: MQARData, seed: int):
        self.spec = spec
        self.context = spec.context - 1
        self.vocab_size = spec.vocab_needed
        self.tokenizer = None
        self._train = self._make(spec.n_train, np.random.default_rng([seed, 1]))
        self.train_tokens_available = int(self._train[0].size)  # a fixed training set
        self._val = self._make(spec.n_val, np.random.default_rng([seed, 2]))  # the select split
        self._test = self._make(spec.n_val, np.random.default_rng([seed, 3]))

    def _make(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        s = self.spec
        keys = np.argsort(rng.random((n, s.n_keys)), axis=1)[:, : s.n_pairs]  # distinct keys per row
        values = s.n_keys + rng.integers(0, s.n_values, size=(n, s.n_pairs))
        asked = np.argsort(rng.random((n, s.n_pairs)), axis=1)[:, : s.n_queries]
        q_keys = np.take_along_axis(keys, asked, 1)
        q_values = np.take_along_axis(values, asked, 1)
        seq = np.concatenate([np.stack([keys, values], 2).reshape(n, -1), np.stack([q_keys, q_values], 2).reshape(n, -1)], 1)
        x, y = seq[:, :-1], seq[:, 1:].copy()
        answer = np.zeros_like(y, dtype=bool)
        answer[:, 2 * s.n_pairs :: 2] = True  # targets that are the answers to the queries
        y[~answer] = IGNORE
        return x, y

    def _batch(self, data, idx) -> Batch:
        return Batch(torch.from_numpy(data[0][idx]), torch.from_numpy(data[1][idx]))

    def train_batch(self, seed: int, step: int, micro: int, batch_size: int) -> Batch:
        idx = np.random.default_rng([seed, step, micro]).integers(0, len(self._train[0]), size=batch_size)
        return self._batch(self._train, idx)

    def eval_batches(self, length: int, sequences: int, batch_size: int, split: str = held_out.SELECT) -> list[Batch]:
        if length != self.context:
            return []  # MQAR sequences have one length
        data = self._test if split == held_out.TEST else self._val
        n = min(sequences, len(data[0]))
        return [self._batch(data, np.arange(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]

    def val_tokens(self) -> np.ndarray:
        x, y = self._val
        return y[y != IGNORE]


def _stdlib_files() -> tuple[Path, list[Path]]:
    """The standard library's .py files, in order. Walked with os.walk, never entering a
    site-packages folder (a Python's own may lie under its standard library): pathlib's rglob walked
    into it and filtered after, 0.34 against 0.025 s, paid by every trial that reads this corpus."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for folder, subfolders, names in os.walk(root):  # symlinked folders not followed, as rglob did
        subfolders[:] = [d for d in subfolders if d != "site-packages"]
        files += [p for p in (Path(folder, n) for n in names if n.endswith(".py")) if p.is_file()]
    return root, sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _builtin_files(sources: str) -> list[tuple[str, Path]]:
    """(name, path) of the built-in corpus: the standard library's sources, then with
    ``stdlib+packages`` those of the running Python's installed packages (purelib, platlib), each
    named by its path under its root (``packages/<root's index>/...``), in a fixed order."""
    root, paths = _stdlib_files()
    named = [(p.relative_to(root).as_posix(), p) for p in paths]
    if sources == "stdlib+packages":
        roots = list(dict.fromkeys(Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")))
        for i, pkg in enumerate(r for r in roots if r.is_dir()):
            found = sorted((p for p in pkg.rglob("*.py") if p.is_file()), key=lambda p: p.relative_to(pkg).as_posix())
            named += [(f"packages/{i}/{p.relative_to(pkg).as_posix()}", p) for p in found]
    return named


def _user_files(spec: CorpusData) -> list[tuple[str, Path]]:
    out = []
    for i, raw in enumerate(spec.paths):
        path = Path(raw).expanduser()
        if path.is_file():
            out.append((path.as_posix(), path))
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in spec.suffixes)
            out += [(p.relative_to(path).as_posix(), p) for p in found]
        else:
            raise SpecError(f"data.paths[{i}]: no such file or folder: {raw!r}")
    return out


def split_documents(named: list[tuple[str, str]], fraction: float) -> tuple[list[str], list[str]]:
    """Deterministic split by document name: a document whose name hashes below ``fraction`` is
    held out, the same on every machine. A corpus of two or more documents always holds out at
    least one (the lowest hash) and keeps at least one for training."""
    keyed = sorted((int(hashlib.sha1(n.encode()).hexdigest()[:8], 16) / 16**8, n, t) for n, t in named)
    n_val = sum(1 for h, _, _ in keyed if h < fraction)
    if len(keyed) >= 2:
        n_val = min(max(n_val, 1), len(keyed) - 1)
    held = {n for _, n, _ in keyed[:n_val]}
    return [t for n, t in named if n not in held], [t for n, t in named if n in held]


def load_corpus(spec: CorpusData) -> DocumentData:
    if spec.kind == "builtin":
        named = _builtin_files(spec.sources)
    else:
        named = _user_files(spec)
    texts, total = [], 0
    for name, path in named:
        text = path.read_text(encoding="utf-8", errors="replace")
        if not text:
            continue
        texts.append((name, text))
        total += len(text)
        if spec.max_bytes is not None and total >= spec.max_bytes:
            break
    if not texts:
        raise SpecError(f"data: the corpus is empty (no non-empty files with suffixes {spec.suffixes} in {spec.paths or 'the standard library'})")
    data = tokenized(texts, spec)
    if spec.kind == "builtin":  # which files: the running Python's, so it differs between machines
        data.info["corpus"] = {"sources": spec.sources, "python": platform.python_version(), "documents": len(texts),
                               "characters": total, "sha256": corpus_digest(texts)}
    return data


def tokenized(texts: list[tuple[str, str]], spec) -> DocumentData:
    """Named texts split by name (``split_documents``, ``spec.val_fraction``) and tokenized by
    ``spec.tokenizer`` (byte, a BPE trained on the training split, or a tokenizer file)."""
    train_texts, val_texts = split_documents(texts, spec.val_fraction)
    if spec.tokenizer == "byte":
        tokenizer = ByteTokenizer()
    elif spec.tokenizer == "bpe":
        tokenizer = BPETokenizer(train_texts, spec.bpe_vocab_size)
    else:
        tokenizer = FileTokenizer(spec.tokenizer.path, spec.tokenizer.sha256)
    encode = tokenizer.encode
    data = DocumentData([encode(t) for t in train_texts], [encode(t) for t in val_texts], spec.context,
                        tokenizer.vocab_size, tokenizer, source="data")
    if hasattr(tokenizer, "identity"):  # a tokenizer file: its identity goes into the result
        data.info = {"tokenizer": tokenizer.identity()}
    return data


def corpus_digest(texts: list[tuple[str, str]]) -> str:
    """The first 16 hex digits of the SHA-256 of the corpus's names and texts, in order: two
    machines with the same digest trained on the same documents."""
    h = hashlib.sha256()
    for name, text in texts:
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()[:16]


def _read_tokens(raw: str, field: str, spec: TokenData) -> np.ndarray:
    path = Path(raw).expanduser()
    if not path.is_file():
        raise SpecError(f"data.{field}: no such file: {raw!r}")
    if path.suffix == ".npy":
        return np.load(path, mmap_mode="r")
    return np.memmap(path, dtype=spec.dtype, mode="r")


def _split_docs(tokens: np.ndarray, eot: int | None) -> list[np.ndarray]:
    if eot is None:
        return [tokens] if len(tokens) else []
    cuts = np.flatnonzero(np.asarray(tokens) == eot)
    return [d for d in np.split(tokens, cuts) if len(d)]


def load_tokens(spec: TokenData, vocab_size: int) -> DocumentData:
    docs = {}
    for field in ("train", "val"):
        tokens = _read_tokens(getattr(spec, field), field, spec)
        if len(tokens) and int(tokens.max()) >= vocab_size:
            bad = int(np.argmax(np.asarray(tokens) >= vocab_size))
            raise SpecError(
                f"data.{field}: token id {int(tokens[bad])} at index {bad} is outside the vocabulary "
                f"(model.vocab_size={vocab_size}); raise model.vocab_size or check data.dtype"
            )
        docs[field] = [d.astype(np.int64) for d in _split_docs(tokens, spec.eot_token)]
    return DocumentData(docs["train"], docs["val"], spec.context, vocab_size, None, source="data.train")

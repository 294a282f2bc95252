"""A Hugging Face ``tokenizer.json`` loaded for a trial, checked against the identity its spec
resolved (foxwb.workbench.spec.tokenizer_file)."""
from __future__ import annotations

import hashlib

import numpy as np

from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.tokenizer_file import parse_tokenizer, tokenizer_file, vocab_size_of


class FileTokenizer:
    """A tokenizer.json loaded for a trial; ``sha256`` (from the spec) must match the file's bytes.
    Encodes without special tokens: documents are kept apart, not joined by a separator."""

    def __init__(self, raw: str, sha256: str | None = None, field: str = "data.tokenizer"):
        path = tokenizer_file(raw, field)
        data = path.read_bytes()
        found = hashlib.sha256(data).hexdigest()
        if sha256 is not None and found != sha256:
            raise SpecError(f"{field}.sha256: the spec pins {sha256[:12]}..., but {path} now hashes to {found[:12]}...: "
                            "the tokenizer changed since the spec was written; remove sha256 to take the new file "
                            "(a new trial identity)")
        self.path, self.sha256 = path, found
        self._tok = parse_tokenizer(data.decode("utf-8", "replace"), path, field)
        self.vocab_size = vocab_size_of(self._tok)

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self._tok.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Many documents at once (the tokenizers package spreads them over the CPU cores)."""
        found = self._tok.encode_batch(texts, add_special_tokens=False)
        return [np.asarray(e.ids, dtype=np.int64) for e in found]

    def decode(self, ids) -> str:
        return self._tok.decode([int(i) for i in ids])

    def identity(self) -> dict:
        return {"kind": "hf", "path": str(self.path), "sha256": self.sha256, "vocab_size": self.vocab_size}

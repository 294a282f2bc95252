"""A Hugging Face ``tokenizer.json`` loaded for a trial, checked against the identity its spec
resolved (foxwb.workbench.spec.tokenizer_file); the bytes of text each token id stands for, for
bits per byte (docs/trials-and-data.md, "Bits per byte")."""
from __future__ import annotations

import hashlib
import json
import re

import numpy as np
from tokenizers import Tokenizer, pre_tokenizers

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

    def byte_lengths(self, size: int) -> tuple[np.ndarray | None, str | None]:
        return byte_lengths(self._tok, size)

    def identity(self) -> dict:
        return {"kind": "hf", "path": str(self.path), "sha256": self.sha256, "vocab_size": self.vocab_size}


# A SentencePiece model's stand-in for one raw byte (byte_fallback): "<0xE2>".
BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")
# The check decodes the first tokens of a few held-out documents: enough to meet most kinds of piece, cheap.
CHECK_TOKENS, CHECK_DOCUMENTS = 4096, 8
UNKNOWN_TEXT = "a token stands for text the tokenizer does not know (the unknown token, or an id it does not have)"
# The parts of a tokenizer.json that give its text back whole (byte-level BPE as GPT-2's and Llama
# 3's, SentencePiece BPE with byte fallback as Llama 2's): with any other part (lower-casing, a
# WordPiece decoder, whitespace dropped between words) the text's bytes are not the tokens'.
WHOLE = {"normalizer": ("normalizers", {"NFC", "Prepend", "Replace"}),
         "pre_tokenizer": ("pretokenizers", {"ByteLevel", "Metaspace", "Split", "Digits"}),
         "decoder": ("decoders", {"ByteLevel", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"})}


def byte_table(tokenizer, size: int, docs) -> tuple[np.ndarray | None, str | None]:
    """(UTF-8 bytes each token id below ``size`` stands for, None), checked on the documents
    ``docs`` (token arrays); or (None, why bits per byte cannot be known)."""
    if tokenizer is None:
        return None, "no tokenizer: the text the token ids stand for is unknown"
    table, why = tokenizer.byte_lengths(size)
    why = why or check_byte_lengths(table, tokenizer.decode, docs)
    return (None, why) if why else (table, None)


def byte_lengths(tok: Tokenizer, size: int) -> tuple[np.ndarray | None, str | None]:
    """(UTF-8 bytes of text each token id stands for, ``(size,)`` int64, None), from its piece as
    the decoder reads it: a byte-level piece one byte a character; a SentencePiece piece with its
    word marker as a space, a byte-fallback piece one byte; a special token (document separator,
    BOS, EOS) 0, as it stands for no text. -1 where the text is unknown: the unknown token (the text
    it replaced is lost), an id the tokenizer does not have. (None, why) for a tokenizer that does
    not give its text back whole. ``check_byte_lengths`` tests that the decoder agrees."""
    config = json.loads(tok.to_str())
    parts = {key: _parts(config.get(key), inner) for key, (inner, _) in WHOLE.items()}
    odd = [f"{key} {p.get('type')}" for key, (_, allowed) in WHOLE.items() for p in parts[key]
           if p.get("type") not in allowed or p.get("behavior") == "Removed"]
    odd += [] if parts["decoder"] else ["no decoder (its decode joins tokens with spaces)"]
    if odd:
        return None, f"the tokenizer does not give its text back whole: {', '.join(odd)}"
    byte_level = any(p.get("type") == "ByteLevel" for p in parts["decoder"])
    model = config.get("model") or {}
    replaced = _replacements(parts["decoder"])
    alphabet = set(pre_tokenizers.ByteLevel.alphabet())
    added = tok.get_added_tokens_decoder()
    out = np.full(size, -1, dtype=np.int64)
    for piece, i in tok.get_vocab(with_added_tokens=True).items():
        if i >= size or piece == model.get("unk_token"):
            continue
        if i in added:  # an added token holds its text as it is, not as a model piece
            out[i] = 0 if added[i].special else len(added[i].content.encode())
        elif byte_level and set(piece) <= alphabet:
            out[i] = len(piece)
        elif model.get("byte_fallback") and BYTE_PIECE.fullmatch(piece):
            out[i] = 1
        else:
            for old, new in replaced:
                piece = piece.replace(old, new)
            out[i] = len(piece.encode())
    return out, None


def _parts(node: dict | None, inner: str) -> list[dict]:
    """A normalizer, pre-tokenizer or decoder as its list of steps (a Sequence's, or itself)."""
    if not node:
        return []
    return [p for q in node.get(inner) or [] for p in _parts(q, inner)] if node.get("type") == "Sequence" else [node]


def _replacements(parts: list[dict]) -> list[tuple[str, str]]:
    """(text in a piece, the text it decodes to) of the decoder's replacing steps: SentencePiece's word marker."""
    out = []
    for p in parts:
        if p.get("type") == "Replace" and "String" in (p.get("pattern") or {}):
            out.append((p["pattern"]["String"], p["content"]))
        elif p.get("type") == "Metaspace":
            out.append((p.get("replacement", "\u2581"), " "))
    return out


def check_byte_lengths(table: np.ndarray, decode, docs) -> str | None:
    """None where ``table`` gives, on up to CHECK_DOCUMENTS of ``docs``, the UTF-8 bytes that
    ``decode`` makes of every token after a document's first (the tokens a loss scores; the first
    may carry a space the decoder strips); else why not. A document that decodes to a replacement
    character (bytes that are no UTF-8) is passed over: decode's count is not its bytes'."""
    checked = 0
    for i in range(min(len(docs), 4 * CHECK_DOCUMENTS)):  # a bounded look, whatever passes over
        ids = np.asarray(docs[i][:CHECK_TOKENS], dtype=np.int64)
        if len(docs[i]) > CHECK_TOKENS:
            ids = _whole_characters(ids, decode)
        if len(ids) < 2:
            continue
        if int(ids.max()) >= len(table) or (table[ids[1:]] < 0).any():
            return UNKNOWN_TEXT
        text, head = decode(ids), decode(ids[:1])
        if "\ufffd" in text or "\ufffd" in head:
            continue
        counted, want = int(table[ids[1:]].sum()), len(text.encode()) - len(head.encode())
        if counted != want:
            return (f"the tokenizer's pieces do not add up to the text it decodes ({counted} bytes against {want} "
                    "in a held-out document): its decoder joins them otherwise (WordPiece, say)")
        checked += 1
        if checked == CHECK_DOCUMENTS:
            break
    return None if checked else "no held-out document decodes to plain UTF-8 to check the bytes per token against"


def _whole_characters(ids: np.ndarray, decode) -> np.ndarray:
    """``ids`` less the last tokens (3 at most) of a UTF-8 character that a cut at CHECK_TOKENS split."""
    for _ in range(3):
        if len(ids) < 2 or not decode(ids).endswith("\ufffd"):
            break
        ids = ids[:-1]
    return ids

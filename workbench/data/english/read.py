"""A trial's English set: ``SET.jsonl.xz`` as ``wb corpus SET`` wrote it, checked against the
set's pinned digest before a token of it is used, split and tokenized as a ``text`` corpus is."""
from __future__ import annotations

import hashlib
import json
import lzma
from pathlib import Path

from foxwb.workbench.data.corpus import DocumentData, tokenized
from foxwb.workbench.data.english.sources import SETS
from foxwb.workbench.spec.data import EnglishData
from foxwb.workbench.spec.errors import SpecError


def set_file(spec: EnglishData) -> Path:
    """Where the set's built file lies: ``<data.path>/<set>.jsonl.xz``."""
    return Path(spec.path).expanduser() / f"{spec.set}.jsonl.xz"


def read_documents(spec: EnglishData) -> tuple[list[tuple[str, str]], str]:
    """The set's (id, text) documents in their built order, and the JSONL's sha256; a missing,
    damaged or different file is refused with a sentence saying how to build the pinned one."""
    path = set_file(spec)
    if path.parent.exists() and not path.parent.is_dir():
        raise SpecError(f"data.path: {path.parent} is a file; give the folder `wb corpus {spec.set}` wrote "
                        f"{spec.set}.jsonl.xz into (its --dir, default wb-corpora)")
    build = f"build it with `wb corpus {spec.set} --dir {path.parent}` (fetches the pinned packages once)"
    if not path.is_file():
        raise SpecError(f"data.path: no {path.name} in {path.parent}: {build}")
    try:
        raw = lzma.decompress(path.read_bytes())
    except lzma.LZMAError as e:
        raise SpecError(f"data.path: {path} is not a readable xz file ({e}): {build}") from None
    digest = hashlib.sha256(raw).hexdigest()
    pinned = SETS[spec.set].sha256
    if digest != pinned:
        raise SpecError(f"data.path: {path} is not the pinned '{spec.set}' set (its JSONL hashes to {digest[:16]}..., "
                        f"the pinned build to {pinned[:16]}...): {build}")
    docs = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    return [(d["id"], d["text"]) for d in docs], digest


def load_english(spec: EnglishData) -> DocumentData:
    """The trial's data; its result states the set, the digest checked and the pinned inputs."""
    texts, digest = read_documents(spec)
    data = tokenized(texts, spec)
    data.info.setdefault("tokenizer", {"kind": spec.tokenizer} if spec.tokenizer == "byte"
                         else {"kind": "bpe", "vocab_size": spec.bpe_vocab_size, "trained_on": "the training documents"})
    data.info["data_split"] = {"method": "documents held out by a hash of their id", "val_fraction": spec.val_fraction,
                               "train_documents": len(data.train_docs), "val_documents": len(data.val_docs),
                               "train_tokens": int(sum(len(d) for d in data.train_docs)),
                               "val_tokens": int(sum(len(d) for d in data.val_docs))}
    data.info["corpus"] = {"set": spec.set, "sha256": digest, "documents": len(texts),
                           "text_bytes": sum(len(t.encode("utf-8")) for _, t in texts),
                           "inputs": SETS[spec.set].provenance()}
    return data

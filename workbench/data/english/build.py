"""Build an English corpus set: fetch its pinned inputs, extract its documents, check and write it.

``build_set`` extracts the set's JSONL (one document a line, ``{"id", "source", "text"}``, sources
in the set's order, documents in extraction order) and checks its sha256 against the set's pinned
one before a byte is written: a JSONL that differs writes nothing. Then it writes
``<set>.jsonl.xz`` (xz preset 9, CRC64) and the manifest ``<set>.json`` beside it, each whole or not
at all (``write_atomically``), the manifest last.
"""
from __future__ import annotations

import hashlib
import json
import lzma
import platform
import time
from collections.abc import Callable
from pathlib import Path

from foxwb.workbench.data.atomic import WriteError, write_atomically
from foxwb.workbench.data.english import docs, literature
from foxwb.workbench.data.english.fetch import fetch, sha256_of
from foxwb.workbench.data.english.sources import CorpusSet, corpus_set

EXTRACTORS = {**literature.EXTRACTORS, **docs.EXTRACTORS}


class CorpusDigestError(RuntimeError):
    """A built set whose JSONL differs from the pinned one."""


def _silent(line: str) -> None:
    pass


def build_set(name: str, out_dir: Path, cache_dir: Path, progress: Callable[[str], None] = _silent) -> Path:
    """Build set ``name`` into ``out_dir`` from the inputs in ``cache_dir`` (downloaded there when
    missing); returns the path of ``<name>.jsonl.xz``, its manifest ``<name>.json`` beside it.
    ``progress`` gets a line per input fetched and per source extracted (documents, text bytes,
    seconds). Raises ``CorpusDigestError`` and writes nothing if the JSONL's sha256 is not the
    set's pinned one; ``WriteError`` (naming the file) if a file cannot be written, leaving no
    file of this build (no temporary, no set without its manifest)."""
    corpus = corpus_set(name)
    unknown = [s.name for s in corpus.sources if s.name not in EXTRACTORS]
    if unknown:
        raise ValueError(f"set {name!r}: no extractor for source(s) {', '.join(unknown)}: "
                         f"expected one of {', '.join(EXTRACTORS)}")
    out_dir, cache_dir = Path(out_dir), Path(cache_dir)
    paths = {}
    for item in corpus.inputs:
        paths[item] = fetch(item, cache_dir, progress=progress)
    jsonl, sources = _extract(corpus, paths, progress)
    jsonl_sha256 = hashlib.sha256(jsonl).hexdigest()
    if jsonl_sha256 != corpus.sha256:
        raise CorpusDigestError(
            f"set {name!r}: the built JSONL's sha256 is {jsonl_sha256}, expected the pinned "
            f"{corpus.sha256}: a different Python version (its HTML parser, regular "
            f"expressions or JSON) or a change in an extractor or input may cause it; nothing was written")
    out_dir.mkdir(parents=True, exist_ok=True)
    xz_path, manifest_path = out_dir / f"{name}.jsonl.xz", out_dir / f"{name}.json"
    # an earlier build's manifest must never stand beside this build's file
    manifest_path.unlink(missing_ok=True)
    write_atomically(xz_path, lambda tmp: _write_xz(tmp, jsonl))
    manifest = {
        "set": name, "file": xz_path.name,
        "jsonl_sha256": jsonl_sha256, "jsonl_bytes": len(jsonl),
        "xz_sha256": sha256_of(xz_path), "xz_bytes": xz_path.stat().st_size,
        "documents": sum(s["documents"] for s in sources),
        "text_bytes": sum(s["text_bytes"] for s in sources),
        "python": platform.python_version(),
        "sources": sources,
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    try:
        write_atomically(manifest_path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except WriteError:
        # A set without its manifest is half a build: none of it stays, and `wb corpus` builds it again.
        xz_path.unlink(missing_ok=True)
        raise
    return xz_path


def _write_xz(dest: Path, jsonl: bytes) -> None:
    with lzma.open(dest, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9) as out:
        out.write(jsonl)


def _extract(corpus: CorpusSet, paths: dict, progress: Callable[[str], None]) -> tuple[bytes, list[dict]]:
    """The set's JSONL (UTF-8 bytes; an English set is tens of MB at most) and a manifest entry per
    source."""
    lines, sources = [], []
    for source in corpus.sources:
        start = time.perf_counter()
        documents = text_bytes = 0
        for doc in EXTRACTORS[source.name](paths[source.input]):
            lines.append((json.dumps({"id": doc["id"], "source": doc["source"], "text": doc["text"]},
                                     ensure_ascii=False) + "\n").encode())
            documents += 1
            text_bytes += len(doc["text"].encode())
        progress(f"{source.name}: {documents:,} documents, {text_bytes:,} bytes "
                 f"({time.perf_counter() - start:.1f} s)")
        item = source.input
        sources.append({"source": source.name, "input": item.filename, "version": item.version,
                        "sha256": item.sha256, "licence": item.licence, "documents": documents,
                        "text_bytes": text_bytes})
    return b"".join(lines), sources

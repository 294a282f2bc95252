"""Build an English corpus set: fetch its pinned inputs, extract its documents, write and check it.

``build_set`` writes ``<set>.jsonl.xz`` (one document a line, ``{"id", "source", "text"}``, sources
in the set's order, documents in extraction order; xz preset 9, CRC64) and the manifest
``<set>.json`` beside it, each through a temporary file renamed into place, the manifest last. The
JSONL's sha256 must be the set's pinned one, or nothing is written.
"""
from __future__ import annotations

import hashlib
import json
import lzma
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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
    set's pinned one."""
    corpus = corpus_set(name)
    unknown = [s.name for s in corpus.sources if s.name not in EXTRACTORS]
    if unknown:
        raise ValueError(f"set {name!r}: no extractor for source(s) {', '.join(unknown)}: "
                         f"expected one of {', '.join(EXTRACTORS)}")
    out_dir, cache_dir = Path(out_dir), Path(cache_dir)
    paths = {}
    for item in corpus.inputs:
        paths[item] = fetch(item, cache_dir, progress=progress)
    out_dir.mkdir(parents=True, exist_ok=True)
    xz_path = out_dir / f"{name}.jsonl.xz"
    fd, tmp = tempfile.mkstemp(prefix=f".{xz_path.name}.", suffix=".part", dir=out_dir)
    os.close(fd)
    try:
        jsonl_sha256, jsonl_bytes, sources = _write_jsonl(corpus, paths, Path(tmp), progress)
        if jsonl_sha256 != corpus.sha256:
            raise CorpusDigestError(
                f"set {name!r}: the built JSONL's sha256 is {jsonl_sha256}, expected the pinned "
                f"{corpus.sha256}: a different Python version (its HTML parser, regular "
                f"expressions or JSON) or a change in an extractor or input may cause it; nothing was written")
        manifest = {
            "set": name, "file": xz_path.name,
            "jsonl_sha256": jsonl_sha256, "jsonl_bytes": jsonl_bytes,
            "xz_sha256": sha256_of(Path(tmp)), "xz_bytes": os.path.getsize(tmp),
            "documents": sum(s["documents"] for s in sources),
            "text_bytes": sum(s["text_bytes"] for s in sources),
            "python": platform.python_version(),
            "sources": sources,
        }
        os.chmod(tmp, 0o644)  # mkstemp's files are private: the corpus is not
        # an earlier build's manifest must never stand beside this build's file
        (out_dir / f"{name}.json").unlink(missing_ok=True)
        os.replace(tmp, xz_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _write_json(out_dir / f"{name}.json", manifest)
    return xz_path


def _write_jsonl(corpus: CorpusSet, paths: dict, dest: Path,
                 progress: Callable[[str], None]) -> tuple[str, int, list[dict]]:
    """Extract the set's sources into ``dest`` (xz); the JSONL's sha256 and bytes, and a manifest
    entry per source."""
    digest, total, sources = hashlib.sha256(), 0, []
    with lzma.open(dest, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9) as out:
        for source in corpus.sources:
            start = time.perf_counter()
            documents = text_bytes = 0
            for doc in EXTRACTORS[source.name](paths[source.input]):
                line = (json.dumps({"id": doc["id"], "source": doc["source"], "text": doc["text"]},
                                   ensure_ascii=False) + "\n").encode()
                digest.update(line)
                out.write(line)
                total += len(line)
                documents += 1
                text_bytes += len(doc["text"].encode())
            progress(f"{source.name}: {documents:,} documents, {text_bytes:,} bytes "
                     f"({time.perf_counter() - start:.1f} s)")
            item = source.input
            sources.append({"source": source.name, "input": item.filename, "version": item.version,
                            "sha256": item.sha256, "licence": item.licence, "documents": documents,
                            "text_bytes": text_bytes})
    return digest.hexdigest(), total, sources


def _write_json(path: Path, data: dict) -> None:
    """``data`` as indented JSON at ``path``, through a temporary file renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

"""nanoGPT / llm.c token shards: a header of 256 int32 (magic, version, token count, then zeros),
then the tokens, as their FineWeb scripts write them. Read memory-mapped: a shard's pages are
loaded when a batch touches them, so shards larger than memory train as well."""
from __future__ import annotations

import glob
from pathlib import Path

import numpy as np

from foxwb.workbench.spec.errors import SpecError

HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
# magic -> (version, token dtype, the scripts' document delimiter, which each document starts with)
FORMATS = {20240520: (1, np.uint16, 50256), 20240801: (7, np.uint32, 128000)}
SCAN_TOKENS = 1 << 24  # tokens per chunk when scanning a shard for delimiters (bounds the memory)


def write_shard(path: Path, tokens, magic: int = 20240520) -> None:
    """Write ``tokens`` as a shard of the format ``magic`` (what the FineWeb scripts write)."""
    version, dtype, _ = FORMATS[magic]
    header = np.zeros(HEADER_INTS, dtype=np.int32)
    header[:3] = magic, version, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=dtype).tobytes())


def _is_glob(raw: str) -> bool:
    return any(c in raw for c in "*?[")


def find_files(patterns: list[str], field: str, suffixes: tuple[str, ...]) -> list[Path]:
    """Files named by ``patterns``: a file, a folder (its files with ``suffixes``, recursively, in
    name order) or a glob; each pattern must name at least one, and a file is listed once."""
    out: list[Path] = []
    for i, raw in enumerate(patterns):
        path = Path(raw).expanduser()
        if _is_glob(raw):
            found = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(suffixes))
        else:
            found = [path] if path.is_file() else []
        if not found:
            what = "no file matches" if _is_glob(raw) else "no such file or folder" if not path.exists() \
                else f"no {'/'.join(suffixes)} file in"
            raise SpecError(f"{field}[{i}]: {what} {raw!r}")
        out += [p for p in found if p not in out]
    return out


def open_shard(path: Path, field: str) -> tuple[np.ndarray, int]:
    """The shard's tokens (memory-mapped) and its format's document delimiter."""
    size = path.stat().st_size
    if size < HEADER_BYTES:
        raise SpecError(f"{field}: {path} is {size} bytes, shorter than a shard's header of {HEADER_BYTES} bytes")
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    magic, version, count = (int(v) for v in header[:3])
    if magic not in FORMATS:
        known = ", ".join(f"{m} (version {v}, {np.dtype(d).name})" for m, (v, d, _) in FORMATS.items())
        raise SpecError(f"{field}: {path} has the magic number {magic}, not a token shard's; known: {known} "
                        "(raw token arrays without a header are data.kind: tokens)")
    want, dtype, eot = FORMATS[magic]
    if version != want:
        raise SpecError(f"{field}: {path} has version {version}; magic {magic} goes with version {want}")
    itemsize = np.dtype(dtype).itemsize
    held = (size - HEADER_BYTES) // itemsize
    if held != count or (size - HEADER_BYTES) % itemsize:
        raise SpecError(f"{field}: {path} declares {count} tokens in its header but holds {held} "
                        f"({size - HEADER_BYTES} bytes of {np.dtype(dtype).name}): a truncated or mixed-up file")
    if count == 0:
        return np.zeros(0, dtype=dtype), eot
    return np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r", offset=HEADER_BYTES, shape=(count,)), eot


def scan(tokens: np.ndarray, eot: int | None) -> tuple[np.ndarray, int]:
    """Document starts (int64: 0, each ``eot`` after the first token, and the end) and the largest id,
    read in chunks of SCAN_TOKENS so a shard is never copied whole."""
    cuts, top = [np.zeros(1, dtype=np.int64)], -1
    for start in range(0, len(tokens), SCAN_TOKENS):
        chunk = np.asarray(tokens[start : start + SCAN_TOKENS])
        top = max(top, int(chunk.max()))
        if eot is not None:
            found = np.flatnonzero(chunk == eot) + start
            cuts.append(found[found > 0].astype(np.int64))
    cuts.append(np.array([len(tokens)], dtype=np.int64))
    return np.concatenate(cuts), top

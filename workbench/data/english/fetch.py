"""Download the pinned input files into a cache folder, each checked against its sha256.

A file is downloaded into a temporary file beside its place and renamed into place only once its
sha256 matches the pin, so the cache never holds a half-written or unchecked file. A cached file
that already matches is not downloaded again.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

from foxwb.workbench.data.english.sources import InputFile

DEBIAN_MIRROR = "http://deb.debian.org/debian"
PYPI = "https://pypi.org/pypi"
CHUNK = 1 << 20


class FetchError(RuntimeError):
    """A file that could not be downloaded, or whose sha256 differs from its pin."""


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


REPORT_EVERY = 5.0  # seconds between a download's progress lines


def download(url: str, dest: Path, sha256: str, *, timeout: float = 60.0, size: int | None = None,
             progress: Callable[[str], None] | None = None) -> Path:
    """Download ``url`` to ``dest`` if its sha256 is ``sha256``; else raise ``FetchError`` (naming
    the file, the expected and the received digest) and leave ``dest`` as it was. ``progress``
    gets a line every REPORT_EVERY seconds while it downloads (MB so far, of ``size`` if known)."""
    dest = Path(dest)
    last = time.monotonic()
    done = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            while chunk := response.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
                done += len(chunk)
                if progress is not None and time.monotonic() - last >= REPORT_EVERY:
                    last = time.monotonic()
                    progress(f"{dest.name}: {done / 1e6:.1f}" + (f" of {size / 1e6:.1f}" if size else "") + " MB downloaded")
        if digest.hexdigest() != sha256:
            raise FetchError(f"{dest.name} from {url}: sha256 mismatch: expected {sha256}, got {digest.hexdigest()}")
        os.chmod(tmp, 0o644)  # mkstemp's files are private: a cached input is not
        os.replace(tmp, dest)
    except (OSError, http.client.HTTPException) as e:
        raise FetchError(f"{dest.name}: could not download {url}: {e}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def pypi_sdist_url(name: str, version: str, filename: str, *, timeout: float = 60.0) -> tuple[str, str]:
    """The download URL and PyPI's sha256 of the sdist ``filename`` of ``name`` ``version``, from
    PyPI's JSON API (``pip download`` would try to build these old sdists)."""
    index = f"{PYPI}/{urllib.parse.quote(name)}/json"
    try:
        with urllib.request.urlopen(index, timeout=timeout) as response:
            meta = json.load(response)
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise FetchError(f"{filename}: could not read PyPI's index {index}: {e}") from e
    for f in meta.get("releases", {}).get(version, []):
        if f.get("packagetype") == "sdist" and f.get("filename") == filename:
            return urllib.parse.urljoin(index, f["url"]), f["digests"]["sha256"]
    raise FetchError(f"{filename}: PyPI lists no sdist of that name for {name} {version} ({index})")


def fetch(item: InputFile, cache_dir: Path, *, mirror: str = DEBIAN_MIRROR, timeout: float = 60.0,
          progress: Callable[[str], None] | None = None) -> Path:
    """The path of ``item`` in ``cache_dir``, downloaded first unless a file there already has its
    sha256 (a cached file that differs is replaced). Debian files come from ``mirror`` by pool
    path, PyPI sdists through PyPI's JSON API. ``progress`` gets a line for a file found in the
    cache, lines while one downloads, and one when it is in."""
    dest = Path(cache_dir) / item.filename
    if dest.is_file() and sha256_of(dest) == item.sha256:
        if progress is not None:
            progress(f"{item.filename}: in the cache, sha256 checked")
        return dest
    start = time.monotonic()
    if item.kind == "deb":
        url = f"{mirror.rstrip('/')}/{item.path}"
    elif item.kind == "pypi":
        url, listed = pypi_sdist_url(item.name, item.version, item.filename, timeout=timeout)
        if listed != item.sha256:
            raise FetchError(f"{item.filename}: PyPI lists sha256 {listed}, expected the pinned {item.sha256}")
    else:
        raise FetchError(f"{item.filename}: unknown input kind {item.kind!r}: expected 'deb' or 'pypi'")
    if progress is not None:
        progress(f"{item.filename}: downloading {item.size / 1e6:.1f} MB from {url}")
    download(url, dest, item.sha256, timeout=timeout, size=item.size, progress=progress)
    if progress is not None:
        progress(f"{item.filename}: {item.size:,} bytes downloaded, sha256 checked ({time.monotonic() - start:.1f} s)")
    return dest

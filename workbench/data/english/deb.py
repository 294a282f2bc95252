"""Read the files of a Debian package (.deb) in Python, without dpkg-deb.

A .deb is an ``ar`` archive: ``debian-binary``, ``control.tar.*`` and ``data.tar.*``, the last
holding the installed files. The data tarball is read as a stream, so a package is decompressed
once, and only the files asked for are kept in memory.
"""
from __future__ import annotations

import io
import lzma
import tarfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

AR_MAGIC = b"!<arch>\n"
AR_HEADER = 60
# The data tarball's compressions that the standard library reads (tarfile's stream modes).
DATA_MEMBERS = {"data.tar": "r|", "data.tar.xz": "r|xz", "data.tar.gz": "r|gz", "data.tar.bz2": "r|bz2"}


class DebError(ValueError):
    """A file that is not a .deb this reader can read."""


def ar_members(path: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each member of the ``ar`` archive at ``path``, in order."""
    with open(path, "rb") as f:
        if f.read(len(AR_MAGIC)) != AR_MAGIC:
            raise DebError(f"{path}: not a .deb: expected an ar archive (starting {AR_MAGIC!r})")
        while header := f.read(AR_HEADER):
            if len(header) != AR_HEADER or header[58:60] != b"`\n":
                raise DebError(f"{path}: broken ar member header at byte {f.tell() - len(header)}")
            name = header[:16].decode("ascii", "replace").rstrip(" ").rstrip("/")
            try:
                size = int(header[48:58].decode("ascii").strip())
            except ValueError:
                raise DebError(f"{path}: ar member {name!r} has no valid size") from None
            data = f.read(size)
            if len(data) != size:
                raise DebError(f"{path}: ar member {name!r} is cut short: {len(data)} of {size} bytes")
            # members start at even offsets: an odd-sized one is followed by a padding byte
            f.read(size % 2)
            yield name, data


def data_tarball(path: Path) -> tuple[str, bytes]:
    """The name and bytes of the package's data tarball."""
    for name, data in ar_members(path):
        if name.startswith("data.tar"):
            if name not in DATA_MEMBERS:
                raise DebError(f"{path}: data member {name!r} is not supported: expected one of "
                               f"{', '.join(DATA_MEMBERS)} (Python's standard library reads no zstd)")
            return name, data
    raise DebError(f"{path}: not a .deb: no data.tar.* member")


def deb_files(path: Path, select: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of each regular file of the package whose path (``usr/share/...``, no
    leading ``./``) ``select`` accepts, in the tarball's order. Symbolic links are skipped (the
    ones in documentation packages lead into other packages); a hard link is read as its target,
    which must be selected too (a tarball read as a stream cannot go back for it)."""
    name, data = data_tarball(path)
    seen: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode=DATA_MEMBERS[name]) as tar:
            for member in tar:
                rel = _normal(member.name)
                if not select(rel):
                    continue
                if member.islnk():
                    target = _normal(member.linkname)
                    if target not in seen:
                        raise DebError(f"{path}: hard link {rel} leads to {target}, which was not selected")
                    yield rel, seen[target]
                elif member.isreg():
                    body = tar.extractfile(member).read()
                    seen[rel] = body
                    yield rel, body
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error) as e:
        raise DebError(f"{path}: cannot read its {name}: {e}") from e


def read_deb_files(path: Path, select: Callable[[str], bool]) -> dict[str, bytes]:
    """{path: bytes} of the package's regular files that ``select`` accepts (see ``deb_files``)."""
    return dict(deb_files(path, select))


def _normal(name: str) -> str:
    """A tarball path without its leading ``./`` or ``/``."""
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


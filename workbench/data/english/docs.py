"""Technical documentation as prose: the Python 3.11, PostgreSQL 15 and Django docs, the Rust books.

HTML pages (read from the .deb, never unpacked to disk) go through ``text.html_to_text``: page
chrome, code blocks and tables dropped; Python's pages are cut at ``<h1>``/``<h2>`` and the pieces
merged back into documents of at least 8 KiB; PostgreSQL's and Rust's pages (one per section) are
merged, in order, into documents of at least 8 KiB. Django's reST goes through
``rst.rst_to_text``, a document per file. Documents under 256 bytes are dropped.
"""
from __future__ import annotations

import re
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from foxwb.workbench.data.english.deb import read_deb_files
from foxwb.workbench.data.english.rst import rst_to_text
from foxwb.workbench.data.english.text import html_to_text, split_merge

# Elements of page chrome (navigation, sidebars, tables of contents) and of code, by class.
DROP = ["navheader", "navfooter", "toc", "list-of-tables", "list-of-figures", "list-of-examples",
        "list-of-procedures", "sphinxsidebar", "related", "footer", "headerlink", "breadcrumbs",
        "wy-nav-side", "rst-versions", "navigation", "toctree-wrapper", "contents", "highlight",
        "synopsis", "cmdsynopsis", "funcsynopsis", "programlisting", "screen", "literallayout",
        "informaltable", "footnote", "footnotes", "indexterm", "index",
        "sphinxsidebarwrapper", "clearer", "mobile-nav", "top-nav", "bottom-nav", "ac-nav",
        "refsynopsisdiv", "legalnotice", "copyright", "authorgroup", "revhistory", "line-block",
        "field-list", "option-list", "sig", "sig-object", "admonition-todo"]
DROP_TAGS = ["table", "nav"]
MIN_DOCUMENT = 8192
MIN_KEPT = 256

PYDOC_ROOT = "usr/share/doc/python3.11/html"
PYDOC_SKIP = re.compile(r"/(genindex.*|py-modindex|search|contents|index|copyright|license|bugs|about|download"
                        r"|glossary)\.html$|/whatsnew/changelog\.html$|/_static/")
PGDOC_ROOT = "usr/share/doc/postgresql-doc-15/html"
PGDOC_SKIP = re.compile(r"/(bookindex|index|release-.*)\.html$")
RUST_ROOT = "usr/share/doc/rust-doc/html"
RUST_BOOKS = ["book", "reference", "nomicon", "rust-by-example", "rustc", "edition-guide", "embedded-book",
              "rustdoc", "cargo", "style-guide"]
RUST_SKIP = re.compile(r"/(print|toc|404|index)\.html$")
RUST_CHROME = ["sidebar", "menu-bar", "nav-wrapper", "nav-chapters", "mobile-nav-chapters"]
DJANGO_DOCS = re.compile(r"^django-6\.1\.3/docs/.*\.txt$")


def html_pages(path: str, root: str, recursive: bool) -> bool:
    """Whether ``path`` is an HTML page that ``glob(root + "/**/*.html", recursive=True)`` (or
    ``root + "/*.html"``) would find: no part of it below ``root`` hidden (a leading dot)."""
    if not path.startswith(root + "/"):
        return False
    parts = path[len(root) + 1:].split("/")
    if not recursive and len(parts) != 1:
        return False
    return parts[-1].endswith(".html") and not any(p.startswith(".") for p in parts)


def html_documents(pages: Iterable[tuple[str, bytes]], source: str, prefix: str, *, main_classes=None,
                   min_bytes: int = MIN_DOCUMENT, extra_drop: Iterable[str] = ()) -> Iterator[dict]:
    """Documents (``<prefix>/<page>#<piece>``) from (page path, HTML bytes): each page cut at
    ``<h1>``/``<h2>`` and its pieces merged to at least ``min_bytes``."""
    for rel, data in pages:
        text = html_to_text(data, drop_classes=DROP + list(extra_drop), drop_tags=DROP_TAGS,
                            split_tags=("h1", "h2"), main_classes=main_classes)
        for k, piece in enumerate(split_merge(text, min_bytes)):
            yield {"id": "%s/%s#%d" % (prefix, rel, k), "source": source, "text": piece}


def merge_small(docs: Iterable[dict], same: Callable[[dict, dict], bool] = lambda a, b: True) -> Iterator[dict]:
    """Each document appended to the one before it while that one is under 8 KiB (and ``same``
    says the two belong together)."""
    current = None
    for doc in docs:
        if current and len(current["text"].encode()) < MIN_DOCUMENT and same(current, doc):
            current["text"] += "\n" + doc["text"]
        else:
            if current:
                yield current
            current = doc
    if current:
        yield current


def at_least(docs: Iterable[dict], min_bytes: int = MIN_KEPT) -> Iterator[dict]:
    """The documents of at least ``min_bytes`` bytes of text (UTF-8)."""
    return (doc for doc in docs if len(doc["text"].encode()) >= min_bytes)


def _pages(deb: Path, root: str, recursive: bool, skip: re.Pattern,
           folders: Iterable[str] | None = None) -> list[tuple[str, bytes]]:
    """(path below ``root``, bytes) of the package's HTML pages under ``root`` (in ``folders`` of
    it, if given), in path order; those whose ``/``-led path ``skip`` finds are left out."""
    tops = None if folders is None else set(folders)

    def wanted(path: str) -> bool:
        rel = path[len(root) + 1:]
        return (html_pages(path, root, recursive) and not skip.search("/" + rel)
                and (tops is None or rel.split("/", 1)[0] in tops))

    files = read_deb_files(deb, wanted)
    if not files:
        raise ValueError(f"{deb}: expected HTML pages under {root} in the package, found none")
    return sorted((path[len(root) + 1:], data) for path, data in files.items())


def pydoc(deb: Path) -> Iterator[dict]:
    """The Python 3.11 documentation (python3.11-doc), indexes and changelog left out."""
    pages = _pages(deb, PYDOC_ROOT, True, PYDOC_SKIP)
    yield from at_least(html_documents(pages, "python-docs", "python3.11-doc", main_classes={"body"}))


def pgdoc(deb: Path) -> Iterator[dict]:
    """The PostgreSQL 15 documentation (postgresql-doc-15): its pages, one per section, merged in
    order; indexes and release notes left out."""
    pages = _pages(deb, PGDOC_ROOT, False, PGDOC_SKIP)
    yield from at_least(merge_small(html_documents(pages, "postgresql-docs", "postgresql-doc-15", min_bytes=1)))


def rust(deb: Path) -> Iterator[dict]:
    """The mdBook books of rust-doc (not its generated API pages), book by book, each book's pages
    merged in order."""
    pages = _pages(deb, RUST_ROOT, True, RUST_SKIP, folders=RUST_BOOKS)
    ordered = [page for book in RUST_BOOKS for page in pages if page[0].split("/", 1)[0] == book]
    docs = html_documents(ordered, "rust-books", "rust-doc", main_classes={"content"}, min_bytes=1,
                          extra_drop=RUST_CHROME)
    yield from at_least(merge_small(docs, same=lambda a, b: _book(a) == _book(b)))


def django(sdist: Path) -> Iterator[dict]:
    """Django's documentation (the sdist's ``docs/``, reST), a document per file; release notes
    and files under 512 bytes of text left out."""
    with tarfile.open(sdist) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not DJANGO_DOCS.search(member.name):
                continue
            rel = member.name.split("/docs/", 1)[1]
            if rel.startswith(("releases/", "_ext")) or rel in ("index.txt", "contents.txt", "spelling_wordlist"):
                continue
            text = rst_to_text(tar.extractfile(member).read().decode("utf-8", "replace"))
            if len(text.encode()) >= 512:
                yield {"id": "django-docs/" + rel, "source": "django-docs", "text": text}


def _book(doc: dict) -> str:
    """The book a Rust document comes from (``rust-doc/<book>/...``)."""
    return doc["id"].split("/")[1]


EXTRACTORS = {"python-docs": pydoc, "postgresql-docs": pgdoc, "django-docs": django, "rust-books": rust}

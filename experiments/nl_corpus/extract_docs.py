#!/usr/bin/env python3
"""Technical-documentation prose from registry packages -> out/docs-<group>.jsonl

usage: extract_docs.py GROUP [GROUP...]   (groups: see SOURCES)

HTML goes through nlx.html_to_text (html.parser): page chrome (navigation, sidebars, tables of
contents), <pre> code blocks, <table>s, scripts and styles are dropped; pages are split at
<h1>/<h2> and the pieces merged back to >= 8 KiB documents.  reST goes through nlx.rst_to_text.
"""
import glob, gzip, json, os, re, subprocess, sys, tarfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nlx

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("NLC_OUT", os.path.join(HERE, "out"))
X = os.path.join(HERE, "x")
DROP = ["navheader", "navfooter", "toc", "list-of-tables", "list-of-figures", "list-of-examples",
        "list-of-procedures", "sphinxsidebar", "related", "footer", "headerlink", "breadcrumbs",
        "wy-nav-side", "rst-versions", "navigation", "toctree-wrapper", "contents", "highlight",
        "synopsis", "cmdsynopsis", "funcsynopsis", "programlisting", "screen", "literallayout",
        "informaltable", "footnote", "footnotes", "indexterm", "index",
        "sphinxsidebarwrapper", "clearer", "mobile-nav", "top-nav", "bottom-nav", "ac-nav",
        "refsynopsisdiv", "legalnotice", "copyright", "authorgroup", "revhistory", "line-block",
        "field-list", "option-list", "sig", "sig-object", "admonition-todo"]
DROP_TAGS = ["table", "nav"]
MIN_DOC = 8192


def deb(pattern):
    hits = sorted(glob.glob(os.path.join(HERE, "debs", pattern)))
    assert len(hits) == 1, (pattern, hits)
    name = os.path.basename(hits[0]).split("_")[0]
    return nlx.deb_extract(hits[0], os.path.join(X, name))


def html_docs(root, files, source, prefix, main_classes=None, min_doc=MIN_DOC, split=("h1", "h2"),
              drop_tags=DROP_TAGS, extra_drop=()):
    for path in files:
        data = nlx.read_maybe_gz(path)
        t = nlx.html_to_text(data, drop_classes=DROP + list(extra_drop), drop_tags=drop_tags,
                             split_tags=split, main_classes=main_classes)
        rel = os.path.relpath(path, root)
        for k, piece in enumerate(nlx.split_merge(t, min_doc)):
            yield {"id": "%s/%s#%d" % (prefix, rel, k), "source": source, "text": piece}


def merge_small(docs, same=lambda a, b: True):
    """Append each document to the one before it while that one is under MIN_DOC bytes."""
    cur = None
    for dd in docs:
        if cur and len(cur["text"].encode()) < MIN_DOC and same(cur, dd):
            cur["text"] += "\n" + dd["text"]
        else:
            if cur:
                yield cur
            cur = dd
    if cur:
        yield cur


def debian_books():
    """Debian's own manuals, all in bookworm main and not updated since the release."""
    d = deb("debian-reference-en_*.deb")
    files = sorted(glob.glob(d + "/usr/share/debian-reference/*.en.html"))
    files = [f for f in files if not f.endswith("index.en.html")]
    yield from html_docs(d, files, "debian-books", "debian-reference")
    d = deb("debian-policy_*.deb")
    files = sorted(glob.glob(d + "/usr/share/doc/debian-policy/policy.html/*.html"))
    files = [f for f in files if not re.search(r"/(index|genindex|search)\.html$", f)]
    yield from html_docs(d, files, "debian-books", "debian-policy", main_classes={"body", "document"})
    d = deb("developers-reference_*.deb")
    files = sorted(glob.glob(d + "/usr/share/developers-reference/*.html"))
    files = [f for f in files if not re.search(r"/(index|genindex|search)\.html$", f)]
    yield from html_docs(d, files, "debian-books", "developers-reference", main_classes={"body", "document"})
    d = deb("debian-faq_*.deb")
    files = sorted(glob.glob(d + "/usr/share/doc/debian/FAQ/*.en.html"))
    files = [f for f in files if not f.endswith("index.en.html")]
    yield from html_docs(d, files, "debian-books", "debian-faq")
    d = deb("maint-guide_*.deb")
    files = sorted(glob.glob(d + "/usr/share/doc/maint-guide/html/*.en.html"))
    files = [f for f in files if not f.endswith("index.en.html")]
    yield from html_docs(d, files, "debian-books", "maint-guide")
    d = deb("debian-history_*.deb")
    files = sorted(glob.glob(d + "/usr/share/doc/debian-history/docs/*.en.html"))
    files = [f for f in files if not f.endswith("index.en.html")]
    yield from html_docs(d, files, "debian-books", "debian-history")
    d = deb("gnu-standards_*.deb")
    files = sorted(glob.glob(d + "/usr/share/doc/gnu-standards/*.html*"))
    yield from html_docs(d, files, "debian-books", "gnu-standards", split=("h2",))


def handbook():
    d = deb("debian-handbook_*.deb")
    files = sorted(glob.glob(d + "/usr/share/doc/debian-handbook/html/en-US/*.html"))
    files = [f for f in files if not re.search(r"/(index|ix01|pr\d+)\.html$", f)]
    yield from html_docs(d, files, "debian-handbook", "debian-handbook")


def pydoc():
    d = deb("python3.11-doc_*.deb")
    root = d + "/usr/share/doc/python3.11/html"
    files = sorted(glob.glob(root + "/**/*.html", recursive=True))
    skip = r"/(genindex.*|py-modindex|search|contents|index|copyright|license|bugs|about|download|glossary)\.html$|/whatsnew/changelog\.html$|/_static/"
    files = [f for f in files if not re.search(skip, f)]
    yield from html_docs(root, files, "python-docs", "python3.11-doc", main_classes={"body"})


def pgdoc():
    d = deb("postgresql-doc-15_*.deb")
    root = d + "/usr/share/doc/postgresql-doc-15/html"
    files = sorted(glob.glob(root + "/*.html"))
    files = [f for f in files if not re.search(r"/(bookindex|index|release-.*)\.html$", f)]
    # PostgreSQL's HTML is one page per section: merge consecutive pages of a chapter
    yield from merge_small(html_docs(root, files, "postgresql-docs", "postgresql-doc-15", min_doc=1))


def gitdoc():
    d = deb("git-doc_*.deb")
    root = d + "/usr/share/doc/git-doc"
    files = sorted(glob.glob(root + "/*.html") + glob.glob(root + "/howto/*.html") + glob.glob(root + "/technical/*.html"))
    files = [f for f in files if not re.search(r"/(RelNotes|index|git-.*--helper)", f)]
    yield from html_docs(root, files, "git-docs", "git-doc", main_classes={"sect1", "paragraph", "content", "sectionbody"})


def kernel():
    d = deb("linux-doc-6.1_*.deb")
    root = glob.glob(d + "/usr/share/doc/linux-doc-6.1/html")[0]
    files = sorted(glob.glob(root + "/**/*.html", recursive=True))
    skip = r"/(translations|_static|_sources)/|/(genindex|search|index)\.html$"
    files = [f for f in files if not re.search(skip, f)]
    yield from html_docs(root, files, "kernel-docs", "linux-doc-6.1", main_classes={"body", "document"})


def gnome():
    d = deb("gnome-user-docs_*.deb")
    root = d + "/usr/share/help/C"
    files = sorted(glob.glob(root + "/**/*.page", recursive=True))
    # Mallard XML: strip tags with the HTML parser (unknown tags are inline); one document per guide
    by_guide = {}
    for f in files:
        g = os.path.relpath(f, root).split("/")[0]
        t = nlx.html_to_text(open(f, "rb").read(), drop_classes=[], drop_tags=["info", "code", "screen", "media", "links", "comment"])
        by_guide.setdefault(g, []).append(t)
    for g, ts in sorted(by_guide.items()):
        for k, piece in enumerate(nlx.split_merge("\x1e".join(ts), MIN_DOC)):
            yield {"id": "gnome-user-docs/%s#%d" % (g, k), "source": "gnome-user-docs", "text": piece}


def rust():
    """The mdBook books shipped in rust-doc (not the generated API pages)."""
    d = os.path.join(X, "rust-doc")
    books = ["book", "reference", "nomicon", "rust-by-example", "rustc", "edition-guide", "embedded-book",
             "rustdoc", "cargo", "style-guide"]
    if not os.path.isdir(d):
        os.makedirs(d)
        deb_path = glob.glob(os.path.join(HERE, "debs", "rust-doc_*.deb"))[0]
        pats = ["./usr/share/doc/rust-doc/html/%s/*" % b for b in books]
        subprocess.run("dpkg-deb --fsys-tarfile %s | tar -x -C %s --wildcards %s" % (
            deb_path, d, " ".join("'%s'" % p for p in pats)), shell=True, check=False)
    root = d + "/usr/share/doc/rust-doc/html"
    files = []
    for b in books:
        files += sorted(glob.glob(root + "/%s/**/*.html" % b, recursive=True))
    files = [f for f in files if not re.search(r"/(print|toc|404|index)\.html$", f) and os.path.isfile(f) and not os.path.islink(f)]
    docs = html_docs(root, files, "rust-books", "rust-doc", main_classes={"content"}, min_doc=1,
                     extra_drop=["sidebar", "menu-bar", "nav-wrapper", "nav-chapters", "mobile-nav-chapters"])
    yield from merge_small(docs, same=lambda a, b: a["id"].split("/")[1] == b["id"].split("/")[1])


def gimp():
    d = deb("gimp-help-en_*.deb")
    root = d + "/usr/share/gimp/2.0/help/en"
    files = sorted(f for f in glob.glob(root + "/**/*.html", recursive=True) if not os.path.islink(f))
    files = [f for f in files if not re.search(r"/(index|ix01|glossary|bibliography)\.html$", f)]
    # GIMP help is one page per section: merge consecutive pages up to 8 KiB
    yield from merge_small(html_docs(root, files, "gimp-help", "gimp-help-en", min_doc=1))


def django():
    t = tarfile.open(os.path.join(HERE, "pypi", "django-6.1.3.tar.gz"))
    for m in sorted(t.getmembers(), key=lambda m: m.name):
        if not re.search(r"^django-6\.1\.3/docs/.*\.txt$", m.name):
            continue
        rel = m.name.split("/docs/", 1)[1]
        if rel.startswith("releases/") or rel.startswith("_ext") or rel in ("index.txt", "contents.txt", "spelling_wordlist"):
            continue
        text = nlx.rst_to_text(t.extractfile(m).read().decode("utf-8", "replace"))
        if len(text.encode()) < 512:
            continue
        yield {"id": "django-docs/" + rel, "source": "django-docs", "text": text}


def main():
    os.makedirs(OUT, exist_ok=True)
    for g in sys.argv[1:]:
        n = b = 0
        with open(os.path.join(OUT, "docs-%s.jsonl" % g), "w", encoding="utf-8") as f:
            for dd in globals()[g]():
                if len(dd["text"].encode()) < 256:
                    continue
                f.write(json.dumps(dd, ensure_ascii=False) + "\n")
                n += 1
                b += len(dd["text"].encode())
        print(g, n, "documents", b, "bytes", file=sys.stderr)


if __name__ == "__main__":
    main()

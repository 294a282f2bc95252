"""``wb export TRIAL --hf DIR``: a finished trial as a folder transformers loads."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from foxwb.workbench.handoff.hf import export_hf
from foxwb.workbench.handoff.hf_import import MissingExtra


def command(args: argparse.Namespace) -> int:
    try:
        out = export_hf(Path(args.trial), Path(args.hf))
    except MissingExtra as e:  # the environment, not the request: exit 1, as a missing tool is
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {out}: load it with transformers.AutoModelForCausalLM.from_pretrained({str(out)!r}, "
          "trust_remote_code=True) where fox-workbench is installed")
    return 0

"""What every benchmark shares: where its JSON goes and the provenance it carries.

Each benchmark prints a table and writes one JSON file, by default
``benchmarks/results/<date>_<gpu>_<theme>.json`` (``--out`` elsewhere, e.g. under $OUT on the GPU
machine), holding the date, machine, versions, code and command beside its figures.
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from pathlib import Path

import torch

from foxwb.workbench.train.trial import versions

ROOT = Path(__file__).resolve().parents[1]

# The attention benchmark's (B, H, N, D) shapes, which benchmarks/tune.py also tunes the kernel for.
ATTENTION_SHAPES = [(8, 16, 2048, 64), (2, 16, 8192, 64), (1, 16, 16384, 64), (8, 8, 2048, 128), (1, 8, 16384, 128)]


def parse_shape(text: str) -> tuple[int, int, int, int]:
    """'B,H,N,D' -> (B, H, N, D)."""
    try:
        shape = tuple(int(x) for x in text.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 4 or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"--shapes: {text!r} is not B,H,N,D (four positive integers, e.g. 8,12,4096,64)")
    return shape


def machine() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def provenance(argv: list[str] | None = None) -> dict:
    """Date (UTC), machine, versions (python, torch, triton, the code's git commit and source
    fingerprint) and the command line."""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
            "versions": versions(), "command": " ".join(["python", *sys.argv[:1], *(argv if argv is not None else sys.argv[1:])])}


def default_out(theme: str) -> Path:
    """benchmarks/results/<date>_<machine>_<theme>.json, the machine named by its kind: the GPU's
    name, or ``cpu`` (the JSON's ``machine`` says more)."""
    kind = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    slug = re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")
    return ROOT / "benchmarks" / "results" / f"{time.strftime('%Y-%m-%d', time.gmtime())}_{slug}_{theme}.json"


def write(out: str | Path | None, theme: str, figures: dict, argv: list[str] | None = None) -> Path:
    """Write provenance + figures as JSON to ``out`` (default: default_out(theme)), say where; returns the path."""
    path = Path(out) if out else default_out(theme)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**provenance(argv), "theme": theme, **figures}, indent=1))
    print(f"wrote {path}")
    return path


def cuda_or_exit(name: str) -> None:
    """The kernel benchmarks time CUDA kernels: without a GPU they say so and exit 2."""
    if not torch.cuda.is_available():
        print(f"benchmarks/{name} needs a CUDA GPU", file=sys.stderr)
        raise SystemExit(2)

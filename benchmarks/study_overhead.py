"""Measure what the study machinery costs and what packing trials on a GPU buys.

    python benchmarks/study_overhead.py overhead studies/quickstart.yaml [--out FILE]
        Each trial of the study run directly (run_trial, no Ray, no MLflow) one after another, then
        the same study through `run_study` one trial at a time (Ray + tracking): the difference per
        trial is the machinery's cost.
    python benchmarks/study_overhead.py packing studies/packing.yaml [--out FILE]
        The study at its resources.gpu (e.g. 0.25: four trials share the GPU), then the same
        trials at 1 GPU each: the wall-time ratio.
Prints a table and writes JSON.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

import common
from workbench.errors import read_yaml, validate
from workbench.runner import run_study
from workbench.study import StudySpec, expand
from workbench.trial import run_trial


def timed_study(study: StudySpec, workdir: Path, **kw) -> float:
    start = time.perf_counter()
    run = run_study(study, workdir, **kw)
    seconds = time.perf_counter() - start
    failed = [o for o in run.outcomes.values() if o.status != "FINISHED"]
    if failed:
        raise SystemExit(f"{len(failed)} trial(s) failed: {failed[0].reason[-500:]}")
    return seconds


def overhead(study: StudySpec, scratch: Path) -> dict:
    trials = expand(study)
    direct = []
    for t in trials:
        torch.set_num_threads(max(1, int(study.resources.cpu)))
        start = time.perf_counter()
        run_trial(t.spec, scratch / "direct" / t.spec_hash)
        direct.append(time.perf_counter() - start)
    through = timed_study(study, scratch / "study", max_concurrent=1)
    n = len(trials)
    return {"trials": n, "direct_seconds": direct, "direct_total": sum(direct), "study_seconds": through,
            "overhead_per_trial": (through - sum(direct)) / n}


def packing(study: StudySpec, scratch: Path) -> dict:
    packed = timed_study(study, scratch / "packed")
    whole = study.model_copy(update={"resources": study.resources.model_copy(update={"gpu": 1.0})})
    unpacked = timed_study(whole, scratch / "unpacked")
    return {"trials": len(expand(study)), "gpu_per_trial": study.resources.gpu, "packed_seconds": packed,
            "one_gpu_each_seconds": unpacked, "speedup": unpacked / packed}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["overhead", "packing"])
    ap.add_argument("study")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<machine>_<what>.json)")
    args = ap.parse_args(argv)
    study = validate(StudySpec, read_yaml(args.study), args.study)
    with tempfile.TemporaryDirectory() as scratch:
        figures = (overhead if args.what == "overhead" else packing)(study, Path(scratch))
    for key, value in figures.items():
        if not isinstance(value, list):
            print(f"{key:<24} {value:.2f}" if isinstance(value, float) else f"{key:<24} {value}")
    common.write(args.out, args.what, {"study": args.study, **figures}, argv)


if __name__ == "__main__":
    main()

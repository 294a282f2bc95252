"""Measure what the study machinery costs and what packing trials on a GPU buys.

    python benchmarks/study_overhead.py overhead studies/quickstart.yaml [--out FILE]
        Each trial of the study run directly (run_trial, no Ray, no MLflow) one after another, then
        the same study through `run_study` one trial at a time (Ray + tracking), then the direct
        runs again: the difference per trial from the direct runs' mean is the machinery's cost. Where it goes: start-up (run_study's call to the first
        trial's start: Ray, the Tuner, the first actor), each trial's time in the study beyond its
        direct run (the actor's imports, the store's writes at start and end), the gaps between
        one trial's end and the next one's start (Tune's scheduling), and the teardown.
    python benchmarks/study_overhead.py packing studies/packing.yaml [--out FILE] [--check]
        The study at its resources.gpu (e.g. 0.25: four trials share the GPU), then the same
        trials at 1 GPU each: the wall-time ratio. Needs a GPU; --check validates and expands
        both studies and says what would run, on any machine.
Prints a table and writes JSON.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

import common
from foxwb.workbench.spec.errors import read_yaml, validate
from foxwb.workbench.run.runner import run_study
from foxwb.workbench.spec.study import StudySpec, expand
from foxwb.workbench.train.trial import run_trial


def timed_study(study: StudySpec, workdir: Path, **kw) -> tuple[float, float, float, list]:
    """(seconds, when it started, when it returned, outcomes in the order they started)."""
    start, began = time.perf_counter(), time.time()
    run = run_study(study, workdir, **kw)
    seconds, ended = time.perf_counter() - start, time.time()
    failed = [o for o in run.outcomes.values() if o.status != "FINISHED"]
    if failed:
        raise SystemExit(f"{len(failed)} trial(s) failed: {failed[0].reason[-500:]}")
    return seconds, began, ended, sorted(run.outcomes.values(), key=lambda o: o.started)


def direct_runs(study: StudySpec, trials: list, scratch: Path) -> dict[str, float]:
    """Seconds of each trial run directly (run_trial in this process, no Ray, no store)."""
    seconds = {}
    for t in trials:
        torch.set_num_threads(max(1, int(study.resources.cpu)))
        start = time.perf_counter()
        run_trial(t.spec, scratch / t.spec_hash)
        seconds[t.spec_hash] = time.perf_counter() - start
    return seconds


def overhead(study: StudySpec, scratch: Path) -> dict:
    trials = expand(study)
    # The direct runs go before and after the study, each trial's mean their time: on a shared
    # machine whose load drifts, the study is compared with runs from both sides of it.
    before = direct_runs(study, trials, scratch / "direct-before")
    through, began, ended, outcomes = timed_study(study, scratch / "study", max_concurrent=1)
    after = direct_runs(study, trials, scratch / "direct-after")
    direct = {h: (before[h] + after[h]) / 2 for h in before}
    n = len(trials)
    excess = [o.seconds - direct[o.trial.spec_hash] for o in outcomes]
    gaps = [b.started - (a.started + a.seconds) for a, b in zip(outcomes, outcomes[1:])]
    return {"trials": n, "direct_seconds": list(direct.values()), "direct_before_seconds": list(before.values()),
            "direct_after_seconds": list(after.values()), "direct_total": sum(direct.values()),
            "study_seconds": through, "overhead_per_trial": (through - sum(direct.values())) / n,
            "startup_seconds": outcomes[0].started - began, "in_trial_excess_seconds": excess,
            "in_trial_excess_total": sum(excess), "gap_seconds": gaps, "gaps_total": sum(gaps),
            "teardown_seconds": ended - (outcomes[-1].started + outcomes[-1].seconds)}


def one_gpu_each(study: StudySpec) -> StudySpec:
    return study.model_copy(update={"resources": study.resources.model_copy(update={"gpu": 1.0})})


def packing(study: StudySpec, scratch: Path) -> dict:
    packed = timed_study(study, scratch / "packed")[0]
    unpacked = timed_study(one_gpu_each(study), scratch / "unpacked")[0]
    return {"trials": len(expand(study)), "gpu_per_trial": study.resources.gpu, "packed_seconds": packed,
            "one_gpu_each_seconds": unpacked, "speedup": unpacked / packed}


def check_packing(study: StudySpec) -> None:
    """What `packing` would run, validated like a run validates it, without a GPU."""
    for name, s in (("packed", study), ("one GPU each", one_gpu_each(study))):
        trials = expand(s)
        print(f"{name:<13} {len(trials)} trials at resources.gpu={s.resources.gpu:g}, cpu={s.resources.cpu:g}: "
              + ", ".join(sorted({t.variant for t in trials})))
    if not torch.cuda.is_available():
        print("no CUDA GPU here: the measurement itself needs one")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["overhead", "packing"])
    ap.add_argument("study")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<machine>_<what>.json)")
    ap.add_argument("--check", action="store_true", help="packing: validate and list what would run; measure nothing")
    args = ap.parse_args(argv)
    study = validate(StudySpec, read_yaml(args.study), args.study)
    if args.check:
        check_packing(study)
        return
    with tempfile.TemporaryDirectory() as scratch:
        figures = (overhead if args.what == "overhead" else packing)(study, Path(scratch))
    for key, value in figures.items():
        if not isinstance(value, list):
            print(f"{key:<24} {value:.2f}" if isinstance(value, float) else f"{key:<24} {value}")
    common.write(args.out, args.what, {"study": args.study, **figures}, argv)


if __name__ == "__main__":
    main()

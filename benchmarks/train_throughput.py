"""Training throughput of whole trials, side by side: tokens/s, MFU and validation loss.

    python benchmarks/train_throughput.py [TRIAL.yaml ...] [--repeats 2] [--out FILE]
    python benchmarks/train_throughput.py --launch [TRIAL.yaml] [--steps 100] [--out FILE]
    python benchmarks/train_throughput.py --launch --check      # the same on a tiny CPU trial (gloo)

Default trials: the paper's 125M FoX (Pro) and Transformer (LLaMA) at context 4096
(studies/throughput/), 200 steps each, the first 20 (compilation, warm-up) left out of the rate.
Each trial runs as `wb train` in a process of its own (a fresh compile cache and CUDA context), the
trials alternating (A, B, A, B, ...) so that a machine's drift does not favour one of them. Prints
each run and the ratio of every trial's mean tokens/s to the first trial's; writes JSON.

``--launch``: one trial (default the 125M FoX (Pro)) through each way of launching it, in this
order: the plain one-process path (`wb train`), then Ray Train (workbench/run/ray_train.py) with one
worker under DDP and under FSDP, and with every visible GPU (N > 1) under both: tokens/s of the
whole trial, MFU, the speed-up over the plain path, and the largest relative difference of the
per-step training loss from the plain run's (the same spec: the same global batches), and the wall
time of each run's process (its start-up, Ray's and the trainer's included).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import common
from foxwb.workbench.run.ray_train import run_workers, with_workers
from foxwb.workbench.spec.errors import read_yaml, validate
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.trial import run_trial

DEFAULT = ["studies/throughput/fox_pro_125m.yaml", "studies/throughput/transformer_llama_125m.yaml"]
CHECK_TRIAL = "studies/trial_tiny.yaml"
KEPT = ("tokens_per_s", "mfu", "val_loss", "steps", "n_params", "device", "peak_memory_train_mb",
        "peak_memory_eval_mb", "spec_hash", "versions")


def run_one(trial: str, out: Path, timeout: int) -> dict:
    proc = subprocess.run([sys.executable, "-m", "foxwb.workbench.cli.main", "train", trial, "--out", str(out), "--no-resume"],
                          cwd=common.ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    result = json.loads((out / "result.json").read_text())
    return {k: result.get(k) for k in KEPT}


def run_launched(trial: str, out: Path, timeout: int, workers: int, parallel: str, steps: int | None) -> dict:
    """One run of ``trial``: ``workers`` 0 is the plain path, else Ray Train with that many workers."""
    how = ["--plain"] if workers == 0 else ["--workers", str(workers), "--parallel", parallel]
    cmd = [sys.executable, __file__, "--one", trial, str(out), *how, *(["--steps", str(steps)] if steps else [])]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=common.ROOT, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - started  # the whole process: start-up, Ray's and the trainer's, training, end
    if proc.returncode:
        tail = proc.stderr.strip().splitlines()
        return {"error": " | ".join(tail[-3:]) if tail else f"exit {proc.returncode}"}
    result = json.loads((out / "result.json").read_text())
    losses = [json.loads(line)["train_loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {**{k: result.get(k) for k in KEPT}, "workers": result.get("workers"), "parallel": result.get("parallel"),
            "train_losses": losses, "wall_s": wall}


def one(trial: str, out: Path, workers: int | None, parallel: str, steps: int | None) -> int:
    """The child of run_launched: the trial (``steps`` optimizer steps) on the plain path
    (workers None) or on Ray Train, into ``out``."""
    data = read_yaml(trial)
    if steps:
        t = data.setdefault("train", {})
        rows = t.get("batch_size", 16) * t.get("grad_accum", 1)
        t["tokens"] = steps * rows * data.get("data", {}).get("context", 256)
        t["warmup_tokens"] = min(t.get("warmup_tokens", 0), t["tokens"] // 10)
    spec = validate(TrialSpec, data, trial)
    if workers is None:
        run_trial(spec, out)
    else:
        spec = with_workers(spec, workers)
        spec = TrialSpec.model_validate({**spec.model_dump(mode="json"),
                                         "train": {**spec.train.model_dump(mode="json"), "parallel": parallel}})
        run_workers(spec, out, cpus=1.0)
    return 0


def launch(args, argv) -> int:
    trial = args.trials[0] if args.trials != DEFAULT else (CHECK_TRIAL if args.check else DEFAULT[0])
    gpus = torch.cuda.device_count()
    many = gpus if gpus > 1 else (2 if args.check and not torch.cuda.is_available() else 0)
    ways = [(0, "ddp"), (1, "ddp"), (1, "fsdp")] + ([(many, "ddp"), (many, "fsdp")] if many > 1 else [])
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for i, (workers, parallel) in enumerate(ways):
            row = {"trial": trial, "path": "plain" if workers == 0 else f"ray-train {parallel} x{workers}",
                   **run_launched(trial, Path(scratch) / str(i), args.timeout, workers, parallel, args.steps)}
            runs.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("versions", "train_losses")}), flush=True)
    plain = runs[0]
    for r in runs:
        if r.get("tokens_per_s") and plain.get("tokens_per_s"):
            r["over_plain"] = r["tokens_per_s"] / plain["tokens_per_s"]
        if r.get("train_losses") and plain.get("train_losses"):
            pairs = list(zip(r["train_losses"], plain["train_losses"]))
            r["loss_max_rel_diff"] = max(abs(a - b) / abs(b) for a, b in pairs)
    common.write(args.out, "train_launch", {"runs": runs, "gpus": gpus, "steps": args.steps}, argv)
    print(f"\n{'path':<22} {'tokens/s':>10} {'x plain':>8} {'MFU':>6} {'val_loss':>9} {'loss vs plain':>14} {'wall s':>7}")
    for r in runs:
        mfu = _mfu_or_error(r, f"{r['path']:<22}", 160)
        if mfu is None:
            continue
        diff = f"{r['loss_max_rel_diff']:.2e}" if r.get("loss_max_rel_diff") is not None else ""
        print(f"{r['path']:<22} {r['tokens_per_s']:>10,.0f} {r.get('over_plain', 0):>7.3f}x {mfu:>6} "
              f"{r['val_loss']:>9.4f} {diff:>14} {r['wall_s']:>7.1f}")
    return 0 if all("error" not in r for r in runs) else 1


def _mfu_or_error(r: dict, label: str, width: int) -> str | None:
    """A run's MFU cell; None (with its error printed) for a run that failed."""
    if "error" in r:
        print(f"{label}  error: {r['error'][:width]}")
        return None
    return f"{100 * r['mfu']:.1f}%" if r.get("mfu") else "n/a"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trials", nargs="*", default=DEFAULT, help="trial YAML files (default: the 125M pair)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each trial, alternating")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<gpu>_train_throughput.json)")
    ap.add_argument("--launch", action="store_true", help="one trial through the plain path and Ray Train (see above)")
    ap.add_argument("--check", action="store_true", help="with --launch: a tiny trial, on the CPU where there is no GPU")
    ap.add_argument("--steps", type=int, help="with --launch: optimizer steps per run (default: the trial's)")
    ap.add_argument("--one", nargs=2, metavar=("TRIAL", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--parallel", default="ddp", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return one(args.one[0], Path(args.one[1]), None if args.plain else args.workers, args.parallel, args.steps)
    if args.launch:
        return launch(args, argv)
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            for i, trial in enumerate(args.trials):
                row = {"trial": trial, "repeat": repeat, **run_one(trial, Path(scratch) / f"{i}_{repeat}", args.timeout)}
                runs.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "versions"}), flush=True)
    means = {}
    for trial in args.trials:
        rates = [r["tokens_per_s"] for r in runs if r["trial"] == trial and r.get("tokens_per_s")]
        means[trial] = statistics.mean(rates) if rates else None
    first = means[args.trials[0]]
    ratios = {t: (first / m if first and m else None) for t, m in means.items()}
    common.write(args.out, "train_throughput", {"runs": runs, "mean_tokens_per_s": means,
                                                        "first_over_each": ratios}, argv)
    print(f"\n{'trial':<52} {'run':>3} {'tokens/s':>10} {'MFU':>6} {'val_loss':>9}")
    for r in runs:
        mfu = _mfu_or_error(r, f"{r['trial']:<52} {r['repeat']:>3}", 80)
        if mfu is None:
            continue
        print(f"{r['trial']:<52} {r['repeat']:>3} {r['tokens_per_s']:>10,.0f} {mfu:>6} {r['val_loss']:>9.3f}")
    for trial, ratio in ratios.items():
        if trial != args.trials[0] and ratio:
            print(f"{args.trials[0]} / {trial}: {ratio:.3f}x tokens/s")
    return 0 if all("error" not in r for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())

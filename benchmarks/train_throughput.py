"""Training throughput of whole trials, side by side: tokens/s, MFU and validation loss.

    python benchmarks/train_throughput.py [TRIAL.yaml ...] [--repeats 2] [--out FILE]

Default trials: the paper's 125M FoX (Pro) and Transformer (LLaMA) at context 4096
(studies/throughput/), 200 steps each, the first 20 (compilation, warm-up) left out of the rate.
Each trial runs as `wb train` in a process of its own (a fresh compile cache and CUDA context), the
trials alternating (A, B, A, B, ...) so that a machine's drift does not favour one of them. Prints
each run and the ratio of every trial's mean tokens/s to the first trial's; writes JSON.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import common

DEFAULT = ["studies/throughput/fox_pro_125m.yaml", "studies/throughput/transformer_llama_125m.yaml"]
KEPT = ("tokens_per_s", "mfu", "val_loss", "steps", "n_params", "device", "peak_memory_train_mb",
        "peak_memory_eval_mb", "spec_hash", "versions")


def run_one(trial: str, out: Path, timeout: int) -> dict:
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "train", trial, "--out", str(out), "--no-resume"],
                          cwd=common.ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    result = json.loads((out / "result.json").read_text())
    return {k: result.get(k) for k in KEPT}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trials", nargs="*", default=DEFAULT, help="trial YAML files (default: the 125M pair)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each trial, alternating")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<gpu>_train_throughput.json)")
    args = ap.parse_args(argv)
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
        if "error" in r:
            print(f"{r['trial']:<52} {r['repeat']:>3}  error: {r['error'][:80]}")
            continue
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") else "n/a"
        print(f"{r['trial']:<52} {r['repeat']:>3} {r['tokens_per_s']:>10,.0f} {mfu:>6} {r['val_loss']:>9.3f}")
    for trial, ratio in ratios.items():
        if trial != args.trials[0] and ratio:
            print(f"{args.trials[0]} / {trial}: {ratio:.3f}x tokens/s")
    return 0 if all("error" not in r for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Whether CPU training repeats itself bit for bit: one trial trained in separate processes,
uninterrupted and killed after a checkpoint then resumed, each step compared bitwise with the
first uninterrupted run.

    python benchmarks/cpu_determinism.py [TRIAL] [--threads N|default] [--runs 4] [--resumed 2]
        [--resumed-on N] [--other N] [--parallel 1] [--hog 0] [--omp-dynamic] [--out FILE]

TRIAL (default studies/trial_tiny.yaml) is shrunk as the resume test shrinks it (tests/workbench/
test_trial.py: d_model 64, one layer, 1 MB of text, batch 8, no validation) to --tokens, with a
checkpoint every --checkpoint-every tokens; --threads sets train.cpu_threads (default: left unset,
torch's own count). A run trains as run_trial does (no evaluation) and records per step the loss,
the gradient norm, a SHA-1 of the parameters, torch.get_num_threads() and the OpenMP team size its
reductions used (told by the bits of one fixed sum, which differ per team size). A resumed run
is killed one step after its first checkpoint and trained again from it in a fresh process.
--resumed-on N adds one whose second process runs N threads (the spec, and so the checkpoint's
hash, unchanged); --other N one uninterrupted run on N threads. --parallel runs that many
processes at once, --hog keeps that many busy-looping processes beside them (load), --omp-dynamic
runs them with OMP_DYNAMIC=true. Prints a row per run (the first step whose loss, gradient norm or
parameters differ from the first run's; a team size of 0: none the probe knows) and writes JSON.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

import common
from foxwb.workbench.data.load import load_data
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.loop import train

PROBE = 1 << 20  # elements of the fixed sum whose bits tell the team size


def probe_sums(max_threads: int) -> dict[str, int]:
    """The fixed sum's value for each team size 1..max_threads (in this process, OMP_DYNAMIC off)."""
    x = torch.randn(PROBE, generator=torch.Generator().manual_seed(0))
    before, sums = torch.get_num_threads(), {}
    for n in range(1, max_threads + 1):
        torch.set_num_threads(n)
        sums.setdefault(repr(x.sum().item()), n)
    torch.set_num_threads(before)
    return sums


def child(trial_path: str, out: str, mode: str, result: str, sums: str, threads: str) -> None:
    """One training in this process (mode straight, kill or resume; ``threads``: a count that
    overrides the spec's, or ""); its rows to ``result``."""
    trial = TrialSpec.model_validate(yaml.safe_load(Path(trial_path).read_text()))
    if threads or trial.train.cpu_threads:
        torch.set_num_threads(int(threads or trial.train.cpu_threads))
    teams = json.loads(sums)
    x = torch.randn(PROBE, generator=torch.Generator().manual_seed(0))
    data = load_data(trial.data, trial.model.vocab_size, trial.seed)
    torch.manual_seed(trial.seed)
    model = build_model(trial.model)
    Path(out).mkdir(parents=True, exist_ok=True)
    rows, resumed, start, load = [], [], time.time(), os.getloadavg()[0]

    def dump() -> None:
        Path(result).write_text(json.dumps({"mode": mode, "seconds": time.time() - start, "load": [load, os.getloadavg()[0]],
                                            "affinity": len(os.sched_getaffinity(0)), "resumed_after": resumed[0] if resumed else None,
                                            "rows": rows}))

    class Rows:
        def report(self, tokens, metrics):
            digest = hashlib.sha1()
            for p in model.parameters():
                digest.update(p.detach().numpy().tobytes())
            rows.append({"tokens": tokens, "loss": metrics["train_loss"], "grad_norm": metrics["grad_norm"],
                         "params": digest.hexdigest()[:16], "threads": torch.get_num_threads(),
                         "team": teams.get(repr(x.sum().item()), 0)})
            if mode == "kill" and (Path(out) / "checkpoint.pt").exists():  # one step after the first checkpoint
                dump()
                os._exit(0)

        def on_resume(self, history):
            resumed.append(len(history))
            rows.extend({"tokens": h["tokens"], "loss": h["train_loss"], "grad_norm": h["grad_norm"]} for h in history)

    train(trial, model, data, Rows(), Path(out) / "checkpoint.pt", torch.device("cpu"))
    dump()


def small_trial(path: Path, tokens: int, checkpoint_every: int, threads: str) -> dict:
    spec = yaml.safe_load(path.read_text())
    spec["model"].update(d_model=64, n_layers=1)
    spec["data"]["max_bytes"] = 1_000_000
    spec["train"].update(tokens=tokens, batch_size=8, eval_every_tokens=None, checkpoint_every_tokens=checkpoint_every,
                         cpu_threads=None if threads == "default" else int(threads))
    return spec


def first_difference(a: list[dict], b: list[dict]) -> dict:
    """Per key, the first step (1-based) where b's value differs from a's (None: none differs);
    ``losses``: a's and b's loss at that step."""
    by_tokens = {r["tokens"]: r for r in a}
    out = {}
    for key in ("loss", "grad_norm", "params"):
        out[key] = next((i + 1 for i, r in enumerate(b) if key in r and key in by_tokens.get(r["tokens"], {})
                         and r[key] != by_tokens[r["tokens"]][key]), None)
    if out["loss"]:
        out["losses"] = [a[out["loss"] - 1]["loss"], b[out["loss"] - 1]["loss"]]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trial", nargs="?", default=str(common.ROOT / "studies" / "trial_tiny.yaml"))
    ap.add_argument("--threads", default="default", help="train.cpu_threads, or 'default' (unset)")
    ap.add_argument("--tokens", type=int, default=120_000)
    ap.add_argument("--checkpoint-every", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=4, help="uninterrupted runs")
    ap.add_argument("--resumed", type=int, default=2, help="runs killed after a checkpoint and resumed")
    ap.add_argument("--resumed-on", type=int, help="one more resumed run, its second process on this many threads")
    ap.add_argument("--other", type=int, help="one more uninterrupted run, on this many threads")
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--hog", type=int, default=0, help="busy-looping processes beside the runs")
    ap.add_argument("--omp-dynamic", action="store_true")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<machine>_determinism.json)")
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(*args.child)
    sums = json.dumps(probe_sums(max(2, os.cpu_count() or 1)))
    env = {**os.environ, **({"OMP_DYNAMIC": "true"} if args.omp_dynamic else {})}
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hog)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            trial = tmp / "trial.yaml"
            trial.write_text(yaml.safe_dump(small_trial(Path(args.trial), args.tokens, args.checkpoint_every, args.threads)))
            # (name, [(mode, threads), ...]): the processes of a run, one after another
            jobs = [(f"straight {i + 1}", [("straight", "")]) for i in range(args.runs)]
            jobs += [(f"resumed {i + 1}", [("kill", ""), ("resume", "")]) for i in range(args.resumed)]
            if args.resumed_on:
                jobs.append((f"resumed on {args.resumed_on}", [("kill", ""), ("resume", str(args.resumed_on))]))
            if args.other:
                jobs.append((f"on {args.other} threads", [("straight", str(args.other))]))
            results: dict[str, dict] = {}

            def start(name, step):
                folder = tmp / name.replace(" ", "_")
                cmd = [sys.executable, __file__, "--child", str(trial), str(folder), step[0], f"{folder}.{step[0]}.json",
                       sums, step[1]]
                return subprocess.Popen(cmd, env=env, cwd=common.ROOT)

            running: list = []
            while jobs or running:
                while jobs and len(running) < args.parallel:
                    name, modes = jobs.pop(0)
                    running.append([name, modes, start(name, modes[0])])
                time.sleep(0.5)
                for job in list(running):
                    name, modes, proc = job
                    if proc.poll() is None:
                        continue
                    if proc.returncode:
                        raise SystemExit(f"{name} ({modes[0][0]}) failed: exit {proc.returncode}")
                    done = modes.pop(0)[0]
                    results[name] = json.loads((tmp / (name.replace(" ", "_") + f".{done}.json")).read_text())
                    if modes:
                        job[2] = start(name, modes[0])
                    else:
                        running.remove(job)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    reference = results["straight 1"]["rows"]
    table = []
    for name, r in results.items():
        rows = [x for x in r["rows"] if "threads" in x]
        table.append({"run": name, "steps": len(r["rows"]), "resumed_after": r["resumed_after"], "threads": sorted({x["threads"] for x in rows}),
                      "team": sorted({x["team"] for x in rows}), "seconds": round(r["seconds"], 1),
                      "load": [round(v, 1) for v in r["load"]], "first_difference": first_difference(reference, r["rows"])})
    for row in table:
        after = f"resumed after step {row['resumed_after']}" if row["resumed_after"] else "uninterrupted"
        print(f"{row['run']:16s} steps {row['steps']:4d}  {after:25s}  torch threads {row['threads']}  team {row['team']}  "
              f"{row['seconds']:6.1f} s  load {row['load'][0]}->{row['load'][1]}  first difference {row['first_difference']}")
    record = {"trial": Path(args.trial).name, "tokens": args.tokens, "checkpoint_every": args.checkpoint_every,
              "threads": args.threads, "parallel": args.parallel, "hog": args.hog, "omp_dynamic": args.omp_dynamic,
              "identical": sum(all(v is None for v in row["first_difference"].values()) for row in table),
              "runs": table}
    common.write(args.out, "determinism", record, argv)


if __name__ == "__main__":
    main()

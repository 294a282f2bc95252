"""The figures of docs/stability.md's GPU tables, from experiments/stability_spikes/stability_trace.json.

    python scripts/stability_figures.py collect STUDY DIR --commit C --date D
        Adds (or replaces) STUDY's trials in the JSON, read from DIR/trials/*/result.json (the
        archive `bash benchmarks/gpu.sh stability` returns as stability-results.tgz, unpacked):
        each trial's settings, final figures, spike figures and, where it recorded gradient norms
        by part, its spikes counted from 2M tokens (the 2M warmup most rows have) whatever its
        own warmup.
    python scripts/stability_figures.py compare --base LABEL [--studies S ...]
        One row per setting (forget gate, KV-shift, lr, warmup, batch), pooling the seeds
        of every study that ran it: val loss mean with its 95% t-interval, sd / mean, the paired
        difference from the row LABEL over the seeds both ran (foxwb.workbench.analysis.stats.paired), and the
        gradient-norm spikes a run (after the row's warmup, and from 2M tokens where recorded).
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from foxwb.workbench.train.spikes import flag_runs, grad_spike_mask
from foxwb.workbench.analysis.stats import mean_ci, paired

JSON = Path(__file__).resolve().parents[1] / "experiments/stability_spikes/stability_trace.json"
FIGURES = ("grad_spikes", "grad_spike_steps", "grad_norm_max", "grad_norm_median", "grad_norm_max_ratio",
           "first_grad_spike_tokens", "loss_spikes", "grad_spike_parts", "tokens_per_s", "steps")
FROM_TOKENS = 2_000_000


def spikes_from(result: dict, tokens: int = FROM_TOKENS) -> dict:
    """Gradient-norm spikes counted over the steps whose first token is at or past ``tokens``
    (the definition of workbench/train/spikes.py with that in place of the warmup), from the gradient
    norms by part (their squares add up to the step's squared norm); {} without them."""
    parts = result.get("grad_norm_parts")
    if not parts:
        return {}
    seen = np.array(parts["tokens"])
    norm = np.sqrt(sum(np.array(v) ** 2 for k, v in parts.items() if k != "tokens"))
    step_tokens = result["spec"]["train"]["batch_size"] * result["context"]
    kept = norm[(seen - step_tokens) >= tokens]
    spikes, median = grad_spike_mask(kept)
    return {"grad_spikes_from_2M": flag_runs(spikes), "grad_norm_max_ratio_from_2M": float(kept.max() / median)}


def trial_entry(result: dict) -> dict:
    spec, attention = result["spec"], result["spec"]["model"]["attention"]
    return {"spec_hash": result["spec_hash"], "seed": spec["seed"], "forget_gate": attention["forget_gate"],
            "kv_shift": attention["kv_shift"], "rope": attention.get("rope"), "lr": spec["train"]["lr"],
            "warmup_tokens": spec["train"]["warmup_tokens"], "batch_size": spec["train"]["batch_size"],
            "val_loss": result["val_loss"], "val_ppl": result["val_ppl"],
            **{k: result.get(k) for k in FIGURES}, **spikes_from(result)}


def collect(study: str, folder: Path, commit: str, date: str) -> None:
    data = json.loads(JSON.read_text())
    trials = [trial_entry(json.loads(p.read_text())) for p in sorted(folder.glob("trials/*/result.json"))]
    if not trials:
        raise SystemExit(f"no trials/*/result.json under {folder}")
    data["studies"][study] = {"command": f"STABILITY_STUDY=experiments/stability_spikes/{study}.yaml bash benchmarks/gpu.sh stability",
                              "commit": commit, "date": date, "trials": trials}
    JSON.write_text(json.dumps(data, indent=1))
    print(f"{study}: {len(trials)} trials into {JSON}")


def label(trial: dict) -> str:
    """The row's settings: what the studies vary."""
    # Trials collected before the KV-shift was recorded (2026-12-02) all had the preset's (kv, N 1).
    gate, shift = trial["forget_gate"], trial.get("kv_shift", {"kind": "kv"})
    gate_text = "no gate" if gate.get("kind") == "none" else (
        f"gate bias {gate.get('bias_init', 0.0):g}, N {gate.get('logit_normalizer', 1.0):g}, lr x{gate.get('lr_scale', 1.0):g}")
    shift_text = "no KV-shift" if shift is None or shift.get("kind") == "none" else (
        f"KV-shift N {shift.get('logit_normalizer', 1.0):g}")
    # RoPE is left out: in these studies it goes with the gate (the rows without one are
    # Transformer (Pro), with RoPE), and the trials of 2026-12-02 did not record it.
    return f"{gate_text} | {shift_text} | lr {trial['lr']:g} | warmup {trial['warmup_tokens'] / 1e6:g}M | batch {trial['batch_size']}"


def compare(base: str, studies: list[str] | None) -> None:
    data = json.loads(JSON.read_text())["studies"]
    rows: dict[str, dict[int, dict]] = defaultdict(dict)
    for name, study in data.items():
        if studies is None or name in studies:
            for trial in study["trials"]:
                rows[label(trial)][trial["seed"]] = trial
    if base not in rows:
        raise SystemExit(f"--base {base!r} is none of the rows:\n  " + "\n  ".join(sorted(rows)))
    base_loss = {s: t["val_loss"] for s, t in rows[base].items()}
    for name, trials in sorted(rows.items()):
        seeds = sorted(trials)
        loss = mean_ci(trials[s]["val_loss"] for s in seeds)
        diff = paired({s: trials[s]["val_loss"] for s in seeds}, base_loss)
        spikes = [trials[s]["grad_spikes"] for s in seeds]
        ratios = [trials[s]["grad_norm_max_ratio"] for s in seeds]
        print(f"{name}\n  seeds {seeds}: val loss {loss.mean:.4f} +- {loss.half_width or 0:.4f}, "
              f"sd / mean {100 * (loss.sd or 0) / loss.mean:.2f}%")
        if name != base and diff.n:
            print(f"  vs base over {diff.n} seeds: {diff.delta:+.4f} +- {diff.half_width or 0:.4f}, p {diff.p:.2g}")
        print(f"  spikes a run {spikes}, largest x {[round(r, 1) for r in ratios if r is not None]}")
        if all("grad_spikes_from_2M" in trials[s] for s in seeds):
            print(f"  from 2M tokens: {[trials[s]['grad_spikes_from_2M'] for s in seeds]}, largest x "
                  f"{[round(trials[s]['grad_norm_max_ratio_from_2M'], 1) for s in seeds]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("study")
    c.add_argument("folder", type=Path)
    c.add_argument("--commit", required=True)
    c.add_argument("--date", required=True)
    m = sub.add_parser("compare")
    m.add_argument("--base", required=True, help="a row's label, as compare prints them")
    m.add_argument("--studies", nargs="+", help="only these studies of the JSON (default: all)")
    args = parser.parse_args()
    if args.command == "collect":
        collect(args.study, args.folder, args.commit, args.date)
    else:
        compare(args.base, args.studies)


if __name__ == "__main__":
    main()

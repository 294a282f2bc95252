"""Is a row's shift between two GPUs the machine's or the seeds'? A study's row ran some seeds on
one GPU and the rest on another; some of the first GPU's seeds were trained again on the second
(the same trials: the same spec hashes). This compares, from the study's `wb results --format json`
and the repeat's `wb run` output:

- the repeat against the first runs of the same seeds, paired (foxwb.workbench.analysis.stats.paired);
- the study's seeds by machine, unpaired (Welch, foxwb.workbench.analysis.stats.welch; Mann-Whitney and Levene's
  test from scipy): the shift the repeat is to explain.

    python scripts/machine_repeat.py --log experiments/llama_h100_repeat/llama_h100_repeat.log \
        --results experiments/table3_4096_llama/table3_4096_llama.json --row "Transformer (LLaMA)" --from-seed 197 \
        --machine "1 x NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, triton 3.6.0, Python 3.12.3)" \
        --date 2026-12-05 --code 1183006 --gpu-seconds 195 > experiments/llama_h100_repeat/llama_h100_repeat.json

``--from-seed``: the study's seeds from this one on ran on the repeat's machine. The repeat's
val_ppl are those `wb run` printed (3 decimals)."""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
from scipy import stats as sp

from foxwb.workbench.analysis import stats


def repeat_runs(log: str, row: str) -> dict[int, tuple[str, float]]:
    """seed -> (spec hash, val_ppl) of the row's trials that `wb run` finished, from its output."""
    name = re.escape(row)
    hashes = {int(s): h for s, h in re.findall(rf"start +{name} / seed (\d+) +\[(\w+)\]", log)}
    return {int(s): (hashes[int(s)], float(v)) for s, v in re.findall(rf"finished {name} / seed (\d+) +val_ppl ([\d.]+)", log)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", required=True, help="the repeat's `wb run` output")
    ap.add_argument("--results", required=True, help="the study's `wb results --format json`")
    ap.add_argument("--row", required=True)
    ap.add_argument("--from-seed", type=int, required=True, help="the study's seeds from this one on ran on the repeat's machine")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--code", required=True)
    ap.add_argument("--gpu-seconds", type=float, required=True)
    args = ap.parse_args(argv)

    again = repeat_runs(Path(args.log).read_text(), args.row)
    row = next(r for r in json.loads(Path(args.results).read_text())["rows"] if r["row"] == args.row)
    first = dict(zip(row["seeds_run"], row["values"]))
    missing = sorted(set(again) - set(first))
    if missing:
        raise SystemExit(f"seeds {missing} of the repeat are not in {args.results}'s row {args.row!r}")
    p = stats.paired({s: v for s, (_, v) in again.items()}, first)
    seeds, values = np.array(row["seeds_run"]), np.array(row["values"])
    later, earlier = values[seeds >= args.from_seed], values[seeds < args.from_seed]
    w = stats.welch(later, earlier)
    out = {
        "about": f"{args.row} of {args.results}, seeds {sorted(again)} trained again (the same spec hashes) on "
                 f"{args.machine}, against their first runs; and the study's seeds from {args.from_seed} on (run on "
                 "that machine) against the earlier ones. val_ppl of the repeat as `wb run` printed it (3 decimals). "
                 "Made by scripts/machine_repeat.py.",
        "date": args.date, "code": args.code, "machine": args.machine, "gpu_wall_s": args.gpu_seconds,
        "rows": [{"seed": s, "spec_hash": h, "val_ppl_repeat": v, "val_ppl_first": first[s]} for s, (h, v) in sorted(again.items())],
        "paired_repeat_minus_first": {"n": p.n, "mean": p.delta, "sd": p.sd, "ci95": p.half_width, "p_paired_t": p.p},
        "study_seeds_by_machine": {
            "earlier": {"seeds": f"< {args.from_seed}", "n": len(earlier), "mean": float(earlier.mean()), "sd": float(earlier.std(ddof=1))},
            "later": {"seeds": f">= {args.from_seed}", "n": len(later), "mean": float(later.mean()), "sd": float(later.std(ddof=1))},
            "welch_delta": w.delta, "welch_ci95": w.half_width, "welch_p": w.p,
            "mann_whitney_p": float(sp.mannwhitneyu(later, earlier).pvalue),
            "levene_p": float(sp.levene(later, earlier).pvalue)},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

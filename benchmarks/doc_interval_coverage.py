"""How often the seed x document interval (foxwb.workbench.analysis.doc_interval.crossed) covers the
true difference, beside the seeds-only paired interval the table gave before, on synthetic studies.

    python benchmarks/doc_interval_coverage.py [--reps 2000] [--out FILE]

Each study draws S seeds and N test documents from populations where the paired difference of
seed s on document d is D[s, d] = theta + a_s + b_d + e_sd / sqrt(t_d / mean t): a seed effect
(sd sa), a document effect (sd sb), and a per-token interaction whose mean over the t_d tokens of
a document shrinks with its length (sd se at the mean length); documents' lengths are lognormal
(sigma 1). The truth, theta, is the difference on the document population (token-weighted):
here 0.01 nats. Per design (S, N) and mix of variances: `coverage` of the nominal 95% interval
(the share of studies whose interval holds theta), its median `width`, and the same for the
seeds-only interval, which fixes the documents and so misses their sampling. Prints the table,
writes JSON.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import common
from foxwb.workbench.analysis.doc_interval import crossed, seeds_only

THETA = 0.01
DESIGNS = [(3, 6), (3, 20), (5, 6), (5, 20), (5, 100), (10, 20), (10, 100)]
# (sa, sb, se): seeds dominate; documents dominate; interaction dominates; all alike.
MIXES = {"seeds": (0.01, 0.003, 0.003), "documents": (0.003, 0.01, 0.003), "interaction": (0.003, 0.003, 0.01),
         "alike": (0.006, 0.006, 0.006)}


def study(rng, s: int, n: int, sa: float, sb: float, se: float) -> tuple[np.ndarray, np.ndarray]:
    tokens = np.maximum(rng.lognormal(np.log(2000), 1.0, n).round(), 2.0)
    noise = rng.normal(0, se, (s, n)) / np.sqrt(tokens / 2000 * np.exp(0.5))  # mean of lognormal(0, 1) = e^0.5
    diffs = THETA + rng.normal(0, sa, (s, 1)) + rng.normal(0, sb, (1, n)) + noise
    return diffs, tokens


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out")
    args = p.parse_args(argv)
    rows = []
    started = time.time()
    print(f"{'mix':<12} {'S':>3} {'N':>4}  {'crossed':>8} {'width':>8}  {'seeds only':>10} {'width':>8}")
    for mix, (sa, sb, se) in MIXES.items():
        for s, n in DESIGNS:
            rng = np.random.default_rng([args.seed, s, n, list(MIXES).index(mix)])
            hit = {"crossed": 0, "seeds_only": 0}
            widths: dict[str, list[float]] = {"crossed": [], "seeds_only": []}
            for _ in range(args.reps):
                diffs, tokens = study(rng, s, n, sa, sb, se)
                for name, fn in (("crossed", crossed), ("seeds_only", seeds_only)):
                    r = fn(diffs, tokens)
                    if r.half_width is not None:
                        hit[name] += abs(r.delta - THETA) <= r.half_width
                        widths[name].append(2 * r.half_width)
            row = {"mix": mix, "sd_seed": sa, "sd_doc": sb, "sd_interaction": se, "seeds": s, "documents": n,
                   **{f"{k}_coverage": hit[k] / args.reps for k in hit},
                   **{f"{k}_width": float(np.median(widths[k])) for k in widths}}
            rows.append(row)
            print(f"{mix:<12} {s:>3} {n:>4}  {row['crossed_coverage']:>8.3f} {row['crossed_width']:>8.4f}  "
                  f"{row['seeds_only_coverage']:>10.3f} {row['seeds_only_width']:>8.4f}")
    worst = min(rows, key=lambda r: r["crossed_coverage"])
    print(f"crossed interval: coverage {min(r['crossed_coverage'] for r in rows):.3f} to "
          f"{max(r['crossed_coverage'] for r in rows):.3f} (nominal 0.95; lowest at {worst['mix']}, S {worst['seeds']}, "
          f"N {worst['documents']}); {time.time() - started:.0f} s")
    common.write(args.out, "doc_interval_coverage", {"reps": args.reps, "theta": THETA, "rows": rows}, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

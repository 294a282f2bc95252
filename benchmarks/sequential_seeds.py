"""Seeds by plan (foxwb.workbench.analysis.sequential), on simulated studies: the plan's type-I
error, the coverage of its interval at the look it stops, and the seeds it uses against a fixed
design of the same power.

    python benchmarks/sequential_seeds.py [--reps 2000] [--out FILE]

Each study compares A with B over paired seeds, the differences normal with sd 0.01 nats; a claim's
smallest effect of interest is 1% (margin log 1.01 = 0.00995 nats); alpha 0.05. Per plan (start,
step, max):

- `type1_difference`: true difference 0; the share of studies that end `better` or `worse`;
- `type1_equivalence`: true difference at the margin; the share that end `equivalent`;
- `naive_type1_difference`: the same as the first, testing at alpha at every look (no boundary):
  what looking without a plan costs;
- `coverage`: true difference 0.5 x margin; the share of studies whose interval at the look they
  stop (or the last) holds it;
- at a true difference of one margin (an effect the size of the SESOI, d = 1): `power` (the share
  that end `worse`), `mean_seeds` used, and `fixed_seeds`, the seeds a fixed paired t test at
  alpha needs for that power (capped at 0.99).

Prints the table, writes JSON.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import common
from foxwb.workbench.analysis import stats
from foxwb.workbench.analysis.sequential import decided, nominal_alpha, paired_look
from foxwb.workbench.spec.seed_plan import SeedPlan

ALPHA, SD = 0.05, 0.01
MARGIN = math.log(1.01)
PLANS = [SeedPlan(start=a, step=b, max=c) for a, b, c in ((3, 2, 12), (3, 1, 8), (2, 2, 10), (5, 5, 20), (4, 4, 16), (3, 3, 24))]


def run(plan: SeedPlan, delta: float, reps: int, rng, level: float) -> dict:
    """Simulated studies of one plan at a true difference ``delta``, testing at ``level`` each look."""
    verdicts, seeds, covered = {"better": 0, "worse": 0, "equivalent": 0, None: 0}, [], 0
    for _ in range(reps):
        d = rng.normal(delta, SD, plan.max)
        a, b = {s: float(d[s]) for s in range(plan.max)}, {s: 0.0 for s in range(plan.max)}
        for n in plan.looks:
            look = paired_look({s: a[s] for s in range(n)}, b, MARGIN, level)
            verdict = decided(look["p"], look["p_equivalence"], look["delta"], level)
            if verdict or n == plan.max:
                break
        verdicts[verdict] += 1
        seeds.append(n)
        covered += look["ci"][0] <= delta <= look["ci"][1]
    return {"verdicts": verdicts, "mean_seeds": float(np.mean(seeds)), "coverage": covered / reps}


def fixed_seeds(power: float, delta: float) -> int | None:
    """The seeds a fixed two-sided paired t test at ALPHA needs to reach ``power`` at ``delta``."""
    for n in range(2, 400):
        if (stats.power_paired(delta, SD, n, ALPHA) or 0) >= power:
            return n
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out")
    args = p.parse_args(argv)
    started, rows = time.time(), []
    print(f"{'plan':<14} {'looks':>5} {'alpha_look':>10} {'type1 diff':>10} {'type1 equiv':>11} {'naive':>6} "
          f"{'coverage':>8} {'power':>6} {'seeds':>6} {'fixed':>6}")
    for i, plan in enumerate(PLANS):
        level = nominal_alpha(plan, ALPHA)
        rng = np.random.default_rng([args.seed, i])
        null = run(plan, 0.0, args.reps, rng, level)
        edge = run(plan, MARGIN, args.reps, rng, level)
        naive = run(plan, 0.0, args.reps, rng, ALPHA)
        half = run(plan, 0.5 * MARGIN, args.reps, rng, level)
        effect = run(plan, MARGIN, args.reps, rng, level)
        power = effect["verdicts"]["worse"] / args.reps
        row = {"plan": {"start": plan.start, "step": plan.step, "max": plan.max}, "looks": plan.looks,
               "alpha_look": level,
               "type1_difference": (null["verdicts"]["better"] + null["verdicts"]["worse"]) / args.reps,
               "type1_equivalence": edge["verdicts"]["equivalent"] / args.reps,
               "naive_type1_difference": (naive["verdicts"]["better"] + naive["verdicts"]["worse"]) / args.reps,
               "coverage": half["coverage"], "power": power, "mean_seeds": effect["mean_seeds"],
               "mean_seeds_null": null["mean_seeds"], "fixed_seeds": fixed_seeds(min(power, 0.99), MARGIN)}
        rows.append(row)
        print(f"{plan.start}/{plan.step}/{plan.max:<8} {len(plan.looks):>5} {level:>10.4f} {row['type1_difference']:>10.3f} "
              f"{row['type1_equivalence']:>11.3f} {row['naive_type1_difference']:>6.3f} {row['coverage']:>8.3f} "
              f"{power:>6.3f} {row['mean_seeds']:>6.2f} {str(row['fixed_seeds']):>6}")
    worst = max(max(r["type1_difference"], r["type1_equivalence"]) for r in rows)
    print(f"largest type-I error over the plans: {worst:.3f} (alpha {ALPHA}); {time.time() - started:.0f} s")
    common.write(args.out, "sequential_seeds", {"reps": args.reps, "alpha": ALPHA, "sd": SD, "margin": MARGIN,
                                                "rows": rows}, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How often workbench.scaling's 95% intervals cover the truth, on synthetic ladders.

    python benchmarks/scaling_coverage.py [--reps 200] [--boot 200] [--out FILE]

Draws ladders from the known law L = 1.7 + 400 / N^0.34 (sizes log-spaced over 1M-30M, Gaussian
seed noise), fits each with `fit_law` and reads the interval of the law's loss at 5M (inside the
ladder), 60M and 360M from the bootstrap draws. Per ladder shape: the coverage, and the median
interval width over the width the spread of the point fits asks for (3.92 standard deviations).
The row "4x1, no refusal" shows what `fit_law` refuses to give: the same bootstrap on the minimum
ladder with one seed per size, run through the numerics modules. Prints the table, writes JSON.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import common
from workbench import scaling_solve as solve
from workbench.scaling import FitOptions, fit_law
from workbench.scaling_ladder import Ladder, resample

TARGETS = np.array([5e6, 6e7, 3.6e8])
# (sizes, seeds per size, noise in nats, resample_points)
SHAPES = [(5, 3, 0.01, True), (5, 3, 0.02, True), (5, 2, 0.01, True), (7, 3, 0.01, True), (4, 3, 0.01, True),
          (7, 1, 0.01, True), (5, 1, 0.01, True), (5, 3, 0.01, False)]


def truth(n):
    return 1.7 + 400.0 * np.asarray(n, float) ** -0.34


def draws_without_refusal(sizes, losses, opts: FitOptions) -> tuple[np.ndarray, np.ndarray]:
    """fit_law's point fit and bootstrap for a ladder it gives no intervals for: (point [3], draws [B, 3])."""
    point = fit_law("v", sizes, losses, options=FitOptions(n_boot=0)).params()
    ladder = Ladder.from_runs(sizes, None, losses)
    frame = solve.Frame("N", float(np.log(ladder.sizes).mean()))
    theta = np.array([np.log(point[0]), np.log(point[1]) - point[2] * frame.x0, point[2]])
    idx, means = resample(np.random.default_rng(opts.seed), ladder, opts.n_boot, 3, 3)
    fitted, ok = solve.fit_batch(frame, theta, np.log(ladder.sizes)[idx], None, np.log(means),
                                 opts.huber_delta, opts.max_iter)
    return point, solve.to_public(frame, fitted[ok])


def measure(k: int, seeds: int, sigma: float, resample_points: bool, reps: int, n_boot: int, refusal: bool = True):
    sizes = np.logspace(6, np.log10(3e7), k)
    rng = np.random.default_rng(2024)
    hits, widths, points, statuses = np.zeros(len(TARGETS)), [], [], {}
    for rep in range(reps):
        losses = (truth(sizes)[:, None] + sigma * rng.standard_normal((k, seeds))).ravel()
        opts = FitOptions(n_boot=n_boot, seed=rep, resample_points=resample_points)
        if refusal:
            f = fit_law("v", np.repeat(sizes, seeds), losses, options=opts)
            statuses[f.status] = statuses.get(f.status, 0) + 1
            if f.status != "ok":
                continue
            point, draws = f.params(), f.draws
        else:
            point, draws = draws_without_refusal(np.repeat(sizes, seeds), losses, opts)
        lo, hi = np.quantile(solve.law("N", draws, TARGETS), [0.025, 0.975], axis=0)
        hits += (lo <= truth(TARGETS)) & (truth(TARGETS) <= hi)
        widths.append(hi - lo)
        points.append(solve.law("N", point, TARGETS)[0])
    ideal = 2 * 1.96 * np.std(points, axis=0)
    return {"sizes": k, "seeds": seeds, "noise_nats": sigma, "resample_points": resample_points,
            "refusal": refusal, "fits": len(points), "statuses": statuses,
            "coverage": dict(zip(["5M", "60M", "360M"], np.round(hits / len(points), 3).tolist())),
            "width_over_ideal": dict(zip(["5M", "60M", "360M"], np.round(np.median(widths, axis=0) / ideal, 2).tolist()))}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<machine>_scaling_coverage.json)")
    args = ap.parse_args(argv)
    start = time.time()
    rows = [measure(*shape, args.reps, args.boot) for shape in SHAPES]
    rows.append(measure(4, 1, 0.01, True, args.reps, args.boot, refusal=False))
    for r in rows:
        print(f"{r['sizes']}x{r['seeds']} noise {r['noise_nats']} points {r['resample_points']} refusal {r['refusal']}: "
              f"coverage {r['coverage']} width/ideal {r['width_over_ideal']}", flush=True)
    record = {"seconds": round(time.time() - start, 1),
              "law": "L = 1.7 + 400 / N^0.34, sizes log-spaced over 1M-30M, Gaussian seed noise", "rows": rows}
    common.write(args.out, "scaling_coverage", record, argv)


if __name__ == "__main__":
    main()

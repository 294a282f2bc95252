"""How often foxwb.workbench.analysis.scaling.fit's 95% intervals cover the truth, on synthetic ladders.

    python benchmarks/scaling_coverage.py [--reps 200] [--boot 200] [--only law,crossing,chinchilla] [--out FILE]

Each ladder is drawn `reps` times from a known law with Gaussian seed noise and fitted as a study
fits it (`fit_law`, `crossing`; every fit's bootstrap seeded by the repetition). Three families:

- law: L = 1.7 + 400 / N^0.34, sizes log-spaced over 1M-30M, per ladder shape: the intervals of
  E, A, alpha and of the law's loss at 5M (inside the ladder), 60M and 360M. The row "4x1, no
  refusal" shows what `fit_law` refuses to give: the same bootstrap on the minimum ladder with one
  seed per size, run through the numerics modules.
- crossing: that law (X, extrapolate_to 360M) against Y = 1.5 + A_y / N^0.34, A_y chosen so that
  they cross at 10M (inside the ladder) or 100M (past it), and against Z = 1.8 + 400 / N^0.34,
  above X throughout: how often the crossing is found, and its interval's coverage.
- chinchilla: L(N, D) = 1.69 + 406.4 / N^0.34 + 410.7 / D^0.28 on sizes crossed with fixed token
  budgets or with tokens-per-parameter ratios: the intervals of E, A, alpha, B, beta and of the
  loss at 360M parameters and 7.2B tokens.

Per quantity: `coverage`, the share of ladders whose interval holds the truth (a ladder without an
interval counts as a miss); `width_over_ideal`, the median interval width over the width the
spread of the point fits asks for (3.92 standard deviations; of log values for A, B and crossing
sizes); `p95_rel_error`, the 95th percentile of the point fit's relative error. Prints the table,
writes JSON.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import common
from foxwb.workbench.analysis.scaling import solve
from foxwb.workbench.analysis.scaling.fit import FitOptions, crossing, fit_law
from foxwb.workbench.analysis.scaling.ladder import Ladder, resample

LAW = {"E": 1.7, "A": 400.0, "alpha": 0.34}
TARGETS = {"5M": 5e6, "60M": 6e7, "360M": 3.6e8}
# (sizes, seeds per size, noise in nats, resample_points)
SHAPES = [(5, 3, 0.01, True), (5, 3, 0.02, True), (5, 2, 0.01, True), (7, 3, 0.01, True), (4, 3, 0.01, True),
          (7, 1, 0.01, True), (5, 1, 0.01, True), (5, 3, 0.01, False)]
# The second law of a crossing pair: where it crosses X (None: it does not) and its (E, A).
CROSS_AT = {"10M": 1e7, "100M": 1e8}
PAIRS = {**{at: (1.5, 400.0 + 0.2 * n ** 0.34) for at, n in CROSS_AT.items()}, "none": (1.8, 400.0)}
CHINCHILLA = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
ND_AT = (3.6e8, 7.2e9)
# (sizes, "budgets" in tokens or "ratios" in tokens per parameter, their values, seeds, noise in nats)
ND_SHAPES = [(4, "budgets", (2e8, 1e9, 5e9), 2, 0.005), (4, "budgets", (2e8, 1e9, 5e9), 3, 0.01),
             (5, "ratios", (5, 20, 80), 2, 0.005), (5, "ratios", (5, 20), 2, 0.005), (3, "ratios", (5, 20), 2, 0.005)]
LOG = {"A", "B", "n"}  # scale quantities: widths compared on log values


def sizes_of(k: int) -> np.ndarray:
    return np.logspace(6, np.log10(3e7), k)


def loss_of(params: dict, n, d=None) -> np.ndarray:
    n = np.asarray(n, float)
    out = params["E"] + params["A"] * n ** -params["alpha"]
    return out if d is None else out + params["B"] * np.asarray(d, float) ** -params["beta"]


def noisy(rng, clean: np.ndarray, seeds: int, sigma: float) -> np.ndarray:
    """One loss per (point, seed), point-major, [k * seeds]."""
    return (clean[:, None] + sigma * rng.standard_normal((len(clean), seeds))).ravel()


def judge(rows: list[tuple[float, float, float]], truth: float, log: bool = False) -> dict:
    """rows: per ladder (point estimate, lo, hi), NaN where there is none. Coverage counts a ladder
    without an interval as a miss; width and error are over the ladders that have them."""
    point, lo, hi = np.array(rows, float).reshape(-1, 3).T
    if len(point) == 0:
        return {"coverage": None, "width_over_ideal": None, "p95_rel_error": None}
    f = np.log if log else (lambda v: v)
    has = np.isfinite(lo)
    ideal = 2 * 1.96 * np.std(f(point[has])) if has.sum() > 1 else np.nan
    width = float(np.median(f(hi[has]) - f(lo[has])) / ideal) if has.any() and ideal > 0 else None
    rel = np.abs(point[np.isfinite(point)] / truth - 1)
    return {"coverage": round(float(((lo <= truth) & (truth <= hi)).mean()), 3),
            "width_over_ideal": None if width is None else round(width, 2),
            "p95_rel_error": round(float(np.quantile(rel, 0.95)), 4) if len(rel) else None}


def summarise(rows: dict[str, list], truths: dict[str, float]) -> dict:
    out = {name: judge(rows[name], truths[name], name in LOG) for name in truths}
    return {key: {name: v[key] for name, v in out.items()} for key in ("coverage", "width_over_ideal", "p95_rel_error")}


def with_interval(point: float, draws: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(point), float(lo), float(hi)


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


def law_row(k: int, seeds: int, sigma: float, resample_points: bool, reps: int, n_boot: int,
            refusal: bool = True) -> dict:
    """One L(N) ladder shape: the intervals of E, A, alpha and of the loss at TARGETS."""
    sizes, rng = sizes_of(k), np.random.default_rng(2024)
    at = np.array(list(TARGETS.values()))
    rows, statuses = {name: [] for name in [*LAW, *TARGETS]}, {}
    for rep in range(reps):
        losses = noisy(rng, loss_of(LAW, sizes), seeds, sigma)
        opts = FitOptions(n_boot=n_boot, seed=rep, resample_points=resample_points)
        if refusal:
            f = fit_law("v", np.repeat(sizes, seeds), losses, options=opts)
            statuses[f.status] = statuses.get(f.status, 0) + 1
            if f.status != "ok":
                continue
            point, draws = f.params(), f.draws
        else:
            point, draws = draws_without_refusal(np.repeat(sizes, seeds), losses, opts)
        for i, name in enumerate(LAW):
            rows[name].append(with_interval(point[i], draws[:, i]))
        for name, p, d in zip(TARGETS, solve.law("N", point, at)[0], solve.law("N", draws, at).T):
            rows[name].append(with_interval(p, d))
    truths = {**LAW, **{name: float(loss_of(LAW, n)) for name, n in TARGETS.items()}}
    return {"family": "law", "sizes": k, "seeds": seeds, "noise_nats": sigma, "resample_points": resample_points,
            "refusal": refusal, "fits": len(rows["E"]), "statuses": statuses, **summarise(rows, truths)}


def crossing_rows(k: int, seeds: int, sigma: float, reps: int, n_boot: int, pairs: tuple = tuple(PAIRS)) -> list[dict]:
    """X against each law of PAIRS named in `pairs` on the same ladder shape, fitted with the same
    options (as a study fits its variants): per pair how often the point fits cross, the crossing
    size's interval, and the share of bootstrap pairs that cross."""
    sizes, rng = sizes_of(k), np.random.default_rng(2025)
    found = {name: [] for name in pairs}
    rows = {name: [] for name in pairs}
    shares = {name: [] for name in pairs}
    for rep in range(reps):
        opts = FitOptions(n_boot=n_boot, seed=rep)
        x = fit_law("X", np.repeat(sizes, seeds), noisy(rng, loss_of(LAW, sizes), seeds, sigma),
                    extrapolate_to="360M", options=opts)
        for name in pairs:
            e, a = PAIRS[name]
            y = fit_law("Y", np.repeat(sizes, seeds), noisy(rng, loss_of({**LAW, "E": e, "A": a}, sizes), seeds, sigma),
                        options=opts)
            c = crossing(x, y)
            found[name].append(c.n is not None)
            shares[name].append(np.nan if c.share_crossing is None else c.share_crossing)
            rows[name].append((np.nan, np.nan, np.nan) if c.n is None else
                              (c.n.value, np.nan if c.n.lo is None else c.n.lo, np.nan if c.n.hi is None else c.n.hi))
    out = []
    for name in pairs:
        (e, a), truth = PAIRS[name], CROSS_AT.get(name)
        row = {"family": "crossing", "sizes": k, "seeds": seeds, "noise_nats": sigma, "pair": name,
               "law_y": f"{e} + {a:.2f} / N^0.34", "truth": truth, "fits": reps,
               "found": round(float(np.mean(found[name])), 3),
               "share_crossing_median": round(float(np.nanmedian(shares[name])), 3)}
        if truth is not None:
            row |= judge(rows[name], truth, log=True)
            hit = [lo <= truth <= hi for _, lo, hi in rows[name] if np.isfinite(lo)]
            row["coverage_when_found"] = round(float(np.mean(hit)), 3) if hit else None
        out.append(row)
    return out


def chinchilla_row(k: int, kind: str, values: tuple, seeds: int, sigma: float, reps: int, n_boot: int) -> dict:
    """One L(N, D) ladder: k sizes, each at every budget (tokens) or ratio (tokens per parameter)."""
    n, v = (a.ravel() for a in np.meshgrid(sizes_of(k), np.array(values, float)))
    d = v if kind == "budgets" else n * v
    rng = np.random.default_rng(2026)
    rows, statuses = {name: [] for name in [*CHINCHILLA, "prediction"]}, {}
    for rep in range(reps):
        f = fit_law("v", np.repeat(n, seeds), noisy(rng, loss_of(CHINCHILLA, n, d), seeds, sigma), np.repeat(d, seeds),
                    extrapolate_to=ND_AT[0], extrapolate_tokens=ND_AT[1], options=FitOptions(n_boot=n_boot, seed=rep))
        statuses[f.status] = statuses.get(f.status, 0) + 1
        if f.status != "ok":
            continue
        for name in rows:
            est = getattr(f, name)
            rows[name].append((est.value, est.lo, est.hi))
    truths = {**CHINCHILLA, "prediction": float(loss_of(CHINCHILLA, *ND_AT))}
    return {"family": "chinchilla", "sizes": k, kind: list(values), "seeds": seeds, "noise_nats": sigma,
            "fits": len(rows["E"]), "statuses": statuses, **summarise(rows, truths)}


def label(r: dict) -> str:
    if r["family"] == "crossing":
        return f"crossing {r['pair']}, {r['sizes']} sizes x {r['seeds']} seeds, noise {r['noise_nats']}"
    grid = ""
    if r["family"] == "chinchilla":
        grid = (f" x budgets {'/'.join(f'{v:.3g}' for v in r['budgets'])} tokens" if "budgets" in r
                else f" x {'/'.join(f'{v:g}' for v in r['ratios'])} tokens per param")
    extra = "" if r.get("resample_points", True) else ", seeds resampled only"
    extra += "" if r.get("refusal", True) else ", no refusal"
    return f"{r['family']} {r['sizes']} sizes{grid} x {r['seeds']} seeds, noise {r['noise_nats']}{extra}"


def show(r: dict) -> str:
    if r["family"] == "crossing":
        cover = "" if r["truth"] is None else (f" coverage {r['coverage']} (when found {r['coverage_when_found']}) "
                                              f"width/ideal {r['width_over_ideal']}")
        return f"{label(r)}: found {r['found']} share_crossing median {r['share_crossing_median']}{cover}"
    return f"{label(r)}: fits {r['fits']} coverage {r['coverage']} width/ideal {r['width_over_ideal']}"


def measure(families: list[str], reps: int, n_boot: int) -> list[dict]:
    rows = []
    if "law" in families:
        rows += [law_row(*shape, reps, n_boot) for shape in SHAPES]
        rows.append(law_row(4, 1, 0.01, True, reps, n_boot, refusal=False))
    if "crossing" in families:
        rows += crossing_rows(5, 3, 0.01, reps, n_boot)
    if "chinchilla" in families:
        rows += [chinchilla_row(*shape, reps, n_boot) for shape in ND_SHAPES]
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--only", default="law,crossing,chinchilla", help="families, comma-separated")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<machine>_scaling_coverage.json)")
    args = ap.parse_args(argv)
    families = args.only.split(",")
    if not families or set(families) - {"law", "crossing", "chinchilla"}:
        ap.error(f"--only {args.only!r}: families among law, crossing, chinchilla")
    start, rows = time.time(), []
    for family in families:
        t = time.time()
        got = measure([family], args.reps, args.boot)
        for r in got:
            print(show(r), flush=True)
        print(f"({family}: {time.time() - t:.0f} s)", flush=True)
        rows += got
    record = {"seconds": round(time.time() - start, 1), "reps": args.reps, "n_boot": args.boot,
              "laws": {"law": "L = 1.7 + 400 / N^0.34, sizes log-spaced over 1M-30M, Gaussian seed noise",
                       "crossing": {name: f"X vs {e} + {a:.2f} / N^0.34" for name, (e, a) in PAIRS.items()},
                       "chinchilla": "L = 1.69 + 406.4 / N^0.34 + 410.7 / D^0.28, predicted at 360M params, 7.2B tokens"},
              "rows": rows}
    common.write(args.out, "scaling_coverage", record, argv)


if __name__ == "__main__":
    main()

"""Scaling-law fits per variant with bootstrap intervals, and where two variants' laws cross
(docs/scaling.md). numpy/scipy only: the caller passes one row per finished run (parameter count,
optionally tokens, final loss in nats); runs at the same size (and tokens) are the seeds of one
ladder point. A result that cannot be trusted carries a status and a reason instead of numbers.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields

import numpy as np

from foxwb.workbench.analysis.scaling import solve
from foxwb.workbench.analysis.scaling.cross import first_crossing, size_grid
from foxwb.workbench.analysis.scaling.ladder import Ladder, resample
from foxwb.workbench.spec.counts import parse_count

FORMS = {"N": "L(N) = E + A/N^alpha", "ND": "L(N, D) = E + A/N^alpha + B/D^beta"}
# A fit needs one distinct ladder point more than it has parameters, so that a residual degree of
# freedom is left: with exactly as many points as parameters any such law passes through them all.
MIN_POINTS = {"N": 4, "ND": 6}
# Intervals are refused when more than this share of the bootstrap refits failed: the survivors
# would be a biased sample of the resamples.
MAX_BOOT_FAILED = 0.1
@dataclass(frozen=True)
class FitOptions:
    """level: the intervals' nominal coverage (0.95: the 2.5th to 97.5th percentile of the refits);
    n_boot: bootstrap resamples (0: no intervals); huber_delta: where the loss on log-loss residuals
    turns from quadratic to linear (1e-3: 0.1% of the loss); resample_points: resample ladder points
    as well as the seeds within them; seed: of the resampling; max_iter: of the optimiser."""
    level: float = 0.95
    n_boot: int = 200
    huber_delta: float = 1e-3
    resample_points: bool = True
    seed: int = 0
    max_iter: int = 500

    def __post_init__(self):
        for name, ok, allowed in (("level", 0 < self.level < 1, "between 0 and 1"),
                                  ("n_boot", self.n_boot >= 0, ">= 0"),
                                  ("huber_delta", self.huber_delta > 0, "> 0"),
                                  ("max_iter", self.max_iter >= 1, ">= 1")):
            if not ok:
                raise ValueError(f"FitOptions.{name} = {getattr(self, name)!r}: must be {allowed}")


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its bootstrap percentile interval (lo, hi: None without intervals)."""
    value: float
    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True)
class LawFit:
    """One variant's law. status: "ok" (fit and intervals), "point_only" (the fit, but intervals
    refused: reason says why) or "refused" (no numbers: reason says why). E in nats, A in
    nats * params^alpha, B in nats * tokens^beta; sizes (the ladder's smallest and largest) and
    extrapolate_to in parameters, extrapolate_tokens in tokens; prediction: the law's loss there in
    nats. n_boot: bootstrap refits behind the intervals; boot_failed: refits that did not converge
    (dropped). draws: those refits as rows [E, A, alpha(, B, beta)], for bands and crossings;
    to_dict leaves it out."""
    variant: str
    form: str
    status: str
    reason: str = ""
    n_points: int = 0
    n_runs: int = 0
    sizes: tuple[float, float] | None = None
    E: Estimate | None = None
    A: Estimate | None = None
    alpha: Estimate | None = None
    B: Estimate | None = None
    beta: Estimate | None = None
    extrapolate_to: float | None = None
    extrapolate_tokens: float | None = None
    prediction: Estimate | None = None
    level: float = 0.95
    n_boot: int = 0
    boot_failed: int = 0
    draws: np.ndarray | None = field(default=None, repr=False, compare=False)

    def params(self) -> np.ndarray:
        """The point estimate [E, A, alpha(, B, beta)]."""
        return np.array([getattr(self, k).value for k in solve.PARAMS[self.form]])

    def predict(self, n, d=None) -> np.ndarray:
        """The fitted law's loss in nats at sizes n [G] (parameters) and, for L(N, D), tokens d."""
        if self.status == "refused":
            raise ValueError(f"{self.variant}: no law to predict with ({self.reason})")
        return solve.law(self.form, self.params(), n, d)[0]

    def to_dict(self) -> dict:
        return plain(self)


@dataclass(frozen=True)
class Crossing:
    """Where the laws of variants (a, b) cross, searched over sizes search_range (parameters) at
    tokens (L(N, D) only). n: the first crossing size with its interval over the bootstrap pairs
    that cross, or None (reason says why). lower_above: the variant with the lower loss just above
    the crossing. share_crossing: the share of bootstrap pairs whose laws cross in the range (how
    sure the answer "they cross" is); None without bootstrap draws."""
    variants: tuple[str, str]
    n: Estimate | None
    reason: str = ""
    lower_above: str | None = None
    n_crossings: int = 0
    share_crossing: float | None = None
    n_pairs: int = 0
    search_range: tuple[float, float] | None = None
    tokens: float | None = None
    level: float = 0.95

    def to_dict(self) -> dict:
        return plain(self)


def plain(obj):
    """A JSON-able copy of a result: dataclasses to dicts (without bootstrap draws), tuples to lists."""
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: plain(getattr(obj, f.name)) for f in fields(obj) if f.name != "draws"}
    if isinstance(obj, (tuple, list)):
        return [plain(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return obj


# E below this share of the law's size term at the largest ladder size counts as at its bound 0.
E_AT_BOUND = 1e-6


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _check_runs(form: str, n, d, loss) -> str:
    """Why these runs cannot be fitted ("" when they can)."""
    for name, arr in (("size", n), ("tokens", d), ("loss", loss)):
        bad = np.zeros(0, bool) if arr is None else ~(np.isfinite(arr) & (arr > 0))
        if bad.any():
            return (f"{bad.sum()} non-finite or non-positive {name} value(s) (runs "
                    f"{np.flatnonzero(bad)[:5].tolist()}: {arr[bad][:5].tolist()})")
    points = len(np.unique(np.stack([n, n if d is None else d]), axis=1).T)
    if points < MIN_POINTS[form]:
        return (f"{points} distinct ladder point(s); {FORMS[form]} needs at least {MIN_POINTS[form]}, "
                f"one more than its {len(solve.PARAMS[form])} parameters")
    if form == "ND" and min(len(np.unique(n)), len(np.unique(d))) < 3:
        return "L(N, D) needs at least 3 distinct sizes and 3 distinct token counts to tell its two terms apart"
    return ""


def _point_fit(frame: solve.Frame, ladder: Ladder, opts: FitOptions) -> tuple[np.ndarray | None, str]:
    """The lowest-objective converged fit over the grid of starts: (theta [p], "") or (None, why not)."""
    x, log_mean = np.log(ladder.sizes), np.log(ladder.means)
    y = None if ladder.tokens is None else np.log(ladder.tokens)
    th0 = solve.starts(frame, x, y, log_mean)
    theta, ok = solve.fit_batch(frame, th0, x, y, np.broadcast_to(log_mean, (len(th0), len(x))),
                                opts.huber_delta, opts.max_iter)
    if not ok.any():
        return None, f"the fit did not converge from any of {len(th0)} starts in {opts.max_iter} iterations"
    obj = solve.huber(solve.log_pred(frame, theta, x, y) - log_mean, opts.huber_delta).sum(axis=1)
    return theta[np.where(ok, obj, np.inf).argmin()], ""


def _bootstrap(frame: solve.Frame, ladder: Ladder, theta, opts: FitOptions) -> tuple[np.ndarray | None, int, str]:
    """Refits on opts.n_boot resamples, each started from the point fit theta: (public rows [B, p] of
    the converged refits, failed refits, "") or (None, failed, why the intervals are refused)."""
    if opts.n_boot == 0:
        return None, 0, "n_boot = 0: no intervals"
    rng = np.random.default_rng(opts.seed)
    # A resample must determine the law: as many distinct points as parameters, and (what matters
    # for L(N, D) only) three distinct sizes and token counts; others are drawn again (docs/scaling.md).
    idx, means = resample(rng, ladder, opts.n_boot, len(theta), 3, opts.resample_points)
    y = None if ladder.tokens is None else np.log(ladder.tokens)[idx]
    fitted, ok = solve.fit_batch(frame, theta, np.log(ladder.sizes)[idx], y, np.log(means),
                                 opts.huber_delta, opts.max_iter)
    failed = opts.n_boot - int(ok.sum())
    if failed > MAX_BOOT_FAILED * opts.n_boot:
        return None, failed, f"{failed} of {opts.n_boot} bootstrap refits failed (over {MAX_BOOT_FAILED:.0%}): no intervals"
    return solve.to_public(frame, fitted[ok]), failed, ""


def _as_runs(variant: str, sizes, losses, tokens):
    n, loss = np.asarray(sizes, float).ravel(), np.asarray(losses, float).ravel()
    d = None if tokens is None else np.asarray(tokens, float).ravel()
    if len(n) != len(loss) or (d is not None and len(d) != len(n)) or len(n) == 0:
        raise ValueError(f"{variant}: sizes, losses (and tokens) need one value per run, at least one run "
                         f"(got {len(n)}, {len(loss)}{'' if d is None else f', {len(d)}'})")
    return n, d, loss


def fit_law(variant: str, sizes, losses, tokens=None, *, extrapolate_to=None, extrapolate_tokens=None,
            options: FitOptions = FitOptions()) -> LawFit:
    """Fits L(N) = E + A/N^alpha, or with tokens L(N, D) = E + A/N^alpha + B/D^beta, to one variant's
    runs: sizes [R] in parameters (non-embedding), losses [R] in nats, tokens [R]; runs with the
    same size (and tokens) are seeds of one ladder point. The fit uses the per-point seed means and
    the Huber loss of log residuals; intervals come from bootstrap refits (docs/scaling.md).
    extrapolate_to: a size (number or text like "360M") where the law's loss is predicted with its
    interval; extrapolate_tokens: the tokens there (L(N, D) only)."""
    form = "N" if tokens is None else "ND"
    n, d, loss = _as_runs(variant, sizes, losses, tokens)
    at_n = None if extrapolate_to is None else parse_count(extrapolate_to)
    at_d = None if extrapolate_tokens is None else parse_count(extrapolate_tokens)
    if form == "ND" and at_n is not None and at_d is None:
        raise ValueError(f"{variant}: an L(N, D) prediction at extrapolate_to needs extrapolate_tokens")
    base = dict(variant=variant, form=form, n_runs=len(n), level=options.level, extrapolate_to=at_n,
                extrapolate_tokens=at_d)
    why = _check_runs(form, n, d, loss)
    if why:
        return LawFit(status="refused", reason=why, n_points=len(np.unique(n)), **base)
    ladder = Ladder.from_runs(n, d, loss)
    base |= dict(n_points=len(ladder.sizes), sizes=(float(ladder.sizes.min()), float(ladder.sizes.max())))
    frame = solve.Frame(form, float(np.log(ladder.sizes).mean()),
                        0.0 if d is None else float(np.log(ladder.tokens).mean()))
    theta, why = _point_fit(frame, ladder, options)
    if theta is None:
        return LawFit(status="refused", reason=why, **base)
    point = solve.to_public(frame, theta[None])[0]
    if (point[2::2] <= 0).any():
        return LawFit(status="refused", reason=f"fitted exponent(s) {point[2::2].round(4).tolist()} <= 0: the loss "
                      "does not fall with size on this ladder, so no power law is fitted", **base)
    if len(ladder.sizes) == MIN_POINTS[form] and ladder.counts.max() == 1:
        # Measured (docs/scaling.md): here a 95% interval covers the truth only 50-75% of the time.
        return _result(base, point, None, 0, f"only {len(ladder.sizes)} ladder points with one seed each: "
                       "bootstrap intervals would cover far less often than their level says, so none are given")
    draws, failed, why = _bootstrap(frame, ladder, theta, options)
    return _result(base, point, draws, failed, why)


def _result(base: dict, point: np.ndarray, draws: np.ndarray | None, failed: int, why: str) -> LawFit:
    form, level, at_n, at_d = base["form"], base["level"], base["extrapolate_to"], base["extrapolate_tokens"]
    est = {}
    for i, name in enumerate(solve.PARAMS[form]):
        est[name] = Estimate(float(point[i]), *(() if draws is None else _interval(draws[:, i], level)))
    bound = E_AT_BOUND * point[1] / base["sizes"][1] ** point[2]
    if (est["E"].value if est["E"].lo is None else est["E"].lo) < bound:
        # E is exp(theta) > 0: a fit (or refits) that drive it to 0 find no floor on the ladder.
        which = "E" if est["E"].value < bound else "E's interval"
        why = "; ".join(filter(None, [why, f"{which} reaches its bound 0: the ladder shows no floor under the loss, so the "
                                      "law may be a pure power law and an extrapolation assumes the loss falls without limit"]))
    pred = None
    if at_n is not None:
        pred = Estimate(float(solve.law(form, point, at_n, at_d)[0, 0]),
                        *(() if draws is None else _interval(solve.law(form, draws, at_n, at_d)[:, 0], level)))
    return LawFit(status="point_only" if draws is None else "ok", reason=why, prediction=pred, draws=draws,
                  n_boot=0 if draws is None else len(draws), boot_failed=failed, **est, **base)


def crossing(a: LawFit, b: LawFit, *, tokens=None, beyond: float = 2.0) -> Crossing:
    """Where the laws of a and b cross over sizes from the smallest ladder size to `beyond` times the
    largest of the ladder sizes and extrapolate_to (parameters); L(N, D) laws are compared at a fixed
    token count `tokens`. The point fits give the answer; pairs of bootstrap refits (a's i-th with
    b's i-th) give its interval and the share of pairs that cross (docs/scaling.md)."""
    names = (a.variant, b.variant)
    at_d = None if tokens is None else parse_count(tokens)
    for f in (a, b):
        if f.status == "refused":
            return Crossing(names, None, reason=f"{f.variant}: no law ({f.reason})", tokens=at_d)
    if a.form != b.form:
        return Crossing(names, None, reason=f"the laws have different forms ({a.form}, {b.form})", tokens=at_d)
    if a.form == "ND" and at_d is None:
        raise ValueError(f"crossing of L(N, D) laws {names}: needs tokens, the token count to compare them at")
    if not beyond >= 1:
        raise ValueError(f"crossing: beyond = {beyond!r}: must be >= 1")
    top = max(a.sizes[1], b.sizes[1], a.extrapolate_to or 0.0, b.extrapolate_to or 0.0)
    span = (min(a.sizes[0], b.sizes[0]), beyond * top)
    grid = size_grid(*span)
    at, count, sign = first_crossing(grid, a.predict(grid, at_d)[None] - b.predict(grid, at_d)[None])
    base = dict(search_range=span, tokens=at_d, level=a.level, n_crossings=int(count[0]))
    share, n_pairs, interval = None, 0, ()
    if a.draws is not None and b.draws is not None:
        n_pairs = min(len(a.draws), len(b.draws))
        diff = solve.law(a.form, a.draws[:n_pairs], grid, at_d) - solve.law(b.form, b.draws[:n_pairs], grid, at_d)
        boot_at = first_crossing(grid, diff)[0]
        share = float(np.isfinite(boot_at).mean())
        if share > 0:
            interval = _interval(boot_at[np.isfinite(boot_at)], a.level)
    if count[0] == 0:
        lower = names[0] if a.predict(grid[-1:], at_d)[0] < b.predict(grid[-1:], at_d)[0] else names[1]
        some = f" (but {share:.0%} of the bootstrap pairs cross there)" if share else ""
        return Crossing(names, None, reason=f"no crossing in {span[0]:.3g}..{span[1]:.3g} parameters: "
                        f"{lower} is lower throughout{some}", share_crossing=share, n_pairs=n_pairs, **base)
    return Crossing(names, Estimate(float(at[0]), *interval), lower_above=names[0] if sign[0] < 0 else names[1],
                    share_crossing=share, n_pairs=n_pairs, **base)


def compare(fits: list[LawFit], *, tokens=None, beyond: float = 2.0) -> list[Crossing]:
    """The crossing of every pair of fits, in the order given."""
    return [crossing(a, b, tokens=tokens, beyond=beyond) for a, b in itertools.combinations(fits, 2)]

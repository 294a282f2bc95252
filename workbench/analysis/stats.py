"""Statistics over seeds, on numpy and scipy: the mean and its confidence interval, the paired and
the unpaired (Welch) comparison with a base, equivalence within a margin (two one-sided tests,
TOST), the power of those tests (Welch's with unequal spreads
and seeds too) and the minimal detectable effect (MDE), the seeds an effect needs, effects stated as fractions, and Holm's correction.
Pure functions on plain numbers; ``docs/statistics.md`` gives the formulas and what they assume.

Values are in the metric's own units (perplexity, nats of loss, tokens/s); n counts seeds. Data a
real study produces (one seed, NaN, equal seeds) gives ``None`` where a number is undefined; a
nonsense argument (alpha 1.5, n = 1 for a power calculation) raises ``ValueError`` naming it."""
from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
from scipy import optimize, stats


class MeanCI(NamedTuple):
    mean: float | None  # None when there are no values
    half_width: float | None  # of the two-sided CI; None for n < 2
    n: int
    sd: float | None  # sample standard deviation (ddof = 1); None for n < 2


class Paired(NamedTuple):
    delta: float | None  # mean of the per-seed differences variant - base
    half_width: float | None  # of its two-sided CI; None for n < 2
    p: float | None  # two-sided paired t-test; None for n < 2 or when undefined
    n: int  # seeds both have
    sd: float | None  # standard deviation of the differences (what paired power and MDE take)


class SeedsNeeded(NamedTuple):
    n: int | None  # smallest n reaching the power; None when unknown or above ``cap``
    power: float | None  # the power at ``n``
    cap: int
    exceeds_cap: bool  # True: even ``cap`` seeds fall short (a zero effect always does)

    def __str__(self) -> str:
        return str(self.n) if self.n is not None else (f"> {self.cap}" if self.exceeds_cap else "n/a")


def _values(values: Iterable[float | None]) -> np.ndarray:
    # None and NaN are missing values (a metric a run did not log): they are left out, not zeros.
    x = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    return x[~np.isnan(x)]


def _sd(x: np.ndarray) -> float:
    # Exactly 0 when all values are equal: np.std of [0.1] * 3 gives ~1e-17 through rounding.
    return 0.0 if np.ptp(x) == 0 else float(np.std(x, ddof=1))


def _check_fraction(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}")


def _check_n(name: str, n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"{name} must be an integer >= 2 (a t-test needs two values), got {n!r}")


def _missing(x: float | None) -> bool:
    return x is None or math.isnan(x)


def t_half_width(sd: float, n: int, confidence: float = 0.95) -> float | None:
    """Half-width of the two-sided Student t CI of a mean of ``n`` values with sample standard
    deviation ``sd`` (units of the values): t((1 + confidence) / 2, n - 1) * sd / sqrt(n)."""
    _check_fraction("confidence", confidence)
    if n < 2 or _missing(sd):
        return None
    return float(stats.t.ppf((1 + confidence) / 2, n - 1) * sd / math.sqrt(n))


def mean_ci(values: Iterable[float | None], confidence: float = 0.95) -> MeanCI:
    """Mean of the values (one per seed) with its Student t CI half-width, n and sd."""
    x = _values(values)
    if len(x) == 0:
        return MeanCI(None, None, 0, None)
    sd = _sd(x) if len(x) > 1 else None
    return MeanCI(float(x.mean()), t_half_width(sd, len(x), confidence), len(x), sd)


def paired(variant: Mapping[Hashable, float | None], base: Mapping[Hashable, float | None],
           confidence: float = 0.95) -> Paired:
    """Paired comparison over the seeds both have (``seed -> value``; one value per seed): the mean
    of the differences variant - base, its CI, and the two-sided one-sample t-test of the
    differences against 0 (the paired t-test). A seed fixes the data order of every variant, so
    the difference cancels what the seed alone moves."""
    _check_fraction("confidence", confidence)
    seeds = [s for s in variant if s in base and not _missing(variant[s]) and not _missing(base[s])]
    d = np.array([variant[s] - base[s] for s in seeds], dtype=np.float64)
    if len(d) == 0:
        return Paired(None, None, None, 0, None)
    delta = float(d.mean())
    if len(d) < 2:
        return Paired(delta, None, None, 1, None)
    sd = _sd(d)
    if sd == 0:
        # Every seed moved by the same amount: t is infinite (p = 0), or 0/0 when that amount is 0.
        p = 0.0 if delta != 0 else None
    else:
        p = float(2 * stats.t.sf(abs(delta) / (sd / math.sqrt(len(d))), len(d) - 1))
    return Paired(delta, t_half_width(sd, len(d), confidence), p, len(d), sd)


def welch_p(a: Iterable[float | None], b: Iterable[float | None]) -> float | None:
    """Two-sided p-value of Welch's t-test (unequal variances) of two unpaired samples; None when
    either has fewer than 2 values or the p is undefined (both samples one and the same constant)."""
    x, y = _values(a), _values(b)
    if len(x) < 2 or len(y) < 2:
        return None
    if _sd(x) == 0 and _sd(y) == 0:
        # No spread in either: t is infinite (p = 0), or 0/0 when the values are the same.
        return 0.0 if x[0] != y[0] else None
    p = stats.ttest_ind(x, y, equal_var=False).pvalue
    return None if math.isnan(p) else float(p)


class Welch(NamedTuple):
    delta: float | None  # mean of a - mean of b
    half_width: float | None  # of its two-sided CI (Welch-Satterthwaite df); None when undefined
    p: float | None  # two-sided Welch t-test, as welch_p
    df: float | None


def welch(a: Iterable[float | None], b: Iterable[float | None], confidence: float = 0.95) -> Welch:
    """Unpaired comparison of two samples (two studies' seeds of one variant, say): the difference
    of the means, its Welch CI (t on the Welch-Satterthwaite degrees of freedom, unequal variances)
    and Welch's two-sided p."""
    _check_fraction("confidence", confidence)
    x, y = _values(a), _values(b)
    if len(x) == 0 or len(y) == 0:
        return Welch(None, None, None, None)
    if len(x) < 2 or len(y) < 2:
        return Welch(float(x.mean() - y.mean()), None, None, None)
    return welch_summary(float(x.mean()), _sd(x), len(x), float(y.mean()), _sd(y), len(y), confidence)


def welch_summary(mean_a: float | None, sd_a: float | None, n_a: int | None, mean_b: float | None,
                  sd_b: float | None, n_b: int | None, confidence: float = 0.95) -> Welch:
    """Welch's comparison from each sample's mean, sd and count (what ``welch`` computes from the
    values; an effect's per-seed differences at two points of an axis, known by their summary):
    the difference, its CI on the Welch-Satterthwaite df, and the two-sided p (0 when neither
    sample has spread and the means differ, None when they are equal)."""
    _check_fraction("confidence", confidence)
    if _missing(mean_a) or _missing(mean_b):
        return Welch(None, None, None, None)
    delta = float(mean_a - mean_b)
    if not n_a or not n_b or n_a < 2 or n_b < 2 or _missing(sd_a) or _missing(sd_b):
        return Welch(delta, None, None, None)
    va, vb = sd_a ** 2 / n_a, sd_b ** 2 / n_b
    if va + vb == 0:
        return Welch(delta, 0.0, 0.0 if delta != 0 else None, None)
    df = (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1))
    se = math.sqrt(va + vb)
    return Welch(delta, float(stats.t.ppf((1 + confidence) / 2, df) * se), float(2 * stats.t.sf(abs(delta) / se, df)),
                 float(df))


class Equivalence(NamedTuple):
    p: float | None  # TOST: the larger of the two one-sided p; below alpha, the mean lies within +-bound
    p_lower: float | None  # one-sided, of the null "mean <= -bound"
    p_upper: float | None  # one-sided, of the null "mean >= +bound"
    delta: float | None  # the mean difference tested


def tost_summary(delta: float | None, se: float | None, df: float | None, bound: float) -> Equivalence:
    """Two one-sided tests (TOST) that a mean difference ``delta`` with standard error ``se`` on
    ``df`` degrees of freedom lies within (-bound, +bound): t_lower = (delta + bound) / se against
    "mean <= -bound" (upper tail), t_upper = (delta - bound) / se against "mean >= +bound" (lower
    tail); p = max of the two. p < alpha is the (1 - 2 alpha) CI inside the margin. With se 0 a
    side's p is 0 where delta lies strictly inside it, else 1; None where delta, se or df is unknown."""
    if not bound > 0:
        raise ValueError(f"bound must be > 0 (the margin of equivalence), got {bound!r}")
    if _missing(delta) or _missing(se) or _missing(df):
        return Equivalence(None, None, None, None if _missing(delta) else float(delta))
    if se == 0:
        lower, upper = float(delta <= -bound), float(delta >= bound)
    else:
        lower = float(stats.t.sf((delta + bound) / se, df))
        upper = float(stats.t.cdf((delta - bound) / se, df))
    return Equivalence(max(lower, upper), lower, upper, float(delta))


def tost_paired(variant: Mapping[Hashable, float | None], base: Mapping[Hashable, float | None],
                bound: float) -> Equivalence:
    """TOST of the per-seed differences variant - base over the seeds both have (as ``paired``):
    is their mean within +-``bound`` (metric units; for a perplexity margin on a loss metric,
    ``loss_effect_of_ppl_fraction``)? None p for fewer than 2 seeds."""
    seeds = [s for s in variant if s in base and not _missing(variant[s]) and not _missing(base[s])]
    d = np.array([variant[s] - base[s] for s in seeds], dtype=np.float64)
    if len(d) < 2:
        return tost_summary(float(d.mean()) if len(d) else None, None, None, bound)
    return tost_summary(float(d.mean()), _sd(d) / math.sqrt(len(d)), len(d) - 1, bound)


def tost_welch(a: Iterable[float | None], b: Iterable[float | None], bound: float) -> Equivalence:
    """TOST of the difference of the means a - b of two unpaired samples, Welch's standard error
    and Welch-Satterthwaite df: within +-``bound``? None p where either has fewer than 2 values."""
    x, y = _values(a), _values(b)
    if len(x) < 2 or len(y) < 2:
        return tost_summary(float(x.mean() - y.mean()) if len(x) and len(y) else None, None, None, bound)
    va, vb = _sd(x) ** 2 / len(x), _sd(y) ** 2 / len(y)
    df = (va + vb) ** 2 / (va ** 2 / (len(x) - 1) + vb ** 2 / (len(y) - 1)) if va + vb > 0 else math.inf
    return tost_summary(float(x.mean() - y.mean()), math.sqrt(va + vb), df, bound)


def pooled_sd(a: Iterable[float | None], b: Iterable[float | None]) -> float | None:
    """Pooled standard deviation of two samples, sqrt(((n_a-1) s_a^2 + (n_b-1) s_b^2) / (n_a+n_b-2)),
    the sd the unpaired power and MDE take; None when there are fewer than 3 values in all."""
    x, y = _values(a), _values(b)
    if len(x) + len(y) < 3:
        return None
    ss = sum((len(v) - 1) * _sd(v) ** 2 for v in (x, y) if len(v) > 1)
    return math.sqrt(ss / (len(x) + len(y) - 2))


def _design(n: int, n_other: int | None) -> tuple[int, float]:
    """(degrees of freedom, sqrt of the effective n) of a design: ncp = effect / sd * that root.
    One sample (paired) when ``n_other`` is None, else two samples of n and n_other."""
    _check_n("n", n)
    if n_other is None:
        return n - 1, math.sqrt(n)
    _check_n("n_other", n_other)
    return n + n_other - 2, math.sqrt(n * n_other / (n + n_other))


def _power_ncp(ncp: float, df: int, alpha: float) -> float:
    # Two-sided: rejection in either tail of the noncentral t. The lower tail P(T < -crit | ncp) is
    # taken as P(T > crit | -ncp): scipy's nct.cdf returns NaN far out in that tail, its sf does not.
    crit = stats.t.ppf(1 - alpha / 2, df)
    return min(1.0, float(stats.nct.sf(crit, df, ncp) + stats.nct.sf(crit, df, -ncp)))


def _power(effect: float, sd: float | None, n: int, alpha: float, n_other: int | None) -> float | None:
    _check_fraction("alpha", alpha)
    df, root = _design(n, n_other)
    if _missing(effect) or _missing(sd):
        return None
    if sd < 0:
        raise ValueError(f"sd must be >= 0, got {sd!r}")
    if sd == 0:
        # No noise: any nonzero effect is certain to show; a zero effect is the null, rejected at alpha.
        return 1.0 if effect != 0 else alpha
    return _power_ncp(abs(effect) / sd * root, df, alpha)


def power_paired(effect: float, sd: float | None, n: int, alpha: float = 0.05) -> float | None:
    """Power of the two-sided paired t-test over ``n`` seeds to detect a true mean difference
    ``effect`` (metric units) when the per-seed differences have standard deviation ``sd``: the
    exact noncentral t, df = n - 1, ncp = effect / sd * sqrt(n). None when effect or sd is unknown."""
    return _power(effect, sd, n, alpha, None)


def power_unpaired(effect: float, sd: float | None, n: int, alpha: float = 0.05,
                   n_other: int | None = None) -> float | None:
    """Power of the two-sided two-sample t-test with ``n`` and ``n_other`` (default ``n``) seeds
    and pooled standard deviation ``sd``: df = n + n_other - 2, ncp = effect / sd * sqrt(n n_other
    / (n + n_other)). Welch's test has about this power when the variances are alike."""
    return _power(effect, sd, n, alpha, n if n_other is None else n_other)


def _check_target(alpha: float, power: float) -> None:
    _check_fraction("alpha", alpha)
    _check_fraction("power", power)
    if power <= alpha:
        raise ValueError(f"power must exceed alpha ({alpha}): a zero effect is rejected at rate alpha; got {power!r}")


def _ncp_for_power(power: float, df: float, alpha: float) -> float:
    """The noncentrality at which the two-sided t-test on ``df`` reaches ``power``. Power rises
    with the noncentrality from alpha at 0: bracket the target, then solve."""
    hi = 1.0
    while _power_ncp(hi, df, alpha) < power:
        hi *= 2
    return optimize.brentq(lambda c: _power_ncp(c, df, alpha) - power, 0.0, hi, xtol=1e-12, rtol=1e-12)


def _mde(sd: float | None, n: int, alpha: float, power: float, n_other: int | None) -> float | None:
    _check_target(alpha, power)
    df, root = _design(n, n_other)
    if _missing(sd):
        return None
    if sd < 0:
        raise ValueError(f"sd must be >= 0, got {sd!r}")
    if sd == 0:
        return 0.0
    return _ncp_for_power(power, df, alpha) * sd / root


def mde_paired(sd: float | None, n: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Minimal detectable effect of the paired design: the smallest true mean difference (metric
    units) the two-sided paired t-test over ``n`` seeds detects with probability ``power``, given
    the per-seed differences' standard deviation ``sd``. 0.0 when sd is 0; None when sd is unknown."""
    return _mde(sd, n, alpha, power, None)


def mde_unpaired(sd: float | None, n: int, alpha: float = 0.05, power: float = 0.8,
                 n_other: int | None = None) -> float | None:
    """Minimal detectable effect of the unpaired design (``n`` and ``n_other`` seeds, pooled
    standard deviation ``sd``), in metric units; 0.0 when sd is 0; None when sd is unknown."""
    return _mde(sd, n, alpha, power, n if n_other is None else n_other)


def _seeds_needed(effect: float, sd: float | None, alpha: float, power: float, cap: int,
                  two_sample: bool) -> SeedsNeeded:
    _check_fraction("alpha", alpha)
    _check_fraction("power", power)
    _check_n("cap", cap)
    if _missing(effect) or _missing(sd):
        return SeedsNeeded(None, None, cap, False)

    def reached(n: int) -> float:
        return _power(effect, sd, n, alpha, n if two_sample else None)

    if reached(cap) < power:
        return SeedsNeeded(None, None, cap, True)
    # Power rises with n: bisect for the smallest n that reaches the target.
    lo, hi = 1, cap  # reached(lo) short of the target (n = 1 has no test), reached(hi) not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reached(mid) >= power else (mid, hi)
    return SeedsNeeded(hi, reached(hi), cap, False)


def seeds_needed_paired(effect: float, sd: float | None, alpha: float = 0.05, power: float = 0.8,
                        cap: int = 1000) -> SeedsNeeded:
    """Smallest number of seeds n >= 2 at which the paired t-test detects a true mean difference
    ``effect`` (metric units) with at least ``power``, given the differences' ``sd``. ``str()`` of
    the result prints the n, "> cap" when even ``cap`` seeds fall short, or "n/a" when sd is unknown."""
    return _seeds_needed(effect, sd, alpha, power, cap, two_sample=False)


def seeds_needed_unpaired(effect: float, sd: float | None, alpha: float = 0.05, power: float = 0.8,
                          cap: int = 1000) -> SeedsNeeded:
    """Seeds per variant (equal numbers) the two-sample t-test needs to detect ``effect`` with at
    least ``power`` given the pooled ``sd``; as ``seeds_needed_paired`` otherwise."""
    return _seeds_needed(effect, sd, alpha, power, cap, two_sample=True)


def effect_from_fraction(fraction: float, base_mean: float | None) -> float | None:
    """An effect stated as a fraction of the base's mean (``--effect 0.01`` = 1%) in the metric's
    units: fraction * |base_mean|. For a perplexity effect on a loss metric use
    ``loss_effect_of_ppl_fraction`` instead."""
    if _missing(base_mean) or _missing(fraction):
        return None
    return fraction * abs(base_mean)


def loss_effect_of_ppl_fraction(fraction: float) -> float:
    """The loss difference (nats) that a relative perplexity difference ``fraction`` is: since
    perplexity = exp(loss), a ppl ratio of 1 + fraction is a loss gap of log(1 + fraction) nats
    at any base (0.02 -> 0.0198 nats), not fraction * the base's loss."""
    if not fraction > -1:
        raise ValueError(f"fraction must be > -1 (a perplexity stays positive), got {fraction!r}")
    return math.log1p(fraction)


def _welch_design(sd_a: float, n_a: int, sd_b: float, n_b: int) -> tuple[float, float]:
    """(Welch-Satterthwaite df, standard error of the difference of the means) of two samples."""
    va, vb = sd_a ** 2 / n_a, sd_b ** 2 / n_b
    return (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1)), math.sqrt(va + vb)


def _welch_inputs(sd_a, n_a, sd_b, n_b) -> bool:
    """Check the counts (``ValueError`` naming them); False when an sd is unknown."""
    _check_n("n_a", n_a)
    _check_n("n_b", n_b)
    if _missing(sd_a) or _missing(sd_b):
        return False
    for name, sd in (("sd_a", sd_a), ("sd_b", sd_b)):
        if sd < 0:
            raise ValueError(f"{name} must be >= 0, got {sd!r}")
    return True


def power_welch(effect: float, sd_a: float | None, n_a: int, sd_b: float | None, n_b: int,
                alpha: float = 0.05) -> float | None:
    """Power of two-sided Welch's test to detect a true difference ``effect`` between two samples
    of ``n_a`` and ``n_b`` seeds with standard deviations ``sd_a`` and ``sd_b`` (unequal): the
    noncentral t on the Welch-Satterthwaite df with ncp = effect / sqrt(sd_a^2/n_a + sd_b^2/n_b),
    the usual approximation (exact for equal variances and n). None when effect or an sd is unknown."""
    _check_fraction("alpha", alpha)
    if not _welch_inputs(sd_a, n_a, sd_b, n_b) or _missing(effect):
        return None
    if sd_a == 0 and sd_b == 0:
        return 1.0 if effect != 0 else alpha
    df, se = _welch_design(sd_a, n_a, sd_b, n_b)
    return _power_ncp(abs(effect) / se, df, alpha)


def mde_welch(sd_a: float | None, n_a: int, sd_b: float | None, n_b: int, alpha: float = 0.05,
              power: float = 0.8) -> float | None:
    """Minimal detectable effect of Welch's test between samples of ``n_a`` and ``n_b`` seeds with
    standard deviations ``sd_a`` and ``sd_b``: the difference ``power_welch`` gives ``power`` at.
    0.0 when both sds are 0; None when one is unknown."""
    _check_target(alpha, power)
    if not _welch_inputs(sd_a, n_a, sd_b, n_b):
        return None
    if sd_a == 0 and sd_b == 0:
        return 0.0
    df, se = _welch_design(sd_a, n_a, sd_b, n_b)
    return _ncp_for_power(power, df, alpha) * se


def seeds_needed_welch(effect: float, sd: float | None, sd_other: float | None, n_other: int,
                       alpha: float = 0.05, power: float = 0.8, cap: int = 1000) -> SeedsNeeded:
    """Seeds one sample (standard deviation ``sd``) needs for Welch's test to detect ``effect``
    with at least ``power`` against another of ``n_other`` seeds and ``sd_other``, which stays as
    it is: where one row's spread swamps the other's, only its seeds buy power. Welch's power is
    not monotone in n: as this side's share of the error shrinks, the Welch-Satterthwaite df falls
    toward n_other - 1, so against a few seeds the power can rise and then fall again; the smallest
    n is found by a scan up from 2. Where the other's own error (or its few seeds) keep the power
    below ``power`` at every n up to ``cap``, the answer is "> cap"."""
    _check_fraction("alpha", alpha)
    _check_fraction("power", power)
    _check_n("cap", cap)
    _check_n("n_other", n_other)
    if _missing(effect) or _missing(sd) or _missing(sd_other):
        return SeedsNeeded(None, None, cap, False)
    for n in range(2, cap + 1):
        reached = power_welch(effect, sd, n, sd_other, n_other, alpha)
        if reached >= power:
            return SeedsNeeded(n, reached, cap, False)
    return SeedsNeeded(None, None, cap, True)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values, in the input's order: with the m known p sorted
    ascending, the i-th (from 1) becomes max over j <= i of min(1, (m - j + 1) p_(j)). Rejecting
    where the adjusted p < alpha holds the family-wise error rate at alpha. None and NaN entries
    (comparisons without a p) stay None and do not count in m."""
    known = [i for i, p in enumerate(p_values) if not _missing(p)]
    for i in known:
        if not 0 <= p_values[i] <= 1:
            raise ValueError(f"p_values[{i}] must lie in [0, 1], got {p_values[i]!r}")
    out: list[float | None] = [None] * len(p_values)
    m, running = len(known), 0.0
    for rank, i in enumerate(sorted(known, key=lambda i: p_values[i])):
        # Step-down: a p is never adjusted below one ranked before it (monotone).
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))
        out[i] = running
    return out

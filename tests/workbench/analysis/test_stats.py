"""The statistics behind the results table and the dashboards, checked against known values:
textbook t quantiles, G*Power's power and sample sizes, scipy's own t-tests, a Monte-Carlo count of
rejections, and a Holm correction done by hand."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from foxwb.workbench.analysis import stats

# Two-sided 95% Student t quantiles t(0.975, df), df = 1..30, as printed in textbook tables.
T975_TABLE = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
              2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
              2.045, 2.042]


@pytest.mark.parametrize("n", range(2, 32))
def test_ci_half_width_uses_the_t_table(n):
    # n values with sample sd exactly 1: the half-width times sqrt(n) is t(0.975, n - 1).
    x = np.arange(n, dtype=float)
    x = (x - x.mean()) / x.std(ddof=1)
    ci = stats.mean_ci(x)
    assert ci.n == n and ci.sd == pytest.approx(1.0)
    assert ci.half_width * math.sqrt(n) == pytest.approx(T975_TABLE[n - 2], abs=5e-4)


def test_mean_ci_of_a_small_sample_by_hand():
    # 1..5: mean 3, sd sqrt(2.5), half-width 2.776 * sqrt(2.5) / sqrt(5) = 1.963.
    ci = stats.mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert ci.mean == 3.0 and ci.sd == pytest.approx(math.sqrt(2.5))
    assert ci.half_width == pytest.approx(2.776 * math.sqrt(0.5), abs=1e-3)
    # A 99% interval is wider: t(0.995, 4) = 4.604.
    assert stats.mean_ci([1.0, 2.0, 3.0, 4.0, 5.0], 0.99).half_width == pytest.approx(4.604 * math.sqrt(0.5), abs=1e-3)


def test_power_matches_gpower():
    # G*Power 3.1: one-sample (paired) t, d = 0.5, alpha 0.05 two-sided, n = 34 -> 0.8077775;
    # two-sample t, d = 0.5, n = 64 per group -> 0.8014596. d = effect / sd, so units do not matter.
    assert stats.power_paired(0.5, 1.0, 34) == pytest.approx(0.8077775, abs=1e-6)
    assert stats.power_paired(0.05, 0.1, 34) == pytest.approx(0.8077775, abs=1e-6)
    assert stats.power_unpaired(0.5, 1.0, 64) == pytest.approx(0.8014596, abs=1e-6)
    assert stats.power_unpaired(-0.5, 1.0, 64, n_other=64) == pytest.approx(0.8014596, abs=1e-6)


def test_seeds_needed_matches_gpower_and_is_the_smallest():
    # G*Power / Cohen: d = 0.5 needs 34 pairs (paired) or 64 per group; d = 0.8 needs 26 per group.
    for needed, n, design in [(stats.seeds_needed_paired(0.5, 1.0), 34, stats.power_paired),
                              (stats.seeds_needed_unpaired(0.5, 1.0), 64, stats.power_unpaired),
                              (stats.seeds_needed_unpaired(0.8, 1.0), 26, stats.power_unpaired)]:
        effect = 0.8 if n == 26 else 0.5
        assert needed.n == n and str(needed) == str(n) and not needed.exceeds_cap
        assert needed.power >= 0.8 > design(effect, 1.0, n - 1)


def test_seeds_needed_beyond_the_cap_says_so():
    tiny = stats.seeds_needed_paired(0.001, 1.0, cap=1000)
    assert tiny.n is None and tiny.exceeds_cap and str(tiny) == "> 1000"
    zero = stats.seeds_needed_paired(0.0, 1.0)  # a zero effect is never detected
    assert zero.exceeds_cap
    unknown = stats.seeds_needed_paired(0.5, float("nan"))  # sd from a single seed
    assert unknown.n is None and not unknown.exceeds_cap and str(unknown) == "n/a"
    assert stats.seeds_needed_paired(0.5, 0.0).n == 2  # no noise: the smallest test suffices


@pytest.mark.parametrize("n", [2, 3, 5, 34, 200])
def test_mde_inverts_power(n):
    for sd in (0.02, 1.0):
        paired = stats.mde_paired(sd, n)
        assert stats.power_paired(paired, sd, n) == pytest.approx(0.8, abs=1e-8)
        unpaired = stats.mde_unpaired(sd, n, alpha=0.01, power=0.9)
        assert stats.power_unpaired(unpaired, sd, n, alpha=0.01) == pytest.approx(0.9, abs=1e-8)
    # The MDE is in the metric's units: it scales with sd, and G*Power's d = 0.5 at n = 34 sits just above it.
    assert stats.mde_paired(1.0, 34) < 0.5 < stats.mde_paired(1.0, 33)


def test_exact_power_agrees_with_simulated_studies():
    """20,000 simulated studies per design; the share scipy's t-tests reject lies within 4 binomial
    standard errors (about 0.014 at a power of 0.6) of the exact power."""
    rng = np.random.default_rng(1234)
    studies, n, sd, effect = 20_000, 8, 0.05, 0.04
    diffs = rng.normal(effect, sd, size=(studies, n))
    rejected = np.mean(sps.ttest_1samp(diffs, 0.0, axis=1).pvalue < 0.05)
    exact = stats.power_paired(effect, sd, n)
    assert abs(rejected - exact) < 4 * math.sqrt(exact * (1 - exact) / studies)
    a, b = rng.normal(effect, sd, size=(studies, n)), rng.normal(0.0, sd, size=(studies, n))
    rejected = np.mean(sps.ttest_ind(a, b, axis=1).pvalue < 0.05)
    exact = stats.power_unpaired(effect, sd, n)
    assert abs(rejected - exact) < 4 * math.sqrt(exact * (1 - exact) / studies)


def test_paired_and_welch_agree_with_scipy():
    rng = np.random.default_rng(7)
    base = rng.normal(10.0, 1.0, 6)
    variant = base - 0.1 + rng.normal(0.0, 0.05, 6)
    result = stats.paired(dict(enumerate(variant)), dict(enumerate(base)))
    assert result.n == 6 and result.delta == pytest.approx(np.mean(variant - base))
    assert result.p == pytest.approx(sps.ttest_rel(variant, base).pvalue, rel=1e-10)
    assert result.sd == pytest.approx(np.std(variant - base, ddof=1))
    welch = sps.ttest_ind(variant, base, equal_var=False).pvalue
    assert stats.welch_p(variant, base) == pytest.approx(welch, rel=1e-10)
    # Seeds move every variant together: pairing sees the shift, the unpaired test does not.
    assert result.p < 0.01 < 0.5 < stats.welch_p(variant, base)
    assert result.half_width < 0.1 < stats.mean_ci(variant).half_width


def test_paired_uses_only_the_seeds_both_have():
    variant = {0: 10.1, 1: 11.2, 2: 9.0, 5: 50.0}
    base = {0: 10.0, 1: 11.0, 2: 9.3, 3: 1.0, 4: None}
    result = stats.paired(variant, base)
    diffs = [0.1, 0.2, -0.3]
    assert result.n == 3 and result.delta == pytest.approx(np.mean(diffs))
    assert result.half_width == pytest.approx(4.303 * np.std(diffs, ddof=1) / math.sqrt(3), abs=1e-3)
    one = stats.paired({0: 1.0, 1: 2.0}, {1: 1.5})
    assert one == stats.Paired(0.5, None, None, 1, None)
    assert stats.paired({0: 1.0}, {1: 1.0}) == stats.Paired(None, None, None, 0, None)


def test_holm_by_hand():
    # m = 4 known p; sorted 0.005, 0.01, 0.03, 0.04 -> 4 * 0.005 = 0.02, 3 * 0.01 = 0.03,
    # 2 * 0.03 = 0.06, 1 * 0.04 = 0.04 raised to 0.06 (monotone). The None entry stays None.
    assert stats.holm([0.01, None, 0.04, 0.03, 0.005]) == pytest.approx([0.03, None, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.6]) == [1.0, 1.0]  # 2 * 0.5 caps at 1, and 0.6 may not fall below it
    assert stats.holm([0.02]) == [0.02] and stats.holm([]) == []
    assert stats.holm([float("nan"), 0.02]) == [None, 0.02]


def test_relative_effects():
    # 1% of a base perplexity of 20 is 0.2 perplexity.
    assert stats.effect_from_fraction(0.01, 20.0) == pytest.approx(0.2)
    assert stats.effect_from_fraction(0.01, None) is None
    # A 2% perplexity gap is log(1.02) nats of loss, whatever the base loss.
    for loss in (2.0, 3.5):
        assert math.log(1.02 * math.exp(loss)) - loss == pytest.approx(stats.loss_effect_of_ppl_fraction(0.02))
    assert stats.loss_effect_of_ppl_fraction(0.02) == pytest.approx(0.0198026, abs=1e-7)


def test_what_a_real_study_produces_does_not_raise():
    assert stats.mean_ci([]) == stats.MeanCI(None, None, 0, None)
    assert stats.mean_ci([2.5]) == stats.MeanCI(2.5, None, 1, None)
    assert stats.mean_ci([2.5, float("nan"), None, 3.5]).n == 2  # missing values are left out
    assert stats.mean_ci([0.1, 0.1, 0.1]) == stats.MeanCI(pytest.approx(0.1), 0.0, 3, 0.0)  # seeds agree
    assert stats.welch_p([1.0], [1.0, 2.0]) is None
    assert stats.welch_p([1.0, 1.0], [1.0, 1.0]) is None  # p undefined
    assert stats.welch_p([1.0, 1.0], [2.0, 2.0]) == 0.0  # no spread, different values
    same = stats.paired({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.0})  # a variant identical to the base
    assert same.delta == 0.0 and same.half_width == 0.0 and same.p is None
    shifted = stats.paired({0: 1.5, 1: 2.5}, {0: 1.0, 1: 2.0})  # every seed moved by exactly 0.5
    assert shifted.half_width == 0.0 and shifted.p == 0.0
    assert stats.mde_paired(0.0, 5) == 0.0 and stats.mde_paired(float("nan"), 5) is None
    assert stats.power_paired(0.1, 0.0, 3) == 1.0 and stats.power_paired(0.0, 0.0, 3) == 0.05
    assert stats.power_paired(0.1, None, 3) is None
    assert stats.pooled_sd([1.0], [2.0]) is None
    assert stats.pooled_sd([1.0, 3.0], [5.0, 5.0, 5.0]) == pytest.approx(math.sqrt(2 / 3))


@pytest.mark.parametrize("call, name", [
    (lambda: stats.mean_ci([1.0, 2.0], confidence=1.0), "confidence"),
    (lambda: stats.power_paired(0.1, 1.0, 5, alpha=0.0), "alpha"),
    (lambda: stats.mde_paired(1.0, 5, power=1.2), "power"),
    (lambda: stats.mde_paired(1.0, 5, alpha=0.2, power=0.1), "power"),
    (lambda: stats.mde_paired(1.0, 1), "n"),
    (lambda: stats.power_unpaired(0.1, 1.0, 5, n_other=1), "n_other"),
    (lambda: stats.mde_unpaired(-1.0, 5), "sd"),
    (lambda: stats.seeds_needed_paired(0.1, 1.0, cap=1), "cap"),
    (lambda: stats.holm([0.2, 1.5]), "p_values"),
    (lambda: stats.loss_effect_of_ppl_fraction(-1.0), "fraction"),
], ids=["confidence", "alpha", "power", "power-below-alpha", "n", "n_other", "sd", "cap", "p", "fraction"])
def test_nonsense_arguments_name_themselves(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_welch_interval_agrees_with_scipy():
    a, b = [10.2, 10.9, 11.4, 10.1], [9.1, 9.8, 9.0]
    w = stats.welch(a, b)
    res = sps.ttest_ind(a, b, equal_var=False)
    low, high = res.confidence_interval(0.95)
    assert w.delta == pytest.approx(np.mean(a) - np.mean(b))
    assert w.half_width == pytest.approx((high - low) / 2) and w.p == pytest.approx(res.pvalue)
    assert w.df == pytest.approx(res.df)
    assert stats.welch([1.0], b).half_width is None and stats.welch([], b).delta is None


def test_welch_from_summaries_is_welch_from_the_values():
    """An effect's change along an axis is tested from each point's mean, sd and n of the per-seed
    differences: the same numbers scipy gives from the values themselves."""
    a, b = [-0.031, -0.045, -0.043], [0.004, -0.011, -0.010, -0.002]
    w = stats.welch_summary(np.mean(a), np.std(a, ddof=1), len(a), np.mean(b), np.std(b, ddof=1), len(b))
    res = sps.ttest_ind(a, b, equal_var=False)
    low, high = res.confidence_interval(0.95)
    assert w.delta == pytest.approx(np.mean(a) - np.mean(b)) and w.p == pytest.approx(res.pvalue)
    assert w.half_width == pytest.approx((high - low) / 2) and w.df == pytest.approx(res.df)
    assert stats.welch_summary(-0.03, 0.01, 1, 0.0, 0.01, 3) == (-0.03, None, None, None)
    assert stats.welch_summary(None, 0.01, 3, 0.0, 0.01, 3).delta is None


def test_welch_power_agrees_with_simulated_studies_of_unequal_spreads():
    """One row far noisier than the other and on more seeds (Transformer (LLaMA) against FoX (Pro)
    at 4096): 20,000 simulated studies, the share scipy's Welch test rejects within 4 binomial
    standard errors of power_welch; the pooled-sd power, which assumes equal spreads, is off."""
    rng = np.random.default_rng(99)
    studies, effect, (sd_a, n_a), (sd_b, n_b) = 20_000, 0.05, (0.2, 40), (0.023, 6)
    a, b = rng.normal(effect, sd_a, size=(studies, n_a)), rng.normal(0.0, sd_b, size=(studies, n_b))
    rejected = np.mean(sps.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05)
    power = stats.power_welch(effect, sd_a, n_a, sd_b, n_b)
    assert abs(rejected - power) < 4 * math.sqrt(power * (1 - power) / studies)
    pooled = math.sqrt(((n_a - 1) * sd_a ** 2 + (n_b - 1) * sd_b ** 2) / (n_a + n_b - 2))
    assert abs(stats.power_unpaired(effect, pooled, n_a, n_other=n_b) - rejected) > 0.1
    # Equal spreads and seeds: Welch's df is the pooled test's, the power the same.
    assert stats.power_welch(0.3, 0.2, 5, 0.2, 5) == pytest.approx(stats.power_unpaired(0.3, 0.2, 5), rel=1e-12)


def test_welch_mde_and_seeds_needed_invert_its_power():
    mde = stats.mde_welch(0.2, 108, 0.023, 27)
    assert stats.power_welch(mde, 0.2, 108, 0.023, 27) == pytest.approx(0.8, abs=1e-8)
    needed = stats.seeds_needed_welch(0.042, 0.2, 0.023, 27)
    assert needed.power >= 0.8 > stats.power_welch(0.042, 0.2, needed.n - 1, 0.023, 27)
    assert needed.power == stats.power_welch(0.042, 0.2, needed.n, 0.023, 27)
    # The other row's own error bounds the power: with 2 seeds of sd 0.05 no number of this row's
    # seeds reaches 0.8 for 0.042 (the limit is a t-test of 2 values' mean).
    assert str(stats.seeds_needed_welch(0.042, 0.2, 0.05, 2)) == "> 1000"
    # Against 2 seeds Welch's df falls toward 1 as this side's seeds grow: the power rises, then
    # falls (0.91 at 3 seeds, 0.78 at 1000); the smallest n is the first to reach 0.8, not "> 1000".
    falls = [stats.power_welch(23.07, 6.583, n, 2.229, 2) for n in (3, 10, 1000)]
    assert falls[0] > 0.8 and falls[1] > falls[2] and falls[2] < 0.8
    assert stats.seeds_needed_welch(23.07, 6.583, 2.229, 2).n == 3
    assert stats.seeds_needed_welch(0.042, None, 0.05, 20).n is None
    assert stats.power_welch(0.1, 0.0, 3, 0.0, 4) == 1.0 and stats.mde_welch(0.0, 3, 0.0, 4) == 0.0
    assert stats.mde_welch(float("nan"), 3, 0.1, 4) is None
    with pytest.raises(ValueError, match=r"^n_b\b"):
        stats.power_welch(0.1, 0.2, 5, 0.2, 1)
    with pytest.raises(ValueError, match=r"^sd_a\b"):
        stats.mde_welch(-0.1, 5, 0.2, 5)

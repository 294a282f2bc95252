"""The seed x document interval: it reduces to the paired t interval over seeds where documents do
not vary, it widens with the documents' own spread, and its coverage holds on simulated studies."""
import numpy as np
import pytest
from scipy import stats as sps

from foxwb.workbench.analysis.doc_interval import crossed, seeds_only

SEED_SHIFT = np.array([0.01, -0.02, 0.015, 0.0, -0.005])


def test_with_no_document_spread_it_is_the_paired_t_interval_over_seeds():
    diffs = 0.03 + SEED_SHIFT[:, None] + np.zeros((5, 8))
    got = crossed(diffs)
    t = sps.ttest_1samp(0.03 + SEED_SHIFT, 0.0)
    assert got.delta == pytest.approx(0.03 + SEED_SHIFT.mean())
    assert got.p == pytest.approx(t.pvalue) and got.df == pytest.approx(4)
    assert got.half_width == pytest.approx(seeds_only(diffs).half_width)


def test_the_documents_spread_widens_it_where_the_seeds_only_interval_sees_none():
    docs = np.array([0.02, -0.01, 0.04, 0.0, 0.03, -0.02, 0.01, 0.05])
    diffs = 0.01 + np.zeros((5, 1)) + docs[None, :]  # every seed alike: the seeds alone say "certain"
    assert seeds_only(diffs).half_width == 0.0
    got = crossed(diffs)
    jack = docs.std(ddof=1) / np.sqrt(len(docs))  # the jackknife of a mean is its standard error
    assert got.se == pytest.approx(jack) and got.share_docs == pytest.approx(1.0)
    assert got.half_width == pytest.approx(sps.t.ppf(0.975, 7) * jack)


def test_token_weights_make_it_the_token_mean():
    diffs = np.array([[0.1, 0.0, -0.1], [0.2, 0.1, 0.0]])
    tokens = np.array([100, 300, 600])
    got = crossed(diffs, tokens)
    assert got.delta == pytest.approx(float((diffs @ tokens).sum() / tokens.sum() / 2))
    with pytest.raises(ValueError, match="weights"):
        crossed(diffs, np.array([1, 0, 2]))


def test_too_few_seeds_or_documents_give_no_interval():
    assert crossed(np.ones((1, 5))).half_width is None and crossed(np.ones((4, 1))).half_width is None


def test_its_coverage_is_near_nominal_where_the_seeds_only_interval_misses():
    """A small run of benchmarks/doc_interval_coverage.py's documents-dominated case (5 seeds, 20
    documents of lognormal lengths): 400 studies."""
    rng = np.random.default_rng(7)
    hit = {"crossed": 0, "seeds": 0}
    for _ in range(400):
        tokens = np.maximum(rng.lognormal(np.log(2000), 1.0, 20).round(), 2)
        diffs = (0.01 + rng.normal(0, 0.003, (5, 1)) + rng.normal(0, 0.01, (1, 20))
                 + rng.normal(0, 0.003, (5, 20)) / np.sqrt(tokens / 2000))
        for name, fn in (("crossed", crossed), ("seeds", seeds_only)):
            r = fn(diffs, tokens)
            hit[name] += abs(r.delta - 0.01) <= r.half_width
    assert 0.91 <= hit["crossed"] / 400 <= 0.98 and hit["seeds"] / 400 < 0.8, hit

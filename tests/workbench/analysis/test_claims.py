"""Claims and their verdicts: TOST against scipy and by hand, each of the four verdicts reached,
Holm over the claims, the default claims of a study that declares none, the loss they read."""
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from scipy import stats as sps

from foxwb.workbench.analysis import doc_interval, stats
from foxwb.workbench.analysis.claims import DEFAULT_SESOI, VERDICTS, Claim, loss_metric, study_claims, verdict
from foxwb.workbench.analysis.report import claim_lines
from foxwb.workbench.analysis.table import StudyInfo
from tests.workbench.run.test_run import trial_runs, wb

ROOT = Path(__file__).resolve().parents[3]

MARGIN = math.log(1.01)  # a sesoi of 1% in perplexity, in nats of loss
SEEDS = [0, 1, 2, 3, 4]
# A seed moves every variant alike (its data order): the pairing cancels it.
SEED_EFFECT = {0: 0.0, 1: 0.08, 2: -0.05, 3: 0.03, 4: -0.06}
# Per variant: its shift from the base in nats and its own noise per seed.
SHIFTS = {
    "base": (0.0, [0, 0, 0, 0, 0]),
    "better": (-0.05, [0.002, -0.001, 0.0, 0.001, -0.002]),  # 5% lower perplexity, tight
    "worse": (0.05, [0.001, 0.0, -0.002, 0.002, -0.001]),
    "same": (0.0005, [0.0005, -0.0005, 0.0, 0.001, -0.001]),  # within 1%, tight: equivalent
    "noisy": (0.004, [0.05, -0.04, 0.03, -0.06, 0.02]),  # neither shown
}


def frame(shifts=SHIFTS, seeds=SEEDS, metric="val_loss", **extra) -> pl.DataFrame:
    return pl.DataFrame([{"variant": v, "seed": s, "search_point": "", "stopped_early": False, "status": "FINISHED",
                          metric: 2.0 + SEED_EFFECT[s] + shift + noise[i], **extra}
                         for v, (shift, noise) in shifts.items() for i, s in enumerate(seeds)])


def info(order=tuple(SHIFTS), **kw) -> StudyInfo:
    return StudyInfo("s", "base", list(order), seeds=SEEDS, **kw)


def by_name(records):
    return {r["name"]: r for r in records}


def test_tost_agrees_with_scipy_one_sided_tests_and_a_hand_computation():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 12))
        base = rng.normal(2.0, 0.1, n)
        variant = base + rng.normal(rng.normal(0, 0.01), 0.01, n)
        d = variant - base
        eq = stats.tost_paired(dict(enumerate(variant)), dict(enumerate(base)), MARGIN)
        lower = sps.ttest_1samp(d, -MARGIN, alternative="greater").pvalue
        upper = sps.ttest_1samp(d, MARGIN, alternative="less").pvalue
        assert eq.p_lower == pytest.approx(lower, rel=1e-9) and eq.p_upper == pytest.approx(upper, rel=1e-9)
        assert eq.p == max(eq.p_lower, eq.p_upper)
        # p < alpha exactly where the (1 - 2 alpha) CI of the mean lies inside the margin.
        lo, hi = sps.t.interval(0.90, n - 1, loc=d.mean(), scale=d.std(ddof=1) / math.sqrt(n))
        assert (eq.p < 0.05) == (-MARGIN < lo and hi < MARGIN)
    # By hand: d = 0.001, -0.002, 0.003: mean 0.002/3, sd 0.0025166, se 0.0014530, df 2, where Student's
    # t has a closed form: P(T > t) = 1/2 - t / (2 sqrt(2 + t^2)).
    eq = stats.tost_paired({0: 1.001, 1: 0.998, 2: 1.003}, {0: 1.0, 1: 1.0, 2: 1.0}, MARGIN)
    se = math.sqrt(((1 / 3e3) ** 2 + (8 / 3e3) ** 2 + (7 / 3e3) ** 2) / 2) / math.sqrt(3)
    tail = lambda t: 0.5 - t / (2 * math.sqrt(2 + t * t))  # noqa: E731
    t_lower, t_upper = (0.002 / 3 + MARGIN) / se, (0.002 / 3 - MARGIN) / se
    assert eq.p_lower == pytest.approx(tail(t_lower), rel=1e-9) and eq.p_upper == pytest.approx(tail(-t_upper), rel=1e-9)
    assert eq.p == pytest.approx(0.01181, abs=1e-5)  # the upper side: the mean is nearer +margin


def test_welch_tost_agrees_with_scipy_shifted_welch_tests():
    rng = np.random.default_rng(1)
    a, b = rng.normal(2.0, 0.01, 6), rng.normal(2.002, 0.03, 9)
    eq = stats.tost_welch(a, b, MARGIN)
    assert eq.p_lower == pytest.approx(sps.ttest_ind(a, b - MARGIN, equal_var=False, alternative="greater").pvalue, rel=1e-9)
    assert eq.p_upper == pytest.approx(sps.ttest_ind(a, b + MARGIN, equal_var=False, alternative="less").pvalue, rel=1e-9)


def test_tost_edge_cases():
    same = stats.tost_paired({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.0}, MARGIN)
    assert same.p == 0.0  # every seed the same: no spread, the mean 0 lies inside the margin
    outside = stats.tost_paired({0: 1.1, 1: 2.1}, {0: 1.0, 1: 2.0}, MARGIN)
    assert outside.p == 1.0
    assert stats.tost_paired({0: 1.0}, {0: 1.1}, MARGIN).p is None  # one seed: no test
    with pytest.raises(ValueError, match="bound must be > 0"):
        stats.tost_summary(0.0, 1.0, 3, 0.0)


def test_each_verdict_is_reached():
    claims = [Claim(v, v, "base", 0.01) for v in ("better", "worse", "same", "noisy")]
    got = by_name(study_claims(frame(), info(), claims))
    assert {n: r["verdict"] for n, r in got.items()} == {
        "better": "better", "worse": "worse", "same": "equivalent", "noisy": "inconclusive"}
    assert set(r["verdict"] for r in got.values()) == set(VERDICTS)
    better = got["better"]
    d = [SHIFTS["better"][1][i] - 0.05 for i in range(5)]  # A - B per seed: the seed effect cancels
    assert better["delta_loss"] == pytest.approx(np.mean(d), abs=1e-12)
    assert better["delta"] == pytest.approx(math.expm1(np.mean(d)))  # relative in perplexity
    lo, hi = better["ci95"]
    assert lo < better["delta"] < hi and better["ci95_loss"][0] == pytest.approx(math.log1p(lo))
    assert better["n_seeds"] == 5 and better["seeds_a"] == SEEDS and better["metric"] == "val_loss"
    assert better["margin_loss"] == pytest.approx(MARGIN) and better["test"] == "paired" and better["ci_level"] == 0.95
    # A one-seed comparison has no test: inconclusive, and says why.
    one = study_claims(frame(seeds=[0]), info(), claims[:1])[0]
    assert one["verdict"] == "inconclusive" and one["p_holm"] is None and "1 seed shared: no test" in one["note"]


def test_the_verdict_rule_and_its_precedence():
    assert verdict(0.001, 0.01, 0.01, 0.05) == "equivalent"  # a difference within the sesoi: equivalent wins
    assert verdict(-0.1, 0.01, 0.9, 0.05) == "better" and verdict(0.1, 0.01, 0.9, 0.05) == "worse"
    assert verdict(0.1, 0.2, 0.9, 0.05) == "inconclusive" and verdict(None, None, None, 0.05) == "inconclusive"
    # Both a difference from 0 and within the margin: equivalent, and the note says it is a real, small difference.
    tight = {"base": (0.0, [0] * 5), "small": (0.003, [0.0001, -0.0001, 0.0, 0.0001, -0.0001])}
    (r,) = study_claims(frame(tight), info(tight), [Claim("small", "small", "base", 0.01)])
    assert r["verdict"] == "equivalent" and r["p_holm"] < 0.05 and "within the sesoi" in r["note"]


def test_holm_adjusts_each_family_over_the_claims():
    # Two borderline differences (raw p 0.030 and 0.028): significant alone, not after Holm over two.
    shifts = {"base": (0.0, [0] * 5), "a": (0.012, [0.01, -0.01, 0.005, -0.006, 0.001]),
              "b": (0.0125, [0.011, -0.01, 0.004, -0.006, 0.001])}
    claims = [Claim("a", "a", "base", 0.001), Claim("b", "b", "base", 0.001)]
    held = study_claims(frame(shifts), info(shifts), claims)
    assert all(r["p_unadjusted"] < 0.05 for r in held)  # each alone would be "worse"
    assert [r["p_holm"] for r in held] == stats.holm([r["p_unadjusted"] for r in held])
    assert [r["p_equivalence_holm"] for r in held] == stats.holm([r["p_equivalence_unadjusted"] for r in held])
    assert all(r["p_holm"] > 0.05 and r["verdict"] == "inconclusive" and r["adjust"] == "holm" for r in held)
    # The same comparison declared twice is one test in the family: no penalty for repeating it.
    twice = study_claims(frame(shifts), info(shifts), [claims[0], Claim("a again", "a", "base", 0.001)])
    assert twice[0]["p_holm"] == twice[1]["p_holm"] == twice[0]["p_unadjusted"]


def test_a_study_without_claims_gets_one_per_row_against_the_base():
    records = study_claims(frame(), info())
    assert [(r["name"], r["a"], r["b"], r["sesoi"], r["default"]) for r in records] == [
        (v, v, "base", DEFAULT_SESOI, True) for v in ("better", "worse", "same", "noisy")]
    assert DEFAULT_SESOI == 0.01
    lines = claim_lines(records, 0.05)
    assert lines[0].startswith("claims: A against B on val_loss")
    assert any(line.startswith("default claims: the study declares none") and "sesoi 1%" in line for line in lines)


def test_the_claims_read_test_loss_where_every_run_records_it():
    runs = frame().with_columns(pl.col("val_loss").alias("test_loss"), (pl.col("val_loss") + 1).alias("val_loss"))
    assert loss_metric(runs) == "test_loss"
    assert study_claims(runs, info())[0]["metric"] == "test_loss"
    partly = runs.with_columns(pl.when(pl.col("seed") == 0).then(None).otherwise(pl.col("test_loss")).alias("test_loss"))
    assert loss_metric(partly) == "val_loss"  # a run without it: the split all runs share
    assert loss_metric(frame(metric="val_ppl")) is None and study_claims(frame(metric="val_ppl"), info()) == []


def test_a_welch_row_is_judged_unpaired_and_an_unfinished_row_is_inconclusive():
    got = study_claims(frame(), info(welch=["noisy"]), [Claim("noisy", "noisy", "base", 0.01),
                                                       Claim("nothing yet", "absent", "base", 0.01)])
    assert got[0]["test"] == "welch" and got[0]["ci95"] is not None
    assert got[1]["verdict"] == "inconclusive" and got[1]["n_seeds"] == 0 and "no finished seeds of 'absent'" in got[1]["note"]


def test_the_json_fields():
    record = study_claims(frame(), info())[0]
    assert {"name", "verdict", "delta", "ci95", "p_holm", "p_equivalence_holm", "p_unadjusted", "n_seeds", "sesoi"} <= set(record)
    assert {"a", "b", "metric", "default", "delta_loss", "ci95_loss"} <= set(record)


def test_wb_results_gives_declared_and_default_claims_their_verdicts(quickstart, tmp_path):
    """End to end on the quickstart's store (run once for the test run, tests/conftest.py): its file
    with two claims added (study-level: the same trials, found by spec hash) gets their verdicts in
    `wb results --format json`, computed from the store's test_loss, paired by seed and by test
    document (each run's per-document losses, the seed x document interval); without claims, the
    default ones, one per row against the base; the text output starts with the verdict table."""
    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    study = yaml.safe_load((ROOT / "studies/quickstart.yaml").read_text())
    study["claims"] = [{"name": "the forget gate helps", "compare": ["FoX (Pro)", "FoX (Pro) - forget gate"], "sesoi": 0.01},
                       {"name": "KV-shift is not needed", "compare": ["FoX (Pro) - KV-shift", "FoX (Pro)"], "sesoi": 0.05}]
    (tmp_path / "quickstart.yaml").write_text(yaml.safe_dump(study))
    out = wb("results", tmp_path / "quickstart.yaml", "--workdir", workdir, "--format", "json")
    assert out.returncode == 0, out.stderr[-2000:]
    claims = json.loads(out.stdout)["claims"]
    assert [c["name"] for c in claims] == ["the forget gate helps", "KV-shift is not needed"]
    client, runs = trial_runs(workdir, "quickstart")
    loss = {(r.data.tags["variant"], int(r.data.tags["seed"])): r.data.metrics["test_loss"] for r in runs}
    docs = {(r.data.tags["variant"], int(r.data.tags["seed"])):
            json.loads(Path(client.download_artifacts(r.info.run_id, "test_documents.json", str(tmp_path))).read_text())
            for r in runs}
    for c, (a, b) in zip(claims, (("FoX (Pro)", "FoX (Pro) - forget gate"), ("FoX (Pro) - KV-shift", "FoX (Pro)"))):
        assert {"name", "verdict", "delta", "ci95", "p_holm", "p_equivalence_holm", "p_unadjusted", "n_seeds", "sesoi"} <= set(c)
        assert c["verdict"] in VERDICTS and c["metric"] == "test_loss" and c["n_seeds"] == 2 and not c["default"]
        assert c["interval"] == "seeds x documents" and c["n_documents"] == len(docs[(a, 0)]["doc_loss"]) >= 2
        d = [loss[(a, s)] - loss[(b, s)] for s in (0, 1)]
        assert c["delta_loss"] == pytest.approx(np.mean(d), abs=1e-9) and c["delta"] == pytest.approx(math.expm1(np.mean(d)))
        diffs = np.array([np.subtract(docs[(a, s)]["doc_loss"], docs[(b, s)]["doc_loss"]) for s in (0, 1)])
        crossed = doc_interval.crossed(diffs, np.array(docs[(a, 0)]["doc_tokens"]))
        assert c["p_unadjusted"] == pytest.approx(crossed.p) and c["ci95_loss"][1] - c["delta_loss"] == pytest.approx(crossed.half_width)
    # The same study without claims: one default claim per row against the base, stated in the text.
    text = wb("results", ROOT / "studies/quickstart.yaml", "--workdir", workdir)
    assert text.returncode == 0, text.stderr[-2000:]
    lines = text.stdout.splitlines()
    assert lines[0].startswith("claims: A against B on test_loss, the test split") and lines[1].split()[:1] == ["claim"]
    assert "FoX (Pro) - forget gate vs FoX (Pro)" in lines[2] and "FoX (Pro) - KV-shift vs FoX (Pro)" in lines[3]
    assert any(line.startswith("default claims: the study declares none") for line in lines)
    assert lines.index(next(line for line in lines if line.startswith("study 'quickstart'"))) > 4  # the table after


def test_a_crossed_designs_claims_read_its_cells():
    """Rows are cells (a variant at a point of the axis): each default claim compares a cell with
    the base's at the same point, and a declared claim names cells."""
    rows = [{"variant": v, "seed": s, "search_point": f"context={c}", "stopped_early": False, "status": "FINISHED",
             "val_loss": 2.0 + SEED_EFFECT[s] + (0.05 if v == "no gate" else 0.0) + 0.001 * s * (c == 64)}
            for v in ("FoX", "no gate") for c in (32, 64) for s in SEEDS]
    crossed = StudyInfo("s", "FoX", ["FoX", "no gate"], seeds=SEEDS, design_kind="crossed",
                        axis=["context=32", "context=64"])
    records = study_claims(pl.DataFrame(rows), crossed)
    assert [(r["a"], r["b"]) for r in records] == [("no gate [context=32]", "FoX [context=32]"),
                                                   ("no gate [context=64]", "FoX [context=64]")]
    assert all(r["verdict"] == "worse" and r["n_seeds"] == 5 for r in records)
    (one,) = study_claims(pl.DataFrame(rows), crossed, [Claim("64 vs 32", "FoX [context=64]", "FoX [context=32]", 0.01)])
    assert one["delta_loss"] == pytest.approx(0.001 * np.mean(SEEDS)) and one["verdict"] == "equivalent"

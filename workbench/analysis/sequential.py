"""Seeds by plan, not by looking (docs/statistics.md, "Seeds by plan"): a plan runs seeds in batches
(``start`` seeds, then ``step`` more at each look, at most ``max``) and judges the claims at every
look; a claim is final at the first look that decides it, and inconclusive if none has by ``max``.

Looking several times inflates the error rates of a test run at its nominal level each time. The
plan therefore tests at a smaller nominal level alpha' at every look (a Pocock boundary: the same
level at each), chosen so that the chance of any false decision over all the looks is alpha. The
paired t statistic of normal differences is pivotal (its null distribution depends on the number of
seeds alone, not on the noise), so alpha' is found once per plan by simulating that distribution
(a fixed seed: the same alpha' on every machine) and bisecting. The same alpha' serves the
equivalence tests (TOST) and their intervals (a repeated confidence interval at 1 - 2 alpha' for
TOST, 1 - alpha' two-sided), and Holm over the claims at each look works at alpha'.

``benchmarks/sequential_seeds.py`` measures the plan's type-I error, the coverage of its interval
at the look it stops, and the seeds it uses against a fixed design of the same power.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

from foxwb.workbench.analysis.stats import holm, loss_effect_of_ppl_fraction, paired, tost_paired
from foxwb.workbench.spec.seed_plan import SeedPlan

SIMULATIONS = 40_000  # null studies simulated to find alpha': its Monte Carlo error is about 0.1% at alpha 0.05


def nominal_alpha(plan: SeedPlan, alpha: float = 0.05) -> float:
    """alpha' for ``plan``: the level each look tests at so that a two-sided paired t test, run at
    every look, rejects a true null with probability ``alpha`` over all of them."""
    return _nominal(tuple(plan.looks), alpha)


@lru_cache(maxsize=64)
def _nominal(looks: tuple[int, ...], alpha: float) -> float:
    if len(looks) == 1:
        return alpha
    rng = np.random.default_rng(20261206)
    d = rng.standard_normal((SIMULATIONS, looks[-1]))
    # The smallest p over the looks of each simulated null study.
    smallest = np.ones(SIMULATIONS)
    for n in looks:
        x = d[:, :n]
        t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(n))
        smallest = np.minimum(smallest, 2 * stats.t.sf(np.abs(t), n - 1))
    # alpha' is the alpha-quantile of the smallest p: P(min p < alpha') = alpha.
    return float(np.quantile(smallest, alpha))


def paired_look(a: dict, b: dict, margin: float, level: float) -> dict:
    """One look at A - B over the seeds both have: the mean, its 1 - ``level`` interval, the two-sided
    p and TOST's p, all from the paired t (what the plan's boundary is built for;
    foxwb.workbench.analysis.stats.paired and tost_paired)."""
    look = paired(a, b, confidence=1 - level)
    if look.n < 2:
        return {"n": look.n, "delta": look.delta, "p": None, "p_equivalence": None, "ci": None}
    # Every seed the same difference, 0: no evidence of one (p 1, counted in Holm's family).
    p = 1.0 if look.p is None else look.p
    return {"n": look.n, "delta": look.delta, "p": p, "p_equivalence": tost_paired(a, b, margin).p,
            "ci": [look.delta - look.half_width, look.delta + look.half_width]}


def decided(p: float | None, p_equivalence: float | None, delta: float | None, level: float) -> str | None:
    """The verdict at one look at nominal ``level`` (p values already Holm-adjusted), or None: not
    yet decided (the plan goes on; at its last look, inconclusive)."""
    if p_equivalence is not None and p_equivalence < level:
        return "equivalent"
    if p is not None and p < level and delta:
        return "better" if delta < 0 else "worse"
    return None


def judge(claims: list[tuple[str, str, str, float]], values: dict[str, dict[int, float]], plan: SeedPlan,
          alpha: float = 0.05) -> list[dict]:
    """Each claim ``(name, A's row, B's row, sesoi)`` judged look by look over ``values`` (row ->
    {seed: loss}): at each look the open claims' paired tests over the look's seeds (plan.seeds_at),
    Holm over the open claims at alpha'; a claim is final at the first look that decides it. One
    record per claim: ``verdict`` (``inconclusive`` where no look decided it by the last, ``open``
    while a later look may), ``final`` (decided,
    or the plan's last look reached), ``look`` (the seeds of its last look), ``alpha_look``,
    ``delta_loss``, ``ci95_loss`` (the 1 - alpha' interval), ``p_holm``, ``p_equivalence_holm``
    (Holm-adjusted at that look; ``p_unadjusted``, ``p_equivalence_unadjusted`` before), ``n_seeds``."""
    level = nominal_alpha(plan, alpha)
    records = [{"name": name, "a_row": a, "b_row": b, "sesoi": sesoi, "margin_loss": loss_effect_of_ppl_fraction(sesoi),
                "verdict": None, "final": False, "look": None, "alpha_look": level, "delta_loss": None, "ci95_loss": None,
                "p_holm": None, "p_equivalence_holm": None, "p_unadjusted": None, "p_equivalence_unadjusted": None, "n_seeds": 0}
               for name, a, b, sesoi in claims]
    for n in plan.looks:
        seen, seeds = [], set(plan.seeds_at(n))
        for r in records:
            if r["final"]:
                continue
            a = {s: v for s, v in values.get(r["a_row"], {}).items() if s in seeds}
            b = {s: v for s, v in values.get(r["b_row"], {}).items() if s in seeds}
            if not seeds <= (a.keys() & b.keys()):
                continue  # this look's seeds have not all run (yet): the claim stays at its last look
            seen.append((r, paired_look(a, b, r["margin_loss"], level)))
        if not seen:
            break
        p = holm([look["p"] for _, look in seen])
        p_eq = holm([look["p_equivalence"] for _, look in seen])
        for (r, look), p_adj, eq_adj in zip(seen, p, p_eq):
            r.update(look=n, delta_loss=look["delta"], ci95_loss=look["ci"], p_holm=p_adj, p_equivalence_holm=eq_adj,
                     p_unadjusted=look["p"], p_equivalence_unadjusted=look["p_equivalence"], n_seeds=look["n"])
            r["verdict"] = decided(p_adj, eq_adj, look["delta"], level)
            r["final"] = r["verdict"] is not None or n == plan.max
    for r in records:
        r["verdict"] = r["verdict"] or ("inconclusive" if r["final"] else "open")
    return records

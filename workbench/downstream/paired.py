"""Two variants compared item by item on a downstream task: McNemar's exact test.

Both variants answer the same items (the shipped task's items depend on the documents and the seed
alone; an lm-eval task's on its data). Items are paired seed by seed: variant A's trial of seed s
with variant B's trial of seed s, an item with the same item (doc id and hash). The pairs of all
seeds that both variants finished are pooled into one 2x2 table, and the test reads its discordant
cells: ``a_only`` items A got right and B wrong, ``b_only`` the reverse. Under no difference
each discordant pair falls either way with probability 1/2, so
p = min(1, 2 * P(Binomial(a_only + b_only, 1/2) <= min(a_only, b_only))).

The items are the samples of McNemar's test: it says whether the two models differ on these items,
at these seeds. A difference that one seed's training brings and another's does not is not in its
p, so the accuracy difference also gets an interval with the seeds as samples too
(``delta_ci``): a paired bootstrap that draws seeds, then items within each drawn seed, and takes
the mean of A's answer minus B's. With one or two seeds the seeds' spread is barely known, and
the interval says as much only as they do.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import binom

TEST = ("McNemar exact test on the items, paired seed by seed and pooled over the seeds both variants finished; "
        "delta_ci: 95% paired bootstrap over seeds, then items")
RESAMPLES = 2000


def bootstrap_delta(diffs: list[np.ndarray], resamples: int = RESAMPLES, seed: int = 0) -> list[float]:
    """95% percentile interval of the mean paired difference (A's 0/1 minus B's, per item), drawing
    seeds with replacement, then each drawn seed's items with replacement. ``diffs``: per seed."""
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for r in range(resamples):
        drawn = [diffs[i] for i in rng.integers(len(diffs), size=len(diffs))]
        means[r] = np.concatenate([d[rng.integers(len(d), size=len(d))] for d in drawn]).mean()
    low, high = np.percentile(means, [2.5, 97.5])
    return [float(low), float(high)]


def mcnemar_exact(a: list[int], b: list[int]) -> dict:
    """The exact McNemar test of two 0/1 vectors over the same items, in the same order."""
    if len(a) != len(b):
        raise ValueError(f"paired vectors differ in length: {len(a)} and {len(b)} items")
    a_only = sum(1 for x, y in zip(a, b) if x and not y)
    b_only = sum(1 for x, y in zip(a, b) if y and not x)
    n = a_only + b_only
    p = 1.0 if n == 0 else min(1.0, 2 * float(binom.cdf(min(a_only, b_only), n, 0.5)))
    return {"items": len(a), "a_only": a_only, "b_only": b_only, "p": p}


def _keyed(records: list[dict]) -> dict:
    return {(r["doc_id"], r.get("doc_hash")): r["correct"] for r in records if "correct" in r}


def compare(a_by_seed: dict[int, list[dict]], b_by_seed: dict[int, list[dict]]) -> dict | None:
    """Variant A against B: per-item records (items.item_record) per seed for each. None where the
    two share no seed with items in common."""
    xs, ys, per_seed, diffs = [], [], [], []
    for seed in sorted(set(a_by_seed) & set(b_by_seed)):
        a, b = _keyed(a_by_seed[seed]), _keyed(b_by_seed[seed])
        common = sorted(set(a) & set(b), key=str)
        if not common:
            continue
        xa, xb = [a[k] for k in common], [b[k] for k in common]
        xs += xa
        ys += xb
        diffs.append(np.asarray(xa, dtype=float) - np.asarray(xb, dtype=float))
        per_seed.append({"seed": seed, "items": len(common), "acc_a": sum(xa) / len(common), "acc_b": sum(xb) / len(common)})
    if not xs:
        return None
    found = mcnemar_exact(xs, ys)
    acc_a, acc_b = sum(xs) / len(xs), sum(ys) / len(ys)
    return {"acc_a": acc_a, "acc_b": acc_b, "delta": acc_a - acc_b, "delta_ci": bootstrap_delta(diffs), **found, "seeds": [s["seed"] for s in per_seed],
            "per_seed": per_seed, "test": TEST}

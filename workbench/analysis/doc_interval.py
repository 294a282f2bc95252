"""The difference of two rows with the evaluation documents in its interval (docs/statistics.md,
"Seeds and documents"): seeds and test documents are both samples, crossed (every seed of both
rows is scored on the same documents), so the paired difference of seed s on document d is

    D[s, d] = theta + a_s + b_d + e_sd

with a seed effect a (variance sa2), a document effect b (sb2) and their interaction e (se2). The
estimate is the token-weighted mean of D; its variance, for S seeds and N documents of equal weight,
is sa2/S + sb2/N + se2/(S N) = (MS_seeds + MS_docs - MS_resid) / (S N) from the two-way analysis of
variance of D (the mean squares' expectations: se2 + N sa2, se2 + S sb2, se2), with Satterthwaite's
degrees of freedom for the t quantile: the "quasi-F" of crossed random factors (subjects and items
in psycholinguistics). Documents of unequal length enter through their token weights, linearised
(a ratio estimator): Z[s, d] = m + (w_d / mean w) (D[s, d] - m); the documents' term is the
jackknife over documents (delete one, of the seed-averaged weighted mean), with Kish's effective
number of documents for its degrees of freedom, since a few long documents can carry most of the
weight. A variance component estimated below zero is taken as zero (its mean square below the
residual's): where one factor's is, the estimate is the other factor's term alone; where both are,
the three terms pooled (the interaction alone, on all their degrees of freedom).

The seeds-only interval of the table is this one with the documents fixed: its coverage of the
difference on the document population is measured beside this one's by
``benchmarks/doc_interval_coverage.py``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats


class DocInterval(NamedTuple):
    delta: float  # token-weighted mean difference over seeds and documents
    se: float | None  # its standard error with seeds and documents as samples; None below 2 x 2
    df: float | None  # Satterthwaite's degrees of freedom
    half_width: float | None  # of the two-sided interval at ``confidence``
    p: float | None  # two-sided t test of delta = 0
    n_seeds: int
    n_docs: int
    share_docs: float | None  # the documents' share of the variance (sb2/N over the total)


def crossed(diffs: np.ndarray, weights: np.ndarray | None = None, confidence: float = 0.95) -> DocInterval:
    """``diffs``: (seeds, documents) paired differences of per-document mean loss, A - B;
    ``weights``: each document's scored tokens (equal where None)."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"diffs: a (seeds, documents) array, got shape {d.shape}")
    s, n = d.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or (w <= 0).any():
        raise ValueError("weights: one positive weight per document (its scored tokens)")
    m = float((d @ w).mean() / w.sum())
    if s < 2 or n < 2:
        return DocInterval(m, None, None, None, None, s, n, None)
    z = m + (w / w.mean()) * (d - m)
    rows, cols = z.mean(1), z.mean(0)
    v_seed = ((rows - m) ** 2).sum() / (s - 1) / s  # MS_seeds / (S N)
    resid = z - rows[:, None] - cols[None, :] + m
    v_res = (resid**2).sum() / ((s - 1) * (n - 1)) / (s * n)  # MS_resid / (S N)
    # The documents' term by the jackknife over documents of the seed-averaged weighted mean: a few
    # long documents can carry most of the weight, which the mean square alone misses.
    per_doc, total_w = d.mean(0) * w, w.sum()
    loo = (per_doc.sum() - per_doc) / (total_w - w)
    v_doc = (n - 1) / n * ((loo - loo.mean()) ** 2).sum()
    # Documents of unequal weight are fewer in effect (Kish): the documents' term gets its degrees of freedom.
    n_eff = max(total_w**2 / (w**2).sum(), 1.0 + 1e-9)
    parts = [(v_seed, s - 1), (v_doc, n_eff - 1), (v_res, (s - 1) * (n - 1))]
    total = v_seed + v_doc - v_res
    if v_seed < v_res and v_doc < v_res:  # both factors' variances estimated below 0: the interaction alone
        dof = sum(dof for _, dof in parts)
        total = sum(v * dof for v, dof in parts) / dof
        parts = [(total, dof)]
    elif total < max(v_seed, v_doc):  # one factor's estimated below 0: the other's term alone
        total, parts = max((v_seed, [parts[0]]), (v_doc, [parts[1]]), key=lambda t: t[0])
    denominator = sum(v**2 / dof for v, dof in parts)
    if total <= 0 or denominator == 0:
        return DocInterval(m, 0.0, None, 0.0, None, s, n, None)
    df = total**2 / denominator
    se = math.sqrt(total)
    t = stats.t.ppf(0.5 + confidence / 2, df)
    p = float(2 * stats.t.sf(abs(m) / se, df))
    docs_share = min(max(v_doc - v_res, 0.0) / total, 1.0)  # the documents' share of the variance
    return DocInterval(m, se, df, float(t * se), p, s, n, docs_share)


def seeds_only(diffs: np.ndarray, weights: np.ndarray | None = None, confidence: float = 0.95) -> DocInterval:
    """The paired t interval over seeds of each seed's token-weighted difference: the documents
    fixed, as the table's ``paired delta``."""
    d = np.asarray(diffs, dtype=np.float64)
    s, n = d.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    per_seed = d @ w / w.sum()
    m = float(per_seed.mean())
    if s < 2:
        return DocInterval(m, None, None, None, None, s, n, None)
    se = float(per_seed.std(ddof=1) / math.sqrt(s))
    if se == 0:
        return DocInterval(m, 0.0, s - 1, 0.0, None, s, n, None)
    t = stats.t.ppf(0.5 + confidence / 2, s - 1)
    return DocInterval(m, se, float(s - 1), float(t * se), float(2 * stats.t.sf(abs(m) / se, s - 1)), s, n, 0.0)

"""A study's claims and their verdicts: for each claim, A against B with a smallest effect of
interest (SESOI), one of ``VERDICTS``; `wb results` prints them before the study table, its JSON
carries them under ``claims``, the dashboard shows them on the study page (docs/statistics.md,
"Claims and verdicts").

- **The loss**: ``test_loss`` where every finished run records it, else ``val_loss`` (``loss_metric``);
  a claim reads loss, not perplexity, whatever ``--metric`` the table shows.
- **The differences**: per seed, A's loss minus B's over the seeds both finished (the table's pairing);
  unpaired (Welch) where A's or B's variant is declared ``test: welch``, as in the table.
- **The margin**: the SESOI is relative in perplexity (0.01 = 1%); perplexity = exp(loss), so it is
  +-log(1 + sesoi) nats on the mean loss difference.
- **p_holm**: the two-sided test of the mean difference against 0; **p_equivalence_holm**: two one-sided
  tests (TOST) against the margin. Each is Holm-adjusted over the study's claims, in its own family,
  a comparison of the very same runs (and margin) counted once.
- **The verdict**, at the study's alpha on the adjusted p: ``equivalent`` where p_equivalence_holm < alpha
  (the difference, significant or not, lies within the margin); else ``better`` (A's loss lower) or
  ``worse`` where p_holm < alpha; else ``inconclusive`` (fewer than 2 seeds: always).
- **Default claims**: a study that declares none gets one per compared row of its table against the
  row the table compares it with (the base), at ``DEFAULT_SESOI``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from foxwb.workbench.analysis import doc_interval, sequential, stats, table
from foxwb.workbench.spec.claims import DEFAULT_SESOI
from foxwb.workbench.spec.seed_plan import SeedPlan

VERDICTS = ("better", "worse", "equivalent", "inconclusive")
# How a verdict is decided, as `wb results` and the dashboard state it under the verdict table.
RULE = ("equivalent where two one-sided tests put the mean loss difference within +-log(1 + sesoi) (p equiv < "
        "alpha); else better (lower loss) or worse where it differs from 0 (p < alpha); else inconclusive. "
        "delta ppl: exp(delta loss) - 1. Intervals and tests take seeds and test documents as samples (docs/statistics.md, "
        "\"Seeds and documents\") where both rows record per-document test losses; else seeds alone (interval: seeds)")


@dataclass(frozen=True)
class Claim:
    """A against B with a SESOI (relative in perplexity); ``default``: made for a study that declares none."""

    name: str
    a: str
    b: str
    sesoi: float
    default: bool = False


def declared(study=None, tags: dict | None = None) -> list[Claim]:
    """The claims a study declares: from its file where given, else as tagged on its parent run
    (``claims``); [] where it declares none."""
    if study is not None:
        found = [c.model_dump(mode="json") for c in (study.claims or [])]
    else:
        found = json.loads((tags or {}).get("claims", "[]"))
    return [Claim(c["name"], c["compare"][0], c["compare"][1], float(c["sesoi"])) for c in found]


def loss_metric(runs: pl.DataFrame) -> str | None:
    """The loss the verdicts read: the table's (foxwb.workbench.analysis.table.report_metric); None
    where no finished run records a loss."""
    metric = table.report_metric(runs, "loss")
    if runs.is_empty() or metric not in runs.columns or runs[metric].drop_nulls().len() == 0:
        return None
    return metric


def default_claims(runs: pl.DataFrame, info: table.StudyInfo, metric: str) -> list[Claim]:
    """One claim per row of the study table that is compared with another (the base's row, the
    base at the same point, or best point against best point), named by the row, at DEFAULT_SESOI;
    with a confirmation, its rows only (a search row at the chosen point holds the same trials)."""
    rows = table.study_table(runs, info, metric)
    out = []
    for r in rows.iter_rows(named=True):
        if r["comparison"] in (None, table.BASE) or not r["base_row"]:
            continue
        confirming = not r["search_point"] or (info.design_kind == "crossed" and r["search_point"] in info.axis)
        if info.confirm_seeds and not confirming:
            continue
        out.append(Claim(r["row"], r["row"], r["base_row"], DEFAULT_SESOI, default=True))
    return out


def study_claims(runs: pl.DataFrame, info: table.StudyInfo, claims: list[Claim] | None = None,
                 plan: SeedPlan | None = None) -> list[dict]:
    """Every claim's verdict (``claims``: the declared ones; None or []: the default claims), one
    dict per claim in their order: ``name``, ``verdict``, ``delta`` and ``ci95`` (relative in
    perplexity, A over B, minus 1), ``delta_loss`` and ``ci95_loss`` (nats), ``p_holm`` and
    ``p_equivalence_holm`` (Holm-adjusted over the claims; ``p_unadjusted`` and
    ``p_equivalence_unadjusted`` beside them), ``n_seeds``,
    ``sesoi``, and what they were computed from (rows, seeds, metric, test). A study whose seeds are
    a ``plan`` is judged look by look instead (foxwb.workbench.analysis.sequential): ``look``,
    ``alpha_look`` and ``final`` say where each claim stands."""
    metric = loss_metric(runs)
    if metric is None:
        return []
    claims = claims or default_claims(runs, info, metric)
    values = table.row_seed_values(runs, info, metric)
    if plan is not None:
        return _by_plan(claims, values, plan, info, metric)
    frame = table.with_confirmation_rows(table.normalise(runs), info)
    variants = dict(frame.select("row", "variant").unique(keep="first").iter_rows())
    best = {} if info.confirm_seeds or info.design_kind in ("crossed", "scaling") else table.best_rows(table.normalise(runs))
    docs = _documents(frame) if metric == "test_loss" else {}
    out = [judge(c, values, variants, best, info, metric, docs) for c in claims]
    for family, raw in (("p_holm", "p_unadjusted"), ("p_equivalence_holm", "p_equivalence_unadjusted")):
        for record, adjusted in zip(out, _holm_distinct(out, raw, values)):
            record[family] = adjusted
    for record in out:
        record["verdict"] = verdict(record["delta_loss"], record["p_holm"], record["p_equivalence_holm"], info.alpha)
        record["adjust"] = "holm"
        if record["verdict"] == "equivalent" and record["p_holm"] is not None and record["p_holm"] < info.alpha:
            record["note"] = _join(record["note"], "a difference from 0 (p < alpha), but within the sesoi")
    return out


def _by_plan(claims: list[Claim], values: dict, plan: SeedPlan, info: table.StudyInfo, metric: str) -> list[dict]:
    """The claims judged look by look, in the record form of ``judge`` (``interval``: seeds, the
    plan's boundary; the p values Holm-adjusted over the claims open at each look)."""
    out = []
    for c, r in zip(claims, sequential.judge([(c.name, c.a, c.b, c.sesoi) for c in claims], values, plan, info.alpha)):
        ci = r["ci95_loss"]
        note = (f"decided at the look of {r['look']} seeds" if r["final"] and r["verdict"] != "inconclusive"
                else "undecided at the plan's last look" if r["final"] else f"open after {r['look']} seeds: the plan goes on")
        out.append({**r, "a": c.a, "b": c.b, "delta": None if r["delta_loss"] is None else math.expm1(r["delta_loss"]),
                    "ci95": None if ci is None else [math.expm1(ci[0]), math.expm1(ci[1])],
                    "metric": metric, "test": "paired",
                    "default": c.default, "seeds_a": sorted(values.get(c.a, {})), "seeds_b": sorted(values.get(c.b, {})),
                    "note": note, "interval": "seeds (sequential plan)", "n_documents": None, "share_documents": None,
                    "ci_level": 1 - r["alpha_look"],
                    "adjust": "holm"})
    return out


def verdict(delta_loss: float | None, p_value: float | None, p_equivalence: float | None, alpha: float) -> str:
    """The verdict from the (adjusted) p-values: equivalent where TOST rejects both one-sided nulls
    (p_equivalence < alpha); else better (lower loss) or worse where the difference from 0 is
    significant; else inconclusive."""
    if p_equivalence is not None and p_equivalence < alpha:
        return "equivalent"
    if p_value is not None and p_value < alpha and delta_loss is not None and delta_loss != 0:
        return "better" if delta_loss < 0 else "worse"
    return "inconclusive"


def judge(claim: Claim, values: dict[str, dict[int, float]], variants: dict[str, str], best: dict[str, str],
          info: table.StudyInfo, metric: str, docs: dict | None = None) -> dict:
    """One claim's statistics before adjustment: its rows (a row by its name, or in a search without a
    confirmation a variant's best row), the difference of the losses and its CI, the two-sided p, TOST's p."""
    margin = stats.loss_effect_of_ppl_fraction(claim.sesoi)
    a_row, b_row = _row(claim.a, values, best), _row(claim.b, values, best)
    a, b = values.get(a_row, {}), values.get(b_row, {})
    welch = any(variants.get(r, r) in info.welch for r in (a_row, b_row) if r)
    record = {"name": claim.name, "a": claim.a, "b": claim.b, "a_row": a_row, "b_row": b_row, "verdict": None,
              "delta": None, "ci95": None, "delta_loss": None, "ci95_loss": None, "p_holm": None, "p_equivalence_holm": None,
              "p_unadjusted": None, "p_equivalence_unadjusted": None, "n_seeds": 0, "sesoi": claim.sesoi, "margin_loss": margin,
              "metric": metric, "test": "welch" if welch else "paired", "default": claim.default,
              "seeds_a": list(a), "seeds_b": list(b), "note": _rows_note(claim, a_row, b_row), "interval": "seeds",
              "ci_level": 0.95,
              "n_documents": None, "share_documents": None}
    if not a or not b:
        missing = [n for n, v in ((claim.a, a), (claim.b, b)) if not v]
        record["note"] = _join(record["note"], "no finished seeds of " + " and ".join(repr(m) for m in missing))
        return record
    if welch:
        w = stats.welch(a.values(), b.values())
        eq = stats.tost_welch(a.values(), b.values(), margin)
        delta, half, p, n = w.delta, w.half_width, w.p, min(len(a), len(b))
    else:
        pr = stats.paired(a, b)
        eq = stats.tost_paired(a, b, margin)
        delta, half, p, n = pr.delta, pr.half_width, pr.p, pr.n
        record["seeds_a"] = record["seeds_b"] = shared = [s for s in a if s in b]
        crossed = _by_document(docs or {}, a_row, b_row, shared)
        if crossed is not None and crossed.half_width is not None:
            delta, half, p = crossed.delta, crossed.half_width, crossed.p
            eq = stats.tost_summary(crossed.delta, crossed.se, crossed.df, margin)
            record.update(interval="seeds x documents", n_documents=crossed.n_docs, share_documents=crossed.share_docs)
    record.update(delta_loss=delta, p_unadjusted=p, p_equivalence_unadjusted=eq.p, n_seeds=n,
                  delta=None if delta is None else math.expm1(delta))
    if half is not None:
        record["ci95_loss"] = [delta - half, delta + half]
        record["ci95"] = [math.expm1(delta - half), math.expm1(delta + half)]
    if n < 2:
        record["note"] = _join(record["note"], f"{n} seed{'s' if n != 1 else ''} {'shared' if not welch else 'on a side'}: no test")
    return record


def _documents(frame: pl.DataFrame) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray, str]]:
    """(row, seed) -> (per-document mean test loss, scored tokens, the test set's digest), from the
    runs that recorded them (foxwb.workbench.analysis.runs.with_test_documents)."""
    if "test_doc_loss" not in frame.columns:
        return {}
    done = frame.filter((pl.col("status") == "FINISHED") & ~pl.col("stopped_early") & pl.col("test_doc_loss").is_not_null())
    out = {}
    for r in done.select("row", "seed", "test_doc_loss", "test_doc_tokens", "test_digest").iter_rows(named=True):
        out.setdefault((r["row"], r["seed"]), (np.asarray(r["test_doc_loss"]), np.asarray(r["test_doc_tokens"]), r["test_digest"]))
    return out


def _by_document(docs: dict, a_row: str | None, b_row: str | None, seeds: list[int]) -> doc_interval.DocInterval | None:
    """The seed x document interval of A - B where both rows have every shared seed's per-document
    losses on one test set; None otherwise (the seeds-only interval stands)."""
    cells = [(docs.get((a_row, s)), docs.get((b_row, s))) for s in seeds]
    if len(cells) < 2 or not all(x is not None and y is not None for x, y in cells):
        return None
    if len({c[2] for pair in cells for c in pair}) != 1 or len({len(c[0]) for pair in cells for c in pair}) != 1:
        return None
    return doc_interval.crossed(np.stack([x[0] - y[0] for x, y in cells]), cells[0][0][1])


def _row(name: str, values: dict, best: dict) -> str | None:
    """The row a claim's name reads: the row of that name, else (a search without a confirmation)
    the variant's best row; None where neither has finished seeds."""
    if name in values:
        return name
    return best.get(name)


def _rows_note(claim: Claim, a_row: str | None, b_row: str | None) -> str:
    picked = [f"{n!r} reads its best search row {r!r}, chosen on these runs" for n, r in ((claim.a, a_row), (claim.b, b_row))
              if r is not None and r != n]
    return "; ".join(picked)


def _join(note: str, more: str) -> str:
    return f"{note}; {more}" if note else more


def _holm_distinct(records: list[dict], key: str, values: dict[str, dict[int, float]]) -> list[float | None]:
    """Holm-adjusted ``key`` of each record over the distinct comparisons: claims that compare the
    very same runs (a variant and its alias, a default claim and a declared one) with the same test
    (and, for equivalence, the same margin) are one test in the family and share its adjusted p."""
    def ident(r: dict):
        margin = r["margin_loss"] if key == "p_equivalence_unadjusted" else None
        return r["test"], tuple(values.get(r["a_row"] or "", {}).items()), tuple(values.get(r["b_row"] or "", {}).items()), margin

    firsts: dict = {}
    for i, r in enumerate(records):
        if r[key] is not None:
            firsts.setdefault(ident(r), i)
    adjusted = dict(zip(firsts.values(), stats.holm([records[i][key] for i in firsts.values()])))
    return [adjusted[firsts[ident(r)]] if r[key] is not None else None for r in records]

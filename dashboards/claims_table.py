"""The study page's verdict table: each claim of the study (workbench/analysis/claims.py), A
against B, its verdict, the difference in perplexity and loss with its 95% CI, p (Holm) and
p equiv (Holm) (p (unadjusted) on hover), the seeds and the SESOI, as `wb results` prints it first
(templates/claims.html.j2)."""
from __future__ import annotations

from foxwb.dashboards import render
from foxwb.workbench.analysis.claims import RULE

# A colour per verdict word: a reader finds the decided claims at a glance.
COLOURS = {"better": "#2e7d32", "worse": "#b22222", "equivalent": "#1f77b4", "inconclusive": "#666", "open": "#999"}


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.2f}%"


def _p(p: float | None, unadjusted: float | None, alpha: float, name: str = "p") -> dict:
    """A p cell: the Holm-adjusted p, marked below alpha, the unadjusted one on hover (``name``: p,
    or p equiv for the equivalence test's)."""
    if p is None:
        return {"text": "", "sig": False, "title": None}
    return {"text": "<1e-6" if p < 1e-6 else format(p, ".3g"), "sig": p < alpha,
            "title": None if unadjusted is None else f"{name} (unadjusted) = {unadjusted:.3g}"}


def _claim(c: dict, alpha: float) -> dict:
    n = f"W {len(c['seeds_a'])} & {len(c['seeds_b'])}" if c["test"] == "welch" else str(c["n_seeds"])
    if c.get("interval") == "seeds x documents":
        n += f" × {c['n_documents']} docs"
    level = c.get("alpha_look") or alpha
    return {"name": c["name"], "a": c["a_row"] or c["a"], "b": c["b_row"] or c["b"], "verdict": c["verdict"],
            "colour": COLOURS[c["verdict"]], "delta": _pct(c["delta"]),
            "delta_loss": "" if c["delta_loss"] is None else format(c["delta_loss"], "+.4f"),
            "ci": f"[{_pct(c['ci95'][0])}, {_pct(c['ci95'][1])}]" if c["ci95"] else "",
            "p": _p(c["p_holm"], c.get("p_unadjusted"), level),
            "p_equivalence": _p(c["p_equivalence_holm"], c.get("p_equivalence_unadjusted"), level, "p equiv"),
            "n": n, "sesoi": f"{100 * c['sesoi']:g}%", "note": c.get("note")}


def html(claims: list[dict], alpha: float) -> str:
    """The verdict table and its note, as HTML; a sentence where no claim could be judged."""
    if not claims:
        return render("claims.html.j2", claims=[])
    level = claims[0].get("alpha_look")  # seeds by plan: the look's interval, wider than 95%
    family = (f"Holm-adjusted over the {len(claims)} claims, differences and equivalences apart" if len(claims) > 1
              else "Holm over 1 claim: unadjusted")
    note = (f"On {claims[0]['metric']}, differences A − B paired by seed (and by test document where the seeds "
            f"column counts documents; W: Welch's, unpaired); alpha {alpha:g}; p (Holm) and p equiv (Holm) {family}; "
            f"p (unadjusted) on hover. Verdict: {RULE}.")
    tail = ((f" Seeds by plan: each look tests at {level:.4f}, so that alpha {alpha:g} holds over all the looks; a "
             "claim's verdict is the first look's that decides it, its interval that look's over seeds alone."
             if level else "")
            + (" Hover a row for its note." if any(c.get("note") for c in claims) else ""))
    # Not table.ablation: readers of the page (and its tests) take that one for the study table.
    return render("claims.html.j2", claims=[_claim(c, alpha) for c in claims],
                  ci_label=f"{100 * (1 - level):.1f}% CI (ppl)" if level else "95% CI (ppl)", note=note,
                  default_sesoi=f"{100 * claims[0]['sesoi']:g}%" if all(c["default"] for c in claims) else None,
                  note_tail=tail)

"""The study page's verdict table: each claim of the study (workbench/analysis/claims.py), A
against B, its verdict, the difference in perplexity and loss with its 95% CI, p and
p_equivalence (Holm), the seeds and the SESOI, as `wb results` prints it first."""
from __future__ import annotations

from foxwb.dashboards.figures import esc
from foxwb.workbench.analysis.claims import RULE

# A colour per verdict word: a reader finds the decided claims at a glance.
COLOURS = {"better": "#2e7d32", "worse": "#b22222", "equivalent": "#1f77b4", "inconclusive": "#666", "open": "#999"}


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.2f}%"


def _p(p: float | None, alpha: float) -> str:
    if p is None:
        return ""
    text = "&lt;1e-6" if p < 1e-6 else format(p, ".3g")
    return f'<span class="sig">{text}</span>' if p < alpha else text


def html(claims: list[dict], alpha: float) -> str:
    """The verdict table and its note, as HTML; a sentence where no claim could be judged."""
    if not claims:
        return '<p class="note">No claim judged: no finished run records test_loss or val_loss.</p>'
    adjusted = claims[0]["adjust"] == "holm"
    body = []
    for c in claims:
        ci = f"[{_pct(c['ci95'][0])}, {_pct(c['ci95'][1])}]" if c["ci95"] else ""
        n = f"W {len(c['seeds_a'])} &amp; {len(c['seeds_b'])}" if c["test"] == "welch" else str(c["n_seeds"])
        if c.get("interval") == "seeds x documents":
            n += f" &times; {c['n_documents']} docs"
        note = f' title="{esc(c["note"])}"' if c.get("note") else ""
        body.append(f'<tr{note}><td class="claim">{esc(c["name"])}</td><td>{esc(c["a_row"] or c["a"])} vs '
                    f'{esc(c["b_row"] or c["b"])}</td><td class="verdict" style="color:{COLOURS[c["verdict"]]};'
                    f'font-weight:600">{c["verdict"]}</td><td class="num">{_pct(c["delta"])}</td>'
                    f'<td class="num">{"" if c["delta_loss"] is None else format(c["delta_loss"], "+.4f")}</td>'
                    f'<td class="num">{ci}</td><td class="num">{_p(c["p_value"], alpha)}</td>'
                    f'<td class="num">{_p(c["p_equivalence"], alpha)}</td><td class="num">{n}</td>'
                    f'<td class="num">{100 * c["sesoi"]:g}%</td></tr>')
    holm = " (Holm)" if adjusted else ""
    level = claims[0].get("alpha_look")  # seeds by plan: the look's interval, wider than 95%
    ci_label = f"{100 * (1 - level):.1f}% CI (ppl)" if level else "95% CI (ppl)"
    head = ("<tr><th>Claim</th><th>A vs B</th><th>Verdict</th><th>&Delta; ppl</th><th>&Delta; loss</th>"
            f"<th>{ci_label}</th><th>p{holm}</th><th>p equivalence{holm}</th><th>Seeds (&times; test documents)</th><th>SESOI</th></tr>")
    default = (f" The study declares no claims: each compared row is judged against the row the table compares it "
               f"with, at a SESOI of {100 * claims[0]['sesoi']:g}% (declare <code>claims:</code> in the study file)."
               if all(c["default"] for c in claims) else "")
    family = (f"Holm-adjusted over the {len(claims)} claims, differences and equivalences apart" if len(claims) > 1
              else "Holm over 1 claim: unadjusted") if adjusted else "unadjusted"
    note = (f"On {esc(claims[0]['metric'])}, differences A &minus; B paired by seed (and by test document where the "
            f"seeds column counts documents; W: Welch's, unpaired); alpha {alpha:g}; "
            f"p {family}. Verdict: {esc(RULE)}.{default}"
            + (f" Seeds by plan: each look tests at {level:.4f}, so that alpha {alpha:g} holds over all the looks; a "
               "claim's verdict is the first look's that decides it, its interval that look's over seeds alone."
               if level else "")
            + (" Hover a row for its note." if any(c.get("note") for c in claims) else ""))
    # Not table.ablation: readers of the page (and its tests) take that one for the study table.
    return (f'<table class="claims"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'
            f'<p class="note">{note}</p>')

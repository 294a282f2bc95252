"""The study table for a paper: `wb results --format markdown` (GitHub-flavoured tables) or
`--format latex` (booktabs tabulars, no float or caption: the paper wraps them in its own
``table``). Each carries what the text table shows: the claims with their verdicts, the rows (mean
and 95% CI, the delta from the base with its interval, p as ``--p`` chose, the MDE) and the
footnotes (metric and split, warnings, fairness flags, which p). Every number comes from the
``rows`` frame and ``about`` dict the JSON export writes; the wording of the notes from
foxwb.workbench.analysis.report, so the text table and these say the same."""
from __future__ import annotations

import re

import polars as pl

from foxwb.workbench.analysis import report
from foxwb.workbench.analysis.table import StudyInfo

FORMATS = ("markdown", "latex")
_SEARCH_TITLE = ("search, beside the table: the runs each point was chosen on (one seed each; the choice read the "
                 "select split's val_loss)")


class Markdown:
    """GitHub-flavoured Markdown: numbers with a true minus sign (U+2212), ± and [lo, hi]."""

    pm, star = " ± ", "\\*"

    @staticmethod
    def num(s: str) -> str:
        return s.replace("-", "\u2212").replace("<", "\\<")

    @staticmethod
    def math(s: str) -> str:
        return s

    @staticmethod
    def text(s: str) -> str:
        # Backslash-escape what Markdown reads as markup (emphasis, links, a cell's end, HTML);
        # `code` spans stay as they are.
        return _outside_code(s, lambda part: re.sub(r"([\\`*_|\[\]<>#])", r"\\\1", part), lambda code: f"`{code}`")

    @staticmethod
    def table(head: list[str], align: str, body: list[list[str]]) -> list[str]:
        rule = ["---" if a == "l" else "--:" for a in align]
        return [f"| {' | '.join(cells)} |" for cells in [head, rule, *body]]

    @staticmethod
    def paragraph(s: str) -> list[str]:
        return [s, ""]

    @staticmethod
    def notes(items: list[str], title: str = "Notes:") -> list[str]:
        return [title, ""] + [f"- {n}" for n in items] + [""]


class Latex:
    """LaTeX for booktabs (``\\usepackage{booktabs}``): numbers in math mode (a true minus, ``\\pm``,
    ``\\times 10^{k}``), text with its special characters escaped."""

    pm, star = r" \pm ", "^{*}"
    _SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
                "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
                ">": r"\textgreater{}", "|": r"\textbar{}", "±": r"$\pm$", "\u2212": "$-$", "—": "---", "–": "--",
                "×": r"$\times$", "≥": r"$\geq$", "≤": r"$\leq$", "…": r"\dots{}"}

    @staticmethod
    def num(s: str) -> str:
        s = re.sub(r"e([+-])0*(\d+)", lambda m: rf"\times 10^{{{'-' if m[1] == '-' else ''}{m[2]}}}", s)
        return s.replace("%", r"\%")

    @staticmethod
    def math(s: str) -> str:
        return f"${s}$" if s else ""

    @classmethod
    def text(cls, s: str) -> str:
        def plain(part: str) -> str:
            part = "".join(cls._SPECIAL.get(ch, ch) for ch in part).replace(" - ", " $-$ ")  # "A - B": a minus
            return re.sub(r'"([^"]*)"', r"``\1''", part)  # typographic quotes
        return _outside_code(s, plain, lambda code: rf"\texttt{{{plain(code)}}}")

    @staticmethod
    def table(head: list[str], align: str, body: list[list[str]]) -> list[str]:
        # {} first: a line opening with [ would be read as the optional argument of the \\ or rule before it.
        lines = ["{}" * cells[0].startswith("[") + " & ".join(cells) + r" \\" for cells in [head, *body]]
        return [rf"\begin{{tabular}}{{{align}}}", r"\toprule", lines[0], r"\midrule", *lines[1:], r"\bottomrule", r"\end{tabular}"]

    @staticmethod
    def paragraph(s: str) -> list[str]:
        return [rf"\par\smallskip\noindent{{\small {s}}}\par\smallskip", ""]

    @staticmethod
    def notes(items: list[str], title: str = "Notes:") -> list[str]:
        # A list, not \footnote: footnotes inside a float's tabular are lost.
        return [rf"\par\smallskip\noindent{{\footnotesize {title}", r"\begin{itemize}\setlength\itemsep{0pt}"] + [
            rf"\item {n}" for n in items] + [r"\end{itemize}}", ""]


def _outside_code(s: str, plain, code) -> str:
    """``s`` with ``plain`` applied outside `code` spans and ``code`` to the spans' insides."""
    parts = re.split(r"`([^`]*)`", s)
    return "".join(code(p) if i % 2 else plain(p) for i, p in enumerate(parts))


def dialect(fmt: str):
    return {"markdown": Markdown, "latex": Latex}[fmt]


def _n(d, value, fmt: str) -> str:
    """A number as ``d`` typesets it; "" for None."""
    return "" if value is None else d.math(d.num(format(value, fmt)))


def _pm(d, value, half, fmt: str = ".3f") -> str:
    """value ± half (n/a where there is no interval); ``fmt`` the value's (``+.3f``: a difference's sign)."""
    half_text = d.num(format(half, fmt.lstrip("+"))) if half is not None else r"\mathrm{n/a}" if d is Latex else "n/a"
    return d.math(d.num(format(value, fmt)) + d.pm + half_text)


def _p(d, p, alpha: float, tiny: bool = False) -> str:
    """p to 3 significant digits, starred below alpha; ``tiny``: below 1e-6 as <1e-6, as the claims' text."""
    if p is None:
        return ""
    shown = "<1e-6" if tiny and p < 1e-6 else format(p, ".3g")
    return d.math(d.num(shown) + (d.star if p < alpha else ""))


def _pct(d, x) -> str:
    return "" if x is None else d.num(f"{100 * x:+.2f}%")


def claims_part(d, claims: list[dict], alpha: float) -> list[str]:
    """The verdicts, then how they are decided (report.claim_lines' header and notes)."""
    text = report.claim_lines(claims, alpha)
    if not claims:
        return d.paragraph(d.text(text[0]))
    level = claims[0].get("alpha_look")
    head = ["claim", "A vs B", "verdict", "delta ppl", "delta loss", f"{100 * (1 - level):.1f}% CI (ppl)" if level else "95% CI (ppl)",
            "p (Holm)", "p equiv (Holm)", "n", "SESOI"]
    body = []
    for c in claims:
        at = c.get("alpha_look") or alpha
        ci = d.math(f"[{_pct(d, c['ci95'][0])}, {_pct(d, c['ci95'][1])}]") if c["ci95"] else ("n/a" if c["n_seeds"] else "")
        n = f"W {len(c['seeds_a'])} & {len(c['seeds_b'])}" if c["test"] == "welch" else str(c["n_seeds"])
        if c.get("interval") == "seeds x documents":
            n += f" × {c['n_documents']}d"
        body.append([d.text(c["name"]), d.text(f"{c['a_row'] or c['a']} vs {c['b_row'] or c['b']}"), d.text(c["verdict"]),
                     d.math(_pct(d, c["delta"])), _n(d, c["delta_loss"], "+.4f"), ci, _p(d, c["p_holm"], at, True),
                     _p(d, c["p_equivalence_holm"], at, True), d.text(n), d.math(d.num(f"{100 * c['sesoi']:g}%"))])
    # claim_lines: its header, the table (a head and one line per claim), then its notes.
    notes = [line.strip() for line in text[len(claims) + 2:] if line.strip()]
    return d.paragraph(d.text(text[0])) + d.table([d.text(h) for h in head], "lllrrrrrrr", body) + [""] + d.notes(
        [d.text(n) for n in notes])


_NOT_DONE = ("failed", "killed", "running", "stopped", "to_run")


def _runs(r: dict) -> str:
    """The runs cell, where some row's runs are not all finished: each state's count."""
    return ", ".join(f"{r[k]} {k.replace('_', ' ')}" for k in ("finished", *_NOT_DONE) if r.get(k)) or "none"


def _row_cells(d, r: dict, alpha: float, holm: bool, search: bool, chosen: bool, kinds: bool, runs: bool) -> list[str]:
    """One row of the study table, as report.table_lines' cells (spikes and workers apart: they
    are the run's record, not the result; the notes name the rows that spiked; runs only where some
    did not finish)."""
    seeds = f"{r['n_seeds']}/{r['seeds_expected']}!" if r["fewer_seeds"] else str(r["n_seeds"])
    mean = "" if r["mean"] is None else _pm(d, r["mean"], r["ci95"])
    delta = d.text("base") if r["comparison"] == "base" else (_n(d, r["delta"], "+.3f") or d.text("—"))
    interval = ""
    if r["paired_n"]:
        interval = f"{_pm(d, r['paired_delta'], r['paired_ci95'], '+.3f')} ({r['paired_n']})"
    elif r["test"] == "welch" and r["delta"] is not None:
        welch = d.text(f"W {r['n_seeds']} & {r['base_n_seeds']}")
        interval = f"{_pm(d, r['delta'], r['welch_ci95'], '+.3f')} ({welch})"
    vs = [] if not search else [""] if r["comparison"] == "base" else [d.text(r["base_row"] or "—")]
    return [d.text(r["row"]), *([d.text(r["chosen"] or "")] if chosen else []), seeds, mean, delta, *vs, interval,
            _p(d, r["p_holm"] if holm else r["p_unadjusted"], alpha), _n(d, r["mde"], ".3f"),
            *([d.text(_runs(r))] if runs else []), *([d.text(r["kinds"] or "")] if kinds else [])]


def table_part(d, rows: pl.DataFrame, about: dict, info: StudyInfo) -> list[str]:
    """The study table under report.table_lines' title, a tune-then-confirm study's search rows in a
    table of their own, then the notes."""
    holm, metric, records = about["p"] == "p_holm", about["metric"], rows.to_dicts()
    search = any(r["search_point"] for r in records)
    chosen = any(r["chosen"] is not None for r in records)
    kinds = any(r["kinds"] for r in records)
    welch = any(r["test"] == "welch" for r in records)
    runs = any(r.get(k) for r in records for k in _NOT_DONE)
    head = ["row", "chosen", "seeds", f"{metric} mean ± 95% CI", "delta", *(["vs"] if search else []),
            f"paired{' or Welch' if welch else ''} delta ± 95% CI (n)", "p (Holm)" if holm else "p (unadjusted)", "MDE",
            *(["runs"] if runs else []), *(["kinds"] if kinds else [])]
    align = "llrrr" + "l" * search + "rrr" + "l" * runs + "l" * kinds
    # Split on the rows' stage, as report.table_lines, the dashboard's table and the Holm families are.
    parts = [(None, [r for r in records if r["stage"] == "confirmation"]),
             (_SEARCH_TITLE, [r for r in records if r["stage"] == "search"])] \
        if any(r["stage"] == "search" for r in records) else [(None, records)]
    title = report.table_lines(rows, info, metric, holm)[0]
    out = d.paragraph(d.text(title))
    for name, part in parts:
        if not part:
            continue
        with_chosen = chosen and name is None
        keep = [i for i in range(len(head)) if i != 1 or with_chosen]
        out += (d.paragraph(d.text(name)) if name else []) + d.table(
            [d.text(head[i]) for i in keep], "".join(align[i] for i in keep),
            [_row_cells(d, r, about["alpha"], holm, search, with_chosen, kinds, runs) for r in part]) + [""]
    return out + d.notes([d.text(n) for n in table_notes(rows, about, info, search, chosen)])


def table_notes(rows: pl.DataFrame, about: dict, info: StudyInfo, search: bool, chosen: bool) -> list[str]:
    """The text table's footnotes (report.footnotes, the split it was read on first), the rows that
    spiked, and the fairness report's flags."""
    # The spikes column is left out (the notes name the rows that spiked), and so is its note.
    quiet = rows.with_columns(pl.lit(None, pl.Int64).alias("runs_spiked"))
    notes = [about["metric_split"]] if about.get("metric_split") else []
    for note in report.footnotes(quiet, info, about["p"] == "p_holm", search, chosen):
        if note.startswith("  ") and notes:  # a failed run's reason, under "runs that did not finish"
            notes[-1] += (" " if notes[-1].endswith(":") else "; ") + note.strip()
        else:
            notes.append(note)
    spiked = [f"{r['row']} ({r['runs_spiked']} of {r['finished']})" for r in rows.iter_rows(named=True) if r["runs_spiked"]]
    if spiked:
        notes.append("runs with a gradient-norm or loss spike (docs/stability.md): " + ", ".join(spiked))
    fair = about.get("fairness") or {}
    if fair.get("rows"):
        flags = [f["text"] for f in fair.get("flags", [])]
        notes.append("fairness flags (docs/results.md, \"The fairness report\"): " + ("; ".join(flags) if flags else "none"))
    elif fair.get("note"):
        notes.append(f"fairness: {fair['note']}")
    return notes


def _block(d, lines: list[str]) -> list[str]:
    """A text block of report's (its title line, then indented items) as a paragraph and a list."""
    lines = [line for line in lines if line.strip()]
    if not lines:
        return []
    return d.notes([d.text(line.strip()) for line in lines[1:]], d.text(lines[0]))


def study(rows: pl.DataFrame, about: dict, info: StudyInfo, fmt: str, warnings: list[str] = ()) -> str:
    """A study's results in ``fmt`` (markdown or latex): ``warnings`` (the text table's loud lines:
    small test sets, stale trials) first, the claims, the table and its notes, then a scaling
    study's laws and the effect versus the axis where ``about`` has them."""
    d = dialect(fmt)
    out = [line for w in warnings for line in d.paragraph(d.text(w))]
    out += claims_part(d, about.get("claims") or [], about["alpha"]) + table_part(d, rows, about, info)
    if about.get("fits"):
        out += _block(d, report.fit_lines(about))
    out += _block(d, report.effect_lines(about))
    return "\n".join(out).rstrip("\n") + "\n"


def comparison(frame: pl.DataFrame, a: str, b: str, metric: str, only_a: list[str], only_b: list[str], fmt: str) -> str:
    """Two studies' shared rows side by side (report.compare_studies' frame) in ``fmt``, with the
    notes of report.comparison_lines."""
    d = dialect(fmt)
    head = ["row", f"{a}: n", "mean ± 95% CI", f"{b}: n", "mean ± 95% CI", "B - A ± 95% CI", "p (Welch)"]
    body = [[d.text(r["row"]), str(r["a_n_seeds"]), _pm(d, r["a_mean"], r["a_ci95"]), str(r["b_n_seeds"]),
             _pm(d, r["b_mean"], r["b_ci95"]), _pm(d, r["difference"], r["difference_ci95"], "+.3f") if r["difference"] is not None else "",
             _p(d, r["p_welch"], 0.0)] for r in frame.iter_rows(named=True)]
    notes = report.comparison_lines(frame, a, b, metric, only_a, only_b)[frame.height + 1:]
    out = d.table([d.text(h) for h in head], "lrrrrrr", body) + [""] + d.notes([d.text(n) for n in notes])
    return "\n".join(out).rstrip("\n") + "\n"

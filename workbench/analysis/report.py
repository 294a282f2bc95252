"""The study table as `wb results` prints it, after its claims' verdicts, and two studies side by
side. Every figure comes from foxwb.workbench.analysis.table (one definition of rows, base and
comparisons), foxwb.workbench.analysis.claims (the verdicts) and foxwb.workbench.analysis.stats."""
from __future__ import annotations

import polars as pl

from foxwb.workbench.analysis import stats
from foxwb.workbench.analysis.claims import RULE
from foxwb.workbench.spec.trial import FEWER_SEQUENCES
from foxwb.workbench.analysis.table import BEST_POINT, SAME_POINT, STANDARD_KINDS, StudyInfo

SPIKES = ("spikes: of a row's finished runs, those with a gradient-norm spike (a run of steps after warmup above "
          "10x the median gradient norm) or a loss spike (above the median of the 50 steps before by 6 robust sd "
          "and 5%); max: the largest gradient norm after warmup (docs/stability.md)")


def _num(value, fmt: str = ".3f", empty: str = "") -> str:
    return empty if value is None else format(value, fmt)


def _runs_cell(r: dict) -> str:
    parts = [f"{r[k]} {k}" for k in ("finished", "failed", "killed", "running", "stopped") if r.get(k)]
    if r.get("to_run"):
        parts.append(f"{r['to_run']} to run")
    return ", ".join(parts) or "none"


def _spike_cell(r: dict) -> str:
    if r.get("runs_spiked") is None:
        return ""
    mark = "!" if r["runs_spiked"] else ""
    # "k of n", not "k/n": the seeds column's k/n! counts seeds against those asked.
    return f"{r['runs_spiked']} of {r['finished']}{mark} max {_num(r['grad_norm_max'], '#.3g')}"


def workers_cell(workers) -> str:
    """The processes per trial of a row's runs (Ray Train; table.workers): "2", or "1, 2" where its
    runs differ; "" without runs. The text table's and the dashboard's workers column."""
    if workers is None:
        return ""
    return ", ".join(map(str, workers)) if isinstance(workers, (list, tuple)) else str(workers)


def _p_cell(p, alpha: float) -> str:
    return "" if p is None else f"{p:.3g}{'*' if p < alpha else ''}"


def table_lines(table: pl.DataFrame, info: StudyInfo, metric: str, holm: bool = True, split: str | None = None) -> list[str]:
    """The table as text lines: a header naming the base (and ``split``: the documents the metric
    was read on), the columns, then the footnotes. ``holm``: the p column Holm-adjusted over the
    distinct comparisons (the default, as on the dashboard), else unadjusted."""
    search = (table["search_point"] != "").any() if table.height else False
    # Trials of more than one worker (Ray Train): how many, per row; one-process studies show no column.
    several = table.height > 0 and any(w not in (None, [1]) for w in table["workers"].to_list())
    chosen = table.height > 0 and any(c is not None for c in table["chosen"].to_list())
    welch = table.height > 0 and "welch" in table["test"].to_list()
    head = ["row"] + (["chosen"] if chosen else []) + ["seeds", f"{metric} mean", "95% CI", "delta"] + (["vs"] if search else []) + [
        "paired or Welch delta ± 95% CI (n)" if welch else "paired delta ± 95% CI (n)", "p (Holm)" if holm else "p (unadjusted)", "MDE", "runs", "spikes", "kinds"] + (
        ["workers"] if several else [])
    def cells(r: dict, chosen: bool) -> list[str]:
        seeds = f"{r['n_seeds']}/{r['seeds_expected']}!" if r["fewer_seeds"] else str(r["n_seeds"])
        delta = "base" if r["comparison"] == "base" else _num(r["delta"], "+.3f", "—")
        paired = ""
        if r["paired_n"]:
            paired = f"{r['paired_delta']:+.3f} ±{_num(r['paired_ci95'], '.3f', 'n/a')} ({r['paired_n']})"
        elif r["test"] == "welch" and r["delta"] is not None:
            paired = f"{r['delta']:+.3f} ±{_num(r['welch_ci95'], '.3f', 'n/a')} (W {r['n_seeds']} & {r['base_n_seeds']})"
        vs = [r["base_row"] or "—"] if search else []
        if search and r["comparison"] == "base":
            vs = [""]
        return [r["row"], *([r["chosen"] or ""] if chosen else []), seeds, _num(r["mean"]), _num(r["ci95"], ".3f", "n/a" if r["n_seeds"] else ""), delta,
                *vs, paired, _p_cell(r["p_holm"] if holm else r["p_unadjusted"], info.alpha), _num(r["mde"]),
                _runs_cell(r), _spike_cell(r), r["kinds"] or "", *([workers_cell(r["workers"])] if several else [])]

    rows = table.to_dicts()
    # A tune-then-confirm study: its confirmation rows are the table; the search they were chosen on beside it.
    # Split on the rows' stage, as the dashboard's table and the Holm families are (a search row before
    # the choice is a search row still).
    staged = any(r["stage"] == "search" for r in rows)
    parts = [(None, [r for r in rows if r["stage"] == "confirmation"]),
             ("search, beside the table: the runs each point was chosen on (one seed each, the chosen point's "
              "row with the confirmation's seeds too; the choice read the select split's val_loss)", [r for r in rows if r["stage"] == "search"])] if staged else [(None, rows)]
    text = []
    for title, part in parts:
        if not part:
            continue
        columns = [c for c in head if c != "chosen"] if title else head
        lines = [columns] + [cells(r, chosen and not title) for r in part]
        widths = [max(len(line[c]) for line in lines) for c in range(len(columns))]
        text += ([""] + [title] if title else []) + [
            "  ".join([line[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(line[1:], widths[1:])]).rstrip() for line in lines]
    return [f"study {info.name!r}: {metric}, mean and 95% CI (Student t) over seeds; base {info.base!r} ({info.base_from}); "
            f"alpha {info.alpha:g}"] + ([f"  {split}"] if split else []) + text + [""] * staged + footnotes(table, info, holm, search, chosen)


def chosen_note(info: StudyInfo) -> str:
    """What a confirmation row is and what it is compared with (the table's footnote, the dashboard's)."""
    each = "each cell's (a variant at a point of the axis)" if info.design_kind == "crossed" else "each variant's"
    return (f"chosen: a confirmation row's searched values, {each} best search point, run on the "
            f"confirmation seeds {info.confirm_seeds}; it is compared with the base's confirmation row"
            + (" at the same point" if info.design_kind == "crossed" else "")
            + ", at the base's own choice (the two may differ); the search rows, one seed each, are "
            "shown apart from the table (the chosen point's search row counts the confirmation's seeds too, the same trials)")


def footnotes(table: pl.DataFrame, info: StudyInfo, holm: bool, search: bool, chosen: bool = False) -> list[str]:
    rows = table.to_dicts()
    notes = ["delta: mean minus the mean of the base's row"
             + (" it is compared with (vs)" if search else "")
             + "; paired: the mean of the per-seed differences from it and their 95% t CI over the seeds both have (n); "
             + ("p (Holm): two-sided paired t-test, Holm-adjusted over the distinct comparisons (`--p unadjusted`: each alone)"
                if holm else "p (unadjusted): two-sided paired t-test, each comparison alone (the default, `--p holm`, adjusts over them)")
             + ", * below alpha; "
             f"MDE: the smallest true difference that test detects with 80% power at alpha {info.alpha:g}, "
             "given the spread of the differences and n (docs/statistics.md)"]
    if any(r["test"] == "welch" for r in rows):
        notes.append("W k & m: Welch's unpaired comparison, for a row compared with the base unpaired (a variant "
                     "declared `test: welch`, as row or base): the difference of the means over the row's k seeds "
                     "and the base's m, its 95% CI on the Welch-Satterthwaite df, Welch's two-sided p, and the MDE "
                     "of Welch's test from each row's own spread and seeds")
    if search:
        kinds = {r["comparison"] for r in rows}
        if SAME_POINT in kinds:
            notes.append("vs (same point): the base at the same searched values")
        if BEST_POINT in kinds:
            notes.append("vs (best point): the variant's best row (lowest mean val_loss) against the base's best, "
                         "both chosen on these very runs (confirm on new seeds); the variant's other rows: no comparison")
    if chosen:
        notes.append(chosen_note(info))
    if any(r["fewer_seeds"] for r in rows):
        asks = f"{info.seeds}; rows of seeds of their own: " + ", ".join(f"{v} {s}" for v, s in info.variant_seeds.items()) \
            if info.variant_seeds else info.seeds
        if info.confirm_seeds:
            asks = f"a confirmation row {info.confirm_seeds}, a search row {info.seeds}"
        notes.append(f"k/n!: k finished seeds where the study asks for n ({asks})")
    if any(r["runs_spiked"] for r in rows):
        notes.append(f"k of n! in spikes: k of n runs spiked. {SPIKES}")
    elif any(r["runs_spiked"] is not None for r in rows):
        notes.append(SPIKES)
    short = [f"{r['row']} ({r['eval_sequences']} of {r['eval_sequences_asked']})" for r in rows
             if r["eval_sequences"] is not None and r["eval_sequences"] < r["eval_sequences_asked"]]
    if short:
        notes.append(f"validated on fewer held-out sequences than eval.sequences asks ({FEWER_SEQUENCES}): "
                     + ", ".join(short))
    if any(r["kinds"] for r in rows):
        notes.append("kinds: slots whose kind is not the one the paper's presets use ("
                     + ", ".join(f"{s}={k}" for s, k in STANDARD_KINDS.items()) + ")")
    failures = [f"  {r['row']} / {reason}" for r in rows for reason in r["reasons"]]
    if failures:
        notes.append("runs that did not finish, with their reasons:")
    return notes + failures


def compare_studies(a: dict[str, dict[int, float]], b: dict[str, dict[int, float]]) -> pl.DataFrame:
    """The rows two studies share (same row name: variant and searched values, or a confirmation
    row), side by side, from each one's row -> {seed: value} as its own table reads them
    (`table.row_seed_values`): each one's seeds, mean and 95% CI, and B - A with its Welch CI and
    p (unpaired: two studies' seeds are not known to share a data order)."""
    rows = []
    for row in [r for r in a if r in b]:
        ca, cb = stats.mean_ci(a[row].values()), stats.mean_ci(b[row].values())
        w = stats.welch(b[row].values(), a[row].values())
        rows.append({"row": row, "a_n_seeds": ca.n, "a_mean": ca.mean, "a_ci95": ca.half_width, "b_n_seeds": cb.n,
                     "b_mean": cb.mean, "b_ci95": cb.half_width, "difference": w.delta, "difference_ci95": w.half_width,
                     "p_welch": w.p})
    schema = {"row": pl.String, "a_n_seeds": pl.Int64, "a_mean": pl.Float64, "a_ci95": pl.Float64, "b_n_seeds": pl.Int64,
              "b_mean": pl.Float64, "b_ci95": pl.Float64, "difference": pl.Float64, "difference_ci95": pl.Float64,
              "p_welch": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def comparison_lines(frame: pl.DataFrame, a: str, b: str, metric: str, only_a: list[str], only_b: list[str]) -> list[str]:
    head = [["row", f"{a}: n", "mean ± 95% CI", f"{b}: n", "mean ± 95% CI", "B - A ± 95% CI", "p (Welch)"]]
    for r in frame.iter_rows(named=True):
        head.append([r["row"], str(r["a_n_seeds"]), f"{_num(r['a_mean'])} ±{_num(r['a_ci95'], '.3f', 'n/a')}",
                     str(r["b_n_seeds"]), f"{_num(r['b_mean'])} ±{_num(r['b_ci95'], '.3f', 'n/a')}",
                     f"{_num(r['difference'], '+.3f')} ±{_num(r['difference_ci95'], '.3f', 'n/a')}", _num(r["p_welch"], ".3g")])
    widths = [max(len(line[c]) for line in head) for c in range(len(head[0]))]
    text = ["  ".join([line[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(line[1:], widths[1:])]) for line in head]
    notes = [f"A = {a!r}, B = {b!r}: the rows both have, {metric} over each one's finished seeds; B - A: difference "
             "of the means with Welch's 95% CI and two-sided p (unpaired)"]
    notes += [f"only in {name!r}: " + ", ".join(rows) for name, rows in ((a, only_a), (b, only_b)) if rows]
    return text + notes


def seeds_lines(table: pl.DataFrame, info: StudyInfo, metric: str, fraction: float) -> list[str]:
    """Per compared row: the seeds its test needs to detect an effect of ``fraction`` of the
    base's mean with 80% power at the study's alpha, given the spread the pilot runs measured; and
    the power the study's own seeds have (a tune-then-confirm study's: its confirmation's). Paired:
    the seeds of both, from the spread of the per-seed differences. Welch (a row compared unpaired):
    the seeds of the variant declared ``test: welch``, the other's as the study asks, from each
    row's own spread. Rows with fewer than two paired seeds (a search point run on one seed), or a
    Welch row with fewer than two seeds on either side, have no spread to estimate from and are left
    out; with confirmation rows, only they are listed (the search row at a chosen point holds the
    same trials)."""
    means = dict(table.select("row", "mean").iter_rows())
    confirmed = "chosen" in table.columns and table["chosen"].drop_nulls().len() > 0
    seeds = info.confirm_seeds or info.seeds or []
    whose = "the confirmation's" if info.confirm_seeds else "the study's"
    head = [["row", "vs", "pilot seeds", "sd", "effect", "seeds needed", "power now"]]
    welch = False
    for r in table.iter_rows(named=True):
        if r["comparison"] in (None, "base") or (confirmed and r["chosen"] is None):
            continue
        effect = stats.effect_from_fraction(fraction, means.get(r["base_row"]))
        if r["test"] == "welch":
            if (r["n_seeds"] or 0) < 2 or (r["base_n_seeds"] or 0) < 2:
                continue
            welch = True
            head.append([r["row"], r["base_row"], *_welch_seeds(r, info, effect)])
            continue
        if (r["paired_n"] or 0) < 2:
            continue
        sd, n = r["paired_sd"], r["paired_n"]
        needed = stats.seeds_needed_paired(effect, sd, info.alpha) if effect is not None else None
        planned = len(seeds) if info.confirm_seeds else _shared_seeds(info, r["variant"], r["base_row"])
        now = stats.power_paired(effect, sd, planned, info.alpha) if effect is not None and planned >= 2 else None
        head.append([r["row"], r["base_row"], str(n), _num(sd, ".4g", "n/a"), _num(effect, ".4g", "n/a"), str(needed or "n/a"),
                     _num(now, ".2f", "n/a")])
    if len(head) == 1:
        return [f"--effect {fraction:g}: no row shares two or more seeds with the base yet; nothing to estimate "
                "the spread from"]
    widths = [max(len(line[c]) for line in head) for c in range(len(head[0]))]
    text = ["  ".join([line[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(line[1:], widths[1:])]) for line in head]
    own = " (a row with seeds of its own: those it shares with its vs row)" if info.variant_seeds and not info.confirm_seeds else ""
    notes = [f"power now: with {whose} {len(seeds)} seeds{own}; a spread from 2-3 pilot seeds is itself uncertain "
             "(docs/statistics.md)"]
    if welch:
        notes.append("W: compared unpaired (a variant declared `test: welch`): pilot seeds and sd of the row & of "
                     "its vs row; seeds needed of the declared one (named), the other's as the study asks; power "
                     "now with the seeds the study asks of each (n/a where one side is asked fewer than 2); '> 1000': the "
                     "other's own error, or its few seeds (Welch's df), keep the power short at any n")
    return [f"seeds to detect a {metric} difference of {100 * fraction:g}% of the mean of the base's row (vs) "
            f"with 80% power at alpha {info.alpha:g} (paired t-test; W: Welch's), from the pilot runs' spread "
            "(paired: sd of the per-seed differences):"] + text + notes


def _welch_seeds(r: dict, info: StudyInfo, effect: float | None) -> list[str]:
    """A Welch row's cells of the seeds table: pilot seeds and sds of the row & its vs row, the
    effect, the seeds the declared side needs (the other's as planned) and the power now."""
    sd_row, sd_base, n_row, n_base = r["sd"], r["base_sd"], r["n_seeds"], r["base_n_seeds"]
    base_variant = info.base
    asked_row = len(info.seeds_of(r["variant"]) or []) or n_row
    asked_base = len(info.seeds_of(base_variant) or []) or n_base
    # The side whose seeds are solved for: the declared one (the row where both are).
    solve_row = r["variant"] in info.welch or base_variant not in info.welch
    who, sd, sd_other, n_other = (r["variant"], sd_row, sd_base, asked_base) if solve_row else \
        (base_variant, sd_base, sd_row, asked_row)
    needed = stats.seeds_needed_welch(effect, sd, sd_other, n_other, info.alpha) \
        if effect is not None and n_other >= 2 else None
    # A side asked fewer than two seeds has no Welch test: no power to state.
    now = stats.power_welch(effect, sd_row, asked_row, sd_base, asked_base, info.alpha) \
        if effect is not None and asked_row >= 2 and asked_base >= 2 else None
    return [f"W {n_row} & {n_base}", f"{_num(sd_row, '.4g', 'n/a')} & {_num(sd_base, '.4g', 'n/a')}",
            _num(effect, ".4g", "n/a"), f"{needed or 'n/a'} of {who}", _num(now, ".2f", "n/a")]


def _shared_seeds(info: StudyInfo, variant: str, base: str) -> int:
    """How many seeds the study asks of both ``variant`` and the row it is compared with: the
    pairs its paired test will have once every trial has finished."""
    return len(set(info.seeds_of(variant) or []) & set(info.seeds_of(base) or []))


def _estimate(e: dict | None, fmt: str) -> str:
    if e is None:
        return ""
    if e.get("lo") is None:
        return format(e["value"], fmt)
    return f"{format(e['value'], fmt)} [{format(e['lo'], fmt)}, {format(e['hi'], fmt)}]"


def fit_lines(about: dict) -> list[str]:
    """A scaling study's laws (workbench/analysis/scaling/laws.py) as text: per variant L(N) = E + A / N^alpha
    with 95% intervals and the prediction, then where each pair's laws cross."""
    fits, lines = about.get("fits", {}), ["", "laws L(N) = E + A / N^alpha, or L(N, D) = E + A / N^alpha + B / D^beta where the ladder is crossed with token "
                                            "budgets (N: non-embedding parameters, D: tokens; val_loss in nats; 95% bootstrap intervals)"]
    for variant, f in fits.items():
        if f["status"] == "refused":
            lines.append(f"  {variant}: no law: {f['reason']}")
            continue
        at = f" -> {_estimate(f['prediction'], '.4f')} at {f['extrapolate_to']:.3g}" if f.get("prediction") else ""
        note = f"  ({f['reason']})" if f.get("reason") else ""
        beta = f", beta {_estimate(f['beta'], '.3f')}" if f.get("beta") else ""
        lines.append(f"  {variant} ({'L(N, D)' if f['form'] == 'ND' else 'L(N)'}): E {_estimate(f['E'], '.4f')}, "
                     f"alpha {_estimate(f['alpha'], '.3f')}{beta}, "
                     f"{f['n_points']} {'(N, D) points' if f['form'] == 'ND' else 'sizes'}, {f['n_runs']} runs{at}{note}")
    for c in about.get("crossings", []):
        a, b = c["variants"]
        share = f" (in {c['share_crossing']:.0%} of the bootstrap pairs)" if c.get("n") and c.get("share_crossing") is not None else ""
        where = f"cross at {_estimate(c['n'], '.3g')} parameters{share}" if c.get("n") else c["reason"]
        lines.append(f"  {a} vs {b}: {where}")
    return lines


def effect_lines(about: dict) -> list[str]:
    """The effect versus the axis (workbench/analysis/effects.py) as text: per variant and point its paired
    difference from the base with its 95% CI and p, and (scaling and crossed designs) the change
    from the point before with Welch's CI and p."""
    found = about.get("effects") or []
    if not found:
        return []
    metric = about.get("metric", "val_ppl")
    lines = ["", f"effect versus the axis: each variant minus the base at the same point, paired over seeds, {metric}, "
                 "95% t CI; change: from the point before along the first axis (the other axes' values the same), Welch's "
                 "t-test of the per-seed differences at the two points"]
    for e in found:
        along = f" along {e['axis']}" if e.get("axis") else ""
        lines.append(f"  {e['variant']} minus {e['vs']}{along}:")
        for p in e["points"]:
            if p["paired_delta"] is None:
                lines.append(f"    {p['point']}: no seed shared with the base")
                continue
            text = (f"    {p['point']}: {p['paired_delta']:+.4g} +- {_num(p['paired_ci95'], '.3g', 'n/a')} "
                    f"(n {p['n']}, p {_num(p['p_unadjusted'], '.3g', 'n/a')})")
            c = p.get("change")
            if c and c["difference"] is not None:
                text += (f"; change from {c['from']}: {c['difference']:+.4g} +- {_num(c['ci95'], '.3g', 'n/a')} "
                         f"(p {_num(c['p'], '.3g', 'n/a')})")
            lines.append(text)
    return lines


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.2f}%"


def _p_claim(p, alpha: float) -> str:
    if p is None:
        return ""
    return f"{'<1e-6' if p < 1e-6 else format(p, '.3g')}{'*' if p < alpha else ''}"


def claim_lines(claims: list[dict], alpha: float) -> list[str]:
    """The verdict table (workbench/analysis/claims.py) as text, `wb results`'s first lines: per
    claim A vs B, the verdict, the difference in perplexity (relative) and in loss, its 95% CI, p
    and p_equivalence (Holm), the seeds and the SESOI; then how the verdicts are decided."""
    if not claims:
        return ["claims: none judged (no finished run records test_loss or val_loss)", ""]
    c0 = claims[0]
    level = c0.get("alpha_look")
    head = [["claim", "A vs B", "verdict", "delta ppl", "delta loss", f"{100 * (1 - level):.1f}% CI (ppl)" if level else "95% CI (ppl)",
             "p (Holm)", "p equiv (Holm)", "n", "sesoi"]]
    for c in claims:
        ci = f"[{_pct(c['ci95'][0])}, {_pct(c['ci95'][1])}]" if c["ci95"] else ("n/a" if c["n_seeds"] else "")
        n = f"W {len(c['seeds_a'])} & {len(c['seeds_b'])}" if c["test"] == "welch" else str(c["n_seeds"])
        if c.get("interval") == "seeds x documents":
            n += f" x {c['n_documents']}d"
        head.append([c["name"], f"{c['a_row'] or c['a']} vs {c['b_row'] or c['b']}", c["verdict"], _pct(c["delta"]),
                     _num(c["delta_loss"], "+.4f"), ci, _p_claim(c["p_holm"], c.get("alpha_look") or alpha),
                     _p_claim(c["p_equivalence_holm"], c.get("alpha_look") or alpha),
                     n, f"{100 * c['sesoi']:g}%"])
    widths = [max(len(line[i]) for line in head) for i in range(len(head[0]))]
    # Indented: a line that starts with a row's name is the study table's (a default claim is named by its row).
    text = ["  " + "  ".join([line[0].ljust(widths[0]), line[1].ljust(widths[1]), line[2].ljust(widths[2])]
                             + [v.rjust(w) for v, w in zip(line[3:], widths[3:])]).rstrip() for line in head]
    metric = c0["metric"]
    basis = "the test split" if metric == "test_loss" else "the select split (these runs predate the test split)"
    family = (f"Holm-adjusted over the {len(claims)} claims, differences and equivalences apart" if len(claims) > 1
              else "Holm over 1 claim: unadjusted")
    crossed = [c for c in claims if c.get("interval") == "seeds x documents"]
    pairing = ("paired by seed and test document, both as samples" if len(crossed) == len(claims) else
               "paired by seed, and by test document where n counts documents (x Nd)" if crossed else "paired by seed")
    lines = [f"claims: A against B on {metric}, {basis}; differences A - B ({pairing}; W: Welch's, unpaired); "
             f"alpha {alpha:g}; p (Holm) and p equiv (Holm) {family}; the JSON has p_unadjusted beside"] + text
    lines.append(f"verdict: {RULE} (docs/statistics.md); p below 1e-6 is shown as <1e-6 (the t tail is not "
                 "trusted that far out; the JSON keeps the number)")
    if c0.get("alpha_look") is not None:
        lines.append(f"seeds by plan: each look tests at {level:.4f}, so that alpha {alpha:g} holds over all "
                     "the looks (docs/statistics.md, \"Seeds by plan\"); a claim's verdict is that of the first look "
                     "that decides it, its p values Holm-adjusted over the claims open at that look; its interval is "
                     f"that look's {100 * (1 - level):.1f}% interval over seeds alone (test documents not sampled in a plan)")
    if all(c["default"] for c in claims):
        lines.append(f"default claims: the study declares none, so each compared row is judged against the row the table "
                     f"compares it with at sesoi {100 * claims[0]['sesoi']:g}%; state your own with `claims:` "
                     "(docs/study-files.md)")
    lines += [f"  note, {c['name']}: {c['note']}" for c in claims if c.get("note")]
    return lines + [""]


def downstream_lines(found: dict) -> list[str]:
    """Each variant against the base on the downstream tasks `wb eval` ran
    (workbench/downstream/paired.py): accuracies, the difference with its bootstrap interval over
    seeds and items, McNemar's p over the pooled items."""
    if not found:
        return []
    lines = ["", "downstream tasks (wb eval): each variant minus the base, items paired seed by seed; difference "
                 "with its 95% bootstrap interval over seeds, then items; p: McNemar's exact test on the pooled items"]
    for task, compared in found.items():
        lines.append(f"  {task}:")
        for c in compared:
            low, high = c["delta_ci"]
            lines.append(f"    {c['a']} minus {c['b']}: acc {c['acc_a']:.3f} vs {c['acc_b']:.3f}, {c['delta']:+.3f} "
                         f"[{low:+.3f}, {high:+.3f}], p {c['p']:.3g} ({c['items']} item pairs, "
                         f"{c['a_only'] + c['b_only']} answered differently; seeds {', '.join(map(str, c['seeds']))})")
            if c["a_only"] + c["b_only"] == 0:
                lines.append("      no item answered differently: nothing tells the two apart on this task, which "
                             "is not evidence that they are alike")
    return lines


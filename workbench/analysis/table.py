"""The study table, one definition for `wb results` and the dashboards alike: what a row is, which
row is the base, what each row is compared with, and per row its statistics (foxwb.workbench.analysis.stats), the
runs that failed or are missing, its spikes and the kinds of its slots.

- A **row** is a variant at one search point ("FoX (Pro) [lr=0.002]"; the variant alone outside a
  search). Its values are its FINISHED runs' final metric, one per seed; a run stopped early by
  ASHA counts as stopped, not as a value.
- The **base** is the design's (an ablation's or cumulative design's base, a variants design's
  compare_to, a grid's first cell), tagged on the study's parent run so that the store alone tells
  it; ``base=`` names another variant, which must be one.
- **Compared with**: outside a search, the base's row: paired by seed, or unpaired (Welch, over
  all the seeds of each) where either row is a variant declared ``test: welch``. In a search, the base's row at the same
  searched values where the base has one ("same point"); else a variant's best row (lowest mean
  val_loss over its seeds, the search's objective) with the base's best ("best point"), chosen on
  these very runs; the other rows of such a variant have no comparison.
- **Tune, then confirm** (``search.confirm``): a variant's confirmation row, its name alone, holds
  its runs at the search point chosen for it (tagged on the parent run) on the confirmation
  seeds, and is compared with the base's confirmation row; the search's rows stay beside them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from foxwb.components.registry import ATTENTION_SLOTS
from foxwb.workbench.analysis import stats
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.presets import PRESETS
from foxwb.workbench.spec.trial import DEFAULT_MIN_TEST_TOKENS
from foxwb.workbench.spec.study import axis_labels, base_variant, expand, own_seeds, variant_names, welch_variants

# ``comparison`` of a row: it is the base; compared with the base's row; in a search, with the
# base at the same searched values, or best point against best point.
BASE, VS_BASE, SAME_POINT, BEST_POINT = "base", "vs base", "same point", "best point"
# The kind the paper's presets put in each slot: a check mark in the table; any other kind is named.
STANDARD_KINDS = {slot: next(p["attention"][slot] for p in PRESETS.values() if p["attention"][slot] != "none")
                  for slot in ATTENTION_SLOTS}
SCHEMA = {
    "row": pl.String, "variant": pl.String, "search_point": pl.String, "stage": pl.String, "chosen": pl.String,
    "n_seeds": pl.Int64,
    "seeds_run": pl.List(pl.Int64), "values": pl.List(pl.Float64),
    "seeds_expected": pl.Int64, "fewer_seeds": pl.Boolean, "mean": pl.Float64, "sd": pl.Float64, "ci95": pl.Float64,
    "base_row": pl.String, "comparison": pl.String, "delta": pl.Float64, "paired_n": pl.Int64,
    "paired_delta": pl.Float64, "paired_sd": pl.Float64, "paired_ci95": pl.Float64, "test": pl.String,
    "welch_ci95": pl.Float64, "welch_df": pl.Float64, "base_n_seeds": pl.Int64, "base_sd": pl.Float64,
    "p_unadjusted": pl.Float64, "p_holm": pl.Float64,
    "mde": pl.Float64, "finished": pl.Int64, "failed": pl.Int64, "killed": pl.Int64, "running": pl.Int64,
    "stopped": pl.Int64, "to_run": pl.Int64, "reasons": pl.List(pl.String), "runs_spiked": pl.Int64,
    "grad_spikes": pl.Int64, "loss_spikes": pl.Int64, "grad_norm_max": pl.Float64, "grad_norm_max_ratio": pl.Float64,
    "kinds": pl.String, **{f"slot.{s}": pl.String for s in ATTENTION_SLOTS}, "n_params": pl.Int64,
    "workers": pl.List(pl.Int64), "eval_sequences": pl.Int64, "eval_sequences_asked": pl.Int64,
}


# Designs whose rows are their variants alone (no axis of points): the plan's rows are known from
# the tagged variant names outside a search.
_ONE_ROW_A_VARIANT = ("variants", "ablation", "cumulative", "grid")


@dataclass(frozen=True)
class StudyInfo:
    """What the table needs to know of a study beyond its runs."""

    name: str
    base: str
    order: list[str]  # variant names in the design's order
    seeds: list[int] | None = None  # the seeds the study asks for (None: not known)
    alpha: float = 0.05
    planned: list[tuple[str, str]] = field(default_factory=list)  # (variant, point) of every planned row
    base_from: str = "the design's"
    # Tune, then confirm (workbench/run/confirm.py): the confirmation seeds, and each variant's chosen
    # search point (its label) as recorded on the parent run.
    confirm_seeds: list[int] | None = None
    choice: dict[str, str] = field(default_factory=dict)
    design_kind: str = ""  # "scaling": the rows are a ladder (workbench/analysis/scaling/laws.py fits it)
    extrapolate_to: str | None = None
    axis: list[str] = field(default_factory=list)  # a scaling or crossed design's point labels, in order
    grid_axes: list = field(default_factory=list)  # a grid design's [(path, values)]
    # A variants design's rows on seeds of their own (variant -> its seeds; the rest: ``seeds``).
    variant_seeds: dict[str, list[int]] = field(default_factory=dict)
    # A search's (variant, point) rows in the plan's order, as tagged (readers without the file).
    row_order: list[tuple[str, str]] = field(default_factory=list)
    # The variants compared unpaired (``test: welch``): any comparison with one of them is Welch's.
    welch: list[str] = field(default_factory=list)

    def seeds_of(self, variant: str) -> list[int] | None:
        """The seeds the study asks of ``variant`` (outside a confirmation)."""
        return self.variant_seeds.get(variant, self.seeds)

    def test_of(self, variant: str, base: str) -> str:
        """How ``variant`` is compared with ``base`` (a variant): "welch" where either is
        declared ``test: welch``, else "paired"."""
        return "welch" if variant in self.welch or base in self.welch else "paired"


def study_info(name: str, runs: pl.DataFrame, study=None, parent_tags: dict | None = None,
               base: str | None = None, trials: list | None = None) -> StudyInfo:
    """The base, order, seeds and alpha of a study: from its file where given, else from the tags
    of its parent run, else from the runs (oldest first). ``base`` (``--base``) must be a variant.
    ``trials``: the file's, expanded (expanded here where not given)."""
    seen = _oldest_first(runs)
    tags = parent_tags or {}
    if study is not None:
        order, design_base, seeds, alpha = variant_names(study), base_variant(study.design), list(study.seeds), study.alpha
        planned = _planned(expand(study) if trials is None else trials, order)
        own, welch = own_seeds(study), welch_variants(study)
        row_order = []  # the plan's rows come first in row_keys
        source = "the design's"
    else:
        order = json.loads(tags.get("variants", "[]")) or seen
        design_base, planned, alpha = tags.get("base_variant"), [], float(tags.get("alpha", 0.05))
        seeds = json.loads(tags["seeds"]) if "seeds" in tags else None
        own = json.loads(tags.get("variant_seeds", "{}"))
        welch = json.loads(tags.get("welch", "[]"))
        row_order = [tuple(r) for r in json.loads(tags.get("rows", "[]"))]
        source = "the design's, as tagged on the study's run"
    known = list(dict.fromkeys(order + seen))
    if base is not None:
        check_variant(base, name, known, "--base")
        source = "--base"
    elif design_base in known:
        base = design_base
    else:
        base, source = (known[0] if known else ""), "the first variant: the store names no base"
    confirm_seeds = json.loads(tags["confirm_seeds"]) if "confirm_seeds" in tags else None
    if study is not None and study.search is not None and study.search.confirm is not None:
        confirm_seeds = list(study.search.confirm.seeds)
    plan = study.plan() if study is not None else None
    if plan is not None:  # seeds by plan: those of the last look run (as tagged), else the first look's
        if study.seed_plan is not None:
            seeds = json.loads(tags["seeds"]) if "seeds" in tags else plan.seeds_at(plan.start)
        else:
            confirm_seeds = json.loads(tags["confirm_seeds"]) if "confirm_seeds" in tags else plan.seeds_at(plan.start)
    choice = {v: c["point"] for v, c in json.loads(tags.get("confirm_choice", "{}")).items()}
    kind, extrapolate = tags.get("design_kind", ""), tags.get("extrapolate_to")
    axis, grid_axes = json.loads(tags.get("axis", "[]")), json.loads(tags.get("grid_axes", "[]"))
    if study is not None:
        kind = study.design.kind
        grid_axes = list(study.design.axes.items()) if kind == "grid" else []
        extrapolate = getattr(study.design, "extrapolate_to", None)
        if kind in ("scaling", "crossed"):
            axis = axis_labels(study)
    if study is None and seeds is not None:
        # Without the file, the plan's rows from the tags, so that a row's unstarted seeds count as
        # "to run": a search's as tagged, else one row per variant of a design without an axis, or
        # per variant and point of its axis (scaling, crossed: the axis is tagged in its order).
        searched = "search_point" in runs.columns and (runs["search_point"].fill_null("") != "").any()
        if row_order:
            planned = list(row_order)
        elif kind in _ONE_ROW_A_VARIANT and not searched:
            planned = [(v, "") for v in order]
        elif kind in ("scaling", "crossed"):
            planned = [(v, a) for v in order for a in axis]
    if confirm_seeds:  # each variant's (a crossed design: each cell's) confirmation row first
        planned = [(v, a) for v in order for a in (axis if kind == "crossed" else [""])] + planned
    return StudyInfo(name, base, order, seeds, alpha, planned, source, confirm_seeds, choice, kind,
                     None if extrapolate is None else str(extrapolate), axis, grid_axes, own, row_order, welch)


def check_variant(variant: str, study: str, known: list[str], flag: str = "") -> None:
    """``variant`` (given with ``flag``: ``--base``) must be one of the study's; else a SpecError
    listing them."""
    if variant not in known:
        raise SpecError(f"{flag + ' ' if flag else ''}{variant!r} is not a variant of study {study!r}; its variants: "
                        + ", ".join(repr(v) for v in known))


def with_confirmation_rows(runs: pl.DataFrame, info: StudyInfo) -> pl.DataFrame:
    """A tune-then-confirm study's confirmation row of a variant (its name alone, no point) holds
    its runs at the chosen point on the confirmation seeds, the search's run of such a trial
    included (it is the same trial): these rows are the ablation's. A name that builds another
    variant's very trials (an alias) has that variant's choice."""
    if not info.choice or runs.is_empty():
        return runs
    # A crossed design's choice is per cell, keyed by its row (the variant at a point of the axis).
    cells = {label(v, a): (v, a) for v in info.order for a in info.axis} if info.design_kind == "crossed" else {}
    trained_as, picked = pl.coalesce("alias_of", "variant"), []
    for key, point in info.choice.items():
        variant, at = cells.get(key, (key, ""))
        mine = runs.filter((trained_as == variant) & (pl.col("search_point") == point)
                           & pl.col("seed").is_in(info.confirm_seeds or []))
        row = pl.format("{} [{}]", "variant", pl.lit(at)) if at else pl.col("variant")
        picked.append(mine.with_columns(pl.lit(at).alias("search_point"), row.alias("row")))
    return pl.concat([runs, *picked], how="vertical_relaxed")


def _oldest_first(runs: pl.DataFrame) -> list[str]:
    if runs.is_empty():
        return []
    by_start = runs.sort("start_time") if "start_time" in runs.columns else runs
    return list(dict.fromkeys(by_start["variant"].to_list()))


def _planned(trials, order: list[str]) -> list[tuple[str, str]]:
    rank = {v: i for i, v in enumerate(order)}
    rows = []
    for t in trials:
        if t.optuna_samples:  # its points are drawn as it runs: not known before
            continue
        rows += [(name, t.point_label) for name in (t.variant, *t.aliases)]
    return sorted(dict.fromkeys(rows), key=lambda r: rank.get(r[0], len(rank)))


def label(variant: str, point: str) -> str:
    return f"{variant} [{point}]" if point else variant


def normalise(runs: pl.DataFrame) -> pl.DataFrame:
    """The columns the table reads, with what a frame of finished runs alone implies where absent;
    adds ``row``."""
    defaults = {"status": "FINISHED", "search_point": "", "stopped_early": False, "error": "", "start_time": 0,
                "alias_of": None}
    missing = [pl.lit(v).alias(k) for k, v in defaults.items() if k not in runs.columns]
    runs = runs.with_columns(missing) if missing else runs
    if "spec_hash" not in runs.columns:
        runs = runs.with_columns(pl.format("{}/{}/{}", "variant", "seed", "search_point").alias("spec_hash"))
    return runs.with_columns(pl.when(pl.col("search_point") != "")
                             .then(pl.format("{} [{}]", "variant", "search_point"))
                             .otherwise(pl.col("variant")).alias("row"))


def report_metric(runs: pl.DataFrame, scale: str = "ppl") -> str:
    """What the table reports (docs/trials-and-data.md, "Three splits"): ``test_<scale>`` (``ppl`` or
    ``loss``) where every finished run not stopped early records it, else ``val_<scale>`` (the
    select split: runs that predate the test split)."""
    test = f"test_{scale}"
    if not runs.is_empty() and test in runs.columns:
        done = normalise(runs).filter((pl.col("status") == "FINISHED") & ~pl.col("stopped_early"))
        if done.height and done[test].null_count() == 0:
            return test
    return f"val_{scale}"


def split_note(runs: pl.DataFrame, metric: str) -> str | None:
    """Which documents ``metric`` was read on, for the line under a table's title: the test set's
    size per trial, or why the table falls back to the select split."""
    done = normalise(runs).filter((pl.col("status") == "FINISHED") & ~pl.col("stopped_early")) if not runs.is_empty() else runs
    if metric.startswith("test_") and "test_tokens" in done.columns and done.height:
        tokens, docs = done["test_tokens"].drop_nulls(), done["test_documents"].drop_nulls() if "test_documents" in done.columns else None
        size = f"{int(tokens.min()):,}" if tokens.min() == tokens.max() else f"{int(tokens.min()):,} to {int(tokens.max()):,}"
        of = f" in {int(docs.min())} document{'s' if docs.min() != 1 else ''}" if docs is not None and docs.len() and docs.min() == docs.max() else ""
        return (f"{metric} is read on the test split, once, after training: {size} scored tokens{of} per trial "
                "(choices read val_loss, on the select split: docs/trials-and-data.md, \"Three splits\")")
    if metric.startswith("val_"):
        missing = done.height - (done["test_loss"].drop_nulls().len() if "test_loss" in done.columns else 0)
        if done.height and missing:
            return (f"{metric} is read on the select split, the documents the choices read: {missing} of {done.height} "
                    "finished runs record no test set (they predate the test split); rerun them to report on test")
    return None


def small_test_sets(runs: pl.DataFrame) -> str | None:
    """A loud line where a finished run was scored on fewer test tokens than the workbench's default
    minimum (its study lowered eval.min_test_tokens): a verdict resting on it is weak."""
    if runs.is_empty() or "test_tokens" not in runs.columns:
        return None
    done = normalise(runs).filter((pl.col("status") == "FINISHED") & pl.col("test_tokens").is_not_null())
    small = done.filter(pl.col("test_tokens") < DEFAULT_MIN_TEST_TOKENS)
    if small.is_empty():
        return None
    return (f"warning: {small.height} of {done.height} finished runs were scored on fewer test tokens than "
            f"{DEFAULT_MIN_TEST_TOKENS:,} (fewest: {int(small['test_tokens'].min()):,}; the study lowered "
            "eval.min_test_tokens): their verdicts rest on a small test set")


def row_seed_values(runs: pl.DataFrame, info: StudyInfo, metric: str = "val_ppl") -> dict[str, dict[int, float]]:
    """row -> {seed: value} as the study table reads them (confirmation rows included)."""
    if runs.is_empty():
        return {}
    return seed_values(with_confirmation_rows(normalise(runs), info), metric)


def seed_values(runs: pl.DataFrame, metric: str) -> dict[str, dict[int, float]]:
    """row -> {seed: value of ``metric``} over the FINISHED runs not stopped early (mean where a
    seed has several), each row's seeds in ascending order: every sum over them then adds in one
    order, so a statistic comes out the same to the last digit from one reading to the next."""
    if metric not in runs.columns:
        return {}
    done = runs.filter((pl.col("status") == "FINISHED") & ~pl.col("stopped_early") & pl.col(metric).is_not_null())
    per_seed = done.sort("row", "seed", metric).group_by("row", "seed", maintain_order=True).agg(pl.col(metric).mean())
    out: dict[str, dict[int, float]] = {}
    for row, seed, value in per_seed.iter_rows():
        out.setdefault(row, {})[seed] = value
    return out


def best_rows(runs: pl.DataFrame) -> dict[str, str]:
    """variant -> its row of lowest mean val_loss over seeds (the search's objective)."""
    best: dict[str, tuple[float, str]] = {}
    means = seed_values(runs, "val_loss")
    variants = dict(runs.select("row", "variant").unique().iter_rows()) if not runs.is_empty() else {}
    for row, values in means.items():
        mean = sum(values.values()) / len(values)
        variant = variants[row]
        if variant not in best or mean < best[variant][0]:
            best[variant] = (mean, row)
    return {v: row for v, (_, row) in best.items()}


def study_table(runs: pl.DataFrame, info: StudyInfo, metric: str = "val_ppl") -> pl.DataFrame:
    """One row per row label (columns ``SCHEMA``), in the design's order: seeds, mean and 95% CI;
    what it is compared with and the comparison (delta of the means; paired by seed: mean and CI
    of the differences, the paired t-test's p, Holm's adjustment of it over the rows, and the
    minimal detectable effect at 80% power and the study's alpha); its runs by state with the
    reasons of those that failed; spikes; the kinds of its slots."""
    runs = normalise(runs) if not runs.is_empty() else runs
    best = best_rows(runs) if not runs.is_empty() else {}  # among the search's rows
    runs = with_confirmation_rows(runs, info)
    values = seed_values(runs, metric) if not runs.is_empty() else {}
    out = []
    for row, variant, point in row_keys(runs, info):
        mine = runs.filter(pl.col("row") == row) if not runs.is_empty() else runs
        mine_values = values.get(row, {})  # in seed order (seed_values)
        ci = stats.mean_ci(mine_values.values())
        confirming = info.confirm_seeds and (not point or (info.design_kind == "crossed" and point in info.axis))
        seeds = info.confirm_seeds if confirming else info.seeds_of(variant)
        expected = len(seeds) if seeds else None
        record = {"row": row, "variant": variant, "search_point": point,
                  # a tune-then-confirm study's rows: "confirmation" (the table) or "search" (beside it)
                  "stage": ("confirmation" if confirming else "search") if info.confirm_seeds else None,
                  "chosen": chosen_values(row, point, info) if confirming else None, "n_seeds": ci.n,
                  # Each finished seed and its value, in seed order: what every statistic here is computed from.
                  "seeds_run": list(mine_values), "values": list(mine_values.values()), "seeds_expected": expected,
                  "fewer_seeds": expected is not None and ci.n < expected, "mean": ci.mean, "sd": ci.sd,
                  "ci95": ci.half_width}
        record.update(compare(row, variant, point, values, best, info))
        record.update(from_runs(mine, info.planned and (variant, point) in info.planned, expected))
        out.append(record)
    # A tune-then-confirm study's table is its confirmation rows: they are one family, the search
    # rows beside them another (docs/statistics.md).
    for family in ([r for r in out if r["stage"] == "confirmation"], [r for r in out if r["stage"] != "confirmation"]):
        for record, adjusted in zip(family, holm_distinct(family, values)):
            record["p_holm"] = adjusted
    return pl.DataFrame(out, schema=SCHEMA) if out else pl.DataFrame(schema=SCHEMA)


def holm_distinct(records: list[dict], values: dict[str, dict[int, float]]) -> list[float | None]:
    """Holm-adjusted p of each record, each distinct comparison counted once in the family: rows
    that compare the very same runs (a variant and its alias) are one test, and share its adjusted p."""
    def key(r: dict):
        mine, base = values.get(r["row"], {}), values.get(r.get("base_row") or "", {})
        return r.get("test"), tuple(mine.items()), tuple(base.items())

    firsts: dict = {}
    for i, r in enumerate(records):
        if r.get("p_unadjusted") is not None:
            firsts.setdefault(key(r), i)
    adjusted = dict(zip(firsts.values(), stats.holm([records[i]["p_unadjusted"] for i in firsts.values()])))
    return [adjusted[firsts[key(r)]] if r.get("p_unadjusted") is not None else None for r in records]


def chosen_values(row: str, point: str, info: StudyInfo) -> str | None:
    """A confirmation row's searched values as the search chose them (``lr=0.002``), without the
    axis point the row already names (a crossed design's cell); None before the choice."""
    choice = info.choice.get(row)
    if choice is None:
        return None
    named = set(point.split(", ")) if point else set()
    return ", ".join(part for part in choice.split(", ") if part not in named) or choice


def row_keys(runs: pl.DataFrame, info: StudyInfo) -> list[tuple[str, str, str]]:
    """(row, variant, point) of every planned row and every tracked one, the design's order first,
    then the search's; tracked rows the plan does not know (an adaptive search's draws) by when they started."""
    tracked = [] if runs.is_empty() else list(dict.fromkeys(
        runs.sort("start_time").select("variant", "search_point").iter_rows()))
    keys = list(dict.fromkeys(list(info.planned) + tracked))
    rank = {v: i for i, v in enumerate(info.order)}
    planned = {k: i for i, k in enumerate(info.planned)}
    # Stable: within a variant the plan's order (from the file, else as tagged: the same), then the start order.
    keys.sort(key=lambda k: (rank.get(k[0], len(rank)), planned.get(k, len(planned))))
    return [(label(v, p), v, p) for v, p in keys]


def compare(row: str, variant: str, point: str, values: dict, best: dict, info: StudyInfo) -> dict:
    """The row's comparison with the base (see the module's docstring for which base row)."""
    if variant == info.base:
        return {"comparison": BASE}
    target, how = None, None
    if not point:
        target, how = info.base, VS_BASE
    elif label(info.base, point) in values:
        target, how = label(info.base, point), SAME_POINT
    elif best.get(variant) == row and info.base in best:
        target, how = best[info.base], BEST_POINT
    mine, theirs = values.get(row, {}), values.get(target, {})
    if target is None or not mine or not theirs:
        return {"base_row": target, "comparison": how}
    delta = sum(mine.values()) / len(mine) - sum(theirs.values()) / len(theirs)
    out = {"base_row": target, "comparison": how, "delta": delta}
    if info.test_of(variant, info.base) == "welch":
        # Unpaired over all the seeds of each row: the difference of the means, Welch's CI and p,
        # and the MDE of Welch's test from each row's own spread and seeds.
        a, b = stats.mean_ci(mine.values()), stats.mean_ci(theirs.values())
        w = stats.welch_summary(a.mean, a.sd, a.n, b.mean, b.sd, b.n)
        mde = stats.mde_welch(a.sd, a.n, b.sd, b.n, info.alpha) if a.n >= 2 and b.n >= 2 else None
        return {**out, "test": "welch", "welch_ci95": w.half_width, "welch_df": w.df, "base_n_seeds": b.n,
                "base_sd": b.sd, "p_unadjusted": w.p, "mde": mde}
    p = stats.paired(mine, theirs)
    mde = stats.mde_paired(p.sd, p.n, info.alpha) if p.n >= 2 else None
    return {**out, "test": "paired", "paired_n": p.n, "paired_delta": p.delta, "paired_sd": p.sd,
            "paired_ci95": p.half_width, "p_unadjusted": p.p, "mde": mde}


def from_runs(mine: pl.DataFrame, planned: bool, expected: int | None) -> dict:
    """Runs by state (a spec hash counts once: finished if any of its runs finished, else its
    latest run's state), the reasons of the failed and killed, spikes and kinds."""
    states = {"finished": 0, "failed": 0, "killed": 0, "running": 0, "stopped": 0}
    reasons = []
    for _, attempts in (mine.sort("start_time").group_by("spec_hash", maintain_order=True) if mine.height else []):
        state, last = _state(attempts)
        states[state] += 1
        if state in ("failed", "killed"):
            reasons.append(f"seed {last['seed']} ({state}): {_reason(last.get('error') or '')}")
    tracked = sum(states.values())
    to_run = max(0, expected - tracked) if planned and expected is not None else 0
    return {**states, "to_run": to_run, "reasons": reasons, **spikes(mine), **kinds(mine), "workers": workers(mine),
            **eval_sequences(mine)}


def eval_sequences(mine: pl.DataFrame) -> dict:
    """The fewest held-out sequences a finished run of the row was validated on, and the most asked
    (``eval.sequences``); None where no run recorded them."""
    cols = ("eval_sequences", "eval_sequences_asked")
    done = mine.filter(pl.col("status") == "FINISHED") if mine.height else mine
    if not done.height or any(c not in done.columns for c in cols) or done["eval_sequences"].is_null().all():
        return dict.fromkeys(cols)
    return {"eval_sequences": int(done["eval_sequences"].min()), "eval_sequences_asked": int(done["eval_sequences_asked"].max())}


def workers(mine: pl.DataFrame) -> list[int] | None:
    """The worker counts the row's runs trained on ([1], [2], [1, 2]: numbers, in the JSON too);
    None without runs."""
    if not mine.height or "workers" not in mine.columns:
        return None
    return sorted(set(mine["workers"].fill_null(1).to_list()))


def _state(attempts: pl.DataFrame) -> tuple[str, dict]:
    rows = attempts.to_dicts()
    finished = [r for r in rows if r["status"] == "FINISHED"]
    if finished:
        return ("finished" if any(not r["stopped_early"] for r in finished) else "stopped"), finished[-1]
    if any(r["status"] == "RUNNING" for r in rows):
        return "running", rows[-1]
    return ("killed" if rows[-1]["status"] == "KILLED" else "failed"), rows[-1]


def _reason(error: str) -> str:
    """The last line of a failure's text (a traceback ends with the exception), cut to 200 characters."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "no reason recorded")[:200]


def spikes(mine: pl.DataFrame) -> dict:
    """Over the row's finished runs (docs/stability.md): how many spiked (a gradient-norm or loss
    spike after warmup), the spikes of each kind, the largest gradient norm and its ratio to the median."""
    done = mine.filter(pl.col("status") == "FINISHED") if mine.height else mine
    if not done.height or "grad_spikes" not in done.columns:
        return {}
    grad = done["grad_spikes"].fill_null(0)
    loss = done["loss_spikes"].fill_null(0) if "loss_spikes" in done.columns else grad * 0
    known = done.filter(pl.col("grad_spikes").is_not_null())
    if not known.height:
        return {}
    return {"runs_spiked": int(((grad > 0) | (loss > 0)).sum()), "grad_spikes": int(grad.sum()),
            "loss_spikes": int(loss.sum()), "grad_norm_max": known["grad_norm_max"].max(),
            "grad_norm_max_ratio": known["grad_norm_max_ratio"].max() if "grad_norm_max_ratio" in known.columns else None}


def kinds(mine: pl.DataFrame) -> dict:
    """The kind of every attention slot, and ``kinds``: those that are neither none nor the kind
    the paper's presets put there (STANDARD_KINDS), as "slot=kind"."""
    if not mine.height:
        return {}
    first = mine.row(0, named=True)
    slots = {f"slot.{s}": first.get(f"slot.{s}") for s in ATTENTION_SLOTS}
    other = [f"{s}={k}" for s in ATTENTION_SLOTS if (k := slots[f"slot.{s}"]) not in (None, "none", STANDARD_KINDS[s])]
    n_params = first.get("n_params")
    return {**slots, "kinds": ", ".join(other), "n_params": int(n_params) if n_params is not None else None}

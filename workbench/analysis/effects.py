"""Effect versus an axis: in a design whose rows are variants at the points of one axis (a scaling
ladder's sizes, a crossed design's values), each variant's paired difference from the base at the
same point, point by point in the axis's order: the figure the paper draws for context length.
Whether the effect changes along the axis: at each point after the first, the change from the
point before, Welch's t-test of the per-seed differences at the two points (unpaired: a seed at
one point shares nothing with the same seed at another). Where a point is several values (a ladder
crossed with token budgets: ``size=S, tokens_per_param=3``), the point before is the one before
along the first (the size at the same budget): two points that differ in more than one value are
never compared."""
from __future__ import annotations

import polars as pl

from foxwb.workbench.analysis import stats, table
from foxwb.workbench.analysis.table import SAME_POINT
from foxwb.workbench.spec.study import _grid_name


def effects(rows: pl.DataFrame, axis_values: list[str]) -> list[dict]:
    """``[{variant, vs, points: [{point, n, paired_delta, paired_sd, paired_ci95, p_value, delta,
    change}]}]`` from the study table's rows; ``axis_values`` the point labels in the axis's order;
    ``change`` (None at the first point): ``{from, difference, ci95, p}``, this point's paired delta
    minus the point before's, its Welch 95% CI and two-sided p (None where either point has fewer
    than two paired seeds)."""
    rank = {p: i for i, p in enumerate(axis_values)}
    out: dict[str, dict] = {}
    for r in rows.filter(pl.col("comparison") == SAME_POINT).iter_rows(named=True):
        if rank and r["search_point"] not in rank:
            continue  # a search's row (a crossed design tuned per cell): its confirmation row is the effect's
        entry = out.setdefault(r["variant"], {"variant": r["variant"], "vs": r["base_row"].rsplit(" [", 1)[0], "points": []})
        entry["points"].append({"point": r["search_point"], "n": r["paired_n"], "paired_delta": r["paired_delta"],
                                "paired_sd": r["paired_sd"], "paired_ci95": r["paired_ci95"], "p_unadjusted": r["p_unadjusted"],
                                "delta": r["delta"]})
    for entry in out.values():
        entry["points"].sort(key=lambda p: rank.get(p["point"], len(rank)))
        _add_changes(entry["points"])
    return list(out.values())


def _add_changes(points: list[dict]) -> None:
    """Each point's ``change`` from the point before along the first value (None where there is none)."""
    for i, here in enumerate(points):
        before = next((p for p in reversed(points[:i]) if _rest(p["point"]) == _rest(here["point"])), None)
        if before is None:
            here["change"] = None
            continue
        w = stats.welch_summary(here["paired_delta"], here["paired_sd"], here["n"], before["paired_delta"],
                                before["paired_sd"], before["n"])
        here["change"] = {"from": before["point"], "difference": w.delta, "ci95": w.half_width, "p": w.p}


def _rest(point: str) -> str:
    """A point's values after the first (``size=S, tokens_per_param=3`` -> ``tokens_per_param=3``)."""
    return point.split(", ", 1)[1] if ", " in point else ""


def grid_effects(runs: pl.DataFrame, axes: list, metric: str) -> list[dict]:
    """In a grid of two or more axes, the effect of the first axis (each of its values against its
    first) as a function of every other axis: at each value of that axis, the cells that differ only
    in the first axis, paired by seed (the other axes at their first values), and its change from
    the value before, as `effects` has it. ``axes``: [(path, values)] in the design's order."""
    axes = [(path, list(values)) for path, values in axes]
    if len(axes) < 2 or runs.is_empty():
        return []
    values = table.seed_values(table.normalise(runs), metric)
    (first, first_values), rest = axes[0], axes[1:]
    out = []
    for i, (path, along) in enumerate(rest):
        others = [(p, vs[0]) for p, vs in rest]
        for a in first_values[1:]:
            entry = {"variant": f"{first.split('.')[-1]}={a}", "vs": f"{first.split('.')[-1]}={first_values[0]}",
                     "axis": path.split(".")[-1], "points": []}
            for b in along:
                cell = others.copy()
                cell[i] = (path, b)
                mine = values.get(_grid_name([(first, a), *cell]), {})
                base = values.get(_grid_name([(first, first_values[0]), *cell]), {})
                p = stats.paired(mine, base)
                means = [stats.mean_ci(v.values()).mean for v in (mine, base)]
                entry["points"].append({"point": f"{path.split('.')[-1]}={b}", "n": p.n, "paired_delta": p.delta,
                                        "paired_sd": p.sd, "paired_ci95": p.half_width, "p_unadjusted": p.p,
                                        "delta": None if None in means else means[0] - means[1]})
            _add_changes(entry["points"])
            out.append(entry)
    return out

"""Effect versus an axis: in a design whose rows are variants at the points of one axis (a scaling
ladder's sizes, a crossed design's values), each variant's paired difference from the base at the
same point, point by point in the axis's order: the figure the paper draws for context length."""
from __future__ import annotations

import polars as pl

from workbench.table import SAME_POINT


def effects(rows: pl.DataFrame, axis_values: list[str]) -> list[dict]:
    """``[{variant, vs, points: [{point, n, paired_delta, paired_ci95, p_value, delta}]}]`` from the
    study table's rows; ``axis_values`` the point labels in the axis's order."""
    rank = {p: i for i, p in enumerate(axis_values)}
    out: dict[str, dict] = {}
    for r in rows.filter(pl.col("comparison") == SAME_POINT).iter_rows(named=True):
        entry = out.setdefault(r["variant"], {"variant": r["variant"], "vs": r["base_row"].rsplit(" [", 1)[0], "points": []})
        entry["points"].append({"point": r["search_point"], "n": r["paired_n"], "paired_delta": r["paired_delta"],
                                "paired_ci95": r["paired_ci95"], "p_value": r["p_value"], "delta": r["delta"]})
    for entry in out.values():
        entry["points"].sort(key=lambda p: rank.get(p["point"], len(rank)))
    return list(out.values())


def axis_labels(study) -> list[str]:
    """The point labels of a scaling or crossed design, in its order (workbench.study.Trial.point_label)."""
    d = study.design
    if d.kind == "scaling":
        return [f"size={c.name}" for c in d.sizes]
    return [f"{d.axis}={c.name}" for c in d.points]

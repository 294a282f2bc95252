"""The effect versus an axis whose points are several values (a scaling ladder crossed with token
budgets): the change is taken along the first value only, never between points that differ in two."""
import polars as pl
import pytest

from foxwb.workbench.analysis import stats
from foxwb.workbench.analysis.effects import effects
from foxwb.workbench.analysis.table import SAME_POINT


def test_the_change_runs_along_the_first_value_at_the_same_others():
    axis = [f"size={s}, tokens_per_param={t}" for s in ("XS", "S", "M") for t in (1, 3)]
    delta = {p: 0.1 * i for i, p in enumerate(axis)}
    rows = pl.DataFrame([{"variant": "FoX", "search_point": p, "comparison": SAME_POINT, "base_row": f"T [{p}]",
                          "paired_n": 3, "paired_delta": delta[p], "paired_sd": 0.05 + 0.01 * i, "paired_ci95": 0.2,
                          "p_unadjusted": 0.5, "delta": delta[p]} for i, p in enumerate(axis)])
    (entry,) = effects(rows, axis)
    change = {p["point"]: p["change"] for p in entry["points"]}
    # The smallest size at each budget has nothing before it along the size.
    assert change["size=XS, tokens_per_param=1"] is None and change["size=XS, tokens_per_param=3"] is None
    for size, before in (("S", "XS"), ("M", "S")):
        for t in (1, 3):
            here, prev = f"size={size}, tokens_per_param={t}", f"size={before}, tokens_per_param={t}"
            c = change[here]
            assert c["from"] == prev
            i, j = axis.index(here), axis.index(prev)
            w = stats.welch_summary(delta[here], 0.05 + 0.01 * i, 3, delta[prev], 0.05 + 0.01 * j, 3)
            assert c["difference"] == pytest.approx(w.delta) and c["p"] == pytest.approx(w.p)


def test_a_grids_effect_changes_along_its_other_axis():
    """A grid of two axes: the first axis's effect at each value of the second, paired by seed, and
    its change from the value before (Welch over the per-seed differences), as `wb results` prints it."""
    import random

    from foxwb.workbench.analysis.effects import grid_effects
    from foxwb.workbench.spec.study import _grid_name

    noise = random.Random(3)
    axes = [("model.attention.forget_gate", ["none", "data_dependent"]), ("train.lr", [0.001, 0.002, 0.004])]
    runs = pl.DataFrame([{"variant": _grid_name([(axes[0][0], g), (axes[1][0], lr)]), "seed": s, "search_point": "",
                          "stopped_early": False, "status": "FINISHED",
                          "val_ppl": 20 + (1.0 + 2 * lr * 100 if g == "none" else 0) + noise.gauss(0, 0.2)}
                         for g in axes[0][1] for lr in axes[1][1] for s in range(4)])
    (entry,) = grid_effects(runs, axes, "val_ppl")
    values = {(r["variant"], r["seed"]): r["val_ppl"] for r in runs.iter_rows(named=True)}

    def diffs(lr):
        return [values[(_grid_name([(axes[0][0], "data_dependent"), (axes[1][0], lr)]), s)]
                - values[(_grid_name([(axes[0][0], "none"), (axes[1][0], lr)]), s)] for s in range(4)]

    from scipy import stats as sps

    points = entry["points"]
    assert [p["point"] for p in points] == ["lr=0.001", "lr=0.002", "lr=0.004"] and points[0]["change"] is None
    for before, here, lr0, lr1 in ((points[0], points[1], 0.001, 0.002), (points[1], points[2], 0.002, 0.004)):
        test = sps.ttest_ind(diffs(lr1), diffs(lr0), equal_var=False)
        assert here["change"]["from"] == before["point"] and here["change"]["p"] == pytest.approx(test.pvalue)
        assert here["change"]["difference"] == pytest.approx(sum(diffs(lr1)) / 4 - sum(diffs(lr0)) / 4)

"""Reading a tracking store that has moved: a study's workdir copied from the GPU machine to
another path still yields its per-position artifacts (the dashboard's L(i) figure needs them)."""
import shutil

import pytest

from foxwb.workbench.analysis import runs as results
from foxwb.workbench.run.tracking import create_local_store, open_store


def test_per_position_artifacts_are_found_after_the_workdir_moves(tmp_path):
    first = tmp_path / "on-the-gpu-machine"
    first.mkdir()
    create_local_store(first)
    store = open_store(first, "moved_study")
    run = store.client.create_run(store.experiment_id)
    curve = {"per_position_loss": [2.5, 2.0, 1.5], "ppl_at_length": {"2": 9.5}}
    store.client.log_dict(run.info.run_id, curve, "per_position_loss.json")
    store.client.set_terminated(run.info.run_id)

    moved = tmp_path / "here"
    shutil.copytree(first, moved)
    shutil.rmtree(first)  # the recorded absolute artifact paths now point nowhere
    store = open_store(moved, "moved_study")
    runs = store.client.search_runs([store.experiment_id])
    assert results.per_position(store, runs) == {runs[0].info.run_id: curve}


def test_paired_deltas_cancel_what_the_seed_alone_moves():
    """Seeds that move every variant together (as a shared data order does): the unpaired CIs are
    wide, the paired CI of the difference is the spread of the differences alone."""
    import polars as pl

    from foxwb.workbench.analysis.table import StudyInfo, study_table

    seed_effect = {0: 0.0, 1: 1.0, 2: -0.7}
    shift = {"base": 0.0, "better": -0.1, "worse": 0.2}
    noise = {("better", 0): 0.01, ("better", 1): -0.02, ("better", 2): 0.0, ("worse", 0): 0.0,
             ("worse", 1): 0.0, ("worse", 2): 0.03}
    rows = [{"variant": v, "seed": s, "search_point": "", "stopped_early": False,
             "val_ppl": 10 + seed_effect[s] + shift[v] + noise.get((v, s), 0.0)}
            for v in shift for s in seed_effect]
    info = StudyInfo("s", "base", list(shift), seeds=[0, 1, 2])
    table = {r["row"]: r for r in study_table(pl.DataFrame(rows), info).iter_rows(named=True)}
    better = table["better"]
    diffs = [-0.1 + 0.01, -0.1 - 0.02, -0.1]
    mean = sum(diffs) / 3
    sd = (sum((d - mean) ** 2 for d in diffs) / 2) ** 0.5
    assert better["paired_n"] == 3
    assert abs(better["paired_delta"] - mean) < 1e-12
    assert abs(better["paired_ci95"] - 4.302652729749462 * sd / 3 ** 0.5) < 1e-12  # t(0.975, 2)
    assert better["paired_ci95"] < 0.1 < better["ci95"]  # the seed effect is gone from the paired CI
    assert table["base"]["paired_n"] is None and table["base"]["comparison"] == "base"  # not compared with itself
    # Only the seeds both rows have are paired.
    one = study_table(pl.DataFrame([r for r in rows if not (r["variant"] == "better" and r["seed"] > 0)]), info)
    row = one.filter(pl.col("row") == "better").row(0, named=True)
    assert row["paired_n"] == 1 and row["paired_ci95"] is None and row["fewer_seeds"]


def test_the_table_is_the_same_to_the_last_digit_whatever_order_the_runs_come_in():
    """The store returns runs in no fixed order; the table's delta, CI and p add each row's seeds
    in seed order, so two readings of one store agree in every digit (values whose sum depends on
    the order of addition)."""
    import polars as pl

    from foxwb.workbench.analysis.table import StudyInfo, study_table

    values = {"base": [1e16, 1.0, -1e16, 3.0, 0.1], "gate": [0.3, -1e16, 1e16, 2.0, 0.7]}
    rows = [{"variant": v, "seed": s, "search_point": "", "stopped_early": False, "val_ppl": x}
            for v, xs in values.items() for s, x in enumerate(xs)]
    info = StudyInfo("s", "base", list(values), seeds=list(range(5)))
    first = study_table(pl.DataFrame(rows), info).to_dicts()
    reversed_ = study_table(pl.DataFrame(rows[::-1]), info).to_dicts()
    assert sum(values["gate"]) != sum(sorted(values["gate"], key=abs))  # the order of addition matters here
    assert first == reversed_ and first[1]["delta"] is not None


def test_a_random_search_compares_best_point_with_best_point():
    """Draws differ per variant (a random search), so no row of a variant has the base at its
    searched values: the variant's best row (lowest mean val_loss) is compared with the base's
    best, paired by seed; its other rows have no comparison, and the table says which is which."""
    import polars as pl

    from foxwb.workbench.analysis.table import StudyInfo, study_table

    loss = {("base", "lr=0.001"): [3.0, 3.2], ("base", "lr=0.01"): [2.5, 2.9],
            ("gate", "lr=0.002"): [2.4, 2.5], ("gate", "lr=0.02"): [2.8, 3.3]}
    rows = [{"variant": v, "seed": s, "search_point": p, "val_loss": x, "val_ppl": 10 * x}
            for (v, p), xs in loss.items() for s, x in enumerate(xs)]
    info = StudyInfo("s", "base", ["base", "gate"], seeds=[0, 1])
    table = {r["row"]: r for r in study_table(pl.DataFrame(rows), info).iter_rows(named=True)}
    best = table["gate [lr=0.002]"]
    assert best["comparison"] == "best point" and best["base_row"] == "base [lr=0.01]"
    assert abs(best["delta"] - (24.5 - 27.0)) < 1e-9 and abs(best["paired_delta"] - ((24 - 25) + (25 - 29)) / 2) < 1e-9
    other = table["gate [lr=0.02]"]
    assert other["comparison"] is None and other["delta"] is None and other["base_row"] is None
    assert table["base [lr=0.01]"]["comparison"] == "base" and table["base [lr=0.001]"]["delta"] is None


def test_rows_whose_runs_spiked_are_marked_with_the_definition():
    """A row with a spiking run (foxwb.workbench.train.spikes' figures, as the store carries them) gets its
    count and the largest gradient norm in `wb results` and a mark in the dashboard's table; the
    footnote defines a spike."""
    import polars as pl

    from foxwb.dashboards.figures import ablation_table
    from foxwb.workbench.analysis.report import table_lines
    from foxwb.workbench.analysis.table import StudyInfo, study_table

    rows = [{"variant": v, "seed": s, "val_ppl": 10.0 + s + (v == "spiky"), "grad_spikes": float(g), "loss_spikes": float(l),
             "grad_norm_max": m, "grad_norm_max_ratio": m / 0.5}
            for v, s, g, l, m in [("base", 0, 0, 0, 1.1), ("base", 1, 0, 0, 1.3),
                                  ("spiky", 0, 2, 1, 41.0), ("spiky", 1, 0, 0, 1.2)]]
    info = StudyInfo("s", "base", ["base", "spiky"], seeds=[0, 1])
    table = study_table(pl.DataFrame(rows), info)
    spiky = table.filter(pl.col("row") == "spiky").row(0, named=True)
    assert (spiky["runs_spiked"], spiky["grad_spikes"], spiky["loss_spikes"], spiky["grad_norm_max"]) == (1, 2, 1, 41.0)
    text = "\n".join(table_lines(table, info, "val_ppl"))
    line = next(l for l in text.splitlines() if l.startswith("spiky "))
    assert "1 of 2! max 41.0" in line and "0 of 2 max 1.30" in next(l for l in text.splitlines() if l.startswith("base "))
    assert "k of n runs spiked" in text and "10x the median gradient norm" in text
    page = ablation_table(table, info)
    assert page.count('class="spike"') == 1 and "2 gradient-norm and 1 loss spikes" in page


def test_a_name_that_trains_as_another_variant_has_its_confirmation_row():
    """Tune, then confirm: two names that build the same model (an alias, as Table 3's "+ output
    norm" and "FoX (Pro) - KV-shift") are one trial; the choice recorded for the first holds for
    both, so the alias's confirmation row holds those runs instead of waiting for runs forever."""
    import polars as pl

    from foxwb.workbench.analysis.table import StudyInfo, study_table

    runs = [{"variant": v, "seed": s, "search_point": p, "val_loss": 3.0 + 0.1 * s + (0.5 if p == "lr=0.001" else 0.0),
             "alias_of": None} for v in ("base", "x") for s, p in ((0, "lr=0.001"), (0, "lr=0.01"), (1, "lr=0.01"))]
    runs += [{**r, "variant": "y", "alias_of": "x"} for r in runs if r["variant"] == "x"]
    info = StudyInfo("s", "base", ["base", "x", "y"], seeds=[0], planned=[("base", ""), ("x", ""), ("y", "")],
                     confirm_seeds=[0, 1], choice={"base": "lr=0.01", "x": "lr=0.01"})
    table = {r["row"]: r for r in study_table(pl.DataFrame(runs), info, "val_loss").iter_rows(named=True)}
    assert table["y"]["n_seeds"] == table["x"]["n_seeds"] == 2 and table["y"]["to_run"] == 0
    assert abs(table["y"]["mean"] - 3.05) < 1e-12 and table["y"]["comparison"] == "vs base"


def test_before_the_choice_the_search_rows_stand_apart_in_the_text_table_as_on_the_dashboard():
    """Tune, then confirm, the search run and nothing chosen yet (no ``chosen`` values): the text
    table splits its rows on their stage as the dashboard's table and the Holm families do, the
    confirmation rows (still to run) the table, the search rows apart below it."""
    import polars as pl

    from foxwb.dashboards.figures import ablation_table
    from foxwb.workbench.analysis.report import table_lines
    from foxwb.workbench.analysis.table import StudyInfo, study_table

    runs = [{"variant": v, "seed": 0, "search_point": p, "alias_of": None,
             "val_loss": 3.0 + (0.1 if v == "x" else 0.0) + (0.5 if p == "lr=0.001" else 0.0)}
            for v in ("base", "x") for p in ("lr=0.001", "lr=0.01")]
    info = StudyInfo("s", "base", ["base", "x"], seeds=[0], planned=[("base", ""), ("x", "")], confirm_seeds=[1, 2])
    table = study_table(pl.DataFrame(runs), info, "val_loss")
    assert table["chosen"].drop_nulls().len() == 0
    lines = table_lines(table, info, "val_loss")
    title = next(i for i, line in enumerate(lines) if line.startswith("search, beside the table"))
    above, below = lines[:title], lines[title:]
    assert [line.split()[0] for line in above if line.startswith(("base", "x"))] == ["base", "x"]
    assert [line.split("  ")[0] for line in below if line.startswith(("base", "x"))] == [
        "base [lr=0.001]", "base [lr=0.01]", "x [lr=0.001]", "x [lr=0.01]"]
    assert "Search, beside the table" in ablation_table(table, info)


def test_rows_on_seeds_of_their_own_are_counted_and_powered_on_those():
    """A variants design's row on its own seeds: 'k/n!' counts against its seeds, not the
    study's, and the power analysis's 'power now' is over the seeds it shares with its base."""
    import json

    import polars as pl

    from foxwb.workbench.analysis import report
    from foxwb.workbench.analysis.table import study_info, study_table

    seeds = {"base": [0, 1, 2, 3, 4, 5], "far": [0, 1, 2], "short": [0, 1, 2, 3, 4, 5]}
    shift = {"base": [0.0] * 6, "far": [0.5, 0.65, 0.4], "short": [0.15, 0.0, 0.22, 0.1, 0.04]}  # short: seed 5 not finished
    runs = pl.DataFrame([{"variant": v, "seed": s, "search_point": "", "stopped_early": False, "status": "FINISHED",
                          "val_ppl": 10.0 + x} for v, xs in shift.items() for s, x in enumerate(xs)])
    tags = {"variants": json.dumps(list(seeds)), "base_variant": "base", "seeds": json.dumps(seeds["base"]),
            "variant_seeds": json.dumps({"far": seeds["far"]}), "design_kind": "variants"}
    info = study_info("s", runs, None, tags)
    assert info.seeds_of("far") == [0, 1, 2] and info.seeds_of("short") == seeds["base"]
    table = {r["row"]: r for r in study_table(runs, info).iter_rows(named=True)}
    assert (table["far"]["n_seeds"], table["far"]["seeds_expected"], table["far"]["fewer_seeds"]) == (3, 3, False)
    assert (table["short"]["n_seeds"], table["short"]["seeds_expected"], table["short"]["fewer_seeds"]) == (5, 6, True)
    # Read without the file (`wb results NAME`), the tags still tell the plan: the seed not started is to run.
    assert (table["short"]["to_run"], table["far"]["to_run"], table["base"]["to_run"]) == (1, 0, 0)
    assert "rows of seeds of their own: far [0, 1, 2]" in "\n".join(report.footnotes(study_table(runs, info), info, False, False))
    lines = report.seeds_lines(study_table(runs, info), info, "val_ppl", 0.01)
    power = {line.split()[0]: line.split()[-1] for line in lines[2:-1]}
    from foxwb.workbench.analysis import stats

    far, short = table["far"], table["short"]
    assert float(power["far"]) == round(stats.power_paired(0.1, far["paired_sd"], 3, 0.05), 2)
    assert float(power["far"]) < round(stats.power_paired(0.1, far["paired_sd"], 6, 0.05), 2)  # not the study's 6
    assert float(power["short"]) == round(stats.power_paired(0.1, short["paired_sd"], 6, 0.05), 2)


def test_a_row_declared_welch_is_compared_unpaired_over_all_the_seeds_of_each():
    """`test: welch` (tagged `welch` on the parent run): the noisy row's comparison with the base
    is Welch's over its 12 seeds and the base's 4, not a paired test over the 4 both have; its
    power analysis asks seeds of the declared row only, with the base's as planned. Re-based on
    the declared row (`--base`), every comparison with it is Welch's."""
    import json

    import numpy as np
    import polars as pl
    from scipy import stats as sps

    from foxwb.workbench.analysis import report, stats
    from foxwb.workbench.analysis.table import study_info, study_table

    rng = np.random.default_rng(3)
    values = {"base": 10.0 + rng.normal(0, 0.02, 4), "noisy": 10.6 + rng.normal(0, 0.4, 12),
              "close": 10.05 + rng.normal(0, 0.02, 4)}
    runs = pl.DataFrame([{"variant": v, "seed": s, "search_point": "", "stopped_early": False, "status": "FINISHED",
                          "val_ppl": float(x)} for v, xs in values.items() for s, x in enumerate(xs)])
    tags = {"variants": json.dumps(list(values)), "base_variant": "base", "seeds": json.dumps([0, 1, 2, 3]),
            "variant_seeds": json.dumps({"noisy": list(range(16))}), "welch": json.dumps(["noisy"])}
    info = study_info("s", runs, None, tags)
    table = {r["row"]: r for r in study_table(runs, info).iter_rows(named=True)}
    noisy, close = table["noisy"], table["close"]
    assert noisy["test"] == "welch" and noisy["paired_n"] is None and (noisy["n_seeds"], noisy["base_n_seeds"]) == (12, 4)
    assert noisy["p_unadjusted"] == pytest.approx(sps.ttest_ind(values["noisy"], values["base"], equal_var=False).pvalue, rel=1e-10)
    assert noisy["delta"] == pytest.approx(values["noisy"].mean() - values["base"].mean())
    assert noisy["mde"] == pytest.approx(stats.mde_welch(values["noisy"].std(ddof=1), 12, values["base"].std(ddof=1), 4))
    assert close["test"] == "paired" and close["paired_n"] == 4
    assert noisy["seeds_run"] == list(range(12)) and noisy["values"] == pytest.approx(list(values["noisy"]))
    text = "\n".join(report.table_lines(study_table(runs, info), info, "val_ppl"))
    assert "(W 12 & 4)" in text and "W k & m: Welch's unpaired comparison" in text
    lines = report.seeds_lines(study_table(runs, info), info, "val_ppl", 0.01)
    row = next(line for line in lines if line.startswith("noisy"))
    needed = stats.seeds_needed_welch(0.01 * values["base"].mean(), values["noisy"].std(ddof=1), values["base"].std(ddof=1), 4)
    assert f" {needed.n} of noisy " in row and "W 12 & 4" in row
    now = stats.power_welch(0.01 * values["base"].mean(), values["noisy"].std(ddof=1), 16, values["base"].std(ddof=1), 4)
    assert row.split()[-1] == f"{now:.2f}"  # with the 16 seeds the study asks of it, not the 12 finished
    rebased = {r["row"]: r for r in study_table(runs, study_info("s", runs, None, tags, base="noisy")).iter_rows(named=True)}
    assert rebased["close"]["test"] == rebased["base"]["test"] == "welch"


def test_without_the_file_a_searchs_rows_keep_the_plans_order_not_the_start_order():
    """Trials of one seed start together, in an order the scheduler picks: `wb results NAME` orders
    a variant's search points as the plan does (tagged on the parent run), as the file would."""
    import json

    import polars as pl

    from foxwb.workbench.analysis.table import row_keys, study_info

    plan = [["a", "lr=0.003"], ["a", "lr=0.01"], ["b", "lr=0.003"], ["b", "lr=0.01"]]
    started = [("a", "lr=0.01"), ("b", "lr=0.01"), ("a", "lr=0.003"), ("b", "lr=0.003")]  # the reverse, by point
    runs = pl.DataFrame([{"variant": v, "seed": 0, "search_point": p, "start_time": i, "val_ppl": 1.0}
                         for i, (v, p) in enumerate(started)])
    tags = {"variants": json.dumps(["a", "b"]), "base_variant": "a", "seeds": "[0]"}
    assert [k[1:] for k in row_keys(runs, study_info("s", runs, None, tags))] == [tuple(r) for r in [
        ["a", "lr=0.01"], ["a", "lr=0.003"], ["b", "lr=0.01"], ["b", "lr=0.003"]]]  # untagged: the start order
    tagged = study_info("s", runs, None, {**tags, "rows": json.dumps(plan)})
    assert [k[1:] for k in row_keys(runs, tagged)] == [tuple(r) for r in plan]


def test_holm_counts_each_distinct_comparison_once():
    """Tune, then confirm on the seeds the search ran: a variant and its alias hold the same runs.
    Holm's family is the distinct comparisons: such rows share one adjusted p, and m counts them
    once. The confirmation rows (the table) are one family, the search rows beside it another."""
    import polars as pl

    from foxwb.workbench.analysis.table import StudyInfo, study_table

    import random

    noise = random.Random(7)
    shift = {"base": 0.0, "x": -0.3, "z": 0.2}
    runs = [{"variant": v, "seed": s, "search_point": p, "alias_of": None,
             "val_loss": 3.0 + shift[v] + (0.4 if p == "lr=0.001" else 0.0) + noise.gauss(0, 0.1)}
            for v in shift for p in ("lr=0.001", "lr=0.01") for s in (0, 1, 2)]
    runs += [{**r, "variant": "y", "alias_of": "x"} for r in runs if r["variant"] == "x"]
    info = StudyInfo("s", "base", ["base", "x", "y", "z"], seeds=[0, 1, 2],
                     planned=[(v, "") for v in ("base", "x", "y", "z")], confirm_seeds=[0, 1, 2],
                     choice={"base": "lr=0.01", "x": "lr=0.01", "z": "lr=0.01"})
    rows = {r["row"]: r for r in study_table(pl.DataFrame(runs), info, "val_loss").iter_rows(named=True)}
    for same in (["x", "y"], ["x [lr=0.01]", "y [lr=0.01]"]):
        assert len({rows[r]["p_unadjusted"] for r in same}) == 1 and len({rows[r]["p_holm"] for r in same}) == 1
    # The distinct comparisons: x and z against the base, confirmed (m = 2), and at each lr of the search (m = 4).
    for family in (("x", "z"), ("x [lr=0.01]", "z [lr=0.01]", "x [lr=0.001]", "z [lr=0.001]")):
        distinct = sorted(rows[r]["p_unadjusted"] for r in family)
        assert len(set(distinct)) == len(family)
        adjusted, running = {}, 0.0
        for rank, p in enumerate(distinct):
            running = max(running, min(1.0, (len(family) - rank) * p))
            adjusted[p] = running
        for r in family:
            assert rows[r]["p_holm"] == adjusted[rows[r]["p_unadjusted"]], r


def test_a_ladder_read_by_name_keeps_the_axis_order():
    """`wb results NAME` (no file) of a scaling study whose trials started out of order: the rows
    follow the tagged axis, as they do with the file, and a size not yet run is to run."""
    import json

    import polars as pl

    from foxwb.workbench.analysis.table import study_info, study_table

    axis = ["size=XS", "size=S", "size=M"]
    started = [("FoX", "size=S"), ("FoX", "size=XS"), ("T", "size=S"), ("T", "size=XS")]  # M: not yet run
    runs = pl.DataFrame([{"variant": v, "seed": s, "search_point": p, "stopped_early": False, "status": "FINISHED",
                          "start_time": 10 * i + s, "val_ppl": 20.0 - i + 0.1 * s}
                         for i, (v, p) in enumerate(started) for s in (0, 1)])
    tags = {"variants": '["FoX", "T"]', "base_variant": "FoX", "seeds": "[0, 1]", "design_kind": "scaling",
            "axis": json.dumps(axis)}
    table = study_table(runs, study_info("ladder", runs, None, tags))
    assert table["row"].to_list() == [f"{v} [{p}]" for v in ("FoX", "T") for p in axis]
    assert table.filter(pl.col("row") == "T [size=M]")["to_run"].item() == 2


def test_rows_validated_on_fewer_sequences_than_asked_are_named():
    """A run validated on fewer held-out sequences than eval.sequences asks (a small corpus): the
    row records the fewest, and the table's notes name it with how to fix it."""
    import polars as pl

    from foxwb.workbench.analysis import report
    from foxwb.workbench.analysis.table import StudyInfo, study_table

    got = {"base": [16, 16], "small": [3, 5]}
    runs = pl.DataFrame([{"variant": v, "seed": s, "search_point": "", "stopped_early": False, "status": "FINISHED",
                          "val_ppl": 10.0 + s, "eval_sequences": float(n), "eval_sequences_asked": 16.0}
                         for v, ns in got.items() for s, n in enumerate(ns)])
    info = StudyInfo("s", "base", ["base", "small"], seeds=[0, 1], planned=[("base", ""), ("small", "")])
    table = study_table(runs, info)
    assert table["eval_sequences"].to_list() == [16, 3] and table["eval_sequences_asked"].to_list() == [16, 16]
    notes = "\n".join(report.footnotes(table, info, False, False))
    assert "validated on fewer held-out sequences than eval.sequences asks" in notes and ": small (3 of 16)" in notes
    assert "base (" not in notes

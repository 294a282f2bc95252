"""Effect versus an axis: a crossed design (each variant at every value of one axis) end to end on
real Ray and MLflow; `wb results --format json` gives each variant's paired difference from the
base at every value, checked against the store by hand; and the designs' bad input."""
import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from scipy import stats
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]
BASE = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
                  "mlp": {"kind": "swiglu", "intermediate_size": 64}},
        "data": {"kind": "builtin", "context": 64, "max_bytes": 600000},
        "train": {"tokens": 8192, "batch_size": 8, "eval_batches": 1, "cpu_threads": 1},
        "eval": {"sequences": 4, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024}}
VARIANTS = [{"name": "FoX (Pro)", "set": {"model.attention.forget_gate": "data_dependent"}},
            {"name": "no gate", "set": {"model.attention.forget_gate": "none"}}]




def write(tmp_path, design, **extra):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"name": "ctx", "base": BASE, "design": design, "seeds": [0, 1], **extra}, sort_keys=False))
    return path


def test_the_effect_of_a_variant_along_an_axis_is_paired_per_value(tmp_path):
    points = [{"name": str(c), "set": {"data.context": c, "train.batch_size": 512 // c}} for c in (32, 64)]
    study = write(tmp_path, {"kind": "crossed", "variants": VARIANTS, "axis": "context", "points": points})
    proc = wb("run", study, "--workdir", tmp_path / "w")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = wb("results", study, "--workdir", tmp_path / "w", "--format", "json", "--metric", "val_loss")
    assert out.returncode == 0, out.stderr[-2000:]
    (effect,) = json.loads(out.stdout)["effects"]
    assert effect["variant"] == "no gate" and effect["vs"] == "FoX (Pro)"
    client = MlflowClient(f"sqlite:///{tmp_path / 'w' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ctx")
    loss = {(r.data.tags["variant"], r.data.params["data.context"], int(r.data.tags["seed"])): r.data.metrics["val_loss"]
            for r in client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial'")}
    assert len(loss) == 8
    assert [p["point"] for p in effect["points"]] == ["context=32", "context=64"]
    for point, context in zip(effect["points"], ("32", "64")):
        diffs = [loss[("no gate", context, s)] - loss[("FoX (Pro)", context, s)] for s in (0, 1)]
        assert point["n"] == 2 and point["paired_delta"] == pytest.approx(sum(diffs) / 2)
        assert point["p_unadjusted"] == pytest.approx(stats.ttest_1samp(diffs, 0).pvalue)
    # Whether the effect changes along the axis: Welch's test of the per-seed differences at 64 against 32.
    per_point = [[loss[("no gate", c, s)] - loss[("FoX (Pro)", c, s)] for s in (0, 1)] for c in ("32", "64")]
    change = effect["points"][1]["change"]
    welch = stats.ttest_ind(per_point[1], per_point[0], equal_var=False)
    assert effect["points"][0]["change"] is None and change["from"] == "context=32"
    assert change["difference"] == pytest.approx(sum(per_point[1]) / 2 - sum(per_point[0]) / 2)
    assert change["p"] == pytest.approx(welch.pvalue)
    text = wb("results", study, "--workdir", tmp_path / "w", "--metric", "val_loss")
    assert f"    context=64: {effect['points'][1]['paired_delta']:+.4g}" in text.stdout
    assert f"change from context=32: {change['difference']:+.4g}" in text.stdout


def sizes(*d_models, **extra):
    """A ladder of sizes named S0, S1, ... at these widths; extra: s<i>=more edits of size i."""
    return [{"name": f"S{i}", "set": {"model.d_model": d, **extra.get(f"s{i}", {})}} for i, d in enumerate(d_models)]


@pytest.mark.parametrize("design,expected", [
    ({"kind": "scaling", "variants": VARIANTS, "sizes": [{"name": "S", "set": {"model.d_model": 32}}]},
     "sizes: a ladder needs at least 4 sizes: its law L(N) = E + A/N^alpha has 3 parameters"),
    ({"kind": "scaling", "variants": VARIANTS, "sizes": sizes(32, 64, 96)},
     "sizes: a ladder needs at least 4 sizes: its law L(N) = E + A/N^alpha has 3 parameters, and a fit needs a "
     "point more (docs/scaling.md); got 3"),
    ({"kind": "scaling", "variants": VARIANTS, "sizes": sizes(32, 64, 96), "tokens_per_param": 20},
     "sizes: a ladder needs at least 4 sizes"),
    ({"kind": "scaling", "variants": VARIANTS, "sizes": sizes(32, 64), "tokens_per_param": [5, 20]},
     "sizes: a ladder crossed with token budgets needs at least 3 sizes: its law L(N, D) = E + A/N^alpha + B/D^beta "
     "tells its two terms apart from 3 sizes and 3 token counts on (docs/scaling.md); got 2"),
    ({"kind": "scaling", "variants": VARIANTS, "sizes": sizes(32, 64, 64, 96, s2={"model.attention.rope": "rope"})},
     "design.sizes: variant 'FoX (Pro)' gets 3 distinct non-embedding parameter counts from 4 sizes (S1 and S2: "),
    ({"kind": "scaling", "variants": VARIANTS, "sizes": sizes(32, 64, 96, 128, s1={"model.n_heads": 3})},
     "study.yaml:41:5: design.sizes[1].set (row FoX (Pro) [size=S1]): 1 problem\n  model: n_heads=3 does not divide d_model=64; "
     "pick a divisor of 64"),
    ({"kind": "crossed", "variants": VARIANTS, "axis": "context", "points": [
        {"name": "64", "set": {"data.context": 64}}, {"name": "128", "set": {"data.contxt": 128}}]},
     "study.yaml:42:5: design.points[1].set (row FoX (Pro) [context=128]): 'data.contxt': data has no field 'contxt'"),
    ({"kind": "scaling", "variants": VARIANTS, "extrapolate_to": "10k", "sizes": sizes(32, 64, 96, 128)},
     "design.extrapolate_to: '10k' (10,000 parameters) is not above the ladder"),
    ({"kind": "crossed", "variants": VARIANTS, "axis": "context", "points": [{"name": "64", "set": {"data.context": 64}}]},
     "design.points: List should have at least 2 items"),
])
def test_bad_scaling_and_crossed_designs_get_one_clear_error_and_write_nothing(tmp_path, design, expected):
    proc = wb("run", write(tmp_path, design), "--workdir", tmp_path / "w")
    assert proc.returncode == 2 and expected in proc.stderr, proc.stderr
    assert not (tmp_path / "w").exists()


def test_a_grid_gives_the_effect_of_its_first_axis_along_the_others(tmp_path):
    design = {"kind": "grid", "axes": {"model.attention.forget_gate": ["data_dependent", "none"], "data.context": [32, 64]}}
    study = write(tmp_path, design)
    proc = wb("run", study, "--workdir", tmp_path / "w")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'w' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ctx")
    loss = {(r.data.params["model.attention.forget_gate.kind"], r.data.params["data.context"], int(r.data.tags["seed"])):
            r.data.metrics["val_loss"] for r in client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial'")}
    # The store alone (no study file): the axes are tagged on the study's parent run.
    out = wb("results", "ctx", "--workdir", tmp_path / "w", "--format", "json", "--metric", "val_loss")
    assert out.returncode == 0, out.stderr[-2000:]
    (effect,) = json.loads(out.stdout)["effects"]
    assert (effect["variant"], effect["vs"], effect["axis"]) == ("forget_gate=none", "forget_gate=data_dependent", "context")
    for point, context in zip(effect["points"], ("32", "64")):
        diffs = [loss[("none", context, s)] - loss[("data_dependent", context, s)] for s in (0, 1)]
        assert point["point"] == f"context={context}" and point["paired_delta"] == pytest.approx(sum(diffs) / 2)
    proc = wb("dashboard", "--workdir", tmp_path / "w")
    assert proc.returncode == 0 and "Effect versus context" in next((tmp_path / "w" / "dashboard").glob("study-ctx*.html")).read_text()


def test_a_crossed_design_tunes_each_cell_then_confirms_it(tmp_path):
    """A search in a crossed design runs in every cell (the variant at a point of the axis); the
    confirmation takes each cell's own best learning rate (checked against the search's values in
    the store) to the confirmation seeds, and the table and the effect compare the cells'
    confirmation rows at the same point, paired by seed."""
    points = [{"name": str(c), "set": {"data.context": c, "train.batch_size": 512 // c}} for c in (32, 64)]
    study = write(tmp_path, {"kind": "crossed", "variants": VARIANTS, "axis": "context", "points": points},
                  search={"algorithm": "grid", "space": {"train.lr": {"choice": [0.0003, 0.01]}},
                          "confirm": {"seeds": [0, 1]}})
    text = yaml.safe_load(study.read_text())
    text["seeds"] = [0]
    study.write_text(yaml.safe_dump(text, sort_keys=False))
    proc = wb("run", study, "--workdir", tmp_path / "w")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'w' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ctx")
    runs = client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial'")
    search = {(r.data.tags["variant"], r.data.params["data.context"], float(r.data.params["train.lr"])): r.data.metrics["val_loss"]
              for r in runs if r.data.tags.get("stage") != "confirm" and int(r.data.tags["seed"]) == 0}
    assert len(search) == 8
    best = {(v, c): min((0.0003, 0.01), key=lambda lr: search[(v, c, lr)]) for v in ("FoX (Pro)", "no gate") for c in ("32", "64")}
    [parent] = client.search_runs([exp.experiment_id], "tags.wb_kind = 'study'")
    choice = json.loads(parent.data.tags["confirm_choice"])
    assert set(choice) == {f"{v} [context={c}]" for v, c in best}
    for (v, c), lr in best.items():
        assert choice[f"{v} [context={c}]"]["values"] == {"context": c, "train.lr": lr}
    confirmed = {(r.data.tags["variant"], r.data.params["data.context"], int(r.data.tags["seed"])): r.data.metrics["val_loss"]
                 for r in runs if float(r.data.params["train.lr"]) == best[(r.data.tags["variant"], r.data.params["data.context"])]}
    assert len(confirmed) == 8  # each cell at its choice on seeds 0 (the search's trial) and 1
    out = wb("results", study, "--workdir", tmp_path / "w", "--format", "json", "--metric", "val_loss")
    assert out.returncode == 0, out.stderr[-2000:]
    about = json.loads(out.stdout)
    rows = {r["row"]: r for r in about["rows"]}
    for c in ("32", "64"):
        row = rows[f"no gate [context={c}]"]
        assert row["n_seeds"] == 2 and row["base_row"] == f"FoX (Pro) [context={c}]" and row["comparison"] == "same point"
        # The row names the lr its cell chose, without the context the row already names.
        assert row["chosen"] == choice[f"no gate [context={c}]"]["point"].replace(f"context={c}, ", "")
        assert row["chosen"].startswith("lr=") and float(row["chosen"][3:]) == best[("no gate", c)]
    text = wb("results", study, "--workdir", tmp_path / "w", "--metric", "val_loss").stdout
    line = next(l for l in text.splitlines() if l.startswith("no gate [context=32] "))
    assert f" {rows['no gate [context=32]']['chosen']} " in line and "chosen: a confirmation row's searched values" in text
    proc = wb("dashboard", "--workdir", tmp_path / "w")
    page = next((tmp_path / "w" / "dashboard").glob("study-ctx*.html")).read_text()
    assert proc.returncode == 0 and f"chosen: {rows['no gate [context=64]']['chosen']}" in page
    (effect,) = about["effects"]
    assert [p["point"] for p in effect["points"]] == ["context=32", "context=64"]
    for point, c in zip(effect["points"], ("32", "64")):
        diffs = [confirmed[("no gate", c, s)] - confirmed[("FoX (Pro)", c, s)] for s in (0, 1)]
        assert point["n"] == 2 and point["paired_delta"] == pytest.approx(sum(diffs) / 2)


def test_a_crossed_design_refuses_an_optuna_search_and_a_ladder_any_search(tmp_path):
    points = [{"name": str(c), "set": {"data.context": c}} for c in (32, 64)]
    crossed = {"kind": "crossed", "variants": VARIANTS, "axis": "context", "points": points}
    proc = wb("run", write(tmp_path, crossed, search={"algorithm": "optuna", "space": {"train.lr": {"loguniform": [1e-4, 1e-2]}}}),
              "--workdir", tmp_path / "w")
    assert proc.returncode == 2 and "a crossed design searches each cell" in proc.stderr, proc.stderr
    ladder = {"kind": "scaling", "variants": VARIANTS, "sizes": sizes(32, 64, 96, 128)}
    proc = wb("run", write(tmp_path, ladder, search={"space": {"train.lr": {"choice": [0.001]}}}), "--workdir", tmp_path / "w")
    assert proc.returncode == 2 and "a scaling design's trials are its points" in proc.stderr, proc.stderr
    assert not (tmp_path / "w").exists()

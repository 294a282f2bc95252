"""The fairness report beside a study table (docs/results.md, "The fairness report"): a knob set on
two rows and searched on neither is flagged, a searched one is not, a choice at the edge of its grid
is flagged, and the JSON it is carried in has one shape, from the study file and from the store."""
import json

import yaml

from foxwb.workbench.analysis import fairness
from foxwb.workbench.cli.main import main
from foxwb.workbench.run import confirm
from foxwb.workbench.run.tracking import Store, create_local_store, local_tracking_uri
from foxwb.workbench.spec.errors import validate
from foxwb.workbench.spec.study import StudySpec, design_tags, expand

# FoX (Pro) in the "stable recipe": its KV-shift's logits divided by 16, tuned for it alone.
BASE = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
                  "attention": {"kv_shift": {"kind": "kv", "logit_normalizer": 16.0}}},
        "data": {"kind": "builtin", "context": 32}, "train": {"tokens": 10000}}
ARMS = {"kind": "variants", "variants": [
    {"name": "FoX (Pro)"}, {"name": "Transformer (Pro)", "set": {"model.attention.rope": "rope",
                                                                 "model.attention.forget_gate": "none"}}]}


def study(**extra) -> StudySpec:
    return validate(StudySpec, {"name": "arms", "base": BASE, "design": ARMS, "seeds": [0], **extra})


def flags(report: dict, kind: str) -> list[dict]:
    return [f for f in report["flags"] if f["kind"] == kind]


def test_a_knob_set_on_two_rows_and_searched_on_neither_is_flagged():
    report = fairness.of_study(study())
    path = "model.attention.kv_shift.logit_normalizer"
    assert [r["knobs"].get(path) for r in report["rows"]] == [16.0, 16.0]
    flag, = [f for f in flags(report, "unsearched_knob") if f["path"] == path]
    assert flag["rows"] == ["FoX (Pro)", "Transformer (Pro)"] and flag["value"] == 16.0
    assert flag["text"] == ("kv_shift.logit_normalizer is set to 16 on FoX (Pro) and Transformer (Pro), searched on "
                            "neither: a recipe tuned for one arm applied to all?")
    assert any("searched on neither" in line for line in fairness.lines(report))


def test_a_knob_set_on_one_row_the_design_s_change_is_listed_not_flagged():
    arms = {"kind": "variants", "variants": [
        {"name": "FoX (Pro)"}, {"name": "FoX (Pro) /4", "set": {"model.attention.kv_shift.logit_normalizer": 4.0}}]}
    base = {**BASE, "model": {**BASE["model"], "attention": {}}}
    report = fairness.of_study(validate(StudySpec, {"name": "one", "base": base, "design": arms, "seeds": [0]}))
    assert report["rows"][1]["knobs"] == {"model.attention.kv_shift.logit_normalizer": 4.0}
    assert report["rows"][0]["knobs"] == {}
    assert not flags(report, "unsearched_knob")


def test_a_searched_knob_is_not_flagged_and_says_over_which_values():
    space = {"model.attention.kv_shift.logit_normalizer": {"choice": [1.0, 16.0]}}
    report = fairness.of_study(study(search={"algorithm": "grid", "space": space}))
    assert not flags(report, "unsearched_knob")
    for row in report["rows"]:
        assert row["searched"] == {"model.attention.kv_shift.logit_normalizer": [1.0, 16.0]}
        assert "model.attention.kv_shift.logit_normalizer" not in row["knobs"]
        assert (row["search_points"], row["search_trials"]) == (2, 2)


def test_a_size_option_is_listed_apart_and_not_flagged():
    """An MLP width set on both rows is the model's size (the table's parameter counts), not a recipe."""
    base = {**BASE, "model": {**BASE["model"], "mlp": {"kind": "swiglu", "hidden_ratio": 3.0, "multiple_of": 16}}}
    report = fairness.of_study(validate(StudySpec, {"name": "w", "base": base, "design": ARMS, "seeds": [0]}))
    assert report["rows"][0]["size_knobs"] == {"model.mlp.hidden_ratio": 3.0, "model.mlp.multiple_of": 16}
    assert not [f for f in report["flags"] if f["path"].startswith("model.mlp.")]


def test_a_train_field_away_from_its_default_counts_the_budget_does_not():
    base = {**BASE, "train": {"tokens": 20000, "batch_size": 8, "warmup_tokens": 2000}}
    report = fairness.of_study(validate(StudySpec, {"name": "t", "base": base, "design": ARMS, "seeds": [0]}))
    assert "train.warmup_tokens" in report["rows"][0]["knobs"]
    assert not {"train.tokens", "train.batch_size"} & set(report["rows"][0]["knobs"])
    assert {f["path"] for f in flags(report, "unsearched_knob")} == {"train.warmup_tokens",
                                                                    "model.attention.kv_shift.logit_normalizer"}


def test_a_choice_at_the_edge_of_its_grid_is_flagged():
    s = study(search={"algorithm": "grid", "space": {"train.lr": {"choice": [0.001, 0.002, 0.004]}},
                      "confirm": {"seeds": [0, 1]}})
    tags = {"confirm_choice": json.dumps({"FoX (Pro)": {"point": "lr=0.004", "values": {"train.lr": 0.004}},
                                          "Transformer (Pro)": {"point": "lr=0.002", "values": {"train.lr": 0.002}}})}
    report = fairness.of_study(s, tags)
    fox, transformer = report["rows"]
    assert fox["choice"] == {"train.lr": 0.004} and fox["choice_from"] == "confirmation"
    assert fox["at_edge"] == ["train.lr"] and transformer["at_edge"] == []
    assert (fox["search_points"], fox["search_trials"], fox["confirm_trials"]) == (3, 3, 2)
    edge, = flags(report, "edge")
    assert edge["row"] == "FoX (Pro)" and "largest value searched" in edge["text"]


def test_the_json_shape():
    report = fairness.of_study(study(search={"space": {"train.lr": {"loguniform": [1e-4, 1e-2]}}, "num_samples": 3}))
    assert set(report) == {"rows", "flags"}
    keys = {"row", "variant", "at", "searched", "search_points", "search_trials", "confirm_trials", "choice",
            "choice_from", "at_edge", "knobs", "size_knobs"}
    assert all(set(r) == keys for r in report["rows"])
    assert all({"kind", "path", "value", "text"} <= set(f) for f in report["flags"])
    assert json.loads(json.dumps(report)) == report
    # Random draws are each row's own: its three, listed.
    assert all(len(r["searched"]["train.lr"]) == 3 for r in report["rows"])


def test_wb_results_prints_it_after_the_table_and_carries_it_in_json_from_the_file_and_the_store(tmp_path, capsys):
    """A tune-then-confirm study tracked through the workbench's own Store (no Ray): the choice as
    the confirmation records it, the report after the table, and the same report from the runs alone."""
    spec = {"name": "arms", "base": BASE, "design": ARMS, "seeds": [0],
            "search": {"algorithm": "grid", "space": {"train.lr": {"choice": [0.001, 0.002, 0.004]}},
                       "confirm": {"seeds": [0]}}}
    path = tmp_path / "arms.yaml"
    path.write_text(yaml.safe_dump(spec))
    s = validate(StudySpec, spec)
    workdir = tmp_path / "w"
    workdir.mkdir()
    create_local_store(workdir)
    store = Store(local_tracking_uri(workdir), "arms", workdir / "mlartifacts")
    parent = store.study_run("arms", "", "test")
    store.describe_study(parent, design_tags(s))
    loss = {("FoX (Pro)", 0.001): 3.2, ("FoX (Pro)", 0.002): 3.1, ("FoX (Pro)", 0.004): 3.0,
            ("Transformer (Pro)", 0.001): 3.3, ("Transformer (Pro)", 0.002): 3.2, ("Transformer (Pro)", 0.004): 3.4}
    for t in expand(s):
        run = store.start_trial(parent, "arms", t, "test")
        value = loss[(t.variant, dict(t.search_point)["train.lr"])]
        store.finish_trial(run, {"val_loss": value, "val_ppl": 2.718 ** value, "train_tokens": 10000})
    runs = store.client.search_runs([store.experiment_id])  # the parent run among them: no search values, left out
    store.describe_study(parent, confirm.choice_tags(s, confirm.best_points(s, runs)))

    def wb(*args) -> str:  # in this process: the store is already open, MLflow already imported
        assert main(["results", str(path), "--workdir", str(workdir), *args]) == 0
        return capsys.readouterr().out

    out = wb()
    assert out.index("fairness") > out.index("val_ppl mean")  # after the table
    assert "FoX (Pro): lr=0.004 is the largest value searched" in out
    assert "kv_shift.logit_normalizer is set to 16 on FoX (Pro) and Transformer (Pro), searched on neither" in out
    fair = json.loads(wb("--format", "json"))["fairness"]
    assert [r["choice"] for r in fair["rows"]] == [{"train.lr": 0.004}, {"train.lr": 0.002}]
    assert {f["kind"] for f in fair["flags"]} == {"unsearched_knob", "edge"}

    # The dashboard's way in: the runs alone give the same rows' choices, knobs and flags.
    parent_tags = store.client.get_run(parent).data.tags
    from_store = fairness.of_runs(runs, parent_tags)
    assert [(r["row"], r["choice"], r["knobs"], r["at_edge"]) for r in from_store["rows"]] == \
        [(r["row"], r["choice"], r["knobs"], r["at_edge"]) for r in fair["rows"]]
    assert [f["text"] for f in from_store["flags"]] == [f["text"] for f in fair["flags"]]

    # The dashboard's study page shows it, beside the table.
    from foxwb.dashboards.site import study_page

    page, _ = study_page(store, "arms")
    section = page[page.index('<section id="fairness">'):]
    assert "searched on neither" in section and "lr=0.004" in section and ">edge<" in section


def test_a_variant_searches_a_knob_of_its_own():
    """search.variants: each arm searches the knob it has (FoX's gate normaliser, the Transformer's
    KV-shift one) beside the shared lr; the rows name the slot, the report lists each row's own
    search, and nothing is flagged."""
    base = {**BASE, "model": {**BASE["model"], "attention": {}}}
    search = {"algorithm": "grid", "space": {"train.lr": {"choice": [1e-3, 3e-3]}},
              "variants": {"FoX (Pro)": {"model.attention.forget_gate.logit_normalizer": {"choice": [1.0, 16.0]}},
                           "Transformer (Pro)": {"model.attention.kv_shift.logit_normalizer": {"choice": [1.0, 16.0]}}}}
    spec = validate(StudySpec, {"name": "own", "base": base, "design": ARMS, "seeds": [0], "search": search})
    rows = [t.row for t in expand(spec)]
    assert len(rows) == 8 and "FoX (Pro) [lr=0.001, forget_gate.logit_normalizer=16]" in rows
    assert "Transformer (Pro) [lr=0.003, kv_shift.logit_normalizer=1]" in rows
    fox = next(t for t in expand(spec) if t.row == "FoX (Pro) [lr=0.001, forget_gate.logit_normalizer=16]")
    assert fox.spec.model.attention.forget_gate.logit_normalizer == 16.0
    report = fairness.of_study(spec)
    searched = {r["row"].split(" [")[0]: r["searched"] for r in report["rows"]}
    assert searched["FoX (Pro)"] == {"train.lr": [1e-3, 3e-3], "model.attention.forget_gate.logit_normalizer": [1.0, 16.0]}
    assert searched["Transformer (Pro)"] == {"train.lr": [1e-3, 3e-3], "model.attention.kv_shift.logit_normalizer": [1.0, 16.0]}
    assert not flags(report, "unsearched_knob")


def test_a_variants_search_names_variants_of_the_design():
    import pytest

    from foxwb.workbench.spec.errors import SpecError

    with pytest.raises(SpecError, match=r"search.variants: 'FoX' is not a variant of the design; its variants: 'FoX \(Pro\)'"):
        validate(StudySpec, {"name": "x", "base": BASE, "design": ARMS, "seeds": [0],
                             "search": {"variants": {"FoX": {"train.lr": {"choice": [1e-3]}}}}})
    with pytest.raises(SpecError, match="nothing to search"):
        validate(StudySpec, {"name": "x", "base": BASE, "design": ARMS, "seeds": [0], "search": {"space": {}}})

"""Seeds by plan (docs/statistics.md, "Seeds by plan"): `wb run` runs the first look's seeds,
judges the claims, and adds seeds only while a claim is open; `wb results` gives the same verdicts
from the store; the plan's boundary is the one simulation calibrates."""
import json

import numpy as np
import pytest
import yaml

from foxwb.workbench.analysis import sequential
from foxwb.workbench.spec.errors import SpecError, validate
from foxwb.workbench.spec.study import SeedPlan, StudySpec, expand
from tests.workbench.run.test_run import MINI_BASE, trial_runs, wb

PLAN = SeedPlan(start=3, step=2, max=9)
ABLATION = {"kind": "ablation", "changes": [{"name": "no gate", "set": {"model.attention.forget_gate": "none"}}]}


def test_the_plan_reads_as_seeds_and_is_refused_where_it_cannot_run():
    study = validate(StudySpec, {"name": "p", "base": MINI_BASE, "seeds": {"start": 2, "step": 1, "max": 4},
                                 "design": ABLATION})
    assert study.seeds == [0, 1, 2, 3] and study.seed_plan.looks == [2, 3, 4]
    assert validate(StudySpec, study.model_dump(mode="json")) == study  # a dumped plan reads back as itself
    assert {t.seed for t in expand(study)} == {0, 1, 2, 3}
    with pytest.raises(SpecError, match="start"):
        validate(StudySpec, {"name": "p", "base": MINI_BASE, "seeds": {"start": 1, "step": 1, "max": 4},
                             "design": ABLATION})
    with pytest.raises(SpecError, match="a plan .* runs a design without a search"):
        validate(StudySpec, {"name": "p", "base": MINI_BASE, "seeds": {"start": 2, "step": 1, "max": 4},
                             "design": ABLATION,
                             "search": {"space": {"train.lr": {"choice": [1e-3, 3e-3]}}}})


def test_a_claim_stays_open_until_a_look_decides_it_and_is_final_after():
    """Synthetic losses: 'clear' is decided at the first look, 'slow' (a small effect in noise) only
    with more seeds; a look whose seeds have not run leaves a claim open, not decided."""
    rng = np.random.default_rng(3)
    base = {s: 3.0 + rng.normal(0, 0.05) for s in range(9)}
    values = {"base": base, "clear": {s: v + 0.5 + rng.normal(0, 0.001) for s, v in base.items()},
              "slow": {s: v + 0.02 + rng.normal(0, 0.01) for s, v in base.items()}}
    claims = [("clear", "clear", "base", 0.01), ("slow", "slow", "base", 0.001)]
    clear, slow = sequential.judge(claims, values, PLAN)
    assert clear["verdict"] == "worse" and clear["final"] and clear["look"] == 3
    assert slow["final"] and slow["look"] > 3 and slow["n_seeds"] == slow["look"]
    level = sequential.nominal_alpha(PLAN)
    assert clear["alpha_look"] == level < 0.05
    # Only the first look has run: 'slow' is open, not yet inconclusive for good.
    first = {k: {s: v for s, v in d.items() if s < 3} for k, d in values.items()}
    _, early = sequential.judge(claims, first, PLAN)
    assert not early["final"] and early["look"] == 3 and early["verdict"] == "open"
    # A look half run (seed 3 of the look at 5, on both rows; seed 4 not yet) is not judged: the
    # claim stays at the look of 3, open; at the plan's last look, half run, nothing is final.
    partial = {k: {s: v for s, v in d.items() if s < 4} for k, d in values.items()}
    _, half = sequential.judge(claims, partial, PLAN)
    assert half["look"] == 3 and half["n_seeds"] == 3 and not half["final"]
    noisy = {"base": base, "noisy": {s: v + rng.normal(0, 0.5) for s, v in base.items()}}
    never = [("never", "noisy", "base", 0.0001)]  # a claim no look decides
    (short,) = sequential.judge(never, {k: {s: v for s, v in d.items() if s < 8} for k, d in noisy.items()}, PLAN)
    assert short["look"] == 7 and not short["final"] and short["verdict"] == "open"
    (whole,) = sequential.judge(never, noisy, PLAN)
    assert whole["look"] == 9 and whole["final"] and whole["verdict"] == "inconclusive"


def test_the_dry_run_says_where_a_plan_stands():
    """The plan's state in words, and each seed's: its looks run, the next, the later, the unrun."""
    from foxwb.workbench.cli.seed_plan import standing_line, status_of

    study = validate(StudySpec, {"name": "p", "base": MINI_BASE, "seeds": {"start": 3, "step": 2, "max": 9},
                                 "design": ABLATION})
    plan = study.seed_plan
    assert "no look has run" in standing_line(study, None) and status_of(plan, 2, None) is None
    assert "its first look has not finished" in standing_line(study, (0, False))
    assert status_of(plan, 3, None) == "to run if a claim is still open after the look at 3 seeds"
    assert "the next look (seeds 0-4)" in standing_line(study, (3, False))
    assert status_of(plan, 4, (3, False)) == "to run: the plan's next look" and status_of(plan, 1, (3, False)) is None
    assert status_of(plan, 6, (3, False)) == "to run if a claim is still open after the look at 5 seeds"
    assert "it has ended" in standing_line(study, (5, True)) and "ended" in status_of(plan, 7, (5, True))
    assert "ran to its last look" in standing_line(study, (9, True))


def test_the_boundary_holds_alpha_over_the_looks_where_testing_at_alpha_does_not():
    """The plan's own calibration, checked on fresh null studies (a different random stream): the
    chance of any rejection over the looks at alpha' is alpha (within the simulation's error), at
    alpha itself it is far above."""
    level = sequential.nominal_alpha(PLAN)
    rng = np.random.default_rng(99)
    d = rng.standard_normal((4000, PLAN.max))
    hits = {"plan": 0, "naive": 0}
    for row in d:
        ps = [sequential.paired_look({s: row[s] for s in range(n)}, {s: 0.0 for s in range(n)}, 1.0, level)["p"]
              for n in PLAN.looks]
        hits["plan"] += min(ps) < level
        hits["naive"] += min(ps) < 0.05
    assert abs(hits["plan"] / 4000 - 0.05) < 0.012 and hits["naive"] / 4000 > 0.08, hits


def test_wb_run_stops_once_the_claims_are_decided(tmp_path):
    """A tiny study of two claims: one true difference (a learning rate too small to learn), one
    null (the same training, validated more often: the very same test losses). The null is decided
    at the first look, the difference at the first or second (at 2 seeds a paired t has one degree
    of freedom); the plan stops there, short of its 4 seeds; `wb results` agrees."""
    base = {**MINI_BASE, "train": {**MINI_BASE["train"], "tokens": 8192, "eval_every_tokens": 4096}}
    study = {"name": "plan", "base": base, "seeds": {"start": 2, "step": 1, "max": 4},
             "design": {"kind": "ablation", "base_name": "FoX (Pro)", "changes": [
                 {"name": "lr 1e-6", "set": {"train.lr": 1e-6}},
                 {"name": "validated twice", "set": {"train.eval_batches": 2}}]},
             "claims": [{"name": "too small an lr is worse", "compare": ["lr 1e-6", "FoX (Pro)"], "sesoi": 0.01},
                        {"name": "validating more changes nothing", "compare": ["validated twice", "FoX (Pro)"],
                         "sesoi": 0.01}]}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(study))
    dry = wb("run", path, "--workdir", tmp_path / "w", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "seeds by plan: looks at 2, 3, 4 seeds" in dry.stdout and "cost: 6 trials" in dry.stdout
    proc = wb("run", path, "--workdir", tmp_path / "w", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert "claim 'validating more changes nothing' (validated twice vs FoX (Pro)): equivalent at 2 seeds" in proc.stdout
    look = next(n for n in (2, 3) if f"claim 'too small an lr is worse' (lr 1e-6 vs FoX (Pro)): worse at {n} seeds" in proc.stdout)
    assert f"every claim decided by the look at {look} seeds; the plan stops" in proc.stdout
    runs = trial_runs(tmp_path / "w", "plan")[1]
    assert sorted({int(r.data.tags["seed"]) for r in runs}) == list(range(look)) and len(runs) == 3 * look
    out = wb("results", path, "--workdir", tmp_path / "w", "--format", "json")
    assert out.returncode == 0, out.stderr[-2000:]
    claims = {c["name"]: c for c in json.loads(out.stdout)["claims"]}
    assert claims["too small an lr is worse"]["verdict"] == "worse"
    assert claims["validating more changes nothing"]["verdict"] == "equivalent"
    assert claims["too small an lr is worse"]["look"] == look and claims["validating more changes nothing"]["look"] == 2
    assert all(c["final"] and c["interval"] == "seeds (sequential plan)" for c in claims.values())
    text = wb("results", "plan", "--workdir", tmp_path / "w")  # by name: the plan from the parent run's tag
    assert text.returncode == 0 and "seeds by plan: each look tests at" in text.stdout, text.stderr[-2000:]


def test_a_confirmation_by_plan_adds_confirmation_seeds_until_the_claims_are_decided(tmp_path):
    """Tune, then confirm by plan: the search runs once (seed 0) and chooses each variant's lr on the
    select split (val_loss); the confirmation runs the choices on fresh seeds (1, 2: after the
    search's), judges the claims on the test split and adds seeds while one is open. A true
    difference (one step of training) and a null (validated more often: the same training) are both
    decided by the second look at the latest; the same study without claims gets default claims."""
    base = {**MINI_BASE, "train": {**MINI_BASE["train"], "tokens": 8192, "eval_every_tokens": 4096}}
    study = {"name": "cplan", "base": base, "seeds": [0],
             "design": {"kind": "ablation", "base_name": "FoX (Pro)", "changes": [
                 {"name": "one step", "set": {"train.tokens": 512}},
                 {"name": "validated more often", "set": {"train.eval_every_tokens": 2048}}]},
             "search": {"algorithm": "grid", "space": {"train.lr": {"choice": [0.003, 0.01]}},
                        "confirm": {"seeds": {"start": 2, "step": 1, "max": 4}}},
             "claims": [{"name": "one step is worse", "compare": ["one step", "FoX (Pro)"], "sesoi": 0.01},
                        {"name": "validating more changes nothing", "compare": ["validated more often", "FoX (Pro)"],
                         "sesoi": 0.01}]}
    spec = validate(StudySpec, study)
    assert spec.search.confirm.seeds == [1, 2, 3, 4] and spec.plan().seeds_at(2) == [1, 2]
    path = tmp_path / "cplan.yaml"
    path.write_text(yaml.safe_dump(study))
    dry = wb("run", path, "--workdir", tmp_path / "w", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "seeds by plan (the confirmation's): looks at 2, 3, 4 seeds (seeds 1-2 first, at most 1-4)" in dry.stdout
    assert "cost: 12 trials" in dry.stdout and "at most 18" in dry.stdout, dry.stdout
    proc = wb("run", path, "--workdir", tmp_path / "w", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert "claim 'validating more changes nothing' (validated more often vs FoX (Pro)): equivalent at 2 seeds" in proc.stdout
    look = next(n for n in (2, 3) if f"claim 'one step is worse' (one step vs FoX (Pro)): worse at {n} seeds" in proc.stdout)
    client, runs = trial_runs(tmp_path / "w", "cplan")
    confirmation = [r for r in runs if r.data.tags.get("stage") == "confirm"]
    assert sorted({int(r.data.tags["seed"]) for r in confirmation}) == list(range(1, look + 1))
    assert len(confirmation) == 3 * look and len(runs) == 6 + 3 * look
    # The choice read the select split: its mean is the chosen point's search val_loss.
    parent = client.search_runs([runs[0].info.experiment_id], "tags.wb_kind = 'study'")[0]
    assert parent.data.tags["confirm_metric"] == "val_loss"
    choice = json.loads(parent.data.tags["confirm_choice"])["FoX (Pro)"]
    searched = [r for r in runs if r.data.tags["variant"] == "FoX (Pro)" and r.data.tags.get("stage") != "confirm"]
    assert min(r.data.metrics["val_loss"] for r in searched) == pytest.approx(choice["mean"])
    out = wb("results", path, "--workdir", tmp_path / "w", "--format", "json")
    assert out.returncode == 0, out.stderr[-2000:]
    about = json.loads(out.stdout)
    claims = {c["name"]: c for c in about["claims"]}
    assert claims["one step is worse"]["verdict"] == "worse" and claims["one step is worse"]["look"] == look
    assert claims["validating more changes nothing"]["verdict"] == "equivalent"
    assert all(c["metric"] == "test_loss" and c["seeds_a"] == list(range(1, look + 1)) for c in claims.values())
    assert all(c["ci_level"] == pytest.approx(1 - c["alpha_look"]) for c in claims.values())
    # Without claims: one default claim per row against the base, at the default sesoi, stated.
    del study["claims"]
    path.write_text(yaml.safe_dump(study))
    out = wb("results", path, "--workdir", tmp_path / "w", "--format", "json")
    assert out.returncode == 0, out.stderr[-2000:]
    default = json.loads(out.stdout)["claims"]
    assert {(c["a"], c["b"]) for c in default} == {("one step", "FoX (Pro)"), ("validated more often", "FoX (Pro)")}
    assert all(c["default"] and c["sesoi"] == 0.01 for c in default)
    by_name = wb("results", "cplan", "--workdir", tmp_path / "w", "--format", "json")  # the plan from the parent run's tags
    assert by_name.returncode == 0, by_name.stderr[-2000:]
    assert {c["name"]: (c["verdict"], c["look"], c["interval"]) for c in json.loads(by_name.stdout)["claims"]} == \
        {n: (c["verdict"], c["look"], "seeds (sequential plan)") for n, c in claims.items()}
    # The plan changed after its looks ran (seeds added after looking): refused, by the dry run too.
    study["search"]["confirm"]["seeds"]["max"] = 6
    path.write_text(yaml.safe_dump(study))
    dry = wb("run", path, "--workdir", tmp_path / "w", "--dry-run")
    assert dry.returncode == 2 and "REFUSED: seeds: study 'cplan' ran its looks under the plan" in dry.stdout, dry.stdout
    again = wb("run", path, "--workdir", tmp_path / "w")
    assert again.returncode != 0 and "ran its looks under the plan" in again.stderr + again.stdout, again.stderr[-2000:]
    assert len(trial_runs(tmp_path / "w", "cplan")[1]) == 6 + 3 * look

"""Tune, then confirm (`search.confirm`) end to end on real Ray Tune and MLflow: the search runs, each
variant's best point is chosen from its finished search trials and recorded on the parent run,
the confirmation trials run it on their seeds, the table compares them, a driver killed between
the stages resumes into the confirmation, a rerun adds nothing; with a grid, random and Optuna
search, with and without ASHA, the choice is made among the points that ran to the end."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.workbench.drivers import kill_session
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]

MINI_BASE = {
    "model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
              "mlp": {"kind": "swiglu", "intermediate_size": 64}},
    "data": {"kind": "builtin", "context": 64, "max_bytes": 600000},
    "train": {"tokens": 16384, "batch_size": 8, "eval_batches": 1, "cpu_threads": 1},
    "eval": {"sequences": 4, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024},
}
LRS = [0.0003, 0.01]


def write_study(tmp_path, search=None, **extra):
    spec = {"name": "tuned", "base": MINI_BASE, "seeds": [0],
            "design": {"kind": "variants", "compare_to": "FoX (Pro)", "variants": [
                {"name": "FoX (Pro)", "set": {"model.attention.forget_gate": "data_dependent"}},
                {"name": "no gate", "set": {"model.attention.forget_gate": "none"}}]},
            "search": search if search is not None else
            {"algorithm": "grid", "space": {"train.lr": {"choice": LRS}}, "confirm": {"seeds": [0, 1], "metric": "val_loss"}},
            "resources": {"cpu": 1}, **extra}
    path = tmp_path / "tuned.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path




def store(workdir):
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("tuned")
    trials = client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial'")
    parent = client.search_runs([exp.experiment_id], "tags.wb_kind = 'study'")[0]
    return trials, parent


def test_tune_then_confirm_chooses_from_the_search_runs_it_resumes_between_stages(tmp_path):
    study, workdir = write_study(tmp_path), tmp_path / "w"
    # The first driver is killed as soon as it has chosen: between the two stages.
    proc = subprocess.Popen([sys.executable, "-m", "foxwb.workbench.cli.main", "run", str(study), "--workdir", str(workdir),
                             "--max-concurrent", "2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True)
    chose = []
    for line in proc.stdout:
        if line.startswith("confirm  "):
            chose.append(line)
            if len(chose) == 2:
                kill_session(proc)
                break
    proc.wait(timeout=60)
    assert len(chose) == 2, "the search stage never reached its choice"
    trials, _ = store(workdir)
    search = [r for r in trials if r.info.status == "FINISHED" and r.data.tags.get("stage") != "confirm"]
    assert len(search) == 4  # 2 variants x 2 learning rates x seed 0

    again = wb("run", study, "--workdir", workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    trials, parent = store(workdir)
    # The choice: each variant's learning rate of lowest val_loss among its search runs, by hand.
    by_hand = {}
    for r in search:
        v, lr, loss = r.data.tags["variant"], float(r.data.params["train.lr"]), r.data.metrics["val_loss"]
        if v not in by_hand or loss < by_hand[v][1]:
            by_hand[v] = (lr, loss)
    choice = json.loads(parent.data.tags["confirm_choice"])
    assert {v: c["values"]["train.lr"] for v, c in choice.items()} == {v: lr for v, (lr, _) in by_hand.items()}
    assert json.loads(parent.data.tags["confirm_seeds"]) == [0, 1] and parent.data.tags["confirm_metric"] == "val_loss"
    # The confirmation: seed 1 at the chosen point for each variant (seed 0 there is a search trial
    # already run: the same spec hash, not run twice); every spec hash FINISHED once.
    confirm = [r for r in trials if r.data.tags.get("stage") == "confirm" and r.info.status == "FINISHED"]
    assert sorted((r.data.tags["variant"], r.data.tags["seed"], float(r.data.params["train.lr"])) for r in confirm) == \
        sorted((v, "1", lr) for v, (lr, _) in by_hand.items())
    finished = [r.data.tags["spec_hash"] for r in trials if r.info.status == "FINISHED"]
    assert len(finished) == len(set(finished)) == 6

    assert "6 trials; 4 trials were already done; 2 finished now" in again.stdout, again.stdout[-2000:]
    third = wb("run", study, "--workdir", workdir)
    assert third.returncode == 0 and "6 trials; 6 trials were already done; 0 finished now" in third.stdout, \
        third.stdout[-2000:]
    # The dry run lists the confirmation trials once the search has finished, with their states.
    dry = wb("run", study, "--workdir", workdir, "--dry-run")
    listed = [line.split() for line in dry.stdout.splitlines() if line.startswith("  ") and "seed" in line]
    assert sorted((line[-2], line[-1]) for line in listed) == sorted(
        [(r.data.tags["spec_hash"], "done") for r in confirm] +
        [(r.data.tags["spec_hash"], "done") for r in search
         if r.data.tags["seed"] == "0" and float(r.data.params["train.lr"]) == by_hand[r.data.tags["variant"]][0]])
    assert len(store(workdir)[0]) == len(trials)

    # The table's confirmation rows: each variant at its chosen point on seeds 0 and 1, compared
    # with the base's, against the store by hand.
    out = wb("results", study, "--workdir", workdir, "--format", "json", "--metric", "val_loss")
    assert out.returncode == 0, out.stderr[-2000:]
    listed = json.loads(out.stdout)["rows"]
    rows = {r["variant"]: r for r in listed if r["search_point"] == ""}
    assert {r["stage"] for r in listed if r["search_point"] == ""} == {"confirmation"}
    assert {r["stage"] for r in listed if r["search_point"] != ""} == {"search"}
    values = {v: {} for v in by_hand}
    for r in trials:
        v = r.data.tags["variant"]
        if r.info.status == "FINISHED" and float(r.data.params["train.lr"]) == by_hand[v][0]:
            values[v][int(r.data.tags["seed"])] = r.data.metrics["val_loss"]
    for v, seeds in values.items():
        assert rows[v]["n_seeds"] == 2 and rows[v]["mean"] == pytest.approx(sum(seeds.values()) / 2)
        assert rows[v]["chosen"].startswith("lr=") and float(rows[v]["chosen"][3:]) == by_hand[v][0]
    delta = [values["no gate"][s] - values["FoX (Pro)"][s] for s in (0, 1)]
    assert rows["no gate"]["paired_delta"] == pytest.approx(sum(delta) / 2)
    assert rows["FoX (Pro)"]["comparison"] == "base" and rows["no gate"]["base_row"] == "FoX (Pro)"
    # As text, the confirmation rows are the table; the search rows it chose from stand apart below it.
    text = wb("results", study, "--workdir", workdir, "--metric", "val_loss").stdout.splitlines()
    beside = next(i for i, line in enumerate(text) if line.startswith("search, beside the table"))
    table = text[next(i for i, line in enumerate(text) if line.startswith("row ")) + 1 : beside - 1]
    assert sorted(line.split("  ")[0] for line in table) == sorted(by_hand)
    searched = [line for line in text[beside + 2 :] if line.startswith(tuple(by_hand))]
    assert searched and all("[lr=" in line.split("  ")[0] for line in searched) and "chosen" not in text[beside + 1]
    # Two studies side by side (here the study and itself) compare the confirmation rows too, as
    # each study's table reads them: a tuned study shares them with another study's plain rows.
    both = wb("results", "tuned", "tuned", "--workdir", workdir, "--metric", "val_loss", "--format", "json")
    assert both.returncode == 0, both.stderr[-2000:]
    side = {r["row"]: r for r in json.loads(both.stdout)["rows"]}
    for v, seeds in values.items():
        assert side[v]["a_n_seeds"] == side[v]["b_n_seeds"] == 2
        assert side[v]["a_mean"] == pytest.approx(sum(seeds.values()) / 2) and side[v]["difference"] == 0


@pytest.mark.parametrize("change,expected", [
    ({"confirm": {"seeds": [0]}, "search": None}, "confirm: a confirmation stage belongs to a search"),
    ({"search": {"space": {"train.lr": {"choice": LRS}}, "confirm": {"seeds": [0], "metric": "accuracy"}}},
     "search.confirm.metric: Input should be 'val_loss' or 'val_ppl'"),
    ({"search": {"space": {"train.lr": {"choice": LRS}}, "confirm": {"metric": "val_loss"}}},
     "search.confirm.seeds: Field required"),
])
def test_a_bad_confirmation_gets_one_clear_error_and_writes_nothing(tmp_path, change, expected):
    path = write_study(tmp_path)
    spec = yaml.safe_load(path.read_text())
    spec.update(change)
    spec = {k: v for k, v in spec.items() if v is not None}
    path.write_text(yaml.safe_dump(spec))
    proc = wb("run", path, "--workdir", tmp_path / "w")
    assert proc.returncode == 2 and expected in proc.stderr, proc.stderr
    assert not (tmp_path / "w").exists()


ASHA = {"grace_tokens": 4096, "reduction_factor": 2}


@pytest.mark.parametrize("search,stops", [
    # Adaptive draws and early stops.
    ({"algorithm": "optuna", "num_samples": 3, "space": {"train.lr": {"loguniform": [0.0001, 0.02]}}, "asha": ASHA}, None),
    # The grid in this order (one trial at a time): the best first, so that ASHA stops the others.
    ({"algorithm": "grid", "space": {"train.lr": {"choice": [0.02, 0.0001, 0.001]}}, "asha": ASHA}, True),
    ({"algorithm": "optuna", "num_samples": 2, "space": {"train.lr": {"loguniform": [0.0001, 0.02]}}}, False),
], ids=["optuna-asha", "grid-asha", "optuna"])
def test_a_search_confirms_its_best_finished_point(tmp_path, search, stops):
    """Optuna with and without ASHA, a grid with it: the choice is among the points that ran to
    the end, and the confirmation trial runs it (random search with ASHA:
    test_a_random_search_with_asha_confirms_each_variants_best_finished_draw)."""
    base = {**MINI_BASE, "train": {**MINI_BASE["train"], "eval_every_tokens": 4096}}
    spec = yaml.safe_load(write_study(tmp_path, search={**search, "confirm": {"seeds": [1]}}).read_text())
    spec["base"], spec["design"]["variants"] = base, spec["design"]["variants"][:1]
    path = tmp_path / "tuned.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = wb("run", path, "--workdir", tmp_path / "w", "--max-concurrent", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials, parent = store(tmp_path / "w")
    search_runs = [r for r in trials if r.data.tags.get("stage") != "confirm"]
    assert len(search_runs) == search.get("num_samples", 3)
    ran_out = [r for r in search_runs if r.info.status == "FINISHED" and r.data.tags.get("stopped_early") != "true"]
    if stops is not None:
        assert (len(ran_out) < len(search_runs)) == stops, [r.data.tags["search_point"] for r in ran_out]
    best = min(ran_out, key=lambda r: r.data.metrics["val_loss"])
    choice = json.loads(parent.data.tags["confirm_choice"])["FoX (Pro)"]
    assert choice["values"]["train.lr"] == float(best.data.params["train.lr"])
    (confirm,) = [r for r in trials if r.data.tags.get("stage") == "confirm"]
    assert confirm.info.status == "FINISHED" and confirm.data.tags["seed"] == "1"
    assert float(confirm.data.params["train.lr"]) == choice["values"]["train.lr"]
    # The dry run counts the search done as `wb run` does (a trial ASHA stopped is done) and lists
    # the confirmation it chose.
    dry = wb("run", path, "--workdir", tmp_path / "w", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    n = 1 if search["algorithm"] == "optuna" else 3
    assert f"study 'tuned': {n} trial{'s' if n > 1 else ''}, {n} done" in dry.stdout, dry.stdout
    assert "then the confirmation, at each variant's best search point" in dry.stdout and "chosen once" not in dry.stdout
    if search["algorithm"] == "optuna":
        assert f"{search['num_samples']} of {search['num_samples']} optuna draws finished" in dry.stdout
    if stops:
        assert "done (stopped early by ASHA)" in dry.stdout
    if search["algorithm"] == "grid":  # a choice at the end of the values searched is noted
        values, lr = search["space"]["train.lr"]["choice"], choice["values"]["train.lr"]
        edge = lr in (min(values), max(values))
        assert (f"lr={lr:g} is the {'largest' if lr == max(values) else 'smallest'} value searched" in proc.stdout) == edge
        assert (f"note: FoX (Pro): lr={lr:g} is the" in dry.stdout) == edge


RANDOM_ASHA = {"algorithm": "random", "num_samples": 3, "space": {"train.lr": {"loguniform": [0.0001, 0.03]}},
               "asha": ASHA, "confirm": {"seeds": [0, 1], "metric": "val_loss"}}


def run_random_asha(folder: Path):
    """studies/lr_search.yaml's kind of search, tiny: two variants, 3 random draws each with ASHA
    (validation every 4096 of 16384 tokens, one trial at a time so that its stops are the same on
    every run), then each variant's best on seeds 0 and 1. Returns (workdir, completed process,
    seconds); tests/conftest.py's random_search_confirmed runs it once for the tests of the store
    and of the dashboard."""
    import time

    base = {**MINI_BASE, "train": {**MINI_BASE["train"], "eval_every_tokens": 4096}}
    path = write_study(folder, search=RANDOM_ASHA, base=base)
    start = time.time()
    proc = wb("run", path, "--workdir", folder / "w", "--max-concurrent", "1")
    return folder / "w", proc, time.time() - start


def test_a_random_search_with_asha_confirms_each_variants_best_finished_draw(random_search_confirmed):
    """The shipped lr_search's way: random draws per variant, some stopped early by ASHA; each
    variant's choice is its best draw among those that ran to the end, and its confirmation runs
    are that draw on seeds 0 (the search trial itself, not run again) and 1."""
    workdir, proc, _ = random_search_confirmed
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials, parent = store(workdir)
    search = [r for r in trials if r.data.tags.get("stage") != "confirm"]
    assert all(r.info.status == "FINISHED" for r in trials) and len(search) == 6
    stopped = [r for r in search if r.data.tags.get("stopped_early") == "true"]
    assert stopped, "ASHA stopped no trial: the test no longer tests that the choice leaves them out"
    choice = json.loads(parent.data.tags["confirm_choice"])
    for variant in ("FoX (Pro)", "no gate"):
        mine = [r for r in search if r.data.tags["variant"] == variant]
        assert len({r.data.params["train.lr"] for r in mine}) == 3  # the variant's own draws
        best = min((r for r in mine if r not in stopped), key=lambda r: r.data.metrics["val_loss"])
        lr = float(best.data.params["train.lr"])
        assert choice[variant]["values"]["train.lr"] == lr and choice[variant]["n_seeds"] == 1
        assert choice[variant]["mean"] == pytest.approx(best.data.metrics["val_loss"])
        confirmed = [r for r in trials if r.data.tags["variant"] == variant and r.data.tags.get("stage") == "confirm"]
        assert [(r.data.tags["seed"], float(r.data.params["train.lr"])) for r in confirmed] == [("1", lr)]
    hashes = [r.data.tags["spec_hash"] for r in trials]
    assert len(hashes) == len(set(hashes)) == 8


def test_the_power_analysis_of_a_confirmed_study_uses_the_confirmations_rows_and_seeds(random_search_confirmed):
    """`--dry-run --effect`: the confirmation row (seeds 0 and 1) is listed once, with the
    confirmation's two seeds' power; the search rows are not (one seed each, and the chosen
    point's row holds the confirmation's own trials)."""
    workdir, proc, _ = random_search_confirmed
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = next(workdir.parent.glob("*.yaml"))
    out = wb("run", study, "--workdir", workdir, "--dry-run", "--effect", "0.05")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    table = lines[next(i for i, l in enumerate(lines) if l.startswith("seeds to detect")) + 1:]
    rows = [l for l in table[1:] if not l.startswith("power now")]
    chosen = json.loads(store(workdir)[1].data.tags["confirm_choice"])["no gate"]["point"]
    # The variant's confirmation row only: not its search points ([lr=...]), the chosen one included.
    assert [l.split("  ")[0] for l in rows] == ["no gate"], rows
    assert f"no gate [{chosen}]" in out.stdout  # (the chosen point is a search row of the dry-run's list)
    assert all(l.split()[-5] == "2" for l in rows)  # pilot seeds: paired over seeds 0 and 1
    assert any(l.startswith("power now: with the confirmation's 2 seeds") for l in table)


def test_a_search_point_that_diverges_is_left_out_of_the_choice_not_waited_for(tmp_path):
    """A learning rate whose loss becomes NaN fails on every run: the confirmation goes on with
    the finished points (here the confirmation seed is the search's, so it adds no trial)."""
    study = write_study(tmp_path, search={"algorithm": "grid", "space": {"train.lr": {"choice": [0.003, 1e30]}},
                                          "confirm": {"seeds": [0], "metric": "val_loss"}},
                        design={"kind": "variants", "variants": [{"name": "FoX (Pro)", "set": {}}]})
    workdir = tmp_path / "w"
    proc = wb("run", study, "--workdir", workdir)
    assert proc.returncode == 1, proc.stderr[-3000:]  # a trial failed: the exit status says so
    out = proc.stdout + proc.stderr
    assert "1 search trial did not finish (FoX (Pro) [lr=1e+30])" in out, out[-3000:]
    assert "confirm  FoX (Pro): lr=0.003" in out, out[-3000:]
    trials, parent = store(workdir)
    assert sorted(r.info.status for r in trials) == ["FAILED", "FINISHED"]
    assert json.loads(parent.data.tags["confirm_choice"])["FoX (Pro)"]["values"] == {"train.lr": 0.003}


def test_a_choice_at_the_end_of_three_or_more_values_is_noted(tmp_path):
    """A chosen value that is the smallest or largest of three or more searched: the best may lie
    beyond; inside the values, or a field of two values (always at an end), nothing is said."""
    from foxwb.workbench.run.confirm import Choice, edge_note
    from foxwb.workbench.spec.errors import validate
    from foxwb.workbench.spec.study import StudySpec

    path = write_study(tmp_path, search={"algorithm": "grid", "confirm": {"seeds": [1]}, "space": {
        "train.lr": {"choice": [0.001, 0.004, 0.002]}, "train.batch_size": {"choice": [8, 16]}}})
    study = validate(StudySpec, yaml.safe_load(path.read_text()))

    def note(lr, batch=8):
        return edge_note(study, Choice("v", (("train.lr", lr), ("train.batch_size", batch)), "", 3.0, 1))

    assert note(0.004) == "lr=0.004 is the largest value searched: the best may lie beyond it"
    assert note(0.001) == "lr=0.001 is the smallest value searched: the best may lie beyond it"
    assert note(0.002) == "" and note(0.002, 16) == ""

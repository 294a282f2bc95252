"""`wb eval` on a trained trial's folder: the shipped task, its per-item results kept with the trial."""
import json
import shutil

import numpy as np
import pytest

from tests.cli import wb

LIMIT = 12


@pytest.fixture(scope="module")
def trial(tiny_trial, tmp_path_factory):
    """studies/trial_tiny.yaml's trial (the session's `tiny_trial`: its final weights kept, as every
    trial keeps them), copied so that `wb eval` writes beside a copy of its own; and the variables
    `wb eval` runs with (the task cache in a temporary folder)."""
    trained, proc, _ = tiny_trial
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = tmp_path_factory.mktemp("eval")
    shutil.copytree(trained, folder / "t")
    return folder / "t", {"WB_EVAL_CACHE": str(folder / "cache")}


def test_eval_on_the_shipped_task_keeps_its_items_with_the_trial(trial):
    out, env = trial
    proc = wb("eval", out, "--task", "wb_next_line", "--limit", LIMIT, set_env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wb_next_line: acc " in proc.stdout and f"on {LIMIT} items" in proc.stdout
    records = [json.loads(line) for line in (out / "eval" / "wb_next_line.jsonl").read_text().splitlines()]
    summary = json.loads((out / "eval" / "wb_next_line.json").read_text())
    assert len(records) == summary["items"] == LIMIT < summary["items_in_task"]
    assert sorted(r["doc_id"] for r in records) == list(range(LIMIT))
    for r in records:
        assert len(r["loglikelihoods"]) == 4 and all(ll < 0 for ll in r["loglikelihoods"])
        assert r["choice"] == int(np.argmax(r["loglikelihoods"]))
        assert r["correct"] == int(r["choice"] == r["target"])
    acc = summary["metrics"]["acc"]
    assert 0 <= acc <= 1 and acc == pytest.approx(sum(r["correct"] for r in records) / LIMIT)
    assert summary["metrics"]["acc_stderr"] > 0 and summary["spec_hash"] == json.loads((out / "result.json").read_text())["spec_hash"]
    assert sorted(p.name for p in (out / "eval").iterdir()) == ["wb_next_line.json", "wb_next_line.jsonl"]  # no temporary left
    # Evaluated again at another --limit: the files are replaced, and it says so.
    again = wb("eval", out, "--task", "wb_next_line", "--limit", 3, set_env=env, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"wb_next_line: replacing its evaluation at --limit {LIMIT} with this one at --limit 3" in again.stderr
    assert json.loads((out / "eval" / "wb_next_line.json").read_text())["items"] == 3


def test_a_folder_that_is_not_a_finished_trial_is_refused(trial, tmp_path):
    _, env = trial
    proc = wb("eval", tmp_path, "--task", "wb_next_line", set_env=env)
    assert proc.returncode == 2 and "not a finished trial" in proc.stderr and "result.json" in proc.stderr


def test_a_task_name_typo_gets_the_shipped_task_among_close_names(trial):
    out, env = trial
    proc = wb("eval", out, "--task", "wb_next_lin", set_env=env, timeout=600)
    assert proc.returncode == 2 and "--task 'wb_next_lin'" in proc.stderr and "close: wb_next_line" in proc.stderr

"""`wb eval` on a trained trial's folder: the shipped task, its per-item results kept with the trial."""
import json
import os

import numpy as np
import pytest
import yaml

from tests.cli import ROOT, wb

LIMIT = 12


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    """A tiny trial trained once (one thread, ~40k tokens; its checkpoint at its last step holds
    its final weights), and the environment `wb eval` runs in (the task cache in a temporary folder)."""
    folder = tmp_path_factory.mktemp("eval")
    spec = yaml.safe_load((ROOT / "studies/trial_tiny.yaml").read_text())
    spec["model"].update(d_model=64, n_layers=1)
    spec["data"]["max_bytes"] = 1_000_000
    spec["train"].update(tokens=40_960, batch_size=8, warmup_tokens=4096, eval_every_tokens=None,
                         checkpoint_every_tokens=None, cpu_threads=1)  # the final weights kept all the same (train.keep_weights)
    spec["eval"] = {"sequences": 4, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024}
    (folder / "trial.yaml").write_text(yaml.safe_dump(spec))
    proc = wb("train", folder / "trial.yaml", "--out", folder / "t")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return folder / "t", {**os.environ, "WB_EVAL_CACHE": str(folder / "cache")}


def test_eval_on_the_shipped_task_keeps_its_items_with_the_trial(trial):
    out, env = trial
    proc = wb("eval", out, "--task", "wb_next_line", "--limit", LIMIT, env=env, timeout=900)
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


def test_a_folder_that_is_not_a_finished_trial_is_refused(trial, tmp_path):
    _, env = trial
    proc = wb("eval", tmp_path, "--task", "wb_next_line", env=env)
    assert proc.returncode == 2 and "not a finished trial" in proc.stderr and "result.json" in proc.stderr

"""Redoing trials on purpose (`wb run --rerun`), and a deleted run: the trial trains again from its
first step, never only evaluates the final checkpoint it left."""
import json

from tests.workbench.drivers import runs, store
from tests.workbench.run.test_run import MINI_BASE, wb, write_study

# 48 steps of 512 tokens; the last step writes a checkpoint (the final weights).
TRAIN = {**MINI_BASE["train"], "tokens": 24576, "checkpoint_every_tokens": 8192}
STEPS = 48
CHANGES = [{"name": "no gate", "set": {"model.attention.forget_gate": "none"}},
           {"name": "raises", "set": {"data": {"kind": "text", "paths": ["/nonexistent/corpus.txt"], "context": 64}}}]


def by_variant(workdir) -> dict[str, list]:
    out: dict[str, list] = {}
    for run in runs(workdir, "redo"):
        out.setdefault(run.data.tags["variant"], []).append(run)
    return out


def trained_steps(workdir, run) -> int:
    client, _ = store(workdir, "redo")
    return len(client.get_metric_history(run.info.run_id, "train_loss"))


def test_rerun_and_a_deleted_run_train_the_trial_again_from_scratch(tmp_path):
    study = write_study(tmp_path, name="redo", changes=CHANGES, base={**MINI_BASE, "train": TRAIN})
    workdir = tmp_path / "w"
    first = wb("run", study, "--workdir", workdir)
    assert first.returncode == 1, first.stderr[-3000:]  # 'raises' fails
    before = by_variant(workdir)
    assert [r.info.status for r in before["raises"]] == ["FAILED"]
    no_gate = before["no gate"][0]
    spec_hash = no_gate.data.tags["spec_hash"]
    assert (workdir / "trials" / spec_hash / "checkpoint.pt").exists()  # the final weights

    bad = wb("run", study, "--workdir", workdir, "--rerun", "no such variant")
    assert bad.returncode == 2 and "--rerun 'no such variant'" in bad.stderr and "'failed'" in bad.stderr
    assert "'no gate'" in bad.stderr and "Traceback" not in bad.stderr
    assert {v: [r.info.run_id for r in rs] for v, rs in by_variant(workdir).items()} == \
           {v: [r.info.run_id for r in rs] for v, rs in before.items()}  # nothing deleted

    again = wb("run", study, "--workdir", workdir, "--rerun", "failed", "--rerun", spec_hash[:8])
    assert again.returncode == 1, again.stderr[-3000:]
    assert "rerun: 2 trials to run afresh (2 tracked runs and their checkpoints deleted)" in again.stderr
    after = by_variant(workdir)
    assert [r.info.status for r in after["raises"]] == ["FAILED"]
    assert after["raises"][0].info.run_id != before["raises"][0].info.run_id
    assert [r.info.status for r in after["no gate"]] == ["FINISHED"]
    assert after["no gate"][0].info.run_id != no_gate.info.run_id
    assert trained_steps(workdir, after["no gate"][0]) == STEPS == trained_steps(workdir, no_gate)
    assert [r.info.run_id for r in after["FoX (Pro)"]] == [r.info.run_id for r in before["FoX (Pro)"]]

    # The run deleted by hand (MLflow's UI, or its client), its final checkpoint still there.
    base = after["FoX (Pro)"][0]
    client, _ = store(workdir, "redo")
    client.delete_run(base.info.run_id)
    third = wb("run", study, "--workdir", workdir)
    assert third.returncode == 1, third.stderr[-3000:]
    retrained = by_variant(workdir)["FoX (Pro)"]
    assert [r.info.status for r in retrained] == ["FINISHED"] and trained_steps(workdir, retrained[0]) == STEPS
    result = json.loads((workdir / "trials" / base.data.tags["spec_hash"] / "result.json").read_text())
    assert result["steps"] == STEPS and result["val_loss"] == base.data.metrics["val_loss"]


def test_a_dry_run_checks_the_rerun_selectors_and_says_what_they_would_delete(tmp_path):
    study = write_study(tmp_path)
    bad = wb("run", study, "--workdir", tmp_path / "w", "--dry-run", "--rerun", "bogus", timeout=120)
    assert bad.returncode == 2 and "--rerun 'bogus': no trial of the study" in bad.stderr, bad.stderr
    good = wb("run", study, "--workdir", tmp_path / "w", "--dry-run", "--rerun", "no gate", timeout=120)
    assert good.returncode == 0 and "--rerun would delete the tracked runs and checkpoints of 1 trial and run them" in good.stdout
    assert not (tmp_path / "w").exists()

"""`wb status` on a store written through the workbench's own tracking Store (no Ray): running
trials with tokens, loss and ETA from their stamped steps, failures with reasons, trials to run,
and a GPU under 50% busy flagged from its final mean or, while it runs, its samples."""
import re
import subprocess
import sys
import time
from pathlib import Path

from foxwb.workbench.spec.errors import validate
from foxwb.workbench.run.lease import Lease
from foxwb.workbench.spec.study import StudySpec, expand
from foxwb.workbench.run.tracking import Store, create_local_store, local_tracking_uri
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]
BASE = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2},
        "data": {"kind": "builtin", "context": 32}, "train": {"tokens": 10000}}




def test_status_reads_every_trial_state_and_flags_an_idle_gpu(tmp_path):
    study = {"name": "telemetry", "base": BASE, "seeds": [0, 1, 2], "design": {"kind": "variants", "variants": [
        {"name": "busy", "set": {"train.lr": 0.001}}, {"name": "idle", "set": {"train.lr": 0.002}},
        {"name": "cpu", "set": {"train.lr": 0.003}}]}}
    path = tmp_path / "telemetry.yaml"
    path.write_text(__import__("yaml").safe_dump(study))
    trials = {(t.variant, t.seed): t for t in expand(validate(StudySpec, study))}
    workdir = tmp_path / "w"
    workdir.mkdir()
    create_local_store(workdir)
    store = Store(local_tracking_uri(workdir), "telemetry", workdir / "mlartifacts")
    parent = store.study_run("telemetry", "", "test")
    driver = Lease(store.client, parent, "telemetry").claim()  # the study's driver, alive: this process
    now_ms = int(time.time() * 1000)

    def finished(key, result):
        run = store.start_trial(parent, "telemetry", trials[key], "test")
        store.finish_trial(run, {"val_ppl": 20.0, "val_loss": 3.0, "train_tokens": 10000, **result})

    finished(("busy", 0), {"gpu_utilization_mean": 91.0})
    finished(("idle", 0), {"gpu_utilization_mean": 23.0})
    finished(("cpu", 0), {})  # a CPU trial: no GPU metric, nothing said
    # A trial running now: steps stamped 20 s and 10 s ago, GPU samples averaging 30%.
    running = store.start_trial(parent, "telemetry", trials[("idle", 1)], "test")
    store.log_metrics(running, [("train_loss", 4.0, 1000, now_ms - 20000), ("train_loss", 3.5, 2000, now_ms - 10000),
                                ("system/gpu_0_utilization_percentage", 20.0, 1000, now_ms - 20000),
                                ("system/gpu_0_utilization_percentage", 40.0, 2000, now_ms - 10000)])
    # A trial that has reported one step: no rate yet (its start-up is not counted in one).
    once = store.start_trial(parent, "telemetry", trials[("busy", 2)], "test")
    started = store.client.get_run(once).info.start_time
    store.log_metrics(once, [("train_loss", 5.0, 1024, started + 1000)])
    failed = store.start_trial(parent, "telemetry", trials[("busy", 1)], "test")
    store.fail_trial(failed, "Traceback (most recent call last):\n  ...\nTrainError: the training loss became nan at step 3")

    asked = time.time()
    out = wb("status", path, "--workdir", workdir)
    answered = time.time()
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "study 'telemetry': 9 trials: 2 running, 3 finished, 1 failed, 3 to run" in text
    line = next(l for l in text.splitlines() if "idle / seed 0" in l)
    assert "finished" in line and "[GPU 23% busy (under 50%)]" in line
    assert "GPU" not in next(l for l in text.splitlines() if "busy / seed 0" in l)
    assert "GPU" not in next(l for l in text.splitlines() if "cpu / seed 0" in l)
    line = next(l for l in text.splitlines() if "idle / seed 1" in l)
    # Of the tokens it trains: the 10,000 asked in whole steps, 10,240. 1000 tokens in 10 s: the 8,240
    # to go take 82.4 s from the last report, 10 s before `asked`.
    assert line.lstrip().startswith("running") and "2,000/10,240 tokens (20%)  loss 3.500" in line
    eta = re.search(r"eta (?:(\d+) min )?(\d+) s", line)
    seconds = int(eta.group(1) or 0) * 60 + int(eta.group(2))
    last = now_ms / 1000 - 10
    assert 82.4 - (answered - last) - 1 <= seconds <= 82.4 - (asked - last) + 1, line
    assert "[GPU 30% busy (under 50%)]" in line
    line = next(l for l in text.splitlines() if "busy / seed 2" in l)
    assert "1,024/10,240 tokens (10%)  loss 5.000  eta estimating..." in line, line
    line = next(l for l in text.splitlines() if "busy / seed 1" in l)
    assert "failed" in line and "TrainError: the training loss became nan at step 3" in line
    assert next(l for l in text.splitlines() if "cpu / seed 1" in l).lstrip().startswith("to run")
    # Without a study: every study in the store, its tracked trials only.
    every = wb("status", "--workdir", workdir)
    assert every.returncode == 0 and "study 'telemetry': 6 trials: 2 running, 3 finished, 1 failed" in every.stdout
    # A study this store has never seen (a new file, a renamed one, the wrong --workdir) says so.
    other = tmp_path / "other.yaml"
    other.write_text(__import__("yaml").safe_dump({**study, "name": "other"}))
    out = wb("status", other, "--workdir", workdir)
    assert out.returncode == 0 and "study 'other': 9 trials: 9 to run" in out.stdout
    assert f"study 'other' has not run in {workdir} (the studies there: telemetry); `wb run {other} --workdir {workdir}` starts it" in out.stdout
    out = wb("status", "other", "--workdir", workdir)
    assert out.returncode == 2 and f"study 'other': not in {workdir} (the studies there: telemetry)" in out.stderr
    driver.release()


def test_runs_left_running_by_a_driver_that_is_gone_are_stalled_not_running(tmp_path):
    """A driver killed outright (SIGKILL, the terminal's SIGHUP before it was caught, a lost
    machine) closes nothing: its runs stay RUNNING in the store. `wb status` and the dry run say
    they are stalled and why, not running with a stale ETA."""
    import json
    import os
    import socket

    from foxwb.workbench.run import lease

    study = {"name": "orphan", "base": BASE, "seeds": [0, 1], "design": {"kind": "variants", "variants": [{"name": "a"}]}}
    path = tmp_path / "orphan.yaml"
    path.write_text(__import__("yaml").safe_dump(study))
    trials = expand(validate(StudySpec, study))
    workdir = tmp_path / "w"
    workdir.mkdir()
    create_local_store(workdir)
    store = Store(local_tracking_uri(workdir), "orphan", workdir / "mlartifacts")
    parent = store.study_run("orphan", "", "test")
    run = store.start_trial(parent, "orphan", trials[0], "test")
    store.log_metrics(run, [("train_loss", 4.0, 1000, int(time.time() * 1000) - 1000)])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid of this machine whose process is gone
    held = {"host": socket.gethostname(), "pid": dead.pid, "space": lease.process_space(), "token": "t",
            "heartbeat": time.time()}
    store.client.set_tag(parent, lease.TAG, json.dumps(held))
    for args in (("status", path), ("run", path, "--dry-run")):
        out = wb(*args, "--workdir", workdir)
        assert out.returncode == 0, out.stderr
        line = next(l for l in out.stdout.splitlines() if trials[0].spec_hash in l)
        assert "stalled" in line and f"its driver's process is gone (host {socket.gethostname()!r}, pid {dead.pid}" in line, line
        assert "`wb run` runs it again" in line and "running" not in line and "eta" not in line, line
    assert "study 'orphan': 2 trials: 1 stalled, 1 to run" in wb("status", path, "--workdir", workdir).stdout
    # A driver elsewhere (another host) is judged by its heartbeat alone: fresh, it is running; old, stalled.
    store.client.set_tag(parent, lease.TAG, json.dumps({**held, "host": "elsewhere", "pid": 1, "heartbeat": time.time()}))
    assert "1 running, 1 to run" in wb("status", path, "--workdir", workdir).stdout
    store.client.set_tag(parent, lease.TAG, json.dumps({**held, "host": "elsewhere", "heartbeat": time.time() - 120}))
    line = next(l for l in wb("status", path, "--workdir", workdir).stdout.splitlines() if "a / seed 0" in l)
    assert "stalled" in line and "its driver sends no heartbeats (host 'elsewhere', pid" in line, line
    store.client.set_tag(parent, lease.TAG, "")  # given up, its runs still RUNNING
    line = next(l for l in wb("status", path, "--workdir", workdir).stdout.splitlines() if "a / seed 0" in l)
    assert "stalled" in line and "no driver holds the study" in line, line


def test_a_variant_renamed_in_the_file_keeps_its_runs_in_results_and_status(tmp_path):
    """`wb run` matches trials by spec hash, so after a row (or the base) is renamed in the study
    file it runs nothing again; `wb results` and `wb status` read the runs under the file's names
    too, with a note, rather than one row finished under the old name and one 'to run'."""
    import yaml

    design = {"kind": "ablation", "base_name": "FoX (Pro)", "changes": [
        {"name": "FoX (Pro) - KV-shift", "set": {"model.attention.kv_shift": "none"}}]}
    study = {"name": "renamed", "base": BASE, "seeds": [0, 1], "design": design}
    workdir = tmp_path / "w"
    workdir.mkdir()
    create_local_store(workdir)
    store = Store(local_tracking_uri(workdir), "renamed", workdir / "mlartifacts")
    parent = store.study_run("renamed", "", "test", base_variant="FoX (Pro)")
    for t in expand(validate(StudySpec, study)):
        run = store.start_trial(parent, "renamed", t, "test")
        store.finish_trial(run, {"val_ppl": 20.0 + (t.variant != "FoX (Pro)") + 0.1 * t.seed, "val_loss": 3.0,
                                 "train_tokens": 10000})
    design["base_name"], design["changes"][0]["name"] = "base", "no KV-shift"
    path = tmp_path / "renamed.yaml"
    path.write_text(yaml.safe_dump(study))
    out = wb("results", path, "--workdir", workdir)
    assert out.returncode == 0, out.stderr
    assert "the runs recorded as 'FoX (Pro) - KV-shift' are the trials" in out.stderr and "now names 'no KV-shift'" in out.stderr
    rows = [l.split() for l in out.stdout.splitlines() if l.startswith(("base ", "no KV-shift", "FoX"))]
    assert [r[0] for r in rows] == ["base", "no"], out.stdout  # the file's names only, each row whole
    assert "+1.000" in out.stdout and "to run" not in out.stdout, out.stdout
    text = wb("status", path, "--workdir", workdir).stdout
    assert "4 finished" in text and "no KV-shift / seed 1" in text and "FoX (Pro)" not in text, text


def test_a_resumed_trials_eta_counts_from_its_resume(tmp_path):
    """A trial resumed from its checkpoint sends its earlier steps again with the times they were
    trained at (an hour ago here): the ETA takes the rate of the steps since the resume only."""
    study = {"name": "resumed", "base": BASE, "seeds": [0], "design": {"kind": "variants", "variants": [{"name": "a"}]}}
    path = tmp_path / "resumed.yaml"
    path.write_text(__import__("yaml").safe_dump(study))
    trial = expand(validate(StudySpec, study))[0]
    workdir = tmp_path / "w"
    workdir.mkdir()
    create_local_store(workdir)
    store = Store(local_tracking_uri(workdir), "resumed", workdir / "mlartifacts")
    parent = store.study_run("resumed", "", "test")
    driver = Lease(store.client, parent, "resumed").claim()
    run = store.start_trial(parent, "resumed", trial, "test")
    started = store.client.get_run(run).info.start_time
    hour_ago = started - 3_600_000
    store.log_metrics(run, [("train_loss", 5.0 - i / 10, 1000 * i, hour_ago + 1000 * i) for i in range(1, 5)])
    store.resumed(run, 4000)  # the runner's record of where it picked up
    line = lambda: next(l for l in wb("status", path, "--workdir", workdir).stdout.splitlines() if "a / seed 0" in l)
    text = line()  # no step since the resume yet: no rate, and not an hour quiet
    assert "4,000/10,240 tokens (39%)" in text and "eta estimating..." in text and "no report for" not in text, text
    asked = time.time()
    store.log_metrics(run, [("train_loss", 4.0, 5000, started + 10_000), ("train_loss", 3.9, 6000, started + 20_000)])
    text = line()
    answered = time.time()
    # 1000 tokens in 10 s since the resume: the 4,240 to go take 42.4 s from the last step.
    eta = re.search(r"eta (?:(\d+) min )?(\d+) s", text)
    seconds = int(eta.group(1) or 0) * 60 + int(eta.group(2))
    last = (started + 20_000) / 1000
    assert "6,000/10,240 tokens (59%)" in text
    assert 42.4 - max(0, answered - last) - 1 <= seconds <= 42.4 - max(0, asked - last) + 1, text
    driver.release()

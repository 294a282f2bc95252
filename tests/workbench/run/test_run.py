"""`wb run` end to end with real Ray Tune and MLflow: tracking, resume, failures, clusters, servers."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.workbench.drivers import kill_session
from tests.cli import BIN, free_port, shared_ray, shared_ray_head, start_mlflow_server, start_ray_head, stop_ray_head, wb

ROOT = Path(__file__).resolve().parents[3]

MINI_BASE = {
    "model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
              "mlp": {"kind": "swiglu", "intermediate_size": 64}},
    "data": {"kind": "builtin", "context": 64, "max_bytes": 600000},
    "train": {"tokens": 24000, "batch_size": 8, "eval_every_tokens": 8192, "eval_batches": 1, "cpu_threads": 1},
    "eval": {"sequences": 4, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024},
}


def write_study(tmp_path, name="mini", changes=None, seeds=(0,), base=None, **extra):
    changes = changes if changes is not None else [{"name": "no gate", "set": {"model.attention.forget_gate": "none"}}]
    spec = {"name": name, "base": base or MINI_BASE, "seeds": list(seeds),
            "design": {"kind": "ablation", "base_name": "FoX (Pro)", "changes": changes}, **extra}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path




def trial_runs(workdir, experiment):
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    return client, client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial'")


def test_quickstart_runs_end_to_end_and_is_tracked(quickstart):
    workdir, proc, _ = quickstart  # how long it takes is the overhead benchmark's to state (docs/performance.md)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Without a terminal, plain progress lines (no cursor moves): tokens, loss, ETA per trial; of the
    # tokens it trains: the 320,000 asked in whole steps of 16 x 128 tokens, 157 of them.
    assert "\x1b[" not in proc.stderr
    for variant in ("FoX (Pro)", "FoX (Pro) - forget gate", "FoX (Pro) - KV-shift"):
        assert re.search(rf"running  {re.escape(variant)} / seed \d  [\d,]+/321,536 tokens \(\d+%\)  loss [\d.]+  eta ",
                         proc.stderr), proc.stderr[-3000:]
    client, runs = trial_runs(workdir, "quickstart")
    assert len(runs) == 6 and {r.info.status for r in runs} == {"FINISHED"}
    parent = client.search_runs([runs[0].info.experiment_id], "tags.wb_kind = 'study'")[0]
    assert parent.data.tags["base_variant"] == "FoX (Pro)"  # the design's base, for the dashboard
    for run in runs:
        tags = run.data.tags
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert {"study", "variant", "seed", "spec_hash", "code_version"} <= set(tags)
        assert run.data.params["model.attention.kv_shift.kind"] in ("kv", "none")
        history = client.get_metric_history(run.info.run_id, "train_loss")
        assert len(history) > 10 and history[-1].step > history[0].step  # step = tokens seen
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"spec.json", "result.json", "per_position_loss.json"} <= artifacts


def test_a_second_run_adds_nothing_and_is_quick(quickstart):
    workdir = quickstart[0]
    start = time.time()
    proc = wb("run", ROOT / "studies/quickstart.yaml", "--workdir", workdir)
    assert proc.returncode == 0 and time.time() - start < 30
    assert "0 to run" in proc.stderr
    assert len(trial_runs(workdir, "quickstart")[1]) == 6
    dry = wb("run", ROOT / "studies/quickstart.yaml", "--workdir", workdir, "--dry-run")
    rows = [line for line in dry.stdout.splitlines()[2:] if not line.startswith("test set of every row: ")]
    assert len(rows) == 6 and all(row.endswith("  done") for row in rows)


def test_results_table_equals_the_store(quickstart):
    workdir = quickstart[0]
    proc = wb("results", ROOT / "studies/quickstart.yaml", "--workdir", workdir)
    assert proc.returncode == 0, proc.stderr
    _, runs = trial_runs(workdir, "quickstart")
    base = [r.data.metrics["test_ppl"] for r in runs if r.data.tags["variant"] == "FoX (Pro)"]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("FoX (Pro) "))
    assert f"{sum(base) / len(base):.3f}" in line
    # Any final metric; one that was not recorded is an error that lists those that were.
    proc = wb("results", ROOT / "studies/quickstart.yaml", "--workdir", workdir, "--metric", "val_loss")
    base = [r.data.metrics["val_loss"] for r in runs if r.data.tags["variant"] == "FoX (Pro)"]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("FoX (Pro) "))
    assert proc.returncode == 0 and "val_loss mean" in proc.stdout and f"{sum(base) / len(base):.3f}" in line
    proc = wb("results", ROOT / "studies/quickstart.yaml", "--workdir", workdir, "--metric", "loss")
    assert proc.returncode == 2 and "--metric 'loss'" in proc.stderr and "val_loss" in proc.stderr


def test_trials_run_seed_by_seed_so_a_stopped_study_leaves_whole_seeds():
    from foxwb.workbench.spec.errors import validate
    from foxwb.workbench.run.runner import run_order
    from foxwb.workbench.spec.study import StudySpec, expand

    base = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2},
            "data": {"kind": "builtin", "context": 32}}
    study = validate(StudySpec, {"name": "s", "base": base, "seeds": [0, 1, 2], "design": {"kind": "variants", "variants": [
        {"name": "a", "set": {"train.lr": 0.001}}, {"name": "b", "seeds": [2, 0], "set": {"train.lr": 0.002}},
        {"name": "c", "set": {"train.lr": 0.003}}]}})
    assert [(t.variant, t.seed) for t in run_order(expand(study))] == [
        ("a", 0), ("b", 0), ("c", 0), ("a", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2)]


def test_a_driver_killed_mid_way_resumes_with_every_trial_finished_once(tmp_path):
    """...and a Ray cluster that was up before (another user's: this pytest worker's, tests/cli.py's
    shared_ray, a `ray start` head as any other) is up after: the test stops only what it started,
    by its own handle."""
    address = shared_ray()
    bystander = shared_ray_head()
    _killed_driver_resumes(tmp_path)
    assert bystander.poll() is None
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", int(address.rsplit(":", 1)[1]))) == 0, "the other Ray cluster's GCS is gone"
    status = subprocess.run([str(BIN / "ray"), "status", "--address", address], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "RAY_AUTH_MODE": "token"})
    assert status.returncode == 0, status.stderr[-2000:]


def _killed_driver_resumes(tmp_path):
    changes = [{"name": f"lr {lr}", "set": {"train.lr": lr}} for lr in (1e-3, 3e-3, 1e-2)]
    study = write_study(tmp_path, name="killed", changes=changes, seeds=(0,),
                        base={**MINI_BASE, "train": {**MINI_BASE["train"], "tokens": 60000}})
    workdir = tmp_path / "w"
    proc = subprocess.Popen([sys.executable, "-m", "foxwb.workbench.cli.main", "run", str(study), "--workdir", str(workdir),
                             "--max-concurrent", "1"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, text=True)
    deadline = time.time() + 240
    while time.time() < deadline:
        db = workdir / "mlflow.db"
        if db.exists():
            try:
                finished = [r for r in trial_runs(workdir, "killed")[1] if r.info.status == "FINISHED"]
            except Exception:
                finished = []
            if finished:
                break
        time.sleep(0.5)
    kill_session(proc)  # the driver's session: its own local Ray and the trials' processes
    statuses = [r.info.status for r in trial_runs(workdir, "killed")[1]]
    assert 1 <= statuses.count("FINISHED") < 4, statuses
    again = wb("run", study, "--workdir", workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    runs = trial_runs(workdir, "killed")[1]
    finished = [r.data.tags["spec_hash"] for r in runs if r.info.status == "FINISHED"]
    assert len(finished) == 4 and len(set(finished)) == 4
    assert all(r.info.status in ("FINISHED", "KILLED") for r in runs)


def test_a_trial_folder_another_process_trains_is_not_trained_twice_at_once(tmp_path):
    """Two studies of one workdir that hold the very same trial share its folder: while one trains
    it (here: this test holds the folder, as a `wb train` or another driver's worker would), the
    other records the trial FAILED with the reason, not a second training into one checkpoint;
    run again once the folder is free, it trains."""
    from foxwb.workbench.spec.study import load_study
    from foxwb.workbench.train.folder_lock import FolderLock
    from foxwb.workbench.spec.study import expand

    study = write_study(tmp_path, name="shared")
    trial = expand(load_study(str(study)))[0]  # the base row's; the other trial trains meanwhile
    workdir = tmp_path / "w"
    with FolderLock(workdir / "trials" / trial.spec_hash) as lock:
        assert lock.held
        proc = wb("run", study, "--workdir", workdir)
    assert proc.returncode == 1, proc.stderr[-2000:]
    runs = {r.data.tags["spec_hash"]: r for r in trial_runs(workdir, "shared")[1]}
    run = runs.pop(trial.spec_hash)
    assert run.info.status == "FAILED" and "is being trained by another process" in run.data.tags["error"]
    assert [r.info.status for r in runs.values()] == ["FINISHED"]
    assert not (workdir / "trials" / trial.spec_hash / "checkpoint.pt").exists()
    again = wb("run", study, "--workdir", workdir)
    assert again.returncode == 0, again.stderr[-2000:]


def test_failing_trials_are_recorded_with_their_reasons_and_the_rest_finish(tmp_path):
    changes = [
        {"name": "raises", "set": {"data": {"kind": "text", "paths": [str(tmp_path / "missing.txt")], "context": 64}}},
        {"name": "goes NaN", "set": {"train.lr": 1e6, "train.grad_clip": None}},
    ]
    workdir = tmp_path / "w"
    proc = wb("run", write_study(tmp_path, name="failing", changes=changes), "--workdir", workdir)
    assert proc.returncode == 1
    assert "2 trials failed: raises / seed 0; goes NaN / seed 0" in proc.stdout
    runs = {r.data.tags["variant"]: r for r in trial_runs(workdir, "failing")[1]}
    assert runs["FoX (Pro)"].info.status == "FINISHED"
    assert runs["raises"].info.status == "FAILED" and "no such file or folder" in runs["raises"].data.tags["error"]
    assert runs["goes NaN"].info.status == "FAILED" and "loss became nan" in runs["goes NaN"].data.tags["error"]
    # The reason says where it was raised (a bare assert has no message), the run keeps the traceback.
    nan = runs["goes NaN"].data.tags
    assert re.search(r"\(at \w+\.py:\d+ in \w+\)$", nan["error"]), nan["error"]
    assert nan["traceback"].startswith("Traceback") and "loss became nan" in nan["traceback"]


@pytest.mark.parametrize(
    "case,expected",
    [
        ("unknown key", "learning_rate: Extra inputs are not permitted"),
        ("unknown kind", "model.attention.rope: unknown kind 'alibi'; registered kinds: none, rope"),
        ("missing path", "'model.attention.gate': model.attention has no field 'gate'"),
        ("malformed yaml", "malformed YAML"),
        ("key written twice", "key 'seeds' is written twice in one mapping (first at line 1)"),
        ("empty file", "the file is empty"),
        ("gpu without gpu", "resources.gpu=0.25: this machine has no GPU"),
        ("cuda without gpu", "train.device=cuda in the trials of 'FoX (Pro)', 'no gate', and this machine has no GPU "
                             "(resources.gpu is 0: none is reserved for them); pass --set train.device=cpu (or auto)"),
        ("empty design", "design.changes: List should have at least 1 item"),
        ("more cpus than here", "resources.cpu=1000: a trial asks 1000 CPUs and this machine has"),
    ],
)
def test_bad_study_files_write_nothing(tmp_path, case, expected):
    if case == "malformed yaml":
        path = tmp_path / "bad.yaml"
        path.write_text("name: x\ndesign: {kind: ablation\n")
    elif case == "key written twice":  # YAML alone keeps the last: seed 5 only, silently
        path = write_study(tmp_path)
        path.write_text("seeds: [5]\n" + path.read_text())
    elif case == "empty file":
        path = tmp_path / "empty.yaml"
        path.write_text("# nothing yet\n")
    elif case == "unknown key":
        path = write_study(tmp_path, base={**MINI_BASE, "train": {**MINI_BASE["train"], "learning_rate": 1}})
    elif case == "unknown kind":
        path = write_study(tmp_path, changes=[{"name": "a", "set": {"model.attention.rope": "alibi"}}])
    elif case == "missing path":
        path = write_study(tmp_path, changes=[{"name": "a", "set": {"model.attention.gate": "none"}}])
    elif case == "gpu without gpu":
        if shutil.which("nvidia-smi"):
            pytest.skip("this machine has a GPU")
        path = write_study(tmp_path, resources={"cpu": 1, "gpu": 0.25})
    elif case == "cuda without gpu":  # resources.gpu 0, as a GPU study moved to the CPU by half: every trial would fail
        if shutil.which("nvidia-smi"):
            pytest.skip("this machine has a GPU")
        path = write_study(tmp_path, base={**MINI_BASE, "train": {**MINI_BASE["train"], "device": "cuda"}},
                           resources={"cpu": 1, "gpu": 0})
    elif case == "more cpus than here":  # Ray would wait for them forever
        path = write_study(tmp_path, resources={"cpu": 1000, "gpu": 0})
    else:
        path = write_study(tmp_path, changes=[])
    # A local run (this machine's resources, not the shared cluster's), its driver in this process:
    # each is refused before any Ray starts (a process of its own for each case cost 5 s of CPU).
    proc = wb("run", path, "--workdir", tmp_path / "w", timeout=120, own_ray=True, in_process=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "w" / "mlflow.db").exists()
    if case in ("more cpus than here", "cuda without gpu"):  # the dry run says so too, and runs nothing
        dry = wb("run", path, "--workdir", tmp_path / "w", "--dry-run", timeout=120)
        assert dry.returncode == 0 and f"note: `wb run` here stops at once: {expected}" in dry.stdout, dry.stdout


def test_an_existing_ray_cluster_runs_the_study_and_adding_a_seed_runs_only_the_new_trials(tmp_path):
    """A driver process of its own joins a running `ray start` cluster: this pytest worker's
    (tests/cli.py's shared_ray, started as start_ray_head starts one), not a head started and
    stopped for this test alone (seconds of a 2-core machine each way, for the same cluster).
    Then a seed added to the study runs only the new trials (a test of its own before, which ran
    the same first study again)."""
    workdir = tmp_path / "w"
    proc = wb("run", write_study(tmp_path, name="cluster", seeds=(0,)), "--workdir", workdir, "--ray-address", shared_ray())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r.info.status for r in trial_runs(workdir, "cluster")[1]] == ["FINISHED", "FINISHED"]
    proc = wb("run", write_study(tmp_path, name="cluster", seeds=(0, 1)), "--workdir", workdir)
    assert proc.returncode == 0 and "2 already done, 2 to run" in proc.stderr
    runs = trial_runs(workdir, "cluster")[1]
    assert len(runs) == 4 and len({r.data.tags["spec_hash"] for r in runs}) == 4


def test_a_local_run_starts_its_own_ray_whatever_the_environment_points_at_and_imports_no_readers(tmp_path):
    """Without --ray-address a study runs on a Ray of its own: a RAY_ADDRESS (or a stale record of
    an old `ray start`) naming a cluster that is gone must not make it wait on that cluster.
    And the GPU machine has neither polars nor plotly (only the readers need them): `wb run` and its
    trials must not import them. Modules that raise on import stand in for the missing packages,
    driver and Ray workers alike (PYTHONPATH reaches both). One local run checks both (they were two
    tests of one local run each, half a minute apiece on 2 cores)."""
    dead = f"127.0.0.1:{free_port()}"
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    for name in ("polars", "plotly"):
        (blocked / f"{name}.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    env = {**os.environ, "RAY_ADDRESS": dead,
           "PYTHONPATH": os.pathsep.join([str(blocked), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = wb("run", write_study(tmp_path, name="own-ray"), "--workdir", tmp_path / "w", timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r.info.status for r in trial_runs(tmp_path / "w", "own-ray")[1]] == ["FINISHED", "FINISHED"]


def test_mlflow_server_serves_the_study_with_runs_nested(quickstart):
    workdir = quickstart[0]
    port = free_port()
    server = start_mlflow_server(f"sqlite:///{workdir / 'mlflow.db'}", port)
    base = f"http://127.0.0.1:{port}/api/2.0/mlflow"
    try:
        # A deadline, not a count of tries: on a machine busy with a study and the suite's other
        # worker the server took over a minute to start (a 2-core run beside a study, 2026-12-03).
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{base}/experiments/get-by-name?experiment_name=quickstart", timeout=10) as r:
                    exp = json.load(r)["experiment"]
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"mlflow server did not answer in 300 s (exit status {server.poll()})")
                time.sleep(0.5)
        body = json.dumps({"experiment_ids": [exp["experiment_id"]], "filter": "tags.wb_kind = 'trial'", "max_results": 100}).encode()
        request = urllib.request.Request(f"{base}/runs/search", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as r:
            runs = json.load(r)["runs"]
        parents = {t["value"] for run in runs for t in run["data"]["tags"] if t["key"] == "mlflow.parentRunId"}
        assert len(runs) == 6 and len(parents) == 1
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_optuna_search_per_variant_resumes_with_only_the_missing_draws(tmp_path):
    def study(samples):
        return write_study(tmp_path, name="optuna", changes=[{"name": "no gate", "set": {"model.attention.forget_gate": "none"}}],
                           search={"space": {"train.lr": {"loguniform": [3e-4, 3e-2]}}, "algorithm": "optuna",
                                   "num_samples": samples})

    workdir = tmp_path / "w"
    first = wb("run", study(2), "--workdir", workdir)
    assert first.returncode == 0, first.stderr[-3000:]
    again = wb("run", study(3), "--workdir", workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    runs = trial_runs(workdir, "optuna")[1]
    for variant in ("FoX (Pro)", "no gate"):
        mine = [r for r in runs if r.data.tags["variant"] == variant]
        assert [r.info.status for r in mine] == ["FINISHED"] * 3
        assert len({r.data.params["train.lr"] for r in mine}) == 3  # three distinct draws, each once
        assert all(r.data.tags["search_point"].startswith("lr=") for r in mine)
    # Each variant draws its own points, as a random search does (not the same sequence for every variant).
    lrs = {v: {r.data.params["train.lr"] for r in runs if r.data.tags["variant"] == v} for v in ("FoX (Pro)", "no gate")}
    assert not lrs["FoX (Pro)"] & lrs["no gate"], lrs


def test_a_study_named_with_a_quote_resumes_and_reports(tmp_path):
    study = write_study(tmp_path, name="it's mini", changes=[{"name": "the 'no gate'", "set": {"model.attention.forget_gate": "none"}}])
    workdir = tmp_path / "w"
    assert wb("run", study, "--workdir", workdir).returncode == 0
    again = wb("run", study, "--workdir", workdir)
    assert again.returncode == 0 and "2 already done, 0 to run" in again.stderr
    table = wb("results", study, "--workdir", workdir)
    assert table.returncode == 0 and "the 'no gate'" in table.stdout

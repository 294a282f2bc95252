"""Trials of more than one worker, with real Ray Train (gloo on the CPU) and MLflow: N workers train
as one does, a killed trial resumes with another worker count, a study mixes worker counts, a
two-node cluster on one machine spreads a trial, bad input is refused before anything starts."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.cli import shared_ray
from tests.workbench.drivers import kill_session
from tests.workbench.run.test_run import MINI_BASE, free_port, stop_ray_head, trial_runs, wb
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.train.step_share import Shard, check_divisible, shard_batches
from foxwb.workbench.spec.trial import TrialSpec

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent

# Steps of 4 x 3 sequences: two workers take 6 each, as 2 micro-batches of 3 that straddle the
# spec's micro-batches, so the split, the accumulation and the averaging are all exercised.
TINY = {
    "model": MINI_BASE["model"],
    "data": {"kind": "builtin", "context": 32, "max_bytes": 300000},
    "train": {"tokens": 20 * 12 * 32, "batch_size": 4, "grad_accum": 3, "cpu_threads": 1, "lr": 3e-3,
              "eval_every_tokens": 10 * 12 * 32, "eval_batches": 1, "checkpoint_every_tokens": 5 * 12 * 32},
    "eval": {"sequences": 2, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024},
}


def tiny(**train) -> TrialSpec:
    return TrialSpec.model_validate({**TINY, "train": {**TINY["train"], **train}})


def losses(path: Path) -> list[float]:
    return [json.loads(line)["train_loss"] for line in path.read_text().splitlines()]


def assert_same_curve(mine: list[float], reference: list[float], steps: int = 20) -> None:
    assert len(mine) == len(reference) == steps
    worst = max(abs(a - b) / abs(b) for a, b in zip(mine, reference))
    assert worst < 1e-4, (worst, mine, reference)


def ray_env(temp_dir: str) -> dict:
    """A Ray of the subprocess's own, in its own temp dir."""
    return {**os.environ, "RAY_TMPDIR": temp_dir, "RAY_ADDRESS": ""}


@pytest.fixture(scope="module")
def local_ray():
    import ray

    temp_dir = tempfile.mkdtemp(prefix="wbd-", dir="/tmp")
    ray.init(address="local", _temp_dir=temp_dir, num_cpus=2, include_dashboard=False, configure_logging=False,
             log_to_driver=False)
    yield
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    """The uninterrupted one-process run of TINY: its metrics.jsonl and result."""
    from foxwb.workbench.train.trial import run_trial

    out = tmp_path_factory.mktemp("one")
    return out, run_trial(tiny(), out)


def test_each_worker_takes_its_own_block_and_together_the_whole_step():
    from foxwb.workbench.data.load import load_data

    data = load_data(tiny().data, 256, 0)
    whole = [data.train_batch(0, 7, m, 4).x for m in range(3)]
    parts = [shard_batches(data, 0, 7, Shard(r, 2, 4, 3)) for r in range(2)]
    assert [[b.x.shape[0] for b in p] for p in parts] == [[3, 3], [3, 3]]  # at most batch_size rows per pass
    import torch

    assert torch.equal(torch.cat([b.x for p in parts for b in p]), torch.cat(whole))
    # One worker is the spec's own micro-batches.
    assert [b.x for b in shard_batches(data, 0, 7, Shard(0, 1, 4, 3))][1].equal(whole[1])


def trains_as_one_worker_does(spec: TrialSpec, out: Path, one_worker) -> dict:
    """``spec`` (2 workers) trained from scratch by run_workers into ``out``: the curve, validation loss
    and tokens of the uninterrupted one-process run (one_worker); its result."""
    from foxwb.workbench.run.ray_train import run_workers

    reference, plain = one_worker
    ctrl_c = signal.getsignal(signal.SIGINT)
    result = run_workers(spec, out, cpus=1)
    assert signal.getsignal(signal.SIGINT) is ctrl_c  # Ray Train's handler does not outlive the fit
    assert_same_curve(losses(out / "metrics.jsonl"), losses(reference / "metrics.jsonl"))
    assert result["workers"] == 2 and result["parallel"] == spec.train.parallel
    assert abs(result["val_loss"] - plain["val_loss"]) / plain["val_loss"] < 1e-4
    assert result["train_tokens"] == plain["train_tokens"] and result["tokens_per_s"] > 0
    # On a Ray without a dashboard the run has no PlacementGroupCleaner, whose stop waits 12 s on the
    # State API at every run's end (ray_train._trainer_class). The actor table is GCS's own, which
    # Ray's public state API (served by the dashboard) cannot list here.
    import ray

    classes = {a["ActorClassName"].rsplit(".", 1)[-1] for a in ray._private.state.actors().values()}
    assert "TrainController" in classes and "PlacementGroupCleaner" not in classes, classes
    return result


def test_two_workers_train_as_one_worker_does(local_ray, one_worker, tmp_path):
    """DDP here; FSDP's two workers from scratch are the first run of
    test_an_fsdp_checkpoint_resumes_on_one_worker_and_a_one_worker_one_on_fsdp (one Ray Train run
    for both checks, 20 s each on 2 cores)."""
    result = trains_as_one_worker_does(tiny(workers=2, parallel="ddp"), tmp_path, one_worker)
    assert result["spec_hash"] == one_worker[1]["spec_hash"]  # workers and parallel are not the identity


def test_a_killed_two_worker_trial_resumes_on_one_worker(tmp_path):
    """`wb train --workers 2` killed (SIGKILL, driver, Ray and workers) after its first checkpoint,
    then run on one worker: the curve of the uninterrupted run. (60 steps: the kill must land
    before the last.)"""
    from foxwb.workbench.train.trial import run_trial

    longer = {**TINY, "train": {**TINY["train"], "tokens": 60 * 12 * 32}}
    run_trial(TrialSpec.model_validate(longer), tmp_path / "reference")
    spec = tmp_path / "trial.yaml"
    spec.write_text(yaml.safe_dump(longer))
    out = tmp_path / "out"
    temp_dir = tempfile.mkdtemp(prefix="wbk-", dir="/tmp")
    run = subprocess.Popen([sys.executable, "-m", "foxwb.workbench.cli.main", "train", str(spec), "--out", str(out),
                            "--workers", "2"], cwd=ROOT, env=ray_env(temp_dir), start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while not (out / "checkpoint.pt").exists() and run.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        kill_session(run)  # the driver, its Ray and the workers
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert (out / "checkpoint.pt").exists(), run.stderr.read()[-3000:]
    assert not (out / "result.json").exists()  # killed mid-way
    resumed = wb("train", spec, "--out", out, "--workers", "1")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_curve(losses(out / "metrics.jsonl"), losses(tmp_path / "reference" / "metrics.jsonl"), 60)


def stop_after_step_14(out: Path) -> list[dict]:
    """A trial checkpointed every 7 steps of 20 and trained with train.keep_weights off (its last
    checkpoint is then of step 14; keep_weights is not in the identity), made to look killed between
    steps 14 and 20 (a finished training's checkpoint is not resumed): its metrics rows."""
    import torch

    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 14
    (out / "result.json").unlink()  # as a killed trial leaves it
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def resumed_from_step_14(out: Path, first: list[dict], reference: list[float]) -> None:
    """Steps 1-14 come from the checkpoint's history (their timings are the first run's), not from
    a retraining; the whole curve is the uninterrupted one."""
    again = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step_ms"] for m in again[:14]] == [m["step_ms"] for m in first[:14]]
    assert [m["step_ms"] for m in again[14:]] != [m["step_ms"] for m in first[14:]]  # trained again
    assert_same_curve([m["train_loss"] for m in again], reference)


def test_an_fsdp_checkpoint_resumes_on_one_worker_and_a_one_worker_one_on_fsdp(local_ray, one_worker, tmp_path):
    """Two FSDP workers from scratch train as one process does (trains_as_one_worker_does). Written
    by them (gathered to the full state), a checkpoint resumes on 1 process; written by 1 process,
    it resumes on 2 FSDP workers (each keeps its shard). Both end on the uninterrupted curve."""
    from foxwb.workbench.run.ray_train import run_workers
    from foxwb.workbench.train.trial import run_trial

    reference = losses(one_worker[0] / "metrics.jsonl")
    spec = tiny(checkpoint_every_tokens=7 * 12 * 32)

    fsdp = tmp_path / "fsdp"
    two = trains_as_one_worker_does(tiny(checkpoint_every_tokens=7 * 12 * 32, workers=2, parallel="fsdp",
                                         keep_weights=False), fsdp, one_worker)
    first = stop_after_step_14(fsdp)
    resumed = run_trial(spec, fsdp)
    assert resumed["workers"] == 1
    assert two["spec_hash"] == resumed["spec_hash"]  # workers, parallel and keep_weights are not the identity
    resumed_from_step_14(fsdp, first, reference)

    one = tmp_path / "one"
    run_trial(tiny(checkpoint_every_tokens=7 * 12 * 32, keep_weights=False), one)
    first = stop_after_step_14(one)
    result = run_workers(tiny(checkpoint_every_tokens=7 * 12 * 32, workers=2, parallel="fsdp"), one, cpus=1)
    assert (result["workers"], result["parallel"]) == (2, "fsdp")
    resumed_from_step_14(one, first, reference)


def test_fsdp_trains_and_resumes_the_stable_recipes_parametrised_kv_shift(local_ray, tmp_path):
    """The stable recipe (docs/stability.md) divides KV-shift's mixing weight through a
    torch parametrization, so the module's state holds `parametrizations.weight.original` where a
    plain Linear holds `weight`: FSDP shards and gathers it as any other parameter. Two FSDP workers
    train the recipe as one process does, and their checkpoint resumes on one process."""
    from foxwb.workbench.run.ray_train import run_workers
    from foxwb.workbench.train.trial import run_trial

    recipe = {"kv_shift": {"kind": "kv", "logit_normalizer": 16.0},
              "forget_gate": {"kind": "data_dependent", "logit_normalizer": 16.0}}

    def spec(**train) -> TrialSpec:
        return TrialSpec.model_validate({**TINY, "model": {**TINY["model"], "attention": recipe},
                                         "train": {**TINY["train"], "checkpoint_every_tokens": 7 * 12 * 32, **train}})

    plain = run_trial(spec(), tmp_path / "one")
    reference = losses(tmp_path / "one" / "metrics.jsonl")
    fsdp = tmp_path / "fsdp"
    run_workers(spec(workers=2, parallel="fsdp", keep_weights=False), fsdp, cpus=1)
    assert_same_curve(losses(fsdp / "metrics.jsonl"), reference)
    first = stop_after_step_14(fsdp)
    result = run_trial(spec(), fsdp)
    assert result["workers"] == 1 and result["spec_hash"] == plain["spec_hash"]
    resumed_from_step_14(fsdp, first, reference)
    assert abs(result["val_loss"] - plain["val_loss"]) / plain["val_loss"] < 1e-4


def write_mixed_study(tmp_path: Path, name: str, **resources) -> Path:
    base = {**TINY, "train": {**TINY["train"], "checkpoint_every_tokens": None}}
    study = {"name": name, "base": base, "seeds": [0], "resources": {"cpu": 1, **resources},
             "design": {"kind": "ablation", "base_name": "FoX (Pro)",
                        "changes": [{"name": "no gate", "set": {"model.attention.forget_gate": "none",
                                                                "train.workers": 1}}]}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def assert_mixed_study_recorded_each_once(study: Path, workdir: Path) -> None:
    """The mixed study (write_mixed_study, workers=2) run into ``workdir``: a rerun on this pytest
    worker's cluster (tests/cli.py) has nothing to run; each trial is recorded once with its worker
    count, every step once from rank 0 only; the table and the dashboard show the workers per row.
    (Its run is the two-node test's: one run of the study where there were two, one per test.)"""
    again = wb("run", study, "--workdir", workdir)
    assert again.returncode == 0 and "0 to run" in again.stderr, again.stderr[-2000:]
    client, runs = trial_runs(workdir, "mixed")
    by_variant = {r.data.tags["variant"]: r for r in runs}
    assert len(runs) == 2 and set(by_variant) == {"FoX (Pro)", "no gate"}
    assert {r.info.status for r in runs} == {"FINISHED"}
    two, one = by_variant["FoX (Pro)"], by_variant["no gate"]
    assert (two.data.tags["workers"], one.data.tags["workers"]) == ("2", "1")
    assert (two.data.params["train.workers"], one.data.params["train.workers"]) == ("2", "1")
    for run in runs:  # every step once, from rank 0 only; the final validation once
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "train_loss")]
        assert steps == [12 * 32 * (i + 1) for i in range(20)]
        assert len(client.get_metric_history(run.info.run_id, "val_loss")) == 2
    assert two.data.metrics["tokens_per_s"] > 0
    # The table shows the workers per row.
    from foxwb.workbench.analysis.runs import trial_runs as runs_frame
    from foxwb.workbench.analysis.table import study_info, study_table

    frame = runs_frame(workdir, "mixed")
    rows = {r["variant"]: r["workers"] for r in study_table(frame, study_info("mixed", frame)).to_dicts()}
    assert rows == {"FoX (Pro)": [2], "no gate": [1]}  # numbers, in the JSON too
    # And so does the dashboard's (its Workers column, dashboards/figures.py's ablation table).
    built = wb("dashboard", "--workdir", workdir, "--study", "mixed", "--out", workdir.parent / "site")
    assert built.returncode == 0, built.stderr[-2000:]
    page = next((workdir.parent / "site").glob("study-mixed-*.html")).read_text()
    head = re.search(r'<table class="ablation"><thead>(.*?)</thead>', page).group(1)
    assert re.findall(r"<th[^>]*>(.*?)</th>", head)[-1] == "Workers"
    cells = {name: re.findall(r'<td class="num workers">(.*?)</td>', row)
             for name, row in re.findall(r'<tr><td class="variant">(.*?)</td>(.*?)</tr>', page)}
    assert cells == {"FoX (Pro)": ["2"], "no gate": ["1"]}


def test_a_multi_worker_trial_whose_folder_is_in_use_is_not_trained_twice(tmp_path):
    """The folder lock a one-process trial takes holds for a trial of two workers as well: while
    another process trains its folder, the study records it FAILED with the reason and trains the
    rest; no worker writes a checkpoint there. (The driver is a process of its own, on this pytest
    worker's cluster: tests/cli.py.)"""
    from foxwb.workbench.spec.study import load_study
    from foxwb.workbench.train.folder_lock import FolderLock
    from foxwb.workbench.spec.study import expand

    study = write_mixed_study(tmp_path, "locked", workers=2)
    two = next(t for t in expand(load_study(str(study))) if t.spec.train.workers == 2)
    with FolderLock(tmp_path / "w" / "trials" / two.spec_hash) as lock:
        assert lock.held
        proc = wb("run", study, "--workdir", tmp_path / "w", "--ray-address", shared_ray(), timeout=400)
    assert proc.returncode == 1, proc.stderr[-3000:]
    runs = {r.data.tags["variant"]: r for r in trial_runs(tmp_path / "w", "locked")[1]}
    assert runs["FoX (Pro)"].info.status == "FAILED"
    assert "is being trained by another process" in runs["FoX (Pro)"].data.tags["error"]
    assert runs["no gate"].info.status == "FINISHED"
    assert not (tmp_path / "w" / "trials" / two.spec_hash / "checkpoint.pt").exists()


def test_bad_worker_settings_are_refused_before_anything_starts(tmp_path):
    zero = wb("run", write_mixed_study(tmp_path, "zero", workers=0), "--workdir", tmp_path / "w")
    assert zero.returncode == 2 and "resources.workers" in zero.stderr and "greater than 0" in zero.stderr, zero.stderr
    too_many = wb("run", write_mixed_study(tmp_path, "many", workers=4, cpu=2), "--workdir", tmp_path / "w")
    assert too_many.returncode == 2, too_many.stderr[-2000:]
    assert "resources.workers=4 with resources.cpu=2 per worker needs 8 CPUs" in too_many.stderr
    uneven = wb("run", write_mixed_study(tmp_path, "uneven", workers=5), "--workdir", tmp_path / "w")
    assert uneven.returncode == 2 and "train.batch_size 4 x train.grad_accum 3 = 12 sequences" in uneven.stderr
    shared_gpu = wb("run", write_mixed_study(tmp_path, "shared", workers=2, gpu=0.5), "--workdir", tmp_path / "w")
    assert shared_gpu.returncode == 2 and "resources.gpu=0.5 with 2 workers" in shared_gpu.stderr, shared_gpu.stderr
    assert not (tmp_path / "w" / "mlflow.db").exists()  # nothing tracked
    spec = tmp_path / "trial.yaml"
    spec.write_text(yaml.safe_dump(TINY))
    refused = wb("train", spec, "--out", tmp_path / "o", "--workers", "0")
    assert refused.returncode == 2 and "--workers=0: a trial needs at least one worker" in refused.stderr
    with pytest.raises(SpecError, match="does not split evenly over 5 workers"):
        check_divisible(tiny().train, 5)


def start_node(args: list[str]) -> subprocess.Popen:
    # A node joining a cluster (and `ray status`) sends the token `ray start --head` keeps in ~/.ray.
    return subprocess.Popen([str(BIN / "ray"), "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                             "--disable-usage-stats", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, "RAY_AUTH_MODE": "token"})


def wait_for_nodes(address: str, n: int) -> None:
    deadline = time.time() + 120
    while time.time() < deadline:
        status = subprocess.run([str(BIN / "ray"), "status", "--address", address], capture_output=True, text=True,
                                env={**os.environ, "RAY_AUTH_MODE": "token"}, timeout=60).stdout
        active = status.split("Active:")[-1].split("Pending:")[0] if "Active:" in status else ""
        if active.count("node_") >= n:
            return
        time.sleep(1)
    pytest.fail(f"the cluster at {address} did not reach {n} nodes")


def test_a_two_node_cluster_spreads_a_trial_and_refuses_more_gpus_than_it_has(tmp_path):
    """Two `ray start` nodes on 127.0.0.1 of one CPU each (the head declares one GPU): a 2-worker
    trial of one CPU per worker fits only across both; 2 workers of a GPU each are refused. The
    study mixes one- and two-worker trials and records each once (assert_mixed_study_recorded_each_once:
    one run of the study serves both, each took a minute on 2 cores)."""
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="wbn-", dir="/tmp")
    address = f"127.0.0.1:{port}"
    nodes = [start_node(["--head", "--port", str(port), "--temp-dir", temp_dir, "--num-gpus", "1",
                         "--include-dashboard=false"])]
    try:
        wait_for_nodes(address, 1)
        nodes.append(start_node(["--address", address]))
        wait_for_nodes(address, 2)
        gpus = wb("run", write_mixed_study(tmp_path, "gpus", workers=2, gpu=1), "--workdir", tmp_path / "g",
                  "--ray-address", address)
        assert gpus.returncode == 2 and "needs 2 GPUs; the Ray cluster has 1" in gpus.stderr, gpus.stderr[-2000:]
        assert not (tmp_path / "g" / "mlflow.db").exists()
        study = write_mixed_study(tmp_path, "mixed", workers=2)
        proc = wb("run", study, "--workdir", tmp_path / "w", "--ray-address", address, "--progress-seconds", "0.5",
                  timeout=400)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs = trial_runs(tmp_path / "w", "mixed")[1]
        assert sorted(r.data.tags["workers"] for r in runs) == ["1", "2"]
        assert {r.info.status for r in runs} == {"FINISHED"}
    finally:
        for node in reversed(nodes):
            stop_ray_head(node)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert_mixed_study_recorded_each_once(study, tmp_path / "w")

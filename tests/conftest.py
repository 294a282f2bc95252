import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

# The Triton interpreter must be chosen before triton decorates the kernels: on a machine without
# CUDA every kernel test runs on the CPU under it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[1]

# `wb run` on a pytest worker's shared Ray cluster runs in the worker's own process (tests/cli.py).
# Ray 2.60 sends the token that `ray start` turns on only where RAY_AUTH_MODE=token was set before
# ray was first imported, which any test module may do: so here, before them all.
os.environ.setdefault("RAY_AUTH_MODE", "token")
# Two of Ray's waits that a test only sits out, set here so that every Ray the tests start inherits
# them (the shared clusters, a test's own `ray start` nodes, the local Ray of a `wb run` subprocess):
# - a `ray start --block` node stopped by SIGTERM first drains for up to 30 s while any worker of
#   it is alive (Ray Train leaves one); 0: no drain;
# - Ray Train's controller takes a worker's report off its queue (one report deep) every 2 s, so a
#   worker's second report within 2 s waits for it; the trial's steps, reports and records are the
#   same at 0.2 s (docs/performance.md, "The test suite").
os.environ.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative L2 error ||a - b|| / ||b|| in fp64."""
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def once_across_workers(tmp_path_factory, name: str, make):
    """A session fixture's study, run once for the whole test run: under pytest-xdist the first
    worker to ask runs ``make(folder)`` -> (workdir, completed process, seconds) while the others
    wait on a lock in the run's shared temp dir, then read what it left there (the study's store is
    only read by the tests that share it). Without xdist, once per session as before."""
    import json

    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the temp dir every worker's own lies in
    done = shared / f"{name}.json"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.is_file():
            folder = shared / name
            folder.mkdir(exist_ok=True)
            workdir, proc, seconds = make(folder)
            done.write_text(json.dumps({"workdir": str(workdir), "args": proc.args if isinstance(proc.args, list) else str(proc.args),
                                        "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                                        "seconds": seconds}))
    got = json.loads(done.read_text())
    proc = subprocess.CompletedProcess(got["args"], got["returncode"], got["stdout"], got["stderr"])
    return Path(got["workdir"]), proc, got["seconds"]


def _run_quickstart(folder: Path):
    workdir = folder / "w"
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "foxwb.workbench.cli.main", "run", str(ROOT / "studies/quickstart.yaml"),
                           "--workdir", str(workdir)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    return workdir, proc, time.time() - start


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory):
    """The README's main job, run once for the test run (once_across_workers): `wb run
    studies/quickstart.yaml` into a fresh workdir. Returns (workdir, completed process, seconds)."""
    return once_across_workers(tmp_path_factory, "quickstart", _run_quickstart)


def _train_tiny(folder: Path):
    """`wb train studies/trial_tiny.yaml` on one thread, not the file's two: beside a study on 2
    cores the two OpenMP threads, each waiting on the other, took 430 s (34 s on a quiet machine)."""
    import yaml

    spec = yaml.safe_load((ROOT / "studies/trial_tiny.yaml").read_text())
    spec["train"]["cpu_threads"] = 1
    (folder / "trial_tiny_1thread.yaml").write_text(yaml.safe_dump(spec))
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "foxwb.workbench.cli.main", "train", str(folder / "trial_tiny_1thread.yaml"),
                           "--out", str(folder / "out")], capture_output=True, text=True, cwd=ROOT, timeout=900)
    return folder / "out", proc, time.time() - start


@pytest.fixture(scope="session")
def tiny_trial(tmp_path_factory):
    """studies/trial_tiny.yaml's trial, trained once for the test run (once_across_workers) and
    only read by the tests that share it (its result, `wb eval` of it). Returns (trial folder,
    completed process, seconds)."""
    return once_across_workers(tmp_path_factory, "tiny_trial", _train_tiny)


@pytest.fixture(scope="session")
def random_search_confirmed(tmp_path_factory):
    """A tiny tune-then-confirm study with a random search and ASHA, run once (once_across_workers)
    for the tests of its store (tests/workbench/run/test_confirm.py) and of its dashboard page
    (tests/dashboards/test_confirm_site.py). Returns (workdir, completed process, seconds)."""
    from tests.workbench.run.test_confirm import run_random_asha

    return once_across_workers(tmp_path_factory, "random_asha", run_random_asha)


def pytest_sessionfinish(session, exitstatus):
    from tests.cli import stop_shared_ray

    stop_shared_ray()

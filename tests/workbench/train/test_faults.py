"""Faults of the environment get one sentence, a non-zero exit and nothing half-written: a file as
workdir, read-only folders and stores, a busy port, a closed pipe, a write that fails mid-way."""
import ctypes
import os
import re
import resource
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workbench.drivers import Background, runs
from tests.workbench.run.test_run import MINI_BASE, ROOT, wb, write_study
from tests.workbench.train.test_trial import small_trial, wb_train
from foxwb.workbench.run.tracking import create_local_store


def as_a_user():
    """preexec_fn: file permissions hold for the child even when the tests run as root (it loses
    CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, as any user lacks them)."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0):  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def wb_as_user(*args, timeout=180):
    return wb(*args, timeout=timeout, own_ray=True, preexec_fn=as_a_user)  # a process and a Ray of its own


def one_error(proc, expected: str, rc: int) -> None:
    assert proc.returncode == rc, (proc.returncode, proc.stderr[-3000:])
    # (`wb train`'s progress line ends in a carriage return, not a newline: the error may follow it)
    errors = [line[line.index("error:"):] for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and expected in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


@pytest.fixture
def read_only(tmp_path):
    """Folders made read-only by the test, writable again afterwards (so tmp_path can be removed)."""
    made = []

    def make(path: Path, mode=0o555):
        path.chmod(mode)
        made.append(path)
        return path

    yield make
    for path in made:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_file_as_workdir_is_refused_by_every_command(tmp_path):
    study = write_study(tmp_path)
    (tmp_path / "w").write_text("not a folder")
    for command in (("run", study), ("results", study), ("status", study), ("dashboard",)):
        proc = wb(*command, "--workdir", tmp_path / "w", timeout=120)
        one_error(proc, "--workdir", 2)
        assert "is a file, not a folder" in proc.stderr


def test_a_read_only_workdir_or_store_is_refused_before_anything_runs(tmp_path, read_only):
    study = write_study(tmp_path)
    (tmp_path / "w").mkdir()
    workdir = read_only(tmp_path / "w")
    one_error(wb_as_user("run", study, "--workdir", workdir), "cannot write there", 2)
    assert list(workdir.iterdir()) == []
    other = tmp_path / "v"
    other.mkdir()
    create_local_store(other)
    read_only(other / "mlflow.db", 0o444)
    one_error(wb_as_user("run", study, "--workdir", other), f"the tracking store {other / 'mlflow.db'} cannot be written", 2)
    assert sorted(p.name for p in other.iterdir()) == ["mlflow.db"]


def test_a_read_only_dashboard_folder_and_a_busy_port_get_a_sentence(tmp_path, read_only):
    create_local_store(tmp_path)
    (tmp_path / "site").mkdir()
    out = read_only(tmp_path / "site")
    one_error(wb_as_user("dashboard", "--workdir", tmp_path, "--out", out), f"--out {out}: cannot write there", 2)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = wb("dashboard", "--workdir", tmp_path, "--out", tmp_path / "site2", "--serve", "--port", port, timeout=120)
    one_error(proc, f"--port {port}: cannot serve on 127.0.0.1:{port}", 2)
    assert "--port 0" in proc.stderr


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`wb info fox_pro | head -0`: the reader is gone before the first line."""
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.run([sys.executable, "-m", "foxwb.workbench.cli.main", "info", "fox_pro"], stdout=write,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr


def file_size_limit(limit: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_checkpoint_that_cannot_be_written_leaves_nothing_half_written(tmp_path):
    """A file-size limit (as a full disk would) hits the first checkpoint: one sentence, no partial
    checkpoint, no temporary file, no result."""
    trial = small_trial(tmp_path, tokens=8192, checkpoint_every_tokens=4096)
    out = tmp_path / "out"
    out.mkdir()
    proc = wb_train(trial, out, timeout=180, preexec_fn=file_size_limit(200_000))
    one_error(proc, f"could not write {out / 'checkpoint.pt'}", 1)
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "spec.json"]


def test_a_result_that_cannot_be_written_keeps_the_previous_one_whole(tmp_path):
    """result.json (and spec.json) go through trial.write_json: a write that fails mid-file (a
    file-size limit, as a full disk would; in this process, for the few milliseconds of the write)
    raises the sentence and leaves the previous result as it was, with no temporary beside it."""
    from foxwb.workbench.data.atomic import WriteError
    from foxwb.workbench.train.trial import write_json

    path = tmp_path / "result.json"
    write_json(path, {"val_loss": 3.0})
    before = path.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(WriteError, match=f"could not write {path}: File too large; the previous version"):
            write_json(path, {"val_loss": 2.5, "per_position_loss": [2.5] * 4096})  # ~30 kB
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_a_store_that_stops_taking_writes_stops_the_study_with_a_sentence(tmp_path, read_only):
    long_train = {**MINI_BASE["train"], "tokens": 262144, "eval_every_tokens": 32768}
    study = write_study(tmp_path, name="ro", base={**MINI_BASE, "train": long_train})
    workdir = tmp_path / "w"
    driver = Background(tmp_path, "run", study, "--workdir", workdir, preexec_fn=as_a_user)
    try:
        driver.wait_for(lambda: any(r.info.status == "RUNNING" for r in runs(workdir, "ro")), what="a trial running")
        read_only(workdir / "mlflow.db", 0o444)
        read_only(workdir)
        rc = driver.wait(timeout=120)
    finally:
        driver.kill()
    assert rc == 1 and "Traceback" not in driver.stderr, driver.stderr[-3000:]
    # SQLite names the failure by where the write met the read-only file: the database itself, or
    # the journal it could not create beside it (seen in CI); either is the store refusing writes.
    reasons = "(attempt to write a readonly database|disk I/O error)"
    assert re.search(f"the study stopped before its end: the tracking store could not be written: {reasons}\n",
                     driver.stdout), driver.stdout[-3000:]


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range_is_refused_with_the_range(tmp_path, port):
    proc = wb("dashboard", "--workdir", tmp_path, "--serve", "--port", port, timeout=60)
    one_error(proc, "--port", 2)
    assert f"--port {port}: a port is 0-65535" in proc.stderr


class _RunsCode:
    """What a checkpoint must never do when read: its unpickling creates a file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_checkpoint_that_carries_code_is_refused_unread(tmp_path):
    """A checkpoint is read with weights_only: one holding a pickled object (here one whose loading
    would create a file) is refused with a sentence naming the file, and nothing in it runs; the
    dry run's step reader treats it as no checkpoint."""
    import torch

    from foxwb.workbench.train.loop import TrainError, checkpoint_step, read_checkpoint

    marker, path = tmp_path / "ran", tmp_path / "checkpoint.pt"
    torch.save({"model": {}, "optimizer": {}, "step": 3, "tokens": 96, "spec_hash": "abc",
                "history": [_RunsCode(marker)]}, path)
    with pytest.raises(TrainError, match=f"{path}: not a checkpoint of tensors and plain data .*refused unread"):
        read_checkpoint(path, "abc")
    assert checkpoint_step(path) is None and not marker.exists()
    torch.save({"model": {"w": torch.ones(2)}, "optimizer": {"state": {}, "param_groups": [{"betas": (0.9, 0.95)}]},
                "step": 3, "tokens": 96, "spec_hash": "abc", "history": [{"loss": 2.5}]}, path)
    assert read_checkpoint(path, "abc")["step"] == 3 and checkpoint_step(path) == 3

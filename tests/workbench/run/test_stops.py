"""A study stopped from outside, on real Ray and MLflow: Ctrl-C (exit 130, runs KILLED, the rerun
resumes from the checkpoints with the whole history) and its Ray cluster lost under it (the
summary within seconds, no hang)."""
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

from tests.workbench.drivers import Background, checkpoints, runs
from tests.workbench.run.test_run import MINI_BASE, free_port, start_ray_head, stop_ray_head, wb, write_study

# Long enough to be stopped mid-way on a busy 2-core machine, checkpointed early.
LONG_TRAIN = {**MINI_BASE["train"], "tokens": 81920, "checkpoint_every_tokens": 4096, "eval_every_tokens": 16384}
ONE_CHANGE = [{"name": "lr 3e-3", "set": {"train.lr": 0.003}}]


def loss_series(client, run) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train_loss"))


def running_with_a_checkpoint(workdir: Path, experiment: str) -> list[str]:
    """Spec hashes of the trials whose run is RUNNING and whose checkpoint is written."""
    written = {path.parent.name for path in checkpoints(workdir)}
    return [r.data.tags["spec_hash"] for r in runs(workdir, experiment)
            if r.info.status == "RUNNING" and r.data.tags.get("spec_hash") in written]


def stopped_while_training(tmp_path: Path, study: Path, workdir: Path, experiment: str, stop,
                           preexec_fn=None) -> Background:
    """`wb run` in the background, ``stop(driver)`` once a trial runs with a checkpoint: the driver
    ends within a minute, with exit 130 and no traceback."""
    driver = Background(tmp_path, "run", study, "--workdir", workdir, preexec_fn=preexec_fn)
    try:
        driver.wait_for(lambda: running_with_a_checkpoint(workdir, experiment), what="a trial running with a checkpoint")
        stop(driver)
        start = time.time()
        assert driver.wait(timeout=90) == 130, driver.stderr[-3000:]
    finally:
        driver.kill()
    assert time.time() - start < 60
    assert "Traceback" not in driver.stderr
    return driver


def test_ctrl_c_kills_the_runs_exits_130_and_the_rerun_resumes_with_the_whole_history(tmp_path):
    """Ctrl-C once a trial runs with a checkpoint. On a quiet machine one trial may have finished
    by then (each takes seconds), on a busy one the other may not have written its first
    checkpoint yet: every trial running at the signal is KILLED, a finished one stays FINISHED,
    every checkpoint written by then is kept, and the rerun finishes each trial with its whole
    loss curve (from its checkpoint, or from the start where it had none)."""
    from tests.workbench.drivers import store

    study = write_study(tmp_path, name="stopped", changes=ONE_CHANGE, base={**MINI_BASE, "train": LONG_TRAIN})
    workdir = tmp_path / "w"
    at_signal: set[str] = set()

    def ctrl_c(driver):
        at_signal.update(path.parent.name for path in checkpoints(workdir))
        driver.signal_group(signal.SIGINT)  # Ctrl-C in a terminal: the signal to the driver's whole process group

    driver = stopped_while_training(tmp_path, study, workdir, "stopped", ctrl_c)
    out = driver.stdout
    trials = runs(workdir, "stopped")
    killed = [r for r in trials if r.info.status == "KILLED"]
    assert killed and all(r.info.status in ("KILLED", "FINISHED") for r in trials), [r.info.status for r in trials]
    assert f"{len(killed)} stopped mid-way" in out and "it is resumable" in out, out
    assert f"wb run {study} --workdir {workdir}" in out
    assert all(r.data.tags["error"].startswith("interrupted") for r in killed)
    assert [r.info.status for r in runs(workdir, "stopped", "study")] == ["KILLED"]
    written = {path.parent.name for path in checkpoints(workdir)}
    # The resume line says what is on disk: this study writes checkpoints, a trial killed before
    # its first has none yet.
    if {r.data.tags["spec_hash"] for r in killed} <= written:
        assert "stopped trials resume from their last checkpoint" in out, out
    else:
        assert "1 stopped trial resumes from the last checkpoint, 1 starts again: they had written no checkpoint yet" in out, out
    assert at_signal and at_signal <= written  # kept for the rerun
    assert {r.data.tags["spec_hash"] for r in killed} & written  # at least one trial resumes from its checkpoint

    again = wb("run", study, "--workdir", workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    # The driver says (on stderr, with its other trial lines) how many trials resume and where each picked up.
    resumed = {r.data.tags["spec_hash"] for r in killed} & written
    assert f"{len(killed)} to run ({len(resumed)} from a checkpoint)" in again.stderr, again.stderr[-3000:]
    at = {}
    for spec_hash in resumed:
        found = re.search(rf"resume .*\[{spec_hash}\]  from its checkpoint at step \d+, ([\d,]+)/{LONG_TRAIN['tokens']:,} tokens",
                          again.stderr)
        assert found, again.stderr[-3000:]
        at[spec_hash] = found.group(1).replace(",", "")
    # The closing summary counts them among the trials that finished now.
    assert f"{len(killed)} finished now ({len(resumed)} of them from a checkpoint); 0 failed" in again.stdout, \
        again.stdout[-3000:]
    client, _ = store(workdir, "stopped")
    finished = [r for r in runs(workdir, "stopped") if r.info.status == "FINISHED"]
    # Each resumed run records where it picked up (wb status's rate leaves out the steps before it).
    assert {r.data.tags["spec_hash"]: r.data.tags["resumed_tokens"] for r in finished if "resumed_tokens" in r.data.tags} == at
    # The resumed trials' tracked loss curves are those of an uninterrupted run, from the first step.
    fresh = tmp_path / "fresh"
    straight = wb("run", study, "--workdir", fresh)
    assert straight.returncode == 0, straight.stderr[-3000:]
    fresh_client, _ = store(fresh, "stopped")
    expected = {r.data.tags["spec_hash"]: loss_series(fresh_client, r) for r in runs(fresh, "stopped")}
    assert sorted(r.data.tags["spec_hash"] for r in finished) == sorted(expected)  # each trial finished once
    steps = LONG_TRAIN["tokens"] // (LONG_TRAIN["batch_size"] * MINI_BASE["data"]["context"])
    for run in finished:
        series = loss_series(client, run)
        assert len(series) == steps and series == expected[run.data.tags["spec_hash"]]


def test_sigterm_to_the_driver_alone_stops_the_study_as_ctrl_c_does(tmp_path):
    """SIGTERM (`kill PID`, a scheduler ending a job) reaches the driver only, not the trials' Ray
    workers as Ctrl-C in a terminal does: the driver stops them itself. Exit 130, the run KILLED
    with the reason naming SIGTERM, the parent KILLED, the checkpoint kept. One trial, no rerun:
    the resume is the Ctrl-C test's."""
    one = {"kind": "variants", "variants": [{"name": "FoX (Pro)", "set": {"train.lr": 0.003}}]}
    alone = {**LONG_TRAIN, "tokens": 8 * LONG_TRAIN["tokens"]}  # one trial alone runs 81920 tokens in 5 s
    study = write_study(tmp_path, name="termed", base={**MINI_BASE, "train": alone}, design=one)
    workdir = tmp_path / "w"
    driver = stopped_while_training(tmp_path, study, workdir, "termed", lambda d: os.kill(d.proc.pid, signal.SIGTERM))
    assert "1 stopped mid-way" in driver.stdout and "it is resumable" in driver.stdout, driver.stdout
    trials = runs(workdir, "termed")
    assert [r.info.status for r in trials] == ["KILLED"]
    assert trials[0].data.tags["error"] == "interrupted (SIGTERM to the driver)"
    assert [r.info.status for r in runs(workdir, "termed", "study")] == ["KILLED"]
    assert len(checkpoints(workdir)) == 1


def test_sighup_stops_the_study_as_sigterm_does_unless_it_runs_under_nohup(tmp_path):
    """The terminal closing (an SSH session dropped) sends SIGHUP: the runs are KILLED with that
    reason, resumable, not left RUNNING by a driver gone at once. Under `nohup` (SIGHUP ignored)
    the study goes on to its end."""
    one = {"kind": "variants", "variants": [{"name": "FoX (Pro)", "set": {"train.lr": 0.003}}]}
    alone = {**LONG_TRAIN, "tokens": 8 * LONG_TRAIN["tokens"]}
    study = write_study(tmp_path, name="hung", base={**MINI_BASE, "train": alone}, design=one)
    workdir = tmp_path / "w"
    # SIGHUP as a terminal leaves it, not ignored as under a `nohup` the test suite may itself run in.
    stopped_while_training(tmp_path, study, workdir, "hung", lambda d: os.kill(d.proc.pid, signal.SIGHUP),
                           preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    trials = runs(workdir, "hung")
    assert [r.info.status for r in trials] == ["KILLED"]
    assert trials[0].data.tags["error"] == "interrupted (SIGHUP to the driver)"

    short = write_study(tmp_path, name="nohup", base={**MINI_BASE, "train": LONG_TRAIN}, design=one)
    driver = Background(tmp_path, "run", short, "--workdir", workdir, name="nohup",
                        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        driver.wait_for(lambda: running_with_a_checkpoint(workdir, "nohup"), what="a trial running with a checkpoint")
        os.kill(driver.proc.pid, signal.SIGHUP)
        assert driver.wait(timeout=120) == 0, driver.stderr[-3000:]
    finally:
        driver.kill()
    assert [r.info.status for r in runs(workdir, "nohup")] == ["FINISHED"]


def test_a_closed_output_stops_the_study_as_killed_with_exit_141_not_as_a_store_failure(tmp_path):
    """`wb run S 2>&1 | head -3`: once the reader is gone, the next line the driver writes fails.
    The study stops as a shell would stop a writer to a closed pipe (exit 141), its runs KILLED
    with that reason, not failed as if the tracking store had failed, and nothing more written."""
    import subprocess
    import sys

    from tests.workbench.drivers import kill_session
    from tests.workbench.run.test_run import ROOT

    one = {"kind": "variants", "variants": [{"name": "FoX (Pro)", "set": {"train.lr": 0.003}}]}
    alone = {**LONG_TRAIN, "tokens": 16 * LONG_TRAIN["tokens"]}  # about 80 s: a progress line every 30 s
    study = write_study(tmp_path, name="piped", base={**MINI_BASE, "train": alone}, design=one)
    workdir = tmp_path / "w"
    proc = subprocess.Popen([sys.executable, "-m", "foxwb.workbench.cli.main", "run", str(study), "--workdir", str(workdir)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        read = b""
        while b"start " not in read:  # the trial has started: the reader has seen enough
            line = proc.stdout.readline()
            assert line, f"the driver ended (rc {proc.wait()}) before its trial started: {read[-3000:]!r}"
            read += line
        proc.stdout.close()
        assert proc.wait(timeout=150) == 141
    finally:
        kill_session(proc)
    trials = runs(workdir, "piped")
    assert [r.info.status for r in trials] == ["KILLED"]
    assert trials[0].data.tags["error"] == "the driver's output was closed (a reader such as `| head` stopped reading)"
    assert [r.info.status for r in runs(workdir, "piped", "study")] == ["KILLED"]


def _gcs_pid(head_pid: int) -> int:
    """The GCS server of the Ray head started by the test (its process group is the head's)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) == head_pid and b"gcs_server" in (entry / "cmdline").read_bytes():
                return int(entry.name)
        except (OSError, ProcessLookupError):
            continue
    raise AssertionError("no gcs_server in the test's Ray head")


def test_a_lost_ray_cluster_ends_the_study_with_its_summary_within_30_s(tmp_path):
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="wbray-", dir="/tmp")
    head = start_ray_head(port, temp_dir)
    study = write_study(tmp_path, name="lost", changes=ONE_CHANGE, base={**MINI_BASE, "train": LONG_TRAIN})
    workdir = tmp_path / "w"
    driver = Background(tmp_path, "run", study, "--workdir", workdir, "--ray-address", f"127.0.0.1:{port}")
    try:
        driver.wait_for(lambda: any(r.info.status == "RUNNING" for r in runs(workdir, "lost")),
                        what="a trial running")
        os.kill(_gcs_pid(head.pid), signal.SIGKILL)
        start = time.time()
        rc = driver.wait(timeout=60)
        seconds = time.time() - start
    finally:
        driver.kill()
        stop_ray_head(head)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert rc == 1 and seconds < 30, (rc, seconds, driver.stderr[-3000:])
    assert "the study stopped before its end: the Ray cluster stopped answering" in driver.stdout, driver.stdout
    statuses = [r.info.status for r in runs(workdir, "lost")]
    assert statuses and "RUNNING" not in statuses and "KILLED" in statuses
    assert [r.info.status for r in runs(workdir, "lost", "study")] == ["FAILED"]


def test_the_stopper_tune_pickles_carries_nothing_of_the_drivers():
    """Tune pickles its run settings, the stopper among them. The driver's Stops hold the signal
    handlers they replaced, which may close over what cannot be pickled (Ray Train leaves a Ctrl-C
    handler holding its controller; pickling the actor of a Ray session that has ended ends the
    process): the stopper carries a key, not the Stops."""
    import threading

    import ray.cloudpickle

    from foxwb.workbench.run.stops import Stops

    lock = threading.Lock()  # cannot be pickled, as the stale actor cannot
    previous = signal.signal(signal.SIGINT, lambda signum, frame: lock.acquire())
    stops = Stops().install()
    try:
        stopper = ray.cloudpickle.loads(ray.cloudpickle.dumps(stops.stopper()))
        assert not stopper.stop_all()
        stops.request("interrupted", "interrupted (test)")
        assert stopper.stop_all()  # the copy finds the driver's Stops by its key
    finally:
        stops.uninstall()
        signal.signal(signal.SIGINT, previous)
    assert not stopper.stop_all()  # uninstalled: forgotten

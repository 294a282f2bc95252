"""One driver per study: the lease on the study's parent run, against the workdir's SQLite store and
an MLflow server, and two `wb run` of one study on real Ray."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from tests.workbench.drivers import Background, runs, store as open_store
from tests.cli import start_mlflow_server
from tests.workbench.run.test_run import MINI_BASE, free_port, write_study
from foxwb.workbench.run import lease
from foxwb.workbench.run.lease import TAG, Lease, LeaseHeld
from foxwb.workbench.run.tracking import Store, create_local_store, local_tracking_uri


@pytest.fixture(scope="module", params=["sqlite", "server"])
def tracking_uri(request, tmp_path_factory):
    """A fresh SQLite store, or an MLflow server on one (as drivers on several machines share)."""
    folder = tmp_path_factory.mktemp(request.param)
    create_local_store(folder)
    uri = local_tracking_uri(folder)
    if request.param == "sqlite":
        yield uri
        return
    port = free_port()
    server = start_mlflow_server(uri, port)
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


@pytest.fixture
def parent(tracking_uri, tmp_path):
    """(store, parent run id) of a study of its own."""
    store = Store(tracking_uri, tmp_path.name, tmp_path / "mlartifacts")
    return store, store.parent_run("leased")


def test_of_two_drivers_claiming_at_once_exactly_one_holds_the_study(parent):
    store, run_id = parent
    barrier, won, refused = threading.Barrier(2), [], []

    def claim():
        mine = Lease(store.client, run_id, "leased")
        barrier.wait()
        try:
            won.append(mine.claim())
        except LeaseHeld as e:
            refused.append(str(e))

    threads = [threading.Thread(target=claim) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(won) == 1 and len(refused) == 1, (won, refused)
    assert lease.read(store.client, run_id)["token"] == won[0].token
    won[0].release()
    assert lease.read(store.client, run_id) is None


def _held_by(store, run_id, host: str, pid: int, age_s: float, space: str = "") -> None:
    store.client.set_tag(run_id, TAG, json.dumps({"host": host, "pid": pid, "space": space, "token": "theirs",
                                                  "heartbeat": time.time() - age_s}))


def test_a_fresh_lease_is_refused_even_with_take_over_and_a_stale_one_is_taken_over(parent):
    store, run_id = parent
    _held_by(store, run_id, "other-machine", 4242, age_s=2)
    for take_over in (False, True):
        with pytest.raises(LeaseHeld, match=r"host 'other-machine', pid 4242 .*--take-over") as held:
            Lease(store.client, run_id, "leased").claim(take_over=take_over)
        # With --take-over the refusal says why, rather than suggesting the flag that was given.
        assert ("--take-over refused: its heartbeat is" in str(held.value)) == take_over, str(held.value)
    _held_by(store, run_id, "other-machine", 4242, age_s=lease.STALE_S + 5)
    with pytest.raises(LeaseHeld, match="stopped sending heartbeats.*--take-over"):
        Lease(store.client, run_id, "leased").claim()
    mine = Lease(store.client, run_id, "leased").claim(take_over=True)
    assert lease.read(store.client, run_id)["token"] == mine.token
    mine.release()


def test_a_lease_of_a_dead_process_on_this_machine_is_taken_without_asking(parent):
    store, run_id = parent
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    # Another container of the same name (another pid namespace): its pid means nothing here.
    _held_by(store, run_id, socket.gethostname(), int(gone.stdout), age_s=1, space="other-boot:1")
    with pytest.raises(LeaseHeld, match="being run by another driver"):
        Lease(store.client, run_id, "leased").claim()
    _held_by(store, run_id, socket.gethostname(), int(gone.stdout), age_s=1, space=lease.process_space())
    Lease(store.client, run_id, "leased").claim().release()


def test_the_heartbeat_goes_on_and_a_taken_over_lease_is_noticed(parent, monkeypatch):
    store, run_id = parent
    monkeypatch.setattr(lease, "HEARTBEAT_S", 0.3)
    lost = threading.Event()
    mine = Lease(store.client, run_id, "leased").claim(on_lost=lambda reason: lost.set())
    first = lease.read(store.client, run_id)["heartbeat"]
    # Every 0.3 s; under a loaded machine a write to the tracking server can take seconds.
    deadline = time.time() + 30
    while lease.read(store.client, run_id)["heartbeat"] <= first:
        assert time.time() < deadline, "the heartbeat did not advance in 30 s"
        time.sleep(0.1)
    # Another driver takes it over (as if this one's heartbeat had looked stale to it): either this
    # one notices, or its heartbeat landed last and the other withdraws; never both hold it.
    monkeypatch.setattr(lease, "STALE_S", 0.0)
    for _ in range(5):
        try:
            theirs = Lease(store.client, run_id, "leased").claim(take_over=True)
            break
        except LeaseHeld:
            assert not lost.is_set()
    assert lost.wait(30)
    mine.release()  # not ours any more: left as the other driver wrote it
    assert lease.read(store.client, run_id)["token"] == theirs.token
    theirs.release()


def test_a_second_wb_run_of_a_running_study_is_refused_and_touches_nothing(tmp_path):
    long_train = {**MINI_BASE["train"], "tokens": 262144, "eval_every_tokens": 65536}
    study = write_study(tmp_path, name="once", changes=[{"name": "lr 3e-3", "set": {"train.lr": 0.003}}],
                        base={**MINI_BASE, "train": long_train})
    workdir = tmp_path / "w"
    first = Background(tmp_path, "run", study, "--workdir", workdir)
    try:
        first.wait_for(lambda: sum(r.info.status == "RUNNING" for r in runs(workdir, "once")) == 2,
                       what="both trials running")
        start = time.time()
        others = [Background(tmp_path, "run", study, "--workdir", workdir, *extra, name=f"second{len(extra)}")
                  for extra in ((), ("--take-over",))]  # plain, and a take-over while the heartbeat is fresh
        for second in others:
            assert second.wait(timeout=60) == 2, second.stderr[-3000:]
            assert "Traceback" not in second.stderr and "--take-over" in second.stderr
            assert f"pid {first.proc.pid}" in second.stderr and socket.gethostname() in second.stderr
        assert time.time() - start < 40
        assert first.proc.poll() is None, "the first driver ended before the second was refused"
        assert first.wait(timeout=300) == 0, first.stderr[-3000:]
    finally:
        first.kill()
    trials = runs(workdir, "once")
    assert [r.info.status for r in trials] == ["FINISHED", "FINISHED"]
    assert len({r.data.tags["spec_hash"] for r in trials}) == 2
    client, _ = open_store(workdir, "once")
    assert lease.read(client, runs(workdir, "once", "study")[0].info.run_id) is None  # released at the end

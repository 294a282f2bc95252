"""The ETA of `wb run`'s live view and of `wb status` leaves out a trial's start-up: a simulated
trial compiles for 60 s before its first step of 1,000 tokens, then trains 1,000 tokens a second.
Its rate is measured from its first step on; before a second step there is none ("estimating...").
Counted from its start instead, its first ETA read minutes for a trial a minute from its end."""
import io

import pytest
from foxwb.workbench.analysis.status import running_detail
from foxwb.workbench.run import live_view as progress
from foxwb.workbench.run.live_view import LiveView
from foxwb.workbench.run.tracking import Store, create_local_store, local_tracking_uri
from foxwb.workbench.spec.errors import validate
from foxwb.workbench.spec.study import StudySpec, expand

TOTAL = 70_000
# (seconds since the start, tokens) of each step: the first ends after 60 s of compiling.
STEPS = [(60.0 + i, 1_000 * (i + 1)) for i in range(11)]


def test_the_live_view_says_estimating_then_follows_the_steady_rate(monkeypatch):
    """As the driver sees it: the first report is due at once after the long first step and carries
    that step alone; the next, 10 s on, carries ten more."""
    clock = [1_060.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    stream = io.StringIO()
    view = LiveView(stream, live=False)
    steps = [(1_000.0 + t, n) for t, n in STEPS]
    view.update("t", "A [lr=0.001] / seed 0", TOTAL, 1_000, 5.0, steps=steps[:1])
    assert view.trials["t"].eta_s(1_060.0) is None
    assert stream.getvalue().splitlines()[-1].endswith("1,000/70,000 tokens (1%)  loss 5.000  eta estimating..."), \
        stream.getvalue()
    clock[0] = 1_070.0
    view.update("t", "A [lr=0.001] / seed 0", TOTAL, 11_000, 4.0, steps=steps[1:])
    # 59,000 tokens to go at 1,000 a second; from the start it would read 11,000 in 70 s: 375 s.
    assert view.trials["t"].eta_s(1_070.0) == pytest.approx(59.0)
    assert view.trials["t"].line(1_070.0).endswith("eta 59 s")


def test_a_resumed_trials_rate_leaves_out_its_start_up_after_the_resume(monkeypatch):
    """Resumed at 40,000 tokens, it sends its earlier steps again (with their old times) and compiles
    for 60 s again: its first step past the checkpoint is the origin."""
    clock = [2_060.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    view = LiveView(io.StringIO(), live=False)
    old = [(float(t), n) for t, n in STEPS[:1] + [(100.0, 40_000)]]
    view.update("r", "A / seed 0", TOTAL, 41_000, 3.0, start_tokens=40_000, steps=old + [(2_060.0, 41_000)])
    assert view.trials["r"].eta_s(2_060.0) is None
    clock[0] = 2_070.0
    view.update("r", "A / seed 0", TOTAL, 51_000, 2.9, start_tokens=40_000,
                steps=[(2_060.0 + i, 41_000 + 1_000 * i) for i in range(1, 11)])
    assert view.trials["r"].eta_s(2_070.0) == pytest.approx(19.0)


@pytest.fixture()
def running(tmp_path):
    """A trial run in a real store, started now, and its trained tokens."""
    base = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2},
            "data": {"kind": "builtin", "context": 32}, "train": {"tokens": TOTAL, "batch_size": 8}}
    study = {"name": "compiles", "base": base, "seeds": [0], "design": {"kind": "variants", "variants": [{"name": "a"}]}}
    trial = expand(validate(StudySpec, study))[0]
    create_local_store(tmp_path)
    store = Store(local_tracking_uri(tmp_path), "compiles", tmp_path / "mlartifacts")
    run_id = store.start_trial(store.study_run("compiles", "", "test"), "compiles", trial, "test")
    return store, run_id, trial.spec.train.trained_tokens(trial.spec.data.context)


def test_wb_status_says_estimating_then_follows_the_steady_rate(running):
    store, run_id, total = running
    started = store.client.get_run(run_id).info.start_time  # ms
    rows = [("train_loss", 5.0 - i / 10, n, started + int(1000 * t)) for i, (t, n) in enumerate(STEPS)]
    store.log_metrics(run_id, rows[:1])
    detail = running_detail(store, store.client.get_run(run_id), started / 1000 + 60)
    assert detail.endswith("1,000/70,144 tokens (1%)  loss 5.000  eta estimating..."), detail
    store.log_metrics(run_id, rows[1:])
    detail = running_detail(store, store.client.get_run(run_id), started / 1000 + 70)
    assert f"eta {round((total - 11_000) / 1_000)} s" in detail, detail  # 1,000 tokens a second from the first step


def test_wb_status_counts_a_resumed_trials_rate_from_its_first_step_after_the_resume(running):
    store, run_id, total = running
    started = store.client.get_run(run_id).info.start_time
    hour_ago = started - 3_600_000
    store.log_metrics(run_id, [("train_loss", 4.0, 1_000 * i, hour_ago + 1_000 * i) for i in range(1, 41)])
    store.resumed(run_id, 40_000)
    # 60 s of loading and compiling after the resume, then 1,000 tokens a second.
    store.log_metrics(run_id, [("train_loss", 3.0, 41_000, started + 60_000)])
    detail = running_detail(store, store.client.get_run(run_id), started / 1000 + 60)
    assert "41,000/70,144 tokens" in detail and detail.endswith("eta estimating..."), detail
    store.log_metrics(run_id, [("train_loss", 3.0, 41_000 + 1_000 * i, started + 60_000 + 1_000 * i) for i in range(1, 11)])
    detail = running_detail(store, store.client.get_run(run_id), started / 1000 + 70)
    assert f"eta {round((total - 51_000) / 1_000)} s" in detail, detail

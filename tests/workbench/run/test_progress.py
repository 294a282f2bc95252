"""The ETA that `wb run` and `wb status` both show."""
import io

import pytest

from foxwb.workbench.run import live_view as progress
from foxwb.workbench.run.live_view import LiveView, eta_s


def test_eta_is_the_rate_from_origin_to_last_less_the_time_since():
    # 1,000 tokens in 10 s; 8,000 to go take 80 s from the last report, 5 s ago.
    assert eta_s(10_000, (100.0, 1_000), (110.0, 2_000), 115.0) == pytest.approx(75.0)
    assert eta_s(10_000, (100.0, 1_000), (110.0, 2_000), 500.0) == 0.0  # overdue: never negative
    assert eta_s(10_000, None, (110.0, 2_000), 115.0) is None  # no origin yet
    assert eta_s(10_000, (100.0, 2_000), (110.0, 2_000), 115.0) is None  # no tokens since: no rate


def test_the_live_view_measures_from_the_first_report_once_there_is_a_second(monkeypatch):
    clock = [1_000.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    view = LiveView(io.StringIO(), live=False)
    # Started at 900 (100 s of compiling and loading), first report at 1,000 with 1,000 tokens.
    view.update("t", "A / seed 0", 10_000, 1_000, 4.0, started=900.0)
    assert view.trials["t"].eta_s(1_000.0) == pytest.approx(900.0)  # 10 tokens/s from the start
    clock[0] = 1_010.0
    view.update("t", "A / seed 0", 10_000, 2_000, 3.5, started=900.0)
    # 100 tokens/s from the first report: the start-up time no longer slows the rate.
    assert view.trials["t"].eta_s(1_010.0) == pytest.approx(80.0)
    assert view.trials["t"].eta_s(1_015.0) == pytest.approx(75.0)


def test_a_resumed_trials_first_eta_counts_from_its_checkpoint_not_from_zero(monkeypatch):
    """A trial resumed at 4,000 tokens: its first report's rate is the tokens since the checkpoint,
    not all 5,000 over the seconds since it resumed (an ETA about twice too short)."""
    clock = [1_010.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    view = LiveView(io.StringIO(), live=False)
    view.update("t", "A / seed 0", 10_000, 5_000, 3.0, started=1_000.0, start_tokens=4_000)
    assert view.trials["t"].eta_s(1_010.0) == pytest.approx(50.0)  # 100 tokens/s, 5,000 to go


def test_the_steps_a_report_carries_time_the_rate_from_its_first_step(monkeypatch):
    """Each step is stamped when it ended: the first report's rate already leaves out the start-up
    (here 100 s of compiling before the first step), and a resumed trial's earlier steps, sent again
    with their old times, are not counted."""
    clock = [1_000.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    view = LiveView(io.StringIO(), live=False)
    view.update("t", "A / seed 0", 10_000, 1_000, 4.0, started=900.0, steps=[(995.0, 500), (1_000.0, 1_000)])
    assert view.trials["t"].eta_s(1_000.0) == pytest.approx(90.0)  # 100 tokens/s, not 10 from the start
    view.update("r", "A / seed 1", 10_000, 5_000, 3.0, started=1_000.0, start_tokens=4_000,
                steps=[(10.0, 3_000), (20.0, 4_000), (1_005.0, 4_500), (1_010.0, 5_000)])
    clock[0] = 1_010.0
    assert view.trials["r"].eta_s(1_010.0) == pytest.approx(50.0)  # 100 tokens/s since the resume

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


def test_the_live_view_says_estimating_until_a_second_report_then_measures_from_the_first(monkeypatch):
    """Reports without stamped steps: the first one's time is the origin (started at 900, 100 s of
    compiling and loading before it), so its ETA waits for a second report."""
    clock = [1_000.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    stream = io.StringIO()
    view = LiveView(stream, live=False)
    view.update("t", "A / seed 0", 10_000, 1_000, 4.0)
    assert view.trials["t"].eta_s(1_000.0) is None
    assert stream.getvalue().rstrip().endswith("eta estimating..."), stream.getvalue()
    clock[0] = 1_010.0
    view.update("t", "A / seed 0", 10_000, 2_000, 3.5)
    # 100 tokens/s from the first report: the start-up time does not slow the rate.
    assert view.trials["t"].eta_s(1_010.0) == pytest.approx(80.0)
    assert view.trials["t"].eta_s(1_015.0) == pytest.approx(75.0)


def test_a_resumed_trials_rate_counts_from_its_first_step_past_its_checkpoint(monkeypatch):
    """A trial resumed at 4,000 tokens: its earlier steps, sent again with their old times, are
    not its rate's, nor is its start-up after the resume; one step past the checkpoint is no rate."""
    clock = [1_010.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    view = LiveView(io.StringIO(), live=False)
    view.update("t", "A / seed 0", 10_000, 4_500, 3.0, start_tokens=4_000,
                steps=[(10.0, 3_000), (20.0, 4_000), (1_010.0, 4_500)])
    assert view.trials["t"].eta_s(1_010.0) is None
    assert view.trials["t"].line(1_010.0).endswith("eta estimating...")
    clock[0] = 1_020.0
    view.update("t", "A / seed 0", 10_000, 5_500, 2.9, start_tokens=4_000, steps=[(1_015.0, 5_000), (1_020.0, 5_500)])
    assert view.trials["t"].eta_s(1_020.0) == pytest.approx(45.0)  # 100 tokens/s since its first step, 4,500 to go


def test_the_steps_a_report_carries_time_the_rate_from_its_first_step(monkeypatch):
    """Each step is stamped when it ended: a first report of several steps has a rate already, from
    its first step (here 100 s of compiling before it) to its last."""
    clock = [1_000.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    view = LiveView(io.StringIO(), live=False)
    view.update("t", "A / seed 0", 10_000, 1_000, 4.0, steps=[(995.0, 500), (1_000.0, 1_000)])
    assert view.trials["t"].eta_s(1_000.0) == pytest.approx(90.0)  # 100 tokens/s, not 10 from the start

"""`wb train`'s progress line: its rate and ETA leave out the start-up (loading, compiling), which
all comes before the first step ends; until a second step the ETA reads "estimating...". A
simulated trial compiles for 60 s, then trains 1,000 tokens a second."""
import os
import pty
import select
import subprocess
import sys

import pytest
from foxwb.workbench.train import progress_line
from foxwb.workbench.train.progress_line import Progress

from tests.workbench.train.test_trial import ROOT, small_trial


@pytest.fixture()
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress_line.time, "time", lambda: now[0])
    return now


def lines_of(total, clock, capsys, steps, resumed_at=None):
    """The lines of a Progress fed ``steps`` ((time, tokens), a line each), resumed at
    ``resumed_at`` (time, tokens) first where given."""
    echo = Progress(total)
    echo.tty, echo.every_s = False, 0.0  # a plain line at every step
    if resumed_at is not None:
        clock[0] = resumed_at[0]
        echo.resumed(resumed_at[1], None)
    for i, (t, tokens) in enumerate(steps):
        clock[0] = t
        echo(tokens, {"step": i + 1, "train_loss": 3.0})
    return [line for line in capsys.readouterr().err.splitlines() if " tokens  loss " in line]


def test_the_rate_runs_from_the_first_step_not_from_the_start(clock, capsys):
    lines = lines_of(70_000, clock, capsys, [(60.0 + i, 1_000 * (i + 1)) for i in range(11)])
    assert lines[0].endswith("1,000/70,000 tokens  loss 3.000  ? tok/s  eta estimating..."), lines[0]
    # 59,000 tokens to go at 1,000 a second (from the start: 11,000 in 70 s, an ETA of 375 s).
    assert lines[-1].endswith("11,000/70,000 tokens  loss 3.000  1,000 tok/s  eta 59s"), lines[-1]


def test_a_resumed_trials_rate_runs_from_its_first_step_after_the_resume(clock, capsys):
    """Resumed at 40,000 tokens at t=100, its first step ends at t=160 (compiling again)."""
    steps = [(160.0 + i, 41_000 + 1_000 * i) for i in range(11)]
    lines = lines_of(70_000, clock, capsys, steps, resumed_at=(100.0, 40_000))
    assert lines[0].endswith("eta estimating..."), lines[0]
    assert lines[-1].endswith("1,000 tok/s  eta 19s"), lines[-1]


def test_the_first_line_on_a_terminal_says_estimating(tmp_path):
    """A real tiny trial, its stderr a terminal: the line drawn at the first step has no rate yet."""
    trial = small_trial(tmp_path, tokens=4_000, cpu_threads=1)  # 4 steps of 8 x 128 tokens
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "foxwb.workbench.cli.main", "train", str(trial), "--out",
                             str(tmp_path / "out")], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave)
    os.close(slave)
    out = b""
    try:
        while True:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal's other end closed: the trial is done
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=300) == 0, out.decode(errors="replace")[-2000:]
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    drawn = [d for d in out.decode().replace("\r\n", "\n").split("\r") if " tokens  loss " in d]
    assert drawn and "eta estimating..." in drawn[0] and "1,024/4,096 tokens" in drawn[0], drawn
    assert "4,096/4,096 tokens" in drawn[-1] and "eta 0s" in drawn[-1], drawn

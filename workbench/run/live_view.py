"""What `wb run` shows while trials run: a line per event (a trial starts, finishes, fails) and,
per running trial, its progress (tokens, training loss, ETA). On a terminal the progress lines
stay at the bottom and are redrawn in place; elsewhere (a log file, a pipe) each trial's progress
is a plain line at most every ``PLAIN_EVERY_S`` seconds."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

# The ETA is `wb train`'s (its progress line's): one rate, the same figures in `wb run` and `wb status`.
from foxwb.workbench.train.progress_line import PLAIN_EVERY_S, eta_s

# How often a running trial sends its tokens and loss to the driver (and so to the tracking
# store) between validations; `wb run --progress-seconds`.
REPORT_EVERY_S = 10.0


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 trial``, ``2 trials`` (``plural``: where adding an s is wrong)."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def format_eta(seconds: float | None) -> str:
    """An ETA in words: ``estimating...`` while there is no rate (eta_s gave None)."""
    return "estimating..." if seconds is None else format_seconds(seconds)


@dataclass
class TrialProgress:
    label: str
    total: int
    tokens: int = 0
    loss: float | None = None
    start_tokens: int = 0  # where it started: 0, or its checkpoint's tokens
    # (time, tokens) of its first and its last step past start_tokens: the ETA's rate
    first: tuple[float, int] | None = None
    last: tuple[float, int] | None = None
    printed: float = 0.0  # when its last plain line went out

    def eta_s(self, now: float) -> float | None:
        return None if self.last is None else eta_s(self.total, self.first, self.last, now)

    def line(self, now: float) -> str:
        loss = f"  loss {self.loss:.3f}" if self.loss is not None else ""
        return (f"running  {self.label}  {self.tokens:,}/{self.total:,} tokens ({100 * self.tokens / max(self.total, 1):.0f}%)"
                f"{loss}  eta {format_eta(self.eta_s(now))}")


def format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class LiveView:
    """The lines of one `wb run` on ``stream`` (default stderr)."""

    def __init__(self, stream=None, live: bool | None = None):
        self._stream, self._live = stream, live
        self.trials: dict[str, TrialProgress] = {}
        self.drawn = 0  # progress lines on screen below the last event line

    @property
    def stream(self):
        return self._stream or sys.stderr  # looked up when used: whatever stderr is then

    @property
    def live(self) -> bool:
        if self._live is None:
            isatty = getattr(self.stream, "isatty", None)
            return bool(isatty and isatty())
        return self._live

    def say(self, line: str) -> None:
        self._clear()
        self.stream.write(f"{time.strftime('%H:%M:%S')}  {line}\n")
        self._draw()

    def update(self, key: str, label: str, total: int, tokens: int, loss: float | None, start_tokens: int = 0,
               steps: list[tuple[float, int]] | None = None) -> None:
        """A trial's progress: ``tokens`` trained of ``total``, from ``start_tokens`` (0, or a resumed
        trial's checkpoint's). ``steps``: (time, tokens) of the steps the report carries, each stamped
        when it ended. The rate runs from its first step past ``start_tokens`` to its last, so that
        neither the start-up (loading, compiling: all before the first step ends), nor the reports'
        batching, nor a resumed trial's earlier steps (sent again with their old times) count in it;
        until a second step the ETA reads ``estimating...``. A report without stamped steps counts
        as a step that ended when it came."""
        now = time.time()
        p = self.trials.setdefault(key, TrialProgress(label, total, start_tokens=start_tokens))
        p.tokens, p.loss = tokens, loss if loss is not None else p.loss
        own = [s for s in steps or [] if s[1] > p.start_tokens]
        if not steps and tokens > max(p.start_tokens, p.last[1] if p.last else 0):
            own = [(now, tokens)]
        if own:
            p.first, p.last = p.first or own[0], own[-1]
            p.tokens = p.last[1]
        if self.live:
            self._clear()
            self._draw()
        elif now - p.printed >= PLAIN_EVERY_S:
            p.printed = now
            self.stream.write(f"{time.strftime('%H:%M:%S')}  {p.line(now)}\n")
            self.stream.flush()

    def done(self, key: str) -> None:
        if key in self.trials:
            self._clear()
            del self.trials[key]
            self._draw()

    def _clear(self) -> None:
        if self.live and self.drawn:
            # Up to the first progress line, then erase to the end of the screen.
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")
        self.drawn = 0

    def _draw(self) -> None:
        if self.live:
            now = time.time()
            for p in self.trials.values():
                self.stream.write(f"  {p.line(now)}\n")
            self.drawn = len(self.trials)
        self.stream.flush()


VIEW = LiveView()


def say(line: str) -> None:
    """An event line of the running study, through the live view."""
    VIEW.say(line)

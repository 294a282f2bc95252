"""`wb train`'s progress line on stderr, how often a plain progress line is printed off a terminal
(`wb run`'s live view keeps the same pace), and the rate and ETA of a training, which `wb train`,
`wb run` and `wb status` share. Light on purpose: the live view imports it."""
from __future__ import annotations

import sys
import time
from pathlib import Path


# Off a terminal, a running trial's progress is a plain line at most this often (`wb train` and `wb run`).
PLAIN_EVERY_S = 30.0


def token_rate(origin: tuple[float, int], last: tuple[float, int]) -> float | None:
    """Tokens a second from ``origin`` to ``last`` (each (time, tokens)); None where no time has
    passed or no tokens were trained between them."""
    if last[1] <= origin[1] or last[0] <= origin[0]:
        return None
    return (last[1] - origin[1]) / (last[0] - origin[0])


def eta_s(total: int, origin: tuple[float, int] | None, last: tuple[float, int], now: float) -> float | None:
    """Seconds until a trial has trained ``total`` tokens, at the rate from ``origin`` to ``last``
    (each (time, tokens)), less the time since ``last``: None while there is no rate yet. `wb train`,
    `wb run` and `wb status` use it with the trial's first step as the origin (its first after a
    resume): the rate leaves out loading and compiling, which all come before that step ends, and
    there is none until a later step has been reported."""
    rate = None if origin is None else token_rate(origin, last)
    if rate is None:
        return None
    return max(0.0, (total - last[1]) / rate - max(0.0, now - last[0]))


class Progress:
    """``wb train``'s progress on stderr: on a terminal one status line redrawn at most twice a
    second; elsewhere (a file, a pipe) a plain line at each validation and at most every
    ``PLAIN_EVERY_S`` seconds between them, as ``wb run`` writes. ``total``: the tokens the trial
    trains, whole steps (its spec's tokens rounded up to a step). The rate and ETA count from the
    first step (a resumed trial's first after its checkpoint): loading and compiling come before it
    ends and are left out. Until a second step the ETA reads ``estimating...``."""

    def __init__(self, total_tokens: int):
        self.total, self.last = total_tokens, 0.0
        self.origin: tuple[float, int] | None = None  # (time, tokens) of the step the rate counts from
        self.tty = sys.stderr.isatty()
        self.every_s = 0.5 if self.tty else PLAIN_EVERY_S

    def finished_checkpoint(self, path: Path, total_steps: int) -> None:
        """Say so where ``path`` holds the checkpoint of a finished training (its evaluation was
        cut off): that one is not resumed, the trial trains again from the first step."""
        # The training loop brings torch, and the live view of `wb run` and `wb status`
        # (foxwb.workbench.run.live_view) imports this module for its timing only.
        from foxwb.workbench.train.loop import checkpoint_step

        step = checkpoint_step(path)
        if step is not None and step >= total_steps:
            sys.stderr.write(f"  {path} is of a finished training (step {step:,} of {total_steps:,}), its evaluation "
                             "cut off: a finished training's checkpoint is not resumed; training again from the first step\n")
            sys.stderr.flush()

    def resumed(self, tokens: int, step: int | None) -> None:
        at = f"step {step:,}, " if step is not None else ""
        sys.stderr.write(f"  resuming from its checkpoint at {at}{tokens:,}/{self.total:,} tokens\n")
        sys.stderr.flush()
        self.origin = None  # its first step from here on: compiling again is not its rate's

    def note(self, text: str) -> None:
        """A line of what the trial does now, where no step is drawn (its final evaluation)."""
        sys.stderr.write(f"  {text}...\n")
        sys.stderr.flush()

    def __call__(self, tokens: int, metrics: dict) -> None:
        now = time.time()
        if self.origin is None:
            self.origin = (now, tokens)
            self.last = now if not self.tty else 0.0  # off a terminal: the first line after PLAIN_EVERY_S
        due = now - self.last >= self.every_s or tokens >= self.total or (not self.tty and "val_loss" in metrics)
        if not due:
            return
        self.last = now
        rate, left = token_rate(self.origin, (now, tokens)), eta_s(self.total, self.origin, (now, tokens), now)
        eta = "0s" if tokens >= self.total else f"{left:.0f}s" if left is not None else "estimating..."
        speed = f"{rate:,.0f} tok/s" if rate else "? tok/s"
        val = f"  val {metrics['val_loss']:.3f}" if "val_loss" in metrics else ""
        line = (f"  step {metrics['step']}  {tokens:,}/{self.total:,} tokens  loss {metrics['train_loss']:.3f}{val}"
                f"  {speed}  eta {eta}")
        if self.tty:
            # Erased to the end of the line: a shorter line leaves nothing of the one it redraws.
            sys.stderr.write(f"\r{line}\x1b[K" + ("\n" if tokens >= self.total else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

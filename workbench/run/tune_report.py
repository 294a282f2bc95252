"""How a trial under Ray Tune reports to the driver: its step metrics, GPU samples and progress,
batched with each validation (foxwb.workbench.run.tune_trial; a multi-worker trial's rank 0:
foxwb.workbench.run.ray_train)."""
from __future__ import annotations

import time

from foxwb.workbench.run.live_view import REPORT_EVERY_S


class TuneReporter:
    """Buffers the step metrics (with the time each step ended), and the GPU samples of
    ``sampler`` (set by run_trial where one runs); hands both to Tune with each validation result
    (``wb_steps``, ``wb_system``), and every ``every_s`` seconds between validations with a
    progress result (``wb_progress``: tokens and training loss, no val_loss). The validation of
    the last step is left to the final evaluation, which reports val_loss at that step once. A
    trial resumed from its checkpoint says so (``wb_resumed``: its step and tokens) in its next
    result, so the driver can tell the user where it picked up."""

    def __init__(self, total_tokens: int | None = None, every_s: float | None = None):
        self.steps: list[dict] = []
        self.tokens = 0  # trained so far: the step of each GPU sample
        self.sampler = None
        self.total = total_tokens
        self.every_s = REPORT_EVERY_S if every_s is None else every_s
        self.sent = time.time()
        self.resumed: dict | None = None  # where a resumed trial picked up, until a result carries it

    def report(self, tokens: int, metrics: dict) -> None:
        self.record(tokens, metrics, due=self.progress_due())

    def progress_due(self) -> bool:
        """``every_s`` has passed since the last result (never, with ``every_s`` 0)."""
        return self.every_s > 0 and time.time() - self.sent >= self.every_s

    def record(self, tokens: int, metrics: dict, due: bool) -> None:
        """A step's metrics buffered; a result sent with each validation, and a progress result
        where one is ``due``."""
        self.tokens = tokens
        if self.total is not None and tokens >= self.total:
            metrics = {k: v for k, v in metrics.items() if k != "val_loss"}
        self.steps.append({"tokens": tokens, **metrics, "time_ms": int(time.time() * 1000)})
        if "val_loss" in metrics:
            self.send(self.payload(tokens=tokens, val_loss=metrics["val_loss"]))
        elif due:
            self.send(self.payload(tokens=tokens, train_loss=metrics.get("train_loss"), wb_progress=True))

    def send(self, payload: dict) -> None:
        # Ray Tune takes seconds to import, and the dry run imports this module (through the
        # runner's trainables); a trial, which sends, runs under Tune and has it already.
        from ray import tune

        tune.report(payload)

    def on_resume(self, history: list[dict]) -> None:
        """A trial resumed from its checkpoint sends the steps before it again, with its next
        report: its new tracked run holds the whole series an uninterrupted run logs."""
        self.steps = [dict(h) for h in history] + self.steps
        if history:
            self.resumed = {"step": history[-1].get("step"), "tokens": history[-1]["tokens"],
                            "time_ms": int(time.time() * 1000)}  # when it picked up: its rate's origin

    def payload(self, **fields) -> dict:
        """A result for Tune: ``fields`` with the steps and GPU samples buffered since the last one
        (and, once, where a resumed trial picked up)."""
        out = {**fields, "wb_steps": self.take(), "wb_system": self.take_system()}
        if self.resumed is not None:
            out["wb_resumed"], self.resumed = self.resumed, None
        return out

    def take(self) -> list[dict]:
        steps, self.steps, self.sent = self.steps, [], time.time()
        return steps

    def take_system(self) -> list[dict]:
        return self.sampler.take() if self.sampler is not None else []

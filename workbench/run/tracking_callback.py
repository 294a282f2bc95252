"""The driver's Ray Tune callback: the only writer of a study's trial runs in the tracking store
(foxwb.workbench.run.tracking), and what ``wb run`` prints of each trial as it goes.

What it decides, from the results a trial reports (foxwb.workbench.run.tune_report) and Tune's
events:

- **A run per trial**, created when Tune starts the trial, with the trial that ``resolve`` names
  for Tune's config (a grid value's spec hash, or an Optuna draw set into its template). A trial
  whose spec hash has FINISHED already (an adaptive search drawing a finished point again) is not
  tracked a second time.
- **Which keys become metrics**: only what a result carries in ``wb_steps`` (every numeric value
  of each step but ``tokens``, ``step`` and ``time_ms``, at step = its tokens and at the time the
  step ended where it says) and in ``wb_system`` (its ``system/...`` GPU samples, at the time each
  was taken); at the end, the final metrics of ``wb_result`` (Store.finish_trial). Tune's own keys
  of a result (its iteration, timings, the top-level ``val_loss`` the scheduler reads) are not
  logged. A result with ``wb_resumed`` tags the run where the trial picked up from its checkpoint.
- **FINISHED**: the trial's final result (``wb_done``), with its ``wb_result``; or Tune ending a
  trial that sent none, which is ASHA stopping it early: FINISHED with ``stopped_early`` and its
  last validation's ``val_loss`` and ``tokens``.
- **FAILED**: a result with ``wb_failed`` (its reason and traceback), or Tune's error for a
  trial whose process died or raised (the end of its error file).
- **Neither**: a trial still running when the study stops (Ctrl-C, Ray lost, the store or the
  lease lost) is left to the driver, which marks it KILLED (foxwb.workbench.run.driver).

Every write holds ``driver.lock``. Once the study stops for the store, the lease or Ray, nothing
more is written; a write that fails stops the study (``driver.stops``, kind ``store``) with its
reason, and a line to a reader that went away stops it as a closed output.
"""
from __future__ import annotations

import functools
import time
from pathlib import Path

# Ray Tune is imported with this module, unlike in the rest of foxwb.workbench.run: the callback
# subclasses tune.Callback where it is defined. Ray takes seconds to import, so the runner imports
# this module only when a study is about to run (never for `wb --help` or `wb run --dry-run`).
from ray import tune

from foxwb.workbench.run import live_view as progress
from foxwb.workbench.train.faults import sentence

# Stops after which the store is not written: it is not ours to write any more (the lease was
# taken over), it is not writable, or Ray is gone (the driver closes the books itself).
NO_WRITES = ("store", "lease", "ray")


def _writes(hook):
    """A hook that writes the store: run under the driver's lock, skipped once the study stopped
    for a reason in NO_WRITES; a failure stops the study instead of reaching Tune."""

    @functools.wraps(hook)
    def guarded(self, *args, **kw):
        stops = self.driver.stops
        if stops.kind in NO_WRITES:
            return None
        try:
            with self.driver.lock:
                return hook(self, *args, **kw)
        except BrokenPipeError:  # a line to a reader that is gone, not a store that failed
            stops.output_closed()
        except Exception as e:
            stops.request("store", f"the tracking store could not be written: {sentence(e)}")
            progress.say(f"error: {stops.reason}; stopping the study")
        return None

    return guarded


class TrackingCallback(tune.Callback):
    """Driver side: the only writer of the tracking store.

    ``store``: the study's Store; ``driver``: its Driver (lock and stops); ``outcomes``: spec hash
    -> the runner's record of each trial (foxwb.workbench.run.runner.Outcome), updated in place,
    a new one made with ``new_outcome(trial)`` for a trial that starts without one (an Optuna draw);
    ``finished``: the spec hashes FINISHED so far, added to as trials finish; ``resolve(tune
    config) -> Trial``: the trial a Tune trial runs (``resolve_by`` sets it for the next Tuner);
    ``parent_id``, ``study``, ``code``: the study's parent run, name and code version, which each
    trial run is created with."""

    def __init__(self, store, driver, outcomes: dict, finished: set[str], resolve, *, parent_id: str, study: str,
                 code: str, new_outcome):
        self.store, self.driver = store, driver
        self.outcomes, self.finished, self.new_outcome = outcomes, finished, new_outcome
        self.parent_id, self.study, self.code = parent_id, study, code
        self.resolve = resolve
        self.runs: dict[str, str] = {}  # Tune's trial id -> its tracked run
        self.keys: dict[str, str] = {}  # Tune's trial id -> its spec hash

    def resolve_by(self, resolve) -> None:
        """The trials of the Tuner about to run are named by ``resolve`` (an Optuna search's: its
        template with the drawn point)."""
        self.resolve = resolve

    def _outcome(self, trial):
        return self.outcomes[self.keys[trial.trial_id]]

    @_writes
    def on_trial_start(self, iteration, trials, trial, **info):
        ours = self.resolve(trial.config)
        if ours.spec_hash in self.finished:
            progress.say(f"repeat   {ours.variant} [{ours.point_label}]: a finished trial; not tracked again")
            return
        self.keys[trial.trial_id] = ours.spec_hash
        out = self.outcomes.setdefault(ours.spec_hash, self.new_outcome(ours))
        out.status, out.started = "RUNNING", time.time()
        self.runs[trial.trial_id] = out.run_id = self.store.start_trial(self.parent_id, self.study, out.trial, self.code)
        progress.say(f"start    {out.label}  [{out.trial.spec_hash}]")

    @_writes
    def on_trial_result(self, iteration, trials, trial, result, **info):
        if trial.trial_id not in self.keys:
            return
        store, run_id, out = self.store, self.runs[trial.trial_id], self._outcome(trial)
        # Each step's metrics carry the time the step ended (the trial's clock), so the store
        # tells a running trial's rate (wb status) whatever the reports' batching.
        rows = [(k, v, s["tokens"], s["time_ms"]) if "time_ms" in s else (k, v, s["tokens"])
                for s in result.get("wb_steps", []) for k, v in s.items()
                if k not in ("tokens", "step", "time_ms") and isinstance(v, (int, float))]
        # GPU samples keep the time they were taken: MLflow's UI plots system metrics by it.
        rows += [(k, v, s["tokens"], s["time_ms"]) for s in result.get("wb_system", []) for k, v in s.items()
                 if k.startswith("system/")]
        if result.get("wb_resumed"):  # tagged before the steps it sends again are logged
            store.resumed(run_id, result["wb_resumed"]["tokens"])
        store.log_metrics(run_id, rows)
        total = out.trial.spec.train.trained_tokens(out.trial.spec.data.context)  # what the lines show
        if result.get("wb_resumed"):
            at = result["wb_resumed"]
            out.resumed_from = (at.get("time_ms", time.time() * 1000) / 1000, at["tokens"])
            step = f"step {at['step']:,}, " if at.get("step") is not None else ""
            progress.say(f"resume   {out.label}  [{out.trial.spec_hash}]  from its checkpoint at {step}"
                         f"{at['tokens']:,}/{total:,} tokens")
        if result.get("wb_done"):
            store.finish_trial(run_id, result["wb_result"])
            self._end(out, "FINISHED", val_ppl=result["wb_result"]["val_ppl"], epochs=result["wb_result"].get("data_epochs"),
                      test_ppl=result["wb_result"].get("test_ppl"))
        elif result.get("wb_failed"):
            store.fail_trial(run_id, result["wb_failed"], result.get("wb_traceback", ""))
            self._end(out, "FAILED", reason=result["wb_failed"])
        else:
            if not result.get("wb_progress"):
                out.last = result  # an intermediate validation, kept for an early stop
            losses = [s["train_loss"] for s in result.get("wb_steps", []) if "train_loss" in s]
            # A resumed trial's rate counts from its first step past its checkpoint.
            start_tokens = out.resumed_from[1] if out.resumed_from else 0
            progress.VIEW.update(trial.trial_id, out.label, total,
                                 result.get("tokens", 0), losses[-1] if losses else None, start_tokens,
                                 [(s["time_ms"] / 1000, s["tokens"]) for s in result.get("wb_steps", []) if "time_ms" in s])

    @_writes
    def on_trial_complete(self, iteration, trials, trial, **info):
        if trial.trial_id not in self.keys:
            return
        out = self._outcome(trial)
        if out.status == "RUNNING" and self.driver.stops:  # stopped with the study: closed by the driver
            return
        if out.status == "RUNNING":  # stopped by the scheduler (ASHA) before its last report
            self.store.finish_trial(self.runs[trial.trial_id],
                                    {"val_loss": out.last.get("val_loss"), "tokens": out.last.get("tokens")},
                                    stopped_early=True)
            self._end(out, "FINISHED", reason="stopped early by ASHA")

    @_writes
    def on_trial_error(self, iteration, trials, trial, **info):
        if trial.trial_id not in self.keys:
            return
        out = self._outcome(trial)
        if out.status == "RUNNING" and self.driver.stops:  # killed by the Ctrl-C the driver got too
            return
        if out.status == "RUNNING":
            reason = error_text(trial)
            self.store.fail_trial(self.runs[trial.trial_id], reason)
            self._end(out, "FAILED", reason=reason)

    def _end(self, out, status: str, reason: str = "", val_ppl=None, epochs=None, test_ppl=None) -> None:
        if status == "FINISHED":
            self.finished.add(out.trial.spec_hash)
        out.status, out.reason, out.val_ppl, out.seconds = status, reason, val_ppl, time.time() - out.started
        out.test_ppl = test_ppl
        done = sum(o.status in ("FINISHED", "FAILED") for o in self.outcomes.values())
        detail = f"test_ppl {test_ppl:.3f}" if test_ppl else f"val_ppl {val_ppl:.3f}" if val_ppl else reason[:160]
        if epochs and epochs > 1:  # the held-out loss then measures memorising too
            detail += f"  (trained {epochs:.1f}x over its data)"
        progress.VIEW.done(next((k for k, v in self.keys.items() if v == out.trial.spec_hash), ""))
        progress.say(f"{status.lower():<9}{out.label}  {detail}  ({out.seconds:.0f} s)  [{done}/{len(self.outcomes)}]")


def error_text(trial) -> str:
    """Why Tune says a trial failed: the end of its error file, where it has one."""
    path = getattr(trial, "error_file", None)
    if path and Path(path).exists():
        return Path(path).read_text()[-2000:]
    return "the trial's process died without a report (killed, or out of memory)"

"""The trial side of a study on Ray Tune: the trainables Tune runs in its workers (one trial
from its spec, or an Optuna draw set into a template), each training through
foxwb.workbench.train.trial.run_trial and reporting through foxwb.workbench.run.tune_report. A trial's failure is
reported as its reason, not raised: the study goes on (foxwb.workbench.run.runner)."""
from __future__ import annotations

import traceback
from pathlib import Path

import torch

from foxwb.workbench.spec.study import Trial, with_point
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train import layout
from foxwb.workbench.train.folder_lock import FolderLock
from foxwb.workbench.train.telemetry import reset_peak_rss
from foxwb.workbench.train.trial import run_trial
from foxwb.workbench.run.tune_report import TuneReporter


def train_trial(tune_config: dict, telemetry=None) -> None:
    """The Ray Tune trainable: one trial, from its spec's JSON (param_space["t"])."""
    config = tune_config["t"]
    _run_and_report(TrialSpec.model_validate_json(config["spec"]), Path(config["dir"]), config["cpus"], telemetry,
                    config.get("progress_s"), config.get("gpu", 0.0))


def train_search_trial(tune_config: dict, template: str, workdir: str, cpus: float, telemetry=None,
                       progress_s: float | None = None, gpu: float = 0.0) -> None:
    """The trainable of an Optuna search: the template trial with the drawn values set."""
    trial = with_point(Trial("", 0, TrialSpec.model_validate_json(template)), search_point(tune_config))
    _run_and_report(trial.spec, layout.trial_dir(workdir, trial.spec_hash), cpus, telemetry, progress_s, gpu)


def search_point(tune_config: dict) -> dict:
    """Tune's config keys carry the dotted paths with '__' for '.'."""
    return {key.replace("__", "."): value for key, value in tune_config.items()}


def _run_and_report(spec, out: Path, cpus: float, telemetry=None, progress_s: float | None = None,
                    gpu: float = 0.0) -> None:
    reporter = TuneReporter(spec.train.tokens, progress_s)
    # Studies of one workdir share its trial folders: two drivers running the very same trial (two
    # studies that both hold it, or a `wb train` into the folder) would interleave one checkpoint.
    # The lock is held here, in the Tune trial's process, for the workers of a multi-worker trial too.
    try:
        with FolderLock(out) as lock:
            if not lock.held:
                reporter.send(reporter.payload(wb_failed=busy_folder(out)))
                return
            if spec.train.workers > 1:  # a TorchTrainer of its own (workbench/run/ray_train.py)
                # Importing ray_train sets RAY_TRAIN_V2_ENABLED, which a one-worker trial, and the
                # dry run that imports this module (through the runner), have no business doing.
                from foxwb.workbench.run.ray_train import fit_workers_trial

                return fit_workers_trial(spec, out, cpus, gpu, telemetry, progress_s)
            _train_here(spec, out, cpus, reporter, telemetry)
    except OSError as e:  # the folder cannot be made or opened (a read-only workdir): the trial's failure
        reporter.send(reporter.payload(wb_failed=failure_reason(e), wb_traceback=traceback.format_exc()))


def _train_here(spec, out: Path, cpus: float, reporter: TuneReporter, telemetry=None) -> None:
    """One process: the trial trains in this Tune worker and reports through ``reporter``."""
    if spec.train.cpu_threads is None:
        torch.set_num_threads(max(1, int(cpus)))
    if spec.train.compile:
        # Trials share a reused actor: the compiler's caches of the previous trial's model would
        # count against this one's recompile limit.
        torch.compiler.reset()
    reset_peak_rss()  # the actor may have run other trials: this one's peak is its own
    try:
        result = run_trial(spec, out, reporter, telemetry=telemetry)
    except Exception as e:  # recorded FAILED with its reason; the study goes on
        reporter.send(reporter.payload(wb_failed=failure_reason(e), wb_traceback=traceback.format_exc()))
        return
    reporter.send(reporter.payload(tokens=result["train_tokens"], val_loss=result["val_loss"], wb_done=True, wb_result=result))


def busy_folder(out: Path) -> str:
    return (f"{out} is being trained by another process (another study in this workdir running this very "
            "trial, or a `wb train` into the folder): two trainings of one folder would mix their checkpoints "
            "and metrics; run the study again once that one has ended")


def failure_reason(e: BaseException) -> str:
    """``Type: message (at file:line in function)``, the innermost frame of the traceback: an
    exception with no message (a bare ``assert``) still says where it came from."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"

"""The driver's Tune callback (foxwb.workbench.run.tracking_callback) on a real tracking store: its
hooks called as Tune calls them, with a Tune trial reduced to what they read (its id, config and
error file). What lands in the trial's MLflow run: the steps' metrics, and FINISHED or FAILED."""
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[3]
STUDY = "tracked"


class TuneTrial:
    """What the callback's hooks read of a ray.tune Trial."""

    def __init__(self, trial_id: str, key: str, error_file: str | None = None):
        self.trial_id, self.config, self.error_file = trial_id, {"t": {"key": key}}, error_file


@pytest.fixture
def tracked(tmp_path):
    """(callback, store client, outcomes, driver, trials): a callback around a local store of its
    own, resolving Tune configs to the quickstart study's trials by spec hash."""
    from foxwb.workbench.train import layout
    from foxwb.workbench.run.driver import Driver
    from foxwb.workbench.run.runner import Outcome
    from foxwb.workbench.run.tracking import Store, create_local_store, local_tracking_uri
    from foxwb.workbench.run.tracking_callback import TrackingCallback
    from foxwb.workbench.spec.study import expand, load_study

    trials = expand(load_study(str(ROOT / "studies" / "quickstart.yaml")))[:3]
    create_local_store(tmp_path)
    store = Store(local_tracking_uri(tmp_path), "tracking-callback", layout.artifacts(tmp_path))
    parent_id = store.study_run(STUDY, "a study of the callback's test", "code-1")
    driver = Driver(store, parent_id, STUDY)  # its lock and stops; never entered (no lease, no signals)
    by_hash = {t.spec_hash: t for t in trials}
    outcomes = {t.spec_hash: Outcome(t) for t in trials}
    callback = TrackingCallback(store, driver, outcomes, set(), lambda config: by_hash[config["t"]["key"]],
                                parent_id=parent_id, study=STUDY, code="code-1", new_outcome=Outcome)
    return callback, MlflowClient(local_tracking_uri(tmp_path)), outcomes, driver, trials


def start(callback, trial, tune_id: str, **kw) -> TuneTrial:
    tune_trial = TuneTrial(tune_id, trial.spec_hash, **kw)
    callback.on_trial_start(iteration=1, trials=[tune_trial], trial=tune_trial)
    return tune_trial


def result(callback, tune_trial, payload: dict) -> None:
    callback.on_trial_result(iteration=2, trials=[tune_trial], trial=tune_trial, result=payload)


def test_a_results_steps_become_the_runs_metrics_and_its_last_result_finishes_it(tracked, capsys):
    callback, client, outcomes, _, trials = tracked
    tune_trial = start(callback, trials[0], "t0")
    out = outcomes[trials[0].spec_hash]
    run = client.get_run(out.run_id)
    assert run.info.status == "RUNNING" and out.status == "RUNNING"
    assert run.data.tags["spec_hash"] == trials[0].spec_hash and run.data.tags["study"] == STUDY
    assert run.data.tags["mlflow.parentRunId"] == callback.parent_id

    # A validation: the steps since the last one and a GPU sample; Tune's own keys beside them.
    steps = [{"tokens": 64, "step": 1, "train_loss": 2.5, "time_ms": 1_700_000_000_000},
             {"tokens": 128, "step": 2, "train_loss": 2.25, "val_loss": 2.125, "time_ms": 1_700_000_001_000}]
    system = [{"tokens": 64, "time_ms": 1_700_000_000_500, "system/gpu_utilization": 87.0, "gpu": "ignored"}]
    result(callback, tune_trial, {"tokens": 128, "val_loss": 2.125, "wb_steps": steps, "wb_system": system,
                                  "training_iteration": 1, "time_total_s": 3.0})
    history = {m.step: (m.value, m.timestamp) for m in client.get_metric_history(out.run_id, "train_loss")}
    assert history == {64: (2.5, 1_700_000_000_000), 128: (2.25, 1_700_000_001_000)}
    assert [(m.step, m.value) for m in client.get_metric_history(out.run_id, "val_loss")] == [(128, 2.125)]
    gpu = client.get_metric_history(out.run_id, "system/gpu_utilization")
    assert [(m.step, m.value, m.timestamp) for m in gpu] == [(64, 87.0, 1_700_000_000_500)]
    logged = set(client.get_run(out.run_id).data.metrics)
    assert logged == {"train_loss", "val_loss", "system/gpu_utilization"}  # not tokens, step, time_ms, Tune's keys
    assert out.last["val_loss"] == 2.125 and client.get_run(out.run_id).info.status == "RUNNING"

    # The final result: its metrics, and the run FINISHED.
    final = {"val_loss": 2.0, "val_ppl": 7.389, "train_tokens": 192, "tokens_per_s": 1000.0}
    result(callback, tune_trial, {"tokens": 192, "val_loss": 2.0, "wb_done": True, "wb_result": final,
                                  "wb_steps": [{"tokens": 192, "step": 3, "train_loss": 2.0, "time_ms": 1_700_000_002_000}]})
    run = client.get_run(out.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["val_ppl"] == pytest.approx(7.389) and run.data.metrics["tokens_per_s"] == 1000.0
    assert run.data.tags["stopped_early"] == "false"
    assert out.status == "FINISHED" and out.val_ppl == 7.389 and trials[0].spec_hash in callback.finished
    lines = capsys.readouterr().err
    assert f"start    {trials[0].row} / seed {trials[0].seed}  [{trials[0].spec_hash}]" in lines
    assert f"finished {trials[0].row} / seed {trials[0].seed}  val_ppl 7.389" in lines

    # Tune's completion after the final result changes nothing.
    callback.on_trial_complete(iteration=3, trials=[tune_trial], trial=tune_trial)
    assert client.get_run(out.run_id).info.status == "FINISHED" and out.reason == ""


def test_an_erroring_trial_is_failed_with_its_error_and_a_reported_failure_too(tracked, tmp_path):
    callback, client, outcomes, _, trials = tracked
    error = tmp_path / "error.txt"
    error.write_text("Traceback ...\nRuntimeError: the trial's process raised")
    died = start(callback, trials[0], "t0", error_file=str(error))
    callback.on_trial_error(iteration=2, trials=[died], trial=died)
    out = outcomes[trials[0].spec_hash]
    run = client.get_run(out.run_id)
    assert run.info.status == "FAILED" and out.status == "FAILED"
    assert run.data.tags["error"] == error.read_text() and out.reason == error.read_text()

    gone = start(callback, trials[1], "t1", error_file=str(tmp_path / "none.txt"))  # no error file: died
    callback.on_trial_error(iteration=3, trials=[gone], trial=gone)
    run = client.get_run(outcomes[trials[1].spec_hash].run_id)
    assert run.info.status == "FAILED" and "died without a report" in run.data.tags["error"]

    reported = start(callback, trials[2], "t2")
    result(callback, reported, {"wb_failed": "ValueError: lr too high", "wb_traceback": "Traceback (...)"})
    run = client.get_run(outcomes[trials[2].spec_hash].run_id)
    assert run.info.status == "FAILED" and run.data.tags["error"] == "ValueError: lr too high"
    assert run.data.tags["traceback"] == "Traceback (...)" and outcomes[trials[2].spec_hash].status == "FAILED"
    assert not callback.finished


def test_a_trial_tune_completes_without_its_last_result_was_stopped_by_asha(tracked):
    callback, client, outcomes, _, trials = tracked
    cut = start(callback, trials[0], "t0")
    result(callback, cut, {"tokens": 128, "val_loss": 3.5,
                           "wb_steps": [{"tokens": 128, "val_loss": 3.5, "time_ms": 1_700_000_000_000}]})
    callback.on_trial_complete(iteration=3, trials=[cut], trial=cut)
    out = outcomes[trials[0].spec_hash]
    run = client.get_run(out.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["stopped_early"] == "true"
    assert out.status == "FINISHED" and out.reason == "stopped early by ASHA"


def test_a_trial_running_when_the_study_stops_is_left_to_the_driver(tracked):
    callback, client, outcomes, driver, trials = tracked
    running = start(callback, trials[0], "t0")
    driver.stops.request("interrupted", "interrupted (SIGINT to the driver)")
    callback.on_trial_error(iteration=2, trials=[running], trial=running)
    callback.on_trial_complete(iteration=2, trials=[running], trial=running)
    out = outcomes[trials[0].spec_hash]
    assert client.get_run(out.run_id).info.status == "RUNNING" and out.status == "RUNNING"  # the driver KILLs it


def test_a_hook_that_fails_stops_the_study_and_nothing_more_is_written(tracked):
    callback, client, outcomes, driver, trials = tracked
    broken = TuneTrial("t9", "no such spec hash")  # resolving it raises, as a failing write would
    callback.on_trial_start(iteration=1, trials=[broken], trial=broken)  # not raised to Tune
    assert driver.stops.kind == "store" and driver.stops.reason.startswith("the tracking store could not be written: ")
    start(callback, trials[1], "t1")  # the store is not written once a write failed
    assert outcomes[trials[1].spec_hash].run_id == "" and outcomes[trials[1].spec_hash].status == "PENDING"


def test_a_finished_trial_drawn_again_is_not_tracked_twice(tracked):
    callback, client, outcomes, _, trials = tracked
    callback.finished.add(trials[0].spec_hash)
    again = start(callback, trials[0], "t0")
    result(callback, again, {"wb_done": True, "wb_result": {"val_ppl": 2.0}})
    assert outcomes[trials[0].spec_hash].run_id == "" and not client.search_runs(
        [client.get_experiment_by_name("tracking-callback").experiment_id], "tags.wb_kind = 'trial'")

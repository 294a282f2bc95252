"""Peak memory and GPU telemetry: the sampler's plumbing on CPU with a fake sample source, through
the real driver path (local Ray Tune, MLflow on SQLite) into the trial's MLflow run."""
import json
import os
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from mlflow.tracking import MlflowClient

from foxwb.workbench.train.telemetry import PREFIX, GPUSampler, PeakMemory, Telemetry, nvml_source, peak_rss_mb


class FakeGPU:
    """What NVML would say of one GPU, under MLflow's names; counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self) -> dict[str, float]:
        self.calls += 1
        return {"gpu_0_utilization_percentage": 90.0 + self.calls % 2 * 10, "gpu_0_memory_usage_megabytes": 1234.0,
                "gpu_0_power_usage_watts": 500.0}


def test_the_sampler_samples_on_its_thread_until_stopped():
    tokens = iter(range(0, 10**6, 100))
    sampler = GPUSampler(FakeGPU(), period_s=0.01, progress=lambda: next(tokens)).start()
    time.sleep(0.2)
    sampler.stop()
    first = sampler.take()
    assert len(first) >= 3 and sampler.take() == []  # take hands over once
    assert set(first[0]) == {"time_ms", "tokens", PREFIX + "gpu_0_utilization_percentage",
                             PREFIX + "gpu_0_memory_usage_megabytes", PREFIX + "gpu_0_power_usage_watts"}
    assert [s["tokens"] for s in first] == sorted(s["tokens"] for s in first)
    summary = sampler.summary()
    assert summary["telemetry_samples"] == len(first) and 90 <= summary["gpu_utilization_mean"] <= 100
    assert summary["gpu_power_watts_mean"] == 500.0
    time.sleep(0.05)
    assert sampler.take() == []  # stopped: no more samples


def test_a_run_shorter_than_a_period_has_its_first_and_last_sample():
    progress = iter([0, 4096])
    sampler = GPUSampler(FakeGPU(), period_s=60, progress=lambda: next(progress)).start()
    time.sleep(0.05)
    sampler.stop()
    samples = sampler.take()
    assert [s["tokens"] for s in samples] == [0, 4096]
    assert sampler._thread is not None and not sampler._thread.is_alive()  # stop did not wait out the period


def test_a_failing_read_skips_a_sample_not_the_trial():
    def flaky():
        raise RuntimeError("NVML hiccup")

    sampler = GPUSampler(flaky, period_s=0.01).start()
    time.sleep(0.05)
    sampler.stop()
    assert sampler.take() == [] and sampler.summary()["gpu_utilization_mean"] is None


def test_on_cpu_telemetry_is_off_and_memory_is_the_resident_set():
    cpu = torch.device("cpu")
    assert nvml_source(cpu) is None and Telemetry().sampler(cpu) is None
    assert Telemetry(period_s=0, source=FakeGPU()).sampler(cpu) is None
    assert Telemetry(period_s=1, source=FakeGPU()).sampler(cpu) is not None  # a given source runs anywhere
    with PeakMemory(cpu) as peak:
        torch.ones(1000)
    assert peak.mb is None and 10 < peak_rss_mb() < 100_000


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    """A two-trial study on local Ray, MLflow on SQLite, each trial sampled by a FakeGPU every
    50 ms; its data a parquet file named by a path relative to the driver's working directory."""
    import ray
    import ray.cloudpickle

    from foxwb.workbench.spec.errors import validate
    from foxwb.workbench.run.runner import run_study
    from foxwb.workbench.spec.study import StudySpec

    tmp = tmp_path_factory.mktemp("telemetry")
    texts = [(f"doc {i} " + "the forget gate decays attention to the past. " * (20 + i)) for i in range(40)]
    pq.write_table(pa.table({"text": texts}), tmp / "docs.parquet")
    base = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
                      "mlp": {"kind": "swiglu", "intermediate_size": 64}},
            "data": {"kind": "table", "paths": ["docs.parquet"], "text_column": "text", "context": 64},
            "train": {"tokens": 16384, "batch_size": 8, "eval_every_tokens": 4096, "eval_batches": 1, "cpu_threads": 1},
            "eval": {"sequences": 4, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 256}}  # 40 short documents
    study = validate(StudySpec, {"name": "telemetry", "base": base, "seeds": [0],
                                 "design": {"kind": "ablation", "base_name": "FoX (Pro)",
                                            "changes": [{"name": "no gate", "set": {"model.attention.forget_gate": "none"}}]}})
    # The fake source travels to the trial processes as the real one would: inside the Telemetry option.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cwd, cache = os.getcwd(), os.environ.get("WB_DATA_CACHE")
    os.chdir(tmp)  # the driver's working directory, which the relative data path is read from
    os.environ["WB_DATA_CACHE"] = str(tmp / "cache")  # the trials' processes inherit it
    try:
        run = run_study(study, tmp / "w", max_concurrent=1, telemetry=Telemetry(period_s=0.05, source=FakeGPU()))
    finally:
        os.chdir(cwd)
        os.environ.pop("WB_DATA_CACHE") if cache is None else os.environ.update(WB_DATA_CACHE=cache)
        ray.shutdown()
    return tmp / "w", run


def test_samples_reach_the_mlflow_run_as_system_metrics(study_run):
    workdir, run = study_run
    assert {o.status for o in run.outcomes.values()} == {"FINISHED"}, [o.reason for o in run.outcomes.values()]
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("telemetry")
    runs = client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial'")
    assert len(runs) == 2
    for r in runs:
        history = client.get_metric_history(r.info.run_id, "system/gpu_0_utilization_percentage")
        # Every 50 ms and once at the end: how many depends on how long the trial ran, at least two.
        assert len(history) >= 2 and {h.value for h in history} <= {90.0, 100.0}
        # Stamped with the tokens trained when sampled, and with the time of the sample.
        steps = [h.step for h in sorted(history, key=lambda h: h.timestamp)]
        assert steps == sorted(steps) and steps[-1] > 0
        assert len({h.timestamp for h in history}) > 1
        assert client.get_metric_history(r.info.run_id, "system/gpu_0_power_usage_watts")[0].value == 500.0
        metrics = r.data.metrics
        assert 90 <= metrics["gpu_utilization_mean"] <= 100 and metrics["peak_rss_mb"] > 0
        result = json.loads(open(client.download_artifacts(r.info.run_id, "result.json")).read())
        assert result["telemetry_samples"] >= len(history) - 1 and result["data_split"]["val_documents"] >= 1
    assert any((workdir.parent / "cache").iterdir())  # the table was tokenized into the study's cache


def test_a_reused_process_reports_each_trials_own_peak_memory():
    """Ray actors run trial after trial: the peak resident set restarts with each trial, so a small
    trial after a big one reports its own peak, not the big one's."""
    import sys

    import pytest

    from foxwb.workbench.train.telemetry import reset_peak_rss

    if not sys.platform.startswith("linux"):
        pytest.skip("resetting the peak resident set is Linux's /proc/self/clear_refs")
    big = bytearray(300 * 1024 * 1024)
    big[::4096] = b"1" * len(big[::4096])  # touched: resident
    during = peak_rss_mb()
    del big
    assert reset_peak_rss()
    assert peak_rss_mb() < during - 250

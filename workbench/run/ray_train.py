"""Trials of more than one worker, on Ray Train (V2): a ``TorchTrainer`` per trial, whose workers
each run the trial's training loop on their share of every step (workbench/train/distributed.py).

Under a study the Tune trial (foxwb.workbench.run.tune_trial's trainable) builds and fits the trainer
(``fit_workers_trial``); every
worker reports at the same steps (``ray.train.report`` is a barrier), rank 0's metrics reach Tune
through Ray's ``TuneReportCallback`` and from there the driver-side MLflow writer, exactly as a
one-process trial's do. ``run_workers`` is the same without Tune (``wb train --workers N``).
Checkpoints are the trial's own (``<trial dir>/checkpoint.pt``, written by rank 0, read by any
worker count); Ray's checkpoint copies would double them on disk and add nothing to a resume.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
import traceback
from pathlib import Path

# Left at import, ahead of this module's own imports, on purpose: Ray Train reads the flag when its
# modules are first imported (its package picks its V1 or V2 API then), so it must be in the
# environment before anything here imports ray.train, in every process that uses this module:
# `wb train --workers` (which runs no study: runner.configure_ray_env is not called), a study's
# driver (the runner imports this module before it starts a Ray of its own, whose processes
# inherit the flag) and a Tune trial of more than one worker. Ray 2.60 enables V2 by default; an
# environment that sets the flag keeps its value.
os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")

import torch  # noqa: E402

from foxwb.workbench.run import local_ray  # noqa: E402
from foxwb.workbench.spec.errors import SpecError  # noqa: E402
from foxwb.workbench.spec.trial import TrialSpec  # noqa: E402
from foxwb.workbench.train.distributed import Workers  # noqa: E402
from foxwb.workbench.train.loop import TrainError  # noqa: E402
from foxwb.workbench.train.step_share import check_divisible  # noqa: E402
from foxwb.workbench.train.telemetry import Telemetry, reset_peak_rss  # noqa: E402
from foxwb.workbench.train.trial import JsonlReporter, run_trial  # noqa: E402
from foxwb.workbench.run.tune_report import TuneReporter  # noqa: E402


class WorkerReporter(TuneReporter):
    """A worker's reporter under Tune: every worker calls ``ray.train.report`` at the same steps
    (each validation, and when rank 0 finds a progress report due: ``due``, agreed in the step's
    all-reduce); only rank 0's payload is read."""

    def __init__(self, rank: int, total_tokens: int | None, every_s: float | None):
        super().__init__(total_tokens, every_s)
        self.rank = rank

    def due(self) -> bool:
        return self.rank == 0 and self.progress_due()

    def report(self, tokens: int, metrics: dict, due: bool = False) -> None:
        self.record(tokens, metrics, due)

    def send(self, payload: dict) -> None:
        import ray.train  # Ray Train is slow to import: see worker_loop

        ray.train.report(payload if self.rank == 0 else {})


class _RankZeroJsonl:
    """``wb train --workers``: rank 0 writes metrics.jsonl; the ``due`` of a step is not needed."""

    def __init__(self, inner):
        self.inner = inner

    def on_resume(self, history):
        self.inner.on_resume(history)

    def report(self, tokens: int, metrics: dict, due: bool = False) -> None:
        self.inner.report(tokens, metrics)


def worker_loop(config: dict) -> None:
    """What each Ray Train worker runs: join the trial's process group, train its share, and (rank
    0) evaluate and report the result."""
    # Ray Train takes seconds to import, and this module is imported where no Ray runs (the dry
    # run's check_study, with_workers of `wb train --workers 1`): imported where it is used.
    import ray.train
    import ray.train.torch

    spec = TrialSpec.model_validate_json(config["spec"])
    out = Path(config["dir"])
    rank = ray.train.get_context().get_world_rank()
    device = ray.train.torch.get_device()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if spec.train.cpu_threads is None:
        torch.set_num_threads(max(1, int(config["cpus"])))
    reset_peak_rss()
    workers = Workers.join(spec.train, device)
    telemetry = Telemetry(period_s=config["gpu_sample_s"]) if config.get("gpu_sample_s") is not None else None
    if not config["tune"]:
        reporter = _RankZeroJsonl(JsonlReporter(out / "metrics.jsonl")) if rank == 0 else None
        run_trial(spec, out, reporter, telemetry=telemetry, workers=workers)
        return
    reporter = WorkerReporter(rank, spec.train.tokens, config.get("progress_s"))
    result = run_trial(spec, out, reporter, telemetry=telemetry, workers=workers)
    reporter.send(reporter.payload(tokens=result["train_tokens"], val_loss=result["val_loss"], wb_done=True, wb_result=result)
                  if rank == 0 else {})


def trainer(spec, out: Path, cpus: float, gpu: float, storage: Path, *, tune: bool, progress_s: float | None = None,
            gpu_sample_s: float | None = None, callbacks=()):
    """The TorchTrainer of one trial: ``spec.train.workers`` workers of ``cpus`` CPUs and ``gpu``
    GPUs each (NCCL where gpu > 0, else gloo)."""
    # Ray Train is slow to import: see worker_loop.
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    n = spec.train.workers
    per_worker = {"CPU": cpus, **({"GPU": gpu} if gpu > 0 else {})}
    return _trainer_class(TorchTrainer)(
        worker_loop,
        train_loop_config={"spec": spec.model_dump_json(), "dir": str(out), "cpus": cpus, "tune": tune,
                           "progress_s": progress_s, "gpu_sample_s": gpu_sample_s},
        torch_config=TorchConfig(backend="nccl" if gpu > 0 else "gloo"),
        scaling_config=ray.train.ScalingConfig(num_workers=n, use_gpu=gpu > 0, resources_per_worker=per_worker),
        run_config=ray.train.RunConfig(
            # A name per attempt: Ray Train would otherwise treat a rerun as the resumption of its own
            # run; the trial resumes from its checkpoint.pt instead.
            name=f"{out.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}", storage_path=str(storage),
            callbacks=list(callbacks), failure_config=ray.train.FailureConfig(max_failures=0)),
    )


def _trainer_class(torch_trainer: type) -> type:
    """``torch_trainer``, less Ray Train's PlacementGroupCleaner on a cluster without Ray's dashboard
    (the workbench's own Ray starts without one: local_ray). That detached actor, there to remove a
    run's placement group should its controller die, asks the State API whether the controller lives,
    which the dashboard serves: without one each ask hangs, and the controller's end waits 12 s for
    the cleaner to stop at every run (a Ray Train run of the launch check: 31.5-35.2 s, 17.1-22.2 s without it;
    docs/distributed.md). The placement group is still removed when the controller ends, and a local
    Ray ends with its study. On a cluster with a dashboard the trainer is Ray's own."""
    try:
        # Ray's internals, late as Ray Train is (see worker_loop): a Ray without them gets its own trainer.
        from ray._private.services import get_webui_url_from_internal_kv
        from ray.train.v2._internal.callbacks.placement_group_callback import PlacementGroupCleanerCallback

        if get_webui_url_from_internal_kv():
            return torch_trainer
    except Exception:  # noqa: BLE001  any other Ray: its trainer as it is
        return torch_trainer

    class Trainer(torch_trainer):
        def _create_default_callbacks(self):
            return [c for c in super()._create_default_callbacks() if not isinstance(c, PlacementGroupCleanerCallback)]

    return Trainer


def fit_workers_trial(spec, out: Path, cpus: float, gpu: float, telemetry=None, progress_s: float | None = None) -> None:
    """Inside a Ray Tune trial (foxwb.workbench.run.tune_trial's trainables, for a spec of more than one
    worker): fit the trial's TorchTrainer, whose rank 0 reports to this trial through Ray's
    TuneReportCallback. A failure of any worker is the trial's failure, with that worker's reason."""
    # Ray Tune is slow to import: see worker_loop.
    from ray import tune
    from ray.tune.integration.ray_train import TuneReportCallback

    period = getattr(telemetry, "period_s", None)
    fit = trainer(spec, out, cpus, gpu, out.parent.parent / "ray-train", tune=True, progress_s=progress_s,
                  gpu_sample_s=period, callbacks=[TuneReportCallback()])
    try:
        fit.fit()
    except Exception as e:  # any worker's exception, its traceback included
        tune.report({"wb_failed": _failure_text(e), "wb_traceback": traceback.format_exc()})


def with_workers(spec, workers: int, field: str = "train.workers"):
    """``spec`` on ``workers`` processes (the same identity: an execution field)."""
    if workers < 1:
        raise SpecError(f"{field}={workers}: a trial needs at least one worker (1: one process; N > 1: N Ray Train "
                        "workers, one GPU each where there are GPUs)")
    return TrialSpec.model_validate({**spec.model_dump(mode="json"),
                                     "train": {**spec.train.model_dump(mode="json"), "workers": workers}})


def run_workers(spec, out: Path, cpus: float = 1.0, gpu: float | None = None) -> dict:
    """``wb train --workers N``: the trial on N Ray Train workers of the local Ray (or the cluster
    of RAY_ADDRESS), one GPU each where the machine has them; returns rank 0's result.json."""
    import ray  # Ray is slow to import: see worker_loop

    check_divisible(spec.train, spec.train.workers)
    gpu = (1.0 if torch.cuda.is_available() else 0.0) if gpu is None else gpu
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = not ray.is_initialized()
    if started:
        local_ray.start(os.environ.get("RAY_ADDRESS") or "local", log_to_driver=True)
    main = threading.current_thread() is threading.main_thread()
    sigint = signal.getsignal(signal.SIGINT) if main else None
    try:
        check_cluster([(spec.train.workers, cpus, gpu)], "train.workers")
        try:
            trainer(spec, out, cpus, gpu, out / "ray-train", tune=False).fit()
        except Exception as e:
            raise TrainError(_failure_text(e)) from None
    finally:
        if main:
            # Ray Train's fit leaves its own Ctrl-C handler installed, which aborts its (finished)
            # controller: the caller's handler comes back.
            signal.signal(signal.SIGINT, sigint)
        if started:
            ray.shutdown()
    return json.loads((out / "result.json").read_text())


def check_cluster(needs: list[tuple[int, float, float]], field: str = "resources.workers",
                  resources: dict | None = None, where: str = "this machine has") -> None:
    """Each (workers, cpus per worker, gpus per worker) must fit the Ray cluster's totals, else
    Ray Train would wait for resources that never come: an error naming the field before
    anything starts. ``resources``: this machine's, for the Ray a run starts here (default: those
    of the Ray cluster joined, ``ray.cluster_resources()``)."""
    if resources is None:
        import ray  # Ray is slow to import: see worker_loop

        resources, where = ray.cluster_resources(), "the Ray cluster has"
    have_cpu, have_gpu = resources.get("CPU", 0.0), resources.get("GPU", 0.0)
    for workers, cpus, gpus in needs:
        if workers * gpus > have_gpu:
            raise SpecError(
                f"{field}={workers} with {gpus:g} GPU per worker needs {workers * gpus:g} GPUs; {where} "
                f"{have_gpu:g}. Lower the worker count, or run on a cluster with more GPUs (--ray-address)")
        if workers * cpus > have_cpu:
            raise SpecError(
                f"{field}={workers} with resources.cpu={cpus:g} per worker needs {workers * cpus:g} CPUs; {where} "
                f"{have_cpu:g}. Lower the worker count or resources.cpu")


def _failure_text(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text[-4000:]


def check_study(study, trials, ray_address: str | None) -> None:
    """Before anything starts: every trial fits the cluster (``ray_address``'s, already joined; else
    this machine, whose resources a local Ray will have), since Ray would wait forever for
    resources that never come; and every trial of more than one worker splits its global batch
    evenly and has a GPU of its own per worker where it uses GPUs."""
    res = study.resources
    if ray_address is None:
        cluster, where = {"CPU": float(len(os.sched_getaffinity(0))), "GPU": float(torch.cuda.device_count())}, "this machine has"
    else:
        import ray  # Ray is slow to import: see worker_loop

        cluster, where = ray.cluster_resources(), "the Ray cluster has"
    if any(t.spec.train.workers == 1 for t in trials):
        for name, asked, have in (("cpu", res.cpu, cluster.get("CPU", 0.0)), ("gpu", res.gpu, cluster.get("GPU", 0.0))):
            if asked > have and not (name == "gpu" and have == 0):  # no GPU at all: runner.check_gpus says so
                raise SpecError(f"resources.{name}={asked:g}: a trial asks {asked:g} {name.upper()}s and {where} "
                                f"{have:g}, so it would never start. Lower resources.{name}")
    many = [t for t in trials if t.spec.train.workers > 1]
    if not many:
        return
    if 0 < res.gpu < 1:
        raise SpecError(f"resources.gpu={res.gpu:g} with {many[0].spec.train.workers} workers per trial: each worker "
                        "needs a GPU of its own (NCCL runs one process per GPU); use resources.gpu: 1, or workers: 1 "
                        "to pack trials on a GPU")
    for t in many:
        try:
            check_divisible(t.spec.train, t.spec.train.workers)
        except SpecError as e:
            raise SpecError(f"{t.variant} / seed {t.seed}: {e}") from None
    field = "resources.workers" if res.workers is not None else "train.workers"
    check_cluster(sorted({(t.spec.train.workers, res.cpu, res.gpu) for t in many}), field, cluster, where)


def tune_placement(study, workers: int, trainable, max_concurrent: int | None):
    """``trainable`` with the resources of a Tune trial of ``workers`` workers, and how many such
    trials may run at once. One worker: the study's resources. More: the Tune trial only fits its
    TorchTrainer and holds nothing (Tune needs a bundle: a byte of memory) while the trainer's
    workers hold theirs; at most as many at once as the cluster fits, so that no trainer waits on
    a share that another holds."""
    # Ray Tune is slow to import: see worker_loop.
    import ray
    from ray import tune

    res = study.resources
    if workers == 1:
        return tune.with_resources(trainable, {"cpu": res.cpu, "gpu": res.gpu}), max_concurrent
    cluster = ray.cluster_resources()
    fits = [cluster.get("CPU", 0.0) // (workers * res.cpu)]
    if res.gpu > 0:
        fits.append(cluster.get("GPU", 0.0) // (workers * res.gpu))
    limit = max(1, int(min(fits)))
    return tune.with_resources(trainable, {"cpu": 0, "memory": 1}), min(limit, max_concurrent or limit)

"""One trial end to end: data, model, training, evaluation, result.json."""
from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from foxwb.components import sources
from foxwb.components.registry import plugins_used
from foxwb.workbench.train import layout
from foxwb.workbench.data.load import check_test_split, load_data
from foxwb.workbench.execution import Execution
from foxwb.workbench.data.atomic import write_atomically
from foxwb.workbench.train.evaluate import evaluate, unigram_entropy
from foxwb.workbench.spec.cost import flops_per_token, param_counts
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.spikes import parts_columns, spike_figures, spike_parts
from foxwb.workbench.train.telemetry import PeakMemory, Telemetry, peak_rss_mb
from foxwb.workbench.train.gpu_peaks import peak_flops
from foxwb.workbench.train.loop import autocast_for, resolve_device, train
from foxwb.workbench.train.progress_line import Progress


def code_version() -> str:
    """The git commit of this checkout (with '+dirty' for uncommitted changes), or 'unknown'."""
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if rev.returncode:
        return "unknown"
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


PACKAGES = ("components", "kernels", "workbench", "dashboards")


def source_fingerprint(root: Path | None = None) -> str:
    """12 hex digits of a SHA-256 over the packages' Python sources (relative path and bytes, in
    order). Unlike the git commit it names the code that ran even where the checkout's git data is
    stale or missing (a copy sent to a GPU machine): equal fingerprints, equal code."""
    root = root or Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


# The libraries whose version can change a result or the trials a study runs: the numerics (torch,
# triton, numpy, scipy), the scheduler and its search (ray; optuna, whose default sampler changed in
# 5.0), the store and the specs (mlflow, pydantic), the tables and the tokenizers. Each by the names
# of its distributions, the first installed one counting (MLflow may come as mlflow-skinny alone).
LIBRARIES = {"torch": ("torch",), "triton": ("triton", "pytorch-triton"), "numpy": ("numpy",), "scipy": ("scipy",),
             "ray": ("ray",), "optuna": ("optuna",), "mlflow": ("mlflow", "mlflow-skinny"),
             "pydantic": ("pydantic",), "polars": ("polars",), "tokenizers": ("tokenizers",)}


def library_versions() -> dict[str, str]:
    """name -> installed version of each of LIBRARIES, from the distributions' metadata (nothing
    imported), and Python's; one not installed is left out (a GPU machine may run without polars)."""
    out = {"python": platform.python_version()}
    for name, distributions in LIBRARIES.items():
        for dist in distributions:
            try:
                out[name] = version(dist)
                break
            except PackageNotFoundError:
                continue
    return out


def versions() -> dict:
    """What ran: Python and LIBRARIES (library_versions), the git commit and the source fingerprint."""
    return {**library_versions(), "code": code_version(), "source": source_fingerprint()}


def write_json(path: Path, obj) -> None:
    """Atomic: a reader never sees half a file, a failed write leaves none (data.atomic.write_atomically)."""
    text = json.dumps(obj, indent=1)
    write_atomically(path, lambda tmp: tmp.write_text(text))


class JsonlReporter:
    """Append-only metrics.jsonl beside the result; on resume it keeps the checkpoint's history."""

    def __init__(self, path: Path, echo=None):
        self.path, self.echo = path, echo

    def on_resume(self, history: list[dict]) -> None:
        self.path.write_text("".join(json.dumps(h) + "\n" for h in history))
        if self.echo is not None and history:
            self.echo.resumed(history[-1]["tokens"], history[-1].get("step"))

    def report(self, tokens: int, metrics: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"tokens": tokens, **metrics}) + "\n")
        if self.echo is not None:
            self.echo(tokens, metrics)


def run_trial(trial: TrialSpec, out_dir: Path, reporter=None, progress: bool = False,
              execution: Execution | None = None, telemetry: Telemetry | None = None, workers=None) -> dict | None:
    """Train and evaluate ``trial`` into ``out_dir`` (checkpoint.pt, metrics.jsonl, result.json).
    A checkpoint already in out_dir is resumed. ``execution``: how it runs (default: what its
    TrainSpec asks for); never part of its identity. ``telemetry`` (default: NVML every 5 s on
    CUDA) samples the GPU on a thread; a reporter with a ``sampler`` attribute is handed the sampler.
    ``workers`` (foxwb.workbench.train.distributed.Workers): this process is one of the trial's N workers;
    rank 0 evaluates, writes the files and returns the result, the others return None."""
    execution = execution or Execution.of_trial(trial.train)
    if workers is not None:
        # The step's collectives would be captured in the graphs; the same kernels run without.
        execution = execution.but(cuda_graphs=False)
    lead = workers is None or workers.rank == 0
    if lead:
        out_dir.mkdir(parents=True, exist_ok=True)
    if trial.train.cpu_threads:
        torch.set_num_threads(trial.train.cpu_threads)
    device = resolve_device(trial.train) if workers is None else workers.device
    data = load_data(trial.data, trial.model.vocab_size, trial.seed)
    check_test_split(data, trial)
    torch.manual_seed(trial.seed)
    model = build_model(trial.model, execution).to(device)
    if workers is not None:
        model = workers.wrap(model)
    echo = Progress(trial.train.trained_tokens(data.context)) if progress else None
    if echo is not None:
        echo.finished_checkpoint(out_dir / layout.CHECKPOINT, trial.train.total_steps(data.context))
    if reporter is None and lead:
        reporter = JsonlReporter(out_dir / "metrics.jsonl", echo)
    if lead:
        write_json(out_dir / "spec.json", trial.model_dump(mode="json"))
    sampler = (telemetry or Telemetry()).sampler(device, progress=lambda: getattr(reporter, "tokens", 0)) if lead else None
    if sampler is not None:
        if hasattr(reporter, "sampler"):
            reporter.sampler = sampler
        sampler.start()
    try:
        with PeakMemory(device) as train_peak:
            trained = train(trial, model, data, reporter, out_dir / layout.CHECKPOINT, device, execution, workers)
        if workers is not None:
            model = workers.gather(model, lambda: build_model(trial.model, execution))
        if model is None:
            return None
        if echo is not None:  # the final evaluation can take minutes with no step to show
            echo.note("evaluating: the select split, then the test split (its every document) and the loss per position")
        with PeakMemory(device) as eval_peak:
            result = evaluate(model, data, trial.eval, data.context, device, autocast_for(trial.train, device))
    finally:
        if sampler is not None:
            sampler.stop()
    n_workers = 1 if workers is None else workers.workers
    # Memory in MB: the GPU allocator's peaks (None off CUDA) and the process's peak resident set.
    result.update(peak_memory_train_mb=train_peak.mb, peak_memory_eval_mb=eval_peak.mb, peak_rss_mb=peak_rss_mb(),
                  **(sampler.summary() if sampler is not None else {}))
    counts = param_counts(trial.model)
    flops = flops_per_token(trial.model, data.context)["train"]
    peak, peak_source = (peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda"
                         else (None, "the CPU: MFU is for GPUs"))
    rate = trained["tokens_per_s"]  # the whole trial's: every worker's tokens
    result.update(spike_figures(trained["history"], trial.train.warmup_tokens))
    parts = parts_columns(trained["history"])  # with train.grad_norm_parts only
    if parts:
        result.update(parts, grad_spike_parts=spike_parts(trained["history"], trial.train.warmup_tokens))
    result.update(
        **getattr(data, "info", {}),  # brought data: the split and the tokenizer
        unigram_entropy=unigram_entropy(data.val_tokens()),
        tokens_per_s=rate,
        mfu=(flops * rate / (peak * n_workers)) if (peak and rate) else None,
        mfu_peak=peak,  # the denominator's dense bf16 FLOP/s per GPU, and where it comes from
        mfu_note=peak_source,
        train_flops_per_token=flops,
        n_params=counts["total"],
        n_params_non_embedding=counts["non_embedding"],
        train_tokens=trained["tokens"],
        # How often training went over its data (above 1: the held-out loss measures memorising too).
        train_tokens_available=getattr(data, "train_tokens_available", None),
        data_epochs=trained["tokens"] / data.train_tokens_available if getattr(data, "train_tokens_available", 0) else None,
        steps=trained["steps"],
        context=data.context,
        workers=n_workers,
        parallel=None if workers is None else workers.parallel,
        spec=trial.model_dump(mode="json"),
        spec_hash=trial.spec_hash(),
        versions={**versions(), "plugins": plugins_used(trial.model.components()),
                  "components": sources.digest(trial.model.components())},
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)",
    )
    write_json(out_dir / "result.json", result)
    return result

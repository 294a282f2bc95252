"""Training of one trial: AdamW, warmup + cosine schedule in tokens, clipping, bf16 autocast on
the GPU, gradient accumulation, periodic validation, checkpoints and resume.

Training reports through ``Reporter`` and knows nothing of Ray or MLflow. Data order is a function
of (seed, step), the model init of the seed, so a run resumed from a checkpoint repeats the
uninterrupted run's loss curve exactly on CPU, on the same number of threads (docs/determinism.md).
The same loop runs each of a trial's N workers
(``workers``, workbench/train/distributed.py); the step machinery is workbench/train/steps.py.
"""
from __future__ import annotations

import math
import os
import pickle
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

import torch
import torch.nn as nn

from foxwb.workbench.train.evaluate import acp_kept_fraction, per_position_loss
from foxwb.workbench.execution import Execution
from foxwb.workbench.data.atomic import write_atomically
from foxwb.workbench.train.grad_parts import GradParts
from foxwb.workbench.spec.trial import TrainSpec, TrialSpec
from foxwb.workbench.train.steps import BatchQueue, Launched, lr_at, make_optimizer, step_callable, train_step

class TrainError(RuntimeError):
    """Training cannot go on (NaN loss, out of memory); the message says why and what to change."""


class Reporter(Protocol):
    """Receives the metrics of every step; may also define ``on_resume(history)``, called before
    the first step with the checkpoint's history (empty when training starts from step 0). Under N workers every worker's reporter also
    defines ``due()`` (asked as a step launches: rank 0's answer, whether a progress report is due,
    goes to every worker with the step's loss) and takes ``report(tokens, metrics, due=...)``."""

    def report(self, tokens: int, metrics: dict[str, float]) -> None: ...


@dataclass
class TrainState:
    step: int = 0
    tokens: int = 0
    history: list[dict] = field(default_factory=list)  # one entry per step: loss, lr, tokens


def resolve_device(spec: TrainSpec) -> torch.device:
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise TrainError("train.device='cuda' but no CUDA device is visible; use 'auto' or 'cpu'")
    if spec.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(spec.device)


def autocast_for(spec: TrainSpec, device: torch.device):
    use_bf16 = spec.precision == "bf16" or (spec.precision == "auto" and device.type == "cuda")
    return partial(torch.autocast, device.type, dtype=torch.bfloat16) if use_bf16 else nullcontext


def save_checkpoint(path: Path, model, opt, state: TrainState, spec_hash: str) -> None:
    write_checkpoint(path, model.state_dict(), opt.state_dict(), state, spec_hash)


def write_checkpoint(path: Path, model_state: dict, optimizer_state: dict, state: TrainState, spec_hash: str) -> None:
    """Write to a temporary file and rename: a kill or a failed write (disk full) mid-way leaves
    the last good checkpoint (foxwb.workbench.data.atomic.write_atomically). The one format for any worker
    count: the whole model's state dict and the optimizer's, its parameters numbered in the order
    of make_optimizer's groups."""
    ckpt = {"model": model_state, "optimizer": optimizer_state, "step": state.step,
            "tokens": state.tokens, "history": state.history, "spec_hash": spec_hash}
    write_atomically(path, lambda tmp: torch.save(ckpt, tmp))


def _load(path: Path, **kw) -> dict:
    """A checkpoint holds tensors and plain data only (write_checkpoint), and is read so: one that
    carries anything else (a pickled object, whose loading could run code) is refused, nothing in
    it run."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, **kw)
    except pickle.UnpicklingError as e:
        what = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise TrainError(f"{path}: not a checkpoint of tensors and plain data ({what[:200]}); refused unread, nothing "
                         "in it was run. Delete it (the trial then trains from its first step), or use another --out"
                         ) from None


def read_checkpoint(path: Path, spec_hash: str, total_steps: int | None = None) -> dict | None:
    """The checkpoint at ``path``; None for one of a finished training (``total_steps`` reached):
    that one holds the final weights, and running the trial again trains it from the first step
    rather than only evaluating them."""
    ckpt = _load(path)
    if ckpt["spec_hash"] != spec_hash:
        raise TrainError(f"{path} belongs to spec {ckpt['spec_hash']}, not {spec_hash}; use another --out")
    if total_steps is not None and ckpt["step"] >= total_steps:
        return None
    return ckpt


def checkpoint_step(path: Path) -> int | None:
    """The step the checkpoint at ``path`` was written at, read without loading its tensors (they
    are memory-mapped, not read); None where there is none, or it cannot be read."""
    if not path.is_file():
        return None
    try:
        return int(_load(path, mmap=True)["step"])
    except Exception:  # a checkpoint that cannot be read is not resumed: the trial says so when it runs
        return None


def load_checkpoint(path: Path, model, opt, spec_hash: str, total_steps: int | None = None) -> TrainState | None:
    """The training state of ``path``, loaded into ``model`` and ``opt`` (None: see read_checkpoint)."""
    ckpt = read_checkpoint(path, spec_hash, total_steps)
    if ckpt is None:
        return None
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    return TrainState(ckpt["step"], ckpt["tokens"], ckpt["history"])


def _oom(err: BaseException) -> bool:
    text = str(err)
    return isinstance(err, torch.cuda.OutOfMemoryError) or "can't allocate memory" in text or "out of memory" in text


def train(trial: TrialSpec, model: nn.Module, data, reporter: Reporter | None = None,
          checkpoint: Path | None = None, device: torch.device | None = None,
          execution: Execution | None = None, workers=None) -> dict:
    """Train ``model`` in place; returns throughput figures and the state's history. ``execution``
    (default: what the trial's TrainSpec asks for) says whether the step is compiled. ``workers``
    (a foxwb.workbench.train.distributed.Workers): this process is one of a trial's N workers, ``model`` is
    wrapped by it (DDP or FSDP), each step trains on this worker's share of the global batch, and
    the losses, tokens and rates are the whole trial's."""
    spec = trial.train
    execution = execution or Execution.of_trial(spec)
    device = device or resolve_device(spec)
    autocast = autocast_for(spec, device)
    opt = make_optimizer(model, spec, device)
    context = data.context
    tokens_per_step = spec.step_tokens(context)
    total_steps = spec.total_steps(context)
    if workers is None:
        _check_fits(spec, trial.model.d_model * next(model.parameters()).element_size(), context, device)
    state = TrainState()
    if checkpoint is not None and checkpoint.exists():
        load = workers.load if workers else load_checkpoint
        state = load(checkpoint, model, opt, trial.spec_hash(), total_steps) or TrainState()
    if hasattr(reporter, "on_resume"):
        # also at step 0: what a run killed before its first checkpoint reported is dropped
        reporter.on_resume(state.history)
    step_fn = step_callable(model, execution, device, spec.grad_accum if workers is None else workers.shard.micro_batches)
    batches = BatchQueue(data, trial.seed, spec, device, workers.shard if workers else None)
    sync = partial(workers.sync, model) if workers else None
    parts = GradParts(model) if spec.grad_norm_parts else None
    next_eval = _next_multiple(state.tokens, spec.eval_every_tokens)
    next_ckpt = _next_multiple(state.tokens, spec.checkpoint_every_tokens)
    timed_tokens, timed_seconds = 0, 0.0
    model.train()

    def launch(step: int) -> Launched:
        tokens = step * tokens_per_step  # before this step
        lr = lr_at(spec, tokens)
        for group in opt.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        with _oom_advice(spec, context, device):
            loss, grad_norm, part_norms = train_step(step_fn, model, opt, batches, step, spec, autocast,
                                                     execution.compile, sync, parts)
            due = workers is not None and hasattr(reporter, "due") and reporter.due()
            return Launched.queue(lr, loss, grad_norm, workers, due, part_norms)

    # The host runs one step ahead of the device: step n + 1 is queued before step n's loss is
    # read, so the reading, reporting and progress bar overlap the GPU's work instead of leaving
    # it idle (2.3 ms a step at 125M, docs/performance.md). A step after which a validation or
    # checkpoint is due is read before the next launches: both must see the model of that step.
    last = time.perf_counter()
    launched = launch(state.step) if state.step < total_steps else None
    saved_at = None
    while launched is not None:
        tokens_after = state.tokens + tokens_per_step
        due = (next_eval is not None and tokens_after >= next_eval) or (
            checkpoint is not None and next_ckpt is not None and tokens_after >= next_ckpt)
        ahead = launch(state.step + 1) if not due and state.step + 1 < total_steps else None
        with _oom_advice(spec, context, device):
            loss, grad_norm = launched.read()  # waits for step n only, not for step n + 1
        if not math.isfinite(loss):  # raised before any checkpoint holds the step's update
            raise TrainError(f"the training loss became {loss} at step {state.step} ({state.tokens} tokens)")
        now = time.perf_counter()
        seconds, last = now - last, now  # one step of device time while the device stays busy
        state.step += 1
        state.tokens = tokens_after
        if state.step > max(1, total_steps // 10):  # leave compilation and warm-up out of the rate
            timed_tokens, timed_seconds = timed_tokens + tokens_per_step, timed_seconds + seconds
        # step_ms: from the previous step's loss reaching the host to this one's, the device's time
        # per step while it stays busy (validation and checkpoints left out); the rate's slow steps
        # show here (compilation, and any that a mean over the run would hide).
        metrics = {"train_loss": loss, "lr": launched.lr, "grad_norm": grad_norm, "step": state.step,
                   "step_ms": seconds * 1e3}
        if next_eval is not None and state.tokens >= next_eval:
            metrics["val_loss"] = quick_val_loss(model, data, spec, device, autocast)
            # What pruning keeps (or would keep) as the gates learn: the share rises from its early value.
            kept = acp_kept_fraction(model, data.eval_batches(data.context, 1, 1), device, autocast)
            if kept:
                metrics["acp_kept_fraction"] = kept["acp_kept_fraction"]
            next_eval = _next_multiple(state.tokens, spec.eval_every_tokens)
        # The parts' norms go to the history only (result.json), not to the tracker's metrics.
        state.history.append({"tokens": state.tokens, **metrics,
                              **({"grad_norm_parts": parts.named(launched.part_norms)} if parts else {})})
        if reporter is not None:
            reporter.report(state.tokens, metrics, **({"due": launched.due} if workers else {}))
        if next_ckpt is not None and state.tokens >= next_ckpt and checkpoint is not None:
            (workers.save if workers else save_checkpoint)(checkpoint, model, opt, state, trial.spec_hash())
            next_ckpt = _next_multiple(state.tokens, spec.checkpoint_every_tokens)
            saved_at = state.step
        if ahead is None and state.step < total_steps:
            last = time.perf_counter()  # validation and checkpoints are not training time
            ahead = launch(state.step)
        launched = ahead
    if checkpoint is not None and spec.keep_weights and saved_at != state.step:
        keep_final_weights(checkpoint, model, opt, state, trial.spec_hash(), workers)
    return {"steps": state.step, "tokens": state.tokens, "history": state.history,
            "tokens_per_s": timed_tokens / timed_seconds if timed_seconds else None}


def keep_final_weights(path: Path, model, opt, state: TrainState, spec_hash: str, workers=None) -> None:
    """The final weights as the checkpoint at the last step, for `wb eval` and `wb export`. One
    process writes the model's state alone: a finished training's checkpoint is never resumed
    (read_checkpoint), so its optimizer state would only take twice the model's size on disk.
    Several workers write theirs as at any checkpoint (gathering the shards takes all of them)."""
    if workers:
        workers.save(path, model, opt, state, spec_hash)
    else:
        write_checkpoint(path, model.state_dict(), {}, state, spec_hash)


def _too_big(spec: TrainSpec, context: int, device: torch.device) -> TrainError:
    return TrainError(
        f"train.batch_size={spec.batch_size} with context {context} does not fit in memory on "
        f"{device.type}: lower batch_size and raise grad_accum to keep the tokens per step "
        f"(e.g. batch_size {max(1, spec.batch_size // 2)}, grad_accum {spec.grad_accum * 2})")


def _check_fits(spec: TrainSpec, token_bytes: int, context: int, device: torch.device) -> None:
    """Refuse at once a micro-batch whose one hidden state (the embedding's output: batch x context
    x ``token_bytes``, d_model elements of the parameters' size a token; less than any step holds)
    is larger than the device's whole memory: building that batch before running out of memory
    took the CPU 40 s at batch_size 2^20."""
    if device.type == "cuda":
        memory = torch.cuda.get_device_properties(device).total_memory
    elif device.type == "cpu":
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    else:
        return
    if spec.batch_size * context * token_bytes > memory:
        raise _too_big(spec, context, device)


@contextmanager
def _oom_advice(spec: TrainSpec, context: int, device: torch.device):
    """Out of memory while launching or reading a step: say so, and what to change."""
    try:
        yield
    except (RuntimeError, MemoryError) as e:
        if not _oom(e):
            raise
        raise _too_big(spec, context, device) from None


def _next_multiple(tokens: int, every: int | None) -> int | None:
    return None if every is None else (tokens // every + 1) * every


def quick_val_loss(model, data, spec: TrainSpec, device, autocast) -> float:
    """Mean loss on the first eval_batches held-out batches of the training context."""
    batches = data.eval_batches(data.context, spec.eval_batches * spec.batch_size, spec.batch_size)
    model.eval()
    total, count = per_position_loss(model, batches, device, autocast)
    model.train()
    return float(total.sum() / max(count.sum(), 1))

"""Training of one trial: AdamW, warmup + cosine schedule in tokens, clipping, bf16 autocast on
the GPU, gradient accumulation, periodic validation, checkpoints and resume.

Training reports through ``Reporter`` and knows nothing of Ray or MLflow. Data order is a function
of (seed, step), the model init of the seed, so a run resumed from a checkpoint repeats the
uninterrupted run's loss curve exactly on CPU.
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

import torch
import torch.nn as nn

from workbench.data import IGNORE
from workbench.evaluate import per_position_loss
from workbench.execution import Execution
from workbench.faults import write_atomically
from workbench.specs import TrainSpec, TrialSpec

# Dense bf16 matmul rate of the GPU (docs/performance.md, "MFU"), the MFU denominator.
PEAK_FLOPS = {"NVIDIA H200": 790e12}


class TrainError(RuntimeError):
    """Training cannot go on (NaN loss, out of memory); the message says why and what to change."""


class Reporter(Protocol):
    """Receives the metrics of every step; may also define ``on_resume(history)``, called with
    the checkpoint's history when training resumes."""

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


def lr_at(spec: TrainSpec, tokens: int) -> float:
    """Linear warmup from 0, then cosine decay to min_lr_ratio * lr at spec.tokens."""
    if tokens < spec.warmup_tokens:
        return spec.lr * tokens / spec.warmup_tokens
    progress = min(1.0, (tokens - spec.warmup_tokens) / max(1, spec.tokens - spec.warmup_tokens))
    floor = spec.min_lr_ratio * spec.lr
    return floor + (spec.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def make_optimizer(model: nn.Module, spec: TrainSpec, device: torch.device) -> torch.optim.AdamW:
    """Weight decay on the matrices of Linear layers and the embedding only (docs/fox-notes.md, "Training
    recipe"); a parameter with an ``lr_scale`` attribute (set by its component) trains at that multiple
    of the schedule's learning rate, in a group of its own."""
    decay = {id(m.weight) for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))}
    params = list(dict.fromkeys(model.parameters()))
    keyed: dict[tuple[bool, float], list] = {}
    for p in params:
        keyed.setdefault((id(p) in decay, float(getattr(p, "lr_scale", 1.0))), []).append(p)
    # The two groups of old first and in their old order, so that old checkpoints' optimizer states load.
    order = sorted(keyed, key=lambda k: (k[1] != 1.0, not k[0], k[1]))
    groups = [{"params": keyed[k], "weight_decay": spec.weight_decay if k[0] else 0.0, "lr_scale": k[1]}
              for k in order]
    return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas, fused=device.type == "cuda")


def save_checkpoint(path: Path, model, opt, state: TrainState, spec_hash: str) -> None:
    """Write to a temporary file and rename: a kill or a failed write (disk full) mid-way leaves
    the last good checkpoint (workbench.faults.write_atomically)."""
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": state.step,
            "tokens": state.tokens, "history": state.history, "spec_hash": spec_hash}
    write_atomically(path, lambda tmp: torch.save(ckpt, tmp))


def load_checkpoint(path: Path, model, opt, spec_hash: str, total_steps: int | None = None) -> TrainState | None:
    """The training state of ``path``, loaded into ``model`` and ``opt``; None for a checkpoint of
    a finished training (``total_steps`` reached): that one holds the final weights, and running
    the trial again trains it from the first step rather than only evaluating them."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    if ckpt["spec_hash"] != spec_hash:
        raise TrainError(f"{path} belongs to spec {ckpt['spec_hash']}, not {spec_hash}; use another --out")
    if total_steps is not None and ckpt["step"] >= total_steps:
        return None
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    return TrainState(ckpt["step"], ckpt["tokens"], ckpt["history"])


def _oom(err: BaseException) -> bool:
    text = str(err)
    return isinstance(err, torch.cuda.OutOfMemoryError) or "can't allocate memory" in text or "out of memory" in text


def train(trial: TrialSpec, model: nn.Module, data, reporter: Reporter | None = None,
          checkpoint: Path | None = None, device: torch.device | None = None,
          execution: Execution | None = None) -> dict:
    """Train ``model`` in place; returns throughput figures and the state's history. ``execution``
    (default: what the trial's TrainSpec asks for) says whether the step is compiled."""
    spec = trial.train
    execution = execution or Execution.of_trial(spec)
    device = device or resolve_device(spec)
    autocast = autocast_for(spec, device)
    opt = make_optimizer(model, spec, device)
    context = data.context
    tokens_per_step = spec.batch_size * spec.grad_accum * context
    total_steps = math.ceil(spec.tokens / tokens_per_step)
    state = TrainState()
    if checkpoint is not None and checkpoint.exists():
        state = load_checkpoint(checkpoint, model, opt, trial.spec_hash(), total_steps) or TrainState()
        if state.step and hasattr(reporter, "on_resume"):
            reporter.on_resume(state.history)
    step_fn = step_callable(model, execution, device, spec.grad_accum)
    batches = BatchQueue(data, trial.seed, spec, device)
    next_eval = _next_multiple(state.tokens, spec.eval_every_tokens)
    next_ckpt = _next_multiple(state.tokens, spec.checkpoint_every_tokens)
    timed_tokens, timed_seconds = 0, 0.0
    model.train()

    def launch(step: int) -> _Launched:
        tokens = step * tokens_per_step  # before this step
        lr = lr_at(spec, tokens)
        for group in opt.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        with _oom_advice(spec, context, device):
            loss, grad_norm = train_step(step_fn, model, opt, batches, step, spec, autocast, execution.compile)
            return _Launched.queue(lr, loss, grad_norm)

    # The host runs one step ahead of the device: step n + 1 is queued before step n's loss is
    # read, so the reading, reporting and progress bar overlap the GPU's work instead of leaving
    # it idle (2.3 ms a step at 125M, docs/performance.md). A step after which a validation or
    # checkpoint is due is read before the next launches: both must see the model of that step.
    last = time.perf_counter()
    launched = launch(state.step) if state.step < total_steps else None
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
            next_eval = _next_multiple(state.tokens, spec.eval_every_tokens)
        state.history.append({"tokens": state.tokens, **metrics})
        if reporter is not None:
            reporter.report(state.tokens, metrics)
        if next_ckpt is not None and state.tokens >= next_ckpt and checkpoint is not None:
            save_checkpoint(checkpoint, model, opt, state, trial.spec_hash())
            next_ckpt = _next_multiple(state.tokens, spec.checkpoint_every_tokens)
        if ahead is None and state.step < total_steps:
            last = time.perf_counter()  # validation and checkpoints are not training time
            ahead = launch(state.step)
        launched = ahead
    return {"steps": state.step, "tokens": state.tokens, "history": state.history,
            "tokens_per_s": timed_tokens / timed_seconds if timed_seconds else None}


@dataclass
class _Launched:
    """A step queued on the device, not yet read: its lr, and its loss and gradient norm on their
    way to the host. On CUDA they are copied into pinned memory right behind the step, with an
    event: reading them waits for that step alone. (``.item()`` would queue its copy behind
    everything launched so far, the next step included, and the GPU would then idle while the
    host reports and launches the step after.)"""
    lr: float
    values: torch.Tensor  # (loss, grad norm), fp32
    done: torch.cuda.Event | None

    @classmethod
    def queue(cls, lr: float, loss: torch.Tensor, grad_norm: torch.Tensor) -> "_Launched":
        values = torch.stack([loss.detach().float(), grad_norm.detach().float()])
        if values.device.type != "cuda":
            return cls(lr, values, None)
        host = torch.empty(2, dtype=torch.float32, pin_memory=True)
        host.copy_(values, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return cls(lr, host, done)

    def read(self) -> tuple[float, float]:
        if self.done is not None:
            self.done.synchronize()
        loss, grad_norm = self.values.tolist()
        return loss, grad_norm


@contextmanager
def _oom_advice(spec: TrainSpec, context: int, device: torch.device):
    """Out of memory while launching or reading a step: say so, and what to change."""
    try:
        yield
    except (RuntimeError, MemoryError) as e:
        if not _oom(e):
            raise
        raise TrainError(
            f"train.batch_size={spec.batch_size} with context {context} does not fit in memory on "
            f"{device.type}: lower batch_size and raise grad_accum to keep the tokens per step "
            f"(e.g. batch_size {max(1, spec.batch_size // 2)}, grad_accum {spec.grad_accum * 2})"
        ) from None


def _next_multiple(tokens: int, every: int | None) -> int | None:
    return None if every is None else (tokens // every + 1) * every


def step_callable(model: nn.Module, execution: Execution, device: torch.device, grad_accum: int = 1):
    """What a training step calls: the model, or with ``compile`` the compiled model, whose forward
    and backward replay as CUDA graphs when ``cuda_graphs`` is on, the device is CUDA and a step is
    one micro-batch. (With gradient accumulation the first micro-batch's gradients sit in the
    graphs' memory pool while the next replays, so accumulation runs without graphs.) Shapes are
    static (``dynamic=False``): the few a trial has (training, each evaluation length) compile once
    each; Inductor 2.11's dynamic-batch cumulative sum (the reference attention's) fails to
    generate code on CUDA."""
    if not execution.compile:
        return model
    graphs = execution.cuda_graphs and device.type == "cuda" and grad_accum == 1
    return torch.compile(model, mode="reduce-overhead" if graphs else None, dynamic=False)


def optimizer_step(model: nn.Module, opt: torch.optim.Optimizer, spec: TrainSpec) -> torch.Tensor:
    """Clip, step, clear the gradients; returns the gradient norm before clipping."""
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip or float("inf"))
    opt.step()
    opt.zero_grad(set_to_none=True)
    return grad_norm


class BatchQueue:
    """Training batches by (step, micro-batch), built and sent to the device one step ahead: while
    the GPU runs step n, the host gathers step n + 1's tokens and starts their copies from pinned
    memory (which do not make the host wait), so step n + 1 launches as soon as step n ends.
    Batches depend only on (seed, step, micro), so prefetching changes no result."""

    def __init__(self, data, seed: int, spec: TrainSpec, device: torch.device):
        self.data, self.seed, self.spec, self.device = data, seed, spec, device
        self._ready: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def _load(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self.data.train_batch(self.seed, step, micro, self.spec.batch_size)
        x, y = batch.x, batch.y
        if self.device.type == "cuda":
            x, y = x.pin_memory(), y.pin_memory()
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def prefetch(self, step: int) -> None:
        self._ready = {(step, m): self._load(step, m) for m in range(self.spec.grad_accum)}

    def get(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._ready.pop((step, micro), None) or self._load(step, micro)


def train_step(step_fn, model: nn.Module, opt: torch.optim.Optimizer, batches: BatchQueue, step: int,
               spec: TrainSpec, autocast, compiled: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step, queued on the device without waiting for it: forward and backward of
    every micro-batch, clip and AdamW, then the next step's batches. Returns the mean loss and the
    gradient norm as 0-d tensors; reading them waits for the GPU (the optimizer's kernels are
    already queued behind the backward by then, so the GPU does not idle while Python steps)."""
    loss = _accumulate(step_fn, batches, step, spec, autocast, compiled)
    grad_norm = optimizer_step(model, opt, spec)
    batches.prefetch(step + 1)
    return loss, grad_norm


def _accumulate(model, batches: BatchQueue, step: int, spec: TrainSpec, autocast, compiled: bool) -> torch.Tensor:
    """Forward and backward of every micro-batch; returns the step's mean loss as a 0-d tensor."""
    total = torch.zeros((), device=batches.device)
    for micro in range(spec.grad_accum):
        x, y = batches.get(step, micro)
        if compiled:
            # A new step for CUDA graph trees: the previous replay's outputs may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        with autocast():
            loss = model(x, y, ignore_index=IGNORE) / spec.grad_accum
        loss.backward()
        total += loss.detach().float()
    return total


def quick_val_loss(model, data, spec: TrainSpec, device, autocast) -> float:
    """Mean loss on the first eval_batches held-out batches of the training context."""
    batches = data.eval_batches(data.context, spec.eval_batches * spec.batch_size, spec.batch_size)
    model.eval()
    total, count = per_position_loss(model, batches, device, autocast)
    model.train()
    return float(total.sum() / max(count.sum(), 1))

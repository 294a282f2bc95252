"""The step machinery one trial's training loop runs, whether in one process or as one of N
workers (workbench/train/distributed.py): the learning-rate schedule, AdamW's parameter groups, the
(compiled) step, the batches one step ahead, and a launched step's values on their way to the host.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn as nn

from foxwb.components.protocols import lr_scale_of
from foxwb.workbench.data.corpus import IGNORE
from foxwb.workbench.execution import Execution
from foxwb.workbench.train.grad_parts import GradParts
from foxwb.workbench.model import stored_weight
from foxwb.workbench.train.step_share import Shard, shard_batches
from foxwb.workbench.spec.trial import TrainSpec

def lr_at(spec: TrainSpec, tokens: int) -> float:
    """Linear warmup from 0, then cosine decay to min_lr_ratio * lr at spec.tokens."""
    if tokens < spec.warmup_tokens:
        return spec.lr * tokens / spec.warmup_tokens
    progress = min(1.0, (tokens - spec.warmup_tokens) / max(1, spec.tokens - spec.warmup_tokens))
    floor = spec.min_lr_ratio * spec.lr
    return floor + (spec.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def make_optimizer(model: nn.Module, spec: TrainSpec, device: torch.device) -> torch.optim.AdamW:
    """Weight decay on the matrices of Linear layers and the embedding only (docs/fox-notes.md, "Training
    recipe"); a parameter with an ``lr_scale`` attribute (set by its component: components/protocols.py,
    ``set_lr_scale``) trains at that multiple of the schedule's learning rate, in a group of its own."""
    decay = {id(stored_weight(m)) for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))}
    params = list(dict.fromkeys(model.parameters()))
    keyed: dict[tuple[bool, float], list] = {}
    for p in params:
        keyed.setdefault((id(p) in decay, lr_scale_of(p)), []).append(p)
    # The two groups of old first and in their old order, so that old checkpoints' optimizer states load.
    order = sorted(keyed, key=lambda k: (k[1] != 1.0, not k[0], k[1]))
    groups = [{"params": keyed[k], "weight_decay": spec.weight_decay if k[0] else 0.0, "lr_scale": k[1]}
              for k in order]
    return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas, fused=device.type == "cuda")


@dataclass
class Launched:
    """A step queued on the device, not yet read: its lr, and its loss and gradient norm on their
    way to the host. On CUDA they are copied into pinned memory right behind the step, with an
    event: reading them waits for that step alone. (``.item()`` would queue its copy behind
    everything launched so far, the next step included, and the GPU would then idle while the
    host reports and launches the step after.)"""
    lr: float
    values: torch.Tensor  # (loss, grad norm[, report flag], the parts' grad norms...), fp32
    done: torch.cuda.Event | None
    flagged: bool = False  # whether values[2] is the report flag (N workers)

    @classmethod
    def queue(cls, lr: float, loss: torch.Tensor, grad_norm: torch.Tensor, workers=None,
              due: bool = False, part_norms: torch.Tensor | None = None) -> "Launched":
        """``workers`` (foxwb.workbench.train.distributed.Workers): the loss is this worker's share, averaged
        over the workers here; ``due`` (rank 0's wish to report) travels in the same all-reduce,
        so that every worker agrees on when to report. ``part_norms`` (GradParts.norms) travel
        in the same copy to the host."""
        values = torch.stack([loss.detach().float(), grad_norm.detach().float()])
        if workers is not None:  # (one process sends nothing from the host: no copy to wait for)
            values = torch.cat([values, values.new_tensor([float(due)])])
        if part_norms is not None:
            values = torch.cat([values, part_norms.float()])
        if workers is not None:
            values = workers.mean(values)
        flagged = workers is not None
        if values.device.type != "cuda":
            return cls(lr, values, None, flagged)
        host = torch.empty(len(values), dtype=torch.float32, pin_memory=True)
        host.copy_(values, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return cls(lr, host, done, flagged)

    def read(self) -> tuple[float, float]:
        if self.done is not None:
            self.done.synchronize()
        loss, grad_norm = self.values[:2].tolist()
        return loss, grad_norm

    @property
    def due(self) -> bool:
        """Whether rank 0 asked for a report at this step (False in one process)."""
        return self.flagged and bool(self.values[2] > 0)

    @property
    def part_norms(self) -> list[float]:
        """The parts' gradient norms (empty without them); after ``read``."""
        return self.values[3 if self.flagged else 2 :].tolist()


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


def optimizer_step(model: nn.Module, opt: torch.optim.Optimizer, spec: TrainSpec,
                   parts: GradParts | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Clip, step, clear the gradients; returns the gradient norm before clipping, and with
    ``parts`` each part's gradient norm before clipping (else None)."""
    part_norms = parts.norms() if parts is not None else None
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip or float("inf"))
    if hasattr(grad_norm, "full_tensor"):  # FSDP: a DTensor holding the norm over every shard
        grad_norm = grad_norm.full_tensor()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return grad_norm, part_norms


class BatchQueue:
    """Training batches by (step, micro-batch), built and sent to the device one step ahead: while
    the GPU runs step n, the host gathers step n + 1's tokens and starts their copies from pinned
    memory (which do not make the host wait), so step n + 1 launches as soon as step n ends.
    Batches depend only on (seed, step, micro), so prefetching changes no result. With a ``shard``
    (foxwb.workbench.train.step_share) the micro-batches are one worker's share of each step."""

    def __init__(self, data, seed: int, spec: TrainSpec, device: torch.device, shard: Shard | None = None):
        self.data, self.seed, self.spec, self.device, self.shard = data, seed, spec, device, shard
        self.micro_batches = spec.grad_accum if shard is None else shard.micro_batches
        self._ready: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def _load(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._to_device(self.data.train_batch(self.seed, step, micro, self.spec.batch_size))

    def _to_device(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = batch.x, batch.y
        if self.device.type == "cuda":
            x, y = x.pin_memory(), y.pin_memory()
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def prefetch(self, step: int) -> None:
        if self.shard is None:
            self._ready = {(step, m): self._load(step, m) for m in range(self.spec.grad_accum)}
        else:
            self._ready = {(step, m): self._to_device(b)
                           for m, b in enumerate(shard_batches(self.data, self.seed, step, self.shard))}

    def get(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        if (step, micro) not in self._ready and self.shard is not None:
            self.prefetch(step)
        return self._ready.pop((step, micro), None) or self._load(step, micro)


def train_step(step_fn, model: nn.Module, opt: torch.optim.Optimizer, batches: BatchQueue, step: int,
               spec: TrainSpec, autocast, compiled: bool = False, sync=None,
               parts: GradParts | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One optimizer step, queued on the device without waiting for it: forward and backward of
    every micro-batch, clip and AdamW, then the next step's batches. Returns the mean loss and the
    gradient norm as 0-d tensors (with ``parts``, also each part's gradient norm; else None);
    reading them waits for the GPU (the optimizer's kernels are
    already queued behind the backward by then, so the GPU does not idle while Python steps).
    ``sync(last)`` (N workers): a context for each micro-batch's backward, in which gradients are
    averaged over the workers only on the last one."""
    loss = _accumulate(step_fn, batches, step, spec, autocast, compiled, sync)
    grad_norm, part_norms = optimizer_step(model, opt, spec, parts)
    batches.prefetch(step + 1)
    return loss, grad_norm, part_norms


def _accumulate(model, batches: BatchQueue, step: int, spec: TrainSpec, autocast, compiled: bool,
                sync=None) -> torch.Tensor:
    """Forward and backward of every micro-batch; returns the step's mean loss as a 0-d tensor."""
    total = torch.zeros((), device=batches.device)
    n = batches.micro_batches
    for micro in range(n):
        x, y = batches.get(step, micro)
        if compiled:
            # A new step for CUDA graph trees: the previous replay's outputs may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        with sync(micro == n - 1) if sync is not None else nullcontext():
            with autocast():
                loss = model(x, y, ignore_index=IGNORE) / n
            loss.backward()
        total += loss.detach().float()
    return total



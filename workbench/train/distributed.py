"""One process among a trial's N workers: its share of each step, the model wrapped for data
parallelism (DDP) or sharding (FSDP2), the mean over workers, and checkpoints in the one format
that any worker count reads.

The process group is set up by the launcher (Ray Train's TorchTrainer: gloo on the CPU, NCCL on
CUDA) or by ``init_process_group``; ``Workers`` only reads it. Numerics: parameters stay fp32
under both (bf16 autocast in the step as in one process), so a step differs from one worker's
only in the order its sums run.
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn

from foxwb.workbench.train.step_share import Shard, plan_shard
from foxwb.workbench.train.loop import TrainState, read_checkpoint, write_checkpoint


def init_process_group(device: torch.device, rank: int, workers: int, rendezvous: str) -> None:
    """A process group of ``workers`` processes on one machine without a launcher (scripts, tests):
    gloo on the CPU, NCCL on CUDA. They meet in the file ``rendezvous``: a fresh path (not yet
    there) that all of them see, which their launcher removes afterwards. No port is chosen
    beforehand, so none can be taken by another process between the choice and the bind (a
    TCP rendezvous on a port picked as free failed so: EADDRINUSE)."""
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"file://{rendezvous}",
                            rank=rank, world_size=workers)


@dataclass
class Workers:
    """This process's place among the trial's workers (``parallel``: ddp or fsdp) on ``device``."""

    parallel: str
    device: torch.device
    shard: Shard

    @classmethod
    def join(cls, train, device: torch.device) -> "Workers":
        """From the process group already set up; ``train`` is the trial's TrainSpec."""
        if train.parallel not in ("ddp", "fsdp"):
            raise ValueError(f"train.parallel={train.parallel!r}; allowed: ddp, fsdp")
        return cls(train.parallel, device, plan_shard(train, dist.get_rank(), dist.get_world_size()))

    @property
    def rank(self) -> int:
        return self.shard.rank

    @property
    def workers(self) -> int:
        return self.shard.workers

    def wrap(self, model: nn.Module) -> nn.Module:
        """``model`` (on this worker's device, the same init on every worker) for training: DDP,
        or FSDP2 with each block and then the whole model sharded."""
        if self.parallel == "ddp":
            ids = [self.device.index if self.device.index is not None else torch.cuda.current_device()] \
                if self.device.type == "cuda" else None
            # No buffer is trained (RoPE's tables are fixed): nothing to send before each forward.
            # (torch 2.13 renamed the switch; the GPU machine's 2.11 knows the old name only.)
            ddp = nn.parallel.DistributedDataParallel
            quiet = ({"forward_sync_buffers": False} if "forward_sync_buffers" in inspect.signature(ddp).parameters
                     else {"broadcast_buffers": False})
            return ddp(model, device_ids=ids, **quiet)
        # FSDP's modules take over a second to import and DDP (the default) does without them.
        from torch.distributed.fsdp import fully_shard

        # fully_shard replaces the parameters by sharded ones; a component's lr_scale (read by
        # make_optimizer's groups) must move with them.
        scales = {name: p.lr_scale for name, p in model.named_parameters() if hasattr(p, "lr_scale")}
        for block in getattr(model, "blocks", []):
            fully_shard(block)
        fully_shard(model)
        for name, p in model.named_parameters():
            if name in scales:
                p.lr_scale = scales[name]
        return model

    def inner(self, model: nn.Module) -> nn.Module:
        """The module whose state dict names parameters as one process does."""
        return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model

    @contextmanager
    def sync(self, model: nn.Module, last: bool):
        """Around a micro-batch's backward: gradients are averaged over the workers on the last
        micro-batch of the step only."""
        if self.parallel == "ddp":
            with nullcontext() if last else model.no_sync():
                yield
        else:
            model.set_requires_gradient_sync(last)
            yield

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """The mean over workers (a sum then a division: gloo has no average)."""
        values = values.clone()
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
        return values / self.workers

    def _state(self, model: nn.Module, opt: torch.optim.Optimizer) -> tuple[dict, dict]:
        """The whole model's and optimizer's state on rank 0 (empty elsewhere); a collective under FSDP."""
        if self.parallel == "ddp":
            return (self.inner(model).state_dict(), opt.state_dict()) if self.rank == 0 else ({}, {})
        # FSDP only: torch.distributed.checkpoint takes a second to import, and DDP does without it.
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        model_state = get_model_state_dict(model, options=options)
        opt_state = get_optimizer_state_dict(model, opt, options=options)
        return model_state, (_numbered(opt_state) if self.rank == 0 else {})

    def save(self, path, model: nn.Module, opt: torch.optim.Optimizer, state: TrainState, spec_hash: str) -> None:
        """Rank 0 writes the whole state, atomically, in one process's format; every worker waits
        for it, so that none runs ahead of a checkpoint that a kill would leave unwritten."""
        model_state, opt_state = self._state(model, opt)
        if self.rank == 0:
            write_checkpoint(path, model_state, opt_state, state, spec_hash)
        dist.barrier()

    def load(self, path, model: nn.Module, opt: torch.optim.Optimizer, spec_hash: str,
             total_steps: int | None = None) -> TrainState | None:
        """Every worker reads the whole checkpoint (written by any worker count) and keeps its part;
        None for a finished training's (foxwb.workbench.train.loop.read_checkpoint)."""
        ckpt = read_checkpoint(path, spec_hash, total_steps)
        if ckpt is None:
            return None
        if self.parallel == "ddp":
            self.inner(model).load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["optimizer"])
        else:
            # FSDP only: torch.distributed.checkpoint takes a second to import, and DDP does without it.
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                set_model_state_dict,
                set_optimizer_state_dict,
            )

            options = StateDictOptions(full_state_dict=True)
            set_model_state_dict(model, ckpt["model"], options=options)
            set_optimizer_state_dict(model, opt, _named(ckpt["optimizer"], opt, model), options=options)
        return TrainState(ckpt["step"], ckpt["tokens"], ckpt["history"])

    def gather(self, model: nn.Module, build) -> nn.Module | None:
        """The trained model as one process holds it, on rank 0 (None elsewhere), to evaluate;
        ``build()`` makes an empty one of the same spec. A collective under FSDP."""
        if self.parallel == "ddp":
            return self.inner(model) if self.rank == 0 else None
        # FSDP only: torch.distributed.checkpoint takes a second to import, and DDP does without it.
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if self.rank != 0:
            return None
        plain = build().to(self.device)
        plain.load_state_dict(model_state)
        return plain


def _numbered(opt_state: dict) -> dict:
    """An optimizer state keyed by parameter name (torch.distributed.checkpoint) as
    ``Optimizer.state_dict()`` keys it: parameters numbered through the groups in order."""
    names = [name for group in opt_state["param_groups"] for name in group["params"]]
    index = {name: i for i, name in enumerate(names)}
    groups, start = [], 0
    for group in opt_state["param_groups"]:
        groups.append({**group, "params": list(range(start, start + len(group["params"])))})
        start += len(group["params"])
    return {"state": {index[name]: value for name, value in opt_state["state"].items()}, "param_groups": groups}


def _named(opt_state: dict, opt: torch.optim.Optimizer, model: nn.Module) -> dict:
    """The reverse of ``_numbered`` for this optimizer over ``model``'s parameters."""
    name_of = {id(p): name for name, p in model.named_parameters()}
    names = [name_of[id(p)] for group in opt.param_groups for p in group["params"]]
    groups = [{**saved, "params": [names[i] for i in saved["params"]]} for saved in opt_state["param_groups"]]
    return {"state": {names[i]: value for i, value in opt_state["state"].items()}, "param_groups": groups}

"""How a model runs, as opposed to what it computes: one frozen object given when the model is built
and the trial launched. Never part of a spec or its hash: the same spec is the same trial on any
machine, with any of these settings."""
from __future__ import annotations

from dataclasses import dataclass, replace

from foxwb.kernels import BACKENDS


@dataclass(frozen=True)
class Execution:
    """``attention_backend``: auto (Triton on CUDA, the reference on CPU), triton or reference.
    ``fuse_projections``: every projection of the block input (q, k, v and the components' own)
    in one matmul. ``fused_qkv``: KV-shift and QK-norm through kernels.prepare_qkv (None: on CUDA,
    where both slots' modules support it). ``fused_loss``: the head's loss through
    kernels.linear_cross_entropy (None: on CUDA). ``compile``: torch.compile the training step;
    ``cuda_graphs``: with compile on CUDA, replay it as CUDA graphs."""

    attention_backend: str = "auto"
    fuse_projections: bool = True
    fused_qkv: bool | None = None
    fused_loss: bool | None = None
    compile: bool = False
    cuda_graphs: bool = True

    def __post_init__(self):
        if self.attention_backend not in BACKENDS:
            raise ValueError(f"attention_backend={self.attention_backend!r}; allowed: {', '.join(BACKENDS)}")
        if self.fused_qkv and not self.fuse_projections:
            raise ValueError("fused_qkv=True needs fuse_projections=True (the kernel reads the one projection)")

    def but(self, **changes) -> "Execution":
        """A copy with ``changes``."""
        return replace(self, **changes)

    @classmethod
    def of_trial(cls, train) -> "Execution":
        """The execution a trial's TrainSpec asks for (its ``compile`` and ``cuda_graphs``)."""
        return cls(compile=train.compile, cuda_graphs=train.cuda_graphs)

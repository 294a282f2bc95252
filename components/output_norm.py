"""Output norm (slot ``output_norm``): per-head RMSNorm of the attention output (docs/fox-notes.md, "Output norm").

With the sigmoid output gate this is the fused y = (o / rms_head(o)) * w * sigmoid(g): the norm
acts here and the gate multiplies next, which is the same arithmetic.
"""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn
from pydantic import PositiveFloat

from foxwb.components.norm import rms_norm
from foxwb.components.registry import BlockDims, ComponentSpec, none_kind, register

none_kind("output_norm")


class HeadRMSNorm(nn.Module):
    def __init__(self, n_heads: int, head_dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n_heads, head_dim))
        self.eps = eps

    def forward(self, o: torch.Tensor) -> torch.Tensor:
        return rms_norm(o, self.weight, self.eps)  # (B, T, H, D)


@register
class OutputRMSNormSpec(ComponentSpec):
    slot = "output_norm"
    kind: Literal["rmsnorm"] = "rmsnorm"
    eps: PositiveFloat = 1e-6

    def build(self, dims: BlockDims) -> nn.Module:
        return HeadRMSNorm(dims.n_heads, dims.head_dim, self.eps)

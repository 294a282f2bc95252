"""Block-level normalisation (slot ``norm``): RMSNorm or LayerNorm over d_model."""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn

from pydantic import PositiveFloat

from foxwb.components.registry import BlockDims, ComponentSpec, register


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, statistic in fp32; ``weight`` broadcasts against x, so (D,)
    scales a whole vector and (H, D) gives each head of an (..., H, D) tensor its own scale."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


@register
class RMSNormSpec(ComponentSpec):
    """RMSNorm with a learnable scale (init 1), no bias; eps as the paper's norm_eps."""

    slot = "norm"
    kind: Literal["rmsnorm"] = "rmsnorm"
    eps: PositiveFloat = 1e-6

    def build(self, dims: BlockDims) -> nn.Module:
        return RMSNorm(dims.d_model, self.eps)


@register
class LayerNormSpec(ComponentSpec):
    slot = "norm"
    kind: Literal["layernorm"] = "layernorm"
    eps: PositiveFloat = 1e-5
    bias: bool = True

    def build(self, dims: BlockDims) -> nn.Module:
        return nn.LayerNorm(dims.d_model, eps=self.eps, bias=self.bias)

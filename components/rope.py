"""RoPE (slot ``rope``): non-interleaved (half-split) rotary embedding on the full head dim."""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn
from pydantic import PositiveFloat

from foxwb.components.registry import BlockDims, ComponentSpec, none_kind, register

none_kind("rope")


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, T, H, D); cos, sin: (T, D/2). Rotates each pair (x_i, x_{i + D/2})."""
    x1, x2 = x.float().chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]  # (T, 1, D/2)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)


class Rotary(nn.Module):
    def __init__(self, head_dim: int, base: float):
        super().__init__()
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pos = torch.arange(q.shape[1], device=q.device, dtype=torch.float32)
        angles = torch.outer(pos, self.inv_freq)  # (T, D/2)
        cos, sin = angles.cos(), angles.sin()
        return rotate(q, cos, sin), rotate(k, cos, sin)


@register
class RopeSpec(ComponentSpec):
    slot = "rope"
    kind: Literal["rope"] = "rope"
    base: PositiveFloat = 500000.0

    def build(self, dims: BlockDims) -> nn.Module:
        if dims.head_dim % 2:
            raise ValueError(f"rope needs an even head dim, got {dims.head_dim}")
        return Rotary(dims.head_dim, self.base)

"""Feed-forward network (slot ``mlp``): SwiGLU as in docs/fox-notes.md, "MLP", or a GELU MLP."""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import PositiveFloat, PositiveInt

from foxwb.components.registry import BlockDims, ComponentSpec, register


def swiglu_hidden(d_model: int, hidden_ratio: float, multiple_of: int) -> int:
    """I = round_up(int(d * ratio * 2/3), multiple_of): 768 -> 2048 at ratio 4, 1792 at 3.5."""
    raw = int(d_model * hidden_ratio * 2 / 3)
    return -(-raw // multiple_of) * multiple_of


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        # One fused projection: the first half is the gate, the second the value.
        self.w_in = nn.Linear(d_model, 2 * hidden, bias=False)
        self.w_out = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w_in(x).chunk(2, dim=-1)  # (B, T, I) each
        return self.w_out(F.silu(gate) * up)


@register
class SwiGLUSpec(ComponentSpec):
    slot = "mlp"
    kind: Literal["swiglu"] = "swiglu"
    hidden_ratio: PositiveFloat = 4.0
    intermediate_size: PositiveInt | None = None
    multiple_of: PositiveInt = 256

    def hidden(self, d_model: int) -> int:
        if self.intermediate_size is not None:
            return self.intermediate_size
        return swiglu_hidden(d_model, self.hidden_ratio, self.multiple_of)

    def build(self, dims: BlockDims) -> nn.Module:
        return SwiGLU(dims.d_model, self.hidden(dims.d_model))


@register
class GeluMLPSpec(ComponentSpec):
    slot = "mlp"
    kind: Literal["gelu"] = "gelu"
    hidden_ratio: PositiveFloat = 4.0

    def build(self, dims: BlockDims) -> nn.Module:
        hidden = int(dims.d_model * self.hidden_ratio)
        return nn.Sequential(
            nn.Linear(dims.d_model, hidden, bias=False),
            nn.GELU(),
            nn.Linear(hidden, dims.d_model, bias=False),
        )

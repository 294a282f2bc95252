"""Output gate (slot ``output_gate``): o <- act(W_g x) * o before W_o (fox.md 2.5).

``silu`` is only allowed without the output norm; ModelSpec enforces that.
"""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from components.registry import BlockDims, ComponentSpec, none_kind, register

none_kind("output_gate")


class OutputGate(nn.Module):
    def __init__(self, d_model: int, act):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.act = act

    def input_projections(self) -> dict[str, nn.Linear]:
        return {"gate": self.proj}

    def forward(self, x: torch.Tensor, o: torch.Tensor, projected: dict | None = None) -> torch.Tensor:
        # x: (B, T, d) block input; o: (B, T, H, D) attention output; projected: proj(x) computed
        # by the block's fused projection.
        logit = projected["gate"] if projected is not None else self.proj(x)
        return o * self.act(logit).view(o.shape)


@register
class SigmoidGateSpec(ComponentSpec):
    slot = "output_gate"
    kind: Literal["sigmoid"] = "sigmoid"

    def build(self, dims: BlockDims) -> nn.Module:
        return OutputGate(dims.d_model, torch.sigmoid)


@register
class SiluGateSpec(ComponentSpec):
    slot = "output_gate"
    kind: Literal["silu"] = "silu"

    def build(self, dims: BlockDims) -> nn.Module:
        return OutputGate(dims.d_model, F.silu)

"""Output gate (slot ``output_gate``): o <- act(W_g x) * o before W_o (docs/fox-notes.md, "Output gate").

``silu`` is only allowed without the output norm; ModelSpec enforces that.
"""
from __future__ import annotations

from typing import ClassVar, Literal

import torch
import torch.nn as nn

from foxwb.components.registry import BlockDims, ComponentSpec, none_kind, register

none_kind("output_gate")


def _sigmoid_and_slope(logit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.sigmoid(logit)
    return s, s * (1 - s)


def _silu_and_slope(logit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.sigmoid(logit)
    return logit * s, s * (1 + logit * (1 - s))


class _Gate(torch.autograd.Function):
    """o * act(logit) with the backward written out from o and the logits, in fp32 at least. Left
    to autograd, torch.compile's partitioner saved act(logit) for the backward, a (B, T, d) tensor
    written by the forward, where the logits are a view of the block's projection, kept anyway
    (docs/performance.md); fp32 makes act(logit) twice their size, so the logits are what it keeps."""

    @staticmethod
    def forward(ctx, o, logit, act_and_slope):
        ctx.save_for_backward(o, logit)
        ctx.act_and_slope = act_and_slope
        return o * act_and_slope(logit)[0]

    @staticmethod
    def backward(ctx, grad):
        o, logit = ctx.saved_tensors
        acc = torch.promote_types(logit.dtype, torch.float32)
        act, slope = ctx.act_and_slope(logit.to(acc))
        g = grad.to(acc)
        return (g * act).to(o.dtype), (g * o.to(acc) * slope).to(logit.dtype), None


class OutputGate(nn.Module):
    def __init__(self, d_model: int, act_and_slope):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.act_and_slope = act_and_slope  # logit -> (act(logit), act'(logit))

    def input_projections(self) -> dict[str, nn.Linear]:
        return {"gate": self.proj}

    def forward(self, x: torch.Tensor, o: torch.Tensor, projected: dict | None = None) -> torch.Tensor:
        # x: (B, T, d) block input; o: (B, T, H, D) attention output; projected: proj(x) computed
        # by the block's fused projection.
        logit = projected["gate"] if projected is not None else self.proj(x)
        return _Gate.apply(o, logit.view(o.shape), self.act_and_slope)


class _GateSpec(ComponentSpec):
    slot = "output_gate"
    act_and_slope: ClassVar  # logit -> (act(logit), act'(logit))

    def build(self, dims: BlockDims) -> nn.Module:
        return OutputGate(dims.d_model, type(self).act_and_slope)


@register
class SigmoidGateSpec(_GateSpec):
    kind: Literal["sigmoid"] = "sigmoid"
    act_and_slope = staticmethod(_sigmoid_and_slope)


@register
class SiluGateSpec(_GateSpec):
    kind: Literal["silu"] = "silu"
    act_and_slope = staticmethod(_silu_and_slope)

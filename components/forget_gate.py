"""Forget gate (slot ``forget_gate``): the per-head, per-token log f of docs/fox-notes.md, "Forget gate".

Every kind returns log f as fp32 ``[B, T, H]``; ``none`` leaves the attention ungated.
"""
from __future__ import annotations

import math
from typing import ClassVar, Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import PositiveFloat, model_validator

from foxwb.components.protocols import set_lr_scale
from foxwb.components.registry import BlockDims, ComponentSpec, none_kind, register

none_kind("forget_gate")


def decay_time_bias(n_heads: int, t_min: float, t_max: float) -> torch.Tensor:
    """Biases b_h with -1/log sigmoid(b_h) = T_h, T_h log-spaced in [t_min, t_max]: [H] fp32."""
    times = torch.exp(torch.linspace(math.log(t_min), math.log(t_max), n_heads, dtype=torch.float64))
    return (-torch.log(torch.expm1(1.0 / times))).float()


class DataDependentGate(nn.Module):
    def __init__(self, d_model: int, n_heads: int, bias_init: float = 0.0, lr_scale: float = 1.0,
                 logit_normalizer: float = 1.0):
        super().__init__()
        self.proj = nn.Linear(d_model, n_heads, bias=True)
        self.bias_init = bias_init
        self.logit_normalizer = logit_normalizer
        if lr_scale != 1.0:  # read by the optimizer's parameter groups (workbench/train/steps.py)
            set_lr_scale(self.proj.parameters(), lr_scale)

    def init_overrides(self) -> None:
        """Called by the model's init after that of ``proj`` (which zeroes every Linear's bias)."""
        nn.init.constant_(self.proj.bias, self.bias_init)

    def input_projections(self) -> dict[str, nn.Linear]:
        return {"logit": self.proj}

    def forward(self, x: torch.Tensor, projected: dict | None = None) -> torch.Tensor:
        logit = projected["logit"] if projected is not None else self.proj(x)
        # The logit is cast to fp32 before logsigmoid: log f feeds an fp32 cumsum.
        log_f = F.logsigmoid(logit.float())  # (B, T, H)
        return log_f if self.logit_normalizer == 1.0 else log_f / self.logit_normalizer


class ConstantGate(nn.Module):
    """f_h = sigmoid(b_h), the same at every token; ``learnable=False`` keeps b a buffer."""

    def __init__(self, bias: torch.Tensor, learnable: bool):
        super().__init__()
        if learnable:
            self.bias = nn.Parameter(bias)
        else:
            self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return F.logsigmoid(self.bias.float()).expand(B, T, -1)  # (B, T, H)


@register
class DataDependentGateSpec(ComponentSpec):
    """f = sigmoid(W_f x + b_f): FoX's gate. Weight N(0, 0.02) (the model init), bias ``bias_init``."""

    slot = "forget_gate"
    kind: Literal["data_dependent"] = "data_dependent"
    # b_f at init, every head: 0 (the paper's) starts f near 0.5, each token halving the weight of
    # everything before it; a positive value starts the gate remembering (sigmoid(4) = 0.982: a
    # decay time of 55 tokens). AdamW moves a bias by at most about lr per step, so a run of a few
    # hundred steps cannot move it far from where it starts (docs/stability.md).
    bias_init: float = 0.0
    # The gate projection's learning rate as a multiple of the run's (docs/stability.md): its logit
    # is a sum over d_model inputs that AdamW moves all at once, and it is not normalised the way
    # QK-norm normalises q and k.
    lr_scale: PositiveFloat = 1.0
    # log f = log sigmoid(W_f x + b_f) / logit_normalizer (GLA's gate normaliser): a value above 1
    # starts the gate remembering longer (bias 0 and 16: f = 0.958, a decay time of 23 tokens) and
    # divides the gradient that reaches the gate's logit, and through it the gate projection and
    # the block's input, by the same factor (docs/stability.md). 1 is the paper's gate.
    logit_normalizer: PositiveFloat = 1.0
    _new_fields: ClassVar[frozenset[str]] = frozenset({"bias_init", "lr_scale", "logit_normalizer"})

    def build(self, dims: BlockDims) -> nn.Module:
        return DataDependentGate(dims.d_model, dims.n_heads, self.bias_init, self.lr_scale, self.logit_normalizer)


class _DecayTimes(ComponentSpec):
    """A constant gate per head whose bias starts at the decay times (docs/fox-notes.md, "Forget gate")."""

    learnable: ClassVar[bool]
    decay_time_min: PositiveFloat = 2.0
    decay_time_max: PositiveFloat = 256.0

    def build(self, dims: BlockDims) -> nn.Module:
        bias = decay_time_bias(dims.n_heads, self.decay_time_min, self.decay_time_max)
        return ConstantGate(bias, learnable=self.learnable)

    @model_validator(mode="after")
    def _ordered(self):
        if self.decay_time_min > self.decay_time_max:
            raise ValueError(
                f"decay_time_min ({self.decay_time_min}) must not exceed decay_time_max ({self.decay_time_max})"
            )
        return self


@register
class BiasOnlyGateSpec(_DecayTimes):
    """Data-independent learnable gate, initialised from the decay times."""

    slot = "forget_gate"
    kind: Literal["bias_only"] = "bias_only"
    learnable = True


@register
class FixedGateSpec(_DecayTimes):
    """Fixed per-head decay exp(-1/T_h): ALiBi with slopes 1/T_h."""

    slot = "forget_gate"
    kind: Literal["fixed"] = "fixed"
    learnable = False

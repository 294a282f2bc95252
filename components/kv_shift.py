"""KV-shift (slot ``kv_shift``): the data-dependent token shift of fox.md 2.4.

k_t = a_t * k~_{t-1} + (1 - a_t) * k~_t per head, a_t = sigmoid(w_a . x_t) (no bias), k~_0 = 0;
the same for v with its own a. Kinds ``k``, ``v`` and ``kv`` say which of the two are shifted.
"""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from components.registry import BlockDims, ComponentSpec, none_kind, register

none_kind("kv_shift")


def token_shift(alpha_logit: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mix y (B, T, H, D) with its previous token by alpha = sigmoid(alpha_logit), (B, T, H)."""
    alpha = torch.sigmoid(alpha_logit).unsqueeze(-1)  # (B, T, H, 1)
    y_prev = F.pad(y, (0, 0, 0, 0, 1, 0))[:, :-1]  # (B, T, H, D), zeros at t = 0
    return alpha * y_prev + (1 - alpha) * y


class KVShift(nn.Module):
    def __init__(self, d_model: int, n_heads: int, shift_k: bool, shift_v: bool):
        super().__init__()
        self.k_alpha = nn.Linear(d_model, n_heads, bias=False) if shift_k else None
        self.v_alpha = nn.Linear(d_model, n_heads, bias=False) if shift_v else None

    def input_projections(self) -> dict[str, nn.Linear]:
        return {name: proj for name, proj in (("k", self.k_alpha), ("v", self.v_alpha)) if proj is not None}

    def forward(self, x, k, v, projected: dict | None = None):
        logits = projected if projected is not None else {n: p(x) for n, p in self.input_projections().items()}
        if self.k_alpha is not None:
            k = token_shift(logits["k"], k)
        if self.v_alpha is not None:
            v = token_shift(logits["v"], v)
        return k, v


def _shift_kind(name: str, shift_k: bool, shift_v: bool):
    class ShiftSpec(ComponentSpec):
        kind: Literal[name] = name  # type: ignore[valid-type]

        def build(self, dims: BlockDims) -> nn.Module:
            return KVShift(dims.d_model, dims.n_heads, shift_k, shift_v)

    ShiftSpec.slot = "kv_shift"
    ShiftSpec.__name__ = ShiftSpec.__qualname__ = f"{name.upper()}ShiftSpec"
    return register(ShiftSpec)


KShiftSpec = _shift_kind("k", True, False)
VShiftSpec = _shift_kind("v", False, True)
KVShiftSpec = _shift_kind("kv", True, True)

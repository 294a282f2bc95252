"""KV-shift (slot ``kv_shift``): the data-dependent token shift of docs/fox-notes.md, "KV-shift".

k_t = a_t * k~_{t-1} + (1 - a_t) * k~_t per head, a_t = sigmoid(w_a . x_t) (no bias), k~_0 = 0;
the same for v with its own a. Kinds ``k``, ``v`` and ``kv`` say which of the two are shifted.
``logit_normalizer: N`` makes a_t = sigmoid(w_a . x_t / N) (docs/stability.md).
"""
from __future__ import annotations

from typing import ClassVar, Literal

import torch
import torch.nn as nn
from pydantic import PositiveFloat
from torch.nn.utils import parametrize

from foxwb.components.registry import BlockDims, ComponentSpec, none_kind, register

none_kind("kv_shift")


def _shifted(y: torch.Tensor, by: int) -> torch.Tensor:
    """y moved along T (dim 1) so that row t holds y_{t - by} (by = +1: the previous token, -1:
    the next), zeros where that falls outside. Written as an index and a where, not F.pad: both are
    ops that torch.compile's partitioner may recompute in the backward, a pad is not (it saved the
    padded copy instead, one more (B, T, H, D) tensor written and read per layer)."""
    T = y.shape[1]
    t = torch.arange(T, device=y.device)
    src = t - by
    inside = ((src >= 0) & (src < T)).view(1, T, *([1] * (y.dim() - 2)))
    return torch.where(inside, y[:, src.clamp(0, T - 1)], 0)


class _TokenShift(torch.autograd.Function):
    """The shift with its backward written out from y and the logits: the backward shifts y and
    the gradient again, which fuses into its pointwise kernels, instead of reading a saved shifted
    copy of y (docs/performance.md)."""

    @staticmethod
    def forward(ctx, alpha_logit, y):
        ctx.save_for_backward(alpha_logit, y)
        alpha = torch.sigmoid(alpha_logit).unsqueeze(-1)  # (B, T, H, 1)
        return alpha * _shifted(y, 1) + (1 - alpha) * y

    @staticmethod
    def backward(ctx, grad):
        alpha_logit, y = ctx.saved_tensors
        alpha = torch.sigmoid(alpha_logit).unsqueeze(-1)
        # out_t = a_t y_{t-1} + (1 - a_t) y_t: y_t reaches out_t and out_{t+1}.
        d_y = (1 - alpha) * grad + _shifted(alpha * grad, -1)
        # In fp32 at least: more precise, and twice the size of y, so torch.compile's partitioner keeps
        # y (a view of the projection's output, kept anyway) rather than saving the difference.
        acc = torch.promote_types(y.dtype, torch.float32)
        d_alpha = (grad.to(acc) * (_shifted(y, 1).to(acc) - y.to(acc))).sum(-1, keepdim=True)
        alpha = alpha.to(acc)
        return (d_alpha * alpha * (1 - alpha)).squeeze(-1).to(alpha_logit.dtype), d_y.to(y.dtype)


def token_shift(alpha_logit: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mix y (B, T, H, D) with its previous token by alpha = sigmoid(alpha_logit), (B, T, H)."""
    return _TokenShift.apply(alpha_logit, y)


class _Divided(nn.Module):
    """A weight used divided by a constant: the parametrisation of a normalised mixing logit."""

    def __init__(self, by: float):
        super().__init__()
        self.by = by

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight / self.by


class KVShift(nn.Module):
    def __init__(self, d_model: int, n_heads: int, shift_k: bool, shift_v: bool, logit_normalizer: float = 1.0):
        super().__init__()
        self.k_alpha = nn.Linear(d_model, n_heads, bias=False) if shift_k else None
        self.v_alpha = nn.Linear(d_model, n_heads, bias=False) if shift_v else None
        if logit_normalizer != 1.0:
            # The weight the projections use (both paths, fused or not, read ``.weight``) is the
            # trained parameter divided by N, so the logit and the gradient reaching the parameter
            # are divided by N; the model's init draws the parameter itself (workbench/model.py).
            for proj in self.input_projections().values():
                parametrize.register_parametrization(proj, "weight", _Divided(logit_normalizer))

    def input_projections(self) -> dict[str, nn.Linear]:
        return {name: proj for name, proj in (("k", self.k_alpha), ("v", self.v_alpha)) if proj is not None}

    def qkv_prep_shift(self) -> tuple[bool, bool]:
        """Declares that this module computes kernels.prepare_qkv's shift (its logits the k, then v,
        input projections): (k shifted, v shifted). The block then takes the fused path on CUDA."""
        return self.k_alpha is not None, self.v_alpha is not None

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
        # a_t = sigmoid(w_a . x_t / logit_normalizer): a value above 1 divides the mixing logit and
        # the gradient that reaches w_a by it (as the forget gate's normaliser does for log f); where
        # the gradient-norm spikes go once the forget gate is normalised (docs/stability.md). 1 is
        # the paper's KV-shift, left out of the spec hash.
        logit_normalizer: PositiveFloat = 1.0
        _new_fields: ClassVar[frozenset[str]] = frozenset({"logit_normalizer"})

        def build(self, dims: BlockDims) -> nn.Module:
            return KVShift(dims.d_model, dims.n_heads, shift_k, shift_v, self.logit_normalizer)

    ShiftSpec.slot = "kv_shift"
    ShiftSpec.__name__ = ShiftSpec.__qualname__ = f"{name.upper()}ShiftSpec"
    return register(ShiftSpec)


KShiftSpec = _shift_kind("k", True, False)
VShiftSpec = _shift_kind("v", False, True)
KVShiftSpec = _shift_kind("kv", True, True)

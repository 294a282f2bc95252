"""The reference twin of prepare_qkv: KV-shift and QK-norm from the projection, in plain torch.

Columns of ``proj`` (B, T, P): [q | k | v | k-shift logits (H) | v-shift logits (H) | rest groups |
padding]. k_t = a_t k~_{t-1} + (1 - a_t) k~_t with a_t = sigmoid(logit_t) and k~_0 = 0 (the same
for v with its own logits); then q, k <- x / sqrt(mean_D(x^2) + eps) * w per head, statistics in
fp32 (docs/fox-notes.md, "KV-shift" and "QK-norm"). The math of components/kv_shift.py and
components/qk_norm.py, which tests hold the three of them to.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch


def _acc(x: torch.Tensor) -> torch.Tensor:
    """x in fp32 at least (fp64 stays fp64: the tests' strictest reference)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _shift(x: torch.Tensor, logit: torch.Tensor) -> torch.Tensor:
    """x (B, T, H, D) mixed with its previous token by sigmoid(logit) (B, T, H)."""
    a = torch.sigmoid(_acc(logit)).unsqueeze(-1)
    prev = torch.nn.functional.pad(_acc(x), (0, 0, 0, 0, 1, 0))[:, :-1]  # row t holds x_{t-1}, 0 at t = 0
    return a * prev + (1 - a) * _acc(x)


def _rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x = _acc(x)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * _acc(w)


def prepare_qkv_naive(proj: torch.Tensor, n_heads: int, head_dim: int, *, k_shift: bool = False,
                      v_shift: bool = False, q_weight: Optional[torch.Tensor] = None,
                      k_weight: Optional[torch.Tensor] = None, eps: float = 1e-5, rest: Sequence[int] = ()
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """q, k, v (B, T, H, D) in proj's dtype and the rest column groups (B, T, width), as prepare_qkv
    returns them; computed in fp32 (fp64 inputs: fp64), differentiable by autograd."""
    B, T, _ = proj.shape
    H, D = n_heads, head_dim
    q, k, v = (proj[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D) for i in range(3))
    col = 3 * H * D
    if k_shift:
        k, col = _shift(k, proj[..., col:col + H]), col + H
    if v_shift:
        v, col = _shift(v, proj[..., col:col + H]), col + H
    if q_weight is not None:
        q, k = _rms_norm(q, q_weight, eps), _rms_norm(k, k_weight, eps)
    groups = tuple(proj[..., col:col + sum(rest)].split(list(rest), dim=-1)) if rest else ()
    return q.to(proj.dtype), k.to(proj.dtype), v.to(proj.dtype), groups

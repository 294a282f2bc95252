"""QK-norm (slot ``qk_norm``): per-head RMSNorm of queries and keys, before RoPE (docs/fox-notes.md, "QK-norm")."""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn
from pydantic import PositiveFloat

from foxwb.components.norm import rms_norm
from foxwb.components.registry import BlockDims, ComponentSpec, none_kind, register

none_kind("qk_norm")


class QKNorm(nn.Module):
    def __init__(self, n_heads: int, head_dim: int, eps: float, share_across_heads: bool):
        super().__init__()
        # One scale per channel per head, or (the paper-era variant) one per channel shared by all heads.
        shape = (head_dim,) if share_across_heads else (n_heads, head_dim)
        self.q_weight = nn.Parameter(torch.ones(shape))
        self.k_weight = nn.Parameter(torch.ones(shape))
        self.eps = eps

    def qkv_prep_norm(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Declares that this module computes kernels.prepare_qkv's per-head RMSNorm: its (q scale,
        k scale, eps). The block then takes the fused path on CUDA."""
        return self.q_weight, self.k_weight, self.eps

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # q, k: (B, T, H, D); the statistic is over D, the scale broadcasts over (H, D).
        return rms_norm(q, self.q_weight, self.eps), rms_norm(k, self.k_weight, self.eps)


@register
class QKRMSNormSpec(ComponentSpec):
    slot = "qk_norm"
    kind: Literal["rmsnorm"] = "rmsnorm"
    eps: PositiveFloat = 1e-5
    share_across_heads: bool = False

    def build(self, dims: BlockDims) -> nn.Module:
        return QKNorm(dims.n_heads, dims.head_dim, self.eps, self.share_across_heads)

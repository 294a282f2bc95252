"""Naive forgetting attention: the ground truth every faster path is tested against.

O = softmax(s * Q K^T + D) V with D_ij = c_i - c_j for j <= i (else -inf), c = cumsum(log f) in
fp32 over the sequence (reference/fox.md 1.1). Materialises the (T, T) scores: for tests and small
CPU runs only.
"""
from __future__ import annotations

import math

import torch


def forgetting_attention_naive(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_f: torch.Tensor | None,
    *,
    scale: float | None = None,
    compute_dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """q, k, v: (B, T, H, D); log_f: (B, T, H) or None (plain causal). Returns (B, T, H, D) in q's
    dtype; the math runs in ``compute_dtype`` (fp64 for the strictest references)."""
    B, T, H, D = q.shape
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    qf, kf, vf = (t.to(compute_dtype) for t in (q, k, v))
    scores = torch.einsum("bihd,bjhd->bhij", qf, kf) * scale  # (B, H, T, T)
    if log_f is not None:
        c = log_f.to(torch.float32).cumsum(dim=1).to(compute_dtype).transpose(1, 2)  # (B, H, T)
        scores = scores + (c[..., :, None] - c[..., None, :])
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("bhij,bjhd->bihd", probs, vf).to(q.dtype)

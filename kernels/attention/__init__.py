"""Forgetting attention: one entry point over the naive reference and the Triton kernels.

The files: ``naive.py`` (the reference twin every fast path is tested against), ``pruning.py``
(adaptive computation pruning's bound, in torch), ``configs.py`` (tile tables), ``launch.py``
(the launches), ``op.py`` (what torch sees), ``triton_*.py`` (the kernels), ``gluon_fwd.py`` and
``gluon_bwd.py`` (the forward and the dK/dV kernel as warp-specialised Gluon kernels for Hopper).
The math is in docs/fox-notes.md, "Forgetting attention".
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from foxwb.kernels.attention.naive import check_window, forgetting_attention_naive
from foxwb.kernels.attention.pruning import check_tolerance

BACKENDS = ("auto", "triton", "reference")


def forgetting_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_f: torch.Tensor | None,
    *,
    scale: float | None = None,
    backend: str = "auto",
    log_pruning_tolerance: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Causal softmax attention with a forget gate.

    q, k, v: (B, T, H, D) in bf16, fp16 or fp32; log_f: (B, T, H) fp32 log forget gates, or None for
    plain causal attention. ``backend``: ``auto`` (Triton on CUDA, the reference on CPU),
    ``triton`` (forced; on CPU tensors it needs TRITON_INTERPRET=1) or ``reference``.
    Returns (B, T, H, D) in q's dtype.

    ``log_pruning_tolerance`` (ln eps, e.g. -10; None = off): adaptive computation pruning
    (pruning.py; docs/fox-notes.md, "Adaptive computation pruning"). The Triton kernel skips the
    tiles whose decay makes them negligible; each row loses less than eps of its attention mass.
    It assumes log f <= 0 (a forget gate: f in (0, 1]). The reference backend always computes
    every entry (error 0 <= eps).

    ``window`` (W, a positive int; None = full causal): query i sees only the keys i - W < j <= i,
    with or without a gate (log_f=None and a window is a sliding-window Transformer). Every
    backend honours it; the Triton kernels skip the key/query tiles outside the band (on sm_90 a
    call with a window runs the Triton kernels, not the Gluon ones). Not with a pruning tolerance.
    """
    check_tolerance(log_pruning_tolerance)
    check_window(window, log_pruning_tolerance)
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}; allowed: {', '.join(BACKENDS)}")
    if q.ndim != 4 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must share one (B, T, H, D) shape; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if log_f is not None:
        if log_f.shape != q.shape[:3]:
            raise ValueError(f"log_f must be (B, T, H) = {tuple(q.shape[:3])}, got {tuple(log_f.shape)}")
        if log_f.dtype != torch.float32:
            raise ValueError(f"log_f must be float32 (its cumsum needs the precision), got {log_f.dtype}")
    if log_f is None and backend == "auto" and window is None:
        # Plain causal attention goes to SDPA (flash/cuDNN on GPU): (B, H, T, D) views for SDPA, no copies.
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, scale=scale
        )
        return out.transpose(1, 2)
    if backend == "triton" or (backend == "auto" and q.is_cuda):
        # Imported here: Triton reads TRITON_INTERPRET when it first decorates a kernel.
        from foxwb.kernels.attention.op import forgetting_attention_triton

        return forgetting_attention_triton(q, k, v, log_f, scale=scale, log_pruning_tolerance=log_pruning_tolerance,
                                           window=window)
    return forgetting_attention_naive(q, k, v, log_f, scale=scale, window=window)


__all__ = ["BACKENDS", "forgetting_attention", "forgetting_attention_naive"]

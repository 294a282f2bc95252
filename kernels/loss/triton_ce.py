"""Cross-entropy with its gradient written in the same kernel (the loss of the LM head).

One program per row of logits: a first pass over the vocabulary keeps a running max and sum of
exponentials per lane (online softmax), a second pass writes (softmax - onehot) / n_valid over
the logits in place. The compiled torch loss read the (rows, V) logits three times and wrote an
fp32-computed gradient in a separate backward (three kernels, about 7.8 ms per 125M step at
32k tokens x 50k vocabulary, docs/performance.md); this reads them twice and writes once.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def ce_fwd_grad_kernel(logits_ptr, stride_row, targets_ptr, loss_ptr, n_valid_ptr, V, ignore_index,
                       BLOCK_V: tl.constexpr, WRITE_GRAD: tl.constexpr):
    """loss[row] = lse - x[target] (0 for an ignored row); with WRITE_GRAD the row of logits is
    overwritten by d(mean loss)/d logits = (softmax - onehot) / n_valid (0 for an ignored row).
    Two passes over the row in BLOCK_V pieces: any vocabulary size."""
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride_row
    target = tl.load(targets_ptr + row)
    valid = target != ignore_index
    lanes = tl.arange(0, BLOCK_V)
    # A finite floor, not -inf: a lane past V never sees a value, and exp(-inf - -inf) is NaN.
    m = tl.full((BLOCK_V,), -1.0e30, tl.float32)
    s = tl.zeros((BLOCK_V,), tl.float32)
    for start in range(0, V, BLOCK_V):
        cols = start + lanes
        x = tl.load(base + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_row = tl.max(m, 0)
    lse = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), 0))
    # A target outside [0, V) that is not ignore_index is never read from memory: its row's loss
    # is NaN, which the trainer reports as a non-finite loss (F.cross_entropy raises instead).
    in_range = (target >= 0) & (target < V)
    safe_target = tl.where(valid & in_range, target, 0)
    x_target = tl.load(base + safe_target).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, tl.where(in_range, lse - x_target, float("nan")), 0.0))
    if WRITE_GRAD:
        n_valid = tl.maximum(tl.load(n_valid_ptr).to(tl.float32), 1.0)
        scale = tl.where(valid, 1.0 / n_valid, 0.0)
        for start in range(0, V, BLOCK_V):
            cols = start + lanes
            x = tl.load(base + cols, mask=cols < V, other=0.0).to(tl.float32)
            g = (tl.exp(x - lse) - tl.where(cols == safe_target, 1.0, 0.0)) * scale
            tl.store(base + cols, g.to(logits_ptr.dtype.element_ty), mask=cols < V)


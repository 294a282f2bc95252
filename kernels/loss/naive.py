"""The reference twin of linear_cross_entropy: the head's matmul, then fp32 cross-entropy."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def linear_cross_entropy_naive(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                               ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy (nats) of logits h @ weight.T (h: (rows, d), weight: (V, d)) against
    ``targets`` (rows,), over the rows whose target is not ``ignore_index``."""
    logits = F.linear(h, weight)
    # fp32 at least (fp64 stays fp64: the tests' strictest reference).
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits, targets, ignore_index=ignore_index)

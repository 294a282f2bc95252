"""What every data source hands a trial: batches of inputs and targets, and its documents' lengths."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

IGNORE = -100  # target id that the loss skips


@dataclass
class Batch:
    x: torch.Tensor  # (B, T) long inputs
    y: torch.Tensor  # (B, T) long targets, IGNORE where no loss


def doc_lengths(docs) -> np.ndarray:
    """Tokens per document; memory-mapped documents (foxwb.workbench.data.documents) tell without a pass."""
    lengths = getattr(docs, "lengths", None)
    return lengths() if callable(lengths) else np.array([len(d) for d in docs], dtype=np.int64)

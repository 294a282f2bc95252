"""Training stability figures from a run's per-step history: gradient-norm and loss spikes.

The definitions (docs/stability.md), on the history ``train()`` returns (one entry per optimizer
step with ``tokens`` seen after the step, ``train_loss``, ``grad_norm`` before clipping, ``step``):

- **After warmup**: the steps that start at or after ``warmup_tokens`` (the step's first token,
  ``tokens - tokens_per_step``, is not in the warmup).
- **Gradient-norm spike**: a run of consecutive steps after warmup whose grad_norm exceeds
  ``GRAD_FACTOR`` (10) times the median grad_norm of all steps after warmup. A run of consecutive
  spike steps is one spike (``grad_spikes``); the steps are counted apart (``grad_spike_steps``).
- **Loss spike**: a run of consecutive steps after warmup whose train_loss exceeds the median of
  the ``LOSS_WINDOW`` (50) steps before it (warmup steps included) by more than ``LOSS_SIGMAS``
  (6) standard deviations of their step-to-step noise (estimated from their differences, robustly:
  1.4826 x the median absolute deviation of the differences / sqrt 2, so that the loss's own
  downward trend does not count as noise; a batch of a few sequences makes it large) and by more than
  ``LOSS_MARGIN`` (5%) of the median; a step with fewer than ``LOSS_MIN_WINDOW`` (10) steps
  before it is not judged.
"""
from __future__ import annotations

import numpy as np

GRAD_FACTOR = 10.0
LOSS_WINDOW = 50
LOSS_MIN_WINDOW = 10
LOSS_MARGIN = 0.05
LOSS_SIGMAS = 6.0

KEYS = ("grad_spikes", "grad_spike_steps", "grad_norm_max", "grad_norm_median", "grad_norm_max_ratio",
        "first_grad_spike_tokens", "loss_spikes")


def flag_runs(flags: np.ndarray) -> int:
    """Number of maximal runs of True in a boolean vector."""
    if not flags.size:
        return 0
    return int(flags[0]) + int(np.count_nonzero(flags[1:] & ~flags[:-1]))


def after_warmup(history: list[dict], warmup_tokens: int) -> np.ndarray:
    """Boolean mask over the history: the steps whose first token is past the warmup."""
    tokens = np.array([h["tokens"] for h in history], dtype=np.int64)
    steps = np.array([h["step"] for h in history], dtype=np.int64)
    per_step = tokens // np.maximum(steps, 1)
    return tokens - per_step >= warmup_tokens


def grad_spike_mask(grad_norm: np.ndarray, factor: float = GRAD_FACTOR) -> tuple[np.ndarray, float]:
    """(spike flag per step, median) of the grad norms given (the steps after warmup)."""
    median = float(np.median(grad_norm))
    return grad_norm > factor * median, median


def loss_spike_mask(loss: np.ndarray, window: int = LOSS_WINDOW, sigmas: float = LOSS_SIGMAS,
                    margin: float = LOSS_MARGIN, min_window: int = LOSS_MIN_WINDOW) -> np.ndarray:
    """Per step: loss above the median of the up to ``window`` steps before it by more than
    ``sigmas`` robust standard deviations of their step-to-step noise and by more than ``margin``
    x the median."""
    flags = np.zeros(loss.shape, dtype=bool)
    for i in range(min_window, len(loss)):
        before = loss[max(0, i - window) : i]
        median = np.median(before)
        diffs = np.diff(before)
        noise = 1.4826 * np.median(np.abs(diffs - np.median(diffs))) / np.sqrt(2)
        flags[i] = loss[i] - median > max(sigmas * noise, margin * median)
    return flags


def spike_figures(history: list[dict], warmup_tokens: int) -> dict:
    """The stability figures of one run (keys ``KEYS``); None where no step is past the warmup."""
    mask = after_warmup(history, warmup_tokens) if history else np.zeros(0, dtype=bool)
    if not mask.any():
        return dict.fromkeys(KEYS)
    grad = np.array([h["grad_norm"] for h in history], dtype=np.float64)[mask]
    tokens = np.array([h["tokens"] for h in history], dtype=np.int64)[mask]
    spikes, median = grad_spike_mask(grad)
    loss = np.array([h["train_loss"] for h in history], dtype=np.float64)
    loss_flags = loss_spike_mask(loss)[mask]
    return {
        "grad_spikes": flag_runs(spikes),
        "grad_spike_steps": int(spikes.sum()),
        "grad_norm_max": float(grad.max()),
        "grad_norm_median": median,
        "grad_norm_max_ratio": float(grad.max() / median) if median > 0 else None,
        "first_grad_spike_tokens": int(tokens[spikes][0]) if spikes.any() else None,
        "loss_spikes": flag_runs(loss_flags),
    }


def spike_parts(history: list[dict], warmup_tokens: int, top: int = 3) -> list[dict]:
    """Which parts of the model a run's gradient-norm spikes come from (history entries with
    ``grad_norm_parts``, workbench/train/grad_parts.py): for each part, its largest gradient norm over the
    spike steps as a multiple of its own median after warmup (``ratio``) and its share of the
    squared norm summed over the spike steps (``share``); the ``top`` parts by ratio, largest
    first. Empty without spikes or without the parts' norms."""
    mask = after_warmup(history, warmup_tokens) if history else np.zeros(0, dtype=bool)
    if not mask.any() or "grad_norm_parts" not in history[0]:
        return []
    kept = [h for h, m in zip(history, mask) if m]
    spikes, _ = grad_spike_mask(np.array([h["grad_norm"] for h in kept], dtype=np.float64))
    if not spikes.any():
        return []
    names = list(kept[0]["grad_norm_parts"])
    norms = np.array([[h["grad_norm_parts"][n] for n in names] for h in kept], dtype=np.float64)
    median = np.median(norms, axis=0)
    at_spikes = norms[spikes]
    ratio = at_spikes.max(axis=0) / np.where(median > 0, median, np.inf)
    share = (at_spikes ** 2).sum(axis=0) / max((at_spikes ** 2).sum(), 1e-300)
    order = np.argsort(-ratio)[:top]
    return [{"part": names[i], "ratio": float(ratio[i]), "share": float(share[i])} for i in order]


def parts_columns(history: list[dict]) -> dict:
    """``{"grad_norm_parts": {"tokens": [...], part: [...], ...}}``: each step's gradient norm per
    part as columns, for result.json; empty where the history has no parts' norms."""
    kept = [h for h in history if "grad_norm_parts" in h]
    if not kept:
        return {}
    columns = {"tokens": [h["tokens"] for h in kept]}
    for name in kept[0]["grad_norm_parts"]:
        columns[name] = [h["grad_norm_parts"][name] for h in kept]
    return {"grad_norm_parts": columns}

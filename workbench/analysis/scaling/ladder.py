"""A ladder for foxwb.workbench.analysis.scaling.fit (docs/scaling.md): runs grouped into ladder points (one size and
token count, its seeds' losses), and bootstrap resamples of it: ladder points drawn with
replacement, then the seeds of every drawn point drawn with replacement and averaged."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Resamples that cannot determine the law are drawn again; after this many rounds the few left are
# dropped (and counted as failed refits), which only happens on ladders far smaller than allowed.
MAX_REDRAWS = 100


@dataclass(frozen=True)
class Ladder:
    """k ladder points: sizes [k] in parameters, tokens [k] (None for L(N)), seeds [k, m] losses in
    nats (NaN past a point's count) and counts [k] (seeds per point)."""
    sizes: np.ndarray
    tokens: np.ndarray | None
    seeds: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_runs(cls, n: np.ndarray, d: np.ndarray | None, loss: np.ndarray) -> Ladder:
        """Groups runs (one size [R], tokens [R] or None, loss [R] each) by their (size, tokens)."""
        keys, point = np.unique(np.stack([n, n if d is None else d], axis=1), axis=0, return_inverse=True)
        point = point.ravel()
        counts = np.bincount(point, minlength=len(keys))
        order = np.argsort(point, kind="stable")
        # Position of every run among its point's seeds, in run order.
        slot = np.arange(len(point)) - np.repeat(np.cumsum(counts) - counts, counts)
        seeds = np.full((len(keys), counts.max()), np.nan)
        seeds[point[order], slot] = loss[order]
        return cls(keys[:, 0], None if d is None else keys[:, 1], seeds, counts)

    @property
    def means(self) -> np.ndarray:
        """Mean loss over seeds per point [k], nats."""
        return np.nanmean(self.seeds, axis=1)

    @property
    def axes(self) -> list[np.ndarray]:
        return [self.sizes] if self.tokens is None else [self.sizes, self.tokens]


def _degenerate(idx: np.ndarray, axes: list[np.ndarray], min_points: int, min_per_axis: int) -> np.ndarray:
    """Rows of idx [B, k] (drawn point numbers) with fewer than min_points distinct points, or fewer
    than min_per_axis distinct values on any axis (axes: per point, e.g. its size and its tokens)."""
    def distinct(v):
        s = np.sort(v, axis=1)
        return 1 + (np.diff(s, axis=1) != 0).sum(axis=1)

    bad = distinct(idx) < min_points
    for axis in axes:
        bad |= distinct(axis[idx]) < min_per_axis
    return bad


def draw_points(rng, k: int, n_boot: int, axes, min_points: int, min_per_axis: int) -> tuple[np.ndarray, int]:
    """Ladder point numbers [B, k] drawn with replacement, degenerate rows (see _degenerate) drawn
    again; B = n_boot unless some are still degenerate after MAX_REDRAWS rounds (then dropped).
    Returns them and how many rows were drawn again."""
    idx = rng.integers(0, k, size=(n_boot, k))
    redrawn = 0
    for _ in range(MAX_REDRAWS):
        bad = _degenerate(idx, axes, min_points, min_per_axis)
        if not bad.any():
            break
        redrawn += int(bad.sum())
        idx[bad] = rng.integers(0, k, size=(int(bad.sum()), k))
    return idx[~_degenerate(idx, axes, min_points, min_per_axis)], redrawn


def seed_means(rng, seeds: np.ndarray, counts: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """For every drawn point idx [B, k]: the mean of its seeds' losses drawn with replacement, [B, k].
    seeds [k, m] holds each point's losses, padded with NaN past counts [k] (its number of seeds);
    a point with one seed keeps its loss."""
    c = counts[idx]
    m = seeds.shape[1]
    # One uniform draw per (resample, slot, seed position); positions past a point's count are masked.
    pick = np.minimum((rng.random(idx.shape + (m,)) * c[..., None]).astype(int), c[..., None] - 1)
    vals = seeds[idx[..., None], pick]
    used = np.arange(m) < c[..., None]
    return np.where(used, vals, 0.0).sum(axis=-1) / c


def resample(rng, ladder: Ladder, n_boot: int, min_points: int, min_per_axis: int,
             resample_points: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Up to n_boot resamples of the ladder's k points (fewer only if degenerate draws remain, see
    MAX_REDRAWS): (point numbers [B, k], mean loss in nats per slot [B, k]). Without
    resample_points every resample keeps each point once and only the seeds are drawn."""
    k = len(ladder.counts)
    if resample_points:
        idx = draw_points(rng, k, n_boot, ladder.axes, min_points, min_per_axis)[0]
    else:
        idx = np.tile(np.arange(k), (n_boot, 1))
    return idx, seed_means(rng, ladder.seeds, ladder.counts, idx)

"""Where two fitted laws cross, for foxwb.workbench.analysis.scaling.fit (docs/scaling.md): the first sign change of
their loss difference on a fine log grid of sizes, for the point fits and every bootstrap pair."""
from __future__ import annotations

import numpy as np

# Grid points over the search range: 4096 over a few decades puts a linear interpolation of the
# smooth loss difference within ~1e-6 (relative) of the root, far inside any bootstrap interval.
GRID = 4096


def size_grid(lo: float, hi: float) -> np.ndarray:
    """GRID sizes in parameters, log-spaced from lo to hi."""
    return np.exp(np.linspace(np.log(lo), np.log(hi), GRID))


def first_crossing(sizes: np.ndarray, diff: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sizes [G] (log-spaced), diff [R, G] = L_a - L_b in nats. Returns per row: the size of the first
    sign change (NaN when none) [R], the number of sign changes [R], and the sign of diff just past
    the first change [R] (-1: a is lower above it). A difference that touches zero without changing
    sign is no crossing."""
    s = np.sign(diff)
    change = s[:, 1:] * s[:, :-1] < 0
    count = change.sum(axis=1)
    j = change.argmax(axis=1)
    rows = np.arange(len(diff))
    d0, d1 = diff[rows, j], diff[rows, j + 1]
    x = np.log(sizes)
    # Interpolate rows that change sign only: there d0 and d1 have opposite signs, so t lies in
    # [0, 1]. Elsewhere j is 0 and d0 / (d0 - d1) is meaningless (unbounded when d0 is close to d1).
    crosses = count > 0
    t = np.divide(d0, d0 - d1, out=np.zeros_like(d0), where=crosses)
    at = np.exp(x[j] + t * (x[j + 1] - x[j]))
    return np.where(crosses, at, np.nan), count, np.where(crosses, np.sign(d1), 0.0)

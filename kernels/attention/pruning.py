"""Adaptive computation pruning (ACP; docs/fox-notes.md, "Adaptive computation pruning"): which tiles the kernels may skip.

Score (i, j) is s q_i.k_j + D_ij with D_ij = c_i - c_j <= 0. With U >= |s q_i.k_j| for every pair
of a (batch, head), a row's softmax denominator is at least exp(-U) (its diagonal entry, D_ii = 0)
and an entry with D_ij < delta = -(2U + ln N) + ln eps has weight below exp(2U + delta) = eps / N;
the at most N such entries of a row carry less than eps of its attention in all. The kernels skip
whole tiles: c never increases along the sequence (log f <= 0), so a tile's largest decay is at its
first query row and last key column, and the tiles a row of tiles keeps are contiguous, ending at
the diagonal. Here, from c and delta, the per-tile bounds the kernels start (forward, dQ) or stop
(dK/dV) their loops at, for any tile sizes, as a few torch ops: the reference that
triton_pruning.py (what the kernels use) is tested against, and what reports use.

U is taken from the tensors themselves, s max_i |q_i| max_j |k_j| per (batch, head) (Cauchy-Schwarz),
which holds with or without QK-norm and is at least as tight as a bound from the norm weights.
"""
from __future__ import annotations

import math

import torch


def check_tolerance(log_eps: float | None) -> None:
    if log_eps is None:
        return
    if not isinstance(log_eps, (int, float)) or isinstance(log_eps, bool) or not math.isfinite(log_eps) or log_eps >= 0:
        raise ValueError(
            f"log_pruning_tolerance={log_eps!r}: must be a finite negative number, ln of the attention "
            "mass a row may lose (-10 is the paper's recommendation), or None (null in YAML) to switch pruning off"
        )


def threshold(q: torch.Tensor, k: torch.Tensor, sm_scale: float, log_eps: float) -> torch.Tensor:
    """delta = -(2U + ln T) + ln eps per (batch, head): (B * H,) fp32, natural-log units like c."""
    B, T, H, _ = q.shape
    # vector_norm with dtype upcasts inside its reduction: no fp32 copy of q or k.
    q_max = torch.linalg.vector_norm(q, dim=-1, dtype=torch.float32).amax(dim=1)  # (B, H)
    k_max = torch.linalg.vector_norm(k, dim=-1, dtype=torch.float32).amax(dim=1)
    bound = abs(sm_scale) * q_max * k_max
    return (log_eps - math.log(T) - 2.0 * bound).reshape(B * H).contiguous()


def key_starts(c: torch.Tensor, delta: torch.Tensor, block_m: int, block_n: int) -> torch.Tensor:
    """For each query tile, the first key position (a multiple of block_n) whose tile holds an entry
    with D >= delta: (B * H, cdiv(T, block_m)) int32. c: (B * H, T) non-increasing rows."""
    T = c.shape[1]
    first_rows = torch.arange(0, T, block_m, device=c.device)
    # Key j is kept iff c_j <= c_i0 - delta; c is non-increasing, so those keys are a suffix of the
    # row, found by binary search over -c (non-decreasing).
    neg_c = c.neg().contiguous()
    bound = (c[:, first_rows] - delta[:, None]).contiguous()
    first_key = torch.searchsorted(neg_c, bound.neg(), side="left")
    # Never past the tile's own first row (its diagonal): holds for any c, monotone or not.
    first_key = torch.minimum(first_key, first_rows)
    return (first_key // block_n * block_n).to(torch.int32).contiguous()


def query_stops(c: torch.Tensor, delta: torch.Tensor, block_m: int, block_n: int) -> torch.Tensor:
    """For each key tile, the end (exclusive; a multiple of block_m, or T) of the query rows that
    hold an entry with D >= delta against it: (B * H, cdiv(T, block_n)) int32."""
    T = c.shape[1]
    last_cols = torch.clamp(torch.arange(block_n - 1, T + block_n - 1, block_n, device=c.device), max=T - 1)
    # Query i is kept iff c_i >= c_j1 + delta: a prefix of the row; count it by binary search.
    neg_c = c.neg().contiguous()
    bound = (c[:, last_cols] + delta[:, None]).contiguous()
    n_rows = torch.searchsorted(neg_c, bound.neg(), side="right")
    # At least every row up to the tile's last column (the diagonal tiles), for any c.
    n_rows = torch.maximum(n_rows, last_cols + 1)
    stop = (n_rows + block_m - 1) // block_m * block_m
    return torch.clamp(stop, max=T).to(torch.int32).contiguous()


def kept_fraction(starts: torch.Tensor, T: int, block_m: int) -> float:
    """Share of the causal key positions the forward visits under ``starts`` (for reports)."""
    first_rows = torch.arange(0, T, block_m, device=starts.device)
    ends = torch.clamp(first_rows + block_m, max=T)
    rows = (ends - first_rows).to(torch.float64)
    full = (rows * ends.to(torch.float64)).sum()  # every query tile, from key 0 to its last row
    kept = (rows * (ends[None, :] - starts.to(torch.float64))).sum(dim=1).mean()
    return float(kept / full)


def kept_pairs(q: torch.Tensor, k: torch.Tensor, log_f: torch.Tensor, sm_scale: float, log_eps: float) -> torch.Tensor:
    """Share of each (batch, head)'s causal pairs (i, j) with D_ij >= delta: (B, H) fp64. What the
    gates leave to compute, independent of tile sizes (the kernels visit whole tiles, a little
    more). log_f: (B, T, H)."""
    B, T, H, _ = q.shape
    c = log_f.detach().transpose(1, 2).reshape(B * H, T).double().cumsum(1).float()
    delta = threshold(q.detach(), k.detach(), sm_scale, log_eps)
    first_key = key_starts(c, delta, 1, 1)  # tiles of one query and one key: per row
    rows = torch.arange(T, device=c.device)
    kept = (rows + 1 - first_key).double().sum(1) / (T * (T + 1) / 2)
    return kept.view(B, H)

"""The plan of adaptive computation pruning on Triton: the threshold and the per-tile bounds of
pruning.py (whose torch functions are the reference these are tested against) in three
launches per forward+backward instead of some forty small torch ops, whose host time (about 1 ms
per forward+backward on the GPU machine) was more than the pruned kernels' own.

- ``norm_max_kernel`` (grid: batch * head, row chunks): max |q_i|^2 and max |k_j|^2 of each
  (batch, head), merged with atomic max into a zeroed (B * H, 2) fp32 buffer;
- ``tile_bounds_kernel`` (one program per batch * head): delta = ln eps - ln T - 2 U from those
  maxima (or, in the backward, the delta the forward stored), then a binary search over c for every
  tile at once, vectorised over the tiles: the first key each query tile keeps (forward, dQ) and
  the end of the query rows each key tile keeps (dK/dV).
"""
import triton
import triton.language as tl

from foxwb.kernels.attention.triton_tiles import load_rows


@triton.jit
def norm_max_kernel(Q, K, M,
                    stride_qb, stride_qt, stride_qh, stride_qd,
                    stride_kb, stride_kt, stride_kh, stride_kd,
                    T, H, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_T: tl.constexpr, ROWS: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // H
    h = bh % H
    Q += b * stride_qb + h * stride_qh
    K += b * stride_kb + h * stride_kh
    q_max = 0.0
    k_max = 0.0
    for start in range(tl.program_id(1) * ROWS, tl.minimum((tl.program_id(1) + 1) * ROWS, T), BLOCK_T):
        rows = start + tl.arange(0, BLOCK_T)
        q = load_rows(Q, rows, stride_qt, stride_qd, T, D, BLOCK_D, True, True)
        k = load_rows(K, rows, stride_kt, stride_kd, T, D, BLOCK_D, True, True)
        q_max = tl.maximum(q_max, tl.max(tl.sum(q * q, 1), 0))
        k_max = tl.maximum(k_max, tl.max(tl.sum(k * k, 1), 0))
    # Squared norms are >= 0, where fp32 atomic max orders like the integers of its bits.
    tl.atomic_max(M + bh * 2, q_max)
    tl.atomic_max(M + bh * 2 + 1, k_max)


@triton.jit
def tile_bounds_kernel(C, M, DELTA, STARTS, STOPS, T, n_iter, sm_scale, log_eps_minus_log_t,
                       COMPUTE_DELTA: tl.constexpr, START_M: tl.constexpr, START_N: tl.constexpr,
                       STOP_M: tl.constexpr, STOP_N: tl.constexpr,
                       DO_STARTS: tl.constexpr, DO_STOPS: tl.constexpr, TILES: tl.constexpr):
    bh = tl.program_id(0)
    if COMPUTE_DELTA:
        bound_u = sm_scale * tl.sqrt(tl.load(M + bh * 2)) * tl.sqrt(tl.load(M + bh * 2 + 1))
        delta = log_eps_minus_log_t - 2.0 * bound_u
        tl.store(DELTA + bh, delta)
    else:
        delta = tl.load(DELTA + bh)
    C += bh * T
    if DO_STARTS:
        # Query tile m keeps keys j with c_j <= c_i0 - delta (i0 its first row): a suffix of
        # [0, i0], found as the first j, a binary search over the non-increasing c.
        n_tiles = tl.cdiv(T, START_M)
        for t0 in range(0, n_tiles, TILES):
            m = t0 + tl.arange(0, TILES)
            ok = m < n_tiles
            first_row = m * START_M
            bound = tl.load(C + first_row, mask=ok, other=0.0) - delta
            lo = tl.zeros([TILES], dtype=tl.int32)
            hi = tl.where(ok, first_row, 0)
            for _ in range(n_iter):
                mid = (lo + hi) // 2
                left = tl.load(C + mid, mask=ok, other=0.0) <= bound
                hi = tl.where(left, mid, hi)
                lo = tl.where(left, lo, mid + 1)
            first = tl.minimum(lo, first_row)  # never past the diagonal, whatever c holds
            tl.store(STARTS + bh * n_tiles + m, first // START_N * START_N, mask=ok)
    if DO_STOPS:
        # Key tile n (last column j1) is needed by the rows i with c_i >= c_j1 + delta: a prefix
        # of the sequence, at least [0, j1]; its end is the first i > j1 with c_i below that.
        n_tiles = tl.cdiv(T, STOP_N)
        for t0 in range(0, n_tiles, TILES):
            n = t0 + tl.arange(0, TILES)
            ok = n < n_tiles
            last_col = tl.minimum((n + 1) * STOP_N, T) - 1
            bound = tl.load(C + last_col, mask=ok, other=0.0) + delta
            lo = last_col + 1
            hi = tl.zeros([TILES], dtype=tl.int32) + T
            for _ in range(n_iter):
                mid = (lo + hi) // 2
                below = tl.load(C + mid, mask=ok & (mid < T), other=float("-inf")) < bound
                hi = tl.where(below, mid, hi)
                lo = tl.where(below, lo, mid + 1)
            rows = tl.minimum(lo, T)
            tl.store(STOPS + bh * n_tiles + n, tl.minimum((rows + STOP_M - 1) // STOP_M * STOP_M, T), mask=ok)

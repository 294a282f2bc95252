"""Forward Triton kernel of forgetting attention (FlashAttention-2 style, exp2 domain).

One program per (query tile, batch * head). Scores are s q.k * log2(e) minus the key side of the
decay bias (triton_tiles.py: the query side only shifts a row, so it goes into the stored
log-sum-exp; ``EXACT``, for fp32 inputs, adds (c_i - c_j) per element instead, which costs three
more operations per score and keeps fp32's precision when c changes fast within a tile). The key
loop runs over [lo, hi) in two parts, full tiles below the diagonal then the masked diagonal
tiles, so the per-tile start index of adaptive computation pruning (``PRUNE``,
pruning.py) changes only where the loop begins. A sliding window (``WINDOW``: query i sees the W
keys i - W < j <= i, W a runtime int, so no recompile per W) moves the start the same way and adds
a third, masked part before the full tiles: the key tiles that straddle the window's lower edge.

With ``AHEAD`` (KernelConfig.fwd_ahead) the unmasked part is software-pipelined by hand: the next
tile's Q K^T is issued before this tile's exponentials, which Triton's own pipelining on sm_90
does not do. On the H200 that made the forward 4-5% faster with (64, 64) tiles up to 4096 tokens,
and slower with larger tiles and longer sequences (two score tiles live at once), so the tile
table turns it on there only (docs/kernels.md).

With ``TMA`` q, k and v arrive as tensor descriptors and every tile is one TMA copy
(triton_common.load_tile); on the H200 that made this kernel 4-7% faster than tiles of pointers.
"""
import triton
import triton.language as tl

from foxwb.kernels.attention.triton_tiles import (
    LOG2E,
    decay_log2,
    finish_scores,
    load_c,
    load_tile,
    row_scores,
    store_rows,
)


@triton.jit
def _online_softmax(acc, m_i, l_i, s, v, PRECISION: tl.constexpr, WINDOW: tl.constexpr):
    """One key tile of the online softmax: scores s (BM, BN) in the log2 domain, values v (BN, D).
    WINDOW: a row may have seen no key yet and none in this tile (m_new = -inf); a finite stand-in
    for its maximum keeps its p and alpha 0 instead of NaN."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_ref = m_new
    if WINDOW:
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - m_ref[:, None])
    alpha = tl.math.exp2(m_i - m_ref)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return acc, m_new, l_i


@triton.jit
def _fwd_tiles(acc, m_i, l_i, q, offs_m, K, V, C, row0, col, stride_kt, stride_kd, stride_vt, stride_vd,
               c_ref, c_q, T, qk_scale, lo, hi, W,
               MASKED: tl.constexpr, HAS_GATE: tl.constexpr, EXACT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
               BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr, TMA: tl.constexpr,
               WINDOW: tl.constexpr):
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        # Tiles below the diagonal lie wholly before T: their loads need no row mask.
        k = load_tile(K, row0, col, start_n, cols, stride_kt, stride_kd, T, D, BLOCK_D, UPCAST, MASKED, TMA)
        v = load_tile(V, row0, col, start_n, cols, stride_vt, stride_vd, T, D, BLOCK_D, UPCAST, MASKED, TMA)
        s = row_scores(q, k, offs_m, cols, C, c_ref, c_q, T, qk_scale, W,
                       MASKED, HAS_GATE, EXACT, PRECISION, WINDOW)  # (BM, BN)
        acc, m_i, l_i = _online_softmax(acc, m_i, l_i, s, v, PRECISION, WINDOW)
    return acc, m_i, l_i


@triton.jit
def _fwd_tiles_ahead(acc, m_i, l_i, q, offs_m, K, V, C, row0, col, stride_kt, stride_kd, stride_vt, stride_vd,
                     c_ref, c_q, T, qk_scale, lo, hi,
                     HAS_GATE: tl.constexpr, EXACT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                     BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr, TMA: tl.constexpr):
    """The unmasked tiles [lo, hi), hi > lo, software-pipelined by hand: each step issues the next
    tile's Q K^T before this tile's exponentials, so the tensor cores have work while they run.
    Every row sees every key of these tiles, so no row's maximum is -inf after the first."""
    offs_n = tl.arange(0, BLOCK_N)
    start = lo
    cols = lo + offs_n
    k = load_tile(K, row0, col, lo, cols, stride_kt, stride_kd, T, D, BLOCK_D, UPCAST, False, TMA)
    s = row_scores(q, k, offs_m, cols, C, c_ref, c_q, T, qk_scale, 0, False, HAS_GATE, EXACT, PRECISION, False)
    for start_n in range(lo + BLOCK_N, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols_next = start_n + offs_n
        k_next = load_tile(K, row0, col, start_n, cols_next, stride_kt, stride_kd, T, D, BLOCK_D, UPCAST, False, TMA)
        s_next = tl.dot(q, tl.trans(k_next), input_precision=PRECISION)
        v = load_tile(V, row0, col, start, cols, stride_vt, stride_vd, T, D, BLOCK_D, UPCAST, False, TMA)
        acc, m_i, l_i = _online_softmax(acc, m_i, l_i, s, v, PRECISION, False)
        s = finish_scores(s_next, offs_m, cols_next, C, c_ref, c_q, T, qk_scale, 0, False, HAS_GATE, EXACT, False)
        cols = cols_next
        start = start_n
    v = load_tile(V, row0, col, start, cols, stride_vt, stride_vd, T, D, BLOCK_D, UPCAST, False, TMA)
    return _online_softmax(acc, m_i, l_i, s, v, PRECISION, False)


@triton.jit
def fwd_kernel(Q, K, V, C, O, LSE, STARTS,
               stride_qb, stride_qt, stride_qh, stride_qd,
               stride_kb, stride_kt, stride_kh, stride_kd,
               stride_vb, stride_vt, stride_vh, stride_vd,
               stride_ob, stride_ot, stride_oh, stride_od,
               T, H, sm_scale, W,
               HAS_GATE: tl.constexpr, EXACT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               UPCAST: tl.constexpr, PRECISION: tl.constexpr, AHEAD: tl.constexpr, PRUNE: tl.constexpr,
               TMA: tl.constexpr, WINDOW: tl.constexpr):
    # The last query tiles have the most keys: launching them first leaves short tiles, not long
    # ones, for the end of the grid.
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    # TMA: Q, K, V are descriptors of (B * T, H * D) views, read at (row0 + t, col) (load_tile).
    row0 = b * T
    col = h * D
    if not TMA:
        Q += b * stride_qb + h * stride_qh
        K += b * stride_kb + h * stride_kh
        V += b * stride_vb + h * stride_vh
    O += b * stride_ob + h * stride_oh
    C += bh * T  # c: (B * H, T) contiguous

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = load_tile(Q, row0, col, start_m * BLOCK_M, offs_m, stride_qt, stride_qd, T, D, BLOCK_D, UPCAST, True, TMA)
    c_ref = 0.0
    c_q = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_GATE:
        c_ref = tl.load(C + start_m * BLOCK_M)  # c of this tile's first query
        if EXACT:
            c_q = load_c(C, offs_m, T)
    qk_scale = sm_scale * LOG2E

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    # Keys [lo, diag) need no mask; [diag, hi) straddle the diagonal or the end of the sequence.
    # AHEAD (KernelConfig.fwd_ahead): the unmasked part software-pipelined. PRUNE: the key tiles
    # before STARTS[bh, start_m] carry negligible weight (pruning.py) and are skipped.
    lo = 0
    if PRUNE:
        lo = tl.load(STARTS + bh * tl.num_programs(0) + start_m)
    diag = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, T)
    if WINDOW:
        # Key tiles wholly before the first row's window (j <= start - W) are skipped; [lo, wlo)
        # straddle some row's lower edge and are masked; from wlo on every row sees every key.
        lo = tl.maximum(start_m * BLOCK_M - W + 1, 0) // BLOCK_N * BLOCK_N
        wlo = tl.minimum(tl.cdiv(tl.maximum((start_m + 1) * BLOCK_M - W, 0), BLOCK_N) * BLOCK_N, diag)
        acc, m_i, l_i = _fwd_tiles(acc, m_i, l_i, q, offs_m, K, V, C, row0, col, stride_kt, stride_kd,
                                   stride_vt, stride_vd, c_ref, c_q, T, qk_scale, lo, wlo, W,
                                   True, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION, TMA, True)
        lo = wlo
    if AHEAD:
        if diag > lo:
            acc, m_i, l_i = _fwd_tiles_ahead(acc, m_i, l_i, q, offs_m, K, V, C, row0, col, stride_kt, stride_kd,
                                             stride_vt, stride_vd, c_ref, c_q, T, qk_scale, lo, diag,
                                             HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION, TMA)
    else:
        acc, m_i, l_i = _fwd_tiles(acc, m_i, l_i, q, offs_m, K, V, C, row0, col, stride_kt, stride_kd,
                                   stride_vt, stride_vd, c_ref, c_q, T, qk_scale, lo, diag, W,
                                   False, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION, TMA, False)
    acc, m_i, l_i = _fwd_tiles(acc, m_i, l_i, q, offs_m, K, V, C, row0, col, stride_kt, stride_kd,
                               stride_vt, stride_vd, c_ref, c_q, T, qk_scale, diag, hi, W,
                               True, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION, TMA, WINDOW)
    if WINDOW:
        # Rows past T may have seen no key at all (l = 0); they are never stored.
        l_i = tl.where(offs_m < T, l_i, 1.0)
    store_rows(O, offs_m, stride_ot, stride_od, acc / l_i[:, None], T, D, BLOCK_D)
    # The true log-sum-exp (log2 domain, c_i included), (B * H, T) contiguous: the backward
    # recomputes P from it with its own reference point.
    lse = m_i + tl.math.log2(l_i)
    if HAS_GATE:
        if not EXACT:
            lse += decay_log2(C, offs_m, c_ref, T)
    tl.store(LSE + bh * T + offs_m, lse, mask=offs_m < T)

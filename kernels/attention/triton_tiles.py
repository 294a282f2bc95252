"""Pieces every forgetting-attention kernel shares: tile loads and the decay bias.

The decay bias of score (i, j) is c_i - c_j. A row's softmax does not change when the row is
shifted, so the kernels never add c_i per element: they subtract the key side, taken relative to
one reference value of c per program, ``(c_j - c_ref) * log2(e)`` (one vector per key tile), and
move the query side into the row's log-sum-exp. That leaves one fused multiply-add per score
element instead of four operations. Taking c_j - c_ref in natural-log units before scaling keeps
one rounding of c, not two, when |c| is large (long sequences, strong gates): the differences that
matter (tiles near the reference) are small and exact.
"""
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def load_rows(base, rows, stride_t, stride_d, T, D: tl.constexpr, BLOCK_D: tl.constexpr, UPCAST: tl.constexpr,
              CHECK_T: tl.constexpr):
    """A (len(rows), BLOCK_D) tile of a (T, D) matrix; rows past T and columns past D read 0.
    CHECK_T=False: the caller knows every row is < T (the key tiles below the diagonal), and with
    D == BLOCK_D the load then carries no mask at all. UPCAST: fp32 under the interpreter, whose
    bf16/fp16 dot is wrong."""
    offs_d = tl.arange(0, BLOCK_D)
    ptrs = base + rows[:, None] * stride_t + offs_d[None, :] * stride_d
    if CHECK_T:
        if D == BLOCK_D:
            tile = tl.load(ptrs, mask=(rows < T)[:, None], other=0.0)
        else:
            tile = tl.load(ptrs, mask=(rows < T)[:, None] & (offs_d[None, :] < D), other=0.0)
    elif D == BLOCK_D:
        tile = tl.load(ptrs)
    else:
        tile = tl.load(ptrs, mask=offs_d[None, :] < D, other=0.0)
    if UPCAST:
        tile = tile.to(tl.float32)
    return tile


@triton.jit
def load_tile(X, row0, col, start, rows, stride_t, stride_d, T, D: tl.constexpr, BLOCK_D: tl.constexpr,
              UPCAST: tl.constexpr, CHECK_T: tl.constexpr, TMA: tl.constexpr):
    """The tile of rows ``rows = start + arange(n)`` of this program's (T, D) matrix. With ``TMA``, X
    is a tensor descriptor of the (B * T, H * D) view and (row0, col) = (b * T, h * D): one TMA copy
    instead of a tile of pointers (launch.py: _tma, use_tma). Its rows past T
    read the next sequence's rows (zeros after the last): every caller masks those rows' scores or
    weights, as it does the zeros of the pointer load. Else X points at the (b, h) matrix
    (load_rows)."""
    if TMA:
        tile = X.load([row0 + start, col])
        if UPCAST:
            tile = tile.to(tl.float32)
    else:
        tile = load_rows(X, rows, stride_t, stride_d, T, D, BLOCK_D, UPCAST, CHECK_T)
    return tile


@triton.jit
def store_rows(base, rows, stride_t, stride_d, tile, T, D: tl.constexpr, BLOCK_D: tl.constexpr):
    offs_d = tl.arange(0, BLOCK_D)
    mask = (rows < T)[:, None] & (offs_d[None, :] < D)
    tl.store(base + rows[:, None] * stride_t + offs_d[None, :] * stride_d, tile.to(base.dtype.element_ty), mask=mask)


@triton.jit
def load_c(C, idx, T):
    """c = cumsum(log f) at the positions idx of this program's (batch, head) row of the (B * H, T)
    buffer (0 past T, where callers mask anyway)."""
    return tl.load(C + idx, mask=idx < T, other=0.0)


@triton.jit
def decay_log2(C, idx, c_ref, T):
    """(c[idx] - c_ref) * log2(e) for the positions idx."""
    return (load_c(C, idx, T) - c_ref) * LOG2E


@triton.jit
def row_scores(q, k, offs_m, cols, C, c_ref, c_q, T, qk_scale, W,
               MASKED: tl.constexpr, HAS_GATE: tl.constexpr, EXACT: tl.constexpr, PRECISION: tl.constexpr,
               WINDOW: tl.constexpr):
    """(BM, BN) scores of a query tile against a key tile in the log2 domain, decay and mask
    applied: s q.k log2(e), minus the key side of the decay relative to c_ref (or, EXACT, plus
    (c_i - c_j) log2(e) from c_q), -inf above the diagonal and past T when MASKED, and with
    ``WINDOW`` also where i - j >= W (the sliding window; W is read only then)."""
    return finish_scores(tl.dot(q, tl.trans(k), input_precision=PRECISION), offs_m, cols, C, c_ref, c_q, T,
                         qk_scale, W, MASKED, HAS_GATE, EXACT, WINDOW)


@triton.jit
def finish_scores(s, offs_m, cols, C, c_ref, c_q, T, qk_scale, W,
                  MASKED: tl.constexpr, HAS_GATE: tl.constexpr, EXACT: tl.constexpr, WINDOW: tl.constexpr):
    """row_scores() from the raw dot q.k (BM, BN)."""
    s = s * qk_scale
    if HAS_GATE:
        if EXACT:
            s += (c_q[:, None] - load_c(C, cols, T)[None, :]) * LOG2E
        else:
            s -= decay_log2(C, cols, c_ref, T)[None, :]
    if MASKED:
        if WINDOW:
            seen = (offs_m[:, None] >= cols[None, :]) & (offs_m[:, None] - cols[None, :] < W) & (cols < T)[None, :]
        else:
            seen = (offs_m[:, None] >= cols[None, :]) & (cols < T)[None, :]
        s = tl.where(seen, s, float("-inf"))
    return s

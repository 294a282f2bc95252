"""Backward Triton kernels of forgetting attention.

With P_ij = exp(s q_i.k_j + c_i - c_j - L_i) and dS_ij = P_ij (dO_i.v_j - delta_i)
(docs/fox-notes.md, "The backward"): dV = P^T dO, dK = s dS^T Q, dQ = s dS K, and dL/dc_t = rowsum_t(dS) -
colsum_t(dS). Two kernels, launched in this order:

- ``dq_kernel`` (one program per query tile) computes delta = rowsum(O * dO) for its rows (and
  stores it for the next kernel), recomputes S and dP for its row of tiles, and writes dQ and
  rowsum(dS) into the (B * H, T) buffer dC;
- ``dkdv_kernel`` (one program per key tile) writes dK, dV and subtracts colsum(dS) from dC.

With ``PRUNE`` (adaptive computation pruning, pruning.py) dQ starts its key loop and dK/dV
ends its query loop at per-tile bounds computed for their own tile sizes. With ``WINDOW`` (query i
sees keys i - W < j <= i; W a runtime int) both loops are bounded by the band the same way: dQ
starts at the key tile of its first row's window, dK/dV stops after the query tile of its last
key's, and the tiles that straddle the band's far edge are masked.

7 matmuls per tile pair, no atomics: a variant that accumulated dQ with fp32 atomic adds inside the
dK/dV loop (5 matmuls, as FlashAttention-2 does) measured 1.26-1.38x slower on every benchmark
shape and was removed (docs/kernels.md). dC then goes through the reverse scan of
triton_scan.py to become dL/d log f.

The row sums are zero in exact arithmetic, but keeping them makes the rounding of delta cancel in
the reverse cumsum. P is recomputed as exp2(s q.k * log2(e) - key-side decay - (L - query-side
decay)), each side relative to one reference per program (triton_tiles.py); with
``EXACT`` (fp32 inputs) as c_i - c_j per element.

With ``TMA`` q, k, v, O and dO arrive as tensor descriptors and every tile is one TMA copy
(triton_common.load_tile): no address registers in kernels that are register-bound, 2-6% faster
on the H200 (docs/kernels.md).
"""
import triton
import triton.language as tl

from foxwb.kernels.attention.triton_tiles import LOG2E, decay_log2, load_c, load_tile, row_scores, store_rows


@triton.jit
def _dkdv_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, row0, col,
                stride_qt, stride_qd, stride_dot, stride_dod, c_ref, T, qk_scale, lo, hi, W,
                MASKED: tl.constexpr, CHECK_T: tl.constexpr, HAS_GATE: tl.constexpr, EXACT: tl.constexpr,
                D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                UPCAST: tl.constexpr, PRECISION: tl.constexpr, TMA: tl.constexpr, WINDOW: tl.constexpr):
    offs_m0 = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_m0
        row_ok = rows < T
        q = load_tile(Q, row0, col, start_m, rows, stride_qt, stride_qd, T, D, BLOCK_D, UPCAST, CHECK_T, TMA)
        do = load_tile(DO, row0, col, start_m, rows, stride_dot, stride_dod, T, D, BLOCK_D, UPCAST, CHECK_T, TMA)
        # Rows past T get lse = +inf, so their P (and with it their dS) is exactly 0.
        lse = tl.load(LSE + rows, mask=row_ok, other=float("inf"))
        delta = tl.load(DELTA + rows, mask=row_ok, other=0.0)
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale  # (BN, BM)
        if HAS_GATE:
            if EXACT:  # ck holds c_j itself
                s_t += (load_c(C, rows, T)[None, :] - ck[:, None]) * LOG2E
            else:
                lse -= decay_log2(C, rows, c_ref, T)
                s_t -= ck[:, None]
        if MASKED:
            if WINDOW:
                seen = (rows[None, :] >= offs_n[:, None]) & (rows[None, :] - offs_n[:, None] < W)
            else:
                seen = rows[None, :] >= offs_n[:, None]
            s_t = tl.where(seen, s_t, float("-inf"))
        p_t = tl.math.exp2(s_t - lse[None, :])
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)
        if HAS_GATE:
            dcol += tl.sum(ds_t, 1)
    return dk, dv, dcol


@triton.jit
def dkdv_kernel(Q, K, V, C, DO, LSE, DELTA, DK, DV, DC, STOPS,
                stride_qb, stride_qt, stride_qh, stride_qd,
                stride_kb, stride_kt, stride_kh, stride_kd,
                stride_vb, stride_vt, stride_vh, stride_vd,
                stride_dob, stride_dot, stride_doh, stride_dod,
                stride_dkb, stride_dkt, stride_dkh, stride_dkd,
                stride_dvb, stride_dvt, stride_dvh, stride_dvd,
                T, H, sm_scale, W,
                HAS_GATE: tl.constexpr, EXACT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                UPCAST: tl.constexpr, PRECISION: tl.constexpr, PRUNE: tl.constexpr, TMA: tl.constexpr,
                WINDOW: tl.constexpr):
    start_n = tl.program_id(0)  # the first key tiles see the most queries: they launch first
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    # TMA: Q, K, V, DO are descriptors of (B * T, H * D) views, read at (row0 + t, col) (load_tile).
    row0 = b * T
    col = h * D
    if not TMA:
        Q += b * stride_qb + h * stride_qh
        DO += b * stride_dob + h * stride_doh
        K += b * stride_kb + h * stride_kh
        V += b * stride_vb + h * stride_vh
    # c, L, delta and dC: (B * H, T) contiguous
    C += bh * T
    LSE += bh * T
    DELTA += bh * T

    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k = load_tile(K, row0, col, start_n * BLOCK_N, offs_n, stride_kt, stride_kd, T, D, BLOCK_D, UPCAST, True, TMA)
    v = load_tile(V, row0, col, start_n * BLOCK_N, offs_n, stride_vt, stride_vd, T, D, BLOCK_D, UPCAST, True, TMA)
    c_ref = 0.0
    ck = tl.zeros([BLOCK_N], dtype=tl.float32)
    if HAS_GATE:
        if EXACT:
            ck = load_c(C, offs_n, T)
        else:
            c_ref = tl.load(C + start_n * BLOCK_N)  # c of this tile's first key
            ck = decay_log2(C, offs_n, c_ref, T)
    qk_scale = sm_scale * LOG2E

    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dcol = tl.zeros([BLOCK_N], dtype=tl.float32)
    # Query tiles [lo, mid) straddle the diagonal; [mid, hi) see every key of this tile, and of
    # those only the last, [full, hi), can run past T. hi = T, or with PRUNE the end of the rows
    # whose weight on this tile is not negligible (pruning.py: a multiple of BLOCK_M >= mid).
    lo = (start_n * BLOCK_N) // BLOCK_M * BLOCK_M
    mid = tl.minimum(tl.cdiv((start_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, T)
    hi = T
    if PRUNE:
        hi = tl.load(STOPS + bh * tl.num_programs(0) + start_n)
    full = mid + (hi - mid) // BLOCK_M * BLOCK_M
    if WINDOW:
        # The rows that see a key of this tile end at its last key + W - 1: hi stops after that
        # row's tile. The query tiles [mid, full) see every key of this tile (each row within W of
        # its first key); [full, hi) straddle the window's far edge (or T) and are masked.
        hi = tl.minimum(tl.cdiv((start_n + 1) * BLOCK_N + W - 1, BLOCK_M) * BLOCK_M, T)
        full = mid + (hi - mid) // BLOCK_M * BLOCK_M
        full = tl.maximum(tl.minimum(full, (start_n * BLOCK_N + W) // BLOCK_M * BLOCK_M), mid)
    dk, dv, dcol = _dkdv_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, row0, col,
                               stride_qt, stride_qd, stride_dot, stride_dod, c_ref, T, qk_scale, lo, mid, W,
                               True, True, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION, TMA, WINDOW)
    dk, dv, dcol = _dkdv_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, row0, col,
                               stride_qt, stride_qd, stride_dot, stride_dod, c_ref, T, qk_scale, mid, full, W,
                               False, False, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION, TMA, False)
    dk, dv, dcol = _dkdv_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, row0, col,
                               stride_qt, stride_qd, stride_dot, stride_dod, c_ref, T, qk_scale, full, hi, W,
                               WINDOW, True, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION, TMA, WINDOW)
    store_rows(DK + b * stride_dkb + h * stride_dkh, offs_n, stride_dkt, stride_dkd, dk * sm_scale, T, D, BLOCK_D)
    store_rows(DV + b * stride_dvb + h * stride_dvh, offs_n, stride_dvt, stride_dvd, dv, T, D, BLOCK_D)
    if HAS_GATE:
        # dq_kernel, launched before, left rowsum(dS) at these positions.
        dc_ptrs = DC + bh * T + offs_n
        tl.store(dc_ptrs, tl.load(dc_ptrs, mask=offs_n < T, other=0.0) - dcol, mask=offs_n < T)


@triton.jit
def _dq_tiles(dq, drow, q, do, lse, delta, offs_m, K, V, C, row0, col,
              stride_kt, stride_kd, stride_vt, stride_vd, c_ref, c_q, T, qk_scale, lo, hi, W,
              MASKED: tl.constexpr, HAS_GATE: tl.constexpr, EXACT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr, TMA: tl.constexpr,
              WINDOW: tl.constexpr):
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n0
        # Tiles below the diagonal lie wholly before T: their loads need no row mask.
        k = load_tile(K, row0, col, start_n, cols, stride_kt, stride_kd, T, D, BLOCK_D, UPCAST, MASKED, TMA)
        v = load_tile(V, row0, col, start_n, cols, stride_vt, stride_vd, T, D, BLOCK_D, UPCAST, MASKED, TMA)
        s = row_scores(q, k, offs_m, cols, C, c_ref, c_q, T, qk_scale, W,
                       MASKED, HAS_GATE, EXACT, PRECISION, WINDOW)  # (BM, BN)
        p = tl.math.exp2(s - lse[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
        if HAS_GATE:
            drow += tl.sum(ds, 1)
    return dq, drow


@triton.jit
def dq_kernel(Q, K, V, C, O, DO, LSE, DELTA, DQ, DC, STARTS,
              stride_qb, stride_qt, stride_qh, stride_qd,
              stride_kb, stride_kt, stride_kh, stride_kd,
              stride_vb, stride_vt, stride_vh, stride_vd,
              stride_ob, stride_ot, stride_oh, stride_od,
              stride_dob, stride_dot, stride_doh, stride_dod,
              stride_dqb, stride_dqt, stride_dqh, stride_dqd,
              T, H, sm_scale, W,
              HAS_GATE: tl.constexpr, EXACT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              UPCAST: tl.constexpr, PRECISION: tl.constexpr, PRUNE: tl.constexpr, TMA: tl.constexpr,
              WINDOW: tl.constexpr):
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)  # the longest rows of tiles first
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    # TMA: Q, K, V, O, DO are descriptors of (B * T, H * D) views, read at (row0 + t, col) (load_tile).
    row0 = b * T
    col = h * D
    if not TMA:
        Q += b * stride_qb + h * stride_qh
        K += b * stride_kb + h * stride_kh
        V += b * stride_vb + h * stride_vh
        O += b * stride_ob + h * stride_oh
        DO += b * stride_dob + h * stride_doh
    C += bh * T  # c: (B * H, T) contiguous

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = offs_m < T
    q = load_tile(Q, row0, col, start_m * BLOCK_M, offs_m, stride_qt, stride_qd, T, D, BLOCK_D, UPCAST, True, TMA)
    do = load_tile(DO, row0, col, start_m * BLOCK_M, offs_m, stride_dot, stride_dod, T, D, BLOCK_D, UPCAST, True, TMA)
    # delta = rowsum(O * dO) in fp32, stored for dkdv_kernel (launched next).
    o = load_tile(O, row0, col, start_m * BLOCK_M, offs_m, stride_ot, stride_od, T, D, BLOCK_D, UPCAST, True, TMA)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + bh * T + offs_m, delta, mask=row_ok)
    lse = tl.load(LSE + bh * T + offs_m, mask=row_ok, other=float("inf"))
    c_ref = 0.0
    c_q = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_GATE:
        if EXACT:
            c_q = load_c(C, offs_m, T)
        else:
            c_ref = tl.load(C + start_m * BLOCK_M)  # c of this tile's first query
            lse -= decay_log2(C, offs_m, c_ref, T)
    qk_scale = sm_scale * LOG2E

    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    drow = tl.zeros([BLOCK_M], dtype=tl.float32)
    lo = 0
    if PRUNE:  # key tiles before STARTS[bh, start_m] are skipped (pruning.py)
        lo = tl.load(STARTS + bh * tl.num_programs(0) + start_m)
    diag = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, T)
    if WINDOW:  # as the forward's: [lo, wlo) straddle some row's lower window edge
        lo = tl.maximum(start_m * BLOCK_M - W + 1, 0) // BLOCK_N * BLOCK_N
        wlo = tl.minimum(tl.cdiv(tl.maximum((start_m + 1) * BLOCK_M - W, 0), BLOCK_N) * BLOCK_N, diag)
        dq, drow = _dq_tiles(dq, drow, q, do, lse, delta, offs_m, K, V, C, row0, col, stride_kt, stride_kd,
                             stride_vt, stride_vd, c_ref, c_q, T, qk_scale, lo, wlo, W,
                             True, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION, TMA, True)
        lo = wlo
    dq, drow = _dq_tiles(dq, drow, q, do, lse, delta, offs_m, K, V, C, row0, col, stride_kt, stride_kd,
                         stride_vt, stride_vd, c_ref, c_q, T, qk_scale, lo, diag, W,
                         False, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION, TMA, False)
    dq, drow = _dq_tiles(dq, drow, q, do, lse, delta, offs_m, K, V, C, row0, col, stride_kt, stride_kd,
                         stride_vt, stride_vd, c_ref, c_q, T, qk_scale, diag, hi, W,
                         True, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION, TMA, WINDOW)
    store_rows(DQ + b * stride_dqb + h * stride_dqh, offs_m, stride_dqt, stride_dqd, dq * sm_scale, T, D, BLOCK_D)
    if HAS_GATE:
        tl.store(DC + bh * T + offs_m, drow, mask=row_ok)

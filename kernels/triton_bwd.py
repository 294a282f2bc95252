"""Backward Triton kernels of forgetting attention.

With P_ij = exp(s q_i.k_j + c_i - c_j - L_i) and dS_ij = P_ij (dO_i.v_j - delta_i)
(reference/fox.md 1.3): dV = P^T dO, dK = s dS^T Q, dQ = s dS K, and dL/dc_t = rowsum_t(dS) -
colsum_t(dS). ``dkdv_kernel`` (one program per key tile) writes dK, dV and -colsum(dS). dQ and
rowsum(dS) come one of two ways:

- split: ``dq_kernel`` (one program per query tile) recomputes S and dP for its row of tiles and
  writes dQ and rowsum(dS) with plain stores: 7 matmuls per tile pair in all, no atomics;
- fused (``FUSED_DQ``): the dK/dV loop adds each tile's dS K into an fp32 dQ buffer and its row sums
  into an fp32 vector with atomic adds: 5 matmuls, as FlashAttention-2 does.

The row sums are zero in exact arithmetic, but keeping them makes the rounding of delta cancel in
the reverse cumsum that turns dL/dc into dL/d log f. P is recomputed as exp2(s q.k * log2(e) -
key-side decay - (L - query-side decay)), each side relative to one reference per program
(kernels/triton_common.py); with ``EXACT`` (fp32 inputs) as c_i - c_j per element.
"""
import triton
import triton.language as tl

from kernels.triton_common import LOG2E, decay_log2, load_c, load_rows, row_scores, store_rows


@triton.jit
def delta_kernel(O, DO, DELTA, stride_ob, stride_ot, stride_oh, stride_od,
                 stride_dob, stride_dot, stride_doh, stride_dod, T, H,
                 D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta_i = rowsum(O * dO) in fp32, (B * H, T) contiguous."""
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    o = load_rows(O + b * stride_ob + h * stride_oh, offs_m, stride_ot, stride_od, T, D, BLOCK_D, True)
    do = load_rows(DO + b * stride_dob + h * stride_doh, offs_m, stride_dot, stride_dod, T, D, BLOCK_D, True)
    tl.store(DELTA + bh * T + offs_m, tl.sum(o * do, 1), mask=offs_m < T)


@triton.jit
def _dkdv_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, DQ_ACC, DC_ROW,
                stride_qt, stride_qd, stride_dot, stride_dod, stride_ct, c_ref,
                T, qk_scale, sm_scale, lo, hi,
                MASKED: tl.constexpr, HAS_GATE: tl.constexpr, EXACT: tl.constexpr, FUSED_DQ: tl.constexpr,
                D: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_M: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_m0
        row_ok = rows < T
        q = load_rows(Q, rows, stride_qt, stride_qd, T, D, BLOCK_D, UPCAST)
        do = load_rows(DO, rows, stride_dot, stride_dod, T, D, BLOCK_D, UPCAST)
        # Rows past T get lse = +inf, so their P (and with it their dS) is exactly 0.
        lse = tl.load(LSE + rows, mask=row_ok, other=float("inf"))
        delta = tl.load(DELTA + rows, mask=row_ok, other=0.0)
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale  # (BN, BM)
        if HAS_GATE:
            if EXACT:  # ck holds c_j itself
                s_t += (load_c(C, rows, stride_ct, T)[None, :] - ck[:, None]) * LOG2E
            else:
                lse -= decay_log2(C, rows, stride_ct, c_ref, T)
                s_t -= ck[:, None]
        if MASKED:
            s_t = tl.where(rows[None, :] >= offs_n[:, None], s_t, float("-inf"))
        p_t = tl.math.exp2(s_t - lse[None, :])
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        ds_lo = ds_t.to(q.dtype)
        dk += tl.dot(ds_lo, q, input_precision=PRECISION)
        if HAS_GATE:
            dcol += tl.sum(ds_t, 1)
        if FUSED_DQ:
            dq = tl.dot(tl.trans(ds_lo), k, input_precision=PRECISION) * sm_scale
            mask = row_ok[:, None] & (offs_d[None, :] < D)
            tl.atomic_add(DQ_ACC + rows[:, None] * BLOCK_D + offs_d[None, :], dq, mask=mask, sem="relaxed")
            if HAS_GATE:
                tl.atomic_add(DC_ROW + rows, tl.sum(ds_t, 0), mask=row_ok, sem="relaxed")
    return dk, dv, dcol


@triton.jit
def dkdv_kernel(Q, K, V, C, DO, LSE, DELTA, DK, DV, DC_COL, DQ_ACC, DC_ROW,
                stride_qb, stride_qt, stride_qh, stride_qd,
                stride_kb, stride_kt, stride_kh, stride_kd,
                stride_vb, stride_vt, stride_vh, stride_vd,
                stride_dob, stride_dot, stride_doh, stride_dod,
                stride_dkb, stride_dkt, stride_dkh, stride_dkd,
                stride_dvb, stride_dvt, stride_dvh, stride_dvd,
                stride_cb, stride_ct, stride_ch,
                T, H, sm_scale,
                HAS_GATE: tl.constexpr, EXACT: tl.constexpr, FUSED_DQ: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    Q += b * stride_qb + h * stride_qh
    DO += b * stride_dob + h * stride_doh
    C += b * stride_cb + h * stride_ch
    LSE += bh * T
    DELTA += bh * T
    # The fused path's fp32 accumulators: (B * H, T, BLOCK_D) and (B * H, T), contiguous.
    DQ_ACC += bh * T * BLOCK_D
    DC_ROW += bh * T

    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k = load_rows(K + b * stride_kb + h * stride_kh, offs_n, stride_kt, stride_kd, T, D, BLOCK_D, UPCAST)
    v = load_rows(V + b * stride_vb + h * stride_vh, offs_n, stride_vt, stride_vd, T, D, BLOCK_D, UPCAST)
    c_ref = 0.0
    ck = tl.zeros([BLOCK_N], dtype=tl.float32)
    if HAS_GATE:
        if EXACT:
            ck = load_c(C, offs_n, stride_ct, T)
        else:
            c_ref = tl.load(C + start_n * BLOCK_N * stride_ct)  # c of this tile's first key
            ck = decay_log2(C, offs_n, stride_ct, c_ref, T)
    qk_scale = sm_scale * LOG2E

    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dcol = tl.zeros([BLOCK_N], dtype=tl.float32)
    # Query tiles [lo, mid) straddle the diagonal; [mid, T) see every key of this tile.
    lo = (start_n * BLOCK_N) // BLOCK_M * BLOCK_M
    mid = tl.minimum(tl.cdiv((start_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, T)
    dk, dv, dcol = _dkdv_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, DQ_ACC, DC_ROW,
                               stride_qt, stride_qd, stride_dot, stride_dod, stride_ct, c_ref,
                               T, qk_scale, sm_scale, lo, mid,
                               True, HAS_GATE, EXACT, FUSED_DQ, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION)
    dk, dv, dcol = _dkdv_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, DQ_ACC, DC_ROW,
                               stride_qt, stride_qd, stride_dot, stride_dod, stride_ct, c_ref,
                               T, qk_scale, sm_scale, mid, T,
                               False, HAS_GATE, EXACT, FUSED_DQ, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION)
    store_rows(DK + b * stride_dkb + h * stride_dkh, offs_n, stride_dkt, stride_dkd, dk * sm_scale, T, D, BLOCK_D)
    store_rows(DV + b * stride_dvb + h * stride_dvh, offs_n, stride_dvt, stride_dvd, dv, T, D, BLOCK_D)
    if HAS_GATE:
        tl.store(DC_COL + bh * T + offs_n, -dcol, mask=offs_n < T)


@triton.jit
def _dq_tiles(dq, drow, q, do, lse, delta, offs_m, K, V, C,
              stride_kt, stride_kd, stride_vt, stride_vd, stride_ct, c_ref, c_q,
              T, qk_scale, lo, hi,
              MASKED: tl.constexpr, HAS_GATE: tl.constexpr, EXACT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n0
        k = load_rows(K, cols, stride_kt, stride_kd, T, D, BLOCK_D, UPCAST)
        v = load_rows(V, cols, stride_vt, stride_vd, T, D, BLOCK_D, UPCAST)
        s = row_scores(q, k, offs_m, cols, C, stride_ct, c_ref, c_q, T, qk_scale,
                       MASKED, HAS_GATE, EXACT, PRECISION)  # (BM, BN)
        p = tl.math.exp2(s - lse[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
        if HAS_GATE:
            drow += tl.sum(ds, 1)
    return dq, drow


@triton.jit
def dq_kernel(Q, K, V, C, DO, LSE, DELTA, DQ, DC_ROW,
              stride_qb, stride_qt, stride_qh, stride_qd,
              stride_kb, stride_kt, stride_kh, stride_kd,
              stride_vb, stride_vt, stride_vh, stride_vd,
              stride_dob, stride_dot, stride_doh, stride_dod,
              stride_dqb, stride_dqt, stride_dqh, stride_dqd,
              stride_cb, stride_ct, stride_ch,
              T, H, sm_scale,
              HAS_GATE: tl.constexpr, EXACT: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    K += b * stride_kb + h * stride_kh
    V += b * stride_vb + h * stride_vh
    C += b * stride_cb + h * stride_ch

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = offs_m < T
    q = load_rows(Q + b * stride_qb + h * stride_qh, offs_m, stride_qt, stride_qd, T, D, BLOCK_D, UPCAST)
    do = load_rows(DO + b * stride_dob + h * stride_doh, offs_m, stride_dot, stride_dod, T, D, BLOCK_D, UPCAST)
    lse = tl.load(LSE + bh * T + offs_m, mask=row_ok, other=float("inf"))
    delta = tl.load(DELTA + bh * T + offs_m, mask=row_ok, other=0.0)
    c_ref = 0.0
    c_q = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_GATE:
        if EXACT:
            c_q = load_c(C, offs_m, stride_ct, T)
        else:
            c_ref = tl.load(C + start_m * BLOCK_M * stride_ct)  # c of this tile's first query
            lse -= decay_log2(C, offs_m, stride_ct, c_ref, T)
    qk_scale = sm_scale * LOG2E

    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    drow = tl.zeros([BLOCK_M], dtype=tl.float32)
    lo = 0
    diag = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, T)
    dq, drow = _dq_tiles(dq, drow, q, do, lse, delta, offs_m, K, V, C, stride_kt, stride_kd,
                         stride_vt, stride_vd, stride_ct, c_ref, c_q, T, qk_scale, lo, diag,
                         False, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION)
    dq, drow = _dq_tiles(dq, drow, q, do, lse, delta, offs_m, K, V, C, stride_kt, stride_kd,
                         stride_vt, stride_vd, stride_ct, c_ref, c_q, T, qk_scale, diag, hi,
                         True, HAS_GATE, EXACT, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION)
    store_rows(DQ + b * stride_dqb + h * stride_dqh, offs_m, stride_dqt, stride_dqd, dq * sm_scale, T, D, BLOCK_D)
    if HAS_GATE:
        tl.store(DC_ROW + bh * T + offs_m, drow, mask=row_ok)

"""Backward Triton kernels of forgetting attention.

With P_ij = exp(s q_i.k_j + c_i - c_j - L_i) and dS_ij = P_ij (dO_i.v_j - delta_i)
(reference/fox.md 1.3): dV = P^T dO, dK = s dS^T Q, dQ = s dS K, and dL/dc_t = rowsum_t(dS) -
colsum_t(dS). ``dkdv_kernel`` (one program per key tile) writes dK, dV and -colsum(dS);
``dq_kernel`` (one program per query tile) writes dQ and rowsum(dS). The row sums are zero in
exact arithmetic, but keeping them makes the rounding of delta cancel in the reverse cumsum
that turns dL/dc into dL/d log f, so two plain stores replace any atomics.
"""
import triton
import triton.language as tl


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
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < T) & (offs_d[None, :] < D)
    o = tl.load(O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_ot + offs_d[None, :] * stride_od, mask=mask, other=0.0)
    do = tl.load(DO + b * stride_dob + h * stride_doh + offs_m[:, None] * stride_dot + offs_d[None, :] * stride_dod, mask=mask, other=0.0)
    tl.store(DELTA + bh * T + offs_m, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=offs_m < T)


@triton.jit
def _dkdv_tiles(dk, dv, dcol, k, v, c_k, offs_n, Q, DO, C, LSE, DELTA,
                stride_qt, stride_qd, stride_dot, stride_dod, stride_ct,
                T, qk_scale, lo, hi,
                MASKED: tl.constexpr, HAS_GATE: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_M: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_m0
        row_ok = rows < T
        mask = row_ok[:, None] & (offs_d[None, :] < D)
        q = tl.load(Q + rows[:, None] * stride_qt + offs_d[None, :] * stride_qd, mask=mask, other=0.0)
        do = tl.load(DO + rows[:, None] * stride_dot + offs_d[None, :] * stride_dod, mask=mask, other=0.0)
        if UPCAST:
            q = q.to(tl.float32)
            do = do.to(tl.float32)
        # Rows past T get lse = +inf, so their P (and with it their dS) is exactly 0.
        lse = tl.load(LSE + rows, mask=row_ok, other=float("inf"))
        delta = tl.load(DELTA + rows, mask=row_ok, other=0.0)
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale  # (BN, BM), log2 domain
        if HAS_GATE:
            c_q = tl.load(C + rows * stride_ct, mask=row_ok, other=0.0)
            s_t += (c_q[None, :] - c_k[:, None]) * 1.4426950408889634
        if MASKED:
            s_t = tl.where(rows[None, :] >= offs_n[:, None], s_t, float("-inf"))
        p_t = tl.math.exp2(s_t - lse[None, :])
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)
        dcol += tl.sum(ds_t, 1)
    return dk, dv, dcol


@triton.jit
def dkdv_kernel(Q, K, V, C, DO, LSE, DELTA, DK, DV, DC_COL,
                stride_qb, stride_qt, stride_qh, stride_qd,
                stride_kb, stride_kt, stride_kh, stride_kd,
                stride_vb, stride_vt, stride_vh, stride_vd,
                stride_dob, stride_dot, stride_doh, stride_dod,
                stride_dkb, stride_dkt, stride_dkh, stride_dkd,
                stride_dvb, stride_dvt, stride_dvh, stride_dvd,
                stride_cb, stride_ct, stride_ch,
                T, H, sm_scale,
                HAS_GATE: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    Q += b * stride_qb + h * stride_qh
    K += b * stride_kb + h * stride_kh
    V += b * stride_vb + h * stride_vh
    DO += b * stride_dob + h * stride_doh
    C += b * stride_cb + h * stride_ch
    LSE += bh * T
    DELTA += bh * T

    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    col_ok = offs_n < T
    kv_mask = col_ok[:, None] & (offs_d[None, :] < D)
    k = tl.load(K + offs_n[:, None] * stride_kt + offs_d[None, :] * stride_kd, mask=kv_mask, other=0.0)
    v = tl.load(V + offs_n[:, None] * stride_vt + offs_d[None, :] * stride_vd, mask=kv_mask, other=0.0)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    c_k = tl.zeros([BLOCK_N], dtype=tl.float32)
    if HAS_GATE:
        c_k = tl.load(C + offs_n * stride_ct, mask=col_ok, other=0.0)
    qk_scale = sm_scale * 1.4426950408889634

    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dcol = tl.zeros([BLOCK_N], dtype=tl.float32)
    # Query tiles [lo, mid) straddle the diagonal; [mid, T) see every key of this tile.
    lo = (start_n * BLOCK_N) // BLOCK_M * BLOCK_M
    mid = tl.minimum(tl.cdiv((start_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, T)
    dk, dv, dcol = _dkdv_tiles(dk, dv, dcol, k, v, c_k, offs_n, Q, DO, C, LSE, DELTA,
                               stride_qt, stride_qd, stride_dot, stride_dod, stride_ct, T, qk_scale,
                               lo, mid, True, HAS_GATE, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION)
    dk, dv, dcol = _dkdv_tiles(dk, dv, dcol, k, v, c_k, offs_n, Q, DO, C, LSE, DELTA,
                               stride_qt, stride_qd, stride_dot, stride_dod, stride_ct, T, qk_scale,
                               mid, T, False, HAS_GATE, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION)
    dk *= sm_scale
    tl.store(DK + b * stride_dkb + h * stride_dkh + offs_n[:, None] * stride_dkt + offs_d[None, :] * stride_dkd,
             dk.to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + b * stride_dvb + h * stride_dvh + offs_n[:, None] * stride_dvt + offs_d[None, :] * stride_dvd,
             dv.to(DV.dtype.element_ty), mask=kv_mask)
    if HAS_GATE:
        tl.store(DC_COL + bh * T + offs_n, -dcol, mask=col_ok)


@triton.jit
def _dq_tiles(dq, drow, q, do, c_q, lse, delta, offs_m, K, V, C,
              stride_kt, stride_kd, stride_vt, stride_vd, stride_ct,
              T, qk_scale, lo, hi,
              MASKED: tl.constexpr, HAS_GATE: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n0
        col_ok = cols < T
        mask = col_ok[:, None] & (offs_d[None, :] < D)
        k = tl.load(K + cols[:, None] * stride_kt + offs_d[None, :] * stride_kd, mask=mask, other=0.0)
        v = tl.load(V + cols[:, None] * stride_vt + offs_d[None, :] * stride_vd, mask=mask, other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (BM, BN), log2 domain
        if HAS_GATE:
            c_k = tl.load(C + cols * stride_ct, mask=col_ok, other=0.0)
            s += (c_q[:, None] - c_k[None, :]) * 1.4426950408889634
        if MASKED:
            s = tl.where((offs_m[:, None] >= cols[None, :]) & col_ok[None, :], s, float("-inf"))
        p = tl.math.exp2(s - lse[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
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
              HAS_GATE: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
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
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < T
    mask = row_ok[:, None] & (offs_d[None, :] < D)
    q = tl.load(Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qt + offs_d[None, :] * stride_qd, mask=mask, other=0.0)
    do = tl.load(DO + b * stride_dob + h * stride_doh + offs_m[:, None] * stride_dot + offs_d[None, :] * stride_dod, mask=mask, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    lse = tl.load(LSE + bh * T + offs_m, mask=row_ok, other=float("inf"))
    delta = tl.load(DELTA + bh * T + offs_m, mask=row_ok, other=0.0)
    c_q = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_GATE:
        c_q = tl.load(C + offs_m * stride_ct, mask=row_ok, other=0.0)
    qk_scale = sm_scale * 1.4426950408889634

    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    drow = tl.zeros([BLOCK_M], dtype=tl.float32)
    lo = 0
    diag = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, T)
    dq, drow = _dq_tiles(dq, drow, q, do, c_q, lse, delta, offs_m, K, V, C, stride_kt, stride_kd,
                         stride_vt, stride_vd, stride_ct, T, qk_scale, lo, diag,
                         False, HAS_GATE, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION)
    dq, drow = _dq_tiles(dq, drow, q, do, c_q, lse, delta, offs_m, K, V, C, stride_kt, stride_kd,
                         stride_vt, stride_vd, stride_ct, T, qk_scale, diag, hi,
                         True, HAS_GATE, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION)
    dq *= sm_scale
    tl.store(DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqt + offs_d[None, :] * stride_dqd,
             dq.to(DQ.dtype.element_ty), mask=mask)
    if HAS_GATE:
        tl.store(DC_ROW + bh * T + offs_m, drow, mask=row_ok)

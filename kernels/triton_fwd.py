"""Forward Triton kernel of forgetting attention (FlashAttention-2 style, exp2 domain).

One program per (query tile, batch * head). Scores get the decay bias (c_i - c_j) * log2(e), the difference taken in natural-log units
(one rounding of c, not two, when |c| is large),
before the online softmax; the key loop runs over [lo, hi) in two parts, full tiles below the
diagonal then the masked diagonal tiles, so a per-tile start index ``lo`` (adaptive computation
pruning, reference/fox.md 1.6) changes only where the loop begins.
"""
import triton
import triton.language as tl


@triton.jit
def _fwd_tiles(acc, m_i, l_i, q, c_q, offs_m, K, V, C, stride_kt, stride_kd, stride_vt, stride_vd,
               stride_ct, T, qk_scale, lo, hi,
               MASKED: tl.constexpr, HAS_GATE: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
               BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        col_ok = cols < T
        kv_mask = col_ok[:, None] & (offs_d[None, :] < D)
        k = tl.load(K + cols[:, None] * stride_kt + offs_d[None, :] * stride_kd, mask=kv_mask, other=0.0)
        v = tl.load(V + cols[:, None] * stride_vt + offs_d[None, :] * stride_vd, mask=kv_mask, other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (BM, BN), log2 domain
        if HAS_GATE:
            c_k = tl.load(C + cols * stride_ct, mask=col_ok, other=0.0)
            s += (c_q[:, None] - c_k[None, :]) * 1.4426950408889634
        if MASKED:
            s = tl.where((offs_m[:, None] >= cols[None, :]) & col_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def fwd_kernel(Q, K, V, C, O, LSE,
               stride_qb, stride_qt, stride_qh, stride_qd,
               stride_kb, stride_kt, stride_kh, stride_kd,
               stride_vb, stride_vt, stride_vh, stride_vd,
               stride_ob, stride_ot, stride_oh, stride_od,
               stride_cb, stride_ct, stride_ch,
               T, H, sm_scale,
               HAS_GATE: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    Q += b * stride_qb + h * stride_qh
    K += b * stride_kb + h * stride_kh
    V += b * stride_vb + h * stride_vh
    O += b * stride_ob + h * stride_oh
    C += b * stride_cb + h * stride_ch

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < T
    q_mask = row_ok[:, None] & (offs_d[None, :] < D)
    q = tl.load(Q + offs_m[:, None] * stride_qt + offs_d[None, :] * stride_qd, mask=q_mask, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    c_q = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_GATE:
        c_q = tl.load(C + offs_m * stride_ct, mask=row_ok, other=0.0)
    qk_scale = sm_scale * 1.4426950408889634

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    # Keys [lo, diag) need no mask; [diag, hi) straddle the diagonal or the end of the sequence.
    lo = 0
    diag = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, T)
    acc, m_i, l_i = _fwd_tiles(acc, m_i, l_i, q, c_q, offs_m, K, V, C, stride_kt, stride_kd,
                               stride_vt, stride_vd, stride_ct, T, qk_scale, lo, diag,
                               False, HAS_GATE, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION)
    acc, m_i, l_i = _fwd_tiles(acc, m_i, l_i, q, c_q, offs_m, K, V, C, stride_kt, stride_kd,
                               stride_vt, stride_vd, stride_ct, T, qk_scale, diag, hi,
                               True, HAS_GATE, D, BLOCK_D, BLOCK_N, UPCAST, PRECISION)
    o = acc / l_i[:, None]
    tl.store(O + offs_m[:, None] * stride_ot + offs_d[None, :] * stride_od, o.to(O.dtype.element_ty), mask=q_mask)
    # Log-sum-exp in the log2 domain, (B * H, T) contiguous: the backward recomputes P from it.
    tl.store(LSE + bh * T + offs_m, m_i + tl.math.log2(l_i), mask=row_ok)

"""Fused backward of forgetting attention: dK, dV and dQ from one pass over the tile pairs.

5 matmuls per (key tile, query tile) pair instead of the split backward's 7 (kernels/triton_bwd.py):
each program owns a key tile, accumulates dK and dV in registers as the split kernel does, and adds
each pair's dQ contribution, dS K, into an fp32 (B * H, T, BLOCK_D) buffer. On the GPU that add is a
TMA bulk reduction (``cp.reduce.async.bulk.tensor``, a tensor descriptor's ``atomic_add``): one
asynchronous instruction per tile that the copy engine applies in L2, where FlashAttention-3 puts
its dQ accumulation too. An earlier variant with per-element fp32 atomics (``red.global.add``)
measured 1.26-1.38x slower than the split backward and was removed; under the interpreter, which
has no descriptor reductions, this kernel uses those per-element atomics (``TMA=False``).

Three launches: ``prep_kernel`` (delta = rowsum(O dO), zeroes the dQ buffer and dC), the main
``dkdvq_kernel``, and ``dq_out_kernel`` (dQ buffer * scale -> dQ in the input dtype and strides).
dL/dc = rowsum(dS) - colsum(dS) is accumulated in dC by atomic adds from both sides. The order of
the atomic adds varies from run to run, so dQ and d log f are not bitwise reproducible (the
split backward's are); the error against fp64 is the same (tests/kernels/test_triton_gpu.py).
"""
import triton
import triton.language as tl

from kernels.triton_common import LOG2E, decay_log2, load_c, load_rows, store_rows


@triton.jit
def prep_kernel(O, DO, DELTA, DQ_ACC, DC,
                stride_ob, stride_ot, stride_oh, stride_od,
                stride_dob, stride_dot, stride_doh, stride_dod, T, H,
                HAS_GATE: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                UPCAST: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = offs_m < T
    o = load_rows(O + b * stride_ob + h * stride_oh, offs_m, stride_ot, stride_od, T, D, BLOCK_D, UPCAST, True)
    do = load_rows(DO + b * stride_dob + h * stride_doh, offs_m, stride_dot, stride_dod, T, D, BLOCK_D, UPCAST, True)
    tl.store(DELTA + bh * T + offs_m, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=row_ok)
    offs_d = tl.arange(0, BLOCK_D)
    tl.store(DQ_ACC + (bh * T + offs_m[:, None]) * BLOCK_D + offs_d[None, :],
             tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32), mask=row_ok[:, None])
    if HAS_GATE:
        tl.store(DC + bh * T + offs_m, tl.zeros([BLOCK_M], dtype=tl.float32), mask=row_ok)


@triton.jit
def _dkdvq_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, DQ_ACC, DQ_DESC, DC, bh,
                 stride_qt, stride_qd, stride_dot, stride_dod, c_ref, T, qk_scale, lo, hi,
                 MASKED: tl.constexpr, CHECK_T: tl.constexpr, HAS_GATE: tl.constexpr, EXACT: tl.constexpr,
                 TMA: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                 UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_m0
        row_ok = rows < T
        q = load_rows(Q, rows, stride_qt, stride_qd, T, D, BLOCK_D, UPCAST, CHECK_T)
        do = load_rows(DO, rows, stride_dot, stride_dod, T, D, BLOCK_D, UPCAST, CHECK_T)
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
            s_t = tl.where(rows[None, :] >= offs_n[:, None], s_t, float("-inf"))
        p_t = tl.math.exp2(s_t - lse[None, :])
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        ds_lo = ds_t.to(q.dtype)
        dk += tl.dot(ds_lo, q, input_precision=PRECISION)
        dq = tl.dot(tl.trans(ds_lo), k, input_precision=PRECISION)  # (BM, BLOCK_D), scaled at the end
        if TMA:
            DQ_DESC.atomic_add([bh, start_m, 0], dq.reshape(1, BLOCK_M, BLOCK_D))
        else:
            tl.atomic_add(DQ_ACC + rows[:, None] * BLOCK_D + offs_d[None, :], dq, mask=row_ok[:, None],
                          sem="relaxed")
        if HAS_GATE:
            dcol += tl.sum(ds_t, 1)
            tl.atomic_add(DC + rows, tl.sum(ds_t, 0), mask=row_ok, sem="relaxed")
    return dk, dv, dcol


@triton.jit
def dkdvq_kernel(Q, K, V, C, DO, LSE, DELTA, DK, DV, DQ_ACC, DQ_DESC, DC,
                 stride_qb, stride_qt, stride_qh, stride_qd,
                 stride_kb, stride_kt, stride_kh, stride_kd,
                 stride_vb, stride_vt, stride_vh, stride_vd,
                 stride_dob, stride_dot, stride_doh, stride_dod,
                 stride_dkb, stride_dkt, stride_dkh, stride_dkd,
                 stride_dvb, stride_dvt, stride_dvh, stride_dvd,
                 T, H, sm_scale,
                 HAS_GATE: tl.constexpr, EXACT: tl.constexpr, TMA: tl.constexpr, D: tl.constexpr,
                 BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_n = tl.program_id(0)  # the first key tiles see the most queries: they launch first
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    Q += b * stride_qb + h * stride_qh
    DO += b * stride_dob + h * stride_doh
    # c, L, delta and dC: (B * H, T) contiguous; the dQ buffer (B * H, T, BLOCK_D)
    C += bh * T
    LSE += bh * T
    DELTA += bh * T
    DC += bh * T
    DQ_ACC += bh * T * BLOCK_D

    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k = load_rows(K + b * stride_kb + h * stride_kh, offs_n, stride_kt, stride_kd, T, D, BLOCK_D, UPCAST, True)
    v = load_rows(V + b * stride_vb + h * stride_vh, offs_n, stride_vt, stride_vd, T, D, BLOCK_D, UPCAST, True)
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
    # As in dkdv_kernel: [lo, mid) straddle the diagonal, [mid, full) are whole, [full, T) the rest.
    lo = (start_n * BLOCK_N) // BLOCK_M * BLOCK_M
    mid = tl.minimum(tl.cdiv((start_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, T)
    full = mid + (T - mid) // BLOCK_M * BLOCK_M
    dk, dv, dcol = _dkdvq_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, DQ_ACC, DQ_DESC, DC, bh,
                                stride_qt, stride_qd, stride_dot, stride_dod, c_ref, T, qk_scale, lo, mid,
                                True, True, HAS_GATE, EXACT, TMA, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION)
    dk, dv, dcol = _dkdvq_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, DQ_ACC, DQ_DESC, DC, bh,
                                stride_qt, stride_qd, stride_dot, stride_dod, c_ref, T, qk_scale, mid, full,
                                False, False, HAS_GATE, EXACT, TMA, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION)
    dk, dv, dcol = _dkdvq_tiles(dk, dv, dcol, k, v, ck, offs_n, Q, DO, C, LSE, DELTA, DQ_ACC, DQ_DESC, DC, bh,
                                stride_qt, stride_qd, stride_dot, stride_dod, c_ref, T, qk_scale, full, T,
                                False, True, HAS_GATE, EXACT, TMA, D, BLOCK_D, BLOCK_M, UPCAST, PRECISION)
    store_rows(DK + b * stride_dkb + h * stride_dkh, offs_n, stride_dkt, stride_dkd, dk * sm_scale, T, D, BLOCK_D)
    store_rows(DV + b * stride_dvb + h * stride_dvh, offs_n, stride_dvt, stride_dvd, dv, T, D, BLOCK_D)
    if HAS_GATE:
        tl.atomic_add(DC + offs_n, -dcol, mask=offs_n < T, sem="relaxed")


@triton.jit
def dq_out_kernel(DQ_ACC, DQ, stride_dqb, stride_dqt, stride_dqh, stride_dqd, T, H, sm_scale,
                  D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    acc = tl.load(DQ_ACC + (bh * T + offs_m[:, None]) * BLOCK_D + offs_d[None, :], mask=(offs_m < T)[:, None],
                  other=0.0)
    store_rows(DQ + b * stride_dqb + h * stride_dqh, offs_m, stride_dqt, stride_dqd, acc * sm_scale, T, D, BLOCK_D)

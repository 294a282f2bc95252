"""The dK/dV kernel of forgetting attention as a warp-specialised Gluon kernel for Hopper (sm_90).

The same contract as triton_bwd.dkdv_kernel on its bf16/fp16 TMA path: it reads q, k, v, dO, the
forward's log-sum-exp (log2 units, c_i included) and delta = rowsum(O * dO) that dq_kernel left,
writes dK and dV, and subtracts colsum(dS) from the (B * H, T) buffer dC where dq_kernel put
rowsum(dS). One program per key tile of ``BLOCK_N`` rows, launched first-tile-first (those see the
most queries), in two partitions:

- a load partition of one warp that issues every TMA copy: this program's K and V tiles once, then
  the query tile and the dO tile of each query tile at and below the diagonal into a ring of
  ``STAGES`` shared-memory slots, each slot with a "ready" barrier for Q and one for dO and an
  "empty" barrier the compute side releases it by;
- the default partition (``num_warps`` warps) that, per query tile, issues S^T = K Q^T and
  dP^T = V dO^T together as asynchronous warpgroup MMAs (wgmma) from shared memory, computes
  P^T = exp2(S^T - L) while dP^T runs, issues dV += P^T dO with P^T from registers, forms
  dS^T = P^T (dP^T - delta) while it runs, and issues dK += dS^T Q (dS^T from registers).

With ``AHEAD`` the query tiles below the diagonal are pipelined: the next tile's S^T and dP^T are
issued before this tile's dV and dK are waited on.

The decay bias is applied as in triton_tiles.py: the key side relative to the c of this tile's
first key, the query side folded into the log-sum-exp. Query rows past T (the next sequence's rows
or TMA's zeros) get L = +inf, so their P and dS are exactly 0; keys past T are never stored. With
``PRUNE`` the query loop ends at the tile's bound (pruning.py, computed for these tiles).
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)
# Triton 3.6 (the GPU machine's) has the TMA load as async_copy_global_to_shared, later versions
# as async_load (gluon_fwd.py).
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared


@gluon.jit
def _loads(q_desc, k_desc, v_desc, do_desc, q_bufs, do_bufs, k_smem, v_smem, kv_bar, q_ready, do_ready, empty,
           row0, col, key_row, lo, hi, BLOCK_M: gl.constexpr):
    """The load partition: K and V once, then the Q and dO tiles [lo, hi) through the ring."""
    STAGES: gl.constexpr = q_bufs.type.shape[0]
    mbarrier.expect(kv_bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
    _tma_load(k_desc, [row0 + key_row, col], kv_bar, k_smem)
    _tma_load(v_desc, [row0 + key_row, col], kv_bar, v_smem)
    i = 0
    for start_m in range(lo, hi, BLOCK_M):
        s = i % STAGES
        # A slot starts empty: the first pass waits on the phase before the barrier's first.
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(q_ready.index(s), q_desc.block_type.nbytes)
        _tma_load(q_desc, [row0 + start_m, col], q_ready.index(s), q_bufs.index(s))
        mbarrier.expect(do_ready.index(s), do_desc.block_type.nbytes)
        _tma_load(do_desc, [row0 + start_m, col], do_ready.index(s), do_bufs.index(s))
        i += 1


@gluon.jit
def _row_terms(LSE, DELTA, C, c_ref, start_m, T, s_layout: gl.constexpr, BLOCK_M: gl.constexpr,
               HAS_GATE: gl.constexpr):
    """The query tile's rows, their log-sum-exp less the query side of the decay (+inf past T) and
    their delta; loaded before the tile's MMAs are waited on, so that the loads run meanwhile."""
    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    row_ok = rows < T
    lse = gl.load(LSE + rows, mask=row_ok, other=float("inf"))
    delta = gl.load(DELTA + rows, mask=row_ok, other=0.0)
    if HAS_GATE:
        lse = lse - (gl.load(C + rows, mask=row_ok, other=0.0) - c_ref) * LOG2E
    return rows, lse, delta


@gluon.jit
def _issue_scores(k_smem, v_smem, q_smem, do_smem, q_bar, do_bar, phase, zero):
    """S^T = K Q^T and dP^T = V dO^T (BN, BM) issued as asynchronous wgmma, each once its tile is in."""
    mbarrier.wait(q_bar, phase)
    s_t = warpgroup_mma(k_smem, q_smem.permute((1, 0)), zero, use_acc=False, is_async=True)
    mbarrier.wait(do_bar, phase)
    dp_t = warpgroup_mma(v_smem, do_smem.permute((1, 0)), zero, use_acc=False, is_async=True)
    return s_t, dp_t


@gluon.jit
def _grads(dk, dv, dcol, s_t, dp_t, rows, lse, delta, q_smem, do_smem, offs_n, c_key, qk_scale,
           op_layout: gl.constexpr, MASKED: gl.constexpr, HAS_GATE: gl.constexpr):
    """With S^T and dP^T in flight (issued in that order, nothing after): P^T once S^T is done,
    dV += P^T dO issued, dS^T once dP^T is done, dK += dS^T Q issued, colsum(dS) added. Returns
    dK and dV in flight and the register operands they read (keep them alive until waited)."""
    # wgmma groups finish in order: one outstanding means S^T is done, dP^T may still run.
    s_t = warpgroup_mma_wait(num_outstanding=1, deps=(s_t,))
    s_t = s_t * qk_scale
    if HAS_GATE:
        s_t = s_t - gl.expand_dims(c_key, 1)
    if MASKED:
        s_t = gl.where(gl.expand_dims(rows, 0) >= gl.expand_dims(offs_n, 1), s_t, float("-inf"))
    p_t = gl.exp2(s_t - gl.expand_dims(lse, 0))
    p_op = gl.convert_layout(p_t.to(do_smem.dtype), op_layout)
    dv = warpgroup_mma(p_op, do_smem, dv, is_async=True)
    dp_t = warpgroup_mma_wait(num_outstanding=1, deps=(dp_t,))
    ds_t = p_t * (dp_t - gl.expand_dims(delta, 0))
    ds_op = gl.convert_layout(ds_t.to(q_smem.dtype), op_layout)
    dk = warpgroup_mma(ds_op, q_smem, dk, is_async=True)
    if HAS_GATE:
        dcol += gl.sum(ds_t, 1)
    return dk, dv, dcol, p_op, ds_op


@gluon.jit
def _tiles(dk, dv, dcol, i, k_smem, v_smem, q_bufs, do_bufs, q_ready, do_ready, empty, offs_n, c_key, C, LSE,
           DELTA, c_ref, T, qk_scale, lo, hi, s_layout: gl.constexpr, op_layout: gl.constexpr,
           BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, MASKED: gl.constexpr, HAS_GATE: gl.constexpr):
    """Query tiles [lo, hi) one after the other (MASKED: those that straddle the diagonal); i
    counts the tiles consumed so far (ring phase). c_key: the key side of the decay (log2 units)."""
    STAGES: gl.constexpr = q_bufs.type.shape[0]
    zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout)
    for start_m in range(lo, hi, BLOCK_M):
        rows, lse, delta = _row_terms(LSE, DELTA, C, c_ref, start_m, T, s_layout, BLOCK_M, HAS_GATE)
        slot = i % STAGES
        q_smem = q_bufs.index(slot)
        do_smem = do_bufs.index(slot)
        s_t, dp_t = _issue_scores(k_smem, v_smem, q_smem, do_smem, q_ready.index(slot), do_ready.index(slot),
                                  (i // STAGES) & 1, zero)
        dk, dv, dcol, p_op, ds_op = _grads(dk, dv, dcol, s_t, dp_t, rows, lse, delta, q_smem, do_smem, offs_n,
                                           c_key, qk_scale, op_layout, MASKED, HAS_GATE)
        dv, dk, p_op, ds_op = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk, p_op, ds_op))
        mbarrier.arrive(empty.index(slot), count=1)
        i += 1
    return dk, dv, dcol, i


@gluon.jit
def _tiles_ahead(dk, dv, dcol, i, k_smem, v_smem, q_bufs, do_bufs, q_ready, do_ready, empty, offs_n, c_key, C,
                 LSE, DELTA, c_ref, T, qk_scale, lo, hi, s_layout: gl.constexpr, op_layout: gl.constexpr,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_GATE: gl.constexpr):
    """The unmasked query tiles [lo, hi), hi > lo, pipelined: each tile's S^T and dP^T are issued
    behind the previous tile's dV and dK, so that the tensor cores never wait on a slot's release."""
    STAGES: gl.constexpr = q_bufs.type.shape[0]
    zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout)
    slot = i % STAGES
    rows, lse, delta = _row_terms(LSE, DELTA, C, c_ref, lo, T, s_layout, BLOCK_M, HAS_GATE)
    s_t, dp_t = _issue_scores(k_smem, v_smem, q_bufs.index(slot), do_bufs.index(slot), q_ready.index(slot),
                              do_ready.index(slot), (i // STAGES) & 1, zero)
    dk, dv, dcol, p_op, ds_op = _grads(dk, dv, dcol, s_t, dp_t, rows, lse, delta, q_bufs.index(slot),
                                       do_bufs.index(slot), offs_n, c_key, qk_scale, op_layout, False, HAS_GATE)
    for start_m in range(lo + BLOCK_M, hi, BLOCK_M):
        rows, lse, delta = _row_terms(LSE, DELTA, C, c_ref, start_m, T, s_layout, BLOCK_M, HAS_GATE)
        nxt = (i + 1) % STAGES
        s_t, dp_t = _issue_scores(k_smem, v_smem, q_bufs.index(nxt), do_bufs.index(nxt), q_ready.index(nxt),
                                  do_ready.index(nxt), ((i + 1) // STAGES) & 1, zero)
        # Two outstanding (this tile's S^T and dP^T): the previous tile's dV and dK are done, its slot free.
        dv, dk, p_op, ds_op = warpgroup_mma_wait(num_outstanding=2, deps=(dv, dk, p_op, ds_op))
        mbarrier.arrive(empty.index(slot), count=1)
        slot = nxt
        i += 1
        dk, dv, dcol, p_op, ds_op = _grads(dk, dv, dcol, s_t, dp_t, rows, lse, delta, q_bufs.index(slot),
                                           do_bufs.index(slot), offs_n, c_key, qk_scale, op_layout, False, HAS_GATE)
    dv, dk, p_op, ds_op = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk, p_op, ds_op))
    mbarrier.arrive(empty.index(slot), count=1)
    return dk, dv, dcol, i + 1


@gluon.jit
def _compute(k_smem, v_smem, q_bufs, do_bufs, kv_bar, q_ready, do_ready, empty, C, LSE, DELTA, DK, DV, DC,
             stride_dkt, stride_dkd, stride_dvt, stride_dvd, key_row, lo, mid, hi, T, sm_scale,
             HAS_GATE: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, D: gl.constexpr,
             AHEAD: gl.constexpr, num_warps: gl.constexpr):
    """The default partition: dK, dV and colsum(dS) over the query tiles, then their stores."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                        instr_shape=[16, D, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    key_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    offs_n = key_row + gl.arange(0, BLOCK_N, layout=key_layout)
    c_ref = 0.0
    c_key = gl.zeros([BLOCK_N], gl.float32, key_layout)
    if HAS_GATE:
        c_ref = gl.load(C + key_row)  # c of this tile's first key
        c_key = (gl.load(C + offs_n, mask=offs_n < T, other=0.0) - c_ref) * LOG2E
    qk_scale = sm_scale * LOG2E
    dk = gl.zeros([BLOCK_N, D], gl.float32, kv_layout)
    dv = gl.zeros([BLOCK_N, D], gl.float32, kv_layout)
    dcol = gl.zeros([BLOCK_N], gl.float32, key_layout)
    mbarrier.wait(kv_bar, 0)
    i = 0
    dk, dv, dcol, i = _tiles(dk, dv, dcol, i, k_smem, v_smem, q_bufs, do_bufs, q_ready, do_ready, empty, offs_n,
                             c_key, C, LSE, DELTA, c_ref, T, qk_scale, lo, mid, s_layout, op_layout, BLOCK_M,
                             BLOCK_N, True, HAS_GATE)
    if AHEAD:
        if hi > mid:
            dk, dv, dcol, i = _tiles_ahead(dk, dv, dcol, i, k_smem, v_smem, q_bufs, do_bufs, q_ready, do_ready, empty,
                                           offs_n, c_key, C, LSE, DELTA, c_ref, T, qk_scale, mid, hi, s_layout,
                                           op_layout, BLOCK_M, BLOCK_N, HAS_GATE)
    else:
        dk, dv, dcol, i = _tiles(dk, dv, dcol, i, k_smem, v_smem, q_bufs, do_bufs, q_ready, do_ready, empty, offs_n,
                                 c_key, C, LSE, DELTA, c_ref, T, qk_scale, mid, hi, s_layout, op_layout, BLOCK_M,
                                 BLOCK_N, False, HAS_GATE)
    rows = key_row + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, kv_layout))
    dims = gl.arange(0, D, layout=gl.SliceLayout(0, kv_layout))
    keep = gl.expand_dims(rows < T, 1)
    gl.store(DK + gl.expand_dims(rows, 1) * stride_dkt + gl.expand_dims(dims, 0) * stride_dkd,
             (dk * sm_scale).to(DK.dtype.element_ty), mask=keep)
    gl.store(DV + gl.expand_dims(rows, 1) * stride_dvt + gl.expand_dims(dims, 0) * stride_dvd,
             dv.to(DV.dtype.element_ty), mask=keep)
    if HAS_GATE:
        # dq_kernel, launched before, left rowsum(dS) at these positions.
        ok = offs_n < T
        gl.store(DC + offs_n, gl.load(DC + offs_n, mask=ok, other=0.0) - dcol, mask=ok)


@gluon.jit
def gluon_dkdv_kernel(q_desc, k_desc, v_desc, do_desc, C, LSE, DELTA, DK, DV, DC, STOPS,
                      stride_dkb, stride_dkt, stride_dkh, stride_dkd, stride_dvb, stride_dvt, stride_dvh, stride_dvd,
                      T, H, sm_scale, HAS_GATE: gl.constexpr, PRUNE: gl.constexpr, AHEAD: gl.constexpr,
                      STAGES: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    start_n = gl.program_id(0)  # the first key tiles see the most queries: they launch first
    bh = gl.program_id(1)
    b = bh // H
    h = bh % H
    row0 = b * T
    col = h * D
    key_row = start_n * BLOCK_N
    DK += b * stride_dkb + h * stride_dkh
    DV += b * stride_dvb + h * stride_dvh
    # c, L, delta and dC: (B * H, T) contiguous
    C += bh * T
    LSE += bh * T
    DELTA += bh * T
    DC += bh * T
    # Query tiles [lo, mid) straddle the diagonal, [mid, hi) see every key of this tile; hi = T, or
    # with PRUNE the end of the rows whose weight on this tile is not negligible.
    lo = key_row // BLOCK_M * BLOCK_M
    mid = gl.minimum(gl.cdiv(key_row + BLOCK_N, BLOCK_M) * BLOCK_M, T)
    hi = T
    if PRUNE:
        hi = gl.load(STOPS + bh * gl.num_programs(0) + start_n)

    k_smem = gl.allocate_shared_memory(k_desc.dtype, [BLOCK_N, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [BLOCK_N, D], v_desc.layout)
    q_bufs = gl.allocate_shared_memory(q_desc.dtype, [STAGES, BLOCK_M, D], q_desc.layout)
    do_bufs = gl.allocate_shared_memory(do_desc.dtype, [STAGES, BLOCK_M, D], do_desc.layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(s), count=1)
        mbarrier.init(do_ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)

    gl.warp_specialize([
        (_compute, (k_smem, v_smem, q_bufs, do_bufs, kv_bar, q_ready, do_ready, empty, C, LSE, DELTA, DK, DV, DC,
                    stride_dkt, stride_dkd, stride_dvt, stride_dvd, key_row, lo, mid, hi, T, sm_scale, HAS_GATE,
                    BLOCK_M, BLOCK_N, D, AHEAD, num_warps)),
        (_loads, (q_desc, k_desc, v_desc, do_desc, q_bufs, do_bufs, k_smem, v_smem, kv_bar, q_ready, do_ready, empty,
                  row0, col, key_row, lo, hi, BLOCK_M)),
    ], [1], [24])

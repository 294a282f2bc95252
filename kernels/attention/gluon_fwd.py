"""Forward of forgetting attention as a warp-specialised Gluon kernel for Hopper (sm_90).

The same contract as triton_fwd.fwd_kernel on its bf16/fp16 TMA path (o, and the log-sum-exp in
log2 units with c_i included, so the Triton backward reads it unchanged), written with what
Triton's automatic pipelining does not give on Hopper (docs/kernels.md, "Gluon on Hopper"):

- a load partition of one warp that issues every TMA copy: the query tile once, then each key
  tile and value tile into a ring of ``STAGES`` shared-memory slots, each slot with its own
  "ready" barrier for K and for V and one "empty" barrier the compute side arrives on;
- the default partition (``num_warps`` warps, one or two warpgroups) that runs the scores and
  the weighted sum as asynchronous warpgroup MMAs (wgmma) straight from shared memory, the
  probabilities passed to the second MMA in registers, and the online softmax between them.

With ``AHEAD`` the key tiles below the diagonal are pipelined as FlashAttention-3 does within a
warpgroup: tile j's Q K^T and tile j - 1's weighted sum are issued together, and tile j's softmax
runs while the weighted sum does.

The decay bias is applied as in triton_tiles.py: the key side relative to the first query's c,
the query side folded into the stored log-sum-exp. Key tiles past T (read from the next
sequence's rows by TMA) are masked; output rows past T are not stored.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)
# Gluon is experimental and renames as it goes: Triton 3.6 (the GPU machine's) has the TMA load as
# async_copy_global_to_shared, later versions as async_load.
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared


@gluon.jit
def _loads(q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_bar, k_ready, v_ready, kv_empty, row0, col, q_row,
           lo, hi, BLOCK_N: gl.constexpr):
    """The load partition: the query tile, then the key and value tiles [lo, hi) through the ring."""
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    _tma_load(q_desc, [row0 + q_row, col], q_bar, q_smem)
    i = 0
    for start_n in range(lo, hi, BLOCK_N):
        s = i % STAGES
        # A slot starts empty: the first pass waits on the phase before the barrier's first.
        mbarrier.wait(kv_empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        _tma_load(k_desc, [row0 + start_n, col], k_ready.index(s), k_bufs.index(s))
        mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
        _tma_load(v_desc, [row0 + start_n, col], v_ready.index(s), v_bufs.index(s))
        i += 1


@gluon.jit
def _scores(s, start_n, offs_m, C, c_ref, T, qk_scale, s_layout: gl.constexpr, BLOCK_N: gl.constexpr,
            MASKED: gl.constexpr, HAS_GATE: gl.constexpr):
    """Raw q.k (BM, BN) -> scores in the log2 domain, the key side of the decay subtracted, and
    (MASKED) -inf above the diagonal and past T."""
    cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    s = s * qk_scale
    if HAS_GATE:
        c_k = gl.load(C + cols, mask=cols < T, other=0.0)
        s = s - gl.expand_dims((c_k - c_ref) * LOG2E, 0)
    if MASKED:
        keep = (gl.expand_dims(offs_m, 1) >= gl.expand_dims(cols, 0)) & gl.expand_dims(cols < T, 0)
        s = gl.where(keep, s, float("-inf"))
    return s


@gluon.jit
def _softmax_step(acc, m_i, l_i, s, v_smem, o_layout: gl.constexpr, p_layout: gl.constexpr):
    """One key tile of the online softmax: scores s (log2 domain) against values in v_smem; the
    weighted sum as an asynchronous wgmma, the probabilities from registers. Returns the token
    of the MMA (wait on it before reading acc or releasing v_smem)."""
    m_new = gl.maximum(m_i, gl.max(s, 1))
    p = gl.exp2(s - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
    p_op = gl.convert_layout(p.to(v_smem.dtype), p_layout)
    acc = warpgroup_mma(p_op, v_smem, acc, is_async=True)
    return acc, m_new, l_i


@gluon.jit
def _tiles(acc, m_i, l_i, i, q_smem, k_bufs, v_bufs, k_ready, v_ready, kv_empty, offs_m, C, c_ref, T, qk_scale,
           lo, hi, s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr, BLOCK_M: gl.constexpr,
           BLOCK_N: gl.constexpr, MASKED: gl.constexpr, HAS_GATE: gl.constexpr):
    """Key tiles [lo, hi) one after the other; i counts the tiles consumed so far (ring phase)."""
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    for start_n in range(lo, hi, BLOCK_N):
        slot = i % STAGES
        phase = (i // STAGES) & 1
        mbarrier.wait(k_ready.index(slot), phase)
        s = warpgroup_mma(q_smem, k_bufs.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        s = _scores(s, start_n, offs_m, C, c_ref, T, qk_scale, s_layout, BLOCK_N, MASKED, HAS_GATE)
        mbarrier.wait(v_ready.index(slot), phase)
        acc, m_i, l_i = _softmax_step(acc, m_i, l_i, s, v_bufs.index(slot), o_layout, p_layout)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(kv_empty.index(slot), count=1)
        i += 1
    return acc, m_i, l_i, i


@gluon.jit
def _tiles_ahead(acc, m_i, l_i, i, q_smem, k_bufs, v_bufs, k_ready, v_ready, kv_empty, offs_m, C, c_ref, T,
                 qk_scale, lo, hi, s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_GATE: gl.constexpr):
    """The unmasked tiles [lo, hi), hi > lo, pipelined: the scores of tile j and the weighted sum
    of tile j - 1 are issued together, and tile j's softmax runs while the weighted sum does."""
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    slot = i % STAGES
    mbarrier.wait(k_ready.index(slot), (i // STAGES) & 1)
    s = warpgroup_mma(q_smem, k_bufs.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
    s = _scores(s, lo, offs_m, C, c_ref, T, qk_scale, s_layout, BLOCK_N, False, HAS_GATE)
    m_new = gl.maximum(m_i, gl.max(s, 1))
    p = gl.exp2(s - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
    m_i = m_new
    for start_n in range(lo + BLOCK_N, hi, BLOCK_N):
        nxt = (i + 1) % STAGES
        mbarrier.wait(k_ready.index(nxt), ((i + 1) // STAGES) & 1)
        s = warpgroup_mma(q_smem, k_bufs.index(nxt).permute((1, 0)), zero, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(slot), (i // STAGES) & 1)
        p_op = gl.convert_layout(p.to(v_bufs.dtype), p_layout)
        acc = warpgroup_mma(p_op, v_bufs.index(slot), acc, is_async=True)
        # wgmma groups finish in order: one outstanding means the scores are done.
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s,))
        s = _scores(s, start_n, offs_m, C, c_ref, T, qk_scale, s_layout, BLOCK_N, False, HAS_GATE)
        m_new = gl.maximum(m_i, gl.max(s, 1))
        p = gl.exp2(s - gl.expand_dims(m_new, 1))
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 1)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(kv_empty.index(slot), count=1)
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
        m_i = m_new
        i += 1
        slot = nxt
    mbarrier.wait(v_ready.index(slot), (i // STAGES) & 1)
    p_op = gl.convert_layout(p.to(v_bufs.dtype), p_layout)
    acc = warpgroup_mma(p_op, v_bufs.index(slot), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    mbarrier.arrive(kv_empty.index(slot), count=1)
    return acc, m_i, l_i, i + 1


@gluon.jit
def _compute(q_smem, k_bufs, v_bufs, q_bar, k_ready, v_ready, kv_empty, C, O, LSE, stride_ot, stride_od, q_row,
             lo, diag, hi, T, sm_scale, HAS_GATE: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
             D: gl.constexpr, AHEAD: gl.constexpr, num_warps: gl.constexpr):
    """The default partition: the online softmax over the key tiles, then o and the log-sum-exp."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    offs_m = q_row + gl.arange(0, BLOCK_M, layout=row_layout)
    c_ref = 0.0
    if HAS_GATE:
        c_ref = gl.load(C + q_row)
    qk_scale = sm_scale * LOG2E
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_layout)
    l_i = gl.zeros([BLOCK_M], gl.float32, row_layout)
    acc = gl.zeros([BLOCK_M, D], gl.float32, o_layout)
    mbarrier.wait(q_bar, 0)
    i = 0
    if AHEAD:
        if diag > lo:
            acc, m_i, l_i, i = _tiles_ahead(acc, m_i, l_i, i, q_smem, k_bufs, v_bufs, k_ready, v_ready, kv_empty,
                                            offs_m, C, c_ref, T, qk_scale, lo, diag, s_layout, o_layout, p_layout,
                                            BLOCK_M, BLOCK_N, HAS_GATE)
    else:
        acc, m_i, l_i, i = _tiles(acc, m_i, l_i, i, q_smem, k_bufs, v_bufs, k_ready, v_ready, kv_empty, offs_m, C,
                                  c_ref, T, qk_scale, lo, diag, s_layout, o_layout, p_layout, BLOCK_M, BLOCK_N,
                                  False, HAS_GATE)
    acc, m_i, l_i, i = _tiles(acc, m_i, l_i, i, q_smem, k_bufs, v_bufs, k_ready, v_ready, kv_empty, offs_m, C,
                              c_ref, T, qk_scale, diag, hi, s_layout, o_layout, p_layout, BLOCK_M, BLOCK_N,
                              True, HAS_GATE)
    o = acc / gl.expand_dims(gl.convert_layout(l_i, gl.SliceLayout(1, o_layout)), 1)
    rows = q_row + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, o_layout))
    dims = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    ptrs = O + gl.expand_dims(rows, 1) * stride_ot + gl.expand_dims(dims, 0) * stride_od
    gl.store(ptrs, o.to(O.dtype.element_ty), mask=gl.expand_dims(rows < T, 1))
    lse = m_i + gl.log2(l_i)
    if HAS_GATE:
        lse += (gl.load(C + offs_m, mask=offs_m < T, other=0.0) - c_ref) * LOG2E
    gl.store(LSE + offs_m, lse, mask=offs_m < T)


@gluon.jit
def gluon_fwd_kernel(q_desc, k_desc, v_desc, C, O, LSE, STARTS, stride_ob, stride_ot, stride_oh, stride_od,
                     T, H, sm_scale, HAS_GATE: gl.constexpr, PRUNE: gl.constexpr, AHEAD: gl.constexpr,
                     STAGES: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    # The last query tiles have the most keys: launched first, they leave short tiles for the end.
    start_m = gl.num_programs(0) - 1 - gl.program_id(0)
    bh = gl.program_id(1)
    b = bh // H
    h = bh % H
    row0 = b * T
    col = h * D
    q_row = start_m * BLOCK_M
    O += b * stride_ob + h * stride_oh
    C += bh * T
    LSE += bh * T
    lo = 0
    if PRUNE:
        lo = gl.load(STARTS + bh * gl.num_programs(0) + start_m)
    diag = q_row // BLOCK_N * BLOCK_N
    hi = gl.minimum(q_row + BLOCK_M, T)

    q_smem = gl.allocate_shared_memory(q_desc.dtype, [BLOCK_M, D], q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [STAGES, BLOCK_N, D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(v_desc.dtype, [STAGES, BLOCK_N, D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(kv_empty.index(s), count=1)

    gl.warp_specialize([
        (_compute, (q_smem, k_bufs, v_bufs, q_bar, k_ready, v_ready, kv_empty, C, O, LSE, stride_ot, stride_od,
                    q_row, lo, diag, hi, T, sm_scale, HAS_GATE, BLOCK_M, BLOCK_N, D, AHEAD, num_warps)),
        (_loads, (q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_bar, k_ready, v_ready, kv_empty, row0, col,
                  q_row, lo, hi, BLOCK_N)),
    ], [1], [24])

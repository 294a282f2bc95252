"""A warp-specialised Gluon matmul on Hopper: one TMA-load warp feeds a ring of shared-memory
stages, the default partition (one or two warpgroups) runs async wgmma. Checked against torch."""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier, fence_async_shared, warpgroup_mma, warpgroup_mma_wait


@gluon.jit
def _load(a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, k_tiles):
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    for i in range(k_tiles):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(a_desc, [off_m, i * BK], ready.index(s), a_bufs.index(s))
        tma.async_copy_global_to_shared(b_desc, [off_n, i * BK], ready.index(s), b_bufs.index(s))


@gluon.jit
def _mma(a_bufs, b_bufs, ready, empty, k_tiles, BM: gl.constexpr, BN: gl.constexpr, num_warps: gl.constexpr):
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
    for i in range(k_tiles):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index(s), count=1)
    return (acc,)


@gluon.jit
def ws_matmul_kernel(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BN, BK], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    k_tiles = gl.cdiv(K, BK)
    acc, = gl.warp_specialize([
        (_mma, (a_bufs, b_bufs, ready, empty, k_tiles, BM, BN, num_warps)),
        (_load, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, k_tiles)),
    ], [1], [24])
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    c_smem.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(pendings=0)


def descriptors(a, b, c, BM, BN, BK):
    ga = gl.bfloat16 if a.dtype == torch.bfloat16 else gl.float16
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], gl.NVMMASharedLayout.get_default_for([BM, BK], ga))
    b_desc = TensorDescriptor.from_tensor(b, [BN, BK], gl.NVMMASharedLayout.get_default_for([BN, BK], ga))
    c_desc = TensorDescriptor.from_tensor(c, [BM, BN], gl.NVMMASharedLayout.get_default_for([BM, BN], ga))
    return a_desc, b_desc, c_desc


def ws_matmul(a, b, BM=128, BN=128, BK=64, STAGES=4, num_warps=8):
    """c = a @ b.T for a (M, K), b (N, K) bf16."""
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    ws_matmul_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](*descriptors(a, b, c, BM, BN, BK), K, STAGES,
                                                                num_warps=num_warps)
    return c

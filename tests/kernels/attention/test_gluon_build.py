"""The Gluon forward (kernels/attention/gluon_fwd.py) and dK/dV kernel (gluon_bwd.py) built for
Hopper on a machine without a GPU: every tile of their tables compiles to sm_90 machine code
through Triton's compiler and ptxas, with
warpgroup MMAs and TMA copies, within the SM's shared memory; and the path is chosen only where it
can run.
Its numbers are checked on the GPU (test_gluon_gpu.py); this catches, in CI, a Triton whose
Gluon no longer builds the kernel (Gluon is experimental and renames as it goes)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from foxwb.kernels.attention import configs, launch

gluon = pytest.importorskip("triton.experimental.gluon", reason="this Triton has no Gluon")

SHARED_PER_SM = 227 * 1024  # the most one program may take on an H100 or H200 (opt-in)


class _Hopper:
    """Triton's active driver for a compile-only build: an sm_90 target, nothing launched."""

    def __init__(self):
        from triton.backends.nvidia.driver import ty_to_cpp

        self.map_python_to_cpp_type = ty_to_cpp

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")


def build(D: int, tiles: configs.GluonTiles, gate: bool, prune: bool, backward: bool = False):
    """The forward (or, ``backward``, the dK/dV kernel) compiled for sm_90 (Triton's compile-only
    warmup under the _Hopper driver)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from triton.runtime.driver import driver

    from foxwb.kernels.attention.gluon_bwd import gluon_dkdv_kernel
    from foxwb.kernels.attention.gluon_fwd import gluon_fwd_kernel

    driver.set_active(_Hopper())
    B, T, H = 2, 1000, 3
    q = torch.empty(B, T, H, D, dtype=torch.bfloat16)

    def desc(rows):
        return TensorDescriptor(q, [B * T, H * D], [H * D, 1], [rows, D],
                                gl.NVMMASharedLayout.get_default_for([rows, D], gl.bfloat16))

    lse = torch.empty(B * H, T)
    extra = {"maxnreg": tiles.maxnreg} if tiles.maxnreg else {}
    stops = torch.empty(1, dtype=torch.int32)
    if backward:
        return gluon_dkdv_kernel.warmup(desc(tiles.block_m), desc(tiles.block_n), desc(tiles.block_n),
                                        desc(tiles.block_m), lse, lse, lse, q, q, lse, stops, *q.stride(), *q.stride(),
                                        T, H, 0.125, gate, prune, tiles.ahead, tiles.stages,
                                        num_warps=tiles.num_warps, grid=(1, 1), **extra)
    return gluon_fwd_kernel.warmup(desc(tiles.block_m), desc(tiles.block_n), desc(tiles.block_n), lse, q, lse,
                                   torch.empty(1, dtype=torch.int32), *q.stride(), T, H, 0.125, gate, prune,
                                   tiles.ahead, tiles.stages, num_warps=tiles.num_warps, grid=(1, 1), **extra)


def report() -> None:
    """Every tile of both tables built with and without the gate and with pruning: one JSON line each."""
    for backward, table in ((False, configs.GLUON_FWD_TILES), (True, configs.GLUON_BWD_TILES)):
        for D, entries in table.items():
            for _, tiles, _ in entries:
                for gate, prune in ((True, False), (False, False), (True, True)):
                    kernel = build(D, tiles, gate, prune, backward)
                    ptx = kernel.asm["ptx"]
                    print(json.dumps({"backward": backward, "D": D, "tiles": str(tiles), "gate": gate, "prune": prune,
                                      "shared": kernel.metadata.shared, "cubin": len(kernel.asm["cubin"]),
                                      "wgmma": ptx.count("wgmma.mma_async"), "tma": ptx.count("cp.async.bulk.tensor")}),
                          flush=True)


def test_every_tile_of_the_table_builds_for_hopper_within_its_shared_memory():
    # In a process of its own: the suite runs Triton's interpreter (TRITON_INTERPRET=1, read at
    # import), under which Gluon does not compile.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = "from tests.kernels.attention.test_gluon_build import report; report()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                          cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    tables = (configs.GLUON_FWD_TILES, configs.GLUON_BWD_TILES)
    assert len(rows) == 3 * sum(len(e) for table in tables for e in table.values())
    for row in rows:
        assert row["cubin"] > 0 and row["wgmma"] > 0 and row["tma"] > 0, row
        assert row["shared"] <= SHARED_PER_SM, row


def test_the_gluon_path_is_taken_only_on_a_gpu_and_where_asked():
    q = torch.randn(1, 64, 2, 64, dtype=torch.bfloat16)
    for setting in (None, True, False):
        launch.GLUON_FWD = launch.GLUON_BWD = setting
        try:
            assert not launch.use_gluon(q, q, q)  # CPU tensors: the Triton kernel (under the interpreter)
            assert not launch.use_gluon(q, q, q, q, q, backward=True)
        finally:
            launch.GLUON_FWD = launch.GLUON_BWD = None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_descriptor_built_without_its_checks_is_the_checked_one(dtype):
    """launch._gluon_desc skips the descriptor class's checks on the host's hot path: what it builds
    must be field for field what the checked constructor builds, for a (B, T, H, D) tensor and a
    column slice of a projection alike; an empty tensor still meets the checks."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    qkv = torch.zeros(2, 77, 3 * 4 * 64, dtype=dtype)
    for x, rows in ((torch.zeros(3, 50, 2, 128, dtype=dtype), 64), (qkv[..., 256:512].view(2, 77, 4, 64), 128)):
        B, T, H, D = x.shape
        fast = launch._gluon_desc(x, rows)
        checked = TensorDescriptor(x, [B * T, H * D], [launch._row_stride(x), 1], [rows, D],
                                   launch._gluon_layout(rows, D, x.dtype))
        assert type(fast) is TensorDescriptor
        assert fast.base is x and fast.padding == checked.padding
        assert (fast.shape, fast.strides, fast.block_shape, fast.layout) == \
            (checked.shape, checked.strides, checked.block_shape, checked.layout)
    with pytest.raises(AssertionError, match="shape must be positive"):
        launch._gluon_desc(torch.zeros(1, 0, 2, 64, dtype=dtype), 64)

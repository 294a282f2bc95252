"""Tile sizes of the forgetting-attention kernels: the measured tables and the choice per call.

Chosen by measurement on the H200 (``python benchmarks/tune.py``; docs/kernels.md, "Tiles"): per
head-dim bucket, (longest sequence it serves, config) in increasing length. ``H200_CONFIGS``
serves the TMA loads (the path the H200 takes), ``POINTER_CONFIGS`` the pointer loads.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from foxwb.kernels import runtime


@dataclass(frozen=True)
class TileConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


@dataclass(frozen=True)
class KernelConfig:
    fwd: TileConfig
    dkdv: TileConfig
    dq: TileConfig
    # The forward's unmasked key loop software-pipelined by hand (triton_fwd.py): faster with
    # small tiles at short sequences, slower elsewhere (docs/kernels.md, "Tiles").
    fwd_ahead: bool = False


H200_CONFIGS: dict[int, tuple[tuple[int, KernelConfig], ...]] = {
    # One tile per head dim won at every length measured, 2k-16k (docs/kernels.md, "Tiles").
    64: ((1 << 62, KernelConfig(TileConfig(64, 128, 4, 3), TileConfig(128, 64, 4, 2), TileConfig(128, 64, 4, 3))),),
    128: ((1 << 62, KernelConfig(TileConfig(128, 128, 8, 3), TileConfig(64, 128, 8, 2), TileConfig(128, 64, 8, 3))),),
}
POINTER_CONFIGS: dict[int, tuple[tuple[int, KernelConfig], ...]] = {
    64: (
        (2048, KernelConfig(TileConfig(64, 64, 4, 3), TileConfig(128, 64, 4, 2), TileConfig(64, 64, 4, 2), True)),
        (4096, KernelConfig(TileConfig(64, 64, 4, 3), TileConfig(128, 64, 4, 2), TileConfig(128, 64, 4, 3), True)),
        (1 << 62, KernelConfig(TileConfig(64, 128, 4, 3), TileConfig(128, 64, 4, 2), TileConfig(64, 128, 4, 3))),
    ),
    128: (
        (2048, KernelConfig(TileConfig(64, 32, 4, 3), TileConfig(64, 128, 8, 3), TileConfig(128, 64, 8, 3))),
        (1 << 62, KernelConfig(TileConfig(128, 128, 8, 3), TileConfig(64, 128, 8, 3), TileConfig(128, 64, 8, 3))),
    ),
}
# The interpreter runs program by program and tile by tile in numpy, so its time grows with the
# number of tiles, not their size: small tiles exercise the multi-tile paths at small T, and past
# INTERPRETER_SHORT tokens tiles four times larger (still several per sequence, the last one
# partial at awkward lengths) take the tests at 257 tokens from 13-16 s to 1.5-2.1 s each on a
# quiet 2-core machine.
INTERPRETER_CONFIG = KernelConfig(TileConfig(32, 16, 4, 1), TileConfig(16, 32, 4, 1), TileConfig(32, 16, 4, 1))
INTERPRETER_SHORT = 160
INTERPRETER_LONG_CONFIG = KernelConfig(TileConfig(128, 64, 4, 1), TileConfig(64, 128, 4, 1), TileConfig(128, 64, 4, 1))
# fp32 inputs (the exact path: ieee dots, c_i - c_j per element) on the GPU: the bf16 tables' tiles
# at four bytes an element overflow shared memory at head dim 128 (found on the H200).
FP32_CONFIG = KernelConfig(TileConfig(32, 32, 4, 2), TileConfig(32, 32, 4, 2), TileConfig(32, 32, 4, 2))


@dataclass(frozen=True)
class GluonTiles:
    """Tiles of the warp-specialised Gluon forward (gluon_fwd.py): ``num_warps`` is the compute
    partition's (the load partition adds one warp), ``stages`` the K/V ring's slots, ``ahead`` the
    key tiles below the diagonal pipelined, ``maxnreg`` the registers per thread the launch allows
    (0: the compiler's choice; fewer let two programs share an SM)."""
    block_m: int
    block_n: int
    num_warps: int
    stages: int
    ahead: bool
    maxnreg: int = 0


# The Gluon forward per head-dim bucket: (longest sequence it serves, tiles, whether it is the
# forward by default there on sm_90, else our Triton forward is), in increasing length; measured on
# the H100 (docs/kernels.md, "Gluon on Hopper").
GLUON_FWD_TILES: dict[int, tuple[tuple[int, GluonTiles, bool], ...]] = {
    64: ((1 << 62, GluonTiles(64, 128, 4, 3, True, 128), False),),
    # Up to 8k tokens the Gluon forward is 3-7% faster than the Triton one at head dim 128 (replayed
    # from CUDA graphs); at 16k the Triton one is as fast, and at head dim 64 6-10% faster.
    128: ((8192, GluonTiles(64, 64, 4, 3, True, 128), True), (1 << 62, GluonTiles(128, 128, 8, 2, False), False)),
}


# The Gluon dK/dV kernel (gluon_bwd.py; ``ahead``: the query tiles below the diagonal pipelined) in
# the same form: whether it replaces the Triton dkdv_kernel there by default on sm_90. Measured on
# the H100 (docs/kernels.md, "Gluon on Hopper"): at head dim 128 it is 17-28% faster than the Triton
# kernel (forward+backward 7.5-8.7%); at 64 it is 11-13% slower.
GLUON_BWD_TILES: dict[int, tuple[tuple[int, GluonTiles, bool], ...]] = {
    64: ((1 << 62, GluonTiles(64, 128, 8, 2, True), False),),
    128: ((1 << 62, GluonTiles(64, 128, 8, 2, False), True),),
}


def gluon_choice(head_dim: int, seq_len: int, table: dict | None = None) -> tuple[GluonTiles, bool]:
    """The Gluon kernel's tiles for this head dim and length, and whether it runs there by default:
    the forward's (GLUON_FWD_TILES), or ``table``'s (GLUON_BWD_TILES for the dK/dV kernel)."""
    for longest, tiles, chosen in (GLUON_FWD_TILES if table is None else table)[64 if head_dim <= 64 else 128]:
        if seq_len <= longest:
            return tiles, chosen
    return tiles, chosen


def default_config(head_dim: int, seq_len: int, tma: bool = True, dtype: torch.dtype = torch.bfloat16) -> KernelConfig:
    """The measured tiles for this head dim and length, for TMA or pointer loads."""
    if runtime.INTERPRET:
        return INTERPRETER_CONFIG if seq_len <= INTERPRETER_SHORT else INTERPRETER_LONG_CONFIG
    if dtype == torch.float32:
        return FP32_CONFIG
    for longest, cfg in (H200_CONFIGS if tma else POINTER_CONFIGS)[64 if head_dim <= 64 else 128]:
        if seq_len <= longest:
            return cfg
    return cfg

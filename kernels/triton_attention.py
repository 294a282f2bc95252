"""Forgetting attention on Triton: launch configuration and the custom ops torch sees.

Forward: one scan kernel turns log f (B, T, H) into c = cumsum(log f) (B * H, T) fp32 (the (T, T)
decay matrix is never formed), then the attention kernel. Backward: dq_kernel, dkdv_kernel, and
the reverse scan that turns dL/dc into dL/d log f in place. q, k, v keep the strides they come
with; nothing is copied.

On sm_90+ GPUs the kernels read q, k, v, O and dO through TMA tensor descriptors (``use_tma``)
when the tensors' layout allows one (fp16/bf16, head dim 16-128, each (B, T) row's heads side by
side: a (B * T, H * D) view with 16-byte aligned rows, as (B, T, H, D) contiguous tensors and
column slices of a (B, T, X) projection are); else, and under the interpreter unless ``TMA_LOADS``
says so, through tiles of pointers. Each path has its own tile table.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
import os
from dataclasses import dataclass

import torch
import triton

from kernels import pruning
from kernels.triton_bwd import dkdv_kernel, dq_kernel
from kernels.triton_fwd import fwd_kernel
from kernels.triton_pruning import norm_max_kernel, tile_bounds_kernel
from kernels.triton_scan import scan_kernel

try:  # triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover
    TensorDescriptor = None

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# Tests set this so that every output the kernels should write starts as NaN: an element left
# unwritten then fails the comparison instead of passing on leftover memory.
POISON_OUTPUTS = False
# Tile loads through TMA descriptors: None = on CUDA devices of compute capability 9.0+ whenever
# the layout allows (use_tma); True = wherever the layout allows, the interpreter included (the
# tests run both paths on CPU); False = never.
TMA_LOADS: bool | None = None


def _new(like: torch.Tensor, shape=None, dtype=None) -> torch.Tensor:
    t = torch.empty(shape if shape is not None else like.shape, device=like.device, dtype=dtype or like.dtype)
    return t.fill_(float("nan")) if POISON_OUTPUTS else t


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
    # The forward's unmasked key loop software-pipelined by hand (kernels/triton_fwd.py): faster
    # with small tiles at short sequences, slower elsewhere (kernels/BENCHMARKS.md).
    fwd_ahead: bool = False


# Chosen by measurement on the H200 (kernels/tune.py; kernels/BENCHMARKS.md): per head-dim bucket,
# (longest sequence it serves, config) in increasing length. H200_CONFIGS serves the TMA loads
# (the path the H200 takes), POINTER_CONFIGS the pointer loads.
H200_CONFIGS: dict[int, tuple[tuple[int, KernelConfig], ...]] = {
    # scripts/gpu/round34_tma.py: one tile per head dim won at every length measured (2k-16k).
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
# The interpreter runs tile by tile in numpy: small tiles keep it quick and exercise the
# multi-tile paths at small T.
INTERPRETER_CONFIG = KernelConfig(TileConfig(32, 16, 4, 1), TileConfig(16, 32, 4, 1), TileConfig(32, 16, 4, 1))
# fp32 inputs (the exact path: ieee dots, c_i - c_j per element) on the GPU: the bf16 tables' tiles
# at four bytes an element overflow shared memory at head dim 128 (found on the H200).
FP32_CONFIG = KernelConfig(TileConfig(32, 32, 4, 2), TileConfig(32, 32, 4, 2), TileConfig(32, 32, 4, 2))


def default_config(head_dim: int, seq_len: int, tma: bool = True, dtype: torch.dtype = torch.bfloat16) -> KernelConfig:
    """The measured tiles for this head dim and length, for TMA or pointer loads."""
    if INTERPRET:
        return INTERPRETER_CONFIG
    if dtype == torch.float32:
        return FP32_CONFIG
    for longest, cfg in (H200_CONFIGS if tma else POINTER_CONFIGS)[64 if head_dim <= 64 else 128]:
        if seq_len <= longest:
            return cfg
    return cfg


@functools.lru_cache(maxsize=None)
def _sm90(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device)[0] >= 9


def _row_stride(x: torch.Tensor) -> int:
    """The stride of the (B * T, H * D) view's rows (a length-1 T takes B's)."""
    return x.stride(1) if x.shape[1] > 1 else x.stride(0)


def _tma_layout_ok(x: torch.Tensor) -> bool:
    """x (B, T, H, D) is a (B * T, H * D) matrix with 16-byte aligned rows, as a TMA descriptor
    needs: fp16/bf16, D in 16..128, d contiguous, heads side by side, sequences back to back."""
    B, T, H, D = x.shape
    rs = _row_stride(x)
    return (x.dtype in (torch.float16, torch.bfloat16) and D in (16, 32, 64, 128) and x.stride(3) == 1
            and (H == 1 or x.stride(2) == D) and (B == 1 or x.stride(0) == T * rs)
            and (rs * x.element_size()) % 16 == 0 and x.data_ptr() % 16 == 0)


def use_tma(*tensors: torch.Tensor) -> bool:
    """Whether a launch on these (B, T, H, D) tensors reads them through TMA descriptors."""
    if TMA_LOADS is False or TensorDescriptor is None:
        return False
    if TMA_LOADS is None and not (tensors[0].is_cuda and not INTERPRET and _sm90(tensors[0].device)):
        return False
    return all(_tma_layout_ok(t) for t in tensors)


@functools.lru_cache(maxsize=None)
def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def _bind_context(device: torch.device) -> None:
    """Make the device's primary CUDA context current on this thread. Triton builds host-side TMA
    descriptors with the driver API, which fails ("invalid device context") on a thread where no
    context is current yet: the autograd engine's worker thread, when our backward is the first
    CUDA work it runs (pytorch/pytorch#124565; found on the H200 with an eager backward)."""
    cuda = _libcuda()
    ctx = ctypes.c_void_p()
    if cuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and ctx.value:
        return
    dev = ctypes.c_int()
    for call in (lambda: cuda.cuDeviceGet(ctypes.byref(dev), device.index),
                 lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                 lambda: cuda.cuCtxSetCurrent(ctx)):
        if call() != 0:
            raise RuntimeError(f"could not make the CUDA context of {device} current for the TMA descriptors")


def _tma_launch(*tensors: torch.Tensor) -> bool:
    """use_tma for a launch about to happen: on CUDA it also makes the context current, which
    building the launch's descriptors needs."""
    tma = use_tma(*tensors)
    if tma and tensors[0].is_cuda:
        _bind_context(tensors[0].device)
    return tma


def _tma(x: torch.Tensor, rows: int):
    """A descriptor of x's (B * T, H * D) view, read in tiles of (rows, D) (triton_common.load_tile)."""
    B, T, H, D = x.shape
    return TensorDescriptor(x, [B * T, H * D], [_row_stride(x), 1], [rows, D])


def _operands(tma: bool, *tiled: tuple[torch.Tensor, int]) -> tuple:
    """Each (tensor, tile rows) as a kernel reads it: a descriptor (_tma) on the TMA path, else the
    tensor itself."""
    return tuple(_tma(x, rows) if tma else x for x, rows in tiled)


def _scan(x: torch.Tensor, out: torch.Tensor, reverse: bool) -> torch.Tensor:
    """out (B * H, T) fp32 = (reverse) cumsum over T of x, a (B, T, H) tensor of any strides
    (kernels/triton_scan.py); out may be x's own memory."""
    B, T, H = x.shape
    scan_kernel[(B * H,)](x, out, *x.stride(), T, H, REVERSE=reverse,
                          BLOCK_T=min(1024, max(16, triton.next_power_of_2(T))), num_warps=4)
    return out


def gate_cumsum(log_f: torch.Tensor) -> torch.Tensor:
    """c = cumsum(log f) over T in fp32: (B, T, H) in, (B * H, T) contiguous out."""
    B, T, H = log_f.shape
    return _scan(log_f, _new(log_f, (B * H, T), torch.float32), reverse=False)


def _strides4(t: torch.Tensor) -> tuple[int, int, int, int]:
    return tuple(t.stride())  # (b, t, h, d)


def _launch_params(q: torch.Tensor):
    D = q.shape[-1]
    block_d = max(16, triton.next_power_of_2(D))
    interpret = INTERPRET or not q.is_cuda
    # The interpreter's bf16/fp16 dot is wrong: upcast there. fp32 inputs get exact fp32 dots.
    precision = "ieee" if (q.dtype == torch.float32 or interpret) else "tf32"
    # fp32 inputs get the decay bias as c_i - c_j per element (kernels/triton_common.py).
    return dict(D=D, BLOCK_D=block_d, UPCAST=interpret, PRECISION=precision, EXACT=q.dtype == torch.float32)


def _forward(q, k, v, c, sm_scale, cfg: KernelConfig, starts: torch.Tensor | None = None):
    """c: gate_cumsum(log f), or None without a gate; starts: each query tile's first key under
    pruning (_prune_forward), or None. -> o, lse (B * H, T) fp32 in log2 units."""
    B, T, H, D = q.shape
    o = _new(q)
    lse = _new(q, (B * H, T), torch.float32)
    has_gate = c is not None
    tma = _tma_launch(q, k, v)
    m, n = cfg.fwd.block_m, cfg.fwd.block_n
    fwd_kernel[(triton.cdiv(T, m), B * H)](
        *_operands(tma, (q, m), (k, n), (v, n)), c if has_gate else lse, o, lse, lse if starts is None else starts,
        *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(o),
        T, H, sm_scale, HAS_GATE=has_gate, BLOCK_M=m, BLOCK_N=n,
        num_warps=cfg.fwd.num_warps, num_stages=cfg.fwd.num_stages, AHEAD=cfg.fwd_ahead, PRUNE=starts is not None,
        TMA=tma, **_launch_params(q),
    )
    return o, lse


_ROWS_PER_PROGRAM = 256  # rows of q and k per program of norm_max_kernel (scripts/gpu/round20_rows.py)


def _tile_bounds(c, delta, starts_tile=None, stops_tile=None, maxima=None, sm_scale=0.0, log_eps=0.0):
    """Pruning bounds (kernels/triton_pruning.py): starts (B * H, cdiv(T, m)) for the (m, n) tiles
    ``starts_tile``, stops (B * H, cdiv(T, n)) for ``stops_tile``, each None where not asked for.
    With ``maxima`` (the forward) delta is computed from them into ``delta`` first; else read."""
    BH, T = c.shape
    sm, sn = starts_tile or (16, 16)
    pm, pn = stops_tile or (16, 16)
    starts = torch.empty(BH, triton.cdiv(T, sm), device=c.device, dtype=torch.int32) if starts_tile else None
    stops = torch.empty(BH, triton.cdiv(T, pn), device=c.device, dtype=torch.int32) if stops_tile else None
    tile_bounds_kernel[(BH,)](
        c, maxima if maxima is not None else delta, delta, starts if starts is not None else delta,
        stops if stops is not None else delta, T, T.bit_length(), abs(sm_scale), log_eps - math.log(T),
        COMPUTE_DELTA=maxima is not None, START_M=sm, START_N=sn, STOP_M=pm, STOP_N=pn,
        DO_STARTS=starts_tile is not None, DO_STOPS=stops_tile is not None, TILES=128, num_warps=4,
    )
    return starts, stops


def _prune_forward(q, k, c, sm_scale, log_eps: float, cfg: KernelConfig):
    """-> delta (B * H,) fp32 (kernels/pruning.py's threshold) and the forward's key starts."""
    B, T, H, D = q.shape
    maxima = torch.zeros(B * H, 2, device=q.device, dtype=torch.float32)
    norm_max_kernel[(B * H, triton.cdiv(T, _ROWS_PER_PROGRAM))](
        q, k, maxima, *_strides4(q), *_strides4(k), T, H, D=D, BLOCK_D=max(16, triton.next_power_of_2(D)),
        BLOCK_T=64, ROWS=_ROWS_PER_PROGRAM, num_warps=4,
    )
    delta = torch.empty(B * H, device=q.device, dtype=torch.float32)
    starts, _ = _tile_bounds(c, delta, (cfg.fwd.block_m, cfg.fwd.block_n), None, maxima, sm_scale, log_eps)
    return delta, starts


def _forward_gated(q, k, v, log_f, sm_scale, cfg: KernelConfig, log_eps: float | None = None):
    """The gate's cumsum, then the forward: -> o, lse, c (None without a gate), the pruning
    threshold delta (B * H,) (None without pruning)."""
    c = None if log_f is None else gate_cumsum(log_f)
    # Pruning needs a gate to decay by; without one (or without a tolerance) nothing is skipped.
    delta, starts = _prune_forward(q, k, c, sm_scale, log_eps, cfg) if (c is not None and log_eps is not None) else (None, None)
    return (*_forward(q, k, v, c, sm_scale, cfg, starts), c, delta)


def _launch_dq(q, k, v, c, o, do, lse, delta, dq, dc, starts, sm_scale, cfg: KernelConfig, tma: bool,
               prune: bool) -> None:
    """dq_kernel: dQ into dq, delta = rowsum(O dO) into delta, and with a gate (c not None) rowsum(dS)
    into dc. starts: the pruning bounds where ``prune``, else any fp32 tensor (never read)."""
    B, T, H, D = q.shape
    m, n = cfg.dq.block_m, cfg.dq.block_n
    dq_kernel[(triton.cdiv(T, m), B * H)](
        *_operands(tma, (q, m), (k, n), (v, n)), lse if c is None else c, *_operands(tma, (o, m), (do, m)), lse,
        delta, dq, lse if c is None else dc, starts,
        *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(o), *_strides4(do), *_strides4(dq),
        T, H, sm_scale, HAS_GATE=c is not None, BLOCK_M=m, BLOCK_N=n,
        num_warps=cfg.dq.num_warps, num_stages=cfg.dq.num_stages, PRUNE=prune, TMA=tma, **_launch_params(q),
    )


def _launch_dkdv(q, k, v, c, do, lse, delta, dk, dv, dc, stops, sm_scale, cfg: KernelConfig, tma: bool,
                 prune: bool) -> None:
    """dkdv_kernel: dK, dV into dk, dv, and with a gate (c not None) colsum(dS) subtracted from dc."""
    B, T, H, D = q.shape
    m, n = cfg.dkdv.block_m, cfg.dkdv.block_n
    dkdv_kernel[(triton.cdiv(T, n), B * H)](
        *_operands(tma, (q, m), (k, n), (v, n)), lse if c is None else c, *_operands(tma, (do, m)), lse, delta,
        dk, dv, lse if c is None else dc, stops,
        *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(do), *_strides4(dk), *_strides4(dv),
        T, H, sm_scale, HAS_GATE=c is not None, BLOCK_M=m, BLOCK_N=n,
        num_warps=cfg.dkdv.num_warps, num_stages=cfg.dkdv.num_stages, PRUNE=prune, TMA=tma, **_launch_params(q),
    )


def _backward(do, q, k, v, c, o, lse, sm_scale, cfg: KernelConfig, prune: torch.Tensor | None = None):
    """-> dq, dk, dv, and d log f (B, T, H) over (B, H, T) memory (None without a gate). prune: the
    forward's pruning threshold, or None."""
    B, T, H, D = q.shape
    has_gate = c is not None
    prune = prune if has_gate else None
    delta = _new(lse)
    dc = _new(lse) if has_gate else None
    dq, dk, dv = _new(q), _new(k), _new(v)
    starts = stops = lse
    if prune is not None:
        starts, stops = _tile_bounds(c, prune, (cfg.dq.block_m, cfg.dq.block_n), (cfg.dkdv.block_m, cfg.dkdv.block_n))
    tma = _tma_launch(q, k, v, o, do)
    _launch_dq(q, k, v, c, o, do, lse, delta, dq, dc, starts, sm_scale, cfg, tma, prune is not None)
    _launch_dkdv(q, k, v, c, do, lse, delta, dk, dv, dc, stops, sm_scale, cfg, tma, prune is not None)
    if not has_gate:
        return dq, dk, dv, None
    # dC now holds rowsum(dS) - colsum(dS) = dL/dc; dL/d log f_t = sum over u >= t of dL/dc_u.
    dc_bth = dc.view(B, H, T).transpose(1, 2)
    return dq, dk, dv, _scan(dc_bth, dc, reverse=True).view(B, H, T).transpose(1, 2)


# The kernels are torch.library custom ops, so torch.compile sees one opaque node with known
# output shapes instead of breaking its graph around Python launch code (two breaks per layer
# with torch.compiler.disable): what surrounds the attention (norms, gates, shifts) fuses across.
def _config_ints(cfg: KernelConfig) -> list[int]:
    return [*dataclasses.astuple(cfg.fwd), *dataclasses.astuple(cfg.dkdv), *dataclasses.astuple(cfg.dq),
            int(cfg.fwd_ahead)]


def _config_from(ints: list[int]) -> KernelConfig:
    return KernelConfig(TileConfig(*ints[0:4]), TileConfig(*ints[4:8]), TileConfig(*ints[8:12]), bool(ints[12]))


def _resolve_config(config: KernelConfig | list[int] | None, q, k, v) -> KernelConfig:
    """The given config, or the table's for these inputs and the load path they get (the forward
    and the backward of one call resolve the same: same q, k, v)."""
    if isinstance(config, list):
        config = _config_from(config) if config else None
    return config or default_config(q.shape[-1], q.shape[1], use_tma(q, k, v), q.dtype)


@torch.library.custom_op("fox_workbench::forgetting_attention_fwd", mutates_args=())
def _fwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_f: torch.Tensor | None, sm_scale: float,
            config: list[int], log_eps: float | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> o (B, T, H, D), lse (B * H, T) fp32, c = cumsum(log f) (B * H, T) fp32 (empty without a
    gate), the pruning threshold (B * H,) fp32 (empty without pruning)."""
    o, lse, c, prune = _forward_gated(q, k, v, log_f, sm_scale, _resolve_config(config, q, k, v), log_eps)
    empty = q.new_empty(0, dtype=torch.float32)
    return o, lse, (empty if c is None else c), (empty.clone() if prune is None else prune)


@_fwd_op.register_fake
def _(q, k, v, log_f, sm_scale, config, log_eps=None):
    B, T, H, _ = q.shape
    pruned = log_f is not None and log_eps is not None
    return (q.new_empty(q.shape), q.new_empty(B * H, T, dtype=torch.float32),
            q.new_empty((0,) if log_f is None else (B * H, T), dtype=torch.float32),
            q.new_empty((B * H,) if pruned else (0,), dtype=torch.float32))


@torch.library.custom_op("fox_workbench::forgetting_attention_bwd", mutates_args=())
def _bwd_op(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, c: torch.Tensor, o: torch.Tensor,
            lse: torch.Tensor, prune: torch.Tensor, sm_scale: float, config: list[int]
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> dq, dk, dv (B, T, H, D), d log f (B, T, H) over (B, H, T) memory (empty without a gate)."""
    gated = c.numel() > 0
    dq, dk, dv, dlog_f = _backward(do, q, k, v, c if gated else None, o, lse, sm_scale, _resolve_config(config, q, k, v),
                                   prune if prune.numel() > 0 else None)
    return dq, dk, dv, (dlog_f if gated else q.new_empty(0, dtype=torch.float32))


@_bwd_op.register_fake
def _(do, q, k, v, c, o, lse, prune, sm_scale, config):
    B, T, H, _ = q.shape
    dlog_f = (q.new_empty(0, dtype=torch.float32) if c.numel() == 0
              else torch.empty_strided((B, T, H), (H * T, 1, T), dtype=torch.float32, device=q.device))
    return q.new_empty(q.shape), q.new_empty(q.shape), q.new_empty(q.shape), dlog_f


def _setup_context(ctx, inputs, output):
    q, k, v, log_f, sm_scale, config, _log_eps = inputs
    o, lse, c, prune = output
    ctx.save_for_backward(q, k, v, c, o, lse, prune)
    ctx.sm_scale, ctx.config, ctx.gated = sm_scale, config, log_f is not None
    ctx.mark_non_differentiable(lse, c, prune)


def _backward_op(ctx, do, _dlse, _dc, _dprune):
    q, k, v, c, o, lse, prune = ctx.saved_tensors
    dq, dk, dv, dlog_f = _bwd_op(do, q, k, v, c, o, lse, prune, ctx.sm_scale, ctx.config)
    return dq, dk, dv, (dlog_f if ctx.gated else None), None, None, None


_fwd_op.register_autograd(_backward_op, setup_context=_setup_context)


def forgetting_attention_triton(q, k, v, log_f, *, scale: float | None = None, config: KernelConfig | None = None,
                                log_pruning_tolerance: float | None = None):
    """See kernels.forgetting_attention. q, k, v: (B, T, H, D); log_f: (B, T, H) fp32 or None."""
    pruning.check_tolerance(log_pruning_tolerance)
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"q, k, v must be fp16, bf16 or fp32, got {q.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] > 256:
        raise ValueError(f"head dim {q.shape[-1]} > 256 is not supported by the Triton kernel")
    if not q.is_cuda and not INTERPRET:
        raise RuntimeError("the Triton kernel needs CUDA tensors, or TRITON_INTERPRET=1 set before import for CPU")
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if torch.compiler.is_compiling():
        # No config: the op picks its tiles when it runs (_resolve_config). Choosing the load path
        # reads data pointers, which tracing cannot; a graph break here split each block's graph.
        return _fwd_op(q, k, v, log_f, sm_scale, _config_ints(config) if config else [], log_pruning_tolerance)[0]
    return _EagerAttention.apply(q, k, v, log_f, sm_scale, _resolve_config(config, q, k, v), log_pruning_tolerance)


class _EagerAttention(torch.autograd.Function):
    """The same kernels outside torch.compile without the custom ops' dispatch: a custom op with
    its autograd registration costs about 3x an autograd.Function on the host (measured: 100 vs 33
    us per forward+backward), which showed at 2k tokens, where the GPU work is about 1 ms."""

    @staticmethod
    def forward(ctx, q, k, v, log_f, sm_scale, cfg, log_eps):
        o, lse, c, prune = _forward_gated(q, k, v, log_f, sm_scale, cfg, log_eps)
        ctx.save_for_backward(q, k, v, c, o, lse, prune)
        ctx.sm_scale, ctx.cfg = sm_scale, cfg
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, c, o, lse, prune = ctx.saved_tensors
        dq, dk, dv, dlog_f = _backward(do, q, k, v, c, o, lse, ctx.sm_scale, ctx.cfg, prune)
        return dq, dk, dv, dlog_f, None, None, None

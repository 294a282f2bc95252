"""Launching the forgetting-attention kernels: the load path, the scans, the pruning plan, and the
forward and backward launches, on tensors as they come (nothing is copied).

Forward: one scan kernel turns log f (B, T, H) into c = cumsum(log f) (B * H, T) fp32 (the (T, T)
decay matrix is never formed), then the attention kernel. Backward: dq_kernel, dkdv_kernel (on
Hopper its Gluon twin, gluon_bwd.py, where ``GLUON_BWD`` and its table say), and the reverse scan
that turns dL/dc into dL/d log f in place.

A sliding window (``window`` W: query i sees keys i - W < j <= i) reaches the Triton kernels as
the runtime int ``W`` (one compiled kernel serves every W) beside the constexpr flag ``WINDOW``.
The Gluon kernels have no window: a call with one runs the Triton kernels (use_gluon).

On sm_90+ GPUs the kernels read q, k, v, O and dO through TMA tensor descriptors (``use_tma``)
when the tensors' layout allows one (fp16/bf16, head dim 16-128, each (B, T) row's heads side by
side: a (B * T, H * D) view with 16-byte aligned rows, as (B, T, H, D) contiguous tensors and
column slices of a (B, T, X) projection are); else, and under the interpreter unless ``TMA_LOADS``
says so, through tiles of pointers. Each path has its own tile table (configs.py).
"""
from __future__ import annotations

import functools
import math

import torch
import triton

from foxwb.kernels import runtime
from foxwb.kernels.attention.configs import GLUON_BWD_TILES, KernelConfig, gluon_choice
from foxwb.kernels.attention.triton_bwd import dkdv_kernel, dq_kernel
from foxwb.kernels.attention.triton_fwd import fwd_kernel
from foxwb.kernels.attention.triton_pruning import norm_max_kernel, tile_bounds_kernel
from foxwb.kernels.attention.triton_scan import scan_kernel

# Tile loads through TMA descriptors: None = on CUDA devices of compute capability 9.0+ whenever
# the layout allows (use_tma); True = wherever the layout allows, the interpreter included (the
# tests run both paths on CPU); False = never.
TMA_LOADS: bool | None = None
# The forward through the warp-specialised Gluon kernel (gluon_fwd.py) where the TMA path applies
# to bf16/fp16 inputs on a GPU and Triton has Gluon: None = on sm_90 (Hopper) where its table
# (configs.GLUON_FWD_TILES) found it faster; True = wherever it can run; False = never.
GLUON_FWD: bool | None = None
# The dK/dV kernel of the backward through the Gluon kernel (gluon_bwd.py), on the same terms with
# its own table (configs.GLUON_BWD_TILES).
GLUON_BWD: bool | None = None


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
    if TMA_LOADS is False or runtime.TensorDescriptor is None:
        return False
    if TMA_LOADS is None and not (tensors[0].is_cuda and not runtime.INTERPRET and runtime.sm90(tensors[0].device)):
        return False
    return all(_tma_layout_ok(t) for t in tensors)


@functools.lru_cache(maxsize=None)
def _gluon_importable() -> bool:
    try:
        # Late: Gluon is experimental; this Triton may lack it.
        from foxwb.kernels.attention import gluon_bwd, gluon_fwd  # noqa: F401
    except Exception:  # noqa: BLE001  any failure to build the module means: not this Triton
        return False
    return True


def use_gluon(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *more: torch.Tensor, backward: bool = False,
              window: int | None = None) -> bool:
    """Whether the forward on these (B, T, H, D) tensors runs the Gluon kernel (GLUON_FWD), or with
    ``backward`` the dK/dV kernel does (GLUON_BWD; ``more``: o and dO, also read through TMA).
    Never with a sliding ``window``: the Gluon kernels have none, the Triton kernels do."""
    setting, table = (GLUON_BWD, GLUON_BWD_TILES) if backward else (GLUON_FWD, None)
    if window is not None:
        return False
    if setting is False or runtime.INTERPRET or not q.is_cuda or q.dtype == torch.float32:
        return False
    if not use_tma(q, k, v, *more):
        return False
    if setting is None and not (torch.cuda.get_device_capability(q.device) == (9, 0)
                                and gluon_choice(q.shape[-1], q.shape[1], table)[1]):
        return False
    return _gluon_importable()


def fwd_tiles(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cfg: KernelConfig) -> tuple[int, int]:
    """(block_m, block_n) of the forward that runs on these inputs: the pruning plan's tiles."""
    if use_gluon(q, k, v):
        t, _ = gluon_choice(q.shape[-1], q.shape[1])
        return t.block_m, t.block_n
    return cfg.fwd.block_m, cfg.fwd.block_n


def _tma_launch(*tensors: torch.Tensor) -> bool:
    """use_tma for a launch about to happen: on CUDA it also makes the context current, which
    building the launch's descriptors needs."""
    tma = use_tma(*tensors)
    if tma and tensors[0].is_cuda:
        runtime.bind_context(tensors[0].device)
    return tma


def _tma(x: torch.Tensor, rows: int):
    """A descriptor of x's (B * T, H * D) view, read in tiles of (rows, D) (triton_tiles.load_tile)."""
    B, T, H, D = x.shape
    return runtime.TensorDescriptor(x, [B * T, H * D], [_row_stride(x), 1], [rows, D])


def _operands(tma: bool, *tiled: tuple[torch.Tensor, int]) -> tuple:
    """Each (tensor, tile rows) as a kernel reads it: a descriptor (_tma) on the TMA path, else the
    tensor itself."""
    return tuple(_tma(x, rows) if tma else x for x, rows in tiled)


def scan(x: torch.Tensor, out: torch.Tensor, reverse: bool) -> torch.Tensor:
    """out (B * H, T) fp32 = (reverse) cumsum over T of x, a (B, T, H) tensor of any strides
    (triton_scan.py); out may be x's own memory."""
    B, T, H = x.shape
    scan_kernel[(B * H,)](x, out, *x.stride(), T, H, REVERSE=reverse,
                          BLOCK_T=min(1024, max(16, triton.next_power_of_2(T))), num_warps=4)
    return out


def gate_cumsum(log_f: torch.Tensor) -> torch.Tensor:
    """c = cumsum(log f) over T in fp32: (B, T, H) in, (B * H, T) contiguous out."""
    B, T, H = log_f.shape
    return scan(log_f, runtime.empty(log_f, (B * H, T), torch.float32), reverse=False)


def _strides4(t: torch.Tensor) -> tuple[int, int, int, int]:
    return tuple(t.stride())  # (b, t, h, d)


def _launch_params(q: torch.Tensor):
    D = q.shape[-1]
    block_d = max(16, triton.next_power_of_2(D))
    interpret = runtime.INTERPRET or not q.is_cuda
    # The interpreter's bf16/fp16 dot is wrong: upcast there. fp32 inputs get exact fp32 dots.
    precision = "ieee" if (q.dtype == torch.float32 or interpret) else "tf32"
    # fp32 inputs get the decay bias as c_i - c_j per element (triton_tiles.py).
    return dict(D=D, BLOCK_D=block_d, UPCAST=interpret, PRECISION=precision, EXACT=q.dtype == torch.float32)


def forward(q, k, v, c, sm_scale, cfg: KernelConfig, starts: torch.Tensor | None = None, window: int | None = None):
    """c: gate_cumsum(log f), or None without a gate; starts: each query tile's first key under
    pruning (prune_forward), or None; window: W keys per query, or None. -> o, lse (B * H, T) fp32
    in log2 units."""
    B, T, H, D = q.shape
    o = runtime.empty(q)
    lse = runtime.empty(q, (B * H, T), torch.float32)
    has_gate = c is not None
    if use_gluon(q, k, v, window=window):
        _forward_gluon(q, k, v, c, o, lse, sm_scale, starts)
        return o, lse
    tma = _tma_launch(q, k, v)
    m, n = cfg.fwd.block_m, cfg.fwd.block_n
    fwd_kernel[(triton.cdiv(T, m), B * H)](
        *_operands(tma, (q, m), (k, n), (v, n)), c if has_gate else lse, o, lse, lse if starts is None else starts,
        *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(o),
        T, H, sm_scale, window or 0, HAS_GATE=has_gate, BLOCK_M=m, BLOCK_N=n,
        num_warps=cfg.fwd.num_warps, num_stages=cfg.fwd.num_stages, AHEAD=cfg.fwd_ahead, PRUNE=starts is not None,
        TMA=tma, WINDOW=window is not None, **_launch_params(q),
    )
    return o, lse


def _forward_gluon(q, k, v, c, o, lse, sm_scale, starts) -> None:
    """forward() through gluon_fwd.gluon_fwd_kernel: q, k, v as Gluon TMA descriptors of their
    (B * T, H * D) views."""
    # Late: Gluon is experimental and imported only where use_gluon found it and chose it.
    from foxwb.kernels.attention.gluon_fwd import gluon_fwd_kernel

    B, T, H, D = q.shape
    t, _ = gluon_choice(D, T)
    runtime.bind_context(q.device)
    gluon_fwd_kernel[(triton.cdiv(T, t.block_m), B * H)](
        _gluon_desc(q, t.block_m), _gluon_desc(k, t.block_n), _gluon_desc(v, t.block_n), lse if c is None else c,
        o, lse, lse if starts is None else starts, *_strides4(o), T, H, sm_scale,
        HAS_GATE=c is not None, PRUNE=starts is not None, AHEAD=t.ahead, STAGES=t.stages, num_warps=t.num_warps,
        **({"maxnreg": t.maxnreg} if t.maxnreg else {}),
    )


@functools.lru_cache(maxsize=None)
def _gluon_layout(rows: int, D: int, dtype: torch.dtype):
    """The shared-memory layout of a (rows, D) tile of fp16/bf16, as Gluon's default picks it: the
    same for every call of one shape, built once (docs/kernels.md, "Forgetting attention beside its peers")."""
    # Late: Gluon is experimental and imported only where use_gluon found it and chose it.
    from triton.experimental.gluon import language as gl

    return gl.NVMMASharedLayout.get_default_for([rows, D], gl.bfloat16 if dtype == torch.bfloat16 else gl.float16)


def _gluon_desc(x: torch.Tensor, rows: int):
    """A Gluon TMA descriptor of x's (B * T, H * D) view, read in tiles of (rows, D).

    Built without the descriptor class's own checks (its __post_init__, run for each of the seven
    descriptors of a forward+backward; docs/kernels.md, "Forgetting attention beside its peers"):
    use_tma checked the layout already (fp16/bf16, 16-byte aligned base and rows, d contiguous), and
    the tiles come from the Gluon tables. An empty tensor gets the checked constructor, which
    refuses it."""
    # Late: Gluon is experimental and imported only where use_gluon found it and chose it.
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    B, T, H, D = x.shape
    fields = dict(base=x, shape=[B * T, H * D], strides=[_row_stride(x), 1], block_shape=[rows, D],
                  layout=_gluon_layout(rows, D, x.dtype), padding="zero")
    if B * T * H * D == 0:
        return TensorDescriptor(**fields)
    desc = TensorDescriptor.__new__(TensorDescriptor)
    desc.__dict__.update(fields)
    return desc


_ROWS_PER_PROGRAM = 256  # rows of q and k per program of norm_max_kernel (docs/kernels.md, "Pruning")


def tile_bounds(c, delta, starts_tile=None, stops_tile=None, maxima=None, sm_scale=0.0, log_eps=0.0):
    """Pruning bounds (triton_pruning.py): starts (B * H, cdiv(T, m)) for the (m, n) tiles
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


def prune_forward(q, k, v, c, sm_scale, log_eps: float, cfg: KernelConfig):
    """-> delta (B * H,) fp32 (pruning.py's threshold) and the forward's key starts."""
    B, T, H, D = q.shape
    maxima = torch.zeros(B * H, 2, device=q.device, dtype=torch.float32)
    norm_max_kernel[(B * H, triton.cdiv(T, _ROWS_PER_PROGRAM))](
        q, k, maxima, *_strides4(q), *_strides4(k), T, H, D=D, BLOCK_D=max(16, triton.next_power_of_2(D)),
        BLOCK_T=64, ROWS=_ROWS_PER_PROGRAM, num_warps=4,
    )
    delta = torch.empty(B * H, device=q.device, dtype=torch.float32)
    starts, _ = tile_bounds(c, delta, fwd_tiles(q, k, v, cfg), None, maxima, sm_scale, log_eps)
    return delta, starts


def forward_gated(q, k, v, log_f, sm_scale, cfg: KernelConfig, log_eps: float | None = None,
                  window: int | None = None):
    """The gate's cumsum, then the forward: -> o, lse, c (None without a gate), the pruning
    threshold delta (B * H,) (None without pruning). window: W keys per query, or None; not
    together with pruning (the entry point refuses the pair)."""
    if window is not None and log_eps is not None:
        raise ValueError("window and log_pruning_tolerance cannot be combined: set one of them")
    c = None if log_f is None else gate_cumsum(log_f)
    # Pruning needs a gate to decay by; without one (or without a tolerance) nothing is skipped.
    delta, starts = prune_forward(q, k, v, c, sm_scale, log_eps, cfg) if (c is not None and log_eps is not None) else (None, None)
    return (*forward(q, k, v, c, sm_scale, cfg, starts, window), c, delta)


def launch_dq(q, k, v, c, o, do, lse, delta, dq, dc, starts, sm_scale, cfg: KernelConfig, tma: bool,
               prune: bool, window: int | None = None) -> None:
    """dq_kernel: dQ into dq, delta = rowsum(O dO) into delta, and with a gate (c not None) rowsum(dS)
    into dc. starts: the pruning bounds where ``prune``, else any fp32 tensor (never read);
    window: W keys per query, or None."""
    B, T, H, D = q.shape
    m, n = cfg.dq.block_m, cfg.dq.block_n
    dq_kernel[(triton.cdiv(T, m), B * H)](
        *_operands(tma, (q, m), (k, n), (v, n)), lse if c is None else c, *_operands(tma, (o, m), (do, m)), lse,
        delta, dq, lse if c is None else dc, starts,
        *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(o), *_strides4(do), *_strides4(dq),
        T, H, sm_scale, window or 0, HAS_GATE=c is not None, BLOCK_M=m, BLOCK_N=n,
        num_warps=cfg.dq.num_warps, num_stages=cfg.dq.num_stages, PRUNE=prune, TMA=tma, WINDOW=window is not None,
        **_launch_params(q),
    )


def launch_dkdv(q, k, v, c, do, lse, delta, dk, dv, dc, stops, sm_scale, cfg: KernelConfig, tma: bool,
                 prune: bool, window: int | None = None) -> None:
    """dkdv_kernel: dK, dV into dk, dv, and with a gate (c not None) colsum(dS) subtracted from dc;
    window: W keys per query, or None."""
    B, T, H, D = q.shape
    m, n = cfg.dkdv.block_m, cfg.dkdv.block_n
    dkdv_kernel[(triton.cdiv(T, n), B * H)](
        *_operands(tma, (q, m), (k, n), (v, n)), lse if c is None else c, *_operands(tma, (do, m)), lse, delta,
        dk, dv, lse if c is None else dc, stops,
        *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(do), *_strides4(dk), *_strides4(dv),
        T, H, sm_scale, window or 0, HAS_GATE=c is not None, BLOCK_M=m, BLOCK_N=n,
        num_warps=cfg.dkdv.num_warps, num_stages=cfg.dkdv.num_stages, PRUNE=prune, TMA=tma, WINDOW=window is not None,
        **_launch_params(q),
    )


def launch_dkdv_gluon(q, k, v, c, do, lse, delta, dk, dv, dc, stops, sm_scale, prune: bool) -> None:
    """launch_dkdv through gluon_bwd.gluon_dkdv_kernel (its tiles: dkdv_tiles); stops computed for them."""
    # Late: Gluon is experimental and imported only where use_gluon found it and chose it.
    from foxwb.kernels.attention.gluon_bwd import gluon_dkdv_kernel

    B, T, H, D = q.shape
    t, _ = gluon_choice(D, T, GLUON_BWD_TILES)
    runtime.bind_context(q.device)
    gluon_dkdv_kernel[(triton.cdiv(T, t.block_n), B * H)](
        _gluon_desc(q, t.block_m), _gluon_desc(k, t.block_n), _gluon_desc(v, t.block_n), _gluon_desc(do, t.block_m),
        lse if c is None else c, lse, delta, dk, dv, lse if c is None else dc, stops, *_strides4(dk), *_strides4(dv),
        T, H, sm_scale, HAS_GATE=c is not None, PRUNE=prune, AHEAD=t.ahead, STAGES=t.stages, num_warps=t.num_warps,
        **({"maxnreg": t.maxnreg} if t.maxnreg else {}),
    )


def dkdv_tiles(q: torch.Tensor, cfg: KernelConfig, gluon: bool) -> tuple[int, int]:
    """(block_m, block_n) of the dK/dV kernel that runs on these inputs (``gluon``: use_gluon's word
    for the backward): its pruning bounds' tiles."""
    if gluon:
        t, _ = gluon_choice(q.shape[-1], q.shape[1], GLUON_BWD_TILES)
        return t.block_m, t.block_n
    return cfg.dkdv.block_m, cfg.dkdv.block_n


def backward(do, q, k, v, c, o, lse, sm_scale, cfg: KernelConfig, prune: torch.Tensor | None = None,
             window: int | None = None):
    """-> dq, dk, dv, and d log f (B, T, H) over (B, H, T) memory (None without a gate). prune: the
    forward's pruning threshold, or None; window: the forward's, or None."""
    B, T, H, D = q.shape
    has_gate = c is not None
    prune = prune if has_gate else None
    delta = runtime.empty(lse)
    dc = runtime.empty(lse) if has_gate else None
    dq, dk, dv = runtime.empty(q), runtime.empty(k), runtime.empty(v)
    gluon = use_gluon(q, k, v, o, do, backward=True, window=window)
    starts = stops = lse
    if prune is not None:
        starts, stops = tile_bounds(c, prune, (cfg.dq.block_m, cfg.dq.block_n), dkdv_tiles(q, cfg, gluon))
    tma = _tma_launch(q, k, v, o, do)
    launch_dq(q, k, v, c, o, do, lse, delta, dq, dc, starts, sm_scale, cfg, tma, prune is not None, window)
    if gluon:
        launch_dkdv_gluon(q, k, v, c, do, lse, delta, dk, dv, dc, stops, sm_scale, prune is not None)
    else:
        launch_dkdv(q, k, v, c, do, lse, delta, dk, dv, dc, stops, sm_scale, cfg, tma, prune is not None, window)
    if not has_gate:
        return dq, dk, dv, None
    # dC now holds rowsum(dS) - colsum(dS) = dL/dc; dL/d log f_t = sum over u >= t of dL/dc_u.
    dc_bth = dc.view(B, H, T).transpose(1, 2)
    return dq, dk, dv, scan(dc_bth, dc, reverse=True).view(B, H, T).transpose(1, 2)

"""Forgetting attention on Triton: launch configuration and the autograd Function.

The host computes c = cumsum(log f) in fp32 (a (B, T, H) vector; the (T, T) decay matrix is never
formed), launches the forward, and in the backward turns dL/dc into dL/d log f with a reverse
cumsum. q, k, v keep the strides they come with; nothing is copied.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import triton

from kernels.triton_bwd import delta_kernel, dkdv_kernel, dq_kernel
from kernels.triton_fwd import fwd_kernel

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# Tests set this so that every output the kernels should write starts as NaN: an element left
# unwritten then fails the comparison instead of passing on leftover memory.
POISON_OUTPUTS = False


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


# Chosen by measurement on the H200 (kernels/tune.py; kernels/BENCHMARKS.md), per head-dim bucket.
H200_CONFIGS: dict[int, KernelConfig] = {
    64: KernelConfig(TileConfig(64, 128, 4, 3), TileConfig(128, 64, 4, 2), TileConfig(64, 128, 4, 3)),
    128: KernelConfig(TileConfig(64, 64, 4, 3), TileConfig(64, 128, 8, 3), TileConfig(128, 64, 8, 3)),
}
# The interpreter runs tile by tile in numpy: small tiles keep it quick and exercise the
# multi-tile paths at small T.
INTERPRETER_CONFIG = KernelConfig(TileConfig(32, 16, 4, 1), TileConfig(16, 32, 4, 1), TileConfig(32, 16, 4, 1))


def default_config(head_dim: int) -> KernelConfig:
    if INTERPRET:
        return INTERPRETER_CONFIG
    return H200_CONFIGS[64 if head_dim <= 64 else 128]


def head_major_cumsum(log_f: torch.Tensor) -> torch.Tensor:
    """c = cumsum(log f) over T, returned as a (B, T, H) view of (B, H, T) memory. torch scans a
    non-innermost dim one step at a time (about 0.35 us a step on an H200: 6 ms at 16k tokens,
    measured); scanning the innermost dim of a head-major copy costs microseconds."""
    return log_f.transpose(1, 2).contiguous().cumsum(-1).transpose(1, 2)


def _strides4(t: torch.Tensor) -> tuple[int, int, int, int]:
    return tuple(t.stride())  # (b, t, h, d)


def _launch_params(q: torch.Tensor):
    D = q.shape[-1]
    block_d = max(16, triton.next_power_of_2(D))
    interpret = INTERPRET or not q.is_cuda
    # The interpreter's bf16/fp16 dot is wrong: upcast there. fp32 inputs get exact fp32 dots.
    precision = "ieee" if (q.dtype == torch.float32 or interpret) else "tf32"
    return dict(D=D, BLOCK_D=block_d, UPCAST=interpret, PRECISION=precision)


def _forward(q, k, v, c, sm_scale, cfg: KernelConfig):
    B, T, H, D = q.shape
    o = _new(q)
    lse = _new(q, (B * H, T), torch.float32)
    has_gate = c is not None
    c_arg = c if has_gate else lse  # any tensor: HAS_GATE=False never reads it
    c_strides = c.stride() if has_gate else (0, 0, 0)
    grid = (triton.cdiv(T, cfg.fwd.block_m), B * H)
    fwd_kernel[grid](
        q, k, v, c_arg, o, lse, *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(o), *c_strides,
        T, H, sm_scale, HAS_GATE=has_gate, BLOCK_M=cfg.fwd.block_m, BLOCK_N=cfg.fwd.block_n,
        num_warps=cfg.fwd.num_warps, num_stages=cfg.fwd.num_stages, **_launch_params(q),
    )
    return o, lse


def _backward(do, q, k, v, c, o, lse, sm_scale, cfg: KernelConfig):
    B, T, H, D = q.shape
    params = _launch_params(q)
    delta = _new(lse)
    delta_kernel[(triton.cdiv(T, 64), B * H)](
        o, do, delta, *_strides4(o), *_strides4(do), T, H,
        D=D, BLOCK_D=params["BLOCK_D"], BLOCK_M=64,
    )
    dq, dk, dv = _new(q), _new(k), _new(v)
    has_gate = c is not None
    dc_row = _new(lse) if has_gate else lse
    dc_col = _new(lse) if has_gate else lse
    c_arg = c if has_gate else lse
    c_strides = c.stride() if has_gate else (0, 0, 0)
    dkdv_kernel[(triton.cdiv(T, cfg.dkdv.block_n), B * H)](
        q, k, v, c_arg, do, lse, delta, dk, dv, dc_col,
        *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(do), *_strides4(dk), *_strides4(dv), *c_strides,
        T, H, sm_scale, HAS_GATE=has_gate, BLOCK_M=cfg.dkdv.block_m, BLOCK_N=cfg.dkdv.block_n,
        num_warps=cfg.dkdv.num_warps, num_stages=cfg.dkdv.num_stages, **params,
    )
    dq_kernel[(triton.cdiv(T, cfg.dq.block_m), B * H)](
        q, k, v, c_arg, do, lse, delta, dq, dc_row,
        *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(do), *_strides4(dq), *c_strides,
        T, H, sm_scale, HAS_GATE=has_gate, BLOCK_M=cfg.dq.block_m, BLOCK_N=cfg.dq.block_n,
        num_warps=cfg.dq.num_warps, num_stages=cfg.dq.num_stages, **params,
    )
    if not has_gate:
        return dq, dk, dv, None
    dc = (dc_row + dc_col).view(B, H, T)  # dc_col already holds -colsum(dS)
    # dL/d log f_t = sum over u >= t of dL/dc_u: a reverse cumsum, in fp32.
    dlog_f = dc.flip(-1).cumsum(-1).flip(-1).transpose(1, 2)  # (B, T, H)
    return dq, dk, dv, dlog_f


class _ForgettingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, log_f, sm_scale, cfg):
        c = None if log_f is None else head_major_cumsum(log_f)  # (B, T, H) view, fp32
        o, lse = _forward(q, k, v, c, sm_scale, cfg)
        ctx.save_for_backward(q, k, v, c, o, lse)
        ctx.sm_scale, ctx.cfg = sm_scale, cfg
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, c, o, lse = ctx.saved_tensors
        dq, dk, dv, dlog_f = _backward(do, q, k, v, c, o, lse, ctx.sm_scale, ctx.cfg)
        return dq, dk, dv, dlog_f, None, None


# torch.compile runs around the kernel, not through it: the launch code is plain Python that
# dynamo need not trace, and the kernels are already what it would generate at best.
@torch.compiler.disable
def forgetting_attention_triton(q, k, v, log_f, *, scale: float | None = None, config: KernelConfig | None = None):
    """See kernels.forgetting_attention. q, k, v: (B, T, H, D); log_f: (B, T, H) fp32 or None."""
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"q, k, v must be fp16, bf16 or fp32, got {q.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] > 256:
        raise ValueError(f"head dim {q.shape[-1]} > 256 is not supported by the Triton kernel")
    if not q.is_cuda and not INTERPRET:
        raise RuntimeError("the Triton kernel needs CUDA tensors, or TRITON_INTERPRET=1 set before import for CPU")
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    cfg = config or default_config(q.shape[-1])
    return _ForgettingAttention.apply(q, k, v, log_f, sm_scale, cfg)

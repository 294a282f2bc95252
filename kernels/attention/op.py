"""Forgetting attention as torch sees it: ``torch.library`` custom ops under torch.compile, a plain
``autograd.Function`` in eager mode, both over the launches of launch.py."""
from __future__ import annotations

import dataclasses
import math

import torch

from foxwb.kernels import runtime
from foxwb.kernels.attention import launch
from foxwb.kernels.attention.configs import KernelConfig, TileConfig, default_config
from foxwb.kernels.attention.naive import check_window
from foxwb.kernels.attention.pruning import check_tolerance


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
    return config or default_config(q.shape[-1], q.shape[1], launch.use_tma(q, k, v), q.dtype)


@torch.library.custom_op("fox_workbench::forgetting_attention_fwd", mutates_args=())
def _fwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_f: torch.Tensor | None, sm_scale: float,
            config: list[int], log_eps: float | None = None, window: int | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> o (B, T, H, D), lse (B * H, T) fp32, c = cumsum(log f) (B * H, T) fp32 (empty without a
    gate), the pruning threshold (B * H,) fp32 (empty without pruning)."""
    o, lse, c, prune = launch.forward_gated(q, k, v, log_f, sm_scale, _resolve_config(config, q, k, v), log_eps,
                                            window)
    empty = q.new_empty(0, dtype=torch.float32)
    return o, lse, (empty if c is None else c), (empty.clone() if prune is None else prune)


@_fwd_op.register_fake
def _(q, k, v, log_f, sm_scale, config, log_eps=None, window=None):
    B, T, H, _ = q.shape
    pruned = log_f is not None and log_eps is not None
    return (q.new_empty(q.shape), q.new_empty(B * H, T, dtype=torch.float32),
            q.new_empty((0,) if log_f is None else (B * H, T), dtype=torch.float32),
            q.new_empty((B * H,) if pruned else (0,), dtype=torch.float32))


@torch.library.custom_op("fox_workbench::forgetting_attention_bwd", mutates_args=())
def _bwd_op(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, c: torch.Tensor, o: torch.Tensor,
            lse: torch.Tensor, prune: torch.Tensor, sm_scale: float, config: list[int], window: int | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> dq, dk, dv (B, T, H, D), d log f (B, T, H) over (B, H, T) memory (empty without a gate)."""
    gated = c.numel() > 0
    dq, dk, dv, dlog_f = launch.backward(do, q, k, v, c if gated else None, o, lse, sm_scale, _resolve_config(config, q, k, v),
                                   prune if prune.numel() > 0 else None, window)
    return dq, dk, dv, (dlog_f if gated else q.new_empty(0, dtype=torch.float32))


@_bwd_op.register_fake
def _(do, q, k, v, c, o, lse, prune, sm_scale, config, window=None):
    B, T, H, _ = q.shape
    dlog_f = (q.new_empty(0, dtype=torch.float32) if c.numel() == 0
              else torch.empty_strided((B, T, H), (H * T, 1, T), dtype=torch.float32, device=q.device))
    return q.new_empty(q.shape), q.new_empty(q.shape), q.new_empty(q.shape), dlog_f


def _setup_context(ctx, inputs, output):
    q, k, v, log_f, sm_scale, config, _log_eps, window = inputs
    o, lse, c, prune = output
    ctx.save_for_backward(q, k, v, c, o, lse, prune)
    ctx.sm_scale, ctx.config, ctx.gated, ctx.window = sm_scale, config, log_f is not None, window
    ctx.mark_non_differentiable(lse, c, prune)


def _backward_op(ctx, do, _dlse, _dc, _dprune):
    q, k, v, c, o, lse, prune = ctx.saved_tensors
    dq, dk, dv, dlog_f = _bwd_op(do, q, k, v, c, o, lse, prune, ctx.sm_scale, ctx.config, ctx.window)
    return dq, dk, dv, (dlog_f if ctx.gated else None), None, None, None, None


_fwd_op.register_autograd(_backward_op, setup_context=_setup_context)


def forgetting_attention_triton(q, k, v, log_f, *, scale: float | None = None, config: KernelConfig | None = None,
                                log_pruning_tolerance: float | None = None, window: int | None = None):
    """See kernels.forgetting_attention. q, k, v: (B, T, H, D); log_f: (B, T, H) fp32 or None;
    window: W keys per query (i - W < j <= i), or None."""
    check_tolerance(log_pruning_tolerance)
    check_window(window, log_pruning_tolerance)
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"q, k, v must be fp16, bf16 or fp32, got {q.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] > 256:
        raise ValueError(f"head dim {q.shape[-1]} > 256 is not supported by the Triton kernel")
    runtime.check_device(q, "the Triton kernel")
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if torch.compiler.is_compiling():
        # No config: the op picks its tiles when it runs (_resolve_config). Choosing the load path
        # reads data pointers, which tracing cannot; a graph break here split each block's graph.
        return _fwd_op(q, k, v, log_f, sm_scale, _config_ints(config) if config else [], log_pruning_tolerance,
                       window)[0]
    return _EagerAttention.apply(q, k, v, log_f, sm_scale, _resolve_config(config, q, k, v), log_pruning_tolerance,
                                 window)


class _EagerAttention(torch.autograd.Function):
    """The same kernels outside torch.compile without the custom ops' dispatch: a custom op with
    its autograd registration costs about 3x an autograd.Function on the host (measured: 100 vs 33
    us per forward+backward), which showed at 2k tokens, where the GPU work is about 1 ms."""

    @staticmethod
    def forward(ctx, q, k, v, log_f, sm_scale, cfg, log_eps, window):
        o, lse, c, prune = launch.forward_gated(q, k, v, log_f, sm_scale, cfg, log_eps, window)
        ctx.save_for_backward(q, k, v, c, o, lse, prune)
        ctx.sm_scale, ctx.cfg, ctx.window = sm_scale, cfg, window
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, c, o, lse, prune = ctx.saved_tensors
        dq, dk, dv, dlog_f = launch.backward(do, q, k, v, c, o, lse, ctx.sm_scale, ctx.cfg, prune, ctx.window)
        return dq, dk, dv, dlog_f, None, None, None, None

"""KV-shift and QK-norm from the block's projection to the attention's q, k, v, in one Triton
pass forward and one backward (triton_qkv.py).

``prepare_qkv(proj, n_heads, head_dim, k_shift=..., v_shift=..., q_weight=..., k_weight=...)``
takes the projection output (B, T, P) with columns [q | k | v | k-shift logits (H, if k_shift) |
v-shift logits (H, if v_shift) | rest groups | padding] and returns q, k, v as (B, T, H, D) (and
the rest column groups, the gates' logits, as views, one per group), the same numbers
as naive.py's reference, which is the components' math (up to rounding: the
kernel stays in fp32 between the load and the store). Its backward writes the gradient of every
column of ``proj``, so the projection's backward matmuls read it as it is; torch.compile's code
for the same step wrote the gradients of q, k and v separately and reduced the norms' weight
gradients over tokens in kernels of their own, and its per-compile autotuning of the forward
changed the step time by up to 1.7 ms (docs/kernels.md).

Two custom ops (forward, backward), so a compiled step (and its CUDA graphs) keeps the kernels
whole, joined by an autograd.Function, which may return the rest columns as views (a custom op
may not). One view per group, not one for all: the gradients then come back apart, each written
by the code that computes it, and the backward copies each into its columns; with one view,
torch.compile joined the groups' gradients in a concatenating kernel (1.77 ms per step at 125M,
docs/kernels.md). naive.py is the reference twin; the model keeps the components' own code as
the CPU path, and tests check all three against each other.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
import triton

from foxwb.kernels import runtime
from foxwb.kernels.qkv_prep.triton_qkv import columns_kernel, qkv_prep_bwd_kernel, qkv_prep_fwd_kernel

# Tokens per tile, tiles per backward program, warps. H200, 125M step (B 8, T 4096, H 12, D 64):
# docs/kernels.md, "KV-shift and QK-norm".
BLOCK_T, TILES, NUM_WARPS = 16, 1, 2
BLOCK_N, BLOCK_W, COLUMNS_WARPS = 16, 256, 4  # columns_kernel: rows, columns, warps (docs/kernels.md)


def _columns(n_heads: int, head_dim: int, k_shift: bool, v_shift: bool) -> tuple[int, int, int]:
    """(column of the k-shift logits, of the v-shift logits, first column past them)."""
    col_ak = 3 * n_heads * head_dim
    col_av = col_ak + (n_heads if k_shift else 0)
    return col_ak, col_av, col_av + (n_heads if v_shift else 0)


def _norm_args(proj: torch.Tensor, q_weight: Optional[torch.Tensor], k_weight: Optional[torch.Tensor]):
    """Both kernels' (q scale, k scale, scale stride between heads) and their Q_NORM/K_NORM
    flags; without QK-norm the pointers are placeholders the kernels never read."""
    w = q_weight if q_weight is not None else k_weight  # prepare_qkv takes both or neither
    stride = 0 if w is None or w.dim() == 1 else w.stride(0)  # (D,): one scale shared by all heads
    args = (q_weight if q_weight is not None else proj, k_weight if k_weight is not None else proj, stride)
    return args, dict(Q_NORM=q_weight is not None, K_NORM=k_weight is not None)


def _meta(T: int, n_heads: int, head_dim: int) -> dict:
    return dict(H=n_heads, D=head_dim, BLOCK_D=triton.next_power_of_2(head_dim),
                BLOCK_T=min(BLOCK_T, triton.next_power_of_2(T)), num_warps=NUM_WARPS)


@torch.library.custom_op("fox_workbench::qkv_prep", mutates_args=())
def _prep_op(proj: torch.Tensor, q_weight: Optional[torch.Tensor], k_weight: Optional[torch.Tensor],
             n_heads: int, head_dim: int, k_shift: bool, v_shift: bool, eps: float
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    B, T, _ = proj.shape
    q, k, v = (runtime.empty(proj, (B, T, n_heads, head_dim)) for _ in range(3))
    col_ak, col_av, _ = _columns(n_heads, head_dim, k_shift, v_shift)
    meta = _meta(T, n_heads, head_dim)
    norm_args, norm_flags = _norm_args(proj, q_weight, k_weight)
    if B * T:
        qkv_prep_fwd_kernel[(triton.cdiv(T, meta["BLOCK_T"]), B, 3 * n_heads)](
            proj, proj.stride(0), proj.stride(1), col_ak, col_av, *norm_args, q, k, v, T, eps,
            K_SHIFT=k_shift, V_SHIFT=v_shift, **norm_flags, **meta)
    return q, k, v


@_prep_op.register_fake
def _(proj, q_weight, k_weight, n_heads, head_dim, k_shift, v_shift, eps):
    B, T, _ = proj.shape
    return tuple(proj.new_empty(B, T, n_heads, head_dim) for _ in range(3))


def _write_columns(dproj: torch.Tensor, start: int, groups: list[torch.Tensor]) -> None:
    """d proj's columns from ``start`` on: each group's gradient in turn, then 0 to the end (the
    padding). One launch per group (the last one writes the padding too), or one for the padding
    alone when there are no groups."""
    B, T, P = dproj.shape
    rows = dproj.view(B * T, P)
    spans = [(g, g.shape[-1]) for g in groups] or [(None, 0)]  # (source, width)
    col = start
    for i, (g, width) in enumerate(spans):
        zone = P - col if i == len(spans) - 1 else width  # the last also writes the padding
        if zone > 0:
            src = g.contiguous() if g is not None else dproj
            # The destination as a view starting at its first column, not a column index: Triton
            # sees a 16-byte aligned pointer (an index it only knows as a multiple of 16 or not),
            # and its stores vectorise (the output gate's group starts at column 2328 at 125M).
            columns_kernel[(triton.cdiv(B * T, BLOCK_N), triton.cdiv(zone, BLOCK_W))](
                src, width, rows[:, col:], P, zone, B * T,
                BLOCK_N=BLOCK_N, BLOCK_W=BLOCK_W, HAS_SRC=g is not None, num_warps=COLUMNS_WARPS)
        col += width


@torch.library.custom_op("fox_workbench::qkv_prep_bwd", mutates_args=())
def _prep_bwd_op(proj: torch.Tensor, q_weight: Optional[torch.Tensor], k_weight: Optional[torch.Tensor],
                 dq: torch.Tensor, dk: torch.Tensor, dv: torch.Tensor, drest: list[torch.Tensor], n_heads: int,
                 head_dim: int, k_shift: bool, v_shift: bool, eps: float
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """drest: the rest groups' gradients, (B, T, width) each, in column order. -> d proj (B, T, P)
    in proj's dtype, d q_weight and d k_weight (fp32, their shapes; empty when absent)."""
    B, T, P = proj.shape
    dq, dk, dv = dq.contiguous(), dk.contiguous(), dv.contiguous()
    dproj = runtime.empty(proj, (B, T, P))
    col_ak, col_av, C = _columns(n_heads, head_dim, k_shift, v_shift)
    meta = _meta(T, n_heads, head_dim)
    programs_t = triton.cdiv(T, meta["BLOCK_T"] * TILES)
    partials = [runtime.empty(proj, (programs_t * B, n_heads, head_dim), torch.float32) if w is not None else None
                for w in (q_weight, k_weight)]
    norm_args, norm_flags = _norm_args(proj, q_weight, k_weight)
    if B * T:
        qkv_prep_bwd_kernel[(programs_t, B, 3 * n_heads)](
            proj, proj.stride(0), proj.stride(1), col_ak, col_av, *norm_args,
            dq, dk, dv, dproj, dproj.stride(0), dproj.stride(1),
            *(p if p is not None else dproj for p in partials), T, eps, TILES=TILES,
            K_SHIFT=k_shift, V_SHIFT=v_shift, **norm_flags, **meta)
        _write_columns(dproj, C, drest)

    def total(partial, w):
        if w is None:
            return proj.new_empty(0, dtype=torch.float32)
        s = partial.sum(0) if B * T else partial.new_zeros(n_heads, head_dim)
        return s.sum(0) if w.dim() == 1 else s  # a shared (D,) scale: its heads' sum

    return dproj, total(partials[0], q_weight), total(partials[1], k_weight)


@_prep_bwd_op.register_fake
def _(proj, q_weight, k_weight, dq, dk, dv, drest, n_heads, head_dim, k_shift, v_shift, eps):
    def w_grad(w):
        return proj.new_empty(w.shape if w is not None else (0,), dtype=torch.float32)

    return proj.new_empty(proj.shape), w_grad(q_weight), w_grad(k_weight)


class _PrepareQKV(torch.autograd.Function):
    """The two ops as one differentiable function. Not the forward op's registered autograd: the
    rest groups are returned as views of ``proj`` (a custom op may not return one), so the
    forward copies nothing, and their gradients still reach this backward, which writes them into
    d proj beside the others."""

    @staticmethod
    def forward(ctx, proj, q_weight, k_weight, n_heads, head_dim, k_shift, v_shift, eps, rest):
        q, k, v = _prep_op(proj, q_weight, k_weight, n_heads, head_dim, k_shift, v_shift, eps)
        ctx.save_for_backward(proj, q_weight, k_weight)
        ctx.args = (n_heads, head_dim, k_shift, v_shift, eps)
        start = _columns(n_heads, head_dim, k_shift, v_shift)[2]
        return (q, k, v, *proj[..., start:start + sum(rest)].split(rest, dim=-1)) if rest else (q, k, v)

    @staticmethod
    def backward(ctx, dq, dk, dv, *drest):  # an unused output's gradient comes as zeros
        proj, q_weight, k_weight = ctx.saved_tensors
        dproj, dqw, dkw = _prep_bwd_op(proj, q_weight, k_weight, dq, dk, dv, list(drest), *ctx.args)
        return (dproj, dqw.to(q_weight.dtype) if q_weight is not None else None,
                dkw.to(k_weight.dtype) if k_weight is not None else None, None, None, None, None, None, None)


def prepare_qkv(proj: torch.Tensor, n_heads: int, head_dim: int, *, k_shift: bool = False,
                v_shift: bool = False, q_weight: Optional[torch.Tensor] = None,
                k_weight: Optional[torch.Tensor] = None, eps: float = 1e-5, rest: Sequence[int] = ()
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """q, k, v (B, T, H, D) in proj's dtype from the projection ``proj`` (B, T, P) (layout in the
    module docstring; unit stride along P), and the column groups after the shift logits, of the
    widths in ``rest``: a tuple of views of ``proj``, (B, T, width) each (the gates' logits: their
    gradients reach ``proj`` through this function's backward, which writes the whole of d proj;
    columns past the groups get 0).
    ``q_weight``/``k_weight``: the norms' scales, (H, D) or (D,), both or neither (None: no
    QK-norm). CUDA tensors, or CPU tensors with TRITON_INTERPRET=1 set before import."""
    H, D = n_heads, head_dim
    if proj.dim() != 3 or proj.stride(-1) != 1:
        raise ValueError(f"proj must be (B, T, P) with unit stride along P, got shape {tuple(proj.shape)} "
                         f"strides {proj.stride()}")
    rest = tuple(int(r) for r in rest)
    if any(r <= 0 for r in rest):
        raise ValueError(f"rest: the column groups' widths must be positive, got {rest}")
    need = _columns(H, D, k_shift, v_shift)[2] + sum(rest)
    if proj.shape[-1] < need:
        raise ValueError(f"proj has {proj.shape[-1]} columns; q, k, v, the shift logits and rest={rest} "
                         f"need {need}")
    if (q_weight is None) != (k_weight is None):
        raise ValueError("q_weight and k_weight: both (QK-norm) or neither")
    for name, w in (("q_weight", q_weight), ("k_weight", k_weight)):
        if w is not None and tuple(w.shape) not in ((H, D), (D,)):
            raise ValueError(f"{name} must be ({H}, {D}) or ({D},), got {tuple(w.shape)}")
        if w is not None and w.stride(-1) != 1:
            raise ValueError(f"{name} must have unit stride along the head dim")
    if q_weight is not None and q_weight.shape != k_weight.shape:
        raise ValueError("q_weight and k_weight must have the same shape")
    runtime.check_device(proj, "the Triton QKV kernels")
    q, k, v, *groups = _PrepareQKV.apply(proj, q_weight, k_weight, H, D, k_shift, v_shift, float(eps), rest)
    return q, k, v, tuple(groups)

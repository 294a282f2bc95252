"""Mean cross-entropy of a linear head, loss and logits' gradient in one Triton pass.

``linear_cross_entropy(h, weight, targets)`` = F.cross_entropy(h @ weight.T, targets) (mean over
the rows whose target is not ``ignore_index``). The forward computes the logits with one matmul,
then one kernel (triton_ce.py) writes each row's loss and overwrites the logits
with d loss / d logits, which is what the backward needs: the backward is two matmuls scaled by
the incoming gradient. Nothing of fp32 size (rows, V) is ever materialised. The logits' gradient
is stored in the logits' dtype (bf16 under autocast), as autograd's path through the matmul
would round it.

A custom op, so torch.compile keeps it whole inside a compiled step (and CUDA graphs).
"""
from __future__ import annotations

import torch
import triton

from foxwb.kernels import runtime
from foxwb.kernels.loss.triton_ce import ce_fwd_grad_kernel

# The row kernel's (BLOCK_V, warps). H200, 32768 x 50257 bf16: docs/kernels.md, "The loss".
BLOCK_V, NUM_WARPS = 2048, 16
INTERPRETER_BLOCK_V = 64
VOCAB_MULTIPLE = 64


def _padded_rows(V: int) -> int:
    return -(-V // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def padded_weight(weight: torch.Tensor) -> torch.Tensor:
    """weight (V, d) with zero rows up to a multiple of 64. An odd V (GPT-2's 50257) leaves every
    row of logits misaligned, which halves the row kernel's loads; cuBLAS is faster on the padded
    shape too (as nanoGPT pads its vocabulary)."""
    pad = _padded_rows(weight.shape[0]) - weight.shape[0]
    return torch.nn.functional.pad(weight, (0, 0, 0, pad)) if pad else weight


def ce_rows(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int, write_grad: bool,
            vocab: int | None = None, block_v: int | None = None, num_warps: int | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row losses (rows,) fp32 and the number of counted rows (a 0-dim int64 tensor) over the
    first ``vocab`` columns of ``logits`` (rows, >= vocab; unit stride along them); with
    ``write_grad`` those columns now hold d mean-loss / d logits."""
    rows, V = logits.shape[0], vocab or logits.shape[1]
    if logits.stride(1) != 1:
        raise ValueError("logits must have unit stride along the vocabulary")
    n_valid = (targets != ignore_index).sum()
    loss = runtime.empty(logits, (rows,), torch.float32)
    if rows:
        block = block_v or (INTERPRETER_BLOCK_V if runtime.INTERPRET else min(BLOCK_V, triton.next_power_of_2(V)))
        ce_fwd_grad_kernel[(rows,)](logits, logits.stride(0), targets, loss, n_valid, V, ignore_index,
                                    BLOCK_V=block, WRITE_GRAD=write_grad, num_warps=num_warps or NUM_WARPS)
    return loss, n_valid


@torch.library.custom_op("fox_workbench::linear_cross_entropy", mutates_args=())
def _lce_op(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, ignore_index: int,
            write_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """-> mean loss (0-dim fp32), d loss / d logits (rows, V) in h's dtype (empty without
    ``write_grad``)."""
    V = weight.shape[0]
    logits = h @ padded_weight(weight).t()  # (rows, V_pad): columns past V are 0 and never read
    loss, n_valid = ce_rows(logits, targets, ignore_index, write_grad, vocab=V)
    mean = loss.sum() / n_valid  # 0 / 0 = NaN when every row is ignored, as F.cross_entropy gives
    return mean, (logits if write_grad else logits.new_empty(0))


@_lce_op.register_fake
def _(h, weight, targets, ignore_index, write_grad):
    grad_shape = (h.shape[0], _padded_rows(weight.shape[0])) if write_grad else (0,)
    return h.new_empty((), dtype=torch.float32), h.new_empty(grad_shape)


def _setup_context(ctx, inputs, output):
    h, weight, _targets, _ignore, _write_grad = inputs
    _loss, grad_logits = output
    ctx.save_for_backward(h, weight, grad_logits)
    ctx.mark_non_differentiable(grad_logits)


def _backward(ctx, d_loss, _d_grad_logits):
    h, weight, grad_logits = ctx.saved_tensors
    if grad_logits.numel() == 0 and h.shape[0] * weight.shape[0] > 0:
        raise RuntimeError("linear_cross_entropy ran with write_grad=False and cannot be differentiated")
    # d loss is a scalar: scale the two (rows, d) and (V, d) products, not the (rows, V) gradient.
    # The padded columns of grad_logits hold 0 (zero rows of the padded weight), so they add 0.
    scale = d_loss.to(h.dtype)
    dh = (grad_logits @ padded_weight(weight)) * scale if ctx.needs_input_grad[0] else None
    dw = (grad_logits.t() @ h)[: weight.shape[0]] * scale if ctx.needs_input_grad[1] else None
    return dh, dw, None, None, None


_lce_op.register_autograd(_backward, setup_context=_setup_context)


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                         ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy of logits h @ weight.T against ``targets``. h: (rows, d) and weight:
    (V, d) of one floating dtype (cast before the call under autocast); targets: (rows,) integer.
    CUDA tensors, or CPU tensors with TRITON_INTERPRET=1 set before import."""
    if h.ndim != 2 or weight.ndim != 2 or h.shape[1] != weight.shape[1]:
        raise ValueError(f"h must be (rows, d) and weight (V, d); got {tuple(h.shape)} and {tuple(weight.shape)}")
    if targets.shape != h.shape[:1]:
        raise ValueError(f"targets must be (rows,) = ({h.shape[0]},), got {tuple(targets.shape)}")
    if h.dtype != weight.dtype:
        raise ValueError(f"h and weight must share a dtype, got {h.dtype} and {weight.dtype}")
    runtime.check_device(h, "the Triton loss")
    write_grad = torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad)
    return _lce_op(h, weight, targets, ignore_index, write_grad)[0]

"""Naive forgetting attention: the ground truth every faster path is tested against.

O = softmax(s * Q K^T + D) V with D_ij = c_i - c_j for j <= i (else -inf), c = cumsum(log f) in
fp32 over the sequence (docs/fox-notes.md, "Forgetting attention"). With a ``window`` W, also -inf
for j <= i - W: query i sees the W keys i - W < j <= i (a sliding-window Transformer without a
gate). Materialises the (T, T) scores: for tests and small CPU runs only.
"""
from __future__ import annotations

import math

import torch


# c = cumsum(log f) as an op of our own: opaque to Inductor, whose split scan of this cumsum fails
# to generate CUDA code when there are few rows to scan (InductorError on the H200, torch 2.11);
# as an op it stays in the compiled graph (fullgraph holds) and runs as ATen's cumsum.
@torch.library.custom_op("fox_workbench::gate_cumsum", mutates_args=())
def _gate_cumsum_op(log_f: torch.Tensor) -> torch.Tensor:
    return log_f.to(torch.float32).cumsum(dim=1).transpose(1, 2).contiguous()


@_gate_cumsum_op.register_fake
def _(log_f):
    B, T, H = log_f.shape
    return log_f.new_empty((B, H, T), dtype=torch.float32)


@torch.library.custom_op("fox_workbench::gate_cumsum_bwd", mutates_args=())
def _gate_cumsum_bwd_op(grad: torch.Tensor, dtype_like: torch.Tensor) -> torch.Tensor:
    """d log f = the reverse cumsum of dc over T, back in (B, T, H) and log f's dtype."""
    return grad.flip(-1).cumsum(-1).flip(-1).transpose(1, 2).to(dtype_like.dtype).contiguous()


@_gate_cumsum_bwd_op.register_fake
def _(grad, dtype_like):
    B, H, T = grad.shape
    return grad.new_empty((B, T, H), dtype=dtype_like.dtype)


def _gate_cumsum_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0].new_empty(0))


def _gate_cumsum_backward(ctx, grad):
    (like,) = ctx.saved_tensors
    return _gate_cumsum_bwd_op(grad, like)


_gate_cumsum_op.register_autograd(_gate_cumsum_backward, setup_context=_gate_cumsum_setup)


def _gate_cumsum(log_f: torch.Tensor) -> torch.Tensor:
    """c = cumsum(log f) over T in fp32, (B, T, H) -> (B, H, T)."""
    return _gate_cumsum_op(log_f)


def forgetting_attention_naive(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_f: torch.Tensor | None,
    *,
    scale: float | None = None,
    compute_dtype: torch.dtype = torch.float32,
    window: int | None = None,
) -> torch.Tensor:
    """q, k, v: (B, T, H, D); log_f: (B, T, H) or None (plain causal); window: W keys per query
    (i - W < j <= i), or None for all j <= i. Returns (B, T, H, D) in q's dtype; the math runs in
    ``compute_dtype`` (fp64 for the strictest references)."""
    check_window(window)
    B, T, H, D = q.shape
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    qf, kf, vf = (t.to(compute_dtype) for t in (q, k, v))
    scores = torch.einsum("bihd,bjhd->bhij", qf, kf) * scale  # (B, H, T, T)
    if log_f is not None:
        c = _gate_cumsum(log_f).to(compute_dtype)  # (B, H, T)
        scores = scores + (c[..., :, None] - c[..., None, :])
    seen = band_mask(T, window, q.device)  # (T, T): True where query i sees key j
    scores = scores.masked_fill(~seen, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("bhij,bjhd->bihd", probs, vf).to(q.dtype)


def check_window(window: int | None, log_pruning_tolerance: float | None = None) -> None:
    """A clear ValueError unless ``window`` is None or a positive int, and unless it comes without
    a pruning tolerance (the pair is not implemented)."""
    if window is None:
        return
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window={window!r}; allowed: a positive int (keys per query) or None (full causal)")
    if log_pruning_tolerance is not None:
        raise ValueError(f"window={window} and log_pruning_tolerance={log_pruning_tolerance} cannot be combined: "
                         "set one of them")


def band_mask(T: int, window: int | None, device=None) -> torch.Tensor:
    """(T, T) bool, True where query i sees key j: j <= i, and i - j < window when one is given."""
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    return (j <= i) if window is None else (j <= i) & (i - j < window)


@torch.no_grad()
def forgetting_attention_grads_chunked(
    q, k, v, log_f, do, *, scale=None, chunk=1024, dtype=torch.float64, cumsum_dtype=torch.float32, window=None
):
    """Output and all four gradients by the explicit formulas of docs/fox-notes.md, "The backward", in ``dtype``
    and in query chunks, so an fp64 reference fits in memory at 64k tokens.

    ``cumsum_dtype`` fp32 gives the naive reference's semantics; fp64 measures what the fp32 cumsum
    costs. ``window``: as forgetting_attention_naive's. Returns (o, dq, dk, dv, dlog_f) in
    ``dtype``; shapes as the inputs. log_f may be None.
    """
    B, T, H, D = q.shape
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    q, k, v, do = (t.to(dtype).transpose(1, 2) for t in (q, k, v, do))  # (B, H, T, D)
    c = None if log_f is None else log_f.to(cumsum_dtype).cumsum(1).to(dtype).transpose(1, 2)  # (B, H, T)
    o, dq = torch.empty_like(q), torch.empty_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    dc = torch.zeros(B, H, T, dtype=dtype, device=q.device)
    for i0 in range(0, T, chunk):
        i1 = min(i0 + chunk, T)
        s = torch.einsum("bhid,bhjd->bhij", q[:, :, i0:i1], k[:, :, :i1]) * scale  # (B, H, I, J)
        if c is not None:
            s += c[:, :, i0:i1, None] - c[:, :, None, :i1]
        rows = torch.arange(i0, i1, device=q.device)[:, None]
        cols = torch.arange(i1, device=q.device)[None, :]
        s.masked_fill_(rows < cols, float("-inf"))
        if window is not None:
            s.masked_fill_(rows - cols >= window, float("-inf"))
        p = torch.softmax(s, dim=-1)
        o[:, :, i0:i1] = p @ v[:, :, :i1]
        dp = do[:, :, i0:i1] @ v[:, :, :i1].transpose(-1, -2)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
        dq[:, :, i0:i1] = scale * ds @ k[:, :, :i1]
        dk[:, :, :i1] += scale * ds.transpose(-1, -2) @ q[:, :, i0:i1]
        dv[:, :, :i1] += p.transpose(-1, -2) @ do[:, :, i0:i1]
        dc[:, :, i0:i1] += ds.sum(-1)
        dc[:, :, :i1] -= ds.sum(-2)
    dlog_f = None if c is None else dc.flip(-1).cumsum(-1).flip(-1).transpose(1, 2)
    return tuple(t.transpose(1, 2) for t in (o, dq, dk, dv)) + (dlog_f,)

"""The two scans around the attention kernels, each one launch.

Forward: c = cumsum(log f) over T, read from (B, T, H) as given, written (B * H, T) contiguous,
the layout the attention kernels index. Backward: dL/d log f_t = sum over u >= t of dL/dc_u, a
reverse scan of the (B * H, T) buffer the backward kernels filled, in place.

One program per (batch, head) walks T in chunks, scanning each chunk in registers and carrying
the running sum. The sums are taken in fp64 and rounded once to fp32 on the way out: a tree scan in
fp32 (tl.cumsum's order) rounds each partial sum several times and measured about 4x the error of
a sequential fp32 cumsum; the fp64 one is exact to the last fp32 digit, at no cost that shows (the
scan reads B * H * T values, the attention B * H * T * D per key tile). This replaced torch's
transpose + cumsum and flip + cumsum + flip + add (six launches, three of them copies) around
every attention call.
"""
import triton
import triton.language as tl


@triton.jit
def scan_kernel(X, Y, stride_xb, stride_xt, stride_xh, T, H, REVERSE: tl.constexpr, BLOCK_T: tl.constexpr):
    """Y[b * H + h, t] = sum of X[b, u, h] over u <= t (REVERSE: u >= t); Y is (B * H, T)."""
    bh = tl.program_id(0)
    b = bh // H
    h = bh % H
    X += b * stride_xb + h * stride_xh
    Y += bh * T
    offs = tl.arange(0, BLOCK_T)
    carry = tl.zeros([], dtype=tl.float64)
    n_chunks = tl.cdiv(T, BLOCK_T)
    for i in range(0, n_chunks):
        start = ((n_chunks - 1 - i) if REVERSE else i) * BLOCK_T
        t = start + offs
        x = tl.load(X + t * stride_xt, mask=t < T, other=0.0).to(tl.float64)
        tl.store(Y + t, (tl.cumsum(x, 0, reverse=REVERSE) + carry).to(tl.float32), mask=t < T)
        carry += tl.sum(x, 0)

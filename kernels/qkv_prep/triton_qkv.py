"""Triton kernels of the step between the block's projection and the attention: KV-shift
(docs/fox-notes.md, "KV-shift") and QK-norm ("QK-norm"), forward and backward in one pass each.

Both kernels read the block's fused projection output ``proj`` (B, T, P), whose columns are
[q | k | v | KV-shift's k logits (H) | its v logits (H) | other column groups | padding]. A
program sees BLOCK_T tokens of one of q, k or v of one head. The forward writes q, k, v as
(B, T, H, D):

    q = norm_q(q~),  k = norm_k(a_k k~_{t-1} + (1 - a_k) k~_t),  v = a_v v~_{t-1} + (1 - a_v) v~_t

with norm(x) = x / sqrt(mean_D(x^2) + eps) * w (statistics in fp32) and a = sigmoid(logit). The
backward writes d proj's q, k, v and shift-logit columns (columns_kernel copies the other
groups' gradients in, one launch per group, and writes the padding as 0: the padded weight rows
are 0, and 0 * NaN would not be); and the norms' weight gradients summed
over TILES tiles of tokens per program, partial sums that the caller adds up (torch.compile's
code reduced them over tokens in kernels of their own that read q and k again). Taking the
other columns' gradients in is what lets the projection stay one matmul: left to autograd, their
gradients and ours would meet in a copy of the whole gradient.

The shift couples token t to t + 1 in the backward (k~_t reaches k_t and k_{t+1}), so the
backward also recomputes the norm's backward at token t + 1 of every row, from loads shifted by
one token: they hit the cache, and no program needs another's result.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _norm(x, w, eps, D: tl.constexpr):
    """x (BLOCK_T, BLOCK_D) fp32 -> x / rms(x) * w; columns past D are 0 in x."""
    r = tl.rsqrt(tl.sum(x * x, 1) / D + eps)
    return x * r[:, None] * w[None, :]


@triton.jit
def _norm_bwd(x, g, w, eps, D: tl.constexpr):
    """d/dx of sum(g * norm(x)) and x / rms(x) (for the weight's gradient, sum of g * x_hat)."""
    r = tl.rsqrt(tl.sum(x * x, 1) / D + eps)[:, None]
    x_hat = x * r
    gw = g * w[None, :]
    dx = r * (gw - x_hat * (tl.sum(gw * x_hat, 1) / D)[:, None])
    return dx, x_hat


@triton.jit
def qkv_prep_fwd_kernel(proj_ptr, s_pb, s_pt, col_ak, col_av, qw_ptr, kw_ptr, s_wh,
                        q_ptr, k_ptr, v_ptr, T, eps,
                        H: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_T: tl.constexpr,
                        Q_NORM: tl.constexpr, K_NORM: tl.constexpr, K_SHIFT: tl.constexpr,
                        V_SHIFT: tl.constexpr):
    """Grid (token tiles, B, 3 H): q, k and v of each head in programs of their own, short and
    independent."""
    tb, b, z = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2)
    part, h = z // H, z % H
    t = tb * BLOCK_T + tl.arange(0, BLOCK_T)
    d = tl.arange(0, BLOCK_D)
    in_t, in_d = t < T, d < D
    m = in_t[:, None] & in_d[None, :]
    m_prev = m & (t >= 1)[:, None]  # k~_0 = 0: token 0 has no previous token
    row1 = proj_ptr + b * s_pb + t.to(tl.int64) * s_pt  # (BLOCK_T,) row starts
    row = row1[:, None]
    cols = h * D + d[None, :]
    out = (b * T + t.to(tl.int64))[:, None] * (H * D) + cols

    if part == 0:
        q = tl.load(row + cols, mask=m, other=0.0).to(tl.float32)
        if Q_NORM:
            q = _norm(q, tl.load(qw_ptr + h * s_wh + d, mask=in_d, other=0.0).to(tl.float32), eps, D)
        tl.store(q_ptr + out, q.to(q_ptr.dtype.element_ty), mask=m)
    elif part == 1:
        k = tl.load(row + H * D + cols, mask=m, other=0.0).to(tl.float32)
        if K_SHIFT:
            k_prev = tl.load(row - s_pt + H * D + cols, mask=m_prev, other=0.0).to(tl.float32)
            a = tl.sigmoid(tl.load(row1 + col_ak + h, mask=in_t, other=0.0).to(tl.float32))[:, None]
            k = a * k_prev + (1 - a) * k
        if K_NORM:
            k = _norm(k, tl.load(kw_ptr + h * s_wh + d, mask=in_d, other=0.0).to(tl.float32), eps, D)
        tl.store(k_ptr + out, k.to(k_ptr.dtype.element_ty), mask=m)
    else:
        v = tl.load(row + 2 * H * D + cols, mask=m, other=0.0).to(tl.float32)
        if V_SHIFT:
            v_prev = tl.load(row - s_pt + 2 * H * D + cols, mask=m_prev, other=0.0).to(tl.float32)
            a = tl.sigmoid(tl.load(row1 + col_av + h, mask=in_t, other=0.0).to(tl.float32))[:, None]
            v = a * v_prev + (1 - a) * v
        tl.store(v_ptr + out, v.to(v_ptr.dtype.element_ty), mask=m)


@triton.jit
def qkv_prep_bwd_kernel(proj_ptr, s_pb, s_pt, col_ak, col_av, qw_ptr, kw_ptr, s_wh,
                        dq_ptr, dk_ptr, dv_ptr, dproj_ptr, s_db, s_dt, dqw_ptr, dkw_ptr, T, eps,
                        H: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_T: tl.constexpr,
                        TILES: tl.constexpr, Q_NORM: tl.constexpr,
                        K_NORM: tl.constexpr, K_SHIFT: tl.constexpr, V_SHIFT: tl.constexpr):
    """dq, dk, dv: gradients of the forward's q, k, v, (B, T, H, D) contiguous. dqw, dkw: the
    weight gradients' partial sums, (B * programs along T, H, D) fp32. Grid (token tiles / TILES,
    B, 3 H). The other columns of d proj: columns_kernel."""
    tp, b, z = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2)
    part, h = z // H, z % H
    d = tl.arange(0, BLOCK_D)
    in_d = d < D
    cols = h * D + d[None, :]
    w = tl.zeros((BLOCK_D,), tl.float32)
    if Q_NORM:
        if part == 0:
            w = tl.load(qw_ptr + h * s_wh + d, mask=in_d, other=0.0).to(tl.float32)
    if K_NORM:
        if part == 1:
            w = tl.load(kw_ptr + h * s_wh + d, mask=in_d, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_D,), tl.float32)  # sum over this program's tokens of g * x_hat
    for i in range(TILES):
        t = (tp * TILES + i) * BLOCK_T + tl.arange(0, BLOCK_T)
        in_t = t < T
        has_next = in_t & (t + 1 < T)  # k~_t also reaches k_{t+1}, inside the sequence only
        m = in_t[:, None] & in_d[None, :]
        m_prev = m & (t >= 1)[:, None]
        m_next = has_next[:, None] & in_d[None, :]
        row1 = proj_ptr + b * s_pb + t.to(tl.int64) * s_pt  # (BLOCK_T,) row starts
        drow1 = dproj_ptr + b * s_db + t.to(tl.int64) * s_dt
        row, drow = row1[:, None], drow1[:, None]
        out = (b * T + t.to(tl.int64))[:, None] * (H * D) + cols
        if part == 0:
            g = tl.load(dq_ptr + out, mask=m, other=0.0).to(tl.float32)
            if Q_NORM:
                x = tl.load(row + cols, mask=m, other=0.0).to(tl.float32)
                g_in, x_hat = _norm_bwd(x, g, w, eps, D)
                dw += tl.sum(g * x_hat, 0)
            else:
                g_in = g
            tl.store(drow + cols, g_in.to(dproj_ptr.dtype.element_ty), mask=m)
        elif part == 1:
            g = tl.load(dk_ptr + out, mask=m, other=0.0).to(tl.float32)
            k = tl.load(row + H * D + cols, mask=m, other=0.0).to(tl.float32)
            if K_SHIFT:
                k_prev = tl.load(row - s_pt + H * D + cols, mask=m_prev, other=0.0).to(tl.float32)
                a1 = tl.sigmoid(tl.load(row1 + col_ak + h, mask=in_t, other=0.0).to(tl.float32))
                a = a1[:, None]
                ks = a * k_prev + (1 - a) * k
            else:
                ks = k
            if K_NORM:
                e, x_hat = _norm_bwd(ks, g, w, eps, D)  # d loss / d (shifted k), token t
                dw += tl.sum(g * x_hat, 0)
            else:
                e = g
            if K_SHIFT:
                # The same at token t + 1, recomputed: its shifted k needs k~_t and k~_{t+1}.
                k_next = tl.load(row + s_pt + H * D + cols, mask=m_next, other=0.0).to(tl.float32)
                a_next = tl.sigmoid(tl.load(row1 + s_pt + col_ak + h, mask=has_next, other=0.0).to(tl.float32))
                a_next = tl.where(has_next, a_next, 0.0)[:, None]
                g_next = tl.load(dk_ptr + out + H * D, mask=m_next, other=0.0).to(tl.float32)
                if K_NORM:
                    e_next, _ = _norm_bwd(a_next * k + (1 - a_next) * k_next, g_next, w, eps, D)
                else:
                    e_next = g_next
                d_logit = tl.sum(e * (k_prev - k), 1) * a1 * (1 - a1)
                g_in = (1 - a) * e + a_next * e_next
                tl.store(drow1 + col_ak + h, d_logit.to(dproj_ptr.dtype.element_ty), mask=in_t)
            else:
                g_in = e
            tl.store(drow + H * D + cols, g_in.to(dproj_ptr.dtype.element_ty), mask=m)
        else:
            g = tl.load(dv_ptr + out, mask=m, other=0.0).to(tl.float32)
            if V_SHIFT:
                v = tl.load(row + 2 * H * D + cols, mask=m, other=0.0).to(tl.float32)
                v_prev = tl.load(row - s_pt + 2 * H * D + cols, mask=m_prev, other=0.0).to(tl.float32)
                a1 = tl.sigmoid(tl.load(row1 + col_av + h, mask=in_t, other=0.0).to(tl.float32))
                a = a1[:, None]
                a_next = tl.sigmoid(tl.load(row1 + s_pt + col_av + h, mask=has_next, other=0.0).to(tl.float32))
                a_next = tl.where(has_next, a_next, 0.0)[:, None]
                g_next = tl.load(dv_ptr + out + H * D, mask=m_next, other=0.0).to(tl.float32)
                d_logit = tl.sum(g * (v_prev - v), 1) * a1 * (1 - a1)
                g_in = (1 - a) * g + a_next * g_next
                tl.store(drow1 + col_av + h, d_logit.to(dproj_ptr.dtype.element_ty), mask=in_t)
            else:
                g_in = g
            tl.store(drow + 2 * H * D + cols, g_in.to(dproj_ptr.dtype.element_ty), mask=m)
    partial = (b * tl.num_programs(0) + tp) * (H * D) + h * D + d
    if Q_NORM:
        if part == 0:
            tl.store(dqw_ptr + partial, dw, mask=in_d)
    if K_NORM:
        if part == 1:
            tl.store(dkw_ptr + partial, dw, mask=in_d)


@triton.jit
def columns_kernel(src_ptr, W, dst_ptr, s_dst, Z, N,
                   BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr, HAS_SRC: tl.constexpr):
    """dst[n, c] = src[n, c] for c < W, then 0 up to Z columns (the padding): the gradient of one
    of the projection's other column groups (a gate's logits) written into d proj; dst points at
    the group's first column, its rows ``s_dst`` apart. src (N, W) contiguous. Grid (row blocks,
    column blocks of Z)."""
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)[:, None]
    c = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    rows = n < N
    n = n.to(tl.int64)
    if HAS_SRC:
        x = tl.load(src_ptr + n * W + c, mask=rows & (c < W), other=0.0)
    else:
        x = tl.zeros((BLOCK_N, BLOCK_W), dst_ptr.dtype.element_ty)
    tl.store(dst_ptr + n * s_dst + c, x.to(dst_ptr.dtype.element_ty), mask=rows & (c < Z))

"""Experiment (session 2026-11-30, eighth): the attention kernels with q, k, v, dO (and O) read
through TMA tensor descriptors instead of pointer tiles.

The question: the dK/dV kernel is register-bound (kernels/BENCHMARKS.md: every ptxas cap made it
slower) and every pointer tile costs address registers and LSU issue slots; a TMA load costs one
thread one instruction and no address tensor. Does reading the tiles through host-side tensor
descriptors make the forward, dQ or dK/dV faster on the H200?

These kernels are the installed ones (kernels/triton_fwd.py, kernels/triton_bwd.py) with each
load_rows of q, k, v, dO, O replaced by a descriptor load of a 2-D view (B * T, H * D) of the
(B, T, H, D) tensor (needs stride_b = T * stride_t, stride_h = D, stride_d = 1). Rows past T of a
batch then read the next batch's rows (zeros after the last batch): the kernels' masks (scores
-inf, lse +inf) already make every such row's contribution 0. Gate on, bf16, non-EXACT, no pruning.

    python scripts/gpu/round34_tma.py --out tma.json          # GPU: correctness + timing sweep
    TRITON_INTERPRET=1 python scripts/gpu/round34_tma.py --check   # CPU: correctness only
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernels import triton_attention as ta  # noqa: E402
from kernels.naive import forgetting_attention_naive  # noqa: E402
from kernels.triton_common import LOG2E, decay_log2, finish_scores, store_rows  # noqa: E402
from kernels.triton_fwd import _online_softmax  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _tile(desc, row, col, UPCAST: tl.constexpr):
    t = desc.load([row, col])
    if UPCAST:
        t = t.to(tl.float32)
    return t


@triton.jit
def _fwd_loop(acc, m_i, l_i, q, offs_m, k_desc, v_desc, C, row0, col, c_ref, c_q, T, qk_scale, lo, hi,
              MASKED: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = _tile(k_desc, row0 + start_n, col, UPCAST)
        v = _tile(v_desc, row0 + start_n, col, UPCAST)
        s = finish_scores(tl.dot(q, tl.trans(k), input_precision=PRECISION), offs_m, start_n + offs_n, C, c_ref,
                          c_q, T, qk_scale, MASKED, True, False)
        acc, m_i, l_i = _online_softmax(acc, m_i, l_i, s, v, PRECISION)
    return acc, m_i, l_i


@triton.jit
def fwd_tma(q_desc, k_desc, v_desc, C, O, LSE, stride_ob, stride_ot, stride_oh, stride_od, T, H, sm_scale,
            D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr,
            PRECISION: tl.constexpr):
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    row0 = b * T
    col = h * D
    C += bh * T
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = _tile(q_desc, row0 + start_m * BLOCK_M, col, UPCAST)
    c_ref = tl.load(C + start_m * BLOCK_M)
    c_q = tl.zeros([BLOCK_M], dtype=tl.float32)
    qk_scale = sm_scale * LOG2E
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    diag = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, T)
    acc, m_i, l_i = _fwd_loop(acc, m_i, l_i, q, offs_m, k_desc, v_desc, C, row0, col, c_ref, c_q, T, qk_scale,
                              0, diag, False, BLOCK_N, UPCAST, PRECISION)
    acc, m_i, l_i = _fwd_loop(acc, m_i, l_i, q, offs_m, k_desc, v_desc, C, row0, col, c_ref, c_q, T, qk_scale,
                              diag, hi, True, BLOCK_N, UPCAST, PRECISION)
    O += b * stride_ob + h * stride_oh
    store_rows(O, offs_m, stride_ot, stride_od, acc / l_i[:, None], T, D, D)
    lse = m_i + tl.math.log2(l_i) + decay_log2(C, offs_m, c_ref, T)
    tl.store(LSE + bh * T + offs_m, lse, mask=offs_m < T)


@triton.jit
def _dkdv_loop(dk, dv, dcol, k, v, ck, offs_n, q_desc, do_desc, C, LSE, DELTA, row0, col, c_ref, T, qk_scale,
               lo, hi, MASKED: tl.constexpr, BLOCK_M: tl.constexpr, UPCAST: tl.constexpr,
               PRECISION: tl.constexpr):
    offs_m0 = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_m0
        row_ok = rows < T
        q = _tile(q_desc, row0 + start_m, col, UPCAST)
        do = _tile(do_desc, row0 + start_m, col, UPCAST)
        lse = tl.load(LSE + rows, mask=row_ok, other=float("inf"))
        delta = tl.load(DELTA + rows, mask=row_ok, other=0.0)
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale
        lse -= decay_log2(C, rows, c_ref, T)
        s_t -= ck[:, None]
        if MASKED:
            s_t = tl.where(rows[None, :] >= offs_n[:, None], s_t, float("-inf"))
        p_t = tl.math.exp2(s_t - lse[None, :])
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)
        dcol += tl.sum(ds_t, 1)
    return dk, dv, dcol


@triton.jit
def dkdv_tma(q_desc, k_desc, v_desc, do_desc, C, LSE, DELTA, DK, DV, DC,
             stride_dkb, stride_dkt, stride_dkh, stride_dkd, stride_dvb, stride_dvt, stride_dvh, stride_dvd,
             T, H, sm_scale, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    row0 = b * T
    col = h * D
    C += bh * T
    LSE += bh * T
    DELTA += bh * T
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k = _tile(k_desc, row0 + start_n * BLOCK_N, col, UPCAST)
    v = _tile(v_desc, row0 + start_n * BLOCK_N, col, UPCAST)
    c_ref = tl.load(C + start_n * BLOCK_N)
    ck = decay_log2(C, offs_n, c_ref, T)
    qk_scale = sm_scale * LOG2E
    dk = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    dcol = tl.zeros([BLOCK_N], dtype=tl.float32)
    lo = (start_n * BLOCK_N) // BLOCK_M * BLOCK_M
    mid = tl.minimum(tl.cdiv((start_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, T)
    full = mid + (T - mid) // BLOCK_M * BLOCK_M
    dk, dv, dcol = _dkdv_loop(dk, dv, dcol, k, v, ck, offs_n, q_desc, do_desc, C, LSE, DELTA, row0, col, c_ref, T,
                              qk_scale, lo, mid, True, BLOCK_M, UPCAST, PRECISION)
    dk, dv, dcol = _dkdv_loop(dk, dv, dcol, k, v, ck, offs_n, q_desc, do_desc, C, LSE, DELTA, row0, col, c_ref, T,
                              qk_scale, mid, full, False, BLOCK_M, UPCAST, PRECISION)
    dk, dv, dcol = _dkdv_loop(dk, dv, dcol, k, v, ck, offs_n, q_desc, do_desc, C, LSE, DELTA, row0, col, c_ref, T,
                              qk_scale, full, T, False, BLOCK_M, UPCAST, PRECISION)
    store_rows(DK + b * stride_dkb + h * stride_dkh, offs_n, stride_dkt, stride_dkd, dk * sm_scale, T, D, D)
    store_rows(DV + b * stride_dvb + h * stride_dvh, offs_n, stride_dvt, stride_dvd, dv, T, D, D)
    dc_ptrs = DC + bh * T + offs_n
    tl.store(dc_ptrs, tl.load(dc_ptrs, mask=offs_n < T, other=0.0) - dcol, mask=offs_n < T)


@triton.jit
def _dq_loop(dq, drow, q, do, lse, delta, offs_m, k_desc, v_desc, C, row0, col, c_ref, c_q, T, qk_scale, lo, hi,
             MASKED: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = _tile(k_desc, row0 + start_n, col, UPCAST)
        v = _tile(v_desc, row0 + start_n, col, UPCAST)
        s = finish_scores(tl.dot(q, tl.trans(k), input_precision=PRECISION), offs_m, start_n + offs_n0, C, c_ref,
                          c_q, T, qk_scale, MASKED, True, False)
        p = tl.math.exp2(s - lse[:, None])
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
        drow += tl.sum(ds, 1)
    return dq, drow


@triton.jit
def dq_tma(q_desc, k_desc, v_desc, o_desc, do_desc, C, LSE, DELTA, DQ, DC,
           stride_dqb, stride_dqt, stride_dqh, stride_dqd, T, H, sm_scale,
           D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr,
           PRECISION: tl.constexpr):
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    row0 = b * T
    col = h * D
    C += bh * T
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = offs_m < T
    q = _tile(q_desc, row0 + start_m * BLOCK_M, col, UPCAST)
    do = _tile(do_desc, row0 + start_m * BLOCK_M, col, UPCAST)
    o = _tile(o_desc, row0 + start_m * BLOCK_M, col, UPCAST)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + bh * T + offs_m, delta, mask=row_ok)
    lse = tl.load(LSE + bh * T + offs_m, mask=row_ok, other=float("inf"))
    c_ref = tl.load(C + start_m * BLOCK_M)
    lse -= decay_log2(C, offs_m, c_ref, T)
    c_q = tl.zeros([BLOCK_M], dtype=tl.float32)
    qk_scale = sm_scale * LOG2E
    dq = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    drow = tl.zeros([BLOCK_M], dtype=tl.float32)
    diag = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, T)
    dq, drow = _dq_loop(dq, drow, q, do, lse, delta, offs_m, k_desc, v_desc, C, row0, col, c_ref, c_q, T, qk_scale,
                        0, diag, False, BLOCK_N, UPCAST, PRECISION)
    dq, drow = _dq_loop(dq, drow, q, do, lse, delta, offs_m, k_desc, v_desc, C, row0, col, c_ref, c_q, T, qk_scale,
                        diag, hi, True, BLOCK_N, UPCAST, PRECISION)
    store_rows(DQ + b * stride_dqb + h * stride_dqh, offs_m, stride_dqt, stride_dqd, dq * sm_scale, T, D, D)
    tl.store(DC + bh * T + offs_m, drow, mask=row_ok)


def _desc(x: torch.Tensor, rows: int) -> TensorDescriptor:
    B, T, H, D = x.shape
    assert x.stride(0) == T * x.stride(1) and x.stride(2) == D and x.stride(3) == 1, x.stride()
    return TensorDescriptor(x, [B * T, H * D], [x.stride(1), 1], [rows, D])


def _params(q):
    return dict(UPCAST=INTERPRET, PRECISION="ieee" if (q.dtype == torch.float32 or INTERPRET) else "tf32")


def forward_tma(q, k, v, c, sm_scale, cfg: ta.KernelConfig):
    B, T, H, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(B * H, T, device=q.device, dtype=torch.float32)
    m, n = cfg.fwd.block_m, cfg.fwd.block_n
    fwd_tma[(triton.cdiv(T, m), B * H)](_desc(q, m), _desc(k, n), _desc(v, n), c, o, lse, *o.stride(), T, H,
                                         sm_scale, D=D, BLOCK_M=m, BLOCK_N=n, num_warps=cfg.fwd.num_warps,
                                         num_stages=cfg.fwd.num_stages, **_params(q))
    return o, lse


def backward_tma(do, q, k, v, c, o, lse, sm_scale, cfg: ta.KernelConfig):
    B, T, H, D = q.shape
    delta = torch.empty_like(lse)
    dc = torch.empty_like(lse)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    m, n = cfg.dq.block_m, cfg.dq.block_n
    dq_tma[(triton.cdiv(T, m), B * H)](_desc(q, m), _desc(k, n), _desc(v, n), _desc(o, m), _desc(do, m), c, lse,
                                        delta, dq, dc, *dq.stride(), T, H, sm_scale, D=D, BLOCK_M=m, BLOCK_N=n,
                                        num_warps=cfg.dq.num_warps, num_stages=cfg.dq.num_stages, **_params(q))
    m, n = cfg.dkdv.block_m, cfg.dkdv.block_n
    dkdv_tma[(triton.cdiv(T, n), B * H)](_desc(q, m), _desc(k, n), _desc(v, n), _desc(do, m), c, lse, delta, dk, dv,
                                          dc, *dk.stride(), *dv.stride(), T, H, sm_scale, D=D, BLOCK_M=m,
                                          BLOCK_N=n, num_warps=cfg.dkdv.num_warps, num_stages=cfg.dkdv.num_stages,
                                          **_params(q))
    dc_bth = dc.view(B, H, T).transpose(1, 2)
    return dq, dk, dv, ta._scan(dc_bth, dc, reverse=True).view(B, H, T).transpose(1, 2)


def inputs(B, H, T, D, dtype, device, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v, do = (torch.randn(B, T, H, D, generator=g).to(device, dtype) for _ in range(4))
    log_f = torch.nn.functional.logsigmoid(torch.randn(B, T, H, generator=g) + 3).to(device)
    return q, k, v, do, log_f


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def check(B, H, T, D, dtype, device, cfg):
    q, k, v, do, log_f = inputs(B, H, T, D, dtype, device)
    sm = D ** -0.5
    c = ta.gate_cumsum(log_f)
    o, lse = forward_tma(q, k, v, c, sm, cfg)
    grads = backward_tma(do, q, k, v, c, o, lse, sm, cfg)
    args = [x.double().requires_grad_() for x in (q, k, v)] + [log_f.double().requires_grad_()]
    ref = forgetting_attention_naive(*args)
    ref_grads = torch.autograd.grad(ref, args, do.double())
    errs = {"o": rel(o, ref)} | {n: rel(a, b) for n, a, b in zip(("dq", "dk", "dv", "dlogf"), grads, ref_grads)}
    return errs


def bench_shape(shape, cfgs, out_rows):
    B, H, T, D = shape
    q, k, v, do, log_f = inputs(B, H, T, D, torch.bfloat16, "cuda")
    sm = D ** -0.5
    c = ta.gate_cumsum(log_f)
    flops_fwd = 4 * B * H * T * T * D / 2
    installed = ta.default_config(D, T)
    o, lse = ta._forward(q, k, v, c, sm, installed)
    base = {
        "fwd": triton.testing.do_bench(lambda: ta._forward(q, k, v, c, sm, installed), warmup=25, rep=100),
        "bwd": triton.testing.do_bench(lambda: ta._backward(do, q, k, v, c, o, lse, sm, installed), warmup=25, rep=100),
    }
    print(f"{shape} installed pointer kernels: fwd {base['fwd']:.3f} ms, bwd {base['bwd']:.3f} ms "
          f"(fwd+bwd {3.5 * flops_fwd / (base['fwd'] + base['bwd']) / 1e9:.0f} TFLOP/s)", flush=True)
    out_rows.append({"shape": shape, "kind": "pointer (installed)", "fwd_ms": base["fwd"], "bwd_ms": base["bwd"]})
    best = {"fwd": (1e9, None), "dq": (1e9, None), "dkdv": (1e9, None)}
    for name, tile in cfgs:
        cfg = ta.KernelConfig(tile, tile, tile) if name != "dkdv" else ta.KernelConfig(installed.fwd, tile, installed.dq)
        try:
            if name == "fwd":
                ms = triton.testing.do_bench(lambda: forward_tma(q, k, v, c, sm, cfg), warmup=25, rep=100)
            elif name == "dq":
                cfg = ta.KernelConfig(installed.fwd, installed.dkdv, tile)
                ms = triton.testing.do_bench(lambda: backward_tma(do, q, k, v, c, o, lse, sm, cfg), warmup=25, rep=100)
            else:
                ms = triton.testing.do_bench(lambda: backward_tma(do, q, k, v, c, o, lse, sm, cfg), warmup=25, rep=100)
        except Exception as e:  # out of resources at some tiles
            print(f"  {name} {tile}: {type(e).__name__} {str(e)[:100]}", flush=True)
            continue
        print(f"  TMA {name} tile {tuple(tile.__dict__.values())}: {ms:.3f} ms", flush=True)
        out_rows.append({"shape": shape, "kind": f"tma {name}", "tile": list(tile.__dict__.values()), "ms": ms})
        if ms < best[name][0]:
            best[name] = (ms, tile)
    # The whole backward with the best dq and dkdv tiles together.
    if best["dq"][1] and best["dkdv"][1]:
        cfg = ta.KernelConfig(best["fwd"][1] or installed.fwd, best["dkdv"][1], best["dq"][1])
        bwd = triton.testing.do_bench(lambda: backward_tma(do, q, k, v, c, o, lse, sm, cfg), warmup=25, rep=100)
        fwd = best["fwd"][0]
        print(f"  TMA best: fwd {fwd:.3f} ms, bwd {bwd:.3f} ms (fwd+bwd {3.5 * flops_fwd / (fwd + bwd) / 1e9:.0f} "
              f"TFLOP/s; pointer {base['fwd']:.3f} / {base['bwd']:.3f})", flush=True)
        out_rows.append({"shape": shape, "kind": "tma best", "fwd_ms": fwd, "bwd_ms": bwd,
                         "config": [list(t.__dict__.values()) for t in (cfg.fwd, cfg.dkdv, cfg.dq)]})


T_ = ta.TileConfig
SWEEP = {
    64: [("fwd", T_(64, 128, 4, 3)), ("fwd", T_(128, 64, 4, 3)), ("fwd", T_(128, 128, 8, 3)), ("fwd", T_(64, 64, 4, 3)),
         ("fwd", T_(128, 64, 4, 4)), ("fwd", T_(128, 128, 8, 2)),
         ("dq", T_(64, 128, 4, 3)), ("dq", T_(128, 64, 4, 3)), ("dq", T_(64, 64, 4, 3)), ("dq", T_(128, 128, 8, 2)),
         ("dq", T_(128, 64, 8, 3)),
         ("dkdv", T_(128, 64, 4, 2)), ("dkdv", T_(128, 64, 4, 3)), ("dkdv", T_(64, 64, 4, 3)),
         ("dkdv", T_(64, 128, 8, 2)), ("dkdv", T_(128, 128, 8, 2)), ("dkdv", T_(64, 128, 4, 2))],
    128: [("fwd", T_(128, 128, 8, 3)), ("fwd", T_(128, 128, 8, 2)), ("fwd", T_(64, 64, 4, 3)), ("fwd", T_(128, 64, 8, 3)),
          ("fwd", T_(64, 128, 4, 2)),
          ("dq", T_(128, 64, 8, 3)), ("dq", T_(64, 64, 4, 3)), ("dq", T_(128, 128, 8, 2)), ("dq", T_(64, 128, 8, 2)),
          ("dkdv", T_(64, 128, 8, 3)), ("dkdv", T_(64, 128, 8, 2)), ("dkdv", T_(32, 128, 8, 2)),
          ("dkdv", T_(64, 64, 4, 3)), ("dkdv", T_(128, 128, 8, 2))],
}
SHAPES = [(8, 12, 4096, 64), (1, 16, 16384, 64), (8, 16, 2048, 64), (2, 16, 8192, 64), (8, 8, 2048, 128),
          (1, 8, 16384, 128)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="correctness only (CPU under the interpreter)")
    ap.add_argument("--out", default="tma.json")
    args = ap.parse_args()
    if args.check:
        small = ta.KernelConfig(T_(32, 16, 4, 1), T_(16, 32, 4, 1), T_(32, 16, 4, 1))
        for T in (17, 100):
            print(T, check(2, 3, T, 16, torch.float32, "cpu", small))
        return
    rows = {"checks": [], "bench": []}
    for D, T in ((64, 4096), (128, 2048), (64, 16384)):
        errs = check(2, 4, T if T <= 4096 else 4096, D, torch.bfloat16, "cuda", ta.default_config(D, T))
        print("accuracy vs fp64", D, T, {k: f"{v:.1e}" for k, v in errs.items()}, flush=True)
        rows["checks"].append({"D": D, "T": T, **errs})
    for shape in SHAPES:
        bench_shape(shape, SWEEP[shape[3]], rows["bench"])
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

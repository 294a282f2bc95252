"""Session 2026-11-30 (ninth), an experiment for issue 3, not product code: does Triton's own warp
specialisation (tl.range(..., warp_specialize=True)) run and pay on the H200 for a causal FoX
forward with on-device tensor descriptors (tl.make_tensor_descriptor, which also needs no
host-side descriptor encoding)? A reduced forward (T a multiple of the tile, D 64 or 128, bf16,
the gate's key side relative to the query tile's first c, as kernels/triton_fwd.py does), with and
without warp_specialize, against kernels.forgetting_attention's forward (the product's, through
its entry point) on the same inputs: time and relative L2 difference. Usage:
python scripts/gpu/round45_ws.py out.json

The kernel assumes BM a multiple of BN (its diagonal loop starts at the query tile); the run of
this session (kernels/results/ws-h200-2026-11-30.json) also tried (64, 128), which is therefore
wrong there (relative L2 0.8, then an illegal address that ended the run before the head-dim-64
shapes); the configs below now skip it."""
import json
import sys
import traceback

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

from kernels import forgetting_attention

LOG2E = 1.4426950408889634


@triton.jit
def _tile(acc, m_i, l_i, q, k, v, ck, rows, cols, qk_scale, MASKED: tl.constexpr):
    s = tl.dot(q, tl.trans(k)) * qk_scale - ck[None, :]
    if MASKED:
        s = tl.where(rows[:, None] >= cols[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def ws_fwd(Q, K, V, C, O, B, T, H, qk_scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
           WS: tl.constexpr):
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BM
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    row0, col = b * T, h * D
    dq = tl.make_tensor_descriptor(Q, shape=[B * T, H * D], strides=[H * D, 1], block_shape=[BM, D])
    dk = tl.make_tensor_descriptor(K, shape=[B * T, H * D], strides=[H * D, 1], block_shape=[BN, D])
    dv = tl.make_tensor_descriptor(V, shape=[B * T, H * D], strides=[H * D, 1], block_shape=[BN, D])
    do = tl.make_tensor_descriptor(O, shape=[B * T, H * D], strides=[H * D, 1], block_shape=[BM, D])
    C += bh * T
    q = dq.load([row0 + start_m, col])
    c_ref = tl.load(C + start_m)
    rows = start_m + tl.arange(0, BM)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for start_n in tl.range(0, start_m, BN, warp_specialize=WS):
        cols = start_n + tl.arange(0, BN)
        k = dk.load([row0 + start_n, col])
        v = dv.load([row0 + start_n, col])
        ck = (tl.load(C + cols) - c_ref) * 1.4426950408889634
        acc, m_i, l_i = _tile(acc, m_i, l_i, q, k, v, ck, rows, cols, qk_scale, False)
    for start_n in range(start_m, start_m + BM, BN):
        cols = start_n + tl.arange(0, BN)
        k = dk.load([row0 + start_n, col])
        v = dv.load([row0 + start_n, col])
        ck = (tl.load(C + cols) - c_ref) * 1.4426950408889634
        acc, m_i, l_i = _tile(acc, m_i, l_i, q, k, v, ck, rows, cols, qk_scale, True)
    do.store([row0 + start_m, col], (acc / l_i[:, None]).to(O.dtype.element_ty))


def main(out_path):
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    rows = []
    for B, H, T, D in ((1, 8, 16384, 128), (8, 8, 2048, 128), (1, 16, 16384, 64), (8, 12, 4096, 64)):
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        log_f = torch.nn.functional.logsigmoid(torch.randn(B, T, H, device="cuda") + 3)
        c = log_f.permute(0, 2, 1).reshape(B * H, T).cumsum(-1).contiguous()
        flops = 4 * B * H * T * T * D / 2
        with torch.no_grad():
            want = forgetting_attention(q, k, v, log_f)
            ours_ms = do_bench(lambda: forgetting_attention(q, k, v, log_f))
        rows.append({"shape": [B, H, T, D], "kernel": "ours (entry point)", "ms": ours_ms, "tflops": flops / ours_ms / 1e9})
        print(f"{(B, H, T, D)} ours (entry point): {ours_ms:.3f} ms {flops / ours_ms / 1e9:.0f} TFLOP/s", flush=True)
        for ws in (False, True):
            for bm, bn, warps, stages in ((128, 128, 8, 3), (128, 64, 4, 3), (128, 128, 4, 2), (128, 64, 8, 3)):
                name = f"reduced, ws={ws}, ({bm}, {bn}, {warps}, {stages})"
                o = torch.full_like(q, float("nan"))
                try:
                    def run():
                        ws_fwd[(T // bm, B * H)](q, k, v, c, o, B, T, H, D ** -0.5 * LOG2E, D=D, BM=bm, BN=bn, WS=ws,
                                                  num_warps=warps, num_stages=stages)
                    run()
                    err = ((o.float() - want.float()).norm() / want.float().norm()).item()
                    ms = do_bench(run)
                    rows.append({"shape": [B, H, T, D], "kernel": name, "ms": ms, "tflops": flops / ms / 1e9, "rel_l2": err})
                    print(f"{(B, H, T, D)} {name}: {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOP/s rel L2 {err:.1e}", flush=True)
                except Exception as e:  # the experiment's question: does it compile and run at all
                    msg = traceback.format_exception_only(type(e), e)[-1].strip()[:300]
                    rows.append({"shape": [B, H, T, D], "kernel": name, "error": msg})
                    print(f"{(B, H, T, D)} {name}: FAILED {msg}", flush=True)
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "rows": rows}, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])

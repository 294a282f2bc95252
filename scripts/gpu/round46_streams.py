"""Experiment (session 2026-11-30, tenth): does the backward gain from running dq_kernel and
dkdv_kernel at the same time instead of one after the other?

Today dkdv_kernel waits for dq_kernel: it reads delta = rowsum(O dO), which dq_kernel computes,
and subtracts its column sums from the dC that dq_kernel filled. With delta computed beforehand and
dC in two buffers, the two kernels are independent; on two streams their programs can share the
SMs (one program's matmuls beside another's exponentials) and fill each other's tails. This times
that upper bound before anything is built: the installed kernels, the installed tiles, bf16, gate
on, no pruning; "one after the other" is the two launches as the product makes them, "together" the
same two launches on two streams after delta was computed (its time counted separately).

    python scripts/gpu/round46_streams.py out.json
"""
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernels import triton_attention as ta  # noqa: E402

SHAPES = [(8, 12, 4096, 64), (8, 16, 2048, 64), (2, 16, 8192, 64), (1, 16, 16384, 64), (8, 8, 2048, 128),
          (1, 8, 16384, 128)]


def run(B, H, N, D) -> dict:
    q, k, v, do = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    log_f = F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0)
    sm = D ** -0.5
    cfg = ta.default_config(D, N, ta.use_tma(q, k, v))
    o, lse, c, _ = ta._forward_gated(q, k, v, log_f, sm, cfg)
    tma = ta._tma_launch(q, k, v, o, do)
    delta, dc1, dc2 = (torch.zeros_like(lse) for _ in range(3))
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

    def dq_launch():
        ta._launch_dq(q, k, v, c, o, do, lse, delta, dq, dc1, lse, sm, cfg, tma, False)

    def dkdv_launch():
        ta._launch_dkdv(q, k, v, c, do, lse, delta, dk, dv, dc2, lse, sm, cfg, tma, False)

    def sequential():
        dq_launch()
        dkdv_launch()

    def delta_torch():
        delta.copy_((o.float() * do.float()).sum(-1).permute(0, 2, 1).reshape(B * H, N))

    def together():
        main = torch.cuda.current_stream()
        s1.wait_stream(main)
        s2.wait_stream(main)
        with torch.cuda.stream(s1):
            dq_launch()
        with torch.cuda.stream(s2):
            dkdv_launch()
        main.wait_stream(s1)
        main.wait_stream(s2)

    sequential()
    delta_torch()
    together()
    torch.cuda.synchronize()
    t = {name: do_bench(fn, warmup=25, rep=200, return_mode="median")
         for name, fn in (("dq", dq_launch), ("dkdv", dkdv_launch), ("one after the other", sequential),
                          ("together (two streams)", together), ("delta (torch)", delta_torch),
                          ("full backward", lambda: ta._backward(do, q, k, v, c, o, lse, sm, cfg)))}
    bwd_flops = 2.5 * 4 * B * H * N * N * D / 2
    return {"shape": [B, H, N, D], "config": str(cfg), "ms": t,
            "bwd_tflops_sequential": bwd_flops / t["one after the other"] / 1e9,
            "bwd_tflops_together": bwd_flops / t["together (two streams)"] / 1e9}


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "streams.json")
    rows = []
    for shape in SHAPES:
        r = run(*shape)
        rows.append(r)
        print(json.dumps(r), flush=True)
        torch.cuda.empty_cache()
    out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "triton": __import__("triton").__version__, "rows": rows}, indent=1))
    print(f"\n{'shape':<22}{'dq':>8}{'dkdv':>8}{'seq':>8}{'together':>10}{'delta':>8}{'gain':>7}")
    for r in rows:
        t = r["ms"]
        gain = t["one after the other"] / t["together (two streams)"]
        print(f"{','.join(map(str, r['shape'])):<22}{t['dq']:>8.3f}{t['dkdv']:>8.3f}{t['one after the other']:>8.3f}"
              f"{t['together (two streams)']:>10.3f}{t['delta (torch)']:>8.3f}{gain:>7.3f}")


if __name__ == "__main__":
    main()

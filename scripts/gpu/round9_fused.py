"""Session 2026-11-30 (fourth), ran at commit f391917 (the kernel was removed after it): the fused backward (TMA dQ reduction)
against the split one. Correctness against the split backward and fp64 at 1000 tokens, then backward time per
shape and tile. Results: kernels/results/fused-bwd-h200-2026-11-30.json."""
import json
import os
import time
import dataclasses

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import kernels.triton_attention as ta
from kernels.naive import forgetting_attention_grads_chunked

out_dir = os.environ.get("OUT", "/tmp")
res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": __import__("triton").__version__}


def inputs(B, H, N, D, dtype=torch.bfloat16):
    q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=dtype) for _ in range(3))
    log_f = F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0)
    return q, k, v, log_f


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


# 1. correctness
for D in (64, 128):
    for fused in ((64, 64, 4, 2), (64, 128, 8, 2)):
        for tma in (True, False):
            ta.FUSED_TMA = tma
            q, k, v, log_f = inputs(2, 3, 1000, D)
            c = ta.gate_cumsum(log_f)
            base = ta.default_config(D, 1000)
            o, lse = ta._forward(q, k, v, c, D**-0.5, base)
            do = torch.randn_like(o)
            try:
                got = ta._backward(do, q, k, v, c, o, lse, D**-0.5, dataclasses.replace(base, fused=ta.TileConfig(*fused)))
                split = ta._backward(do, q, k, v, c, o, lse, D**-0.5, base)
                ref = forgetting_attention_grads_chunked(q.double(), k.double(), v.double(), log_f.double(), do.double(), chunk=256)
                line = {n: (rel(g, r), rel(s, r)) for n, g, s, r in zip(("dq", "dk", "dv", "dlogf"), got, split, ref[1:])}
            except Exception as e:
                line = f"{type(e).__name__}: {str(e)[:400]}"
            print("check", D, fused, "tma" if tma else "atomics", line, flush=True)
            res[f"check {D} {fused} {tma}"] = line
ta.FUSED_TMA = True

# 2. timing
SHAPES = [(8, 12, 4096, 64), (8, 16, 2048, 64), (2, 16, 8192, 64), (1, 16, 16384, 64), (8, 8, 2048, 128), (1, 8, 16384, 128)]
TILES = {64: [(64, 64, 4, 2), (64, 64, 4, 3), (32, 64, 4, 3), (64, 128, 8, 2), (64, 128, 8, 3), (32, 128, 4, 2),
              (32, 128, 8, 3), (128, 64, 4, 2), (128, 128, 8, 2), (64, 128, 4, 2)],
         128: [(64, 64, 4, 2), (32, 64, 4, 2), (64, 128, 8, 2), (64, 64, 8, 2), (32, 128, 8, 2), (128, 64, 8, 2),
               (64, 128, 8, 1), (32, 64, 4, 3)]}
for B, H, N, D in SHAPES:
    q, k, v, log_f = inputs(B, H, N, D)
    c = ta.gate_cumsum(log_f)
    base = ta.default_config(D, N)
    o, lse = ta._forward(q, k, v, c, D**-0.5, base)
    do = torch.randn_like(o)
    flops = 2.5 * 4 * B * H * N * N * D / 2
    label = f"{B},{H},{N},{D}"
    t = do_bench(lambda: ta._backward(do, q, k, v, c, o, lse, D**-0.5, base), warmup=10, rep=50, return_mode="median")
    print(f"{label} split {t:.3f} ms {flops / t / 1e9:.0f} TFLOP/s", flush=True)
    res[f"{label} split"] = t
    for tile in TILES[D]:
        cfg = dataclasses.replace(base, fused=ta.TileConfig(*tile))
        t0 = time.time()
        try:
            t = do_bench(lambda: ta._backward(do, q, k, v, c, o, lse, D**-0.5, cfg), warmup=10, rep=50, return_mode="median")
        except Exception as e:
            print(f"{label} fused {tile} failed {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        print(f"{label} fused {tile} {t:.3f} ms {flops / t / 1e9:.0f} TFLOP/s ({time.time() - t0:.0f} s)", flush=True)
        res[f"{label} fused {tile}"] = t
    json.dump(res, open(f"{out_dir}/fused.json", "w"), indent=1)

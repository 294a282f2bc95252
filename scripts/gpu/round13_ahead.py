"""Session 2026-11-30 (fourth), at commit f8b963a: the forward and dQ key loops software-pipelined by
hand (the next tile's Q K^T, and dO V^T, issued before this tile's exponentials: FWD_AHEAD and
DQ_AHEAD in kernels/triton_attention.py) against the plain loops. Accuracy against fp64 at 1024,
then kernel times per shape and tile."""
import dataclasses
import json
import os

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import kernels.triton_attention as ta
from kernels.naive import forgetting_attention_grads_chunked

out_dir = os.environ.get("OUT", "/tmp")
res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": __import__("triton").__version__}


def inputs(B, H, N, D):
    q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    return q, k, v, F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0)


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


for D in (64, 128):
    q, k, v, log_f = inputs(2, 3, 1024, D)
    do = torch.randn_like(q)
    ref = forgetting_attention_grads_chunked(q.double(), k.double(), v.double(), log_f.double(), do.double(), chunk=256)
    for ahead in (False, True):
        ta.FWD_AHEAD = ta.DQ_AHEAD = ahead
        qs, ks, vs, ls = (t.clone().requires_grad_() for t in (q, k, v, log_f))
        o = ta.forgetting_attention_triton(qs, ks, vs, ls)
        g = torch.autograd.grad(o, (qs, ks, vs, ls), do)
        line = {n: round(rel(a, b), 5) for n, a, b in zip(("o", "dq", "dk", "dv", "dlogf"), (o, *g), ref)}
        print("check", D, "ahead" if ahead else "plain", line, flush=True)
        res[f"check {D} {ahead}"] = line

SHAPES = [(8, 12, 4096, 64), (8, 16, 2048, 64), (2, 16, 8192, 64), (1, 16, 16384, 64), (8, 8, 2048, 128), (1, 8, 16384, 128)]
FWD = {64: [None, (128, 64, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3), (64, 128, 4, 3), (128, 128, 8, 3)],
       128: [None, (128, 64, 8, 3), (64, 64, 4, 3), (128, 128, 8, 2), (64, 128, 8, 2)]}
DQ = {64: [None, (128, 64, 4, 3), (64, 64, 4, 3), (128, 64, 8, 3), (64, 128, 4, 3)],
      128: [None, (128, 64, 8, 3), (64, 64, 4, 3), (128, 32, 8, 3)]}
for B, H, N, D in SHAPES:
    q, k, v, log_f = inputs(B, H, N, D)
    c = ta.gate_cumsum(log_f)
    base = ta.default_config(D, N)
    o, lse = ta._forward(q, k, v, c, D**-0.5, base)
    do = torch.randn_like(o)
    flops = 4 * B * H * N * N * D / 2
    label = f"{B},{H},{N},{D}"
    for part, space in (("fwd", FWD[D]), ("bwd", DQ[D])):
        for tile in space:
            cfg = base if tile is None else dataclasses.replace(base, **{"fwd" if part == "fwd" else "dq": ta.TileConfig(*tile)})
            row = []
            for ahead in (False, True):
                ta.FWD_AHEAD = ta.DQ_AHEAD = ahead
                fn = (lambda: ta._forward(q, k, v, c, D**-0.5, cfg)) if part == "fwd" else (
                    lambda: ta._backward(do, q, k, v, c, o, lse, D**-0.5, cfg))
                try:
                    ms = do_bench(fn, warmup=10, rep=40, return_mode="median")
                except Exception as e:
                    print(f"{label} {part} {tile} ahead={ahead} failed {type(e).__name__}: {str(e)[:150]}", flush=True)
                    ms = float("nan")
                row.append(ms)
            factor = 1.0 if part == "fwd" else 2.5
            t = tile or dataclasses.astuple(base.fwd if part == "fwd" else base.dq)
            print(f"{label} {part} {t}{' (installed)' if tile is None else ''}: plain {row[0]:.3f} ms "
                  f"({factor * flops / row[0] / 1e9:.0f}), ahead {row[1]:.3f} ms ({factor * flops / row[1] / 1e9:.0f})", flush=True)
            res[f"{label} {part} {t}"] = row
    json.dump(res, open(f"{out_dir}/ahead.json", "w"), indent=1)

"""Tile-size search for the Triton kernel on the GPU at hand.

    python -m kernels.tune [--out tune.json]

For each head-dim bucket (64, 128) it times every forward tile config, then every dK/dV config
(dQ at its default), then every dQ config (dK/dV at its best), each by the median of do_bench on
bf16 inputs at N = 8192, and writes the winners as JSON. ``install`` puts such a JSON into the
table that kernels.triton_attention reads; the winners are copied into H200_CONFIGS by hand,
with the run recorded in kernels/BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
from pathlib import Path

import torch

from kernels import triton_attention as ta

SHAPES = {64: (2, 16, 8192, 64), 128: (2, 8, 8192, 128)}
FWD_SPACE = list(itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4)))
DKDV_SPACE = list(itertools.product((32, 64, 128), (64, 128), (4, 8), (2, 3)))
DQ_SPACE = list(itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3)))


def install(table: dict) -> None:
    for d, cfg in table.items():
        ta.H200_CONFIGS[int(d)] = ta.KernelConfig(*(ta.TileConfig(*cfg[p]) for p in ("fwd", "dkdv", "dq")))


def _time(fn) -> float:
    from triton.testing import do_bench

    try:
        return do_bench(fn, warmup=10, rep=40, return_mode="median")
    except Exception as e:  # e.g. out of shared memory for this tile shape
        print(f"    skipped: {type(e).__name__}: {str(e)[:120]}")
        return float("inf")


def tune_head_dim(d: int) -> dict:
    B, H, N, D = SHAPES[d]
    q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    log_f = torch.nn.functional.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0)
    c = log_f.cumsum(1)
    scale = D**-0.5
    base = ta.H200_CONFIGS[d]
    o, lse = ta._forward(q, k, v, c, scale, base)
    do = torch.randn_like(o)
    flops = 4 * B * H * N * N * D / 2

    def best(space, make, run, label):
        timed = []
        for tile in space:
            cfg = make(ta.TileConfig(*tile))
            ms = _time(lambda: run(cfg))
            timed.append((ms, tile))
        timed.sort()
        for ms, tile in timed[:3]:
            factor = 1.0 if label == "fwd" else 2.5
            print(f"  D={d} {label:<5} {tile}  {ms:.3f} ms  {factor * flops / ms / 1e9:.0f} TFLOP/s", flush=True)
        return ta.TileConfig(*timed[0][1])

    fwd = best(FWD_SPACE, lambda t: dataclasses.replace(base, fwd=t), lambda cfg: ta._forward(q, k, v, c, scale, cfg), "fwd")
    bwd = lambda cfg: ta._backward(do, q, k, v, c, o, lse, scale, cfg)  # noqa: E731
    dkdv = best(DKDV_SPACE, lambda t: dataclasses.replace(base, dkdv=t), bwd, "dkdv")
    dq = best(DQ_SPACE, lambda t: dataclasses.replace(base, dkdv=dkdv, dq=t), bwd, "bwd")
    return {"fwd": dataclasses.astuple(fwd), "dkdv": dataclasses.astuple(dkdv), "dq": dataclasses.astuple(dq)}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tune.json")
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    args = ap.parse_args(argv)
    table = {d: tune_head_dim(d) for d in args.head_dims}
    Path(args.out).write_text(json.dumps(table, indent=1))
    print(json.dumps(table))


if __name__ == "__main__":
    main()

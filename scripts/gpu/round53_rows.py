"""Experiment (session 2026-11-30, tenth): dK/dV's tiles the other way round.

round47 found dkdv_kernel the backward's slowest kernel (415-426 TFLOP/s of real work at 16k, dQ
454-553). It computes S^T = K Q^T (keys by queries): k and v are the A operands of two of its four
matmuls, which Triton may keep in registers beside the two fp32 accumulators. KernelConfig.dkdv_rows
computes S = Q K^T (queries by keys) instead: k and v become B operands, read from shared memory,
and P and dS reach dV and dK transposed through shared memory, as FlashAttention-3's backward
does. Each dK/dV tile of a small grid, both orientations, launched alone (do_bench median), the
outputs checked against the installed config's.

    python scripts/gpu/round53_rows.py out.json

Ran at commit e60108a; the rows orientation lost on every shape and tile (kernels/BENCHMARKS.md)
and was removed, so this script needs that commit's kernels.
"""
import dataclasses
import json
import multiprocessing as mp
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from round47_warps import SHAPES, inputs, rel  # noqa: E402

from kernels import triton_attention as ta  # noqa: E402

TILES = [(64, 64, 4, 2), (128, 64, 4, 2), (128, 64, 4, 3), (64, 128, 4, 2), (64, 128, 8, 2), (64, 128, 8, 3),
         (128, 128, 8, 2), (32, 128, 8, 2), (128, 128, 4, 2)]


def variants(D, N):
    base = ta.default_config(D, N, True)
    return [("installed", base)] + [
        (f"{'rows' if rows else 'cols'} {t}", dataclasses.replace(base, dkdv=ta.TileConfig(*t), dkdv_rows=rows))
        for t in TILES for rows in (False, True)]


def _compile(D) -> int:
    q, k, v, do, log_f = inputs(1, 8, 1024, D)
    n = 0
    for _, cfg in variants(D, 16384):
        try:
            o, lse, c, _ = ta._forward_gated(q, k, v, log_f, D ** -0.5, cfg)
            ta._backward(do, q, k, v, c, o, lse, D ** -0.5, cfg)
            n += 1
        except Exception as e:
            print(f"compile {cfg}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    torch.cuda.synchronize()
    return n


def run(B, H, N, D) -> list:
    q, k, v, do, log_f = inputs(B, H, N, D)
    sm = D ** -0.5
    tma = ta._tma_launch(q, k, v)
    flops = 4 * B * H * N * N * D / 2
    base = ta.default_config(D, N, True)
    o, lse, c, _ = ta._forward_gated(q, k, v, log_f, sm, base)
    delta, dc = torch.zeros_like(lse), torch.zeros_like(lse)
    dq = torch.empty_like(q)
    ta._launch_dq(q, k, v, c, o, do, lse, delta, dq, dc, lse, sm, base, tma, False)  # delta, rowsum(dS)
    dc_rows = dc.clone()
    rows, ref = [], None
    for name, cfg in variants(D, N):
        dk, dv = torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))
        try:
            def launch():
                dc.copy_(dc_rows)
                ta._launch_dkdv(q, k, v, c, do, lse, delta, dk, dv, dc, lse, sm, cfg, tma, False)
            launch()
            outs = {"dk": dk.clone(), "dv": dv.clone(), "dc": dc.clone()}
            ref = ref or outs
            err = max(rel(outs[n_], ref[n_]) for n_ in outs)
            ms = do_bench(launch, warmup=25, rep=100, return_mode="median")
            rows.append({"shape": [B, H, N, D], "variant": name, "ms": ms, "max_rel_vs_installed": err,
                         "tflops_real": 2.0 * flops / ms / 1e9})
        except Exception as e:
            rows.append({"shape": [B, H, N, D], "variant": name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "rows.json")
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
        print("compiled", list(pool.map(_compile, (64, 128))), flush=True)
    rows = []
    for shape in SHAPES:
        rows += run(*shape)
        torch.cuda.empty_cache()
    out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "triton": __import__("triton").__version__, "rows": rows}, indent=1))
    print("\ndK/dV alone: ms (real-work TFLOP/s), cols = S^T (installed orientation), rows = S")
    for shape in SHAPES:
        mine = [r for r in rows if r["shape"] == list(shape)]
        inst = next(r for r in mine if r["variant"] == "installed")
        print(f"{','.join(map(str, shape))}: installed {inst.get('ms', float('nan')):.3f}")
        for t in TILES:
            cells = []
            for o in ("cols", "rows"):
                r = next(r for r in mine if r["variant"] == f"{o} {t}")
                cells.append(f"{o} error" if "error" in r else
                             f"{o} {r['ms']:.3f} ({r['tflops_real']:.0f}) err {r['max_rel_vs_installed']:.0e}")
            print(f"  {str(t):<18} " + "   ".join(cells))


if __name__ == "__main__":
    main()

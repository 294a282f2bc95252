"""Experiment (session 2026-11-30, tenth): tiles of 16 warps, which kernels.tune never tried.

round46_streams.py showed where the backward's time goes: counting the work each kernel really
does (dK/dV 4 matmuls per tile pair, dQ 3), dq_kernel runs at 456-553 TFLOP/s and dkdv_kernel at
415-425, the one that holds two (BLOCK_N, D) fp32 accumulators and was found register-bound
(every ptxas cap made it slower). With 16 warps (four warpgroups) the same tile spreads its
accumulators over twice the threads: half the registers per thread, at most 128 each. Does that,
or a taller tile it makes possible, beat the installed tiles? Each kernel is timed alone (its own
launch, do_bench median), its outputs checked against the installed tile's.

    python scripts/gpu/round47_warps.py out.json
"""
import dataclasses
import json
import multiprocessing as mp
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernels import triton_attention as ta  # noqa: E402

TC = ta.TileConfig
SHAPES = [(8, 12, 4096, 64), (8, 16, 2048, 64), (2, 16, 8192, 64), (1, 16, 16384, 64), (8, 8, 2048, 128),
          (1, 8, 16384, 128)]
# Per head dim and kernel: (BLOCK_M, BLOCK_N, warps, stages) beside the installed one.
TRIES = {
    64: {"fwd": [(128, 128, 8, 3), (128, 128, 16, 2), (256, 64, 16, 2), (256, 128, 16, 2)],
         "dkdv": [(128, 128, 8, 2), (128, 128, 16, 2), (64, 128, 16, 2), (128, 256, 16, 2)],
         "dq": [(128, 128, 8, 2), (256, 64, 16, 2), (256, 128, 16, 2), (128, 128, 16, 2)]},
    128: {"fwd": [(128, 128, 16, 2), (256, 64, 16, 2), (256, 128, 16, 2), (128, 64, 16, 3)],
          "dkdv": [(64, 128, 16, 2), (128, 128, 16, 2), (64, 128, 16, 3), (32, 128, 16, 2)],
          "dq": [(128, 128, 16, 2), (256, 64, 16, 2), (128, 64, 16, 3), (256, 128, 16, 1)]},
}


def inputs(B, H, N, D):
    q, k, v, do = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    return q, k, v, do, F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0)


def variants(D, N):
    base = ta.default_config(D, N, True)
    out = [("installed", base)]
    for kernel, tiles in TRIES[D].items():
        out += [(f"{kernel} {t}", dataclasses.replace(base, **{kernel: TC(*t)})) for t in tiles]
    return out


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


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def run(B, H, N, D) -> list:
    q, k, v, do, log_f = inputs(B, H, N, D)
    sm = D ** -0.5
    tma = ta._tma_launch(q, k, v)
    flops = 4 * B * H * N * N * D / 2  # one causal matmul pair's worth: forward's S and PV
    rows, ref = [], None
    for name, cfg in variants(D, N):
        kernel = name.split()[0]
        try:
            o, lse, c, _ = ta._forward_gated(q, k, v, log_f, sm, cfg)
            delta, dc = torch.zeros_like(lse), torch.zeros_like(lse)
            dq, dk, dv = (torch.empty_like(q) for _ in range(3))
            launch = {
                "fwd": lambda: ta._forward(q, k, v, c, sm, cfg),
                "dq": lambda: ta._launch_dq(q, k, v, c, o, do, lse, delta, dq, dc, lse, sm, cfg, tma, False),
                "dkdv": lambda: ta._launch_dkdv(q, k, v, c, do, lse, delta, dk, dv, dc, lse, sm, cfg, tma, False),
            }
            launch["dq"]()
            launch["dkdv"]()
            outs = {"o": o, "dq": dq, "dk": dk, "dv": dv}
            if ref is None:
                ref = {n_: t.clone() for n_, t in outs.items()}
            err = max(rel(outs[n_], ref[n_]) for n_ in outs)
            kernels = ("fwd", "dq", "dkdv") if kernel == "installed" else (kernel,)
            # real matmul work: forward 2 per tile pair, dq 3, dkdv 4 (flops counts 2)
            ms = {kk: do_bench(launch[kk], warmup=25, rep=100, return_mode="median") for kk in kernels}
            work = {"fwd": 1.0, "dq": 1.5, "dkdv": 2.0}
            rows.append({"shape": [B, H, N, D], "variant": name, "ms": ms, "max_rel_vs_installed": err,
                         "tflops_real": {kk: work[kk] * flops / t / 1e9 for kk, t in ms.items()}})
        except Exception as e:
            rows.append({"shape": [B, H, N, D], "variant": name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "warps.json")
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
        print("compiled", list(pool.map(_compile, (64, 128))), flush=True)
    rows = []
    for shape in SHAPES:
        rows += run(*shape)
        torch.cuda.empty_cache()
    out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "triton": __import__("triton").__version__, "rows": rows}, indent=1))
    print("\nms (real-work TFLOP/s); installed first")
    for shape in SHAPES:
        print(",".join(map(str, shape)))
        for r in rows:
            if r["shape"] == list(shape):
                cells = "error " + r["error"][:60] if "error" in r else "  ".join(
                    f"{k} {t:.3f} ({r['tflops_real'][k]:.0f})" for k, t in r["ms"].items())
                print(f"  {r['variant']:<28} {cells}  err {r.get('max_rel_vs_installed', float('nan')):.1e}")


if __name__ == "__main__":
    main()

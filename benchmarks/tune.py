"""Tile-size search for the attention kernels on the GPU at hand, per benchmark shape.

    python benchmarks/tune.py [--out tune.json] [--jobs 12] [--quick] [--shapes B,H,N,D ...]

For each (B, H, N, D) of benchmarks/common.py's ATTENTION_SHAPES and the 125M training shape it times every forward
tile config, then the backward (every dK/dV config with dQ at its default, then every dQ config
with dK/dV at its best), each by the median of do_bench on bf16 inputs. ``--quick`` skips the
search and times the installed configs. All configs
are compiled first by ``--jobs`` processes in parallel (Triton's disk cache then serves the timing
process), since compiling one by one takes longer than timing. Writes the per-shape results and
a table by sequence length (the winner at each benchmarked N serves lengths up to N, the longest
one everything beyond) that ``install`` puts into foxwb.kernels.attention.configs.H200_CONFIGS (or
POINTER_CONFIGS where the kernels read the inputs through pointers, not TMA); the
committed table is copied from such a run (docs/kernels.md, "Tiles"). ``--shapes`` searches
only the shapes named (a few minutes of GPU time for one shape instead of all six): its JSON has
the per-shape winners but no table, since a table from some lengths would drop the others' rows.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor

import torch
from triton.testing import do_bench

import common
from foxwb.kernels.attention import configs, launch
from foxwb.kernels.attention.configs import KernelConfig, TileConfig

# (BLOCK_M, BLOCK_N, warps, stages), and for the forward whether its loop runs ahead (fwd_ahead)
FWD_SPACE = list(itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4), (False, True)))
DKDV_SPACE = list(itertools.product((32, 64, 128), (64, 128), (4, 8), (2, 3, 4)))
DQ_SPACE = list(itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4)))
# The 125M presets' attention at context 4096 (studies/throughput/): batch 8, 12 heads of 64.
TRAIN_SHAPES = [(8, 12, 4096, 64)]


def install(table: dict) -> None:
    """table: {head_dim: [[longest N, {"fwd": tile + [ahead], "dkdv": tile, "dq": tile}], ...]},
    into the tile table of the load path this GPU takes (TMA or pointers)."""
    for d, rows in table.items():
        (configs.H200_CONFIGS if tma_path(int(d)) else configs.POINTER_CONFIGS)[int(d)] = tuple(
            (int(n), _config(c)) for n, c in rows)


def tma_path(d: int) -> bool:
    """Whether the kernels read the search's (contiguous) inputs of head dim d through TMA."""
    q = torch.empty(1, 16, 1, d, device="cuda", dtype=torch.bfloat16)
    return launch.use_tma(q, q, q)


def _config(c: dict) -> KernelConfig:
    fwd = list(c["fwd"]) + [False]  # tables written before fwd_ahead have 4 entries
    return KernelConfig(TileConfig(*fwd[:4]), TileConfig(*c["dkdv"]), TileConfig(*c["dq"]), bool(fwd[4]))


def _with_fwd(base: KernelConfig, t) -> KernelConfig:
    return dataclasses.replace(base, fwd=TileConfig(*t[:4]), fwd_ahead=bool(t[4]))


def _candidates(d: int, n: int) -> list[KernelConfig]:
    """Every config the search below will time for head dim d (compiled ahead in parallel)."""
    base = configs.default_config(d, n, tma_path(d))
    out = [_with_fwd(base, t) for t in FWD_SPACE]
    out += [dataclasses.replace(base, dkdv=TileConfig(*t)) for t in DKDV_SPACE]
    out += [dataclasses.replace(base, dq=TileConfig(*t)) for t in DQ_SPACE]
    return out


def _inputs(B, H, N, D):
    q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    log_f = torch.nn.functional.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0)
    return q, k, v, launch.gate_cumsum(log_f)


def _compile(args) -> int:
    """Runs each config once on a small input of the same head count and dim: the compiled
    kernels land in Triton's cache, keyed by what the long inputs share (dtypes, constexprs,
    divisibility of strides and lengths)."""
    H, D, cfgs = args
    q, k, v, c = _inputs(1, H, 512, D)
    done = 0
    for cfg in cfgs:
        try:
            o, lse = launch.forward(q, k, v, c, D**-0.5, cfg)
            launch.backward(torch.randn_like(o), q, k, v, c, o, lse, D**-0.5, cfg)
            done += 1
        except Exception:  # e.g. out of shared memory: the timing pass reports it
            pass
    torch.cuda.synchronize()
    return done


def precompile(jobs: int, shapes: list) -> None:
    work = []
    for H, D in {(H, D) for _, H, _, D in shapes}:
        cfgs = list(dict.fromkeys(c for _, h, n, d in shapes if (h, d) == (H, D) for c in _candidates(D, n)))
        work += [(H, D, cfgs[i::jobs]) for i in range(jobs)]
    t0 = time.time()
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        n = sum(pool.map(_compile, work))
    print(f"compiled {n} configs in {time.time() - t0:.0f} s", flush=True)


def _time(fn) -> float:
    try:
        return do_bench(fn, warmup=10, rep=40, return_mode="median")
    except Exception as e:  # e.g. out of shared memory for this tile shape
        print(f"    skipped: {type(e).__name__}: {str(e)[:120]}")
        return float("inf")


def tune_shape(B, H, N, D, search: bool = True) -> dict:
    q, k, v, c = _inputs(B, H, N, D)
    scale = D**-0.5
    base = configs.default_config(D, N, tma_path(D))
    o, lse = launch.forward(q, k, v, c, scale, base)
    do = torch.randn_like(o)
    flops = 4 * B * H * N * N * D / 2
    label = f"{B},{H},{N},{D}"

    def best(space, make, run, what, factor):
        timed = sorted((_time(lambda: run(make(t))), t) for t in space)
        for ms, tile in timed[:3]:
            print(f"  {label} {what:<6} {tile}  {ms:.3f} ms  {factor * flops / ms / 1e9:.0f} TFLOP/s", flush=True)
        return timed[0]

    run_fwd = lambda cfg: launch.forward(q, k, v, c, scale, cfg)  # noqa: E731
    run_bwd = lambda cfg: launch.backward(do, q, k, v, c, o, lse, scale, cfg)  # noqa: E731
    if not search:
        return _report(label, flops, base, _time(lambda: run_fwd(base)), _time(lambda: run_bwd(base)))
    fwd_ms, fwd = best(FWD_SPACE, lambda t: _with_fwd(base, t), run_fwd, "fwd", 1.0)
    _, dkdv = best(DKDV_SPACE, lambda t: dataclasses.replace(base, dkdv=TileConfig(*t)), run_bwd, "dkdv", 2.5)
    bwd_ms, dq = best(DQ_SPACE, lambda t: dataclasses.replace(base, dkdv=TileConfig(*dkdv), dq=TileConfig(*t)),
                      run_bwd, "bwd", 2.5)
    return _report(label, flops, _config({"fwd": fwd, "dkdv": dkdv, "dq": dq}), fwd_ms, bwd_ms)


def _report(label, flops, cfg, fwd_ms, bwd_ms) -> dict:
    chosen = {p: dataclasses.astuple(getattr(cfg, p)) for p in ("fwd", "dkdv", "dq")}
    chosen["fwd"] += (cfg.fwd_ahead,)
    print(f"  {label} chosen {chosen}: fwd {flops / fwd_ms / 1e9:.0f}, bwd {2.5 * flops / bwd_ms / 1e9:.0f}, "
          f"fwd+bwd about {3.5 * flops / (fwd_ms + bwd_ms) / 1e9:.0f} TFLOP/s", flush=True)
    return {"config": chosen, "fwd_ms": fwd_ms, "bwd_ms": bwd_ms}


def length_table(per_shape: dict) -> dict:
    table = {}
    for key, r in per_shape.items():
        _, _, n, d = map(int, key.split(","))
        table.setdefault(d, []).append([n, r["config"]])
    for rows in table.values():
        rows.sort(key=lambda row: row[0])
        rows[-1][0] = 1 << 62  # the longest benchmarked length's config serves every longer one
    return table


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<gpu>_tune.json)")
    ap.add_argument("--jobs", type=int, default=12, help="processes compiling configs ahead of timing")
    ap.add_argument("--quick", action="store_true", help="no search: time the installed configs")
    ap.add_argument("--shapes", nargs="+", type=common.parse_shape, metavar="B,H,N,D",
                    help="only these shapes (default: the benchmark's and the 125M training shape); no table")
    args = ap.parse_args(argv)
    shapes = args.shapes or common.ATTENTION_SHAPES + TRAIN_SHAPES
    if args.jobs > 1 and not args.quick:
        precompile(args.jobs, shapes)
    per_shape = {",".join(map(str, s)): tune_shape(*s, search=not args.quick) for s in shapes}
    out = {"per_shape": per_shape, "tma": {d: tma_path(d) for d in sorted({s[3] for s in shapes})}}
    if not args.shapes:
        out["table"] = length_table(per_shape)
    common.write(args.out, "tune", out, argv)
    print(json.dumps(out.get("table", per_shape)))


if __name__ == "__main__":
    main()

"""Benchmark: our forgetting attention beside its peers, in one run on one GPU.

    python benchmarks/attention.py [--peers .peers] [--out FILE] [--configs tune.json] [--only K,K] [--graphs] [--split]

For each (B, H, N, D): forward and forward+backward TFLOP/s (FlashAttention convention: causal
forward = 4 B H N^2 D / 2 FLOPs, forward+backward = 3.5 x that) from the median of
triton.testing.do_bench, and the peak memory of one forward+backward beyond the inputs. Peers:
SDPA's flash and cuDNN backends (no gate), FlexAttention with a forget-gate score_mod,
flash-linear-attention's parallel_forgetting_attn and the official FoX kernel (both from --peers,
never from this repository). Every gated kernel is first checked against an fp64 reference.
Prints a table and writes JSON. ``--graphs`` also times each forward+backward replayed as a CUDA
graph (``fwd_bwd_graph_ms``): the kernels' own time, as a compiled training step sees it, without
the eager call's host time, which dominates at 2k (docs/kernels.md). ``--only`` measures the named
kernels alone. ``--split`` says where one eager forward+backward's time goes (``split`` in each
row): the host's time to issue it while the GPU runs behind (``host_ms``), each GPU kernel's time
per call (torch.profiler), and the host's Python functions with the most own time (cProfile).

Two rows run with adaptive computation pruning (docs/fox-notes.md) at ln eps = -10: ours
(``log_pruning_tolerance``) and the official kernel (``adaptive_threshold="auto"``, the same
threshold formula). Their TFLOP/s are effective: the full causal FLOPs over the time taken, while
they compute only the tiles the gates leave non-negligible; for ours the JSON records the share of
the causal key positions its forward visited (``kept_fraction``). The inputs' gates,
log f = logsigmoid(randn + 3), about -0.05 per token, are the peers' own benchmark's (docs/kernels.md).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from triton.testing import do_bench, do_bench_cudagraph

import common
import tune
from foxwb.kernels.attention import pruning
from foxwb.kernels.attention.configs import default_config
from foxwb.kernels.attention.launch import fwd_tiles, gate_cumsum, use_tma
from foxwb.kernels.attention.naive import forgetting_attention_grads_chunked
from foxwb.kernels.attention.op import forgetting_attention_triton

LOG_EPS = -10.0
PRUNED = "ours, ACP"


def kept_fraction(q, k, log_f) -> float:
    """Share of the causal key positions our pruned forward visits on these inputs."""
    D, T = q.shape[-1], q.shape[1]
    m, n = fwd_tiles(q, k, k, default_config(D, T, use_tma(q, k)))  # the forward's tiles, Gluon or Triton
    with torch.no_grad():
        starts = pruning.key_starts(gate_cumsum(log_f), pruning.threshold(q, k, D**-0.5, LOG_EPS), m, n)
    return pruning.kept_fraction(starts, T, m)


def peer_kernels(peers: Path) -> dict:
    """name -> (fn(q, k, v, log_f) on (B, T, H, D) inputs, needs_gate)."""
    found = {"ours": forgetting_attention_triton,
             PRUNED: lambda q, k, v, g: forgetting_attention_triton(q, k, v, g, log_pruning_tolerance=LOG_EPS)}
    if (peers / "fox_official").is_dir():
        sys.path.insert(0, str(peers / "fox_official"))
        # The peers' kernels come from --peers (put on sys.path just above), never from this
        # repository or its dependencies: absent on the CPU machine where CI imports this file.
        from forgetting_attention import forgetting_attention as fox  # the official kernel

        found["official FoX"] = lambda q, k, v, g: fox(q, k, v, g)
        found["official FoX, ACP"] = lambda q, k, v, g: fox(q, k, v, g, adaptive_threshold="auto")
    if (peers / "fla").is_dir():
        sys.path.insert(0, str(peers / "fla"))
        from fla.ops.forgetting_attn import parallel_forgetting_attn  # flash-linear-attention, from --peers as above

        found["flash-linear-attention"] = lambda q, k, v, g: parallel_forgetting_attn(q, k, v, g)
    found["FlexAttention"] = flex_forgetting_attention()
    return found


def flex_forgetting_attention():
    flex = torch.compile(flex_attention, dynamic=False)
    masks = {}

    def run(q, k, v, log_f):
        B, T, H, D = q.shape
        c = log_f.transpose(1, 2).contiguous().cumsum(-1)  # (B, H, T)
        # score_mod may index a tensor that needs a gradient only once: one copy per side.
        c_q, c_k = c, c.clone()
        if T not in masks:
            masks[T] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, T, T, device=q.device)

        def decay(score, b, h, qi, ki):
            return score + c_q[b, h, qi] - c_k[b, h, ki]

        out = flex(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), score_mod=decay, block_mask=masks[T])
        return out.transpose(1, 2)

    return run


def sdpa(backend):
    def run(q, k, v, log_f):  # (B, H, T, D) contiguous, as SDPA wants it
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return run


def make_inputs(B, H, N, D, layout="bthd"):
    shape = (B, N, H, D) if layout == "bthd" else (B, H, N, D)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    log_f = F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0).requires_grad_()
    return q, k, v, log_f


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def check(fn, N=1024, B=2, H=4, D=64):
    q, k, v, log_f = make_inputs(B, H, N, D)
    out = fn(q, k, v, log_f)
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v, log_f), do)
    ref = forgetting_attention_grads_chunked(q.detach(), k.detach(), v.detach(), log_f.detach(), do, cumsum_dtype=torch.float64)
    return {name: rel(g, r) for name, g, r in zip(("o", "dq", "dk", "dv", "dlog_f"), (out, *grads), ref)}


def measure(fn, inputs, graphs: bool = False):
    """-> fwd ms, fwd+bwd ms, peak MiB, and with ``graphs`` the fwd+bwd ms replayed as a CUDA graph
    (what a compiled training step sees: no host time per launch), else None."""
    q, k, v, log_f = inputs
    do = torch.randn_like(fn(q, k, v, log_f))  # no output kept: a live autograd graph breaks a later capture
    leaves = [t for t in inputs if t is not None]
    fwd_ms = do_bench(lambda: fn(q, k, v, log_f), warmup=25, rep=100, return_mode="median")

    def fwd_bwd():
        fn(q, k, v, log_f).backward(do)

    fb_ms = do_bench(fwd_bwd, warmup=25, rep=100, grad_to_none=leaves, return_mode="median")
    graph_ms = None
    if graphs:
        try:
            def step():  # the gradients set free inside the graph, so each replay starts as the first
                for t in leaves:
                    t.grad = None
                fwd_bwd()

            graph_ms = do_bench_cudagraph(step, rep=100, return_mode="median")
        except Exception as e:  # a kernel that cannot be captured keeps its eager figures
            graph_ms = repr(e)[:200]
    for t in leaves:
        t.grad = None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fwd_bwd()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    for t in leaves:
        t.grad = None
    return fwd_ms, fb_ms, peak, graph_ms


def split(fn, inputs, calls: int = 20) -> dict:
    """Where one eager forward+backward's time goes: host_ms, the host's time to issue one while
    the GPU runs behind (``calls`` issued back to back, few enough not to fill the launch queue);
    kernels, each GPU kernel's ms and launches per call; host_hot, the Python functions with the most
    own time per call, in us."""
    q, k, v, log_f = inputs
    do = torch.randn_like(fn(q, k, v, log_f))
    leaves = [t for t in inputs if t is not None]

    def fwd_bwd():
        for t in leaves:
            t.grad = None
        fn(q, k, v, log_f).backward(do)

    for _ in range(5):
        fwd_bwd()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fwd_bwd()
    host_ms = (time.perf_counter() - start) / calls * 1e3
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fwd_bwd()
    prof.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (calls, primitive calls, tottime, cumtime, callers)
    hot = sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]
    host_hot = [{"function": f"{Path(f).name}:{line} {name}", "own_us": own / calls * 1e6, "calls": n / calls}
                for (f, line, name), (n, _, own, _cum, _callers) in hot]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(calls):
            fwd_bwd()
        torch.cuda.synchronize()
    kernels = [{"kernel": e.key[:90], "ms": e.self_device_time_total / calls / 1e3, "launches": e.count / calls}
               for e in p.key_averages() if e.self_device_time_total > 0]
    kernels.sort(key=lambda r: -r["ms"])
    for t in leaves:
        t.grad = None
    return {"host_ms": host_ms, "gpu_ms": sum(r["ms"] for r in kernels), "kernels": kernels, "host_hot": host_hot}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default=".peers")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<gpu>_attention.json)")
    ap.add_argument("--configs", help="JSON written by benchmarks/tune.py (else the built-in table)")
    ap.add_argument("--only", help="comma-separated kernel names: measure these alone (e.g. 'ours,official FoX,SDPA cuDNN (no gate)')")
    ap.add_argument("--graphs", action="store_true",
                    help="also time forward+backward replayed as a CUDA graph (fwd_bwd_graph_ms): the kernels without the host's launch time")
    ap.add_argument("--split", action="store_true",
                    help="also say where an eager forward+backward's time goes: host issue time, each GPU kernel's time, the hottest Python functions")
    args = ap.parse_args(argv)
    common.cuda_or_exit("attention.py")
    if args.configs:
        written = json.loads(Path(args.configs).read_text())
        if "table" not in written:
            raise SystemExit(f"--configs {args.configs}: written by a search of some shapes (--shapes), "
                             "it has no table to install; run benchmarks/tune.py without --shapes")
        tune.install(written["table"])
    gated = peer_kernels(Path(args.peers))
    plain = {"SDPA flash (no gate)": sdpa(SDPBackend.FLASH_ATTENTION), "SDPA cuDNN (no gate)": sdpa(SDPBackend.CUDNN_ATTENTION)}
    if args.only:
        wanted = [n.strip() for n in args.only.split(",")]
        unknown = [n for n in wanted if n not in {**gated, **plain}]
        if unknown:
            raise SystemExit(f"--only: no kernel {unknown}; kernels: {', '.join({**gated, **plain})}")
        gated = {n: f for n, f in gated.items() if n in wanted}
        plain = {n: f for n, f in plain.items() if n in wanted}
    results = {"accuracy_vs_fp64": {}, "runs": []}
    for name, fn in gated.items():
        try:
            results["accuracy_vs_fp64"][name] = check(fn)
        except Exception as e:  # a peer that fails is reported, the others still run
            results["accuracy_vs_fp64"][name] = {"error": repr(e)[:300]}
    for B, H, N, D in common.ATTENTION_SHAPES:
        flops = 4 * B * H * N * N * D / 2
        for name, fn in {**gated, **plain}.items():
            layout = "bhtd" if name in plain else "bthd"
            row = {"kernel": name, "B": B, "H": H, "N": N, "D": D}
            try:
                inputs = make_inputs(B, H, N, D, layout)
                if name == PRUNED:
                    row["kept_fraction"] = kept_fraction(inputs[0], inputs[1], inputs[3])
                fwd_ms, fb_ms, peak, graph_ms = measure(fn, inputs, args.graphs)
                row.update(fwd_ms=fwd_ms, fwd_bwd_ms=fb_ms, fwd_tflops=flops / fwd_ms / 1e9,
                           fwd_bwd_tflops=3.5 * flops / fb_ms / 1e9, peak_mib=peak)
                if isinstance(graph_ms, str):
                    row["graph_error"] = graph_ms
                elif graph_ms is not None:
                    row.update(fwd_bwd_graph_ms=graph_ms, fwd_bwd_graph_tflops=3.5 * flops / graph_ms / 1e9)
                if args.split:
                    row["split"] = split(fn, inputs)
            except Exception as e:
                row["error"] = repr(e)[:300]
            results["runs"].append(row)
            print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    path = common.write(args.out, "attention", results, argv)
    print_table(json.loads(path.read_text()))
    return 0


def print_table(results):
    v = results["versions"]
    print(f"\n{results['machine']}  torch {v['torch']}  triton {v.get('triton')}  code {v['code']}  {results['date']}")
    print("accuracy vs fp64 (rel L2, N=1024): " + "; ".join(
        f"{k}: " + (", ".join(f"{n} {v:.1e}" for n, v in r.items()) if "error" not in r else r["error"][:60])
        for k, r in results["accuracy_vs_fp64"].items()))
    shapes = sorted({(r["B"], r["H"], r["N"], r["D"]) for r in results["runs"]}, key=common.ATTENTION_SHAPES.index)
    kernels = list(dict.fromkeys(r["kernel"] for r in results["runs"]))
    print("TFLOP/s fwd / fwd+bwd (peak MiB); ACP rows: effective, [share of causal keys visited]")
    print(f"{'kernel':<26}" + "".join(f"{','.join(map(str, s)):>26}" for s in shapes))
    for k in kernels:
        cells = []
        for s in shapes:
            r = next(r for r in results["runs"] if r["kernel"] == k and (r["B"], r["H"], r["N"], r["D"]) == s)
            kept = f" [{r['kept_fraction']:.2f}]" if "kept_fraction" in r else ""
            cells.append("error" if "error" in r else
                         f"{r['fwd_tflops']:.0f} / {r['fwd_bwd_tflops']:.0f} ({r['peak_mib']:.0f}){kept}")
        print(f"{k:<26}" + "".join(f"{c:>26}" for c in cells))
    graphed = [k for k in kernels if any("fwd_bwd_graph_tflops" in r for r in results["runs"] if r["kernel"] == k)]
    if graphed:
        print("TFLOP/s fwd+bwd replayed as a CUDA graph (no host launch time)")
        for k in graphed:
            rows = [next(r for r in results["runs"] if r["kernel"] == k and (r["B"], r["H"], r["N"], r["D"]) == s) for s in shapes]
            print(f"{k:<26}" + "".join(f"{r['fwd_bwd_graph_tflops']:>26.0f}" if "fwd_bwd_graph_tflops" in r else f"{'-':>26}"
                                        for r in rows))
    for r in results["runs"]:
        if "split" not in r:
            continue
        sp = r["split"]
        print(f"\n{r['kernel']} at {r['B']},{r['H']},{r['N']},{r['D']}: eager fwd+bwd {r['fwd_bwd_ms']:.3f} ms; "
              f"host issues one in {sp['host_ms']:.3f} ms; GPU kernels {sp['gpu_ms']:.3f} ms")
        for kr in sp["kernels"][:8]:
            print(f"  {kr['ms']:7.3f} ms  x{kr['launches']:.0f}  {kr['kernel']}")
        print("  host, own time per call:")
        for h in sp["host_hot"][:8]:
            print(f"  {h['own_us']:7.1f} us  x{h['calls']:.0f}  {h['function']}")


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: the Gluon forward of forgetting attention (kernels/attention/gluon_fwd.py) beside our
Triton forward, cuDNN and FlashAttention-2 (SDPA, no gate), and the Gluon dK/dV kernel
(gluon_bwd.py) beside the Triton one, in one run on one Hopper GPU.

    python benchmarks/gluon.py [--parts matmul,equivalence,timing,ab,fb,bwd] [--shapes B,H,N,D ...] [--out FILE]

- ``matmul``: Gluon's Hopper path on this machine: a warp-specialised matmul (benchmarks/
  gluon_ws_matmul.py: one TMA-load warp, asynchronous wgmma) against torch (cuBLAS), TFLOP/s.
- ``equivalence``: each candidate tile's forward against the fp64 reference (o, with and without
  the gate, pruned), its log-sum-exp against the Triton forward's, and the whole op (Gluon forward,
  Triton backward) with every gradient, at lengths no tile divides.
- ``timing``: forward TFLOP/s (causal, FlashAttention convention) of every candidate, the Triton
  forward and SDPA's backends, at the attention benchmark's shapes, and forward+backward of the op
  with the Triton and the Gluon forward.
- ``ab``: the table's contenders timed in three interleaved rounds, eager and replayed from a CUDA
  graph (as training runs them: no host time), at 2k-16k tokens: what configs.GLUON_FWD_TILES is
  chosen from.
- ``fb``: forward+backward of the op at head dim 128 with the table's choice against the Triton
  forward, eager and from a CUDA graph.

- ``bwd``: the dK/dV kernel alone, every Gluon candidate against the Triton kernel on the same
  inputs (dK, dV and dC compared, then timed replayed from CUDA graphs in three interleaved rounds)
  at the attention benchmark's shapes; then forward+backward of the op with Triton alone, with the
  tables' choice (GLUON_FWD and GLUON_BWD None) and with the Gluon dK/dV kernel forced at the
  shape's fastest candidate: what configs.GLUON_BWD_TILES is chosen from. ``--shapes`` names
  others (e.g. 2,12,16384,64, the 125M training pair's at context 16384).

Prints what it measures and writes JSON (default benchmarks/results/<date>_<gpu>_gluon.json, or
..._gluon_bwd.json for ``--parts bwd``).
"""
from __future__ import annotations

import argparse
import json
import time
import traceback

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import common
from foxwb.kernels import runtime
from foxwb.kernels.attention import configs, launch, op
from foxwb.kernels.attention.configs import GluonTiles
from foxwb.kernels.attention.naive import forgetting_attention_grads_chunked




G = GluonTiles
CANDS = {64: [G(128, 128, 8, 2, False), G(128, 128, 8, 2, True), G(128, 128, 8, 3, True), G(64, 128, 4, 2, True),
              G(64, 128, 4, 2, True, 128), G(64, 128, 4, 3, True, 128), G(128, 64, 8, 3, True), G(128, 128, 8, 2, True, 168)],
         128: [G(128, 128, 8, 2, False), G(128, 128, 8, 2, True), G(64, 128, 4, 2, True), G(128, 64, 8, 2, True),
               G(128, 64, 8, 3, True), G(64, 64, 4, 2, True, 128), G(64, 64, 4, 3, True, 128)]}


def rel(a, b):
    if torch.isnan(a).any():
        return float("nan")
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def matmul_check(res):
    import gluon_ws_matmul as W  # late: its Gluon kernel, only for this part
    out = []
    for M, N, K in [(1000, 777, 320), (4096, 4096, 4096), (8192, 8192, 8192)]:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        for cfg in [dict(BM=128, BN=128, BK=64, STAGES=4, num_warps=8), dict(BM=128, BN=256, BK=64, STAGES=3, num_warps=8)]:
            try:
                c = W.ws_matmul(a, b, **cfg)
                err = rel(c.float(), (a.float() @ b.float().T))
                ms = do_bench(lambda: W.ws_matmul(a, b, **cfg), return_mode="median")
                ms_t = do_bench(lambda: a @ b.T, return_mode="median")
                fl = 2 * M * N * K
                row = dict(M=M, N=N, K=K, cfg=cfg, rel_err=err, gluon_tflops=fl / ms / 1e9, torch_tflops=fl / ms_t / 1e9)
            except Exception as e:  # noqa: BLE001
                row = dict(M=M, N=N, K=K, cfg=cfg, error=repr(e)[-2000:])
            print("matmul", row, flush=True)
            out.append(row)
    res["matmul"] = out


def inputs(B, T, H, D, shift=3.0, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    log_f = F.logsigmoid(torch.randn(B, T, H, device="cuda", generator=g) + shift)
    return q, k, v, log_f


def with_tiles(D, tiles):
    configs.GLUON_FWD_TILES[64 if D <= 64 else 128] = ((1 << 62, tiles, True),)


def fwd(q, k, v, log_f, gluon, log_eps=None):
    launch.GLUON_FWD = gluon
    cfg = configs.default_config(q.shape[-1], q.shape[1], launch.use_tma(q, k, v), q.dtype)
    o, lse, c, _ = launch.forward_gated(q, k, v, log_f, q.shape[-1] ** -0.5, cfg, log_eps)
    return o, lse


def equivalence(res):
    runtime.POISON_OUTPUTS = True
    out = []
    tile_sets = CANDS
    for (B, T, H, D) in [(2, 1000, 3, 64), (1, 777, 2, 128), (2, 2048, 4, 64), (1, 4133, 2, 128)]:
        q, k, v, log_f = inputs(B, T, H, D, seed=T)
        do = torch.randn_like(q)
        ref = forgetting_attention_grads_chunked(q, k, v, log_f, do, cumsum_dtype=torch.float64)
        ref_plain = forgetting_attention_grads_chunked(q, k, v, None, do)
        o_t, lse_t = fwd(q, k, v, log_f, False)
        for tiles in tile_sets[D]:
            with_tiles(D, tiles)
            row = dict(B=B, T=T, H=H, D=D, tiles=tiles.__dict__)
            try:
                o, lse = fwd(q, k, v, log_f, True)
                row.update(o_gate=rel(o, ref[0]), lse_vs_triton=(lse - lse_t).abs().max().item(), triton_o=rel(o_t, ref[0]))
                o, _ = fwd(q, k, v, None, True)
                row["o_plain"] = rel(o, ref_plain[0])
                if T >= 2048:
                    qp, kp, vp, lfp = inputs(B, T, H, D, shift=0.0, seed=T + 1)
                    refp = forgetting_attention_grads_chunked(qp, kp, vp, lfp, torch.randn_like(qp), cumsum_dtype=torch.float64)
                    o, _ = fwd(qp, kp, vp, lfp, True, log_eps=-10.0)
                    row["o_pruned"] = rel(o, refp[0])
                # The whole op: Gluon forward, Triton backward reading its o and lse.
                launch.GLUON_FWD = True
                qg, kg, vg, lg = (t.clone().requires_grad_() for t in (q, k, v, log_f))
                o = op.forgetting_attention_triton(qg, kg, vg, lg)
                grads = torch.autograd.grad(o, (qg, kg, vg, lg), do)
                row.update({f"op_{n}": rel(g, r) for n, g, r in zip(("o", "dq", "dk", "dv", "dlog_f"), (o, *grads), ref)})
            except Exception as e:  # noqa: BLE001
                row["error"] = repr(e)[-3000:]
            print("equiv", row, flush=True)
            out.append(row)
    runtime.POISON_OUTPUTS = False
    res["equivalence"] = out


def timing(res):
    out = []
    cands = CANDS
    for B, H, T, D in common.ATTENTION_SHAPES:
        q, k, v, log_f = inputs(B, T, H, D)
        flops = 4 * B * H * T * T * D / 2
        row = dict(B=B, H=H, T=T, D=D)
        row["triton_fwd"] = flops / do_bench(lambda: fwd(q, k, v, log_f, False), return_mode="median") / 1e9
        qh, kh, vh = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            row["cudnn_fwd"] = flops / do_bench(lambda: F.scaled_dot_product_attention(qh, kh, vh, is_causal=True), return_mode="median") / 1e9
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            row["flash_fwd"] = flops / do_bench(lambda: F.scaled_dot_product_attention(qh, kh, vh, is_causal=True), return_mode="median") / 1e9
        for tiles in cands[D]:
            with_tiles(D, tiles)
            key = f"gluon {tiles.block_m}x{tiles.block_n} w{tiles.num_warps} s{tiles.stages}{' ahead' if tiles.ahead else ''} r{tiles.maxnreg}"
            try:
                row[key] = flops / do_bench(lambda: fwd(q, k, v, log_f, True), return_mode="median") / 1e9
            except Exception as e:  # noqa: BLE001
                row[key] = repr(e)[-500:]
        # forward + backward through the op, the table's default Gluon tiles vs Triton
        qg, kg, vg, lg = (t.clone().requires_grad_() for t in (q, k, v, log_f))
        do = torch.randn_like(q)
        for name, g in (("triton_fb", False), ("gluon_fb_last", True)):
            launch.GLUON_FWD = g
            row[name] = 3.5 * flops / do_bench(lambda: op.forgetting_attention_triton(qg, kg, vg, lg).backward(do),
                                              grad_to_none=[qg, kg, vg, lg], return_mode="median") / 1e9
        print("time", json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        out.append(row)
    res["timing"] = out


AB = {64: [None, G(64, 128, 4, 3, True, 128), G(64, 128, 4, 3, False, 128), G(64, 64, 4, 3, True, 128),
           G(64, 64, 4, 4, True, 128), G(128, 128, 8, 2, False)],
      128: [None, G(64, 64, 4, 3, True, 128), G(64, 64, 4, 3, False, 128), G(128, 128, 8, 2, False),
            G(64, 64, 4, 2, True, 128), G(128, 64, 8, 3, True)]}


def ab(res):
    """Interleaved rounds: each candidate's forward (None: the Triton kernel) timed once per round."""
    out = []
    shapes = [(8, 16, 2048, 64), (4, 16, 4096, 64), (1, 16, 16384, 64),
              (8, 8, 2048, 128), (4, 8, 4096, 128), (2, 8, 8192, 128), (1, 8, 16384, 128)]
    for B, H, T, D in shapes:
        q, k, v, log_f = inputs(B, T, H, D)
        flops = 4 * B * H * T * T * D / 2
        rounds = {}
        for _ in range(3):
            for tiles in AB[D]:
                key = "triton" if tiles is None else f"{tiles.block_m}x{tiles.block_n} w{tiles.num_warps} s{tiles.stages}{' ahead' if tiles.ahead else ''} r{tiles.maxnreg}"
                if tiles is not None:
                    with_tiles(D, tiles)
                run = lambda: fwd(q, k, v, log_f, tiles is not None)  # noqa: E731
                ms = do_bench(run, warmup=10, rep=60, return_mode="median")
                rounds.setdefault(key, []).append(flops / ms / 1e9)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    run()
                ms = do_bench(graph.replay, warmup=10, rep=60, return_mode="median")
                rounds.setdefault(key + " graph", []).append(flops / ms / 1e9)
                del graph
        row = dict(B=B, H=H, T=T, D=D, tflops={k: [round(x, 1) for x in v] for k, v in rounds.items()})
        print("ab", json.dumps(row), flush=True)
        out.append(row)
    res["ab"] = out


def captured(fn):
    """fn replayed from a CUDA graph (as a compiled training step runs): warmed up on a side stream,
    then captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def fb(res):
    """Forward+backward of the op at head dim 128, the table's choice against the Triton forward
    (GLUON_FWD False), eager and replayed from a CUDA graph, three interleaved rounds."""
    out = []
    for B, H, T, D in [(8, 8, 2048, 128), (4, 8, 4096, 128), (2, 8, 8192, 128), (1, 8, 16384, 128)]:
        q, k, v, log_f = inputs(B, T, H, D)
        leaves = [t.clone().requires_grad_() for t in (q, k, v, log_f)]
        do = torch.randn_like(q)
        flops = 3.5 * 4 * B * H * T * T * D / 2
        rounds = {}
        for _ in range(3):
            for name, setting in (("triton forward", False), ("table", None)):
                launch.GLUON_FWD = setting
                step = lambda: torch.autograd.grad(op.forgetting_attention_triton(*leaves), leaves, do)  # noqa: E731
                ms = do_bench(step, warmup=10, rep=60, return_mode="median")
                rounds.setdefault(name, []).append(flops / ms / 1e9)
                try:
                    graph = captured(step)
                    ms = do_bench(graph.replay, warmup=10, rep=60, return_mode="median")
                    rounds.setdefault(name + " graph", []).append(flops / ms / 1e9)
                    del graph
                except Exception as e:  # noqa: BLE001
                    rounds[name + " graph"] = repr(e)[-300:]
        launch.GLUON_FWD = None
        row = dict(B=B, H=H, T=T, D=D, gluon_chosen=configs.gluon_choice(D, T)[1],
                   tflops={k: ([round(x, 1) for x in v] if isinstance(v, list) else v) for k, v in rounds.items()})
        print("fb", json.dumps(row), flush=True)
        out.append(row)
    res["fb"] = out


BWD_CANDS = {64: [G(64, 128, 8, 2, False), G(64, 128, 8, 2, True), G(32, 128, 8, 2, True), G(64, 64, 4, 2, True, 168),
                  # Not yet timed (2026-12-07): at 128 registers three programs share an SM, and ptxas (CUDA
                  # 13.4, Triton 3.9's, sm_90a) reports no spills; 128 x 64 at 4 warps is the Triton
                  # kernel's tile at head dim 64, which spills in this kernel (560 bytes, 255 registers).
                  G(64, 64, 4, 2, True, 128), G(64, 64, 4, 3, True, 128), G(64, 64, 4, 2, False, 128),
                  G(128, 64, 4, 2, False)],
             128: [G(64, 128, 8, 2, False), G(64, 128, 8, 2, True), G(32, 128, 8, 2, True), G(32, 128, 8, 3, True)]}


def tiles_key(t):
    return f"{t.block_m}x{t.block_n} w{t.num_warps} s{t.stages}{' ahead' if t.ahead else ''} r{t.maxnreg}"


def with_bwd_tiles(D, tiles):
    configs.GLUON_BWD_TILES[64 if D <= 64 else 128] = ((1 << 62, tiles, True),)


def dkdv_inputs(B, H, T, D):
    """What the dK/dV kernel reads (the Triton forward and dq_kernel run first) and one launch of
    each kernel: Triton's, and Gluon's at the table's tiles of the moment."""
    q, k, v, log_f = inputs(B, T, H, D)
    do = torch.randn_like(q)
    sm = D ** -0.5
    cfg = configs.default_config(D, T, True, q.dtype)
    launch.GLUON_FWD = False
    o, lse, c, _ = launch.forward_gated(q, k, v, log_f, sm, cfg)
    delta, dc = torch.empty_like(lse), torch.empty_like(lse)
    dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
    tma = launch.use_tma(q, k, v, o, do)  # the context is current: the forward ran
    launch.launch_dq(q, k, v, c, o, do, lse, delta, dq, dc, lse, sm, cfg, tma, False)
    dc0 = dc.clone()

    def run(gluon, dk=dk, dv=dv, dc=dc):
        if gluon:
            launch.launch_dkdv_gluon(q, k, v, c, do, lse, delta, dk, dv, dc, lse, sm, False)
        else:
            launch.launch_dkdv(q, k, v, c, do, lse, delta, dk, dv, dc, lse, sm, cfg, tma, False)

    return run, dc0


def bwd(res, shapes=None):
    """The Gluon dK/dV kernel against the Triton one, alone, then forward+backward of the op."""
    out = []
    for B, H, T, D in shapes or common.ATTENTION_SHAPES:
        run, dc0 = dkdv_inputs(B, H, T, D)
        row = dict(B=B, H=H, T=T, D=D, agreement={}, tflops={})
        ref_dc = dc0.clone()
        ref_dk, ref_dv = (torch.full((B, T, H, D), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(2))
        run(False, ref_dk, ref_dv, ref_dc)
        graphs = {"triton": captured(lambda: run(False))}
        for tiles in BWD_CANDS[D]:
            key = tiles_key(tiles)
            with_bwd_tiles(D, tiles)
            try:
                dk, dv = (torch.full_like(ref_dk, float("nan")) for _ in range(2))
                dc = dc0.clone()
                run(True, dk, dv, dc)
                row["agreement"][key] = dict(dk=rel(dk.float(), ref_dk.float()), dv=rel(dv.float(), ref_dv.float()),
                                             dc=rel(dc - dc0, ref_dc - dc0))
                graphs[key] = captured(lambda: run(True))
            except Exception as e:  # noqa: BLE001
                row["agreement"][key] = repr(e)[-1500:]
        flops = 4 * B * H * T * T * D  # 4 matmuls over the causal half
        for _ in range(3):
            for key, graph in graphs.items():
                ms = do_bench(graph.replay, warmup=10, rep=60, return_mode="median")
                row["tflops"].setdefault(key, []).append(round(flops / ms / 1e9, 1))
        del graphs
        medians = {k: sorted(v)[1] for k, v in row["tflops"].items()}
        best = max((k for k in medians if k != "triton"), key=medians.get)
        row["best"] = best
        print("bwd", json.dumps(row), flush=True)
        # Forward+backward of the op: Triton alone, the tables, the Gluon dK/dV kernel at the best tiles.
        with_bwd_tiles(D, next(t for t in BWD_CANDS[D] if tiles_key(t) == best))
        q, k, v, log_f = inputs(B, T, H, D)
        leaves = [t.clone().requires_grad_() for t in (q, k, v, log_f)]
        do = torch.randn_like(q)
        fb_flops = 3.5 * 4 * B * H * T * T * D / 2
        fb_graphs = {}
        for name, fwd_setting, bwd_setting in (("triton", False, False), ("tables", None, False),
                                               ("tables + gluon dkdv", None, True)):
            launch.GLUON_FWD, launch.GLUON_BWD = fwd_setting, bwd_setting
            step = lambda: torch.autograd.grad(op.forgetting_attention_triton(*leaves), leaves, do)  # noqa: E731
            fb_graphs[name] = captured(step)
        launch.GLUON_FWD = launch.GLUON_BWD = None
        row["fb_tflops"] = {}
        for _ in range(3):
            for name, graph in fb_graphs.items():
                ms = do_bench(graph.replay, warmup=10, rep=60, return_mode="median")
                row["fb_tflops"].setdefault(name, []).append(round(fb_flops / ms / 1e9, 1))
        del fb_graphs
        print("bwd_fb", json.dumps(dict(B=B, H=H, T=T, D=D, fb_tflops=row["fb_tflops"])), flush=True)
        out.append(row)
    res["bwd"] = out
    print("\n| B, H, T, D | Triton dK/dV | best Gluon dK/dV (tiles) | fwd+bwd Triton | tables | tables + Gluon dK/dV |")
    for row in out:
        med = {k: sorted(v)[1] for k, v in row["tflops"].items()}
        fb_med = {k: sorted(v)[1] for k, v in row["fb_tflops"].items()}
        print(f"| {row['B']}, {row['H']}, {row['T']}, {row['D']} | {med['triton']} | {med[row['best']]} ({row['best']}) | "
              f"{fb_med['triton']} | {fb_med['tables']} | {fb_med['tables + gluon dkdv']} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<gpu>_gluon.json)")
    ap.add_argument("--parts", default="matmul,equivalence,timing,ab,fb")
    ap.add_argument("--shapes", nargs="+", type=common.parse_shape, metavar="B,H,N,D",
                    help="bwd: only these shapes (default: the attention benchmark's)")
    args = ap.parse_args()
    common.cuda_or_exit("gluon.py")
    res = {}
    t0 = time.time()
    for part in args.parts.split(","):
        try:
            {"matmul": matmul_check, "equivalence": equivalence, "timing": timing, "ab": ab, "fb": fb,
             "bwd": lambda r: bwd(r, args.shapes)}[part](res)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res[part + "_error"] = repr(e)
        common.write(args.out, "gluon_bwd" if args.parts == "bwd" else "gluon", json.loads(json.dumps(res, default=str)))
        print(f"{part} done at {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()

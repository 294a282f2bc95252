"""Benchmark of KV-shift + QK-norm: kernels.prepare_qkv against the compiled component code.

    python benchmarks/qkv_prep.py [--batch 8] [--context 4096] [--heads 12] [--head-dim 64] [--out FILE]

Both sides take the block's projection output (B, T, 3HD + 2H + HD + H, padded to a multiple of
64) in bf16 and return q, k, v (B, T, H, D): KV-shift on k and v, per-head RMSNorm of q and k
(FoX (Pro)'s block), and the gates' HD + H logits (and the padding) as a slice, whose gradient both sides write
into the projection's. The torch side is what foxwb.workbench.model runs without the kernel (the split, then
foxwb.components.kv_shift and foxwb.components.qk_norm) under torch.compile; its compile is timed once, then
the numbers are do_bench medians (ms) of the forward and of forward + backward (the gradient of
the projection and of both scales). One layer's share of this work is a few dozen microseconds,
of the order of the eager launch costs these figures include; the training step replays it as a
CUDA graph, and benchmarks/profile_step.py --fused-qkv on|off measures it there. Also: the kernels
alone for a grid of (BLOCK_T, TILES, warps), and the bytes they must move over their time (the
fastest is what kernels/qkv_prep/op.py should set). Prints a table, writes JSON. CUDA only.
"""
from __future__ import annotations

import argparse
import time

import torch
from triton.testing import do_bench

import common
from foxwb.components.kv_shift import token_shift
from foxwb.components.norm import rms_norm
from foxwb.kernels.qkv_prep import op as qp


def _rest(H, D):
    """The column groups after the shift logits, as foxwb.workbench.model hands them on: the output
    gate's (H D) and the forget gate's (H) logits."""
    return [H * D, H]


def _pad(H, D):
    """The padding after them, to a multiple of 64 columns."""
    return -(3 * H * D + 2 * H + sum(_rest(H, D))) % 64


def _components(proj, qw, kw, H, D, eps):
    B, T, _ = proj.shape
    q, k, v = (proj[..., i * H * D:(i + 1) * H * D].view(B, T, H, D) for i in range(3))
    k = token_shift(proj[..., 3 * H * D:3 * H * D + H], k)
    v = token_shift(proj[..., 3 * H * D + H:3 * H * D + 2 * H], v)
    rest = proj[..., 3 * H * D + 2 * H:3 * H * D + 2 * H + sum(_rest(H, D))].split(_rest(H, D), dim=-1)
    return rms_norm(q, qw, eps), rms_norm(k, kw, eps), v, *rest


def _ours(proj, qw, kw, H, D, eps):
    q, k, v, rest = qp.prepare_qkv(proj, H, D, k_shift=True, v_shift=True, q_weight=qw, k_weight=kw,
                                   eps=eps, rest=_rest(H, D))
    return q, k, v, *rest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<gpu>_qkv_prep.json)")
    args = ap.parse_args(argv)
    common.cuda_or_exit("qkv_prep.py")
    torch.manual_seed(0)
    B, T, H, D, eps = args.batch, args.context, args.heads, args.head_dim, 1e-5
    proj = torch.randn(B, T, 3 * H * D + 2 * H + sum(_rest(H, D)) + _pad(H, D),
                       device="cuda").to(torch.bfloat16).requires_grad_()
    qw, kw = (torch.rand(H, D, device="cuda").add_(0.5).requires_grad_() for _ in range(2))
    ups = [torch.randn(B, T, H, D, device="cuda").to(torch.bfloat16) for _ in range(3)]
    ups += [torch.randn(B, T, w, device="cuda").to(torch.bfloat16) for w in _rest(H, D)]

    def fwd_bwd(fn):
        def run():  # gradients returned, not accumulated into .grad (which CUDA graph capture refuses)
            return torch.autograd.grad(fn(proj, qw, kw, H, D, eps), (proj, qw, kw), ups)
        return run

    # Accuracy of both bf16 sides against the components' code in fp64.
    ref_in = [x.detach().double().requires_grad_() for x in (proj, qw, kw)]
    ref = _components(*ref_in, H, D, eps)
    ref_grads = torch.autograd.grad(ref, ref_in, [u.double() for u in ups])
    accuracy = {}

    results = {}
    compiled = torch.compile(_components)
    for name, fn in (("torch.compile (components/ code)", compiled), ("ours (prepare_qkv)", _ours)):
        start = time.perf_counter()
        out = fn(proj, qw, kw, H, D, eps)
        grads = torch.autograd.grad(out, (proj, qw, kw), ups)
        torch.cuda.synchronize()
        first_s = time.perf_counter() - start
        accuracy[name] = {n: ((a.double() - b).norm() / b.norm()).item()
                          for n, a, b in zip(("q", "k", "v", "gate", "forget", "d proj", "d q_weight", "d k_weight"),
                                             (*out, *grads), (*ref, *ref_grads))}
        run = fwd_bwd(fn)
        with torch.no_grad():
            fwd_ms = do_bench(lambda: fn(proj, qw, kw, H, D, eps))
        results[name] = {"fwd_ms": fwd_ms, "fwd_bwd_ms": do_bench(run), "first_call_s": first_s}

    # The kernels alone, forward and backward, per (BLOCK_T, TILES, warps); bytes: reading proj's
    # q, k, v, writing q, k, v (forward); reading them and the gradients of q, k, v and the rest,
    # writing d proj (backward).
    tensor, rest = B * T * H * D * 2, B * T * (sum(_rest(H, D)) + _pad(H, D)) * 2
    moved = {"fwd": 6 * tensor, "bwd": 9 * tensor + 2 * rest}
    grads = [u.detach() for u in ups]
    sweep = []
    # The two custom ops as torch registers them: the kernels without the autograd wrapper.
    prep_fwd, prep_bwd = torch.ops.fox_workbench.qkv_prep, torch.ops.fox_workbench.qkv_prep_bwd
    saved = qp.BLOCK_T, qp.TILES, qp.NUM_WARPS
    for block_t in (8, 16, 32):
        for tiles in (1, 2):
            for warps in (1, 2, 4):
                qp.BLOCK_T, qp.TILES, qp.NUM_WARPS = block_t, tiles, warps
                with torch.no_grad():
                    f_ms = do_bench(lambda: prep_fwd(proj, qw, kw, H, D, True, True, eps))
                    b_ms = do_bench(lambda: prep_bwd(proj, qw, kw, *grads[:3], grads[3:], H, D, True, True, eps))
                sweep.append({"block_t": block_t, "tiles": tiles, "warps": warps, "fwd_ms": f_ms, "bwd_ms": b_ms,
                              "fwd_tb_per_s": moved["fwd"] / f_ms / 1e9,
                              "bwd_tb_per_s": moved["bwd"] / b_ms / 1e9})
    qp.BLOCK_T, qp.TILES, qp.NUM_WARPS = saved

    torch_ms = results["torch.compile (components/ code)"]["fwd_bwd_ms"]
    print(f"B {B}, T {T}, H {H}, D {D}, bf16, KV-shift (k, v) + QK-norm, {torch.cuda.get_device_name()}")
    print(f"{'':36s} {'fwd ms':>8s} {'fwd+bwd ms':>11s} {'speed-up':>9s} {'1st call s':>11s}")
    for name, r in results.items():
        print(f"{name:36s} {r['fwd_ms']:8.3f} {r['fwd_bwd_ms']:11.3f} {torch_ms / r['fwd_bwd_ms']:8.2f}x "
              f"{r['first_call_s']:11.1f}")
    print("kernels alone, BLOCK_T x TILES x warps: fwd ms (TB/s), bwd ms (TB/s)")
    for s in sweep:
        print(f"  {s['block_t']:3d} x {s['tiles']} x {s['warps']}: fwd {s['fwd_ms']:.3f} ({s['fwd_tb_per_s']:.2f}), "
              f"bwd {s['bwd_ms']:.3f} ({s['bwd_tb_per_s']:.2f})")
    for name, acc in accuracy.items():
        print(f"accuracy against fp64, {name}: " + ", ".join(f"{k} {v:.1e}" for k, v in acc.items()))
    common.write(args.out, "qkv_prep", {"shape": vars(args), "results": results, "kernels": sweep,
                                         "accuracy": accuracy}, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

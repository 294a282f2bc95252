"""Benchmark of the LM head's loss: kernels.linear_cross_entropy against the compiled torch loss.

    python benchmarks/loss.py [--rows 32768] [--d 768] [--vocab 50257] [--out FILE]

Both sides compute mean cross-entropy of (rows, d) @ (V, d)^T in bf16 and its gradients for h
and the weight, forward + backward, timed with triton.testing.do_bench (median, ms). The torch
side is what foxwb.workbench.model did before the fused loss: F.linear then F.cross_entropy on the
fp32-upcast logits, under torch.compile. Also: the row kernel alone for a grid of (BLOCK_V,
warps), and the bytes it moves over its time. Prints a table, writes JSON. CUDA only.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import common
from foxwb.kernels.loss.op import ce_rows, linear_cross_entropy, padded_weight


def _torch_loss(h, w, t):
    return F.cross_entropy(F.linear(h, w).float(), t)


def _fwd_bwd(loss_fn, h, w, t):
    def run():
        h.grad = w.grad = None
        loss_fn(h, w, t).backward()
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=32768)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<gpu>_loss.json)")
    args = ap.parse_args(argv)
    common.cuda_or_exit("loss.py")
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    h = torch.randn(args.rows, args.d, device=dev).to(bf).requires_grad_()
    w = (torch.randn(args.vocab, args.d, device=dev) * 0.02).to(bf).requires_grad_()
    t = torch.randint(0, args.vocab, (args.rows,), device=dev)

    # Accuracy against fp64 on a slice (the full fp64 logits would be 13 GB).
    n = 2048
    hs, ws = h[:n].detach().requires_grad_(), w.detach().requires_grad_()
    got = linear_cross_entropy(hs, ws, t[:n])
    gh, gw = torch.autograd.grad(got, (hs, ws))
    hd, wd = hs.detach().double().requires_grad_(), ws.detach().double().requires_grad_()
    ref = F.cross_entropy(hd @ wd.t(), t[:n])
    rh, rw = torch.autograd.grad(ref, (hd, wd))
    accuracy = {"loss_abs": abs(got.item() - ref.item()),
                "dh_rel": ((gh.double() - rh).norm() / rh.norm()).item(),
                "dw_rel": ((gw.double() - rw).norm() / rw.norm()).item()}

    results = {}
    compiled = torch.compile(_torch_loss)
    for name, fn in (("torch.compile (F.linear + fp32 cross_entropy)", compiled),
                     ("ours (linear_cross_entropy)", linear_cross_entropy)):
        run = _fwd_bwd(fn, h, w, t)
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        run()
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
        with torch.no_grad():
            fwd_ms = do_bench(lambda: fn(h, w, t))
        results[name] = {"fwd_bwd_ms": do_bench(run), "fwd_ms": fwd_ms, "peak_mib": peak}

    # The row kernel alone over the padded logits of the shape above.
    logits = (h.detach() @ padded_weight(w.detach()).t()).contiguous()
    moved = 3 * args.rows * args.vocab * logits.element_size()  # two reads and one write
    sweep = []
    for block_v in (1024, 2048, 4096, 8192):
        for warps in (8, 16, 32):
            scratch = logits.clone()
            ms = do_bench(lambda: ce_rows(scratch, t, -100, True, vocab=args.vocab, block_v=block_v,
                                          num_warps=warps))
            sweep.append({"block_v": block_v, "warps": warps, "ms": ms, "tb_per_s": moved / ms / 1e9})

    torch_ms = results["torch.compile (F.linear + fp32 cross_entropy)"]["fwd_bwd_ms"]
    print(f"rows {args.rows}, d {args.d}, vocab {args.vocab}, bf16, {torch.cuda.get_device_name()}")
    print(f"{'':48s} {'fwd ms':>8s} {'fwd+bwd ms':>11s} {'peak MiB':>9s} {'speed-up':>9s}")
    for name, r in results.items():
        print(f"{name:48s} {r['fwd_ms']:8.3f} {r['fwd_bwd_ms']:11.3f} {r['peak_mib']:9.0f} {torch_ms / r['fwd_bwd_ms']:8.2f}x")
    print("row kernel alone (loss and gradient), BLOCK_V x warps: ms (TB/s of 2 reads + 1 write)")
    for s in sweep:
        print(f"  {s['block_v']:5d} x {s['warps']:2d}: {s['ms']:.3f} ms ({s['tb_per_s']:.2f} TB/s)")
    print(f"accuracy against fp64 ({n} rows): {accuracy}")
    common.write(args.out, "loss", {"shape": vars(args), "results": results, "row_kernel": sweep,
                                     "accuracy": accuracy}, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Session 2026-11-30 (ninth): the QKV kernels alone (kernels.qkv_prep's two ops) at one layer of
the 125M step, per launch order (HEADS_FIRST: one token tile's programs of every head side by
side) and tile shape; TB/s counts the bytes each must move (as kernels.bench_qkv). The backward op
includes the gates' copy (columns_kernel).

Ran at commit fc7f9d0, which had the HEADS_FIRST switch; inconclusive (the installed 16 x 2 took 152 us
forward here against 86 us per layer in the step's profile: these eager op timings carry host
costs), so the switch was taken out after; results in kernels/results/qkv-order-h200-2026-11-30.json."""
import json
import sys

import torch
from triton.testing import do_bench

import kernels.qkv_prep as qp

B, T, H, D, eps = 8, 4096, 12, 64, 1e-5
rest = [H * D, H]
P = 3 * H * D + 2 * H + sum(rest)
P += -P % 64
torch.manual_seed(0)
proj = torch.randn(B, T, P, device="cuda").to(torch.bfloat16)
qw, kw = (torch.rand(H, D, device="cuda") + 0.5 for _ in range(2))
grads = [torch.randn(B, T, H, D, device="cuda").to(torch.bfloat16) for _ in range(3)]
drest = [torch.randn(B, T, w, device="cuda").to(torch.bfloat16) for w in rest]
tensor = B * T * H * D * 2
moved = {"fwd": 6 * tensor, "bwd": 9 * tensor + 2 * B * T * (P - 3 * H * D - 2 * H) * 2}
ref = [x.clone() for x in qp._prep_bwd_op(proj, qw, kw, *grads, drest, H, D, True, True, eps)]
rows = []
for heads_first in (False, True):
    for block_t, warps in ((16, 2), (16, 4), (32, 4), (8, 1), (8, 2)):
        qp.HEADS_FIRST, qp.BLOCK_T, qp.NUM_WARPS = heads_first, block_t, warps
        f = do_bench(lambda: qp._prep_op(proj, qw, kw, H, D, True, True, eps))
        b = do_bench(lambda: qp._prep_bwd_op(proj, qw, kw, *grads, drest, H, D, True, True, eps))
        got = qp._prep_bwd_op(proj, qw, kw, *grads, drest, H, D, True, True, eps)
        assert torch.allclose(got[0].float(), ref[0].float(), rtol=1e-2, atol=1e-2)
        assert all(torch.allclose(a, c, rtol=1e-4, atol=1e-3) for a, c in zip(got[1:], ref[1:]))
        rows.append({"heads_first": heads_first, "block_t": block_t, "warps": warps, "fwd_ms": f, "bwd_ms": b,
                     "fwd_tb_per_s": moved["fwd"] / f / 1e9, "bwd_tb_per_s": moved["bwd"] / b / 1e9})
        print(f"heads_first {heads_first!s:5} {block_t:3d} x {warps}: fwd {f * 1e3:6.1f} us ({moved['fwd'] / f / 1e9:.2f} TB/s)"
              f"  bwd {b * 1e3:6.1f} us ({moved['bwd'] / b / 1e9:.2f} TB/s)")
json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(sys.argv[1], "w"), indent=1)

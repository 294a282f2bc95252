"""Session 2026-11-30 (ninth): kernels.qkv_prep's columns_kernel (the gates' gradients copied into
d proj) per tile shape, at the 125M step's layer: 32768 rows, d proj 3136 columns, the output
gate's 768 from column 2328 and the forget gate's 12 then 28 of padding. TB/s counts the group
read and the zone written."""
import json
import sys

import torch
from triton.testing import do_bench

import kernels.qkv_prep as qp

B, T, P, start = 8, 4096, 3136, 2328
dproj = torch.empty(B, T, P, device="cuda", dtype=torch.bfloat16)
groups = [torch.randn(B, T, w, device="cuda").to(torch.bfloat16) for w in (768, 12)]
moved = B * T * 2 * (sum(g.shape[-1] for g in groups) + P - start)
rows = []
for bn, bw, warps in [(32, 128, 4), (16, 128, 4), (64, 128, 4), (32, 256, 4), (64, 256, 8), (16, 256, 4), (128, 64, 4), (64, 64, 4)]:
    qp.BLOCK_N, qp.BLOCK_W, qp.COLUMNS_WARPS = bn, bw, warps
    ms = do_bench(lambda: qp._write_columns(dproj, start, groups))
    torch.testing.assert_close(dproj[..., start:start + 768], groups[0], rtol=0, atol=0)
    assert not dproj[..., start + 780:].any()
    rows.append({"block_n": bn, "block_w": bw, "warps": warps, "ms": ms, "tb_per_s": moved / ms / 1e9})
    print(f"{bn:4d} x {bw:4d} x {warps}: {ms * 1e3:7.1f} us  {moved / ms / 1e9:5.2f} TB/s")
json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(sys.argv[1], "w"), indent=1)

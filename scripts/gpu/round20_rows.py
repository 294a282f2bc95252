"""norm_max_kernel's rows per program (kernels/triton_pruning.py), timed at two benchmark shapes."""
import torch
from triton.testing import do_bench

import kernels.triton_attention as ta

for B, H, N, D in [(8, 16, 2048, 64), (8, 12, 4096, 64), (1, 16, 16384, 64)]:
    q, k = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = ta.gate_cumsum(torch.nn.functional.logsigmoid(torch.randn(B, N, H, device="cuda") + 3))
    cfg = ta.default_config(D, N)
    for rows in (1024, 512, 256, 128):
        ta._ROWS_PER_PROGRAM = rows
        ms = do_bench(lambda: ta._prune_forward(q, k, c, D**-0.5, -10.0, cfg), warmup=20, rep=100, return_mode="median")
        print(f"{B},{H},{N},{D} rows/program {rows}: plan {ms * 1e3:.1f} us", flush=True)

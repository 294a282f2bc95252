"""Session 2026-11-30 (eighth): why the benchmark's 8,8,2048,128 row ran slower with TMA loads
(fwd 0.29 ms) than round34's sweep of the same tile (0.217 ms). Times, at that shape and at
1,8,16384,128: the round34 kernels, the installed kernels launched directly (ta._forward /
ta._backward), the public entry point's forward and forward+backward (what kernels.bench times),
each with TMA loads and with pointer loads, and a few forward tiles."""
import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import round34_tma as r34  # noqa: E402

from kernels import triton_attention as ta  # noqa: E402

T_ = ta.TileConfig
for B, H, N, D in ((8, 8, 2048, 128), (1, 8, 16384, 128), (8, 16, 2048, 64)):
    q, k, v, do, log_f = r34.inputs(B, H, N, D, torch.bfloat16, "cuda")
    sm = D ** -0.5
    c = ta.gate_cumsum(log_f)
    leaves = [t.requires_grad_() for t in (q, k, v, log_f)]
    for loads in (None, False):
        ta.TMA_LOADS = loads
        cfg = ta.default_config(D, N, ta.use_tma(q, k, v))
        o, lse = ta._forward(q, k, v, c, sm, cfg)
        t = {"direct fwd": do_bench(lambda: ta._forward(q, k, v, c, sm, cfg)),
             "direct bwd": do_bench(lambda: ta._backward(do, q, k, v, c, o, lse, sm, cfg)),
             "entry fwd": do_bench(lambda: ta.forgetting_attention_triton(q, k, v, log_f))}

        def fb():
            ta.forgetting_attention_triton(q, k, v, log_f).backward(do)
        t["entry fwd+bwd"] = do_bench(fb, grad_to_none=leaves)
        if loads is None:
            t["round34 fwd"] = do_bench(lambda: r34.forward_tma(q, k, v, c, sm, cfg))
            t["round34 bwd"] = do_bench(lambda: r34.backward_tma(do, q, k, v, c, o, lse, sm, cfg))
            for tile in ((64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 128, 4, 3)):
                c2 = ta.KernelConfig(T_(*tile), cfg.dkdv, cfg.dq)
                t[f"direct fwd {tile}"] = do_bench(lambda: ta._forward(q, k, v, c, sm, c2))
        print((B, H, N, D), "TMA" if loads is None else "pointers", {a: round(b, 3) for a, b in t.items()}, flush=True)
    ta.TMA_LOADS = None

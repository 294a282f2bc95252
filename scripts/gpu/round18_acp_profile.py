"""Where the pruned kernels' time goes (session 2026-11-30, fifth): per-kernel GPU time of one
forward+backward with and without ACP at two benchmark shapes, and the wall time per call."""
import json
import os
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from kernels.triton_attention import forgetting_attention_triton

out = {}
for B, H, N, D in [(8, 16, 2048, 64), (1, 16, 16384, 64)]:
    q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    log_f = F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0).requires_grad_()
    do = torch.randn_like(q)
    for tol in (None, -10.0):
        def step():
            forgetting_attention_triton(q, k, v, log_f, log_pruning_tolerance=tol).backward(do)
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 20 * 1e3
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
        rows = sorted(((e.key, e.device_time_total / 5 / 1e3, e.count // 5) for e in prof.key_averages()
                       if e.device_time_total > 0), key=lambda r: -r[1])
        cpu = sum(e.self_cpu_time_total for e in prof.key_averages()) / 5 / 1e3
        label = f"{B},{H},{N},{D} tol={tol}"
        out[label] = {"wall_ms": wall, "cpu_self_ms": cpu, "kernels_ms": rows[:14]}
        print(label, f"wall {wall:.3f} ms", f"cpu self {cpu:.3f} ms")
        for r in rows[:14]:
            print(f"   {r[1]:8.4f} ms  x{r[2]}  {r[0][:100]}")
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "acp_profile.json"), "w"), indent=1)

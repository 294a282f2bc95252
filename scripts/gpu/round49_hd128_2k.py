"""Diagnosis (session 2026-11-30, tenth): why kernels.bench's 8,8,2048,128 forward+backward of ours
takes 1.1-1.35 ms (round37, round48) while its kernels take 0.22 + 0.72 ms (round38, round46), when
at 8,16,2048,64 the benchmark and the kernels agree (0.98 ms).

For each shape, in the benchmark's order (the 16k hd64 shape first, as kernels.bench runs it just
before), the entry point's forward+backward timed as kernels.bench times it, then 30 iterations
under torch.profiler: the GPU time of each kernel and copy, and the span from the first to the last
GPU activity of an iteration, against the CPU time of the iteration.

    python scripts/gpu/round49_hd128_2k.py out.json
"""
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernels.triton_attention import forgetting_attention_triton as attn  # noqa: E402


def inputs(B, H, N, D):
    q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    log_f = F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0).requires_grad_()
    return q, k, v, log_f


def study(B, H, N, D) -> dict:
    q, k, v, log_f = inputs(B, H, N, D)
    leaves = [q, k, v, log_f]
    do = torch.randn_like(attn(q, k, v, log_f))

    def fb():
        attn(q, k, v, log_f).backward(do)

    r = {"shape": [B, H, N, D],
         "fwd_ms": do_bench(lambda: attn(q, k, v, log_f), warmup=25, rep=100, return_mode="median"),
         "fwd_bwd_ms": do_bench(fb, warmup=25, rep=100, grad_to_none=leaves, return_mode="median"),
         "fwd_bwd_ms_grads_kept": do_bench(fb, warmup=25, rep=100, return_mode="median")}
    print(json.dumps(r), flush=True)
    for t in leaves:
        t.grad = None
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(30):
            for t in leaves:
                t.grad = None
            fb()
        torch.cuda.synchronize()
    trace = Path(f"/tmp/trace-{B}-{H}-{N}-{D}.json")
    prof.export_chrome_trace(str(trace))
    events = [e for e in json.loads(trace.read_text())["traceEvents"]
              if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    gpu = {}
    for e in events:
        gpu.setdefault(e["name"], [0, 0.0])
        gpu[e["name"]][0] += 1
        gpu[e["name"]][1] += e["dur"]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events)
    busy, end = 0.0, None
    for s, e in spans:  # union of the GPU intervals
        if end is None or s > end:
            busy += e - s
            end = e
        elif e > end:
            busy += e - end
            end = e
    r["profiled_gpu_busy_us_per_iter"] = busy / 30
    r["profiled_span_us_per_iter"] = (spans[-1][1] - spans[0][0]) / 30
    r["gpu_us_per_iter"] = {n: (c / 30, round(t / 30, 1)) for n, (c, t) in sorted(gpu.items(), key=lambda x: -x[1][1])}
    print(json.dumps(r), flush=True)
    return r


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "hd128-2k.json")
    rows = [study(*s) for s in ((8, 8, 2048, 128), (1, 16, 16384, 64), (8, 8, 2048, 128), (8, 16, 2048, 64))]
    out.write_text(json.dumps(rows, indent=1))
    for r in rows:
        print(r["shape"], f"fwd {r['fwd_ms']:.3f}  fwd+bwd {r['fwd_bwd_ms']:.3f} (grads kept {r['fwd_bwd_ms_grads_kept']:.3f})  "
              f"profiled: GPU busy {r['profiled_gpu_busy_us_per_iter']:.0f} us of {r['profiled_span_us_per_iter']:.0f} per iteration")
        for n, (c, t) in list(r["gpu_us_per_iter"].items())[:8]:
            print(f"    {t:8.1f} us  x{c:g}  {n[:90]}")


if __name__ == "__main__":
    main()

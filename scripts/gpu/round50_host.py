"""Diagnosis, part two (session 2026-11-30, tenth): round49 found the 8,8,2048,128 forward+backward
at 0.945 ms when timed first and 1.337 ms after the 16k hd64 shape, with the same GPU busy time
(0.93 ms per iteration under the profiler). Is the extra time on the host (the launches take
longer), in do_bench's L2 flush between repetitions, or in Python's garbage collector?

Per state (fresh, after the 16k hd64 shape, after torch.cuda.empty_cache(), with gc disabled):
do_bench as kernels.bench times it; a loop of CUDA events without any flush; the host time of one
forward+backward (perf_counter around the calls, the GPU idle before each, so launches never wait
on a full queue).

    python scripts/gpu/round50_host.py out.json
"""
import gc
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernels.triton_attention import forgetting_attention_triton as attn  # noqa: E402


def inputs(B, H, N, D):
    q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    log_f = F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0).requires_grad_()
    return q, k, v, log_f


def measure(state, B, H, N, D) -> dict:
    q, k, v, log_f = inputs(B, H, N, D)
    leaves = [q, k, v, log_f]
    do = torch.randn_like(attn(q, k, v, log_f))

    def fb():
        attn(q, k, v, log_f).backward(do)

    r = {"state": state, "shape": [B, H, N, D],
         "do_bench_ms": do_bench(fb, warmup=25, rep=100, grad_to_none=leaves, return_mode="median")}
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(50)]
    for s, e in events:  # back to back, no flush
        for t in leaves:
            t.grad = None
        s.record()
        fb()
        e.record()
    torch.cuda.synchronize()
    r["events_no_flush_ms"] = sorted(s.elapsed_time(e) for s, e in events)[25]
    host = []
    for _ in range(30):
        for t in leaves:
            t.grad = None
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fb()
        host.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    r["host_ms_median"] = sorted(host)[15]
    print(json.dumps(r), flush=True)
    return r


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "host.json")
    small, big = (8, 8, 2048, 128), (1, 16, 16384, 64)
    rows = [measure("fresh", *small), measure("fresh", *(8, 16, 2048, 64)), measure("16k", *big),
            measure("after 16k", *small), measure("after 16k", *(8, 16, 2048, 64))]
    torch.cuda.empty_cache()
    rows.append(measure("after empty_cache", *small))
    measure("16k again", *big)
    gc.collect()
    gc.disable()
    rows.append(measure("after 16k, gc disabled", *small))
    gc.enable()
    out.write_text(json.dumps(rows, indent=1))
    for r in rows:
        print(f"{r['state']:<24} {','.join(map(str, r['shape'])):<16} do_bench {r['do_bench_ms']:.3f}  "
              f"events, no flush {r['events_no_flush_ms']:.3f}  host {r['host_ms_median']:.3f} ms")


if __name__ == "__main__":
    main()

"""Diagnosis, part four (session 2026-11-30, tenth): round51 timed the host side of the entry
point at 2k hd128: forward 153 us, _backward called directly 233 us, but forward + autograd
backward 1216 us. What in the autograd backward costs 0.8 ms? Host time (GPU idle before each
call) of an autograd.Function's forward + backward whose backward does: nothing; _bind_context;
build 5 TMA descriptors; one scan launch; our _backward; and ours through the entry point.

    python scripts/gpu/round52_autograd_host.py
"""
import sys
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernels import triton_attention as ta  # noqa: E402

B, H, N, D = 8, 8, 2048, 128
q, k, v, do = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
log_f = F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0)
SM = D ** -0.5
CFG = ta.default_config(D, N, ta.use_tma(q, k, v))
O, LSE, C, _ = ta._forward_gated(q, k, v, log_f, SM, CFG)
WORK = {
    "nothing": lambda: None,
    "_bind_context": lambda: ta._bind_context(q.device),
    "5 descriptors": lambda: ta._operands(True, (q, 128), (k, 64), (v, 64), (O, 128), (do, 128)),
    "one scan launch": lambda: ta.gate_cumsum(log_f),
    "_backward": lambda: ta._backward(do, q, k, v, C, O, LSE, SM, CFG),
}


class Probe(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, name):
        ctx.name = name
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        WORK[ctx.name]()
        return g, None


def host_us(fn, n=40):
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return sorted(times)[n // 2]


def main():
    x = torch.randn(16, device="cuda", requires_grad=True)
    g = torch.ones(16, device="cuda")
    for name, fn in WORK.items():
        fn()
        direct = host_us(fn)
        through = host_us(lambda: Probe.apply(x, name).backward(g))
        print(f"{name:<18} called directly {direct:8.1f} us   in an autograd backward (with its forward) {through:8.1f} us",
              flush=True)
    qg, kg, vg, lg = (t.clone().requires_grad_() for t in (q, k, v, log_f))
    print(f"entry forward + backward {host_us(lambda: ta.forgetting_attention_triton(qg, kg, vg, lg).backward(do)):8.1f} us")

    def on_thread():  # the same work on a fresh thread of our own: is it the thread or autograd?
        r = {}
        t = threading.Thread(target=lambda: r.setdefault("us", host_us(WORK["_backward"])))
        t.start()
        t.join()
        return r["us"]
    print(f"_backward on a fresh Python thread {on_thread():8.1f} us; switch interval {sys.getswitchinterval()} s;"
          f" threads alive {threading.active_count()}")

    # A worker that sleeps between calls and is woken for each, as autograd's device thread is:
    # slow too? Then it is the wake-up (a cold core), not autograd.
    go, done, stop = threading.Event(), threading.Event(), [False]

    def worker():
        while True:
            go.wait()
            go.clear()
            if stop[0]:
                return
            WORK["_backward"]()
            done.set()
    t = threading.Thread(target=worker)
    t.start()

    def handoff():
        go.set()
        done.wait()
        done.clear()
    print(f"_backward on a woken worker thread (handoff each call) {host_us(handoff):8.1f} us")
    stop[0] = True
    go.set()
    t.join()


if __name__ == "__main__":
    main()

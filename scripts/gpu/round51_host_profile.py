"""Diagnosis, part three (session 2026-11-30, tenth): round50 measured the host time of one
forward+backward of the entry point at 0.87-1.34 ms (the GPU's work at 2k tokens is 0.93 ms), so
the 2k rows are host-bound and their benchmark time depends on the host's pace. Where do the host's
milliseconds go? perf_counter of each piece (GPU idle before each call), then cProfile of the
forward and of the backward called on this thread (autograd runs it on a worker thread, which
cProfile does not see).

    python scripts/gpu/round51_host_profile.py out.txt
"""
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernels import triton_attention as ta  # noqa: E402


def host_ms(fn, n=30):
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return sorted(times)[n // 2]


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "host-profile.txt")
    B, H, N, D = 8, 8, 2048, 128
    q, k, v, do = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    log_f = F.logsigmoid(torch.randn(B, N, H, device="cuda") + 3.0)
    sm = D ** -0.5
    cfg = ta.default_config(D, N, ta.use_tma(q, k, v))
    o, lse, c, _ = ta._forward_gated(q, k, v, log_f, sm, cfg)
    ta._backward(do, q, k, v, c, o, lse, sm, cfg)
    x = torch.empty(N, device="cuda")
    lines = []
    pieces = {
        "empty op (torch.empty)": lambda: torch.empty(N, device="cuda"),
        "use_tma(q, k, v, o, do)": lambda: ta.use_tma(q, k, v, o, do),
        "_tma_launch(q, k, v, o, do)": lambda: ta._tma_launch(q, k, v, o, do),
        "5 descriptors (_operands)": lambda: ta._operands(True, (q, 128), (k, 64), (v, 64), (o, 128), (do, 128)),
        "gate_cumsum (one scan launch)": lambda: ta.gate_cumsum(log_f),
        "_forward (fwd launch)": lambda: ta._forward(q, k, v, c, sm, cfg),
        "_forward_gated": lambda: ta._forward_gated(q, k, v, log_f, sm, cfg),
        "_backward (3 launches)": lambda: ta._backward(do, q, k, v, c, o, lse, sm, cfg),
        "x.add_(1) (one torch launch)": lambda: x.add_(1),
    }
    for name, fn in pieces.items():
        fn()
        lines.append(f"{name:<34} {host_ms(fn) * 1e3:8.1f} us")
    qg, kg, vg, lg = (t.clone().requires_grad_() for t in (q, k, v, log_f))
    lines.append(f"{'entry forward (autograd)':<34} {host_ms(lambda: ta.forgetting_attention_triton(qg, kg, vg, lg)) * 1e3:8.1f} us")
    lines.append(f"{'entry forward + backward':<34} "
                 f"{host_ms(lambda: ta.forgetting_attention_triton(qg, kg, vg, lg).backward(do)) * 1e3:8.1f} us")
    print("\n".join(lines), flush=True)
    for name, fn in (("forward (entry)", lambda: ta.forgetting_attention_triton(q, k, v, log_f)),
                     ("backward (_backward)", lambda: ta._backward(do, q, k, v, c, o, lse, sm, cfg))):
        prof = cProfile.Profile()
        torch.cuda.synchronize()
        prof.enable()
        for _ in range(50):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        lines.append(f"\n==== cProfile, 50 x {name}, by own time\n" + s.getvalue())
    out.write_text("\n".join(lines))
    print(lines[-1][:6000])


if __name__ == "__main__":
    main()

"""Where a training step's GPU time goes: one trial's step under torch.profiler.

    python benchmarks/profile_step.py studies/throughput/fox_pro_125m.yaml [--steps 3] [--out FILE]
        [--trace step.json.gz] [--fused-qkv auto|on|off]

Builds the trial's model, data and optimizer as `wb train` does, runs warm-up steps (compilation),
times 10 steps, then profiles ``--steps`` steps and sums each GPU kernel's time per step. Prints
the step time, the time per kernel group (attention, matmuls, Triton kernels that torch.compile
generated, optimizer, other) and the top kernels; writes the same as JSON.
"""
from __future__ import annotations

import argparse
import gzip
import shutil
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch

import common
from foxwb.workbench.data.load import load_data
from foxwb.workbench.spec.errors import read_yaml, validate
from foxwb.workbench.execution import Execution
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.steps import BatchQueue, make_optimizer, step_callable, train_step
from foxwb.workbench.train.loop import autocast_for

# First match wins: inductor's kernels are named "triton_" and after the ops they fuse or feed
# ("..._forgetting_attention_bwd_..._qkv_prep_bwd_..." is a fused elementwise kernel, neither the
# attention nor ours), so "triton_" is tested first.
GROUPS = (
    ("torch.compile Triton", ("triton_",)),
    ("KV-shift + QK-norm (ours)", ("qkv_prep_", "columns_kernel")),  # before attention: fwd_kernel
    ("attention (ours)", ("fwd_kernel", "dkdv_kernel", "dq_kernel", "scan_kernel")),
    ("loss (ours)", ("ce_fwd_grad_kernel",)),
    ("attention (SDPA)", ("flash", "cudnn", "fmha", "attention")),
    ("matmul", ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "matmul")),
    ("optimizer", ("multi_tensor", "adam", "foreach")),
)


def group_of(name: str) -> str:
    low = name.lower()
    for group, keys in GROUPS:
        if any(k in low for k in keys):
            return group
    return "other"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("trial")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<gpu>_profile.json)")
    ap.add_argument("--device", default="cuda", help="cpu only to try the script itself: it times CPU ops then")
    ap.add_argument("--trace", help="also write a gzipped Chrome trace of one more step, host and GPU "
                    "(chrome://tracing or ui.perfetto.dev): where the GPU waits on the host")
    ap.add_argument("--fused-qkv", choices=("auto", "on", "off"), default="auto",
                    help="KV-shift and QK-norm through kernels.prepare_qkv (auto: on CUDA) or the "
                    "components' code under torch.compile (off): the two side by side")
    args = ap.parse_args(argv)
    trial = validate(TrialSpec, read_yaml(Path(args.trial)), args.trial)
    spec = trial.train
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.manual_seed(trial.seed)
    execution = Execution.of_trial(spec).but(fused_qkv={"auto": None, "on": True, "off": False}[args.fused_qkv])
    model = build_model(trial.model, execution).to(device)
    data = load_data(trial.data, trial.model.vocab_size, trial.seed)
    opt = make_optimizer(model, spec, device)
    step_fn = step_callable(model, execution, device, spec.grad_accum)
    autocast = autocast_for(spec, device)
    batches = BatchQueue(data, trial.seed, spec, device)

    def step(i):
        train_step(step_fn, model, opt, batches, i, spec, autocast, execution.compile)

    for i in range(args.warmup):
        step(i)
    times = []
    for i in range(10):
        sync()
        t0 = time.perf_counter()
        step(args.warmup + i)
        sync()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    tokens = spec.batch_size * spec.grad_accum * data.context
    activity = torch.profiler.ProfilerActivity.CUDA if device.type == "cuda" else torch.profiler.ProfilerActivity.CPU
    kind = torch.autograd.DeviceType.CUDA if device.type == "cuda" else torch.autograd.DeviceType.CPU
    # Step numbers continue from the timed ones: each step's batches were prefetched by the last.
    first = args.warmup + 10
    with torch.profiler.profile(activities=[activity]) as prof:
        for i in range(args.steps):
            step(first + i)
        sync()
    per_kernel = defaultdict(float)
    for ev in prof.events():
        if ev.device_type == kind:
            per_kernel[ev.name] += (ev.device_time if device.type == "cuda" else ev.self_cpu_time_total) / 1e3 / args.steps  # ms per step
    groups = defaultdict(float)
    for name, ms in per_kernel.items():
        groups[group_of(name)] += ms
    gpu_ms = sum(per_kernel.values())
    result = {
        "trial": args.trial, "fused_qkv": args.fused_qkv,
        "step_ms": step_s * 1e3, "tokens_per_step": tokens, "tokens_per_s": tokens / step_s,
        "gpu_busy_ms": gpu_ms, "groups_ms": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
        "top_kernels_ms": dict(sorted(per_kernel.items(), key=lambda kv: -kv[1])[:40]),
    }
    common.write(args.out, "profile", result, argv)
    if args.trace:
        activities = [torch.profiler.ProfilerActivity.CPU] + ([activity] if device.type == "cuda" else [])
        with torch.profiler.profile(activities=activities) as traced:
            step(first + args.steps)
            sync()
        raw = Path(args.trace).with_suffix(".tmp.json")
        traced.export_chrome_trace(str(raw))
        with open(raw, "rb") as src, gzip.open(args.trace, "wb") as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()
    print(f"{args.trial}: step {step_s * 1e3:.1f} ms ({tokens / step_s:,.0f} tokens/s), GPU busy {gpu_ms:.1f} ms/step")
    for g, ms in result["groups_ms"].items():
        print(f"  {g:<24} {ms:8.2f} ms")
    for name, ms in list(result["top_kernels_ms"].items())[:25]:
        print(f"    {ms:8.2f}  {name[:110]}")


if __name__ == "__main__":
    main()

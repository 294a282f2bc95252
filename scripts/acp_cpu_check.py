"""Does adaptive computation pruning's approximation change training? CPU only.

    python scripts/acp_cpu_check.py MODE [TOKENS [SEED]]

Trains studies/trial_tiny.yaml (evaluated at its context only) with the reference attention in
one of three modes: ``none`` (exact, fp32), ``f64`` (exact with its arithmetic in fp64: a
perturbation of rounding only, the yardstick for how far any perturbation moves the end of a
run), or a number ln eps (entries with decay below pruning's threshold dropped one by one, more
than the kernel's tiles drop). Prints the validation loss and the share of causal pairs kept.
Results: docs/performance.md (adaptive computation pruning).
"""
import math
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

import kernels
import kernels.naive as naive
from kernels import pruning

LOG_EPS = float(sys.argv[1]) if sys.argv[1] not in ("none", "f64") else None
F64 = sys.argv[1] == "f64"
orig = naive.forgetting_attention_naive
stats = []


def pruned(q, k, v, log_f, *, scale=None, compute_dtype=torch.float32):
    if LOG_EPS is None or log_f is None:
        # f64: the exact attention with its arithmetic in fp64, a perturbation of rounding only.
        return orig(q, k, v, log_f, scale=scale, compute_dtype=torch.float64 if F64 else compute_dtype)
    B, T, H, D = q.shape
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    with torch.no_grad():
        delta = pruning.threshold(q, k, scale, LOG_EPS).view(B, H)
    scores = torch.einsum("bihd,bjhd->bhij", q.float(), k.float()) * scale
    c = log_f.float().cumsum(1).transpose(1, 2)
    dec = c[..., :, None] - c[..., None, :]
    scores = scores + dec
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    keep = causal & (dec.detach() >= delta[..., None, None])
    stats.append(keep.float().sum().item() / (causal.sum().item() * B * H))
    probs = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.einsum("bhij,bjhd->bihd", probs, v.float()).to(q.dtype)


# kernels.forgetting_attention calls the reference through this module attribute on the CPU.
kernels.forgetting_attention_naive = pruned
from workbench.specs import TrialSpec  # noqa: E402  (after the patch above)
from workbench.trial import run_trial  # noqa: E402
spec = yaml.safe_load(Path("studies/trial_tiny.yaml").read_text())
spec["eval"]["length_multiples"] = [1]
if len(sys.argv) > 2:
    spec["train"]["tokens"] = int(sys.argv[2])
if len(sys.argv) > 3:
    spec["seed"] = int(sys.argv[3])
t = time.time()
r = run_trial(TrialSpec.model_validate(spec), Path(tempfile.mkdtemp(prefix="acp_cpu_check_")))
print(sys.argv[1], "seed", spec["seed"], "val_loss", round(r["val_loss"], 4), "kept first/last 50 calls", round(sum(stats[:50]) / max(1, len(stats[:50])), 3),
      round(sum(stats[-50:]) / max(1, len(stats[-50:])), 3), f"{time.time() - t:.0f} s", flush=True)

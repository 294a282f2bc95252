"""Parameter counts and FLOPs of a model spec, without allocating the model's weights."""
from __future__ import annotations

from collections import defaultdict

import torch

from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import ModelSpec


# param_breakdown per model spec (its JSON), built once per process: a study's trials share a few
# models, and each build on meta costs about 50 ms (a dry run of 334 trials spent 34 of its 42 s
# building 668 models for six specs). A kind's class cannot change once registered (registry.py).
_BREAKDOWNS: dict[str, dict[str, int]] = {}


def param_breakdown(spec: ModelSpec) -> dict[str, int]:
    """Parameters per component: embedding, head, final norm and, summed over layers, each
    attention projection and slot, the block norms and the MLP."""
    key = spec.model_dump_json()
    if key not in _BREAKDOWNS:
        _BREAKDOWNS[key] = _count(spec)
    return dict(_BREAKDOWNS[key])


def _count(spec: ModelSpec) -> dict[str, int]:
    with torch.device("meta"):
        model = build_model(spec)
    counts: dict[str, int] = defaultdict(int)
    seen: set[int] = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:  # a tied head shares the embedding
            continue
        seen.add(id(p))
        parts = name.split(".")
        if parts[0] == "blocks":
            # blocks.<i>.attn.<wq|slot>.*  /  blocks.<i>.<attn_norm|mlp_norm|mlp>.*
            key = f"attention.{parts[3]}" if parts[2] == "attn" else parts[2]
        else:
            key = parts[0]
        counts[key] += p.numel()
    return dict(counts)


def param_counts(spec: ModelSpec) -> dict[str, int]:
    """``total``; ``non_embedding`` = total without the input embedding (the paper's N);
    ``blocks`` = blocks + final norm (docs/fox-notes.md, "Parameter counts")."""
    parts = param_breakdown(spec)
    total = sum(parts.values())
    embedding = 0 if spec.tie_embeddings else parts.get("embed", 0)
    return {
        "total": total,
        "non_embedding": total - embedding,
        "blocks": total - parts.get("embed", 0) - parts.get("head", 0),
    }


def flops_per_token(spec: ModelSpec, context: int) -> dict[str, float]:
    """Forward FLOPs per token: 2N (matmuls with the weights, N without the input embedding) plus
    causal attention 2 * n_layers * d_model * T (QK^T and PV, halved by the mask: docs/fox-notes.md, "FLOPs").
    With a sliding window W < T only the band counts: T / 2 keys per query become W - W^2 / (2T)
    (the mean of min(i, W) over the T queries), which is T / 2 at W = T. Training is 3x the forward."""
    n = param_counts(spec)["non_embedding"]
    window = spec.attention.window
    keys = context / 2 if window is None or window >= context else window - window**2 / (2 * context)
    attention = 4 * spec.n_layers * spec.d_model * keys
    forward = 2 * n + attention
    return {"forward": float(forward), "train": float(3 * forward), "attention_forward": float(attention)}

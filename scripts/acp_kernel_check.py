"""The pruned kernel against the unpruned one where training takes it (CPU, Triton interpreter).

    python scripts/acp_kernel_check.py

1. Trained-like gates and norms: heads forgetting at -0.01 to -20 nats per token, q and k scaled
   0.3x to 3x, fp16 inputs (the decay-reference path bf16 takes on the GPU): each output's and
   gradient's relative error against fp64, unpruned and pruned (ln eps = -10).
2. A FoX (Pro) model (fp32, 2 layers, 256 tokens, gates as initialised): the loss and every
   parameter's gradient with and without pruning.
Results: docs/performance.md (adaptive computation pruning).
"""
import math
import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import kernels.triton_attention as ta  # noqa: E402
from kernels.naive import forgetting_attention_grads_chunked  # noqa: E402
from workbench.model import build_model  # noqa: E402
from workbench.specs import ModelSpec  # noqa: E402

TILES = ta.KernelConfig(ta.TileConfig(64, 64, 4, 1), ta.TileConfig(128, 64, 4, 1), ta.TileConfig(64, 64, 4, 1))


def kernel_regimes():
    torch.manual_seed(0)
    for T, means, qk_scale in [(700, (-0.01, -1.0, -8.0), 3.0), (700, (-0.3, -3.0, -20.0), 1.0),
                               (513, (-0.7, -0.7, -0.7), 0.3)]:
        B, H, D = 1, len(means), 64
        q, k, v = (torch.randn(B, T, H, D) for _ in range(3))
        q, k = q * qk_scale, k * qk_scale
        bias = torch.tensor([-math.log(math.expm1(-m)) for m in means])
        log_f = F.logsigmoid(torch.randn(B, T, H) + bias)
        do = torch.randn(B, T, H, D)
        ref = forgetting_attention_grads_chunked(q, k, v, log_f, do, chunk=256, cumsum_dtype=torch.float64)
        got = {}
        for tol in (None, -10.0):
            leaves = [t.clone().half().requires_grad_() for t in (q, k, v)] + [log_f.clone().requires_grad_()]
            o = ta.forgetting_attention_triton(*leaves, config=TILES, log_pruning_tolerance=tol)
            got[tol] = (o, *torch.autograd.grad(o, leaves, do.half()))
        for name, a, b, r in zip(("o", "dq", "dk", "dv", "dlog_f"), got[None], got[-10.0], ref):
            err = [((x.double() - r).norm() / r.norm()).item() for x in (a, b)]
            print(f"T={T} log f {means} qk x{qk_scale} {name:6s} unpruned {err[0]:.2e}  pruned {err[1]:.2e}")


def model_gradients():
    out = {}
    for tol in (None, -10.0):
        torch.manual_seed(0)
        spec = ModelSpec(preset="fox_pro", vocab_size=128, d_model=64, n_layers=2, n_heads=2,
                         attention={"log_pruning_tolerance": tol})
        model = build_model(spec)
        model.set_attention_backend("triton")
        tokens = torch.randint(0, 128, (2, 256), generator=torch.Generator().manual_seed(1))
        loss = model(tokens, targets=tokens)
        loss.backward()
        out[tol] = (loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()})
    (la, ga), (lb, gb) = out[None], out[-10.0]
    worst = max(((gb[n] - ga[n]).norm() / ga[n].norm().clamp_min(1e-30)).item() for n in ga)
    print(f"model: loss {la:.6f} unpruned, {lb:.6f} pruned; largest relative gradient difference {worst:.2e}")


if __name__ == "__main__":
    kernel_regimes()
    model_gradients()

"""benchmarks/attention.py's pieces that run without a GPU."""
import torch
import torch.nn.functional as F

import attention

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def bench_inputs(T, D=16):
    g = torch.Generator().manual_seed(7)
    q, k = (torch.randn(1, T, 2, D, generator=g) for _ in range(2))
    return q.to(DEVICE), k.to(DEVICE), F.logsigmoid(torch.randn(1, T, 2, generator=g) + 3.0).to(DEVICE)


def test_benchmark_reports_the_share_of_keys_the_pruned_forward_visits():
    """kept_fraction on the benchmark's own gates (log f about -0.05): a share in (0, 1] that falls as
    the sequence grows past the gates' memory."""
    shares = [attention.kept_fraction(*bench_inputs(T)) for T in (64, 1024)]
    assert 0 < shares[1] < shares[0] <= 1, shares

"""The Gluon forward on a Hopper GPU against the fp64 reference, with the Triton backward reading its
output and log-sum-exp: every tile of its table, at lengths no tile divides, with and without the
gate, and pruned; and the Gluon dK/dV kernel (gluon_bwd.py) the same way, each gradient beside the
Triton backward's own error. Skipped elsewhere; run on the GPU machine (benchmarks/gpu.sh tests)."""
import pytest
import torch
import torch.nn.functional as F

from foxwb.kernels.attention import configs, launch, op
from foxwb.kernels.attention.naive import forgetting_attention_grads_chunked
from tests.kernels.helpers import rel

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not (HOPPER and launch._gluon_importable()),
                                                  reason="needs an sm_90 GPU and a Triton with Gluon")]

ENTRIES = [(D, tiles) for D, entries in configs.GLUON_FWD_TILES.items() for _, tiles, _ in entries]
BWD_ENTRIES = [(D, tiles) for D, entries in configs.GLUON_BWD_TILES.items() for _, tiles, _ in entries]


def inputs(B, T, H, D, shift, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    return q, k, v, F.logsigmoid(torch.randn(B, T, H, device="cuda", generator=g) + shift)


def forward(q, k, v, log_f, gluon, log_eps=None):
    launch.GLUON_FWD = gluon
    try:
        cfg = configs.default_config(q.shape[-1], q.shape[1], launch.use_tma(q, k, v), q.dtype)
        o, lse, _, _ = launch.forward_gated(q, k, v, log_f, q.shape[-1] ** -0.5, cfg, log_eps)
    finally:
        launch.GLUON_FWD = None
    return o, lse


@pytest.mark.parametrize("D,tiles", ENTRIES, ids=lambda x: str(x))
@pytest.mark.parametrize("B,T,H", [(2, 1000, 3), (1, 4133, 2), (1, 77, 1)])
def test_gluon_forward_and_the_backward_after_it_within_5e3_of_fp64(monkeypatch, D, tiles, B, T, H):
    monkeypatch.setitem(configs.GLUON_FWD_TILES, D, ((1 << 62, tiles, True),))
    q, k, v, log_f = inputs(B, T, H, D, shift=3.0, seed=T)
    do = torch.randn_like(q)
    ref = forgetting_attention_grads_chunked(q, k, v, log_f, do, cumsum_dtype=torch.float64)
    o, lse = forward(q, k, v, log_f, True)
    _, lse_triton = forward(q, k, v, log_f, False)
    assert rel(o, ref[0]) < 5e-3
    assert (lse - lse_triton).abs().max().item() < 1e-4  # the Triton backward reads it
    o_plain, _ = forward(q, k, v, None, True)
    assert rel(o_plain, forgetting_attention_grads_chunked(q, k, v, None, do)[0]) < 5e-3
    # The whole op: the Gluon forward (chosen by default through the table set above), the Triton backward.
    leaves = [t.clone().requires_grad_() for t in (q, k, v, log_f)]
    out = op.forgetting_attention_triton(*leaves)
    grads = torch.autograd.grad(out, leaves, do)
    errors = {n: rel(g, r) for n, g, r in zip(("o", "dq", "dk", "dv", "dlog_f"), (out, *grads), ref)}
    assert max(errors.values()) < 5e-3, errors


@pytest.mark.parametrize("D,tiles", ENTRIES, ids=lambda x: str(x))
def test_gluon_pruned_forward_within_5e3_of_the_unpruned_fp64_reference(monkeypatch, D, tiles):
    monkeypatch.setitem(configs.GLUON_FWD_TILES, D, ((1 << 62, tiles, True),))
    q, k, v, log_f = inputs(1, 4133, 2, D, shift=0.0, seed=1)  # log f ~ -0.7: most key tiles pruned
    ref = forgetting_attention_grads_chunked(q, k, v, log_f, torch.randn_like(q), cumsum_dtype=torch.float64)
    o, _ = forward(q, k, v, log_f, True, log_eps=-10.0)
    assert rel(o, ref[0]) < 5e-3


def test_the_table_chooses_the_gluon_forward_by_default_where_it_says():
    for D, entries in configs.GLUON_FWD_TILES.items():
        shortest = 64
        for longest, _, chosen in entries:
            T = min(longest, max(2048, shortest))  # a length this entry serves
            shortest = longest + 1
            q = torch.randn(1, T, 2, D, device="cuda", dtype=torch.bfloat16)
            assert launch.use_gluon(q, q, q) == chosen, (D, T)
            assert not launch.use_gluon(q.float(), q.float(), q.float())  # fp32: the exact Triton path


def op_grads(q, k, v, log_f, do, gluon_bwd, log_eps=None):
    """o and the four gradients of the op (the Triton forward; the Gluon dK/dV kernel or not)."""
    launch.GLUON_FWD, launch.GLUON_BWD = False, gluon_bwd
    try:
        leaves = [t.clone().requires_grad_() for t in (q, k, v, log_f) if t is not None]
        out = op.forgetting_attention_triton(*leaves[:3], leaves[3] if log_f is not None else None,
                                             log_pruning_tolerance=log_eps)
        return (out, *torch.autograd.grad(out, leaves, do))
    finally:
        launch.GLUON_FWD = launch.GLUON_BWD = None


@pytest.mark.parametrize("D,tiles", BWD_ENTRIES, ids=lambda x: str(x))
@pytest.mark.parametrize("B,T,H,shift,log_eps", [(2, 1000, 3, 3.0, None), (1, 777, 2, 3.0, None),
                                                 (1, 4133, 2, 3.0, None), (1, 77, 1, 3.0, None),
                                                 (1, 4133, 2, 0.0, -10.0), (2, 777, 2, None, None)],
                         ids=["1000", "777", "4133", "77", "4133-pruned", "777-no-gate"])
def test_gluon_dkdv_gradients_within_5e3_of_fp64_as_the_triton_backwards(monkeypatch, D, tiles, B, T, H, shift,
                                                                         log_eps):
    monkeypatch.setitem(configs.GLUON_BWD_TILES, D, ((1 << 62, tiles, True),))
    q, k, v, log_f = inputs(B, T, H, D, shift=shift or 0.0, seed=T + D)
    log_f = None if shift is None else log_f
    do = torch.randn_like(q)
    ref = forgetting_attention_grads_chunked(q, k, v, log_f, do, cumsum_dtype=torch.float64)
    names = ("o", "dq", "dk", "dv", "dlog_f")[:4 if log_f is None else 5]
    gluon = {n: rel(g, r) for n, g, r in zip(names, op_grads(q, k, v, log_f, do, True, log_eps), ref)}
    triton = {n: rel(g, r) for n, g, r in zip(names, op_grads(q, k, v, log_f, do, False, log_eps), ref)}
    print(D, tiles, B, T, H, log_eps, "gluon", gluon, "triton", triton)
    assert max(gluon.values()) < 5e-3, (gluon, triton)
    for n in names:  # no worse than the Triton kernel's own rounding, give or take
        assert gluon[n] <= 1.25 * triton[n] + 2e-4, (n, gluon, triton)


def test_the_table_chooses_the_gluon_dkdv_kernel_by_default_where_it_says():
    for D, entries in configs.GLUON_BWD_TILES.items():
        shortest = 64
        for longest, _, chosen in entries:
            T = min(longest, max(2048, shortest))
            shortest = longest + 1
            q = torch.randn(1, T, 2, D, device="cuda", dtype=torch.bfloat16)
            assert launch.use_gluon(q, q, q, q, q, backward=True) == chosen, (D, T)
            assert not launch.use_gluon(*(q.float(),) * 5, backward=True)

"""Adaptive computation pruning (pruning.py): the tile bounds against brute force, and the
Triton kernel with pruning on, under the interpreter on CPU (on CUDA where there is one).

The kernel tests poison what a pruned tile holds with NaN: a kernel that visits a tile it should
skip turns its rows into NaN, so the tests fail unless the tiles are really skipped; the rows that
remain must match the reference within the tolerance's bound."""
import math

import pytest
import torch
import torch.nn.functional as F

from foxwb import kernels
from foxwb.kernels.attention import configs, launch, op
from foxwb.kernels.attention import pruning
from foxwb.kernels.attention.naive import forgetting_attention_grads_chunked
from tests.kernels.helpers import close

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
B, H = 2, 3


def decays(T, mean_log_f, generator):
    """c = cumsum(log f) (B * H, T), log f <= 0 around mean_log_f."""
    logit = torch.randn(B * H, T, generator=generator, dtype=torch.float64) - math.log(math.expm1(-mean_log_f))
    return F.logsigmoid(logit).cumsum(1).float()


def brute_force(c, delta, block_m, block_n):
    """Per tile pair: does it hold a causal entry with c_i - c_j >= delta?"""
    BH, T = c.shape
    i = torch.arange(T)
    D = c[:, :, None] - c[:, None, :]
    keep = (D >= delta[:, None, None]) & (i[None, :, None] >= i[None, None, :])
    n_m, n_n = -(-T // block_m), -(-T // block_n)
    tiles = torch.zeros(BH, n_m, n_n, dtype=torch.bool)
    for m in range(n_m):
        for n in range(n_n):
            tiles[:, m, n] = keep[:, m * block_m:(m + 1) * block_m, n * block_n:(n + 1) * block_n].flatten(1).any(1)
    return tiles


@pytest.mark.parametrize("T,block_m,block_n", [(1, 16, 16), (100, 16, 32), (257, 32, 16), (300, 64, 64)])
@pytest.mark.parametrize("mean_log_f", [-0.01, -0.5, -4.0])
def test_tile_bounds_keep_exactly_the_tiles_with_non_negligible_entries(T, block_m, block_n, mean_log_f):
    g = torch.Generator().manual_seed(T)
    c = decays(T, mean_log_f, g)
    delta = -torch.rand(B * H, generator=g) * 20 - 5
    tiles = brute_force(c, delta, block_m, block_n)
    starts = pruning.key_starts(c, delta, block_m, block_n)
    stops = pruning.query_stops(c, delta, block_m, block_n)
    n_m, n_n = tiles.shape[1:]
    for m in range(n_m):
        first = tiles[:, m].int().argmax(1) * block_n  # the first kept key tile of each row of tiles
        assert torch.equal(starts[:, m].long(), first), (m, starts[:, m], first)
        # ... and every tile from there to the diagonal is kept (contiguity).
        diag = m * block_m // block_n
        for bh in range(B * H):
            assert tiles[bh, m, first[bh] // block_n:diag + 1].all()
    for n in range(n_n):
        col = tiles[:, :, n]
        last = n_m - 1 - col.flip(1).int().argmax(1)  # the last kept query tile of each column
        assert torch.equal(stops[:, n].long(), torch.clamp((last + 1) * block_m, max=T)), (n, stops[:, n], last)


def test_tolerance_must_be_a_negative_number():
    q = torch.zeros(1, 4, 1, 16)
    log_f = torch.zeros(1, 4, 1)
    for bad in (0.0, 1.0, float("nan"), float("-inf"), "x", True):
        with pytest.raises(ValueError, match="log_pruning_tolerance"):
            kernels.forgetting_attention(q, q, q, log_f, log_pruning_tolerance=bad)


def inputs(T, D, dtype, mean_log_f, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, T, H, D, generator=g, dtype=dtype).to(DEVICE) for _ in range(3))
    logit = torch.randn(B, T, H, generator=g) - math.log(math.expm1(-mean_log_f))
    return q, k, v, F.logsigmoid(logit).to(DEVICE)


# The small tiles of the interpreter on every device: the poisoned tests place their NaNs by them.
CFG = configs.INTERPRETER_CONFIG


def run(q, k, v, log_f, do, log_eps):
    q, k, v, log_f = (t.clone().requires_grad_() for t in (q, k, v, log_f))
    out = op.forgetting_attention_triton(q, k, v, log_f, config=CFG, log_pruning_tolerance=log_eps)
    return (out, *torch.autograd.grad(out, (q, k, v, log_f), do))


def reference(q, k, v, log_f, do):
    return forgetting_attention_grads_chunked(q, k, v, log_f, do, chunk=64)


LOG_EPS = -10.0
# Each row loses at most eps = e^-10 = 4.5e-5 of its weight: relative errors of that order, and
# the fp32 kernel's own 1e-5 on top.
TOL = 2e-4
T, D, START = 257, 16, 64  # with log f near -4, rows from START on need none of the first keys


def test_forward_and_dq_skip_the_key_tiles_before_the_window():
    q, k, v, log_f = inputs(T, D, torch.float32, -4.0)
    do = torch.randn_like(q)
    starts = pruning.key_starts(launch.gate_cumsum(log_f), pruning.threshold(q, k, D**-0.5, LOG_EPS),
                                CFG.fwd.block_m, CFG.fwd.block_n)
    assert (starts[:, START // CFG.fwd.block_m:] >= CFG.fwd.block_n).all(), "the test needs the first key tile prunable"
    ref = reference(q, k, v, log_f, do)
    v_poisoned = v.clone()
    v_poisoned[:, :CFG.fwd.block_n] = float("nan")  # what the first key tile holds
    got = run(q, k, v_poisoned, log_f, do, LOG_EPS)
    for name, g, r in zip(("o", "dq", "dk", "dv", "dlog_f"), got, ref):
        close(g[:, START:], r[:, START:], TOL)


def test_dkdv_skips_the_query_tiles_past_the_window():
    q, k, v, log_f = inputs(T, D, torch.float32, -4.0, seed=1)
    do = torch.randn_like(q)
    do[:, 200:] = 0.0
    ref = reference(q, k, v, log_f, do)
    do_poisoned = do.clone()
    do_poisoned[:, 200:] = float("nan")  # the last query tiles: no key before 160 needs them
    got = run(q, k, v, log_f, do_poisoned, LOG_EPS)
    for name, g, r in zip(("dk", "dv"), got[2:4], ref[2:4]):
        close(g[:, :160], r[:, :160], TOL)


@pytest.mark.parametrize("mean_log_f", [-0.002, -1.0])
def test_pruned_kernel_stays_within_the_tolerance(mean_log_f):
    q, k, v, log_f = inputs(100, 64, torch.float32, mean_log_f, seed=2)
    do = torch.randn_like(q)
    ref = reference(q, k, v, log_f, do)
    got = run(q, k, v, log_f, do, LOG_EPS)
    for g, r in zip(got, ref):
        close(g, r, TOL)
    if mean_log_f > -0.01:
        # Nothing is prunable with weak gates at 100 tokens: the same numbers as pruning off.
        unpruned = run(q, k, v, log_f, do, None)
        for g, u in zip(got, unpruned):
            assert torch.equal(g, u)


def test_compiled_pruned_attention_equals_eager():
    """Under torch.compile the tolerance travels through the custom op (opcheck checks its fake
    implementation, which returns the threshold as a fourth output): the same numbers as eager."""
    q, k, v, log_f = inputs(60, 16, torch.float32, -2.0, seed=3)
    cfg = op._config_ints(CFG)
    for log_eps in (LOG_EPS, None):
        torch.library.opcheck(torch.ops.fox_workbench.forgetting_attention_fwd.default,
                              (q, k, v, log_f, 0.25, cfg, log_eps))

    def attend(q, k, v, log_f):
        return op.forgetting_attention_triton(q, k, v, log_f, config=CFG, log_pruning_tolerance=LOG_EPS)

    leaves = [t.clone().requires_grad_() for t in (q, k, v, log_f)]
    do = torch.randn_like(q)
    got = torch.compile(attend, fullgraph=True, backend="aot_eager")(*leaves)
    got = (got, *torch.autograd.grad(got, leaves, do))
    want = run(q, k, v, log_f, do, LOG_EPS)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_kept_pairs_counts_the_causal_pairs_above_the_threshold():
    g = torch.Generator().manual_seed(5)
    T, D = 90, 16
    q, k = (torch.randn(B, T, H, D, generator=g) for _ in range(2))
    log_f = F.logsigmoid(torch.randn(B, T, H, generator=g) - 1.0)
    got = pruning.kept_pairs(q, k, log_f, D**-0.5, LOG_EPS)
    c = log_f.double().cumsum(1).transpose(1, 2)  # (B, H, T)
    delta = pruning.threshold(q, k, D**-0.5, LOG_EPS).view(B, H).double()
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    keep = ((c[..., :, None] - c[..., None, :]) >= delta[..., None, None]) & causal
    want = keep.double().sum((-1, -2)) / causal.sum()
    assert torch.allclose(got, want, atol=1.5 / causal.sum().item())
    assert (want < 0.9).all() and (want > 0).all()


@pytest.mark.parametrize("T", [1, 70, 257, 2500])  # 2500: two row chunks, more tiles than one vector
def test_triton_plan_equals_the_torch_reference(T):
    """kernels/attention/triton_pruning.py, what the kernels use: delta as threshold() computes it, and the
    same tile bounds as key_starts() and query_stops() for the tiles of each kernel."""
    q, k, v, log_f = inputs(T, 16, torch.float16, -0.7, seed=T)
    q = q * torch.linspace(0.5, 2.0, H, device=DEVICE)[:, None]  # heads of different norms
    c = launch.gate_cumsum(log_f)
    cfg = configs.KernelConfig(configs.TileConfig(32, 16, 4, 1), configs.TileConfig(64, 32, 4, 1), configs.TileConfig(16, 64, 4, 1))
    delta, starts = launch.prune_forward(q, k, v, c, D**-0.5, LOG_EPS, cfg)
    want = pruning.threshold(q, k, D**-0.5, LOG_EPS)
    assert torch.allclose(delta, want, rtol=1e-5, atol=1e-5), (delta, want)
    assert torch.equal(starts, pruning.key_starts(c, delta, 32, 16))
    dq_starts, stops = launch.tile_bounds(c, delta, (16, 64), (64, 32))
    assert torch.equal(dq_starts, pruning.key_starts(c, delta, 16, 64))
    assert torch.equal(stops, pruning.query_stops(c, delta, 64, 32))

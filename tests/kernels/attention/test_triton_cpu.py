"""The Triton kernel against the naive reference: forward and all four gradients, at awkward
sizes, under the interpreter on CPU (on a GPU machine the same tests run on CUDA)."""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from foxwb import kernels
from foxwb.kernels.attention import configs, launch, op
from foxwb.kernels.attention.naive import forgetting_attention_grads_chunked, forgetting_attention_naive
from tests.kernels.helpers import close

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
B, H = 2, 3


def inputs(T, D, dtype, gate, layout="bthd"):
    if layout == "packed":
        # q, k, v as strided views of one fused projection, as a model produces them.
        qkv = torch.randn(B, T, 3, H, D, device=DEVICE, dtype=dtype)
        q, k, v = (qkv[:, :, i].detach().requires_grad_() for i in range(3))
    else:
        q, k, v = (torch.randn(B, T, H, D, device=DEVICE, dtype=dtype, requires_grad=True) for _ in range(3))
    # Weak gates: log f near 0 (long memory); strong: log f near -5 (forgets within a token or two).
    logit = torch.randn(B, T, H, device=DEVICE) + (6.0 if gate == "weak" else -5.0)
    log_f = F.logsigmoid(logit).requires_grad_() if gate != "none" else None
    return q, k, v, log_f


TOL = {torch.float32: (1e-5, 1e-6), torch.float16: (5e-3, 1e-4)}


def assert_matches_reference(out, do, q, k, v, log_f):
    """out and its gradients for the upstream gradient do (those of q, k, v and log f, when there
    is a gate) against the chunked fp64 reference, within TOL of q's dtype."""
    wrt = (q, k, v) if log_f is None else (q, k, v, log_f)
    grads = torch.autograd.grad(out, wrt, do)
    ref = forgetting_attention_grads_chunked(q.detach(), k.detach(), v.detach(),
                                             None if log_f is None else log_f.detach(), do, chunk=64)
    tol, floor = TOL[q.dtype]
    for got, want in zip((out, *grads), ref):
        close(got, want, tol, floor)


@pytest.mark.parametrize("gate", ["weak", "strong"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("D", [16, 64, 128])
@pytest.mark.parametrize("T", [1, 17, 100, 257])
def test_forward_and_gradients_match_the_reference(T, D, dtype, gate):
    q, k, v, log_f = inputs(T, D, dtype, gate)
    out = kernels.forgetting_attention(q, k, v, log_f, backend="triton")
    assert_matches_reference(out, torch.randn_like(out), q, k, v, log_f)


@pytest.mark.parametrize("T,D,gate", [(17, 16, "weak"), (100, 64, "strong"), (257, 32, "weak"), (100, 48, "none")])
def test_forward_run_ahead_matches_the_reference(T, D, gate):
    """KernelConfig.fwd_ahead: the forward's key loop software-pipelined by hand (the next tile's
    Q K^T issued before this tile's softmax), forward and all gradients."""
    q, k, v, log_f = inputs(T, D, torch.float32, gate)
    cfg = dataclasses.replace(configs.default_config(D, T), fwd_ahead=True)
    assert op._config_from(op._config_ints(cfg)) == cfg  # as the custom op passes it
    out = op.forgetting_attention_triton(q, k, v, log_f, config=cfg)
    do = torch.randn_like(out)
    assert_matches_reference(out, do, q, k, v, log_f)


@pytest.mark.parametrize("T,D,gate,layout,ahead,do_layout", [
    (1, 16, "weak", "bthd", False, "bthd"), (17, 64, "strong", "packed", False, "bthd"),
    (100, 32, "weak", "bthd", True, "bhtd"), (100, 16, "strong", "packed", True, "bthd"),
    (257, 16, "weak", "bthd", False, "bthd"), (40, 16, "none", "bthd", False, "bthd")])
def test_tma_loads_match_the_reference(monkeypatch, T, D, gate, layout, ahead, do_layout):
    """The kernels reading q, k, v, O and dO through TMA descriptors (the H200's path): B = 2, so
    the first sequence's last tiles run into the second's rows, which must weigh nothing. A dO
    whose layout allows no descriptor (bhtd) sends the backward to the pointer loads."""
    monkeypatch.setattr(launch, "TMA_LOADS", True)
    q, k, v, log_f = inputs(T, D, torch.float16, gate, layout)
    assert launch.use_tma(q, k, v)
    cfg = dataclasses.replace(configs.default_config(D, T), fwd_ahead=ahead)
    out = op.forgetting_attention_triton(q, k, v, log_f, config=cfg)
    do = torch.randn(B, H, T, D, device=DEVICE, dtype=out.dtype).transpose(1, 2)
    if do_layout == "bthd":
        do = do.contiguous()
    assert launch.use_tma(do) == (do_layout == "bthd")
    assert_matches_reference(out, do, q, k, v, log_f)


def test_tma_loads_only_where_the_layout_allows(monkeypatch):
    monkeypatch.setattr(launch, "TMA_LOADS", True)
    x = torch.zeros(2, 8, 3, 64, dtype=torch.float16)
    assert launch.use_tma(x)
    assert launch.use_tma(torch.zeros(2, 8, 3, 3, 64, dtype=torch.bfloat16)[:, :, 1])  # a slice of a packed q|k|v
    assert launch.use_tma(x[:1, 3:5])  # some rows of one sequence
    assert not launch.use_tma(x[:, 3:5])  # some rows of two: they are not back to back
    assert not launch.use_tma(x.float())  # fp32 keeps pointer loads (and its exact decay path)
    assert not launch.use_tma(torch.zeros(2, 3, 8, 64, dtype=torch.float16).transpose(1, 2))  # heads apart
    assert not launch.use_tma(x[:, :, :, :32])  # heads 64 apart, 32 wide
    assert not launch.use_tma(torch.zeros(2, 8, 3, 48, dtype=torch.float16))  # head dim not a power of two
    assert not launch.use_tma(torch.zeros(x.numel() + 1, dtype=torch.float16)[1:].view(x.shape))  # 2 bytes off 16
    monkeypatch.setattr(launch, "TMA_LOADS", False)
    assert not launch.use_tma(x)
    monkeypatch.setattr(launch, "TMA_LOADS", None)  # auto: CUDA devices of compute capability 9.0+ only
    assert not launch.use_tma(x)


@pytest.mark.parametrize("T", [17, 100])
def test_no_gate_is_plain_causal_attention(T):
    q, k, v, _ = inputs(T, 64, torch.float32, "none")
    out = kernels.forgetting_attention(q, k, v, None, backend="triton")
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), do)
    ref = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True).transpose(1, 2)
    ref_grads = torch.autograd.grad(ref, (q, k, v), do)
    close(out, ref, 1e-5, 1e-6)
    for got, want in zip(grads, ref_grads):
        close(got, want, 1e-5, 1e-6)


def test_strided_inputs_are_read_in_place():
    q, k, v, log_f = inputs(100, 32, torch.float32, "weak", layout="packed")
    assert not q.is_contiguous()
    out = kernels.forgetting_attention(q, k, v, log_f, backend="triton")
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v, log_f), do)
    ref = forgetting_attention_grads_chunked(q.detach(), k.detach(), v.detach(), log_f.detach(), do, chunk=64)
    for got, want in zip((out, *grads), ref):
        close(got, want, 1e-5, 1e-6)


def test_the_first_gate_gets_no_gradient():
    q, k, v, log_f = inputs(40, 16, torch.float32, "weak")
    out = kernels.forgetting_attention(q, k, v, log_f, backend="triton")
    (dlog_f,) = torch.autograd.grad(out.square().sum(), (log_f,))
    assert dlog_f[:, 0].abs().max() < 1e-5 * dlog_f.abs().max()


def test_chunked_fp64_reference_equals_autograd_through_the_naive_one():
    q, k, v, log_f = (t.detach().double().requires_grad_() for t in inputs(50, 16, torch.float32, "weak"))
    out = forgetting_attention_naive(q, k, v, log_f, compute_dtype=torch.float64)
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v, log_f), do)
    ref = forgetting_attention_grads_chunked(q, k, v, log_f, do, chunk=16)
    # Both take the cumsum in fp32; the naive one's gradient passes through that fp32 cumsum.
    for got, want in zip((out, *grads), ref):
        close(got, want, 1e-6, 1e-9)


def test_bad_inputs_are_clear_errors():
    q, k, v, log_f = inputs(8, 16, torch.float32, "weak")
    with pytest.raises(ValueError, match="log_f must be float32"):
        kernels.forgetting_attention(q, k, v, log_f.half(), backend="triton")
    with pytest.raises(ValueError, match="backend='cuda'; allowed: auto, triton, reference"):
        kernels.forgetting_attention(q, k, v, log_f, backend="cuda")
    with pytest.raises(ValueError, match=r"log_f must be \(B, T, H\)"):
        kernels.forgetting_attention(q, k, v, log_f[:, :4], backend="triton")


@pytest.mark.parametrize("T", [1, 1500, 2500])
def test_scans_carry_across_chunks(T):
    """The cumsum of log f and the reverse scan of dL/dc walk T in chunks of up to 1024 with a
    running carry: lengths past one and two chunks, and strided (B, T, H) inputs."""
    x = torch.randn(2, T, 3, 5, device=DEVICE)[..., 1]  # (B, T, H), strides (15 T, 15, 5)
    c = launch.gate_cumsum(x)
    close(c, x.double().cumsum(1).transpose(1, 2).reshape(6, T), 1e-6, 1e-6)
    out = torch.full((6, T), float("nan"), device=DEVICE)
    launch.scan(x, out, reverse=True)
    close(out, x.double().flip(1).cumsum(1).flip(1).transpose(1, 2).reshape(6, T), 1e-6, 1e-6)


@pytest.mark.parametrize("dtype,loads", [(torch.float32, None), (torch.float16, None), (torch.float16, True)],
                         ids=["fp32", "fp16", "fp16-tma"])
def test_torch_compile_sees_one_op_and_no_graph_break(monkeypatch, dtype, loads):
    """The kernel is a torch.library custom op: fullgraph compilation succeeds (a graph break would
    raise), the fake implementation agrees with the real one (opcheck), and the compiled forward
    and backward equal eager. Whether the kernels read through TMA descriptors depends on data
    pointers and the device, which tracing cannot see: the op chooses when it runs (a graph break
    there split the compiled 125M model into 62 graphs on the H200, where CUDA graphs then copied
    the residual stream between them, about 1 ms per step; the fp16-tma case failed then)."""
    monkeypatch.setattr(launch, "TMA_LOADS", loads)
    q, k, v, log_f = inputs(40, 16, dtype, "weak")
    if dtype == torch.float32:
        cfg = op._config_ints(configs.default_config(16, 40))
        torch.library.opcheck(torch.ops.fox_workbench.forgetting_attention_fwd.default, (q, k, v, log_f, 0.25, cfg))

    def attend(q, k, v, log_f):
        return kernels.forgetting_attention(q * 2, k, v, log_f, backend="triton").float().square()

    torch._dynamo.reset()
    compiled = torch.compile(attend, fullgraph=True, backend="aot_eager")
    do = torch.randn(q.shape, device=DEVICE)
    got = compiled(q, k, v, log_f)
    got_grads = torch.autograd.grad(got, (q, k, v, log_f), do)
    want = attend(q, k, v, log_f)
    want_grads = torch.autograd.grad(want, (q, k, v, log_f), do)
    for a, b in zip((got, *got_grads), (want, *want_grads)):
        close(a, b, 1e-6, 1e-7 if dtype == torch.float32 else 1e-6)



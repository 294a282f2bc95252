"""The sliding window (``window`` W: query i sees keys i - W < j <= i): the naive twin against a
direct loop, the Triton kernels against the twin (forward and every gradient, under the
interpreter on CPU), W >= T and window=None as full causal attention, every backend, the Gluon
dispatch and the clear errors."""
import dataclasses
import types

import pytest
import torch
import torch.nn.functional as F

from foxwb import kernels
from foxwb.kernels import runtime
from foxwb.kernels.attention import BACKENDS, configs, launch, op
from foxwb.kernels.attention.naive import forgetting_attention_grads_chunked, forgetting_attention_naive
from tests.kernels.helpers import close

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
B, H, D = 2, 2, 16


def inputs(T, gate, dtype=torch.float32):
    q, k, v = (torch.randn(B, T, H, D, device=DEVICE, dtype=dtype, requires_grad=True) for _ in range(3))
    # weak: log f near 0 (long memory, so the window decides what a row sees); strong: near -5.
    logit = torch.randn(B, T, H, device=DEVICE) + (4.0 if gate == "weak" else -5.0)
    log_f = F.logsigmoid(logit).requires_grad_() if gate != "none" else None
    return q, k, v, log_f


def naive_fp64(q, k, v, log_f, do, window):
    """Output and gradients of the naive twin in fp64 (autograd through it)."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    gate = None if log_f is None else log_f.detach().requires_grad_()
    out = forgetting_attention_naive(*leaves, gate, compute_dtype=torch.float64, window=window)
    grads = torch.autograd.grad(out, leaves + ([] if gate is None else [gate]), do.double())
    return (out, *grads)


def triton_vs_twin(T, window, gate, dtype=torch.float32, config=None):
    q, k, v, log_f = inputs(T, gate, dtype)
    out = op.forgetting_attention_triton(q, k, v, log_f, window=window, config=config)
    do = torch.randn_like(out)
    wrt = (q, k, v) if log_f is None else (q, k, v, log_f)
    got = (out, *torch.autograd.grad(out, wrt, do))
    tol, floor = (1e-5, 1e-6) if dtype == torch.float32 else (5e-3, 1e-4)
    # W = 1: each row sees one key, so dQ, dK and d log f are 0 up to rounding (the floor).
    for a, b in zip(got, naive_fp64(q, k, v, log_f, do, window)):
        close(a, b, tol, floor)


# Interpreter tiles (configs.INTERPRETER_CONFIG): forward and dQ (32, 16), dK/dV (16, 32). W = 1;
# W = 16 (a key tile); 37 and 18, no tile's multiple (18 = 2 mod 16 puts the first key tile a
# forward program reads, and the last query tile a dK/dV program reads, one past a tile edge); W > T.
@pytest.mark.parametrize("T,window,gate", [(77, 1, "weak"), (77, 18, "none"), (130, 37, "strong"),
                                           (130, 16, "weak"), (77, 100, "weak")])
def test_triton_matches_the_naive_twin(T, window, gate):
    triton_vs_twin(T, window, gate)


def test_triton_with_run_ahead_and_tma_loads_matches_the_naive_twin(monkeypatch):
    """The hand-pipelined forward (fwd_ahead) starting at the first full tile inside the band, and
    fp16 through TMA descriptors (B = 2: the first sequence's last tiles read the second's rows)."""
    cfg = dataclasses.replace(configs.default_config(D, 130), fwd_ahead=True)
    triton_vs_twin(130, 45, "weak", config=cfg)
    monkeypatch.setattr(launch, "TMA_LOADS", True)
    triton_vs_twin(77, 23, "weak", dtype=torch.float16)


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")  # the interpreter, on the rows NaN reaches
def test_tiles_outside_the_band_are_never_read():
    """NaN in what lies wholly outside a tile's band changes nothing there: with W = 18, the
    forward and dQ programs of the query tiles from 64 on never load key tile [0, 16) (a loaded,
    masked NaN value would still poison them: 0 * NaN), nor does the dK/dV program of keys
    [0, 32) load query rows from 96 on."""
    T, window, cfg = 130, 18, configs.INTERPRETER_CONFIG
    assert (cfg.fwd.block_n, cfg.dq.block_n, cfg.dkdv.block_n, cfg.dkdv.block_m) == (16, 16, 32, 16)
    q, k, v, log_f = inputs(T, "weak")
    do = torch.randn(B, T, H, D, device=DEVICE)
    want = naive_fp64(q, k, v, log_f, do, window)
    v_bad = v.detach().clone()
    v_bad[:, :16] = float("nan")
    v_bad.requires_grad_()
    out = op.forgetting_attention_triton(q, k, v_bad, log_f, window=window, config=cfg)
    (dq,) = torch.autograd.grad(out, (q,), do)
    close(out[:, 64:], want[0][:, 64:], 1e-5, 1e-6)
    close(dq[:, 64:], want[1][:, 64:], 1e-5, 1e-6)
    q_bad = q.detach().clone()
    q_bad[:, 96:] = float("nan")
    q_bad.requires_grad_()
    out = op.forgetting_attention_triton(q_bad, k, v, log_f, window=window, config=cfg)
    dk, dv = torch.autograd.grad(out, (k, v), do)
    close(dk[:, :32], want[2][:, :32], 1e-5, 1e-6)
    close(dv[:, :32], want[3][:, :32], 1e-5, 1e-6)


@pytest.mark.parametrize("gate", ["weak", "none"])
def test_a_window_of_T_or_more_is_full_causal_attention_to_the_bit(gate):
    """W >= T masks nothing: the kernels run the same tiles as window=None, so the output and every
    gradient are bit for bit today's (window=None is the untouched path)."""
    q, k, v, log_f = inputs(77, gate)
    wrt = (q, k, v) if log_f is None else (q, k, v, log_f)
    runs = []
    for window in (None, 77, 500):
        out = op.forgetting_attention_triton(q, k, v, log_f, window=window)
        runs.append((out, *torch.autograd.grad(out, wrt, torch.ones_like(out))))
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert torch.equal(a, b)
    assert torch.equal(forgetting_attention_naive(q, k, v, log_f, window=77), forgetting_attention_naive(q, k, v, log_f))


def test_the_naive_twin_is_a_direct_sliding_window_softmax():
    """The twin against a loop over queries, each a softmax over its W keys, in fp64; and the
    chunked fp64 reference (the GPU tests' ground truth) against autograd through the twin."""
    T, window, scale = 23, 5, D**-0.5
    q, k, v, log_f = inputs(T, "weak")
    q, k, v, log_f = q.detach().double(), k.detach().double(), v.detach().double(), log_f.detach()
    c = log_f.double().cumsum(1)  # (B, T, H)
    want = torch.empty(B, T, H, D, dtype=torch.float64)
    for i in range(T):
        j = torch.arange(max(0, i - window + 1), i + 1)
        s = torch.einsum("bhd,bjhd->bhj", q[:, i], k[:, j]) * scale + (c[:, i, :, None] - c[:, j].transpose(1, 2))
        want[:, i] = torch.einsum("bhj,bjhd->bhd", torch.softmax(s, -1), v[:, j])
    got = forgetting_attention_naive(q, k, v, log_f, compute_dtype=torch.float64, window=window)
    close(got, want, 1e-6, 1e-9)
    do = torch.randn_like(got)
    chunked = forgetting_attention_grads_chunked(q, k, v, log_f, do, chunk=8, window=window)
    for a, b in zip(chunked, naive_fp64(q, k, v, log_f.requires_grad_(), do, window)):
        close(a, b, 1e-6, 1e-9)


def test_every_backend_honours_the_window():
    """auto (the twin on CPU; without a gate not SDPA, whose mask is full causal), triton and
    reference all give the windowed result."""
    for gate in ("weak", "none"):
        q, k, v, log_f = inputs(40, gate)
        want = forgetting_attention_naive(q, k, v, log_f, window=7)
        for backend in BACKENDS:
            close(kernels.forgetting_attention(q, k, v, log_f, backend=backend, window=7), want, 1e-5, 1e-6)


def test_bad_windows_are_clear_errors():
    q, k, v, log_f = inputs(8, "weak")
    for bad in (0, -3, 2.5, True, "4"):
        for backend in BACKENDS:
            with pytest.raises(ValueError, match="window=.*allowed: a positive int"):
                kernels.forgetting_attention(q, k, v, log_f, backend=backend, window=bad)
    for backend in BACKENDS:
        with pytest.raises(ValueError, match="window=4 and log_pruning_tolerance=-10.0 cannot be combined"):
            kernels.forgetting_attention(q, k, v, log_f, backend=backend, window=4, log_pruning_tolerance=-10.0)


def test_a_window_never_runs_the_gluon_kernels(monkeypatch):
    """The Gluon kernels (sm_90) have no window: use_gluon says no whenever one is set, where it
    would say yes without (the GPU, TMA layout and Gluon itself faked here), and the launches ask
    it with the call's window, forward and backward."""
    monkeypatch.setattr(runtime, "INTERPRET", False)
    monkeypatch.setattr(launch, "GLUON_FWD", True)
    monkeypatch.setattr(launch, "GLUON_BWD", True)
    monkeypatch.setattr(launch, "use_tma", lambda *tensors: True)
    monkeypatch.setattr(launch, "_gluon_importable", lambda: True)
    x = types.SimpleNamespace(is_cuda=True, dtype=torch.bfloat16, shape=(1, 4096, 4, 128))
    assert launch.use_gluon(x, x, x) and launch.use_gluon(x, x, x, x, x, backward=True)
    assert not launch.use_gluon(x, x, x, window=256)
    assert not launch.use_gluon(x, x, x, x, x, backward=True, window=256)
    monkeypatch.undo()

    asked = []
    real = launch.use_gluon
    monkeypatch.setattr(launch, "use_gluon", lambda *a, **kw: asked.append(kw.get("window")) or real(*a, **kw))
    q, k, v, log_f = inputs(20, "weak")
    out = op.forgetting_attention_triton(q, k, v, log_f, window=6)
    out.sum().backward()
    assert asked == [6, 6]  # the forward's and the dK/dV kernel's choice


def test_torch_compile_passes_the_window_through_the_custom_op():
    """Under torch.compile the window is an argument of the custom ops (their fake
    implementations agree: opcheck), and the compiled forward and backward equal eager."""
    q, k, v, log_f = inputs(24, "weak")
    cfg = op._config_ints(configs.default_config(D, 24))
    torch.library.opcheck(torch.ops.fox_workbench.forgetting_attention_fwd.default,
                          (q, k, v, log_f, 0.25, cfg), {"window": 5})

    def attend(q, k, v, log_f):
        return kernels.forgetting_attention(q, k, v, log_f, backend="triton", window=5)

    torch._dynamo.reset()
    compiled = torch.compile(attend, fullgraph=True, backend="aot_eager")
    do = torch.randn_like(q)
    got = compiled(q, k, v, log_f)
    want = attend(q, k, v, log_f)
    for a, b in zip((got, *torch.autograd.grad(got, (q, k, v, log_f), do)),
                    (want, *torch.autograd.grad(want, (q, k, v, log_f), do))):
        close(a, b, 1e-6, 1e-7)

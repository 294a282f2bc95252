"""Each component equals a direct implementation of its formula (docs/fox-notes.md, "The block's components")."""
import math

import pytest
import torch
import torch.nn.functional as F

from foxwb import components
from foxwb.components.forget_gate import decay_time_bias
from foxwb.components.mlp import swiglu_hidden
from tests.conftest import rel_err

B, T, H, D = 2, 11, 3, 8
d = H * D
dims = components.BlockDims(d, H)


def build(slot, value):
    return components.parse(slot, value).build(dims)


def randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    return module


def test_kv_shift_matches_formula():
    shift = randomize(build("kv_shift", "kv"))
    x, k, v = torch.randn(B, T, d), torch.randn(B, T, H, D), torch.randn(B, T, H, D)
    k_out, v_out = shift(x, k, v)
    for out, inp, proj in ((k_out, k, shift.k_alpha), (v_out, v, shift.v_alpha)):
        expect = torch.empty_like(inp)
        for t in range(T):
            alpha = torch.sigmoid(x[:, t] @ proj.weight.T)[..., None]  # (B, H, 1)
            prev = inp[:, t - 1] if t > 0 else torch.zeros_like(inp[:, 0])
            expect[:, t] = alpha * prev + (1 - alpha) * inp[:, t]
        assert rel_err(out, expect) < 1e-6


def test_kv_shift_gradients_match_autograd_of_the_formula():
    """The shift's hand-written backward (components/kv_shift.py) against autograd through the
    per-token formula, in fp64: gradients for the input, the alpha logits and, through them, x."""
    shift = randomize(build("kv_shift", "kv")).double()
    x, k, v = (torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in ((B, T, d), (B, T, H, D), (B, T, H, D)))
    g_k, g_v = torch.randn(B, T, H, D, dtype=torch.float64), torch.randn(B, T, H, D, dtype=torch.float64)
    k_out, v_out = shift(x, k, v)
    got = torch.autograd.grad((k_out * g_k).sum() + (v_out * g_v).sum(), (x, k, v))

    def formula(inp, proj):
        rows = []
        for t in range(T):
            alpha = torch.sigmoid(x[:, t] @ proj.weight.T)[..., None]
            prev = inp[:, t - 1] if t > 0 else torch.zeros_like(inp[:, 0])
            rows.append(alpha * prev + (1 - alpha) * inp[:, t])
        return torch.stack(rows, 1)

    loss = (formula(k, shift.k_alpha) * g_k).sum() + (formula(v, shift.v_alpha) * g_v).sum()
    want = torch.autograd.grad(loss, (x, k, v))
    for name, a, b in zip(("x", "k", "v"), got, want):
        assert rel_err(a, b) < 1e-12, name


@pytest.mark.parametrize("kind,shifted", [("k", (True, False)), ("v", (False, True))])
def test_single_shift_kinds_leave_the_other_alone(kind, shifted):
    shift = build("kv_shift", kind)
    x, k, v = torch.randn(B, T, d), torch.randn(B, T, H, D), torch.randn(B, T, H, D)
    k_out, v_out = shift(x, k, v)
    assert torch.equal(k_out, k) is not shifted[0]
    assert torch.equal(v_out, v) is not shifted[1]


@pytest.mark.parametrize("share", [False, True])
def test_qk_norm_matches_formula(share):
    norm = randomize(build("qk_norm", {"kind": "rmsnorm", "share_across_heads": share}))
    q, k = torch.randn(B, T, H, D) * 3, torch.randn(B, T, H, D)
    q_out, k_out = norm(q, k)
    expect_q = q / torch.sqrt((q**2).mean(-1, keepdim=True) + 1e-5) * norm.q_weight
    expect_k = k / torch.sqrt((k**2).mean(-1, keepdim=True) + 1e-5) * norm.k_weight
    assert rel_err(q_out, expect_q) < 1e-6 and rel_err(k_out, expect_k) < 1e-6
    assert norm.q_weight.shape == ((D,) if share else (H, D))


def test_output_norm_with_sigmoid_gate_matches_fused_formula():
    norm, gate = randomize(build("output_norm", "rmsnorm")), randomize(build("output_gate", "sigmoid"))
    x, o = torch.randn(B, T, d), torch.randn(B, T, H, D)
    y = gate(x, norm(o))
    g = (x @ gate.proj.weight.T).view(B, T, H, D)
    expect = o / torch.sqrt((o**2).mean(-1, keepdim=True) + 1e-6) * norm.weight * torch.sigmoid(g)
    assert rel_err(y, expect) < 1e-6


def test_silu_gate_matches_formula():
    gate = randomize(build("output_gate", "silu"))
    x, o = torch.randn(B, T, d), torch.randn(B, T, H, D)
    g = (x @ gate.proj.weight.T).view(B, T, H, D)
    assert rel_err(gate(x, o), o * g * torch.sigmoid(g)) < 1e-6


def test_rope_matches_formula_and_depends_only_on_offset():
    rope = build("rope", {"kind": "rope", "base": 10000.0})
    q, k = torch.randn(1, T, H, D), torch.randn(1, T, H, D)
    q_out, _ = rope(q, k)
    half = D // 2
    for t in (0, 3, T - 1):
        theta = t * 10000.0 ** (-torch.arange(half) * 2 / D)
        x1, x2 = q[0, t, :, :half], q[0, t, :, half:]
        expect = torch.cat((x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()), -1)
        assert rel_err(q_out[0, t], expect) < 1e-5
    # The same q and k vectors at every position: q_i . k_j must depend on i - j alone.
    q1, k1 = torch.randn(H, D).expand(1, T, H, D), torch.randn(H, D).expand(1, T, H, D)
    qr, kr = rope(q1, k1)
    dots = torch.einsum("bihd,bjhd->bhij", qr, kr)[0, 0]
    for offset in range(T):
        diag = torch.diagonal(dots, -offset)
        assert torch.allclose(diag, diag[0].expand_as(diag), atol=1e-4)
    assert not torch.allclose(torch.diagonal(dots, 0)[0], torch.diagonal(dots, -1)[0])


@pytest.mark.parametrize("kind,act", [("sigmoid", torch.sigmoid), ("silu", F.silu)])
def test_output_gate_gradients_match_autograd_of_the_formula(kind, act):
    """The gate's hand-written backward (components/output_gate.py) against autograd through
    o * act(x W_g^T), in fp64: gradients for o, x and W_g."""
    gate = randomize(build("output_gate", kind)).double()
    x = torch.randn(B, T, d, dtype=torch.float64, requires_grad=True)
    o = torch.randn(B, T, H, D, dtype=torch.float64, requires_grad=True)
    g_out = torch.randn(B, T, H, D, dtype=torch.float64)
    got = torch.autograd.grad((gate(x, o) * g_out).sum(), (o, x, gate.proj.weight))
    want_out = o * act(x @ gate.proj.weight.T).view(B, T, H, D)
    want = torch.autograd.grad((want_out * g_out).sum(), (o, x, gate.proj.weight))
    for name, a, b in zip(("o", "x", "W_g"), got, want):
        assert rel_err(a, b) < 1e-12, name


def test_data_dependent_gate_is_logsigmoid_of_a_linear_in_fp32():
    gate = randomize(build("forget_gate", "data_dependent"))
    x = torch.randn(B, T, d, dtype=torch.bfloat16)
    log_f = gate.to(torch.bfloat16)(x)
    assert log_f.dtype == torch.float32 and log_f.shape == (B, T, H)
    expect = F.logsigmoid((x.float() @ gate.proj.weight.float().T + gate.proj.bias.float()))
    assert rel_err(log_f, expect) < 1e-2


def test_decay_time_bias_gives_the_decay_times():
    bias = decay_time_bias(5, 2.0, 512.0)
    times = -1.0 / F.logsigmoid(bias.double())
    assert torch.allclose(times, torch.exp(torch.linspace(math.log(2), math.log(512), 5, dtype=torch.float64)), rtol=1e-5)


def test_fixed_gate_is_a_buffer_and_bias_only_is_learnable():
    fixed = build("forget_gate", "fixed")
    bias_only = build("forget_gate", "bias_only")
    assert list(fixed.parameters()) == [] and "bias" in dict(fixed.named_buffers())
    assert [n for n, _ in bias_only.named_parameters()] == ["bias"]


@pytest.mark.parametrize("d_model,ratio,hidden", [(768, 4, 2048), (768, 3.5, 1792), (1024, 4, 2816), (1024, 3.5, 2560), (1536, 4, 4096), (1536, 3.5, 3584)])
def test_swiglu_hidden_size_rounding(d_model, ratio, hidden):
    assert swiglu_hidden(d_model, ratio, 256) == hidden


def test_swiglu_matches_formula():
    mlp = randomize(components.parse("mlp", {"kind": "swiglu", "intermediate_size": 16}).build(dims))
    x = torch.randn(B, T, d)
    w_gate, w_up = mlp.w_in.weight[:16], mlp.w_in.weight[16:]
    expect = (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ mlp.w_out.weight.T
    assert rel_err(mlp(x), expect) < 1e-6

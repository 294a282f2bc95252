"""Model assembly: gates equal their attention formulas, every parameter learns, presets train."""
import pytest
import torch
import torch.nn.functional as F

from foxwb.workbench.execution import Execution
from foxwb.workbench.model import Attention, build_model
from foxwb.workbench.spec.presets import PRESETS
from foxwb.workbench.spec.trial import ModelSpec
from tests.conftest import rel_err

TINY = dict(vocab_size=64, d_model=32, n_layers=2, n_heads=4)


def attention_inputs(attn, x):
    B, T, _ = x.shape
    shape = (B, T, attn.n_heads, attn.head_dim)
    q, k, v = attn.wq(x).view(shape), attn.wk(x).view(shape), attn.wv(x).view(shape)
    return (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)


def test_forget_gate_none_equals_causal_sdpa():
    attn = Attention(ModelSpec(**TINY))
    x = torch.randn(2, 13, 32)
    q, k, v = attention_inputs(attn, x)
    expect = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 13, 32)
    assert rel_err(attn(x), attn.wo(expect)) < 1e-5


def test_fixed_gate_equals_alibi_with_the_same_slopes():
    spec = ModelSpec(**TINY, attention={"forget_gate": {"kind": "fixed", "decay_time_min": 1.5, "decay_time_max": 40}})
    attn = Attention(spec)
    x = torch.randn(2, 13, 32)
    q, k, v = attention_inputs(attn, x)
    slopes = 1.0 / torch.exp(torch.linspace(torch.log(torch.tensor(1.5)), torch.log(torch.tensor(40.0)), 4))
    pos = torch.arange(13)
    distance = (pos[:, None] - pos[None, :]).float()  # i - j
    bias = -slopes[:, None, None] * distance  # (H, T, T)
    bias = bias.masked_fill(distance < 0, float("-inf"))
    expect = F.scaled_dot_product_attention(q, k, v, attn_mask=bias).transpose(1, 2).reshape(2, 13, 32)
    assert rel_err(attn(x), attn.wo(expect)) < 1e-5


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_parameter_gets_a_gradient(preset):
    spec = ModelSpec(preset=preset, **TINY, attention={"forget_gate": "bias_only"} if preset.startswith("transformer") else {})
    model = build_model(spec)
    tokens = torch.randint(0, 64, (2, 17))
    logits = model(tokens)
    assert logits.shape == (2, 17, 64)
    F.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_the_forget_gate_learns_through_log_f():
    model = build_model(ModelSpec(preset="fox_llama", **TINY))
    tokens = torch.randint(0, 64, (2, 17))
    F.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten()).backward()
    gate = model.blocks[0].attn.forget_gate.proj
    assert gate.weight.grad.abs().sum() > 0 and gate.bias.grad.abs().sum() > 0


@pytest.mark.parametrize("preset", list(PRESETS))
def test_tiny_preset_trains_on_random_tokens(preset):
    model = build_model(ModelSpec(preset=preset, **TINY))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.randint(0, 64, (8, 33))  # a fixed batch: the loss must fall by memorising it
    losses = []
    for _ in range(50):
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), data[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


def test_init_follows_the_paper():
    model = build_model(ModelSpec(preset="fox_pro", **TINY))
    attn = model.blocks[0].attn
    assert torch.all(attn.forget_gate.proj.bias == 0)
    assert abs(model.embed.weight.std().item() - 0.02) < 0.005
    assert torch.all(attn.qk_norm.q_weight == 1) and torch.all(attn.output_norm.weight == 1)
    assert model.head.weight.data_ptr() != model.embed.weight.data_ptr()


def test_tied_embeddings_share_the_weight():
    model = build_model(ModelSpec(**TINY, tie_embeddings=True))
    assert model.head.weight is model.embed.weight


@pytest.mark.parametrize("preset", ["fox_pro", "transformer_llama"])
def test_fused_input_projection_equals_separate_projections(preset):
    """The one matmul for q, k, v and the components' own projections (forget gate, KV-shift,
    output gate) computes what each Linear computes alone, forward and every gradient."""
    fused = build_model(ModelSpec(preset=preset, **TINY)).double()
    apart = build_model(fused.spec, Execution(fuse_projections=False)).double()
    apart.load_state_dict(fused.state_dict())
    tokens = torch.randint(0, TINY["vocab_size"], (2, 37))

    def run(model):
        model.zero_grad()
        logits = model(tokens)
        logits.square().mean().backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    logits_f, grads_f = run(fused)
    logits_s, grads_s = run(apart)
    model = fused
    torch.testing.assert_close(logits_f, logits_s, rtol=1e-10, atol=1e-12)
    assert grads_f.keys() == grads_s.keys()
    for name in grads_s:
        torch.testing.assert_close(grads_f[name], grads_s[name], rtol=1e-9, atol=1e-12, msg=name)
    names = [name for name, _ in model.blocks[0].attn._projections()]
    if preset == "fox_pro":
        assert names == ["q", "k", "v", "kv_shift.k", "kv_shift.v", "output_gate.gate", "forget_gate.logit"]
    else:
        assert names == ["q", "k", "v"]

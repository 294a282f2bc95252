"""The model on its fused paths (what CUDA trains with: the one-matmul projection, KV-shift and
QK-norm through prepare_qkv, the attention kernel, the fused loss) against the components' own
code, forward and every parameter's gradient. On CPU the kernels run under the Triton interpreter
(tests/conftest.py sets it before anything imports Triton)."""
import pytest
import torch
import torch.nn.functional as F

from foxwb.kernels.attention import launch
from foxwb.kernels.qkv_prep import op as qkv_op
from tests.conftest import rel_err
from foxwb.workbench.execution import Execution
from foxwb.workbench.model import Attention, build_model
from foxwb.workbench.spec.trial import ModelSpec

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def twin(model, **changes):
    """The same weights, run another way."""
    other = build_model(model.spec, model.execution.but(**changes)).to(DEVICE)
    other.load_state_dict(model.state_dict())
    return other


def loss_and_grads(model, tokens, targets):
    model.zero_grad()
    loss = model(tokens, targets)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("tied", [False, True])
def test_model_loss_and_gradients_equal_the_unfused_loss(tied):
    """The fused loss against the F.cross_entropy path: the same loss and every parameter's
    gradient, tied embeddings included (their gradient sums the head's and the embedding's)."""
    spec = ModelSpec(preset="fox_pro", vocab_size=83, d_model=32, n_layers=2, n_heads=2, tie_embeddings=tied)
    model = build_model(spec, Execution(attention_backend="reference", fused_loss=False)).to(DEVICE)
    tokens = torch.randint(0, 83, (2, 21), device=DEVICE)
    targets = tokens.roll(-1, 1)
    targets[:, -1] = -100
    loss_ref, grads_ref = loss_and_grads(model, tokens, targets)
    loss, grads = loss_and_grads(twin(model, fused_loss=True), tokens, targets)
    assert abs(loss.item() - loss_ref.item()) < 1e-5
    for name, g in grads.items():
        assert rel_err(g, grads_ref[name].double()) < 1e-4, name


@pytest.mark.parametrize("attention", [
    {},  # fox_pro: KV-shift on k and v, QK-norm, no RoPE
    {"kv_shift": "k", "qk_norm": "none", "rope": "rope"},
    {"kv_shift": "none", "qk_norm": {"kind": "rmsnorm", "share_across_heads": True}},
    {"kv_shift": {"kind": "kv", "logit_normalizer": 8.0}},  # parametrised mixing weights
])
def test_model_with_the_qkv_kernel_equals_the_component_code(attention, monkeypatch):
    """prepare_qkv against the components' own code: the same loss and every parameter's gradient
    (the KV-shift logits' weights and the norm scales included)."""
    spec = ModelSpec(preset="fox_pro", vocab_size=61, d_model=48, n_layers=2, n_heads=3, attention=attention)
    model = build_model(spec, Execution(attention_backend="reference", fused_loss=False, fused_qkv=False)).to(DEVICE)
    with torch.no_grad():  # scales away from their init of 1, so that their gradients matter
        for name, p in model.named_parameters():
            if "weight" in name and p.dim() <= 2 and "norm" in name:
                p.mul_(torch.rand_like(p) + 0.5)
    tokens = torch.randint(0, 61, (2, 19), device=DEVICE)
    calls = []
    real = qkv_op.prepare_qkv
    monkeypatch.setattr(qkv_op, "prepare_qkv", lambda *a, **k: calls.append(k) or real(*a, **k))
    loss_ref, grads_ref = loss_and_grads(model, tokens, tokens.roll(-1, 1))
    assert not calls
    loss, grads = loss_and_grads(twin(model, fused_qkv=True), tokens, tokens.roll(-1, 1))
    assert len(calls) == spec.n_layers  # the kernel ran, once per block
    assert abs(loss.item() - loss_ref.item()) < 1e-5
    for name, g in grads.items():
        assert rel_err(g, grads_ref[name]) < 1e-4, name


def test_a_plugin_qk_norm_without_the_declaration_keeps_the_component_path(monkeypatch):
    """A QK-norm module that does not declare qkv_prep_norm() never reaches the kernel, even where
    the execution asks for it: the component path is the correct one for a kind we do not know."""
    spec = ModelSpec(preset="fox_pro", vocab_size=61, d_model=48, n_layers=1, n_heads=3)
    model = build_model(spec, Execution(attention_backend="reference", fused_loss=False, fused_qkv=True)).to(DEVICE)

    class Plain(torch.nn.Module):  # the same math, no declaration
        def __init__(self, norm):
            super().__init__()
            self.norm = norm

        def forward(self, q, k):
            return self.norm(q, k)

    model.blocks[0].attn.qk_norm = Plain(model.blocks[0].attn.qk_norm)
    calls = []
    real = qkv_op.prepare_qkv
    monkeypatch.setattr(qkv_op, "prepare_qkv", lambda *a, **k: calls.append(k) or real(*a, **k))
    tokens = torch.randint(0, 61, (2, 11), device=DEVICE)
    model(tokens, tokens)
    assert not calls


def test_compiled_block_backward_gets_the_gates_gradients_apart():
    """The FoX (Pro) block compiled: the backward hands the output gate's and the forget gate's
    logit gradients to the kernel as tensors of their own. Returned as one view of the
    projection, they were joined (zeros for the padding, then a concatenation), a kernel of its
    own that cost 1.77 ms per 125M step on the H200 (docs/kernels.md)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    spec = ModelSpec(preset="fox_pro", vocab_size=61, d_model=32, n_layers=1, n_heads=2)
    attn = Attention(spec, Execution(attention_backend="reference", fused_qkv=True)).to(DEVICE)
    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep)
    x = torch.randn(2, 9, 32, device=DEVICE, requires_grad=True)
    torch.compile(attn, backend=backend, fullgraph=True)(x).sum().backward()
    calls = [n for n in graphs[-1].graph.nodes if n.op == "call_function"]
    prep = [n for n in calls if n.target is torch.ops.fox_workbench.qkv_prep_bwd.default]
    assert len(prep) == 1
    assert [a.meta["val"].shape[-1] for a in prep[0].args[6]] == [32, 2]  # the gate's d columns, the forget gate's H
    assert not [n for n in calls if n.target is torch.ops.aten.cat.default]


def test_the_model_with_every_kernel_of_ours_compiles_into_one_graph(monkeypatch):
    """Attention, KV-shift + QK-norm and the loss through our custom ops, TMA loads allowed:
    fullgraph=True raises on any graph break, and the compiled loss and gradients equal eager."""
    monkeypatch.setattr(launch, "TMA_LOADS", True)
    spec = ModelSpec(preset="fox_pro", vocab_size=61, d_model=48, n_layers=2, n_heads=3)
    model = build_model(spec, Execution(attention_backend="triton", fused_qkv=True, fused_loss=True)).to(DEVICE)
    tokens = torch.randint(0, 61, (2, 19), device=DEVICE)

    def run(fn):
        model.zero_grad()
        loss = fn(tokens, tokens.roll(-1, 1))
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    torch._dynamo.reset()
    loss, grads = run(torch.compile(model, fullgraph=True, backend="aot_eager"))
    want_loss, want_grads = run(model)
    assert rel_err(loss, want_loss) < 1e-5
    for got, want in zip(grads, want_grads):
        assert rel_err(got, want) < 1e-5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("log_eps", [None, -10.0], ids=["exact", "pruned"])
def test_fox_pro_model_on_cuda_matches_the_reference_backend(log_eps):
    torch.manual_seed(0)
    spec = ModelSpec(preset="fox_pro", vocab_size=512, d_model=256, n_layers=3, n_heads=4,
                     attention={"log_pruning_tolerance": log_eps})
    model = build_model(spec).cuda()
    tokens = torch.randint(0, 512, (2, 700), device="cuda")

    def run(m):
        m.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(tokens)
            loss = F.cross_entropy(logits.float().flatten(0, 1), tokens.flatten())
        loss.backward()
        return logits.float(), {n: p.grad.clone() for n, p in m.named_parameters()}

    logits_t, grads_t = run(model)
    logits_r, grads_r = run(twin(model, attention_backend="reference"))
    assert rel_err(logits_t, logits_r) < 1e-2
    # Per module (weight and bias together): a bias of 4 heads alone is a sum over every token
    # that nearly cancels, so its own relative error measures the cancellation, not the kernel.
    modules = {}
    for name in grads_r:
        modules.setdefault(name.rsplit(".", 1)[0], []).append(name)
    for module, names in modules.items():
        got = torch.cat([grads_t[n].flatten() for n in names])
        want = torch.cat([grads_r[n].flatten() for n in names])
        assert rel_err(got, want) < 3e-2, module

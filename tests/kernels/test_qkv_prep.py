"""KV-shift + QK-norm in one kernel (kernels.prepare_qkv) against an fp64 reference written from
reference/fox.md 2.3-2.4, forward and the gradients of the projection and both norm scales, at
awkward sizes, outputs poisoned with NaN; and the model with the kernel against the model with the
per-component code (what the CPU runs). CPU under the interpreter (CI), CUDA on the GPU machine."""
import pytest
import torch
import torch.nn.functional as F

import kernels.qkv_prep as qp
from kernels.qkv_prep import prepare_qkv
from tests.conftest import rel_err

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def poison(monkeypatch):
    monkeypatch.setattr(qp, "POISON_OUTPUTS", True)


def reference(proj, H, D, k_shift, v_shift, q_weight, k_weight, eps, rest):
    """fp64: the shift as a pad (k~_0 = 0), the norm as its formula; the rest columns as a slice."""
    B, T, _ = proj.shape
    q, k, v = (proj[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D) for i in range(3))
    col = 3 * H * D

    def shift(y, logit):
        a = torch.sigmoid(logit).unsqueeze(-1)
        return a * F.pad(y, (0, 0, 0, 0, 1, 0))[:, :T] + (1 - a) * y

    if k_shift:
        k, col = shift(k, proj[..., col:col + H]), col + H
    if v_shift:
        v, col = shift(v, proj[..., col:col + H]), col + H

    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    if q_weight is not None:
        q, k = norm(q, q_weight), norm(k, k_weight)
    return q, k, v, *proj[..., col:col + sum(rest)].split(rest, dim=-1)


CASES = {  # k_shift, v_shift, QK-norm (None, "heads": (H, D) scales, "shared": (D,))
    "pro": (True, True, "heads"),
    "k-shift-shared-norm": (True, False, "shared"),
    "v-shift-no-norm": (False, True, None),
    "norm-no-shift": (False, False, "heads"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("B,T,H,D,rest,pad", [(2, 1, 3, 16, [], 0), (2, 17, 3, 24, [70, 3], 7),
                                                (1, 100, 3, 64, [5], 66), (1, 20, 2, 16, [1, 130, 2], 0)])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"])
def test_forward_and_gradients_match_the_reference(case, B, T, H, D, rest, pad, dtype, tol, monkeypatch):
    """``rest``: column groups handed on as views, whose gradients are copied in (more than one
    block of columns at 130); ``pad``: past them, whose gradient must be 0 (more than one block at
    66, none at 0)."""
    monkeypatch.setattr(qp, "TILES", 2)  # a backward program over two tiles of tokens
    k_shift, v_shift, norm = CASES[case]
    g = torch.Generator().manual_seed(T * D + len(case))
    cols = 3 * H * D + H * (k_shift + v_shift)
    proj = torch.randn(B, T, cols + sum(rest) + pad, generator=g, dtype=torch.float64)
    proj[..., 3 * H * D:cols] *= 3  # shift logits over a wide range: a from ~0 to ~1
    shape = {"heads": (H, D), "shared": (D,), None: None}[norm]
    weights = [torch.rand(shape, generator=g, dtype=torch.float64) + 0.5 for _ in range(2)] if norm else [None, None]
    up = [torch.randn(B, T, H, D, generator=g, dtype=torch.float64) for _ in range(3)]
    up += [torch.randn(B, T, r, generator=g, dtype=torch.float64) for r in rest]

    ins = [proj] + [w for w in weights if w is not None]
    got_in = [x.to(DEVICE, dtype if i == 0 else torch.float32).requires_grad_() for i, x in enumerate(ins)]
    ref_in = [x.clone().requires_grad_() for x in ins]
    w_got = got_in[1:] if norm else [None, None]
    w_ref = ref_in[1:] if norm else [None, None]
    q, k, v, groups = prepare_qkv(got_in[0], H, D, k_shift=k_shift, v_shift=v_shift, q_weight=w_got[0],
                                  k_weight=w_got[1], eps=1e-5, rest=rest)
    got = (q, k, v, *groups)
    want = reference(ref_in[0], H, D, k_shift, v_shift, w_ref[0], w_ref[1], 1e-5, rest)
    got_grads = torch.autograd.grad(got, got_in, [u.to(DEVICE, dtype) for u in up])
    want_grads = torch.autograd.grad(want, ref_in, up)
    names = ["q", "k", "v"] + [f"rest {i}" for i in range(len(rest))] + ["d proj", "d q_weight", "d k_weight"]
    assert len(got) == len(want) == 3 + len(rest)
    for name, a, b in zip(names, list(got) + list(got_grads), list(want) + list(want_grads)):
        assert not torch.isnan(a).any(), name
        assert a.shape == b.shape, name
        assert rel_err(a.cpu(), b) <= tol if b.numel() else a.numel() == 0, name
    assert got[0].dtype == dtype and got_grads[0].dtype == dtype
    assert all(g._base is got_in[0] for g in groups)  # views: the forward copies nothing
    for group, start, width in zip(groups, [cols + sum(rest[:i]) for i in range(len(rest))], rest):
        assert torch.equal(group.cpu(), proj[..., start:start + width].to(dtype))  # the columns themselves
    assert not got_grads[0][..., cols + sum(rest):].any()  # the padding's gradient is written, as 0


def test_opcheck():
    """Both ops' schemas and fake (meta) implementations, which torch.compile traces with."""
    H, D = 2, 16
    proj = torch.randn(2, 9, 3 * H * D + 2 * H + 3, device=DEVICE)
    w = [torch.rand(H, D, device=DEVICE) + 0.5 for _ in range(2)]
    grads = [torch.randn(2, 9, H, D, device=DEVICE) for _ in range(3)]
    rest = [torch.randn(2, 9, 2, device=DEVICE), torch.randn(2, 9, 1, device=DEVICE)]
    for op, args in ((qp._prep_op, (proj, w[0], w[1], H, D, True, True, 1e-5)),
                     (qp._prep_bwd_op, (proj, w[0], w[1], *grads, rest, H, D, True, True, 1e-5))):
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


def test_compiled_equals_eager():
    H, D = 2, 16
    proj = torch.randn(2, 9, 3 * H * D + 2 * H + 5, device=DEVICE)
    w = torch.rand(H, D, device=DEVICE) + 0.5

    def run(fn):
        p, qw = proj.clone().requires_grad_(), w.clone().requires_grad_()
        q, k, v, rest = fn(p, qw)
        out = (q, k, v, *rest)
        return (*out, *torch.autograd.grad(sum(o.sum() * (i + 1) for i, o in enumerate(out)), (p, qw)))

    def f(p, qw):
        return prepare_qkv(p, H, D, k_shift=True, v_shift=True, q_weight=qw, k_weight=qw * 0.5, rest=[4, 1])

    for a, b in zip(run(torch.compile(f, fullgraph=True, backend="aot_eager")), run(f)):
        assert torch.equal(a, b)


def test_bad_inputs_are_named():
    H, D = 2, 8
    proj = torch.randn(1, 4, 3 * H * D + H)
    with pytest.raises(ValueError, match="columns"):
        prepare_qkv(proj, H, D, k_shift=True, v_shift=True)
    with pytest.raises(ValueError, match="both"):
        prepare_qkv(proj, H, D, q_weight=torch.ones(H, D))
    with pytest.raises(ValueError, match="q_weight"):
        prepare_qkv(proj, H, D, q_weight=torch.ones(H, D + 1), k_weight=torch.ones(H, D + 1))
    with pytest.raises(ValueError, match="unit stride"):
        prepare_qkv(proj.transpose(1, 2), H, D)
    with pytest.raises(ValueError, match="rest"):
        prepare_qkv(proj, H, D, rest=[2, 0])
    with pytest.raises(ValueError, match="rest"):
        prepare_qkv(proj, H, D, rest=[H * D + 1])


@pytest.mark.parametrize("attention", [
    {},  # fox_pro: KV-shift on k and v, QK-norm, no RoPE
    {"kv_shift": "k", "qk_norm": "none", "rope": "rope"},
    {"kv_shift": "none", "qk_norm": {"kind": "rmsnorm", "share_across_heads": True}},
])
def test_model_with_the_kernel_equals_the_component_code(attention, monkeypatch):
    """LM.forward with prepare_qkv (what CUDA trains with) against the components' own code: the
    same loss and every parameter's gradient (the KV-shift logits' weights and the norm scales
    included)."""
    from workbench.model import build_model
    from workbench.specs import ModelSpec

    spec = ModelSpec(preset="fox_pro", vocab_size=61, d_model=48, n_layers=2, n_heads=3, attention=attention)
    model = build_model(spec).to(DEVICE)
    model.set_attention_backend("reference")
    model.fused_loss = False
    with torch.no_grad():  # scales away from their init of 1, so that their gradients matter
        for name, p in model.named_parameters():
            if "weight" in name and p.dim() <= 2 and "norm" in name:
                p.mul_(torch.rand_like(p) + 0.5)
    tokens = torch.randint(0, 61, (2, 19), device=DEVICE)
    calls = []
    monkeypatch.setattr(qp, "prepare_qkv", lambda *a, **k: calls.append(k) or prepare_qkv(*a, **k))

    def run(fused):
        model.set_fused_qkv(fused)
        model.zero_grad()
        loss = model(tokens, tokens.roll(-1, 1))
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    loss_ref, grads_ref = run(False)
    assert not calls
    loss, grads = run(True)
    assert len(calls) == spec.n_layers  # the kernel ran, once per block
    assert abs(loss.item() - loss_ref.item()) < 1e-5
    for name, g in grads.items():
        assert rel_err(g, grads_ref[name]) < 1e-4, name


def test_compiled_block_backward_gets_the_gates_gradients_apart():
    """The FoX (Pro) block compiled: the backward hands the output gate's and the forget gate's
    logit gradients to the kernel as tensors of their own. Returned as one view of the
    projection, they were joined (zeros for the padding, then a concatenation), a kernel of its
    own that cost 1.77 ms per 125M step on the H200."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    from workbench.model import Attention
    from workbench.specs import ModelSpec

    attn = Attention(ModelSpec(preset="fox_pro", vocab_size=61, d_model=32, n_layers=1, n_heads=2)).to(DEVICE)
    attn.fused_qkv, attn.backend = True, "reference"
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

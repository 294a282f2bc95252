"""KV-shift + QK-norm in one kernel (kernels.prepare_qkv) against its reference twin in fp64
(kernels/qkv_prep/naive.py), forward and the gradients of the projection and both norm scales, at
awkward sizes, outputs poisoned with NaN. CPU under the interpreter (CI), CUDA on the GPU machine.
The model on this path against the components' code: tests/workbench/test_model_fused.py."""
import pytest
import torch

from foxwb.kernels.qkv_prep import op as qp
from foxwb.kernels.qkv_prep import prepare_qkv_naive
from foxwb.kernels.qkv_prep.op import prepare_qkv
from tests.kernels.helpers import rel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


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
    *want, want_groups = prepare_qkv_naive(ref_in[0], H, D, k_shift=k_shift, v_shift=v_shift, q_weight=w_ref[0],
                                           k_weight=w_ref[1], eps=1e-5, rest=rest)
    want = (*want, *want_groups)
    got_grads = torch.autograd.grad(got, got_in, [u.to(DEVICE, dtype) for u in up])
    want_grads = torch.autograd.grad(want, ref_in, up)
    names = ["q", "k", "v"] + [f"rest {i}" for i in range(len(rest))] + ["d proj", "d q_weight", "d k_weight"]
    assert len(got) == len(want) == 3 + len(rest)
    for name, a, b in zip(names, list(got) + list(got_grads), list(want) + list(want_grads)):
        assert not torch.isnan(a).any(), name
        assert a.shape == b.shape, name
        assert rel(a.cpu(), b) <= tol if b.numel() else a.numel() == 0, name
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



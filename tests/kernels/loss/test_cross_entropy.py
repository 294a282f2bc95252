"""The fused head + loss (kernels.linear_cross_entropy) against its reference twin in fp64: the loss
and both gradients, at awkward sizes, with ignored rows; the row kernel never reads past the
vocabulary and writes every row. CPU under the interpreter (CI), CUDA on the GPU machine."""
import pytest
import torch
import torch.nn.functional as F

from foxwb.kernels.loss import linear_cross_entropy_naive
from foxwb.kernels.loss import op as lce
from foxwb.kernels.loss.op import ce_rows, linear_cross_entropy
from tests.kernels.helpers import rel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def reference(h, w, t, ignore_index, d_loss):
    """The reference twin in fp64: the loss and the gradients of h and w for d_loss upstream."""
    hd, wd = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    loss = linear_cross_entropy_naive(hd, wd, t, ignore_index)
    return (loss, *torch.autograd.grad(loss * d_loss, (hd, wd)))


@pytest.mark.parametrize("rows,d,V", [(1, 16, 7), (37, 48, 1000), (100, 32, 130)])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"])
def test_loss_and_gradients_match_cross_entropy(rows, d, V, dtype, tol):
    g = torch.Generator().manual_seed(rows * V)
    h = torch.randn(rows, d, generator=g).to(DEVICE, dtype).requires_grad_()
    w = (torch.randn(V, d, generator=g) * 0.5).to(DEVICE, dtype).requires_grad_()
    t = torch.randint(0, V, (rows,), generator=g).to(DEVICE)
    t[1::4] = -1  # ignored rows (a custom ignore_index), never the only row
    loss = linear_cross_entropy(h, w, t, ignore_index=-1)
    dh, dw = torch.autograd.grad(loss * 0.75, (h, w))  # an upstream gradient other than 1
    ref_loss, ref_dh, ref_dw = reference(h, w, t, -1, 0.75)
    assert loss.dtype == torch.float32 and loss.shape == ()
    assert abs(loss.item() - ref_loss.item()) <= tol * abs(ref_loss.item())
    assert dh.dtype == dtype and dw.dtype == dtype and dw.shape == (V, d)
    assert rel(dh, ref_dh) <= tol and rel(dw, ref_dw) <= tol


def test_row_kernel_writes_every_row_and_reads_nothing_past_the_vocabulary():
    rows, V, pad = 9, 70, 58
    logits = torch.randn(rows, V + pad, device=DEVICE)
    logits[:, V:] = float("nan")  # a kernel that reads past V turns its rows into NaN
    t = torch.randint(0, V, (rows,), device=DEVICE)
    t[3] = -100
    ref = F.cross_entropy(logits[:, :V].double(), t, reduction="none")
    probs = torch.softmax(logits[:, :V].double(), -1)
    loss, n_valid = ce_rows(logits, t, -100, write_grad=True, vocab=V)
    assert n_valid.item() == rows - 1
    assert torch.allclose(loss.double(), ref, atol=1e-5)  # row 3: loss 0, as reduction='none' gives
    want = (probs - F.one_hot(t.clamp_min(0), V).double()) / (rows - 1)
    want[3] = 0.0
    assert torch.allclose(logits[:, :V].double(), want, atol=1e-6)
    assert torch.isnan(logits[:, V:]).all()  # the padding is left alone


def test_every_row_ignored_gives_nan_like_cross_entropy_and_zero_gradients():
    h = torch.randn(4, 8, device=DEVICE, requires_grad=True)
    w = torch.randn(10, 8, device=DEVICE, requires_grad=True)
    t = torch.full((4,), -100, device=DEVICE)
    loss = linear_cross_entropy(h, w, t)
    assert torch.isnan(loss) and torch.isnan(F.cross_entropy(h @ w.t(), t))
    dh, dw = torch.autograd.grad(loss, (h, w))
    assert not dh.any() and not dw.any()


def test_a_target_outside_the_vocabulary_makes_the_loss_nan():
    """Never a read out of bounds: the row's loss is NaN, so training stops on a non-finite loss."""
    h, w = torch.randn(5, 8, device=DEVICE, requires_grad=True), torch.randn(13, 8, device=DEVICE)
    for bad in (13, 70, -3):
        t = torch.randint(0, 13, (5,), device=DEVICE)
        t[2] = bad
        assert torch.isnan(linear_cross_entropy(h, w, t))


def test_without_grad_the_loss_alone():
    h, w = torch.randn(5, 8, device=DEVICE), torch.randn(13, 8, device=DEVICE)
    t = torch.randint(0, 13, (5,), device=DEVICE)
    with torch.no_grad():
        loss = linear_cross_entropy(h, w, t)
    assert abs(loss.item() - F.cross_entropy(h @ w.t(), t).item()) < 1e-5


def test_custom_op_registration_is_consistent():
    h = torch.randn(6, 8, device=DEVICE, requires_grad=True)
    w = torch.randn(70, 8, device=DEVICE, requires_grad=True)
    t = torch.randint(0, 70, (6,), device=DEVICE)
    torch.library.opcheck(lce._lce_op, (h, w, t, -100, True),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_bad_inputs_are_named():
    h, w, t = torch.randn(5, 8), torch.randn(13, 8), torch.zeros(5, dtype=torch.long)
    with pytest.raises(ValueError, match="weight"):
        linear_cross_entropy(h, torch.randn(13, 9), t)
    with pytest.raises(ValueError, match="targets"):
        linear_cross_entropy(h, w, t[:4])
    with pytest.raises(ValueError, match="dtype"):
        linear_cross_entropy(h, w.double(), t)


def test_compiled_equals_eager():
    h = torch.randn(11, 16, device=DEVICE)
    w = torch.randn(100, 16, device=DEVICE)
    t = torch.randint(0, 100, (11,), device=DEVICE)

    def loss_and_grads(h, w):
        h, w = h.clone().requires_grad_(), w.clone().requires_grad_()
        loss = linear_cross_entropy(h, w, t)
        return (loss, *torch.autograd.grad(loss, (h, w)))

    compiled = torch.compile(lambda h, w: linear_cross_entropy(h, w, t), fullgraph=True, backend="aot_eager")
    hc, wc = h.clone().requires_grad_(), w.clone().requires_grad_()
    got = compiled(hc, wc)
    got = (got, *torch.autograd.grad(got, (hc, wc)))
    for a, b in zip(got, loss_and_grads(h, w)):
        assert torch.equal(a, b)

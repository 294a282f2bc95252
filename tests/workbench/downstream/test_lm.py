"""The trial as an lm-eval model: its log-likelihoods are the model's own, its rolling
log-likelihood is the document loss the trial's test split reports, its generation stops."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from lm_eval.api.instance import Instance

from foxwb.workbench.data.corpus import ByteTokenizer
from foxwb.workbench.data import held_out
from foxwb.workbench.downstream.lm import WorkbenchLM
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import ModelSpec
from foxwb.workbench.train.evaluate import token_losses

CONTEXT = 16


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    model = build_model(ModelSpec(preset="fox_pro", vocab_size=256, d_model=32, n_layers=2, n_heads=4))
    # Scaled up from the init's N(0, 0.02): logits that differ by more than rounding between choices.
    with torch.no_grad():
        model.head.weight.mul_(50)
        # Bytes past ASCII get logit 0, below the best of 128 others: greedy text is whole characters.
        model.head.weight[128:] = 0
    return WorkbenchLM(model, ByteTokenizer(), CONTEXT, torch.device("cpu"), batch_size=3, stride=0.5)


def by_hand(model, tokens: list[int], scored: int) -> float:
    """Summed log-probability of the last ``scored`` tokens, each from all tokens before it."""
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([tokens[:-1]])).float(), -1)[0]  # (T, V)
    return sum(float(logp[t - 1, tokens[t]]) for t in range(len(tokens) - scored, len(tokens)))


def request(kind: str, *args) -> Instance:
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def test_loglikelihood_is_the_models_summed_log_probabilities(lm):
    pairs = [("def f(x):", " x + 1"), ("a", "bc"), ("", "import os")]  # each within the context
    found = lm.loglikelihood([request("loglikelihood", *p) for p in pairs])
    for (ctx, cont), (ll, greedy) in zip(pairs, found):
        tokens = list((ctx + cont).encode())
        # No beginning-of-text token: an empty context makes the continuation's first byte its context.
        expected = by_hand(lm.model, tokens, len(cont.encode()) - (0 if ctx else 1))
        assert ll == pytest.approx(expected, abs=1e-4) and ll < 0
        assert isinstance(greedy, bool)


def test_a_context_longer_than_the_models_is_cut_from_the_left(lm):
    ctx, cont = "x = [1, 2, 3]\nfor item in x:\n", "    print(item)"
    tokens = list((ctx + cont).encode())
    assert len(cont) < CONTEXT < len(tokens)
    (ll, _), = lm.loglikelihood([request("loglikelihood", ctx, cont)])
    # The last CONTEXT + 1 tokens: CONTEXT inputs, of which the continuation's are the last targets.
    assert ll == pytest.approx(by_hand(lm.model, tokens[-(CONTEXT + 1):], len(cont)), abs=1e-4)


def test_greedy_flag_says_whether_argmax_decoding_gives_the_continuation(lm):
    x = np.frombuffer(b"while True:", dtype=np.uint8).astype(np.int64)
    with torch.no_grad():
        argmax = lm.model(torch.from_numpy(x)[None])[0].argmax(-1).numpy()  # (T,) the greedy next tokens
    y = np.full_like(x, -100)
    y[-3:] = argmax[-3:]
    wrong = y.copy()
    wrong[-2] = (wrong[-2] + 1) % 256
    (_, greedy), (_, other) = lm.score_rows([(x, y), (x, wrong)])
    assert greedy and not other


def test_rolling_loglikelihood_is_minus_the_document_loss(lm):
    text = "import sys\n\ndef main(argv):\n    return len(argv) * 2\n"  # longer than the context: windows
    (rolling,) = lm.loglikelihood_rolling([request("loglikelihood_rolling", text)])
    doc = np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64)
    total = 0.0
    for batch, _ in held_out.test_batches(held_out.TestSet([doc], len(doc) - 1, len(doc) - 1, len(doc) - 1), CONTEXT, 0.5, 4):
        loss, _ = token_losses(lm.model, batch, torch.device("cpu"), torch.no_grad)
        total += float(loss.sum())
    assert rolling == pytest.approx(-total, rel=1e-6)


def test_generation_stops_at_a_stop_string_and_cuts_it(lm):
    free = lm.greedy("class A:\n", {"max_gen_toks": 12})
    assert len(free) == 12 and free.isascii()
    stop = free[3:5]
    (made,) = lm.generate_until([request("generate_until", "class A:\n", {"until": [stop], "max_gen_toks": 12})])
    assert made == free[: free.find(stop)]

"""Data sources: the built-in corpus, token files, BPE, MQAR; deterministic order; needle eval."""
import numpy as np
import torch

from foxwb.workbench.data.corpus import IGNORE
from foxwb.workbench.data.load import load_data
from foxwb.workbench.train.evaluate import evaluate
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import CorpusData, EvalSpec, MQARData, ModelSpec, NeedleEval, TokenData


def test_builtin_corpus_splits_by_document_deterministically():
    a = load_data(CorpusData(context=64, max_bytes=400_000), 256, 0)
    b = load_data(CorpusData(context=64, max_bytes=400_000), 256, 0)
    assert len(a.val_docs) > 0 and len(a.train_docs) > len(a.val_docs)
    assert all(np.array_equal(x, y) for x, y in zip(a.val_docs, b.val_docs))
    assert torch.equal(a.train_batch(3, 7, 0, 4).x, b.train_batch(3, 7, 0, 4).x)
    assert not torch.equal(a.train_batch(3, 7, 0, 4).x, a.train_batch(4, 7, 0, 4).x)
    batch = a.train_batch(0, 0, 0, 4)
    assert torch.equal(batch.x[:, 1:], batch.y[:, :-1])  # targets are the inputs shifted by one


def test_the_tokens_training_can_see_are_those_of_documents_longer_than_the_context():
    """A training window lies inside one document longer than the context, so those documents'
    tokens are what a trial can go over; the result divides its tokens by them (data_epochs)."""
    from foxwb.workbench.data.corpus import DocumentData

    docs = [np.arange(n) % 256 for n in (10, 300, 500, 128)]
    data = DocumentData(docs, [np.arange(400) % 256], context=128, vocab_size=256)
    assert data.train_tokens_available == 800
    built_in = load_data(CorpusData(context=4096, max_bytes=400_000), 256, 0)
    assert 0 < built_in.train_tokens_available < sum(len(d) for d in built_in.train_docs)


def test_token_files_npy_and_bin_split_at_the_eot_token(tmp_path):
    ids = np.array([5, 6, 7, 0, 8, 9, 10, 11, 0, 12, 13, 14, 15, 16], dtype=np.uint16)
    np.save(tmp_path / "t.npy", ids)
    ids.tofile(tmp_path / "t.bin")
    for name in ("t.npy", "t.bin"):
        data = load_data(TokenData(train=str(tmp_path / name), val=str(tmp_path / name), eot_token=0, context=3), 32, 0)
        assert [d.tolist() for d in data.train_docs] == [[5, 6, 7], [0, 8, 9, 10, 11], [0, 12, 13, 14, 15, 16]]


def test_bpe_tokenizer_is_trained_on_the_corpus_and_round_trips(tmp_path):
    (tmp_path / "a.txt").write_text("the forget gate decays attention to the past. " * 200)
    (tmp_path / "b.txt").write_text("softmax attention with a forget gate. " * 200)
    data = load_data(CorpusData(kind="text", paths=[str(tmp_path)], tokenizer="bpe", bpe_vocab_size=300, context=16, val_fraction=0.5), 300, 0)
    text = "the forget gate"
    ids = data.tokenizer.encode(text)
    assert data.tokenizer.decode(ids) == text and len(ids) < len(text)
    assert max(int(d.max()) for d in data.train_docs) < 300


def test_mqar_targets_are_the_values_of_the_queried_keys():
    task = load_data(MQARData(n_pairs=4, n_queries=3, n_keys=16, n_values=16), 32, 0)
    batch = task.train_batch(0, 0, 0, 8)
    for x, y in zip(batch.x, batch.y):
        pairs = dict(zip(x[0:8:2].tolist(), x[1:8:2].tolist()))
        answered = (y != IGNORE).nonzero().flatten()
        assert len(answered) == 3
        for pos in answered.tolist():
            assert y[pos].item() == pairs[x[pos].item()]


def test_evaluation_reports_mqar_and_needle_accuracy():
    torch.manual_seed(0)
    task = load_data(MQARData(n_pairs=4, n_queries=2, n_keys=8, n_values=8, n_val=8), 16, 0)
    model = build_model(ModelSpec(vocab_size=16, d_model=32, n_layers=1, n_heads=2))
    res = evaluate(model, task, EvalSpec(sequences=8), task.context, "cpu")
    assert 0.0 <= res["mqar_accuracy"] <= 1.0 and np.isfinite(res["val_loss"])
    text = load_data(CorpusData(context=64, max_bytes=300_000), 256, 0)
    model = build_model(ModelSpec(vocab_size=256, d_model=32, n_layers=1, n_heads=2))
    needle = NeedleEval(lengths=[128], depths=[0.0, 1.0], trials=2)
    res = evaluate(model, text, EvalSpec(sequences=2, length_multiples=[1], needle=needle), 64, "cpu")
    assert set(res["needle_accuracy"]) == {"len128_depth0", "len128_depth1"}


def test_the_builtin_corpus_can_add_the_installed_packages_sources():
    """``sources: stdlib+packages`` (for a machine whose standard library is small): the standard
    library's files first, unchanged, then the installed packages'; the default keeps every
    existing trial's identity (the field is left out of the spec hash at its default), and a text
    corpus refuses it naming the field. The result states which corpus it was."""
    import pytest
    from pydantic import ValidationError

    from foxwb.workbench.data.corpus import _builtin_files

    stdlib = _builtin_files("stdlib")
    both = _builtin_files("stdlib+packages")
    assert both[: len(stdlib)] == stdlib and len(both) > len(stdlib)
    assert all(name.startswith("packages/") for name, _ in both[len(stdlib):])
    assert "sources" not in CorpusData().canonical_json()
    assert CorpusData(sources="stdlib+packages").spec_hash() != CorpusData().spec_hash()
    with pytest.raises(ValidationError, match="sources: only the 'builtin' corpus"):
        CorpusData(kind="text", paths=["x"], sources="stdlib+packages")
    data = load_data(CorpusData(context=64, max_bytes=400_000), 256, 0)
    corpus = data.info["corpus"]
    assert corpus["sources"] == "stdlib" and corpus["documents"] == len(data.train_docs) + len(data.val_docs)
    assert corpus["sha256"] == load_data(CorpusData(context=128, max_bytes=400_000), 256, 0).info["corpus"]["sha256"]

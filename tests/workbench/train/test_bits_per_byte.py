"""Bits per byte beside nats per token: the bytes of text each token stands for, per tokenizer,
and an evaluation's val_bpb / test_bpb against its losses."""
import math

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from foxwb.workbench.data.corpus import BPETokenizer, ByteTokenizer, DocumentData
from foxwb.workbench.data.tokenizer import FileTokenizer, byte_table
from foxwb.workbench.execution import Execution
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.evaluate import evaluate

WORDS = ["café", "naïve", "déjà", "vu", "→", "日本", "the", "gate", "forgets", "def", "return", "x", "(", ")",
         "\n"]


def texts(n: int, seed: int = 0) -> list[str]:
    """Documents of words with one-, two-, three-byte characters."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(60, 120)))) for _ in range(n)]


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer(texts(40), 320)


def scored_bytes(tokenizer, doc) -> int:
    """The UTF-8 bytes of a document's text after its first token (the tokens a loss scores)."""
    return len(tokenizer.decode(doc).encode()) - len(tokenizer.decode(doc[:1]).encode())


def test_the_byte_tokenizer_counts_one_byte_a_token():
    tok = ByteTokenizer()
    table, why = byte_table(tok, 256, [tok.encode(t) for t in texts(3)])
    assert why is None and table.shape == (256,) and (table == 1).all()


@pytest.mark.parametrize("text", ["naïve café → déjà vu", "日本 the gate forgets", "def x(): return x\n"])
def test_a_bpe_tokenizers_pieces_add_up_to_the_texts_utf8_length(bpe, text):
    table, why = byte_table(bpe, 320, [bpe.encode(t) for t in texts(4, seed=1)])
    ids = bpe.encode(text)
    assert why is None and table[ids].sum() == len(text.encode("utf-8"))
    # Piece by piece: a piece that decodes to whole characters is that many bytes.
    for i in ids:
        piece = bpe.decode([i])
        if "\ufffd" not in piece:
            assert table[i] == len(piece.encode()), piece
    assert table[bpe.encode("é")].sum() == 2 and table[bpe.encode("→")].sum() == 3


def sentencepiece_file(path) -> str:
    """A tokenizer.json as Llama 2's: SentencePiece BPE with byte fallback, "▁" for a space,
    <unk>, and <s> / </s> special."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
    for piece in ["▁", "h", "e", "l", "o", "w", "r", "d", "▁w", "or", "▁wor", "ld", "▁world"]:
        vocab[piece] = len(vocab)
    merges = [("▁", "w"), ("o", "r"), ("▁w", "or"), ("l", "d"), ("▁wor", "ld")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(["<s>", "</s>"])
    tok.save(str(path))
    return str(path)


def test_a_sentencepiece_file_counts_byte_pieces_spaces_and_no_bytes_for_special_tokens(tmp_path):
    tok = FileTokenizer(sentencepiece_file(tmp_path / "tokenizer.json"))
    text = "hello → héllo world"
    ids = tok.encode(text)
    table, why = byte_table(tok, tok.vocab_size, [ids])
    assert why is None
    # The first piece, "▁", is the space the model puts before the text: a byte no loss scores.
    assert tok.decode(ids[:1]) == "" and table[ids[0]] == 1
    assert table[ids[1:]].sum() == scored_bytes(tok, ids) == len(text.encode())
    assert table[tok._tok.token_to_id("<0xE2>")] == 1 and table[tok._tok.token_to_id("▁world")] == 6
    # BOS and EOS stand for no text; the unknown token for text that is lost.
    assert table[1] == table[2] == 0 and table[0] == -1


def test_a_tokenizer_that_does_not_give_its_text_back_gets_no_table(tmp_path):
    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "hello": 1, "world": 2, "##s": 3}, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    wordpiece.decoder = decoders.WordPiece()
    wordpiece.save(str(tmp_path / "tokenizer.json"))
    tok = FileTokenizer(str(tmp_path / "tokenizer.json"))
    table, why = byte_table(tok, 4, [tok.encode("hellos world hello")])
    assert table is None and "WordPiece" in why and "Whitespace" in why


def trained_data(tokenizer, vocab_size: int) -> tuple[DocumentData, object]:
    torch.manual_seed(0)
    spec = TrialSpec.model_validate({"model": {"preset": "fox_pro", "vocab_size": vocab_size, "d_model": 32,
                                               "n_layers": 1, "n_heads": 2},
                                     "data": {"kind": "builtin", "context": 32},
                                     "eval": {"test_tokens": 100_000, "min_test_tokens": 100, "batch_size": 4,
                                              "sequences": 4, "length_multiples": [1]}})
    docs = [tokenizer.encode(t) for t in texts(12, seed=2)] if tokenizer is not None else \
        [np.random.default_rng(i).integers(0, 256, 300) for i in range(12)]
    data = DocumentData(docs[:4], docs[4:], 32, vocab_size, tokenizer)
    model = build_model(spec.model, Execution.of_trial(spec.train)).eval()
    return data, evaluate(model, data, spec.eval, 32, torch.device("cpu"))


def test_for_the_byte_tokenizer_bits_per_byte_are_the_loss_over_ln_2():
    _, result = trained_data(ByteTokenizer(), 256)
    assert result["test_bytes"] == result["test_tokens"]
    assert result["test_bpb"] == pytest.approx(result["test_loss"] / math.log(2), rel=1e-12)
    assert result["val_bpb"] == pytest.approx(result["val_loss"] / math.log(2), rel=1e-12)


def test_an_evaluation_counts_the_bytes_of_exactly_the_tokens_it_scores(bpe):
    data, result = trained_data(bpe, 320)
    # The test set is whole test documents here: every token after a document's first is scored.
    assert result["test_tokens"] == sum(len(d) - 1 for d in data.test_docs)
    assert result["test_bytes"] == sum(scored_bytes(bpe, d) for d in data.test_docs) > result["test_tokens"]
    nats = result["test_loss"] * result["test_tokens"]
    assert result["test_bpb"] == pytest.approx(nats / (math.log(2) * result["test_bytes"]), rel=1e-9)
    # val: the first context + 1 tokens of each select document, its first not scored.
    first = [d[:33] for d in data.select_docs if len(d) > 32][:4]
    nats = result["val_loss"] * sum(len(d) - 1 for d in first)
    assert result["val_bpb"] == pytest.approx(nats / (math.log(2) * sum(scored_bytes(bpe, d) for d in first)), rel=1e-9)
    assert "bpb_note" not in result


def test_token_ids_without_a_tokenizer_record_no_bits_per_byte_and_say_why():
    _, result = trained_data(None, 256)
    assert "test_bpb" not in result and "val_bpb" not in result and "test_bytes" not in result
    assert "no tokenizer" in result["bpb_note"] and result["test_loss"] > 0


def test_a_studys_runs_record_bits_per_byte_and_wb_results_reads_them(quickstart):
    """The driver logs val_bpb and test_bpb with each trial's other final metrics; `wb results`
    takes test_bpb as any metric (the quickstart: the byte tokenizer, so bits are nats over ln 2)."""
    import json

    from tests.cli import ROOT, wb

    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    bpb = wb("results", ROOT / "studies/quickstart.yaml", "--workdir", workdir, "--metric", "test_bpb", "--format", "json")
    loss = wb("results", ROOT / "studies/quickstart.yaml", "--workdir", workdir, "--metric", "test_loss", "--format", "json")
    assert bpb.returncode == 0 and loss.returncode == 0, bpb.stderr[-2000:] + loss.stderr[-2000:]
    in_bits = {r["variant"]: r["mean"] for r in json.loads(bpb.stdout)["rows"]}
    in_nats = {r["variant"]: r["mean"] for r in json.loads(loss.stdout)["rows"]}
    assert in_bits.keys() == in_nats.keys() and len(in_bits) == 3
    assert all(in_bits[v] == pytest.approx(in_nats[v] / math.log(2), rel=1e-6) for v in in_bits), (in_bits, in_nats)

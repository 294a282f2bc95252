"""LongCrawl64 (data.kind: longcrawl64) on a small store built here in the release's layout: a
folder of train.zarr and heldout.zarr, 2-D uint16 arrays in zarr format 2, blosc-lz4 chunks (the
release's are 2048 x 2048 over rows of 65,536 tokens; here 64 x 512 over rows of 2,048, the last
row-chunk ragged as the release's are). Batches are the store's tokens at the paper's offsets, the
splits are apart, the reads stay small, each bad store is one clear error, and `wb train` trains
on it end to end."""
import json
import sys

import numpy as np
import pytest
import yaml
from tokenizers import Tokenizer, models

from foxwb.workbench.data.held_out import SELECT, TEST
from foxwb.workbench.data.load import load_data
from foxwb.workbench.spec.data import LONGCRAWL64_EOT, LONGCRAWL64_VOCAB
from foxwb.workbench.spec.errors import SpecError, validate
from foxwb.workbench.spec.trial import TrialSpec
from tests.cli import wb

numcodecs = pytest.importorskip("numcodecs", reason="zarr (the longcrawl extra, in dev) is not installed")
pytest.importorskip("zarr", reason="zarr (the longcrawl extra, in dev) is not installed")

WIDTH, CHUNKS = 2048, (64, 512)
TRAIN_ROWS, HELDOUT_ROWS = 160, 24  # 160 = 64 + 64 + 32: a ragged last row-chunk
TINY = {"model": {"preset": "fox_pro", "vocab_size": LONGCRAWL64_VOCAB, "d_model": 32, "n_layers": 1, "n_heads": 2,
                  "mlp": {"kind": "swiglu", "intermediate_size": 64}},
        "train": {"tokens": 8192, "batch_size": 8, "lr": 1e-2, "eval_batches": 1, "cpu_threads": 1},
        "eval": {"sequences": 4, "length_multiples": [1], "test_tokens": 2048, "min_test_tokens": 256}}


def write_array(path, tokens: np.ndarray, chunks=CHUNKS, dtype="<u2") -> None:
    """``tokens`` as a zarr format 2 array the way the release's are written: a .zarray, then one
    blosc-lz4 file a chunk named 'row.col', edge chunks whole (padded with the fill value 0)."""
    path.mkdir(parents=True)
    codec = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    meta = {"chunks": list(chunks), "compressor": codec.get_config(), "dtype": dtype, "fill_value": 0,
            "filters": None, "order": "C", "shape": list(tokens.shape), "zarr_format": 2}
    (path / ".zarray").write_text(json.dumps(meta))
    (path / ".zattrs").write_text("{}")
    grid = [-(-n // c) for n, c in zip(tokens.shape, chunks)]
    for idx in np.ndindex(*grid):
        piece = tokens[tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))]
        whole = np.zeros(chunks, dtype=dtype)
        whole[tuple(slice(0, n) for n in piece.shape)] = piece
        (path / ".".join(map(str, idx))).write_bytes(codec.encode(np.ascontiguousarray(whole)))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """(folder, train tokens, held-out tokens): ids 1..999 drawn at random, so no row is zeros and
    a block of 64 or more tokens is found at one place only."""
    rng = np.random.default_rng(0)
    train = rng.integers(1, 1000, (TRAIN_ROWS, WIDTH)).astype(np.uint16)
    heldout = rng.integers(1, 1000, (HELDOUT_ROWS, WIDTH)).astype(np.uint16)
    root = tmp_path_factory.mktemp("longcrawl64")
    write_array(root / "train.zarr", train)
    write_array(root / "heldout.zarr", heldout)
    return root, train, heldout


def trial(data: dict, vocab_size: int = LONGCRAWL64_VOCAB) -> TrialSpec:
    return validate(TrialSpec, {**TINY, "model": {**TINY["model"], "vocab_size": vocab_size},
                                "data": {"kind": "longcrawl64", **data}})


def load(root, context: int = 256, vocab_size: int = LONGCRAWL64_VOCAB):
    return load_data(trial({"path": str(root), "context": context}).data, vocab_size, 0)


def where(train: np.ndarray, block: np.ndarray, context: int) -> tuple[int, int]:
    """(row, block number) of the training tokens ``block`` in the store, which must hold them once."""
    found = [(r, b) for r in range(len(train)) for b in range(WIDTH // context)
             if np.array_equal(train[r, b * context : (b + 1) * context], block)]
    assert len(found) == 1, found
    return found[0]


def test_a_batch_is_consecutive_rows_at_one_aligned_block_after_the_end_of_text_id(store):
    root, train, _ = store
    context, batch_size = 256, 8
    data = load(root, context)
    seen = set()
    for step in range(12):
        batch = data.train_batch(seed=3, step=step, micro=step % 2, batch_size=batch_size)
        x, y = batch.x.numpy(), batch.y.numpy()
        assert x.shape == y.shape == (batch_size, context) and x.dtype == y.dtype == np.int64
        row, block = where(train, y[0], context)
        assert row % batch_size == 0  # a tile of the paper's: batch_size rows from a multiple of it
        np.testing.assert_array_equal(y, train[row : row + batch_size, block * context : (block + 1) * context])
        assert (x[:, 0] == LONGCRAWL64_EOT).all()  # the paper's loader: input 0 is the end-of-text id
        np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
        seen.add((row, block))
    assert len({b for _, b in seen}) > 1 and len({r for r, _ in seen}) > 1  # blocks past the first are read
    again = data.train_batch(seed=3, step=5, micro=1, batch_size=batch_size)
    assert np.array_equal(again.y.numpy(), data.train_batch(3, 5, 1, batch_size).y.numpy())  # fixed by (seed, step, micro)
    assert not np.array_equal(again.y.numpy(), data.train_batch(4, 5, 1, batch_size).y.numpy())
    assert data.train_tokens_available == TRAIN_ROWS * WIDTH  # whole blocks of every row
    assert data.vocab_size == LONGCRAWL64_VOCAB and data.tokenizer is None


def test_a_context_of_a_whole_row_is_one_block_of_it(store):
    root, train, _ = store
    data = load(root, WIDTH)
    y = data.train_batch(0, 0, 0, 4).y.numpy()
    row, block = where(train, y[0], WIDTH)
    assert block == 0 and np.array_equal(y, train[row : row + 4].astype(np.int64))


def test_the_held_out_rows_are_the_select_and_test_splits_which_share_no_row(store):
    root, train, heldout = store
    data = load(root, 256)
    select, test = data.select_docs.index, data.test_docs.index
    assert list(select) == list(range(0, HELDOUT_ROWS, 2)) and list(test) == list(range(1, HELDOUT_ROWS, 2))
    assert not set(select) & set(test) and len(select) + len(test) == HELDOUT_ROWS
    # A held-out document: the end-of-text id, then its row; none is a training row.
    for split, rows in ((SELECT, heldout[0::2]), (TEST, heldout[1::2])):
        batches = data.eval_batches(512, 5, 2, split)
        assert [len(b.x) for b in batches] == [2, 2, 1]
        y = np.concatenate([b.y.numpy() for b in batches])
        x = np.concatenate([b.x.numpy() for b in batches])
        np.testing.assert_array_equal(y, rows[:5, :512])
        assert (x[:, 0] == LONGCRAWL64_EOT).all() and np.array_equal(x[:, 1:], y[:, :-1])
    assert data.eval_batches(WIDTH + 1, 4, 2) == []  # longer than a row: no such sequence
    trained = {r.tobytes() for r in train}
    assert not any(r.tobytes() in trained for r in heldout)
    # The test set: the test split's documents in order, every row token scored.
    test_set = data.test_set(3000)
    assert test_set.scored == 3000 and len(test_set.docs) == 2
    np.testing.assert_array_equal(test_set.docs[0], np.concatenate([[LONGCRAWL64_EOT], heldout[1]]))
    np.testing.assert_array_equal(test_set.docs[1][1:], heldout[3, : 3000 - WIDTH])
    assert data.info["data_split"] == {"method": "the store's own held-out rows (heldout.zarr)",
                                       "train_documents": TRAIN_ROWS, "val_documents": HELDOUT_ROWS,
                                       "train_tokens": TRAIN_ROWS * WIDTH, "val_tokens": HELDOUT_ROWS * WIDTH}
    assert data.info["longcrawl64"]["dtype"] == "uint16" and data.info["longcrawl64"]["chunks"] == list(CHUNKS)


def test_a_document_is_read_only_where_sliced(store):
    root, _, heldout = store
    data = load(root, 256)
    doc = data.val_docs[5]
    assert len(doc) == WIDTH + 1 and doc[0] == LONGCRAWL64_EOT and doc[1] == heldout[5, 0] and doc[-1] == heldout[5, -1]
    np.testing.assert_array_equal(doc[:4], [LONGCRAWL64_EOT, *heldout[5, :3]])
    np.testing.assert_array_equal(doc[100:200], heldout[5, 99:199])
    np.testing.assert_array_equal(np.asarray(doc), np.concatenate([[LONGCRAWL64_EOT], heldout[5]]))
    # The unigram entropy counts the held-out rows a few at a time.
    pieces = list(data.val_tokens())
    assert sum(p.size for p in pieces) == HELDOUT_ROWS * WIDTH and all(p.ndim == 1 for p in pieces)
    assert np.array_equal(np.concatenate(pieces)[:WIDTH], heldout[0])


class Counting:
    """A zarr array that records the tokens each read asks for."""

    def __init__(self, array):
        self.array, self.shape, self.dtype, self.asked = array, array.shape, array.dtype, []
        self.oindex = self

    def __getitem__(self, key):
        out = self.array.oindex[key] if isinstance(key[0], np.ndarray) else self.array[key]
        self.asked.append(out.size)
        return out


def test_a_batch_reads_its_own_tokens_only(store):
    root, _, _ = store
    data = load(root, 256)
    for docs in (data.train_docs, data.select_docs):
        docs.array = Counting(docs.array)
    data.train_batch(0, 0, 0, 8)
    data.eval_batches(256, 4, 4)
    assert data.train_docs.array.asked == [8 * 256]  # one read of the batch's rows and block
    assert data.select_docs.array.asked == [4 * 256]


def test_zarr_is_asked_for_by_name_when_missing(store, monkeypatch):
    monkeypatch.setitem(sys.modules, "zarr", None)  # import zarr now raises ImportError
    with pytest.raises(SpecError, match=r"zarr package is not installed: pip install -e '\.\[longcrawl\]'"):
        load(store[0])


@pytest.fixture(scope="module")
def bad(store, tmp_path_factory) -> dict:
    """name -> (the data folder, data.context, words the one-line error must hold)."""
    good, train, _ = store
    root = tmp_path_factory.mktemp("bad")
    (root / "file").write_text("")
    write_array(root / "only_train/train.zarr", train[:8])
    (root / "not_zarr/train.zarr").mkdir(parents=True)
    (root / "not_zarr/heldout.zarr").mkdir()
    write_array(root / "flat/train.zarr", train[0], chunks=(512,))
    write_array(root / "flat/heldout.zarr", train[1], chunks=(512,))
    write_array(root / "floats/train.zarr", train[:8].astype("<f4"), dtype="<f4")
    write_array(root / "floats/heldout.zarr", train[8:16].astype("<f4"), dtype="<f4")
    write_array(root / "one_heldout/train.zarr", train[:8])
    write_array(root / "one_heldout/heldout.zarr", train[8:9])
    return {
        "no folder": (root / "nowhere", 256, ["data.path", "no such folder", "train.zarr and heldout.zarr"]),
        "a file": (root / "file", 256, ["data.path", "is a file"]),
        "no heldout.zarr": (root / "only_train", 256, ["data.path", "holds no heldout.zarr", "it holds: train.zarr"]),
        "not an array": (root / "not_zarr", 256, ["data.path", "train.zarr is not a zarr array", ".zarray"]),
        "1-D": (root / "flat", 256, ["data.path", "has shape (2048,)", "2-D"]),
        "floats": (root / "floats", 256, ["data.path", "holds float32 values", "uint16"]),
        "context past the rows": (good, 4096, ["data.context=4096", "longer than the rows of train.zarr", "2,048 tokens",
                                               "lower data.context"]),
        "one held-out row": (root / "one_heldout", 256, ["data.path", "heldout.zarr holds 1 row", "select and test"]),
    }


@pytest.mark.parametrize("name", ["no folder", "a file", "no heldout.zarr", "not an array", "1-D", "floats",
                                  "context past the rows", "one held-out row"])
def test_a_bad_store_gives_one_clear_error(bad, name):
    folder, context, needles = bad[name]
    with pytest.raises(SpecError) as err:
        load(folder, context)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and all(n in message for n in needles), message


def test_ids_beyond_the_model_and_a_missing_chunk_are_refused_when_read(store, tmp_path):
    root, train, heldout = store
    big = train[:16].copy()
    big[3, 5] = 60000  # uint16 holds ids GPT-2 has not
    write_array(tmp_path / "big/train.zarr", big)
    write_array(tmp_path / "big/heldout.zarr", heldout[:4])
    data = load(tmp_path / "big", WIDTH)  # one block a row, one tile of 16 rows: rows 0-15 are read
    with pytest.raises(SpecError, match=r"token id 60000 in row 3 of train.zarr is outside the vocabulary "
                                        r"\(model.vocab_size=50257\)"):
        data.train_batch(0, 0, 0, 16)
    write_array(tmp_path / "partial/train.zarr", train)
    write_array(tmp_path / "partial/heldout.zarr", heldout)
    (tmp_path / "partial/train.zarr/1.0").unlink()  # rows 64-127, tokens 0-511: never downloaded
    data = load(tmp_path / "partial", 512)
    with pytest.raises(SpecError, match=r"row 64 of train.zarr reads as zeros at tokens 0-512: the store lacks that chunk"):
        for step in range(200):  # tiles of 64 rows and blocks of 512 tokens: one draw in 8 reads the hole
            data.train_batch(0, step, 0, 64)


def test_the_spec_declares_gpt2s_vocabulary(store, tmp_path):
    with pytest.raises(SpecError, match=r"model.vocab_size=256 is smaller than the data's vocabulary \(50257 for "
                                        r"data.kind='longcrawl64'\); set model.vocab_size to at least 50257"):
        trial({"path": str(store[0])}, vocab_size=256)
    other = tmp_path / "tokenizer.json"
    Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="a")).save(str(other))
    with pytest.raises(SpecError, match=r"data.tokenizer: LongCrawl64's ids are GPT-2's \(50257 of them\).* has 2"):
        trial({"path": str(store[0]), "tokenizer": str(other)})
    with pytest.raises(SpecError, match="data.path"):
        trial({"path": ""})
    with pytest.raises(SpecError, match="data.path"):
        validate(TrialSpec, {**TINY, "data": {"kind": "longcrawl64"}})
    spec = trial({"path": str(store[0])})
    assert spec.data.context == 16384  # the paper's
    moved = trial({"path": str(store[0]) + "/"})
    assert moved.spec_hash() != spec.spec_hash()  # the path as written is the identity, as for every kind


def test_wb_train_trains_on_it(store, tmp_path):
    root, _, _ = store
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump({**TINY, "data": {"kind": "longcrawl64", "path": str(root), "context": 64}}))
    proc = wb("train", path, "--out", tmp_path / "out", timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert np.isfinite(result["val_loss"]) and result["val_loss"] < np.log(LONGCRAWL64_VOCAB) - 1  # learnt the ids in use
    assert result["test_tokens"] == 2048 and result["test_documents"] == 1 and result["train_tokens"] == 8192
    assert result["data_split"]["train_documents"] == TRAIN_ROWS and result["longcrawl64"]["row_tokens"] == WIDTH
    assert result["tokenizer"] == {"kind": "none"} and result["train_tokens_available"] == TRAIN_ROWS * WIDTH

"""Bring your own data: a datasets folder, parquet, arrow, jsonl, nanoGPT / llm.c shards and a
tokenizer.json, each built here, loaded memory-mapped and trained on; each bad file one clear error."""
import json
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from foxwb.workbench.data.load import load_data
from foxwb.workbench.spec.errors import SpecError, validate
from foxwb.workbench.data.shards import write_shard
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.trial import run_trial

TINY = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
                  "mlp": {"kind": "swiglu", "intermediate_size": 64}},
        "train": {"tokens": 8192, "batch_size": 8, "lr": 3e-3, "eval_every_tokens": 4096, "eval_batches": 1, "cpu_threads": 1},
        "eval": {"sequences": 4, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 256}}  # tiny files


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WB_DATA_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Real text, the same on every machine: 80 modules of the standard library."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.stat().st_size > 3000)[:80]
    return [p.read_text(encoding="utf-8", errors="replace")[:6000] for p in files]


def byte_ids(text: str) -> list[int]:
    return list(np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(int))


@pytest.fixture(scope="module")
def files(texts, tmp_path_factory) -> Path:
    """One small file of each format."""
    from datasets import Dataset, DatasetDict

    d = tmp_path_factory.mktemp("formats")
    pq.write_table(pa.table({"id": list(range(len(texts))), "text": texts}), d / "docs.parquet")
    (d / "docs.jsonl").write_text("".join(json.dumps({"text": t, "n": i}) + "\n" for i, t in enumerate(texts)))
    with pa.ipc.new_file(d / "ids.arrow", pa.schema([("ids", pa.list_(pa.int32()))])) as w:
        w.write_table(pa.table({"ids": pa.array([byte_ids(t) for t in texts], pa.list_(pa.int32()))}))
    DatasetDict({"train": Dataset.from_dict({"text": texts[10:]}),
                 "validation": Dataset.from_dict({"text": texts[:10]})}).save_to_disk(str(d / "hf"))
    (d / "shards").mkdir()
    # As the FineWeb scripts write them: each document starts with <|endoftext|> (50256).
    stream = [np.concatenate([[50256], byte_ids(t)]) for t in texts]
    write_shard(d / "shards/fineweb_train_000001.bin", np.concatenate(stream[10:45]))
    write_shard(d / "shards/fineweb_train_000002.bin", np.concatenate(stream[45:]))
    write_shard(d / "shards/fineweb_val_000000.bin", np.concatenate(stream[:10]))
    train_tokenizer(texts, 320).save(str(d / "tokenizer.json"))
    return d


def train_tokenizer(texts, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def trial(data: dict, vocab_size: int = 256, seed: int = 0) -> TrialSpec:
    return validate(TrialSpec, {**TINY, "model": {**TINY["model"], "vocab_size": vocab_size},
                                "data": {"context": 64, **data}, "seed": seed})


def formats(d: Path) -> dict[str, tuple[dict, int]]:
    """name -> (data spec, model vocabulary)."""
    return {
        "hf_dataset": ({"kind": "hf_dataset", "path": str(d / "hf"), "text_column": "text", "val_split": "validation"}, 256),
        "parquet": ({"kind": "table", "paths": [str(d / "docs.parquet")], "text_column": "text"}, 256),
        "jsonl+tokenizer.json": ({"kind": "table", "paths": [str(d / "docs.jsonl")], "text_column": "text",
                                  "tokenizer": str(d / "tokenizer.json")}, 320),
        "arrow ids": ({"kind": "table", "paths": [str(d / "ids.arrow")], "ids_column": "ids"}, 256),
        "shards": ({"kind": "shards", "paths": [str(d / "shards/fineweb_train_*.bin")],
                    "val_paths": [str(d / "shards/fineweb_val_000000.bin")]}, 50304),
    }


@pytest.mark.parametrize("name", ["hf_dataset", "parquet", "jsonl+tokenizer.json", "arrow ids", "shards"])
def test_a_tiny_trial_trains_on_each_format(files, tmp_path, name):
    data, vocab = formats(files)[name]
    spec = trial(data, vocab)
    result = run_trial(spec, tmp_path / "out")
    assert np.isfinite(result["val_loss"]) and result["val_loss"] < np.log(vocab)  # learnt something
    split = result["data_split"]
    assert split["train_documents"] > 0 and split["val_documents"] > 0
    assert result["spec_hash"] == spec.spec_hash() and result["peak_rss_mb"] > 0
    assert result["peak_memory_train_mb"] is None  # CPU: no GPU allocator, the RSS stands in
    if "tokenizer" in data:
        # result.json states the tokenizer's identity: the file's SHA-256 and vocabulary size.
        import hashlib

        path = Path(data["tokenizer"])
        assert result["tokenizer"] == {"kind": "hf", "path": str(path), "vocab_size": 320,
                                       "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        assert json.loads((tmp_path / "out" / "result.json").read_text())["tokenizer"] == result["tokenizer"]
        assert result["tokenizer"]["sha256"] == spec.data.tokenizer.sha256


def test_documents_are_memory_mapped_and_tokenized_once(files):
    data, vocab = formats(files)["parquet"]
    first = load_data(trial(data, vocab).data, vocab, 0)
    assert all(isinstance(t, np.memmap) for t in first.train_docs._tokens)
    cache = next(p for p in Path(first.train_docs._tokens[0].filename).parents if p.name == "cache")
    built = sorted(p.stat().st_mtime_ns for p in cache.rglob("tokens.bin"))
    again = load_data(trial(data, vocab).data, vocab, 0)
    assert sorted(p.stat().st_mtime_ns for p in cache.rglob("tokens.bin")) == built  # read, not rebuilt
    assert [d.tolist() for d in again.val_docs] == [d.tolist() for d in first.val_docs]
    shards = load_data(trial(*formats(files)["shards"]).data, 50304, 0)
    assert all(isinstance(t, np.memmap) for t in shards.train_docs._tokens)
    assert len(shards.train_docs) == 70 and all(int(d[0]) == 50256 for d in shards.train_docs)


def test_the_split_is_by_document_fixed_by_split_seed_and_stated(files, texts):
    spec = {"kind": "table", "paths": [str(files / "docs.parquet")], "text_column": "text", "val_fraction": 0.2}
    held = lambda **extra: load_data(trial({**spec, **extra}).data, 256, 0)  # noqa: E731
    a, b, c = held(), held(), held(split_seed=1)
    assert [d.tolist() for d in a.val_docs] == [d.tolist() for d in b.val_docs]
    assert [d.tolist() for d in a.val_docs] != [d.tolist() for d in c.val_docs]
    whole = {bytes(np.asarray(d, dtype=np.uint8)) for d in list(a.train_docs) + list(a.val_docs)}
    assert whole == {t.encode() for t in texts}  # every document whole on one side
    assert a.info["data_split"] | {"split_seed": 0} == a.info["data_split"]
    assert a.info["data_split"]["val_documents"] == len(a.val_docs) and a.info["data_split"]["val_fraction"] == 0.2
    # The trial's seed draws the batches, not the split: every seed is measured on the same documents.
    assert [d.tolist() for d in load_data(trial(spec, seed=3).data, 256, 3).val_docs] == [d.tolist() for d in a.val_docs]


def test_tokenizer_identity_is_its_content(files, texts, tmp_path):
    data = {"kind": "table", "paths": [str(files / "docs.parquet")], "text_column": "text"}
    base = trial({**data, "tokenizer": str(files / "tokenizer.json")}, 320)
    tok = base.data.tokenizer
    assert tok.vocab_size == 320 and len(tok.sha256) == 64 and Path(tok.path).is_absolute()
    moved = tmp_path / "elsewhere" / "tokenizer.json"
    moved.parent.mkdir()
    shutil.copy(files / "tokenizer.json", moved)
    assert trial({**data, "tokenizer": str(moved)}, 320).spec_hash() == base.spec_hash()
    train_tokenizer(texts[:40], 320).save(str(moved))  # same size, other merges
    changed = trial({**data, "tokenizer": str(moved)}, 320)
    assert changed.data.tokenizer.sha256 != tok.sha256 and changed.spec_hash() != base.spec_hash()
    # The resolved spec (as a trial receives it) round-trips to the same identity.
    assert TrialSpec.model_validate_json(base.model_dump_json()).spec_hash() == base.spec_hash()


def test_a_transformers_folder_and_the_builtin_corpus_take_a_tokenizer_json(files, tmp_path):
    folder = tmp_path / "my-tokenizer"
    folder.mkdir()
    shutil.copy(files / "tokenizer.json", folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 64}')
    spec = trial({"kind": "builtin", "max_bytes": 200_000, "tokenizer": {"kind": "hf", "path": str(folder)}}, 320)
    data = load_data(spec.data, 320, 0)
    assert data.info["tokenizer"]["sha256"] == spec.data.tokenizer.sha256
    assert data.tokenizer.decode(data.tokenizer.encode("def forget(gate):")) == "def forget(gate):"
    assert max(int(d.max()) for d in data.train_docs) < 320 and max(len(d) for d in data.train_docs) > 64


BAD = {
    "missing parquet column": ({"kind": "table", "paths": ["docs.parquet"], "text_column": "body"},
                               ["text_column='body'", "no such column", "'id', 'text'"]),
    "missing jsonl column": ({"kind": "table", "paths": ["docs.jsonl"], "text_column": "body"},
                             ["text_column='body'", "line 1", "'text', 'n'"]),
    "missing dataset column": ({"kind": "hf_dataset", "path": "hf", "text_column": "body"},
                               ["text_column='body'", "split 'train'", "['text']"]),
    "missing dataset split": ({"kind": "hf_dataset", "path": "hf", "text_column": "text", "val_split": "test"},
                              ["val_split='test'", "['train', 'validation']"]),
    "ids column of text": ({"kind": "table", "paths": ["docs.parquet"], "ids_column": "text"},
                           ["ids_column='text'", "not lists of token ids", "text_column"]),
    "text column of ids": ({"kind": "table", "paths": ["ids.arrow"], "text_column": "ids"},
                           ["text_column='ids'", "not text", "ids_column"]),
    "wrong magic": ({"kind": "shards", "paths": ["bad/magic.bin"]}, ["magic number 1234", "20240520"]),
    "wrong version": ({"kind": "shards", "paths": ["bad/version.bin"]}, ["version 2", "version 1"]),
    "truncated shard": ({"kind": "shards", "paths": ["bad/short.bin"]}, ["declares 1000 tokens", "holds 10"]),
    "no shard": ({"kind": "shards", "paths": ["bad/none_*.bin"]}, ["data.paths[0]", "no file matches"]),
    "shard ids beyond the model": ({"kind": "shards", "paths": ["shards"]}, ["token id 50256", "model.vocab_size=256"]),
    "ids beyond the model": ({"kind": "table", "paths": ["big.parquet"], "ids_column": "ids"},
                             ["token id 9999", "model.vocab_size=256", "at least 10000"]),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_file_gives_one_clear_error(files, name):
    bad = files / "bad"
    if not bad.exists():
        bad.mkdir()
        for stem, header in (("magic", (1234, 1, 10)), ("version", (20240520, 2, 10)), ("short", (20240520, 1, 1000))):
            h = np.zeros(256, dtype=np.int32)
            h[:3] = header
            (bad / f"{stem}.bin").write_bytes(h.tobytes() + np.arange(10, dtype=np.uint16).tobytes())
        pq.write_table(pa.table({"ids": [[1, 2, 9999] * 30] * 4}), files / "big.parquet")
    data, needles = BAD[name]
    data = {k: ([str(files / p) for p in v] if k == "paths" else str(files / v) if k == "path" else v) for k, v in data.items()}
    with pytest.raises(SpecError) as err:
        load_data(trial(data).data, 256, 0)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and all(n in message for n in needles), message


SPEC_ERRORS = {
    "both columns": ({"kind": "table", "paths": ["x"], "text_column": "t", "ids_column": "i"}, 256, "exactly one of text_column"),
    "bpe on a table": ({"kind": "table", "paths": ["x"], "text_column": "t", "tokenizer": "bpe"}, 256, "tokenizer 'bpe'"),
    "no tokenizer file": ({"kind": "table", "paths": ["x"], "text_column": "t", "tokenizer": "nope.json"}, 256,
                          "no such file or folder: 'nope.json'"),
    "vocabulary larger than the model's": ({"kind": "table", "paths": ["x"], "text_column": "t", "tokenizer": "TOK"}, 256,
                                           "model.vocab_size=256 is smaller than the data's vocabulary (320"),
    "val_fraction and a held-out part": ({"kind": "shards", "paths": ["x"], "val_paths": ["y"], "val_fraction": 0.1}, 256,
                                         "set one or the other"),
}


@pytest.mark.parametrize("name", list(SPEC_ERRORS))
def test_a_bad_spec_is_refused_when_read(files, tmp_path, name):
    data, vocab, needle = SPEC_ERRORS[name]
    data = {k: str(files / "tokenizer.json") if v == "TOK" else v for k, v in data.items()}
    with pytest.raises(SpecError, match="data") as err:
        trial(data, vocab)
    assert needle in str(err.value), str(err.value)


def test_a_folder_without_tokenizer_json_says_what_to_do(tmp_path):
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow/vocab.json").write_text("{}")
    with pytest.raises(SpecError, match="holds no tokenizer.json.*save_pretrained"):
        trial({"kind": "builtin", "tokenizer": str(tmp_path / "slow")}, 512)

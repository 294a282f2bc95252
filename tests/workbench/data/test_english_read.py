"""An English set as a trial reads it (data.kind: english): the built file is checked against the
set's pinned digest before anything is read; a missing, damaged or different file is one clear
error that says how to build the pinned one; documents split by id as a text corpus's do; the
result states the set, its digest and its inputs. The sets are stood in for by a small file whose
digest the test pins in place of the real one (the real build is tests/workbench/data/test_english.py's)."""
import dataclasses
import hashlib
import json
import lzma

import numpy as np
import pytest

from foxwb.workbench.data.corpus import split_documents
from foxwb.workbench.data.english import read
from foxwb.workbench.data.english.sources import SETS
from foxwb.workbench.data.load import load_data
from foxwb.workbench.spec.data import ENGLISH_SETS, EnglishData
from foxwb.workbench.spec.errors import SpecError, validate
from foxwb.workbench.spec.trial import TrialSpec
from tests.cli import wb

DOCS = [{"id": f"book/{i:03d}", "source": "book", "text": f"Chapter {i}\n\n" + "It is a truth universally acknowledged. " * 40}
        for i in range(40)]


@pytest.fixture
def built(tmp_path, monkeypatch):
    """A folder holding core.jsonl.xz of DOCS, pinned as the 'core' set."""
    raw = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS).encode()
    (tmp_path / "core.jsonl.xz").write_bytes(lzma.compress(raw, format=lzma.FORMAT_XZ))
    # The real set's record with the stand-in's digest pinned in place of the real one.
    monkeypatch.setitem(read.SETS, "core", dataclasses.replace(SETS["core"], sha256=hashlib.sha256(raw).hexdigest()))
    return tmp_path, hashlib.sha256(raw).hexdigest()


def test_the_sets_the_spec_allows_are_the_sets_pinned():
    assert set(ENGLISH_SETS) == set(SETS)


def test_the_set_is_the_identity_and_the_path_only_where_it_lies():
    assert EnglishData(path="a").spec_hash() == EnglishData(path="/elsewhere/b").spec_hash()
    assert EnglishData(set="core").spec_hash() != EnglishData(set="en-permissive").spec_hash()
    with pytest.raises(SpecError, match=r"data\.set.*'core' or 'en-permissive'"):
        validate(TrialSpec, {"data": {"kind": "english", "set": "en-max"}}, "trial.yaml")


def test_a_built_set_loads_split_by_id_and_states_its_provenance(built):
    folder, digest = built
    data = load_data(EnglishData(path=str(folder), context=64), 256, 0)
    named = [(d["id"], d["text"]) for d in DOCS]
    train, held = split_documents(named, 0.05)
    assert [bytes(np.asarray(t, dtype=np.uint8)).decode() for t in data.train_docs] == train
    assert len(data.val_docs) == len(held) >= 1
    corpus = data.info["corpus"]
    assert corpus["set"] == "core" and corpus["sha256"] == digest and corpus["documents"] == len(DOCS)
    assert corpus["text_bytes"] == sum(len(d["text"].encode()) for d in DOCS)
    assert corpus["inputs"] == SETS["core"].provenance() and corpus["inputs"][0]["name"] == "r-cran-janeaustenr"
    split = data.info["data_split"]
    assert (split["train_documents"], split["val_documents"]) == (len(train), len(held))
    assert split["train_tokens"] == sum(len(t.encode()) for t in train) and data.info["tokenizer"] == {"kind": "byte"}


def test_a_bpe_is_trained_on_the_training_documents(built):
    folder, _ = built
    data = load_data(EnglishData(path=str(folder), context=32, tokenizer="bpe", bpe_vocab_size=300), 300, 0)
    assert data.vocab_size == 300 and max(int(d.max()) for d in data.train_docs) < 300
    assert data.info["tokenizer"]["kind"] == "bpe" and data.info["tokenizer"]["vocab_size"] == 300


def test_a_missing_set_says_how_to_build_it(tmp_path):
    with pytest.raises(SpecError, match=r"data\.path: no core\.jsonl\.xz in .*wb corpus core --dir"):
        read.read_documents(EnglishData(path=str(tmp_path)))


def test_a_damaged_or_different_file_is_refused_before_a_token_is_read(built):
    folder, digest = built
    path = folder / "core.jsonl.xz"
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(SpecError, match=r"not a readable xz file.*wb corpus core"):
        read.read_documents(EnglishData(path=str(folder)))
    other = json.dumps({"id": "x", "source": "x", "text": "another text"}) + "\n"
    path.write_bytes(lzma.compress(other.encode(), format=lzma.FORMAT_XZ))
    with pytest.raises(SpecError, match=rf"is not the pinned 'core' set .*hashes to {hashlib.sha256(other.encode()).hexdigest()[:16]}.*"
                                        rf"pinned build to {digest[:16]}"):
        read.read_documents(EnglishData(path=str(folder)))


def test_wb_corpus_lists_the_sets_and_refuses_an_unknown_one(built):
    """In the test's process, where the stand-in set is pinned."""
    folder, _ = built
    proc = wb("corpus", "--dir", folder, in_process=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("core") and f"built in {folder}" in lines[0]
    assert lines[1].startswith("en-permissive") and "not built" in lines[1]
    proc = wb("corpus", "en-max", "--dir", folder, in_process=True)
    assert proc.returncode == 2 and "'en-max' is not a set; choose one of core, en-permissive" in proc.stderr
    path = folder / "core.jsonl.xz"
    path.write_bytes(path.read_bytes()[:-20])
    proc = wb("corpus", "--dir", folder, in_process=True)
    assert proc.returncode == 0 and "[NOT the pinned build: " in proc.stdout.splitlines()[0]
    assert f"build it again with `wb corpus core --dir {folder}`]" in proc.stdout.splitlines()[0]
    proc = wb("corpus", "--dir", path, in_process=True)
    assert proc.returncode == 2 and f"--dir {path}: is a file, not a folder" in proc.stderr


def test_a_data_path_that_is_a_file_is_named_as_such(tmp_path):
    (tmp_path / "trial.yaml").write_text("x")
    with pytest.raises(SpecError, match=r"data\.path: .*trial\.yaml is a file; give the folder `wb corpus core` wrote"):
        read.read_documents(EnglishData(path=str(tmp_path / "trial.yaml")))

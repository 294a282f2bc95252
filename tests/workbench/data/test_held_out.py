"""The three splits by document (train, select, test), the test set in tokens through a sliding
window, and the refusal of a test split too small (docs/trials-and-data.md, "Three splits")."""
from pathlib import Path

from tempfile import TemporaryDirectory

import numpy as np
import pytest
import torch

from foxwb.workbench.data import held_out, test_check
from foxwb.workbench.data.batch import IGNORE
from foxwb.workbench.data.corpus import DocumentData
from foxwb.workbench.data.load import check_test_split, load_data
from foxwb.workbench.execution import Execution
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.study import StudySpec, expand
from foxwb.workbench.spec.data import DatasetData, ShardData, TableData
from foxwb.workbench.spec.trial import CorpusData, TokenData, TrialSpec
from foxwb.workbench.train.trial import run_trial
from foxwb.workbench.train.evaluate import evaluate
from foxwb.workbench.train.loop import train

TINY_MODEL = {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2}


def docs_of(*lengths: int, start: int = 0) -> list[np.ndarray]:
    out, at = [], start
    for n in lengths:
        out.append(np.arange(at, at + n, dtype=np.int64) % 251)
        at += n
    return out


def test_the_held_out_documents_alternate_between_select_and_test():
    held = docs_of(50, 60, 70, 80, 90)
    select, test = held_out.halves(held)
    assert [len(d) for d in select] == [50, 70, 90] and [len(d) for d in test] == [60, 80]
    one, = held_out.halves(docs_of(101))[1]
    assert len(one) == 51  # a single held-out document is cut at its middle, the second half tests


def test_training_reads_its_own_documents_and_both_held_out_splits_are_disjoint_from_them():
    train_docs, held = docs_of(400, 400), docs_of(300, 300, 300, 300, start=5000)
    data = DocumentData(train_docs, held, context=64, vocab_size=256)
    ids = {id(d) for d in data.train_docs}
    assert not ids & {id(d) for d in data.select_docs} and not ids & {id(d) for d in data.test_docs}
    assert not {id(d) for d in data.select_docs} & {id(d) for d in data.test_docs}


@pytest.mark.parametrize("length,context,stride", [(1, 8, 0.5), (2, 8, 0.5), (9, 8, 0.5), (37, 8, 0.5), (37, 8, 1.0),
                                                   (100, 16, 0.25), (17, 16, 0.5)])
def test_the_sliding_window_scores_every_token_once_with_enough_context(length, context, stride):
    doc = np.arange(length, dtype=np.int64) + 1000  # a token's value says its position
    step = held_out.stride_tokens(context, stride)
    scored = []
    for x, y in held_out.windows(doc, context, step):
        assert len(x) == len(y) <= context
        for k, target in enumerate(y):
            if target == IGNORE:
                continue
            position = int(target) - 1000
            assert x[k] == doc[position - 1]  # the input before it is its predecessor
            seen = k + 1  # tokens of the window up to and including its input
            assert seen == position or seen >= context - step + 1, (position, seen)
            scored.append(position)
    assert sorted(scored) == list(range(1, length))  # every token but the first, once


def test_the_test_set_takes_whole_documents_until_it_has_the_tokens_asked():
    test = held_out.test_set(docs_of(11, 1, 21, 31), asked=25)
    assert [len(d) for d in test.docs] == [11, 16]  # 10 + 15 scored; a document of one token scores nothing
    assert test.scored == 25 and test.available == 10 + 20 + 30
    assert held_out.test_set(docs_of(11, 1, 21, 31), asked=25).digest == test.digest
    assert held_out.test_set(docs_of(11, 1, 21, 31), asked=26).digest != test.digest


def test_the_test_loss_is_the_mean_over_the_test_tokens_whatever_the_batching():
    """test_loss through windows in batches equals the loss of each token scored directly from its
    window's prefix, document by document."""
    torch.manual_seed(0)
    spec = TrialSpec.model_validate({"model": TINY_MODEL, "data": {"kind": "builtin", "context": 16},
                                     "eval": {"test_tokens": 300, "min_test_tokens": 100, "batch_size": 3,
                                              "sequences": 2, "length_multiples": [1]}})
    model = build_model(spec.model, Execution.of_trial(spec.train)).eval()
    rng = np.random.default_rng(0)
    held = [rng.integers(0, 256, size=n) for n in (40, 90, 40, 130, 40, 25)]
    data = DocumentData([rng.integers(0, 256, size=500)], held, context=16, vocab_size=256)
    result = evaluate(model, data, spec.eval, 16, torch.device("cpu"))
    assert result["test_tokens"] == 89 + 129 + 24 and result["test_documents"] == 3
    losses = []
    with torch.no_grad():
        for doc in data.test_docs:
            for x, y in held_out.windows(np.asarray(doc), 16, 8):
                logits = model(torch.from_numpy(x)[None])[0]
                keep = torch.from_numpy(y) != IGNORE
                losses.append(torch.nn.functional.cross_entropy(logits[keep], torch.from_numpy(y)[keep], reduction="none"))
    direct = torch.cat(losses).double()
    assert result["test_loss"] == pytest.approx(float(direct.mean()), rel=1e-5)
    per_doc = np.array(result["test_doc_loss"]) @ np.array(result["test_doc_tokens"]) / result["test_tokens"]
    assert per_doc == pytest.approx(result["test_loss"], rel=1e-9)


class Watched(list):
    """A list of documents that records every read of a document."""

    reads: list

    def __getitem__(self, i):
        self.reads.append(i)
        return super().__getitem__(i)

    def __iter__(self):
        self.reads.append("iter")
        return super().__iter__()


def test_no_choice_can_read_the_test_split():
    """Training with its validations (what ASHA, a search and a confirmation choose by) reads no
    test document; the evaluation after training does. And a choice cannot be asked to read test."""
    spec = TrialSpec.model_validate({
        "model": TINY_MODEL, "data": {"kind": "builtin", "context": 32, "max_bytes": 400_000},
        "train": {"tokens": 2048, "batch_size": 4, "warmup_tokens": 512, "eval_every_tokens": 512, "eval_batches": 1,
                  "checkpoint_every_tokens": None, "cpu_threads": 1},
        "eval": {"sequences": 2, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024}})
    data = load_data(spec.data, 256, 0)
    watched = Watched(data.test_docs)
    watched.reads = []
    data.test_docs = watched
    model = build_model(spec.model, Execution.of_trial(spec.train))
    seen = []

    class Reporter:
        def report(self, tokens, metrics):
            seen.append(metrics)

        def resumed(self, *a, **k):
            pass

    with TemporaryDirectory() as folder:
        train(spec, model, data, Reporter(), Path(folder) / "checkpoint.pt", torch.device("cpu"), Execution.of_trial(spec.train))
    assert any("val_loss" in m for m in seen) and not any(k.startswith("test") for m in seen for k in m)
    assert watched.reads == []
    result = evaluate(model, data, spec.eval, 32, torch.device("cpu"))
    assert watched.reads and result["test_tokens"] > 0
    with pytest.raises(ValueError, match="val_loss"):
        StudySpec.model_validate({"name": "s", "base": {"model": TINY_MODEL}, "design": {"kind": "ablation", "changes": []},
                                  "search": {"space": {"train.lr": {"choice": [1e-3, 3e-3]}},
                                             "confirm": {"seeds": [0, 1], "metric": "test_loss"}}})


def builtin_trial(max_bytes: int, **eval_) -> TrialSpec:
    return TrialSpec.model_validate({"model": TINY_MODEL, "data": {"kind": "builtin", "context": 32, "max_bytes": max_bytes},
                                     "eval": eval_})


def test_a_test_split_below_the_minimum_is_refused_with_advice_for_its_data():
    trial = builtin_trial(300_000, min_test_tokens=131_072)
    data = load_data(trial.data, 256, 0)
    with pytest.raises(SpecError) as e:
        check_test_split(data, trial)
    text = str(e.value)
    assert "eval.min_test_tokens=131,072" in text and "data.max_bytes (now 300,000)" in text and "val_fraction" in text
    check_test_split(data, builtin_trial(300_000, min_test_tokens=1000))  # lowered: accepted


@pytest.mark.parametrize("member,fields,said", [
    (CorpusData, {"kind": "text", "paths": ["x"]}, "data.paths"),
    (TokenData, {"train": "a.npy", "val": "b.npy"}, "data.val file"),
    (TableData, {"paths": ["a.parquet"], "val_paths": ["b.parquet"]}, "data.val_paths"),
    (TableData, {"paths": ["a.parquet"]}, "data.val_fraction"),
    (ShardData, {"paths": ["a.bin"], "val_paths": ["b.bin"]}, "data.val_paths"),
    (DatasetData, {"path": "d", "val_split": "validation"}, "data.val_split"),
])
def test_the_advice_fits_each_kind_of_data(member, fields, said):
    assert said in held_out.advice(member.model_construct(**fields))  # built without its files


def test_every_cell_of_a_crossed_design_is_scored_on_the_same_test_tokens(tmp_path):
    study = StudySpec.model_validate({
        "name": "crossed", "base": {"model": TINY_MODEL, "data": {"kind": "builtin", "max_bytes": 400_000},
                                    "train": {"tokens": 1024, "batch_size": 4, "warmup_tokens": 256, "cpu_threads": 1,
                                              "eval_every_tokens": None, "checkpoint_every_tokens": None},
                                    "eval": {"sequences": 2, "length_multiples": [1], "test_tokens": 8192,
                                             "min_test_tokens": 1024}},
        "design": {"kind": "crossed", "compare_to": "no gate",
                   "variants": [{"name": "no gate", "set": {"model.attention.forget_gate": "none"}}, {"name": "FoX (Pro)"}],
                   "axis": "context", "points": [{"name": "32", "set": {"data.context": 32}},
                                                 {"name": "64", "set": {"data.context": 64}}]},
        "seeds": [0]})
    trials = expand(study)
    checks = test_check.check_trials(trials)
    assert len(checks) == 1 and checks[0].scored == 8192 and len(checks[0].rows) == len(trials) == 4
    digests = {}
    for t in trials:
        result = run_trial(t.spec, tmp_path / t.spec_hash)
        digests[t.row] = (result["test_digest"], result["test_tokens"], result["test_documents"])
    assert len(set(digests.values())) == 1, digests
    assert next(iter(digests.values()))[0] == checks[0].digest


def test_wb_run_and_its_dry_run_refuse_a_test_split_below_the_minimum(tmp_path):
    """A study whose test split is too small: the dry run prints REFUSED and exits 2, `wb run`
    stops before a trial starts (nothing tracked), both naming the field and the advice."""
    import yaml

    from tests.workbench.run.test_run import trial_runs, wb

    study = {"name": "small", "seeds": [0],
             "design": {"kind": "ablation", "changes": [{"name": "no gate", "set": {"model.attention.forget_gate": "none"}}]},
             "base": {"model": TINY_MODEL, "data": {"kind": "builtin", "context": 32, "max_bytes": 300_000},
                      "train": {"tokens": 512, "batch_size": 4, "cpu_threads": 1}, "eval": {"min_test_tokens": 131_072}}}
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(study))
    dry = wb("run", path, "--workdir", tmp_path / "w", "--dry-run")
    assert dry.returncode == 2 and "REFUSED:" in dry.stdout and "eval.min_test_tokens=131,072" in dry.stdout, dry.stdout
    run = wb("run", path, "--workdir", tmp_path / "w")
    assert run.returncode != 0 and "eval.min_test_tokens=131,072" in run.stderr + run.stdout, run.stderr[-2000:]
    assert not (tmp_path / "w" / "mlflow.db").exists() or not trial_runs(tmp_path / "w", "small")[1]

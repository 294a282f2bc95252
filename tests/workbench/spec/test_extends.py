"""`extends:` in study files: a variant of a study is a few lines, merged over the file it extends;
a bad `extends` is one error naming the file, the field and what is allowed."""
import re
import textwrap
from pathlib import Path

import pytest

from foxwb.workbench.spec.errors import SpecError, read_yaml, validate
from foxwb.workbench.spec.study import StudySpec, expand, load_study, merge_extended
from foxwb.workbench.spec.trial import TrialSpec
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]

# A tiny study, as test_study.py's: an ablation of two changes on two seeds.
PARENT = """\
name: parent
description: the study the others extend
base:
  model: {preset: fox_pro, vocab_size: 256, d_model: 32, n_layers: 1, n_heads: 2,
          attention: {forget_gate: {kind: data_dependent, bias_init: 1.0}}}
  data: {kind: builtin, context: 32}
  train: {lr: 0.003, batch_size: 4}
design:
  kind: ablation
  base_name: FoX
  changes:
    - {name: FoX - QK-norm, set: {model.attention.qk_norm: none}}
    - {name: FoX - KV-shift, set: {model.attention.kv_shift: none}}
seeds: [0, 1]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(SpecError) as e:
        load_study(str(path))
    return str(e.value)


def test_a_variant_of_a_study_changes_only_what_it_says(tmp_path):
    parent = load_study(str(write(tmp_path, "parent.yaml", PARENT)))
    child = load_study(str(write(tmp_path, "child.yaml", """\
        name: child
        extends: parent.yaml
        base: {train: {lr: 0.01}}
        seeds: [2, 3, 4]
        """)))
    assert child.name == "child" and child.seeds == [2, 3, 4] and child._source == str(tmp_path / "child.yaml")
    assert child.description == "the study the others extend"
    mine, theirs = expand(child), expand(parent)
    assert [(t.variant, t.seed) for t in mine] == [(v, s) for v in ("FoX", "FoX - QK-norm", "FoX - KV-shift") for s in (2, 3, 4)]
    # Each trial is the parent's trial of its variant with train.lr changed (and its own seed): the
    # rest of `train` (batch_size) and the whole model are kept.
    first = {t.variant: t.spec.model_dump(mode="json") for t in theirs if t.seed == 0}
    for t in mine:
        expected = first[t.variant]
        assert expected["train"]["lr"] == 0.003 and t.spec.train.lr == 0.01 and t.spec.train.batch_size == 4
        expected = {**expected, "train": {**expected["train"], "lr": 0.01}, "seed": t.seed}
        assert t.spec_hash == TrialSpec.model_validate(expected).spec_hash(), t.row
    # Extending with only a new name gives the very same trials.
    same = load_study(str(write(tmp_path, "same.yaml", "name: same\nextends: parent.yaml\n")))
    assert [t.spec_hash for t in expand(same)] == [t.spec_hash for t in theirs]


def test_mappings_merge_a_kind_of_another_kind_and_lists_replace_whole(tmp_path):
    write(tmp_path, "parent.yaml", PARENT)
    child = load_study(str(write(tmp_path, "child.yaml", """\
        name: child
        extends: parent.yaml
        base:
          model: {n_layers: 2, attention: {qk_norm: none}}
          eval: {length_multiples: [4]}
        design:
          kind: variants
          variants:
            - {name: a}
            - {name: b, set: {train.lr: 0.01}}
        """)))
    trials = expand(child)
    model = trials[0].spec.model
    assert (model.n_layers, model.d_model, model.n_heads, model.vocab_size) == (2, 32, 2, 256)
    assert model.attention.qk_norm.kind == "none" and model.attention.kv_shift.kind == "kv"
    assert model.attention.forget_gate.kind == "data_dependent" and model.attention.forget_gate.bias_init == 1.0
    assert trials[0].spec.eval.length_multiples == [4]
    # The ablation's base_name and changes are gone with it (merged, they would be refused as extra keys).
    assert child.design.kind == "variants" and [t.variant for t in trials] == ["a", "a", "b", "b"]

    # A slot of another kind replaces the slot whole (bias_init is not a fixed gate's option);
    # one of the same kind merges into it (bias_init kept).
    write(tmp_path, "fixed.yaml", """\
        name: fixed
        extends: parent.yaml
        base: {model: {attention: {forget_gate: {kind: fixed, decay_time_max: 64}}}}
        """)
    gate = expand(load_study(str(tmp_path / "fixed.yaml")))[0].spec.model.attention.forget_gate
    assert gate.kind == "fixed" and gate.decay_time_max == 64
    write(tmp_path, "scaled.yaml", """\
        name: scaled
        extends: parent.yaml
        base: {model: {attention: {forget_gate: {kind: data_dependent, lr_scale: 2.0}}}}
        """)
    gate = expand(load_study(str(tmp_path / "scaled.yaml")))[0].spec.model.attention.forget_gate
    assert (gate.kind, gate.bias_init, gate.lr_scale) == ("data_dependent", 1.0, 2.0)

    # A design of the same kind merges; its list of rows replaces the parent's whole.
    write(tmp_path, "one_change.yaml", """\
        name: one change
        extends: parent.yaml
        design: {changes: [{name: no gate, set: {model.attention.forget_gate: none}}]}
        """)
    assert [t.variant for t in expand(load_study(str(tmp_path / "one_change.yaml")))] == ["FoX", "FoX", "no gate", "no gate"]


def test_the_merge_itself():
    parent = {"a": {"b": 1, "c": [1, 2], "d": {"kind": "x", "e": 1}}, "f": 1}
    child = {"a": {"c": [3], "d": {"kind": "y"}}, "g": 2}
    assert merge_extended(parent, child) == {"a": {"b": 1, "c": [3], "d": {"kind": "y"}}, "f": 1, "g": 2}
    assert merge_extended(parent, {"a": {"d": {"kind": "x", "h": 2}}})["a"]["d"] == {"kind": "x", "e": 1, "h": 2}
    assert merge_extended(parent, {"a": 5}) == {"a": 5, "f": 1}  # a scalar replaces a mapping
    assert parent == {"a": {"b": 1, "c": [1, 2], "d": {"kind": "x", "e": 1}}, "f": 1}  # neither is changed


def test_a_chain_resolves_each_path_from_the_folder_of_its_file(tmp_path):
    write(tmp_path, "c.yaml", PARENT)
    write(tmp_path, "sub/b.yaml", "name: b\nextends: ../c.yaml\nseeds: [5]\n")
    a = load_study(str(write(tmp_path, "a.yaml", "name: a\nextends: sub/b.yaml\nbase: {train: {lr: 0.02}}\n")))
    trials = expand(a)
    assert a.name == "a" and {t.seed for t in trials} == {5} and len(trials) == 3
    assert {t.spec.train.lr for t in trials} == {0.02} and trials[0].spec.train.batch_size == 4


def test_a_circle_is_refused_naming_its_files(tmp_path):
    write(tmp_path, "a.yaml", "name: a\nextends: b.yaml\n")
    write(tmp_path, "b.yaml", "name: b\nextends: a.yaml\n")
    message = refusal(tmp_path / "a.yaml")
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert message.startswith(f"{b}:2:1: extends: a circle of files, {a} -> {b} -> {a}"), message
    write(tmp_path, "self.yaml", "name: self\nextends: ./self.yaml\n")
    assert "a circle of files" in refusal(tmp_path / "self.yaml")


def test_a_missing_file_is_refused_naming_the_path_looked_at(tmp_path):
    child = write(tmp_path, "sub/child.yaml", "name: child\nextends: parent.yaml\n")
    write(tmp_path, "parent.yaml", PARENT)  # beside the caller's folder, not the file's: not found
    message = refusal(child)
    assert message.startswith(f"{child}:2:1: extends: 'parent.yaml': no such file (looked at {tmp_path / 'sub' / 'parent.yaml'})")
    assert "relative to the folder of the file that says it" in message and "\n" not in message


def test_an_extending_file_gives_its_own_name(tmp_path):
    write(tmp_path, "parent.yaml", PARENT)
    child = write(tmp_path, "child.yaml", "extends: parent.yaml\nseeds: [7]\n")
    message = refusal(child)
    assert message.startswith(f"{child}: name: a study that extends another gives its own name"), message


@pytest.mark.parametrize("value", ["3", "parent.json", "[parent.yaml]", "''"])
def test_extends_names_a_yaml_file(tmp_path, value):
    write(tmp_path, "parent.yaml", PARENT)
    child = write(tmp_path, "child.yaml", f"name: child\nextends: {value}\n")
    message = refusal(child)
    assert message.startswith(f"{child}:2:1: extends: the path of another study file (.yaml or .yml), relative to "
                              "the folder of the file that says it, got "), message
    assert message.endswith(f"got {read_yaml(child)['extends']!r}")


def test_the_extended_file_is_a_study_file(tmp_path):
    trial = write(tmp_path, "trial.yaml", "model: {preset: fox_pro}\ntrain: {tokens: 1000}\n")
    message = refusal(write(tmp_path, "a.yaml", "name: a\nextends: trial.yaml\n"))
    assert message.startswith(f"{tmp_path / 'a.yaml'}:2:1: extends: {trial}: a trial file (model, data, train, eval), "
                              "not a study"), message
    listed = write(tmp_path, "list.yaml", "- 1\n- 2\n")
    message = refusal(write(tmp_path, "b.yaml", "name: b\nextends: list.yaml\n"))
    assert message.startswith(f"{tmp_path / 'b.yaml'}:2:1: extends: {listed} is not a study file (a list;"), message
    write(tmp_path, "model.yaml", "preset: fox_pro\nd_model: 64\n")
    assert "model.yaml is not a study file (none of its keys (preset, d_model)" in \
        refusal(write(tmp_path, "c.yaml", "name: c\nextends: model.yaml\n"))


def test_errors_of_the_merged_study_name_the_extending_file(tmp_path):
    write(tmp_path, "parent.yaml", PARENT)
    child = write(tmp_path, "child.yaml", "name: child\nextends: parent.yaml\nseed: [1]\n")
    message = refusal(child)
    assert message.startswith(f"{child}: 1 problem") and "seed: Extra inputs are not permitted" in message


def test_a_file_without_extends_keeps_its_spec_hashes():
    path = str(ROOT / "studies" / "quickstart.yaml")
    loaded = expand(load_study(path))
    direct = expand(validate(StudySpec, read_yaml(path), path))
    assert len(loaded) == 6 and [(t.row, t.seed, t.spec_hash) for t in loaded] == [(t.row, t.seed, t.spec_hash) for t in direct]




def test_wb_run_reads_an_extending_file(tmp_path):
    write(tmp_path, "parent.yaml", PARENT)
    child = write(tmp_path, "child.yaml", "name: child\nextends: parent.yaml\nseeds: [3]\n")
    out = wb("run", child, "--dry-run", "--workdir", tmp_path / "w")
    assert out.returncode == 0, out.stderr
    assert "study 'child': 3 trials" in out.stdout
    rows = [re.match(r"(.+?) {2,}(\d+) +([0-9a-f]{16}) ", line) for line in out.stdout.splitlines()]
    assert [row.group(1, 2) for row in rows if row] == [("FoX", "3"), ("FoX - QK-norm", "3"), ("FoX - KV-shift", "3")], out.stdout
    bad = write(tmp_path, "bad.yaml", "name: bad\nextends: nowhere.yaml\n")
    out = wb("run", bad, "--workdir", tmp_path / "w2")
    assert out.returncode == 2 and f"{bad}:2:1: extends: 'nowhere.yaml': no such file (looked at {tmp_path / 'nowhere.yaml'})" \
        in out.stderr and not (tmp_path / "w2").exists(), out.stderr

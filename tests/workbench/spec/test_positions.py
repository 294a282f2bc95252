"""A study, trial or model file's errors name the line and column where the field is written
(`path:line:column: field: ...`, as compilers do), a key written twice is refused in one sentence,
and what the reader hands the spec classes is plain data."""
import textwrap
from pathlib import Path

import pytest

from foxwb.workbench.spec.errors import SpecError, read_located, read_yaml, validate
from foxwb.workbench.spec.study import expand, load_study
from foxwb.workbench.spec.trial import TrialSpec

STUDY = """\
name: s
base:
  model: {preset: fox_pro, vocab_size: 256, d_model: 32, n_layers: 1, n_heads: 2}
  data: {kind: builtin, context: 32}
  train:
    lr: 3e-4
    batch_size: 4
design:
  kind: ablation
  changes:
    - name: no QK-norm
      set: {model.attention.qk_norm: none}
seeds: [0, 1]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(SpecError) as e:
        expand(load_study(str(path)))
    return str(e.value)


def test_a_field_of_a_study_file_is_named_with_its_line_and_column(tmp_path):
    path = write(tmp_path, "s.yaml", STUDY.replace("    batch_size: 4", "    batch_size: 0"))
    message = refusal(path)
    assert message == (f"{path}:2:1: base: 1 problem\n"
                       f"  {path}:7:5: train.batch_size: Input should be greater than 0 (got 0)"), message
    # A field of the study itself, and a field a section's validator names (design.changes[0].seeds).
    seeds = write(tmp_path, "t.yaml", STUDY.replace("[0, 1]", "[]"))
    assert f"  {seeds}:13:1: seeds: no seeds listed" in refusal(seeds)
    own = STUDY.replace("      set: {model", "      seeds: [0]\n      set: {model")
    assert f"  {path.parent / 'u.yaml'}:12:7: design.changes[0].seeds (no QK-norm): a row runs seeds of its own only" \
        in refusal(write(tmp_path, "u.yaml", own))
    # An error of a row's edits names where the row's edits are written.
    bad = STUDY.replace("qk_norm: none", "qk_nrom: none")
    assert refusal(write(tmp_path, "v.yaml", bad)).startswith(
        f"{tmp_path / 'v.yaml'}:12:7: design.changes[0].set (row no QK-norm): 'model.attention.qk_nrom': ")


def test_a_field_of_the_extended_file_is_named_where_that_file_writes_it(tmp_path):
    parent = write(tmp_path, "parent.yaml", STUDY.replace("    batch_size: 4", "    batch_size: -1"))
    child = write(tmp_path, "child.yaml", "name: child\nextends: parent.yaml\nbase: {train: {lr: 0.01}}\n")
    message = refusal(child)
    assert f"  {parent}:7:5: train.batch_size: Input should be greater than 0" in message, message
    # The child's own field is named in the child.
    child.write_text("name: child\nextends: parent.yaml\nbase: {train: {lr: -1, batch_size: 4}}\n")
    assert f"  {child}:3:16: train.lr: Input should be greater than 0" in refusal(child)
    # A design the child replaces whole (another kind) keeps none of the parent's positions.
    child.write_text("name: child\nextends: parent.yaml\nbase: {train: {batch_size: 4}}\n"
                     "design: {kind: variants, variants: [{name: a, seeds: []}]}\n")
    assert f"  {child}:4:47: design.variants[0].seeds (a): no seeds listed" in refusal(child)


def test_a_trial_file_read_by_wb_train_names_the_line(tmp_path):
    path = write(tmp_path, "t.yaml", "model: {preset: fox_pro}\ntrain:\n  tokens: 1000\n  lr: -1\n")
    with pytest.raises(SpecError) as e:
        validate(TrialSpec, read_yaml(str(path)), str(path))
    assert str(e.value) == f"{path}: 1 problem\n  {path}:4:3: train.lr: Input should be greater than 0 (got -1)"


def test_a_key_written_twice_is_one_sentence_naming_the_key_line_and_column(tmp_path):
    path = write(tmp_path, "s.yaml", STUDY + "design: {kind: grid}\n")
    with pytest.raises(SpecError) as e:
        read_yaml(path)
    assert str(e.value) == (f"{path}:14:1: key 'design' is written twice in one mapping (first at line 8); "
                            "YAML would keep the last silently: keep one")
    nested = write(tmp_path, "n.yaml", "name: s\nbase:\n  train: {lr: 0.1, batch_size: 4, lr: 0.2}\n")
    with pytest.raises(SpecError, match=r"n\.yaml:3:35: key 'lr' is written twice in one mapping \(first at line 3\)"):
        read_yaml(nested)


def test_malformed_yaml_and_tags_are_refused_with_their_line_and_column(tmp_path):
    path = write(tmp_path, "m.yaml", "name: x\ndesign: {kind: ablation\n")
    with pytest.raises(SpecError) as e:
        read_yaml(path)
    assert str(e.value).startswith(f"{path}:3:1: malformed YAML: expected ',' or '}}'"), str(e.value)
    assert "(while parsing a flow mapping at line 2, column 9)" in str(e.value)
    tagged = write(tmp_path, "t.yaml", "name: x\nbase: !!python/object:os.system {}\n")
    with pytest.raises(SpecError, match=r"t\.yaml:2:1: base: the YAML tag tag:yaml.org,2002:python/object:os.system "
                                        r"is not read here"):
        read_yaml(tagged)
    with pytest.raises(SpecError, match="the file is empty"):
        read_yaml(write(tmp_path, "e.yaml", "# nothing yet\n"))


def test_the_reader_hands_plain_data_and_reads_numbers_as_numbers(tmp_path):
    path = write(tmp_path, "p.yaml", """\
        lr: 3e-4
        tokens: 1_000_000
        compile: yes
        flag: true
        note: |
          two lines
        text: !!str 12
        merged: &m {a: 1}
        over: {<<: *m, b: 2}
        list: [1, 2.5, null]
        """)
    data, positions = read_located(path)
    assert data == {"lr": 0.0003, "tokens": 1_000_000, "compile": "yes", "flag": True, "note": "two lines\n", "text": "12",
                    "merged": {"a": 1}, "over": {"a": 1, "b": 2}, "list": [1, 2.5, None]}

    def types(value):
        if isinstance(value, dict):
            return {type(value)} | {t for k, v in value.items() for t in types(k) | types(v)}
        if isinstance(value, list):
            return {type(value)} | {t for v in value for t in types(v)}
        return {type(value)}

    assert types(data) <= {dict, list, str, int, float, bool, type(None)}, types(data)
    assert positions[("list", 1)] == f"{path}:10:11" and positions[("over", "b")] == f"{path}:9:16"
    # `yes` is a string in YAML 1.2; a boolean field still reads it as true, and 3e-4 is the number.
    trial = TrialSpec.model_validate({"train": {"lr": data["lr"], "compile": data["compile"]}})
    assert trial.train.lr == 3e-4 and trial.train.compile is True

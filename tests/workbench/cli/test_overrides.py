"""`--set PATH=VALUE` (docs/cli.md, "`--set PATH=VALUE`: a one-off edit"): the file's data edited before it
is validated, so a run with --set is the run of the file edited so: the same spec hashes, the same
recorded spec; what the edit gets wrong is refused as a field of the file would be, naming the --set."""
import json
import re
from pathlib import Path

import yaml

from foxwb.workbench.spec.trial import load_trial
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = (ROOT / "studies/quickstart.yaml").read_text()
# A dry run's trial line: variant, seed, spec hash, ...
TRIAL_LINE = re.compile(r"^.+? +\d+  ([0-9a-f]{16})  ", re.M)


def study(tmp_path: Path, name: str, old: str = "", new: str = "") -> Path:
    """The quickstart study with ``old`` edited to ``new`` in its text, as a user edits the file."""
    assert old in QUICKSTART
    path = tmp_path / name
    path.write_text(QUICKSTART.replace(old, new, 1))
    return path


def hashes(path: Path, *flags) -> list[str]:
    out = wb("run", path, "--dry-run", "--workdir", path.parent / "wb-runs", *flags)
    assert out.returncode == 0, out.stderr[-2000:]
    found = TRIAL_LINE.findall(out.stdout)
    assert len(found) == 6, out.stdout
    return found


def test_a_set_is_the_same_edit_of_the_file_with_the_same_spec_hashes(tmp_path):
    as_written = study(tmp_path, "as_written.yaml")
    edited = study(tmp_path, "edited.yaml", "lr: 0.003", "lr: 0.001")
    assert hashes(edited) != hashes(as_written)
    # In a study file train.lr is the base trial's.
    assert hashes(as_written, "--set", "train.lr=0.001") == hashes(edited)
    # Applied in order, the last wins; 1e-3 is a number, as in the file.
    assert hashes(as_written, "--set", "base.train.lr=0.5", "--set", "train.lr=1e-3") == hashes(edited)
    # A key the file does not write is added, as an edit adding it; a list's item is its index, and
    # a dotted key of a change's `set` is matched whole.
    added = study(tmp_path, "added.yaml", "{model.attention.kv_shift: none}",
                  "{model.attention.kv_shift: none, model.attention.qk_norm: none}")
    assert hashes(as_written, "--set", "design.changes[1].set.model.attention.qk_norm=none") == hashes(added)
    added = study(tmp_path, "added.yaml", "    cpu_threads: 1\n", "    cpu_threads: 1\n    weight_decay: 0.05\n")
    assert hashes(as_written, "--set", "train.weight_decay=0.05") == hashes(added)


def test_a_bad_set_is_refused_naming_it_and_what_is_allowed(tmp_path):
    path = study(tmp_path, "s.yaml")

    def refused(*flags) -> str:
        out = wb("run", path, "--dry-run", "--workdir", tmp_path / "wb-runs", *flags)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
        return out.stderr

    assert "--set train.lrr=0.001: train.lrr: Extra inputs are not permitted (got 0.001); did you mean 'lr'?" \
        in refused("--set", "train.lrr=0.001")
    assert "--set train.lr=abc: train.lr: Input should be a valid number" in refused("--set", "train.lr=abc")
    assert "--set seeds=abc: seeds: 'abc' is not a seed or a range of seeds" in refused("--set", "seeds=abc")
    assert "--set design.changes.5.name=x: design.changes is a list of 2 items: '5' is not one of them; give an " \
           "item's index, 0 to 1" in refused("--set", "design.changes.5.name=x")
    # Malformed: the parser refuses it, naming the flag, before the file is read.
    assert "argument --set: 'train.lr' has no '=': give PATH=VALUE" in refused("--set", "train.lr")
    assert "argument --set: '=3': the path before '=' is empty" in refused("--set", "=3")
    # A study's name is read from the store as it ran: nothing there for --set to edit.
    by_name = wb("results", "quickstart", "--set", "train.lr=0.001", "--workdir", tmp_path / "wb-runs")
    assert by_name.returncode == 2 and "'quickstart' is a study's name" in by_name.stderr, by_name.stderr


def test_wb_info_of_a_file_with_a_set_counts_the_edited_model(tmp_path):
    def params(*args) -> str:
        out = wb("info", *args)
        assert out.returncode == 0, out.stderr
        return re.search(r"params +total ([\d,]+)", out.stdout).group(1)

    spec = yaml.safe_load((ROOT / "studies/trial_tiny.yaml").read_text())
    spec["model"]["n_layers"] = 3
    edited = tmp_path / "three_layers.yaml"
    edited.write_text(yaml.safe_dump(spec))
    two = params(ROOT / "studies/trial_tiny.yaml")
    three = params(ROOT / "studies/trial_tiny.yaml", "--set", "model.n_layers=3")
    assert three != two and three == params(edited)
    # A preset takes --set too: the preset at that size.
    assert params("fox_pro", "--set", "n_layers=3", "--set", "vocab_size=256", "--set", "d_model=128",
                  "--set", "n_heads=4") != params("fox_pro")
    slot = wb("info", "forget_gate", "--set", "kind=fixed")
    assert slot.returncode == 2 and "forget_gate is a slot" in slot.stderr


def test_wb_train_with_a_set_trains_and_records_the_edited_trial(tmp_path):
    spec = yaml.safe_load((ROOT / "studies/trial_tiny.yaml").read_text())
    spec["model"].update(d_model=32, n_layers=1)
    spec["data"]["max_bytes"] = 1_000_000
    spec["train"].update(tokens=2048, batch_size=4, warmup_tokens=0, eval_every_tokens=None,
                         checkpoint_every_tokens=None, cpu_threads=1)
    spec["eval"] = {"sequences": 2, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024}
    trial = tmp_path / "trial.yaml"
    trial.write_text(yaml.safe_dump(spec))
    out = wb("train", trial, "--out", tmp_path / "out", "--set", "train.lr=0.0007", "--set", "model.n_heads=2",
             timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    spec["train"]["lr"], spec["model"]["n_heads"] = 0.0007, 2
    trial.write_text(yaml.safe_dump(spec))
    assert result["spec"]["train"]["lr"] == 0.0007 and result["spec"]["model"]["n_heads"] == 2
    assert result["spec_hash"] == load_trial(str(trial)).spec_hash()

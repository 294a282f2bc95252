"""Every study and trial file the project ships parses and expands: a user's first `wb run` of one
must not meet a validation error the project could have caught."""
from pathlib import Path

import pytest

from workbench.errors import read_yaml, validate
from workbench.specs import TrialSpec
from workbench.study import StudySpec, expand

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "studies").rglob("*.yaml"))


def test_the_project_ships_studies():
    assert "studies/quickstart.yaml" in FILES and len(FILES) >= 5


@pytest.mark.parametrize("name", FILES)
def test_a_shipped_file_validates(name):
    data = read_yaml(str(ROOT / name))
    if "design" in data:
        trials = expand(validate(StudySpec, data, name))
        assert trials and len({t.spec_hash for t in trials}) == len(trials)
    else:
        validate(TrialSpec, data, name)


@pytest.mark.parametrize("path,trials", [("studies/scaling_fox_vs_transformer.yaml", 20), ("studies/context_length.yaml", 24)])
def test_dry_run_lists_each_trial_with_parameters_tokens_and_flops(path, trials, tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "run", path, "--dry-run", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split()[-5:] == ["params", "tokens", "train", "FLOPs", "status"]
    rows = [line for line in lines[2:] if line.endswith("to run")]
    assert len(rows) == trials and all(float(r.split()[-3]) > 0 for r in rows)

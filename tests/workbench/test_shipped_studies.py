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

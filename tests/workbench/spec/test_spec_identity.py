"""Spec hashes are trial identities: a tracking store written by earlier code resumes with nothing
to rerun only if the same spec still hashes the same. The data file holds every trial of the
studies shipped at commit 6d77b50 (resolved spec and the hash that code computed for it); each
must validate and hash as it did, whatever fields have been added since with their defaults."""
import json
from pathlib import Path

import pytest

from foxwb.workbench.spec.trial import TrialSpec

RECORDED = [json.loads(line) for line in (Path(__file__).parent / "data" / "spec_hashes_6d77b50.jsonl").open()]


def test_the_record_covers_every_kind_of_trial_shipped():
    assert len(RECORDED) >= 70
    kinds = {r["spec"]["model"]["attention"]["forget_gate"]["kind"] for r in RECORDED}
    assert {"data_dependent", "none"} <= kinds
    assert any(r["spec"]["model"]["attention"].get("log_pruning_tolerance") is not None for r in RECORDED)
    assert any(r["spec"]["train"]["compile"] for r in RECORDED)


@pytest.mark.parametrize("record", RECORDED, ids=[r["source"] for r in RECORDED])
def test_a_recorded_trial_keeps_its_spec_hash(record):
    assert TrialSpec.model_validate(record["spec"]).spec_hash() == record["spec_hash"]

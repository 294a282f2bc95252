"""Spec hashes are trial identities: a tracking store written by earlier code resumes with nothing
to rerun only if the same spec still hashes the same. The data file holds every trial of the
studies shipped at commit 6d77b50 (resolved spec and the hash that code computed for it); each
must validate and hash as it did, whatever fields have been added since with their defaults.

One default has changed since: the data-dependent forget gate's bias at init (0 then, 4 now,
docs/stability.md). A recorded spec says nothing of it, so it is read as what it ran: bias 0."""
import json
from pathlib import Path

import pytest

from workbench.specs import TrialSpec

RECORDED = [json.loads(line) for line in (Path(__file__).parent / "data" / "spec_hashes_6d77b50.jsonl").open()]


def test_the_record_covers_every_kind_of_trial_shipped():
    assert len(RECORDED) >= 70
    kinds = {r["spec"]["model"]["attention"]["forget_gate"]["kind"] for r in RECORDED}
    assert {"data_dependent", "none"} <= kinds
    assert any(r["spec"]["model"]["attention"].get("log_pruning_tolerance") is not None for r in RECORDED)
    assert any(r["spec"]["train"]["compile"] for r in RECORDED)


def as_it_ran(spec: dict) -> dict:
    """The recorded spec with the forget gate's bias at init as its code had it (0)."""
    spec = json.loads(json.dumps(spec))
    gate = spec["model"]["attention"]["forget_gate"]
    if gate["kind"] == "data_dependent":
        gate.setdefault("bias_init", 0.0)
    return spec


@pytest.mark.parametrize("record", RECORDED, ids=[r["source"] for r in RECORDED])
def test_a_recorded_trial_keeps_its_spec_hash(record):
    assert TrialSpec.model_validate(as_it_ran(record["spec"])).spec_hash() == record["spec_hash"]


def test_the_new_default_gate_bias_is_a_new_identity():
    """Read with today's default (bias 4), a recorded FoX trial is another trial: it must not find
    the old run's result under its hash."""
    fox = next(r for r in RECORDED if r["spec"]["model"]["attention"]["forget_gate"]["kind"] == "data_dependent")
    assert TrialSpec.model_validate(fox["spec"]).spec_hash() != fox["spec_hash"]

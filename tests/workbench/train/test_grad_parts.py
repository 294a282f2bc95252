"""Gradient norms by part (train.grad_norm_parts): recorded per step, adding up to the step's
gradient norm, changing neither the training nor the trial's identity."""
import math
import re

import pytest
import torch
import yaml
from pydantic import ValidationError

from foxwb.workbench.train.grad_parts import part_of
from foxwb.workbench.model import build_model
from foxwb.workbench.data.load import load_data
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.loop import train
from foxwb.workbench.train.trial import run_trial

from tests.workbench.drivers import ROOT


def tiny(grad_norm_parts: bool) -> TrialSpec:
    spec = yaml.safe_load((ROOT / "studies/trial_tiny.yaml").read_text())
    # One thread, not the file's two: run_trial sets the pytest worker's torch threads, and two
    # beside other work on 2 cores wait on each other (tests/conftest.py's _train_tiny).
    spec["train"].update(tokens=16 * 128 * 6, warmup_tokens=16 * 128, eval_every_tokens=None,
                         checkpoint_every_tokens=None, grad_norm_parts=grad_norm_parts, cpu_threads=1)
    spec["data"]["max_bytes"] = 300_000
    # The parts are a training record: the trial's closing evaluation is kept small (the default
    # test set took most of the trial's time).
    spec["eval"].update(sequences=2, length_multiples=[1], test_tokens=4096, min_test_tokens=1024)
    return TrialSpec.model_validate(spec)


def trained(spec: TrialSpec) -> list[dict]:
    torch.manual_seed(spec.seed)
    model = build_model(spec.model)
    data = load_data(spec.data, spec.model.vocab_size, spec.seed)
    return train(spec, model, data, device=torch.device("cpu"))["history"]


def test_each_steps_parts_add_up_to_its_gradient_norm_and_change_nothing_else():
    spec = tiny(True)
    assert spec.spec_hash() == tiny(False).spec_hash()
    with_parts, without = trained(spec), trained(tiny(False))
    assert [h["train_loss"] for h in with_parts] == [h["train_loss"] for h in without]
    for h in with_parts:
        parts = h["grad_norm_parts"]
        assert "blocks.*.attn.forget_gate.proj.weight" in parts, sorted(parts)
        assert not any(re.search(r"\.\d+\.", p) for p in parts), "block indices are merged"
        assert math.sqrt(sum(v * v for v in parts.values())) == pytest.approx(h["grad_norm"], rel=1e-4)
    assert all("grad_norm_parts" not in h for h in without)


def test_part_names_merge_blocks_and_drop_wrappers():
    assert part_of("module.blocks.11.attn.q.weight") == "blocks.*.attn.q.weight"
    assert part_of("_orig_mod.embed.weight") == "embed.weight"


def test_parts_under_fsdp_are_refused_naming_the_field():
    spec = yaml.safe_load((ROOT / "studies/trial_tiny.yaml").read_text())
    spec["train"].update(grad_norm_parts=True, parallel="fsdp")
    with pytest.raises(ValidationError, match="grad_norm_parts.*parallel=ddp"):
        TrialSpec.model_validate(spec)


def test_a_trials_result_carries_the_parts_per_step_and_names_its_spike_parts(tmp_path):
    spec = tiny(True)
    result = run_trial(spec, tmp_path / "trial")
    columns = result["grad_norm_parts"]
    assert len(columns["tokens"]) == result["steps"] == 6
    assert "blocks.*.attn.forget_gate.proj.weight" in columns
    assert all(len(v) == 6 for v in columns.values())
    assert result["grad_spike_parts"] == []  # no step of 6 spiked
    plain = run_trial(tiny(False), tmp_path / "plain")
    assert "grad_norm_parts" not in plain and "grad_spike_parts" not in plain  # not recorded: not there

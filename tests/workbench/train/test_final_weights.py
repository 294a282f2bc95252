"""A trial keeps its final weights (train.keep_weights, on by default): the checkpoint at its last
step, what `wb eval` and `wb export` read (workbench/train/finished.py), whether or not a periodic
checkpoint fell on that step; with keep_weights off a trial without periodic checkpoints keeps none,
and reading it back says why."""
from pathlib import Path

import pytest
import torch

from foxwb.workbench.data.load import load_data
from foxwb.workbench.execution import Execution
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.finished import read_finished
from foxwb.workbench.train.loop import read_checkpoint, train
from foxwb.workbench.train.trial import write_json

TINY_MODEL = {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2}


class Quiet:
    def report(self, tokens, metrics):
        pass


def trained(folder: Path, **train_fields) -> tuple[TrialSpec, torch.nn.Module, dict]:
    """Train a tiny trial in this process, its checkpoint path in ``folder``; 6 steps of 128 tokens."""
    spec = TrialSpec.model_validate({
        "model": TINY_MODEL, "data": {"kind": "builtin", "context": 32, "max_bytes": 200_000},
        "train": {"tokens": 768, "batch_size": 4, "cpu_threads": 1, **train_fields}})
    torch.manual_seed(0)
    model = build_model(spec.model, Execution.of_trial(spec.train))
    out = train(spec, model, load_data(spec.data, 256, 0), Quiet(), folder / "checkpoint.pt", torch.device("cpu"),
                Execution.of_trial(spec.train))
    return spec, model, out


@pytest.mark.parametrize("every", [None, 512], ids=["no periodic checkpoint", "period not dividing the tokens"])
def test_the_final_weights_are_kept_at_the_last_step(tmp_path, every):
    spec, model, out = trained(tmp_path, checkpoint_every_tokens=every)
    ckpt = read_checkpoint(tmp_path / "checkpoint.pt", spec.spec_hash())
    assert ckpt["step"] == out["steps"] == 6 and ckpt["tokens"] == 768
    assert ckpt["optimizer"] == {}  # a finished training's checkpoint is never resumed: the model alone
    assert all(torch.equal(ckpt["model"][k], v) for k, v in model.state_dict().items())
    # A second run of the finished trial trains it from its first step, as before (read_checkpoint: None).
    assert read_checkpoint(tmp_path / "checkpoint.pt", spec.spec_hash(), total_steps=6) is None
    write_json(tmp_path / "result.json", {"spec": spec.model_dump(mode="json"), "spec_hash": spec.spec_hash(),
                                          "steps": out["steps"]})
    finished = read_finished(tmp_path)
    assert finished.trial_spec() == spec and finished.weights.keys() == model.state_dict().keys()


def test_keep_weights_is_not_part_of_the_identity_and_off_keeps_none(tmp_path):
    spec, _, out = trained(tmp_path, keep_weights=False)
    assert spec.spec_hash() == TrialSpec.model_validate({**spec.model_dump(), "train": {
        **spec.train.model_dump(), "keep_weights": True}}).spec_hash()
    assert not (tmp_path / "checkpoint.pt").exists()
    write_json(tmp_path / "result.json", {"spec": spec.model_dump(mode="json"), "spec_hash": spec.spec_hash(),
                                          "steps": out["steps"]})
    with pytest.raises(SpecError, match="no checkpoint.pt, so its final weights were not kept: train.keep_weights was off"):
        read_finished(tmp_path)

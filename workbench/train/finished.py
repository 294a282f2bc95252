"""A finished trial's folder read back (``wb train --out``'s, or a study's ``trials/SPEC_HASH``): its
result.json with the resolved spec, and the final weights from its checkpoint
(workbench/train/layout.py), each checked so that what is evaluated or handed on is the model the
trial's numbers describe. `wb eval` and `wb export` both read a trial through it."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from foxwb.workbench.spec.errors import SpecError, validate
from foxwb.workbench.spec.trial import ModelSpec, TrialSpec
from foxwb.workbench.train import layout
from foxwb.workbench.train.loop import TrainError, read_checkpoint

RESULT = "result.json"


@dataclass(frozen=True)
class FinishedTrial:
    """``weights``: the model's state dict (tensors on the CPU, as trained); ``result``: result.json."""

    folder: Path
    model: ModelSpec
    weights: dict[str, torch.Tensor]
    result: dict

    def trial_spec(self) -> TrialSpec:
        """The whole resolved spec (data, train, eval beside the model)."""
        return validate(TrialSpec, self.result["spec"], f"{self.folder / RESULT} (spec)")


def read_finished(folder: Path, field: str = "TRIAL") -> FinishedTrial:
    """The trial at ``folder``; ``field`` names the argument in the errors."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SpecError(f"{field} {folder}: not a folder; give a trial folder as `wb train --out DIR` writes it, or a "
                        f"study's trials/SPEC_HASH under its --workdir ({RESULT}, {layout.CHECKPOINT})")
    result = _read_result(folder, field)
    # A kind not registered in this Python (a plug-in not installed here) is named with its slot by
    # the validation's own sentence.
    model = validate(ModelSpec, result["spec"].get("model"), f"{folder / RESULT} (spec.model)")
    return FinishedTrial(folder, model, _final_weights(folder, result, field), result)


def _read_result(folder: Path, field: str) -> dict:
    path = folder / RESULT
    if not path.is_file():
        raise SpecError(f"{field} {folder}: no {RESULT}, so not a finished trial (`wb train` writes it once the trial "
                        "has trained and been evaluated); give a finished trial's folder")
    try:
        result = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SpecError(f"{field} {path}: not JSON ({e}); a trial's {RESULT} is written whole or not at all") from None
    if not isinstance(result, dict) or not isinstance(result.get("spec"), dict) or "spec_hash" not in result:
        raise SpecError(f"{field} {path}: holds no resolved spec ('spec' and 'spec_hash'); not a trial's {RESULT}")
    return result


NOT_KEPT = ("train.keep_weights was off, or it trained before the workbench kept a trial's final weights; train it "
            "again with keep_weights on (the default)")


def _final_weights(folder: Path, result: dict, field: str) -> dict[str, torch.Tensor]:
    path = folder / layout.CHECKPOINT
    if not path.is_file():
        raise SpecError(f"{field} {folder}: no {layout.CHECKPOINT}, so its final weights were not kept: {NOT_KEPT}")
    try:
        ckpt = read_checkpoint(path, result["spec_hash"])
    except TrainError as e:  # another trial's checkpoint, or one holding more than tensors
        raise SpecError(f"{field}: {e}") from None
    steps = result.get("steps")
    if steps is not None and ckpt["step"] != steps:
        raise SpecError(f"{field} {path}: the checkpoint of step {ckpt['step']}, but the trial trained {steps} steps, "
                        f"so its final weights were not kept: {NOT_KEPT}")
    return ckpt["model"]

"""A finished trial's folder (``wb train --out``, or a study's ``trials/SPEC_HASH/``) opened for
evaluation: its resolved spec, its final weights, its tokenizer and held-out documents."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from foxwb.workbench.data.load import load_data
from foxwb.workbench.execution import Execution
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.finished import read_finished
from foxwb.workbench.train.loop import autocast_for, resolve_device


@dataclass
class OpenTrial:
    folder: Path
    spec: TrialSpec
    model: torch.nn.Module
    data: object  # DocumentData: its tokenizer, its test split
    device: torch.device
    autocast: object

    @property
    def spec_hash(self) -> str:
        return self.spec.spec_hash()


def open_trial(folder: Path, device: str | None = None) -> OpenTrial:
    """The trial at ``folder`` with its final weights, on ``device`` (default: the trial's own,
    train.device: CUDA where there is one, else the CPU)."""
    folder = Path(folder)
    finished = read_finished(folder)
    spec = finished.trial_spec()
    if spec.train.cpu_threads:
        torch.set_num_threads(spec.train.cpu_threads)
    dev = torch.device(device) if device and device != "auto" else resolve_device(spec.train)
    data = load_data(spec.data, spec.model.vocab_size, spec.seed)
    if getattr(data, "tokenizer", None) is None:
        raise SpecError(f"TRIAL {folder}: trained on token ids with no tokenizer (data.kind={spec.data.kind}); "
                        "lm-eval tasks are text: train on text (builtin, text, a table or dataset) to evaluate on them")
    model = build_model(spec.model, Execution())
    model.load_state_dict(finished.weights)
    return OpenTrial(folder, spec, model.to(dev).eval(), data, dev, autocast_for(spec.train, dev))

"""`wb export TRIAL --hf DIR`: a finished trial as a folder transformers loads
(``AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)``).

DIR gets ``model.safetensors`` (the final weights), ``config.json`` (the trial's whole ModelSpec,
the workbench's version, the plug-ins the model needs, ``auto_map``) and the two code files
beside this module. The model code builds the model with the workbench (docs/trials-and-data.md,
"Hand a trained model on"), so its logits are the workbench's. Everything is written to a
temporary folder beside DIR and renamed onto it: a refused or failed export leaves no DIR.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from foxwb.workbench.handoff import hf_import
from foxwb.workbench.handoff.portable import plugins_needed
from foxwb.workbench.train.finished import FinishedTrial, read_finished
from foxwb.workbench.spec.errors import SpecError

HERE = Path(__file__).resolve().parent
CODE_FILES = ("configuration_fox_workbench.py", "modeling_fox_workbench.py")
AUTO_MAP = {"AutoConfig": "configuration_fox_workbench.FoxWorkbenchConfig",
            "AutoModelForCausalLM": "modeling_fox_workbench.FoxWorkbenchForCausalLM"}
WEIGHTS = "model.safetensors"
PREFIX = "model."  # the wrapper's attribute holding the workbench's LM


def check_out_dir(out: Path, field: str = "--hf") -> None:
    if out.exists() and not out.is_dir():
        raise SpecError(f"{field} {out}: is a file; give a new or empty folder")
    if out.is_dir() and any(out.iterdir()):
        raise SpecError(f"{field} {out}: is not empty; give a new or empty folder (an export never writes over "
                        "files: remove them first)")


def export_hf(trial_dir: Path, out: Path) -> Path:
    """Export the finished trial in ``trial_dir`` into ``out`` (new or empty); returns ``out``."""
    out = Path(out)
    check_out_dir(out)
    hf_import.require_transformers()
    trial = read_finished(Path(trial_dir))
    plugins = plugins_needed(trial.model)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _write(trial, plugins, tmp)
        _readable(tmp)
        if out.is_dir():
            out.rmdir()  # empty (checked above); rename needs it gone
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _readable(folder: Path) -> None:
    """The modes a plain mkdir and write would give under the user's umask: the temporary folder is
    made private (0700), and an export is for other people to read."""
    mask = os.umask(0)
    os.umask(mask)
    folder.chmod(0o777 & ~mask)
    for path in folder.iterdir():
        path.chmod(0o666 & ~mask)


def _write(trial: FinishedTrial, plugins: dict, folder: Path) -> None:
    # The optional `eval` extra: imported once require_transformers has said whether it is there.
    from safetensors.torch import save_file

    from foxwb.workbench.handoff.configuration_fox_workbench import FoxWorkbenchConfig

    config = FoxWorkbenchConfig(
        model_spec=trial.model.model_dump(mode="json"), foxwb=_workbench_version(), plugins=plugins,
        trial=_trial_record(trial), tie_word_embeddings=trial.model.tie_embeddings,
        architectures=["FoxWorkbenchForCausalLM"], auto_map=AUTO_MAP)
    config.save_pretrained(folder)
    save_file(_weights(trial), str(folder / WEIGHTS), metadata={"format": "pt"})
    for name in CODE_FILES:
        shutil.copyfile(HERE / name, folder / name)


def _weights(trial: FinishedTrial) -> dict[str, torch.Tensor]:
    """The state dict under the wrapper's prefix; a tied head is left out (safetensors keeps no
    shared tensors) and tied again on load (config.tie_word_embeddings)."""
    weights = {PREFIX + k: v.contiguous() for k, v in trial.weights.items()}
    if trial.model.tie_embeddings:
        weights.pop(PREFIX + "head.weight", None)
    return weights


def _trial_record(trial: FinishedTrial) -> dict:
    r = trial.result
    keys = ("spec_hash", "steps", "train_tokens", "context", "test_loss", "test_ppl", "val_loss")
    return {**{k: r[k] for k in keys if k in r}, "trained_with": r.get("versions", {}),
            "tokenizer": r.get("spec", {}).get("data", {}).get("tokenizer")}


def _workbench_version() -> dict:
    """The workbench that made the export, which a loader installs to build the model."""
    # The trial module brings the data stage and telemetry; only the version needs them.
    from foxwb.workbench.train.trial import code_version, source_fingerprint

    try:
        dist = version("fox-workbench")
    except PackageNotFoundError:
        dist = "not installed as a distribution"
    return {"distribution": "fox-workbench", "version": dist, "commit": code_version(), "source": source_fingerprint()}

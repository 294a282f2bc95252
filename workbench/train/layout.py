"""What a study's workdir holds, named in one place: the tracking store (``mlflow.db``) and its
artifacts (``mlartifacts/``), one folder per trial (``trials/SPEC_HASH/``: checkpoint, metrics,
spec and result) and Ray Tune's own records (``ray/``). The engine and the commands reach them
through these functions, so the layout is written once."""
from __future__ import annotations

from pathlib import Path

CHECKPOINT = "checkpoint.pt"


def store(workdir: Path) -> Path:
    """The local tracking store, SQLite."""
    return Path(workdir) / "mlflow.db"


def artifacts(workdir: Path) -> Path:
    return Path(workdir) / "mlartifacts"


def trial_dir(workdir: Path, spec_hash: str) -> Path:
    """A trial's own folder: its checkpoint, metrics.jsonl, spec.json and result.json."""
    return Path(workdir) / "trials" / spec_hash


def ray_dir(workdir: Path) -> Path:
    return Path(workdir) / "ray"


def has_store(workdir: Path, tracking_uri: str | None) -> bool:
    """Whether there is a store to read: a tracking server named, or a local store in the workdir
    (reading never creates one)."""
    return tracking_uri is not None or store(workdir).exists()

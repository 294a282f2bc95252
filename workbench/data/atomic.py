"""Files written whole or not at all: ``write_atomically`` writes a temporary file beside its
place and renames it there, and a write that fails raises ``WriteError``, a sentence naming the file.

It lives in the data stage, the lowest one that writes files, so that every stage above it (the
English sets' build, the trial folder, checkpoints, evaluation items) shares the one writer.
"""
from __future__ import annotations

import os
from pathlib import Path


class WriteError(RuntimeError):
    """A file could not be written (disk full, read-only, size limit); the message names it."""


def write_atomically(path: Path, write) -> None:
    """``write(tmp)`` then rename onto ``path``: a reader sees the old file or the new one, and a
    write that fails (disk full, size limit, read-only) leaves the old one and no stray temporary."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        # Whatever stopped the write (Ctrl-C included) leaves no temporary behind.
        tmp.unlink(missing_ok=True)
        # torch.save reports a failed write as a RuntimeError ("unexpected pos", "iostream error").
        if not isinstance(e, (OSError, RuntimeError)):
            raise
        what = e.strerror if isinstance(e, OSError) and e.strerror else _disk_state(path)
        raise WriteError(f"could not write {path}: {what}; the previous version, if any, is kept") from None


def _disk_state(path: Path) -> str:
    """Why a write the OS gave no words for may have failed (torch.save's zip writer hides them)."""
    try:
        free = os.statvfs(path.parent)
        if free.f_bavail * free.f_frsize < 64 << 20:
            return "the disk is full"
    except OSError:
        pass
    return "the write failed (disk full, a file size limit, or the folder is not writable)"

"""One writer per output folder: ``wb train --out DIR`` holds an advisory lock on DIR itself while it
trains, so a second ``wb train`` into DIR is refused instead of interleaving its checkpoint and
metrics with the first's. The lock is on the folder (flock of its descriptor): nothing is written
into it, and the operating system releases it when its holder exits, however it exits (a killed
run leaves no stale lock)."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path


class FolderLock:
    """``with FolderLock(folder) as lock``: ``lock.held`` says whether this process holds the
    folder (False: another process does). The folder is made if missing."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.held = False
        self._fd: int | None = None

    def __enter__(self) -> "FolderLock":
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return self
        self._fd, self.held = fd, True
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd, self.held = None, False

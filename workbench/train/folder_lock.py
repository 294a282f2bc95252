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
    folder (False: another process does). The folder is made if missing, and ``remove_if_empty``
    takes back what was made for it."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.held = False
        self._fd: int | None = None
        self._made: list[Path] = []

    def __enter__(self) -> "FolderLock":
        missing = []
        for folder in (self.folder, *self.folder.parents):
            if folder.exists():
                break
            missing.append(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._made = missing
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

    def remove_if_empty(self) -> None:
        """Remove the folders this lock made (the folder, and its parents made for it), the deepest
        first, each only while it is empty: a trial that failed before writing a file leaves no empty
        folder behind, and a folder that was there before, or holds a file, stays."""
        for folder in self._made:
            try:
                folder.rmdir()
            except OSError:  # not empty (or no longer ours to remove): it and those above it stay
                return
        self._made = []

"""Faults of the environment (files, folders, ports, pipes, the tracking store) as one sentence.

The command line turns them into ``error: ...`` and a non-zero exit instead of a traceback; the
driver uses ``sentence`` for the reason a study stopped.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from workbench.errors import SpecError


class WriteError(RuntimeError):
    """A file could not be written (disk full, read-only, size limit); the message names it."""


def sentence(e: BaseException) -> str:
    """One line saying what went wrong: the OS's words and the file, or the database's."""
    orig = getattr(e, "orig", None)  # SQLAlchemy wraps the database's own error
    if isinstance(orig, BaseException):
        return sentence(orig)
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    text = lines[0] if lines else type(e).__name__
    # MLflow quotes SQLAlchemy's text: the database's message sits between its first parentheses.
    if text.startswith("(") and ")" in text and "Error" in text.split(")")[0]:
        text = text.split(")", 1)[1].strip()
    return text[:300]


def is_environment(e: BaseException) -> bool:
    """An error of the machine or the store rather than of the workbench's code."""
    module = type(e).__module__ or ""
    return isinstance(e, (OSError, WriteError)) or module.split(".")[0] in ("mlflow", "sqlalchemy", "sqlite3")


def _probe(folder: Path) -> bool:
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".wb-probe-")
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


def check_folder(path: Path, option: str, write: bool) -> None:
    """``path`` is a folder (or can become one) and, with ``write``, can be written."""
    if path.exists() and not path.is_dir():
        raise SpecError(f"{option} {path}: is a file, not a folder; give a folder (it is made if missing)")
    if not write:
        return
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not _probe(existing):
        raise SpecError(f"{option} {path}: cannot write there ({existing} is read-only or not ours)")


def check_store(workdir: Path) -> None:
    """The workdir's tracking store, where one exists, can be written."""
    db = workdir / "mlflow.db"
    if not db.exists():
        return
    try:
        with db.open("r+b"):
            pass
    except OSError as e:
        raise SpecError(f"the tracking store {db} cannot be written ({e.strerror}); "
                        "make it writable, or read it with wb results / wb dashboard") from None


def write_atomically(path: Path, write) -> None:
    """``write(tmp)`` then rename onto ``path``: a reader sees the old file or the new one, and a
    write that fails (disk full, size limit, read-only) leaves the old one and no stray temporary."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, RuntimeError) and "write" not in str(e).lower():
            raise
        what = e.strerror if isinstance(e, OSError) and e.strerror else sentence(e)
        raise WriteError(f"could not write {path}: {what}; the previous version, if any, is kept") from None

"""Faults of the environment (files, folders, ports, pipes, the tracking store) as one sentence.

The command line turns them into ``error: ...`` and a non-zero exit instead of a traceback; the
driver uses ``sentence`` for the reason a study stopped.
"""
from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from pathlib import Path

from foxwb.workbench.data.atomic import WriteError
from foxwb.workbench.train import layout
from foxwb.workbench.spec.errors import SpecError


def sentence(e: BaseException) -> str:
    """One line saying what went wrong: the OS's words and the file, or the database's."""
    chain = [e]
    while chain[-1].__context__ is not None and len(chain) < 8:
        chain.append(chain[-1].__context__)
    for c in chain:  # SQLAlchemy wraps the database's own error (MLflow wraps SQLAlchemy's)
        if isinstance(getattr(c, "orig", None), BaseException):
            return sentence(c.orig)
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    # MLflow's server quotes SQLAlchemy's text: "(sqlite3.OperationalError) attempt to write ..."
    quoted = re.search(r"\((?:sqlite3|pymysql|psycopg2?|MySQLdb)\.\w+\) ([^\n\[]+)", str(e))
    if quoted:
        return quoted.group(1).strip()
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return (lines[0] if lines else type(e).__name__)[:300]


def is_environment(e: BaseException) -> bool:
    """An error of the machine or the store rather than of the workbench's code."""
    module = type(e).__module__ or ""
    return isinstance(e, (OSError, WriteError)) or module.split(".")[0] in ("mlflow", "sqlalchemy", "sqlite3")


def silence_output() -> None:
    """Point stdout and stderr at /dev/null: their reader is gone (`| head` has read enough, the
    terminal closed), and every later line would fail as the first did."""
    null = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(null, stream.fileno())
        except (OSError, ValueError, AttributeError):  # a stream without a descriptor (a test's)
            pass
    os.close(null)


def quiet_store_logs() -> None:
    """MLflow logs every failed database write with its traceback before raising it; the
    workbench reports the raised error in a sentence."""
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


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
    db = layout.store(workdir)
    if not db.exists():
        return
    try:
        with db.open("r+b"):
            pass
    except OSError as e:
        raise SpecError(f"the tracking store {db} cannot be written ({e.strerror}); "
                        "make it writable, or read it with wb results / wb dashboard") from None

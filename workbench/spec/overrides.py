"""``--set PATH=VALUE``: a one-off edit of a study, trial or model file's data from the command line
(`wb run`, `wb train`, `wb info`, `wb status`, `wb results`), laid over the file before it is
validated, exactly as the same edit of the file would be: the same spec and spec hash.

- PATH is dotted (``train.lr``); a list's item is its index (``design.changes.1.name`` or
  ``design.changes[1].name``, as an error names it). In a study file a path that starts with a
  trial's section (``model``, ``data``, ``train``, ``eval``) is under ``base``: ``train.lr`` is
  ``base.train.lr``. In a model file (or a preset) ``model.`` may lead: the file is the model.
  A key the file does not write is added, as an edit adding it would be (sections on the way too);
  a key of a mapping that is itself dotted (a change's ``set: {model.attention.qk_norm: none}``)
  is matched whole.
- VALUE is read as YAML on one line, as the file's values are: ``3e-3`` and ``1_000`` are numbers,
  ``true`` a boolean, ``null`` or nothing at all is null, ``none`` the string (the slots' kind),
  ``[1, 2]`` a list, ``{kind: fixed}`` a mapping. It replaces what the file holds at PATH whole.
- Edits apply in the order given, each over the file and the edits before it: the command line wins.
  What validation then refuses is named after the ``--set`` that wrote it, not a line of the file.
"""
from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass
from typing import Any, Callable

from foxwb.workbench.spec.errors import TRIAL_KEYS, Positions, SpecError, field_name, read_value

FLAG = "--set"
_INDEX = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Override:
    """One ``--set``: its dotted path's parts, its value read as YAML, and the text as typed."""
    parts: tuple[str, ...]
    value: Any
    given: str

    def __str__(self) -> str:
        return f"{FLAG} {self.given}"


def parse(text: str) -> Override:
    """``PATH=VALUE`` as one Override; argparse's type for the flag, so a malformed one is refused
    by the parser (exit 2, the flag named) before any file is read."""
    path, sep, value = text.partition("=")
    example = "e.g. train.lr=0.003 or model.attention.kv_shift=none"
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} has no '=': give PATH=VALUE, {example}")
    parts = tuple(_INDEX.sub(r".\1", path.strip()).split("."))
    if not path.strip() or not all(p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: the path before '=' is empty or has an empty part; give a dotted "
                                         f"path of fields, {example}")
    try:
        read = read_value(value, repr(text))  # argparse names the flag
    except SpecError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return Override(tuple(p.strip() for p in parts), read, text)


def add_flag(parser: argparse.ArgumentParser, what: str) -> None:
    """The ``--set`` option of a command that reads ``what`` (a study file, a trial file, ...)."""
    parser.add_argument(FLAG, dest="overrides", action="append", default=[], type=parse, metavar="PATH=VALUE",
                        help=f"edit {what} for this command only, as if the file said so: a dotted PATH and a YAML "
                             "VALUE (train.lr=0.003); repeatable, applied in order over the file (docs/cli.md)")


def shown(overrides: list[Override] | None) -> str:
    """The flags as a shell takes them again (" --set train.lr=0.003"), for the commands a run suggests."""
    return "".join(f" {FLAG} {shlex.quote(o.given)}" for o in overrides or [])


def in_study(parts: tuple[str, ...]) -> tuple[str, ...]:
    """A study file's path: a trial section's fields are the base trial's."""
    return ("base", *parts) if parts[0] in TRIAL_KEYS else parts


def in_model(parts: tuple[str, ...]) -> tuple[str, ...]:
    """A model file's path: the file is the ``model`` section of a trial."""
    return parts[1:] if parts[0] == "model" and len(parts) > 1 else parts


def apply(data: Any, positions: Positions, overrides: list[Override] | None,
          resolve: Callable[[tuple[str, ...]], tuple[str, ...]] = lambda parts: parts) -> tuple[Any, Positions]:
    """``data`` with each override set in turn (a new copy where there are any), and where each field
    is written: a field an override wrote, and all under it, is the override's, not the file's."""
    if not overrides:
        return data, positions
    data, positions = _copy(data), Positions(positions)
    for o in overrides:
        loc = _set(data, resolve(o.parts), o)
        for written in [k for k in positions if k[:len(loc)] == loc]:
            del positions[written]
        positions[loc] = str(o)
    return data, positions


def _set(node: Any, parts: tuple[str, ...], o: Override, loc: tuple = ()) -> tuple:
    """Sets ``o.value`` at ``parts`` under ``node``; the location it wrote (keys and list indexes)."""
    if isinstance(node, list):
        key, rest = _index(node, parts[0], o, loc), parts[1:]
    elif isinstance(node, dict):
        # The longest run of parts that is a key as written: a design's `set` keys are dotted paths.
        n = next((n for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in node), 1)
        key, rest = ".".join(parts[:n]), parts[n:]
    else:
        raise SpecError(f"{o}: {field_name(loc)} is {node!r}, a single value, not a section with fields; "
                        f"give {field_name(loc)} itself the value")
    if not rest:
        node[key] = o.value
        return (*loc, key)
    if isinstance(node, dict) and node.get(key) is None:  # absent (or written empty): a new section
        node[key] = {}
    return _set(node[key], rest, o, (*loc, key))


def _index(items: list, part: str, o: Override, loc: tuple) -> int:
    allowed = f"an item's index, 0 to {len(items) - 1}" if items else "no index (the list is empty)"
    if not part.isdigit() or int(part) >= len(items):
        raise SpecError(f"{o}: {field_name(loc)} is a list of {len(items)} item{'s' * (len(items) != 1)}: {part!r} "
                        f"is not one of them; give {allowed}, or set the whole list ({field_name(loc)}=[...])")
    return int(part)


def _copy(node: Any) -> Any:
    """The file's plain data (mappings, lists, values), copied so the edits leave it as read."""
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node

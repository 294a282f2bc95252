"""Dotted field paths (``model.attention.qk_norm``) into a spec's JSON form, and the edits a study
makes through them.

An edit sets one path. Its value replaces what is there, except for a mapping given where the spec
holds a mapping: that updates the fields it names and keeps the rest (``model.attention:
{qk_norm: none}`` is ``model.attention.qk_norm: none``; the two give one spec and one spec hash).
A mapping that names another ``kind`` than the one there (a component or a data source of another
kind) replaces it whole: the options of the old kind are not options of the new one. A bare kind
(``forget_gate: none``) always replaces the slot, options and all, as a path edit of it does.
"""
from __future__ import annotations

import copy
import difflib
from typing import Any


class PathError(ValueError):
    pass


def did_you_mean(name: str, choices) -> str:
    """"; did you mean 'seeds'?" for the closest of ``choices``, the two closest where both are as
    near ("; did you mean 'set' or 'test'?" for 'tset'), or ''."""
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), choices, n=2, cutoff=0.6)
    if not close:
        return ""
    ratio = [difflib.SequenceMatcher(None, str(name), c).ratio() for c in close]
    if len(close) == 2 and ratio[1] >= ratio[0] - 0.15:
        return f"; did you mean {close[0]!r} or {close[1]!r}?"
    return f"; did you mean {close[0]!r}?"


def _no_field(path: str, where: str, node: Any, part: str) -> PathError:
    if not isinstance(node, dict):
        return PathError(f"{path!r}: {where} is a {type(node).__name__} value, not a section with fields")
    hint = did_you_mean(part, node)
    kind = f"; its kind is {node['kind']!r} (a mapping with another kind: replaces it)" if "kind" in node else ""
    return PathError(f"{path!r}: {where} has no field {part!r} (it has: {', '.join(sorted(node))}){kind}{hint}")


def merge(current: Any, value: Any, path: str) -> Any:
    """``value`` laid over ``current`` as an edit of ``path`` lays it (module docstring)."""
    if not (isinstance(current, dict) and isinstance(value, dict)):
        return copy.deepcopy(value)
    if "kind" in value and value["kind"] != current.get("kind"):
        return copy.deepcopy(value)
    out = dict(current)
    for key, sub in value.items():
        if key not in current:
            raise _no_field(f"{path}.{key}", path, current, key)
        out[key] = merge(current[key], sub, f"{path}.{key}")
    return out


def set_path(data: dict, path: str, value: Any) -> dict:
    """A copy of ``data`` with ``path`` edited to ``value`` (merged where both are mappings, see the
    module docstring). Every part of the path must already exist (specs dump every field, defaults
    included), so a typo is an error, not a new key."""
    out = copy.deepcopy(data)
    node, parts = out, path.split(".")
    for depth, part in enumerate(parts):
        where = ".".join(parts[:depth]) or "the trial"
        if not isinstance(node, dict) or part not in node:
            raise _no_field(path, where, node, part)
        if depth == len(parts) - 1:
            node[part] = merge(node[part], value, path)
        else:
            node = node[part]
    return out


def get_path(data: dict, path: str) -> Any:
    node = data
    for part in path.split("."):
        node = node[part]
    return node

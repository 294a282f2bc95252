"""Dotted field paths (``model.attention.qk_norm``) into a spec's JSON form."""
from __future__ import annotations

import copy
from typing import Any


class PathError(ValueError):
    pass


def set_path(data: dict, path: str, value: Any) -> dict:
    """A copy of ``data`` with ``path`` set to ``value``. Every part of the path must already exist
    (specs dump every field, defaults included), so a typo is an error, not a new key."""
    out = copy.deepcopy(data)
    node, parts = out, path.split(".")
    for depth, part in enumerate(parts):
        where = ".".join(parts[:depth]) or "the trial"
        if not isinstance(node, dict) or part not in node:
            fields = ", ".join(sorted(node)) if isinstance(node, dict) else f"a {type(node).__name__} value"
            raise PathError(f"{path!r}: {where} has no field {part!r} (it has: {fields})")
        if depth == len(parts) - 1:
            node[part] = copy.deepcopy(value)
        else:
            node = node[part]
    return out


def get_path(data: dict, path: str) -> Any:
    node = data
    for part in path.split("."):
        node = node[part]
    return node

"""User-facing errors: one line per problem, naming the field, the value and what is allowed."""
from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError


class SpecError(ValueError):
    """A bad study, trial or model file; the message is ready to print."""


def _location(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def format_validation_error(err: ValidationError, source: str = "") -> str:
    lines = []
    for e in err.errors():
        msg = e["msg"].removeprefix("Value error, ")
        value = e.get("input")
        shown = "" if isinstance(value, (dict, list)) else f" (got {value!r})"
        lines.append(f"{_location(e['loc'])}: {msg}{shown}")
    head = f"{source}: " if source else ""
    return head + f"{len(lines)} problem(s)\n  " + "\n  ".join(lines)


def read_yaml(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such file")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: malformed YAML: {e}") from None


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Any, source: str = "") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise SpecError(format_validation_error(e, source)) from None

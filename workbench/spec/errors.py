"""User-facing errors: one line per problem, naming the field, the value and what is allowed."""
from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from foxwb.workbench.spec.fields import did_you_mean


class SpecError(ValueError):
    """A bad study, trial or model file; the message is ready to print."""


def _location(loc: tuple) -> str:
    """``("design", "variants", 2, "seeds")`` as ``design.variants[2].seeds``: a list's item by its
    index in brackets, as the workbench's own messages name it."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


# The field a whole-section validator names at the start of its message: dotted names and list
# indexes (``design.variants[2].seeds``), optionally the row's name after it in parentheses.
_FIELD_HEAD = re.compile(r"(?P<path>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\d+\])*)(?P<note> \(.*\))?")
_PART = re.compile(r"[A-Za-z_]\w*|\[(\d+)\]")


def _as_written(model: type[BaseModel] | None, data: Any, loc: tuple) -> tuple:
    """An error's location as the file spells it: without the tags pydantic adds where a
    discriminated union chose its member by ``kind`` (``design.crossed.points`` is ``design.points``
    in the YAML)."""
    if model is None:
        return loc
    out, node, value = [], model, data
    for part in loc:
        union = _strip(node) if node is not None else None
        tag = (typing.get_origin(union) in (typing.Union, types.UnionType) and isinstance(part, str)
               and any(part in _kinds_of(_strip(m)) for m in typing.get_args(union) if m is not type(None)))
        if not tag:
            out.append(part)
        if node is not None:
            node, value = _descend(node, value, part)
    return tuple(out)


def _field_in_message(loc: tuple, msg: str) -> tuple[tuple, str, str]:
    """A validator of a whole section names the field it refuses at the start of its message
    (``search.algorithm: a crossed design ...``, ``design.variants[2].seeds (FoX): ...``): that
    field joins the location. (location, the note in parentheses after the field or "", the rest)."""
    head, sep, rest = msg.partition(": ")
    found = _FIELD_HEAD.fullmatch(head) if sep else None
    if found is None:
        return loc, "", msg
    parts = tuple(int(m.group(1)) if m.group(1) else m.group(0) for m in _PART.finditer(found["path"]))
    note = found["note"] or ""
    if tuple(loc[-len(parts):]) == parts:  # a field's own validator names itself
        return loc, note, rest
    return (*loc, *parts), note, rest


def _row_name(data: Any, loc: tuple) -> str:
    """The ``name`` of the innermost named list item the location passes through (a design's row),
    as the note after the field: ``design.variants[0].seeds (FoX)``; "" where there is none."""
    name, value = "", data
    for part in loc:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and -len(value) <= part < len(value):
            value = value[part]
            if isinstance(value, dict) and isinstance(value.get("name"), str):
                name = value["name"]
        else:
            break
    return f" ({name})" if name else ""


def _strip(annotation):
    """The type under Annotated[...] (pydantic's SerializeAsAny, our slot validators)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _kinds_of(member) -> tuple:
    """The tags a union member answers to: the values of its ``kind`` Literal."""
    field = getattr(member, "model_fields", {}).get("kind")
    if field is None:
        return ()
    return typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else (field.default,)


def _descend(node, value, part):
    """One step of an error's location: (the type there, the input there)."""
    node = _strip(node)
    origin = typing.get_origin(node)
    if origin in (typing.Union, types.UnionType):
        members = [_strip(m) for m in typing.get_args(node) if m is not type(None)]
        # A discriminated union puts the tag (the kind) into the location, without a level of input.
        tagged = [m for m in members if isinstance(part, str) and part in _kinds_of(m)]
        if tagged:
            return tagged[0], value
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel) and part in m.model_fields]
        return _descend(models[0], value, part) if models else (None, None)
    if origin in (list, tuple, dict):
        args = typing.get_args(node)
        inner = value[part] if isinstance(value, (list, dict)) and _has(value, part) else None
        return (args[-1] if args else None), inner
    if isinstance(node, type) and issubclass(node, BaseModel) and part in node.model_fields:
        inner = value.get(part) if isinstance(value, dict) else None
        annotation = _strip(node.model_fields[part].annotation)
        # The registry brings torch (its options build nn.Modules), and `wb --help` imports this
        # module: imported when an error's location is traced, not with the module.
        from foxwb.components.registry import ComponentSpec, options_class

        if annotation is ComponentSpec:  # a slot: its options are those of the kind it was given
            kind = inner.get("kind") if isinstance(inner, dict) else inner
            try:
                return options_class(part, kind), inner
            except ValueError:
                return None, None
        return annotation, inner
    return None, None


def _has(container, key) -> bool:
    return key in container if isinstance(container, dict) else isinstance(key, int) and -len(container) <= key < len(container)


def allowed_fields(model: type[BaseModel], data: Any, loc: tuple) -> list[str]:
    """The field names of the section an error's ``loc`` points into (for "did you mean")."""
    node, value = model, data
    for part in loc[:-1]:
        node, value = _descend(node, value, part)
        if node is None:
            return []
    node = _strip(node)
    return list(node.model_fields) if isinstance(node, type) and issubclass(node, BaseModel) else []


def format_validation_error(err: ValidationError, source: str = "", model: type[BaseModel] | None = None,
                            data: Any = None) -> str:
    """One line per problem; an unknown key gets the closest allowed one (``model`` and ``data``:
    what was validated, to find the allowed keys)."""
    lines = []
    for e in err.errors():
        msg = e["msg"].removeprefix("Value error, ")
        value = e.get("input")
        # The value as given, unless it is a section (its own lines name what is wrong in it) or long.
        shown = "" if isinstance(value, dict) or len(repr(value)) > 80 else f" (got {value!r})"
        hint = ""
        if e["type"] == "extra_forbidden" and model is not None and e["loc"]:
            hint = did_you_mean(e["loc"][-1], allowed_fields(model, data, e["loc"]))
            if not hint and len(e["loc"]) > 1 and e["loc"][-1] in model.model_fields:  # a key one level too deep
                hint = f"; {e['loc'][-1]!r} belongs at the top level of the file"
        loc, note = _as_written(model, data, tuple(e["loc"])), ""
        if e["type"] == "value_error":
            loc, note, msg = _field_in_message(loc, msg)
        note = note or _row_name(data, loc)
        lines.append(f"{_location(loc)}{note}: {msg}{shown}{hint}")
    head = f"{source}: " if source else ""
    count = "1 problem" if len(lines) == 1 else f"{len(lines)} problems"
    return head + f"{count}\n  " + "\n  ".join(lines)


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping (plain YAML keeps the last
    silently: a second `seeds:` would drop the first, a second `design:` a whole design)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the base loader says what is wrong with it
                continue
            if first != key_node.start_mark.line + 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice in one mapping (first at line {first}); "
                    "YAML would keep the last silently: keep one", key_node.start_mark)
        return super().construct_mapping(node, deep)


def read_yaml(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such file")
    try:
        with path.open() as f:  # a stream: YAML's errors then name the file, not "<unicode string>"
            data = yaml.load(f, Loader=_Loader)
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: malformed YAML: {e}") from None
    if data is None:
        raise SpecError(f"{path}: the file is empty (or holds only comments)")
    return data


M = TypeVar("M", bound=BaseModel)

# The keys that tell a study file from a trial file: `wb run` and `wb train` say which command a
# file of the other kind belongs to, instead of listing its keys as unknown.
STUDY_KEYS, TRIAL_KEYS = frozenset({"design", "base", "seeds", "search"}), frozenset({"model", "data", "train", "eval"})


def check_file_kind(data: Any, path: str, want: str) -> None:
    """``want`` "study" or "trial": a file of the other kind is one error naming its command."""
    if not isinstance(data, dict):
        return
    keys = set(data)
    if want == "study" and keys & TRIAL_KEYS and not keys & STUDY_KEYS:
        raise SpecError(f"{path}: a trial file (model, data, train, eval), not a study: train it with "
                        f"`wb train {path} --out DIR`; a study file has name, base, design and seeds")
    if want == "trial" and keys & STUDY_KEYS and not keys & TRIAL_KEYS:
        raise SpecError(f"{path}: a study file (base, design, seeds), not a trial: run it with `wb run {path}`; "
                        "a trial file has model, data, train, eval and seed")


def validate(model: type[M], data: Any, source: str = "") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise SpecError(format_validation_error(e, source, model, data)) from None

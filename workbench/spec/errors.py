"""User-facing errors: one line per problem, naming where the file writes it (path:line:column), the field,
the value and what is allowed; and the reading of YAML files that keeps where each field is written."""
from __future__ import annotations

import datetime
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedKeyMap, CommentedKeySeq, TaggedScalar
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode
from ruamel.yaml.scalarbool import ScalarBoolean

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


def _kinds_of(member, discriminator: str = "kind") -> tuple:
    """The tags a union member answers to: the values of its ``kind`` (``discriminator``) Literal."""
    field = getattr(member, "model_fields", {}).get(discriminator)
    if field is None:
        return ()
    return typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else (field.default,)


def _discriminated(model: type[BaseModel] | None, data: Any, loc: tuple) -> tuple[str, list[str]] | None:
    """(the field that picks the member, the tags the members answer to, in the union's order) of
    the discriminated union (design, data) that an error's ``loc`` points at, read from the model's
    field (``Field(discriminator="kind")``) and the members' Literals; None where ``loc`` is not
    a model's field with a discriminator."""
    if model is None or not loc:
        return None
    node, value = model, data
    for part in loc[:-1]:
        node, value = _descend(node, value, part)
        if node is None:
            return None
    node = _strip(node)
    if not (isinstance(node, type) and issubclass(node, BaseModel) and loc[-1] in node.model_fields):
        return None
    field = node.model_fields[loc[-1]]
    if not isinstance(field.discriminator, str):
        return None
    members = [_strip(m) for m in typing.get_args(_strip(field.annotation)) if m is not type(None)]
    return field.discriminator, [str(tag) for m in members for tag in _kinds_of(m, field.discriminator)]


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
                            data: Any = None, positions: Positions | None = None, under: tuple = ()) -> str:
    """One line per problem; an unknown key gets the closest allowed one (``model`` and ``data``:
    what was validated, to find the allowed keys). ``positions``: where the fields of the file
    ``data`` is read from are written (``under``: the section of the file ``data`` is), for each
    line to start with the field's ``path:line:column``."""
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
        union = _discriminated(model, data, tuple(e["loc"])) if e["type"] == "union_tag_invalid" else None
        if union is not None:  # a kind no member of a union (design, data) has
            discriminator, allowed = union
            tag = e.get("ctx", {}).get("tag")
            loc = (*loc, discriminator)
            msg, shown = f"unknown kind {tag!r}; kinds: {', '.join(allowed)}", ""
            hint = did_you_mean(str(tag), allowed)
        if e["type"] == "value_error":
            loc, note, msg = _field_in_message(loc, msg)
        note = note or _row_name(data, loc)
        where = positions.of((*under, *loc)) if positions else ""
        lines.append((f"{where}: " if where else "") + f"{_location(loc)}{note}: {msg}{shown}{hint}")
    head = f"{source}: " if source else ""
    count = "1 problem" if len(lines) == 1 else f"{len(lines)} problems"
    return head + f"{count}\n  " + "\n  ".join(lines)


class Positions(dict):
    """Where each field of a file is written: its location (keys and list indexes, as pydantic's
    ``loc``) -> ``path:line:column`` (1-based; of the key, or of the item in a list)."""

    def of(self, loc: tuple) -> str:
        """Where ``loc``, or the nearest section around it, is written; "" where the file holds neither."""
        for n in range(len(loc), 0, -1):
            if loc[:n] in self:
                return self[loc[:n]]
        return ""

    def of_message(self, message: str) -> str:
        """Where the field a message starts with is written (``design.changes[0].set (row x): ...``,
        the field as _location writes it), or the nearest section around it; "" where none is."""
        head = message.split("\n", 1)[0].partition(": ")[0]
        named = {_location(loc): where for loc, where in self.items()}
        found = [name for name in named if head == name or head.startswith((f"{name}.", f"{name}[", f"{name} ("))]
        return named[max(found, key=len)] if found else ""


def at_field(source: str, message: str, positions: Positions | None) -> str:
    """``message``, which names the field it is about first, after where the field is written
    (``study.yaml:12:5: design.changes[0]: ...``), else after ``source``."""
    where = positions.of_message(message) if positions else ""
    return f"{where or source}: {message}"


# The positions of the files read here, by the path as given: validate() names the line and column
# of a problem in a file's data without its caller passing them (`wb train`, `wb info`).
_READ: dict[str, Positions] = {}
_STR = "tag:yaml.org,2002:str"  # YAML's own string tag (`!!str 12`): the one tag a file may write


def read_located(path: str | Path) -> tuple[Any, Positions]:
    """A YAML file's data (plain dicts, lists, strings, numbers, booleans, None; YAML 1.2, where
    ``1e-3`` is a number and ``yes`` a string) and where each field of it is written. A key
    written twice in one mapping, a tag other than YAML's own and malformed YAML are refused,
    each in one sentence naming the line and column."""
    shown = str(path)
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such file")
    try:
        text = path.read_text()
    except UnicodeDecodeError as e:
        raise SpecError(f"{shown}: not UTF-8 text (byte {e.start}); a study, trial or model file is YAML text") from None
    try:
        loaded = YAML(typ="rt").load(text)
    except DuplicateKeyError as e:
        raise SpecError(_written_twice(shown, text, e)) from None
    except YAMLError as e:
        raise SpecError(_malformed(shown, e)) from None
    if loaded is None:
        raise SpecError(f"{shown}: the file is empty (or holds only comments)")
    positions = Positions()
    data = _plain(loaded, (), shown, positions)
    _READ[shown] = _READ[str(path)] = positions
    return data, positions


def read_value(text: str, shown: str) -> Any:
    """One value written as YAML on a command line (``3e-3``, ``none``, ``[1, 2]``, ``{kind: fixed}``),
    read as a file's values are (read_located); ``shown``: the flag as given, named by a refusal."""
    try:
        loaded = YAML(typ="rt").load(text)
    except YAMLError as e:
        raise SpecError(f"{shown}: the value is not YAML: {getattr(e, 'problem', None) or e}; quote a string "
                        "that holds ': ' or starts with a bracket") from None
    return _plain(loaded, (), shown, Positions())


def field_name(loc: tuple) -> str:
    """A field's location as the workbench's messages name it (``design.variants[2].seeds``)."""
    return _location(loc)


def read_yaml(path: str | Path) -> Any:
    """A YAML file's data (read_located); validate() of it under ``path`` names lines and columns."""
    return read_located(path)[0]


def _plain(node: Any, loc: tuple, shown: str, positions: Positions) -> Any:
    """ruamel's round-trip data as plain Python, recording where each key and item is written."""
    tag = getattr(getattr(node, "tag", None), "value", None)
    if isinstance(node, TaggedScalar) and tag == _STR:  # `!!str 12`
        return str(node.value)
    if tag is not None and tag != _STR:
        where = positions.of(loc) or shown
        raise SpecError(f"{where}: {_location(loc)}: the YAML tag {tag} is not read here; a workbench file holds plain "
                        "data (mappings, lists, strings, numbers, true/false, null)")
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if isinstance(key, (CommentedKeyMap, CommentedKeySeq)):
                raise SpecError(f"{positions.of(loc) or shown}: {_location(loc)}: a key is a name or a number, not a "
                                f"{'mapping' if isinstance(key, CommentedKeyMap) else 'list'}")
            here = (*loc, _plain(key, loc, shown, positions))
            try:
                line, column = node.lc.key(key)
                positions[here] = f"{shown}:{line + 1}:{column + 1}"
            except (KeyError, TypeError):  # a key merged in by `<<: *anchor`: where its section is
                pass
            out[here[-1]] = _plain(value, here, shown, positions)
        return out
    if isinstance(node, (set, frozenset)):
        return {_plain(v, loc, shown, positions) for v in node}
    if isinstance(node, list):
        out = []
        for i, value in enumerate(node):
            try:
                line, column = node.lc.item(i)
                positions[(*loc, i)] = f"{shown}:{line + 1}:{column + 1}"
            except (KeyError, IndexError, TypeError):
                pass
            out.append(_plain(value, (*loc, i), shown, positions))
        return out
    if isinstance(node, (bool, ScalarBoolean)):
        return bool(node)
    for kind in (int, float, str):  # ruamel's ScalarFloat, HexInt, LiteralScalarString... as the plain type
        if isinstance(node, kind):
            return kind(node)
    if isinstance(node, datetime.datetime):  # ruamel's TimeStamp
        return datetime.datetime(*node.timetuple()[:6], node.microsecond, node.tzinfo)
    return node  # None, a date, bytes (!!binary)


def _written_twice(shown: str, text: str, err) -> str:
    """The refusal of a key written twice: plain YAML keeps the last silently (a second `seeds:`
    drops the first, a second `design:` a whole design)."""
    mark = err.problem_mark  # the second key
    first = _first_key(text, mark.line, mark.column)
    if first is None:
        return f"{shown}:{mark.line + 1}:{mark.column + 1}: {err.problem}; keep one"
    key, line = first
    return (f"{shown}:{mark.line + 1}:{mark.column + 1}: key {key!r} is written twice in one mapping (first at line "
            f"{line}); YAML would keep the last silently: keep one")


def _first_key(text: str, line: int, column: int) -> tuple[str, int] | None:
    """(the key, its 1-based line) of the first key of the mapping that repeats the key at
    ``line``, ``column`` (0-based); None where it is not a plain key."""
    todo, seen = [YAML(typ="rt").compose(text)], set()
    while todo:
        node = todo.pop()
        if id(node) in seen:  # an alias: the node it names is walked once
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            keys = [k for k, _ in node.value]
            for i, k in enumerate(keys):
                if isinstance(k, ScalarNode) and (k.start_mark.line, k.start_mark.column) == (line, column):
                    earlier = [e for e in keys[:i] if isinstance(e, ScalarNode) and e.value == k.value]
                    return (k.value, earlier[0].start_mark.line + 1) if earlier else None
            todo += [n for pair in node.value for n in pair]
        elif isinstance(node, SequenceNode):
            todo += node.value
    return None


def _malformed(shown: str, err) -> str:
    mark, context, context_mark = (getattr(err, name, None) for name in ("problem_mark", "context", "context_mark"))
    where = f"{shown}:{mark.line + 1}:{mark.column + 1}" if mark is not None else shown
    problem = getattr(err, "problem", None) or str(err)
    if context and context_mark is not None:
        problem += f" ({context} at line {context_mark.line + 1}, column {context_mark.column + 1})"
    elif context:
        problem += f" ({context})"
    return f"{where}: malformed YAML: {problem}"

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


def validate(model: type[M], data: Any, source: str = "", positions: Positions | None = None) -> M:
    """``data`` as ``model``; a SpecError of one line per problem. ``positions``: where the fields
    are written, by default those of the file ``source`` where it was read here (read_located)."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        where = positions if positions is not None else _READ.get(source)
        raise SpecError(format_validation_error(e, source, model, data, where)) from None

"""Knobs and their defaults, for the fairness report (foxwb.workbench.analysis.fairness; docs/results.md,
"The fairness report"): which paths of a trial's flattened spec are knobs, the default of each (its
component's options class, else the spec classes), whether an option changes the parameter count
(then it is the model's size, not a recipe), and the flat-dict helpers the report reads tracked
params with.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from foxwb.components.registry import ATTENTION_SLOTS, BLOCK_SLOTS, UnknownKind, options_class
from foxwb.workbench.spec.cost import param_counts
from foxwb.workbench.spec.fields import set_path
from foxwb.workbench.spec.trial import ModelSpec, TrainSpec, TrialSpec

_SIZE = frozenset({"vocab_size", "d_model", "n_layers", "n_heads"})
# Fields of train that are the budget or how a trial runs, not a recipe: the same on every row by design.
_NOT_KNOBS = frozenset({"tokens", "batch_size", "grad_accum", "eval_every_tokens", "eval_batches",
                        "checkpoint_every_tokens", "compile", "device", "cpu_threads"}) | TrainSpec._execution_only
NO_DEFAULT = object()


def is_knob(path: str) -> bool:
    parts = path.split(".")
    if parts[0] == "train":
        return len(parts) == 2 and parts[1] not in _NOT_KNOBS
    if parts[0] != "model" or len(parts) < 2 or parts[1] in _SIZE:
        return False
    where = slot(path)
    return where is None or where[2] != "kind"


def slot(path: str) -> tuple[str, str, str] | None:
    """(the slot's prefix, the slot, the option) of a component option's path, else None."""
    parts = path.split(".")
    if len(parts) >= 4 and parts[:2] == ["model", "attention"] and parts[2] in ATTENTION_SLOTS:
        return ".".join(parts[:3]), parts[2], ".".join(parts[3:])
    if len(parts) >= 3 and parts[0] == "model" and parts[1] in BLOCK_SLOTS:
        return ".".join(parts[:2]), parts[1], ".".join(parts[2:])
    return None


def default(path: str, flat: dict) -> Any:
    where = slot(path)
    if where is None:
        return spec_defaults().get(path, NO_DEFAULT)
    prefix, name, option = where
    return option_defaults(name, str(flat.get(f"{prefix}.kind"))).get(option, NO_DEFAULT)


@lru_cache(maxsize=None)
def spec_defaults() -> dict:
    return flat(TrialSpec().model_dump(mode="json"))


@lru_cache(maxsize=None)
def option_defaults(slot: str, kind: str) -> dict:
    """A component kind's options -> their defaults (flattened), from its options class; {} for a
    kind not registered here (a plug-in not installed)."""
    try:
        cls = options_class(slot, kind)
    except UnknownKind:
        return {}
    out = {}
    for name, f in cls.model_fields.items():
        if name == "kind" or f.is_required():
            continue
        value = f.get_default(call_default_factory=True)
        value = value.model_dump(mode="json") if hasattr(value, "model_dump") else json.loads(json.dumps(value, default=str))
        out.update(flat({name: value}) if isinstance(value, dict) else {name: value})
    return out


def changes_size(flat: dict, path: str, default: Any) -> bool:
    """Whether the option at ``path`` changes the model's parameter count, at the row's width or at
    a wider one (one layer, on the meta device; a rounding can hide a width option at one width:
    the SwiGLU's hidden_ratio 3.5 and 4 give one width at d_model 384): then it is the model's
    size, not a recipe."""
    model = {k[len("model."):]: v for k, v in flat.items() if k.startswith("model.")}
    return _size_sensitive(json.dumps(model, sort_keys=True, default=str), path[len("model."):], json.dumps(default))


@lru_cache(maxsize=4096)
def _size_sensitive(model_json: str, rel: str, default_json: str) -> bool:
    nested = nest(json.loads(model_json))
    for width in (nested["d_model"], 4 * nested["d_model"], 512 * nested["n_heads"], 1024 * nested["n_heads"]):
        probe = {**nested, "n_layers": 1, "d_model": width}
        try:
            mine = ModelSpec.model_validate(probe)
            other = ModelSpec.model_validate(set_path(probe, rel, json.loads(default_json)))
            if param_counts(mine)["total"] != param_counts(other)["total"]:
                return True
        except Exception:  # a model this machine cannot build (a plug-in not installed): a recipe knob, shown
            return False
    return False


# ---------------------------------------------------------------- flat dicts and values

def flat(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def nest(flat: dict) -> dict:
    out: dict = {}
    for path, value in flat.items():
        node = out
        *above, last = path.split(".")
        for part in above:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def parse(text: Any) -> Any:
    """A tracked param's value (str() of a scalar, JSON of a list: workbench/run/tracking.py) as a value."""
    if not isinstance(text, str):
        return text
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    try:
        return json.loads(text)
    except ValueError:
        return text


def get(flat: dict, path: str) -> Any:
    if path in flat:
        return flat[path]
    return {k[len(path) + 1:]: v for k, v in flat.items() if k.startswith(path + ".")} or None


def same(a: Any, b: Any) -> bool:
    if is_number(a) and is_number(b):
        return float(a) == float(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def order(v: Any):
    return (0, float(v), "") if is_number(v) else (1, 0.0, str(v))

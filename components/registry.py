"""The component registry: which kinds each block slot accepts, and the options class of each.

A slot (``qk_norm``, ``forget_gate``, ``mlp``...) maps kind names to pydantic options classes. A
class registers itself with ``@register``; third-party packages add kinds through the
``workbench.components`` entry-point group (an entry point names a module to import, or an options
class to register), so a new kind needs no edit of this package. Spec validation and error
messages take their list of allowed kinds from here.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, ClassVar, Literal

import torch.nn as nn
from pydantic import BaseModel, ConfigDict

ENTRY_POINT_GROUP = "workbench.components"

# Attention slots in the order they act (docs/fox-notes.md, "One attention layer"), then the block-level slots.
ATTENTION_SLOTS = ("kv_shift", "qk_norm", "rope", "forget_gate", "output_norm", "output_gate")
BLOCK_SLOTS = ("norm", "mlp")
SLOTS = ATTENTION_SLOTS + BLOCK_SLOTS


@dataclass(frozen=True)
class BlockDims:
    """Sizes a component needs to build itself."""

    d_model: int
    n_heads: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class ComponentSpec(BaseModel):
    """Options of one component kind; ``build`` is the only way to construct the module."""

    # No option is infinite or NaN: a float field refuses .inf and .nan.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    slot: ClassVar[str]
    # Options added after trials were run with the behaviour of their default: the spec hash
    # leaves them out while they hold that default (foxwb.workbench.spec.base), so those trials keep theirs.
    _new_fields: ClassVar[frozenset[str]] = frozenset()

    def build(self, dims: BlockDims) -> nn.Module | None:
        raise NotImplementedError


class UnknownKind(ValueError):
    pass


_REGISTRY: dict[str, dict[str, type[ComponentSpec]]] = {slot: {} for slot in SLOTS}
_entry_points_loaded = False
_ORIGIN: dict[tuple[str, str], tuple[str, str]] = {}  # (slot, kind) -> (distribution, version) of a plug-in


def register(cls: type[ComponentSpec]) -> type[ComponentSpec]:
    """Class decorator: register an options class under its ``slot`` and the default of ``kind``."""
    slot = getattr(cls, "slot", None)
    if slot not in _REGISTRY:
        raise ValueError(f"{cls.__name__}.slot = {slot!r}; allowed slots: {', '.join(SLOTS)}")
    kind = cls.model_fields["kind"].default
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"{cls.__name__} needs a string default for its 'kind' field")
    existing = _REGISTRY[slot].get(kind)
    if existing is not None and existing is not cls:
        owner = _ORIGIN.get((slot, kind))
        by = f"plug-in {owner[0]}" if owner else "the workbench (built in)"
        raise ValueError(f"{cls.__module__}.{cls.__name__} registers kind {kind!r} of slot {slot!r}, "
                         f"which {by} already registers ({existing.__name__})")
    _REGISTRY[slot][kind] = cls
    return cls


def load_entry_points() -> None:
    """Import the third-party components advertised under the entry-point group (once). A plug-in
    that fails to import or to register (a kind that clashes with one already there) is left
    out with one warning naming its distribution and entry point; every other kind still works."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from foxwb import components  # noqa: F401  (the built-in kinds first: a plug-in cannot take their names)

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = (ep.dist.name, ep.dist.version) if ep.dist is not None else ("an unknown distribution", "")
        before = {slot: dict(kinds) for slot, kinds in _REGISTRY.items()}
        try:
            obj = ep.load()
            if isinstance(obj, type) and issubclass(obj, ComponentSpec):
                register(obj)
        except Exception as e:  # a broken plug-in must not take the built-in kinds down with it
            sys.stderr.write(f"warning: plug-in {dist[0]} {dist[1]} (entry point {ep.name} = {ep.value} in "
                             f"{ENTRY_POINT_GROUP}) is not loaded: {type(e).__name__}: {e}\n")
        for slot, kinds_now in _REGISTRY.items():  # what this plug-in added, by whichever way
            for kind, cls in kinds_now.items():
                if before[slot].get(kind) is not cls:
                    _ORIGIN[(slot, kind)] = dist


def plugin_of(slot: str, kind: str) -> tuple[str, str] | None:
    """(distribution, version) of the plug-in that registered ``kind`` in ``slot``; None for a built-in."""
    load_entry_points()
    return _ORIGIN.get((slot, kind))


def plugins_used(components) -> dict[str, dict]:
    """``{distribution: {"version": ..., "kinds": ["slot=kind", ...]}}`` of the plug-ins whose
    kinds fill ``components`` (ComponentSpec instances); built-in kinds are left out."""
    out: dict[str, dict] = {}
    for spec in components:
        origin = plugin_of(spec.slot, spec.kind)
        if origin is not None:
            entry = out.setdefault(origin[0], {"version": origin[1], "kinds": []})
            entry["kinds"].append(f"{spec.slot}={spec.kind}")
    return out


def kinds(slot: str) -> list[str]:
    load_entry_points()
    return sorted(_REGISTRY[slot])


def options_class(slot: str, kind: str) -> type[ComponentSpec]:
    load_entry_points()
    try:
        return _REGISTRY[slot][kind]
    except KeyError:
        raise UnknownKind(f"unknown kind {kind!r}; registered kinds: {', '.join(kinds(slot))}") from None


def parse(slot: str, value: Any) -> ComponentSpec:
    """Turn ``"rmsnorm"``, ``{"kind": "rmsnorm", ...}`` or an options instance into options."""
    if isinstance(value, ComponentSpec):
        if value.slot != slot:
            raise ValueError(f"a {value.slot!r} component cannot fill the {slot!r} slot")
        return value
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, dict):
        raise ValueError(f"expected a kind name or a mapping with 'kind', got {type(value).__name__}")
    if "kind" not in value:
        raise ValueError(f"missing 'kind'; registered kinds: {', '.join(kinds(slot))}")
    return options_class(slot, value["kind"]).model_validate(value)


def none_kind(slot: str) -> type[ComponentSpec]:
    """Register the ``none`` kind of an optional slot: the slot is left out of the block."""

    class NoComponent(ComponentSpec):
        kind: Literal["none"] = "none"

        def build(self, dims: BlockDims) -> None:
            return None

    NoComponent.slot = slot
    NoComponent.__name__ = NoComponent.__qualname__ = f"No_{slot}"
    return register(NoComponent)

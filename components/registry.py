"""The component registry: which kinds each block slot accepts, and the options class of each.

A slot (``qk_norm``, ``forget_gate``, ``mlp``...) maps kind names to pydantic options classes. A
class registers itself with ``@register``; third-party packages add kinds through the
``workbench.components`` entry-point group (an entry point names a module to import, or an options
class to register), so a new kind needs no edit of this package. Spec validation and error
messages take their list of allowed kinds from here. A kind whose module misspells one of the
optional hooks (components/protocols.py), or declares one with other parameters, is refused here.
"""
from __future__ import annotations

import difflib
import sys
import types
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, ClassVar, Literal

import torch.nn as nn
from pydantic import BaseModel, ConfigDict

from foxwb.components.protocols import hook_problem

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
    _check_hooks(cls, slot, kind)
    _REGISTRY[slot][kind] = cls
    return cls


def module_classes(cls: type[ComponentSpec]) -> list[type[nn.Module]]:
    """The module classes a kind's ``build`` may return, as far as can be told without building one:
    those its ``build`` names (a global or a variable of an enclosing function) and those defined
    in the options class's own module, not torch's. A class reached only through a helper defined
    elsewhere is not seen."""
    build = cls.build
    found = []
    if isinstance(build, types.FunctionType):
        found += [build.__globals__.get(n) for n in build.__code__.co_names]
        for cell in build.__closure__ or ():
            try:
                found.append(cell.cell_contents)
            except ValueError:  # a cell not yet bound
                pass
    module = sys.modules.get(cls.__module__)
    if module is not None:
        found += [c for c in vars(module).values() if getattr(c, "__module__", None) == cls.__module__]
    modules = [c for c in found if isinstance(c, type) and issubclass(c, nn.Module)]
    return [c for c in dict.fromkeys(modules) if c.__module__.split(".")[0] != "torch"]


def _check_hooks(cls: type[ComponentSpec], slot: str, kind: str) -> None:
    """A misspelt or mis-signed optional hook (components/protocols.py) on a module the kind builds
    would silently never be taken, or fail when called: refused, as a clashing kind is."""
    for module in module_classes(cls):
        problem = hook_problem(module)
        if problem:
            raise ValueError(f"component {kind!r} for slot {slot!r}: {problem}")


def load_entry_points() -> None:
    """Import the third-party components advertised under the entry-point group (once). A plug-in
    that fails to import or to register (a kind that clashes with one already there, a misspelt
    or mis-signed hook) is left out, every kind it added with it, with one warning naming its
    distribution and entry point; every other kind still works."""
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
            # Once more now that the plug-in's module is imported whole: a class registered by
            # decorator is checked before the module classes defined after it exist.
            for slot, kinds_now in _REGISTRY.items():
                for kind, cls in kinds_now.items():
                    if before[slot].get(kind) is not cls:
                        _check_hooks(cls, slot, kind)
        except Exception as e:  # a broken plug-in must not take the built-in kinds down with it
            sys.stderr.write(f"warning: plug-in {dist[0]} {dist[1]} (entry point {ep.name} = {ep.value} in "
                             f"{ENTRY_POINT_GROUP}) is not loaded: {type(e).__name__}: {e}\n")
            for slot, kinds_then in before.items():  # nor any kind it registered before failing
                _REGISTRY[slot].clear()
                _REGISTRY[slot].update(kinds_then)
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
        close = difflib.get_close_matches(str(kind), kinds(slot), n=1)
        mean = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownKind(f"unknown kind {kind!r}{mean}; registered kinds: {', '.join(kinds(slot))}") from None


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

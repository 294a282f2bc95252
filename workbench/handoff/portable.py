"""Whether a model can be built by a loader elsewhere: every component kind it uses is either the
workbench's own or a plug-in installed as a distribution (registered through the entry-point
group, so that the workbench in the loader's Python finds it by name). A kind registered at run
time by a script or a module that no installed distribution advertises cannot be found there."""
from __future__ import annotations

from foxwb.components.registry import ENTRY_POINT_GROUP, options_class, plugin_of
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.trial import ModelSpec

_BUILT_IN = "foxwb.components."


def plugins_needed(model: ModelSpec) -> dict[str, dict]:
    """``{distribution: {"version": ..., "kinds": ["slot=kind", ...]}}`` of the plug-ins the model
    needs; a SpecError naming the first component no loader elsewhere could build."""
    out: dict[str, dict] = {}
    for spec in model.components():
        cls = options_class(spec.slot, spec.kind)
        if cls.__module__.startswith(_BUILT_IN):
            continue
        origin = plugin_of(spec.slot, spec.kind)
        if origin is None:
            raise SpecError(
                f"component {spec.kind!r} of slot {spec.slot!r} cannot be exported: it was registered at run time by "
                f"{cls.__module__}.{cls.__name__}, which no installed distribution advertises in the entry-point "
                f"group {ENTRY_POINT_GROUP!r}, so a loader elsewhere cannot build it; package it as a plug-in "
                "(docs/models.md, \"Adding a component kind from another package\") and install it, then export again")
        dist, version = origin
        entry = out.setdefault(dist, {"version": version, "kinds": []})
        entry["kinds"].append(f"{spec.slot}={spec.kind}")
    return out

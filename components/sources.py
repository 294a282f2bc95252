"""The source files a model's components come from, and their digest (docs/models.md, "Stale
results"): what a trial's numbers depend on beyond its spec. A result records the digest; the dry
run and `wb results FILE` compare it with the code installed now and mark a trial whose
components' sources changed since it ran as stale.

What counts, per slot of the model: the file that defines the kind's options class (a plug-in's
module, or ours under components/) and the files of the module classes its ``build`` returns
(foxwb.components.registry.module_classes). The engine (kernels, the training loop, the data) is
not in it: its fingerprint is ``versions.source`` in every result, and a change there is a change
of the workbench, said by its release notes, not a stale trial.
"""
from __future__ import annotations

import hashlib
import inspect
from pathlib import Path

from foxwb.components import registry
from foxwb.components.registry import module_classes

TAG = "components_source"  # the tracked run's tag holding the digest it ran with
_REGISTRY_FILE = Path(registry.__file__).resolve()  # its "none" kinds build nothing: no code of theirs to change


def files(components) -> dict[str, list[Path]]:
    """``slot=kind`` -> the source files of that component (ComponentSpec instances), in order."""
    out: dict[str, list[Path]] = {}
    for spec in components:
        found = [type(spec), *module_classes(type(spec))]
        paths = []
        for cls in found:
            try:
                path = Path(inspect.getsourcefile(cls)).resolve()
            except (TypeError, OSError):  # defined where no file holds it (a notebook, say): not counted
                continue
            if path != _REGISTRY_FILE:
                paths.append(path)
        out[f"{spec.slot}={spec.kind}"] = sorted(dict.fromkeys(paths))
    return out


def digest(components) -> str:
    """12 hex digits of the SHA-256 over the components' source files (their names and bytes):
    equal digests, the same component code."""
    h = hashlib.sha256()
    for key, paths in sorted(files(components).items()):
        h.update(key.encode() + b"\0")
        for path in paths:
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def stale(components, recorded: str | None) -> str | None:
    """Why a finished run of these components is stale (its recorded digest differs from the code
    installed now), else None; None too where it recorded none (a run from before the digest)."""
    if not recorded or recorded == digest(components):
        return None
    names = sorted({p.name for paths in files(components).values() for p in paths})
    return f"stale: its components' sources ({', '.join(names)}) changed since it ran"

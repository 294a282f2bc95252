"""Redo trials on purpose: ``wb run STUDY --rerun SELECTOR``.

A selector names trials of the study: ``failed`` (every trial with a FAILED or KILLED run and no
FINISHED one), ``stale`` (every finished trial whose components' sources changed since it ran:
foxwb.components.sources), a variant's name (all its seeds and searched points), or a spec hash or a prefix of
one. Their tracked runs are deleted and their checkpoint folders removed, so the study runs them
again from the first step.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from foxwb.components import sources
from foxwb.workbench.train import layout
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.study import Trial

FAILED = "failed"
STALE = "stale"
MIN_PREFIX = 4


def select(trials: list[Trial], runs: list, selectors: list[str]) -> set[str]:
    """The spec hashes the selectors name, from the study's trials and its tracked ``runs``
    (which hold the drawn points of a search as well)."""
    tagged = [(r.data.tags.get("variant", ""), r.data.tags.get("spec_hash", ""), r.info.status) for r in runs]
    by_variant: dict[str, set[str]] = {}
    for t in trials:
        by_variant.setdefault(t.variant, set()).add(t.spec_hash)
    for variant, spec_hash, _ in tagged:
        by_variant.setdefault(variant, set()).add(spec_hash)
    hashes = set().union(*by_variant.values()) if by_variant else set()
    chosen: set[str] = set()
    for selector in selectors:
        if selector == STALE:
            chosen |= set(stale_trials(trials, runs))
        elif selector == FAILED:
            finished = {h for _, h, status in tagged if status == "FINISHED"}
            chosen |= {h for _, h, status in tagged if status in ("FAILED", "KILLED") and h not in finished}
        elif selector in by_variant:
            chosen |= by_variant[selector]
        elif len(selector) >= MIN_PREFIX and (matches := {h for h in hashes if h.startswith(selector)}):
            if len(matches) > 1:
                raise SpecError(f"--rerun {selector!r}: the prefix matches {len(matches)} spec hashes "
                                f"({', '.join(sorted(matches)[:4])}...); give more of the hash")
            chosen |= matches
        else:
            raise SpecError(f"--rerun {selector!r}: no trial of the study has that variant name or spec hash; "
                            f"allowed: {FAILED!r}, {STALE!r}, a variant ({', '.join(repr(v) for v in by_variant)}), "
                            f"or a spec hash (at least {MIN_PREFIX} characters of one)")
    return chosen


def stale_trials(trials: list[Trial], runs: list) -> dict[str, str]:
    """spec hash -> why, for each trial with a FINISHED run whose components' sources changed since
    (foxwb.components.sources)."""
    recorded = {r.data.tags.get("spec_hash"): r.data.tags.get(sources.TAG) for r in runs if r.info.status == "FINISHED"}
    out = {}
    for t in trials:
        why = sources.stale(t.spec.model.components(), recorded.get(t.spec_hash))
        if why:
            out[t.spec_hash] = why
    return out


def forget(store, study: str, workdir: Path, hashes: set[str]) -> int:
    """Delete the tracked runs and the checkpoint folders of ``hashes``; returns the runs deleted."""
    deleted = store.delete_trial_runs(study, hashes)
    for spec_hash in hashes:
        shutil.rmtree(layout.trial_dir(workdir, spec_hash), ignore_errors=True)
    return deleted

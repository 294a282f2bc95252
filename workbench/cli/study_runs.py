"""A study's runs as the reading commands (`wb results`, `wb run --dry-run --effect`) find them:
the study file or name, its runs from the store matched to the file's trials (by name, as the
store holds them, where the file uses a component kind of a plug-in not installed here), and the
errors of a store or metric that holds nothing to show."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from foxwb.components.registry import SLOTS, kinds
from foxwb.workbench.analysis import runs as results
from foxwb.workbench.run.tracking import local_tracking_uri
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.study import expand, load_study
from foxwb.workbench.train import layout


def results_of(target: str, args: argparse.Namespace):
    """(name, study spec or None, runs frame, parent run's tags, the file's expanded trials or None)
    of a study file or name; reading creates nothing in the store. The trials are expanded once, here,
    for the readers of the file to share (None without the file, or without a store: nothing to read).
    A file whose trials name a component kind no package installed here registers (a plug-in's) is
    read as its name is: from the store, the kinds by the names its runs recorded, with a note;
    reading needs none of the study's plug-ins."""
    study = study_file(target, args)
    name = study.name if study else target
    experiment = study.experiment if study else None
    study = readable(study, target, "table", f"wb results {name}")
    store = results.read_store(Path(args.workdir), name, experiment, args.tracking_uri)
    if store is None:
        return name, study, pl.DataFrame(), {}, None
    parent = results.study_parent(store, name)
    tracked = results.all_runs(store, name)
    runs = results.trial_runs(Path(args.workdir), name, runs=tracked)
    runs = results.with_test_documents(store, runs, tracked)  # for the claims' seed x document interval
    trials = None
    if study is not None:
        trials = expand(study)
        foreign = _not_planned(study, trials, runs)
        if foreign:
            print(f"note: {len(foreign)} of the {runs['spec_hash'].n_unique()} trials stored under study {name!r} are not "
                  f"trials of {target} (spec hashes it does not give: another study of that name, or rows it has "
                  "dropped or changed since); they are shown as the store names them", file=sys.stderr)
        runs, renamed = results.as_planned(runs, trials)
        for old, new in renamed.items():
            print(f"note: the runs recorded as {old!r} are the trials {target} now names {new!r} (the same "
                  "spec hashes); they are shown under the file's name", file=sys.stderr)
    return name, study, runs, (parent.data.tags if parent else {}), trials


def study_file(target: str, args: argparse.Namespace):
    """The study file ``target`` as its command reads it, with its ``--set`` edits (as `wb run` was
    given them: the same trials, the same spec hashes); None where ``target`` is a study's name."""
    edits = getattr(args, "overrides", None) or []
    if edits and isinstance(args.study, list) and len(args.study) > 1:
        raise SpecError(f"{edits[0]}: --set edits one study file; to compare two studies as they ran, give each its own "
                        "file with the edit written in, or their names")
    if target.endswith((".yaml", ".yml")):
        return load_study(target, edits)
    if edits:
        raise SpecError(f"{edits[0]}: {target!r} is a study's name, read from the store as it ran; --set edits a study "
                        "file (give the file, with the --set edits `wb run` was given)")
    return None


def _not_planned(study, trials: list, runs: pl.DataFrame) -> set[str]:
    """Spec hashes of the stored runs that are none of the file's trials; empty where the file cannot
    list all of its trials up front (an Optuna search draws them, a confirmation follows a choice)."""
    if runs.is_empty() or (study.search is not None and (study.search.algorithm == "optuna" or study.search.confirm)):
        return set()
    return set(runs["spec_hash"].to_list()) - {t.spec_hash for t in trials}


def readable(study, target: str, what: str, by_name: str):
    """``study`` where this machine can expand its trials, else None with a note on stderr: a file
    that uses a kind of a plug-in not installed here is read as its name is (``by_name``, the
    command), from the store, the kinds by the names its runs recorded."""
    missing = kinds_not_installed(study.model_dump(mode="json")) if study is not None else []
    if not missing:
        return study
    print(f"note: {target} uses {', '.join(f'{k!r} ({slot})' for slot, k in missing)}, not installed here: its "
          f"{what} is read from the store as `{by_name}` reads it, the kinds by name; the file's trials "
          "(renamed rows, stale results, trials not yet run) need the plug-in", file=sys.stderr)
    return None


def kinds_not_installed(data) -> list[tuple[str, str]]:
    """(slot, kind) of every component kind a study file's data writes that no package installed here
    registers: a slot's value (``forget_gate: temp_gate``, ``{kind: temp_gate, ...}``) or its
    ``kind``, under any key, a dotted path of an edit included (``model.attention.forget_gate``)."""
    found = set()

    def check(slot: str, value) -> None:
        kind = value.get("kind") if isinstance(value, dict) else value
        if isinstance(kind, str) and kind not in kinds(slot):
            found.add((slot, kind))

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                parts = str(key).split(".")
                if parts[-1] in SLOTS:
                    check(parts[-1], value)
                elif parts[-1] == "kind" and len(parts) > 1 and parts[-2] in SLOTS:
                    check(parts[-2], value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data)
    return sorted(found)


def no_trials(name: str, args: argparse.Namespace) -> str:
    """Why a study has nothing to show: no store there, or the studies the store does hold."""
    where = args.tracking_uri or args.workdir
    if not layout.has_store(Path(args.workdir), args.tracking_uri):
        return f"no trials of study {name!r} in {where}: no tracking store there (run the study there first, or give the --workdir it ran in)"
    held = [s for s, _ in results.studies(args.tracking_uri or local_tracking_uri(Path(args.workdir)))]
    return f"no trials of study {name!r} in {where}; " + (f"its store holds {', '.join(map(repr, held))}" if held
                                                           else "its store holds no study yet")


def check_metric(runs, metric: str) -> None:
    done = runs.filter(runs["status"] == "FINISHED")
    recorded = sorted(c for c in done.columns if done[c].dtype.is_float() and done[c].drop_nulls().len())
    if done.height and metric not in recorded:
        raise SpecError(f"--metric {metric!r} is not a final metric of these trials; recorded: {', '.join(recorded)}")

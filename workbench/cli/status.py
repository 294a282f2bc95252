"""``wb status``: every trial of a study (or of every study in the store) and its state: running
with tokens, loss and ETA; finished; failed with the reason; to run."""
from __future__ import annotations

import argparse
from pathlib import Path

from foxwb.workbench.analysis import runs as results, status
from foxwb.workbench.run.tracking import local_tracking_uri
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.cli.study_runs import readable, study_file
from foxwb.workbench.spec.study import expand
from foxwb.workbench.train import layout


def command(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir)
    if not layout.has_store(workdir, args.tracking_uri):
        first = (f"`wb run {args.study} --workdir {workdir}` starts it" if args.study and args.study.endswith((".yaml", ".yml"))
                 else "run a study first")
        raise SpecError(f"--workdir {workdir}: no tracking store here (mlflow.db); {first}")
    if args.overrides and not args.study:
        raise SpecError(f"{args.overrides[0]}: --set edits a study file; give the file (`wb status FILE --set ...`)")
    if args.study:
        study = study_file(args.study, args)  # with its --set edits, as `wb run` read it
        name = study.name if study else args.study
        store = results.read_store(workdir, name, study.experiment if study else None, args.tracking_uri)
        study = readable(study, args.study, "status", f"wb status {name}")
        where = args.tracking_uri or workdir
        held = ", ".join(n for n, _ in results.studies(args.tracking_uri or local_tracking_uri(workdir))) or "none"
        if store is None and study is None:
            raise SpecError(f"study {name!r}: not in {where} (the studies there: {held})")
        runs = results.all_runs(store, name) if store is not None else []
        states = status.trial_states(store, runs, expand(study) if study else None, no_driver=status.no_driver(store, name))
        print("\n".join(status.lines(name, states)))
        if store is None:
            print(f"study {name!r} has not run in {where} (the studies there: {held}); "
                  f"`wb run {args.study} --workdir {workdir}"
                  + (f" --tracking-uri {args.tracking_uri}" if args.tracking_uri else "") + "` starts it")
        return 0
    uri = args.tracking_uri or local_tracking_uri(workdir)
    found = results.studies(uri)
    for name, experiment in found:
        store = results.read_store(workdir, name, experiment, args.tracking_uri)
        states = status.trial_states(store, results.all_runs(store, name), no_driver=status.no_driver(store, name))
        print("\n".join(status.lines(name, states)))
    if not found:
        print(f"no studies in {args.tracking_uri or workdir}")
    return 0

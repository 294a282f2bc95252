"""``wb run``: a study on Ray Tune, every trial not yet finished, tracked in MLflow (its dry run:
workbench/cli/dry_run.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

from foxwb.workbench.data import test_check
from foxwb.workbench.run.runner import run_study
from foxwb.workbench.run.summary import report as report_run
from foxwb.workbench.spec import overrides
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.study import expand, load_study
from foxwb.workbench.train import faults
from foxwb.workbench.train.telemetry import Telemetry


def command(args: argparse.Namespace) -> int:
    planning = [flag for flag, value in (("--effect", args.effect), ("--base", args.base), ("--metric", args.metric))
                if value is not None]
    if planning and not args.dry_run:  # refused before the study is read: never a run by a forgotten flag
        raise SpecError(f"{' and '.join(planning)} go{'es' if len(planning) == 1 else ''} with --dry-run "
                        "(they plan the seeds; `wb run` without --dry-run runs the study)")
    study = load_study(args.study, args.overrides)
    workdir = Path(args.workdir)
    if args.dry_run:
        # The dry run reads the store through the analysis stage, which needs polars; `wb run` itself
        # must not import it: the GPU machine runs studies without polars or plotly installed.
        from foxwb.workbench.cli.dry_run import dry_run

        return dry_run(study, workdir, args)
    faults.check_store(workdir)
    test_check.refuse(test_check.check_trials(expand(study)))  # a test split too small: refused before a trial starts
    given = args.study + overrides.shown(args.overrides)  # the file as this run read it, for the commands it suggests
    again = f"wb run {given} --workdir {args.workdir}"
    if study.plan() is not None:  # seeds by plan: look by look (docs/statistics.md, "Seeds by plan")
        # Imported here: its judgement needs scipy, which a study with listed seeds does without
        # (the GPU machine's set of packages may lack it).
        from foxwb.workbench.cli.seed_plan import run_by_plan

        code = run_by_plan(study, workdir, again, ray_address=args.ray_address, tracking_uri=args.tracking_uri,
                           max_concurrent=args.max_concurrent, telemetry=Telemetry(period_s=args.gpu_sample_seconds),
                           progress_seconds=args.progress_seconds, take_over=args.take_over, rerun_selectors=args.rerun)
        print(f"results: wb results {given} --workdir {args.workdir}")
        return code
    run = run_study(study, workdir, ray_address=args.ray_address, tracking_uri=args.tracking_uri,
                    max_concurrent=args.max_concurrent, telemetry=Telemetry(period_s=args.gpu_sample_seconds),
                    progress_seconds=args.progress_seconds, take_over=args.take_over, rerun_selectors=args.rerun,
                    report=lambda r: report_run(study, r, again))
    code = report_run(study, run, again)
    print(f"results: wb results {given} --workdir {args.workdir}")
    return code

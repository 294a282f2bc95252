"""``wb run`` of a study whose seeds are a plan (``seeds: {start, step, max}``; docs/statistics.md,
"Seeds by plan"): the study on its first ``start`` seeds, then ``step`` more at each look, judging
its claims after each (foxwb.workbench.analysis.sequential) and stopping once every claim is
decided, or at ``max``. A study stopped between looks goes on where it was when run again: the
finished seeds are done by spec hash and the judgement is made again from the store.

It reads the store through MLflow alone and imports no polars: the GPU machine runs studies
without it.
"""
from __future__ import annotations

import json
from pathlib import Path

from foxwb.workbench.analysis import sequential
from foxwb.workbench.run.runner import run_study
from foxwb.workbench.run.summary import report as report_run
from foxwb.workbench.run.tracking import open_store
from foxwb.workbench.spec.claims import DEFAULT_SESOI
from foxwb.workbench.spec.study import StudySpec, base_variant, variant_names


def claims_of(study: StudySpec) -> list[tuple[str, str, str, float]]:
    """(name, A, B, sesoi) of the declared claims, else one per variant against the base at the
    default SESOI (the default claims of `wb results`)."""
    if study.claims:
        return [(c.name, c.compare[0], c.compare[1], c.sesoi) for c in study.claims]
    base = base_variant(study.design)
    return [(v, v, base, DEFAULT_SESOI) for v in variant_names(study) if v != base]


def store_values(study: StudySpec, workdir: Path, tracking_uri: str | None) -> dict[str, dict[int, float]]:
    """variant -> {seed: final loss} of the finished runs not stopped early: test_loss where every
    one records it, else val_loss (as the table reads them)."""
    store = open_store(workdir, study.experiment, tracking_uri)
    if store is None:
        return {}
    done = [r for r in store.trial_runs(study.name)
            if r.info.status == "FINISHED" and r.data.tags.get("stopped_early") != "true"]
    loss = "test_loss" if done and all("test_loss" in r.data.metrics for r in done) else "val_loss"
    out: dict[str, dict[int, float]] = {}
    for r in done:
        if loss not in r.data.metrics:
            continue
        names = [r.data.tags["variant"], *json.loads(r.data.tags.get("aliases", "[]"))]
        for name in names:
            out.setdefault(name, {})[int(r.data.tags["seed"])] = r.data.metrics[loss]
    return out


def run_by_plan(study: StudySpec, workdir: Path, again: str, **settings) -> int:
    """Each look of the plan in turn; returns `wb run`'s exit code."""
    plan, claims = study.seed_plan, claims_of(study)
    level = sequential.nominal_alpha(plan, study.alpha)
    code = 0
    for n in plan.looks:
        look = study.model_copy(update={"seeds": list(range(n))})
        print(f"study {study.name!r}: look at {n} seeds (plan: {plan.start}, then {plan.step} more a look, at most "
              f"{plan.max}; each look tests at {level:.4f} so that {study.alpha:g} holds over all of them)", flush=True)
        run = run_study(look, workdir, report=lambda r, look=look: report_run(look, r, again), **settings)
        code = report_run(look, run, again)
        if code != 0:
            print(f"study {study.name!r}: the look at {n} seeds did not finish every trial; the plan goes on when "
                  f"`{again}` runs again", flush=True)
            return code
        # The looks so far only: a study run again, its later seeds stored, is judged as it went.
        values = {row: {s: v for s, v in by_seed.items() if s < n}
                  for row, by_seed in store_values(study, workdir, settings.get("tracking_uri")).items()}
        records = sequential.judge(claims, values, plan, study.alpha)
        for r in records:
            state = f"{r['verdict']} at {r['look']} seeds" if r["final"] else "open"
            print(f"  claim {r['name']!r} ({r['a_row']} vs {r['b_row']}): {state}", flush=True)
        if all(r["final"] for r in records):
            undecided = sum(r["verdict"] == "inconclusive" for r in records)
            if n < plan.max:
                print(f"study {study.name!r}: every claim decided by the look at {n} seeds; the plan stops "
                      f"({plan.max - n} seeds a row not run)", flush=True)
            else:
                print(f"study {study.name!r}: the plan's last look ({n} seeds); {undecided} of {len(records)} claims "
                      "undecided: inconclusive", flush=True)
            return code
    return code

"""``wb run`` of a study whose seeds are a plan (``seeds: {start, step, max}``, or the same under
``search.confirm.seeds``; docs/statistics.md, "Seeds by plan"): the study on its first ``start``
seeds, then ``step`` more at each look, judging its claims after each
(foxwb.workbench.analysis.sequential) and stopping once every claim is decided, or at ``max``. A
confirmation's plan runs the search at the first look (its choice is made once, from the search's
trials) and adds confirmation seeds at the later ones. A study stopped between looks goes on where
it was when run again: the finished trials are done by spec hash and the judgement is made again
from the store.

It reads the store through MLflow alone and imports no polars: the GPU machine runs studies
without it.
"""
from __future__ import annotations

import json
from pathlib import Path

from foxwb.workbench.analysis import sequential
from foxwb.workbench.run.confirm import choose
from foxwb.workbench.run.runner import run_study
from foxwb.workbench.run.summary import report as report_run
from foxwb.workbench.run.tracking import open_store
from foxwb.workbench.spec.claims import DEFAULT_SESOI
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.seed_plan import SeedPlan
from foxwb.workbench.spec.study import StudySpec, base_variant, variant_names


def claims_of(study: StudySpec) -> list[tuple[str, str, str, float]]:
    """(name, A, B, sesoi) of the declared claims, else one per variant against the base at the
    default SESOI (the default claims of `wb results`)."""
    if study.claims:
        return [(c.name, c.compare[0], c.compare[1], c.sesoi) for c in study.claims]
    base = base_variant(study.design)
    return [(v, v, base, DEFAULT_SESOI) for v in variant_names(study) if v != base]


def at_look(study: StudySpec, n: int) -> StudySpec:
    """The study as it runs at the look of ``n`` seeds: its seeds (or its confirmation's) the look's."""
    plan = study.plan()
    if study.seed_plan is not None:
        return study.model_copy(update={"seeds": plan.seeds_at(n)})
    confirm = study.search.confirm.model_copy(update={"seeds": plan.seeds_at(n)})
    return study.model_copy(update={"search": study.search.model_copy(update={"confirm": confirm})})


def store_values(study: StudySpec, workdir: Path, tracking_uri: str | None) -> dict[str, dict[int, float]]:
    """variant -> {seed: final loss} of the finished runs not stopped early, as the table reads
    them: test_loss where every one records it, else val_loss; in a tune-then-confirm study, the
    runs at each variant's chosen point (its confirmation row)."""
    store = open_store(workdir, study.experiment, tracking_uri)
    if store is None:
        return {}
    done = [r for r in store.trial_runs(study.name)
            if r.info.status == "FINISHED" and r.data.tags.get("stopped_early") != "true"]
    # The rule of foxwb.workbench.analysis.table.report_metric, over the same runs (without polars).
    loss = "test_loss" if done and all("test_loss" in r.data.metrics for r in done) else "val_loss"
    if study.search is not None and study.search.confirm is not None:
        labels = {v: c.label for v, c in choose(study, done).items()}
        done = [r for r in done if labels.get(r.data.tags["variant"]) == r.data.tags.get("search_point", "")]
    out: dict[str, dict[int, float]] = {}
    for r in done:
        if loss not in r.data.metrics:
            continue
        names = [r.data.tags["variant"], *json.loads(r.data.tags.get("aliases", "[]"))]
        for name in names:
            out.setdefault(name, {})[int(r.data.tags["seed"])] = r.data.metrics[loss]
    return out


def standing(study: StudySpec, workdir: Path, tracking_uri: str | None) -> tuple[int, bool] | None:
    """Where the study's plan stands, judged from the store: (the look the plan is at, whether it
    has ended there). The look: where every claim is final, the last look judged; else the look of
    the open claim that is furthest behind (0: the first look has not finished). None without runs."""
    plan = study.plan()
    values = store_values(study, workdir, tracking_uri)
    if not values:
        return None
    records = sequential.judge(claims_of(study), values, plan, study.alpha)
    if all(r["final"] for r in records):
        return max(r["look"] for r in records), True
    return min(r["look"] or 0 for r in records if not r["final"]), False


def _next_look(plan, reached: int) -> int:
    return next(n for n in plan.looks if n > reached) if reached else plan.start


def status_of(plan, seed: int, where: tuple[int, bool] | None) -> str | None:
    """A trial's status in the dry run where the plan decides it (a seed beyond the look it is at),
    else None."""
    reached, ended = where or (0, False)
    if seed in plan.seeds_at(reached):
        return None
    if ended:
        return f"not to run: the plan ended at the look of {reached} seeds"
    following = _next_look(plan, reached)
    if seed in plan.seeds_at(following):
        return None if not reached else "to run: the plan's next look"
    return f"to run if a claim is still open after the look at {following} seeds"


def standing_line(study: StudySpec, where: tuple[int, bool] | None) -> str:
    plan = study.plan()
    seeds = lambda n: f"{plan.first + n - 1}" if n == 1 else f"{plan.first}-{plan.first + n - 1}"
    if where is None:
        return f"the plan: no look has run; `wb run` runs the first (seeds {seeds(plan.start)})"
    reached, ended = where
    if ended and reached < plan.max:
        return f"the plan: every claim decided by the look at {reached} seeds; it has ended (seeds beyond {seeds(reached)} do not run)"
    if ended:
        return f"the plan: ran to its last look ({reached} seeds); a claim undecided there is inconclusive"
    if not reached:
        return f"the plan: its first look has not finished; `wb run` runs it (seeds {seeds(plan.start)})"
    return (f"the plan: a claim is open after the look at {reached} seeds; `wb run` runs the next look "
            f"(seeds {seeds(_next_look(plan, reached))})")


def changed_plan(study: StudySpec, workdir: Path, tracking_uri: str | None) -> str | None:
    """Why the study's plan may not run as written, else None: its looks have run under another
    plan (tagged on the parent run), and a plan changed after looking judges those looks again at
    another level, or past the end the plan had."""
    store = open_store(workdir, study.experiment, tracking_uri)
    parent = store.study_parent(study.name) if store is not None else None
    tagged = store.client.get_run(parent).data.tags.get("seed_plan") if parent is not None else None
    if tagged is None or SeedPlan.model_validate_json(tagged) == study.plan():
        return None
    was = SeedPlan.model_validate_json(tagged)
    return (f"seeds: study {study.name!r} ran its looks under the plan {{start: {was.start}, step: {was.step}, max: "
            f"{was.max}, first: {was.first}}}; a plan changed after its looks ran would judge them again at another "
            "level, or past where the plan ended (seeds added after looking). Put that plan back, or run the new one "
            "as a study of another name")


def run_by_plan(study: StudySpec, workdir: Path, again: str, **settings) -> int:
    """Each look of the plan in turn; returns `wb run`'s exit code."""
    why = changed_plan(study, workdir, settings.get("tracking_uri"))
    if why:
        raise SpecError(why)
    plan, claims = study.plan(), claims_of(study)
    whose = "" if study.seed_plan is not None else "confirmation "
    level = sequential.nominal_alpha(plan, study.alpha)
    code = 0
    for n in plan.looks:
        look = at_look(study, n)
        print(f"study {study.name!r}: look at {n} {whose}seeds (plan: {plan.start}, then {plan.step} more a look, at most "
              f"{plan.max}; each look tests at {level:.4f} so that {study.alpha:g} holds over all of them)", flush=True)
        run = run_study(look, workdir, report=lambda r, look=look: report_run(look, r, again), **settings)
        settings["rerun_selectors"] = None  # --rerun names the trials stored when it was given: the first look's
        code = report_run(look, run, again)
        if code != 0:
            print(f"study {study.name!r}: the look at {n} seeds did not finish every trial; the plan goes on when "
                  f"`{again}` runs again", flush=True)
            return code
        # The looks so far only: a study run again, its later seeds stored, is judged as it went.
        seeds = set(plan.seeds_at(n))
        values = {row: {s: v for s, v in by_seed.items() if s in seeds}
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

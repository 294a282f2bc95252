"""Tune, then confirm (``search.confirm`` of a study): the search runs as any search does; then each
variant's best setting runs on the confirmation seeds, as ordinary trials (spec hashes, resume,
dedup: a confirmation trial that is a search trial already run is not run again).

- **The choice** is made from the variant's FINISHED search trials that were not stopped early
  (ASHA): the searched point with the lowest mean ``confirm.metric`` over its seeds (the first
  drawn on a tie). It is recorded on the study's parent run (tags ``confirm_choice``,
  ``confirm_seeds``, ``confirm_metric``), where the study table reads it.
  A search trial that failed (a learning rate that diverges) is left out of the choice, not waited
  for; a variant with no finished point is an error.
- **A crossed design** chooses per cell, each variant at each point of the axis (its row in the
  study table, ``FoX (Pro) [context=1024]``): the point's best learning rate, say, is its own.
- **The stages** are run one after the other by the runner (foxwb.workbench.run.runner.run_study),
  each as a list of trials: ``search_stage``'s, then ``confirmation_trials`` of the choices
  (``best_points``) under ``confirmation_stage``. A driver stopped between them finds the search
  done on its next run and goes on with the confirmation.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.spec.study import CrossedDesign, StudySpec, Trial, cell_of, expand, point_name, with_point

STAGE = "confirm"  # the ``stage`` tag of a confirmation trial's run


@dataclass(frozen=True)
class Choice:
    variant: str
    point: tuple  # ((path, value), ...)
    label: str
    mean: float
    n_seeds: int


def edge_note(study: StudySpec, choice: Choice) -> str:
    """Where a chosen value is the smallest or largest of three or more numbers a field searched
    (a `choice` list): the best may lie beyond the values tried. Else ""."""
    notes = []
    space = study.search.space_of(choice.variant.split(" [")[0])  # a crossed design's cell: its variant's
    for path, value in choice.point:
        d = space.get(path)
        values = [v for v in (d.choice or []) if isinstance(v, (int, float)) and not isinstance(v, bool)] if d else []
        if len(values) >= 3 and value in (min(values), max(values)):
            side = "largest" if value == max(values) else "smallest"
            notes.append(f"{point_name(path)}={value:g} is the {side} value searched: the best may lie beyond it")
    return "; ".join(notes)


def search_stage(study: StudySpec) -> StudySpec:
    """The study without its confirmation: the search alone."""
    return study.model_copy(update={"search": study.search.model_copy(update={"confirm": None})})


def confirmation_stage(study: StudySpec) -> StudySpec:
    """The study its confirmation trials run under: no search (they are ordinary trials)."""
    return study.model_copy(update={"search": None})


def choose(study: StudySpec, runs: list) -> dict[str, Choice]:
    """variant (a crossed design: each cell, the variant at a point) -> its best search point, from
    ``runs`` (MLflow runs of the study's trials). A cell's point holds the axis's value first."""
    confirm = study.search.confirm
    space = study.search.paths()
    axis = [study.design.axis] if isinstance(study.design, CrossedDesign) else []
    by_point: dict[tuple[str, str], dict] = {}
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        if (run.info.status != "FINISHED" or tags.get("stage") == STAGE or tags.get("stopped_early") == "true"
                or confirm.metric not in metrics or "search_values" not in tags):
            continue
        values = json.loads(tags["search_values"])
        if any(a not in values for a in axis):
            continue
        point = tuple((path, values[path]) for path in axis + space if path in values)
        cell = cell_of(study, tags["variant"], values)
        entry = by_point.setdefault((cell, json.dumps(point)), {"point": point, "label": tags.get("search_point", ""),
                                                                "values": {}, "start": run.info.start_time})
        entry["values"][int(tags["seed"])] = metrics[confirm.metric]
    best: dict[str, Choice] = {}
    for (variant, _), entry in sorted(by_point.items(), key=lambda kv: kv[1]["start"]):
        mean = sum(entry["values"].values()) / len(entry["values"])
        if variant not in best or mean < best[variant].mean:
            best[variant] = Choice(variant, entry["point"], entry["label"], mean, len(entry["values"]))
    return best


def confirmation_trials(study: StudySpec, choices: dict[str, Choice]) -> list[Trial]:
    """Each chosen variant's (or cell's) best point on the confirmation seeds."""
    templates: dict[str, Trial] = {}
    for t in expand(search_stage(study)):
        templates.setdefault(cell_of(study, t.variant, dict(t.search_point)), t)
    out = []
    for key, choice in choices.items():
        template = templates[key]
        at_point = with_point(template, {p: v for p, v in choice.point if p in study.search.space_of(template.variant)})
        for seed in study.search.confirm.seeds:
            spec = TrialSpec.model_validate({**at_point.spec.model_dump(mode="json"), "seed": seed})
            out.append(Trial(template.variant, seed, spec, tuple(choice.point), template.aliases, stage=STAGE))
    return out


def choice_tags(study: StudySpec, choices: dict[str, Choice]) -> dict[str, str]:
    confirm = study.search.confirm
    choice = {v: {"point": c.label, "values": dict(c.point), "mean": c.mean, "n_seeds": c.n_seeds} for v, c in choices.items()}
    tags = {"confirm_choice": json.dumps(choice), "confirm_seeds": json.dumps(list(confirm.seeds)),
            "confirm_metric": confirm.metric}
    if confirm.seed_plan is not None:  # `wb results NAME` and the dashboard judge the claims look by look
        tags["seed_plan"] = json.dumps(confirm.seed_plan.model_dump())
    return tags


def best_points(study: StudySpec, runs: list) -> dict[str, Choice]:
    """``choose`` once the search has finished, every variant (a crossed design: every cell)
    with its choice: one with no finished search trial that reports the metric is an error."""
    choices = choose(study, runs)
    variants = list(dict.fromkeys(cell_of(study, t.variant, dict(t.search_point)) for t in expand(search_stage(study))))
    missing = [v for v in variants if v not in choices]
    if missing:
        raise SpecError(f"search.confirm: no finished search trial of {', '.join(map(repr, missing))} reports "
                        f"{study.search.confirm.metric!r}; nothing to confirm")
    return choices

"""Seeds by plan (docs/statistics.md, "Seeds by plan"): ``seeds: {start, step, max}`` of a study
without a search, or of a search's confirmation (``search.confirm.seeds``), read into a SeedPlan.
Part of a study file (foxwb.workbench.spec.study, foxwb.workbench.spec.search); the looks run in
foxwb.workbench.cli.seed_plan and are judged in foxwb.workbench.analysis.sequential."""
from __future__ import annotations

from pydantic import Field, NonNegativeInt, ValidationError, model_validator

from foxwb.workbench.spec.base import Spec

FORM = ("{start, step, max}: start >= 2 seeds at the first look (3 or more decide more often), step >= 1 seeds "
        "more at each look, max >= start; first, optional: the first seed")


class SeedPlan(Spec):
    """Seeds ``first`` .. ``first + start - 1`` first, then ``step`` more at each look, at most
    ``max`` seeds; each claim is judged at every look and final at the first that decides it.
    ``first`` is 0 for a study's seeds; a confirmation's plan starts after the search's seeds
    unless it says otherwise (foxwb.workbench.spec.study)."""

    start: int = Field(ge=2)
    step: int = Field(ge=1)
    max: int = Field(ge=2, le=10_000)
    first: NonNegativeInt = 0

    @model_validator(mode="after")
    def _max_above_start(self):
        if self.max < self.start:
            raise ValueError(f"max={self.max} is below start={self.start}")
        return self

    @property
    def looks(self) -> list[int]:
        """The number of seeds at each look."""
        out = list(range(self.start, self.max, self.step))
        return out + [self.max]

    def seeds_at(self, n: int) -> list[int]:
        """The seeds of the look at ``n`` seeds."""
        return list(range(self.first, self.first + n))

    @property
    def seeds(self) -> list[int]:
        """Every seed the plan may run: those of its last look."""
        return self.seeds_at(self.max)


def read_plan(data: dict, where: str) -> SeedPlan:
    """``data`` (a mapping under ``where``, e.g. ``seeds``) as a SeedPlan; its first mistake
    located (``seeds.start``) with the plan's form, as a ValueError."""
    try:
        return SeedPlan.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        inner = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}{'.' + inner if inner else ''}: {first['msg'].removeprefix('Value error, ')} "
                         f"(a plan is {FORM})") from None


def plan_under_seeds(data):
    """A spec's raw mapping with a plan written under ``seeds`` read into ``seed_plan``, ``seeds``
    the plan's (the before-validator of a study and of a confirmation)."""
    if isinstance(data, dict) and isinstance(data.get("seeds"), dict):
        if data.get("seed_plan") is not None:
            raise ValueError("seeds: a plan {start, step, max} or a list, not both seeds and seed_plan")
        plan = read_plan(data["seeds"], "seeds")
        data = {**data, "seeds": plan.seeds, "seed_plan": plan.model_dump()}
    return data


def check_plan_seeds(seeds: list[int], plan: SeedPlan) -> None:
    """``seeds`` must be ``plan``'s (a dumped spec read back): else a ValueError saying what seed_plan is."""
    if list(seeds) != plan.seeds:
        raise ValueError(f"seed_plan: the stored form of a plan {{start, step, max}} written under seeds, whose seeds "
                         f"are {plan.seeds[0]} .. {plan.seeds[-1]}; write the plan under seeds")

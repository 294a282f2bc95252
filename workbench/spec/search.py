"""A study's search: the searched fields' distributions, the algorithm that draws them, ASHA's
early stopping and the confirmation stage (tune, then confirm). Part of a study file
(foxwb.workbench.spec.study); Ray Tune and Optuna carry it out (foxwb.workbench.run.runner, foxwb.workbench.run.confirm)."""
from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from foxwb.workbench.spec.base import Spec
from foxwb.workbench.spec.seed_plan import SeedPlan, check_plan_seeds, plan_under_seeds
from foxwb.workbench.spec.trial import Seeds


class Distribution(Spec):
    """One searched field: exactly one of loguniform [lo, hi], uniform [lo, hi], choice [...]."""

    loguniform: tuple[PositiveFloat, PositiveFloat] | None = None
    uniform: tuple[float, float] | None = None
    choice: Annotated[list[Any], Field(min_length=1)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_key_form(cls, data):
        # A form from other tools ({kind: loguniform, low: a, high: b}) gets this one's spelling,
        # not one "extra input" line per key.
        if isinstance(data, dict) and "kind" in data and not set(data) & set(cls.model_fields):
            kind = data["kind"]
            if kind in ("loguniform", "uniform") and {"low", "high"} <= set(data):
                form = f"{{{kind}: [{data['low']}, {data['high']}]}}"
            elif kind == "choice" and ("values" in data or "choices" in data):
                form = f"{{choice: {data.get('values', data.get('choices'))}}}"
            else:
                form = "{loguniform: [lo, hi]}, {uniform: [lo, hi]} or {choice: [...]}"
            raise ValueError(f"a searched field is one key and its values: write {form} (got keys {sorted(data)})")
        return data

    @model_validator(mode="after")
    def _exactly_one(self):
        given = [k for k in ("loguniform", "uniform", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of loguniform, uniform, choice (got {given or 'none'})")
        for key in ("loguniform", "uniform"):
            bounds = getattr(self, key)
            if bounds is not None and bounds[0] > bounds[1]:
                raise ValueError(f"{key}: [low, high], low first (got [{bounds[0]:g}, {bounds[1]:g}]; "
                                 f"write [{bounds[1]:g}, {bounds[0]:g}])")
        return self

    def sample(self, rng: np.random.Generator) -> Any:
        if self.loguniform is not None:
            lo, hi = self.loguniform
            return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        if self.uniform is not None:
            return float(rng.uniform(*self.uniform))
        return self.choice[int(rng.integers(len(self.choice)))]

    def tune_domain(self):
        """The same distribution as a Ray Tune search domain (for the Optuna search)."""
        from ray import tune  # Ray Tune takes seconds to import; only a study that runs an Optuna search needs it

        if self.loguniform is not None:
            return tune.loguniform(*self.loguniform)
        if self.uniform is not None:
            return tune.uniform(*self.uniform)
        return tune.choice(self.choice)

    def grid(self) -> list[Any]:
        """The values a grid runs (a grid search's fields are choices: SearchSpec checks)."""
        return list(self.choice)


class ASHASpec(Spec):
    """Asynchronous successive halving on validation loss, time measured in training tokens."""

    grace_tokens: PositiveInt
    reduction_factor: Annotated[float, Field(gt=1)] = 3.0


class ConfirmSpec(Spec):
    """Tune, then confirm: after the search, each variant's best setting (lowest mean ``metric``
    over the seeds of its finished search trials, none stopped early) runs on ``seeds``; the study
    table compares those confirmation runs (workbench/run/confirm.py). ``seeds: {start, step, max}``
    is a plan (foxwb.workbench.spec.seed_plan): read into ``seed_plan``, ``seeds`` its seeds."""

    seeds: Seeds
    metric: Literal["val_loss", "val_ppl"] = "val_loss"
    seed_plan: SeedPlan | None = None

    @model_validator(mode="before")
    @classmethod
    def _seeds_by_plan(cls, data):
        return plan_under_seeds(data)

    @model_validator(mode="after")
    def _seeds_are_the_plans(self):
        if self.seed_plan is not None:
            check_plan_seeds(self.seeds, self.seed_plan)
        return self


class SearchSpec(Spec):
    """Per-variant hyperparameter search: each variant (and seed) gets ``num_samples`` draws.
    ``random`` and ``grid`` draw up front (the draws are trials with spec hashes like any other);
    ``optuna`` draws adaptively through Ray Tune's OptunaSearch, warm-started on resume with the
    draws already finished. ``confirm`` runs each variant's best draw again on its own seeds.
    ``variants`` adds paths searched for one variant only (a knob the others lack, or that was
    tuned for one arm: docs/results.md, "The fairness report"), beside ``space``, which every
    variant searches."""

    space: dict[str, Distribution] = {}
    variants: dict[str, dict[str, Distribution]] = {}
    algorithm: Literal["random", "grid", "optuna"] = "random"
    num_samples: PositiveInt = 4
    seed: NonNegativeInt = 0
    asha: ASHASpec | None = None
    confirm: ConfirmSpec | None = None

    def space_of(self, variant: str) -> dict[str, Distribution]:
        """What ``variant`` searches: the shared space and its own."""
        return {**self.space, **self.variants.get(variant, {})}

    def paths(self) -> list[str]:
        """Every searched path, the shared space's first."""
        return list(dict.fromkeys([*self.space, *(p for own in self.variants.values() for p in own)]))

    @model_validator(mode="after")
    def _each_path_in_one_place(self):
        for variant, own in self.variants.items():
            for path in own:
                if path in self.space:
                    raise ValueError(f"variants.{variant}.{path}: also in space, which every variant searches; "
                                     "give it in one place (space for every variant, variants for one)")
        return self

    @model_validator(mode="after")
    def _something_searched(self):
        if not self.space and not any(self.variants.values()):
            raise ValueError("space: nothing to search; give space (every variant) or variants (one variant's own)")
        return self

    @model_validator(mode="after")
    def _grid_takes_choices(self):
        if self.algorithm == "grid":
            for path, dist in [*self.space.items(), *(i for own in self.variants.values() for i in own.items())]:
                if dist.choice is None:
                    form = "loguniform" if dist.loguniform is not None else "uniform"
                    raise ValueError(f"space.{path}: algorithm 'grid' runs listed values only: give "
                                     f"{{choice: [...]}} here, or draw from the {form} range with algorithm "
                                     "'random' or 'optuna'")
        return self

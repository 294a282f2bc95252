"""Study files: a base trial, a design of variants, seeds, an optional search; expanded into trials.

Designs address fields by dotted path (``model.attention.qk_norm: none``):
- ``grid``: the cartesian product of axes;
- ``ablation``: the base plus one change at a time;
- ``cumulative``: changes applied one after another, each prefix a variant (Table 3, upper half);
- ``variants``: an explicit list of named variants, each on the study's seeds or its own.
Seeds multiply every design. A study file is data: nothing in it is imported or executed.
A study file may say ``extends: other.yaml`` (relative to its folder) and give only its name and
what differs: the other file's keys, merged under its own (load_study, merge_extended).
"""
from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (Field, PositiveFloat, PositiveInt, PrivateAttr, TypeAdapter, ValidationError, field_validator,
                      model_validator)

from foxwb.components.registry import BLOCK_SLOTS
from foxwb.workbench.spec.claims import Claim, check_claims
# cost builds a model on the meta device for its parameter counts (a scaling design's sizes): the
# one import of the spec stage from a stage above it (tests/test_repo.py, UPWARD)
from foxwb.workbench.spec.cost import param_counts
from foxwb.workbench.spec.counts import parse_count
from foxwb.workbench.spec.errors import (Positions, SpecError, at_field, check_file_kind, format_validation_error,
                                         read_located, validate)
from foxwb.workbench.spec.fields import PathError, set_path
from foxwb.workbench.spec.overrides import Override, apply as apply_overrides, in_study
from foxwb.workbench.spec.search import SearchSpec
from foxwb.workbench.spec.seed_plan import SeedPlan, check_plan_seeds, plan_under_seeds
from foxwb.workbench.spec.trial import ModelSpec, Seeds, Spec, TrialSpec


class Change(Spec):
    """A named set of dotted-path edits."""

    name: str = Field(min_length=1)
    set: dict[str, Any] = Field(min_length=1)

    @field_validator("set", mode="before")
    @classmethod
    def _bare_set_is_empty(cls, edits):
        return {} if edits is None else edits  # `set:` with nothing under it, as YAML reads it

    @model_validator(mode="before")
    @classmethod
    def _own_seeds_are_a_variants_design_s(cls, data):
        if not isinstance(data, dict):
            return data
        name = data.get("name")
        row = f" ({name})" if isinstance(name, str) and name else ""
        if "seeds" in data and "seeds" not in cls.model_fields:
            raise ValueError(f"seeds{row}: a row runs seeds of its own only in a variants design (design.kind: "
                             "variants, `seeds:` beside a variant's `set:`); here every row runs the study's seeds")
        if "test" in data and "test" not in cls.model_fields:
            raise ValueError(f"test{row}: a row picks its test only in a variants design (design.kind: variants, "
                             "`test: welch` beside a variant's `set:`); here every row is compared paired by seed")
        return data


class Row(Change):
    """A variant of a design that applies it at several points (a crossed design's axis, a scaling
    ladder's sizes): its edits, none for the base trial itself."""

    set: dict[str, Any] = {}


class GridDesign(Spec):
    kind: Literal["grid"]
    axes: dict[str, list[Any]] = Field(min_length=1)

    @model_validator(mode="after")
    def _non_empty_axes(self):
        for path, values in self.axes.items():
            if not values:
                raise ValueError(f"axes.{path}: an axis needs at least one value")
        return self


class AblationDesign(Spec):
    kind: Literal["ablation"]
    base_name: str = "base"
    changes: list[Change] = Field(min_length=1)


class CumulativeDesign(Spec):
    kind: Literal["cumulative"]
    base_name: str = "base"
    steps: list[Change] = Field(min_length=1)


def _check_compare_to(compare_to: str | None, variants: list[Change]) -> None:
    names = [v.name for v in variants]
    if compare_to is not None and compare_to not in names:
        raise ValueError(f"compare_to: {compare_to!r} is not a variant; the variants are {names}")


class Variant(Row):
    """A variants design's row: a named set of edits (none: the base trial itself), on the study's
    ``seeds`` unless it names its own (the seeds a power analysis asks for this row: ``wb run
    --dry-run --effect``). ``test`` is how it is compared: ``paired`` by seed (the default), or
    ``welch``: unpaired, over all the seeds of each row, for a row whose own spread swamps what the
    pairing cancels (it may then run seeds the base does not; docs/statistics.md)."""

    seeds: Seeds | None = None
    test: Literal["paired", "welch"] = "paired"

    @field_validator("seeds", mode="before")
    @classmethod
    def _some_seeds(cls, seeds):
        if seeds == []:
            raise ValueError("no seeds listed: list one or more, or leave `seeds` out to run the study's")
        return seeds


class VariantsDesign(Spec):
    kind: Literal["variants"]
    variants: list[Variant] = Field(min_length=1)
    compare_to: str | None = None  # the variant deltas are taken against; default the first

    @model_validator(mode="after")
    def _known_comparison(self):
        _check_compare_to(self.compare_to, self.variants)
        return self


class ScalingDesign(Spec):
    """A ladder of model sizes (smallest first) applied to each variant; ``tokens_per_param`` makes
    each size's ``train.tokens`` follow its non-embedding parameter count (else the base's tokens);
    a list of them crosses the ladder with those token budgets (a law L(N, D) is then fitted).
    Each variant gets a law fitted to its ladder (docs/scaling.md), so a ladder has as many sizes as
    the law needs (``min_sizes``); ``extrapolate_to`` (parameters, "360M") is where each law
    predicts the loss."""

    kind: Literal["scaling"]
    sizes: list[Change]
    variants: list[Row] = Field(min_length=1)
    tokens_per_param: PositiveFloat | list[PositiveFloat] | None = None
    compare_to: str | None = None
    extrapolate_to: str | PositiveFloat | None = None

    @property
    def budgets(self) -> list[float]:
        """The tokens-per-parameter values the ladder is crossed with ([] for none, one for a path)."""
        per = self.tokens_per_param
        return [] if per is None else [per] if not isinstance(per, list) else list(per)

    @property
    def min_sizes(self) -> int:
        """The fewest sizes whose law can be fitted (foxwb.workbench.analysis.scaling.fit refuses fewer): L(N) has 3
        parameters and needs a point more; L(N, D) (several budgets) needs 3 sizes, each at 2+ budgets."""
        return 4 if len(self.budgets) < 2 else 3

    @property
    def law_needs(self) -> str:
        """Why a ladder needs min_sizes sizes, for the errors that refuse a shorter one."""
        if len(self.budgets) < 2:
            return ("a ladder needs at least 4 sizes: its law L(N) = E + A/N^alpha has 3 parameters, and a fit "
                    "needs a point more (docs/scaling.md)")
        return ("a ladder crossed with token budgets needs at least 3 sizes: its law L(N, D) = E + A/N^alpha + "
                "B/D^beta tells its two terms apart from 3 sizes and 3 token counts on (docs/scaling.md)")

    @model_validator(mode="after")
    def _a_ladder(self):
        if isinstance(self.tokens_per_param, list) and (len(self.tokens_per_param) < 1
                                                        or len(set(self.tokens_per_param)) != len(self.tokens_per_param)):
            raise ValueError(f"tokens_per_param: a list of distinct budgets, got {self.tokens_per_param}")
        if len(self.sizes) < self.min_sizes:
            raise ValueError(f"sizes: {self.law_needs}; got {len(self.sizes)}")
        for key, names in (("sizes", [c.name for c in self.sizes]), ("variants", [c.name for c in self.variants])):
            if len(set(names)) != len(names):
                raise ValueError(f"{key}: names must be unique, got {names}")
        _check_compare_to(self.compare_to, self.variants)
        if self.extrapolate_to is not None:
            parse_count(self.extrapolate_to)  # raises with the allowed forms
        return self


class CrossedDesign(Spec):
    """Each variant at every point of one axis (context length, tokens, a learning rate), a point a
    named set of edits (a context with the batch that keeps the tokens per step): the table
    compares the variants at each point, and the effect is read as a function of the axis."""

    kind: Literal["crossed"]
    variants: list[Row] = Field(min_length=1)
    axis: str = Field(min_length=1, pattern=r"^[^=,\[\]]+$")  # its name, e.g. "context"
    points: list[Change] = Field(min_length=2)
    compare_to: str | None = None

    @model_validator(mode="after")
    def _known_comparison(self):
        for key, names in (("points", [c.name for c in self.points]), ("variants", [c.name for c in self.variants])):
            if len(set(names)) != len(names):
                raise ValueError(f"{key}: names must be unique (a row is named by its variant and point), got {names}")
        _check_compare_to(self.compare_to, self.variants)
        return self


Design = Annotated[GridDesign | AblationDesign | CumulativeDesign | VariantsDesign | ScalingDesign | CrossedDesign,
                   Field(discriminator="kind")]


class Resources(Spec):
    """Per trial, or with ``workers`` per worker. ``gpu`` may be a fraction (0.25 packs four small
    trials on one GPU). ``workers``: processes per trial (Ray Train, workbench/run/ray_train.py), for
    every trial whose spec does not set ``train.workers`` itself."""

    cpu: PositiveFloat = 1.0
    gpu: Annotated[float, Field(ge=0)] = 0.0
    workers: PositiveInt | None = None


class Tracking(Spec):
    experiment: str | None = None  # default: the study's name


class StudySpec(Spec):
    name: str = Field(min_length=1)
    description: str = ""
    base: dict[str, Any] = {}
    design: Design
    seeds: Seeds = [0]
    # Seeds by plan: ``seeds: {start, step, max}`` is read into this, and ``seeds`` are the plan's (0 .. max - 1).
    seed_plan: SeedPlan | None = None
    search: SearchSpec | None = None
    resources: Resources = Resources()
    tracking: Tracking = Tracking()
    # The significance level of every comparison the results show (the paired t-test against the
    # base, and the minimal detectable effect at 80% power); docs/statistics.md.
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    # Claims: A against B with a smallest effect of interest, each given a verdict by `wb results`
    # (foxwb.workbench.spec.claims; docs/statistics.md); None: one default claim per row against the base.
    claims: list[Claim] | None = None
    # The file the study was read from (foxwb.workbench.cli.main), and where each of its fields is
    # written: the errors of its expansion name the file, the line and the column.
    _source: str = PrivateAttr("")
    _positions: Positions = PrivateAttr(default_factory=Positions)

    @model_validator(mode="before")
    @classmethod
    def _seeds_by_plan(cls, data):
        return plan_under_seeds(data)

    @model_validator(mode="before")
    @classmethod
    def _confirmation_plan_after_the_search(cls, data):
        """A confirmation's plan without ``first`` starts after the search's seeds: the choice's own
        seed, picked for its luck on the select split, stays out of the verdict."""
        confirm = data.get("search", {}).get("confirm") if isinstance(data, dict) and isinstance(data.get("search"), dict) else None
        if not isinstance(confirm, dict) or not isinstance(confirm.get("seeds"), dict) or "first" in confirm["seeds"]:
            return data
        try:
            searched = TypeAdapter(Seeds).validate_python(data.get("seeds", [0]))
        except ValidationError:
            return data  # the study's own seeds are wrong: their field says so
        seeds = {**confirm["seeds"], "first": max(searched) + 1}
        return {**data, "search": {**data["search"], "confirm": {**confirm, "seeds": seeds}}}

    @model_validator(mode="after")
    def _plan_without_search(self):
        if self.seed_plan is None:
            return self
        if self.search is not None:
            raise ValueError("seeds: a plan {start, step, max} runs a design without a search; in a search, list "
                             "the search's seeds and give the plan to its confirmation (search.confirm.seeds)")
        if not isinstance(self.design, (AblationDesign, CumulativeDesign, VariantsDesign)):
            raise ValueError(f"seeds: a plan {{start, step, max}} runs an ablation, cumulative or variants design; a "
                             f"{self.design.kind} design lists its seeds (its plan is not built yet)")
        check_plan_seeds(self.seeds, self.seed_plan)
        if isinstance(self.design, VariantsDesign) and any(v.seeds is not None for v in self.design.variants):
            raise ValueError("seeds: a plan {start, step, max} runs every variant on the plan's seeds; "
                             "remove the variants' own seeds")
        return self

    @model_validator(mode="after")
    def _confirmation_plan(self):
        plan = self.search.confirm.seed_plan if self.search is not None and self.search.confirm is not None else None
        if plan is not None and not isinstance(self.design, (AblationDesign, CumulativeDesign, VariantsDesign)):
            raise ValueError(f"search.confirm.seeds: a plan {{start, step, max}} confirms an ablation, cumulative or "
                             f"variants design; a {self.design.kind} design lists its confirmation seeds (its plan is "
                             "not built yet)")
        return self

    def plan(self) -> SeedPlan | None:
        """The study's seed plan: its seeds' (a design without a search) or its confirmation's."""
        if self.search is not None and self.search.confirm is not None:
            return self.search.confirm.seed_plan
        return self.seed_plan

    @model_validator(mode="before")
    @classmethod
    def _confirm_is_part_of_a_search(cls, data):
        if isinstance(data, dict) and "confirm" in data:
            where = "this study has no search" if not data.get("search") else "not at the top level"
            raise ValueError("confirm: a confirmation stage belongs to a search (search: {space: ..., confirm: "
                             f"{{seeds: [...], metric: val_loss}}}}); {where}")
        return data

    @model_validator(mode="after")
    def _scaling_without_search(self):
        if isinstance(self.design, ScalingDesign) and self.search is not None:
            raise ValueError("search: a scaling design's trials are its points; search each in a study of its own")
        if isinstance(self.design, CrossedDesign) and self.search is not None and self.search.algorithm == "optuna":
            raise ValueError("search.algorithm: a crossed design searches each cell (a variant at a point) with algorithm grid "
                             "or random, not optuna")
        return self

    @model_validator(mode="after")
    def _searched_variants_exist(self):
        if self.search is None or not self.search.variants:
            return self
        names = variant_names(self)
        for name in self.search.variants:
            if name not in names:
                raise ValueError(f"search.variants: {name!r} is not a variant of the design; its variants: "
                                 + ", ".join(repr(n) for n in names))
        return self

    @model_validator(mode="after")
    def _own_seeds(self):
        if not isinstance(self.design, VariantsDesign):
            return self
        variants = self.design.variants
        if self.search is not None:
            for i, v in enumerate(variants):
                if v.seeds is not None:
                    raise ValueError(f"design.variants[{i}].seeds ({v.name}): a variant's own seeds are for a study "
                                     "without a search; a search runs every variant on the study's seeds (and "
                                     "search.confirm.seeds)")
        seeds_of, base = variant_seeds(self), base_variant(self.design)
        unpaired = welch_variants(self)
        for i, v in enumerate(variants):
            if v.name in unpaired or base in unpaired:
                if v.name != base and self.search is None:  # a search's confirmation takes seeds of its own
                    _check_welch_seeds(variants, seeds_of, v.name, base)
                continue  # compared unpaired: its seeds need not be the base's
            lacking = [s for s in seeds_of[v.name] if s not in seeds_of[base]]
            if lacking:
                where = f"design.variants[{i}].seeds" if v.seeds else "seeds"
                raise ValueError(f"{where} ({v.name}): seeds {lacking} are not among those of the base row "
                                 f"{base!r} ({seeds_of[base]}); every row is compared with the base seed by seed: "
                                 "give the base each seed its rows run, or compare the row unpaired "
                                 "(`test: welch` in its entry)")
        return self

    @field_validator("claims", mode="before")
    @classmethod
    def _some_claims(cls, claims):
        if claims == []:
            raise ValueError("no claims listed: list one or more ({name, compare: [A, B], sesoi}), or leave "
                             "`claims` out for the default claims (each row against the base)")
        return claims

    @model_validator(mode="after")
    def _known_claims(self):
        if self.claims:
            rows, noun, note = claim_rows(self)
            check_claims(self.claims, rows, noun, note)
        return self

    @model_validator(mode="after")
    def _names_are_searchable(self):
        # The tracking store finds runs by these names; its filters quote with ' or ", not both.
        names = [("name", self.name)] + [(f"variant {n!r}", n) for n in _design_names(self.design)]
        for where, text in names:
            if "'" in text and '"' in text:
                raise ValueError(f"{where}: a name may contain ' or \" but not both")
        return self

    @property
    def experiment(self) -> str:
        return self.tracking.experiment or self.name


def base_variant(design) -> str:
    """The row a study's deltas are taken against: the base of an ablation or cumulative design,
    a variants design's compare_to (else its first variant), a grid's first cell (every axis at
    its first value)."""
    if isinstance(design, (AblationDesign, CumulativeDesign)):
        return design.base_name
    if isinstance(design, (VariantsDesign, ScalingDesign, CrossedDesign)):
        return design.compare_to or design.variants[0].name
    return _grid_name([(path, values[0]) for path, values in design.axes.items()])


def claim_rows(study: "StudySpec") -> tuple[list[str], str, str]:
    """What a claim's ``compare`` may name, what they are called, and a note on them: the variants,
    or in a crossed or scaling design the rows, each variant at each point of its axis
    (``FoX (Pro) [context=1024]``, the study table's row names)."""
    if isinstance(study.design, (CrossedDesign, ScalingDesign)):
        return ([f"{v} [{a}]" for v in variant_names(study) for a in axis_labels(study)], "row",
                " (a variant at a point of its axis: its rows are compared at the same point)")
    return variant_names(study), "variant", ""


def variant_seeds(study: "StudySpec") -> dict[str, list[int]]:
    """Every variant name -> the seeds it runs on: its own (a variants design's ``seeds``), else
    the study's."""
    own = {v.name: list(v.seeds) for v in study.design.variants if v.seeds is not None} \
        if isinstance(study.design, VariantsDesign) else {}
    return {name: own.get(name, list(study.seeds)) for name in variant_names(study)}


def _check_welch_seeds(variants: list[Variant], seeds_of: dict[str, list[int]], row: str, base: str) -> None:
    """Welch's test estimates each row's spread from its own seeds: a row compared unpaired, and
    the base it is compared with, need two seeds or more."""
    for name in (row, base):
        if len(seeds_of[name]) < 2:
            i = next(i for i, v in enumerate(variants) if v.name == name)
            own = variants[i].seeds is not None
            where = f"design.variants[{i}].seeds" if own else "seeds"
            fix = f"give {name!r} two seeds or more" if own else f"give the study's seeds (which {name!r} runs) two or more"
            raise ValueError(f"{where} ({name}): {seeds_of[name]}: Welch's test (`test: welch`) compares {row!r} "
                             f"with the base {base!r} from each row's own spread, which takes at least 2 seeds "
                             f"of each; {fix}, or compare the rows paired (no `test: welch`)")


def welch_variants(study: "StudySpec") -> list[str]:
    """The variants a variants design compares unpaired (``test: welch``), in the design's order:
    any comparison with such a row, as the row or as the base, is Welch's (the parent run's tag
    ``welch``)."""
    return [v.name for v in study.design.variants if v.test == "welch"] \
        if isinstance(study.design, VariantsDesign) else []


def own_seeds(study: "StudySpec") -> dict[str, list[int]]:
    """The variants whose seeds are not the study's -> their seeds (the parent run's tag
    ``variant_seeds``, and the table's rows of seeds of their own)."""
    return {v: s for v, s in variant_seeds(study).items() if s != list(study.seeds)}


def variant_names(study: "StudySpec") -> list[str]:
    """Every variant name of the design, in the design's order (aliases included)."""
    return [name for name, _, _ in _variants(study)]


def _grid_name(edits: list[tuple[str, Any]]) -> str:
    return ", ".join(f"{p.split('.')[-1]}={v}" for p, v in edits)


def _design_names(design) -> list[str]:
    names = [getattr(design, "base_name", None)]
    for key in ("changes", "steps", "variants"):
        names += [c.name for c in getattr(design, key, [])]
    return [n for n in names if n]


@dataclass(frozen=True)
class Trial:
    variant: str
    seed: int
    spec: TrialSpec
    search_point: tuple[tuple[str, Any], ...] = ()
    aliases: tuple[str, ...] = ()  # other variant names that give this very trial
    optuna_samples: int = 0  # > 0: not a trial but the template of an Optuna search of this many draws
    stage: str = ""  # "confirm": a confirmation trial of a tune-then-confirm study (workbench/run/confirm.py)

    @property
    def spec_hash(self) -> str:
        return self.spec.spec_hash()

    @property
    def point_label(self) -> str:
        """The searched values, e.g. ``lr=0.00123`` ('' outside a search)."""
        return ", ".join(f"{point_name(p)}={v:.4g}" if isinstance(v, float) else f"{point_name(p)}={v}"
                         for p, v in self.search_point)

    @property
    def row(self) -> str:
        """The table row it belongs to: the variant, with its searched values where it has some."""
        return f"{self.variant} [{self.point_label}]" if self.search_point else self.variant


def _variants(study: StudySpec) -> list[tuple[str, str, list[tuple[str, Any, str]]]]:
    """(name, where in the file, edits) for every variant of the design; each edit (path, value,
    where in the file it was written: what an error in it names)."""
    d = study.design
    if isinstance(d, GridDesign):
        paths = list(d.axes)
        out = []
        for values in itertools.product(*d.axes.values()):
            edits = list(zip(paths, values))
            out.append((_grid_name(edits), "design.axes", [(p, v, f"design.axes.{p}") for p, v in edits]))
        return out
    if isinstance(d, AblationDesign):
        return [(d.base_name, "base", [])] + [
            (c.name, f"design.changes[{i}]", _edits(c.set, f"design.changes[{i}].set")) for i, c in enumerate(d.changes)
        ]
    if isinstance(d, CumulativeDesign):
        out, edits = [(d.base_name, "base", [])], []
        for i, c in enumerate(d.steps):
            edits = edits + _edits(c.set, f"design.steps[{i}].set")
            out.append((c.name, f"design.steps[{i}]", edits))
        return out
    return [(c.name, f"design.variants[{i}]", _edits(c.set, f"design.variants[{i}].set")) for i, c in enumerate(d.variants)]


def _edits(edits: dict, where: str) -> list[tuple[str, Any, str]]:
    return [(path, value, where) for path, value in edits.items()]


def _points(study: StudySpec, name: str) -> list[tuple[list[tuple[str, Any]], list[tuple[str, Any, str]]]]:
    """(point, its edits) of a variant: the search's draws, or a scaling design's sizes (the point
    ("size", name) labels the trial; the size's edits build it); edits as _variants gives them."""
    if isinstance(study.design, ScalingDesign):
        budgets = study.design.budgets
        crossed = budgets if len(budgets) > 1 else [None]
        return [([("size", c.name)] + ([] if per is None else [("tokens_per_param", per)]),
                 _edits(c.set, f"design.sizes[{i}].set"))
                for i, c in enumerate(study.design.sizes) for per in crossed]
    if isinstance(study.design, CrossedDesign):
        # A search runs in every cell (the variant at a point): the point's edits, then the draw's.
        axis = study.design.axis
        return [([(axis, c.name)] + draw, _edits(c.set, f"design.points[{i}].set") + _drawn(draw, study.search, name))
                for i, c in enumerate(study.design.points)
                for draw in _search_points(study.search, cell_name(name, axis, c.name), name)]
    return [(point, _drawn(point, study.search, name)) for point in _search_points(study.search, name, name)]


def _drawn(draw: list[tuple[str, Any]], search: SearchSpec | None = None, variant: str = "") -> list[tuple[str, Any, str]]:
    """A draw's edits, each with where the study file states it (for an error's location)."""
    shared = search.space if search is not None else {}
    return [(path, value, f"search.space.{path}" if path in shared or search is None else f"search.variants.{variant}.{path}")
            for path, value in draw]


def point_name(path: str) -> str:
    """A searched path as a row's label names it: its last part (``lr``), or for a component's option
    the slot and the option (``forget_gate.logit_normalizer``): two slots' options of one name,
    searched by two variants (search.variants), stay apart."""
    parts = path.split(".")
    if len(parts) >= 3 and parts[0] == "model" and (parts[1] in BLOCK_SLOTS or (parts[1] == "attention" and len(parts) >= 4)):
        return f"{parts[-2]}.{parts[-1]}"
    return parts[-1]


def cell_name(variant: str, axis: str, point: str) -> str:
    """A crossed design's cell, ``FoX (Pro) [context=1024]``: the study table's row of the variant
    at that point (foxwb.workbench.analysis.table.label), and what a tune-then-confirm study chooses for."""
    return f"{variant} [{axis.split('.')[-1]}={point}]"  # Trial.point_label's form


def cell_of(study: "StudySpec", variant: str, values: dict) -> str:
    """What a tune-then-confirm study chooses for, given a trial's variant and point values: the
    variant, or in a crossed design its cell at the trial's point of the axis."""
    if isinstance(study.design, CrossedDesign):
        return cell_name(variant, study.design.axis, values[study.design.axis])
    return variant


def _scaled_tokens(study: StudySpec, data: dict, where: str, row: str, edits: list[tuple[str, Any, str]], point) -> dict:
    """``train.tokens`` = tokens_per_param (the point's, where the ladder is crossed with budgets) x
    the size's non-embedding parameters, rounded to whole batches (at least one)."""
    if not isinstance(study.design, ScalingDesign) or not study.design.budgets:
        return data
    per = dict(point).get("tokens_per_param", study.design.budgets[0])
    try:
        model = ModelSpec.model_validate(data["model"])
    except ValidationError as e:
        raise SpecError(format_validation_error(e, f"{_written(e, edits, 'model') or where} ({row})", ModelSpec,
                                                data["model"])) from None
    batch = data["train"]["batch_size"] * data["data"]["context"]
    tokens = max(1, round(per * param_counts(model)["non_embedding"] / batch)) * batch
    return set_path(data, "train.tokens", tokens)


def _search_points(search: SearchSpec | None, key: str, variant: str) -> list[list[tuple[str, Any]]]:
    space = search.space_of(variant) if search is not None else {}
    if not space or search.algorithm == "optuna":
        return [[]]  # a variant with nothing of its own to search runs once per seed
    if search.algorithm == "grid":
        return [list(zip(space, vals)) for vals in itertools.product(*(d.grid() for d in space.values()))]
    # Draws depend on the search seed and the variant, not on the order of the study file.
    rng = np.random.default_rng([search.seed, *key.encode()])
    return [[(p, d.sample(rng)) for p, d in space.items()] for _ in range(search.num_samples)]


def expand(study: StudySpec) -> list[Trial]:
    """Every trial of the study, validated; raises SpecError naming the file (where the study was
    read from one), the place in it and the field."""
    try:
        return _expand(study)
    except SpecError as e:
        if study._source and not str(e).startswith(f"{study._source}: "):
            raise SpecError(at_field(study._source, str(e), study._positions)) from None
        raise


# A trial's seed comes from the study's seeds (or a variants design's row's own), never from an edit.
_SEED_ELSEWHERE = ("a study runs every row on its `seeds:` list (top level; a variants design's row may "
                   "name its own `seeds:` beside its `set:`), which would overwrite a seed written here")


def _no_seed_edit(study: StudySpec) -> None:
    if "seed" in study.base:
        raise SpecError(f"base.seed: {_SEED_ELSEWHERE}; write `seeds: [{study.base['seed']}]` instead")
    if study.search is not None and "seed" in study.search.paths():
        raise SpecError(f"search.space.seed: {_SEED_ELSEWHERE}; seeds are not searched (search.seed seeds "
                        "the draws; search.confirm.seeds are the confirmation's)")


def _expand(study: StudySpec) -> list[Trial]:
    _no_seed_edit(study)
    try:
        base = TrialSpec.model_validate(study.base).model_dump(mode="json")
    except ValidationError as e:
        raise SpecError(format_validation_error(e, "base" if study._source else f"study {study.name!r}, base", TrialSpec,
                                                study.base, study._positions, ("base",))) from None
    trials, names, seeds_of = [], set(), variant_seeds(study)
    for name, where, edits in _variants(study):
        if name in names:
            base = getattr(study.design, "base_name", None)
            clash = f" (the base row's name, base_name: {base!r})" if name == base else ""
            raise SpecError(f"{where}: variant name {name!r} is used twice{clash}; variant names must be unique")
        names.add(name)
        for point, point_edits in _points(study, name):
            all_edits = edits + point_edits
            at = Trial(name, 0, None, tuple(point)).point_label
            row = f"row {name} [{at}]" if at else f"row {name}"
            for path, value, written in all_edits:
                if path == "seed":
                    at_seed = written if written.endswith(".seed") else f"{written}.seed"
                    raise SpecError(f"{at_seed} ({row}): {_SEED_ELSEWHERE}; write `seeds: [{value}]` instead")
            data = base
            for path, value, written in all_edits:
                try:
                    data = set_path(data, path, value)
                except PathError as e:
                    raise SpecError(f"{written} ({row}): {e}") from None
            data = _scaled_tokens(study, data, where, row, all_edits, point)
            if study.resources.workers is not None and not _sets_workers(study.base, [(p, v) for p, v, _ in all_edits]):
                data = set_path(data, "train.workers", study.resources.workers)
            for seed in seeds_of[name]:
                try:
                    spec = TrialSpec.model_validate({**data, "seed": seed})
                except ValidationError as e:
                    raise SpecError(format_validation_error(e, f"{_written(e, all_edits) or where} ({row})", TrialSpec,
                                                            data)) from None
                samples = study.search.num_samples if study.search and study.search.algorithm == "optuna" else 0
                trials.append(Trial(name, seed, spec, tuple(point), optuna_samples=samples))
    trials = _merge_aliases(trials)
    if isinstance(study.design, ScalingDesign):
        _check_distinct_sizes(study.design, trials)
        _check_extrapolation(study.design, trials)
    return trials


def _written(err: ValidationError, edits: list[tuple[str, Any, str]], under: str = "") -> str | None:
    """Where in the file the edits behind every problem of ``err`` were written, where that is one
    place; else None. Behind a problem: the last edit of its field or of a section above it, else
    the edits inside the section it names, those of the fields its message names where there are
    any (``model: n_heads=2 does not divide d_model=97``). ``under``: the section ``err`` is of."""
    places = set()
    for e in err.errors():
        loc = ".".join(str(part) for part in (under, *e["loc"]) if part != "")
        above = [w for p, _, w in edits if loc == p or loc.startswith(p + ".")]
        inside = [(p, w) for p, _, w in edits if not loc or p.startswith(loc + ".")]
        named = {w for p, w in inside if re.search(rf"\b{re.escape(p.split('.')[-1])}\b", e["msg"])}
        if not above and not inside:
            return None
        places |= {above[-1]} if above else named or {w for _, w in inside}
    return places.pop() if len(places) == 1 else None


def _check_distinct_sizes(design: ScalingDesign, trials: list[Trial]) -> None:
    """Every variant's sizes must differ in parameters, as many as its law needs: two sizes of one
    non-embedding parameter count are one ladder point to the fit."""
    counts: dict[str, dict[int, list[str]]] = {}
    for t in trials:
        n = param_counts(t.spec.model)["non_embedding"]
        size = dict(t.search_point)["size"]
        for variant in (t.variant, *t.aliases):
            names = counts.setdefault(variant, {}).setdefault(n, [])
            if size not in names:
                names.append(size)
    for variant, by_n in counts.items():
        if len(by_n) < design.min_sizes:
            same = "; ".join(f"{' and '.join(names)}: {n:,}" for n, names in by_n.items() if len(names) > 1)
            raise SpecError(f"design.sizes: variant {variant!r} gets {len(by_n)} distinct non-embedding parameter "
                            f"counts from {len(design.sizes)} sizes ({same}); {design.law_needs}")


def _check_extrapolation(design: ScalingDesign, trials: list[Trial]) -> None:
    """``extrapolate_to`` must lie above the ladder: the laws are fitted to predict beyond it."""
    if design.extrapolate_to is None:
        return
    target = parse_count(design.extrapolate_to)
    largest = max((param_counts(t.spec.model)["non_embedding"], t.point_label) for t in trials)
    if target <= largest[0]:
        raise SpecError(f"design.extrapolate_to: {design.extrapolate_to!r} ({target:,.0f} parameters) is not above the "
                        f"ladder, whose largest size ({largest[1]}) has {largest[0]:,} non-embedding parameters")


def _sets_workers(base: dict, edits: list[tuple[str, Any]]) -> bool:
    """Whether the base or a variant's edits name ``train.workers`` (which then wins over
    ``resources.workers``)."""
    if isinstance(base.get("train"), dict) and "workers" in base["train"]:
        return True
    return any(path == "train.workers" or (path == "train" and isinstance(value, dict) and "workers" in value)
               for path, value in edits)


def _merge_aliases(trials: list[Trial]) -> list[Trial]:
    """Two variants that build the very same trial (the paper's Table 3 lists '+ output norm' and
    'FoX (Pro) - KV-shift', one model) run once; the first name keeps it, the others are aliases.
    The same trial twice under one variant name means a change changed nothing: an error."""
    merged: dict[str, Trial] = {}
    for t in trials:
        first = merged.get(t.spec_hash)
        if first is None:
            merged[t.spec_hash] = t
        elif first.variant == t.variant or t.variant in first.aliases:
            where = f" at {first.point_label!r} and {t.point_label!r}" if t.search_point and first.point_label != t.point_label else ""
            raise SpecError(f"variant {t.variant!r} gives the same trial twice{where} (spec hash {t.spec_hash}); make each "
                            "change change something")
        else:
            merged[t.spec_hash] = Trial(first.variant, first.seed, first.spec, first.search_point,
                                        first.aliases + (t.variant,), first.optuna_samples)
    return list(merged.values())


def with_point(template: Trial, point: dict[str, Any]) -> Trial:
    """The trial an Optuna draw makes of a search template."""
    data = template.spec.model_dump(mode="json")
    for path, value in point.items():
        data = set_path(data, path, value)
    return Trial(template.variant, template.seed, TrialSpec.model_validate(data), tuple(point.items()), template.aliases)


def axis_labels(study: StudySpec) -> list[str]:
    """The point labels of a scaling or crossed design, in its order: its trials' own labels
    (Trial.point_label of the points the expansion uses; a crossed design's without a search's draw)."""
    if isinstance(study.design, CrossedDesign):
        points = [[(study.design.axis, c.name)] for c in study.design.points]
    else:
        points = [point for point, _ in _points(study, "")]
    return [Trial("", 0, None, tuple(point)).point_label for point in points]


def schedule_notes(trials: list[Trial]) -> list[str]:
    """A note per variant whose schedule would not do what its file seems to ask (a warmup as long
    as its training: `TrainSpec.warmup_note`); `wb run` and its dry run print them."""
    notes = {}
    for t in trials:
        note = t.spec.train.warmup_note(t.spec.data.context)
        if note and t.row not in notes:
            notes[t.row] = f"{t.row}: {note}"
    return list(notes.values())


def design_tags(study) -> dict[str, str]:
    """Tags for the study's parent run: what readers without the study file need (the variants
    in order, the seeds, alpha, the claims). A list too long for a tag is left out (readers fall back)."""
    tags = {"variants": json.dumps(variant_names(study)), "seeds": json.dumps(list(study.seeds)),
            "alpha": repr(study.alpha), "design_kind": study.design.kind}
    own = own_seeds(study)
    if own:
        tags["variant_seeds"] = json.dumps(own)
    welch = welch_variants(study)
    if welch:
        tags["welch"] = json.dumps(welch)
    if study.search is not None:  # the search's rows in the plan's order (their start order varies)
        rows = [[t.variant, t.point_label] for t in expand(study) if not t.optuna_samples]
        tags["rows"] = json.dumps(list(map(list, dict.fromkeys(map(tuple, rows)))))
        # How each field was searched: the dashboard draws a log-uniform one on a log axis.
        spaces = [study.search.space, *study.search.variants.values()]
        tags["search_space"] = json.dumps({path: next(k for k in ("loguniform", "uniform", "choice") if getattr(d, k) is not None)
                                           for space in spaces for path, d in space.items()})
    if isinstance(study.design, ScalingDesign) and study.design.extrapolate_to is not None:
        tags["extrapolate_to"] = str(study.design.extrapolate_to)
    if isinstance(study.design, (ScalingDesign, CrossedDesign)):
        tags["axis"] = json.dumps(axis_labels(study))
    if isinstance(study.design, GridDesign):
        tags["grid_axes"] = json.dumps(list(study.design.axes.items()))
    if study.plan() is not None:  # `wb results NAME` judges the claims look by look
        tags["seed_plan"] = json.dumps(study.plan().model_dump())
    if study.claims:  # the dashboard and `wb results NAME` give the declared claims their verdicts
        tags["claims"] = json.dumps([c.model_dump(mode="json") for c in study.claims])
    return {k: v for k, v in tags.items() if len(v) <= 5000}


def merge_extended(parent: dict, child: dict) -> dict:
    """A study file that ``extends`` another, merged with it (a new mapping; neither is changed):
    the child's keys win; where both hold a mapping under one key, the two merge the same way,
    unless both name a ``kind`` and the kinds differ (``design: {kind: variants, ...}`` over an
    ablation, a slot ``{kind: fixed}`` over ``{kind: data_dependent, ...}``): a different kind is a
    different thing, and the child's mapping replaces the other whole. Lists and scalars replace whole."""
    merged = dict(parent)
    for key, value in child.items():
        under = merged.get(key)
        if (isinstance(under, dict) and isinstance(value, dict)
                and not ("kind" in under and "kind" in value and under["kind"] != value["kind"])):
            merged[key] = merge_extended(under, value)
        else:
            merged[key] = value
    return merged


_EXTENDS = "the path of another study file (.yaml or .yml), relative to the folder of the file that says it"


def _extended(path: str, data: Any, positions: Positions,
              chain: tuple[tuple[str, Path], ...] = ()) -> tuple[Any, Positions]:
    """``data``, read from ``path``, with the study file it ``extends`` (and that file's own, in
    turn) merged under it and the key removed, and where each field of the merge is written; data
    without ``extends`` as it is. ``chain``: the files that led here (as written, resolved), to
    refuse a circle."""
    if not isinstance(data, dict) or "extends" not in data:
        return data, positions
    value = data["extends"]

    def refuse(message: str) -> SpecError:  # the message names the field: where it is written goes first
        return SpecError(at_field(path, message, positions))

    if not isinstance(value, str) or not value.endswith((".yaml", ".yml")):
        raise refuse(f"extends: {_EXTENDS}, got {value!r}")
    if "name" not in data:
        raise refuse(f"name: a study that extends another gives its own name (else the two would share one, and a "
                     f"workdir would mix their runs); add `name:` beside `extends: {value}`")
    target = Path(path).parent / value
    chain = (*chain, (str(path), Path(path).resolve()))
    resolved = [where for _, where in chain]
    if target.resolve() in resolved:
        circle = [shown for shown, _ in chain[resolved.index(target.resolve()):]]
        raise refuse(f"extends: a circle of files, {' -> '.join([*circle, circle[0]])}; a study may extend a file "
                     "that does not lead back to it")
    if not target.is_file():
        raise refuse(f"extends: {value!r}: no such file (looked at {target.absolute()}); `extends` is {_EXTENDS}")
    try:
        parent, parent_at = read_located(target)
        if not (isinstance(parent, dict) and "extends" in parent):  # `extends` says a file is a study
            check_file_kind(parent, str(target), "study")
    except SpecError as e:
        raise refuse(f"extends: {e}") from None
    if not isinstance(parent, dict) or not set(parent) & (set(StudySpec.model_fields) | {"extends"}):
        what = f"a {type(parent).__name__}" if not isinstance(parent, dict) else f"none of its keys ({', '.join(map(str, parent))})"
        raise refuse(f"extends: {target} is not a study file ({what}; a study file is a mapping of name, base, design, "
                     "seeds, ...)")
    parent, parent_at = _extended(str(target), parent, parent_at, chain)
    child = {key: v for key, v in data.items() if key != "extends"}
    kept = Positions({loc: at for loc, at in parent_at.items() if loc not in positions and _kept(parent, child, loc)})
    return merge_extended(parent, child), Positions({**kept, **positions})


def _kept(parent: dict, child: dict, loc: tuple) -> bool:
    """Whether merge_extended(parent, child) keeps the parent's field at ``loc``: the child does not
    write it, nor replace a section above it."""
    for part in loc:
        if not isinstance(child, dict) or part not in child:
            return True
        under, over = parent.get(part) if isinstance(parent, dict) else None, child[part]
        if not (isinstance(under, dict) and isinstance(over, dict)):
            return False  # a list or a value: the child's replaces the parent's whole
        if "kind" in under and "kind" in over and under["kind"] != over["kind"]:
            return False  # another kind: the child's section replaces the parent's whole
        parent, child = under, over
    return False


def load_study(path: str, overrides: list[Override] | None = None) -> StudySpec:
    """The study file at ``path``, read and validated, merged over the file it ``extends`` if it
    names one (merge_extended), with the command line's ``--set`` edits over both (overrides);
    errors name the file, the line and column (or the ``--set``), and the field."""
    data, positions = read_located(path)
    if not (isinstance(data, dict) and "extends" in data):  # `extends` says a file is a study
        check_file_kind(data, path, "study")
    data, positions = _extended(path, data, positions)
    data, positions = apply_overrides(data, positions, overrides, in_study)
    study = validate(StudySpec, data, path, positions)
    study._source, study._positions = str(path), positions
    return study


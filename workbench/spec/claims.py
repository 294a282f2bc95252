"""A study's claims: two rows of its table and a smallest effect of interest (SESOI), stated in
the study file before the runs, each of which `wb results` gives a verdict (better, worse,
equivalent, inconclusive; foxwb.workbench.analysis.claims, docs/statistics.md).

A claim is study-level: it names rows and builds no trial, so no trial's spec hash changes with it.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from foxwb.workbench.spec.base import Spec
from foxwb.workbench.spec.fields import did_you_mean

SESOI_ALLOWED = "relative in perplexity, in (0, 1): 0.01 is 1%"
DEFAULT_SESOI = 0.01  # 1% in perplexity: the margin of a default claim (one per row against the base)


class Claim(Spec):
    """``{name, compare: [A, B], sesoi}``: A against B (variant names; in a crossed or scaling
    design, rows: a variant at a point, ``FoX (Pro) [context=1024]``), with the smallest
    perplexity difference that matters, relative (0.01 = 1%)."""

    name: str = Field(min_length=1)
    compare: list[str]
    sesoi: float

    @model_validator(mode="before")
    @classmethod
    def _sesoi_stated(cls, data: Any):
        if isinstance(data, dict) and "sesoi" not in data:
            raise ValueError(f"sesoi: missing: a claim states its smallest effect of interest before the runs, "
                             f"{SESOI_ALLOWED} (sesoi: 0.01)")
        return data

    @field_validator("compare", mode="before")
    @classmethod
    def _two_rows(cls, value: Any):
        if not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, str) and v for v in value):
            raise ValueError("compare: two row names, [A, B] (A is judged against B)")
        if value[0] == value[1]:
            raise ValueError("compare: A and B must be two different rows")
        return value

    @field_validator("sesoi", mode="before")
    @classmethod
    def _relative(cls, value: Any):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise ValueError(f"sesoi: the smallest effect of interest, {SESOI_ALLOWED}")
        return float(value)


def check_claims(claims: list[Claim], rows: list[str], noun: str = "variant", note: str = "") -> None:
    """Claim names unique, each ``compare`` naming one of ``rows`` (the study's ``noun``s: its
    variants, or a crossed or scaling design's rows, ``note`` saying what they are): else
    ``ValueError`` naming the field, the value, what is allowed and the closest name."""
    seen: dict[str, int] = {}
    for i, claim in enumerate(claims):
        if claim.name in seen:
            raise ValueError(f"claims[{i}].name: {claim.name!r} is the name of claims[{seen[claim.name]}] too; "
                             "claim names must be unique")
        seen[claim.name] = i
        for j, row in enumerate(claim.compare):
            if row not in rows:
                shown = ", ".join(repr(r) for r in rows[:12]) + (f", ... ({len(rows)} in all)" if len(rows) > 12 else "")
                raise ValueError(f"claims[{i}].compare[{j}]: {row!r} is not a {noun} of this study{note}; its {noun}s: "
                                 f"{shown}{did_you_mean(row, rows)}")

"""Specs: the validated, frozen, hashable description of what a trial builds and runs.

Every spec is pydantic v2 with ``extra="forbid"``; it round-trips through JSON and YAML, and
``spec_hash()`` (a hash of canonical JSON) is its identity.
"""
from __future__ import annotations

import hashlib
import json
from functools import partial
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PositiveFloat,
    PositiveInt,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

import components
from components.registry import ComponentSpec
from workbench.presets import apply_preset


def Slot(slot: str):
    """Field type of one component slot: accepts a bare kind or a mapping with ``kind``."""
    return Annotated[SerializeAsAny[ComponentSpec], BeforeValidator(partial(components.parse, slot))]


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def spec_hash(self) -> str:
        """First 16 hex digits of the SHA-256 of the canonical JSON: the identity of the spec."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]


class AttentionSpec(Spec):
    """One field per slot, in the order the slots act (reference/fox.md 2.10)."""

    kv_shift: Slot("kv_shift") = "none"
    qk_norm: Slot("qk_norm") = "none"
    rope: Slot("rope") = "none"
    forget_gate: Slot("forget_gate") = "none"
    output_norm: Slot("output_norm") = "none"
    output_gate: Slot("output_gate") = "none"

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @field_validator("output_gate")
    @classmethod
    def _silu_without_norm(cls, gate: ComponentSpec, info: ValidationInfo) -> ComponentSpec:
        norm = info.data.get("output_norm")
        if gate.kind == "silu" and norm is not None and norm.kind != "none":
            raise ValueError(
                f"output_gate 'silu' cannot be combined with output_norm {norm.kind!r} "
                "(the norm is fused with a sigmoid gate); use 'sigmoid' or set output_norm: none"
            )
        return gate


class ModelSpec(Spec):
    """A decoder-only LM: embedding, n_layers pre-norm blocks, final norm, LM head.

    ``preset`` (one of workbench.presets.PRESETS) fills in the architecture; any field given
    explicitly overrides it (per slot for ``attention``). Defaults are the paper's 125M size.
    """

    vocab_size: PositiveInt = 50257
    d_model: PositiveInt = 768
    n_layers: PositiveInt = 12
    n_heads: PositiveInt = 12
    attention: AttentionSpec = AttentionSpec()
    mlp: Slot("mlp") = "swiglu"
    norm: Slot("norm") = "rmsnorm"
    init_std: PositiveFloat = 0.02
    tie_embeddings: bool = False

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return apply_preset(data) if isinstance(data, dict) else data

    @field_validator("n_heads")
    @classmethod
    def _heads_divide(cls, n_heads: int, info: ValidationInfo) -> int:
        d_model = info.data.get("d_model")
        if d_model is not None and d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} does not divide d_model={d_model}; pick a divisor of {d_model}")
        return n_heads

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def dims(self) -> components.BlockDims:
        return components.BlockDims(self.d_model, self.n_heads)

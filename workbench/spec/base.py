"""The base of every spec: pydantic v2, ``extra="forbid"``, frozen, hashed by its canonical JSON.

A field that changes how a trial runs but not what it computes is listed in its class's
``_execution_only`` and left out of the identity; a field added after trials were run with the
behaviour of its default is listed in ``_new_fields`` and left out while it holds that default.
"""
from __future__ import annotations

import hashlib
import json
from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    # No option is infinite or NaN: a float field refuses .inf and .nan.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    _execution_only: ClassVar[frozenset[str]] = frozenset()
    _new_fields: ClassVar[frozenset[str]] = frozenset()

    def _identity_exclude(self) -> dict:
        """pydantic's nested ``exclude`` for the execution-only fields of this spec and its parts,
        and for its new fields (and its components' new options) while they hold their defaults."""
        out: dict = dict.fromkeys(self._execution_only, True)
        fields = type(self).model_fields
        out.update(_new_at_default(self))
        for name in fields:
            value = getattr(self, name)
            if isinstance(value, Spec) and (sub := value._identity_exclude()):
                out[name] = sub
            elif isinstance(value, BaseModel) and (sub := _new_at_default(value)):
                out[name] = sub  # a component's options: new ones left out at their defaults
        return out

    def canonical_json(self) -> str:
        """The identity's JSON: every field but the execution-only ones, keys sorted."""
        data = self.model_dump(mode="json", exclude=self._identity_exclude() or None)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def spec_hash(self) -> str:
        """First 16 hex digits of the SHA-256 of the canonical JSON: the identity of the spec."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]


def _new_at_default(spec: BaseModel) -> dict:
    """``exclude`` entries for the ``_new_fields`` of a spec or component options at their defaults."""
    fields = type(spec).model_fields
    new = getattr(spec, "_new_fields", frozenset())
    return {name: True for name in new if getattr(spec, name) == fields[name].default}

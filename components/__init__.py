"""Pluggable attention-block components, one module per mechanism, their registry, and the
protocols of the optional hooks a component's module may implement (protocols.py), and the digest of
the source files a model's components come from (sources.py: stale results)."""
from foxwb.components import (  # noqa: F401  (registers the kinds)
    forget_gate, kv_shift, mlp, norm, output_gate, output_norm, qk_norm, rope,
)
from foxwb.components.protocols import FusedQKNorm, FusedShift, OwnsInit, ProjectsInput
from foxwb.components.registry import (
    ATTENTION_SLOTS,
    BLOCK_SLOTS,
    SLOTS,
    BlockDims,
    ComponentSpec,
    kinds,
    options_class,
    parse,
    register,
)

__all__ = [
    "ATTENTION_SLOTS", "BLOCK_SLOTS", "SLOTS", "BlockDims", "ComponentSpec",
    "kinds", "options_class", "parse", "register",
    "FusedQKNorm", "FusedShift", "OwnsInit", "ProjectsInput",
]

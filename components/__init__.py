"""Pluggable attention-block components, one module per mechanism, and their registry."""
from foxwb.components import (  # noqa: F401  (registers the kinds)
    forget_gate, kv_shift, mlp, norm, output_gate, output_norm, qk_norm, rope,
)
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
]

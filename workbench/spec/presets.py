"""The paper's four models as ModelSpec shorthands (docs/fox-notes.md, "Presets").

A preset fixes the block's architecture; sizes come from ModelSpec's defaults (the paper's 125M)
or the spec. Transformer (Pro) is the Pro block with the forget gate off and RoPE on.
"""
from __future__ import annotations

_LLAMA_ATTENTION = {
    "kv_shift": "none", "qk_norm": "none", "rope": "none",
    "forget_gate": "none", "output_norm": "none", "output_gate": "none",
}
_PRO_ATTENTION = {
    "kv_shift": "kv", "qk_norm": "rmsnorm", "rope": "none",
    "forget_gate": "data_dependent", "output_norm": "rmsnorm", "output_gate": "sigmoid",
}
_LLAMA_MLP = {"kind": "swiglu", "hidden_ratio": 4.0}
# The output gate's extra d^2 per layer is paid for by a narrower MLP.
_PRO_MLP = {"kind": "swiglu", "hidden_ratio": 3.5}

PRESETS: dict[str, dict] = {
    "transformer_llama": {"attention": {**_LLAMA_ATTENTION, "rope": "rope"}, "mlp": _LLAMA_MLP},
    "fox_llama": {"attention": {**_LLAMA_ATTENTION, "forget_gate": "data_dependent"}, "mlp": _LLAMA_MLP},
    "transformer_pro": {"attention": {**_PRO_ATTENTION, "forget_gate": "none", "rope": "rope"}, "mlp": _PRO_MLP},
    "fox_pro": {"attention": _PRO_ATTENTION, "mlp": _PRO_MLP},
}


def _over(preset_slot, value):
    """A slot given without its ``kind`` changes the preset's component's options (``mlp:
    {hidden_ratio: 3.0}`` keeps the preset's swiglu); one that names a kind replaces it."""
    if isinstance(value, dict) and "kind" not in value and preset_slot is not None:
        base = {"kind": preset_slot} if isinstance(preset_slot, str) else dict(preset_slot)
        return {**base, **value}
    return value


def apply_preset(data: dict) -> dict:
    """Merge ``data['preset']`` under the explicit fields: explicit wins, per attention slot, and
    per option within a slot given without its kind."""
    name = data.get("preset")
    if name is None:
        return {k: v for k, v in data.items() if k != "preset"}
    if name not in PRESETS:
        raise ValueError(f"preset: unknown preset {name!r}; allowed: {', '.join(PRESETS)}")
    preset = PRESETS[name]
    merged = {k: v for k, v in preset.items()}
    for key, value in data.items():
        if key == "preset":
            continue
        if key == "attention" and isinstance(value, dict):
            merged["attention"] = {**preset["attention"],
                                   **{slot: _over(preset["attention"].get(slot), v) for slot, v in value.items()}}
        else:
            merged[key] = _over(preset.get(key), value)
    return merged

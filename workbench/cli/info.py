"""``wb info``: a model's slots, parameter counts and FLOPs per token (a preset, a model or trial
file), each variant of a study file, or a slot's registered kinds and their options."""
from __future__ import annotations

import argparse
from pathlib import Path

from foxwb.components.registry import SLOTS, kinds, options_class
from foxwb.workbench.spec.base import Spec
from foxwb.workbench.spec.cost import flops_per_token, param_breakdown, param_counts
from foxwb.workbench.spec import overrides
from foxwb.workbench.spec.errors import Positions, SpecError, read_located, read_yaml, validate
from foxwb.workbench.spec.fields import did_you_mean
from foxwb.workbench.spec.presets import PRESETS
from foxwb.workbench.spec.study import expand, load_study
from foxwb.workbench.spec.trial import ModelSpec


class TrialModel(Spec):  # errors then name a trial file's field as `wb train` does: model.d_model
    model: ModelSpec


def load_model_spec(target: str, edits: list[overrides.Override] | None = None) -> ModelSpec:
    """A preset's, model file's or trial file's model, with the ``--set`` edits over it (a preset is
    ``{preset: NAME}`` edited: ``--set n_layers=24`` is the preset at 24 layers)."""
    if target in PRESETS:
        data, at = overrides.apply({"preset": target}, Positions(), edits, overrides.in_model)
        return validate(ModelSpec, data, f"preset {target}", at)
    data, at = read_located(target)
    # A trial file holds its model under `model`; a model file is the ModelSpec itself.
    if isinstance(data, dict) and "model" in data:  # a ModelSpec has no field `model`
        other = [o for o in edits or [] if o.parts[0] != "model"]
        if other:
            raise SpecError(f"{other[0]}: `wb info` of a trial file shows its model; a --set path there starts with "
                            "model. (model.n_layers=4)")
        data, at = overrides.apply(data, at, edits)
        return validate(TrialModel, {"model": data["model"]}, target, at).model
    data, at = overrides.apply(data, at, edits, overrides.in_model)
    return validate(ModelSpec, data, target, at)


def component(spec) -> str:
    """A slot's kind and the options it sets away from their defaults: `kv(logit_normalizer=16)`."""
    options = {k: v for k, v in spec.model_dump(mode="json", exclude_defaults=True).items() if k != "kind"}
    return spec.kind + (f"({', '.join(f'{k}={v:g}' if isinstance(v, float) else f'{k}={v}' for k, v in options.items())})"
                        if options else "")


def check_target(target: str) -> None:
    """A name that is neither a file nor a preset is most likely a preset misspelt."""
    looks_like_a_path = "/" in target or Path(target).suffix in (".yaml", ".yml", ".json")
    if target not in PRESETS and not Path(target).exists() and not looks_like_a_path:
        hint = did_you_mean(target, [*PRESETS, *SLOTS, "components"])
        raise SpecError(f"{target}: no such file, and not a preset or a slot{hint}" + ("" if hint else (
            f" (presets: {', '.join(PRESETS)}; slots: {', '.join(SLOTS)}, or components for all)")))


def is_study_file(target: str) -> bool:
    if target in PRESETS:
        return False
    data = read_yaml(target)
    return isinstance(data, dict) and "design" in data


def slot_kinds(names: list[str]) -> int:
    """`wb info SLOT` (or `components`): each slot's registered kinds and their options with defaults."""
    for slot in names:
        print(slot)
        for kind in kinds(slot):
            fields = options_class(slot, kind).model_fields
            options = ", ".join(f"{name}={field.default!r}" for name, field in fields.items() if name != "kind")
            print(f"  {kind}" + (f"  ({options})" if options else ""))
    return 0


def study_info(args: argparse.Namespace) -> int:
    """Each variant of a study: its slots, parameters and FLOPs per token at its trials' context."""
    study = load_study(args.spec, args.overrides)
    models: dict[str, tuple] = {}
    for t in expand(study):
        for name in (t.variant, *t.aliases):
            models.setdefault(name, (t.spec.model, args.context or t.spec.data.context))
    width = max(len("variant"), *map(len, models))
    print(f"study {study.name!r}: {len(models)} variants")
    print(f"{'variant':<{width}}  {'params':>13}  {'w/o input emb.':>14}  {'FLOPs/token fwd':>15}  {'train (3x)':>10}"
          f"  {'context':>7}  slots that differ from the first variant")
    first = None
    for name, (model, context) in models.items():
        counts, flops = param_counts(model), flops_per_token(model, context)
        slot_kinds_ = {k: v.kind for k, v in model.attention.slots().items()}
        slot_kinds_["window"] = model.attention.window  # not a slot, but what a window variant changes
        first = first or slot_kinds_
        differs = ", ".join(f"{k}={'none' if v is None else v}" for k, v in slot_kinds_.items() if v != first[k])
        print(f"{name:<{width}}  {counts['total']:>13,}  {counts['non_embedding']:>14,}  {flops['forward']:>15.3e}  "
              f"{flops['train']:>10.3e}  {context:>7}  {differs}")
    return 0


def command(args: argparse.Namespace) -> int:
    if args.spec in (*SLOTS, "components"):
        if args.overrides:
            raise SpecError(f"{args.overrides[0]}: {args.spec} is a slot, whose registered kinds `wb info` lists; --set "
                            "edits a model, trial or study file, or a preset")
        return slot_kinds(list(SLOTS) if args.spec == "components" else [args.spec])
    check_target(args.spec)
    if is_study_file(args.spec):
        return study_info(args)
    args.context = args.context or 2048
    spec = load_model_spec(args.spec, args.overrides)
    counts, parts = param_counts(spec), param_breakdown(spec)
    flops = flops_per_token(spec, args.context)
    slots = ", ".join(f"{k}={component(v)}" for k, v in spec.attention.slots().items())
    if spec.attention.log_pruning_tolerance is not None:
        slots += f"; pruning ln eps {spec.attention.log_pruning_tolerance:g}"
    if spec.attention.window is not None:
        slots += f"; sliding window of {spec.attention.window} keys"
    print(f"model        {spec.n_layers} x {spec.d_model}, {spec.n_heads} heads of {spec.head_dim}, vocab {spec.vocab_size}")
    print(f"attention    {slots}")
    print(f"mlp / norm   {component(spec.mlp)} / {component(spec.norm)}")
    print(f"spec hash    {spec.spec_hash()}")
    print(f"params       total {counts['total']:,}   without input embedding {counts['non_embedding']:,}"
          f"   blocks + final norm {counts['blocks']:,}")
    print("per component (summed over layers):")
    for name, n in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {n:>14,}  {100 * n / counts['total']:5.1f}%")
    print(f"FLOPs/token  forward {flops['forward']:.3e}   train (3x) {flops['train']:.3e}   at context {args.context}")
    return 0

"""``wb info``: a model's slots, parameter counts and FLOPs per token (a preset, a model or trial
file), each variant of a study file (or of the one study file of a bare name) and the model knobs
it changes against the row the design compares it with, or a slot's registered kinds and their
options."""
from __future__ import annotations

import argparse
import glob
import shutil
import sys
from pathlib import Path

from foxwb.components.registry import SLOTS, ComponentSpec, kinds, options_class
from foxwb.workbench.spec.base import Spec
from foxwb.workbench.spec.cost import flops_per_token, param_breakdown, param_counts
from foxwb.workbench.spec import overrides
from foxwb.workbench.spec.errors import Positions, SpecError, read_located, read_yaml, validate
from foxwb.workbench.spec.fields import did_you_mean
from foxwb.workbench.spec.presets import PRESETS
from foxwb.workbench.spec.study import (AblationDesign, CumulativeDesign, GridDesign, base_variant, expand,
                                        load_study)
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


# The study table's last column wraps after this many characters, at a ", " between two knobs, where
# stdout is not a terminal (a pipe, a file, a test: the same lines everywhere); on a terminal it takes
# what the other columns leave of the terminal's width, but never less than MIN_KNOBS_WIDTH.
KNOBS_WIDTH = 60
MIN_KNOBS_WIDTH = 40
# Knobs that act only through a weight's shape: where two variants differ in these alone and every
# component has the same parameter count, the two build the same model (a ratio rounded to one width).
SHAPE_ONLY = {"mlp.hidden_ratio", "mlp.intermediate_size", "mlp.multiple_of"}


def value(v) -> str:
    return "none" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def component(spec) -> str:
    """A slot's kind and the options it sets away from their defaults: `kv(logit_normalizer=16)`."""
    options = {k: v for k, v in spec.model_dump(mode="json", exclude_defaults=True).items() if k != "kind"}
    return spec.kind + (f"({', '.join(f'{k}={value(v)}' for k, v in options.items())})" if options else "")


def knobs(model: ModelSpec) -> dict:
    """A model's fields by name, the attention's among them (kv_shift, window: the names are distinct)."""
    fields = {name: getattr(model, name) for name in type(model).model_fields if name != "attention"}
    return {**{name: getattr(model.attention, name) for name in type(model.attention).model_fields}, **fields}


def differences(model: ModelSpec, base: ModelSpec) -> dict[str, str]:
    """What ``model`` sets away from ``base``, knob by knob: a slot of another kind as `forget_gate=none`
    (with its options away from their defaults), an option of a slot of the same kind as
    `mlp.hidden_ratio=4`, any other field as `window=32`."""
    mine, theirs = knobs(model), knobs(base)
    out = {}
    for name, v in mine.items():
        if isinstance(v, ComponentSpec) and v.kind == theirs[name].kind:
            other = theirs[name].model_dump()
            out.update({f"{name}.{k}": f"{name}.{k}={value(o)}" for k, o in v.model_dump().items() if o != other[k]})
        elif isinstance(v, ComponentSpec) or v != theirs[name]:
            out[name] = f"{name}={component(v) if isinstance(v, ComponentSpec) else value(v)}"
    return out


def wrap(items: list[str], width: int = KNOBS_WIDTH) -> list[str]:
    """``items`` joined by ", " into lines of at most ``width`` characters (a longer item on its own)."""
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + 2 + len(item) > width:
            lines[-1] += ","
            lines.append(item)
        else:
            lines[-1] += (", " if lines[-1] else "") + item
    return lines


def knobs_width(indent: int) -> int:
    """The knobs column's width after ``indent`` characters of other columns: the terminal's width
    less those (and the "," a wrapped line ends with) where stdout is a terminal, else KNOBS_WIDTH."""
    if not sys.stdout.isatty():
        return KNOBS_WIDTH
    return max(MIN_KNOBS_WIDTH, shutil.get_terminal_size().columns - indent - 1)


def compared_with(design) -> tuple[str, str]:
    """The variant a study's rows are compared with (base_variant: what `wb results` takes deltas
    against), and where the design says so: its base, its compare_to, its first variant or cell."""
    base = base_variant(design)
    if isinstance(design, (AblationDesign, CumulativeDesign)):
        return base, "the design's base"
    if isinstance(design, GridDesign):
        return base, "the grid's first cell"
    return base, "the design's compare_to" if design.compare_to else "the first variant"


def study_files_named(name: str) -> list[str]:
    """The study files under ./studies and ./experiments whose name is ``name`` (with .yaml or .yml
    added where it has neither): where `wb info claims_acp` most likely meant one of them."""
    stem = name if Path(name).suffix in (".yaml", ".yml") else None
    patterns = [stem] if stem else [f"{name}.yaml", f"{name}.yml"]
    return sorted(str(p) for top in ("studies", "experiments") for pattern in patterns
                  for p in Path(top).glob(f"**/{glob.escape(pattern)}"))


def resolve_target(target: str) -> str:
    """The file or preset `wb info` reads for ``target``: itself where it is a preset or a path; a bare
    name of exactly one study file under ./studies or ./experiments (study_files_named), that file,
    after a first line saying so. Any other name is most likely a study file's named without its
    folder (several: their paths are named) or a preset misspelt, and is refused."""
    if target in PRESETS or Path(target).exists() or "/" in target:
        return target
    found = study_files_named(target)
    if len(found) == 1 and is_study_file(found[0]):
        print(f"read {found[0]} (the one study file named {target})")
        return found[0]
    if found:
        raise SpecError(f"{target}: no such file, and not a preset or a slot; did you mean {' or '.join(found)}?")
    if Path(target).suffix in (".yaml", ".yml", ".json"):  # a file's name: read_yaml says it is missing
        return target
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
    """Each variant of a study: its parameters and FLOPs per token at its trials' context, and the
    model knobs it sets away from the variant the design compares it with (compared_with, named in
    the header); then a note for each variant whose knobs build the same model as an earlier one's."""
    study = load_study(args.spec, args.overrides)
    models: dict[str, tuple] = {}
    aliases: list[str] = []  # names that build the very same trial as an earlier row's
    for t in expand(study):
        for name in (t.variant, *t.aliases):
            if name not in models and name != t.variant:
                aliases.append(f"note: {name!r} is the same trial as {t.variant!r} (one spec, trained once)")
            models.setdefault(name, (t.spec.model, args.context or t.spec.data.context))
    width = max(len("variant"), *map(len, models))
    base, why = compared_with(study.design)
    print(f"study {study.name!r}: {len(models)} variants")
    print(f"{'variant':<{width}}  {'params':>13}  {'w/o input emb.':>14}  {'FLOPs/token fwd':>15}  {'train (3x)':>10}"
          f"  {'context':>7}  model knobs that differ from {base!r} ({why})")
    against = models[base][0]
    parts = {name: param_breakdown(model) for name, (model, _) in models.items()}
    for name, (model, context) in models.items():
        counts, flops = param_counts(model), flops_per_token(model, context)
        changed = differences(model, against)
        row = (f"{name:<{width}}  {counts['total']:>13,}  {counts['non_embedding']:>14,}  {flops['forward']:>15.3e}  "
               f"{flops['train']:>10.3e}  {context:>7}  ")
        cell = wrap([f"{text} (no weight's shape changes)"
                     if key in SHAPE_ONLY and not reshapes(model, parts[name], against, key) else text
                     for key, text in changed.items()], knobs_width(len(row)))
        print(row + cell[0])
        for more in cell[1:]:
            print(" " * len(row) + more)
    for note in [*same_models(models, parts), *dict.fromkeys(aliases)]:
        print(note)
    return 0


def reshapes(model: ModelSpec, parts: dict[str, int], base: ModelSpec, key: str) -> bool:
    """Whether ``model``'s value of the MLP knob ``key`` (SHAPE_ONLY), put in place of ``base``'s,
    changes any weight's shape (``parts``: ``model``'s param_breakdown): a hidden_ratio of 4 where
    3.5 rounds to the same width does not."""
    field = key.split(".", 1)[1]
    undone = model.model_copy(update={"mlp": model.mlp.model_copy(update={field: getattr(base.mlp, field)})})
    return param_breakdown(undone) != parts


def same_models(models: dict[str, tuple], parts: dict[str, dict[str, int]]) -> list[str]:
    """A note for each variant that differs from an earlier one only in knobs that act through a
    weight's shape (SHAPE_ONLY) while every component's parameter count is the same (``parts``: each
    variant's param_breakdown): the two are one model."""
    notes, seen = [], []
    for name, (model, _) in models.items():
        for earlier, other in seen:
            changed = differences(model, other)
            if changed and set(changed) <= SHAPE_ONLY and parts[name] == parts[earlier]:
                notes.append(f"note: {name!r} builds the same model as {earlier!r}: {', '.join(changed.values())} "
                             "changes no weight's shape")
                break
        seen.append((name, model))
    return notes


def command(args: argparse.Namespace) -> int:
    if args.spec in (*SLOTS, "components"):
        if args.overrides:
            raise SpecError(f"{args.overrides[0]}: {args.spec} is a slot, whose registered kinds `wb info` lists; --set "
                            "edits a model, trial or study file, or a preset")
        return slot_kinds(list(SLOTS) if args.spec == "components" else [args.spec])
    args.spec = resolve_target(args.spec)
    if is_study_file(args.spec):
        return study_info(args)
    args.context = args.context or 2048
    spec = load_model_spec(args.spec, args.overrides)
    parts, counts = param_breakdown(spec), param_counts(spec)
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

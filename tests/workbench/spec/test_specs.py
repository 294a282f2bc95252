"""ModelSpec: presets, paper parameter counts, round trips, hashes and clear errors."""
import json
import subprocess
import sys
import textwrap

import pytest
import yaml
from pydantic import ValidationError

from foxwb.workbench.spec.errors import SpecError, validate
from foxwb.workbench.spec.cost import param_counts
from foxwb.workbench.spec.trial import ModelSpec

ISSUE_SHAPE = """
preset: fox_pro
vocab_size: 50257
d_model: 768
n_layers: 12
n_heads: 12
attention:
  forget_gate: {kind: data_dependent}
  qk_norm: {kind: rmsnorm}
  output_gate: {kind: sigmoid}
  output_norm: {kind: rmsnorm}
  kv_shift: {kind: kv}
  rope: {kind: none}
mlp: {kind: swiglu, hidden_ratio: 3.5}
"""

SMALL = dict(d_model=768, n_layers=12, n_heads=12)
MEDIUM = dict(d_model=1024, n_layers=24, n_heads=16)
# docs/fox-notes.md, "Parameter counts": blocks + final norm, LLaMA / Pro.
PAPER_BLOCKS = {
    ("small", "llama"): 85.1e6, ("small", "pro"): 85.3e6,
    ("medium", "llama"): 308.7e6, ("medium", "pro"): 315.9e6,
}


@pytest.mark.parametrize("preset", ["transformer_llama", "fox_llama", "transformer_pro", "fox_pro"])
@pytest.mark.parametrize("size", ["small", "medium"])
def test_presets_match_the_paper_parameter_counts(preset, size):
    spec = ModelSpec(preset=preset, vocab_size=50257, **(SMALL if size == "small" else MEDIUM))
    paper = PAPER_BLOCKS[(size, preset.split("_")[1])]
    counts = param_counts(spec)
    assert abs(counts["blocks"] - paper) / paper < 0.005
    # The paper's N: everything but the input embedding (the LM head counted).
    assert counts["non_embedding"] == counts["blocks"] + 50257 * spec.d_model



def test_counts_are_built_once_per_model_and_a_caller_cannot_change_them():
    """param_breakdown builds each model spec once per process (a dry run of a big study asks once
    per trial): a spec asked again is not rebuilt, a different one is, and what a caller does to
    the dict it got changes no later answer."""
    from foxwb.workbench.spec import cost

    spec = ModelSpec(preset="fox_pro", vocab_size=97, d_model=48, n_layers=3, n_heads=4)
    first = cost.param_breakdown(spec)
    built = []
    real = cost._count
    cost._count = lambda s: built.append(s) or real(s)
    try:
        first["embed"] = -1
        again = cost.param_breakdown(ModelSpec.model_validate(spec.model_dump()))
        other = cost.param_breakdown(spec.model_copy(update={"n_layers": 2}))
    finally:
        cost._count = real
    assert again["embed"] == 97 * 48 and len(built) == 1
    assert other["mlp"] == again["mlp"] * 2 // 3 and param_counts(spec)["total"] == sum(again.values())

def test_the_issue_shape_validates_and_equals_the_preset():
    spec = ModelSpec.model_validate(yaml.safe_load(ISSUE_SHAPE))
    assert spec == ModelSpec(preset="fox_pro")
    assert spec.attention.kv_shift.kind == "kv" and spec.mlp.hidden_ratio == 3.5


def test_a_slot_given_without_its_kind_changes_the_presets_component_options():
    """`mlp: {hidden_ratio: 3.0}` on a preset keeps the preset's swiglu; a kind-less attention slot
    keeps the preset's kind; a slot that names its kind replaces the preset's; an option the
    preset's kind does not have is refused with its path."""
    spec = ModelSpec(preset="fox_pro", mlp={"hidden_ratio": 3.0}, attention={"kv_shift": {"logit_normalizer": 16}})
    assert (spec.mlp.kind, spec.mlp.hidden_ratio) == ("swiglu", 3.0)
    assert (spec.attention.kv_shift.kind, spec.attention.kv_shift.logit_normalizer) == ("kv", 16)
    assert spec.attention.forget_gate.kind == "data_dependent"  # the other slots stay the preset's
    assert spec == ModelSpec(preset="fox_pro", mlp={"kind": "swiglu", "hidden_ratio": 3.0},
                             attention={"kv_shift": {"kind": "kv", "logit_normalizer": 16}})
    assert ModelSpec(preset="fox_pro", mlp={"kind": "gelu"}).mlp.kind == "gelu"
    with pytest.raises(ValidationError, match="logit_normalizer"):
        ModelSpec(preset="fox_llama", attention={"kv_shift": {"logit_normalizer": 16}})  # its kv_shift is none
    with pytest.raises(ValidationError, match="missing 'kind'"):
        ModelSpec(mlp={"hidden_ratio": 3.0})  # no preset: nothing to take the kind from


def test_round_trip_through_json_and_yaml_keeps_the_hash():
    spec = ModelSpec(preset="transformer_pro", d_model=64, n_heads=4, attention={"qk_norm": {"kind": "rmsnorm", "share_across_heads": True}})
    again = ModelSpec.model_validate_json(spec.model_dump_json())
    via_yaml = ModelSpec.model_validate(yaml.safe_load(yaml.safe_dump(spec.model_dump(mode="json"))))
    assert again == spec == via_yaml
    assert again.spec_hash() == spec.spec_hash() == via_yaml.spec_hash()
    assert json.loads(spec.canonical_json())["attention"]["qk_norm"]["share_across_heads"] is True


def test_hash_changes_with_any_field():
    base = ModelSpec(preset="fox_pro")
    assert base.spec_hash() != ModelSpec(preset="fox_pro", attention={"qk_norm": "none"}).spec_hash()
    assert base.spec_hash() != ModelSpec(preset="fox_pro", init_std=0.01).spec_hash()


def test_execution_only_fields_stay_out_of_the_trial_hash():
    """train.cuda_graphs changes how a step is launched, not what it computes: switching it finds
    the same finished trials; it is still recorded in the resolved spec. Fields that change the
    computation still change the hash."""
    from foxwb.workbench.spec.trial import TrialSpec

    base = TrialSpec()
    no_graphs = TrialSpec.model_validate({"train": {"cuda_graphs": False}})
    assert base.spec_hash() == no_graphs.spec_hash()
    assert no_graphs.model_dump()["train"]["cuda_graphs"] is False
    assert "cuda_graphs" not in base.canonical_json()
    assert base.spec_hash() != TrialSpec.model_validate({"train": {"compile": True}}).spec_hash()


def test_bare_kind_strings_and_explicit_fields_override_the_preset():
    spec = ModelSpec(preset="fox_pro", attention={"qk_norm": "none", "rope": "rope"})
    assert spec.attention.qk_norm.kind == "none" and spec.attention.rope.kind == "rope"
    assert spec.attention.kv_shift.kind == "kv"  # untouched slots keep the preset's kind


@pytest.mark.parametrize(
    "data,expected",
    [
        ({"d_modle": 64}, ["d_modle", "Extra inputs are not permitted"]),
        ({"attention": {"qk_norm": "layernorm"}}, ["attention.qk_norm", "'layernorm'", "registered kinds: none, rmsnorm"]),
        ({"mlp": {"kind": "moe"}}, ["mlp", "'moe'", "gelu, swiglu"]),
        ({"d_model": 768, "n_heads": 5}, ["n_heads", "5", "d_model=768"]),
        ({"n_layers": -2}, ["n_layers", "greater than 0", "-2"]),
        ({"attention": {"output_gate": "silu", "output_norm": "rmsnorm"}}, ["attention.output_gate", "'silu'", "output_norm"]),
        ({"attention": {"qk_norm": {"kind": "rmsnorm", "eps": 0}}}, ["attention.qk_norm.eps", "greater than 0"]),
        ({"preset": "gpt5"}, ["preset", "'gpt5'", "fox_pro"]),
    ],
)
def test_bad_specs_name_the_field_the_value_and_what_is_allowed(data, expected):
    with pytest.raises(SpecError) as err:
        validate(ModelSpec, data, "model.yaml")
    for fragment in expected:
        assert fragment in str(err.value), (fragment, str(err.value))


def test_a_misspelt_key_gets_the_closest_field_and_no_error_about_defaults():
    """`n_head: 2` with d_model 32 is one problem, the unknown key, with the key it was meant to be;
    not also the default n_heads=12 clashing with d_model, which the user never wrote."""
    from foxwb.workbench.spec.trial import TrialSpec
    from foxwb.workbench.spec.study import StudySpec

    with pytest.raises(SpecError) as err:
        validate(TrialSpec, {"model": {"d_model": 32, "n_head": 2}, "train": {"lrr": 0.01}}, "trial.yaml")
    text = str(err.value)
    assert "2 problems" in text and "n_heads=12" not in text
    assert "model.n_head: Extra inputs are not permitted (got 2); did you mean 'n_heads'?" in text
    assert "train.lrr: Extra inputs are not permitted (got 0.01); did you mean 'lr'?" in text
    with pytest.raises(SpecError) as err:
        validate(StudySpec, {"name": "s", "seed": [0, 1], "design": {"kind": "grid", "axs": {}}}, "study.yaml")
    assert "seed: Extra inputs are not permitted (got [0, 1]); did you mean 'seeds'?" in str(err.value)
    assert "design.axs: Extra inputs are not permitted; did you mean 'axes'?" in str(err.value)
    with pytest.raises(SpecError) as err:  # a component's options: those of the kind given
        validate(ModelSpec, {"attention": {"qk_norm": {"kind": "rmsnorm", "esp": 1e-6}}}, "model.yaml")
    assert "did you mean 'eps'?" in str(err.value)
    with pytest.raises(SpecError) as err:  # a study's key one level too deep; another tool's form of a searched field
        validate(StudySpec, {"name": "s", "design": {"kind": "grid", "axes": {"train.lr": [0.01]}, "seeds": [0, 1]},
                             "search": {"space": {"train.lr": {"kind": "loguniform", "low": 1e-4, "high": 1e-2}}}},
                 "study.yaml")
    text = str(err.value)
    assert "design.seeds: Extra inputs are not permitted (got [0, 1]); 'seeds' belongs at the top level of the file" in text
    assert "search.space.train.lr: a searched field is one key and its values: write {loguniform: [0.0001, 0.01]} " \
           "(got keys ['high', 'kind', 'low'])" in text and "2 problems" in text, text
    with pytest.raises(SpecError) as err:  # two keys as near: both named
        validate(StudySpec, {"name": "s", "design": {"kind": "variants", "variants": [{"name": "x", "tset": "welch"}]}},
                 "study.yaml")
    assert "design.variants[0].tset (x): Extra inputs are not permitted (got 'welch'); did you mean 'set' or 'test'?" \
        in str(err.value), str(err.value)
    with pytest.raises(SpecError) as err:  # the default is named as such when it is the one that clashes
        validate(ModelSpec, {"d_model": 32}, "model.yaml")
    assert "n_heads=12 (the default) does not divide d_model=32" in str(err.value)


def test_an_unknown_kind_of_a_design_or_data_names_the_kinds_its_union_has():
    """A design's or a data section's kind that none of its union's members has: the kinds listed in
    the union's order (read from the models), with the closest one."""
    from foxwb.workbench.spec.trial import TrialSpec
    from foxwb.workbench.spec.study import StudySpec

    with pytest.raises(SpecError) as err:
        validate(StudySpec, {"name": "s", "seeds": [0], "design": {"kind": "grd", "axes": {}}}, "study.yaml")
    assert str(err.value) == ("study.yaml: 1 problem\n  design.kind: unknown kind 'grd'; kinds: grid, ablation, "
                              "cumulative, variants, scaling, crossed; did you mean 'grid'?")
    with pytest.raises(SpecError) as err:
        validate(TrialSpec, {"data": {"kind": "mqr", "context": 32}}, "trial.yaml")
    assert str(err.value) == ("trial.yaml: 1 problem\n  data.kind: unknown kind 'mqr'; kinds: builtin, text, tokens, "
                              "mqar, hf_dataset, table, shards, longcrawl64, english; did you mean 'mqar'?")


def test_a_third_party_package_adds_a_kind_through_the_entry_point(tmp_path):
    # A real installed distribution (a .dist-info with entry_points.txt on sys.path), loaded by
    # importlib.metadata in a fresh interpreter, exactly as pip would install one.
    (tmp_path / "wb_extra.py").write_text(textwrap.dedent("""
        from typing import Literal
        import torch.nn as nn
        from foxwb.components.registry import ComponentSpec

        class ScaledGate(ComponentSpec):
            slot = "output_gate"
            kind: Literal["scaled"] = "scaled"
            factor: float = 2.0

            def build(self, dims):
                return Scale(self.factor)

        class Scale(nn.Module):
            def __init__(self, factor):
                super().__init__()
                self.factor = factor

            def forward(self, x, o):
                return o * self.factor
    """))
    dist = tmp_path / "wb_extra-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: wb-extra\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[workbench.components]\nscaled = wb_extra:ScaledGate\n")
    code = textwrap.dedent("""
        import sys, torch
        sys.path.insert(0, sys.argv[1])
        from foxwb import components
        from foxwb.workbench.spec.trial import ModelSpec
        from foxwb.workbench.model import build_model
        assert "scaled" in components.kinds("output_gate"), components.kinds("output_gate")
        spec = ModelSpec(vocab_size=16, d_model=16, n_layers=1, n_heads=2, attention={"output_gate": {"kind": "scaled", "factor": 3}})
        model = build_model(spec)
        print(model(torch.zeros(1, 4, dtype=torch.long)).shape, spec.attention.output_gate.factor)
    """)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "torch.Size([1, 4, 16]) 3.0" in out.stdout


def test_pruning_tolerance_is_validated_and_part_of_the_identity():
    base = ModelSpec(preset="fox_pro")
    pruned = ModelSpec(preset="fox_pro", attention={"log_pruning_tolerance": -10})
    assert "log_pruning_tolerance" not in base.canonical_json()
    assert pruned.spec_hash() != base.spec_hash()
    assert ModelSpec.model_validate_json(pruned.model_dump_json()) == pruned
    for bad in (0, 3.0, float("nan")):
        with pytest.raises(ValidationError, match="log_pruning_tolerance"):
            ModelSpec(preset="fox_pro", attention={"log_pruning_tolerance": bad})
    with pytest.raises(ValidationError, match="needs a forget gate"):
        ModelSpec(preset="transformer_llama", attention={"log_pruning_tolerance": -10})


def test_a_forget_gate_written_without_bias_init_keeps_its_hash():
    """bias_init came after trials were run with a zero bias: at 0 it stays out of the identity,
    set to anything else it is part of it (and the model starts with that bias)."""
    from foxwb.workbench.model import build_model

    written_before = ModelSpec.model_validate(yaml.safe_load(ISSUE_SHAPE))
    explicit = ModelSpec.model_validate({**yaml.safe_load(ISSUE_SHAPE),
                                         "attention": {"forget_gate": {"kind": "data_dependent", "bias_init": 0.0}}})
    assert explicit.spec_hash() == written_before.spec_hash()
    assert "bias_init" not in written_before.canonical_json()
    remembering = ModelSpec(preset="fox_pro", n_layers=1, attention={"forget_gate": {"kind": "data_dependent", "bias_init": 4.0}})
    assert remembering.spec_hash() != ModelSpec(preset="fox_pro", n_layers=1).spec_hash()
    assert ModelSpec.model_validate_json(remembering.model_dump_json()) == remembering
    bias = build_model(remembering).blocks[0].attn.forget_gate.proj.bias
    assert bias.tolist() == [4.0] * remembering.n_heads


def test_the_forget_gate_lr_scale_trains_its_projection_at_that_multiple():
    """lr_scale puts the gate projection in optimizer groups of their own whose learning rate is the
    schedule's times the scale; at 1 (the default) it is not part of the spec's identity."""
    import torch

    from foxwb.workbench.model import build_model
    from foxwb.workbench.spec.trial import TrainSpec
    from foxwb.workbench.train.steps import make_optimizer

    plain = ModelSpec(preset="fox_pro", n_layers=1)
    assert ModelSpec(preset="fox_pro", n_layers=1,
                     attention={"forget_gate": {"kind": "data_dependent", "lr_scale": 1.0}}).spec_hash() == plain.spec_hash()
    slow = ModelSpec(preset="fox_pro", n_layers=1, attention={"forget_gate": {"kind": "data_dependent", "lr_scale": 0.1}})
    model = build_model(slow)
    opt = make_optimizer(model, TrainSpec(tokens=1000, lr=1e-3), torch.device("cpu"))
    gate = model.blocks[0].attn.forget_gate.proj
    scaled = [g for g in opt.param_groups if g["lr_scale"] == 0.1]
    assert {id(p) for g in scaled for p in g["params"]} == {id(gate.weight), id(gate.bias)}
    assert [g["weight_decay"] for g in scaled] == [0.1, 0.0]  # the weight decays, the bias does not
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(model.parameters()))
    with pytest.raises(ValidationError, match="lr_scale"):
        ModelSpec(preset="fox_pro", attention={"forget_gate": {"kind": "data_dependent", "lr_scale": 0}})


def test_the_forget_gate_logit_normalizer_divides_log_f_and_its_gradient():
    """log f = log sigmoid(logit) / logit_normalizer: the gate's output and the gradient reaching
    its projection are divided by it; at 1 (the default) it is not part of the spec's identity."""
    import torch

    from foxwb.workbench.model import build_model

    plain = ModelSpec(preset="fox_pro", n_layers=1)
    assert ModelSpec(preset="fox_pro", n_layers=1,
                     attention={"forget_gate": {"kind": "data_dependent", "logit_normalizer": 1.0}}).spec_hash() == plain.spec_hash()
    slow = ModelSpec(preset="fox_pro", n_layers=1,
                     attention={"forget_gate": {"kind": "data_dependent", "logit_normalizer": 16.0}})
    assert slow.spec_hash() != plain.spec_hash()
    torch.manual_seed(0)
    gate_plain = build_model(plain).blocks[0].attn.forget_gate
    torch.manual_seed(0)
    gate_slow = build_model(slow).blocks[0].attn.forget_gate
    x = torch.randn(2, 5, plain.d_model)
    out_plain, out_slow = gate_plain(x), gate_slow(x)
    torch.testing.assert_close(out_slow, out_plain / 16)
    out_plain.sum().backward()
    out_slow.sum().backward()
    torch.testing.assert_close(gate_slow.proj.weight.grad, gate_plain.proj.weight.grad / 16)
    with pytest.raises(ValidationError, match="logit_normalizer"):
        ModelSpec(preset="fox_pro", attention={"forget_gate": {"kind": "data_dependent", "logit_normalizer": 0}})


def test_the_kv_shift_logit_normalizer_divides_the_mixing_logit_and_its_gradient():
    """a_t = sigmoid(w_a . x_t / N): with the same trained parameter the shifted k and v are those of
    the plain shift at w_a / N, and the gradient reaching the parameter is divided by N; the
    parameter is drawn by the model's init as a plain weight is; at 1 it is not in the spec's identity."""
    import torch

    from foxwb.workbench.model import build_model, stored_weight

    plain = ModelSpec(preset="fox_pro", n_layers=1)
    assert ModelSpec(preset="fox_pro", n_layers=1,
                     attention={"kv_shift": {"kind": "kv", "logit_normalizer": 1.0}}).spec_hash() == plain.spec_hash()
    slow = ModelSpec(preset="fox_pro", n_layers=1, attention={"kv_shift": {"kind": "kv", "logit_normalizer": 16.0}})
    assert slow.spec_hash() != plain.spec_hash()
    torch.manual_seed(0)
    shift_slow = build_model(slow).blocks[0].attn.kv_shift
    param = stored_weight(shift_slow.k_alpha)
    assert param is shift_slow.k_alpha.parametrizations.weight.original
    assert 0.015 < param.std().item() < 0.025  # the model's N(0, 0.02), not nn.Linear's own init
    shift_plain = build_model(plain).blocks[0].attn.kv_shift
    with torch.no_grad():
        shift_plain.k_alpha.weight.copy_(param / 16)
        shift_plain.v_alpha.weight.copy_(stored_weight(shift_slow.v_alpha) / 16)
    H, D = plain.n_heads, plain.d_model // plain.n_heads
    x = torch.randn(2, 5, plain.d_model)
    k, v = torch.randn(2, 5, H, D), torch.randn(2, 5, H, D)
    out_plain, out_slow = shift_plain(x, k, v), shift_slow(x, k, v)
    for a, b in zip(out_slow, out_plain):
        torch.testing.assert_close(a, b)
    sum(t.sum() for t in out_plain).backward()
    sum(t.sum() for t in out_slow).backward()
    torch.testing.assert_close(param.grad, shift_plain.k_alpha.weight.grad / 16)
    # Weight decay reaches the parameter as it reaches a plain weight (36b4be3 left it out: the
    # decayed set was built from the computed weights), and its gradient part keeps the plain name.
    from foxwb.workbench.train.grad_parts import part_of
    from foxwb.workbench.spec.trial import TrainSpec
    from foxwb.workbench.train.steps import make_optimizer

    for spec in (plain, slow):
        model = build_model(spec)
        opt = make_optimizer(model, TrainSpec(tokens=1000, lr=1e-3), torch.device("cpu"))
        names = {id(p): n for n, p in model.named_parameters()}
        decayed = {part_of(names[id(p)]) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
        assert {"blocks.*.attn.kv_shift.k_alpha.weight", "blocks.*.attn.kv_shift.v_alpha.weight"} <= decayed
    with pytest.raises(ValidationError, match="logit_normalizer"):
        ModelSpec(preset="fox_pro", attention={"kv_shift": {"kind": "kv", "logit_normalizer": -1}})

"""``model.attention.window``: the sliding-window option validates, stays out of the identity while
None, counts only the band's attention FLOPs, and a model with it trains on CPU."""
import pytest
import torch
import yaml
from pydantic import ValidationError

from foxwb.kernels import forgetting_attention_naive
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.cost import flops_per_token, param_counts
from foxwb.workbench.spec.study import StudySpec, expand
from foxwb.workbench.spec.trial import ModelSpec

TINY = dict(vocab_size=64, d_model=32, n_layers=2, n_heads=4)


def test_window_validates_and_is_part_of_the_identity_only_once_set():
    base = ModelSpec(preset="transformer_pro")
    windowed = ModelSpec(preset="transformer_pro", attention={"window": 256})
    assert windowed.attention.window == 256 and base.attention.window is None
    assert "window" not in base.canonical_json()
    assert ModelSpec(preset="transformer_pro", attention={"window": None}).spec_hash() == base.spec_hash()
    assert windowed.spec_hash() != base.spec_hash()
    assert ModelSpec.model_validate_json(windowed.model_dump_json()) == windowed
    assert ModelSpec(preset="fox_pro", attention={"window": 8}).attention.forget_gate.kind == "data_dependent"
    for bad in (0, -4, 2.5, True, "256"):
        with pytest.raises(ValidationError, match="window"):
            ModelSpec(preset="transformer_pro", attention={"window": bad})
    with pytest.raises(ValidationError, match="window=8 cannot be combined with log_pruning_tolerance=-10"):
        ModelSpec(preset="fox_pro", attention={"log_pruning_tolerance": -10, "window": 8})


def test_a_study_sets_the_window_by_its_dotted_path():
    study = StudySpec.model_validate(yaml.safe_load("""
        name: swa
        base:
          model: {preset: transformer_pro, vocab_size: 256, d_model: 64, n_layers: 2, n_heads: 4}
          data: {kind: builtin, context: 128}
        design:
          kind: variants
          variants:
            - {name: Transformer}
            - {name: SWA 32, set: {model.attention.window: 32}}
        seeds: [0]
    """))
    windows = {t.variant: t.spec.model.attention.window for t in expand(study)}
    assert windows == {"Transformer": None, "SWA 32": 32}


def test_attention_flops_count_only_the_band():
    full = ModelSpec(preset="transformer_pro", **TINY)
    assert param_counts(ModelSpec(preset="transformer_pro", **TINY, attention={"window": 16})) == param_counts(full)
    T = 128
    causal = flops_per_token(full, T)["attention_forward"]
    assert causal == 2 * TINY["n_layers"] * TINY["d_model"] * T
    for window in (T, 4 * T):  # a window of T or more masks nothing
        assert flops_per_token(ModelSpec(preset="transformer_pro", **TINY, attention={"window": window}), T) \
            == flops_per_token(full, T)
    windowed = ModelSpec(preset="transformer_pro", **TINY, attention={"window": 16})
    # mean of min(i, 16) over i = 1..128 keys per query, as T / 2 is for causal attention
    keys = (16 * 17 / 2 + (T - 16) * 16) / T
    assert flops_per_token(windowed, T)["attention_forward"] == pytest.approx(4 * 2 * 32 * keys, rel=0.01)


@pytest.mark.parametrize("preset", ["transformer_pro", "fox_pro"])
def test_a_model_with_a_window_trains_a_step_on_cpu(preset):
    """The window reaches the kernel call (the block's output is the windowed attention's, not
    full causal attention's), and one optimizer step leaves every weight finite."""
    model = build_model(ModelSpec(preset=preset, **TINY, attention={"window": 3}))
    attn = model.blocks[0].attn
    x = torch.randn(2, 11, TINY["d_model"])
    with torch.no_grad():
        q, k, v, log_f, _ = attn.attention_inputs(x)
        windowed = forgetting_attention_naive(q, k, v, log_f, window=3)
        assert not torch.allclose(windowed, forgetting_attention_naive(q, k, v, log_f), atol=1e-3)
        assert torch.allclose(attn(x), attn.wo(_after_kernel(attn, x, windowed)), atol=1e-6)
    tokens = torch.randint(0, TINY["vocab_size"], (2, 12))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = torch.nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
    opt.step()
    assert torch.isfinite(loss) and all(torch.isfinite(p).all() for p in model.parameters())


def _after_kernel(attn, x, o):
    """The block's path after the attention kernel for a kernel output o (B, T, H, D), before wo."""
    _, _, _, _, projected = attn.attention_inputs(x)
    if attn.output_norm is not None:
        o = attn.output_norm(o)
    if attn.output_gate is not None:
        o = attn._component("output_gate", projected, x, o)
    return o.reshape(*x.shape)


def test_wb_info_shows_the_window_of_a_model_and_of_a_variant(tmp_path):
    from tests.cli import wb

    proc = wb("info", "fox_pro", "--set", "attention.window=256")
    assert proc.returncode == 0 and "; sliding window of 256 keys" in proc.stdout, proc.stderr
    study = {"name": "sw", "seeds": [0],
             "base": {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4},
                      "data": {"kind": "builtin", "context": 128}},
             "design": {"kind": "variants", "compare_to": "FoX (Pro)", "variants": [
                 {"name": "FoX (Pro)"},
                 {"name": "SWA", "set": {"model.attention.forget_gate": "none", "model.attention.window": 32}}]}}
    (tmp_path / "sw.yaml").write_text(yaml.safe_dump(study))
    proc = wb("info", tmp_path / "sw.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].split()[0] == "SWA" and proc.stdout.rstrip().endswith("forget_gate=none, window=32")

"""A study's claims in its file: validated at load with errors naming the field and what is
allowed; study-level, so no trial's identity changes with them; tagged for readers without the file."""
import json

import pytest

from foxwb.workbench.analysis.claims import declared
from foxwb.workbench.spec.errors import SpecError, validate
from foxwb.workbench.spec.study import StudySpec, claim_rows, design_tags, expand

BASE = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2},
        "data": {"kind": "builtin", "context": 32}}
ABLATION = {"kind": "ablation", "base_name": "FoX (Pro)", "changes": [
    {"name": "FoX (Pro) - forget gate", "set": {"model.attention.forget_gate": "none"}},
    {"name": "FoX (Pro) - KV-shift", "set": {"model.attention.kv_shift": "none"}}]}
CROSSED = {"kind": "crossed", "axis": "context", "variants": [{"name": "FoX"}, {"name": "no gate", "set": {
    "model.attention.forget_gate": "none"}}], "points": [{"name": "32", "set": {"data.context": 32}},
                                                         {"name": "64", "set": {"data.context": 64}}]}
GATE = {"name": "gate helps", "compare": ["FoX (Pro)", "FoX (Pro) - forget gate"], "sesoi": 0.01}


def study(claims, design=ABLATION, **kw):
    return validate(StudySpec, {"name": "s", "base": BASE, "design": design, "seeds": [0, 1], "claims": claims, **kw},
                    "s.yaml")


def error(claims, design=ABLATION) -> str:
    with pytest.raises(SpecError) as e:
        study(claims, design)
    return str(e.value)


def test_a_claim_names_two_variants_and_a_sesoi():
    spec = study([GATE, {"name": "no KV-shift costs nothing", "compare": ["FoX (Pro) - KV-shift", "FoX (Pro)"],
                         "sesoi": 0.02}])
    assert [(c.name, c.compare, c.sesoi) for c in spec.claims] == [
        ("gate helps", ["FoX (Pro)", "FoX (Pro) - forget gate"], 0.01),
        ("no KV-shift costs nothing", ["FoX (Pro) - KV-shift", "FoX (Pro)"], 0.02)]
    assert study(None).claims is None  # none declared: the results give the default claims


def test_an_unknown_variant_is_refused_with_the_closest_name():
    text = error([{**GATE, "compare": ["FoX (Pro)", "FoX (Pro) - forget gte"]}])
    assert ("claims[0].compare[1] (gate helps): 'FoX (Pro) - forget gte' is not a variant of this study; its variants: "
            "'FoX (Pro)', 'FoX (Pro) - forget gate', 'FoX (Pro) - KV-shift'; did you mean 'FoX (Pro) - forget gate'?") in text


@pytest.mark.parametrize("sesoi", [0, 1, 1.5, -0.01, "1%", True])
def test_a_sesoi_outside_zero_to_one_is_refused(sesoi):
    text = error([{**GATE, "sesoi": sesoi}])
    assert "claims[0].sesoi (gate helps): the smallest effect of interest, relative in perplexity, in (0, 1): 0.01 is 1%" in text


def test_the_other_bad_claims_name_their_field():
    assert "claims[0].sesoi (gate helps): missing: a claim states its smallest effect of interest before the runs" in \
        error([{"name": "gate helps", "compare": GATE["compare"]}])
    assert "claims[1].name (gate helps): 'gate helps' is the name of claims[0] too; claim names must be unique" in \
        error([GATE, {**GATE, "compare": ["FoX (Pro) - KV-shift", "FoX (Pro)"]}])
    assert "claims[0].compare (gate helps): A and B must be two different rows" in \
        error([{**GATE, "compare": ["FoX (Pro)", "FoX (Pro)"]}])
    assert "claims[0].compare (gate helps): two row names, [A, B]" in error([{**GATE, "compare": ["FoX (Pro)"]}])
    assert "claims: no claims listed: list one or more" in error([])
    assert "claims[0].sesio (gate helps): Extra inputs are not permitted" in error([{**GATE, "sesio": 0.01}])


def test_in_a_crossed_design_a_claim_names_rows_at_a_point():
    spec = study([{"name": "gate at 64", "compare": ["FoX [context=64]", "no gate [context=64]"], "sesoi": 0.01}], CROSSED)
    assert claim_rows(spec)[0] == ["FoX [context=32]", "FoX [context=64]", "no gate [context=32]", "no gate [context=64]"]
    text = error([{"name": "gate", "compare": ["FoX", "no gate [context=64]"], "sesoi": 0.01}], CROSSED)
    assert ("claims[0].compare[0] (gate): 'FoX' is not a row of this study (a variant at a point of its axis: its rows "
            "are compared at the same point); its rows: 'FoX [context=32]', 'FoX [context=64]'") in text


def test_claims_leave_every_trial_identity_as_it_was():
    without, with_claims = study(None), study([GATE])
    assert [t.spec_hash for t in expand(with_claims)] == [t.spec_hash for t in expand(without)]
    # Tagged on the study's parent run for the dashboard and `wb results NAME` (no file at hand).
    tags = design_tags(with_claims)
    assert json.loads(tags["claims"]) == [GATE] and "claims" not in design_tags(without)
    assert declared(tags=tags) == declared(with_claims)
    assert [(c.name, c.a, c.b, c.sesoi, c.default) for c in declared(with_claims)] == [
        ("gate helps", "FoX (Pro)", "FoX (Pro) - forget gate", 0.01, False)]

"""Study files: every design expands to the right variants; bad files are one clear error."""
import json

import pytest

from foxwb.workbench.spec.errors import SpecError, validate
from foxwb.workbench.spec.study import StudySpec, expand

BASE = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2},
        "data": {"kind": "builtin", "context": 32}}


def study(design, **kw):
    return validate(StudySpec, {"name": "s", "base": BASE, "design": design, **kw})


def test_ablation_is_the_base_plus_one_change_at_a_time_times_seeds():
    trials = expand(study({"kind": "ablation", "base_name": "FoX (Pro)", "changes": [
        {"name": "FoX (Pro) - QK-norm", "set": {"model.attention.qk_norm": "none"}},
        {"name": "FoX (Pro) - KV-shift", "set": {"model.attention.kv_shift": "none"}}]}, seeds=[0, 1, 2]))
    assert [(t.variant, t.seed) for t in trials][:3] == [("FoX (Pro)", 0), ("FoX (Pro)", 1), ("FoX (Pro)", 2)]
    assert len(trials) == 9 and len({t.spec_hash for t in trials}) == 9
    qk = [t for t in trials if t.variant == "FoX (Pro) - QK-norm"][0].spec.model.attention
    assert qk.qk_norm.kind == "none" and qk.kv_shift.kind == "kv"


def test_cumulative_applies_changes_one_after_another():
    trials = expand(study({"kind": "cumulative", "base_name": "FoX (LLaMA)", "steps": [
        {"name": "+ QK-norm", "set": {"model.attention.qk_norm": "rmsnorm"}},
        {"name": "+ output gate", "set": {"model.attention.output_gate": "sigmoid"}}]},
        base={**BASE, "model": {**BASE["model"], "preset": "fox_llama"}}))
    last = trials[-1].spec.model.attention
    assert [t.variant for t in trials] == ["FoX (LLaMA)", "+ QK-norm", "+ output gate"]
    assert last.qk_norm.kind == "rmsnorm" and last.output_gate.kind == "sigmoid"
    assert trials[1].spec.model.attention.output_gate.kind == "none"


def test_grid_is_the_cartesian_product_and_variants_are_explicit():
    grid = expand(study({"kind": "grid", "axes": {"train.lr": [1e-3, 2e-3], "model.d_model": [32, 64]}}))
    assert len(grid) == 4 and grid[0].variant == "lr=0.001, d_model=32"
    named = expand(study({"kind": "variants", "variants": [{"name": "a", "set": {}}, {"name": "b", "set": {"train.lr": 0.01}}]}))
    assert [t.variant for t in named] == ["a", "b"]


def test_the_row_deltas_are_taken_against():
    from foxwb.workbench.spec.study import base_variant

    one = {"name": "a", "set": {"model.attention.qk_norm": "none"}}
    two = {"name": "b", "set": {"model.attention.kv_shift": "none"}}
    assert base_variant(study({"kind": "variants", "variants": [one, two]}).design) == "a"
    assert base_variant(study({"kind": "variants", "variants": [one, two], "compare_to": "b"}).design) == "b"
    assert base_variant(study({"kind": "ablation", "base_name": "FoX", "changes": [one]}).design) == "FoX"
    # A grid's base is its first cell, every axis at its first value.
    grid = study({"kind": "grid", "axes": {"train.lr": [1e-3, 2e-3], "model.attention.qk_norm": ["none", "rmsnorm"]}})
    assert base_variant(grid.design) == "lr=0.001, qk_norm=none" == expand(grid)[0].variant


def test_search_draws_per_variant_and_is_reproducible():
    search = {"space": {"train.lr": {"loguniform": [1e-4, 1e-2]}}, "num_samples": 3}
    design = {"kind": "ablation", "changes": [{"name": "no gate", "set": {"model.attention.forget_gate": "none"}}]}
    a, b = expand(study(design, search=search)), expand(study(design, search=search))
    assert len(a) == 6 and [t.spec_hash for t in a] == [t.spec_hash for t in b]
    lrs = [t.spec.train.lr for t in a]
    assert all(1e-4 <= lr <= 1e-2 for lr in lrs) and len(set(lrs)) == 6


@pytest.mark.parametrize(
    "data,expected",
    [
        ({"name": "s", "base": BASE, "design": {"kind": "ablation", "changes": []}}, "design.changes: List should have at least 1 item"),
        ({"name": "s", "base": BASE, "design": {"kind": "grid", "axes": {}}}, "design.axes"),
        ({"name": "s", "base": BASE, "desing": {"kind": "variants"}}, "desing: Extra inputs are not permitted"),
        ({"name": "s", "base": BASE, "design": {"kind": "ablation", "changes": [{"name": "x", "set": {"model.attention.qk_nrom": "none"}}]}},
         "design.changes[0].set (row x): 'model.attention.qk_nrom': model.attention has no field 'qk_nrom' (it has: forget_gate, kv_shift"),
        # A problem is named where its value was written: a search's space, a grid's axis.
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x"}]},
          "search": {"space": {"train.batch_size": {"choice": [2, "big"]}}, "algorithm": "grid"}},
         "search.space.train.batch_size (row x [batch_size=big]): 1 problem"),
        ({"name": "s", "base": BASE, "design": {"kind": "ablation", "base_name": "FoX", "changes": [
            {"name": "FoX", "set": {"train.lr": 0.01}}]}},
         "design.changes[0]: variant name 'FoX' is used twice (the base row's name, base_name: 'FoX')"),
        ({"name": "s", "base": BASE, "design": {"kind": "crossed", "axis": "context", "variants": [{"name": "x", "set": {}}],
                                                "points": [{"name": "64", "set": {"data.context": 64}},
                                                           {"name": "64", "set": {"data.context": 128}}]}},
         "design.points: names must be unique (a row is named by its variant and point), got ['64', '64']"),
        ({"name": "s", "base": BASE, "design": {"kind": "grid", "axes": {"train.lr": [0.001, "fast"]}}},
         "design.axes.train.lr (row lr=fast): 1 problem"),
        ({"name": "s", "base": BASE, "design": {"kind": "cumulative", "steps": [
            {"name": "a", "set": {"train.lr": 0.01}}, {"name": "b", "set": {"model.d_model": 33}}]}},
         "design.steps[1].set (row b): 1 problem"),
        ({"name": "s", "base": BASE, "design": {"kind": "ablation", "changes": [{"name": "x", "set": {"model.attention.qk_norm": "bogus"}}]}},
         "model.attention.qk_norm: unknown kind 'bogus'; registered kinds: none, rmsnorm"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "set": {}}]},
          "search": {"space": {"train.lr": {"choice": [0.01, 0.01]}}, "algorithm": "grid"}},
         "variant 'x' gives the same trial twice"),
        # Two points of an axis that build one trial are named.
        ({"name": "s", "base": BASE, "design": {"kind": "scaling", "tokens_per_param": 2, "variants": [{"name": "x", "set": {}}],
                                                "sizes": [{"name": n, "set": {"model.d_model": d, "model.n_heads": h}}
                                                          for n, d, h in (("XS", 16, 1), ("S", 32, 2), ("M", 32, 2), ("L", 64, 4))]}},
         "variant 'x' gives the same trial twice at 'size=S' and 'size=M'"),
        # A search's space: a grid lists its values; a range is written low first; a choice lists one or more.
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x"}]},
          "search": {"space": {"train.lr": {"loguniform": [1e-4, 1e-2]}}, "algorithm": "grid"}},
         "search.space.train.lr: algorithm 'grid' runs listed values only: give {choice: [...]} here"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x"}]},
          "search": {"space": {"train.lr": {"loguniform": [1e-2, 1e-4]}}}},
         "search.space.train.lr.loguniform: [low, high], low first (got [0.01, 0.0001]; write [0.0001, 0.01])"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x"}]},
          "search": {"space": {"train.lr": {"choice": []}}}},
         "search.space.train.lr.choice: List should have at least 1 item"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "compare_to": "y", "variants": [{"name": "x", "set": {}}]}},
         "design.compare_to: 'y' is not a variant; the variants are ['x']"),
        # A section's validator names the field it refuses: that field is the location, as written in the file.
        ({"name": "s", "base": {**BASE, "data": {**BASE.get("data", {}), "kind": "text", "paths": ["x.txt"], "sources": "stdlib+packages"}},
          "design": {"kind": "variants", "variants": [{"name": "x", "set": {}}]}},
         "data.sources: only the 'builtin' corpus takes sources"),
        ({"name": "s", "base": BASE, "design": {"kind": "crossed", "axis": "c", "variants": [{"name": "x", "set": {}}],
                                                "points": [{"name": "a", "set": {"data.context": 32}}, {"name": "b", "set": {"data.context": 64}}]},
          "search": {"space": {"train.lr": {"choice": [0.01, 0.02]}}, "algorithm": "optuna"}},
         "search.algorithm: a crossed design searches each cell"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "seeds": [0, 1], "set": {}}]},
          "search": {"space": {"train.lr": {"choice": [0.01, 0.02]}}, "algorithm": "grid"}},
         "design.variants[0].seeds (x): a variant's own seeds are for a study without a search"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "seeds": [], "set": {}}]}},
         "design.variants[0].seeds (x): no seeds listed: list one or more, or leave `seeds` out to run the study's"),
        ({"name": "s", "base": BASE, "seeds": [], "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds: no seeds listed: list one or more (got [])"),
        ({"name": "s", "base": BASE, "design": {"kind": "ablation", "changes": [{"name": "x", "seeds": [0], "set": {}}]}},
         "design.changes[0].seeds (x): a row runs seeds of its own only in a variants design (design.kind: variants"),
        ({"name": "s", "base": BASE, "design": {"kind": "cumulative", "steps": [{"name": "x", "seeds": [0], "set": {}}]}},
         "design.steps[0].seeds (x): a row runs seeds of its own only in a variants design"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "seeds": [0, 1, 1]}]}},
         "design.variants[0].seeds (x): seed 1 is listed twice"),
        ({"name": "s", "base": BASE, "seeds": [0, 2, 0], "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds: seed 0 is listed twice"),
        ({"name": "s", "base": BASE, "seeds": [0, True], "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds[1]: Input should be a valid integer"),
        # Seeds written as ranges: '0-250' is both ends and all between.
        ({"name": "s", "base": BASE, "seeds": "5-3", "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds: the range '5-3' runs backwards; write it as '3-5'"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "seeds": "0-4, x"}]}},
         "design.variants[0].seeds (x): 'x' is not a seed or a range of seeds; write a list such as [0, 1, 2], or a "
         "string of seeds and ranges such as '0-250'"),
        ({"name": "s", "base": BASE, "seeds": "-1", "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds: '-1' is not a seed or a range of seeds"),
        ({"name": "s", "base": BASE, "seeds": "0-3, 2", "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds: seed 2 is listed twice"),
        ({"name": "s", "base": BASE, "seeds": "0-10000", "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds: '0-10000' names more than 10,000 seeds"),
        # A lone number: seed 3, or 3 seeds? The file must say.
        ({"name": "s", "base": BASE, "seeds": 3, "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds: 3 is one number, not a list of seeds: write [3] for seed 3, or '0-2' for 3 seeds"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "seeds": ["0-2", 5]}]}},
         "design.variants[0].seeds (x): a range is a string of its own ('0-2, 5'), not an item of a list"),
        ({"name": "s", "base": BASE, "seeds": "\u0660-\u0663", "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "seeds: '\u0660-\u0663' is not a seed or a range of seeds"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "seeds": [2**64]}]}},
         "design.variants[0].seeds[0] (x): Input should be less than 9223372036854775808"),
        ({"name": "s", "base": BASE, "seeds": [0, 1], "design": {"kind": "variants", "compare_to": "b", "variants": [
            {"name": "a", "seeds": [0, 1, 2], "set": {"train.lr": 0.01}}, {"name": "b"}]}},
         "design.variants[0].seeds (a): seeds [2] are not among those of the base row 'b' ([0, 1]); every row is "
         "compared with the base seed by seed: give the base each seed its rows run, or compare the row unpaired "
         "(`test: welch` in its entry)"),
        ({"name": "s", "base": BASE, "seeds": [0, 1], "design": {"kind": "variants", "variants": [
            {"name": "a", "seeds": [5]}, {"name": "b", "set": {"train.lr": 0.01}}]}},
         "seeds (b): seeds [0, 1] are not among those of the base row 'a' ([5])"),
        ({"name": "s", "base": BASE, "seeds": [0, 1], "design": {"kind": "variants", "variants": [
            {"name": "FoX (Pro)"}, {"name": "b (lr)", "seeds": [3], "set": {"train.lr": 0.01}}]}},
         "design.variants[1].seeds (b (lr)): seeds [3] are not among those of the base row 'FoX (Pro)'"),
        ({"name": "s", "base": BASE, "design": {"kind": "ablation", "changes": [{"name": "x", "test": "welch", "set": {}}]}},
         "design.changes[0].test (x): a row picks its test only in a variants design (design.kind: variants"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "test": "unpaired"}]}},
         "design.variants[0].test (x): Input should be 'paired' or 'welch'"),
        # Welch's test takes each row's spread from its own seeds: two or more on each side.
        ({"name": "s", "base": BASE, "seeds": [0, 1], "design": {"kind": "variants", "variants": [
            {"name": "a"}, {"name": "noisy", "test": "welch", "seeds": [7], "set": {"train.lr": 0.01}}]}},
         "design.variants[1].seeds (noisy): [7]: Welch's test (`test: welch`) compares 'noisy' with the base 'a' "
         "from each row's own spread, which takes at least 2 seeds of each; give 'noisy' two seeds or more"),
        ({"name": "s", "base": BASE, "seeds": [0], "design": {"kind": "variants", "variants": [
            {"name": "a"}, {"name": "noisy", "test": "welch", "seeds": [0, 1, 2], "set": {"train.lr": 0.01}}]}},
         "seeds (a): [0]: Welch's test (`test: welch`) compares 'noisy' with the base 'a' from each row's own spread, "
         "which takes at least 2 seeds of each; give the study's seeds (which 'a' runs) two or more"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [
            {"name": "a", "test": "welch", "seeds": [0, 1]}, {"name": "b", "seeds": [4], "set": {"train.lr": 0.01}}]}},
         "design.variants[1].seeds (b): [4]: Welch's test (`test: welch`) compares 'b' with the base 'a'"),
        # A seed comes from `seeds:` only: written anywhere else the expansion would overwrite it.
        ({"name": "s", "base": {**BASE, "seed": 3}, "design": {"kind": "variants", "variants": [{"name": "x"}]}},
         "base.seed: a study runs every row on its `seeds:` list"),
        ({"name": "s", "base": BASE, "design": {"kind": "ablation", "changes": [{"name": "x", "set": {"seed": 1}}]}},
         "design.changes[0].set.seed (row x): a study runs every row on its `seeds:` list"),
        ({"name": "s", "base": BASE, "design": {"kind": "crossed", "axis": "context", "variants": [{"name": "x", "set": None}],
                                                "points": [{"name": "32", "set": {"data.context": 32}},
                                                           {"name": "64", "set": {"data.context": 64, "seed": 2}}]}},
         "design.points[1].set.seed (row x [context=64]): a study runs every row on its `seeds:` list (top level; a "
         "variants design's row may name its own `seeds:` beside its `set:`), which would overwrite a seed written "
         "here; write `seeds: [2]` instead"),
        ({"name": "s", "base": BASE, "design": {"kind": "grid", "axes": {"seed": [0, 1]}}},
         "design.axes.seed (row seed=0): a study runs every row on its `seeds:` list"),
        ({"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x"}]},
          "search": {"space": {"seed": {"choice": [0, 1]}}, "algorithm": "grid"}},
         "search.space.seed: a study runs every row on its `seeds:` list"),
        ({"name": "both ' and \"", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "x", "set": {}}]}},
         "name: a name may contain ' or \" but not both"),
    ],
)
def test_bad_study_files_are_one_clear_error(data, expected):
    with pytest.raises(SpecError) as err:
        expand(validate(StudySpec, data, "study.yaml"))
    # The field leads its line, written as the file spells it (a list's item as [i]).
    assert any(line.strip().startswith(expected) for line in str(err.value).splitlines()), str(err.value)


def test_a_variant_runs_on_its_own_seeds_and_the_rest_on_the_studys():
    """The seeds a power analysis asks differ by row: a variants design's row may name its own."""
    from foxwb.workbench.spec.study import design_tags, variant_seeds

    spec = study({"kind": "variants", "compare_to": "base", "variants": [
        {"name": "far", "seeds": [0, 1], "set": {"model.attention.qk_norm": "none"}},
        {"name": "base", "seeds": [0, 1, 2, 3, 4]},  # no edits: the base trial itself
        {"name": "close", "set": {"model.attention.kv_shift": "none"}}]}, seeds=[0, 1, 2])
    trials = expand(spec)
    assert [(t.variant, t.seed) for t in trials] == [("far", 0), ("far", 1)] + [("base", s) for s in range(5)] + [
        ("close", s) for s in range(3)]
    assert trials[2].spec.model.attention.qk_norm.kind == "rmsnorm"  # the base's preset, unedited
    assert variant_seeds(spec) == {"far": [0, 1], "base": [0, 1, 2, 3, 4], "close": [0, 1, 2]}
    # Readers without the file (wb results NAME) learn each row's seeds from the parent run's tags.
    tags = design_tags(spec)
    assert json.loads(tags["seeds"]) == [0, 1, 2]
    assert json.loads(tags["variant_seeds"]) == {"far": [0, 1], "base": [0, 1, 2, 3, 4]}
    assert "variant_seeds" not in design_tags(study({"kind": "variants", "variants": [{"name": "a", "seeds": [0], "set": {}}]}))


def test_seeds_written_as_ranges_are_the_seeds_listed():
    """`seeds: 0-250` (YAML reads it as a string) is 251 seeds; the trials are those of the list."""
    import yaml

    listed = study({"kind": "variants", "variants": [{"name": "a"}, {"name": "b", "test": "welch", "seeds": [0, 1, 2, 3, 9],
                                                                     "set": {"train.lr": 0.01}}]}, seeds=[0, 1, 2])
    assert yaml.safe_load("seeds: 0-2") == {"seeds": "0-2"}
    ranged = study({"kind": "variants", "variants": [{"name": "a"}, {"name": "b", "test": "welch", "seeds": "0-3, 9",
                                                                     "set": {"train.lr": 0.01}}]}, seeds="0-2")
    assert ranged.seeds == [0, 1, 2] and ranged.design.variants[1].seeds == [0, 1, 2, 3, 9]
    assert [t.spec_hash for t in expand(ranged)] == [t.spec_hash for t in expand(listed)]


def test_a_row_compared_unpaired_runs_seeds_the_base_does_not():
    """`test: welch`: a row whose own spread swamps what pairing cancels takes the seeds Welch's
    test asks of it, beyond the base's; readers without the file learn it from the tags."""
    from foxwb.workbench.spec.study import design_tags, welch_variants

    spec = study({"kind": "variants", "compare_to": "base", "variants": [
        {"name": "noisy", "test": "welch", "seeds": [0, 1, 2, 3, 4, 5, 6], "set": {"model.attention.qk_norm": "none"}},
        {"name": "base", "seeds": [0, 1]}, {"name": "close", "set": {"model.attention.kv_shift": "none"}}]}, seeds=[0, 1])
    assert [(t.variant, t.seed) for t in expand(spec)] == [("noisy", s) for s in range(7)] + [
        ("base", 0), ("base", 1), ("close", 0), ("close", 1)]
    assert welch_variants(spec) == ["noisy"] and json.loads(design_tags(spec)["welch"]) == ["noisy"]
    assert "welch" not in design_tags(study({"kind": "variants", "variants": [{"name": "a"}]}))
    # The base declared welch: every row is compared with it unpaired, on any seeds.
    expand(study({"kind": "variants", "variants": [{"name": "a", "test": "welch", "seeds": [0, 1]},
                                                   {"name": "b", "seeds": [4, 5], "set": {"train.lr": 0.01}}]}))
    # A search draws each point on one seed and confirms the best on seeds of its own: one is fine there.
    expand(study({"kind": "variants", "variants": [{"name": "a"}, {"name": "b", "test": "welch", "set": {"train.lr": 0.01}}]},
                 seeds=[0], search={"space": {"train.lr": {"choice": [0.01, 0.02]}}, "algorithm": "grid",
                                    "confirm": {"seeds": [0, 1, 2]}}))


def test_two_names_for_one_model_run_once_as_aliases():
    # The paper's Table 3 lists '+ output norm' and 'FoX (Pro) - KV-shift': the same model.
    trials = expand(study({"kind": "variants", "variants": [
        {"name": "+ output norm", "set": {"model.attention.kv_shift": "none"}},
        {"name": "FoX (Pro) - KV-shift", "set": {"model.attention.kv_shift": "none"}},
        {"name": "FoX (Pro)", "set": {"model.attention.kv_shift": "kv"}}]}))
    assert [(t.variant, t.aliases) for t in trials] == [("+ output norm", ("FoX (Pro) - KV-shift",)), ("FoX (Pro)", ())]


def test_a_mapping_under_a_path_updates_the_fields_it_names():
    """`set: {model.attention: {qk_norm: none}}` is `set: {model.attention.qk_norm: none}`: the same
    spec and spec hash; the other slots keep the base's kinds."""
    def only(change):
        return expand(study({"kind": "variants", "variants": [{"name": "x", "set": change}]}))[0]

    path = only({"model.attention.qk_norm": "none"})
    mapping = only({"model.attention": {"qk_norm": "none"}})
    nested = only({"model": {"attention": {"qk_norm": "none"}}})
    assert path.spec == mapping.spec == nested.spec and path.spec_hash == mapping.spec_hash == nested.spec_hash
    assert mapping.spec.model.attention.kv_shift.kind == "kv" and mapping.spec.model.attention.qk_norm.kind == "none"
    # Options of the kind already there are updated in place, the kind kept.
    eps = only({"model.attention.qk_norm": {"eps": 1e-6}})
    assert eps.spec.model.attention.qk_norm.kind == "rmsnorm" and eps.spec.model.attention.qk_norm.eps == 1e-6
    assert eps.spec_hash == only({"model.attention.qk_norm.eps": 1e-6}).spec_hash
    # Another kind replaces the slot whole: its options are its own (data_dependent's bias_init is not fixed's).
    fixed = only({"model.attention": {"forget_gate": {"kind": "fixed", "decay_time_max": 64.0}}})
    assert fixed.spec.model.attention.forget_gate.kind == "fixed" and fixed.spec.model.attention.forget_gate.decay_time_max == 64.0
    # A bare kind replaces the slot, options and all, as its path edit does.
    assert only({"model.attention": {"qk_norm": "rmsnorm"}}).spec_hash == only({"model.attention.qk_norm": "rmsnorm"}).spec_hash


def test_a_merged_mapping_with_an_unknown_field_names_it():
    with pytest.raises(SpecError) as err:
        expand(study({"kind": "variants", "variants": [{"name": "x", "set": {"model.attention": {"qk_nrom": "none"}}}]}))
    assert "'model.attention.qk_nrom': model.attention has no field 'qk_nrom'" in str(err.value)
    assert "did you mean 'qk_norm'?" in str(err.value)


def test_the_shipped_studies_expand_to_the_trials_they_always_had():
    """Every trial the shipped studies expanded to at 6d77b50 (tests/workbench/spec/data/spec_hashes_6d77b50.jsonl)
    comes out of the study file now with the same spec hash: a change of how `set:` reads a study
    must not change the trials of one that meant what it says."""
    import json
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    record = [json.loads(line) for line in (Path(__file__).parent / "data" / "spec_hashes_6d77b50.jsonl").open()]
    # The record names the files where they lay at 6d77b50; two past experiments have moved since.
    # (Their old paths are joined here so that the cited-path check does not take them for files.)
    moved = {"/".join(("studies", "fox_table3.yaml")): "experiments/table3_1024/fox_table3.yaml",
             "/".join(("studies", "acp_seeds.yaml")): "experiments/acp_seeds/acp_seeds.yaml"}
    by_study: dict[str, dict[str, str]] = {}
    for r in record:
        path, _, rest = r["source"].partition(" / ")
        path = moved.get(path, path)
        if rest and path.endswith(".yaml") and "design" in yaml.safe_load((root / path).read_text()):
            by_study.setdefault(path, {})[rest] = r["spec_hash"]
    assert set(by_study) == {"experiments/acp_seeds/acp_seeds.yaml", "experiments/table3_1024/fox_table3.yaml", "studies/lr_search.yaml",
                             "studies/packing.yaml", "studies/quickstart.yaml"}
    for path, recorded in by_study.items():
        trials = expand(validate(StudySpec, yaml.safe_load((root / path).read_text()), path))
        now = {f"{t.variant}{f' [{t.point_label}]' if t.search_point else ''} / seed {t.seed}": t.spec_hash for t in trials}
        assert now == recorded, path


def test_a_warmup_as_long_as_the_training_is_noted_per_variant():
    """A row whose warmup is at least the tokens it trains never reaches its peak lr: one note per
    variant (not per seed), naming the field, the counts and the lr; the others say nothing."""
    from foxwb.workbench.spec.study import schedule_notes

    s = study({"kind": "variants", "variants": [
        {"name": "short", "set": {"train.tokens": 20480, "train.warmup_tokens": 4096000, "train.lr": 0.003}},
        {"name": "fine", "set": {"train.tokens": 20480, "train.warmup_tokens": 2048}}]}, seeds=[0, 1])
    trials = expand(s)
    trained = trials[0].spec.train.trained_tokens(trials[0].spec.data.context)
    assert schedule_notes(trials) == [f"short: train.warmup_tokens=4,096,000 is at least the {trained:,} tokens it trains: "
                                      "its learning rate never reaches train.lr=0.003"]


def test_a_crossed_variant_without_edits_is_the_base_at_every_point():
    """The base row of a crossed design needs no stand-in edit (a `seed:` once served, overwritten)."""
    trials = expand(study({"kind": "crossed", "axis": "context", "variants": [
        {"name": "FoX"}, {"name": "FoX lr 0.01", "set": {"train.lr": 0.01}}],
        "points": [{"name": "32", "set": {"data.context": 32}}, {"name": "64", "set": {"data.context": 64}}]},
        seeds=[0, 1]))
    base = [t for t in trials if t.variant == "FoX"]
    plain = validate(StudySpec, {"name": "s", "base": BASE, "design": {"kind": "variants", "variants": [{"name": "FoX"}]}})
    assert [(t.spec.data.context, t.seed) for t in base] == [(32, 0), (32, 1), (64, 0), (64, 1)]
    assert base[0].spec_hash == expand(plain)[0].spec_hash  # the base trial itself at its own context

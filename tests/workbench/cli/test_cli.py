import dataclasses
import subprocess
import sys
from pathlib import Path
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]




def test_info_of_a_preset_prints_counts_breakdown_and_flops():
    out = wb("info", "fox_pro", "--context", "4096")
    assert out.returncode == 0, out.stderr
    assert "without input embedding 123,910,800" in out.stdout
    assert "attention.forget_gate" in out.stdout and "FLOPs/token" in out.stdout


def test_info_of_a_bad_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("attention: {qk_norm: bogus}\n")
    out = wb("info", str(bad))
    assert out.returncode == 2
    assert "attention.qk_norm: unknown kind 'bogus'; registered kinds: none, rmsnorm" in out.stderr
    # A trial file's model field is named as `wb train` names it: under `model`.
    trial = tmp_path / "t.yaml"
    trial.write_text("model: {preset: fox_pro, d_modl: 32}\ntrain: {tokens: 1000}\n")
    out = wb("info", str(trial))
    assert out.returncode == 2 and f"  {trial}:1:26: model.d_modl: Extra inputs are not permitted (got 32); did you mean " \
        "'d_model'?" in out.stderr, out.stderr
    trial.write_text("model: [1, 2]\n")
    out = wb("info", str(trial))
    assert out.returncode == 2 and f"  {trial}:1:1: model: Input should be a valid dictionary" in out.stderr, out.stderr
    missing = wb("info", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    # A bare name is a preset's, misspelt: the nearest one is offered.
    typo = wb("info", "fox_prox")
    assert typo.returncode == 2 and "fox_prox: no such file, and not a preset or a slot; did you mean 'fox_pro'?" in typo.stderr
    assert "did you mean 'forget_gate'?" in wb("info", "forget_gat").stderr


def test_info_of_a_slot_lists_its_registered_kinds_and_their_options():
    from foxwb.components.registry import SLOTS, kinds

    out = wb("info", "forget_gate")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "forget_gate" and [l.split()[0] for l in lines[1:]] == kinds("forget_gate")
    assert "  data_dependent  (bias_init=0.0, lr_scale=1.0, logit_normalizer=1.0)" in lines
    every = wb("info", "components")
    assert every.returncode == 0 and [l for l in every.stdout.splitlines() if not l.startswith(" ")] == list(SLOTS)


def test_info_names_the_slots_and_the_pruning_tolerance(tmp_path):
    spec = tmp_path / "m.yaml"
    spec.write_text("preset: fox_pro\nattention: {log_pruning_tolerance: -10}\n")
    out = wb("info", str(spec))
    assert out.returncode == 0, out.stderr
    assert "forget_gate=data_dependent" in out.stdout and "pruning ln eps -10" in out.stdout
    # a slot's options away from their defaults are named with it
    spec.write_text("preset: fox_pro\nattention: {forget_gate: {kind: data_dependent, logit_normalizer: 16},\n"
                    "            kv_shift: {kind: kv, logit_normalizer: 16}}\n")
    out = wb("info", str(spec))
    assert out.returncode == 0, out.stderr
    assert "forget_gate=data_dependent(logit_normalizer=16)" in out.stdout
    assert "kv_shift=kv(logit_normalizer=16)" in out.stdout and "qk_norm=rmsnorm," in out.stdout


def test_every_option_of_every_command_has_help():
    import argparse

    from foxwb.workbench.cli import main as cli

    parser = None
    original = argparse.ArgumentParser.parse_args

    def capture(self, *a, **k):  # the parser main() builds, caught before it parses
        nonlocal parser
        parser = self
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = capture
    try:
        try:
            cli.main(["--help"])
        except SystemExit:
            pass
    finally:
        argparse.ArgumentParser.parse_args = original
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"info", "train", "run", "status", "results", "dashboard"} <= set(commands)
    missing = [f"wb {name} {'/'.join(a.option_strings) or a.dest}" for name, sub in commands.items()
               for a in sub._actions if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]
    missing += [f"wb {'/'.join(a.option_strings)}" for a in parser._actions
                if a.option_strings and not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]
    assert not missing, missing


def test_version_names_the_release_and_the_code():
    out = wb("--version")
    assert out.returncode == 0 and out.stdout.startswith("wb 0.1.0 (commit ")
    assert "source " in out.stdout


def test_info_of_a_study_file_prints_each_variant(tmp_path):
    from foxwb.workbench.spec.cost import flops_per_token, param_counts
    from foxwb.workbench.spec.trial import ModelSpec

    out = wb("info", "studies/quickstart.yaml")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "study 'quickstart': 3 variants"
    no_gate = next(l for l in lines if l.startswith("FoX (Pro) - forget gate "))
    spec = ModelSpec(preset="fox_pro", vocab_size=256, d_model=64, n_layers=2, n_heads=4,
                     mlp={"kind": "swiglu", "hidden_ratio": 3.5, "multiple_of": 64}, attention={"forget_gate": "none"})
    assert f"{param_counts(spec)['total']:,}" in no_gate and f"{flops_per_token(spec, 128)['forward']:.3e}" in no_gate
    assert no_gate.rstrip().endswith("forget_gate=none")


def test_info_of_a_study_names_every_model_knob_a_variant_changes(tmp_path):
    """Not only the slots' kinds: a variant that sets a pruning tolerance, a slot's option or an MLP
    ratio is told from its base, and one whose ratio rounds to the base's width is said to be the
    same model."""
    import yaml

    from foxwb.workbench.cli.info import KNOBS_WIDTH

    pro = {"kind": "data_dependent", "bias_init": 4.0}
    study = {"name": "knobs", "seeds": [0],
             "base": {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4,
                                "mlp": {"kind": "swiglu", "hidden_ratio": 3.5, "multiple_of": 64}},
                      "data": {"kind": "builtin", "context": 128}},
             "design": {"kind": "variants", "compare_to": "base", "variants": [
                 {"name": "base"},
                 {"name": "ACP", "set": {"model.attention.log_pruning_tolerance": -10}},
                 {"name": "bias", "set": {"model.attention.forget_gate": pro}},
                 {"name": "wide", "set": {"model.mlp.hidden_ratio": 5.0}},
                 {"name": "same width", "set": {"model.mlp.hidden_ratio": 3.55}},
                 {"name": "no gate, same width", "set": {"model.attention.output_gate": "none", "model.mlp.hidden_ratio": 3.55}},
                 {"name": "again", "set": {"model.attention.forget_gate": "data_dependent"}},  # the base's trial
                 {"name": "LLaMA-ish", "set": {f"model.attention.{slot}": "none" for slot in
                                               ("kv_shift", "qk_norm", "output_norm", "output_gate")}}]}}
    (tmp_path / "knobs.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    out = wb("info", tmp_path / "knobs.yaml")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].endswith("  model knobs that differ from 'base' (the design's compare_to)")
    row = {l.split("  ")[0].strip(): l for l in lines[2:] if not l.startswith(" ")}
    assert row["base"].rstrip().endswith("128")
    assert row["ACP"].endswith("  log_pruning_tolerance=-10")
    assert row["bias"].endswith("  forget_gate.bias_init=4")
    assert row["wide"].endswith("  mlp.hidden_ratio=5")
    assert row["same width"].endswith("  mlp.hidden_ratio=3.55 (no weight's shape changes)")
    # Beside another change too, a ratio that rounds to the base's width is said to do nothing.
    gate = lines.index(row["no gate, same width"])
    assert row["no gate, same width"].endswith("  output_gate=none,")
    assert lines[gate + 1].strip() == "mlp.hidden_ratio=3.55 (no weight's shape changes)"
    # A long cell wraps at a ", " onto lines indented to its column.
    at = lines.index(row["LLaMA-ish"])
    column = len(row["LLaMA-ish"]) - len(row["LLaMA-ish"].split("  ")[-1])
    assert row["LLaMA-ish"].endswith("kv_shift=none, qk_norm=none, output_norm=none,")
    assert lines[at + 1] == " " * column + "output_gate=none"
    assert all(len(l) <= column + KNOBS_WIDTH + 1 for l in lines[2:] if not l.startswith("note"))
    # Only the ratio that rounds to the base's MLP width builds the same model: ACP and the gate's
    # bias change no shape either, but they change what the model computes.
    notes = [l for l in lines if l.startswith("note")]
    assert notes == ["note: 'same width' builds the same model as 'base': mlp.hidden_ratio=3.55 changes no "
                     "weight's shape", "note: 'again' is the same trial as 'base' (one spec, trained once)"], notes


def knob_cells(lines: list[str]) -> dict[str, str]:
    """`wb info STUDY`'s rows (after its two header lines, before its notes) -> the knobs column,
    its wrapped lines joined again."""
    column = lines[1].index("model knobs")
    cells: dict[str, str] = {}
    for line in lines[2:]:
        if line.startswith("note"):
            break
        if not line.startswith(" "):
            name = line[:column].split("  ")[0]
            cells[name] = line[column:]
        else:
            cells[name] += " " + line[column:]
    return cells


def test_info_of_a_study_compares_each_row_with_the_designs_base():
    """fox_table3_tuned compares every row with FoX (Pro) (compare_to), its 8th: the header says so,
    and a Pro row names its one change (and the MLP ratio beside it, which builds the same
    weights), not the whole Pro recipe against the first row, a LLaMA."""
    out = wb("info", "studies/fox_table3_tuned.yaml")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    cells = knob_cells(lines)
    assert cells["FoX (Pro) - output gate"] == "output_gate=none, mlp.hidden_ratio=4 (no weight's shape changes)"
    assert cells["FoX (Pro) - QK-norm"] == "qk_norm=none"
    assert cells["Transformer (Pro)"] == "rope=rope, forget_gate=none"
    # The first row, a LLaMA, is now told from FoX (Pro): the Pro parts it goes without.
    assert cells["Transformer (LLaMA) w/o RoPE"].startswith("kv_shift=none, qk_norm=none, forget_gate=none,")
    assert not any("qk_norm=rmsnorm" in cell or "kv_shift=kv" in cell for cell in cells.values()), cells
    assert cells["FoX (Pro)"].strip() == ""
    assert lines[1].endswith("  model knobs that differ from 'FoX (Pro)' (the design's compare_to)"), lines[1]


def test_info_of_a_study_names_the_row_it_compares_with(tmp_path):
    """The header names the variant each row's knobs are told from: an ablation's base, a variants
    design's compare_to, else its first variant."""
    import yaml

    base = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4},
            "data": {"kind": "builtin", "context": 128}}
    rows = [{"name": "no gate", "set": {"model.attention.forget_gate": "none"}},
            {"name": "pro"},
            {"name": "no qk", "set": {"model.attention.qk_norm": "none"}}]
    designs = {"the design's compare_to": {"kind": "variants", "compare_to": "pro", "variants": rows},
               "the first variant": {"kind": "variants", "variants": rows},
               "the design's base": {"kind": "ablation", "base_name": "pro", "changes": [rows[0], rows[2]]}}
    for why, design in designs.items():
        (tmp_path / "s.yaml").write_text(yaml.safe_dump({"name": "s", "base": base, "design": design}, sort_keys=False))
        out = wb("info", tmp_path / "s.yaml")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        against = "no gate" if why == "the first variant" else "pro"
        assert lines[1].endswith(f"  model knobs that differ from {against!r} ({why})"), lines[1]
        cells = knob_cells(lines)
        assert cells["no qk"] == ("qk_norm=none" if against == "pro" else "qk_norm=none, forget_gate=data_dependent")


def test_the_knobs_column_takes_the_terminals_width(tmp_path, monkeypatch):
    """On a terminal the knobs column wraps at the terminal's width (COLUMNS here), never narrower
    than MIN_KNOBS_WIDTH; to a pipe (the other tests) at KNOBS_WIDTH."""
    import io
    from contextlib import redirect_stdout

    import yaml

    from foxwb.workbench.cli.info import MIN_KNOBS_WIDTH
    from foxwb.workbench.cli.main import main

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    llama = {f"model.attention.{slot}": "none" for slot in ("kv_shift", "qk_norm", "output_norm", "output_gate")}
    study = {"name": "wide", "base": {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 64, "n_layers": 2,
                                                "n_heads": 4}, "data": {"kind": "builtin", "context": 128}},
             "design": {"kind": "variants", "variants": [{"name": "pro"}, {"name": "LLaMA-ish", "set": llama}]}}
    (tmp_path / "wide.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    cell = "kv_shift=none, qk_norm=none, output_norm=none, output_gate=none"
    for columns, lines_of_cell in ((200, 1), (10, 2)):
        monkeypatch.setenv("COLUMNS", str(columns))
        with redirect_stdout(Terminal()) as out:
            assert main(["info", str(tmp_path / "wide.yaml")]) == 0
        lines = out.getvalue().splitlines()
        at = next(i for i, l in enumerate(lines) if l.startswith("LLaMA-ish"))
        column = lines[1].index("model knobs")
        # 10 columns: the narrowest column, 40 characters (a pipe's, KNOBS_WIDTH, would hold output_norm too)
        assert [l[column:] for l in lines[at:]] == ([cell] if lines_of_cell == 1 else
                                                    ["kv_shift=none, qk_norm=none,", "output_norm=none, output_gate=none"])
        assert columns > 100 or max(len(l) for l in lines[2:]) <= column + MIN_KNOBS_WIDTH + 1


def test_info_of_a_bare_study_name_shows_the_one_study_file_of_that_name(tmp_path):
    """`wb info claims_acp`: not a preset, not a file here, but the name of one study file under
    experiments/ or studies/: that study, after a line naming the file it read. Several files of
    the name, or one that is no study, are named in an error, with the exit status of any bad input."""
    out = wb("info", "claims_acp")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "read experiments/claims_nl/claims_acp.yaml (the one study file named claims_acp)"
    assert lines[1] == "study 'claims_acp': 2 variants"
    assert lines[2].endswith("model knobs that differ from 'FoX (Pro)' (the design's base)")
    # (paths joined from their parts: tests/test_repo.py checks that a path written out exists)
    mine, old = Path("studies", "mine.yaml"), Path("experiments", "old", "mine.yaml")
    other, solo = old.with_name("other.yaml"), Path("studies", "solo.yaml")
    for path in (mine, old, other):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("name: x\n")
    (tmp_path / solo).write_text("name: solo\nbase: {model: {preset: fox_pro, vocab_size: 256, d_model: 64, "
                                 "n_layers: 2, n_heads: 4}}\ndesign: {kind: variants, variants: [{name: pro}]}\n")
    out = wb("info", "solo", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith(f"read {solo} (the one study file named solo)\n"
                                                         "study 'solo': 1 variants\n"), out.stdout + out.stderr
    for name in ("mine", "mine.yaml"):
        out = wb("info", name, cwd=tmp_path)
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr.rstrip().endswith(f"did you mean {old} or {mine}?"), out.stderr
    out = wb("info", "other", cwd=tmp_path)  # one file of the name, but no study: named, not read
    assert out.returncode == 2 and out.stderr.rstrip().endswith(f"did you mean {other}?"), out.stderr
    # No study file of that name: a preset misspelt, as before.
    out = wb("info", "fox_prox", cwd=tmp_path)
    assert out.returncode == 2 and "did you mean 'fox_pro'?" in out.stderr


def test_an_effect_that_is_not_a_positive_fraction_is_refused(tmp_path):
    """`wb run --dry-run --effect`: the effect is the size of a difference, a positive fraction of
    the base's mean; zero, a negative, NaN or a word is refused by name before anything runs."""
    for bad in ("-1", "0", "nan", "abc"):
        out = wb("run", str(ROOT / "studies/quickstart.yaml"), "--workdir", str(tmp_path / "w"), "--dry-run", "--effect", bad)
        assert out.returncode == 2 and "argument --effect:" in out.stderr and "0.02 = 2%" in out.stderr, (bad, out.stderr)
        assert out.stdout == "" and not (tmp_path / "w").exists()


def test_counts_below_one_are_refused_by_name(tmp_path):
    """`--max-concurrent 0` ran the study as if unlimited; `wb info --context -5` printed FLOPs at
    context -5: both are refused before anything runs."""
    for args, option in ((("run", str(ROOT / "studies/quickstart.yaml"), "--workdir", str(tmp_path / "w"),
                           "--max-concurrent", "0"), "--max-concurrent: 0: give 1 or more"),
                         (("info", "fox_pro", "--context", "-5"), "--context: -5: give 1 or more"),
                         (("info", "fox_pro", "--context", "long"), "--context: 'long' is not a whole number")):
        out = wb(*args)
        assert out.returncode == 2 and option in out.stderr and out.stdout == "", out.stderr
    assert not (tmp_path / "w").exists()


def test_a_dry_run_of_a_gpu_study_on_a_machine_without_one_says_so(tmp_path):
    import torch

    out = wb("run", str(ROOT / "experiments/claims_nl/claims_acp.yaml"), "--workdir", str(tmp_path / "w"), "--dry-run")
    assert out.returncode == 0, out.stderr
    # the study's trials ask train.device: cuda too, so the way to the CPU names both edits
    note = ("this machine has no GPU: `wb run` here stops at once; run it on a GPU machine, or with --ray-address of a "
            "cluster with GPUs, or, on the CPU instead, pass --set resources.gpu=0 --set train.device=cpu")
    assert (note in out.stdout) == (torch.cuda.device_count() == 0), out.stdout[-500:]


def test_a_stopped_study_says_whether_its_trials_resume_or_start_again():
    """The resume line after a stop: trials with a checkpoint of their unfinished training resume
    from it, the others start again, and the line says which and why: they write no checkpoints
    (and how to change that), or had written none yet."""
    from foxwb.workbench.spec.study import load_study
    from foxwb.workbench.spec.study import expand
    from foxwb.workbench.run.summary import resume_note

    trials = expand(load_study(str(ROOT / "studies/quickstart.yaml")))
    assert all(not t.spec.train.checkpoint_every_tokens for t in trials)
    assert resume_note(trials[:2], set()).startswith("stopped trials start again from the beginning")
    assert "set train.checkpoint_every_tokens" in resume_note(trials[:2], set())
    saving = [dataclasses.replace(t, spec=t.spec.model_copy(update={"train": t.spec.train.model_copy(
        update={"checkpoint_every_tokens": 1000})})) for t in trials[:2]]
    both = {t.spec_hash for t in saving}
    assert resume_note(saving, both) == "stopped trials resume from their last checkpoint"
    assert resume_note(saving, set()) == "stopped trials start again from the beginning: they had written no checkpoint yet"
    assert resume_note([], set()) == "no trial was stopped mid-way"  # a stop before any trial started
    assert resume_note([saving[0], trials[1]], {saving[0].spec_hash}).startswith(
        "1 stopped trial resumes from the last checkpoint, 1 starts again: they write no checkpoints")
    assert resume_note([saving[0], trials[1]], set()).endswith(
        "1 writes no checkpoints (set train.checkpoint_every_tokens to resume them mid-way), 1 had written none yet")


def test_the_closing_summary_counts_each_state_and_names_what_did_not_start(capsys):
    """`wb run`'s last lines for a study stopped part way: the counts (with the trials that resumed
    from a checkpoint), a line per trial with its result or reason, "not started" for the rest."""
    from foxwb.workbench.spec.study import load_study
    from foxwb.workbench.run.runner import Outcome, StudyRun
    from foxwb.workbench.spec.study import expand
    from foxwb.workbench.run.summary import report

    study = load_study(str(ROOT / "studies/quickstart.yaml"))
    trials = expand(study)
    outcomes = [Outcome(trials[1], "FINISHED", val_ppl=3.25, resumed_from=(0.0, 0)), Outcome(trials[2], "FINISHED", val_ppl=3.5),
                Outcome(trials[3], "KILLED", reason="interrupted (SIGINT to the driver)"), Outcome(trials[4]), Outcome(trials[5])]
    run = StudyRun(trials, {trials[0].spec_hash: "run0"}, {o.trial.spec_hash: o for o in outcomes},
                   stopped="interrupted", reason="interrupted (SIGINT to the driver)")
    assert report(study, run, "wb run quickstart.yaml") == 130
    out = capsys.readouterr().out
    assert "study 'quickstart': 6 trials; 1 trial was already done; 2 finished now (1 of them from a checkpoint); " \
           "0 failed; 1 stopped mid-way; 2 not started" in out, out
    assert f"  KILLED    {trials[3].variant} / seed {trials[3].seed}  interrupted (SIGINT to the driver)" in out
    assert f"  PENDING   {trials[4].variant} / seed {trials[4].seed}  not started" in out
    assert f"  FINISHED  {trials[1].variant} / seed {trials[1].seed}  val_ppl 3.250" in out


def test_results_of_a_study_with_no_trials_say_why(tmp_path):
    """No store in the workdir, or a store that holds other studies: an error line naming which."""
    from foxwb.workbench.train import layout
    from foxwb.workbench.run.tracking import Store, create_local_store, local_tracking_uri

    empty = wb("results", "quickstart", "--workdir", str(tmp_path / "none"))
    assert empty.returncode == 2
    assert f"error: no trials of study 'quickstart' in {tmp_path / 'none'}: no tracking store there" in empty.stderr
    # `wb status` of a study file there says how to start it.
    quickstart = str(Path(__file__).resolve().parents[3] / "studies" / "quickstart.yaml")
    never = wb("status", quickstart, "--workdir", str(tmp_path / "none"))
    assert never.returncode == 2 and f"`wb run {quickstart} --workdir {tmp_path / 'none'}` starts it" in never.stderr
    workdir = tmp_path / "w"
    workdir.mkdir()
    create_local_store(workdir)
    Store(local_tracking_uri(workdir), "other", layout.artifacts(workdir)).parent_run("other")
    elsewhere = wb("results", "quickstart", "--workdir", str(workdir))
    assert elsewhere.returncode == 2
    assert f"error: no trials of study 'quickstart' in {workdir}; its store holds 'other'" in elsewhere.stderr


def test_a_file_of_the_other_kind_names_its_command(tmp_path):
    """A trial file given to `wb run`, or a study file to `wb train`: one error saying which command
    the file belongs to, not its keys listed as unknown; nothing is written."""
    trial = wb("run", "studies/trial_tiny.yaml", "--workdir", tmp_path / "w")
    assert trial.returncode == 2 and "a trial file (model, data, train, eval), not a study: train it with " \
        "`wb train studies/trial_tiny.yaml --out DIR`" in trial.stderr and "Extra inputs" not in trial.stderr
    study = wb("train", "studies/quickstart.yaml", "--out", tmp_path / "out")
    assert study.returncode == 2 and "a study file (base, design, seeds), not a trial: run it with " \
        "`wb run studies/quickstart.yaml`" in study.stderr and "Extra inputs" not in study.stderr
    assert not (tmp_path / "w").exists() and not (tmp_path / "out").exists()


def test_a_trial_that_fails_before_writing_leaves_no_out_folder_of_its_own(tmp_path):
    """`wb train --out DIR` of a trial that fails before it writes a file (here its English set is
    not built) takes back the folders it made for DIR, parents included; a folder the user already
    had stays, and so does one that a file was written into."""
    import yaml

    from foxwb.workbench.train.folder_lock import FolderLock

    spec = yaml.safe_load((ROOT / "studies/trial_tiny.yaml").read_text())
    spec["data"] = {"kind": "english", "set": "core", "path": str(tmp_path / "no-corpus"), "context": 128}
    trial = tmp_path / "trial.yaml"
    trial.write_text(yaml.safe_dump(spec))
    had = tmp_path / "had"
    had.mkdir()
    for out in (tmp_path / "runs" / "tiny", had):
        proc = wb("train", trial, "--out", out)
        assert proc.returncode == 2 and f"no core.jsonl.xz in {tmp_path / 'no-corpus'}" in proc.stderr, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["had", "trial.yaml"] and list(had.iterdir()) == []
    with FolderLock(tmp_path / "runs" / "written") as lock:
        (tmp_path / "runs" / "written" / "spec.json").write_text("{}")
        lock.remove_if_empty()
    assert (tmp_path / "runs" / "written" / "spec.json").is_file()


def test_only_a_checkpoint_of_an_unfinished_training_counts_as_resumed(tmp_path):
    """A trial's folder may hold the checkpoint of a finished training (another study ran the same
    trial, or its evaluation was cut off): running it again trains from the first step, so the
    study's first line and its resume note do not count it as resuming."""
    from foxwb.workbench.train import layout
    from foxwb.workbench.spec.study import load_study
    from foxwb.workbench.run.runner import resumes
    from foxwb.workbench.spec.study import expand
    from foxwb.workbench.train.loop import TrainState, write_checkpoint

    trial = expand(load_study(str(ROOT / "studies/quickstart.yaml")))[0]
    total = trial.spec.train.total_steps(trial.spec.data.context)
    path = layout.trial_dir(tmp_path, trial.spec_hash) / layout.CHECKPOINT
    assert not resumes(tmp_path, trial)  # no checkpoint
    path.parent.mkdir(parents=True)
    for step, resumed in ((total - 1, True), (total, False)):
        write_checkpoint(path, {}, {}, TrainState(step, step * 100, []), trial.spec_hash)
        assert resumes(tmp_path, trial) is resumed, step
    path.write_bytes(b"not a checkpoint")
    assert not resumes(tmp_path, trial)


def test_wb_train_says_why_a_finished_trainings_checkpoint_trains_again(tmp_path, capsys):
    """`wb train` stopped during its final evaluation leaves the checkpoint of a finished training,
    which is not resumed: the run says so instead of starting over without a word."""
    from foxwb.workbench.train.loop import TrainState, write_checkpoint
    from foxwb.workbench.train.progress_line import Progress

    path = tmp_path / "checkpoint.pt"
    Progress(1000).finished_checkpoint(path, 10)
    write_checkpoint(path, {}, {}, TrainState(9, 900, []), "h")
    Progress(1000).finished_checkpoint(path, 10)  # unfinished: the resume line says where it picks up
    assert capsys.readouterr().err == ""
    write_checkpoint(path, {}, {}, TrainState(10, 1000, []), "h")
    Progress(1000).finished_checkpoint(path, 10)
    assert "is of a finished training (step 10 of 10), its evaluation cut off" in capsys.readouterr().err


def test_help_starts_without_torch_ray_or_mlflow():
    """`wb --help` answers at once: the commands import the heavy packages only when they run (the
    live view once pulled torch in through the trial module, 3.4 s for a help text)."""
    code = ("import sys\nfrom foxwb.workbench.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'ray', 'mlflow', 'polars') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"

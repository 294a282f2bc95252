"""Every study and trial file the project ships parses and expands: a user's first `wb run` of one
must not meet a validation error the project could have caught."""
from pathlib import Path

import pytest

from foxwb.workbench.spec.errors import read_yaml, validate
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.spec.study import StudySpec, expand
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(p.relative_to(ROOT).as_posix() for folder in ("studies", "experiments")
               for p in (ROOT / folder).rglob("*.yaml"))


def test_the_project_ships_studies():
    assert "studies/quickstart.yaml" in FILES and len(FILES) >= 5


@pytest.mark.parametrize("name", FILES)
def test_a_shipped_file_validates(name):
    data = read_yaml(str(ROOT / name))
    if "design" in data:
        trials = expand(validate(StudySpec, data, name))
        assert trials and len({t.spec_hash for t in trials}) == len(trials)
    else:
        validate(TrialSpec, data, name)


@pytest.mark.parametrize("path,trials", [("studies/scaling_ladder.yaml", 16), ("studies/context_sweep.yaml", 12)])
def test_dry_run_lists_each_trial_with_parameters_tokens_and_flops(path, trials, tmp_path):
    proc = wb("run", path, "--dry-run", "--workdir", tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split()[-5:] == ["params", "tokens", "train", "FLOPs", "status"]
    rows = [line for line in lines[2:] if line.endswith("to run")]
    assert len(rows) == trials and all(float(r.split()[-3]) > 0 for r in rows)


def test_the_tuned_table3_searches_every_row_then_confirms_it(tmp_path):
    """studies/fox_table3_tuned.yaml: fox_table3.yaml's rows and size, each row searched over three
    learning rates on seed 0 and confirmed on 3 seeds, in the stable recipe of docs/stability.md
    (every gate and KV-shift normalised by 16, a 10M-token warmup); its dry run lists the search
    and says what follows it."""

    table3 = expand(validate(StudySpec, read_yaml(str(ROOT / "experiments/table3_1024/fox_table3.yaml")), "fox_table3"))
    study = validate(StudySpec, read_yaml(str(ROOT / "studies/fox_table3_tuned.yaml")), "fox_table3_tuned")
    trials = expand(study)
    assert len(trials) == 42 and {t.seed for t in trials} == {0}
    assert {t.spec.train.lr for t in trials} == {0.0005, 0.001, 0.002}
    assert study.search.confirm.seeds == [0, 1, 2] and study.search.confirm.metric == "val_loss"
    assert {n for t in trials for n in (t.variant, *t.aliases)} == {t.variant for t in table3} | {
        a for t in table3 for a in t.aliases}
    for t in trials:
        attention = t.spec.model.attention
        assert attention.forget_gate.kind == "none" or attention.forget_gate.logit_normalizer == 16.0, t.variant
        assert attention.kv_shift.kind == "none" or attention.kv_shift.logit_normalizer == 16.0, t.variant
        assert t.spec.train.warmup_tokens == 10_000_000
        # Apart from the recipe and the learning rate, the trial of fox_table3.yaml.
        old = next(o for o in table3 if o.variant == t.variant and o.seed == 0).spec.model_dump(mode="json")
        new = t.spec.model_dump(mode="json")
        for slot in ("forget_gate", "kv_shift"):
            new["model"]["attention"][slot] = old["model"]["attention"][slot]
        for key in ("lr", "warmup_tokens"):
            new["train"][key] = old["train"][key]
        assert new == old, t.variant
    proc = wb("run", "studies/fox_table3_tuned.yaml", "--dry-run", "--workdir", tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "study 'fox_table3_tuned': 42 trials, 0 done (42 to run)"
    assert sum(" to run" in line for line in lines[2:]) == 42
    assert lines[-1].startswith("then the confirmation: each variant's best search point by val_loss on seeds 0, 1, 2")


def test_the_driver_path_needs_neither_polars_nor_plotly():
    """The GPU machine has neither (docs/performance.md runs studies there): the driver's modules
    import and every shipped study's parent-run tags are built with both blocked (a crossed or
    scaling design's axis once came from the polars-based effects module and stopped the run)."""
    import subprocess
    import sys

    code = f"""
import sys
sys.modules["polars"] = sys.modules["plotly"] = None
import foxwb.workbench.cli.main, foxwb.workbench.run.driver, foxwb.workbench.run.runner
from foxwb.workbench.spec.errors import read_yaml, validate
from foxwb.workbench.spec.study import StudySpec, design_tags
for name in {[f for f in FILES if "design" in read_yaml(str(ROOT / f))]!r}:
    design_tags(validate(StudySpec, read_yaml(name), name))
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


EXPERIMENTS = sorted(p.parent.name for p in (ROOT / "experiments").glob("*/README.md"))


def test_every_experiment_folder_has_its_readme_and_study():
    """Each experiment folder has its README and the study files it ran; one that trains nothing
    (experiments/nl_corpus builds a corpus) has the scripts its README's Run block runs instead, or,
    once its question is answered and its scripts are deleted, a Run block that takes them from a
    commit (`git archive COMMIT experiments/NAME`) which holds each of them."""
    import re
    import subprocess

    folders = sorted(p.name for p in (ROOT / "experiments").iterdir() if p.is_dir())
    assert folders == EXPERIMENTS and len(folders) >= 10
    for name in folders:
        folder = ROOT / "experiments" / name
        if list(folder.glob("*.yaml")):
            continue
        run = (folder / "README.md").read_text().split("## Run", 1)[-1].split("\n## ", 1)[0]
        scripts = re.findall(r"(?:python3 |\./)([\w-]+\.(?:py|sh))", run)
        assert scripts, f"experiments/{name} holds no study file, and its README's Run block runs no script"
        archived = re.search(rf"git archive ([0-9a-f]{{7,40}}) experiments/{name}\b", run)
        if archived is None:
            assert all((folder / s).is_file() for s in scripts), f"experiments/{name}: a script its Run block runs is missing"
            continue
        commit = archived.group(1)
        tree = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit, f"experiments/{name}"], cwd=ROOT,
                              capture_output=True, text=True)
        assert tree.returncode == 0, f"experiments/{name}: its Run block's commit {commit}: {tree.stderr.strip()}"
        missing = sorted(set(scripts) - {Path(f).name for f in tree.stdout.split()})
        assert not missing, f"experiments/{name}: scripts its Run block runs that {commit} does not hold: {missing}"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_an_experiment_reruns_by_the_command_its_readme_gives(name, tmp_path):
    """experiments/<name>/README.md's "Run" block names each study file of the folder, and each
    plans as it says (a dry run: the trials it would train, here on a machine without a GPU)."""
    import re

    readme = (ROOT / "experiments" / name / "README.md").read_text()
    run = readme[readme.index("## Run"):]
    run = run[: run.index("\n## ", 4)]
    named = set(re.findall(r"experiments/[\w-]+/[\w-]+\.yaml", run))
    folder = {p.relative_to(ROOT).as_posix() for p in (ROOT / "experiments" / name).glob("*.yaml")}
    assert folder <= named, f"study files of experiments/{name} its README's Run block does not name: {folder - named}"
    for path in sorted(folder):
        proc = wb("run", path, "--dry-run", "--workdir", tmp_path / Path(path).stem)
        assert proc.returncode == 0, f"{path}: {proc.stderr[-2000:]}"
        assert re.match(r"study '[\w-]+': \d+ trials", proc.stdout), (path, proc.stdout[:300])


def test_a_store_written_before_the_house_moved_has_nothing_to_rerun(tmp_path):
    """experiments/table3_4096_llama's store was written by the code before its modules moved into
    stages and under foxwb: its study plans every trial done (same spec hashes, same store)."""
    import lzma

    (tmp_path / "mlflow.db").write_bytes(lzma.decompress(
        (ROOT / "experiments/table3_4096_llama/fox_table3_4096_llama.db.xz").read_bytes()))
    proc = wb("run", "experiments/table3_4096_llama/fox_table3_4096_llama.yaml", "--dry-run", "--workdir", tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0] == "study 'fox_table3_4096_llama': 334 trials, 334 done (334 finished)"

"""Every YAML example the docs mark as a file to copy (```yaml study / ```yaml trial in
docs/study-files.md and docs/trials-and-data.md) loads as `wb run` and `wb train` read their files,
validates and expands into trials; and every data kind, tokenizer, table format, design kind and
search algorithm the specs allow has one, so a kind added without an example fails here."""
import json
import re
import shutil
import sysconfig
from pathlib import Path
from typing import get_args

import pytest

from foxwb.workbench.data.tables import SUFFIXES
from foxwb.workbench.spec.data import HFTokenizerSpec, TableData, Tokenizer
from foxwb.workbench.spec.errors import read_yaml
from foxwb.workbench.spec.search import SearchSpec
from foxwb.workbench.spec.study import Design, expand, load_study
from foxwb.workbench.spec.trial import DataSpec, TrialSpec, load_trial
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("docs/study-files.md", "docs/trials-and-data.md")
# A fenced block whose info string is `yaml study` or `yaml trial` (GitHub highlights it as yaml).
BLOCK = re.compile(r"^```yaml (study|trial)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def examples() -> list[tuple[str, str, str]]:
    """(id: page and line, study or trial, the block's text) of every marked block of the docs."""
    out = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for m in BLOCK.finditer(text):
            out.append((f"{Path(doc).name}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1), m.group(2)))
    return out


EXAMPLES = examples()


def kinds(union, field: str = "kind") -> set[str]:
    """The values of ``field`` that a discriminated union's members (or one model) allow."""
    members = get_args(get_args(union)[0]) if get_args(union) else (union,)
    return {v for m in members for v in get_args(m.model_fields[field].annotation)}


def literal_values(annotated) -> set[str]:
    """The strings a field type ``Literal[...] | Model`` allows, with each model's ``kind``."""
    out = set()
    for member in get_args(get_args(annotated)[0]):
        out |= set(get_args(member)) if get_args(member) else kinds(member)
    return out


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory) -> Path:
    """A small BPE tokenizer.json (320 ids), trained once on standard-library text: it stands in
    for every tokenizer file the examples name, whose hash and size are read when a spec is."""
    from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers, trainers

    root = Path(sysconfig.get_paths()["stdlib"])
    texts = [p.read_text(encoding="utf-8", errors="replace")[:6000] for p in sorted(root.glob("*.py"))[:60]]
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    tok.save(str(path))
    return path


def tokenizer_paths(node) -> list[str]:
    """Every tokenizer file or folder a parsed example names (``tokenizer: PATH`` or ``{path: ...}``)."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "tokenizer" and isinstance(value, str) and value not in ("byte", "bpe"):
                out.append(value)
            elif key == "tokenizer" and isinstance(value, dict) and isinstance(value.get("path"), str):
                out.append(value["path"])
            else:
                out += tokenizer_paths(value)
    elif isinstance(node, list):
        for item in node:
            out += tokenizer_paths(item)
    return out


def write_example(folder: Path, text: str, tokenizer_json: Path) -> Path:
    """The example as a user's file in ``folder``, beside what it reads when loaded: each tokenizer
    it names (a tokenizer.json, or a folder holding one) and the study file it extends."""
    path = folder / "example.yaml"
    path.write_text(text)
    data = read_yaml(str(path))
    for raw in tokenizer_paths(data):
        target = folder / raw if raw.endswith(".json") else folder / raw / "tokenizer.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tokenizer_json, target)
    if isinstance(data, dict) and "extends" in data:
        shutil.copy(ROOT / "studies" / data["extends"], folder / data["extends"])
    return path


def load(folder: Path, kind: str, text: str, tokenizer_json: Path, monkeypatch) -> tuple[list[TrialSpec], object]:
    """(the example's trial specs, its study or None); paths are read relative to ``folder``, as
    they are to where a user runs `wb`."""
    path = write_example(folder, text, tokenizer_json)
    monkeypatch.chdir(folder)
    if kind == "trial":
        return [load_trial(path)], None
    study = load_study(str(path))
    trials = expand(study)
    assert trials and len({t.spec_hash for t in trials}) == len(trials)
    return [t.spec for t in trials], study


@pytest.mark.parametrize("where,kind,text", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_a_docs_example_loads_and_expands(where, kind, text, tmp_path, tokenizer_json, monkeypatch):
    specs, study = load(tmp_path, kind, text, tokenizer_json, monkeypatch)
    assert specs and all(isinstance(s, TrialSpec) for s in specs)
    if kind == "trial":
        # A trial file, not a study's base (a study file is refused by `wb train`, and the reverse)
        assert "design" not in read_yaml(str(tmp_path / "example.yaml"))


def test_every_kind_has_an_example(tmp_path, tokenizer_json, monkeypatch):
    data, tokenizers, formats, designs, algorithms, forms = set(), set(), set(), set(), set(), set()
    for i, (where, kind, text) in enumerate(EXAMPLES):
        folder = tmp_path / str(i)
        folder.mkdir()
        specs, study = load(folder, kind, text, tokenizer_json, monkeypatch)
        for spec in specs:
            d = spec.data
            data.add(d.kind)
            tok = d.effective_tokenizer() if hasattr(d, "effective_tokenizer") else getattr(d, "tokenizer", None)
            if tok is not None:
                tokenizers.add(tok.kind if isinstance(tok, HFTokenizerSpec) else tok)
            if isinstance(d, TableData):
                formats.add(d.format)
                formats |= {f for p in d.paths for f, suffixes in SUFFIXES.items() if p.endswith(suffixes)}
                forms.add("text column" if d.text_column else "ids column")
        if study is not None:
            designs.add(study.design.kind)
            if study.search is not None:
                algorithms.add(study.search.algorithm)
                forms |= {"tune, then confirm"} if study.search.confirm is not None else set()
            forms |= {"seeds by plan"} if study.plan() is not None else set()
            forms |= {"extends"} if "extends" in read_yaml(str(folder / "example.yaml")) else set()
    missing = {
        "data.kind": kinds(DataSpec) - data,
        "tokenizer": literal_values(Tokenizer) - tokenizers,
        "table format": set(get_args(TableData.model_fields["format"].annotation)) - {"auto"} - formats,
        "design.kind": kinds(Design) - designs,
        "search.algorithm": set(get_args(SearchSpec.model_fields["algorithm"].annotation)) - algorithms,
        "study form": {"tune, then confirm", "seeds by plan", "extends", "text column", "ids column"} - forms,
    }
    missing = {what: sorted(values) for what, values in missing.items() if values}
    assert not missing, f"no example in {', '.join(DOCS)} for: {missing}"


def text_examples() -> list[tuple[str, str]]:
    return [(where, text) for where, kind, text in EXAMPLES if kind == "trial" and re.search(r"kind: text\b", text)]


@pytest.mark.parametrize("where,text", text_examples(), ids=[w for w, _ in text_examples()])
def test_a_text_example_plans_with_wb_run_dry_run(where, text, tmp_path, tokenizer_json, monkeypatch):
    """docs/trials-and-data.md's `kind: text` trials, as a study's base, are planned by `wb run
    --dry-run` on a few MB of text in the files and folders they name: exit 0, one trial, and its
    test set (counted there for a tokenizer file; for a BPE, once it is trained at the trial's start)."""
    path = write_example(tmp_path, text, tokenizer_json)
    trial = read_yaml(str(path))
    stdlib = sorted(p for p in Path(sysconfig.get_paths()["stdlib"]).glob("*.py") if p.stat().st_size > 4000)
    for raw in trial["data"]["paths"]:
        suffix = (trial["data"].get("suffixes") or [".md"])[0]
        target = tmp_path / raw
        if raw.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            for p in stdlib:
                (target / (p.stem + suffix)).write_text(p.read_text(encoding="utf-8", errors="replace"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(stdlib[0].read_text(encoding="utf-8", errors="replace"))
    study = tmp_path / "study.yaml"
    study.write_text(json.dumps({"name": "docs_text", "base": {k: v for k, v in trial.items() if k != "seed"},
                                 "design": {"kind": "variants", "variants": [{"name": "text"}]}, "seeds": [0]}))
    proc = wb("run", study, "--dry-run", "--workdir", tmp_path / "w", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "study 'docs_text': 1 trial," in proc.stdout and "test set of every row:" in proc.stdout, proc.stdout
    if "tokenizer: bpe" not in text:
        assert "scored tokens" in proc.stdout, proc.stdout

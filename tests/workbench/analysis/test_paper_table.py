"""`wb results --format markdown|latex`, the tables a paper takes: on the quickstart's store (run
once for the test run, tests/conftest.py), their numbers are the JSON export's, awkward variant
names come out escaped, and the LaTeX compiles where a TeX install is on the PATH."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from foxwb.workbench.analysis import paper_table, report
from foxwb.workbench.analysis.table import SCHEMA, StudyInfo
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]
STUDY = ROOT / "studies/quickstart.yaml"
MINUS = "\u2212"


@pytest.fixture(scope="module")
def exported(quickstart, tmp_path_factory):
    """The quickstart store's JSON export, its Markdown (through --out) and its LaTeX with --p
    unadjusted: (json dict, markdown text, latex text)."""
    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path_factory.mktemp("paper") / "table.md"
    as_json = wb("results", STUDY, "--workdir", workdir, "--format", "json")
    markdown = wb("results", STUDY, "--workdir", workdir, "--format", "markdown", "--out", out)
    latex = wb("results", STUDY, "--workdir", workdir, "--format", "latex", "--p", "unadjusted")
    for done in (as_json, markdown, latex):
        assert done.returncode == 0, done.stderr[-2000:]
    assert markdown.stdout == ""  # --out: the file, not stdout
    return json.loads(as_json.stdout), out.read_text(), latex.stdout


def md_table(text: str, first_head: str) -> list[dict[str, str]]:
    """The Markdown table whose head starts with ``first_head``, as one dict per body row."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_head} |"))
    head = [c.strip() for c in lines[start].strip("|").split(" | ")]
    body = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        body.append(dict(zip(head, (c.strip() for c in line[2:-2].split(" | ")))))
    return body


def shown(value, fmt: str) -> str:
    return format(value, fmt).replace("-", MINUS)


def test_markdown_has_the_json_exports_rows_claims_and_notes(exported):
    data, markdown, _ = exported
    rows = md_table(markdown, "row")
    assert [r["row"] for r in rows] == [r["row"] for r in data["rows"]]
    for got, want in zip(rows, data["rows"]):
        assert got["seeds"] == str(want["n_seeds"])
        assert got["test\\_ppl mean ± 95% CI"] == f"{shown(want['mean'], '.3f')} ± {shown(want['ci95'], '.3f')}"
        if want["comparison"] == "base":
            assert got["delta"] == "base" and got["p (Holm)"] == ""
            continue
        assert got["delta"] == shown(want["delta"], "+.3f")
        assert got["paired delta ± 95% CI (n)"] == (f"{shown(want['paired_delta'], '+.3f')} ± "
                                                    f"{shown(want['paired_ci95'], '.3f')} ({want['paired_n']})")
        star = "\\*" if want["p_holm"] < data["alpha"] else ""
        assert got["p (Holm)"] == shown(want["p_holm"], ".3g") + star
        assert got["MDE"] == shown(want["mde"], ".3f")
    claims = md_table(markdown, "claim")
    assert [(c["claim"], c["verdict"]) for c in claims] == [(c["name"], c["verdict"]) for c in data["claims"]]
    assert [c["delta loss"] for c in claims] == [shown(c["delta_loss"], "+.4f") for c in data["claims"]]
    # The text table's notes: which split, which p, the fairness flags.
    assert "test\\_ppl is read on the test split" in markdown
    assert "p (Holm): two-sided paired t-test, Holm-adjusted" in markdown
    for flag in data["fairness"]["flags"]:
        assert flag["text"].replace("_", "\\_") in markdown


def test_latex_is_booktabs_with_the_chosen_p_named(exported):
    data, _, latex = exported
    assert latex.count(r"\begin{tabular}") == 2 and latex.count(r"\toprule") == 2 and latex.count(r"\bottomrule") == 2
    assert r"\begin{table}" not in latex and r"\caption" not in latex  # the paper's float holds it
    assert r"p (unadjusted) & MDE \\" in latex and "p (unadjusted): two-sided paired t-test, each comparison alone" in latex
    kv = next(r for r in data["rows"] if r["row"] == "FoX (Pro) - KV-shift")
    line = next(line for line in latex.splitlines() if line.startswith(r"FoX (Pro) $-$ KV-shift & 2 &"))
    assert f"${format(kv['mean'], '.3f')} \\pm {format(kv['ci95'], '.3f')}$" in line
    assert f"${format(kv['p_unadjusted'], '.3g')}" in line
    _balanced(latex)


AWKWARD = {"FoX (Pro)": "FoX (Pro) base_1", "FoX (Pro) - forget gate": "lr 50% & warm #2 {x}",
           "FoX (Pro) - KV-shift": "FoX (Pro) - KV-shift ~a^b $c\\d"}
ESCAPED = [r"FoX (Pro) base\_1", r"lr 50\% \& warm \#2 \{x\}",
           r"FoX (Pro) $-$ KV-shift \textasciitilde{}a\textasciicircum{}b \$c\textbackslash{}d"]


def awkward_latex(data: dict) -> str:
    """The store's rows and claims (its JSON export) renamed to names full of LaTeX's special
    characters, set as `wb results --format latex` sets them."""
    rows = pl.DataFrame(data["rows"], schema=SCHEMA).with_columns(pl.col("row", "base_row").replace(AWKWARD))
    about = {**data, "claims": [{**c, "name": AWKWARD[c["name"]], "a_row": AWKWARD[c["a_row"]], "b_row": AWKWARD[c["b_row"]]}
                                for c in data["claims"]]}
    info = StudyInfo(name="a_study & more", base=AWKWARD[data["base"]], order=list(AWKWARD.values()), seeds=data["seeds"],
                     alpha=data["alpha"])
    return paper_table.study(rows, about, info, "latex")


def test_latex_escapes_awkward_variant_names(exported):
    data, _, _ = exported
    latex = awkward_latex(data)
    body = [line.split(" & ")[0] for line in latex.splitlines() if " & 2 & $" in line]
    assert body == ESCAPED
    assert r"study 'a\_study \& more'" in latex
    _balanced(latex)
    # Markdown: a | in a name would end the cell; * and _ would start emphasis.
    assert paper_table.Markdown.text("a|b *c* d_e") == r"a\|b \*c\* d\_e"


def test_two_studies_side_by_side_in_both_formats(exported, quickstart):
    data, _, _ = exported
    side = wb("results", STUDY, "quickstart", "--workdir", quickstart[0], "--format", "markdown")
    assert side.returncode == 0, side.stderr[-2000:]
    rows = md_table(side.stdout, "row")
    assert sorted(r["row"] for r in rows) == sorted(r["row"] for r in data["rows"])
    assert all(r["B - A ± 95% CI"].startswith("+0.000 ± ") for r in rows)  # a study against itself
    values = {r["row"]: dict(zip(r["seeds_run"], r["values"])) for r in data["rows"]}
    frame = report.compare_studies(values, {AWKWARD[k]: v for k, v in values.items()} | {"FoX (Pro)": values["FoX (Pro)"]})
    latex = paper_table.comparison(frame, "a_1", "b%2", "test_ppl", ["x_only"], [], "latex")
    assert r"a\_1: n & mean $\pm$ 95\% CI & b\%2: n" in latex and r"only in 'a\_1': x\_only" in latex
    _balanced(latex)


def _balanced(latex: str) -> None:
    """What a TeX run would stop on first: unbalanced braces, environments or math."""
    depth = 0
    for ch in re.sub(r"\\[{}$%&#_\\]", "", latex):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    open_envs = []
    for kind, env in re.findall(r"\\(begin|end)\{(\w+)\}", latex):
        if kind == "begin":
            open_envs.append(env)
        else:
            assert open_envs and open_envs.pop() == env
    assert not open_envs
    for line in latex.splitlines():
        assert re.sub(r"\\\$", "", line).count("$") % 2 == 0, line


TEX = next((t for t in ("pdflatex", "lualatex", "tectonic") if shutil.which(t)), None)


@pytest.mark.skipif(TEX is None, reason="no TeX install on this machine")
def test_latex_compiles_in_a_minimal_document(exported, tmp_path):
    data, _, latex = exported
    (tmp_path / "results.tex").write_text(latex)
    (tmp_path / "awkward.tex").write_text(awkward_latex(data))
    (tmp_path / "paper.tex").write_text("\n".join([
        r"\documentclass{article}", r"\usepackage[T1]{fontenc}", r"\usepackage[utf8]{inputenc}", r"\usepackage{booktabs}",
        r"\begin{document}", r"\begin{table}\tiny\input{results.tex}\caption{The quickstart.}\end{table}",
        r"\begin{table}\tiny\input{awkward.tex}\end{table}", r"\end{document}", ""]))
    args = [TEX, "paper.tex"] if TEX == "tectonic" else [TEX, "-interaction=nonstopmode", "-halt-on-error", "paper.tex"]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert (tmp_path / "paper.pdf").stat().st_size > 0

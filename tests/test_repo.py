"""The house rules a reader relies on, checked on the tracked tree: layers point one way, the
benchmarks and scripts use public names only, and every path a file cites exists."""
import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NS = "foxwb"  # the one import name the repository's package folders install under (pyproject.toml)
PACKAGES = ("components", "kernels", "workbench", "dashboards")
# The stages of the engine, from the bottom up (workbench/__init__.py): each may import the stages
# before it in this list and itself, never one after it.
STAGES = ("spec", "data", "model", "train", "handoff", "run", "analysis", "downstream", "cli")
# What each layer may import of ours (README, "What is here"): kernels nothing, components kernels at
# most, the engine's stages only the stages below them, the dashboards no CLI.
ALLOWED = {
    "kernels": {"kernels"},
    "components": {"components", "kernels"},
    **{f"workbench.{stage}": {"components", "kernels", *(f"workbench.{s}" for s in STAGES[: i + 1])}
       for i, stage in enumerate(STAGES)},
    "dashboards": {"dashboards", "components", "kernels", *(f"workbench.{s}" for s in STAGES[:-1])},
}
ALLOWED["workbench.cli"] |= {"dashboards"}  # `wb dashboard` builds the site
# The one import that runs against the stages, and why: a scaling design sizes its ladder by
# parameter counts, which a plug-in component makes known only by being built (on the meta device).
UPWARD = {("workbench/spec/cost.py", "workbench.model")}


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / p for p in out if (ROOT / p).is_file()]


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in the file, function-local ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [a.name for a in node.names]))
    return found


def ours(module: str) -> str | None:
    """The package folder of one of our modules (``foxwb.kernels.attention`` -> ``kernels``)."""
    parts = module.split(".")
    return parts[1] if parts[0] == NS and len(parts) > 1 and parts[1] in PACKAGES else None


def layer(module: str) -> str | None:
    """The layer a module of ours belongs to: a package folder, or ``workbench.<stage>``."""
    package = ours(module)
    if package != "workbench":
        return package
    parts = module.split(".")
    if len(parts) < 3:
        return "workbench.model"  # the package itself: its docstring only
    stage = parts[2]
    return f"workbench.{'model' if stage in ('model', 'execution') else stage}"


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([NS, *parts])


def test_layers_point_one_way():
    wrong = []
    for package in PACKAGES:
        for path in tracked(f"{package}/*.py", f"{package}/**/*.py"):
            rel = path.relative_to(ROOT).as_posix()
            allowed = ALLOWED[layer(module_of(path))]
            for module, _ in imports(path):
                target = layer(module)
                if target and target not in allowed and (rel, target) not in UPWARD:
                    wrong.append(f"{rel} ({layer(module_of(path))}) imports {module} ({target})")
    assert not wrong, "\n".join(wrong)


def test_our_modules_are_imported_by_our_name_only():
    """``import kernels`` would find whatever package of that name comes first on the path (PyPI's
    popular ``kernels``, say): ours are imported as ``foxwb.kernels`` and so on, everywhere."""
    wrong = []
    for path in tracked("*.py"):
        for module, _ in imports(path):
            if module.split(".")[0] in PACKAGES:
                wrong.append(f"{path.relative_to(ROOT)}: {module}")
    assert not wrong, "imported by the folder's bare name:\n" + "\n".join(wrong)


def _graph(paths: list[Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a ``from package import module`` counts as the module)."""
    names = {module_of(p) for p in paths}
    scripts = {p.stem: f"{p.parent.name}.{p.stem}" for p in paths if p.parent.name in ("benchmarks", "scripts")}
    graph: dict[str, set[str]] = {}
    for path in paths:
        me = module_of(path) if path.parent.name not in ("benchmarks", "scripts") else f"{path.parent.name}.{path.stem}"
        edges = set()
        for module, names_ in imports(path):
            if path.parent.name in ("benchmarks", "scripts") and module in scripts:
                module = scripts[module]
                edges.add(module)
                continue
            submodules = {f"{module}.{n}" for n in names_ if f"{module}.{n}" in names}
            edges |= submodules
            # A module's own packages are set up before it runs: importing one of them is no circle.
            if module in names and not submodules and not me.startswith(module + "."):
                edges.add(module)
        graph[me] = {e for e in edges if e != me and not me.startswith(e + ".")}
    return graph


def test_no_import_circles():
    """No two modules of ours import each other, directly or round a longer loop (function-local
    imports count: they are how a circle hides), in the packages, benchmarks/ and scripts/."""
    paths = [p for p in tracked("*.py") if p.relative_to(ROOT).parts[0] in (*PACKAGES, "benchmarks", "scripts")]
    graph = _graph(paths)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def late_imports(path: Path) -> list[int]:
    """The lines of the imports made inside a function that say nothing of why: an import sits at
    the top of its file unless a comment on its line, or directly above its group of imports,
    gives the reason (a heavy dependency a light command does without, an environment variable
    that must be set first)."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    import_lines = {n for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for n in range(node.lineno, node.end_lineno + 1)}
    bare = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if any("#" in lines[n - 1] for n in range(node.lineno, node.end_lineno + 1)):
                continue
            above = node.lineno - 1  # up past the rest of its group (imports, blank lines) to what leads it
            while above >= 1 and (above in import_lines or not lines[above - 1].strip()):
                above -= 1
            if above < 1 or not lines[above - 1].strip().startswith("#"):
                bare.append(node.lineno)
    return sorted(set(bare))


def test_a_late_import_says_why():
    """Imports at the top of the file, where a reader looks for what a module depends on; one made
    inside a function carries a comment saying why it is late."""
    paths = [p for p in tracked("*.py") if p.relative_to(ROOT).parts[0] in (*PACKAGES, "benchmarks", "scripts")]
    bare = [f"{p.relative_to(ROOT)}:{n}" for p in paths for n in late_imports(p)]
    assert not bare, f"{len(bare)} imports inside a function with no comment saying why:\n" + "\n".join(bare)


def test_the_late_import_rule_reads_comments(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import os\n\ndef f():\n    import json\n    return json\n\n\ndef g():\n"
                    "    # torch is heavy: `wb --help` does without it\n    import torch\n\n    import ray\n"
                    "    import yaml  # read only here\n    return torch, ray, yaml\n")
    assert late_imports(path) == [4]


def test_the_engine_is_in_its_stages():
    """workbench/ holds its stages' folders and, beside them, only model.py and execution.py."""
    top = {p.name for p in tracked("workbench/*.py") if p.parent == ROOT / "workbench"}
    assert top <= {"__init__.py", "model.py", "execution.py"}, sorted(top)
    folders = {p.relative_to(ROOT / "workbench").parts[0] for p in tracked("workbench/*/*.py")
               if p.parent != ROOT / "workbench"}
    assert folders == set(STAGES) - {"model"}, sorted(folders)


def test_every_package_folder_is_installed():
    """A package folder that pyproject.toml does not list would be missing from a wheel."""
    toml = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(foxwb(?:\.\w+)+)"', toml[toml.index("[tool.setuptools]"):]))
    folders = {module_of(p.parent / "__init__.py") for p in tracked(*(f"{k}/**/__init__.py" for k in PACKAGES),
                                                                    *(f"{k}/__init__.py" for k in PACKAGES))}
    assert folders <= listed, f"not in pyproject.toml's packages: {sorted(folders - listed)}"


def test_each_stage_says_what_lives_there():
    """Each package folder's __init__.py docstring names every module beside it (``name``)."""
    unnamed = []
    for init in tracked("workbench/__init__.py", "workbench/**/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for path in sorted(init.parent.iterdir()):
            name = path.stem if path.suffix == ".py" else path.name
            if path.name.startswith("__") or not (path.suffix == ".py" or (path / "__init__.py").is_file()):
                continue
            if f"``{name}``" not in doc:
                unnamed.append(f"{init.relative_to(ROOT)}: {name}")
    assert not unnamed, "not named in its folder's docstring:\n" + "\n".join(unnamed)


def test_a_foreign_kernels_package_does_not_shadow_ours(tmp_path):
    """`pip install kernels` (a popular package of that name) beside the workbench: `wb` still works."""
    import sys

    for name in ("kernels", "components", "workbench", "dashboards"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('the foreign {name} package was imported')\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "foxwb.workbench.cli", "info", "fox_pro"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "spec hash" in proc.stdout



def test_an_uninstalled_checkout_imports_as_foxwb_through_checkout_path(tmp_path):
    """scripts/checkout_path.sh (sourced by benchmarks/gpu.sh): where the package is not installed
    (a python without our site-packages here, the GPU machine there), the checkout imports as foxwb."""
    import os
    import sys

    shim = tmp_path / "bin" / "python3"  # a python3 that does not see the installed package
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    code = "import foxwb.workbench.spec as s, pathlib; print(pathlib.Path(s.__file__).resolve())"
    bare = subprocess.run(["bash", "-c", f"python3 -c '{code}'"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert bare.returncode != 0, "the shim's python imports foxwb without the script: the test proves nothing"
    linked = subprocess.run(["bash", "-c", f"source {ROOT}/scripts/checkout_path.sh && python3 -c '{code}'"],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert linked.returncode == 0, linked.stderr
    assert linked.stdout.strip() == str(ROOT / "workbench" / "spec" / "__init__.py")

def test_benchmarks_and_scripts_use_public_names_only():
    """A benchmark that reaches into a private function breaks silently when it changes: only the
    public API, whose tests keep it working."""
    wrong = []
    for path in tracked("benchmarks/*.py", "scripts/*.py"):
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and ours(node.module):
                wrong += [f"{path.name}: from {node.module} import {a.name}" for a in node.names
                          if a.name.startswith("_")]
                modules |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                modules |= {(a.asname or a.name).split(".")[0] for a in node.names if ours(a.name)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in modules):
                wrong.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not wrong, "\n".join(wrong)


# A cited path: starts with one of the repo's top-level folders and names a file by its suffix.
CITED = re.compile(r"(?<![\w./$<-])((?:components|kernels|workbench|dashboards|studies|experiments|docs|benchmarks|scripts"
                   r"|tests|\.ci)/[\w./-]*\.(?:py|md|yaml|yml|json|jsonl|sh|png|toml|log|xz))\b")


# A page of the root (capitals, `.md`), or a path that climbs out of the repository (`../shared/...`
# from the root): neither travels with a clone. A doc's `../experiments/...` stays inside and must exist.
ROOT_PAGE = re.compile(r"(?<![\w./-])([A-Z][A-Z_]+\.md)\b")
ABOVE = re.compile(r"(?<![\w.])(\.\./[\w.-][\w./-]*)")


def test_every_cited_path_exists():
    """Code, docs, studies and the benchmarks' result files. A result file's `command_then` is the
    record of what ran then, under the name it had (its `command` is how to run it today)."""
    files = tracked("*.py", "*.md", "*.yaml", "*.yml", "*.sh", "*.toml", "*.json", ".ci/run")
    missing = []
    for path in files:
        for line_no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if path.suffix == ".json" and '"command_then"' in line:
                continue
            where = f"{path.relative_to(ROOT)}:{line_no}"
            missing += [f"{where}: {c}" for c in CITED.findall(line) + ROOT_PAGE.findall(line)
                        if not (ROOT / c).exists()]
            if path.name != "test_repo.py":
                for c in ABOVE.findall(line):
                    target = (path.parent / c).resolve()
                    if not target.is_relative_to(ROOT):
                        missing.append(f"{where}: {c} (outside the repository)")
                    elif path.suffix == ".md" and not target.exists():
                        missing.append(f"{where}: {c}")
    assert not missing, "cited but not in the repository:\n" + "\n".join(missing)


@pytest.mark.parametrize("name", ["reference/fox.md", "reference/anchors.md", "scripts/gpu/"])
def test_nothing_cites_what_is_outside_the_repository(name):
    hits = [f"{p.relative_to(ROOT)}" for p in tracked("*.py", "*.md", "*.yaml", "*.sh")
            if name in p.read_text(errors="replace") and p.name != "test_repo.py"]
    assert not hits, f"{name} cited by: {', '.join(hits)}"


def test_the_tree_holds_only_the_product():
    """Every tracked file lies in a top-level folder of the layout (README, "What is here") or is
    one of the root's own files: no browser profile, scratch study or stray output gets committed."""
    folders = {"components", "kernels", "workbench", "dashboards", "studies", "experiments", "tests", "benchmarks",
               "docs", "scripts", ".ci"}
    root_files = {"README.md", "pyproject.toml", ".gitignore"}
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    stray = [p for p in out if ("/" in p and p.split("/")[0] not in folders) or ("/" not in p and p not in root_files)]
    assert not stray, "tracked outside the layout:\n" + "\n".join(stray[:20])


def test_the_readme_layout_table_names_every_module_and_doc():
    """README, "What is here": each module of components/ and dashboards/, each stage of workbench/
    (its modules are named in the stage's own docstring) and each page of docs/ is named there."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## What is here"):]
    table = table[: table.index("\n## ", 4)]
    unnamed = []
    for path in tracked("components/*.py", "workbench/*.py", "dashboards/*.py", "docs/*.md"):
        if path.parent.name not in ("components", "workbench", "dashboards", "docs"):
            continue  # git's * spans folders: a stage's modules are named in its own docstring
        if path.name != "__init__.py" and f"`{path.name}`" not in table and f"`{path.stem}`" not in table:
            unnamed.append(path.relative_to(ROOT).as_posix())
    unnamed += [f"workbench/{stage}/" for stage in set(STAGES) - {"model"} if f"`{stage}/`" not in table]
    assert not unnamed, "not in the README's layout table: " + ", ".join(unnamed)


# A Markdown link or image, [text](target) or [text](target "title"); fenced code holds none.
LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lowercased, punctuation but '-' and '_' dropped,
    spaces to '-'; a repeated heading gets -1, -2, ..."""
    anchors, times = set(), {}
    for line in FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r" {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            anchors.add(f"{slug}-{times[slug]}" if slug in times else slug)
            times[slug] = times.get(slug, 0) + 1
    return anchors


def test_the_readmes_links_resolve():
    """Every relative link of README.md and docs/*.md names a file of the repository, and one with
    an #anchor into a page names a heading of that page."""
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text()))  # code is not a link
        for target in LINK.findall(text):
            if re.match(r"(https?|mailto):", target, re.I):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not dest.is_relative_to(ROOT) or not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in heading_anchors(dest):
                broken.append(f"{where}: no heading gives #{anchor}")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)

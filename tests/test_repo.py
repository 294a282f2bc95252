"""The house rules a reader relies on, checked on the tracked tree: layers point one way, the
benchmarks and scripts use public names only, and every path a file cites exists."""
import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("components", "kernels", "workbench", "dashboards")
# What each layer may import of ours (README, "What is here"): kernels nothing, components kernels at
# most, the engine (workbench/ but its CLI) no dashboards, the dashboards no CLI.
ALLOWED = {
    "kernels": {"kernels"},
    "components": {"components", "kernels"},
    "workbench": {"workbench", "components", "kernels"},
    "dashboards": {"dashboards", "workbench", "components", "kernels"},
}


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / p for p in out if (ROOT / p).is_file()]


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in the file, relative imports resolved to absolute."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [a.name for a in node.names]))
    return found


def ours(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def test_layers_point_one_way():
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in tracked(f"{package}/*.py", f"{package}/**/*.py"):
            rel = path.relative_to(ROOT).as_posix()
            may = allowed | ({"dashboards"} if rel == "workbench/cli.py" else set())
            for module, _ in imports(path):
                if ours(module) and ours(module) not in may:
                    wrong.append(f"{rel} imports {module}")
            if package == "dashboards":
                wrong += [f"{rel} imports {m}" for m, _ in imports(path) if m.startswith("workbench.cli")]
    assert not wrong, "\n".join(wrong)


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
CITED = re.compile(r"(?<![\w./$<-])((?:components|kernels|workbench|dashboards|studies|docs|benchmarks|scripts|tests|\.ci)"
                   r"/[\w./-]*\.(?:py|md|yaml|yml|json|jsonl|sh|png|toml))\b")


# A page of the root (capitals, `.md`) or a path above it (`../shared/...`): neither travels with a clone.
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
                missing += [f"{where}: {c} (outside the repository)" for c in ABOVE.findall(line)]
    assert not missing, "cited but not in the repository:\n" + "\n".join(missing)


@pytest.mark.parametrize("name", ["reference/fox.md", "reference/anchors.md", "scripts/gpu/"])
def test_nothing_cites_what_is_outside_the_repository(name):
    hits = [f"{p.relative_to(ROOT)}" for p in tracked("*.py", "*.md", "*.yaml", "*.sh")
            if name in p.read_text(errors="replace") and p.name != "test_repo.py"]
    assert not hits, f"{name} cited by: {', '.join(hits)}"


def test_the_tree_holds_only_the_product():
    """Every tracked file lies in a top-level folder of the layout (README, "What is here") or is
    one of the root's own files: no browser profile, scratch study or stray output gets committed."""
    folders = {"components", "kernels", "workbench", "dashboards", "studies", "tests", "benchmarks", "docs",
               "scripts", ".ci"}
    root_files = {"README.md", "pyproject.toml", ".gitignore"}
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    stray = [p for p in out if ("/" in p and p.split("/")[0] not in folders) or ("/" not in p and p not in root_files)]
    assert not stray, "tracked outside the layout:\n" + "\n".join(stray[:20])


def test_the_readme_layout_table_names_every_module_and_doc():
    """README, "What is here": each module of the packages and each page of docs/ is named there
    (a `prefix*.py` entry covers a family of modules)."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## What is here"):]
    table = table[: table.index("\n## ", 4)]
    families = [f[:-4] for f in re.findall(r"`([\w]+\*\.py)`", table)]
    unnamed = []
    for path in tracked("components/*.py", "workbench/*.py", "dashboards/*.py", "docs/*.md"):
        name = path.name
        if name == "__init__.py" or f"`{name}`" in table or f"`{path.stem}`" in table:
            continue
        if not any(name.startswith(f) for f in families):
            unnamed.append(path.relative_to(ROOT).as_posix())
    assert not unnamed, "not in the README's layout table: " + ", ".join(unnamed)

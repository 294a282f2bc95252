"""Plug-ins installed by entry point, as pip installs them: a broken one and a clashing one are
reported once each and left out, every other command and kind keeps working, a trial records
the distribution and version of the plug-ins it uses, and the commands that only read a study's
store need none of its plug-ins."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import yaml

from tests.dashboards.test_site import plugin_path
from tests.workbench.drivers import runs
from tests.workbench.run.test_run import MINI_BASE, ROOT, wb, write_study


def install(folder, dist: str, module: str, source: str, entry: str) -> None:
    (folder / f"{module}.py").write_text(textwrap.dedent(source))
    info = folder / f"{module}-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(f"[workbench.components]\n{entry}\n")


def broken_and_clashing(folder):
    """Beside the working `l2norm` (wb-l2norm 0.1): one that fails to import, one whose kind
    `rmsnorm` of the qk_norm slot is a built-in's."""
    plugin_path(folder)
    install(folder, "wb-broken", "wb_broken", "import no_such_module\n", "broken = wb_broken:Spec")
    install(folder, "wb-clash", "wb_clash", """
        from typing import Literal
        from foxwb.components.registry import ComponentSpec

        class MyRMSNorm(ComponentSpec):
            slot = "qk_norm"
            kind: Literal["rmsnorm"] = "rmsnorm"
    """, "rms = wb_clash:MyRMSNorm")
    return {**os.environ, "PYTHONPATH": str(folder)}


def test_a_broken_and_a_clashing_plugin_are_reported_once_and_the_rest_works(tmp_path):
    env = broken_and_clashing(tmp_path)
    for target in ("fox_pro", tmp_path / "l2.yaml"):
        (tmp_path / "l2.yaml").write_text("preset: fox_pro\nattention: {qk_norm: l2norm}\n")
        proc = wb("info", target, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 2 and "Traceback" not in proc.stderr, proc.stderr
        broken, clash = sorted(warnings)
        assert broken.startswith("warning: plug-in wb-broken 0.3 (entry point broken = wb_broken:Spec")
        assert "No module named 'no_such_module'" in broken
        assert clash.startswith("warning: plug-in wb-clash 0.3 (entry point rms = wb_clash:MyRMSNorm")
        assert "kind 'rmsnorm' of slot 'qk_norm'" in clash and "built in" in clash and "kv_shift" not in clash
    assert "qk_norm=l2norm" in proc.stdout
    (tmp_path / "bad.yaml").write_text("preset: fox_pro\nattention: {qk_norm: nope}\n")
    unknown = wb("info", tmp_path / "bad.yaml", env=env, timeout=120)
    assert unknown.returncode == 2 and "attention.qk_norm: unknown kind 'nope'" in unknown.stderr
    assert "l2norm" in unknown.stderr and "kv_shift" not in unknown.stderr


TEMP_GATE = """
from typing import ClassVar, Literal

import torch.nn as nn
import torch.nn.functional as F
from foxwb.components.registry import ComponentSpec


class TempGateSpec(ComponentSpec):
    slot = "forget_gate"
    kind: Literal["temp_gate"] = "temp_gate"
    temperature: float = 2.0  # a default the study file leaves out, in the spec hash
    shift: float = 0.0  # added later: out of the spec hash at its default
    _new_fields: ClassVar[frozenset[str]] = frozenset({"shift"})

    def build(self, dims):
        return TempGate(dims.d_model, dims.n_heads, self.temperature, self.shift)


class TempGate(nn.Module):
    def __init__(self, d_model, n_heads, temperature, shift):
        super().__init__()
        self.proj = nn.Linear(d_model, n_heads)
        self.temperature, self.shift = temperature, shift

    def forward(self, x):
        return F.logsigmoid(self.proj(x).float() / self.temperature + self.shift)  # (B, T, H)
"""


def temp_gate_changes(bare: str, written: str) -> list[dict]:
    """The plug-in's kind `temp_gate` as a bare name (its default temperature) and with an integer
    temperature (the plug-in's float field makes it 4.0): the file's options differ from the
    recorded ones in both."""
    return [{"name": bare, "set": {"model.attention.forget_gate": "temp_gate"}},
            {"name": written, "set": {"model.attention.forget_gate": {"kind": "temp_gate", "temperature": 4}}}]


def test_a_trial_records_the_plugins_it_uses_and_reading_its_store_needs_none(tmp_path):
    """One study of two plug-ins' kinds (`temp_gate` beside `l2norm`, the broken and the clashing
    one installed too), run once for what were two tests of a run each (half a minute apiece on 2
    cores): each trial records the plug-ins it uses; the commands that only read the store need none
    of them (results_read_without_the_plugins); a plug-in's changed forward makes its trial stale."""
    env = broken_and_clashing(tmp_path)
    install(tmp_path, "wb-temp-gate", "wb_temp_gate", TEMP_GATE, "temp_gate = wb_temp_gate:TempGateSpec")
    changes = [*temp_gate_changes("temp gate", "temp gate 4"),
               {"name": "L2 QK-norm", "set": {"model.attention.qk_norm": "l2norm"}}]
    study = write_study(tmp_path, name="plugged", changes=changes,
                        base={**MINI_BASE, "train": {**MINI_BASE["train"], "tokens": 4096, "eval_every_tokens": None}})
    proc = wb("run", study, "--workdir", tmp_path / "w", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tags = {r.data.tags["variant"]: r.data.tags for r in runs(tmp_path / "w", "plugged")}
    assert json.loads(tags["L2 QK-norm"]["plugins"]) == {"wb-l2norm": {"version": "0.1", "kinds": ["qk_norm=l2norm"]}}
    assert "plugins" not in tags["FoX (Pro)"]  # built-in kinds only
    result = json.loads(next((tmp_path / "w" / "trials").glob(f"{tags['L2 QK-norm']['spec_hash']}/result.json")).read_text())
    assert result["versions"]["plugins"] == {"wb-l2norm": {"version": "0.1", "kinds": ["qk_norm=l2norm"]}}
    assert result["versions"]["components"] == tags["L2 QK-norm"]["components_source"]
    results_read_without_the_plugins(study, tmp_path / "w", env, tmp_path / "other")
    # The plug-in's forward changes after the run: its trial is stale, the built-in one is not.
    source = tmp_path / "wb_l2norm.py"
    source.write_text(source.read_text() + "\n# a changed forward would go here\n")
    dry = wb("run", study, "--workdir", tmp_path / "w", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    lines = {line.split()[0] + " " + line.split()[1]: line for line in dry.stdout.splitlines() if line.startswith(("FoX", "L2"))}
    assert "done, stale: its components' sources (" in lines["L2 QK-norm"] and "wb_l2norm.py" in lines["L2 QK-norm"]
    assert lines["FoX (Pro)"].rstrip().endswith("done")
    assert "--rerun stale` runs them again" in dry.stdout
    table = wb("results", study, "--workdir", tmp_path / "w", env=env)
    assert table.returncode == 0 and "stale: 1 finished trial(s) of L2 QK-norm" in table.stdout, table.stdout[-2000:]
    again = wb("run", study, "--workdir", tmp_path / "w", "--dry-run", "--rerun", "stale", env=env)
    assert f"{tags['L2 QK-norm']['spec_hash']}" in again.stdout.splitlines()[-1] and tags["FoX (Pro)"]["spec_hash"] not in again.stdout.splitlines()[-1]


def results_read_without_the_plugins(study, workdir, installed: dict, other_folder) -> None:
    """Commands that only read the store need none of a study's plug-ins: `wb results FILE` of a
    study that ran a plug-in's kind prints its table where the plug-in is not installed, read from
    the store as `wb results NAME` reads it, the kind shown by the name its runs recorded; `wb run`
    still refuses the kind. Where the plug-ins are not installed: this pytest process, which never
    has their folder on its path (tests/cli.py runs the commands that only read here, as every
    other test of them does)."""
    assert importlib.util.find_spec("wb_temp_gate") is None and importlib.util.find_spec("wb_l2norm") is None
    expected = wb("results", study, "--workdir", workdir, env=installed)
    assert expected.returncode == 0 and "temp gate 4" in expected.stdout, expected.stderr[-3000:]

    table = wb("results", study, "--workdir", workdir)
    assert table.returncode == 0, table.stderr[-3000:]
    assert f"note: {study} uses 'temp_gate' (forget_gate), 'l2norm' (qk_norm), not installed here" in table.stderr
    assert "unknown kind" not in table.stderr and "stale" not in table.stdout

    def rows(out: str) -> list[str]:  # the study table's rows
        return [line for line in out.splitlines() if line.startswith(("FoX (Pro)", "temp gate", "L2 QK-norm"))]

    assert len(rows(table.stdout)) == 4 and rows(table.stdout) == rows(expected.stdout), table.stdout
    assert "forget_gate=temp_gate" in rows(table.stdout)[1]  # the kind, by its name
    assert "qk_norm=l2norm" in rows(table.stdout)[3]
    # The claims' verdicts and the JSON read the same way.
    as_json = wb("results", study, "--workdir", workdir, "--format", "json")
    assert as_json.returncode == 0 and '"claims"' in as_json.stdout, as_json.stderr[-3000:]
    # Another file that takes the same name: its table is the store's, and a note says none of it is the file's.
    other_folder.mkdir()
    base = yaml.safe_load(study.read_text())["base"]
    other = write_study(other_folder, name="plugged", base={**base, "train": {**base["train"], "tokens": 8192}})
    foreign = wb("results", other, "--workdir", workdir, env=installed)
    assert foreign.returncode == 0 and f"note: 4 of the 4 trials stored under study 'plugged' are not trials of {other}" \
        in foreign.stderr, foreign.stderr[-3000:]
    status = wb("status", study, "--workdir", workdir)  # and so does `wb status FILE`
    assert status.returncode == 0 and status.stdout.count("finished") >= 4, status.stderr[-3000:]

    # Training needs the plug-in: `wb run` refuses its kind as before, and runs nothing.
    refused = wb("run", study, "--workdir", workdir, "--dry-run")
    assert refused.returncode == 2 and "model.attention.forget_gate: unknown kind 'temp_gate'" in refused.stderr, refused.stderr


def test_the_readmes_minimal_plugin_package_works(tmp_path):
    """The two files of docs/models.md's plug-in example, installed as pip would: the kind trains in a model."""
    readme = (ROOT / "docs" / "models.md").read_text()
    module = re.search(r"```python\n# my_l2norm.py\n(.*?)```", readme, re.S).group(1)
    toml = re.search(r"```toml\n# pyproject.toml\n(.*?)```", readme, re.S).group(1)
    entry = re.search(r'\[project.entry-points."workbench.components"\]\n(\w+) = "([\w.:]+)"', toml)
    name = re.search(r'name = "([\w-]+)"', toml).group(1)
    install(tmp_path, name, "my_l2norm", module, f"{entry.group(1)} = {entry.group(2)}")
    code = textwrap.dedent("""
        import torch
        from foxwb.workbench.model import build_model
        from foxwb.workbench.spec.trial import ModelSpec
        spec = ModelSpec(vocab_size=16, d_model=16, n_layers=1, n_heads=2, attention={"qk_norm": {"kind": "l2norm", "init_scale": 4}})
        loss = build_model(spec)(torch.zeros(1, 8, dtype=torch.long), torch.ones(1, 8, dtype=torch.long))
        loss.backward()
        print(float(loss) > 0, spec.attention.qk_norm.init_scale)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["True", "4.0"], proc.stderr[-3000:]
    assert "warning" not in proc.stderr

"""Plug-ins installed by entry point, as pip installs them: a broken one and a clashing one are
reported once each and left out, every other command and kind keeps working, and a trial records
the distribution and version of the plug-ins it uses."""
import json
import os
import re
import subprocess
import sys
import textwrap

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


def test_a_trial_records_the_plugins_it_uses(tmp_path):
    env = broken_and_clashing(tmp_path)
    study = write_study(tmp_path, name="plugged", changes=[{"name": "L2 QK-norm", "set": {"model.attention.qk_norm": "l2norm"}}],
                        base={**MINI_BASE, "train": {**MINI_BASE["train"], "tokens": 4096, "eval_every_tokens": None}})
    proc = wb("run", study, "--workdir", tmp_path / "w", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tags = {r.data.tags["variant"]: r.data.tags for r in runs(tmp_path / "w", "plugged")}
    assert json.loads(tags["L2 QK-norm"]["plugins"]) == {"wb-l2norm": {"version": "0.1", "kinds": ["qk_norm=l2norm"]}}
    assert "plugins" not in tags["FoX (Pro)"]  # built-in kinds only
    result = json.loads(next((tmp_path / "w" / "trials").glob(f"{tags['L2 QK-norm']['spec_hash']}/result.json")).read_text())
    assert result["versions"]["plugins"] == {"wb-l2norm": {"version": "0.1", "kinds": ["qk_norm=l2norm"]}}
    assert result["versions"]["components"] == tags["L2 QK-norm"]["components_source"]
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

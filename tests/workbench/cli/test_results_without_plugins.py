"""Commands that only read the store need none of a study's plug-ins: `wb results FILE` of a study
that ran a plug-in's kind prints its table where the plug-in is not installed, read from the store
as `wb results NAME` reads it, the kind shown by the name its runs recorded; `wb run` still refuses
the kind."""
import os

from tests.workbench.run.test_run import MINI_BASE, wb, write_study
from tests.workbench.test_plugins import install

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


def changes(bare: str, written: str) -> list[dict]:
    """The plug-in's kind as a bare name (its default temperature) and with an integer temperature
    (the plug-in's float field makes it 4.0): the file's options differ from the recorded ones in both."""
    return [{"name": bare, "set": {"model.attention.forget_gate": "temp_gate"}},
            {"name": written, "set": {"model.attention.forget_gate": {"kind": "temp_gate", "temperature": 4}}}]


def test_results_of_a_study_file_need_not_its_plugins(tmp_path):
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    install(plugin, "wb-temp-gate", "wb_temp_gate", TEMP_GATE, "temp_gate = wb_temp_gate:TempGateSpec")
    installed = {**os.environ, "PYTHONPATH": str(plugin)}
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    base = {**MINI_BASE, "train": {**MINI_BASE["train"], "tokens": 4096, "eval_every_tokens": None}}
    study = write_study(tmp_path, name="tempered", changes=changes("temp gate", "temp gate 4"), base=base)
    workdir = tmp_path / "w"
    ran = wb("run", study, "--workdir", workdir, env=installed)
    assert ran.returncode == 0, ran.stderr[-3000:]
    expected = wb("results", study, "--workdir", workdir, env=installed)
    assert expected.returncode == 0 and "temp gate 4" in expected.stdout, expected.stderr[-3000:]

    table = wb("results", study, "--workdir", workdir, env=bare)
    assert table.returncode == 0, table.stderr[-3000:]
    assert f"note: {study} uses 'temp_gate' (forget_gate), not installed here" in table.stderr
    assert "unknown kind" not in table.stderr and "stale" not in table.stdout
    def rows(out: str) -> list[str]:  # the study table's rows
        return [line for line in out.splitlines() if line.startswith(("FoX (Pro)", "temp gate"))]

    assert len(rows(table.stdout)) == 3 and rows(table.stdout) == rows(expected.stdout), table.stdout
    assert "forget_gate=temp_gate" in rows(table.stdout)[1]  # the kind, by its name
    # The claims' verdicts and the JSON read the same way.
    as_json = wb("results", study, "--workdir", workdir, "--format", "json", env=bare)
    assert as_json.returncode == 0 and '"claims"' in as_json.stdout, as_json.stderr[-3000:]
    # Another file that takes the same name: its table is the store's, and a note says none of it is the file's.
    (tmp_path / "other").mkdir()
    other = write_study(tmp_path / "other", name="tempered", base={**base, "train": {**base["train"], "tokens": 8192}})
    foreign = wb("results", other, "--workdir", workdir, env=installed)
    assert foreign.returncode == 0 and f"note: 3 of the 3 trials stored under study 'tempered' are not trials of {other}" \
        in foreign.stderr, foreign.stderr[-3000:]
    status = wb("status", study, "--workdir", workdir, env=bare)  # and so does `wb status FILE`
    assert status.returncode == 0 and status.stdout.count("finished") >= 3, status.stderr[-3000:]

    # Training needs the plug-in: `wb run` refuses its kind as before, and runs nothing.
    refused = wb("run", study, "--workdir", workdir, "--dry-run", env=bare)
    assert refused.returncode == 2 and "model.attention.forget_gate: unknown kind 'temp_gate'" in refused.stderr, refused.stderr

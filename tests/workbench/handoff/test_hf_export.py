"""`wb export TRIAL --hf DIR`: the folder loads in transformers (AutoModelForCausalLM,
trust_remote_code) and gives the workbench's logits, for every preset, a tied head and a plug-in
component; what cannot be handed on is refused with a sentence and leaves no DIR."""
import json
import os
import subprocess
import sys
import textwrap
from typing import Literal

import pytest
import torch
import torch.nn as nn
import yaml

from foxwb.components.registry import ComponentSpec, register
from foxwb.workbench.handoff.hf import export_hf
from foxwb.workbench.handoff.hf_import import require_transformers
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.presets import PRESETS
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.loop import TrainState, write_checkpoint
from tests.cli import wb
from tests.dashboards.test_site import plugin_path

transformers = require_transformers()
TINY = {"vocab_size": 259, "d_model": 32, "n_layers": 2, "n_heads": 4}
STEPS = 8


def finished_trial(folder, model: dict, steps: int = STEPS, seed: int = 0):
    """A trial folder as `wb train` leaves it (checkpoint.pt of the last step, result.json with the
    resolved spec), its weights moved away from their init so that a load that kept the init fails."""
    trial = TrialSpec.model_validate({"model": model, "data": {"kind": "builtin", "context": 32},
                                      "train": {"tokens": 4096}, "seed": seed})
    torch.manual_seed(seed)
    lm = build_model(trial.model)
    with torch.no_grad():
        for p in lm.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    folder.mkdir(parents=True)
    write_checkpoint(folder / "checkpoint.pt", lm.state_dict(), {}, TrainState(STEPS, 4096), trial.spec_hash())
    result = {"spec": trial.model_dump(mode="json"), "spec_hash": trial.spec_hash(), "steps": steps,
              "versions": {"code": "abc"}}
    (folder / "result.json").write_text(json.dumps(result))
    return lm.eval()


def load(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()


def awkward_ids(vocab: int = 259) -> torch.Tensor:
    return torch.randint(0, vocab, (2, 37), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("preset,tie", [(p, False) for p in PRESETS] + [("fox_pro", True)],
                         ids=[*PRESETS, "fox_pro-tied"])
def test_each_preset_loads_in_transformers_with_our_logits(tmp_path, preset, tie):
    ours = finished_trial(tmp_path / "trial", {"preset": preset, **TINY, "tie_embeddings": tie})
    export_hf(tmp_path / "trial", tmp_path / "hf")
    theirs = load(tmp_path / "hf")
    ids = awkward_ids()
    with torch.no_grad():
        expected, got = ours(ids), theirs(ids).logits
    assert got.dtype == torch.float32 and got.shape == (2, 37, 259)
    assert (got - expected).abs().max().item() <= 1e-5
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_spec"] == ours.spec.model_dump(mode="json") and config["vocab_size"] == 259
    assert config["foxwb"]["distribution"] == "fox-workbench" and config["foxwb"]["version"]
    assert config["trial"]["trained_with"] == {"code": "abc"} and config["plugins"] == {}
    assert (theirs.get_output_embeddings().weight is theirs.get_input_embeddings().weight) == tie


def test_labels_give_the_shifted_loss_and_right_padding_keeps_the_logits(tmp_path):
    ours = finished_trial(tmp_path / "trial", {"preset": "fox_pro", **TINY})
    export_hf(tmp_path / "trial", tmp_path / "hf")
    theirs = load(tmp_path / "hf")
    ids = awkward_ids()
    with torch.no_grad():
        loss = theirs(ids, labels=ids).loss
        expected = ours(ids[:, :-1], ids[:, 1:])
        assert abs(loss.item() - expected.item()) <= 1e-5
        mask = torch.ones_like(ids)
        mask[1, 30:] = 0  # right padding: the real tokens' logits do not see it (causal)
        assert torch.equal(theirs(ids, attention_mask=mask).logits, theirs(ids).logits)
        mask = torch.ones_like(ids)
        mask[1, :3] = 0  # left padding would be attended to
        with pytest.raises(ValueError, match="attention_mask: a masked position before a real token"):
            theirs(ids, attention_mask=mask)
        # generate() without a cache: greedy decoding is the argmax of our logits, token after token.
        row = ids[:1, :9]
        for _ in range(4):
            row = torch.cat([row, ours(row)[:, -1].argmax(-1, keepdim=True)], dim=1)
        assert torch.equal(theirs.generate(ids[:1, :9], max_new_tokens=4, do_sample=False, pad_token_id=0), row)


class HereOnlyNormSpec(ComponentSpec):
    """A kind registered by a test module at run time: no installed distribution advertises it."""

    slot = "qk_norm"
    kind: Literal["here_only_norm"] = "here_only_norm"

    def build(self, dims):
        return HereOnlyNorm()


class HereOnlyNorm(nn.Module):
    def forward(self, q, k):
        return q * 0.5, k * 0.5


def test_a_component_registered_at_run_time_is_refused_and_leaves_no_folder(tmp_path):
    register(HereOnlyNormSpec)
    finished_trial(tmp_path / "trial", {"preset": "fox_pro", **TINY, "attention": {"qk_norm": "here_only_norm"}})
    with pytest.raises(SpecError) as refused:
        export_hf(tmp_path / "trial", tmp_path / "hf")
    assert str(refused.value).startswith("component 'here_only_norm' of slot 'qk_norm' cannot be exported: it was "
                                         "registered at run time by tests.workbench.handoff.test_hf_export.HereOnlyNormSpec")
    assert "a loader elsewhere cannot build it" in str(refused.value)
    assert [p.name for p in tmp_path.iterdir()] == ["trial"]  # no DIR, no temporary folder beside it


def test_what_is_not_a_finished_trial_with_its_final_weights_is_refused(tmp_path):
    with pytest.raises(SpecError, match="TRIAL .*missing: not a folder"):
        export_hf(tmp_path / "missing", tmp_path / "a")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="no result.json, so not a finished trial"):
        export_hf(tmp_path / "empty", tmp_path / "a")
    finished_trial(tmp_path / "nockpt", {"preset": "fox_llama", **TINY})
    (tmp_path / "nockpt" / "checkpoint.pt").unlink()
    with pytest.raises(SpecError, match="no checkpoint.pt, so its final weights were not kept: train.keep_weights was off"):
        export_hf(tmp_path / "nockpt", tmp_path / "a")
    finished_trial(tmp_path / "early", {"preset": "fox_llama", **TINY}, steps=STEPS + 3)
    with pytest.raises(SpecError, match="the checkpoint of step 8, but the trial trained 11 steps"):
        export_hf(tmp_path / "early", tmp_path / "a")
    assert not (tmp_path / "a").exists()
    finished_trial(tmp_path / "ok", {"preset": "fox_llama", **TINY})
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep me")
    with pytest.raises(SpecError, match="--hf .*full: is not empty; give a new or empty folder"):
        export_hf(tmp_path / "ok", tmp_path / "full")
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["mine.txt"]
    (tmp_path / "blank").mkdir()
    assert export_hf(tmp_path / "ok", tmp_path / "blank") == tmp_path / "blank"  # an empty folder is taken


@pytest.fixture(scope="module")
def plugged(tmp_path_factory):
    """`wb train` once, end to end, on a tiny FoX (Pro) with the third-party QK-norm `l2norm`
    (wb-l2norm 0.1, installed as pip would on PYTHONPATH), then `wb export` of its folder."""
    folder = plugin_path(tmp_path_factory.mktemp("plugin"))
    trial = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
                       "mlp": {"kind": "swiglu", "intermediate_size": 64}, "attention": {"qk_norm": "l2norm"}},
             "data": {"kind": "builtin", "context": 32, "max_bytes": 300000},
             "train": {"tokens": 4096, "batch_size": 8, "cpu_threads": 1, "checkpoint_every_tokens": 4096},
             "eval": {"sequences": 2, "length_multiples": [1], "test_tokens": 2048, "min_test_tokens": 1024},
             "seed": 0}
    (folder / "trial.yaml").write_text(yaml.safe_dump(trial))
    env = {**os.environ, "PYTHONPATH": str(folder)}
    trained = wb("train", folder / "trial.yaml", "--out", folder / "run", env=env)
    assert trained.returncode == 0, trained.stderr[-3000:]
    exported = wb("export", folder / "run", "--hf", folder / "hf", env=env)
    return folder, env, exported


def test_wb_export_of_a_trained_plugin_model_loads_elsewhere_with_our_logits(plugged):
    folder, env, exported = plugged
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert f"wrote {folder / 'hf'}" in exported.stdout
    config = json.loads((folder / "hf" / "config.json").read_text())
    assert config["plugins"] == {"wb-l2norm": {"version": "0.1", "kinds": ["qk_norm=l2norm"]}}
    assert config["trial"]["spec_hash"] == json.loads((folder / "run" / "result.json").read_text())["spec_hash"]
    # Readable by others as the user's umask allows, as a plain mkdir and write would leave it.
    mask = os.umask(0)
    os.umask(mask)
    assert (folder / "hf").stat().st_mode & 0o777 == 0o777 & ~mask
    assert all(p.stat().st_mode & 0o777 == 0o666 & ~mask for p in (folder / "hf").iterdir())
    # Another process in another folder, as a user's evaluation code would load it.
    code = textwrap.dedent(f"""
        import json, torch, transformers
        from foxwb.workbench.model import build_model
        from foxwb.workbench.spec.trial import ModelSpec
        hf = transformers.AutoModelForCausalLM.from_pretrained({str(folder / 'hf')!r}, trust_remote_code=True)
        spec = json.load(open({str(folder / 'run' / 'result.json')!r}))["spec"]["model"]
        ours = build_model(ModelSpec.model_validate(spec))
        ours.load_state_dict(torch.load({str(folder / 'run' / 'checkpoint.pt')!r}, weights_only=True)["model"])
        ids = torch.randint(0, 256, (3, 45), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            print((hf(ids).logits - ours(ids)).abs().max().item())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=folder, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.split()[-1]) <= 1e-5


def test_wb_export_refuses_a_folder_that_is_not_empty(plugged):
    folder, env, _ = plugged
    again = wb("export", folder / "run", "--hf", folder / "hf", env=env)
    assert again.returncode == 2 and f"error: --hf {folder / 'hf'}: is not empty" in again.stderr
    assert "Traceback" not in again.stderr


def test_wb_export_without_transformers_says_which_extra_to_install(tmp_path):
    shadow = tmp_path / "absent" / "transformers"  # found before the installed one: as if not installed
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'transformers'\")\n")
    finished_trial(tmp_path / "trial", {"preset": "fox_llama", **TINY})
    proc = wb("export", tmp_path / "trial", "--hf", tmp_path / "hf",
              env={**os.environ, "PYTHONPATH": str(shadow.parent)})
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "error: wb export --hf needs transformers and safetensors (the workbench's `eval` extra): pip install -e '.[eval]'" in proc.stderr
    assert not (tmp_path / "hf").exists() and "Traceback" not in proc.stderr

"""benchmarks/train_throughput.py --launch on the CPU (--check): a tiny trial through the plain path
and Ray Train (one worker, DDP and FSDP; two workers, gloo), side by side, with its JSON."""
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.cli import shared_ray

ROOT = Path(__file__).resolve().parents[2]

TRIAL = {
    "model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
              "mlp": {"kind": "swiglu", "intermediate_size": 64}},
    "data": {"kind": "builtin", "context": 32, "max_bytes": 300000},
    "train": {"batch_size": 4, "cpu_threads": 1},
    "eval": {"sequences": 2, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024},
}


def test_the_launch_comparison_runs_every_path_on_the_same_batches(tmp_path):
    trial = tmp_path / "trial.yaml"
    trial.write_text(yaml.safe_dump(TRIAL))
    out = tmp_path / "launch.json"
    # The Ray Train runs join this pytest worker's cluster (tests/cli.py) as they join RAY_ADDRESS's
    # (foxwb.workbench.run.ray_train.run_workers), with its token (`ray start` turns it on).
    proc = subprocess.run([sys.executable, "benchmarks/train_throughput.py", "--launch", "--check", str(trial),
                           "--steps", "6", "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "RAY_ADDRESS": shared_ray(), "RAY_AUTH_MODE": "token"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    runs = json.loads(out.read_text())["runs"]
    assert [r["path"] for r in runs] == ["plain", "ray-train ddp x1", "ray-train fsdp x1", "ray-train ddp x2",
                                         "ray-train fsdp x2"]
    assert [r["workers"] for r in runs] == [1, 1, 1, 2, 2]
    assert all(r["steps"] == 6 and r["tokens_per_s"] > 0 for r in runs)
    assert all(r["loss_max_rel_diff"] < 1e-4 for r in runs)
    assert runs[1]["loss_max_rel_diff"] == 0.0  # one Ray Train worker is the plain step
    assert all(r["wall_s"] > 0 for r in runs)
    assert "x plain" in proc.stdout.splitlines()[-6]

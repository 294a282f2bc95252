"""benchmarks/comm_volume.py's count on a tiny model, 2 workers (gloo): DDP all-reduces every
gradient once per step, FSDP2 all-gathers each block twice and the root once and reduce-scatters
every gradient; the rest is a few bytes (the loss's mean, the gradient norm)."""
import json

import pytest
from torch.multiprocessing.spawn import ProcessExitedException

import comm_volume

from tests.benchmarks import abort_once

TINY = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 2, "n_heads": 2,
                  "mlp": {"kind": "swiglu", "intermediate_size": 64}},
        "data": {"kind": "builtin"}, "train": {"lr": 3e-3}}


def test_the_step_moves_what_the_parameter_count_says():
    ddp = comm_volume.measure(TINY, "ddp", 2, steps=3, context=16)
    p, blocks = ddp["params"], ddp["params_blocks"]
    assert 0 < blocks < p
    # The reducer's buckets hold every gradient; 12 bytes more: the loss, norm and report flag's mean.
    assert ddp["step_bytes"] == {"all-reduce": 4 * p + 12}
    assert ddp["at_wrap_bytes"]["broadcast"] >= 4 * p  # DDP's one-off copy of rank 0's weights
    fsdp = comm_volume.measure(TINY, "fsdp", 2, steps=3, context=16)
    step = fsdp["step_bytes"]
    # Every dimension is even: no padding of the shards, the formula exactly.
    assert step["all-gather"] == 4 * (2 * blocks + (p - blocks)) and step["reduce-scatter"] == 4 * p
    assert step["all-gather"] < 3 * 4 * p  # the root stays gathered from the forward into the backward
    assert 12 <= step["all-reduce"] < 1024 and fsdp["payload_over_formula"] == 1.0
    assert fsdp["ring_traffic_per_worker_bytes"] == (step["all-gather"] + step["reduce-scatter"]) / 2 + step["all-reduce"]


def test_a_worker_that_dies_by_a_signal_is_started_again_once_not_forever(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(comm_volume, "worker", abort_once.worker)
    flag = tmp_path / "aborted"
    assert comm_volume._spawn(2, json.dumps({"flag": str(flag)})) == {"rank0": True}
    assert flag.exists() and "SIGABRT; starting the workers again (2 of 3)" in capfd.readouterr().err
    with pytest.raises(ProcessExitedException, match="SIGABRT"):
        comm_volume._spawn(2, json.dumps({"flag": str(flag), "always": True}))
    assert "(3 of 3)" in capfd.readouterr().err

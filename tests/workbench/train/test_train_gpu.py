"""Compiled training on the GPU: CUDA graphs change how a step is launched, not what it computes.
Skipped without CUDA; run on the GPU machine."""
import pytest
import torch

from foxwb.workbench.data.load import load_data
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.loop import train

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.parametrize("grad_accum", [1, 2])
def test_cuda_graphs_train_the_same_loss_curve(grad_accum):
    """Eight compiled steps of a small FoX (Pro) with and without CUDA graphs: the same losses and
    gradient norms (with grad_accum 2 the step runs without graphs, by design) and the same spec
    hash."""
    def run(graphs):
        trial = TrialSpec.model_validate({
            "model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 128, "n_layers": 2, "n_heads": 2},
            "data": {"kind": "builtin", "context": 256, "max_bytes": 2_000_000},
            "train": {"tokens": 8 * 8 * 256, "batch_size": 8 // grad_accum, "grad_accum": grad_accum,
                      "compile": True, "cuda_graphs": graphs, "device": "cuda"},
        })
        torch.manual_seed(trial.seed)
        model = build_model(trial.model).cuda()
        data = load_data(trial.data, trial.model.vocab_size, trial.seed)
        history = train(trial, model, data)["history"]
        return trial.spec_hash(), [(h["train_loss"], h["grad_norm"]) for h in history]

    hash_on, with_graphs = run(True)
    hash_off, without = run(False)
    assert hash_on == hash_off
    assert len(with_graphs) == len(without) == 8
    for (loss_a, norm_a), (loss_b, norm_b) in zip(with_graphs, without):
        assert loss_a == pytest.approx(loss_b, rel=1e-4)
        assert norm_a == pytest.approx(norm_b, rel=1e-3)


def test_the_reference_attention_compiles_and_trains_like_the_kernel():
    """The reference backend is the check every fast path is held to, so it must run where the
    fast path runs: compiled, with CUDA graphs, under bf16 autocast. Eight steps of each backend
    from the same initialisation give the same losses to bf16 accuracy."""
    from foxwb.workbench.execution import Execution

    trial = TrialSpec.model_validate({
        "model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 128, "n_layers": 2, "n_heads": 2},
        "data": {"kind": "builtin", "context": 256, "max_bytes": 2_000_000},
        "train": {"tokens": 8 * 8 * 256, "batch_size": 8, "compile": True, "device": "cuda"},
    })

    def run(backend):
        torch.manual_seed(trial.seed)
        execution = Execution.of_trial(trial.train).but(attention_backend=backend)
        model = build_model(trial.model, execution).cuda()
        data = load_data(trial.data, trial.model.vocab_size, trial.seed)
        return [h["train_loss"] for h in train(trial, model, data, execution=execution)["history"]]

    reference, kernel = run("reference"), run("triton")
    assert len(reference) == len(kernel) == 8
    assert reference == pytest.approx(kernel, rel=2e-2)

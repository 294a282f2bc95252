"""The stability figures (docs/stability.md) on synthetic per-step histories."""
import numpy as np
import pytest

from foxwb.workbench.train.spikes import KEYS, after_warmup, spike_figures, spike_parts

TOKENS_PER_STEP = 1000


def history(grad_norm, loss=None):
    loss = np.full(len(grad_norm), 2.0) if loss is None else loss
    return [{"tokens": (i + 1) * TOKENS_PER_STEP, "step": i + 1, "grad_norm": float(g), "train_loss": float(l),
             "lr": 1e-3} for i, (g, l) in enumerate(zip(grad_norm, loss))]


def test_warmup_steps_are_left_out_by_their_first_token():
    h = history(np.ones(10))
    # Steps 1-3 cover tokens 0-3000; the fourth starts at 3000, the end of the warmup.
    assert after_warmup(h, 3000).tolist() == [False] * 3 + [True] * 7
    assert after_warmup(h, 0).all()


def test_a_run_of_spike_steps_counts_once_and_warmup_spikes_not_at_all():
    grad = np.full(100, 0.5)
    grad[2] = 50.0  # in the warmup: not counted, and not in the median
    grad[[40, 41, 42]] = [6.0, 20.0, 8.0]  # one spike of three steps
    grad[70] = 5.1  # just above 10 x 0.5: a second spike
    grad[80] = 4.9  # below the threshold
    figures = spike_figures(history(grad), warmup_tokens=10 * TOKENS_PER_STEP)
    assert figures["grad_spikes"] == 2
    assert figures["grad_spike_steps"] == 4
    assert figures["grad_norm_median"] == 0.5
    assert figures["grad_norm_max"] == 20.0
    assert figures["grad_norm_max_ratio"] == pytest.approx(40.0)
    assert figures["first_grad_spike_tokens"] == 41 * TOKENS_PER_STEP


def test_a_smooth_run_has_no_spikes():
    rng = np.random.default_rng(0)
    grad = 0.3 + 0.05 * rng.standard_normal(500)
    loss = np.linspace(3.0, 1.0, 500) + 0.02 * rng.standard_normal(500)
    figures = spike_figures(history(grad, loss), warmup_tokens=50 * TOKENS_PER_STEP)
    assert figures["grad_spikes"] == figures["loss_spikes"] == figures["grad_spike_steps"] == 0
    assert figures["first_grad_spike_tokens"] is None
    assert figures["grad_norm_max_ratio"] < 2


def test_loss_spike_is_judged_against_the_running_median_and_noise_before_it():
    rng = np.random.default_rng(1)
    loss = np.linspace(3.0, 1.0, 300) + 0.005 * rng.standard_normal(300)
    loss[150:153] = loss[149] * 1.2  # one spike of three steps, 20% above the median before it
    loss[200] = loss[199] * 1.04  # 4%: far outside the noise, but inside the 5% margin
    loss[5] = 10.0  # fewer than 10 steps before it: not judged
    figures = spike_figures(history(np.ones(300), loss), warmup_tokens=0)
    assert figures["loss_spikes"] == 1


def test_a_jump_inside_the_batch_noise_is_no_loss_spike():
    """Small batches give a noisy loss: a 15% excursion is no spike when the steps before it
    scatter by 5% (6 robust standard deviations = 30%)."""
    rng = np.random.default_rng(2)
    loss = 2.0 * (1 + 0.05 * rng.standard_normal(300))
    loss[200] = 2.0 * 1.15
    assert spike_figures(history(np.ones(300), loss), warmup_tokens=0)["loss_spikes"] == 0
    loss[250] = 2.0 * 1.5
    assert spike_figures(history(np.ones(300), loss), warmup_tokens=0)["loss_spikes"] == 1


def test_no_step_after_warmup_gives_empty_figures():
    assert spike_figures(history(np.ones(5)), warmup_tokens=10 * TOKENS_PER_STEP) == dict.fromkeys(KEYS)
    assert spike_figures([], warmup_tokens=0) == dict.fromkeys(KEYS)


def test_a_spike_is_traced_to_the_part_whose_gradient_jumped():
    grad = np.full(100, 0.5)
    grad[[40, 70]] = 20.0
    h = history(grad)
    for i, entry in enumerate(h):
        # "big" is the largest part always; "gate" is small but makes the spikes.
        gate = 19.9 if i in (40, 70) else 0.05
        entry["grad_norm_parts"] = {"big": 0.49, "gate": gate, "flat": 0.1}
    parts = spike_parts(h, warmup_tokens=10 * TOKENS_PER_STEP, top=2)
    assert [p["part"] for p in parts] == ["gate", "big"]
    assert parts[0]["ratio"] == pytest.approx(19.9 / 0.05)
    assert parts[0]["share"] == pytest.approx(19.9 ** 2 / (19.9 ** 2 + 0.49 ** 2 + 0.1 ** 2))
    assert parts[1]["ratio"] == pytest.approx(1.0)


def test_no_parts_are_named_without_spikes_or_without_the_parts_norms():
    smooth = history(np.full(50, 0.5))
    for entry in smooth:
        entry["grad_norm_parts"] = {"a": 0.5}
    assert spike_parts(smooth, warmup_tokens=0) == []
    grad = np.full(50, 0.5)
    grad[30] = 9.0
    assert spike_parts(history(grad), warmup_tokens=0) == []

"""One trial end to end: training, evaluation, the trial folder and what the trial measures.

- ``trial``: one trial end to end (data, model, training, evaluation, result.json).
- ``progress_line``: ``wb train``'s progress line on stderr.
- ``loop``: the training loop (AdamW, schedule, clipping, checkpoints).
- ``steps``: the step machinery the loop runs, in one process or as one of N workers.
- ``evaluate``: validation loss, per-position loss, attention kept under pruning.
- ``distributed``: one process among a trial's N workers.
- ``step_share``: each worker's share of a training step.
- ``telemetry``: peak memory and GPU telemetry; ``gpu_peaks``: each known GPU's dense bf16 rate (the MFU denominator).
- ``spikes``: gradient-norm and loss spikes; ``grad_parts``: gradient norms by part of the model.
- ``folder_lock``: one writer per trial folder.
- ``layout``: what a workdir and a trial folder hold, named in one place.
- ``finished``: a finished trial's folder read back (its spec and final weights), for `wb eval` and `wb export`.
- ``faults``: faults of the environment (files, ports, pipes, the store) as one sentence.
"""

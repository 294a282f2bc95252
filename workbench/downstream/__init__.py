"""Downstream evaluation: lm-evaluation-harness tasks on trained trials (`wb eval`).

``lm`` (a trial as an lm-eval model), ``trial_folder`` (a finished trial opened), ``local_task``
(the shipped task, wb_next_line), ``harness`` (lm-eval run on a trial), ``items`` (per-item files),
``paired`` (two variants compared item by item), ``study`` (a study's trials, their tracked runs and
their comparisons, read from the items logged to the runs). lm_eval (the `eval` extra) is imported by ``lm`` and ``harness`` alone.
"""

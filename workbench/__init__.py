"""The engine, by stage. Each stage imports only the stages above it in this list
(tests/test_repo.py holds it to that):

- ``spec``: what a study or trial file may say, validated, frozen and hashed; presets; errors.
- ``data``: documents as token arrays, from the built-in corpus or a researcher's own files.
- ``execution`` and ``model``: how a model runs, and the model assembled from component slots.
- ``train``: one trial end to end, in one process or as one of N workers.
- ``handoff``: a trained trial handed on to other people's code (`wb export --hf`: transformers).
- ``run``: a study on Ray Tune (and Ray Train), tracked in MLflow by the driver.
- ``analysis``: what the tracked runs say: the study table, statistics, effects, scaling laws.
- ``downstream``: lm-evaluation-harness tasks on trained trials (`wb eval`), compared item by item.
- ``cli``: the ``wb`` command line.
"""

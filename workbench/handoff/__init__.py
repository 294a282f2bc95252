"""Handing a trained model on: a finished trial's folder exported for other people's code.

- ``hf``: `wb export TRIAL --hf DIR`, a folder transformers loads (weights, config, model code).
- ``portable``: whether every component kind can be built by a loader elsewhere.
- ``hf_import``: transformers and safetensors (the `eval` extra), with a sentence when missing.
- ``configuration_fox_workbench``, ``modeling_fox_workbench``: the code copied into DIR.
"""

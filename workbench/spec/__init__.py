"""Specs: what a study or a trial file may say, validated, frozen and hashed (the lowest stage).

- ``base``: the base of every spec (pydantic, ``extra="forbid"``, frozen, hashed by canonical JSON).
- ``trial``: ``TrialSpec`` and its parts (model, data, train, eval).
- ``data``: specs of the data a researcher brings (tables, datasets, token shards, a tokenizer file).
- ``tokenizer_file``: a tokenizer.json's identity (its bytes' SHA-256 and vocabulary size).
- ``search``: a study's search: distributions, algorithm, ASHA, confirmation.
- ``study``: study files, their designs, and their expansion into trials.
- ``claims``: a study's claims: two rows and a smallest effect of interest.
- ``seed_plan``: seeds by plan (``{start, step, max}``), a study's or its confirmation's.
- ``presets``: the paper's four models as shorthands.
- ``fields``: dotted field paths (``model.attention.qk_norm``) and the edits a study makes with them.
- ``overrides``: ``--set PATH=VALUE``, a command line's edits of a file's data before it is validated.
- ``errors``: user-facing errors naming the field, the value and what is allowed; the YAML reader.
- ``cost``: parameter counts and FLOPs of a model spec.
- ``counts``: counts as a study file writes them ("360M", "1.3B").
"""

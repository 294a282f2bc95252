"""The ``wb`` command line. ``main`` holds the parser and hands the command to its module, imported
only when that command runs: ``info``, ``train``, ``run`` (its ``dry_run`` apart: it reads the
store through polars, which ``wb run`` does without), ``status``, ``results``, ``dashboard``, ``export``, ``eval``, ``corpus``;
``study_runs`` reads a study's runs for ``results`` and the dry run; ``seed_plan`` runs a study whose
seeds are a plan, look by look."""

"""What a study's tracked runs say.

- ``runs``: tracked runs as polars frames.
- ``table``: the study table (rows, statistics, significance), one definition for the CLI and the dashboards.
- ``report``: the table as ``wb results`` prints it; ``export``: CSV, parquet or JSON.
- ``stats``: statistics over seeds (CIs, paired and Welch tests, power, Holm).
- ``effects``: effect versus an axis.
- ``status``: every trial of a study and its state (``wb status``).
- ``scaling``: scaling-law fits and where two laws cross.
"""

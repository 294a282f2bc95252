"""What a study's tracked runs say.

- ``runs``: tracked runs as polars frames.
- ``table``: the study table (rows, statistics, significance), one definition for the CLI and the dashboards.
- ``report``: the table as ``wb results`` prints it; ``export``: CSV, parquet or JSON.
- ``paper_table``: the claims, the table and its notes as Markdown or LaTeX (booktabs), for a paper.
- ``stats``: statistics over seeds (CIs, paired and Welch tests, equivalence (TOST), power, Holm).
- ``doc_interval``: the difference of two rows with seeds and test documents both as samples.
- ``sequential``: seeds by plan: the boundary over the looks and the claims judged look by look.
- ``claims``: a study's claims (A against B with a smallest effect of interest) and their verdicts.
- ``effects``: effect versus an axis.
- ``fairness``: per row what was searched, the choice, and the knobs set away from their defaults unsearched.
- ``knobs``: which fields of a trial are knobs, their defaults, and which change the parameter count.
- ``status``: every trial of a study and its state (``wb status``).
- ``scaling``: scaling-law fits and where two laws cross.
"""

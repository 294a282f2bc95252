"""Scaling laws (docs/scaling.md).

- ``fit``: laws per variant with bootstrap intervals, and where two cross.
- ``solve``: the numerics (the law forms in log space, the Huber fit).
- ``ladder``: runs grouped into ladder points; ``cross``: where two fitted laws cross.
- ``laws``: a scaling study's laws from its tracked runs.
"""

"""Counts as a study file writes them: "360M" parameters, "1.3B" tokens, "125k", "2e8"."""
from __future__ import annotations

import math
import re

import numpy as np

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT = re.compile(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)", re.IGNORECASE)


def parse_count(text: str | float | int) -> float:
    """A parameter or token count: "360M" -> 3.6e8; also "1.3B", "125k", "2e8", "7T" or a number.
    Suffixes in either case: k = 1e3, M = 1e6, B or G = 1e9, T = 1e12. Raises ValueError naming the text."""
    if isinstance(text, (int, float, np.integer, np.floating)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _COUNT.fullmatch(str(text).strip())
        if m is None:
            raise ValueError(f"count {text!r}: expected a number with an optional suffix k, M, B or T "
                             "(e.g. 360M, 1.3B, 125k, 2e8)")
        value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"count {text!r}: must be a finite number > 0")
    return value

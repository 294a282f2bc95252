"""The benchmarks are scripts, not a package: their folder goes on the path, as `python
benchmarks/attention.py` puts it there."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

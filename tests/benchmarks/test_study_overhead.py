"""benchmarks/study_overhead.py against the present code: the packing measurement needs a GPU, so
its --check (what CI can run) validates both studies it would run and lists them."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_packing_measurement_validates_what_it_would_run():
    proc = subprocess.run([sys.executable, "benchmarks/study_overhead.py", "packing", "studies/packing.yaml", "--check"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("packed        8 trials at resources.gpu=0.25")
    assert lines[1].startswith("one GPU each  8 trials at resources.gpu=1")

#!/bin/bash
# Session 2026-11-30 (tenth): the benchmark beside its peers once more on the final code (the
# kernels unchanged since round37; the backward's two launches now go through _launch_dq /
# _launch_dkdv), then the attention's GPU tests.
set -u
OUT=${OUT:-/tmp/out}
timeout 330 python3 -m kernels.bench --peers .peers --out $OUT/bench.json > $OUT/bench.log 2>&1
tail -14 $OUT/bench.log
timeout 180 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_gpu.py > $OUT/tests-gpu.log 2>&1
tail -4 $OUT/tests-gpu.log

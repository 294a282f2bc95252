#!/bin/bash
# Session 2026-11-30 (eighth): the attention kernels with TMA tile loads installed (H200_CONFIGS from
# scripts/gpu/round34_tma.py). Kernel tests on CUDA (both load paths), then the benchmark beside
# its peers.
set -u
OUT=${OUT:-/tmp/out}
timeout 280 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_cpu.py tests/kernels/test_triton_gpu.py \
  tests/kernels/test_pruning.py > $OUT/tests.log 2>&1
tail -4 $OUT/tests.log
timeout 250 python3 -m kernels.bench --peers .peers --out $OUT/bench.json > $OUT/bench.log 2>&1
tail -30 $OUT/bench.log

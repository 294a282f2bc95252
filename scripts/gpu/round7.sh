#!/bin/bash
# Session 2026-11-30 (third), last GPU call (2 GPUs). GPU 0: the benchmark beside the peers after
# the segmented scan (kernels/BENCHMARKS.md). GPU 1: the GPU tests, the 125M throughput of both
# models (docs/performance.md), the installed tiles timed kernel by kernel, and a register-cap sweep.
# Ran at commit 9f1b170. Afterwards the segmented scan was reverted (its in-place reverse pass raced;
# the GPU tests here caught it) and the --maxnreg sweep removed (no cap helped:
# kernels/results/maxnreg-h200-2026-11-30.log), so this script no longer runs as written.
set -u
OUT=${OUT:-/tmp/out}
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 400 python3 -m kernels.bench --peers .peers --out $OUT/bench.json > $OUT/bench.log 2>&1
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 60 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_triton_gpu.py > $OUT/gpu-tests.log 2>&1
  for m in fox_pro transformer_llama; do
    timeout 130 python3 -m workbench.cli train studies/throughput/${m}_125m.yaml --out /tmp/tp_$m > $OUT/tp_$m.log 2>&1
    cp /tmp/tp_$m/result.json $OUT/${m}_result.json
  done
  timeout 60 python3 -m kernels.tune --quick --out $OUT/tune-quick.json > $OUT/tune-quick.log 2>&1
  timeout 100 python3 -m kernels.tune --maxnreg --out $OUT/maxnreg.json > $OUT/maxnreg.log 2>&1
) &
wait
tail -1 $OUT/gpu-tests.log
grep -v '^{' $OUT/bench.log | tail -9
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*' $OUT/*_result.json
cat $OUT/tune-quick.log $OUT/maxnreg.log | grep -v "^ *skipped" | tail -30

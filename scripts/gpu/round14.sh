#!/bin/bash
# Session 2026-11-30 (fourth), final GPU call, at commit 9e7a7d7 (2 GPUs). GPU 0: the benchmark
# beside the peers (kernels/BENCHMARKS.md). GPU 1: the GPU tests, then the 125M throughput of both
# models, twice each, alternating (docs/performance.md).
set -u
OUT=${OUT:-/tmp/out}
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 420 python3 -m kernels.bench --peers .peers --out $OUT/bench.json > $OUT/bench.log 2>&1
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_gpu.py tests/workbench/test_train_gpu.py > $OUT/gpu-tests.log 2>&1
  for run in a b; do
    for m in fox_pro transformer_llama; do
      timeout 130 python3 -m workbench.cli train studies/throughput/${m}_125m.yaml --out /tmp/tp_${m}_$run > /tmp/tp_${m}_$run.log 2>&1
      cp /tmp/tp_${m}_$run/result.json $OUT/${m}_${run}_result.json
    done
  done
) &
wait
tail -1 $OUT/gpu-tests.log
grep -v '^{' $OUT/bench.log | tail -22
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*' $OUT/*_result.json

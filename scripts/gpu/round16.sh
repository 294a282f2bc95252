#!/bin/bash
# Session 2026-11-30 (fifth), at the commit named in kernels/BENCHMARKS.md (2 GPUs). Adaptive
# computation pruning: GPU 0 runs the benchmark beside the peers, with our kernel and the official
# one also pruned (ln eps = -10), then the 125M Transformer (LLaMA) trial. GPU 1: the GPU tests
# (pruning included), then the 125M FoX (Pro) trials with and without pruning (docs/performance.md).
set -u
OUT=${OUT:-/tmp/out}
train() {  # model
  timeout 165 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1 > /tmp/tp_$1.log 2>&1
  cp /tmp/tp_$1/result.json $OUT/$1_result.json || tail -5 /tmp/tp_$1.log
}
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 430 python3 -m kernels.bench --peers .peers --out $OUT/bench.json > $OUT/bench.log 2>&1
  train transformer_llama
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 180 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_triton_gpu.py tests/kernels/test_pruning.py \
    tests/workbench/test_train_gpu.py > $OUT/gpu-tests.log 2>&1
  train fox_pro_acp
  train fox_pro
) &
wait
grep -E "passed|failed|keep" $OUT/gpu-tests.log | tail -8
grep -v '^{' $OUT/bench.log | tail -24
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"acp_kept_fraction": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json

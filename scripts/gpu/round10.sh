#!/bin/bash
# Session 2026-11-30 (fourth), at commit 075e0bd (2 GPUs): the 125M throughput of both models, one
# per GPU at the same time (docs/performance.md), then a profile of each; GPU 1 then runs the
# training and model GPU tests.
set -u
OUT=${OUT:-/tmp/out}
run() {  # model gpu
  export CUDA_VISIBLE_DEVICES=$2
  timeout 150 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1 > /tmp/tp_$1.log 2>&1
  cp /tmp/tp_$1/result.json $OUT/$1_result.json
  timeout 170 python3 scripts/profile_step.py studies/throughput/$1_125m.yaml --out $OUT/profile-$1.json > /tmp/profile-$1.log 2>&1
  tail -3 /tmp/tp_$1.log; head -8 /tmp/profile-$1.log
}
run fox_pro 0 > $OUT/fox_pro.log 2>&1 &
(
  run transformer_llama 1
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/workbench/test_train_gpu.py tests/kernels/test_triton_gpu.py
) > $OUT/transformer_llama.log 2>&1 &
wait
cat $OUT/fox_pro.log $OUT/transformer_llama.log | grep -v Warning | tail -40
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*' $OUT/*_result.json

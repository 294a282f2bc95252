#!/bin/bash
# Session 2026-11-30 (fourth), at commit e0bc4eb (2 GPUs): the 125M throughput of both models twice,
# each model once on each GPU, the two GPUs running one of each at the same time
# (docs/performance.md); then the training GPU tests on GPU 1.
set -u
OUT=${OUT:-/tmp/out}
train() {  # model gpu tag
  CUDA_VISIBLE_DEVICES=$2 timeout 150 python3 -m workbench.cli train studies/throughput/$1_125m.yaml \
    --out /tmp/tp_$1_$3 > /tmp/tp_$1_$3.log 2>&1
  cp /tmp/tp_$1_$3/result.json $OUT/$1_$3_result.json
}
(train fox_pro 0 a; train transformer_llama 0 b) &
(train transformer_llama 1 a; train fox_pro 1 b;
 CUDA_VISIBLE_DEVICES=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/workbench/test_train_gpu.py > $OUT/gpu-tests.log 2>&1) &
wait
tail -1 $OUT/gpu-tests.log
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*' $OUT/*_result.json

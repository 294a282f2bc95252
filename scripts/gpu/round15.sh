#!/bin/bash
# Session 2026-11-30 (fourth), at commit af169e4 (2 GPUs): the 125M throughput of both
# models with the 200-step trial files, each model once on each GPU, the two GPUs running one of
# each at the same time (docs/performance.md).
set -u
OUT=${OUT:-/tmp/out}
train() {  # model gpu tag
  CUDA_VISIBLE_DEVICES=$2 timeout 200 python3 -m workbench.cli train studies/throughput/$1_125m.yaml \
    --out /tmp/tp_$1_$3 > /tmp/tp_$1_$3.log 2>&1
  cp /tmp/tp_$1_$3/result.json $OUT/$1_$3_result.json
}
(train fox_pro 0 a; train transformer_llama 0 b) &
(train transformer_llama 1 a; train fox_pro 1 b) &
wait
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*' $OUT/*_result.json

#!/bin/bash
# Session 2026-11-30 (sixth): the fused head + loss (kernels/linear_cross_entropy.py). GPU 0: its
# tests on CUDA, kernels.bench_loss, then the step profile of both 125M models. GPU 1: the two
# 200-step 125M trials one after the other (docs/performance.md).
set -u
OUT=${OUT:-/tmp/out}
train() {  # model
  timeout 170 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1 > /tmp/tp_$1.log 2>&1
  cp /tmp/tp_$1/result.json $OUT/$1_result.json || tail -5 /tmp/tp_$1.log
}
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cross_entropy.py > $OUT/tests.log 2>&1
  timeout 120 python3 -m kernels.bench_loss --out $OUT/bench_loss.json > $OUT/bench_loss.log 2>&1
  for m in fox_pro transformer_llama; do
    timeout 150 python3 scripts/profile_step.py studies/throughput/${m}_125m.yaml --out $OUT/profile-$m.json > $OUT/profile-$m.log 2>&1
  done
) &
(
  export CUDA_VISIBLE_DEVICES=1
  train transformer_llama
  train fox_pro
) &
wait
tail -3 $OUT/tests.log
cat $OUT/bench_loss.log | tail -25
for m in fox_pro transformer_llama; do head -12 $OUT/profile-$m.log; done
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json

#!/bin/bash
# Session 2026-11-30 (sixth): the row kernel's tiles searched again (32 warps, L2 hints), and the
# two 125M trials with the installed (2048, 16) tile, one after the other on one GPU.
set -u
OUT=${OUT:-/tmp/out}
train() {  # model
  timeout 170 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1 > /tmp/tp_$1.log 2>&1
  cp /tmp/tp_$1/result.json $OUT/$1_result.json || tail -5 /tmp/tp_$1.log
}
(export CUDA_VISIBLE_DEVICES=0; timeout 200 python3 -m kernels.bench_loss --out $OUT/bench_loss.json > $OUT/bench_loss.log 2>&1) &
(export CUDA_VISIBLE_DEVICES=1; train transformer_llama; train fox_pro) &
wait
tail -32 $OUT/bench_loss.log
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json

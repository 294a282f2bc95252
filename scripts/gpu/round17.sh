#!/bin/bash
# Session 2026-11-30 (fifth), at the commit named in kernels/BENCHMARKS.md (2 GPUs). GPU 0: the
# benchmark beside the peers, ours and the official kernel also with adaptive computation pruning
# (ln eps = -10). GPU 1: the three 125M trials one after another on the same GPU: Transformer
# (LLaMA), FoX (Pro), FoX (Pro) with pruning (docs/performance.md).
set -u
OUT=${OUT:-/tmp/out}
train() {  # model
  timeout 150 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1 > /tmp/tp_$1.log 2>&1
  cp /tmp/tp_$1/result.json $OUT/$1_result.json || tail -5 /tmp/tp_$1.log
}
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 450 python3 -m kernels.bench --peers .peers --out $OUT/bench.json > $OUT/bench.log 2>&1
) &
(
  export CUDA_VISIBLE_DEVICES=1
  train transformer_llama
  train fox_pro
  train fox_pro_acp
) &
wait
grep -v '^{' $OUT/bench.log | tail -14
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"acp_kept_fraction": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json

#!/bin/bash
# Session 2026-11-30 (fifth), at the commit named in kernels/BENCHMARKS.md (2 GPUs), after the
# pruning plan moved to Triton (kernels/triton_pruning.py). GPU 0: the benchmark beside the peers
# (ours and the official kernel also pruned, ln eps = -10). GPU 1: the GPU tests, the per-kernel
# profile of round18, then the 125M FoX (Pro) with pruning and Transformer (LLaMA) trials.
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
  timeout 170 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_triton_gpu.py tests/kernels/test_pruning.py \
    tests/workbench/test_train_gpu.py > $OUT/gpu-tests.log 2>&1
  timeout 60 python3 scripts/gpu/round18_acp_profile.py > $OUT/acp-profile.log 2>&1
  train fox_pro_acp
  train transformer_llama
) &
wait
grep -E "passed|failed|keep" $OUT/gpu-tests.log | tail -8
grep -E "wall|kernel|norm" $OUT/acp-profile.log | head -24
grep -v '^{' $OUT/bench.log | tail -14
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"acp_kept_fraction": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json

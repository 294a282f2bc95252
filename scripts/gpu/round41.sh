#!/bin/bash
# Session 2026-11-30 (ninth): the gates' column groups returned as views of their own (the backward
# no longer joins their gradients in a concatenating kernel). The FoX (Pro) step profiled first
# (which kernels replaced the 1.77 ms one), the two 125M trials, then the QKV kernel's tests and
# its benchmark on CUDA.
set -u
OUT=${OUT:-/tmp/out}
timeout 120 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml --out $OUT/profile-fox_pro.json \
  > $OUT/profile-fox_pro.log 2>&1
grep -v Warn $OUT/profile-fox_pro.log | head -12
grep -i "sigmoid\|columns\|qkv\|cat" $OUT/profile-fox_pro.log | head -12
source "$(dirname "$0")/lib.sh"  # train MODEL
train fox_pro
train transformer_llama
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_qkv_prep.py > $OUT/tests-qkv.log 2>&1
tail -3 $OUT/tests-qkv.log
timeout 120 python3 -m kernels.bench_qkv --out $OUT/qkv.json > $OUT/bench-qkv.log 2>&1
tail -26 $OUT/bench-qkv.log

#!/bin/bash
# Session 2026-11-30 (ninth): the gates' gradients copied into d proj through an aligned view
# (columns_kernel), its tile shapes; then the FoX (Pro) step's profile and the two 125M trials.
set -u
OUT=${OUT:-/tmp/out}
timeout 60 python3 scripts/gpu/round42_columns.py $OUT/columns.json 2>&1 | grep -v Warn
timeout 120 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml --out $OUT/profile-fox_pro.json \
  > $OUT/profile-fox_pro.log 2>&1
grep -v Warn $OUT/profile-fox_pro.log | head -12
grep "columns\|qkv_prep" $OUT/profile-fox_pro.log
source "$(dirname "$0")/lib.sh"  # train MODEL
train fox_pro
train transformer_llama
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json

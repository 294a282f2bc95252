#!/bin/bash
# Session 2026-11-30 (eighth): with TMA tile loads installed. The kernel tests that run on CUDA in
# budget (the TMA tests at awkward sizes, fp32 at head dim 128 with its own tiles, the long bf16
# sequences on both load paths, the model), then the two 125M trials one after the other, and
# the FoX (Pro) step's profile (which load path the attention took).
set -u
OUT=${OUT:-/tmp/out}
source "$(dirname "$0")/lib.sh"  # train MODEL
train fox_pro
train transformer_llama
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_cpu.py -k "tma or 1-128-fp32 or 257-64-fp32-weak" \
  > $OUT/tests-small.log 2>&1
tail -8 $OUT/tests-small.log
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_gpu.py > $OUT/tests-gpu.log 2>&1
tail -8 $OUT/tests-gpu.log
timeout 100 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml --out $OUT/profile-fox_pro.json > $OUT/profile-fox_pro.log 2>&1
grep -v Warn $OUT/profile-fox_pro.log | head -14

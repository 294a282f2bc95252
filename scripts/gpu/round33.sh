#!/bin/bash
# Session 2026-11-30 (seventh): the FoX (Pro) step with KV-shift + QK-norm through prepare_qkv
# and through the compiled component code, side by side on one GPU (each profile compiles afresh,
# from empty Inductor caches, so the second "off" is another draw of its autotuning).
set -u
OUT=${OUT:-/tmp/out}
for run in on off off2; do
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-$run timeout 110 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml --fused-qkv ${run%2} \
    --out $OUT/profile-fox_pro-qkv-$run.json > $OUT/profile-$run.log 2>&1
  grep -v Warn $OUT/profile-$run.log | head -9
done

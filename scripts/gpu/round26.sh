#!/bin/bash
# Session 2026-11-30 (sixth): where the step's time goes with the fused loss (both 125M models,
# one after the other on one GPU).
set -u
OUT=${OUT:-/tmp/out}
for m in fox_pro transformer_llama; do
  timeout 150 python3 scripts/profile_step.py studies/throughput/${m}_125m.yaml --out $OUT/profile-$m.json > $OUT/profile-$m.log 2>&1
  grep -v Warn $OUT/profile-$m.log | head -30
done

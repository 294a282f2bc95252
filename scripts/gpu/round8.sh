#!/bin/bash
# Session 2026-11-30 (third), profile of both 125M trials (ran at commit 27c9b46) (docs/performance.md):
# scripts/profile_step.py on one GPU each, FoX (Pro) with a Chrome trace.
set -u
OUT=${OUT:-/tmp/out}
CUDA_VISIBLE_DEVICES=0 timeout 170 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml \
  --out $OUT/profile-fox_pro.json --trace $OUT/trace-fox_pro.json.gz > $OUT/profile-fox_pro.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 170 python3 scripts/profile_step.py studies/throughput/transformer_llama_125m.yaml \
  --out $OUT/profile-transformer_llama.json > $OUT/profile-transformer_llama.log 2>&1 &
wait
head -8 $OUT/profile-fox_pro.log $OUT/profile-transformer_llama.log

#!/bin/bash
# Session 2026-11-30 (fifth), at the commit named in docs/performance.md (2 GPUs): does pruning
# hold as the gates learn? The 125M FoX (Pro) trial at 1000 steps (32.8M tokens, the same
# schedule shape) without (GPU 0) and with (GPU 1) adaptive computation pruning, at the same time;
# before that, on GPU 1, norm_max_kernel's rows per program timed.
set -u
OUT=${OUT:-/tmp/out}
long() {  # trial file stem, out name
  sed 's/^  tokens: .*/  tokens: 32768000/' studies/throughput/$1_125m.yaml > /tmp/$2.yaml
  timeout 240 python3 -m workbench.cli train /tmp/$2.yaml --out /tmp/$2 > /tmp/$2.log 2>&1
  cp /tmp/$2/result.json $OUT/$2_result.json || tail -5 /tmp/$2.log
}
(export CUDA_VISIBLE_DEVICES=0; long fox_pro fox_pro_1000) &
(export CUDA_VISIBLE_DEVICES=1; timeout 60 python3 scripts/gpu/round20_rows.py > $OUT/rows.log 2>&1; long fox_pro_acp fox_pro_acp_1000) &
wait
cat $OUT/rows.log | grep rows
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"acp_kept_fraction": [0-9.]*\|"val_loss": [0-9.]*\|"steps": [0-9]*' $OUT/*_result.json

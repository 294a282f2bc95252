#!/bin/bash
# Session 2026-11-30 (fifth): the 1000-step FoX (Pro) comparison of round20/21 at seed 1 (those
# ran seed 0), with (GPU 1) and without (GPU 0) pruning at the same time: one more trajectory per
# arm (studies/acp_seeds.yaml is the full design). Not run: no 2-GPU machine was lent when it was
# due, and one GPU could not fit both trials in the device time left.
set -u
OUT=${OUT:-/tmp/out}
long() {  # trial file stem, out name
  (sed 's/^  tokens: .*/  tokens: 32768000/' studies/throughput/$1_125m.yaml; echo "seed: 1") > /tmp/$2.yaml
  timeout 190 python3 -m workbench.cli train /tmp/$2.yaml --out /tmp/$2 > /tmp/$2.log 2>&1
  cp /tmp/$2/result.json $OUT/$2_result.json || tail -3 /tmp/$2.log
  cp /tmp/$2/metrics.jsonl $OUT/$2_metrics.jsonl
}
(export CUDA_VISIBLE_DEVICES=0; long fox_pro fox_pro_1000_s1) &
(export CUDA_VISIBLE_DEVICES=1; long fox_pro_acp fox_pro_acp_1000_s1) &
wait
grep -H -o '"tokens_per_s": [0-9.]*\|"acp_kept_fraction": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json
for f in $OUT/*_metrics.jsonl; do python3 -c "
import json
rows=[json.loads(l) for l in open('$f')]
print('$f'.split('/')[-1], ' '.join(f\"{r['step']}:{r['train_loss']:.3f}\" for r in rows[::100]), 'max grad norm after 100:', max(r['grad_norm'] for r in rows[100:]))"; done

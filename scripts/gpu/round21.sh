#!/bin/bash
# Session 2026-11-30 (fifth): round20 repeated with the GPUs swapped and the loss curves kept: is
# the 1000-step validation-loss gap between FoX (Pro) with and without pruning systematic?
set -u
OUT=${OUT:-/tmp/out}
long() {  # trial file stem, out name
  sed 's/^  tokens: .*/  tokens: 32768000/' studies/throughput/$1_125m.yaml > /tmp/$2.yaml
  timeout 230 python3 -m workbench.cli train /tmp/$2.yaml --out /tmp/$2 > /tmp/$2.log 2>&1
  cp /tmp/$2/result.json $OUT/$2_result.json || tail -5 /tmp/$2.log
  cp /tmp/$2/metrics.jsonl $OUT/$2_metrics.jsonl
}
(export CUDA_VISIBLE_DEVICES=1; long fox_pro fox_pro_1000b) &
(export CUDA_VISIBLE_DEVICES=0; long fox_pro_acp fox_pro_acp_1000b) &
wait
grep -H -o '"tokens_per_s": [0-9.]*\|"acp_kept_fraction": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json
for f in $OUT/*_metrics.jsonl; do echo $f; python3 -c "
import json,sys
rows=[json.loads(l) for l in open('$f')]
print(' '.join(f\"{r['step']}:{r['train_loss']:.3f}\" for r in rows[::50]))
print('max grad norm', max(r.get('grad_norm', 0) for r in rows))"; done

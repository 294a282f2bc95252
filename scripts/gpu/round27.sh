#!/bin/bash
# Session 2026-11-30 (sixth): studies/acp_seeds.yaml (pruning on/off x 3 seeds, 1000 steps, 125M
# FoX (Pro)) on the 2-GPU machine, two trials at a time; the MLflow store comes back for the
# dashboard and `wb results`.
set -u
OUT=${OUT:-/tmp/out}
timeout 570 python3 -m workbench.cli run studies/acp_seeds.yaml --workdir $OUT/acp > $OUT/acp.log 2>&1
echo "rc $?"
tail -25 $OUT/acp.log
find $OUT/acp -name result.json | while read f; do
  python3 -c "
import json; r=json.load(open('$f')); s=r['spec']
print(s['seed'], s['model']['attention'].get('log_pruning_tolerance'), round(r['val_loss'],4), round(r['tokens_per_s']), r.get('acp_kept_fraction'))"
done
rm -rf $OUT/acp/ray $OUT/acp/ray_results 2>/dev/null
du -sh $OUT/acp

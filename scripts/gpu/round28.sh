#!/bin/bash
# Session 2026-11-30 (sixth): the KV-shift + QK-norm forward kernel that torch.compile generates
# took 0.91 ms per step in round23's profile and 2.62 ms in round26's, same code. Is it Inductor's
# autotuning picking differently on each fresh compile? Three fresh compiles of the FoX (Pro) step
# (each its own Inductor cache), the third with coordinate-descent tuning.
set -u
OUT=${OUT:-/tmp/out}
for run in a b cd; do
  extra=""; [ $run = cd ] && extra="TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1"
  env TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_$run $extra timeout 170 python3 scripts/profile_step.py \
    studies/throughput/fox_pro_125m.yaml --out $OUT/profile-$run.json > $OUT/profile-$run.log 2>&1
  python3 -c "
import json; d=json.load(open('$OUT/profile-$run.json'))
k=[v for n,v in d['top_kernels_ms'].items() if 'rsqrt_rsub_scalar_tensor_sigmoid' in n and 'backward' not in n]
print('$run', round(d['step_ms'],2), 'busy', round(d['gpu_busy_ms'],2), 'kv-shift+qk-norm fwd', [round(x,3) for x in k], d['groups_ms'])"
done

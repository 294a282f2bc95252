#!/bin/bash
# Session 2026-11-30 (third), first GPU call on a 2-GPU machine: GPU 0 checks the reworked kernels
# (scan kernels, delta inside dq_kernel, unmasked loads below the diagonal, heaviest tiles first)
# and searches tiles again (plus the 125M training shape and a warp-specialisation trial); GPU 1
# measures the 125M trials with CUDA graphs (TrainSpec.cuda_graphs, on by default) and profiles one.
# Ran at commit a80bc61; the warp-specialisation timing in kernels.tune was removed afterwards, so the script no longer runs as written.
set -u
OUT=${OUT:-/tmp/out}
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels -x 2>&1 | tail -4 > $OUT/gpu-tests.log
  timeout 330 python3 -m kernels.tune --jobs 14 --out $OUT/tune.json > $OUT/tune.log 2>&1
) &
(
  export CUDA_VISIBLE_DEVICES=1 TORCH_LOGS=perf_hints
  for m in fox_pro transformer_llama; do
    timeout 170 python3 -m workbench.cli train studies/throughput/${m}_125m.yaml --out /tmp/tp_$m > $OUT/tp_$m.log 2>&1
    cp /tmp/tp_$m/result.json $OUT/${m}_result.json
  done
  timeout 150 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml --out $OUT/profile-fox_pro.json \
    --trace $OUT/trace-fox_pro.json.gz > $OUT/profile-fox_pro.log 2>&1
) &
wait
cat $OUT/gpu-tests.log
grep "chosen\|compiled" $OUT/tune.log
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*' $OUT/*_result.json
grep -i "skipping cudagraphs" $OUT/tp_*.log | head -5
head -30 $OUT/profile-fox_pro.log

#!/bin/bash
# Throughput of the 125M trials after the fused input projection (docs/performance.md), the two
# models at once on the two GPUs of one machine (the device budget had about 4 minutes left).
set -u
OUT=${OUT:-/tmp/out}
timeout 40 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_gpu.py -k "model" 2>&1 | tail -1
for pair in "0 fox_pro" "1 transformer_llama"; do
  set -- $pair
  (CUDA_VISIBLE_DEVICES=$1 timeout 150 python3 -m workbench.cli train studies/throughput/$2_125m.yaml --out /tmp/tp_$2 \
     > $OUT/tp_$2.log 2>&1; cp /tmp/tp_$2/result.json $OUT/$2_result.json) &
done
wait
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*' $OUT/*_result.json

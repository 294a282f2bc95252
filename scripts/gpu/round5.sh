#!/bin/bash
# Session 2026-11-30 (third), second GPU call (2 GPUs). GPU 0: the kernels' GPU tests, EARLY_DP
# both ways on the installed tiles (kernels.tune --quick), the benchmark beside the peers, then the
# interpreter-size kernel tests run on CUDA. GPU 1: CUDA graphs train the same curve, then the 125M
# throughput of both models (optimizer queued behind the backward, tiles for 4096 installed).
# Ran at commit 83ae2bc; kernels.tune's EARLY_DP comparison was removed afterwards, so the script no longer runs as written.
set -u
OUT=${OUT:-/tmp/out}
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 90 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_triton_gpu.py > $OUT/gpu-tests.log 2>&1
  timeout 120 python3 -m kernels.tune --quick --out $OUT/tune-quick.json > $OUT/tune-quick.log 2>&1
  timeout 240 python3 -m kernels.bench --peers .peers --out $OUT/bench.json > $OUT/bench.log 2>&1
  timeout 100 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_cpu.py -x > $OUT/cpu-tests-on-cuda.log 2>&1
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/workbench/test_train_gpu.py > $OUT/train-gpu-tests.log 2>&1
  for m in fox_pro transformer_llama; do
    timeout 150 python3 -m workbench.cli train studies/throughput/${m}_125m.yaml --out /tmp/tp_$m > $OUT/tp_$m.log 2>&1
    cp /tmp/tp_$m/result.json $OUT/${m}_result.json
  done
) &
wait
tail -3 $OUT/gpu-tests.log; tail -2 $OUT/train-gpu-tests.log; tail -2 $OUT/cpu-tests-on-cuda.log
grep chosen $OUT/tune-quick.log
tail -25 $OUT/bench.log
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*' $OUT/*_result.json

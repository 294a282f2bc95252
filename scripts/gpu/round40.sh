#!/bin/bash
# Session 2026-11-30 (ninth): the graph-break fix (the custom op picks its tiles at run time) on
# the GPU. The two 125M trials one after the other (issue 4's figures), then one FoX (Pro) step
# profiled and traced: how many compiled graphs a step runs (62 before the fix) and whether the
# fp32 multi-tensor copy of CUDA graph trees is gone; then the GPU kernel tests.
set -u
OUT=${OUT:-/tmp/out}
source "$(dirname "$0")/lib.sh"  # train MODEL
train fox_pro
train transformer_llama
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json
timeout 120 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml --out $OUT/profile-fox_pro.json \
  --trace $OUT/step-trace.json.gz > $OUT/profile-fox_pro.log 2>&1
grep -v Warn $OUT/profile-fox_pro.log | head -16
python3 - "$OUT/step-trace.json.gz" <<'PY'
import gzip, json, sys, collections
ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
names = collections.Counter(e.get("name", "") for e in ev if e.get("ph") == "X")
print("compiled graph calls:", sum(v for k, v in names.items() if "CompiledFxGraph" in k))
print("foreach_copy_ calls:", sum(v for k, v in names.items() if "_foreach_copy_" in k))
PY
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_gpu.py > $OUT/tests-gpu.log 2>&1
tail -6 $OUT/tests-gpu.log

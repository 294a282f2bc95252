#!/bin/bash
# Session 2026-11-30 (seventh): prepare_qkv returns the gates' logits as a view (no copy in the forward); its tests
# and benchmark (now also under CUDA graphs), the fastest tile installed in this copy (committed
# after), a profile of the FoX (Pro) step, the two 125M trials one after the other on one GPU,
# then the compiled-step GPU tests.
set -u
OUT=${OUT:-/tmp/out}
timeout 150 python3 -m pytest -q -x tests/kernels/test_qkv_prep.py 2>&1 | tail -3
timeout 150 python3 -m kernels.bench_qkv --out $OUT/bench_qkv.json > $OUT/bench_qkv.log 2>&1
tail -28 $OUT/bench_qkv.log
python3 - <<'PY'
import json, os, re
sweep = json.load(open(os.environ.get("OUT", "/tmp/out") + "/bench_qkv.json"))["kernels"]
best = min(sweep, key=lambda r: r["fwd_ms"] + r["bwd_ms"])
print("installing", best)
p = "kernels/qkv_prep.py"
s = open(p).read()
s = re.sub(r"BLOCK_T, TILES, NUM_WARPS = \d+, \d+, \d+", f"BLOCK_T, TILES, NUM_WARPS = {best['block_t']}, {best['tiles']}, {best['warps']}", s)
open(p, "w").write(s)
PY
grep -n "^BLOCK_T" kernels/qkv_prep.py
timeout 150 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml --out $OUT/profile-fox_pro.json > $OUT/profile-fox_pro.log 2>&1
grep -v Warn $OUT/profile-fox_pro.log | head -40
train() {  # model
  timeout 170 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1 > /tmp/tp_$1.log 2>&1
  cp /tmp/tp_$1/result.json $OUT/$1_result.json || tail -5 /tmp/tp_$1.log
}
train fox_pro
train transformer_llama
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json
timeout 100 python3 -m pytest -q -x tests/workbench/test_train_gpu.py 2>&1 | tail -3

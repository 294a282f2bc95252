#!/bin/bash
# Session 2026-11-30 (sixth): the one-pass row kernel (the whole row in registers) beside the
# two-pass one; the fastest is installed in this copy of kernels/linear_cross_entropy.py (and
# committed after) and the two 125M trials run with it, one after the other on one GPU.
set -u
OUT=${OUT:-/tmp/out}
timeout 200 python3 -m kernels.bench_loss --out $OUT/bench_loss.json > $OUT/bench_loss.log 2>&1
tail -20 $OUT/bench_loss.log
python3 - <<'PY'
import json, re
best = min(json.load(open("/root/out/bench_loss.json" if False else __import__("os").environ.get("OUT", "/tmp/out") + "/bench_loss.json"))["row_kernel"], key=lambda r: r["ms"])
print("installing", best)
p = "kernels/linear_cross_entropy.py"
s = open(p).read()
if best["kernel"] == "resident":
    s = re.sub(r"RESIDENT_MAX, RESIDENT_WARPS = \d+, \d+", f"RESIDENT_MAX, RESIDENT_WARPS = 65536, {best['warps']}", s)
else:
    s = re.sub(r"RESIDENT_MAX, RESIDENT_WARPS = \d+, \d+", "RESIDENT_MAX, RESIDENT_WARPS = 0, 32", s)
    s = re.sub(r"BLOCK_V, NUM_WARPS = \d+, \d+", f"BLOCK_V, NUM_WARPS = {best['block_v']}, {best['warps']}", s)
open(p, "w").write(s)
PY
grep -n "^BLOCK_V\|^RESIDENT_MAX" kernels/linear_cross_entropy.py
train() {  # model
  timeout 170 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1 > /tmp/tp_$1.log 2>&1
  cp /tmp/tp_$1/result.json $OUT/$1_result.json || tail -5 /tmp/tp_$1.log
}
train transformer_llama
train fox_pro
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*\|"source": "[0-9a-f]*"' $OUT/*_result.json

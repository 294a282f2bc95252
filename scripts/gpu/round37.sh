#!/bin/bash
# Session 2026-11-30 (eighth): the benchmark beside its peers with TMA tile loads installed (the
# previous call's run, round35, was cut short and its 2k hd128 rows disturbed), then one FoX (Pro)
# step traced with host stacks: where the 1 ms fp32 multi-tensor copy per step comes from.
set -u
OUT=${OUT:-/tmp/out}
timeout 300 python3 -m kernels.bench --peers .peers --out $OUT/bench.json > $OUT/bench.log 2>&1
tail -32 $OUT/bench.log
timeout 120 python3 scripts/profile_step.py studies/throughput/fox_pro_125m.yaml --out $OUT/profile-trace.json \
  --trace $OUT/step-trace.json.gz > $OUT/profile-trace.log 2>&1
grep -v Warn $OUT/profile-trace.log | head -4

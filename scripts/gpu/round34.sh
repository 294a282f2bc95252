#!/bin/bash
# Session 2026-11-30 (eighth): the attention kernels reading their tiles through TMA descriptors
# against the installed pointer kernels (scripts/gpu/round34_tma.py), then one FoX (Pro) 125M trial
# whose per-step times (step_ms) show where the trial's mean loses to the profiler's median.
set -u
OUT=${OUT:-/tmp/out}
timeout 330 python3 scripts/gpu/round34_tma.py --out $OUT/tma.json 2>&1 | grep -v Warn
timeout 170 python3 -m workbench.cli train studies/throughput/fox_pro_125m.yaml --out /tmp/tp_fox > /tmp/tp_fox.log 2>&1
cp /tmp/tp_fox/result.json $OUT/fox_pro_result.json || tail -5 /tmp/tp_fox.log
cp /tmp/tp_fox/metrics.jsonl $OUT/fox_pro_metrics.jsonl 2>/dev/null
python3 - <<'PY'
import json, os, statistics
out = os.environ.get("OUT", "/tmp/out")
r = json.load(open(out + "/fox_pro_result.json"))
print("tokens/s", r["tokens_per_s"], "mfu", r["mfu"])
ms = [json.loads(l).get("step_ms") for l in open(out + "/fox_pro_metrics.jsonl")]
ms = [m for m in ms if m is not None][20:]
s = sorted(ms)
print(f"steps {len(ms)}: mean {statistics.mean(ms):.2f} median {statistics.median(ms):.2f} min {s[0]:.2f} "
      f"p90 {s[int(.9 * len(s))]:.2f} max {s[-1]:.2f}")
print("slowest", [(i + 20, round(m, 2)) for i, m in sorted(enumerate(ms), key=lambda x: -x[1])[:8]])
print("by 20s", [round(statistics.mean(ms[i:i + 20]), 2) for i in range(0, len(ms), 20)])
PY

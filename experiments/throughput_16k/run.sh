#!/usr/bin/env bash
# The 125M FoX (Pro) and Transformer (LLaMA) at context 16384, alternating twice (no argument), or
# one step of each under the profiler (`profile`, run as a device call of its own when measured);
# JSON and logs into $OUT (default /tmp/bench-out). GPU only:
#   bash experiments/throughput_16k/run.sh [profile]      (benchmarks/gpu.sh trials-16k runs the first)
set -u
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
source scripts/checkout_path.sh
export PYTHONUNBUFFERED=1
here=experiments/throughput_16k/trials
status=0
if [ "${1:-}" = profile ]; then
  for m in fox_pro transformer_llama; do
    timeout 270 python3 benchmarks/profile_step.py "$here/${m}_125m_16k.yaml" --steps 3 \
      --out "$OUT/profile_${m}_16k.json" > "$OUT/profile_${m}_16k.log" 2>&1 || status=1
    grep -A8 "^$here" "$OUT/profile_${m}_16k.log"
  done
else
  timeout 570 python3 benchmarks/train_throughput.py --repeats 2 --out "$OUT/train_throughput_16k.json" \
    "$here/fox_pro_125m_16k.yaml" "$here/transformer_llama_125m_16k.yaml" > "$OUT/train_throughput_16k.log" 2>&1 || status=1
  tail -8 "$OUT/train_throughput_16k.log"
fi
exit $status

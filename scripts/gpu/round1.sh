#!/bin/bash
# One call on the 2-GPU machine (2026-11-30, second session): GPU 0 runs the kernel's GPU tests,
# the per-shape tile search and a profile of one 125M training step of each model; GPU 1 times a
# packed round of four Table 3 trials (eager, then compiled) to size studies/fox_table3.yaml.
# Outputs land in $OUT (at most 8 files come back).
set -u
OUT=${OUT:-/tmp/out}
CAL="--set model.d_model=384 --set model.n_layers=6 --set model.n_heads=6 --set train.batch_size=32
     --set train.tokens=4000000 --seeds 0"
ROWS=("FoX (Pro)" "Transformer (LLaMA)" "FoX (LLaMA)" "FoX (Pro) + RoPE")
(
  export CUDA_VISIBLE_DEVICES=1
  for mode in eager compiled; do
    compile=$([ $mode = compiled ] && echo true || echo false)
    python3 scripts/resize_study.py studies/fox_table3.yaml /tmp/cal_$mode.yaml $CAL \
      --set train.compile=$compile --rows "${ROWS[@]}" --name cal_$mode
    start=$(date +%s)
    timeout 240 python3 -m workbench.cli run /tmp/cal_$mode.yaml --workdir /tmp/cal_$mode
    echo "== $mode: study wall $(( $(date +%s) - start )) s"
    python3 - "$mode" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(f"/tmp/cal_{sys.argv[1]}/trials/*/result.json")):
    r = json.load(open(f))
    att = r["spec"]["model"].get("attention", {})
    kinds = "/".join(str(v.get("kind")) if isinstance(v, dict) else str(v) for v in att.values())
    print(f"  {kinds:<60} tok/s {r['tokens_per_s']:.0f} val_loss {r['val_loss']:.4f} params {r['n_params']}")
PY
  done
) > $OUT/calibrate.log 2>&1 &
cal=$!
export CUDA_VISIBLE_DEVICES=0
timeout 150 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_triton_gpu.py > $OUT/gpu-tests.log 2>&1
tail -3 $OUT/gpu-tests.log
timeout 270 python3 -m kernels.tune --out $OUT/tune.json > $OUT/tune.log 2>&1
grep -E "chosen|compiled" $OUT/tune.log
for m in fox_pro transformer_llama; do
  timeout 100 python3 scripts/profile_step.py studies/throughput/${m}_125m.yaml --out $OUT/prof_$m.json >> $OUT/prof.log 2>&1
done
head -20 $OUT/prof.log; grep -A12 "transformer_llama_125m.yaml: step" $OUT/prof.log
wait $cal
cat $OUT/calibrate.log | grep -E "==|tok/s|rror" | head -20

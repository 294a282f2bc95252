# Shared by the GPU call scripts (source it): one 125M throughput trial, its result and per-step
# metrics copied under $OUT as MODEL_result.json and MODEL_metrics.jsonl.
train() {  # model
  timeout 170 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1 > /tmp/tp_$1.log 2>&1
  cp /tmp/tp_$1/result.json $OUT/$1_result.json || tail -5 /tmp/tp_$1.log
  cp /tmp/tp_$1/metrics.jsonl $OUT/$1_metrics.jsonl 2>/dev/null
}

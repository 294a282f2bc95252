#!/bin/bash
# Session 2026-11-30 (ninth), final code: the two 125M trials twice, alternating (FoX (Pro),
# Transformer (LLaMA), FoX (Pro), Transformer (LLaMA)) on one H200, then the QKV kernel's tests
# on CUDA (its columns copy changed this session).
set -u
OUT=${OUT:-/tmp/out}
train() {  # model, run
  timeout 130 python3 -m workbench.cli train studies/throughput/$1_125m.yaml --out /tmp/tp_$1_$2 > /tmp/tp_$1_$2.log 2>&1
  cp /tmp/tp_$1_$2/result.json $OUT/$1_$2_result.json || tail -5 /tmp/tp_$1_$2.log
}
train fox_pro a
train transformer_llama a
train fox_pro b
train transformer_llama b
grep -H -o '"tokens_per_s": [0-9.]*\|"mfu": [0-9.]*\|"val_loss": [0-9.]*' $OUT/*_result.json
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_qkv_prep.py > $OUT/tests-qkv.log 2>&1
tail -3 $OUT/tests-qkv.log

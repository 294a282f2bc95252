#!/bin/bash
# Session 2026-11-30 (ninth): the QKV kernels per launch order and tile (round43_qkv.py).
set -u
OUT=${OUT:-/tmp/out}
timeout 120 python3 scripts/gpu/round43_qkv.py $OUT/qkv-order.json 2>&1 | grep -v Warn

#!/bin/bash
# The Table 3 study on the 2-GPU machine (docs/reproduction.md). The workdir lives at /tmp/table3
# on both machines, so MLflow's artifact paths stay valid when the store comes back; a store from an
# earlier call (.table3/table3.tgz, carried) is unpacked first and the study resumes by spec hash.
set -u
OUT=${OUT:-/tmp/out}
WD=/tmp/table3
mkdir -p $WD
[ -f .table3/table3.tgz ] && tar -xzf .table3/table3.tgz -C / && echo "resumed store: $(ls $WD)"
[ -z "${SKIP_TESTS:-}" ] && timeout 60 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_triton_gpu.py -k "model or plain" 2>&1 | grep -E "SDPA|passed|failed|Error" | head
start=$(date +%s)
timeout ${STUDY_SECONDS:-520} python3 -m workbench.cli run studies/fox_table3.yaml --workdir $WD > $OUT/study.log 2>&1
echo "study exit $? after $(( $(date +%s) - start )) s"
tar -czf $OUT/table3.tgz --exclude='*.pt' $WD/mlflow.db $WD/mlartifacts
grep -E "finished|failed|FAILED" $OUT/study.log | tail -50 | cut -c1-150
ls -la $OUT

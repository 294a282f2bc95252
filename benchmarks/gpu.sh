#!/usr/bin/env bash
# The GPU suite: the kernels' and the model's GPU tests, then the benchmarks, each writing its JSON
# and log under $OUT (default /tmp/bench-out). One device call holds about 10 minutes, so the suite
# runs in parts; give one or more (default: all):
#
#   bash benchmarks/gpu.sh tests       # the GPU tests, the QKV and loss kernels' on CUDA (~3 min)
#   bash benchmarks/gpu.sh kernels     # attention beside its peers (.peers/), QKV, loss (~5 min)
#   bash benchmarks/gpu.sh gluon       # the Gluon forward beside the Triton one, cuDNN, FA2 (~4 min, sm_90)
#   bash benchmarks/gpu.sh gluon-bwd   # the Gluon dK/dV kernel beside the Triton one, and fwd+bwd (~4 min, sm_90)
#   bash benchmarks/gpu.sh trials      # 125M FoX (Pro) and Transformer (LLaMA), twice   (~6 min)
#   bash benchmarks/gpu.sh trials-16k  # the same pair at context 16384, the paper's (~6 min; experiments/throughput_16k/run.sh)
#   bash benchmarks/gpu.sh packing     # studies/packing.yaml packed 4 to the GPU and 1 to a GPU (~3 min)
#   bash benchmarks/gpu.sh stability   # experiments/stability_gate_bias/stability.yaml (docs/stability.md), ~12 min: for
#       $STABILITY_SECONDS (default 560) at most; its store comes back as $OUT/stability.db and,
#       xz-compressed (about 80 kB a trial against 0.9 MB), as $OUT/stability.db.xz; a store carried
#       in as wb-runs/stability.db or wb-runs/stability.db.xz resumes it (finished trials are kept;
#       next to the 60 MB wheel folder a call carries about 5 MB more, so carry the .xz); the finished
#       trials' result.json files come back in $OUT/stability-results.tgz; STABILITY_STUDY runs another
#       study file; STABILITY_STORE (default wb-runs/stability) names the carried store without its
#       .db/.db.xz and STABILITY_WORKDIR (default /tmp/stability) the workdir, so that one call can
#       run two studies, each in a store of its own (give each its own OUT too). A store too large to
#       carry beside the wheels travels slim: `python scripts/carry_store.py slim S.db
#       wb-runs/NAME.db.xz` keeps each run's latest metric values (what resuming and wb results read;
#       0.3 MB for the 191 125M trials of fox_table3_4096_llama, 15 MB with their series), and after
#       the call `python scripts/carry_store.py merge stability.db S.db` puts the earlier runs' series
#       back into the store that came back (this part restores the indexes slim drops)
#   bash benchmarks/gpu.sh claims      # experiments/claims_nl's studies one after another (CLAIMS: their names,
#       default all), until $CLAIMS_SECONDS (default 560) are spent; each runs in /tmp/claims/NAME
#       (its store, resumed by a later call on the same machine, or on another from a store carried
#       in as wb-runs/claims/NAME.db.xz: `python scripts/carry_store.py slim mlflow.db
#       wb-runs/claims/NAME.db.xz` of the store that came back); the English set `core` is read
#       from wb-corpora/ (carry wb-corpora/core.jsonl.xz); every study's store and trials' results
#       come back in $OUT/claims.tgz, the drivers' logs in $OUT/claims.log
#   bash benchmarks/gpu.sh ray-train   # 125M FoX (Pro): plain, Ray Train 1 worker DDP / FSDP, and
#                                      # N workers where N > 1 GPUs (~4 min on one GPU)
#
# On the GPU machine, first: the workbench's dependencies installed (torch and triton as the machine
# has them; pip install of the rest, or wheels carried in: `python scripts/slim_wheels.py .gpu-wheels
# .gpu-wheels-claims` adds ruamel.yaml, which the shared wheel list lacks); the checkout itself need not be installed
# (scripts/checkout_path.sh, sourced below, makes it importable as foxwb). The peers' code lives in the git-ignored .peers/ (docs/kernels.md).
set -u
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
source scripts/checkout_path.sh
export PYTHONUNBUFFERED=1
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(tests kernels trials)  # ray-train: only when named
status=0
# restore_store STORE WORKDIR: a store carried in as STORE.db or STORE.db.xz becomes WORKDIR's
# mlflow.db unless WORKDIR has one (a later call on the same machine resumes its own), so that the
# study resumes from it (finished trials are kept).
restore_store() {
  mkdir -p "$2"
  [ -f "$1.db" ] && [ ! -f "$2/mlflow.db" ] && cp "$1.db" "$2/mlflow.db"
  [ -f "$1.db.xz" ] && [ ! -f "$2/mlflow.db" ] && python3 -c "import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], 'wb') as dst: shutil.copyfileobj(src, dst)" "$1.db.xz" "$2/mlflow.db"
  # A carried store may have had the metrics table's two secondary indexes dropped to fit the
  # carry limit (see the header); MLflow's queries want them back.
  [ -f "$2/mlflow.db" ] && python3 -c "import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute('CREATE INDEX IF NOT EXISTS index_metrics_run_uuid ON metrics (run_uuid)')
db.execute('CREATE INDEX IF NOT EXISTS index_metrics_run_uuid_key_step ON metrics (run_uuid, \"key\", step)')
db.commit()" "$2/mlflow.db"
  return 0
}
for part in "${parts[@]}"; do
  case $part in
    tests)
      # The GPU-only tests (marked gpu; only their files are collected: the GPU machine has no
      # polars or plotly, which other test files import), and the QKV and loss kernels' tests,
      # which run on CUDA where it is (in CI the same files run under the interpreter).
      timeout 240 python3 -m pytest -q -rf -p no:cacheprovider -m gpu $(grep -rl "mark.gpu" tests --include="test_*.py") \
        > "$OUT/gpu-tests.log" 2>&1 || status=1
      timeout 120 python3 -m pytest -q -rf -p no:cacheprovider tests/kernels/qkv_prep tests/kernels/loss \
        >> "$OUT/gpu-tests.log" 2>&1 || status=1
      grep -E "passed|failed|FAILED" "$OUT/gpu-tests.log" ;;
    kernels)
      timeout 330 python3 benchmarks/attention.py --peers .peers --out "$OUT/attention.json" > "$OUT/attention.log" 2>&1 || status=1
      tail -16 "$OUT/attention.log"
      timeout 120 python3 benchmarks/qkv_prep.py --out "$OUT/qkv_prep.json" > "$OUT/qkv_prep.log" 2>&1 || status=1
      head -4 "$OUT/qkv_prep.log"
      timeout 120 python3 benchmarks/loss.py --out "$OUT/loss.json" > "$OUT/loss.log" 2>&1 || status=1
      head -4 "$OUT/loss.log" ;;
    gluon)
      timeout 400 python3 benchmarks/gluon.py --out "$OUT/gluon.json" > "$OUT/gluon.log" 2>&1 || status=1
      grep -E "^(time|ab|matmul) " "$OUT/gluon.log" | cut -c1-400 ;;
    gluon-bwd)
      timeout 400 python3 benchmarks/gluon.py --parts bwd --out "$OUT/gluon_bwd.json" > "$OUT/gluon_bwd.log" 2>&1 || status=1
      grep -E "^\|" "$OUT/gluon_bwd.log" ;;
    trials)
      timeout 560 python3 benchmarks/train_throughput.py --repeats 2 --out "$OUT/train_throughput.json" \
        > "$OUT/train_throughput.log" 2>&1 || status=1
      tail -8 "$OUT/train_throughput.log" ;;
    trials-16k)
      OUT=$OUT bash experiments/throughput_16k/run.sh || status=1 ;;
    packing)
      timeout 400 python3 benchmarks/study_overhead.py packing studies/packing.yaml --out "$OUT/packing.json" \
        > "$OUT/packing.log" 2>&1 || status=1
      tail -8 "$OUT/packing.log" ;;
    stability)
      wd=${STABILITY_WORKDIR:-/tmp/stability}
      store=${STABILITY_STORE:-wb-runs/stability}
      restore_store "$store" "$wd"
      timeout -k 30 -s INT "${STABILITY_SECONDS:-560}" python3 -m foxwb.workbench.cli.main run "${STABILITY_STUDY:-studies/stability.yaml}" \
        --workdir "$wd" > "$OUT/stability.log" 2>&1 || status=1
      cp "$wd/mlflow.db" "$OUT/stability.db"
      python3 -c "import lzma, shutil, sys
with open(sys.argv[1], 'rb') as src, lzma.open(sys.argv[2], 'wb', preset=6) as dst: shutil.copyfileobj(src, dst)" "$wd/mlflow.db" "$OUT/stability.db.xz"
      # Each finished trial's result.json (spec, final metrics, spike figures, the parts' gradient
      # norms where recorded), in one archive: the store may be too large to come back from the GPU
      # machine, and a call brings back a few files only.
      (cd "$wd" && ls trials/*/result.json >/dev/null 2>&1 && tar czf "$OUT/stability-results.tgz" trials/*/result.json)
      tail -4 "$OUT/stability.log" ;;
    claims)
      end=$(( $(date +%s) + ${CLAIMS_SECONDS:-560} ))
      for name in ${CLAIMS:-claims_table3 claims_pro_parts claims_gate_kinds claims_context claims_acp}; do
        left=$(( end - $(date +%s) ))
        [ "$left" -lt 30 ] && { echo "claims: no time left for $name" | tee -a "$OUT/claims.log"; status=1; break; }
        restore_store "wb-runs/claims/$name" "/tmp/claims/$name"
        echo "== $name ($left s left) $(date -u +%H:%M:%S)" >> "$OUT/claims.log"
        began=$(date +%s)
        timeout -k 30 -s INT "$left" python3 -m foxwb.workbench.cli.main run "experiments/claims_nl/$name.yaml" \
          --workdir "/tmp/claims/$name" >> "$OUT/claims.log" 2>&1
        rc=$?; [ $rc -ne 0 ] && status=1
        # The study's cost: the wall time of its wb run, which holds the whole GPU.
        echo "== $name ended rc $rc $(date -u +%H:%M:%S): $(( $(date +%s) - began )) s of wb run on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" >> "$OUT/claims.log"
      done
      (cd /tmp/claims && tar czf "$OUT/claims.tgz" */mlflow.db */trials/*/result.json 2>/dev/null)
      grep -E "^== |verdict|claim" "$OUT/claims.log" | tail -30 ;;
    ray-train)
      # Ray's own temp dir; 100 steps a run (the first 10 untimed): compilation dominates each run.
      RAY_TMPDIR=/tmp/wb-ray timeout 560 python3 benchmarks/train_throughput.py --launch --steps 100 \
        --timeout 240 --out "$OUT/train_launch.json" > "$OUT/train_launch.log" 2>&1 || status=1
      tail -8 "$OUT/train_launch.log" ;;
    *)
      echo "unknown part '$part'; the parts are: tests kernels gluon gluon-bwd trials trials-16k packing stability claims ray-train" >&2
      exit 2 ;;
  esac
done
exit $status

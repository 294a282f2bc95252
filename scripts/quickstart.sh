#!/usr/bin/env bash
# Sets up the environment (scripts/setup.sh) and runs the main job: the quickstart study end to end
# (local Ray, MLflow on SQLite in ./wb-runs, CPU when there is no GPU), its results table, and the
# dashboard site (open wb-runs/dashboard/index.html, or `wb dashboard --serve`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
wb run studies/quickstart.yaml --workdir wb-runs
wb results studies/quickstart.yaml --workdir wb-runs
wb dashboard --workdir wb-runs

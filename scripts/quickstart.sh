#!/usr/bin/env bash
# Sets up the environment (scripts/setup.sh) and runs the main job.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
wb info fox_pro

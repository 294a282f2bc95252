#!/usr/bin/env bash
# Sets up the environment (scripts/setup.sh) and runs the test suite; extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
exec python -m pytest "$@"

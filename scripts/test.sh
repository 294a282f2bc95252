#!/usr/bin/env bash
# Sets up the environment (scripts/setup.sh) and runs the test suite; extra arguments go to pytest.
# Two pytest-xdist workers by default (WB_TEST_WORKERS=N for another count, 0 for none; a -n among
# the arguments wins): most of the suite's time is waiting on Ray, MLflow and subprocesses to start,
# so two workers finish it well before one (docs/performance.md, "The test suite", has the measured
# times). Every test that starts Ray gives it its own temp dir and ports, so the workers never meet.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The tests cover wb eval and wb export, whose libraries (lm-eval, transformers) are an optional extra.
WB_EXTRAS="${WB_EXTRAS:-dev,eval}" source "$root/scripts/setup.sh"
cd "$root"
# Our sources compiled once, here: where PYTHONDONTWRITEBYTECODE is set (as on the CI machine) no
# process writes them, and each of the suite's hundreds (Ray's workers, `wb` subprocesses) compiled
# them again (about 0.4 s of CPU a `wb` process).
python -m compileall -q components kernels workbench dashboards tests benchmarks scripts >/dev/null
exec python -m pytest -n "${WB_TEST_WORKERS:-2}" --dist worksteal "$@"

#!/usr/bin/env bash
# Sets up a Python environment with the workbench (editable) and its test tools. Source it to
# keep the environment active: uses the active virtual environment, else creates ./.venv.
# Without a GPU it installs the CPU build of torch first, never the multi-GB CUDA one.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -x "$root/.venv/bin/python" ] || python3 -m venv "$root/.venv"
  # shellcheck disable=SC1091
  source "$root/.venv/bin/activate"
fi
python -m pip install -q --upgrade pip
if ! python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    python -m pip install -q torch
  else
    python -m pip install -q torch==2.13.0
  fi
fi
# setuptools warns at every editable install of a package whose folders are mapped (package-dir)
# that a folder of the package's name in the working directory may shadow it; ours installs as
# foxwb, and no folder of that name exists here, so the box says nothing: silenced, the rest kept.
# WB_EXTRAS: the optional groups to install (pyproject.toml); scripts/test.sh adds eval.
PYTHONWARNINGS="ignore:Editable installation" python -m pip install -q -e "$root[${WB_EXTRAS:-dev}]"

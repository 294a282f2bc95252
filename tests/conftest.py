import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

# The Triton interpreter must be chosen before triton decorates the kernels: on a machine without
# CUDA every kernel test runs on the CPU under it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative L2 error ||a - b|| / ||b|| in fp64."""
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory):
    """The README's main job, run once: `wb run studies/quickstart.yaml` into a fresh workdir.
    Returns (workdir, completed process, seconds)."""
    workdir = tmp_path_factory.mktemp("quickstart")
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "run", str(ROOT / "studies/quickstart.yaml"),
                           "--workdir", str(workdir)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    return workdir, proc, time.time() - start


@pytest.fixture(scope="session")
def random_search_confirmed(tmp_path_factory):
    """A tiny tune-then-confirm study with a random search and ASHA, run once for the tests of its
    store (tests/workbench/test_confirm.py) and of its dashboard page
    (tests/dashboards/test_confirm_site.py). Returns (workdir, completed process, seconds)."""
    from tests.workbench.test_confirm import run_random_asha

    return run_random_asha(tmp_path_factory.mktemp("random_asha"))

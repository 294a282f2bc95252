"""A Ray of the workbench's own keeps Ray's token authentication without Ray's notice of it."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import os, ray
from foxwb.workbench.run import local_ray
local_ray.start(log_to_driver=False)
print("auth mode", os.environ.get("RAY_AUTH_MODE"))
ray.shutdown()
"""


def test_a_local_ray_starts_with_token_authentication_and_without_the_notice():
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "auth mode token" in out.stdout
    assert "Token authentication" not in out.stderr, out.stderr[-3000:]


WORKER_LINE = """
import ray
from foxwb.workbench.run import local_ray
local_ray.start(log_to_driver=True)

@ray.remote
def speak():
    print("a line from a worker", flush=True)

ray.get(speak.remote())
import time; time.sleep(2)  # the line reaches the driver
ray.shutdown()
"""


def test_workers_lines_come_without_colour_codes_off_a_terminal():
    """Piped (a log file, CI), a worker's forwarded line keeps its "(speak pid=...)" prefix but not
    the colour codes around it."""
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS", "RAY_COLOR_PREFIX")}
    out = subprocess.run([sys.executable, "-c", WORKER_LINE], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    both = out.stdout + out.stderr
    assert "a line from a worker" in both and "(speak pid=" in both, both[-3000:]
    assert "\x1b[" not in both

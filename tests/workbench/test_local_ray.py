"""A Ray of the workbench's own keeps Ray's token authentication without Ray's notice of it."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, ray
from workbench import local_ray
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

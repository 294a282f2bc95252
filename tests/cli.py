"""`wb ...` as the tests call it: one helper for every test module.

Most of the suite's time went to starting processes: a Python that imports torch, MLflow and Ray
for each `wb results`, and a Ray of its own for each `wb run`. So:

- the commands that only read (`results`, `status`, `info`, `dashboard` without `--serve`,
  `run --dry-run`, `--version`) run in this process through the CLI's own ``main``, its output and
  exit status taken as a process's would be;
- `wb run` runs on a Ray cluster this pytest worker starts once (``shared_ray``), one trial at
  a time unless the test gives --max-concurrent, its driver in this process too (about 8 s of a
  Python's start and imports saved per run, and as much CPU): what it tests is the study's run,
  not Ray's or Python's start-up, which the tests of a local Ray (no ``--ray-address``) and of
  signals keep testing in processes of their own. After each run this process leaves the cluster
  (``_leave_ray``), so that a test may start a Ray here.

A test that sets ``env`` (a plug-in on PYTHONPATH, a fault to inject, a Ray address of its own)
or passes subprocess options gets a process of its own (``set_env`` instead: variables the command
reads as it runs, set around it in this process), and with ``env`` a Ray of its own, as does
``own_ray=True``: the shared cluster's workers were started with this process's environment, not
the test's, and a test of what a local run does (its Ray's start, its processes' end, its logs)
must run one.

``script`` does the same for `python scripts/NAME`: the script's ``main`` in this process.
"""
from __future__ import annotations

import atexit
import faulthandler
import fcntl
import importlib.util
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import chdir, redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
READERS = {"results", "status", "info", "dashboard", "--version"}


def wb(*args, timeout: float = 600, env: dict | None = None, cwd: Path = ROOT, own_ray: bool = False,
       in_process: bool | None = None, set_env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """What `wb ARGS` does in ``cwd``, as a completed process (args, returncode, stdout, stderr).
    ``set_env``: variables set for a command run in this process and put back after it (a variable
    the command reads when it runs, such as WB_EVAL_CACHE: `wb eval` in this process imports
    lm-eval and transformers once for the worker, not once a command). Whatever the command sets
    itself (`wb eval`: HF_HUB_OFFLINE, HF_DATASETS_OFFLINE) is put back too."""
    if set_env is not None:
        saved = dict(os.environ)
        os.environ.update({k: str(v) for k, v in set_env.items()})
        try:
            return wb(*args, timeout=timeout, env=env, cwd=cwd, own_ray=own_ray, in_process=True, **kw)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    args = [str(a) for a in args]
    shared = (bool(args) and args[0] == "run" and env is None and not own_ray and "--ray-address" not in args
              and "--dry-run" not in args)
    if shared:
        args += ["--ray-address", shared_ray()]
        if "--max-concurrent" not in args:
            # One trial at a time: two at once on the 2-core machine is a second Tune actor, whose
            # start imports torch and Ray Tune (about 5 s of CPU) in a suite bound by the CPU
            # (docs/performance.md, "The test suite"). A test of concurrent trials passes its own
            # --max-concurrent; the local runs (a Ray of their own) keep the default.
            args += ["--max-concurrent", "1"]
    if in_process is None:
        in_process = env is None and not kw and (shared or _reads_only(args))
    if in_process:
        return _here(args, cwd, timeout)
    return subprocess.run([sys.executable, "-m", "foxwb.workbench.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=env, **kw)


def _reads_only(args: list[str]) -> bool:
    if not args:
        return False
    if args[0] == "run":
        return "--dry-run" in args
    if args[0] == "dashboard":
        return "--serve" not in args
    return args[0] in READERS


def script(name: str, *args, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """What `python scripts/NAME ARGS` does from the checkout's root, as a completed process: in
    this process through the script's own ``main`` (the imports a Python of its own would make,
    seconds each time, are made here once). ``env``: variables set for the call (BROWSER_PATH for
    kaleido), put back after it."""
    path = ROOT / "scripts" / name
    module = _scripts.get(path)
    if module is None:
        spec = importlib.util.spec_from_file_location(f"_wb_script_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _scripts[path] = module
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        return _here([str(a) for a in args], ROOT, timeout, module.main, ["python", f"scripts/{name}"])
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.update({k: v})


_scripts: dict = {}


def _here(args: list[str], cwd: Path, timeout: float, main=None, command=("wb",)) -> subprocess.CompletedProcess:
    """``main(args)`` (the CLI's, or a script's: ``command`` names it) in this process and
    in ``cwd``, stdout and stderr captured, an exit by SystemExit (argparse) or an exception turned
    into the exit status a process would have had (1, with the traceback). A command still running
    after ``timeout`` seconds ends this pytest worker with every thread's stack on stderr
    (faulthandler): a hang fails its test, as a process's would."""
    if main is None:
        from foxwb.workbench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)
    with chdir(cwd), redirect_stdout(out), redirect_stderr(err):
        try:
            rc = main(args) or 0
        except SystemExit as e:  # as Python ends a process: an exit status, or a message on stderr and 1
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except Exception:
            traceback.print_exc()
            rc = 1
        finally:
            faulthandler.cancel_dump_traceback_later()
            if command == ("wb",) and args[0] == "run":
                _leave_ray()
    return subprocess.CompletedProcess([*command, *args], rc, out.getvalue(), err.getvalue())


def _leave_ray() -> None:
    """After a `wb run` in this process: off the shared cluster (the driver stays connected to a
    cluster it joined), so that a test that starts a Ray of its own in this process can."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_ray_token() -> None:
    """The token `ray start` authenticates with, made once. Where ~/.ray/auth_token is missing,
    each `ray start` writes a new one: on a fresh machine the two pytest workers' clusters started
    at once, each wrote its own, and the drivers and workers of one cluster sent the other's
    (21 end-to-end tests failed, every one through a shared cluster). Made here under a lock,
    before any head starts."""
    token = Path.home() / ".ray" / "auth_token"
    token.parent.mkdir(parents=True, exist_ok=True)
    with open(token.parent / "auth_token.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not token.exists():
            subprocess.run([str(BIN / "ray"), "get-auth-token", "--generate"], check=True, capture_output=True,
                           timeout=120)


def start_ray_head(port: int, temp_dir: str, cpus: int = 2) -> subprocess.Popen:
    """A Ray head of the test's own (`ray start --block`, its own temp dir and session), stopped by
    killing that process group (stop_ray_head): never `ray stop`, which stops every Ray cluster on
    the machine."""
    ensure_ray_token()
    head = subprocess.Popen([str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                             "--port", str(port), "--temp-dir", temp_dir, "--num-cpus", str(cpus),
                             "--include-dashboard=false", "--disable-usage-stats"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and head.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return head
        time.sleep(0.5)
    stop_ray_head(head)
    raise RuntimeError(f"ray start did not come up: {head.stderr.read()[-2000:] if head.stderr else ''}")


def stop_ray_head(head: subprocess.Popen) -> None:
    """Stops a `ray start --block` node (start_ray_head's, or a node that joined one): SIGTERM to
    that process alone, which stops its Ray in order; then whatever of its process
    group is left is killed. (SIGTERM to the whole group reached the raylet and the GCS at once, and
    the raylet then waited on the GCS gone beside it.)"""
    if head.poll() is None:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(head.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group ended with it
        pass
    head.wait(timeout=30)


def start_mlflow_server(backend_uri: str, port: int) -> subprocess.Popen:
    """`mlflow server` on ``backend_uri`` at 127.0.0.1:``port``, one worker, its own process group
    (kill_session stops it). Without MLflow 3's job execution (MLFLOW_SERVER_ENABLE_JOB_EXECUTION):
    its huey consumers, which no test of ours uses, took 34 s of CPU over a suite run."""
    return subprocess.Popen([str(BIN / "mlflow"), "server", "--backend-store-uri", backend_uri, "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})


_shared: dict = {}


def shared_ray() -> str:
    """The address of this pytest worker's Ray cluster, started at the first call (as many CPUs as
    this machine has, as a local Ray would) and stopped at the session's end
    (stop_shared_ray)."""
    if "address" not in _shared:
        port = free_port()
        # Ray's socket paths must stay short (108 bytes): a temp dir under /tmp, not pytest's.
        temp_dir = tempfile.mkdtemp(prefix="wbray-", dir="/tmp")
        head = start_ray_head(port, temp_dir, cpus=len(os.sched_getaffinity(0)))

        _shared.update(address=f"127.0.0.1:{port}", head=head, temp_dir=temp_dir)
        atexit.register(stop_shared_ray)
    return _shared["address"]


def shared_ray_head() -> subprocess.Popen:
    """The `ray start --block` process of this pytest worker's cluster (shared_ray starts it)."""
    shared_ray()
    return _shared["head"]


def stop_shared_ray() -> None:
    """Stops this worker's shared cluster if it started one (tests/conftest.py: at the session's end)."""
    if "head" in _shared:
        stop_ray_head(_shared.pop("head"))
        shutil.rmtree(_shared.pop("temp_dir"), ignore_errors=True)
        _shared.clear()

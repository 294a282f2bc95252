"""Helpers for the tests that start `wb run` in the background and act on it while it runs."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]


class Background:
    """`wb run ...` in a session of its own, its output in files; stopped by its own handle."""

    def __init__(self, tmp_path: Path, *args, name: str = "driver", preexec_fn=None):
        self.out, self.err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "foxwb.workbench.cli.main", *map(str, args)], cwd=ROOT,
                                         stdout=out, stderr=err, start_new_session=True, preexec_fn=preexec_fn)

    @property
    def stdout(self) -> str:
        return self.out.read_text()

    @property
    def stderr(self) -> str:
        return self.err.read_text()

    def wait_for(self, condition, timeout: float = 180, what: str = "the condition") -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if condition():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"the driver ended (rc {self.proc.returncode}) before {what}: {self.stderr[-3000:]}")
            time.sleep(0.2)
        raise AssertionError(f"no {what} within {timeout} s: {self.stderr[-3000:]}")

    def signal_group(self, signum) -> None:
        """What Ctrl-C in a terminal does: the signal to the driver's whole process group."""
        os.killpg(self.proc.pid, signum)

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the driver did not end within {timeout} s: {self.stderr[-3000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            kill_session(self.proc)


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL to every process of the session ``proc`` started (``start_new_session``): the driver,
    its Ray and Ray's workers, which run in process groups of their own (a ``killpg`` of the
    driver's group leaves them training, and writing to the trial's folder, for a second or two).
    Returns once none is left."""
    def members() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.getsid(int(entry)) == proc.pid:
                        found.append(int(entry))
                except OSError:  # gone meanwhile
                    pass
        return found

    deadline = time.time() + 30
    while (left := members()) and time.time() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.poll()  # reaps the driver, whose zombie would stay in the session
        time.sleep(0.05)
    proc.wait(timeout=30)


def store(workdir: Path, experiment: str):
    """(client, experiment id) of the workdir's store, or (None, None) before the study made it."""
    if not (workdir / "mlflow.db").exists():
        return None, None
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    try:
        exp = client.get_experiment_by_name(experiment)
    except Exception:  # the store is still being made
        return None, None
    return (client, exp.experiment_id) if exp is not None else (None, None)


def runs(workdir: Path, experiment: str, kind: str = "trial") -> list:
    client, exp = store(workdir, experiment)
    if client is None:
        return []
    try:
        return client.search_runs([exp], f"tags.wb_kind = '{kind}'")
    except Exception:
        return []


def checkpoints(workdir: Path) -> list[Path]:
    return sorted((workdir / "trials").glob("*/checkpoint.pt"))

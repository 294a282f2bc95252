"""Where a command's CPU goes, by kind of process: the test suite's, above all.

    python benchmarks/suite_cpu.py [--interval 0.5] [--out FILE] -- COMMAND ...
    python benchmarks/suite_cpu.py -- bash scripts/test.sh -q      # the suite (docs/performance.md)

Runs COMMAND and, until it ends, reads every process of the machine from /proc each ``--interval``
seconds: the CPU time (user + system) each one used while the command ran, summed by kind of
process, named from its command line (a Ray worker by its task, ``ray::ImplicitFunc`` for a Tune
trial, once it has one, its time before counted with it; ``wb`` for a `wb` subprocess; the
pytest-xdist workers; Ray's daemons; ...), and how many processes of each kind started. The
machine's whole CPU time over the same span (/proc/stat) is given beside it, so that what the
samples missed shows: a process that starts and ends between two samples, and a process's last
interval. Processes that ran before the command count from the first sample. Linux only.

Prints a table and writes JSON (default benchmarks/results/<date>_<machine>_suite_cpu.json).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import common

# (a piece of the command line, the kind's name), the first that matches naming the process.
KINDS = (
    ("exec(eval(sys.stdin", "pytest-xdist worker"),
    ("default_worker.py", "Ray worker, before its task"),
    ("raylet", "Ray: raylet"), ("gcs_server", "Ray: GCS"), ("dashboard/agent", "Ray: dashboard agent"),
    ("runtime_env/agent", "Ray: runtime-env agent"), ("log_monitor", "Ray: log monitor"),
    ("autoscaler/_private/monitor.py", "Ray: monitor"), ("ray start", "ray start / status"),
    ("bin/ray ", "ray start / status"),
    ("foxwb.workbench.cli.main", "wb (a process of its own)"), ("/bin/wb ", "wb (a process of its own)"),
    ("huey_consumer", "MLflow server: job runner"), ("_job_runner", "MLflow server: job runner"),
    ("mlflow server", "MLflow server"), ("uvicorn", "MLflow server"), ("gunicorn", "MLflow server"),
    ("chrom", "Chromium"), ("pdflatex", "pdflatex"), ("benchmarks/", "a benchmark's process"),
    ("scripts/", "a script's process"), ("-m pytest", "pytest (main)"), ("bin/pytest", "pytest (main)"),
    ("-m pip", "pip"), ("bin/pip", "pip"),
)

# What a Ray worker's process is called until it takes its task (ray::ImplicitFunc.train for a Tune
# trial, ray::RayTrainWorker for a Ray Train worker, ...); its CPU moves to the task's name then.
BEFORE_TASK = ("Ray worker, before its task", "ray::IDLE")


def kind_of(pid: int) -> str | None:
    """The kind of a process by its command line (a Ray worker names its task there: ray::...)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    if cmd.startswith("ray::"):
        return cmd.split()[0].split("(")[0]
    for piece, name in KINDS:
        if piece in cmd:
            return name
    if not cmd:
        return "kernel threads"
    return "other python" if "python" in cmd.split()[0] else f"other: {comm}"


def cpu_ticks(pid: int) -> tuple[int, int] | None:
    """(start time, user + system ticks) of a process, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[19]), int(fields[11]) + int(fields[12])


def machine_ticks() -> int:
    """The machine's busy ticks so far (user, nice, system, irq, softirq)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6]


def measure(command: list[str], interval: float) -> dict:
    hz = os.sysconf("SC_CLK_TCK")
    seen: dict[tuple[int, int], tuple[int, str]] = {}  # (pid, start) -> (ticks at the last sample, kind)
    used: Counter = Counter()
    started: Counter = Counter()
    first = True

    def sample() -> None:
        nonlocal first
        alive = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            got = cpu_ticks(int(entry))
            if got is None:
                continue
            key = (int(entry), got[0])
            alive.add(key)
            before = seen.get(key)
            if before is None:
                kind = kind_of(key[0])
                if kind is None:
                    continue
                # A process seen for the first time: its whole CPU time is this command's, unless it
                # ran before the command started (the first sample).
                used[kind] += 0 if first else got[1]
                started[kind] += 0 if first else 1
                seen[key] = (got[1], kind)
                continue
            ticks, kind = before
            if kind in BEFORE_TASK:  # a Ray worker renames itself for its task: counted under its task's name
                now = kind_of(key[0])
                if now and now not in BEFORE_TASK:
                    used[kind] -= ticks
                    started[kind] -= 1
                    used[now] += ticks
                    started[now] += 1
                    kind = now
            used[kind] += got[1] - ticks
            seen[key] = (got[1], kind)
        for key in set(seen) - alive:
            del seen[key]
        first = False

    sample()
    busy0, wall0 = machine_ticks(), time.perf_counter()
    proc = subprocess.Popen(command)
    try:
        while proc.poll() is None:
            time.sleep(interval)
            sample()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        raise
    sample()
    wall = time.perf_counter() - wall0
    busy = (machine_ticks() - busy0) / hz
    by_kind = {k: round(v / hz, 1) for k, v in used.most_common() if v > 0}
    return {"command": command, "exit_status": proc.returncode, "wall_s": round(wall, 1),
            "cores": os.cpu_count(), "machine_cpu_s": round(busy, 1), "sampled_cpu_s": round(sum(by_kind.values()), 1),
            "interval_s": interval, "cpu_s": by_kind, "processes_started": {k: started[k] for k in by_kind}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between two readings of /proc")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<machine>_suite_cpu.json)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("the command to measure is missing: ... -- COMMAND ARGS")
    if not Path("/proc/stat").exists():
        ap.error("this needs Linux's /proc")
    res = measure(command, args.interval)
    print(f"\n{'kind of process':<40} {'CPU s':>8} {'share':>6} {'started':>8}")
    for kind, cpu in res["cpu_s"].items():
        print(f"{kind:<40} {cpu:>8.1f} {cpu / max(res['sampled_cpu_s'], 1e-9):>6.1%} {res['processes_started'][kind]:>8}")
    print(f"sampled {res['sampled_cpu_s']:.0f} CPU-s of the machine's {res['machine_cpu_s']:.0f} in {res['wall_s']:.0f} s "
          f"on {res['cores']} cores; the command's exit status {res['exit_status']}")
    common.write(args.out, "suite_cpu", res, argv)
    return res["exit_status"]


if __name__ == "__main__":
    sys.exit(main())

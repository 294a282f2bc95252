"""One driver per study: a lease kept as a tag on the study's parent run in the tracking store.

The tag ``wb_lease`` holds JSON ``{host, pid, space, token, heartbeat}`` (heartbeat: seconds
since the epoch; space: where the pid is meaningful, ``process_space``). Every driver that writes a study's trials sees it, whether the store is the workdir's SQLite
file or an MLflow server shared by several machines. A driver claims the lease by writing its own
token, waiting ``SETTLE_S`` and reading it back: of two drivers that claim at once, the one whose
write came last keeps it and the other withdraws. The holder rewrites the heartbeat every
``HEARTBEAT_S`` on a thread; a lease whose heartbeat is older than ``STALE_S`` is stale and may be
taken over (``wb run --take-over``). A lease of this machine whose process is gone is taken without
asking: that driver cannot come back. The heartbeat thread that finds another token in the tag
(taken over while this driver stood still) calls ``on_lost``, and the driver stops writing.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

from foxwb.workbench.spec.errors import SpecError

TAG = "wb_lease"
HEARTBEAT_S = 5.0
STALE_S = 30.0
SETTLE_S = 1.0


class LeaseHeld(SpecError):
    """Another driver holds the study; the message names it and how to take over."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_space() -> str:
    """Where a pid means one process: this kernel's boot and this pid namespace (two containers
    of one host may share a host name, never both of these)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def read(client, run_id: str) -> dict | None:
    """The lease on ``run_id``, or None where there is none (or it was released)."""
    text = client.get_run(run_id).data.tags.get(TAG, "")
    try:
        lease = json.loads(text) if text else None
    except ValueError:
        return None
    return lease if isinstance(lease, dict) and lease.get("token") else None


def describe(lease: dict, now: float | None = None) -> str:
    age = (now or time.time()) - float(lease.get("heartbeat", 0))
    return f"host {lease.get('host')!r}, pid {lease.get('pid')} (last heartbeat {age:.0f} s ago)"


def _gone_here(lease: dict) -> bool:
    """The lease's driver ran on this machine (host and process space) and its process is gone."""
    space = process_space()
    here = lease.get("host") == socket.gethostname() and space and lease.get("space") == space
    return bool(here and not _alive(int(lease.get("pid", 0))))


def no_driver(lease: dict | None, now: float | None = None) -> str | None:
    """Why no driver is running the study (None: its lease's holder looks alive): no lease (the
    last driver gave it up), a driver of this machine whose process is gone, or a heartbeat older
    than STALE_S (a driver killed, or a machine lost, elsewhere)."""
    if lease is None:
        return "no driver holds the study"
    if _gone_here(lease):
        return f"its driver's process is gone ({describe(lease, now)})"
    if (now or time.time()) - float(lease.get("heartbeat", 0)) >= STALE_S:
        return f"its driver sends no heartbeats ({describe(lease, now)})"
    return None


class Lease:
    def __init__(self, client, run_id: str, study: str, lock=None):
        """``lock``: held around each heartbeat, shared with the process's other writers of the
        store (two writers of one SQLite file at once may meet 'database is locked')."""
        self.client, self.run_id, self.study = client, run_id, study
        self.lock = lock or threading.RLock()
        self.token = uuid.uuid4().hex
        self.host, self.pid, self.space = socket.gethostname(), os.getpid(), process_space()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = False

    def _write(self) -> None:
        self.client.set_tag(self.run_id, TAG, json.dumps(
            {"host": self.host, "pid": self.pid, "space": self.space, "token": self.token, "heartbeat": time.time()}))

    def claim(self, take_over: bool = False, on_lost=None) -> "Lease":
        """Hold the study, or raise LeaseHeld naming the driver that does."""
        held = read(self.client, self.run_id)
        if held is not None:
            age = time.time() - float(held.get("heartbeat", 0))
            gone = _gone_here(held)
            if not gone and age < STALE_S:
                if take_over:
                    raise LeaseHeld(f"study {self.study!r} is being run by another driver: {describe(held)}; --take-over "
                                    f"refused: its heartbeat is {age:.0f} s old, under {STALE_S:.0f} s, so that driver "
                                    "is alive; wait for it to end, or stop it")
                raise LeaseHeld(f"study {self.study!r} is being run by another driver: {describe(held)}; "
                                f"wait for it to end, or stop it; once its heartbeat is {STALE_S:.0f} s old, "
                                "`wb run ... --take-over` takes the study over")
            if not gone and not take_over:
                raise LeaseHeld(f"study {self.study!r} is held by a driver that stopped sending heartbeats: "
                                f"{describe(held)}; if it is gone, `wb run ... --take-over` takes the study over")
        try:
            self._write()
        except Exception:  # the store refused a write racing another driver's: the read-back decides
            pass
        time.sleep(SETTLE_S)  # a driver that claimed at the same moment has written by now
        now = read(self.client, self.run_id)
        if now is None or now["token"] != self.token:
            raise LeaseHeld(f"study {self.study!r} was claimed at the same moment by another driver: "
                            f"{describe(now) if now else 'unknown'}; this one withdraws")
        self._thread = threading.Thread(target=self._beat, args=(on_lost,), name="wb-lease", daemon=True)
        self._thread.start()
        return self

    def _beat(self, on_lost) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            if not self.lock.acquire(timeout=1):  # a long write under way: the next beat
                continue
            try:
                now = read(self.client, self.run_id)
                if now is not None and now["token"] != self.token:
                    self.lost = True
                    if on_lost is not None:
                        on_lost(f"another driver took the study over ({describe(now)})")
                    return
                self._write()
            except Exception:  # a store that does not answer this once; the next beat tries again
                continue
            finally:
                self.lock.release()

    def release(self) -> None:
        """Give the study up (at the end, after a failure or an interruption); idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=3)
            self._thread = None
        if self.lost:
            return
        try:
            now = read(self.client, self.run_id)
            if now is not None and now["token"] == self.token:
                self.client.set_tag(self.run_id, TAG, "")
        except Exception:  # the store is gone: the lease goes stale and the next driver takes it
            pass

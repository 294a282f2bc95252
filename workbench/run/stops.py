"""Why a study stops before its end, and the watchers that stop it.

``Stops`` holds the first reason given (an interruption, Ray lost, the tracking store failing, the
lease taken over) and is Tune's stopper: Tune asks it between events (every 0.1 s) and stops every
trial once it holds a reason. SIGINT (Ctrl-C), SIGTERM and SIGHUP (its terminal closed; not under
``nohup``) to the driver give the reason ``interrupted``; a line its reader no longer takes, the
reason ``output`` (exit 141). A second Ctrl-C raises KeyboardInterrupt as Python would.
``watch_gcs`` notices a Ray cluster that went away, where Tune itself would wait on it for a
minute or more.
"""
from __future__ import annotations

import signal
import socket
import threading
import time

from foxwb.workbench.run import live_view as progress
from foxwb.workbench.train.faults import silence_output

INTERRUPTED = "interrupted"  # the reason of every trial run a Ctrl-C, SIGTERM or SIGHUP stopped
OUTPUT_CLOSED = "the driver's output was closed (a reader such as `| head` stopped reading)"
EXIT_OUTPUT_CLOSED = 141  # as a shell reports a process ended by SIGPIPE


class Stops:
    def __init__(self):
        self.kind: str | None = None  # "interrupted", "ray", "store", "lease", "output"
        self.reason = ""
        self._previous: dict = {}

    def request(self, kind: str, reason: str) -> None:
        if self.kind is None:  # the first reason is the one reported
            self.kind, self.reason = kind, reason

    def __bool__(self) -> bool:
        return self.kind is not None

    def output_closed(self) -> None:
        """A line could not be written: stop the study (its runs KILLED with the reason, exit 141)
        with nothing more written to a reader that is gone."""
        silence_output()
        self.request("output", OUTPUT_CLOSED)

    def _on_signal(self, signum, frame) -> None:
        if self.kind == "interrupted" and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if signum == signal.SIGHUP:  # the terminal closed: nobody reads what follows
            silence_output()
        progress.say(f"{signal.Signals(signum).name}: stopping the running trials (the last lines say whether they resume)")
        self.request("interrupted", f"{INTERRUPTED} ({signal.Signals(signum).name} to the driver)")

    def install(self) -> "Stops":
        """Catch SIGINT and SIGTERM (main thread only); ``uninstall`` gives back the handlers the
        first call found. Call it again after ``ray.init``, which sets a SIGTERM handler of its own
        (``sys.exit``), its core worker a C++ one over that: SIGTERM then ended the driver with
        SIGABRT (exit -6), the stops never asked."""
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN and signum not in self._previous:
                    continue  # `nohup wb run ...`: the study outlives its terminal, as asked
                self._previous.setdefault(signum, signal.signal(signum, self._on_signal))
        return self

    def uninstall(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        _ACTIVE.pop(id(self), None)

    def stopper(self):
        """A Tune stopper that stops the whole experiment once a reason is given. Tune pickles its
        run settings (into its experiment state): the stopper carries only this object's key and
        finds the object through the module when asked, so nothing of the driver's is pickled (the
        signal handlers it holds may close over actors of a Ray session that has ended, which Ray
        cannot serialise: it ends the process)."""
        # Ray Tune takes seconds to import, and `wb run --dry-run` imports this module (through the
        # driver and the summary): only when a study runs.
        from ray import tune

        _ACTIVE[id(self)] = self
        key = id(self)

        class StopAll(tune.Stopper):
            def __call__(self, trial_id, result):
                return False

            def stop_all(self):
                # Found through the module when asked, not carried: Tune pickles this class by value
                # (it is local), and only the key may travel with it (see the docstring).
                from foxwb.workbench.run.stops import stopped

                return stopped(key)

        return StopAll()


_ACTIVE: dict[int, Stops] = {}  # the drivers' Stops by id, while their study runs


def stopped(key: int) -> bool:
    """Whether the Stops of ``key`` (``id`` of a driver's Stops) holds a reason."""
    return bool(_ACTIVE.get(key))


def gcs_address() -> str | None:
    """host:port of the connected Ray cluster's GCS, or None."""
    import ray  # Ray is slow to import and the dry run imports this module: only once a study runs

    try:
        return ray.get_runtime_context().gcs_address
    except Exception:
        return None


def _answers(address: str, timeout: float) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def watch_gcs(address: str, on_lost, period_s: float = 1.0, misses: int = 5) -> threading.Event:
    """Call ``on_lost(reason)`` from a thread once the GCS at ``address`` refuses ``misses``
    connections in a row (about ``misses * period_s`` seconds); set the returned event to stop."""
    done = threading.Event()

    def watch():
        failed = 0
        while not done.wait(period_s):
            failed = 0 if _answers(address, 2 * period_s) else failed + 1  # a loaded machine answers late
            if failed >= misses:
                on_lost(f"the Ray cluster stopped answering (its GCS at {address} is gone; "
                        f"noticed {time.strftime('%H:%M:%S')})")
                return

    threading.Thread(target=watch, name="wb-gcs-watch", daemon=True).start()
    return done
